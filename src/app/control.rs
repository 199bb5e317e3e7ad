//! The Control window (issue 5): placeholder until the plugin lands.

use bevy::prelude::*;

pub struct ControlPlugin;

impl Plugin for ControlPlugin {
    fn build(&self, _app: &mut App) {}
}
