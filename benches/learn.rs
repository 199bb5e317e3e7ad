//! Policy learning on `scenes/learn_stand.ron`: one BPTT rollout with its gradient (50 steps of
//! 10 ms: forward step, transition Jacobians, policy VJPs), one BPTT iteration (a batch of 16
//! rollouts on the rayon pool, as `contactlab train bptt` runs it) with each sensitivity, and
//! for scale a plain 50-step rollout of the policy without Jacobians.
//!
//! Run: `cargo bench --no-default-features --bench learn`.

use contactlab::diff::Sensitivity;
use contactlab::learn::bptt::{self, BpttWork};
use contactlab::learn::mlp::Activation;
use contactlab::learn::policy::Policy;
use contactlab::learn::task::Env;
use contactlab::scene::Scene;
use criterion::{criterion_group, criterion_main, Criterion};
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use std::hint::black_box;
use std::path::Path;

fn bench(c: &mut Criterion) {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/learn_stand.ron")).unwrap();
    let task = s.task(s.learn_settings().unwrap()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let policy = Policy::new(&task, &[64, 64], Activation::Tanh, &mut rng);
    let eps = task.episodes(16, 7);
    let relaxed = Sensitivity::Relaxed { kappa: task.spec.kappa, delta: task.spec.delta };
    let mut g = c.benchmark_group("learn");
    g.sample_size(20);
    let mut w = BpttWork::new(&task);
    let mut grad = vec![0.0; policy.mlp.n_params()];
    g.bench_function("bptt_rollout_gradient_relaxed_50_steps", |b| {
        b.iter(|| black_box(bptt::rollout_gradient(&task, &policy, &eps[0], relaxed, &mut w, &mut grad)))
    });
    let mut env = Env::new(&task);
    g.bench_function("baseline_rollout_without_jacobians_50_steps", |b| {
        b.iter(|| black_box(bptt::rollout_loss(&task, &policy, &eps[0], &mut env)))
    });
    for (name, sens) in
        [("bptt_iteration_batch16_relaxed", relaxed), ("bptt_iteration_batch16_exact", Sensitivity::Exact)]
    {
        g.bench_function(name, |b| b.iter(|| black_box(bptt::batch_gradient(&task, &policy, &eps, sens))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
