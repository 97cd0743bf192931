//! The functional API: one method per `hl` op on [`Tensor`]. Axes may be
//! negative (counted from the end, as in PyTorch); everything else about
//! shapes is checked by the op itself when it is traced.

use super::{DType, Graph, NnError, Result, Tensor, TensorSpec, graph::GraphState};
use aicf_runtime::init::{Float, Init};
use std::rc::Rc;

/// Comparison predicates of `hl.compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// How `gelu` is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeluApproximation {
    /// Exact, through erf (PyTorch's default).
    #[default]
    None,
    Tanh,
}

/// Memory order of an image batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    #[default]
    Nchw,
    Nhwc,
}

/// How a loss reduces over its positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reduction {
    #[default]
    Mean,
    Sum,
    /// Each position's loss, unreduced (PyTorch's `reduction="none"`).
    None,
}

/// Options of a 2-D convolution (PyTorch's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dOptions {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    pub layout: Layout,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1, layout: Layout::Nchw }
    }
}

/// Options of a 1-D convolution over `[batch, channels, length]`
/// (PyTorch's `nn.Conv1d` defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv1dOptions {
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    pub groups: usize,
}

impl Default for Conv1dOptions {
    fn default() -> Self {
        Conv1dOptions { stride: 1, padding: 0, dilation: 1, groups: 1 }
    }
}

/// Options of a 2-D pooling window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool2dOptions {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub layout: Layout,
}

impl Pool2dOptions {
    /// A `k x k` window moved by `k` (PyTorch's default stride).
    pub fn square(k: usize) -> Self {
        Pool2dOptions { kernel: [k, k], stride: [k, k], padding: [0, 0], layout: Layout::Nchw }
    }
}

fn array(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("array<i64: {}>", items.join(", "))
}

/// Sizes past `i64::MAX` print as `i64::MAX` (the verifiers then name what
/// is too large), not as the negative number their bits read as.
fn array_usize(values: &[usize]) -> String {
    array(&values.iter().map(|&v| i64::try_from(v).unwrap_or(i64::MAX)).collect::<Vec<_>>())
}

fn int(v: i64) -> String {
    format!("{v} : i64")
}

/// A size as an i64 attribute, saturating as [`array_usize`].
fn int_usize(v: usize) -> String {
    int(i64::try_from(v).unwrap_or(i64::MAX))
}

// The hl enums are I32EnumAttrs: integer attributes holding the case's
// value as declared in HLBase.td.
fn enum_case(value: i32) -> String {
    format!("{value} : i32")
}

fn layout_attr(layout: Layout) -> String {
    enum_case(match layout {
        Layout::Nchw => 0,
        Layout::Nhwc => 1,
    })
}

/// The attributes of an `hl` loss reduced as `r`: none for a mean (the
/// default), `reduction = sum` for a sum. `Reduction::None` has no `hl`
/// form (the layer API composes it): `None` here, never a mean.
fn reduction_attrs(r: Reduction) -> Option<Vec<(&'static str, String)>> {
    match r {
        Reduction::Mean => Some(Vec::new()),
        Reduction::Sum => Some(vec![("reduction", enum_case(1))]),
        Reduction::None => None,
    }
}

/// A float literal for an element of `dtype`, including the non-finite
/// values, which MLIR only reads as hexadecimal bit patterns.
pub(crate) fn float_literal(v: f64, dtype: DType) -> String {
    if v.is_finite() {
        return Float(v).to_string();
    }
    let bits: u64 = match (dtype, v.is_nan(), v > 0.0) {
        (DType::F64, true, _) => 0x7FF8_0000_0000_0000,
        (DType::F64, false, true) => 0x7FF0_0000_0000_0000,
        (DType::F64, false, false) => 0xFFF0_0000_0000_0000,
        (DType::F16, true, _) => 0x7E00,
        (DType::F16, false, true) => 0x7C00,
        (DType::F16, false, false) => 0xFC00,
        (DType::BF16, true, _) => 0x7FC0,
        (DType::BF16, false, true) => 0x7F80,
        (DType::BF16, false, false) => 0xFF80,
        (_, true, _) => 0x7FC0_0000,
        (_, false, true) => 0x7F80_0000,
        (_, false, false) => 0xFF80_0000,
    };
    format!("0x{bits:X}")
}

impl Graph {
    /// `hl.constant` of `values` (row-major) with `spec`'s shape; a single
    /// value is a splat.
    pub fn constant(&self, values: &[f64], spec: &TensorSpec) -> Result<Tensor> {
        if self.0.is_eager() {
            let n = spec.num_elements();
            let all: Vec<f64> = if values.len() == 1 { vec![values[0]; n] } else { values.to_vec() };
            let dtype = crate::eager::dtype_of(spec)
                .map_err(|e| NnError::Invalid { layer: self.0.current_scope(), message: e.to_string() })?;
            let host = aicf_runtime::Tensor::new(spec.shape.clone(), dtype, all);
            let device = self.0.eager_device().unwrap_or_default();
            let t = crate::eager::Tensor::from_host(host)
                .and_then(|t| t.to(&device))
                .map_err(|e| NnError::Invalid { layer: self.0.current_scope(), message: e.to_string() })?;
            return self.0.wrap(t);
        }
        if values.len() != 1 && values.len() != spec.num_elements() {
            return Err(NnError::Invalid {
                layer: self.0.current_scope(),
                message: format!("a constant {spec} needs 1 or {} values, got {}", spec.num_elements(), values.len()),
            });
        }
        let text: Vec<String> = values
            .iter()
            .map(|&v| {
                if spec.dtype.is_float() {
                    float_literal(v, spec.dtype)
                } else if spec.dtype == DType::I1 {
                    (if v != 0.0 { "true" } else { "false" }).to_string()
                } else {
                    format!("{}", v as i64)
                }
            })
            .collect();
        let body = if text.len() == 1 { text[0].clone() } else { nest(&text, &spec.shape) };
        let attr = format!("dense<{body}> : {}", spec.mlir_type());
        Ok(self.0.emit("hl.constant", &[], &[("value", attr)], Some(std::slice::from_ref(spec)))?.remove(0))
    }

    /// `[0, 1, ..., n-1]` as `i32`, e.g. the positions of a sequence.
    pub fn arange(&self, n: usize) -> Result<Tensor> {
        let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
        self.constant(&values, &TensorSpec::new([n], DType::I32))
    }

    /// Declares the parameter `name` (owned by the layer `owner`) the first
    /// time and reads it. Declaring it again with another shape, dtype or
    /// initializer is an error.
    pub fn param(&self, name: &str, owner: &str, spec: &TensorSpec, init: Init) -> Result<Tensor> {
        self.0.param(name, owner, spec, &init)
    }

    /// Declares the model state `name` (`hl.state` of `slot`, no
    /// parameter: a batch norm's running statistics) the first time and
    /// reads it.
    pub fn state(&self, name: &str, slot: &str, spec: &TensorSpec, init: Init) -> Result<Tensor> {
        self.0.state(name, slot, spec, &init)
    }

    /// The value state `name` takes after a train step (`hl.set_state`).
    pub fn set_state(&self, name: &str, value: &Tensor) -> Result<()> {
        self.0.set_state(name, value)
    }

    /// A graph whose ops run at once (eager mode): layers called on its
    /// tensors ([`Graph::input`]) compute their results immediately, create
    /// their parameters on first use with their initializers (parameter `i`
    /// from stream `i` under `seed`, as a compiled model's runtime does),
    /// and record the tape for `backward()`.
    pub fn eager(mode: super::Mode, seed: u64) -> Graph {
        Graph::eager_on(mode, seed, crate::eager::Device::Cpu { threads: 0 })
    }

    /// An eager graph whose parameters and model state live on `device`
    /// (`cuda:N` for a GPU): its inputs go there too (`Tensor::to`). A CPU
    /// device's `threads` is not read: eager kernels run on the process's
    /// eager workers (`AICF_EAGER_THREADS`, else one per core).
    pub fn eager_on(mode: super::Mode, seed: u64, device: crate::eager::Device) -> Graph {
        Graph(GraphState::new_eager(mode, seed, device))
    }

    /// An eager tensor as an input of this eager graph, moved to the
    /// graph's device where it is elsewhere.
    pub fn input(&self, t: &crate::eager::Tensor) -> Result<Tensor> {
        let Some(device) = self.0.eager_device() else {
            return Err(NnError::Invalid { layer: None, message: "Graph::input takes an eager graph".into() });
        };
        let t = t.to(&device).map_err(|e| NnError::Invalid { layer: None, message: e.to_string() })?;
        self.0.wrap(t)
    }

    /// An eager graph's parameters, by name, in the order they were created:
    /// a layer makes its parameters when it first runs, so none before the
    /// model's first forward.
    pub fn eager_params(&self) -> Vec<(String, crate::eager::Tensor)> {
        self.0.eager_params()
    }

    /// An eager graph's model state (a batch norm's running statistics),
    /// by name, at its current values.
    pub fn eager_states(&self) -> Vec<(String, crate::eager::Tensor)> {
        self.0.eager_states()
    }

    /// Sets an eager graph's state `name` to `values` (of `shape`): moving
    /// a compiled run's running statistics into eager mode.
    pub fn set_eager_state(&self, name: &str, shape: &[usize], values: Vec<f32>) -> Result<()> {
        self.0.set_eager_state(name, shape, values)
    }

    /// Whether the function being traced trains (dropout active).
    pub fn is_training(&self) -> bool {
        self.0.mode() == super::Mode::Train
    }
}

/// Nests a flat row-major list to a dense literal of `shape`.
fn nest(items: &[String], shape: &[usize]) -> String {
    match shape {
        [] | [_] => format!("[{}]", items.join(", ")),
        [_, rest @ ..] => {
            let inner: usize = rest.iter().product();
            let parts: Vec<String> = items.chunks(inner.max(1)).map(|c| nest(c, rest)).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

impl Tensor {
    fn g(&self) -> &Rc<GraphState> {
        &self.graph
    }

    fn op(&self, name: &str, operands: &[&Tensor], attrs: &[(&str, String)]) -> Result<Tensor> {
        Ok(self.g().emit(name, operands, attrs, None)?.remove(0))
    }

    fn invalid(&self, message: String) -> NnError {
        NnError::Invalid { layer: self.g().current_scope(), message }
    }

    /// A non-negative axis from a possibly negative one.
    fn axis(&self, axis: i64, what: &str) -> Result<i64> {
        let rank = self.rank() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if a < 0 || a >= rank {
            return Err(self.invalid(format!("{what}: axis {axis} is out of range for {} (rank {rank})", self.spec)));
        }
        Ok(a)
    }

    /// A rank-0 constant of this tensor's dtype.
    pub fn scalar(&self, value: f64) -> Result<Tensor> {
        self.graph().constant(&[value], &TensorSpec::new([], self.dtype()))
    }

    // Elementwise, broadcasting.
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.add", &[self, other], &[])
    }
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.sub", &[self, other], &[])
    }
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.mul", &[self, other], &[])
    }
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.div", &[self, other], &[])
    }
    pub fn pow(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.pow", &[self, other], &[])
    }
    /// The elementwise larger of the two; on a tie the gradient goes to
    /// `self` whole (as `torch.clamp` and max pooling pass it; `torch.
    /// maximum` splits it in half). [`Tensor::minimum`] likewise.
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.max", &[self, other], &[])
    }
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.op("hl.min", &[self, other], &[])
    }
    pub fn add_scalar(&self, v: f64) -> Result<Tensor> {
        self.add(&self.scalar(v)?)
    }
    pub fn mul_scalar(&self, v: f64) -> Result<Tensor> {
        self.mul(&self.scalar(v)?)
    }
    pub fn compare(&self, predicate: Compare, other: &Tensor) -> Result<Tensor> {
        let p = match predicate {
            Compare::Eq => 0,
            Compare::Ne => 1,
            Compare::Lt => 2,
            Compare::Le => 3,
            Compare::Gt => 4,
            Compare::Ge => 5,
        };
        self.op("hl.compare", &[self, other], &[("predicate", enum_case(p))])
    }
    /// `condition ? on_true : on_false`, broadcasting all three.
    pub fn select(condition: &Tensor, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        condition.op("hl.select", &[condition, on_true, on_false], &[])
    }

    // Elementwise, unary.
    pub fn neg(&self) -> Result<Tensor> {
        self.op("hl.neg", &[self], &[])
    }
    pub fn abs(&self) -> Result<Tensor> {
        self.op("hl.abs", &[self], &[])
    }
    pub fn exp(&self) -> Result<Tensor> {
        self.op("hl.exp", &[self], &[])
    }
    pub fn log(&self) -> Result<Tensor> {
        self.op("hl.log", &[self], &[])
    }
    pub fn erf(&self) -> Result<Tensor> {
        self.op("hl.erf", &[self], &[])
    }
    /// Sine, of radians (rotary and sinusoidal position tables).
    pub fn sin(&self) -> Result<Tensor> {
        self.op("hl.sin", &[self], &[])
    }
    /// Arctangent, in radians (`atan2` from it and the quadrant).
    pub fn atan(&self) -> Result<Tensor> {
        self.op("hl.atan", &[self], &[])
    }
    /// Cosine, of radians.
    pub fn cos(&self) -> Result<Tensor> {
        self.op("hl.cos", &[self], &[])
    }
    /// The largest integer not above each element (no gradient).
    pub fn floor(&self) -> Result<Tensor> {
        self.op("hl.floor", &[self], &[])
    }
    /// The smallest integer not below each element (no gradient).
    pub fn ceil(&self) -> Result<Tensor> {
        self.op("hl.ceil", &[self], &[])
    }
    /// The nearest integer, ties to even, as `torch.round` (no gradient).
    pub fn round(&self) -> Result<Tensor> {
        self.op("hl.round", &[self], &[])
    }
    /// The same values, through which no gradient flows (`torch.detach`;
    /// a straight-through estimator: `x + (x.round() - x).detach()`).
    pub fn detach(&self) -> Result<Tensor> {
        self.op("hl.stop_gradient", &[self], &[])
    }
    pub fn sqrt(&self) -> Result<Tensor> {
        self.op("hl.sqrt", &[self], &[])
    }
    pub fn rsqrt(&self) -> Result<Tensor> {
        self.op("hl.rsqrt", &[self], &[])
    }
    pub fn tanh(&self) -> Result<Tensor> {
        self.op("hl.tanh", &[self], &[])
    }
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.op("hl.sigmoid", &[self], &[])
    }
    pub fn relu(&self) -> Result<Tensor> {
        self.op("hl.relu", &[self], &[])
    }
    pub fn silu(&self) -> Result<Tensor> {
        self.op("hl.silu", &[self], &[])
    }
    pub fn gelu(&self, approximate: GeluApproximation) -> Result<Tensor> {
        match approximate {
            GeluApproximation::None => self.op("hl.gelu", &[self], &[]),
            GeluApproximation::Tanh => self.op("hl.gelu", &[self], &[("approximate", enum_case(1))]),
        }
    }
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        let spec = TensorSpec::new(self.shape(), dtype);
        Ok(self.g().emit("hl.cast", &[self], &[], Some(&[spec]))?.remove(0))
    }

    // Contractions.
    /// `self @ other` as `torch.matmul`: a 1-D operand is a row (left) or
    /// a column (right) vector whose axis is dropped from the result, and
    /// the batch axes (all but the last two) broadcast. Operands of the same
    /// batch shape are one `hl.matmul`; a batched left operand times a
    /// matrix is one GEMM over all its rows; other batch shapes broadcast
    /// first (`hl.broadcast_to`, whose gradient sums the copies).
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (a, b) = (self.rank(), other.rank());
        if a >= 2 && a == b && self.shape()[..a - 2] == other.shape()[..b - 2] {
            return self.matmul_t(other, false, false);
        }
        let shapes = || format!("{} @ {}", self.spec, other.spec);
        if a == 0 || b == 0 {
            return Err(self.invalid(format!("matmul of a scalar ({}): multiply it instead", shapes())));
        }
        let k_lhs = self.shape()[a - 1];
        let k_rhs = other.shape()[if b == 1 { 0 } else { b - 2 }];
        if k_lhs != k_rhs {
            return Err(
                self.invalid(format!("matmul {}: contracting dimensions differ ({k_lhs} and {k_rhs})", shapes()))
            );
        }
        let as_i64 = |dims: &[usize]| dims.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let lhs = if a == 1 { self.reshape(&[1, k_lhs as i64])? } else { self.clone() };
        let rhs = if b == 1 { other.reshape(&[k_rhs as i64, 1])? } else { other.clone() };
        let (lb, rb) = (&lhs.shape()[..lhs.rank() - 2], &rhs.shape()[..rhs.rank() - 2]);
        let (m, n) = (lhs.shape()[lhs.rank() - 2], rhs.shape()[rhs.rank() - 1]);
        let (batch, product) = if rb.is_empty() {
            // Every row of every batch against one matrix: one GEMM.
            let rows = lhs.reshape(&[-1, k_lhs as i64])?;
            (lb.to_vec(), rows.matmul_t(&rhs, false, false)?)
        } else {
            let rank = lb.len().max(rb.len());
            let dim = |dims: &[usize], i: usize| if i + dims.len() < rank { 1 } else { dims[i + dims.len() - rank] };
            let mut batch = Vec::with_capacity(rank);
            for i in 0..rank {
                let (x, y) = (dim(lb, i), dim(rb, i));
                if x != y && x != 1 && y != 1 {
                    return Err(self.invalid(format!(
                        "matmul {}: the batch dimensions do not broadcast ({x} and {y} at batch axis {i})",
                        shapes()
                    )));
                }
                batch.push(if x == 1 { y } else { x });
            }
            let widen = |t: &Tensor, rows: usize, cols: usize| -> Result<Tensor> {
                let full: Vec<usize> = batch.iter().copied().chain([rows, cols]).collect();
                if t.shape() == full.as_slice() { Ok(t.clone()) } else { t.broadcast_to(&full) }
            };
            let product = widen(&lhs, m, k_lhs)?.matmul_t(&widen(&rhs, k_rhs, n)?, false, false)?;
            (batch, product)
        };
        // The result's shape, without the axes the vectors gained.
        let mut out = batch;
        if a > 1 {
            out.push(m);
        }
        if b > 1 {
            out.push(n);
        }
        if product.shape() == out.as_slice() { Ok(product) } else { product.reshape(&as_i64(&out)) }
    }
    /// `op(self) @ op(other)`, `op` swapping the last two dimensions where asked.
    pub fn matmul_t(&self, other: &Tensor, transpose_lhs: bool, transpose_rhs: bool) -> Result<Tensor> {
        let mut attrs = Vec::new();
        if transpose_lhs {
            attrs.push(("transpose_lhs", "unit".to_string()));
        }
        if transpose_rhs {
            attrs.push(("transpose_rhs", "unit".to_string()));
        }
        self.op("hl.matmul", &[self, other], &attrs)
    }
    /// `self @ weight^T + bias`.
    /// A 1-D input is one example (`F.linear`'s form): `[in] -> [out]`.
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        if self.rank() == 1 && weight.rank() == 2 {
            let row = self.reshape(&[1, self.shape()[0] as i64])?.linear(weight, bias)?;
            return row.reshape(&[weight.shape()[0] as i64]);
        }
        match bias {
            Some(b) => self.op("hl.linear", &[self, weight, b], &[]),
            None => self.op("hl.linear", &[self, weight], &[]),
        }
    }

    // Reductions.
    fn reduce(&self, name: &str, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        // A scalar over its no axes is itself (`x.sum()` of a rank-0 x).
        if axes.is_empty() && self.rank() == 0 && self.dtype().is_float() {
            return Ok(self.clone());
        }
        if axes.is_empty() {
            return Err(self.invalid(format!("{name} over no axes: give the axes to reduce (every one: 0..rank)")));
        }
        // The kernels reduce floats (hl's reductions take float tensors).
        if matches!(self.dtype(), DType::I32 | DType::I64) {
            return Err(self.invalid(format!(
                "{name} of a {:?} tensor: reductions are of float tensors (cast it first)",
                self.dtype()
            )));
        }
        let mut norm = axes.iter().map(|&a| self.axis(a, name)).collect::<Result<Vec<_>>>()?;
        norm.sort_unstable();
        // (Said in the axes given: [1, -1] was "axes [1, 1] must be
        // distinct".)
        if let Some(w) = norm.windows(2).find(|w| w[0] == w[1]) {
            return Err(self.invalid(format!(
                "{name}: axes {axes:?} name axis {} twice (of a rank-{} tensor)",
                w[0],
                self.rank()
            )));
        }
        let mut attrs = vec![("axes", array(&norm))];
        if keepdim {
            attrs.push(("keepdim", "unit".into()));
        }
        self.op(name, &[self], &attrs)
    }
    pub fn sum(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce("hl.reduce_sum", axes, keepdim)
    }
    pub fn mean(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce("hl.reduce_mean", axes, keepdim)
    }
    pub fn max(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce("hl.reduce_max", axes, keepdim)
    }
    pub fn argmax(&self, axis: i64, keepdim: bool) -> Result<Tensor> {
        let mut attrs = vec![("axis", int(self.axis(axis, "hl.argmax")?))];
        if keepdim {
            attrs.push(("keepdim", "unit".into()));
        }
        self.op("hl.argmax", &[self], &attrs)
    }

    // Normalisation.
    pub fn softmax(&self, axis: i64) -> Result<Tensor> {
        self.op("hl.softmax", &[self], &[("axis", int(self.axis(axis, "hl.softmax")?))])
    }
    pub fn log_softmax(&self, axis: i64) -> Result<Tensor> {
        self.op("hl.log_softmax", &[self], &[("axis", int(self.axis(axis, "hl.log_softmax")?))])
    }
    /// Layer norm over the last `dims` dimensions.
    pub fn layer_norm(&self, weight: Option<&Tensor>, bias: Option<&Tensor>, dims: usize, eps: f64) -> Result<Tensor> {
        let mut operands = vec![self];
        operands.extend(weight);
        operands.extend(bias);
        let segments = format!("array<i32: 1, {}, {}>", weight.is_some() as i32, bias.is_some() as i32);
        let attrs =
            [("dims", int_usize(dims)), ("eps", format!("{} : f64", Float(eps))), ("operandSegmentSizes", segments)];
        self.op("hl.layer_norm", &operands, &attrs)
    }
    /// RMS norm over the last `dims` dimensions.
    pub fn rms_norm(&self, weight: Option<&Tensor>, dims: usize, eps: f64) -> Result<Tensor> {
        let mut operands = vec![self];
        operands.extend(weight);
        self.op("hl.rms_norm", &operands, &[("dims", int_usize(dims)), ("eps", format!("{} : f64", Float(eps)))])
    }

    // Losses.
    /// Cross-entropy of logits `[..., C]` against integer labels `[...]`.
    pub fn cross_entropy(&self, labels: &Tensor, reduction: Reduction, ignore_index: Option<i64>) -> Result<Tensor> {
        // A label of the labels' type: i32's range for i32 labels (past
        // it the generated kernel's constant did not parse).
        if let Some(i) = ignore_index
            && labels.dtype() == DType::I32
            && i32::try_from(i).is_err()
        {
            return Err(
                self.invalid(format!("hl.cross_entropy: ignore_index {i} is outside the range of the labels' i32"))
            );
        }
        let Some(mut attrs) = reduction_attrs(reduction) else { return self.cross_entropy_each(labels, ignore_index) };
        if let Some(i) = ignore_index {
            attrs.push(("ignore_index", int(i)));
        }
        self.op("hl.cross_entropy", &[self, labels], &attrs)
    }
    /// Each position's cross-entropy, `-log_softmax(self)[label]` (0 where
    /// the label is `ignore_index`): the logits' shape without the class
    /// axis. Labels outside the classes pick nothing (a loss of 0): the
    /// eager op checks its labels' values before it runs.
    fn cross_entropy_each(&self, labels: &Tensor, ignore_index: Option<i64>) -> Result<Tensor> {
        self.cross_entropy_each_smoothed(labels, ignore_index, 0.0)
    }
    /// [`Tensor::cross_entropy`] with PyTorch's `label_smoothing`: each
    /// position's target is `1 - smoothing` on its label plus `smoothing`
    /// spread over the classes, so its loss is `(1 - smoothing) nll +
    /// smoothing mean_c(-log_softmax)`; a mean is over the positions not
    /// labelled `ignore_index`. Composed of the layer API's ops (no `hl`
    /// loss smooths). `smoothing` 0 is the plain loss.
    pub fn cross_entropy_smoothed(
        &self,
        labels: &Tensor,
        reduction: Reduction,
        ignore_index: Option<i64>,
        smoothing: f64,
    ) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&smoothing) {
            return Err(self.invalid(format!("cross_entropy: label smoothing {smoothing} is not in [0, 1]")));
        }
        if smoothing == 0.0 {
            return self.cross_entropy(labels, reduction, ignore_index);
        }
        if reduction == Reduction::None {
            return self.cross_entropy_each_smoothed(labels, ignore_index, smoothing);
        }
        // The label's term by `hl.cross_entropy` itself (its kernel checks
        // every label against the classes), the uniform term beside it over
        // the same counted positions, summed and counted in f32 (in f64 for
        // f64 logits: it lost the loss's digits past f32's).
        let nll = self.cross_entropy(labels, reduction, ignore_index)?;
        let wide = if self.dtype() == DType::F64 { DType::F64 } else { DType::F32 };
        let uniform = self.log_softmax(-1)?.mean(&[-1], false)?.neg()?.cast(wide)?;
        let (uniform, counted) = match ignore_index {
            Some(i) => {
                let ignored = labels.compare(Compare::Eq, &labels.scalar(i as f64)?)?;
                let kept = Tensor::select(&ignored, &uniform.scalar(0.0)?, &uniform)?;
                let count = Tensor::select(&ignored, &uniform.scalar(0.0)?, &uniform.scalar(1.0)?)?;
                (kept, count)
            }
            None => (uniform.clone(), uniform.scalar(labels.spec.num_elements() as f64)?),
        };
        let axes: Vec<i64> = (0..uniform.rank() as i64).collect();
        let total = |t: &Tensor| if axes.is_empty() || t.rank() == 0 { Ok(t.clone()) } else { t.sum(&axes, false) };
        let spread = match reduction {
            Reduction::Mean => total(&uniform)?.div(&total(&counted)?)?,
            _ => total(&uniform)?,
        };
        nll.mul_scalar(1.0 - smoothing)?.add(&spread.cast(nll.dtype())?.mul_scalar(smoothing)?)
    }
    fn cross_entropy_each_smoothed(
        &self,
        labels: &Tensor,
        ignore_index: Option<i64>,
        smoothing: f64,
    ) -> Result<Tensor> {
        let name = "cross_entropy (reduction none)";
        if self.rank() == 0 || labels.shape() != &self.shape()[..self.rank() - 1] {
            return Err(self.invalid(format!(
                "{name}: labels {} do not match logits {} (the logits' shape without its last, class axis)",
                labels.spec, self.spec
            )));
        }
        if !matches!(labels.dtype(), DType::I32 | DType::I64) {
            return Err(self.invalid(format!("{name}: labels {} are not integers (class indices)", labels.spec)));
        }
        let classes = self.shape()[self.rank() - 1];
        let mut class_axis: Vec<i64> = labels.shape().iter().map(|&d| d as i64).collect();
        class_axis.push(1);
        let column = labels.reshape(&class_axis)?;
        let ids = self.graph().arange(classes)?;
        let ids = if labels.dtype() == DType::I32 { ids } else { ids.cast(labels.dtype())? };
        let hit = column.compare(Compare::Eq, &ids)?;
        let log_p = self.log_softmax(-1)?;
        let picked = Tensor::select(&hit, &log_p, &self.scalar(0.0)?)?;
        let nll = picked.sum(&[-1], false)?.neg()?;
        let loss = if smoothing > 0.0 {
            let uniform = log_p.mean(&[-1], false)?.neg()?;
            nll.mul_scalar(1.0 - smoothing)?.add(&uniform.mul_scalar(smoothing)?)?
        } else {
            nll
        };
        match ignore_index {
            Some(i) => {
                let ignored = labels.compare(Compare::Eq, &labels.scalar(i as f64)?)?;
                Tensor::select(&ignored, &loss.scalar(0.0)?, &loss)
            }
            None => Ok(loss),
        }
    }
    pub fn mse_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if reduction == Reduction::None {
            if self.spec != target.spec {
                return Err(self.invalid(format!(
                    "mse_loss (reduction none): input {} and target {} differ",
                    self.spec, target.spec
                )));
            }
            let d = self.sub(target)?;
            return d.mul(&d);
        }
        let Some(attrs) = reduction_attrs(reduction) else {
            return Err(self.invalid("mse_loss: an unreduced loss has no hl form".into()));
        };
        self.op("hl.mse_loss", &[self, target], &attrs)
    }

    // Shape.
    /// The same elements in `shape`; one entry may be -1 and is inferred.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let total = self.spec.num_elements();
        // The product of the given sizes; `None` past 64 bits (no tensor
        // has that many elements).
        let known: Option<i64> = shape.iter().filter(|&&d| d != -1).try_fold(1i64, |p, &d| p.checked_mul(d));
        let holes = shape.iter().filter(|&&d| d == -1).count();
        let bad = shape.iter().any(|&d| d < -1)
            || holes > 1
            || known.is_none_or(|k| holes == 1 && (k == 0 || total as i64 % k != 0));
        if bad {
            return Err(self.invalid(format!("hl.reshape: cannot reshape {} to {shape:?}", self.spec)));
        }
        let dims: Vec<usize> =
            shape.iter().map(|&d| if d == -1 { total / known.unwrap_or(1) as usize } else { d as usize }).collect();
        let spec = TensorSpec::new(dims, self.dtype());
        Ok(self.g().emit("hl.reshape", &[self], &[], Some(&[spec]))?.remove(0))
    }
    /// Flattens the dimensions from `start` on into one.
    pub fn flatten(&self, start: usize) -> Result<Tensor> {
        let mut shape: Vec<i64> = self.shape()[..start.min(self.rank())].iter().map(|&d| d as i64).collect();
        shape.push(-1);
        self.reshape(&shape)
    }
    /// Result dimension `i` is dimension `permutation[i]` (PyTorch's `permute`).
    /// Reorders the dimensions; negative entries count from the last, as
    /// the other ops' axes do.
    pub fn permute(&self, permutation: &[i64]) -> Result<Tensor> {
        let norm = permutation.iter().map(|&a| self.axis(a, "hl.transpose")).collect::<Result<Vec<_>>>()?;
        self.op("hl.transpose", &[self], &[("permutation", array(&norm))])
    }
    /// Swaps two dimensions.
    pub fn transpose(&self, a: i64, b: i64) -> Result<Tensor> {
        let (a, b) = (self.axis(a, "hl.transpose")?, self.axis(b, "hl.transpose")?);
        let mut perm: Vec<i64> = (0..self.rank() as i64).collect();
        perm.swap(a as usize, b as usize);
        self.permute(&perm)
    }
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let spec = TensorSpec::new(shape, self.dtype());
        Ok(self.g().emit("hl.broadcast_to", &[self], &[], Some(&[spec]))?.remove(0))
    }
    pub fn concat(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        let first =
            tensors.first().ok_or_else(|| NnError::Invalid { layer: None, message: "hl.concat: no tensors".into() })?;
        first.op("hl.concat", tensors, &[("axis", int(first.axis(axis, "hl.concat")?))])
    }
    /// `self[start:limit:strides]` in every dimension.
    pub fn slice(&self, start: &[usize], limit: &[usize], strides: &[usize]) -> Result<Tensor> {
        let attrs = [("start", array_usize(start)), ("limit", array_usize(limit)), ("strides", array_usize(strides))];
        self.op("hl.slice", &[self], &attrs)
    }
    /// `len` entries from `start` along `axis` (PyTorch's `narrow`).
    pub fn narrow(&self, axis: i64, start: usize, len: usize) -> Result<Tensor> {
        let a = self.axis(axis, "hl.slice")? as usize;
        let mut lo = vec![0; self.rank()];
        let mut hi = self.shape().to_vec();
        lo[a] = start;
        hi[a] = start.saturating_add(len);
        self.slice(&lo, &hi, &vec![1; self.rank()])
    }
    /// Selects along `axis` by `indices` (an embedding lookup on axis 0).
    pub fn gather(&self, indices: &Tensor, axis: i64) -> Result<Tensor> {
        self.op("hl.gather", &[self, indices], &[("axis", int(self.axis(axis, "hl.gather")?))])
    }
    /// The adjoint of [`Tensor::gather`]: zeros of `shape` (the gathered
    /// tensor's) to which each slice of `self` is added at the place along
    /// `axis` that `indices` names; repeated indices add up (PyTorch's
    /// `index_add` into zeros). Differentiable in `self` (its gradient is
    /// the gather).
    pub fn scatter_add(&self, indices: &Tensor, axis: i64, shape: &[usize]) -> Result<Tensor> {
        let rank = shape.len() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&a) {
            return Err(self.invalid(format!("hl.gather_backward: axis {axis} of a result of rank {rank}")));
        }
        let spec = TensorSpec::new(shape.to_vec(), self.dtype());
        Ok(self.g().emit("hl.gather_backward", &[self, indices], &[("axis", int(a))], Some(&[spec]))?.remove(0))
    }

    // Vision.
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, o: &Conv2dOptions) -> Result<Tensor> {
        let mut operands = vec![self, weight];
        operands.extend(bias);
        let mut attrs = vec![
            ("stride", array_usize(&o.stride)),
            ("padding", array_usize(&o.padding)),
            ("dilation", array_usize(&o.dilation)),
            ("groups", int_usize(o.groups)),
        ];
        if o.layout != Layout::Nchw {
            attrs.push(("layout", layout_attr(o.layout)));
        }
        self.op("hl.conv2d", &operands, &attrs)
    }
    /// A 1-D convolution of `[batch, channels, length]` by a weight
    /// `[out, channels / groups, kernel]` (`F.conv1d`): the 2-D convolution
    /// of a height-1 image, its gradients `hl.conv2d`'s.
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, o: &Conv1dOptions) -> Result<Tensor> {
        if self.rank() != 3 || weight.rank() != 3 {
            return Err(self.invalid(format!(
                "conv1d takes an input [batch, channels, length] and a weight [out, channels / groups, kernel]; got {} \
                 and {}",
                self.spec, weight.spec
            )));
        }
        let (x, w) = (self.shape(), weight.shape());
        let image = self.reshape(&[x[0] as i64, x[1] as i64, 1, x[2] as i64])?;
        let filter = weight.reshape(&[w[0] as i64, w[1] as i64, 1, w[2] as i64])?;
        let o2 = Conv2dOptions {
            stride: [1, o.stride],
            padding: [0, o.padding],
            dilation: [1, o.dilation],
            groups: o.groups,
            layout: Layout::Nchw,
        };
        let y = image.conv2d(&filter, bias, &o2)?;
        let s = y.shape();
        y.reshape(&[s[0] as i64, s[1] as i64, s[3] as i64])
    }
    fn pool(&self, name: &str, o: &Pool2dOptions) -> Result<Tensor> {
        let mut attrs = vec![
            ("kernel", array_usize(&o.kernel)),
            ("stride", array_usize(&o.stride)),
            ("padding", array_usize(&o.padding)),
        ];
        if o.layout != Layout::Nchw {
            attrs.push(("layout", layout_attr(o.layout)));
        }
        self.op(name, &[self], &attrs)
    }
    pub fn max_pool2d(&self, o: &Pool2dOptions) -> Result<Tensor> {
        self.pool("hl.max_pool2d", o)
    }
    pub fn avg_pool2d(&self, o: &Pool2dOptions) -> Result<Tensor> {
        self.pool("hl.avg_pool2d", o)
    }

    // Attention.
    /// `softmax(q k^T * scale) v`, `scale` defaulting to `1 / sqrt(D)`.
    pub fn attention(query: &Tensor, key: &Tensor, value: &Tensor, causal: bool, scale: Option<f64>) -> Result<Tensor> {
        let mut attrs = Vec::new();
        if causal {
            attrs.push(("causal", "unit".to_string()));
        }
        if let Some(s) = scale {
            attrs.push(("scale", format!("{} : f64", Float(s))));
        }
        query.op("hl.attention", &[query, key, value], &attrs)
    }

    /// Normal random numbers of this tensor's shape and dtype (its values
    /// unread), mean `mean` and deviation `std`: `torch.randn_like(x) * std
    /// + mean`, a VAE's reparameterisation noise. While training, drawn
    /// afresh each step from the step's seed, as dropout's masks are (and
    /// with no gradient); in evaluation (`@forward`), the mean, so that a
    /// prediction is deterministic, as with dropout off.
    pub fn randn_like(&self, mean: f64, std: f64) -> Result<Tensor> {
        if !(mean.is_finite() && std.is_finite() && std >= 0.0) {
            return Err(self.invalid(format!("randn_like: mean {mean} and deviation {std} must be finite, std >= 0")));
        }
        self.random_like("normal", mean, std, mean)
    }

    /// Uniform random numbers in `[low, high)` of this tensor's shape and
    /// dtype (`torch.rand_like`, scaled): drawn as [`Tensor::randn_like`]'s
    /// are; in evaluation, the midpoint.
    pub fn rand_like(&self, low: f64, high: f64) -> Result<Tensor> {
        if !(low.is_finite() && high.is_finite() && low <= high) {
            return Err(self.invalid(format!("rand_like: the range [{low}, {high}) must be finite and not reversed")));
        }
        self.random_like("uniform", low, high, 0.5 * (low + high))
    }

    /// Ones of this float tensor's shape and dtype that follow its shape
    /// when the batch is retargeted (a constant of the traced shape would
    /// not): the normal noise op of no spread on a constant seed.
    pub(crate) fn ones_like(&self) -> Result<Tensor> {
        let zero = self.graph().constant(&[0.0], &TensorSpec::new([], DType::I64))?;
        self.drawn("normal", (1.0, 0.0), (&zero, &zero, 0))
    }

    /// `hl.random_like` of `kind` with parameters `a` and `b` on the seed,
    /// offset and stream given.
    fn drawn(&self, kind: &str, (a, b): (f64, f64), (seed, offset, stream): (&Tensor, &Tensor, i64)) -> Result<Tensor> {
        let attrs = [
            ("kind", format!("{kind:?}")),
            ("a", format!("{} : f64", Float(a))),
            ("b", format!("{} : f64", Float(b))),
            ("stream", int(stream)),
        ];
        self.op("hl.random_like", &[self, seed, offset], &attrs)
    }

    fn random_like(&self, kind: &str, a: f64, b: f64, mean: f64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(self.invalid(format!("{kind} noise like {}: the tensor must be a float", self.spec)));
        }
        // In evaluation, the mean: the same op of no spread (normal b = 0,
        // uniform [mean, mean]) on a constant seed, so that its shape still
        // follows `like`'s (a constant broadcast to the traced shape fixed
        // the batch size, which `--batch` and a smaller last batch change).
        if self.graph().is_training() {
            let (seed, offset, stream) = self.g().rng()?;
            return self.drawn(kind, (a, b), (&seed, &offset, stream));
        }
        let zero = self.graph().constant(&[0.0], &TensorSpec::new([], DType::I64))?;
        let none = if kind == "normal" { (mean, 0.0) } else { (mean, mean) };
        self.drawn(kind, none, (&zero, &zero, 0))
    }

    /// Inverted dropout while training; the identity (no op) in evaluation.
    pub fn dropout(&self, p: f64) -> Result<Tensor> {
        if !(0.0..1.0).contains(&p) {
            return Err(self.invalid(format!("dropout probability {p} must be in [0, 1)")));
        }
        if !self.graph().is_training() || p == 0.0 {
            return Ok(self.clone());
        }
        let (seed, offset, stream) = self.g().rng()?;
        self.op("hl.dropout", &[self, &seed, &offset], &[("p", format!("{} : f64", Float(p))), ("stream", int(stream))])
    }
}
