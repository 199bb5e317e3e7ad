//! Learning from data and through the simulator (DESIGN 6). So far: ContactNets, learning the
//! contact geometry of a tossed cube from real trajectories.

pub mod contactnets;
