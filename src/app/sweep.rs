//! Gradient-quality sweeps in the app: from the state on screen, sweep a parameter across a
//! contact transition ([`crate::diff::sweep::run_sweep`], DESIGN 4) on a background task that
//! owns a copy of the simulation, and keep the result for the plot. Changing `kappa` or
//! `delta` cancels the running sweep and starts a new one, so the plot follows the sliders.

use super::sim::SimHistory;
use super::{cost_scope, AppSet, CurrentScene};
use crate::diff::sweep::{run_sweep, ObjectiveTerm, SweepError, SweepOverrides, SweepResult, SweepSettings, SweepSpec};
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What the objective measures on the objective body at the end of the horizon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    VerticalVelocity,
    Height,
    ForwardPosition,
    ForwardVelocity,
}

impl Objective {
    pub const ALL: [Objective; 4] =
        [Objective::VerticalVelocity, Objective::Height, Objective::ForwardPosition, Objective::ForwardVelocity];

    pub fn label(&self) -> &'static str {
        match self {
            Objective::VerticalVelocity => "final vertical velocity (m/s)",
            Objective::Height => "final height (m)",
            Objective::ForwardPosition => "final x (m)",
            Objective::ForwardVelocity => "final x velocity (m/s)",
        }
    }

    fn term(&self, body: &str) -> ObjectiveTerm {
        let mut t = ObjectiveTerm {
            body: body.to_string(),
            point: [0.0; 3],
            linear: [0.0; 3],
            weight: [0.0; 3],
            target: [0.0; 3],
            linear_velocity: [0.0; 3],
        };
        match self {
            Objective::VerticalVelocity => t.linear_velocity[2] = 1.0,
            Objective::Height => t.linear[2] = 1.0,
            Objective::ForwardPosition => t.linear[0] = 1.0,
            Objective::ForwardVelocity => t.linear_velocity[0] = 1.0,
        }
        t
    }
}

/// The sweep the user set up (UI-editable).
#[derive(Resource, Clone, Debug, PartialEq)]
pub struct SweepSetup {
    /// `base_x | base_y | base_z | torque:JOINTS` (see `contactlab gradcheck`).
    pub param: String,
    pub from: f64,
    pub to: f64,
    pub points: usize,
    /// Rollout length (s).
    pub horizon: f64,
    pub samples: usize,
    pub objective: Objective,
    pub objective_body: String,
    /// Contact shown in the mode strip.
    pub watch: String,
    pub kappa: f64,
    pub delta: f64,
    /// Re-run when kappa or delta change.
    pub follow_sliders: bool,
}

impl SweepSetup {
    /// Defaults for a scene: its `gradcheck` section if it has one, else a drop of the base
    /// through touchdown measured by the final vertical velocity of the root body.
    pub fn for_scene(scene: &crate::scene::Scene) -> Self {
        let model = &scene.model;
        let watch = model
            .contact_points
            .iter()
            .find(|c| c.radius > 0.0)
            .or(model.contact_points.first())
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let root = model.body_names.first().cloned().unwrap_or_default();
        if let Some(g) = &scene.file.gradcheck {
            let objective = g
                .objective
                .first()
                .map(|t| {
                    if t.linear_velocity[2] != 0.0 {
                        Objective::VerticalVelocity
                    } else if t.linear[2] != 0.0 {
                        Objective::Height
                    } else if t.linear_velocity[0] != 0.0 {
                        Objective::ForwardVelocity
                    } else {
                        Objective::ForwardPosition
                    }
                })
                .unwrap_or(Objective::VerticalVelocity);
            return Self {
                param: g.param.clone(),
                from: g.from,
                to: g.to,
                points: g.points.min(31),
                horizon: g.horizon,
                samples: g.samples.min(12),
                objective,
                objective_body: g.objective.first().map(|t| t.body.clone()).unwrap_or(root),
                watch: g.watch.first().cloned().unwrap_or(watch),
                kappa: g.kappa,
                delta: g.delta,
                follow_sliders: true,
            };
        }
        let floating = model.has_free_flyer();
        Self {
            param: if floating { "base_z".into() } else { format!("torque:{}", first_actuated(model)) },
            from: 0.0,
            to: 0.06,
            points: 21,
            horizon: 0.1,
            samples: 8,
            objective: Objective::VerticalVelocity,
            objective_body: root,
            watch,
            kappa: 0.1,
            delta: 0.1,
            follow_sliders: true,
        }
    }

    /// As the library's sweep settings (a scene's gradcheck section, for
    /// [`SweepSpec::from_state`]).
    pub fn to_settings(&self) -> SweepSettings {
        SweepSettings {
            param: self.param.clone(),
            from: self.from,
            to: self.to,
            points: self.points,
            horizon: self.horizon,
            objective: vec![self.objective.term(&self.objective_body)],
            sigma: None,
            samples: self.samples,
            watch: if self.watch.is_empty() { vec![] } else { vec![self.watch.clone()] },
            settle: 0.0,
            kappa: self.kappa,
            delta: self.delta,
        }
    }
}

fn first_actuated(model: &crate::model::Model) -> String {
    model
        .actuated_dofs
        .first()
        .and_then(|&d| model.joints.iter().find(|j| j.idx_v == d))
        .map(|j| j.name.clone())
        .unwrap_or_default()
}

/// The running sweep and the last result.
#[derive(Resource, Default)]
pub struct SweepState {
    /// The job's result: the sweep's own (a cancelled sweep is `SweepError::Cancelled`), or
    /// why the job did not run.
    task: Option<Task<Result<Result<SweepResult, SweepError>, String>>>,
    cancel: Arc<AtomicBool>,
    progress: Arc<AtomicUsize>,
    /// Points of the running sweep.
    pub total: usize,
    /// Settings of the running sweep, and of the last result.
    pub running: Option<SweepSetup>,
    pub result: Option<(SweepSetup, SweepResult)>,
    pub error: Option<String>,
    /// Set by the UI: start a sweep now from the state on screen.
    pub requested: bool,
    /// Set by the UI: stop the running sweep.
    pub cancel_requested: bool,
    /// `(kappa, delta)` when the last sweep was started or cancelled.
    seen: Option<(f64, f64)>,
    /// Scene generation the settings belong to.
    generation: u64,
    /// Completed sweeps (tests wait on it).
    pub finished: u64,
}

impl SweepState {
    pub fn busy(&self) -> bool {
        self.task.is_some()
    }

    /// Finished points of the running sweep.
    pub fn progress(&self) -> usize {
        self.progress.load(Ordering::Relaxed)
    }
}

pub struct SweepPlugin;

impl Plugin for SweepPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<SweepState>()
            .add_systems(Startup, init_settings)
            .add_systems(Update, drive_sweep.in_set(AppSet::Background));
    }
}

fn init_settings(mut commands: Commands, scene: Res<CurrentScene>) {
    commands.insert_resource(SweepSetup::for_scene(&scene.scene));
}

/// Polls the sweep task; starts one on request, or when kappa or delta moved while following.
pub fn drive_sweep(
    mut state: ResMut<SweepState>,
    mut settings: ResMut<SweepSetup>,
    scene: Res<CurrentScene>,
    history: Res<SimHistory>,
) {
    let _cost = cost_scope();
    let state = &mut *state;
    if scene.generation != state.generation {
        // A new scene: its own defaults; a sweep of the old one is meaningless.
        state.generation = scene.generation;
        if state.running.is_some() {
            state.cancel.store(true, Ordering::Relaxed);
        }
        *settings = SweepSetup::for_scene(&scene.scene);
        state.result = None;
        state.seen = None;
    }
    if let Some(task) = state.task.as_mut() {
        if let Some(r) = check_ready(task) {
            state.task = None;
            let s = state.running.take().expect("a running sweep has settings");
            match r {
                Ok(Ok(r)) => {
                    state.result = Some((s, r));
                    state.error = None;
                    state.finished += 1;
                }
                Ok(Err(SweepError::Cancelled)) => {}
                Ok(Err(e)) => state.error = Some(e.to_string()),
                Err(e) => state.error = Some(e),
            }
        }
    }
    if state.cancel_requested {
        state.cancel_requested = false;
        state.requested = false;
        state.seen = Some((settings.kappa, settings.delta));
        state.cancel.store(true, Ordering::Relaxed);
        return;
    }
    let slider_moved = settings.follow_sliders && state.seen.is_some_and(|kd| kd != (settings.kappa, settings.delta));
    if !(state.requested || slider_moved) {
        return;
    }
    if state.task.is_some() {
        // Stop the old one; the new one starts when it has returned.
        state.cancel.store(true, Ordering::Relaxed);
        state.requested = true;
        state.seen = Some((settings.kappa, settings.delta));
        return;
    }
    state.requested = false;
    state.seen = Some((settings.kappa, settings.delta));
    let Some(snap) = history.displayed() else { return };
    let mut sim = scene.scene.simulation();
    snap.restore(&mut sim);
    // The sweep starts from this state without the scene's scheduled pulls.
    sim.pulls.clear();
    sim.t = 0.0;
    let o = SweepOverrides { threads: Some(1), ..Default::default() };
    let (spec, sim) = match SweepSpec::from_state(&scene.scene.file.name, &settings.to_settings(), &o, sim) {
        Ok(x) => x,
        Err(e) => {
            state.error = Some(format!("{e:#}"));
            state.running = None;
            return;
        }
    };
    state.cancel = Arc::new(AtomicBool::new(false));
    state.progress = Arc::new(AtomicUsize::new(0));
    state.total = spec.points;
    state.running = Some(settings.clone());
    state.error = None;
    let (cancel, progress) = (state.cancel.clone(), state.progress.clone());
    state.task = Some(super::jobs::spawn("sweep", move || Ok(run_sweep(&sim, &spec, &cancel, &progress))));
}
