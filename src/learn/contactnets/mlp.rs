//! The MLP and Adam(W) of ContactNets are the general ones of [`crate::learn::mlp`] (tanh hidden
//! layers, the same parameter layout, initialization and file format).

pub use crate::learn::mlp::{Adam, Mlp, MlpCache};
