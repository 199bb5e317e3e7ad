//! The ContactNets window (issue 7): placeholder until the plugin lands.

use bevy::prelude::*;

pub struct ReplayPlugin;

impl Plugin for ReplayPlugin {
    fn build(&self, _app: &mut App) {}
}
