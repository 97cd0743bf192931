//! The tracing graph: every op a forward call executes is built at once as
//! a real `hl` operation, with its result type inferred by the op itself
//! (the C++ `InferTypeOpInterface`), so the Rust API and `.mlir` files share
//! one set of shape rules and one set of diagnostics.
//!
//! Ownership: a [`GraphState`] owns an MLIR context and one module; the
//! functions under construction live in that module (or in a region owned
//! here until the function is finished). [`Tensor`]s hold raw handles to
//! values in it and an `Rc` that keeps it alive.

use super::{DType, NnError, Result, TensorSpec};
use crate::{
    CompilerContext,
    ffi::string_ref,
    ir::{self, BuildError, OpSpec},
};
use aicf_runtime::init::Init;
use mlir_sys::*;
use std::{cell::RefCell, fmt, rc::Rc};

/// A value of the graph being traced: its shape and dtype are known as soon
/// as the op that produced it was traced.
#[derive(Clone)]
pub struct Tensor {
    pub(super) graph: Rc<GraphState>,
    /// The traced function the value belongs to; a value is only usable
    /// there (it is a raw handle into that function's body).
    pub(super) function: u64,
    pub(super) value: MlirValue,
    pub(super) spec: TensorSpec,
    /// The values, when the graph runs eagerly ([`Graph::eager`]).
    pub(super) data: Option<crate::eager::Tensor>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({})", self.spec)
    }
}

impl Tensor {
    /// The values of a tensor of an eager graph ([`Graph::eager`]).
    pub fn eager(&self) -> Option<&crate::eager::Tensor> {
        self.data.as_ref()
    }
    pub fn spec(&self) -> &TensorSpec {
        &self.spec
    }
    pub fn shape(&self) -> &[usize] {
        &self.spec.shape
    }
    pub fn dtype(&self) -> DType {
        self.spec.dtype
    }
    pub fn rank(&self) -> usize {
        self.spec.shape.len()
    }
    /// The graph this tensor belongs to: where layers declare parameters and
    /// constants.
    pub fn graph(&self) -> Graph {
        Graph(self.graph.clone())
    }
}

/// A handle on the graph being traced.
#[derive(Clone)]
pub struct Graph(pub(super) Rc<GraphState>);

/// A parameter of the traced model, as declared by an `hl.param`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    pub owner: String,
    pub spec: TensorSpec,
    pub init: Init,
}

/// A state the model keeps itself (`hl.state` without a parameter: a batch
/// norm's running statistics), which the train step updates through
/// `hl.set_state`.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSpec {
    pub name: String,
    pub slot: String,
    pub spec: TensorSpec,
    pub init: Init,
}

/// The signature of a traced function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSig {
    pub name: String,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    /// True when the function takes the step's `seed` and `offset` (two
    /// `tensor<i64>`) after its declared inputs, because it uses dropout.
    pub takes_rng: bool,
}

/// Whether a traced function trains (dropout active) or evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Train,
    Eval,
}

/// The layer whose forward call is running, for diagnostics and locations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerRef {
    /// Path of the layer in the model (`blocks.0.attn.q_proj`).
    pub path: String,
    /// What the layer is (`Linear(64 -> 32)`).
    pub layer: String,
}

impl fmt::Display for LayerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "<model>" } else { &self.path };
        write!(f, "in `{path}` ({})", self.layer)
    }
}

struct FunctionState {
    id: u64,
    name: String,
    region: MlirRegion,
    block: MlirBlock,
    inputs: Vec<TensorSpec>,
    mode: Mode,
    rng: Option<(MlirValue, MlirValue)>,
    next_stream: i64,
}

struct Inner {
    module: MlirModule,
    first_func: Option<MlirOperation>,
    params: Vec<ParamSpec>,
    states: Vec<StateSpec>,
    function: Option<FunctionState>,
    functions: Vec<FunctionSig>,
    scopes: Vec<LayerRef>,
    next_function_id: u64,
}

pub(crate) struct GraphState {
    // Declared before `ctx`: the IR it owns is destroyed (in Drop) before
    // the context that holds it.
    inner: RefCell<Inner>,
    ctx: CompilerContext,
    /// Set for a graph that runs its ops at once instead of tracing them.
    eager: Option<EagerState>,
}

/// What an eager graph keeps: its mode, its parameters and model state (a
/// batch norm's running statistics; replaced by `set_state` in training),
/// each created on first use with its initializer, the `i`-th symbol from
/// stream `i` under `seed`, as a compiled model's are, and dropout's
/// counters.
struct EagerState {
    mode: Mode,
    seed: u64,
    /// Where its parameters, state and ops live.
    device: crate::eager::Device,
    params: RefCell<Vec<(String, crate::eager::Tensor)>>,
    states: RefCell<Vec<(String, crate::eager::Tensor)>>,
    /// States set before the model first used them: taken when it does,
    /// without counting among the symbols created until then (each counted
    /// symbol moves the random stream of the parameters after it).
    preset: RefCell<Vec<(String, crate::eager::Tensor)>>,
    offset: std::cell::Cell<u64>,
}

impl Drop for GraphState {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        unsafe {
            if let Some(f) = inner.function.take() {
                mlirRegionDestroy(f.region);
            }
            mlirModuleDestroy(inner.module);
        }
    }
}

impl GraphState {
    pub(super) fn new() -> Rc<Self> {
        Self::with(None)
    }

    /// A graph whose ops run at once on eager tensors (see [`Graph::eager`]).
    pub(super) fn new_eager(mode: Mode, seed: u64, device: crate::eager::Device) -> Rc<Self> {
        Self::with(Some(EagerState {
            mode,
            seed,
            device,
            params: RefCell::new(Vec::new()),
            states: RefCell::new(Vec::new()),
            preset: RefCell::new(Vec::new()),
            offset: std::cell::Cell::new(0),
        }))
    }

    fn with(eager: Option<EagerState>) -> Rc<Self> {
        let ctx = CompilerContext::new();
        let module = unsafe { mlirModuleCreateEmpty(mlirLocationUnknownGet(ctx.mlir().to_raw())) };
        Rc::new(GraphState {
            inner: RefCell::new(Inner {
                module,
                first_func: None,
                params: Vec::new(),
                states: Vec::new(),
                function: None,
                functions: Vec::new(),
                scopes: Vec::new(),
                next_function_id: 0,
            }),
            ctx,
            eager,
        })
    }

    pub(super) fn is_eager(&self) -> bool {
        self.eager.is_some()
    }

    /// Where an eager graph's tensors live.
    pub(super) fn eager_device(&self) -> Option<crate::eager::Device> {
        self.eager.as_ref().map(|e| e.device)
    }

    /// An eager tensor as a value of this (eager) graph.
    pub(super) fn wrap(self: &Rc<Self>, data: crate::eager::Tensor) -> Result<Tensor> {
        let spec = data.spec().map_err(|e| NnError::Invalid { layer: self.current_scope(), message: e.to_string() })?;
        Ok(Tensor {
            graph: self.clone(),
            function: 0,
            value: MlirValue { ptr: std::ptr::null() },
            spec,
            data: Some(data),
        })
    }

    /// The eager graph's parameters in the order they were created.
    pub(super) fn eager_params(&self) -> Vec<(String, crate::eager::Tensor)> {
        self.eager.as_ref().map(|e| e.params.borrow().clone()).unwrap_or_default()
    }

    /// The eager graph's model state (running statistics), in the order it
    /// was created, at its current values.
    pub(super) fn eager_states(&self) -> Vec<(String, crate::eager::Tensor)> {
        self.eager.as_ref().map(|e| e.states.borrow().clone()).unwrap_or_default()
    }

    /// Sets the eager graph's state `name` (created on first use before,
    /// or not yet: then it starts from `values` when the model first uses
    /// it, and the parameters before it start as they would without it),
    /// e.g. from a compiled trainer's state.
    pub(super) fn set_eager_state(self: &Rc<Self>, name: &str, shape: &[usize], values: Vec<f32>) -> Result<()> {
        let Some(e) = &self.eager else { return Err(NnError::Internal("not an eager graph".into())) };
        let invalid = |message: String| NnError::Invalid { layer: None, message };
        let t = crate::eager::Tensor::from_vec(shape, values)
            .and_then(|t| t.to(&e.device))
            .map_err(|err| invalid(err.to_string()))?;
        // A state the model uses already, or one held aside until it does.
        let (mut states, mut preset) = (e.states.borrow_mut(), e.preset.borrow_mut());
        let (list, was) =
            if states.iter().any(|(n, _)| n == name) { (&mut *states, "is") } else { (&mut *preset, "was set as") };
        match list.iter_mut().find(|(n, _)| n == name) {
            Some((_, old)) if old.shape() != shape => {
                Err(invalid(format!("state `{name}` {was} {:?}, not {shape:?}", old.shape())))
            }
            Some((_, old)) => {
                *old = t;
                Ok(())
            }
            None => {
                list.push((name.to_string(), t));
                Ok(())
            }
        }
    }

    /// The eager graph's state `name`, created on first use from `init`
    /// (from the stream the compiled runtime draws it from: its place among
    /// the symbols first declared).
    fn eager_state(self: &Rc<Self>, name: &str, spec: &TensorSpec, init: &Init) -> Result<Tensor> {
        let Some(e) = &self.eager else { return Err(NnError::Internal("not an eager graph".into())) };
        let invalid = |message: String| NnError::Invalid { layer: self.current_scope(), message };
        if let Some((_, t)) = e.states.borrow().iter().find(|(n, _)| n == name) {
            if t.shape() != spec.shape {
                return Err(invalid(format!(
                    "state `{name}` is used again as {}, but it is {:?}",
                    spec.mlir_type(),
                    t.shape()
                )));
            }
            return self.wrap(t.clone());
        }
        if spec.dtype != DType::F32 {
            return Err(invalid(format!("eager model state is f32, `{name}` is {}", spec.mlir_type())));
        }
        let preset = {
            let mut preset = e.preset.borrow_mut();
            preset.iter().position(|(n, _)| n == name).map(|i| preset.remove(i).1)
        };
        if let Some(t) = preset {
            if t.shape() != spec.shape {
                return Err(invalid(format!(
                    "state `{name}` was set as {:?}, but the model uses it as {}",
                    t.shape(),
                    spec.mlir_type()
                )));
            }
            e.states.borrow_mut().push((name.to_string(), t.clone()));
            return self.wrap(t);
        }
        let stream = (e.params.borrow().len() + e.states.borrow().len()) as u64;
        let mut values = host_zeros(name, spec.num_elements()).map_err(invalid)?;
        init.fill(&spec.shape, e.seed, stream, &mut values).map_err(|err| invalid(format!("`{name}`: {err}")))?;
        let t = crate::eager::Tensor::from_vec(&spec.shape, values)
            .and_then(|t| t.to(&e.device))
            .map_err(|err| invalid(err.to_string()))?;
        e.states.borrow_mut().push((name.to_string(), t.clone()));
        self.wrap(t)
    }

    /// Runs op `name` at once on `operands`' values: the op traced alone
    /// (this very op, emitted on traced operands) and compiled once by the
    /// eager dispatcher.
    fn eager_emit(
        self: &Rc<Self>,
        name: &str,
        operands: &[&Tensor],
        attributes: &[(&str, String)],
        results: Option<&[TensorSpec]>,
    ) -> Result<Vec<Tensor>> {
        let types: Vec<String> = operands.iter().map(|t| t.spec.mlir_type()).collect();
        let invalid = |message: String| NnError::Invalid { layer: self.current_scope(), message };
        if operands.is_empty() {
            return Err(invalid(format!("'{name}' without operands cannot run eagerly")));
        }
        let data: Vec<crate::eager::Tensor> = operands
            .iter()
            .map(|t| t.data.clone().ok_or_else(|| invalid(format!("'{name}' got a traced tensor in an eager graph"))))
            .collect::<Result<_>>()?;
        let op = name.to_string();
        let attrs: Vec<(String, String)> = attributes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let results = results.map(|r| r.to_vec());
        let key = format!("{name} {attrs:?} {results:?}");
        let build: crate::eager::Build = Box::new(move |xs: &[Tensor]| {
            let attrs: Vec<(&str, String)> = attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let refs: Vec<&Tensor> = xs.iter().collect();
            let mut out = xs[0].graph.emit(&op, &refs, &attrs, results.as_deref())?;
            if out.len() != 1 {
                return Err(NnError::Internal(format!("'{op}' has {} results; eager ops have one", out.len())));
            }
            Ok(out.remove(0))
        });
        let refs: Vec<&crate::eager::Tensor> = data.iter().collect();
        let out = crate::eager::call(key, build, &refs).map_err(|e| NnError::Op {
            layer: self.current_scope(),
            op: name.to_string(),
            message: e.to_string(),
            operands: types,
        })?;
        Ok(vec![self.wrap(out)?])
    }

    /// The eager graph's parameter `name`, created on first use from `init`.
    fn eager_param(self: &Rc<Self>, name: &str, spec: &TensorSpec, init: &Init) -> Result<Tensor> {
        let Some(e) = &self.eager else { return Err(NnError::Internal("not an eager graph".into())) };
        let invalid = |message: String| NnError::Invalid { layer: self.current_scope(), message };
        if let Some((_, t)) = e.params.borrow().iter().find(|(n, _)| n == name) {
            if t.shape() != spec.shape {
                return Err(invalid(format!(
                    "parameter `{name}` is used again as {}, but it is {:?}",
                    spec.mlir_type(),
                    t.shape()
                )));
            }
            return self.wrap(t.clone());
        }
        if spec.dtype != DType::F32 {
            return Err(invalid(format!("eager parameters are f32, `{name}` is {}", spec.mlir_type())));
        }
        // The compiled runtime draws symbol i of its table (parameters and
        // model state, as first declared) from stream i.
        let stream = (e.params.borrow().len() + e.states.borrow().len()) as u64;
        let mut values = host_zeros(name, spec.num_elements()).map_err(invalid)?;
        init.fill(&spec.shape, e.seed, stream, &mut values).map_err(|err| invalid(format!("`{name}`: {err}")))?;
        let t = crate::eager::Tensor::from_vec(&spec.shape, values)
            .and_then(|t| t.to(&e.device))
            .map_err(|err| invalid(err.to_string()))?
            .param();
        e.params.borrow_mut().push((name.to_string(), t.clone()));
        self.wrap(t)
    }

    /// The seed, offset and stream of a random op (dropout, noise) in an
    /// eager graph (a fresh offset per use).
    fn eager_rng(self: &Rc<Self>) -> Result<(Tensor, Tensor, i64)> {
        let Some(e) = &self.eager else { return Err(NnError::Internal("not an eager graph".into())) };
        let scalar = |v: u64| {
            let host =
                aicf_runtime::Tensor::new(Vec::<usize>::new(), aicf_runtime::artifact::DType::I64, vec![v as f64]);
            let t = crate::eager::Tensor::from_host(host)
                .and_then(|t| t.to(&e.device))
                .map_err(|err| NnError::Invalid { layer: self.current_scope(), message: err.to_string() })?;
            self.wrap(t)
        };
        let offset = e.offset.get();
        e.offset.set(offset + aicf_runtime::rng::STEP_BLOCKS);
        // One stream: each use draws at its own offset, and a kernel keyed
        // by its attributes is compiled once, not per call.
        let stream = 0;
        Ok((scalar(e.seed)?, scalar(offset)?, stream))
    }

    fn raw_ctx(&self) -> MlirContext {
        self.ctx.mlir().to_raw()
    }

    pub(super) fn push_scope(&self, scope: LayerRef) {
        self.inner.borrow_mut().scopes.push(scope);
    }
    pub(super) fn pop_scope(&self) {
        self.inner.borrow_mut().scopes.pop();
    }
    pub(super) fn current_scope(&self) -> Option<LayerRef> {
        self.inner.borrow().scopes.last().cloned()
    }
    pub(super) fn mode(&self) -> Mode {
        if let Some(e) = &self.eager {
            return e.mode;
        }
        self.inner.borrow().function.as_ref().map_or(Mode::Eval, |f| f.mode)
    }

    /// The location of ops traced now: the innermost layer's path.
    fn location(&self) -> MlirLocation {
        let ctx = self.raw_ctx();
        let inner = self.inner.borrow();
        unsafe {
            let unknown = mlirLocationUnknownGet(ctx);
            match inner.scopes.last() {
                Some(s) if !s.path.is_empty() => mlirLocationNameGet(ctx, string_ref(&s.path), unknown),
                _ => unknown,
            }
        }
    }

    fn parse_type(&self, text: &str) -> Result<MlirType> {
        ir::parse_type(self.raw_ctx(), text).map_err(|e| self.build_error(e, "", &[]))
    }

    /// Creates `spec` at the current location, turning a refusal into the
    /// op's diagnostics.
    fn create(&self, spec: &OpSpec<'_>, location: MlirLocation, operand_types: &[String]) -> Result<MlirOperation> {
        self.ctx.take_diagnostics();
        ir::create_op(self.raw_ctx(), location, spec).map_err(|e| self.build_error(e, spec.name, operand_types))
    }

    fn build_error(&self, e: BuildError, op: &str, operand_types: &[String]) -> NnError {
        match e {
            BuildError::Syntax(what) => {
                let why: Vec<String> = self.ctx.take_diagnostics().into_iter().map(|d| d.message).collect();
                NnError::Internal(format!("cannot parse the {what}: {}", why.join("; ")))
            }
            BuildError::Refused => self.op_error(op, operand_types),
        }
    }

    /// The error for an op MLIR refused: its diagnostics, the layer it was
    /// traced in and the operand types.
    fn op_error(&self, op: &str, operands: &[String]) -> NnError {
        let diagnostics = self.ctx.take_diagnostics();
        let message = if diagnostics.is_empty() {
            format!("'{op}' op cannot be built from operands {}", operands.join(", "))
        } else {
            diagnostics.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; ")
        };
        NnError::Op { layer: self.current_scope(), op: op.to_string(), message, operands: operands.to_vec() }
    }

    /// Traces one op into the current function. `results` gives the result
    /// types of ops whose types do not follow from their operands (reshape,
    /// cast, constant, ...); otherwise the op infers them.
    pub(super) fn emit(
        self: &Rc<Self>,
        name: &str,
        operands: &[&Tensor],
        attributes: &[(&str, String)],
        results: Option<&[TensorSpec]>,
    ) -> Result<Vec<Tensor>> {
        self.emit_op(name, operands, attributes, results, true)
    }

    fn emit_op(
        self: &Rc<Self>,
        name: &str,
        operands: &[&Tensor],
        attributes: &[(&str, String)],
        results: Option<&[TensorSpec]>,
        verify: bool,
    ) -> Result<Vec<Tensor>> {
        if self.eager.is_some() {
            return self.eager_emit(name, operands, attributes, results);
        }
        for t in operands {
            if !Rc::ptr_eq(&t.graph, self) {
                return Err(NnError::Invalid {
                    layer: self.current_scope(),
                    message: format!("'{name}' got a tensor {} of a different graph", t.spec),
                });
            }
        }
        let (block, function) = match &self.inner.borrow().function {
            Some(f) => (f.block, f.id),
            None => {
                return Err(NnError::Invalid {
                    layer: None,
                    message: format!("'{name}' traced outside a function being built"),
                });
            }
        };
        if let Some(t) = operands.iter().find(|t| t.function != function) {
            return Err(NnError::Invalid {
                layer: self.current_scope(),
                message: format!(
                    "'{name}' got a tensor {} of another traced function; values do not cross functions",
                    t.spec
                ),
            });
        }
        let result_types: Vec<MlirType> = match results {
            Some(specs) => specs.iter().map(|s| self.parse_type(&s.mlir_type())).collect::<Result<_>>()?,
            None => Vec::new(),
        };
        let values: Vec<MlirValue> = operands.iter().map(|t| t.value).collect();
        let operand_types: Vec<String> = operands.iter().map(|t| t.spec.mlir_type()).collect();
        // Inferred ops were checked by their inference; the others (and the
        // attribute rules of all) by the verifier. Symbol uses are checked
        // when the module is finished.
        let spec = OpSpec {
            operands: &values,
            attributes,
            results: results.map(|_| result_types.as_slice()),
            verify,
            ..OpSpec::new(name)
        };
        let op = self.create(&spec, self.location(), &operand_types)?;
        unsafe { mlirBlockAppendOwnedOperation(block, op) };
        let n = unsafe { mlirOperationGetNumResults(op) };
        (0..n)
            .map(|i| {
                let value = unsafe { mlirOperationGetResult(op, i) };
                Ok(Tensor {
                    graph: self.clone(),
                    function,
                    value,
                    spec: spec_of(unsafe { mlirValueGetType(value) })?,
                    data: None,
                })
            })
            .collect()
    }

    /// Declares (once) and reads a parameter.
    pub(super) fn param(self: &Rc<Self>, name: &str, owner: &str, spec: &TensorSpec, init: &Init) -> Result<Tensor> {
        if let Some(d) = spec.shape.iter().find(|&&d| d > i64::MAX as usize) {
            // MLIR's dimensions are i64: a width past it names the layer,
            // not an IR it cannot parse.
            return Err(NnError::Invalid {
                layer: self.current_scope(),
                message: format!("parameter `{name}` has a dimension of {d}, past the 2^63 - 1 a dimension may be"),
            });
        }
        if self.eager.is_some() {
            return self.eager_param(name, spec, init);
        }
        let existing = self.inner.borrow().params.iter().find(|p| p.name == name).cloned();
        match existing {
            Some(p) if p.spec != *spec || p.init != *init => {
                return Err(NnError::Invalid {
                    layer: self.current_scope(),
                    message: format!(
                        "parameter `{name}` is declared again as {} with init {init}, but it is {} with init {}",
                        spec.mlir_type(),
                        p.spec.mlir_type(),
                        p.init
                    ),
                });
            }
            Some(_) => {}
            None => self.declare_param(name, owner, spec, init)?,
        }
        let symbol = format!("@{}", quote_symbol(name));
        Ok(self.emit("hl.get_param", &[], &[("name", symbol)], Some(std::slice::from_ref(spec)))?.remove(0))
    }

    /// Declares the model state `name` the first time (as `param` does)
    /// and reads it.
    pub(super) fn state(self: &Rc<Self>, name: &str, slot: &str, spec: &TensorSpec, init: &Init) -> Result<Tensor> {
        if self.eager.is_some() {
            let _ = slot;
            return self.eager_state(name, spec, init);
        }
        let existing = self.inner.borrow().states.iter().find(|p| p.name == name).cloned();
        match existing {
            Some(p) if p.spec != *spec || p.init != *init || p.slot != slot => {
                return Err(NnError::Invalid {
                    layer: self.current_scope(),
                    message: format!(
                        "state `{name}` is declared again as {} slot {slot} with init {init}, but it is {} slot {} with \
                         init {}",
                        spec.mlir_type(),
                        p.spec.mlir_type(),
                        p.slot,
                        p.init
                    ),
                });
            }
            Some(_) => {}
            None => {
                let attrs = [
                    ("sym_name", ir::quoted(name)),
                    ("type", spec.mlir_type()),
                    ("slot", ir::quoted(slot)),
                    ("init", format!("#hl.init<{init}>")),
                ];
                self.declare("hl.state", &attrs, spec)?;
                self.inner.borrow_mut().states.push(StateSpec {
                    name: name.into(),
                    slot: slot.into(),
                    spec: spec.clone(),
                    init: *init,
                });
            }
        }
        let symbol = format!("@{}", quote_symbol(name));
        Ok(self.emit("hl.get_state", &[], &[("name", symbol)], Some(std::slice::from_ref(spec)))?.remove(0))
    }

    /// `hl.set_state @name, value`: the state's value after a train step.
    pub(super) fn set_state(self: &Rc<Self>, name: &str, value: &Tensor) -> Result<()> {
        // Eagerly, training replaces the state's value at once (as a
        // PyTorch batch norm updates its buffers in its forward); the
        // value takes no gradient. Evaluation keeps it.
        if let Some(e) = &self.eager {
            if e.mode != Mode::Train {
                return Ok(());
            }
            let invalid = |message: String| NnError::Invalid { layer: self.current_scope(), message };
            let data = value.data.as_ref().ok_or_else(|| invalid(format!("state `{name}` set to a traced value")))?;
            let mut states = e.states.borrow_mut();
            let Some((_, old)) = states.iter_mut().find(|(n, _)| n == name) else {
                return Err(invalid(format!("state `{name}` is set before it is read (declared)")));
            };
            if old.shape() != data.shape() {
                return Err(invalid(format!("state `{name}` is {:?}, set to {:?}", old.shape(), data.shape())));
            }
            *old = data.detach();
            return Ok(());
        }
        let symbol = format!("@{}", quote_symbol(name));
        self.emit("hl.set_state", &[value], &[("name", symbol)], Some(&[]))?;
        Ok(())
    }

    /// Inserts a module-level declaration before the first function and
    /// verifies it there (the verifier needs the op in its module:
    /// HasParent).
    fn declare(&self, op_name: &str, attrs: &[(&str, String)], spec: &TensorSpec) -> Result<()> {
        let op_spec = OpSpec { attributes: attrs, results: Some(&[]), verify: false, ..OpSpec::new(op_name) };
        let op = self.create(&op_spec, self.location(), &[])?;
        let inner = self.inner.borrow_mut();
        unsafe {
            let body = mlirModuleGetBody(inner.module);
            match inner.first_func {
                Some(f) => mlirBlockInsertOwnedOperationBefore(body, f, op),
                None => mlirBlockAppendOwnedOperation(body, op),
            }
        }
        if !unsafe { mlirOperationVerify(op) } {
            unsafe {
                mlirOperationRemoveFromParent(op);
                mlirOperationDestroy(op);
            }
            drop(inner);
            return Err(self.op_error(op_name, &[spec.mlir_type()]));
        }
        Ok(())
    }

    fn declare_param(&self, name: &str, owner: &str, spec: &TensorSpec, init: &Init) -> Result<()> {
        let attrs = [
            ("sym_name", ir::quoted(name)),
            ("type", spec.mlir_type()),
            ("owner", ir::quoted(owner)),
            ("init", format!("#hl.init<{init}>")),
        ];
        self.declare("hl.param", &attrs, spec)?;
        self.inner.borrow_mut().params.push(ParamSpec {
            name: name.into(),
            owner: owner.into(),
            spec: spec.clone(),
            init: *init,
        });
        Ok(())
    }

    /// The step's `seed` and `offset` inputs of the current function (added
    /// as trailing arguments on first use) and a fresh stream id.
    pub(super) fn rng(self: &Rc<Self>) -> Result<(Tensor, Tensor, i64)> {
        if self.eager.is_some() {
            return self.eager_rng();
        }
        let scalar = TensorSpec::new([], DType::I64);
        let ty = self.parse_type(&scalar.mlir_type())?;
        let mut inner = self.inner.borrow_mut();
        let f = inner.function.as_mut().ok_or_else(|| NnError::Internal("dropout outside a function".into()))?;
        let (seed, offset) = *f.rng.get_or_insert_with(|| unsafe {
            let loc = mlirLocationUnknownGet(self.ctx.mlir().to_raw());
            (mlirBlockAddArgument(f.block, ty, loc), mlirBlockAddArgument(f.block, ty, loc))
        });
        let stream = f.next_stream;
        f.next_stream += 1;
        let function = f.id;
        drop(inner);
        let t = |value| Tensor { graph: self.clone(), function, value, spec: scalar.clone(), data: None };
        Ok((t(seed), t(offset), stream))
    }

    pub(super) fn begin_function(
        self: &Rc<Self>,
        name: &str,
        mode: Mode,
        inputs: &[TensorSpec],
    ) -> Result<Vec<Tensor>> {
        let mut types = Vec::new();
        for s in inputs {
            types.push(self.parse_type(&s.mlir_type())?);
        }
        let mut inner = self.inner.borrow_mut();
        if inner.function.is_some() {
            return Err(NnError::Internal(format!("function `{name}` begun inside another")));
        }
        if inner.functions.iter().any(|f| f.name == name) {
            return Err(NnError::Invalid { layer: None, message: format!("function `{name}` is traced twice") });
        }
        let (region, block) = unsafe {
            let loc = mlirLocationUnknownGet(self.raw_ctx());
            let locs = vec![loc; types.len()];
            let block = mlirBlockCreate(types.len() as isize, types.as_ptr(), locs.as_ptr());
            let region = mlirRegionCreate();
            mlirRegionAppendOwnedBlock(region, block);
            (region, block)
        };
        let id = inner.next_function_id;
        inner.next_function_id += 1;
        inner.function = Some(FunctionState {
            id,
            name: name.to_string(),
            region,
            block,
            inputs: inputs.to_vec(),
            mode,
            rng: None,
            next_stream: 0,
        });
        drop(inner);
        Ok(inputs
            .iter()
            .enumerate()
            .map(|(i, s)| Tensor {
                graph: self.clone(),
                function: id,
                value: unsafe { mlirBlockGetArgument(block, i as isize) },
                spec: s.clone(),
                data: None,
            })
            .collect())
    }

    /// Drops the function under construction (its body failed).
    pub(super) fn abandon_function(&self) {
        if let Some(f) = self.inner.borrow_mut().function.take() {
            unsafe { mlirRegionDestroy(f.region) };
        }
        self.inner.borrow_mut().scopes.clear();
    }

    pub(super) fn end_function(self: &Rc<Self>, outputs: &[Tensor]) -> Result<()> {
        let refs: Vec<&Tensor> = outputs.iter().collect();
        // func.return verifies against its parent function, which does not
        // exist yet; the module is verified as a whole in `finish`.
        self.emit_op("func.return", &refs, &[], Some(&[]), false)?;
        let f =
            self.inner.borrow_mut().function.take().ok_or_else(|| NnError::Internal("no function to end".into()))?;
        let mut arg_types: Vec<String> = f.inputs.iter().map(TensorSpec::mlir_type).collect();
        if f.rng.is_some() {
            arg_types.extend(["tensor<i64>".to_string(), "tensor<i64>".to_string()]);
        }
        let out_types: Vec<String> = outputs.iter().map(|t| t.spec.mlir_type()).collect();
        let fn_type = format!("({}) -> ({})", arg_types.join(", "), out_types.join(", "));
        let attrs = [("sym_name", ir::quoted(&f.name)), ("function_type", fn_type)];
        // The function is verified with its module, in `finish`.
        let spec = OpSpec {
            attributes: &attrs,
            results: Some(&[]),
            regions: &[f.region],
            verify: false,
            ..OpSpec::new("func.func")
        };
        let unknown = unsafe { mlirLocationUnknownGet(self.raw_ctx()) };
        self.ctx.take_diagnostics();
        let op = ir::create_op(self.raw_ctx(), unknown, &spec).map_err(|e| {
            // An attribute that did not parse stops before the region is
            // handed over; it is still ours to free.
            if matches!(e, BuildError::Syntax(_)) {
                unsafe { mlirRegionDestroy(f.region) };
            }
            self.build_error(e, "func.func", &[])
        })?;
        let mut inner = self.inner.borrow_mut();
        unsafe { mlirBlockAppendOwnedOperation(mlirModuleGetBody(inner.module), op) };
        inner.first_func.get_or_insert(op);
        inner.functions.push(FunctionSig {
            name: f.name,
            inputs: f.inputs,
            outputs: outputs.iter().map(|t| t.spec.clone()).collect(),
            takes_rng: f.rng.is_some(),
        });
        Ok(())
    }

    pub(super) fn last_function(&self) -> Result<FunctionSig> {
        self.inner.borrow().functions.last().cloned().ok_or_else(|| NnError::Internal("no function traced".into()))
    }

    /// Verifies the whole module and prints it.
    pub(super) fn finish(&self) -> Result<super::HlModule> {
        let inner = self.inner.borrow();
        if let Some(f) = &inner.function {
            return Err(NnError::Internal(format!("function `{}` was not finished", f.name)));
        }
        self.ctx.take_diagnostics();
        let op = unsafe { mlirModuleGetOperation(inner.module) };
        if !unsafe { mlirOperationVerify(op) } {
            let why: Vec<String> = self.ctx.take_diagnostics().iter().map(|d| d.to_string()).collect();
            return Err(NnError::Internal(format!("the traced module does not verify:\n{}", why.join("\n"))));
        }
        let text = unsafe { melior::ir::operation::OperationRef::from_raw(op) }.to_string();
        Ok(super::HlModule {
            text,
            params: inner.params.clone(),
            states: inner.states.clone(),
            functions: inner.functions.clone(),
        })
    }
}

/// Reads a ranked tensor type back into a spec.
pub(crate) fn spec_of(ty: MlirType) -> Result<TensorSpec> {
    unsafe {
        if !mlirTypeIsARankedTensor(ty) {
            return Err(NnError::Internal("an hl op produced a value that is not a ranked tensor".into()));
        }
        let rank = mlirShapedTypeGetRank(ty);
        let mut shape = Vec::with_capacity(rank as usize);
        for d in 0..rank {
            let size = mlirShapedTypeGetDimSize(ty, d as isize);
            if size < 0 {
                return Err(NnError::Internal("a traced value has a dynamic dimension".into()));
            }
            shape.push(size as usize);
        }
        let dtype = ir::element_dtype(ty)
            .ok_or_else(|| NnError::Internal(format!("unsupported element type in {}", ir::type_text(ty))))?;
        Ok(TensorSpec { shape, dtype })
    }
}

/// A symbol reference: bare when it is a valid identifier, quoted otherwise.
fn quote_symbol(name: &str) -> String {
    let bare = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.$".contains(c));
    if bare { name.to_string() } else { ir::quoted(name) }
}

/// `n` f32 zeros for an eager parameter or state `name`, or an error where
/// the host cannot hold them (`vec!` aborted the process on a 2^40-wide
/// layer).
fn host_zeros(name: &str, n: usize) -> std::result::Result<Vec<f32>, String> {
    let mut values = Vec::new();
    values.try_reserve_exact(n).map_err(|_| {
        format!("`{name}`: {n} f32 values ({} GiB) could not be allocated on the host", (n as u64 * 4) >> 30)
    })?;
    values.resize(n, 0f32);
    Ok(values)
}
