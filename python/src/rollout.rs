//! Batch rollouts on every core with the GIL released, optionally with every step's Jacobians.

use crate::model::PyModel;
use crate::{check_friction, parse_sensitivity, value_error};
use contactlab::contact::Terrain;
use contactlab::diff::{transition_jacobians as rust_transition_jacobians, TransitionStatus, TransitionWorkspace};
use contactlab::model::Model;
use contactlab::sim::{step, StepSettings, StepWorkspace};
use nalgebra::DMatrix;
use numpy::{PyArray1, PyArray3, PyArray4, PyArrayMethods, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::sync::Arc;

/// `(states, steps)` of [`rollout`].
pub(crate) type Rollouts<'py> = (Bound<'py, PyArray3<f64>>, Bound<'py, PyArray1<u64>>);
/// `(states, A, B, steps)` of [`rollout_jacobians`].
pub(crate) type JacobianRollouts<'py> =
    (Bound<'py, PyArray3<f64>>, Bound<'py, PyArray4<f64>>, Bound<'py, PyArray4<f64>>, Bound<'py, PyArray1<u64>>);

/// The checked inputs of a batch of rollouts: `n` starts (rows of `x0s`, `nx = nq + nv` each)
/// and `t` steps of `nu` torques per start, owned, so the rollouts can run without the GIL.
struct Batch {
    m: Arc<Model>,
    n: usize,
    t: usize,
    nx: usize,
    settings: StepSettings,
    terrain: Terrain,
    x0: Vec<Vec<f64>>,
    controls: Vec<Vec<f64>>,
}

impl Batch {
    fn new(
        model: &PyModel,
        x0s: &PyReadonlyArray2<'_, f64>,
        us: &PyReadonlyArray3<'_, f64>,
        dt: f64,
        friction: f64,
    ) -> PyResult<Self> {
        let m = model.inner.clone();
        let (x0, u) = (x0s.as_array(), us.as_array());
        let (n, nx) = (x0.shape()[0], x0.shape()[1]);
        if nx != m.nq + m.nv {
            return Err(value_error(format!("x0s: expected {} columns (nq + nv), got {nx}", m.nq + m.nv)));
        }
        let (un, t, unu) = (u.shape()[0], u.shape()[1], u.shape()[2]);
        if un != n || unu != m.nu {
            return Err(value_error(format!("us: expected shape ({n}, T, {}), got ({un}, {t}, {unu})", m.nu)));
        }
        let settings = StepSettings { dt, ..StepSettings::default() };
        settings.validate().map_err(value_error)?;
        check_friction(friction)?;
        Ok(Self {
            n,
            t,
            nx,
            settings,
            terrain: Terrain::flat(friction),
            x0: (0..n).map(|i| x0.row(i).to_vec()).collect(),
            controls: (0..n).map(|i| u.index_axis(numpy::ndarray::Axis(0), i).iter().copied().collect()).collect(),
            m,
        })
    }
}

/// Rollouts of `model` on flat ground from `x0s` (N x (nq + nv)) under open-loop torques `us`
/// (N x T x nu), all in parallel on every core with the GIL released. Returns the states
/// (N x (T + 1) x (nq + nv); NaN after a failed step) and the steps each rollout advanced (N).
/// Every step starts cold, so a rollout is a function of its inputs alone.
#[pyfunction]
#[pyo3(signature = (model, x0s, us, dt = 0.002, friction = 0.8))]
pub(crate) fn rollout<'py>(
    py: Python<'py>,
    model: &PyModel,
    x0s: PyReadonlyArray2<'_, f64>,
    us: PyReadonlyArray3<'_, f64>,
    dt: f64,
    friction: f64,
) -> PyResult<Rollouts<'py>> {
    let Batch { m, n, t, nx, settings, terrain, x0, controls } = Batch::new(model, &x0s, &us, dt, friction)?;
    let (nq, nv, nu) = (m.nq, m.nv, m.nu);
    if n.saturating_mul(t + 1).saturating_mul(nx) > 500_000_000 {
        return Err(value_error("rollout: more than 5e8 state values requested"));
    }
    let results: Vec<(Vec<f64>, u64)> = py.detach(|| {
        x0.par_iter()
            .zip(controls.par_iter())
            .map(|(x, c)| {
                let mut ws = StepWorkspace::new(&m);
                let mut states = vec![f64::NAN; (t + 1) * nx];
                states[..nx].copy_from_slice(x);
                let (mut qn, mut vn) = (vec![0.0; nq], vec![0.0; nv]);
                let zeros = vec![0.0; nv];
                let mut advanced = 0u64;
                for k in 0..t {
                    let (cur, next) = states.split_at_mut((k + 1) * nx);
                    let cur = &cur[k * nx..];
                    ws.reset_warm_start();
                    let info = step(
                        &m,
                        &terrain,
                        &settings,
                        &mut ws,
                        &cur[..nq],
                        &cur[nq..],
                        &c[k * nu..(k + 1) * nu],
                        &zeros,
                        &mut qn,
                        &mut vn,
                    );
                    if !info.status.advanced() {
                        break;
                    }
                    next[..nq].copy_from_slice(&qn);
                    next[nq..nx].copy_from_slice(&vn);
                    advanced += 1;
                }
                (states, advanced)
            })
            .collect()
    });
    let flat: Vec<f64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    let steps: Vec<u64> = results.iter().map(|r| r.1).collect();
    let states = PyArray1::from_vec(py, flat).reshape([n, t + 1, nx]).map_err(value_error)?;
    Ok((states, PyArray1::from_vec(py, steps)))
}

/// [`rollout`] that also returns every step's transition Jacobians with the named sensitivity:
/// `(states, A, B, steps)` with `A` N x T x 2nv x 2nv and `B` N x T x 2nv x nu (NaN after a failed
/// step, and at a step whose sensitivity system failed). The states are those of [`rollout`],
/// bit for bit (the same cold steps).
#[pyfunction]
#[pyo3(signature = (model, x0s, us, sensitivity = "relaxed", kappa = 1e-4, delta = 1e-3, dt = 0.002, friction = 0.8))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rollout_jacobians<'py>(
    py: Python<'py>,
    model: &PyModel,
    x0s: PyReadonlyArray2<'_, f64>,
    us: PyReadonlyArray3<'_, f64>,
    sensitivity: &str,
    kappa: f64,
    delta: f64,
    dt: f64,
    friction: f64,
) -> PyResult<JacobianRollouts<'py>> {
    let sens = parse_sensitivity(sensitivity, kappa, delta)?;
    let Batch { m, n, t, nx, settings, terrain, x0, controls } = Batch::new(model, &x0s, &us, dt, friction)?;
    let (nq, nv, nu) = (m.nq, m.nv, m.nu);
    let per = 2 * nv * (2 * nv + nu);
    if n.saturating_mul(t).saturating_mul(per) > 200_000_000 {
        return Err(value_error("rollout_jacobians: more than 2e8 Jacobian entries requested"));
    }
    type One = (Vec<f64>, Vec<f64>, Vec<f64>, u64);
    let results: Vec<One> = py.detach(|| {
        x0.par_iter()
            .zip(controls.par_iter())
            .map(|(x, c)| {
                let mut ws = StepWorkspace::new(&m);
                let mut tw = TransitionWorkspace::new(&m);
                let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
                let mut states = vec![f64::NAN; (t + 1) * nx];
                let mut aa = vec![f64::NAN; t * 4 * nv * nv];
                let mut bb = vec![f64::NAN; t * 2 * nv * nu];
                states[..nx].copy_from_slice(x);
                let zeros = vec![0.0; nv];
                let mut advanced = 0u64;
                for k in 0..t {
                    let (cur, next) = states.split_at_mut((k + 1) * nx);
                    let cur = &cur[k * nx..];
                    ws.reset_warm_start();
                    let info = rust_transition_jacobians(
                        &m,
                        &terrain,
                        &settings,
                        &mut ws,
                        &mut tw,
                        (&cur[..nq], &cur[nq..], &c[k * nu..(k + 1) * nu], &zeros),
                        sens,
                        &mut a,
                        &mut b,
                    );
                    if !info.step.status.advanced() {
                        break;
                    }
                    // A step that advanced but whose sensitivity system failed leaves A, B
                    // unspecified: those knots keep their NaN.
                    let usable = matches!(info.status, TransitionStatus::Ok | TransitionStatus::BackwardNotConverged)
                        && a.iter().chain(b.iter()).all(|x| x.is_finite());
                    next[..nq].copy_from_slice(tw.q_next.as_slice());
                    next[nq..nx].copy_from_slice(tw.v_next.as_slice());
                    // Row-major blocks, as NumPy lays them out.
                    for r in (0..2 * nv).filter(|_| usable) {
                        for col in 0..2 * nv {
                            aa[k * 4 * nv * nv + r * 2 * nv + col] = a[(r, col)];
                        }
                        for col in 0..nu {
                            bb[k * 2 * nv * nu + r * nu + col] = b[(r, col)];
                        }
                    }
                    advanced += 1;
                }
                (states, aa, bb, advanced)
            })
            .collect()
    });
    let flat = |f: &dyn Fn(&One) -> &Vec<f64>| results.iter().flat_map(|r| f(r).iter().copied()).collect::<Vec<f64>>();
    let states = PyArray1::from_vec(py, flat(&|r| &r.0)).reshape([n, t + 1, nx]).map_err(value_error)?;
    let a = PyArray1::from_vec(py, flat(&|r| &r.1)).reshape([n, t, 2 * nv, 2 * nv]).map_err(value_error)?;
    let b = PyArray1::from_vec(py, flat(&|r| &r.2)).reshape([n, t, 2 * nv, nu]).map_err(value_error)?;
    let steps: Vec<u64> = results.iter().map(|r| r.3).collect();
    Ok((states, a, b, PyArray1::from_vec(py, steps)))
}
