//! The Control window's background work: the CITO solve on a thread of its own, the MPC driver
//! at the simulation's controls, and the systems that start and poll them.

use super::draw::Ghost;
use super::state::{CitoRun, CitoState, ControlSettings, MpcLink, MPC_DRIVER};
use crate::app::record::DriverRecord;
use crate::app::sim::{Driver, DriverSlot, SimCommand, SimCommands, SimHistory};
use crate::app::{cost_scope, CurrentScene, ToolWindows, ViewerOptions};
use crate::model::configuration::free_flyer_placement;
use crate::ocp::cito::{self, CitoProblem, CitoSettings};
use crate::ocp::mpc::{MpcDriver, MpcSettings};
use crate::scene::Scene;
use crate::sim::Simulation;
use bevy::prelude::*;
use bevy::tasks::futures::check_ready;
use nalgebra::{Matrix3, Vector3};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// MPC cycles kept for the plots.
const MAX_CYCLES: usize = 3000;

impl CitoState {
    /// Starts a solve of `spec` from `sim`'s state (the task owns both).
    pub fn start(&mut self, sim: Simulation, spec: CitoSettings) {
        if self.busy() {
            return;
        }
        let problem = match CitoProblem::from_state(&sim, &spec) {
            Ok(p) => p,
            Err(e) => {
                self.error = Some(e.to_string());
                return;
            }
        };
        if let Err(e) = problem.ddp.validate() {
            self.error = Some(format!("DDP settings: {e}"));
            return;
        }
        self.error = None;
        self.cancel = Arc::new(AtomicBool::new(false));
        self.progress = Arc::new(Mutex::new(Vec::new()));
        self.pending_target = Some((problem.cost.base_position, problem.cost.base_rotation));
        let (cancel, progress) = (self.cancel.clone(), self.progress.clone());
        self.started = Some(Instant::now());
        self.task = Some(crate::app::jobs::spawn("CITO", move || {
            let report = cito::solve(&problem, Some(&cancel), &mut |it| {
                if let Ok(mut p) = progress.lock() {
                    p.push(*it);
                }
            });
            if !report.info.cost.is_finite() {
                return Err(format!("the solve ended {:?} with a non-finite cost", report.info.status));
            }
            let ghost = Ghost::from_states(&problem.model, &report.xs);
            Ok(CitoRun { report, ghost, target: (problem.cost.base_position, problem.cost.base_rotation) })
        }));
    }
}

impl MpcLink {
    /// A fresh link (old telemetry dropped) and the driver at its other end.
    pub fn driver(&mut self, spec: MpcSettings) -> Result<MpcControl, String> {
        spec.validate().map_err(|e| e.to_string())?;
        *self = MpcLink::default();
        Ok(MpcControl { inner: MpcDriver::new(spec), link: self.clone() })
    }
}

/// [`MpcDriver`] as the simulation plugin's [`Driver`], reporting through an [`MpcLink`].
pub struct MpcControl {
    inner: MpcDriver,
    link: MpcLink,
}

impl Driver for MpcControl {
    fn name(&self) -> String {
        MPC_DRIVER.into()
    }

    fn engage(&mut self, sim: &mut Simulation) -> Result<(), String> {
        let base = free_flyer_placement(&sim.q.as_slice()[..7.min(sim.q.len())]);
        self.inner.engage(sim).map_err(|e| e.to_string())?;
        if let Ok(mut t) = self.link.telemetry.lock() {
            t.home = Some((base.trans, base.rot));
            t.target = self.inner.target();
            t.period = self.inner.spec.knot_dt;
            t.substeps = self.inner.substeps();
        }
        Ok(())
    }

    fn before_step(&mut self, sim: &mut Simulation) -> Result<(), String> {
        let cycle = self.inner.before_step(sim, None).map_err(|e| e.to_string())?;
        if let Some(c) = cycle {
            // The ghost is built here, on the batch's thread, once per replan.
            let plan = Ghost::from_states(&sim.model, self.inner.planned_states());
            if let Ok(mut t) = self.link.telemetry.lock() {
                if t.cycles.len() == MAX_CYCLES {
                    t.cycles.pop_front();
                }
                t.cycles.push_back(c);
                t.total_cycles += 1;
                t.plan = Some(plan);
                t.target = self.inner.target();
            }
        }
        Ok(())
    }

    fn record(&self) -> Option<DriverRecord> {
        Some(DriverRecord::Mpc(Box::new(self.inner.spec.clone())))
    }

    fn set_target(&mut self, p: Vector3<f64>, r: Matrix3<f64>) {
        self.inner.set_target(p, r);
        if let Ok(mut t) = self.link.telemetry.lock() {
            t.target = self.inner.target();
        }
    }

    fn release(&mut self, sim: &mut Simulation) {
        self.inner.release(sim);
        if let Ok(mut t) = self.link.telemetry.lock() {
            t.plan = None;
        }
    }
}

pub(super) fn poll_cito(mut state: ResMut<CitoState>) {
    let _cost = cost_scope();
    let Some(task) = state.task.as_mut() else { return };
    let Some(r) = check_ready(task) else { return };
    state.task = None;
    state.finished += 1;
    state.anim = 0.0;
    match r {
        Ok(run) => {
            state.error = None;
            state.result = Some(run);
        }
        Err(e) => state.error = Some(e),
    }
}

/// The simulation as it is on screen: the scene's simulation put into the displayed snapshot's
/// state (with the scene's own controller, whatever drives the live one).
pub fn displayed_simulation(scene: &Scene, history: &SimHistory) -> Simulation {
    let mut sim = scene.simulation();
    sim.pulls.clear();
    if let Some(s) = history.displayed() {
        s.restore(&mut sim);
    }
    sim
}

/// `--open control --start`: MPC if the scene has an `mpc` section, else CITO, once.
pub(super) fn autostart(
    opts: Option<Res<ViewerOptions>>,
    tools: Res<ToolWindows>,
    scene: Res<CurrentScene>,
    history: Res<SimHistory>,
    settings: Option<Res<ControlSettings>>,
    mut cito: ResMut<CitoState>,
    mut link: ResMut<MpcLink>,
    mut commands: ResMut<SimCommands>,
    mut done: Local<bool>,
) {
    let (Some(opts), Some(settings)) = (opts, settings) else { return };
    if *done || !opts.start || !tools.control {
        return;
    }
    // Both start from a settled stance, as `contactlab cito` and `contactlab mpc` do. MPC as
    // `contactlab mpc` runs it: `settle` seconds under the scene's controller without the
    // scene's pulls, then MPC takes over and the pulls fire, timed from that moment (so the
    // 100 N shove of `scenes/mpc_step.ron` meets MPC, not the joint PD it replaces). CITO
    // after `settle` and after the scene's last scheduled pull (which its controller meets).
    let mpc = scene.scene.file.mpc.is_some();
    let settle = if mpc { settings.mpc.settle } else { settings.cito.settle };
    let last_pull = scene.scene.pulls.iter().map(|p| p.start + p.duration).fold(0.0, f64::max);
    let now = history.snapshots.back().map_or(0.0, |s| s.t);
    let ready = if mpc { settle } else { settle + last_pull };
    if now + 1e-9 < ready {
        if history.snapshots.len() <= 1 {
            if mpc {
                commands.push(SimCommand::ClearPulls);
            }
            commands.push(SimCommand::Play);
        }
        return;
    }
    *done = true;
    if mpc {
        start_mpc(&settings, &mut link, &mut commands, &mut cito);
        for &p in &scene.scene.pulls {
            commands.push(SimCommand::FirePull(p));
        }
    } else {
        cito.start(displayed_simulation(&scene.scene, &history), settings.cito.clone());
    }
}

pub(super) fn start_mpc(
    settings: &ControlSettings,
    link: &mut MpcLink,
    commands: &mut SimCommands,
    cito: &mut CitoState,
) {
    match link.driver(settings.mpc.clone()) {
        Ok(d) => {
            commands.push(SimCommand::Drive(DriverSlot::new(Box::new(d))));
            commands.push(SimCommand::Play);
        }
        Err(e) => cito.error = Some(format!("MPC: {e}")),
    }
}
