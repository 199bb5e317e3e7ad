//! Contact: terrain, contact points, problem assembly and the forward solver.

pub mod solver;
