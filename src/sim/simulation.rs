//! A simulation: model, terrain, settings, controller and pulls around one state.

use super::step::{step, StepInfo, StepSettings, StepStatus, StepWorkspace};
use super::{Controller, Pull};
use crate::contact::Terrain;
use crate::dynamics::forward_kinematics;
use crate::model::Model;
use nalgebra::DVector;
use std::sync::Arc;

/// Why [`Simulation::settle`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum SettleError {
    #[error("cannot settle for {0} s: needs a finite, non-negative time")]
    BadDuration(f64),
    #[error("the stance did not settle: step {step} (t = {t:.4} s) failed with {status:?}")]
    StepFailed { step: usize, t: f64, status: StepStatus },
}

#[derive(Clone)]
pub struct Simulation {
    pub model: Arc<Model>,
    pub terrain: Terrain,
    pub settings: StepSettings,
    pub controller: Controller,
    pub pulls: Vec<Pull>,
    /// Current configuration (nq), velocity (nv) and time (s).
    pub q: DVector<f64>,
    pub v: DVector<f64>,
    pub t: f64,
    /// Actuator torques applied in the last step (nu).
    pub u: DVector<f64>,
    /// External generalized force of the last step (nv).
    pub tau_ext: DVector<f64>,
    /// Constant torque offset added to the controller's output, after its clamp (nu): a user
    /// or parameter offset (`diff::rollout::Param::ControlOffset`).
    pub u_offset: DVector<f64>,
    pub ws: StepWorkspace,
    q_next: DVector<f64>,
    v_next: DVector<f64>,
}

impl Simulation {
    pub fn new(model: Arc<Model>, terrain: Terrain, settings: StepSettings, q: DVector<f64>, v: DVector<f64>) -> Self {
        let ws = StepWorkspace::new(&model);
        Self {
            terrain,
            settings,
            controller: Controller::None,
            pulls: vec![],
            u: DVector::zeros(model.nu),
            tau_ext: DVector::zeros(model.nv),
            u_offset: DVector::zeros(model.nu),
            q_next: q.clone(),
            v_next: v.clone(),
            q,
            v,
            t: 0.0,
            ws,
            model,
        }
    }

    /// Computes the controls and pulls for the current state and advances one step. The state
    /// is left unchanged when the step reports that it could not advance.
    pub fn step(&mut self) -> StepInfo {
        let model = &*self.model;
        self.controller.compute(
            model,
            self.q.as_slice(),
            self.v.as_slice(),
            self.settings.dt,
            &mut self.u,
            &mut self.ws.actuator_damping,
        );
        self.u += &self.u_offset;
        self.tau_ext.fill(0.0);
        if self.pulls.iter().any(|p| p.active(self.t)) {
            forward_kinematics(model, &mut self.ws.data, self.q.as_slice(), None);
            for p in self.pulls.iter().filter(|p| p.active(self.t)) {
                p.add_generalized_force(model, &mut self.ws.data, &mut self.tau_ext);
            }
        }
        let info = step(
            model,
            &self.terrain,
            &self.settings,
            &mut self.ws,
            self.q.as_slice(),
            self.v.as_slice(),
            self.u.as_slice(),
            self.tau_ext.as_slice(),
            self.q_next.as_mut_slice(),
            self.v_next.as_mut_slice(),
        );
        if info.status.advanced() {
            // The torque actually applied, including the implicit damping term.
            for (k, &dof) in model.actuated_dofs.iter().enumerate() {
                self.u[k] -= self.ws.actuator_damping[k] * (self.v_next[dof] - self.v[dof]);
            }
            std::mem::swap(&mut self.q, &mut self.q_next);
            std::mem::swap(&mut self.v, &mut self.v_next);
            self.t += self.settings.dt;
        }
        info
    }

    /// Advances `seconds` (rounded to whole steps) under the simulation's own controller and
    /// pulls, stopping at the first step that cannot advance. Callers that want a settled
    /// stance clear the pulls first.
    pub fn settle(&mut self, seconds: f64) -> Result<(), SettleError> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(SettleError::BadDuration(seconds));
        }
        let steps = (seconds / self.settings.dt).round() as usize;
        for k in 0..steps {
            let info = self.step();
            if !info.status.advanced() {
                return Err(SettleError::StepFailed { step: k, t: self.t, status: info.status });
            }
        }
        Ok(())
    }
}
