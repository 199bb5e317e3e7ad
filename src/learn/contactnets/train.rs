//! Training: mini-batch Adam(W) on the mean ContactNets loss (poly, deep) or the mean squared
//! normalized velocity error (e2e), with early stopping on the validation loss.
//!
//! Every `eval_every` steps the validation loss is computed on the validation transitions; the
//! parameters with the best validation loss so far are kept, and training stops after
//! `patience` evaluations without improvement or at `steps`. The cost of a run is thus bounded by
//! the number of steps times the batch size, not by the amount of data.
//!
//! Parameters: poly `theta = (c_1..c_V, mu)`; deep adds the correction MLP's weights; e2e is
//! the MLP alone. Weight decay (AdamW) applies to MLP weights only: decaying vertex positions
//! would shrink the polytope. `mu` is kept in `[0.01, 2]` after each step.

use super::data::{split, Body, Dataset, Split, SplitSettings, Transition};
use super::loss::{transition_loss, InnerStatus, LossSettings};
use super::mlp::{Adam, Mlp, MlpCache};
use super::model::{E2eNet, LearnedModel, Method, E2E_INPUTS};
use crate::validate::{Checker, SettingsError};
use nalgebra::Vector3;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

/// Settings of a training run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainSettings {
    pub method: Method,
    /// Seed of the initialization and the batch order. Default 0.
    pub seed: u64,
    /// Maximum number of Adam steps. Default 3000.
    pub steps: usize,
    /// Transitions per step. Default 64.
    pub batch: usize,
    /// Adam learning rate of the vertices, `mu` and the deep correction. Default 5e-3.
    pub lr: f64,
    /// Adam learning rate of the e2e network. Default 1e-3.
    pub lr_e2e: f64,
    /// Decoupled weight decay of MLP weights (per step, times the learning rate). Default 1e-2.
    pub weight_decay: f64,
    /// Steps between validation evaluations. Default 50.
    pub eval_every: usize,
    /// Evaluations without improvement before stopping. Default 6.
    pub patience: usize,
    /// Factor on the learning rate after every evaluation without improvement (reduce on
    /// plateau: mini-batch noise, not bias, is what stalls the validation loss). Default 0.7.
    pub plateau_decay: f64,
    /// Initial vertices: the body's vertices plus uniform noise in `[-init_noise, init_noise]`
    /// per coordinate (scaled units). Default 0.3.
    pub init_noise: f64,
    /// Initial friction coefficient. Default 0.3.
    pub init_mu: f64,
    /// Hidden widths of the deep correction. Default [32, 32].
    pub deep_hidden: Vec<usize>,
    /// Scale `s` of the deep correction (scaled units). Default 0.1.
    pub correction_scale: f64,
    /// Hidden widths of the e2e network. Default [128, 128].
    pub e2e_hidden: Vec<usize>,
    pub loss: LossSettings,
    /// Worker threads for the loss (std::thread::scope). Default 2.
    pub threads: usize,
}

impl Default for TrainSettings {
    fn default() -> Self {
        Self {
            method: Method::Poly,
            seed: 0,
            steps: 3000,
            batch: 64,
            lr: 5e-3,
            lr_e2e: 1e-3,
            weight_decay: 1e-2,
            eval_every: 50,
            patience: 6,
            plateau_decay: 0.7,
            init_noise: 0.3,
            init_mu: 0.3,
            deep_hidden: vec![32, 32],
            correction_scale: 0.1,
            e2e_hidden: vec![128, 128],
            loss: LossSettings::default(),
            threads: 2,
        }
    }
}

impl TrainSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        Checker::new("TrainSettings")
            .count("steps", self.steps, 1, usize::MAX)
            .count("batch", self.batch, 1, 1 << 20)
            .count("eval_every", self.eval_every, 1, usize::MAX)
            .count("threads", self.threads, 1, 1024)
            .positive("lr", self.lr)
            .positive("lr_e2e", self.lr_e2e)
            .non_negative("weight_decay", self.weight_decay)
            .non_negative("init_noise", self.init_noise)
            .non_negative("correction_scale", self.correction_scale)
            .check(self.plateau_decay > 0.0 && self.plateau_decay <= 1.0, "plateau_decay", || {
                format!("{} is out of range: allowed (0, 1]", self.plateau_decay)
            })
            .positive("init_mu", self.init_mu)
            .finish()?;
        self.loss.validate().map_err(|e| e.within("TrainSettings", "loss"))
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrainStatus {
    /// The step budget was used up.
    #[default]
    Finished,
    /// The validation loss stopped improving for `patience` evaluations.
    EarlyStopped,
    /// Stopped through [`TrainMonitor::cancel`]; the model is the best one so far.
    Cancelled,
}

/// What happened in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    #[serde(default)]
    pub status: TrainStatus,
    pub steps: usize,
    pub best_step: usize,
    pub best_valid: f64,
    /// `(step, mean batch loss since the last evaluation, validation loss)`.
    pub history: Vec<(usize, f64, f64)>,
    /// Inner solves that failed (their transitions contribute no gradient).
    pub failed_solves: usize,
    pub wall_seconds: f64,
}

/// The initial model of a run.
pub fn init_model(body: &Body, settings: &TrainSettings) -> LearnedModel {
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
    let mut vertices = body.vertices.clone();
    if settings.method != Method::E2e && settings.init_noise > 0.0 {
        for v in vertices.iter_mut().flatten() {
            *v += rng.random_range(-settings.init_noise..settings.init_noise);
        }
    }
    let mut m = LearnedModel {
        method: settings.method,
        body: body.clone(),
        vertices,
        mu: if settings.method == Method::E2e { body.mu } else { settings.init_mu },
        correction: None,
        correction_scale: 0.0,
        e2e: None,
        info: serde_json::Value::Null,
    };
    match settings.method {
        Method::Poly => {}
        Method::Deep => {
            let mut sizes = vec![3];
            sizes.extend(&settings.deep_hidden);
            sizes.push(m.vertices.len());
            // Zero last layer: the deep model starts as the polytope.
            m.correction = Some(Mlp::new(&sizes, &mut rng, 0.0));
            m.correction_scale = settings.correction_scale;
        }
        Method::E2e => {
            let mut sizes = vec![E2E_INPUTS];
            sizes.extend(&settings.e2e_hidden);
            sizes.push(6);
            m.e2e = Some(E2eNet {
                mlp: Mlp::new(&sizes, &mut rng, 0.1),
                in_mean: vec![0.0; E2E_INPUTS],
                in_std: vec![1.0; E2E_INPUTS],
                out_mean: vec![0.0; 6],
                out_std: vec![1.0; 6],
            });
        }
    }
    m
}

/// The flat parameter vector of a model.
pub fn params(m: &LearnedModel) -> Vec<f64> {
    match m.method {
        Method::E2e => m.e2e.as_ref().map(|e| e.mlp.params.clone()).unwrap_or_default(),
        _ => {
            let mut p: Vec<f64> = m.vertices.iter().flatten().copied().collect();
            p.push(m.mu);
            if let Some(c) = &m.correction {
                p.extend(&c.params);
            }
            p
        }
    }
}

pub fn set_params(m: &mut LearnedModel, p: &[f64]) {
    match m.method {
        Method::E2e => {
            if let Some(e) = m.e2e.as_mut() {
                e.mlp.params.copy_from_slice(p);
            }
        }
        _ => {
            let nv = m.vertices.len();
            for (i, v) in m.vertices.iter_mut().enumerate() {
                v.copy_from_slice(&p[3 * i..3 * i + 3]);
            }
            m.mu = p[3 * nv];
            if let Some(c) = m.correction.as_mut() {
                c.params.copy_from_slice(&p[3 * nv + 1..]);
            }
        }
    }
}

/// Mean loss over `batch` and its gradient with respect to [`params`]; also the number of
/// failed inner solves. Runs on `threads` scoped threads.
pub fn loss_and_grad(
    m: &LearnedModel,
    loss: &LossSettings,
    batch: &[&Transition],
    threads: usize,
    want_grad: bool,
) -> (f64, Vec<f64>, usize) {
    let n = params(m).len();
    if batch.is_empty() {
        return (0.0, vec![0.0; n], 0);
    }
    let chunk = batch.len().div_ceil(threads.max(1));
    let parts: Vec<(f64, Vec<f64>, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> =
            batch.chunks(chunk).map(|c| s.spawn(move || chunk_loss(m, loss, c, n, want_grad))).collect();
        handles.into_iter().map(|h| h.join().expect("loss worker panicked")).collect()
    });
    let mut value = 0.0;
    let mut grad = vec![0.0; n];
    let mut failed = 0;
    for (v, g, f) in parts {
        value += v;
        failed += f;
        for (a, b) in grad.iter_mut().zip(g) {
            *a += b;
        }
    }
    let inv = 1.0 / batch.len() as f64;
    grad.iter_mut().for_each(|g| *g *= inv);
    (value * inv, grad, failed)
}

fn chunk_loss(
    m: &LearnedModel,
    loss: &LossSettings,
    batch: &[&Transition],
    n: usize,
    want_grad: bool,
) -> (f64, Vec<f64>, usize) {
    let mut grad = vec![0.0; n];
    let (mut value, mut failed) = (0.0, 0);
    match m.method {
        Method::E2e => {
            let net = m.e2e.as_ref().expect("e2e model has its network");
            let mut cache = MlpCache::default();
            for tr in batch {
                let (x, y) = e2e_sample(net, &m.body, tr);
                let out = net.mlp.forward(&x, &mut cache);
                let gy: Vec<f64> = out.iter().zip(&y).map(|(a, b)| 2.0 * (a - b) / 6.0).collect();
                value += out.iter().zip(&y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / 6.0;
                if want_grad {
                    net.mlp.backward(&cache, &gy, &mut grad);
                }
            }
        }
        _ => {
            let nvert = m.vertices.len();
            let mut cache = MlpCache::default();
            for tr in batch {
                let start = m.vertices_at(&tr.r0);
                let end = m.vertices_at(&tr.r1);
                let l = transition_loss(&m.body, loss, tr, &start, &end, m.mu);
                if l.status == InnerStatus::Failed {
                    failed += 1;
                    continue;
                }
                value += l.value;
                if !want_grad {
                    continue;
                }
                for i in 0..nvert {
                    let g = l.grad_start[i] + l.grad_end[i];
                    for k in 0..3 {
                        grad[3 * i + k] += g[k];
                    }
                }
                grad[3 * nvert] += l.grad_mu;
                if let Some(c) = &m.correction {
                    // phi and J move with c_i(q) = c_i + s delta_i(d) d: d V / d delta_i = s g_i . d.
                    for (r, g) in [(&tr.r0, &l.grad_start), (&tr.r1, &l.grad_end)] {
                        let d: Vector3<f64> = r.row(2).transpose();
                        let gy: Vec<f64> = g.iter().map(|gi| m.correction_scale * gi.dot(&d)).collect();
                        if gy.iter().all(|x| *x == 0.0) {
                            continue;
                        }
                        c.forward(d.as_slice(), &mut cache);
                        c.backward(&cache, &gy, &mut grad[3 * nvert + 1..]);
                    }
                }
            }
        }
    }
    (value, grad, failed)
}

/// Normalized e2e input and target of a transition.
fn e2e_sample(net: &E2eNet, body: &Body, tr: &Transition) -> (Vec<f64>, Vec<f64>) {
    let x = net.normalize(&E2eNet::features(tr.pz0, &tr.r0, &tr.nu0));
    let mut d = tr.nu1 - tr.nu0;
    d[2] += body.dt * body.g;
    let y = (0..6).map(|i| (d[i] - net.out_mean[i]) / net.out_std[i]).collect();
    (x, y)
}

/// Sets the e2e normalization from the training transitions.
fn fit_normalization(m: &mut LearnedModel, train: &[Transition]) {
    let body = m.body.clone();
    let Some(net) = m.e2e.as_mut() else { return };
    let n = train.len().max(1) as f64;
    let xs: Vec<[f64; E2E_INPUTS]> = train.iter().map(|t| E2eNet::features(t.pz0, &t.r0, &t.nu0)).collect();
    let ys: Vec<[f64; 6]> = train
        .iter()
        .map(|t| {
            let mut d = t.nu1 - t.nu0;
            d[2] += body.dt * body.g;
            [d[0], d[1], d[2], d[3], d[4], d[5]]
        })
        .collect();
    let stats = |cols: usize, get: &dyn Fn(usize, usize) -> f64| -> (Vec<f64>, Vec<f64>) {
        let mean: Vec<f64> = (0..cols).map(|c| (0..train.len()).map(|r| get(r, c)).sum::<f64>() / n).collect();
        let std: Vec<f64> = (0..cols)
            .map(|c| {
                let var = (0..train.len()).map(|r| (get(r, c) - mean[c]).powi(2)).sum::<f64>() / n;
                var.sqrt().max(1e-3)
            })
            .collect();
        (mean, std)
    };
    (net.in_mean, net.in_std) = stats(E2E_INPUTS, &|r, c| xs[r][c]);
    (net.out_mean, net.out_std) = stats(6, &|r, c| ys[r][c]);
}

/// Lets a caller that runs [`train_monitored`] on another thread (the app) follow and stop it.
/// Watching changes nothing in the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrainMonitor<'a> {
    /// Checked before every step; when set, the run stops with [`TrainStatus::Cancelled`].
    pub cancel: Option<&'a AtomicBool>,
    /// The number of finished steps.
    pub steps: Option<&'a AtomicUsize>,
}

/// A run on the first tosses of a dataset's split ([`train_on_split`]).
pub struct SplitRun {
    pub model: LearnedModel,
    pub report: TrainReport,
    /// The split (seeded by `settings.seed`) the run drew its tosses from.
    pub split: Split,
    pub train_transitions: usize,
}

/// Trains on the first `tosses` training tosses of `data`'s duplicate-aware split seeded by
/// `settings.seed` (validation: [`Split::first`]), as `contactlab contactnets train` and the
/// app's ContactNets window do, and records the run (data, tosses, seed, the training tosses'
/// names, report) in the model's `info`.
pub fn train_on_split(
    data: &Dataset,
    tosses: usize,
    settings: &TrainSettings,
    monitor: TrainMonitor,
) -> Result<SplitRun, String> {
    let sp = split(data, &SplitSettings { seed: settings.seed, ..Default::default() });
    let Some((train_idx, valid_idx)) = sp.first(tosses) else {
        return Err(format!(
            "training tosses: must be in 1..={} (the training split of {}), got {tosses}",
            sp.train.len(),
            data.dir.display()
        ));
    };
    let (tr, va) = (data.transitions(train_idx), data.transitions(valid_idx));
    let (mut model, report) = train_monitored(&data.body, &tr, &va, settings, monitor)?;
    model.info = serde_json::json!({
        "data": data.dir.display().to_string(),
        "tosses": tosses,
        "seed": settings.seed,
        "train_tosses": train_idx.iter().map(|&i| data.tosses[i].name.clone()).collect::<Vec<_>>(),
        "valid_tosses": valid_idx.len(),
        "train_transitions": tr.len(),
        "report": report,
    });
    let train_transitions = tr.len();
    Ok(SplitRun { model, report, split: sp, train_transitions })
}

/// Trains a model of `settings.method` on `train`, stopping early on `valid`.
pub fn train(
    body: &Body,
    train: &[Transition],
    valid: &[Transition],
    settings: &TrainSettings,
) -> Result<(LearnedModel, TrainReport), String> {
    train_monitored(body, train, valid, settings, TrainMonitor::default())
}

/// [`train`], reporting progress to and stopping on request from `monitor`.
pub fn train_monitored(
    body: &Body,
    train: &[Transition],
    valid: &[Transition],
    settings: &TrainSettings,
    monitor: TrainMonitor,
) -> Result<(LearnedModel, TrainReport), String> {
    settings.validate().map_err(|e| e.to_string())?;
    if train.is_empty() {
        return Err("no training transitions".into());
    }
    let started = Instant::now();
    let mut m = init_model(body, settings);
    if m.method == Method::E2e {
        fit_normalization(&mut m, train);
    }
    let mut theta = params(&m);
    let (lr, structured) = match m.method {
        Method::E2e => (settings.lr_e2e, 0),
        _ => (settings.lr, 3 * m.vertices.len() + 1),
    };
    let mut adam = Adam::new(theta.len(), lr);
    for d in adam.decay.iter_mut().skip(structured) {
        *d = settings.weight_decay;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut pos = order.len();
    let valid_refs: Vec<&Transition> = valid.iter().collect();
    let mut report = TrainReport { best_valid: f64::INFINITY, ..TrainReport::default() };
    let mut best = theta.clone();
    let mut since_best = 0;
    let (mut run_loss, mut run_n) = (0.0, 0usize);
    let mu_index = if m.method == Method::E2e { None } else { Some(3 * m.vertices.len()) };
    for step in 1..=settings.steps {
        if monitor.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            report.status = TrainStatus::Cancelled;
            break;
        }
        let mut batch = Vec::with_capacity(settings.batch);
        while batch.len() < settings.batch.min(train.len()) {
            if pos == order.len() {
                order.shuffle(&mut rng);
                pos = 0;
            }
            batch.push(&train[order[pos]]);
            pos += 1;
        }
        let (value, grad, failed) = loss_and_grad(&m, &settings.loss, &batch, settings.threads, true);
        report.failed_solves += failed;
        run_loss += value;
        run_n += 1;
        adam.step(&mut theta, &grad);
        if let Some(i) = mu_index {
            theta[i] = theta[i].clamp(0.01, 2.0);
        }
        set_params(&mut m, &theta);
        report.steps = step;
        if let Some(n) = monitor.steps {
            n.store(step, Ordering::Relaxed);
        }
        if step % settings.eval_every == 0 || step == settings.steps {
            let v = if valid_refs.is_empty() {
                run_loss / run_n as f64
            } else {
                loss_and_grad(&m, &settings.loss, &valid_refs, settings.threads, false).0
            };
            report.history.push((step, run_loss / run_n as f64, v));
            (run_loss, run_n) = (0.0, 0);
            if v < report.best_valid {
                report.best_valid = v;
                report.best_step = step;
                best.copy_from_slice(&theta);
                since_best = 0;
            } else {
                since_best += 1;
                if since_best >= settings.patience {
                    report.status = TrainStatus::EarlyStopped;
                    break;
                }
                adam.lr *= settings.plateau_decay;
            }
        }
    }
    set_params(&mut m, &best);
    report.wall_seconds = started.elapsed().as_secs_f64();
    Ok((m, report))
}
