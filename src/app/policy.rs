//! The Policy window (issue 6): placeholder until the plugin lands.

use bevy::prelude::*;

pub struct PolicyPlugin;

impl Plugin for PolicyPlugin {
    fn build(&self, _app: &mut App) {}
}
