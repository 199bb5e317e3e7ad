//! Learning tasks on the quadruped, shared by both learners (BPTT and PPO): observation, action,
//! per-step cost, reset distribution and pushes. A task is built from a simulation (model,
//! terrain, step settings, a `JointPd` controller, the shipped pushes as its pulls) and
//! [`TaskSettings`] (a scene's `learn` section); the simulation's `dt` is both the step and the
//! control period `h`, and its `JointPd` gains turn actions into torques.
//!
//! # Episode
//! An episode of `T = episode / h` steps starts from a state drawn around the **settled stance**
//! `(q_s, 0)` (the scene's initial state after `settle` seconds under its own PD):
//! joint offsets `U(-j, j)`, base raised by `U(0, drop)`, base linear and angular velocity
//! (body frame) `U(-b, b)` per axis. A command is drawn per episode, and with probability
//! `push.probability` one horizontal push `F (cos a, sin a, 0)` on the trunk origin, `F`, its
//! start and duration uniform in the given ranges, `a` uniform. Nothing ends an episode early
//! except a failure: a step the solver cannot take, or a diverged state (a velocity entry above
//! [`VELOCITY_LIMIT`]; random exploration at 10 ms steps can excite the explicit Coriolis terms
//! into divergence). A failed episode is charged [`FAILURE_COST`] per remaining step, the failed
//! one included, in every return (evaluation, PPO's rewards, the target).
//!
//! # Commands
//! * `stand`: base height `z* = z_s + dz` and orientation `R* = Rz(yaw) Ry(pitch) Rx(roll) R_s`
//!   with `dz ~ U(-height, height)` and each angle `U(-rpy_i, rpy_i)`.
//! * `walk`: forward speed `s* ~ U(speed)` (body `x`), with `z* = z_s`, `R* = R_s`, and a
//!   clock phase `phi_0` (0, or `U(0, 2 pi)` with `gait.random_phase`); with
//!   `gait.start_speed = g` the start's forward base velocity gets `+ g s*`.
//!
//! # Gait (walk; `learn.gait`, all off by default)
//! A trot clock `phi(t) = 2 pi f t + phi_0` (`f` = `command.gait_frequency`); foot `k` runs at
//! `phi_k = phi + off_k`, `off_k = 0` for the front-left/rear-right diagonal and `pi` for the
//! other (by the sign of the foot's forward times lateral offset in the settled stance). Foot
//! `k` swings while `sin phi_k > 0`. Its reference height above its settled-stance height is
//! `z_ref,k = swing_height max(0, sin phi_k)` (zero in stance). The **trot prior** adds to the
//! PD targets, per leg, `thigh += l_k + stride s* cos phi_k`, `calf -= 2 l_k` with
//! `l_k = prior_lift max(0, sin phi_k)`: the lift flexes the leg so the foot rises straight up
//! from the stance posture, the stride swings the foot forward during swing and back during
//! stance, proportionally to the command. It depends on time and command only, so
//! `du/da` and `du/dx` are unchanged; `a = 0` is the scene's PD plus the prior.
//!
//! # Observation `o(x, t)` (34 entries for stand, 41 for walk)
//! ```text
//! [ z - z*,  r = log3(R*^T R),  v_lin (body),  omega (body),  q_j - q_j,nom (12),  qd_j (12),
//!   (walk:) v_x - s*,  sin phi,  cos phi,  e_k = z_k(q) - z_k,stand - z_ref,k(phi_k) (4 feet) ]
//! ```
//! Its tangent Jacobian `O = do/dx` (x = [dq; dv], 2nv) is analytic: `dz/d dq_lin = R_(2,:)`
//! (`p+ = p + R dq_lin`), `dr/d dtheta = J_r^-1(r)` (right perturbation `R exp(dtheta)`), the
//! velocity and joint entries are identities, the clock has none, and a foot's row is the
//! world `z` row of its point Jacobian (`dynamics::point_jacobian`, whose free-flyer columns
//! are the tangent directions of `integrate`). The networks see `n = (o - mean) / std`, with
//! the normalization saved in the policy file.
//!
//! # Action
//! `a` (nu = 12) sets PD joint targets `r = q_nom + sigma clamp(a, -3, 3)` (+ walk's trot
//! prior, *Gait*) (`sigma` =
//! `action_scale`, rad), and the scene's PD gives the explicit torque
//! `u = kp (r - q) - (kd + h kp) qd` with implicit damping `kd + h kp` (`sim::Controller`,
//! MuJoCo-style), clamped to the effort limit (a clamped joint has no implicit term and no
//! gain). So `a = 0` is the scene's PD holding the nominal stance. Its derivatives:
//! `du/da = kp sigma` and `du/dx = K` (`-kp` on `q_j`, `-(kd + h kp)` on `qd_j`) where the
//! actuator is not saturated, zero where it is (or where `a` is clamped).
//!
//! # Cost (per step, of the transition `x_t -> x_{t+1}` under `a_t`), return = -sum of costs
//! ```text
//! c_t = w_h (z - z*)^2 + w_o |r|^2 + w_v |v_lin|^2 + w_w |omega|^2 + w_qd |qd|^2   at x_{t+1}
//!     + w_a |a_t|^2  (+ walk: w_s (v_x - s*)^2 + w_f sum_k e_k^2)
//! ```
//! It is a function of the observation and the action, so `dc/dx = O^T dc/do`.
//!
//! # Target return (stand)
//! A hand-designed reference controller: the scene's own PD toward fixed joint targets that
//! realize the commanded base pose by inverse kinematics with the feet where they stand
//! (`posture + q_ik(command) - q_stand`, so the PD's sag under gravity is the one it was tuned
//! with; for the zero command it is exactly the scene's PD). The target return is that
//! controller's mean return on the evaluation episodes (same starts, commands and pushes,
//! [`Task::reference_return`]): a learned policy that reaches it does at least as well as the
//! scene's PD told the answer of the inverse kinematics.

use super::settings::TaskSettings;
use crate::contact::Terrain;
use crate::diff::{transition_jacobians_ext, Sensitivity, TransitionStatus, TransitionWorkspace};
use crate::dynamics::point_jacobian;
use crate::dynamics::rnea_derivatives::PointForce;
use crate::model::configuration::free_flyer_placement;
use crate::model::{Data, Model};
use crate::sim::{step, Controller, Pull, StepSettings, StepWorkspace};
use crate::sim::{SettleError, Simulation};
use crate::spatial::lie::so3_right_jacobian_inv;
use crate::validate::SettingsError;
use nalgebra::{DMatrix, DVector, Matrix3, Rotation3, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

/// Seed of the evaluation episodes shared by every learner and report.
pub const EVAL_SEED: u64 = 0x5EED_E7A1;
/// Number of evaluation episodes.
pub const EVAL_EPISODES: usize = 24;
/// Actions are clamped to `[-ACTION_LIMIT, ACTION_LIMIT]` before they become targets.
pub const ACTION_LIMIT: f64 = 3.0;
/// A state with a velocity entry above this (m/s, rad/s) counts as a diverged simulation.
pub const VELOCITY_LIMIT: f64 = 500.0;
/// Cost charged per remaining step (the failed one included) when an episode ends in a failed
/// or diverged step (about four times the untrained policy's per-step cost).
pub const FAILURE_COST: f64 = 10.0;

/// Which task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    Stand,
    Walk,
}

/// The command of one episode.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Command {
    /// Base height offset from the settled stance (m).
    pub height: f64,
    /// Roll, pitch, yaw about the world axes relative to the settled stance (rad).
    pub rpy: [f64; 3],
    /// Forward speed (m/s, walk).
    pub speed: f64,
    /// Gait clock phase at the episode's start (rad, walk): `phi(t) = 2 pi f t + phase`.
    pub phase: f64,
}

/// One episode's start, command and pushes.
#[derive(Clone, Debug)]
pub struct Episode {
    pub q0: DVector<f64>,
    pub v0: DVector<f64>,
    pub command: Command,
    /// Pushes, times relative to the episode's start.
    pub pushes: Vec<Pull>,
}

/// Why a task could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("{0}")]
    Robot(String),
    #[error(transparent)]
    Settle(#[from] SettleError),
}

/// A foot of the gait terms (walk; module docs, *Gait*).
#[derive(Clone, Debug)]
pub struct Foot {
    /// Contact point index and its body.
    pub contact: usize,
    pub body: usize,
    /// World height of the contact point in the settled stance (m): foot height is measured
    /// from it (flat ground).
    pub z_stand: f64,
    /// Clock offset of this foot's phase (rad): 0 for one diagonal pair, pi for the other.
    pub phase_offset: f64,
    /// Actuator indices of the leg's thigh and calf joints (the trot prior's joints).
    pub thigh: Option<usize>,
    pub calf: Option<usize>,
}

/// A learning task (module docs).
#[derive(Clone, Debug)]
pub struct Task {
    pub kind: TaskKind,
    pub spec: TaskSettings,
    /// Scene (or task) name.
    pub scene: String,
    pub model: Arc<Model>,
    pub terrain: Terrain,
    /// The scene's step settings; `settings.dt` is the control period.
    pub settings: StepSettings,
    pub kp: f64,
    pub kd: f64,
    /// Nominal joint targets in actuator order (nu): the scene PD's posture.
    pub posture: Vec<f64>,
    /// Settled stance (nq) and its base height and rotation.
    pub q_stand: DVector<f64>,
    pub base_height: f64,
    pub base_rotation: Matrix3<f64>,
    /// Steps per episode.
    pub steps: usize,
    /// The scene's pulls: the shipped pushes of the standing check (times from the start).
    pub pulls: Vec<Pull>,
    /// Trunk body index (the free-flyer's body, 0).
    pub trunk: usize,
    /// `q` and `v` indices of each actuator's joint (nu each).
    pub act_q: Vec<usize>,
    pub act_v: Vec<usize>,
    /// The feet (contact points named `*foot`), in contact-point order.
    pub feet: Vec<Foot>,
}

impl Task {
    /// The task of `spec` on `sim`'s robot, terrain and step settings: the stance is settled
    /// here (`settle` seconds under `sim`'s `JointPd` controller, without its pulls, which are
    /// kept as the task's shipped pushes). `name` labels reports and policy files.
    pub fn new(name: &str, sim: &Simulation, spec: TaskSettings) -> Result<Task, TaskError> {
        spec.validate()?;
        let model = sim.model.clone();
        if !model.has_free_flyer() || model.nu == 0 {
            return Err(TaskError::Robot(format!("`{}` is not a floating-base robot with actuators", model.name)));
        }
        let Controller::JointPd { kp, kd, posture } = sim.controller.clone() else {
            return Err(TaskError::Robot(
                "the task needs a JointPd controller (its gains turn joint targets into torques)".into(),
            ));
        };
        let kind = if spec.task == "walk" { TaskKind::Walk } else { TaskKind::Stand };
        let steps = spec.steps(sim.settings.dt)?;
        let pulls = sim.pulls.clone();
        let mut sim = sim.clone();
        sim.pulls.clear();
        sim.settle(spec.settle)?;
        let m0 = free_flyer_placement(&sim.q.as_slice()[..7]);
        let (act_q, act_v): (Vec<usize>, Vec<usize>) = model
            .actuated_dofs
            .iter()
            .map(|&d| {
                let j = model.joints.iter().find(|j| j.idx_v == d).expect("actuated dof belongs to a joint");
                (j.idx_q, j.idx_v)
            })
            .unzip();
        let feet = stance_feet(&model, sim.q.as_slice(), &m0);
        Ok(Task {
            feet,
            kind,
            steps,
            spec,
            scene: name.to_string(),
            terrain: sim.terrain.clone(),
            settings: sim.settings,
            kp,
            kd,
            posture,
            q_stand: sim.q.clone(),
            base_height: m0.trans.z,
            base_rotation: m0.rot,
            pulls,
            trunk: 0,
            act_q,
            act_v,
            model,
        })
    }

    pub fn obs_dim(&self) -> usize {
        10 + 2 * self.model.nu + if self.kind == TaskKind::Walk { 3 + self.feet.len() } else { 0 }
    }

    pub fn act_dim(&self) -> usize {
        self.model.nu
    }

    /// Fixed observation scales (the `std` of BPTT's normalization; PPO's running statistics
    /// start from them).
    pub fn obs_scale(&self) -> Vec<f64> {
        let nu = self.model.nu;
        let mut s = vec![0.02, 0.1, 0.1, 0.1, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0];
        s.extend(std::iter::repeat_n(0.2, nu));
        s.extend(std::iter::repeat_n(2.0, nu));
        if self.kind == TaskKind::Walk {
            s.extend([0.3, 1.0, 1.0]);
            s.extend(std::iter::repeat_n(0.03, self.feet.len()));
        }
        s
    }

    /// Target base height and rotation of a command.
    pub fn target(&self, c: &Command) -> (f64, Matrix3<f64>) {
        match self.kind {
            TaskKind::Stand => {
                let r = Rotation3::from_euler_angles(c.rpy[0], c.rpy[1], c.rpy[2]);
                (self.base_height + c.height, r.matrix() * self.base_rotation)
            }
            TaskKind::Walk => (self.base_height, self.base_rotation),
        }
    }

    /// The observation at `(q, v, t)` (module docs) and, if asked, its tangent Jacobian
    /// (obs_dim x 2nv, overwritten).
    pub fn observe(&self, q: &[f64], v: &[f64], t: f64, c: &Command, o: &mut [f64], jac: Option<&mut DMatrix<f64>>) {
        let nv = self.model.nv;
        let nu = self.model.nu;
        let m = free_flyer_placement(&q[..7]);
        let (z_t, r_t) = self.target(c);
        let r = Rotation3::from_matrix_unchecked(r_t.transpose() * m.rot).scaled_axis();
        o[0] = m.trans.z - z_t;
        o[1..4].copy_from_slice(r.as_slice());
        o[4..10].copy_from_slice(&v[..6]);
        for k in 0..nu {
            o[10 + k] = q[self.act_q[k]] - self.posture[k];
            o[10 + nu + k] = v[self.act_v[k]];
        }
        let walk = self.kind == TaskKind::Walk;
        let mut foot_jac = None;
        if walk {
            let ph = self.phase(t, c);
            o[10 + 2 * nu] = v[0] - c.speed;
            o[11 + 2 * nu] = ph.sin();
            o[12 + 2 * nu] = ph.cos();
            let mut data = Data::new(&self.model);
            crate::dynamics::forward_kinematics(&self.model, &mut data, q, None);
            let mut rows = jac.is_some().then(|| DMatrix::zeros(self.feet.len(), nv));
            for (k, f) in self.feet.iter().enumerate() {
                let cp = &self.model.contact_points[f.contact];
                let p = data.o_m_i[f.body].act_point(&cp.position);
                o[13 + 2 * nu + k] = p.z - f.z_stand - self.swing_reference(ph + f.phase_offset);
                if let Some(rows) = rows.as_mut() {
                    point_jacobian(&self.model, &data.o_m_i, f.body, &p, &mut data.jac3);
                    for i in 0..nv {
                        rows[(k, i)] = data.jac3[(2, i)];
                    }
                }
            }
            foot_jac = rows;
        }
        if let Some(j) = jac {
            j.fill(0.0);
            for a in 0..3 {
                j[(0, a)] = m.rot[(2, a)];
            }
            let jr = so3_right_jacobian_inv(&r);
            for a in 0..3 {
                for b in 0..3 {
                    j[(1 + a, 3 + b)] = jr[(a, b)];
                }
            }
            for i in 0..6 {
                j[(4 + i, nv + i)] = 1.0;
            }
            for k in 0..nu {
                j[(10 + k, self.act_v[k])] = 1.0;
                j[(10 + nu + k, nv + self.act_v[k])] = 1.0;
            }
            if walk {
                j[(10 + 2 * nu, nv)] = 1.0;
            }
            if let Some(rows) = foot_jac {
                for k in 0..self.feet.len() {
                    for i in 0..nv {
                        j[(13 + 2 * nu + k, i)] = rows[(k, i)];
                    }
                }
            }
        }
    }

    /// Gait clock phase at time `t` of an episode with command `c` (rad).
    pub fn phase(&self, t: f64, c: &Command) -> f64 {
        2.0 * std::f64::consts::PI * self.spec.command.gait_frequency * t + c.phase
    }

    /// Reference foot height (m) at foot phase `phi`: `swing_height max(0, sin phi)` (swing
    /// while `sin phi > 0`, stance otherwise).
    pub fn swing_reference(&self, phi: f64) -> f64 {
        self.spec.gait.swing_height * phi.sin().max(0.0)
    }

    /// Per-step cost `c(o, a)` (module docs); adds `dc/do` and `dc/da` scaled by `scale` to the
    /// given buffers.
    pub fn cost(&self, o: &[f64], a: &[f64], grads: Option<(&mut [f64], &mut [f64], f64)>) -> f64 {
        let w = &self.spec.weights;
        let nu = self.model.nu;
        let mut ow = vec![0.0; o.len()];
        ow[0] = w.height;
        ow[1..4].fill(w.orientation);
        ow[4..7].fill(w.linear_velocity);
        ow[7..10].fill(w.angular_velocity);
        ow[10 + nu..10 + 2 * nu].fill(w.joint_velocity);
        if self.kind == TaskKind::Walk {
            ow[10 + 2 * nu] = w.speed;
            ow[13 + 2 * nu..].fill(w.foot_height);
        }
        let mut c = 0.0;
        for i in 0..o.len() {
            c += ow[i] * o[i] * o[i];
        }
        for x in a {
            c += w.action * x * x;
        }
        if let Some((go, ga, s)) = grads {
            for i in 0..o.len() {
                go[i] += s * 2.0 * ow[i] * o[i];
            }
            for k in 0..a.len() {
                ga[k] += s * 2.0 * w.action * a[k];
            }
        }
        c
    }

    /// Joint targets (nu) of an action at time `t` of an episode with command `c`: the
    /// posture, plus the trot prior (walk, module docs), plus the scaled, clamped action.
    pub fn targets(&self, a: &[f64], t: f64, c: &Command, out: &mut [f64]) {
        for k in 0..self.model.nu {
            out[k] = self.posture[k] + self.spec.action_scale * a[k].clamp(-ACTION_LIMIT, ACTION_LIMIT);
        }
        let g = &self.spec.gait;
        if self.kind == TaskKind::Walk && (g.prior_lift > 0.0 || g.prior_stride > 0.0) {
            let ph = self.phase(t, c);
            for f in &self.feet {
                let phi = ph + f.phase_offset;
                let lift = g.prior_lift * phi.sin().max(0.0);
                if let Some(i) = f.thigh {
                    out[i] += lift + g.prior_stride * c.speed * phi.cos();
                }
                if let Some(i) = f.calf {
                    out[i] -= 2.0 * lift;
                }
            }
        }
    }

    /// The scene's PD toward `targets`: the controller to put in a [`crate::sim::Simulation`].
    pub fn controller(&self, targets: &[f64]) -> Controller {
        Controller::JointPd { kp: self.kp, kd: self.kd, posture: targets.to_vec() }
    }

    /// A random episode (module docs).
    pub fn sample_episode(&self, rng: &mut ChaCha8Rng) -> Episode {
        let m = &*self.model;
        let sp = &self.spec;
        let mut q0 = self.q_stand.clone();
        let mut v0 = DVector::zeros(m.nv);
        let u = |rng: &mut ChaCha8Rng, r: f64| if r > 0.0 { rng.random_range(-r..r) } else { 0.0 };
        let uab = |rng: &mut ChaCha8Rng, r: [f64; 2]| if r[1] > r[0] { rng.random_range(r[0]..r[1]) } else { r[0] };
        for k in 0..m.nu {
            q0[self.act_q[k]] += u(rng, sp.init.joints);
        }
        q0[2] += uab(rng, [0.0, sp.init.drop]);
        for i in 0..3 {
            v0[i] = u(rng, sp.init.base_linear_velocity);
            v0[3 + i] = u(rng, sp.init.base_angular_velocity);
        }
        let command = match self.kind {
            TaskKind::Stand => Command {
                height: u(rng, sp.command.height),
                rpy: [u(rng, sp.command.rpy[0]), u(rng, sp.command.rpy[1]), u(rng, sp.command.rpy[2])],
                speed: 0.0,
                phase: 0.0,
            },
            TaskKind::Walk => {
                let speed = uab(rng, sp.command.speed);
                let phase = if sp.gait.random_phase { rng.random_range(0.0..2.0 * std::f64::consts::PI) } else { 0.0 };
                v0[0] += sp.gait.start_speed * speed;
                Command { speed, phase, ..Default::default() }
            }
        };
        let mut pushes = Vec::new();
        if rng.random_range(0.0..1.0) < sp.push.probability {
            let f = uab(rng, sp.push.force);
            let ang = rng.random_range(0.0..2.0 * std::f64::consts::PI);
            pushes.push(Pull {
                body: self.trunk,
                point: Vector3::zeros(),
                force: Vector3::new(f * ang.cos(), f * ang.sin(), 0.0),
                start: uab(rng, sp.push.start),
                duration: uab(rng, sp.push.duration).max(1e-3),
            });
        }
        Episode { q0, v0, command, pushes }
    }

    /// `n` episodes from a seed.
    pub fn episodes(&self, n: usize, seed: u64) -> Vec<Episode> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| self.sample_episode(&mut rng)).collect()
    }

    /// The evaluation episodes every learner is scored on.
    pub fn eval_episodes(&self) -> Vec<Episode> {
        self.episodes(EVAL_EPISODES, EVAL_SEED)
    }

    /// The cost charged when step `t` of an episode fails: [`FAILURE_COST`] per remaining step.
    pub fn failure_cost(&self, t: usize) -> f64 {
        FAILURE_COST * (self.steps - t.min(self.steps)) as f64
    }

    /// Joint targets (nu) of the **reference controller** for a command: the nominal posture
    /// plus the joint change that puts the base at the commanded pose with every foot where it
    /// stands in the settled stance (inverse kinematics by Gauss-Newton on the four feet's
    /// world positions, 12 joint unknowns), so the PD's sag under gravity is the nominal one.
    pub fn reference_targets(&self, c: &Command) -> Vec<f64> {
        let m = &*self.model;
        let nu = m.nu;
        let mut data = Data::new(m);
        let feet: Vec<usize> =
            m.contact_points.iter().enumerate().filter(|(_, c)| c.name.ends_with("foot")).map(|(i, _)| i).collect();
        let foot_pos = |data: &Data, i: usize| {
            let cp = &m.contact_points[i];
            data.o_m_i[cp.body].act_point(&cp.position)
        };
        crate::dynamics::forward_kinematics(m, &mut data, self.q_stand.as_slice(), None);
        let goal: Vec<Vector3<f64>> = feet.iter().map(|&i| foot_pos(&data, i)).collect();
        let (z, r) = self.target(c);
        let mut q = self.q_stand.clone();
        let pose = crate::spatial::Se3::new(r, Vector3::new(q[0], q[1], z));
        crate::model::configuration::set_free_flyer(q.as_mut_slice(), &pose);
        if self.kind == TaskKind::Walk || feet.len() * 3 != nu {
            return self.posture.clone();
        }
        for _ in 0..30 {
            crate::dynamics::forward_kinematics(m, &mut data, q.as_slice(), None);
            let mut jm = DMatrix::zeros(nu, nu);
            let mut e = DVector::zeros(nu);
            for (f, &i) in feet.iter().enumerate() {
                let cp = &m.contact_points[i];
                let p = foot_pos(&data, i);
                point_jacobian(m, &data.o_m_i, cp.body, &p, &mut data.jac3);
                for a in 0..3 {
                    e[3 * f + a] = goal[f][a] - p[a];
                    for k in 0..nu {
                        jm[(3 * f + a, k)] = data.jac3[(a, self.act_v[k])];
                    }
                }
            }
            if e.norm() < 1e-10 {
                break;
            }
            let Some(dq) = jm.lu().solve(&e) else { break };
            for k in 0..nu {
                q[self.act_q[k]] += dq[k];
            }
        }
        (0..nu).map(|k| self.posture[k] + q[self.act_q[k]] - self.q_stand[self.act_q[k]]).collect()
    }

    /// The reference controller's constant action for a command (`reference_targets` as an
    /// action).
    pub fn reference_action(&self, c: &Command) -> Vec<f64> {
        let r = self.reference_targets(c);
        (0..self.model.nu).map(|k| (r[k] - self.posture[k]) / self.spec.action_scale).collect()
    }

    /// Mean return of the reference controller (the scene's PD toward the inverse-kinematics
    /// targets of each episode's command, held for the whole episode) on `episodes`: the task's
    /// target return (module docs).
    pub fn reference_return(&self, episodes: &[Episode]) -> f64 {
        let mut env = Env::new(self);
        let mut total = 0.0;
        for ep in episodes {
            let a = self.reference_action(&ep.command);
            env.reset(self, ep);
            let mut ret = 0.0;
            for t in 0..self.steps {
                match env.step(self, &a, None) {
                    Some(s) => ret -= s.cost,
                    None => {
                        ret -= self.failure_cost(t);
                        break;
                    }
                }
            }
            total += ret;
        }
        total / episodes.len().max(1) as f64
    }
}

/// Jacobian requests of [`Env::step`]: the sensitivity and the outputs `A` (2nv x 2nv), `B`
/// (2nv x nu) and `K = du/dx` (nu x 2nv, the PD's direct gain).
pub struct JacobianRequest<'a> {
    pub sensitivity: Sensitivity,
    pub a: &'a mut DMatrix<f64>,
    pub b: &'a mut DMatrix<f64>,
    pub k: &'a mut DMatrix<f64>,
}

/// What one [`Env::step`] reports.
#[derive(Clone, Copy, Debug)]
pub struct StepReport {
    /// `c_t` of the transition.
    pub cost: f64,
    /// The Jacobians came from a fallback sensitivity.
    pub fallback: bool,
    /// No sensitivity gave finite Jacobians (they are unusable).
    pub jacobian_failed: bool,
}

/// One environment: a task's episode stepped with actions, optionally with transition
/// Jacobians. Owns every buffer (one per worker).
#[derive(Clone)]
pub struct Env {
    pub ws: StepWorkspace,
    pub tw: TransitionWorkspace,
    data: Data,
    pub q: DVector<f64>,
    pub v: DVector<f64>,
    /// Time since the episode's start (s) and steps taken.
    pub t: f64,
    pub step_index: usize,
    pub command: Command,
    pushes: Vec<Pull>,
    /// Observation at the current state (obs_dim).
    pub obs: Vec<f64>,
    /// Explicit torque, implicit damping and saturation flags of the last step (nu).
    pub u: DVector<f64>,
    pub damping: DVector<f64>,
    pub active: Vec<bool>,
    targets: Vec<f64>,
    tau_ext: DVector<f64>,
    loads: Vec<PointForce>,
}

impl Env {
    pub fn new(task: &Task) -> Self {
        let m = &*task.model;
        Self {
            ws: StepWorkspace::new(m),
            tw: TransitionWorkspace::new(m),
            data: Data::new(m),
            q: task.q_stand.clone(),
            v: DVector::zeros(m.nv),
            t: 0.0,
            step_index: 0,
            command: Command::default(),
            pushes: Vec::new(),
            obs: vec![0.0; task.obs_dim()],
            u: DVector::zeros(m.nu),
            damping: DVector::zeros(m.nu),
            active: vec![false; m.nu],
            targets: vec![0.0; m.nu],
            tau_ext: DVector::zeros(m.nv),
            loads: Vec::new(),
        }
    }

    /// Starts an episode.
    pub fn reset(&mut self, task: &Task, ep: &Episode) {
        self.q.copy_from(&ep.q0);
        self.v.copy_from(&ep.v0);
        self.t = 0.0;
        self.step_index = 0;
        self.command = ep.command;
        self.pushes.clone_from(&ep.pushes);
        self.ws.reset_warm_start();
        task.observe(self.q.as_slice(), self.v.as_slice(), 0.0, &self.command, &mut self.obs, None);
    }

    /// The observation Jacobian at the current state (obs_dim x 2nv).
    pub fn obs_jacobian(&self, task: &Task, jac: &mut DMatrix<f64>) {
        let mut o = vec![0.0; task.obs_dim()];
        task.observe(self.q.as_slice(), self.v.as_slice(), self.t, &self.command, &mut o, Some(jac));
    }

    /// Applies action `a` for one step. Returns `None` when the simulator could not take the
    /// step or the next state diverged (any velocity above [`VELOCITY_LIMIT`]); the state is
    /// then unchanged. With `jac`, the transition Jacobians of the chosen
    /// sensitivity (fallbacks: the other family, then strongly relaxed; `ocp::contact`).
    pub fn step(&mut self, task: &Task, a: &[f64], jac: Option<JacobianRequest>) -> Option<StepReport> {
        let m = &*task.model;
        let (nv, h) = (m.nv, task.settings.dt);
        task.targets(a, self.t, &self.command, &mut self.targets);
        // The scene's PD (identical to sim::Controller::JointPd with these targets).
        for k in 0..m.nu {
            let (iq, iv) = (task.act_q[k], task.act_v[k]);
            let d = task.kd + h * task.kp;
            let raw = task.kp * (self.targets[k] - self.q[iq]) - d * self.v[iv];
            let lim = m.effort_limits[k];
            if raw.abs() <= lim {
                self.u[k] = raw;
                self.damping[k] = d;
                self.active[k] = a[k].abs() <= ACTION_LIMIT;
            } else {
                self.u[k] = raw.clamp(-lim, lim);
                self.damping[k] = 0.0;
                self.active[k] = false;
            }
        }
        self.ws.actuator_damping.copy_from(&self.damping);
        self.tau_ext.fill(0.0);
        self.loads.clear();
        let t = self.t;
        if self.pushes.iter().any(|p| p.active(t)) {
            crate::dynamics::forward_kinematics(m, &mut self.data, self.q.as_slice(), None);
            for p in self.pushes.iter().filter(|p| p.active(t)) {
                let pw = self.data.o_m_i[p.body].act_point(&p.point);
                point_jacobian(m, &self.data.o_m_i, p.body, &pw, &mut self.data.jac3);
                self.tau_ext.gemv_tr(1.0, &self.data.jac3, &p.force, 1.0);
                self.loads.push(PointForce::new(p.body, pw, p.force));
            }
        }
        let x = (self.q.as_slice(), self.v.as_slice(), self.u.as_slice(), self.tau_ext.as_slice());
        let mut report = StepReport { cost: 0.0, fallback: false, jacobian_failed: false };
        match jac {
            None => {
                let info = step(
                    m,
                    &task.terrain,
                    &task.settings,
                    &mut self.ws,
                    x.0,
                    x.1,
                    x.2,
                    x.3,
                    self.tw.q_next.as_mut_slice(),
                    self.tw.v_next.as_mut_slice(),
                );
                if !info.status.advanced() {
                    return None;
                }
            }
            Some(req) => {
                let finite = |a: &DMatrix<f64>, b: &DMatrix<f64>| a.iter().chain(b.iter()).all(|v| v.is_finite());
                let [first, second] = req.sensitivity.fallbacks();
                let chain = [req.sensitivity, first, second];
                let mut ok = false;
                for (i, s) in chain.into_iter().enumerate() {
                    let info = transition_jacobians_ext(
                        m,
                        &task.terrain,
                        &task.settings,
                        &mut self.ws,
                        &mut self.tw,
                        x,
                        &self.loads,
                        None,
                        s,
                        req.a,
                        req.b,
                        None,
                    );
                    match info.status {
                        TransitionStatus::StepFailed => return None,
                        TransitionStatus::Ok | TransitionStatus::BackwardNotConverged if finite(req.a, req.b) => {
                            report.fallback = i > 0;
                            ok = true;
                            break;
                        }
                        _ => {}
                    }
                }
                report.jacobian_failed = !ok;
                req.k.fill(0.0);
                for k in 0..m.nu {
                    if self.damping[k] > 0.0 {
                        req.k[(k, task.act_v[k])] = -task.kp;
                        req.k[(k, nv + task.act_v[k])] = -self.damping[k];
                    }
                }
            }
        }
        if self.tw.v_next.iter().any(|x| x.is_nan() || x.abs() > VELOCITY_LIMIT) {
            return None;
        }
        self.q.copy_from(&self.tw.q_next);
        self.v.copy_from(&self.tw.v_next);
        self.t += h;
        self.step_index += 1;
        task.observe(self.q.as_slice(), self.v.as_slice(), self.t, &self.command, &mut self.obs, None);
        report.cost = task.cost(&self.obs, a, None);
        Some(report)
    }

    /// Whether any trunk corner (a contact candidate that is not a foot) carries an impulse in
    /// the last step.
    pub fn trunk_contact(&self, task: &Task) -> bool {
        task.model
            .contact_points
            .iter()
            .enumerate()
            .any(|(i, c)| !c.name.ends_with("foot") && self.ws.lambda[3 * i] > 1e-6)
    }
}

/// The feet of a model (contact points named `*foot`) in the stance `q` (base placement `base`):
/// their stance heights, trot phase offsets (0 for the front-left/rear-right diagonal, pi for
/// the other, by the sign of the foot's forward times lateral offset in the base frame) and the
/// actuators of their legs' `*_thigh_joint` and `*_calf_joint`.
fn stance_feet(model: &Model, q: &[f64], base: &crate::spatial::Se3) -> Vec<Foot> {
    let mut data = Data::new(model);
    crate::dynamics::forward_kinematics(model, &mut data, q, None);
    let actuator = |body: usize, suffix: &str| {
        model.supports[body].iter().find_map(|&j| {
            let joint = &model.joints[j];
            if joint.name.ends_with(suffix) {
                model.actuated_dofs.iter().position(|&d| d == joint.idx_v)
            } else {
                None
            }
        })
    };
    model
        .contact_points
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name.ends_with("foot"))
        .map(|(i, c)| {
            let p = data.o_m_i[c.body].act_point(&c.position);
            let local = base.rot.transpose() * (p - base.trans);
            Foot {
                contact: i,
                body: c.body,
                z_stand: p.z,
                phase_offset: if local.x * local.y >= 0.0 { 0.0 } else { std::f64::consts::PI },
                thigh: actuator(c.body, "_thigh_joint"),
                calf: actuator(c.body, "_calf_joint"),
            }
        })
        .collect()
}
