//! Layers with PyTorch's semantics and default initialisation. Every layer
//! is constructed with its path in the model (`blocks.0.attn`), which names
//! its parameters (`blocks.0.attn.q_proj.weight`) and its errors.

use super::{
    Conv1dOptions, Conv2dOptions, DType, GeluApproximation, Module, NnError, Pool2dOptions, Result, Tensor, TensorSpec,
    child, layer,
};
use aicf_runtime::init::{FanMode, Init};

/// PyTorch's `kaiming_uniform_(a = sqrt(5))` of Linear and Conv weights:
/// gain = sqrt(2 / (1 + 5)).
fn default_weight_init() -> Init {
    Init::KaimingUniform { gain: (1.0f64 / 3.0).sqrt(), mode: FanMode::FanIn }
}

/// PyTorch's bias init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
fn default_bias_init(fan_in: usize) -> Init {
    let bound = 1.0 / (fan_in as f64).sqrt();
    Init::Uniform { low: -bound, high: bound }
}

/// Parameters take the input's float type (f32 for integer inputs).
fn param_dtype(x: &Tensor) -> DType {
    if x.dtype().is_float() { x.dtype() } else { DType::F32 }
}

/// `y = x W^T + b`, PyTorch's `nn.Linear`.
#[derive(Debug, Clone)]
pub struct Linear {
    pub path: String,
    pub in_features: usize,
    pub out_features: usize,
    pub bias: bool,
}

impl Linear {
    pub fn new(path: impl Into<String>, in_features: usize, out_features: usize) -> Self {
        Linear { path: path.into(), in_features, out_features, bias: true }
    }
    pub fn without_bias(mut self) -> Self {
        self.bias = false;
        self
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer(
            x,
            &self.path,
            || format!("Linear({} -> {})", self.in_features, self.out_features),
            || {
                let g = x.graph();
                let dtype = param_dtype(x);
                let w = g.param(
                    &child(&self.path, "weight"),
                    &self.path,
                    &TensorSpec::new([self.out_features, self.in_features], dtype),
                    default_weight_init(),
                )?;
                let b = if self.bias {
                    Some(g.param(
                        &child(&self.path, "bias"),
                        &self.path,
                        &TensorSpec::new([self.out_features], dtype),
                        default_bias_init(self.in_features),
                    )?)
                } else {
                    None
                };
                x.linear(&w, b.as_ref())
            },
        )
    }
}

/// 2-D convolution, PyTorch's `nn.Conv2d` (weight `[out, in / groups, kh, kw]`).
#[derive(Debug, Clone)]
pub struct Conv2d {
    pub path: String,
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub options: Conv2dOptions,
    pub bias: bool,
}

impl Conv2d {
    pub fn new(path: impl Into<String>, in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Conv2d {
            path: path.into(),
            in_channels,
            out_channels,
            kernel: [kernel, kernel],
            options: Conv2dOptions::default(),
            bias: true,
        }
    }
    pub fn with_options(mut self, options: Conv2dOptions) -> Self {
        self.options = options;
        self
    }
    pub fn without_bias(mut self) -> Self {
        self.bias = false;
        self
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let describe = || {
            format!(
                "Conv2d({} -> {}, kernel {}x{})",
                self.in_channels, self.out_channels, self.kernel[0], self.kernel[1]
            )
        };
        layer(x, &self.path, describe, || {
            let (w, b) = conv_params(
                x,
                &self.path,
                (self.in_channels, self.out_channels),
                &self.kernel,
                self.options.groups,
                self.bias,
            )?;
            x.conv2d(&w, b.as_ref(), &self.options)
        })
    }
}

/// A convolution's weight `[out, in / groups, kernel...]` and bias `[out]`
/// (where it has one), declared under `path` with PyTorch's initializers
/// (the bias's fan-in `in / groups x kernel`); `in` must divide by
/// `groups`.
fn conv_params(
    x: &Tensor,
    path: &str,
    (inputs, outputs): (usize, usize),
    kernel: &[usize],
    groups: usize,
    bias: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let groups = groups.max(1);
    if !inputs.is_multiple_of(groups) {
        return Err(NnError::Invalid {
            layer: None,
            message: format!("{inputs} input channels are not divisible by groups = {groups}"),
        });
    }
    let g = x.graph();
    let dtype = param_dtype(x);
    let per_group = inputs / groups;
    let shape: Vec<usize> = [outputs, per_group].into_iter().chain(kernel.iter().copied()).collect();
    let w = g.param(&child(path, "weight"), path, &TensorSpec::new(shape, dtype), default_weight_init())?;
    let b = if bias {
        let fan_in = per_group * kernel.iter().product::<usize>();
        Some(g.param(&child(path, "bias"), path, &TensorSpec::new([outputs], dtype), default_bias_init(fan_in))?)
    } else {
        None
    };
    Ok((w, b))
}

/// PyTorch's `nn.Conv1d` over `[batch, channels, length]`: weight
/// `[out, in / groups, kernel]`, initialised as PyTorch's (fan-in of
/// `in / groups x kernel`).
#[derive(Debug, Clone)]
pub struct Conv1d {
    pub path: String,
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: usize,
    pub options: Conv1dOptions,
    pub bias: bool,
}

impl Conv1d {
    pub fn new(path: impl Into<String>, in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Conv1d { path: path.into(), in_channels, out_channels, kernel, options: Conv1dOptions::default(), bias: true }
    }
    pub fn with_options(mut self, options: Conv1dOptions) -> Self {
        self.options = options;
        self
    }
    pub fn without_bias(mut self) -> Self {
        self.bias = false;
        self
    }
}

impl Module for Conv1d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let describe = || format!("Conv1d({} -> {}, kernel {})", self.in_channels, self.out_channels, self.kernel);
        layer(x, &self.path, describe, || {
            let (w, b) = conv_params(
                x,
                &self.path,
                (self.in_channels, self.out_channels),
                &[self.kernel],
                self.options.groups,
                self.bias,
            )?;
            x.conv1d(&w, b.as_ref(), &self.options)
        })
    }
}

/// Layer normalisation over the trailing `shape`, PyTorch's `nn.LayerNorm`
/// (weight ones, bias zeros, eps 1e-5).
#[derive(Debug, Clone)]
pub struct LayerNorm {
    pub path: String,
    pub shape: Vec<usize>,
    pub eps: f64,
    pub affine: bool,
}

impl LayerNorm {
    pub fn new(path: impl Into<String>, shape: impl Into<Vec<usize>>) -> Self {
        LayerNorm { path: path.into(), shape: shape.into(), eps: 1e-5, affine: true }
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer(
            x,
            &self.path,
            || format!("LayerNorm({:?})", self.shape),
            || {
                if !self.affine {
                    return x.layer_norm(None, None, self.shape.len(), self.eps);
                }
                let g = x.graph();
                let spec = TensorSpec::new(self.shape.clone(), param_dtype(x));
                let w = g.param(&child(&self.path, "weight"), &self.path, &spec, Init::Ones)?;
                let b = g.param(&child(&self.path, "bias"), &self.path, &spec, Init::Zeros)?;
                x.layer_norm(Some(&w), Some(&b), self.shape.len(), self.eps)
            },
        )
    }
}

/// Root-mean-square normalisation over the trailing `shape` (weight ones).
/// eps defaults to 1e-6, where PyTorch's `nn.RMSNorm` takes the dtype's
/// machine epsilon.
#[derive(Debug, Clone)]
pub struct RMSNorm {
    pub path: String,
    pub shape: Vec<usize>,
    pub eps: f64,
    pub affine: bool,
}

impl RMSNorm {
    pub fn new(path: impl Into<String>, shape: impl Into<Vec<usize>>) -> Self {
        RMSNorm { path: path.into(), shape: shape.into(), eps: 1e-6, affine: true }
    }
}

impl Module for RMSNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer(
            x,
            &self.path,
            || format!("RMSNorm({:?})", self.shape),
            || {
                if !self.affine {
                    return x.rms_norm(None, self.shape.len(), self.eps);
                }
                let spec = TensorSpec::new(self.shape.clone(), param_dtype(x));
                let w = x.graph().param(&child(&self.path, "weight"), &self.path, &spec, Init::Ones)?;
                x.rms_norm(Some(&w), self.shape.len(), self.eps)
            },
        )
    }
}

/// A lookup table of `num` vectors of size `dim` (init N(0, 1), as
/// PyTorch's `nn.Embedding`), indexed by an integer tensor.
#[derive(Debug, Clone)]
pub struct Embedding {
    pub path: String,
    pub num: usize,
    pub dim: usize,
}

impl Embedding {
    pub fn new(path: impl Into<String>, num: usize, dim: usize) -> Self {
        Embedding { path: path.into(), num, dim }
    }
}

impl Module for Embedding {
    fn forward(&self, indices: &Tensor) -> Result<Tensor> {
        layer(
            indices,
            &self.path,
            || format!("Embedding({} x {})", self.num, self.dim),
            || {
                if indices.dtype().is_float() {
                    return Err(NnError::Invalid {
                        layer: None,
                        message: format!("indices must be i32 or i64, got {}", indices.spec()),
                    });
                }
                let table = indices.graph().param(
                    &child(&self.path, "weight"),
                    &self.path,
                    &TensorSpec::f32([self.num, self.dim]),
                    Init::Normal { mean: 0.0, std: 1.0 },
                )?;
                table.gather(indices, 0)
            },
        )
    }
}

/// Inverted dropout while training, the identity in evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Dropout(pub f64);

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.dropout(self.0)
    }
}

/// Activations and other parameter-free layers.
#[derive(Debug, Clone, Copy)]
pub struct ReLU;
#[derive(Debug, Clone, Copy, Default)]
pub struct GELU(pub GeluApproximation);
#[derive(Debug, Clone, Copy)]
pub struct SiLU;
#[derive(Debug, Clone, Copy)]
pub struct Tanh;
#[derive(Debug, Clone, Copy)]
pub struct Sigmoid;

impl Module for ReLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.relu()
    }
}
impl Module for GELU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.gelu(self.0)
    }
}
impl Module for SiLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.silu()
    }
}
impl Module for Tanh {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.tanh()
    }
}
impl Module for Sigmoid {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.sigmoid()
    }
}

/// Flattens every dimension from `0` on into one (`Flatten(1)` keeps the batch).
#[derive(Debug, Clone, Copy)]
pub struct Flatten(pub usize);

impl Module for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.0)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct MaxPool2d(pub Pool2dOptions);
#[derive(Debug, Clone, Copy)]
pub struct AvgPool2d(pub Pool2dOptions);

impl Module for MaxPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.max_pool2d(&self.0)
    }
}
impl Module for AvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.avg_pool2d(&self.0)
    }
}

/// Layers applied in order.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    pub fn new() -> Self {
        Sequential { layers: Vec::new() }
    }
    pub fn push(mut self, layer: impl Module + 'static) -> Self {
        self.layers.push(Box::new(layer));
        self
    }
    pub fn len(&self) -> usize {
        self.layers.len()
    }
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for l in &self.layers {
            h = l.forward(&h)?;
        }
        Ok(h)
    }
}

/// Multi-head self-attention over `[batch, seq, dim]`: separate q, k, v and
/// output projections (Linear), `heads` heads of `dim / heads`.
#[derive(Debug, Clone)]
pub struct MultiHeadAttention {
    pub path: String,
    pub dim: usize,
    pub heads: usize,
    pub causal: bool,
    pub dropout: f64,
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub out_proj: Linear,
}

impl MultiHeadAttention {
    pub fn new(path: impl Into<String>, dim: usize, heads: usize, causal: bool) -> Result<Self> {
        let path = path.into();
        if heads == 0 || !dim.is_multiple_of(heads) {
            return Err(NnError::Invalid {
                layer: Some(super::LayerRef { path, layer: format!("MultiHeadAttention({dim}, heads {heads})") }),
                message: format!("dim {dim} is not divisible into {heads} heads"),
            });
        }
        let proj = |name: &str| Linear::new(child(&path, name), dim, dim);
        Ok(MultiHeadAttention {
            q_proj: proj("q_proj"),
            k_proj: proj("k_proj"),
            v_proj: proj("v_proj"),
            out_proj: proj("out_proj"),
            path,
            dim,
            heads,
            causal,
            dropout: 0.0,
        })
    }
    pub fn with_dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }
}

impl Module for MultiHeadAttention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer(
            x,
            &self.path,
            || format!("MultiHeadAttention({}, heads {})", self.dim, self.heads),
            || {
                let &[b, t, c] = x.shape() else {
                    return Err(NnError::Invalid {
                        layer: None,
                        message: format!("expects [batch, seq, {}], got {}", self.dim, x.spec()),
                    });
                };
                let (h, d) = (self.heads as i64, (self.dim / self.heads) as i64);
                // [B, T, C] -> [B, H, T, D]
                let split = |p: &Linear| -> Result<Tensor> {
                    p.forward(x)?.reshape(&[b as i64, t as i64, h, d])?.transpose(1, 2)
                };
                let (q, k, v) = (split(&self.q_proj)?, split(&self.k_proj)?, split(&self.v_proj)?);
                let y = Tensor::attention(&q, &k, &v, self.causal, None)?;
                let y = y.transpose(1, 2)?.reshape(&[b as i64, t as i64, c as i64])?;
                self.out_proj.forward(&y)?.dropout(self.dropout)
            },
        )
    }
}

/// A pre-norm transformer block (GPT-2 style):
/// `x + attn(ln1(x))`, then `x + mlp(ln2(x))` with a GELU MLP of
/// `mlp_ratio * dim` hidden units.
#[derive(Debug, Clone)]
pub struct TransformerBlock {
    pub path: String,
    pub ln1: LayerNorm,
    pub attn: MultiHeadAttention,
    pub ln2: LayerNorm,
    pub fc: Linear,
    pub proj: Linear,
    pub dropout: f64,
    /// The MLP's GELU: exact (default, PyTorch's `nn.GELU()`) or the tanh
    /// form (`approximate="tanh"`, GPT-2's).
    pub gelu: GeluApproximation,
}

impl TransformerBlock {
    pub fn new(path: impl Into<String>, dim: usize, heads: usize, mlp_ratio: usize, causal: bool) -> Result<Self> {
        let path = path.into();
        Ok(TransformerBlock {
            ln1: LayerNorm::new(child(&path, "ln1"), [dim]),
            attn: MultiHeadAttention::new(child(&path, "attn"), dim, heads, causal)?,
            ln2: LayerNorm::new(child(&path, "ln2"), [dim]),
            fc: Linear::new(child(&path, "mlp.fc"), dim, mlp_ratio * dim),
            proj: Linear::new(child(&path, "mlp.proj"), mlp_ratio * dim, dim),
            dropout: 0.0,
            gelu: GeluApproximation::None,
            path,
        })
    }
    pub fn with_gelu(mut self, gelu: GeluApproximation) -> Self {
        self.gelu = gelu;
        self
    }
    pub fn with_dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self.attn.dropout = p;
        self
    }
}

impl Module for TransformerBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer(
            x,
            &self.path,
            || format!("TransformerBlock({}, heads {})", self.attn.dim, self.attn.heads),
            || {
                let x = x.add(&self.attn.forward(&self.ln1.forward(x)?)?)?;
                let h = self.fc.forward(&self.ln2.forward(&x)?)?.gelu(self.gelu)?;
                x.add(&self.proj.forward(&h)?.dropout(self.dropout)?)
            },
        )
    }
}
