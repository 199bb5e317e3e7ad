//! ContactNets: one transition's loss plus its envelope gradient (the inner Clarabel solve with
//! 4 corners in contact, 16 unknowns), a batch of 64 real transitions (one Adam step's loss on
//! one thread) and a 100-step polytope rollout. Reads `../shared/data/cube_tosses`.

use contactlab::learn::contactnets::data::{split, Dataset, SplitSettings, Transition};
use contactlab::learn::contactnets::loss::{transition_loss, LossSettings};
use contactlab::learn::contactnets::model::LearnedModel;
use contactlab::learn::contactnets::train::loss_and_grad;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::path::Path;

fn bench(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/cube_tosses");
    let d = Dataset::load(&dir).expect("cube tosses load");
    let sp = split(&d, &SplitSettings::default());
    let trs = d.transitions(&sp.train[..64]);
    let model = LearnedModel::truth(&d.body);
    let pts = model.vertices();
    let settings = LossSettings::default();
    // A transition with four corners in the problem and a contact impulse.
    let tr: &Transition = trs
        .iter()
        .find(|t| {
            let l = transition_loss(&d.body, &settings, t, &pts, &pts, model.mu);
            l.contacts == 4 && l.impulses.iter().any(|i| i.x > 0.1)
        })
        .expect("a transition with four corners in contact");
    let mut group = c.benchmark_group("contactnets");
    group.bench_function("transition_loss_and_gradient_4_contacts", |b| {
        b.iter(|| transition_loss(&d.body, &settings, black_box(tr), &pts, &pts, model.mu))
    });
    let batch: Vec<&Transition> = trs.iter().step_by(trs.len() / 64).take(64).collect();
    group.sample_size(20);
    group.bench_function("batch_64_loss_and_gradient_1_thread", |b| {
        b.iter(|| loss_and_grad(&model, &settings, black_box(&batch), 1, true))
    });
    let first = d.tosses[sp.test[0]].frames[0];
    group.bench_function("poly_rollout_100_steps", |b| b.iter(|| model.rollout(black_box(&first), 100)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
