//! The GPU test bundle's checks (`make gpu-bundle`): cases the compiler's
//! GPU tests wrote with the CPU path's results, GEMM checks whose inputs
//! and reference are made on the GPU machine, and the comparison.

use crate::artifact::DType;
use crate::host::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One check of the GPU test bundle (`make gpu-bundle`): an artifact
/// compiled for CUDA, calls with their inputs, and what the CPU path (the
/// reference interpreter for single kernels, the CPU backend for train
/// steps) returned for them, to a stated tolerance.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BundleCase {
    pub name: String,
    pub function: String,
    pub seed: u64,
    /// Relative tolerance: |gpu - cpu| <= tol (1 + |cpu|).
    pub tol: f64,
    pub calls: Vec<BundleCall>,
    /// Symbols after the last call (train steps), by name.
    pub symbols: BTreeMap<String, Tensor>,
    /// A data-parallel step (its collectives weighted by an input other
    /// than 1): run in an NCCL group of one, by its own test.
    #[serde(default)]
    pub nccl: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BundleCall {
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
}

/// A GEMM check of the GPU test bundle (`gemm.json` beside an artifact of
/// one `ll.gemm`, function `f(a, b[, bias]) -> out`): inputs too big to
/// ship are made on the GPU machine, and the reference is computed there,
/// on the host. Inputs are multiples of 1/8 in [-1, 1], exact in f16 and
/// bf16, so products are exact and an f32 result is exact up to the order
/// of the sums; a 16-bit result is the exact value rounded once.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GemmCheck {
    pub batch: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// `a` stored k x m, `b` stored n x k.
    pub ta: bool,
    pub tb: bool,
    pub dtype: DType,
    pub out: DType,
    pub bias: bool,
    pub relu: bool,
    /// Relative tolerance, as in [`compare`].
    pub tol: f64,
}

impl GemmCheck {
    fn value(i: usize, salt: usize) -> f64 {
        ((i * 7919 + salt * 104_729) % 17) as f64 / 8.0 - 1.0
    }

    /// The inputs: `a`, `b` and (with `bias`) the bias, each batch's
    /// matrices stored as the transposes say.
    pub fn inputs(&self) -> Vec<Tensor> {
        let (b, m, k, n) = (self.batch, self.m, self.k, self.n);
        let make = |shape: Vec<usize>, dtype: DType, salt: usize| {
            let len: usize = shape.iter().product();
            Tensor::new(shape, dtype, (0..len).map(|i| Self::value(i, salt)).collect())
        };
        let lead = |r: usize, c: usize| if b > 1 { vec![b, r, c] } else { vec![r, c] };
        let a = make(if self.ta { lead(k, m) } else { lead(m, k) }, self.dtype, 1);
        let bm = make(if self.tb { lead(n, k) } else { lead(k, n) }, self.dtype, 2);
        let mut inputs = vec![a, bm];
        if self.bias {
            inputs.push(make(vec![n], self.out, 3));
        }
        inputs
    }

    /// The result on the host: `relu(op(a) op(b) + bias)` per batch, in f64.
    pub fn reference(&self, inputs: &[Tensor]) -> Tensor {
        let (b, m, k, n) = (self.batch, self.m, self.k, self.n);
        let (a, bm) = (&inputs[0].values, &inputs[1].values);
        let mut out = vec![0.0; b * m * n];
        for z in 0..b {
            let (a, bm) = (&a[z * m * k..], &bm[z * k * n..]);
            for i in 0..m {
                for j in 0..n {
                    let mut y: f64 = (0..k)
                        .map(|p| {
                            let x = if self.ta { a[p * m + i] } else { a[i * k + p] };
                            let w = if self.tb { bm[j * k + p] } else { bm[p * n + j] };
                            x * w
                        })
                        .sum();
                    if self.bias {
                        y += inputs[2].values[j];
                    }
                    if self.relu {
                        y = y.max(0.0);
                    }
                    out[(z * m + i) * n + j] = y;
                }
            }
        }
        Tensor::new(if b > 1 { vec![b, m, n] } else { vec![m, n] }, self.out, out)
    }
}

/// Compares `got` with `want` element by element; the first difference
/// beyond `tol` (relative, NaN only where NaN is expected) as an error.
pub fn compare(what: &str, got: &Tensor, want: &Tensor, tol: f64) -> std::result::Result<f64, String> {
    if got.shape != want.shape {
        return Err(format!("{what}: shape {:?}, expected {:?}", got.shape, want.shape));
    }
    let mut worst: f64 = 0.0;
    for (i, (g, w)) in got.values.iter().zip(&want.values).enumerate() {
        if w.is_nan() != g.is_nan() || (w.is_infinite() && g != w) {
            return Err(format!("{what}[{i}]: GPU {g}, CPU {w}"));
        }
        if w.is_finite() {
            let err = (g - w).abs() / (1.0 + w.abs());
            if err > tol {
                return Err(format!("{what}[{i}]: GPU {g}, CPU {w} (relative difference {err:.2e} > {tol:.0e})"));
            }
            worst = worst.max(err);
        }
    }
    Ok(worst)
}

/// A training run of the GPU test bundle (`runs/<name>/run.json`): the model
/// compiled for CUDA at its batch size (`main/`) and for the smaller last
/// batch (`variant/`, when the data has one), the inputs of the first steps
/// of `aicf train` on the real data (lr included), the CPU's losses for
/// them, and the CPU's checkpoints after `resume_at` and after every step
/// (`cpu-resume.safetensors`, `cpu-final.safetensors`). On the GPU, through
/// the runtime's `Backend` interface: the same steps give the same losses
/// (within `tol`, relative), and a CPU checkpoint continues on the GPU to
/// the CPU's final state (within `state_tol`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainRun {
    pub name: String,
    pub seed: u64,
    /// Relative tolerance of each loss.
    pub tol: f64,
    /// Relative tolerance of the final parameters and state.
    pub state_tol: f64,
    pub steps: Vec<Vec<Tensor>>,
    pub losses: Vec<f64>,
    /// Steps after which `cpu-resume.safetensors` was written.
    pub resume_at: usize,
}
