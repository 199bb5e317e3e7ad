//! Learning from data and through the simulator (DESIGN 6).
//!
//! - [`mlp`]: a small MLP (tanh or ELU) with vector-Jacobian products, and Adam(W);
//! - [`settings`]: the task settings (a scene's `learn` section);
//! - [`task`]: the quadruped tasks both policy learners share (observation, action, cost,
//!   resets, pushes);
//! - [`policy`]: a trained policy with its normalization, JSON files, and how to drive a
//!   simulation with it;
//! - [`bptt`]: backpropagation through time through the contact simulator's transition
//!   Jacobians;
//! - [`gait`]: gait measurements of a walk policy (speed, foot lift, duty factor, footfalls,
//!   cost of transport, push survival);
//! - [`grad_stats`]: BPTT's policy gradient norm and variance against the rollout length, and
//!   the contact changes along the rollouts;
//! - [`smoothed`]: BPTT's policy gradient against a Gaussian-smoothed finite-difference
//!   reference of the rollout loss, with widths matched in action space;
//! - [`ppo`]: the PPO baseline on the same task and simulator;
//! - [`report`]: the `train` and `compare-learning` commands' files (CSV, JSON, PNG);
//! - [`contactnets`]: learning the contact geometry of a tossed cube from real trajectories.

pub mod bptt;
pub mod contactnets;
pub mod gait;
pub mod grad_stats;
pub mod mlp;
pub mod policy;
pub mod ppo;
pub mod report;
pub mod settings;
pub mod smoothed;
pub mod task;

pub use bptt::{train_bptt, BpttSettings, IterLog, TrainResult, TrainStatus};
pub use policy::Policy;
pub use ppo::{train_ppo, PpoSettings};
pub use settings::{
    BpttTaskSettings, CommandSettings, GaitSettings, InitSettings, PushSettings, TaskSettings, TaskWeights,
};
pub use task::{Command, Episode, Task, TaskError, TaskKind};
