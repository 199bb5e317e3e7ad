//! Conservation laws of the rigid-body dynamics in free flight, integrated with classical RK4
//! on `(q, v)` (quaternion rate `0.5 q ⊗ (w, 0)`, re-normalized each step) so that the
//! integrator's own error (O(h^4)) is far below the tolerance and what is tested is `aba`.

use contactlab::dynamics::{aba, center_of_mass, forward_kinematics, kinetic_energy, spatial_momentum};
use contactlab::model::builtin;
use contactlab::model::{normalize, Data, JointKind, Model};
use nalgebra::{DVector, Quaternion, UnitQuaternion, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

/// `qdot` in coordinates for body-frame base twist `v`.
fn qdot(model: &Model, q: &DVector<f64>, v: &DVector<f64>) -> DVector<f64> {
    let mut out = DVector::zeros(model.nq);
    for j in &model.joints {
        let (iq, iv) = (j.idx_q, j.idx_v);
        match j.kind {
            JointKind::FreeFlyer => {
                let quat = UnitQuaternion::from_quaternion(Quaternion::new(q[iq + 6], q[iq + 3], q[iq + 4], q[iq + 5]));
                let pdot = quat * Vector3::new(v[iv], v[iv + 1], v[iv + 2]);
                let w = Quaternion::new(0.0, v[iv + 3], v[iv + 4], v[iv + 5]);
                let qd = quat.into_inner() * w * 0.5;
                out.rows_mut(iq, 3).copy_from(&pdot);
                out[iq + 3] = qd.i;
                out[iq + 4] = qd.j;
                out[iq + 5] = qd.k;
                out[iq + 6] = qd.w;
            }
            _ => out[iq] = v[iv],
        }
    }
    out
}

fn accel(model: &Model, data: &mut Data, q: &DVector<f64>, v: &DVector<f64>) -> DVector<f64> {
    let tau = DVector::zeros(model.nv);
    assert!(aba(model, data, q.as_slice(), v.as_slice(), tau.as_slice()));
    data.ddq.clone()
}

fn rk4(model: &Model, data: &mut Data, q: &mut DVector<f64>, v: &mut DVector<f64>, h: f64) {
    let mut f = |q: &DVector<f64>, v: &DVector<f64>| (qdot(model, q, v), accel(model, data, q, v));
    let (k1q, k1v) = f(q, v);
    let (k2q, k2v) = f(&(&*q + &k1q * (h / 2.0)), &(&*v + &k1v * (h / 2.0)));
    let (k3q, k3v) = f(&(&*q + &k2q * (h / 2.0)), &(&*v + &k2v * (h / 2.0)));
    let (k4q, k4v) = f(&(&*q + &k3q * h), &(&*v + &k3v * h));
    *q += (k1q + k2q * 2.0 + k3q * 2.0 + k4q) * (h / 6.0);
    *v += (k1v + k2v * 2.0 + k3v * 2.0 + k4v) * (h / 6.0);
    normalize(model, q.as_mut_slice());
}

fn random_state(model: &Model, seed: u64) -> (DVector<f64>, DVector<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut q = contactlab::model::neutral(model);
    for j in &model.joints {
        match j.kind {
            JointKind::FreeFlyer => {
                for k in 0..7 {
                    q[j.idx_q + k] = rng.random_range(-1.0..1.0);
                }
            }
            _ => q[j.idx_q] = rng.random_range(j.limits.lower.max(-1.0)..j.limits.upper.min(1.0)),
        }
    }
    normalize(model, q.as_mut_slice());
    let v = DVector::from_fn(model.nv, |_, _| rng.random_range(-1.0..1.0));
    (q, v)
}

#[test]
fn energy_and_momentum_are_conserved_without_gravity() {
    let mut model = builtin::quadruped().unwrap().model;
    model.gravity = Vector3::zeros();
    let mut data = Data::new(&model);
    for seed in 0..2 {
        let (mut q, mut v) = random_state(&model, seed);
        forward_kinematics(&model, &mut data, q.as_slice(), Some(v.as_slice()));
        let (e0, h0) = (kinetic_energy(&model, &data), spatial_momentum(&model, &data));
        let h = 5e-4;
        for _ in 0..(10.0 / h) as usize {
            rk4(&model, &mut data, &mut q, &mut v, h);
        }
        forward_kinematics(&model, &mut data, q.as_slice(), Some(v.as_slice()));
        let (e1, h1) = (kinetic_energy(&model, &data), spatial_momentum(&model, &data));
        let de = (e1 - e0).abs() / e0;
        let dh = (h1 - h0).norm() / h0.norm();
        assert!(de < 1e-6, "seed {seed}: energy drift {de:e}");
        assert!(dh < 1e-6, "seed {seed}: momentum drift {dh:e}");
    }
}

#[test]
fn centre_of_mass_follows_the_parabola() {
    let model = builtin::quadruped().unwrap().model;
    let mut data = Data::new(&model);
    let (mut q, mut v) = random_state(&model, 7);
    forward_kinematics(&model, &mut data, q.as_slice(), Some(v.as_slice()));
    let c0 = center_of_mass(&model, &data);
    let m = model.total_mass();
    let vc0 = spatial_momentum(&model, &data).fixed_rows::<3>(0) / m;
    let (h, steps) = (1e-3, 2000);
    for _ in 0..steps {
        rk4(&model, &mut data, &mut q, &mut v, h);
    }
    forward_kinematics(&model, &mut data, q.as_slice(), Some(v.as_slice()));
    let t = h * steps as f64;
    let expected = c0 + vc0 * t + 0.5 * model.gravity * t * t;
    let err = (center_of_mass(&model, &data) - expected).norm();
    assert!(err < 1e-6 * expected.norm().max(1.0), "COM off the parabola by {err:e} m");
}
