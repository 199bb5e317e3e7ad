//! placeholder: the forward cone-complementarity solver (being written).
