//! Analytical derivatives of the rigid-body algorithms:
//! * ABA derivatives (`ddq_dq`, `ddq_dv`, `Minv`) against Pinocchio (`../shared/fixtures/rbd/`);
//! * RNEA derivatives (with and without external point forces) and point-kinematics derivatives
//!   against central finite differences through `integrate`, on random states of the quadruped
//!   (free-flyer) and the hopper (fixed base, prismatic and revolute joints).

use contactlab::dynamics::kinematics_derivatives::add_jt_force;
use contactlab::dynamics::{
    aba_derivatives, forward_kinematics, jt_force_derivative, point_jacobian, point_velocity_derivative, rnea,
    rnea_derivatives, rnea_derivatives_with_forces, PointForce,
};
use contactlab::model::urdf::{load, RootJoint};
use contactlab::model::{builtin, integrate, neutral, normalize, Data, Model};
use contactlab::spatial::ang;
use nalgebra::{DMatrix, DVector, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::Path;

fn rel(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    (a - b).norm() / b.norm().max(1e-12)
}

// ---------------------------------------------------------------- Pinocchio fixtures

fn fixture_check(system: &str) -> [f64; 3] {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/rbd");
    let model = load(&dir.join(format!("urdf/{system}.urdf")), RootJoint::FreeFlyer).expect("URDF loads").model;
    let text = std::fs::read_to_string(dir.join(format!("{system}_set_a.json"))).expect("fixture reads");
    let fx: serde_json::Value = serde_json::from_str(&text).expect("fixture parses");
    let (nq, nv) = (model.nq, model.nv);
    // Map the fixture's q and v indices to ours by joint name.
    let mut perm_q = vec![usize::MAX; nq];
    let mut perm_v = vec![usize::MAX; nv];
    for fj in fx["meta"]["joints"].as_array().unwrap() {
        let j = &model.joints[model.joint_index(fj["name"].as_str().unwrap()).expect("joint exists")];
        for k in 0..j.nq() {
            perm_q[fj["idx_q"].as_u64().unwrap() as usize + k] = j.idx_q + k;
        }
        for k in 0..j.nv() {
            perm_v[fj["idx_v"].as_u64().unwrap() as usize + k] = j.idx_v + k;
        }
    }
    assert!(!perm_q.contains(&usize::MAX) && !perm_v.contains(&usize::MAX));
    let vec = |x: &serde_json::Value, perm: &[usize]| {
        let mut out = DVector::zeros(perm.len());
        for (k, &p) in perm.iter().enumerate() {
            out[p] = x[k].as_f64().unwrap();
        }
        out
    };
    let mat = |x: &serde_json::Value| {
        let mut out = DMatrix::zeros(nv, nv);
        for r in 0..nv {
            for c in 0..nv {
                out[(perm_v[r], perm_v[c])] = x[r][c].as_f64().unwrap();
            }
        }
        out
    };
    let mut data = Data::new(&model);
    let mut worst = [0.0f64; 3];
    let samples = fx["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 10);
    for s in samples {
        let (q, v, tau) = (vec(&s["q"], &perm_q), vec(&s["v"], &perm_v), vec(&s["tau"], &perm_v));
        assert!(aba_derivatives(&model, &mut data, q.as_slice(), v.as_slice(), tau.as_slice()));
        let d = &s["aba_derivatives"];
        let errs = [
            rel(&data.ddq_dq, &mat(&d["ddq_dq"])),
            rel(&data.ddq_dv, &mat(&d["ddq_dv"])),
            rel(&data.minv, &mat(&d["Minv"])),
        ];
        for (w, e) in worst.iter_mut().zip(errs) {
            *w = w.max(e);
        }
    }
    eprintln!("{system}: ddq_dq {:.2e}, ddq_dv {:.2e}, Minv {:.2e}", worst[0], worst[1], worst[2]);
    assert!(worst[0] < 1e-7, "{system}: ddq_dq relative error {:e}", worst[0]);
    assert!(worst[1] < 1e-7, "{system}: ddq_dv relative error {:e}", worst[1]);
    assert!(worst[2] < 1e-9, "{system}: Minv relative error {:e}", worst[2]);
    worst
}

#[test]
fn aba_derivatives_match_pinocchio_free_box() {
    fixture_check("free_box");
}

#[test]
fn aba_derivatives_match_pinocchio_solo12() {
    fixture_check("solo12");
}

#[test]
fn aba_derivatives_match_pinocchio_go1() {
    fixture_check("go1");
}

// ---------------------------------------------------------------- finite differences

const EPS: f64 = 1e-6;
const TOL: f64 = 1e-6;

fn models() -> Vec<Model> {
    vec![builtin::quadruped().unwrap().model, builtin::hopper().unwrap().model]
}

struct State {
    q: DVector<f64>,
    v: DVector<f64>,
    a: DVector<f64>,
}

fn random_state(model: &Model, rng: &mut ChaCha8Rng) -> State {
    let mut q = neutral(model);
    for x in q.iter_mut() {
        *x = rng.random_range(-1.0..1.0);
    }
    normalize(model, q.as_mut_slice());
    let mut r = |n| DVector::from_fn(n, |_, _| rng.random_range(-2.0..2.0));
    State { q, v: r(model.nv), a: r(model.nv) }
}

/// Central differences through `integrate`: column `j` of `d g(q) / d q` (tangent space).
fn fd_dq(model: &Model, q: &DVector<f64>, rows: usize, mut g: impl FnMut(&[f64]) -> DVector<f64>) -> DMatrix<f64> {
    let mut out = DMatrix::zeros(rows, model.nv);
    let (mut qp, mut qm) = (q.clone(), q.clone());
    for j in 0..model.nv {
        let mut dq = DVector::zeros(model.nv);
        dq[j] = EPS;
        integrate(model, q.as_slice(), dq.as_slice(), qp.as_mut_slice());
        dq[j] = -EPS;
        integrate(model, q.as_slice(), dq.as_slice(), qm.as_mut_slice());
        out.set_column(j, &((g(qp.as_slice()) - g(qm.as_slice())) / (2.0 * EPS)));
    }
    out
}

fn fd_dv(model: &Model, v: &DVector<f64>, rows: usize, mut g: impl FnMut(&[f64]) -> DVector<f64>) -> DMatrix<f64> {
    let mut out = DMatrix::zeros(rows, model.nv);
    for j in 0..model.nv {
        let (mut vp, mut vm) = (v.clone(), v.clone());
        vp[j] += EPS;
        vm[j] -= EPS;
        out.set_column(j, &((g(vp.as_slice()) - g(vm.as_slice())) / (2.0 * EPS)));
    }
    out
}

fn check(what: &str, analytic: &DMatrix<f64>, fd: &DMatrix<f64>) -> f64 {
    let e = rel(analytic, fd);
    assert!(e < TOL, "{what}: relative error {e:e}\nanalytic {analytic:.4}\nfd {fd:.4}");
    e
}

#[test]
fn rnea_derivatives_match_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for model in models() {
        let mut data = Data::new(&model);
        let mut fd_data = Data::new(&model);
        let mut worst = [0.0f64; 2];
        for trial in 0..5 {
            let s = random_state(&model, &mut rng);
            rnea_derivatives(&model, &mut data, s.q.as_slice(), s.v.as_slice(), s.a.as_slice());
            // tau itself is rnea's.
            let tau = data.tau.clone();
            rnea(&model, &mut fd_data, s.q.as_slice(), s.v.as_slice(), s.a.as_slice());
            assert!((&tau - &fd_data.tau).norm() < 1e-12 * (1.0 + tau.norm()), "{}: tau", model.name);

            let mut tau_of = |q: &[f64], v: &[f64]| {
                rnea(&model, &mut fd_data, q, v, s.a.as_slice());
                fd_data.tau.clone()
            };
            let fq = fd_dq(&model, &s.q, model.nv, |q| tau_of(q, s.v.as_slice()));
            let fv = fd_dv(&model, &s.v, model.nv, |v| tau_of(s.q.as_slice(), v));
            let what = format!("{} trial {trial}", model.name);
            worst[0] = worst[0].max(check(&format!("{what}: dtau_dq"), &data.dtau_dq, &fq));
            worst[1] = worst[1].max(check(&format!("{what}: dtau_dv"), &data.dtau_dv, &fv));
        }
        eprintln!("{}: dtau_dq {:.2e}, dtau_dv {:.2e}", model.name, worst[0], worst[1]);
    }
}

/// Random material points `(body, position in the body frame)`.
fn random_points(model: &Model, rng: &mut ChaCha8Rng, n: usize) -> Vec<(usize, Vector3<f64>)> {
    (0..n)
        .map(|_| {
            let body = rng.random_range(0..model.nbodies());
            (body, Vector3::from_fn(|_, _| rng.random_range(-0.3..0.3)))
        })
        .collect()
}

#[test]
fn external_force_terms_match_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for model in models() {
        let mut data = Data::new(&model);
        let mut fd_data = Data::new(&model);
        let mut worst = [0.0f64; 2];
        for trial in 0..5 {
            let s = random_state(&model, &mut rng);
            let points = random_points(&model, &mut rng, 3);
            let forces_world: Vec<Vector3<f64>> =
                points.iter().map(|_| Vector3::from_fn(|_, _| rng.random_range(-50.0..50.0))).collect();
            // Pure torques on the first two points' bodies (a sphere foot's contact load), none on
            // the third (a plain point force).
            let torques: Vec<Vector3<f64>> = (0..points.len())
                .map(|i| if i < 2 { Vector3::from_fn(|_, _| rng.random_range(-5.0..5.0)) } else { Vector3::zeros() })
                .collect();
            // Point forces at q: material points fixed in their bodies, forces and torques fixed
            // in the world.
            let at = |d: &mut Data, q: &[f64]| -> Vec<PointForce> {
                forward_kinematics(&model, d, q, None);
                points
                    .iter()
                    .zip(forces_world.iter().zip(&torques))
                    .map(|(&(body, local), (&force, &torque))| PointForce {
                        body,
                        point: d.o_m_i[body].act_point(&local),
                        force,
                        torque,
                    })
                    .collect()
            };
            let pf = at(&mut data, s.q.as_slice());
            rnea_derivatives_with_forces(&model, &mut data, s.q.as_slice(), s.v.as_slice(), s.a.as_slice(), &pf);
            let what = format!("{} trial {trial}", model.name);

            // The whole inverse dynamics with forces: tau = rnea - sum J^T f.
            let mut tau_of = |q: &[f64]| {
                let pf = at(&mut fd_data, q);
                rnea(&model, &mut fd_data, q, s.v.as_slice(), s.a.as_slice());
                let mut tau = fd_data.tau.clone();
                for p in &pf {
                    add_jt_force(&model, &fd_data.o_m_i, p.body, &p.point, &-p.force, tau.as_mut_slice());
                    // - J_w^T t: the world angular axis of every DoF on the body's chain.
                    for &b in &model.supports[p.body] {
                        let j = &model.joints[b];
                        for c in 0..j.nv() {
                            tau[j.idx_v + c] -= (fd_data.o_m_i[b].rot * ang(&j.kind.subspace_col(c))).dot(&p.torque);
                        }
                    }
                }
                tau
            };
            // tau with forces agrees with a plain J^T f built from point_jacobian.
            let tau0 = tau_of(s.q.as_slice());
            assert!((&data.tau - &tau0).norm() < 1e-10 * (1.0 + tau0.norm()), "{what}: tau with forces");
            let fq = fd_dq(&model, &s.q, model.nv, &mut tau_of);
            worst[0] = worst[0].max(check(&format!("{what}: dtau_dq with forces"), &data.dtau_dq, &fq));

            // d(J_p^T f)/dq alone, one point at a time, with J from point_jacobian.
            for (&(body, local), f) in points.iter().zip(&forces_world) {
                forward_kinematics(&model, &mut data, s.q.as_slice(), None);
                let p = data.o_m_i[body].act_point(&local);
                let mut h = DMatrix::zeros(model.nv, model.nv);
                jt_force_derivative(&model, &data.o_m_i, body, &p, f, &mut h);
                let mut jac = DMatrix::zeros(3, model.nv);
                let fd = fd_dq(&model, &s.q, model.nv, |q| {
                    forward_kinematics(&model, &mut fd_data, q, None);
                    let p = fd_data.o_m_i[body].act_point(&local);
                    point_jacobian(&model, &fd_data.o_m_i, body, &p, &mut jac);
                    jac.tr_mul(&DMatrix::from_column_slice(3, 1, f.as_slice())).column(0).into_owned()
                });
                if fd.norm() > 0.0 {
                    worst[1] = worst[1].max(check(&format!("{what}: d(J^T f)/dq body {body}"), &h, &fd));
                }
            }
        }
        eprintln!("{}: dtau_dq with forces {:.2e}, d(J^T f)/dq {:.2e}", model.name, worst[0], worst[1]);
    }
}

#[test]
fn point_kinematics_derivatives_match_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for model in models() {
        let mut data = Data::new(&model);
        let mut fd_data = Data::new(&model);
        let mut worst = [0.0f64; 2];
        for trial in 0..5 {
            let s = random_state(&model, &mut rng);
            for (body, local) in random_points(&model, &mut rng, 3) {
                let what = format!("{} trial {trial} body {body}", model.name);
                forward_kinematics(&model, &mut data, s.q.as_slice(), None);
                let p = data.o_m_i[body].act_point(&local);
                let mut dpv = DMatrix::zeros(3, model.nv);
                point_velocity_derivative(&model, &data.o_m_i, body, &p, s.v.as_slice(), &mut dpv);
                let mut jac = DMatrix::zeros(3, model.nv);
                point_jacobian(&model, &data.o_m_i, body, &p, &mut jac);

                let mut jac_fd = DMatrix::zeros(3, model.nv);
                let fd_vel = fd_dq(&model, &s.q, 3, |q| {
                    forward_kinematics(&model, &mut fd_data, q, None);
                    let p = fd_data.o_m_i[body].act_point(&local);
                    point_jacobian(&model, &fd_data.o_m_i, body, &p, &mut jac_fd);
                    (&jac_fd * &s.v).column(0).into_owned()
                });
                let fd_pos = fd_dq(&model, &s.q, 3, |q| {
                    forward_kinematics(&model, &mut fd_data, q, None);
                    DVector::from_column_slice(fd_data.o_m_i[body].act_point(&local).as_slice())
                });
                worst[0] = worst[0].max(check(&format!("{what}: d(J v)/dq"), &dpv, &fd_vel));
                worst[1] = worst[1].max(check(&format!("{what}: dp/dq = J"), &jac, &fd_pos));
            }
        }
        eprintln!("{}: d(J v)/dq {:.2e}, dp/dq {:.2e}", model.name, worst[0], worst[1]);
    }
}

/// The derivative tests can fail: a deliberately wrong derivative (one column dropped) is
/// caught by the same comparison.
#[test]
fn finite_difference_check_detects_a_wrong_column() {
    let model = builtin::quadruped().unwrap().model;
    let mut data = Data::new(&model);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let s = random_state(&model, &mut rng);
    rnea_derivatives(&model, &mut data, s.q.as_slice(), s.v.as_slice(), s.a.as_slice());
    let mut fd_data = Data::new(&model);
    let fq = fd_dq(&model, &s.q, model.nv, |q| {
        rnea(&model, &mut fd_data, q, s.v.as_slice(), s.a.as_slice());
        fd_data.tau.clone()
    });
    let mut wrong = data.dtau_dq.clone();
    wrong.column_mut(4).fill(0.0);
    assert!(rel(&wrong, &fq) > 100.0 * TOL);
}
