//! A small fully connected network with hand-written vector-Jacobian products, and Adam(W).
//!
//! `y = W_L act(... act(W_1 x + b_1) ...) + b_L`: hidden activations `tanh` (smooth) or ELU
//! (`x` for `x > 0`, `e^x - 1` otherwise; Clevert et al. 2016), a linear output layer.
//! Parameters live in one flat vector, layer by layer, `W_l` row-major (out x in) then `b_l`,
//! so an optimizer sees one slice. Both learners' policies (BPTT, PPO), PPO's value function and
//! ContactNets' models use it.
//!
//! Vector-Jacobian products ([`Mlp::backward`]): for an output cotangent `gy` (n_out), the
//! backward pass returns `gy^T dy/dx` (n_in) and adds `gy^T dy/dparams` to a gradient
//! buffer, by the chain rule through the cached activations:
//! `g_l = act'(z_l) o (W_{l+1}^T g_{l+1})`, `dW_l += g_l a_{l-1}^T`, `db_l += g_l`.
//! `act'` is computed from the activation's output: `1 - y^2` for tanh, `1` or `y + 1` for ELU.
//!
//! Adam: Kingma & Ba 2015; decoupled weight decay (AdamW): Loshchilov & Hutter 2019.

use rand::rngs::ChaCha8Rng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// Hidden-layer activation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Activation {
    #[default]
    Tanh,
    Elu,
}

impl Activation {
    fn is_tanh(&self) -> bool {
        *self == Activation::Tanh
    }

    /// `act(z)`.
    #[inline]
    pub fn apply(&self, z: f64) -> f64 {
        match self {
            Activation::Tanh => z.tanh(),
            Activation::Elu => {
                if z > 0.0 {
                    z
                } else {
                    z.exp_m1()
                }
            }
        }
    }

    /// `act'(z)` written in terms of `y = act(z)`.
    #[inline]
    pub fn derivative_from_output(&self, y: f64) -> f64 {
        match self {
            Activation::Tanh => 1.0 - y * y,
            Activation::Elu => {
                if y > 0.0 {
                    1.0
                } else {
                    y + 1.0
                }
            }
        }
    }
}

impl std::str::FromStr for Activation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tanh" => Ok(Activation::Tanh),
            "elu" => Ok(Activation::Elu),
            _ => Err(format!("unknown activation `{s}`: expected tanh or elu")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mlp {
    /// Layer widths, input first, output last.
    pub sizes: Vec<usize>,
    /// Hidden activation (files written before it existed are tanh).
    #[serde(default, skip_serializing_if = "Activation::is_tanh")]
    pub activation: Activation,
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
    /// Glorot-uniform weights, zero biases, tanh hidden layers; `last_scale` multiplies the last
    /// layer's weights (0 makes the network start as the zero function).
    pub fn new(sizes: &[usize], rng: &mut ChaCha8Rng, last_scale: f64) -> Self {
        Self::with_activation(sizes, Activation::Tanh, rng, last_scale)
    }

    /// [`Mlp::new`] with a chosen hidden activation.
    pub fn with_activation(sizes: &[usize], activation: Activation, rng: &mut ChaCha8Rng, last_scale: f64) -> Self {
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
        Self { sizes: sizes.to_vec(), activation, params }
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
        assert_eq!(x.len(), self.n_in(), "Mlp::forward: input has {} entries, expected {}", x.len(), self.n_in());
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
                y.iter_mut().for_each(|v| *v = self.activation.apply(*v));
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
        assert_eq!(gy.len(), self.n_out(), "Mlp::backward: cotangent has {} entries", gy.len());
        assert!(grad.len() >= self.n_params(), "Mlp::backward: gradient buffer has {} entries", grad.len());
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
                for (gr, a) in g.iter_mut().zip(&cache.acts[l + 1]) {
                    *gr *= self.activation.derivative_from_output(*a);
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

/// Global L2 norm of a gradient.
pub fn norm(g: &[f64]) -> f64 {
    g.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Scales `g` so that its L2 norm is at most `max_norm`; returns the norm before clipping.
pub fn clip_norm(g: &mut [f64], max_norm: f64) -> f64 {
    let n = norm(g);
    if n > max_norm && n.is_finite() {
        let s = max_norm / n;
        g.iter_mut().for_each(|x| *x *= s);
    }
    n
}

/// Adam with decoupled weight decay on a flat parameter vector.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
