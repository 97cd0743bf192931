//! The Rust layer API: models written like PyTorch's `nn.Module`, traced
//! into `hl`.
//!
//! A forward call runs ordinary Rust code on [`Tensor`]s; every op it
//! executes is recorded at once as an `hl` operation whose result type the
//! op infers itself, so `if`, loops and shape-dependent choices decide the
//! graph, and a shape mistake is reported where it is made, as an
//! [`NnError`] naming the layer path and the operand types. Layers declare
//! their parameters (`hl.param`, with owner and PyTorch's initializer) the
//! first time they run; a layer called twice shares its parameters.
//!
//! ```ignore
//! use aicf_compiler::nn::{self, Module, TensorSpec, DType};
//! let model = nn::Sequential::new()
//!     .push(nn::Linear::new("fc1", 64, 128))
//!     .push(nn::ReLU)
//!     .push(nn::Linear::new("fc2", 128, 10));
//! let hl = nn::classifier_module(&model, &TensorSpec::f32([32, 64]), &TensorSpec::new([32], DType::I32))?;
//! println!("{hl}"); // hl.param @fc1.weight ..., func.func @forward, func.func @loss
//! ```
//!
//! [`Traced`] caches the traced module per input shapes and dtypes, so a
//! repeated call with the same shapes does not trace again.

mod einsum;
mod graph;
mod layers;
pub(crate) mod ops;

/// The element and tensor types of `hl` (defined in [`crate::types`]).
pub use crate::types::{DType, TensorSpec};
pub use graph::{FunctionSig, Graph, LayerRef, Mode, ParamSpec, StateSpec, Tensor};
pub use layers::*;
pub use ops::{Compare, Conv1dOptions, Conv2dOptions, GeluApproximation, Layout, Pool2dOptions, Reduction};

use crate::CompilerContext;
use graph::GraphState;
pub(crate) use graph::spec_of as spec_of_type;
use melior::ir::Module as MlirModule;
pub(crate) use ops::float_literal;
use std::{cell::Cell, cell::RefCell, collections::HashMap, fmt, rc::Rc};

/// What went wrong while tracing a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NnError {
    /// An op refused its operands (a shape or dtype mistake); `message` is
    /// the op's own diagnostic, which names the operand types.
    #[error("{}{message}", at(.layer))]
    Op { layer: Option<LayerRef>, op: String, message: String, operands: Vec<String> },
    /// A layer or function was given arguments it cannot work with.
    #[error("{}{message}", at(.layer))]
    Invalid { layer: Option<LayerRef>, message: String },
    /// A bug in AICF, not in the model.
    #[error("internal error while tracing: {0}")]
    Internal(String),
}

fn at(layer: &Option<LayerRef>) -> String {
    layer.as_ref().map(|l| format!("{l}: ")).unwrap_or_default()
}

impl NnError {
    /// The layer the error happened in, innermost first.
    pub fn layer(&self) -> Option<&LayerRef> {
        match self {
            NnError::Op { layer, .. } | NnError::Invalid { layer, .. } => layer.as_ref(),
            NnError::Internal(_) => None,
        }
    }
}

pub type Result<T, E = NnError> = std::result::Result<T, E>;

/// A layer: anything with a forward pass over one tensor.
pub trait Module {
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

impl<M: Module + ?Sized> Module for Box<M> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }
}

/// Runs `body` as the forward pass of the layer at `path`: ops traced inside
/// carry the path as their location, and an error from inside names the
/// innermost layer it happened in.
pub fn layer<T>(
    x: &Tensor,
    path: &str,
    describe: impl FnOnce() -> String,
    body: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let graph = &x.graph;
    graph.push_scope(LayerRef { path: path.to_string(), layer: describe() });
    let result = body();
    let scope = graph.current_scope();
    graph.pop_scope();
    result.map_err(|e| match e {
        NnError::Op { layer: None, op, message, operands } => NnError::Op { layer: scope, op, message, operands },
        NnError::Invalid { layer: None, message } => NnError::Invalid { layer: scope, message },
        e => e,
    })
}

/// Path of a child layer: `parent.name`, or `name` at the root.
pub fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() { name.to_string() } else { format!("{parent}.{name}") }
}

/// A traced `hl` module: its text and what it declares.
#[derive(Debug, Clone, PartialEq)]
pub struct HlModule {
    /// The module as `.mlir` text (verified).
    pub text: String,
    /// Parameters in declaration order.
    pub params: Vec<ParamSpec>,
    /// The states the model keeps itself, in declaration order.
    pub states: Vec<StateSpec>,
    /// Traced functions in order.
    pub functions: Vec<FunctionSig>,
}

impl HlModule {
    /// Parses the module into `ctx` for passes and pipelines.
    pub fn parse<'c>(&self, ctx: &'c CompilerContext) -> crate::Result<MlirModule<'c>> {
        ctx.parse(&self.text, "<traced>")
    }
    pub fn function(&self, name: &str) -> Option<&FunctionSig> {
        self.functions.iter().find(|f| f.name == name)
    }
}

impl fmt::Display for HlModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Builds an `hl` module function by function; parameters are shared
/// between the functions by name.
pub struct ModuleBuilder {
    graph: Rc<GraphState>,
}

impl Default for ModuleBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ModuleBuilder {
    pub fn new() -> Self {
        ModuleBuilder { graph: GraphState::new() }
    }

    /// Traces `body` as `func.func @name(inputs...) -> outputs`. In
    /// [`Mode::Train`] dropout is active and, where used, the function takes
    /// the step's `seed` and `offset` after `inputs`.
    pub fn function(
        &mut self,
        name: &str,
        mode: Mode,
        inputs: &[TensorSpec],
        body: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<FunctionSig> {
        if let Some((i, d)) = inputs
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.shape.iter().find(|&&d| d > i64::MAX as usize).map(|d| (i, d)))
        {
            return Err(NnError::Invalid {
                layer: None,
                message: format!("@{name}'s input #{i} has a dimension of {d}, past the 2^63 - 1 a dimension may be"),
            });
        }
        let args = self.graph.begin_function(name, mode, inputs)?;
        let outputs = match body(&args) {
            Ok(outputs) => outputs,
            Err(e) => {
                drop(args);
                self.graph.abandon_function();
                return Err(e);
            }
        };
        if let Err(e) = self.graph.end_function(&outputs) {
            self.graph.abandon_function();
            return Err(e);
        }
        self.graph.last_function()
    }

    /// Verifies and prints the module.
    pub fn finish(self) -> Result<HlModule> {
        self.graph.finish()
    }
}

/// `@forward(input) -> output` of `model`, evaluation mode.
pub fn forward_module(model: &dyn Module, input: &TensorSpec) -> Result<HlModule> {
    let mut b = ModuleBuilder::new();
    b.function("forward", Mode::Eval, std::slice::from_ref(input), |xs| Ok(vec![model.forward(&xs[0])?]))?;
    b.finish()
}

/// A classifier's module: `@forward(x) -> logits` (evaluation mode) and
/// `@loss(x, labels) -> mean cross-entropy` (training mode). Logits
/// `[..., C]` go with labels `[...]`, so a language model's `[B, T, V]`
/// logits take `[B, T]` targets.
pub fn classifier_module(model: &dyn Module, input: &TensorSpec, labels: &TensorSpec) -> Result<HlModule> {
    let mut b = ModuleBuilder::new();
    b.function("forward", Mode::Eval, std::slice::from_ref(input), |xs| Ok(vec![model.forward(&xs[0])?]))?;
    b.function("loss", Mode::Train, &[input.clone(), labels.clone()], |xs| {
        let logits = model.forward(&xs[0])?;
        Ok(vec![logits.cross_entropy(&xs[1], Reduction::Mean, None)?])
    })?;
    b.finish()
}

/// A regression model's module: `@forward(x) -> [batch, 1]` (evaluation
/// mode) and `@loss(x, targets [batch]) -> mean squared error` (training
/// mode).
pub fn regression_module(model: &dyn Module, input: &TensorSpec, targets: &TensorSpec) -> Result<HlModule> {
    let batch = input.shape.first().copied().unwrap_or(1) as i64;
    let mut b = ModuleBuilder::new();
    b.function("forward", Mode::Eval, std::slice::from_ref(input), |xs| Ok(vec![model.forward(&xs[0])?]))?;
    b.function("loss", Mode::Train, &[input.clone(), targets.clone()], |xs| {
        let y = model.forward(&xs[0])?.reshape(&[batch])?;
        Ok(vec![y.mse_loss(&xs[1], Reduction::Mean)?])
    })?;
    b.finish()
}

/// Traces on demand and caches the result per input specs: the first call
/// with a set of shapes and dtypes traces, later calls with the same ones
/// return the cached module.
pub struct Traced<F> {
    build: F,
    cache: RefCell<HashMap<Vec<TensorSpec>, Rc<HlModule>>>,
    traces: Cell<usize>,
}

impl<F: Fn(&[TensorSpec]) -> Result<HlModule>> Traced<F> {
    pub fn new(build: F) -> Self {
        Traced { build, cache: RefCell::new(HashMap::new()), traces: Cell::new(0) }
    }

    pub fn get(&self, inputs: &[TensorSpec]) -> Result<Rc<HlModule>> {
        if let Some(m) = self.cache.borrow().get(inputs) {
            return Ok(m.clone());
        }
        let module = Rc::new((self.build)(inputs)?);
        self.traces.set(self.traces.get() + 1);
        self.cache.borrow_mut().insert(inputs.to_vec(), module.clone());
        Ok(module)
    }

    /// How many times the model was traced (cache misses).
    pub fn traces(&self) -> usize {
        self.traces.get()
    }
}
