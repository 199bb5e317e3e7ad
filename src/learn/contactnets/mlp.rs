//! A tiny fully connected network with hand-written vector-Jacobian products, and Adam(W).
//!
//! `y = W_L act(... act(W_1 x + b_1) ...) + b_L` with `tanh` hidden activations (smooth, so
//! the gap correction of the deep model stays differentiable). Parameters live in one flat
//! vector, layer by layer, `W_l` row-major (out x in) then `b_l`, so the optimizer sees one
//! slice. Adam: Kingma & Ba 2015; decoupled weight decay (AdamW): Loshchilov & Hutter 2019.

use rand::rngs::ChaCha8Rng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mlp {
    /// Layer widths, input first, output last.
    pub sizes: Vec<usize>,
    /// All weights and biases, layer by layer.
    pub params: Vec<f64>,
}

/// Activations of one forward pass, for the backward pass.
#[derive(Clone, Debug, Default)]
pub struct MlpCache {
    /// Input and post-activation outputs of each layer (the last one is the network output).
    acts: Vec<Vec<f64>>,
}

impl Mlp {
    /// Glorot-uniform weights, zero biases; `last_scale` multiplies the last layer's weights (0
    /// makes the network start as the zero function).
    pub fn new(sizes: &[usize], rng: &mut ChaCha8Rng, last_scale: f64) -> Self {
        assert!(sizes.len() >= 2, "an MLP needs an input and an output size");
        let mut params = Vec::new();
        for l in 0..sizes.len() - 1 {
            let (i, o) = (sizes[l], sizes[l + 1]);
            let a = (6.0 / (i + o) as f64).sqrt() * if l + 2 == sizes.len() { last_scale } else { 1.0 };
            for _ in 0..i * o {
                params.push(if a > 0.0 { rng.random_range(-a..a) } else { 0.0 });
            }
            params.extend(std::iter::repeat_n(0.0, o));
        }
        Self { sizes: sizes.to_vec(), params }
    }

    pub fn n_params(&self) -> usize {
        self.params.len()
    }

    pub fn n_in(&self) -> usize {
        self.sizes[0]
    }

    pub fn n_out(&self) -> usize {
        *self.sizes.last().expect("sizes has at least two entries")
    }

    /// Checks the parameter count against the sizes (after loading a file).
    pub fn consistent(&self) -> bool {
        self.sizes.len() >= 2
            && self.sizes.iter().all(|&s| s > 0)
            && self.params.len() == self.sizes.windows(2).map(|w| w[0] * w[1] + w[1]).sum::<usize>()
            && self.params.iter().all(|p| p.is_finite())
    }

    /// `y = f(x)`, keeping the activations in `cache`.
    pub fn forward(&self, x: &[f64], cache: &mut MlpCache) -> Vec<f64> {
        cache.acts.clear();
        cache.acts.push(x.to_vec());
        let mut off = 0;
        let nl = self.sizes.len() - 1;
        for l in 0..nl {
            let (i, o) = (self.sizes[l], self.sizes[l + 1]);
            let w = &self.params[off..off + i * o];
            let b = &self.params[off + i * o..off + i * o + o];
            let input = &cache.acts[l];
            let mut y: Vec<f64> = (0..o).map(|r| b[r] + dot(&w[r * i..(r + 1) * i], input)).collect();
            if l + 1 < nl {
                y.iter_mut().for_each(|v| *v = v.tanh());
            }
            cache.acts.push(y);
            off += i * o + o;
        }
        cache.acts.last().cloned().unwrap_or_default()
    }

    /// `y = f(x)` without a cache.
    pub fn eval(&self, x: &[f64]) -> Vec<f64> {
        self.forward(x, &mut MlpCache::default())
    }

    /// Vector-Jacobian products of the last forward pass: adds `gy^T dy/dparams` to `grad`
    /// (n_params) and returns `gy^T dy/dx`.
    pub fn backward(&self, cache: &MlpCache, gy: &[f64], grad: &mut [f64]) -> Vec<f64> {
        let nl = self.sizes.len() - 1;
        let mut offs = Vec::with_capacity(nl);
        let mut off = 0;
        for l in 0..nl {
            offs.push(off);
            off += self.sizes[l] * self.sizes[l + 1] + self.sizes[l + 1];
        }
        let mut g = gy.to_vec();
        for l in (0..nl).rev() {
            let (i, o) = (self.sizes[l], self.sizes[l + 1]);
            if l + 1 < nl {
                // d tanh = 1 - tanh^2, and acts[l + 1] holds tanh.
                for (gr, a) in g.iter_mut().zip(&cache.acts[l + 1]) {
                    *gr *= 1.0 - a * a;
                }
            }
            let input = &cache.acts[l];
            let off = offs[l];
            let mut gin = vec![0.0; i];
            for r in 0..o {
                let gr = g[r];
                if gr == 0.0 {
                    continue;
                }
                let row = off + r * i;
                for c in 0..i {
                    grad[row + c] += gr * input[c];
                    gin[c] += gr * self.params[row + c];
                }
                grad[off + i * o + r] += gr;
            }
            g = gin;
        }
        g
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Adam with decoupled weight decay on a flat parameter vector.
#[derive(Clone, Debug)]
pub struct Adam {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled weight decay per parameter (0 for parameters that must not shrink, such as
    /// vertex positions).
    pub decay: Vec<f64>,
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    pub fn new(n: usize, lr: f64) -> Self {
        Self { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, decay: vec![0.0; n], m: vec![0.0; n], v: vec![0.0; n], t: 0 }
    }

    pub fn step(&mut self, params: &mut [f64], grad: &[f64]) {
        self.t += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let c1 = 1.0 - b1.powi(self.t);
        let c2 = 1.0 - b2.powi(self.t);
        for i in 0..params.len() {
            let g = grad[i];
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g;
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g;
            let step = (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + self.eps);
            params[i] -= self.lr * (step + self.decay[i] * params[i]);
        }
    }
}
