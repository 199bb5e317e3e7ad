//! Closed-loop contact-implicit MPC, headless: the quadruped holds its stance under the lateral
//! pull of scenes/mpc_pull.ron and recovers (base back within 2 cm of its target within 2 s
//! after the pull ends, and stays there).

use contactlab::ocp::mpc::run_closed_loop;
use contactlab::ocp::Status;
use contactlab::scene::Scene;
use std::path::Path;

#[test]
fn mpc_rejects_the_shipped_pull_and_recovers() {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_pull.ron")).unwrap();
    let mut seen = 0;
    let r = run_closed_loop(&s, None, None, None, None, &mut |_| seen += 1).unwrap();
    let m = &r.summary;
    eprintln!("{m:?}");
    assert_eq!(seen, r.cycles.len());
    assert!(m.recovered, "{m:?}");
    let spec = s.file.mpc.as_ref().unwrap();
    let pull_end = s.pulls.iter().map(|p| p.start + p.duration).fold(0.0, f64::max);
    // Recovered within 2 s of the pull's end and stayed within 2 cm until the end of the run.
    assert!(m.recovery_time_s.unwrap() <= 2.0 && m.duration_s >= pull_end + 2.0 - 1e-9);
    assert!(r.trace.iter().filter(|t| t.0 >= pull_end + spec.recovery_time).all(|t| t.2 <= 0.02));
    // The pull mattered: the base was pushed off its target by more than the tolerance.
    assert!(m.max_base_error_m > 0.02, "{m:?}");
    assert!(m.final_base_error_m < 0.02);
    assert!(r.cycles.iter().all(|c| c.status != Status::NonFinite), "a replan failed");
    // The last plan is there for a viewer: one knot per horizon knot plus the final one, four feet.
    assert_eq!(r.last_plan.len(), m.horizon_knots + 1);
    assert!(r.last_plan.iter().all(|k| k.feet.len() == 4 && k.base.iter().all(|x| x.is_finite())));
}
