//! What a viewer or a plot needs of one step, detached from the simulation's workspace: the
//! state, every body's world pose, each contact candidate's frame, impulse and realized mode,
//! the solver's report and the pulls that acted. Snapshots are what the app's history buffer
//! holds, so scrubbing back never re-runs physics, and a past snapshot restores the state it
//! shows exactly ([`Snapshot::restore`]).
//!
//! Contact quantities are those of the step that produced the snapshot: frames and points at
//! the configuration the step started from, impulses `lambda` (N s) of that step. Forces shown
//! to a person are `lambda / h` (N).

use super::step::{StepInfo, StepStatus};
use super::Simulation;
use crate::contact::ContactMode;
use crate::dynamics::forward_kinematics;
use crate::model::Data;
use crate::spatial::Se3;
use nalgebra::{DVector, Vector3};

/// One contact candidate in a snapshot (world frame).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactSnapshot {
    /// Contact point on the body (m).
    pub point: Vector3<f64>,
    /// Terrain normal and tangents.
    pub normal: Vector3<f64>,
    pub t1: Vector3<f64>,
    pub t2: Vector3<f64>,
    pub mu: f64,
    /// Gap at the start of the step (m).
    pub phi: f64,
    /// Impulse `(l_n, l_t1, l_t2)` of the step (N s) in the contact frame.
    pub lambda: Vector3<f64>,
    pub mode: ContactMode,
    /// Whether the candidate was in the contact problem (gap below the margin).
    pub in_problem: bool,
}

impl ContactSnapshot {
    /// World impulse `l_n n + l_t1 t1 + l_t2 t2` (N s).
    pub fn world_impulse(&self) -> Vector3<f64> {
        self.normal * self.lambda.x + self.t1 * self.lambda.y + self.t2 * self.lambda.z
    }
}

/// A pull that acted during the step (world frame).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PullSnapshot {
    pub body: usize,
    /// Application point (m) and force (N).
    pub point: Vector3<f64>,
    pub force: Vector3<f64>,
}

/// The simulation after one step.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Time after the step (s) and its length (s).
    pub t: f64,
    pub dt: f64,
    /// Configuration (nq), velocity (nv), applied torques (nu) after the step.
    pub q: DVector<f64>,
    pub v: DVector<f64>,
    pub u: DVector<f64>,
    /// `oMi` of every body at `q`.
    pub bodies: Vec<Se3>,
    /// Every contact point's nearest contact, in model order, then the second contacts of
    /// concave corners that were in the problem ([`crate::contact::detection`]).
    pub contacts: Vec<ContactSnapshot>,
    pub pulls: Vec<PullSnapshot>,
    pub status: StepStatus,
    /// Contact-solver Newton iterations and scaled residual of the step.
    pub iterations: usize,
    pub residual: f64,
    /// `max(0, -min phi)` at the start of the step (m).
    pub penetration: f64,
    /// Warm start of the next step (3k), so a restored snapshot continues as it did.
    lambda_warm: DVector<f64>,
    has_warm_start: bool,
}

impl Snapshot {
    /// Captures `sim` after a step that started at time `t0` and returned `info` (or the
    /// initial state, with `None`). `data` is scratch for the forward kinematics at the new
    /// configuration.
    pub fn capture(sim: &Simulation, step: Option<(&StepInfo, f64)>, data: &mut Data) -> Snapshot {
        let info = step.map(|(i, _)| i);
        let model = &*sim.model;
        forward_kinematics(model, data, sim.q.as_slice(), None);
        let ws = &sim.ws;
        let c = &ws.contacts;
        let stepped = info.is_some();
        // Every point's nearest contact, then the second contacts in the problem (concave
        // corners; `Contacts` docs).
        let contacts = (0..c.points)
            .chain((c.points..c.k).filter(|i| c.active.contains(i)))
            .map(|i| (i, crate::contact::terrain::tangent_basis(&c.normal[i])))
            .map(|(i, (t1, t2))| ContactSnapshot {
                point: c.point[i],
                normal: c.normal[i],
                t1,
                t2,
                mu: c.mu[i],
                phi: c.phi[i],
                lambda: if stepped {
                    Vector3::new(ws.lambda[3 * i], ws.lambda[3 * i + 1], ws.lambda[3 * i + 2])
                } else {
                    Vector3::zeros()
                },
                mode: if stepped { ws.modes[i] } else { ContactMode::Separated },
                in_problem: stepped && c.active.contains(&i),
            })
            .collect();
        // Pulls are reported for the step that just ran.
        let pulls = sim
            .pulls
            .iter()
            .filter(|p| step.is_some_and(|(_, t0)| p.active(t0)))
            .map(|p| PullSnapshot { body: p.body, point: data.o_m_i[p.body].act_point(&p.point), force: p.force })
            .collect();
        Snapshot {
            t: sim.t,
            dt: sim.settings.dt,
            q: sim.q.clone(),
            v: sim.v.clone(),
            u: sim.u.clone(),
            bodies: data.o_m_i.clone(),
            contacts,
            pulls,
            status: info.map_or(StepStatus::Ok, |i| i.status),
            iterations: info.map_or(0, |i| i.solver.iterations),
            residual: info.map_or(0.0, |i| i.solver.residual),
            penetration: info.map_or(0.0, |i| i.penetration),
            lambda_warm: ws.lambda_warm.clone(),
            has_warm_start: ws.has_warm_start,
        }
    }

    /// Puts `sim` back into the state of this snapshot (state, time, warm start), so that
    /// stepping on reproduces what followed it.
    pub fn restore(&self, sim: &mut Simulation) {
        sim.q.copy_from(&self.q);
        sim.v.copy_from(&self.v);
        sim.u.copy_from(&self.u);
        sim.t = self.t;
        sim.ws.lambda_warm.copy_from(&self.lambda_warm);
        sim.ws.has_warm_start = self.has_warm_start;
    }

    /// Total contact force `sum lambda / h` in the world (N).
    pub fn total_contact_force(&self) -> Vector3<f64> {
        self.contacts.iter().map(|c| c.world_impulse()).sum::<Vector3<f64>>() / self.dt
    }

    /// Whether every number a viewer would draw is finite.
    pub fn is_finite(&self) -> bool {
        self.q.iter().chain(self.v.iter()).all(|x| x.is_finite())
            && self.contacts.iter().all(|c| c.lambda.iter().all(|x| x.is_finite()))
    }
}
