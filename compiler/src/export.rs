//! `aicf export`: a model's `@forward` written as an ONNX model, its
//! parameters the trained values, for onnxruntime, TensorRT or any runtime
//! that reads ONNX: the way out of AICF that `import::onnx` is the way in.
//!
//! Each `hl` op of `@forward` (calls inlined) becomes the ONNX node or the
//! few nodes of the default domain at opset 18 that compute it (a fused
//! `hl.gemm` or a backward op has no place in `@forward` and is refused).
//! Parameters are initializers under their `hl.param` names (PyTorch's
//! `fc1.weight`), and the graph's inputs take an imported model's own names
//! (`hl.name`).
//!
//! **The batch.** An `hl` model has one batch size; ONNX users expect a
//! dynamic one. The model is retargeted to the next batch size
//! (`hl-set-batch`) and both versions are read side by side: a dimension
//! that changes with the batch is `k x batch`, and where a shape is written
//! into the graph (a reshape's target, a broadcast, a splat constant, a
//! slice's end) it is computed from the first input's leading dimension.
//! Where that cannot be said (a dense constant whose shape follows the
//! batch, a model `hl-set-batch` does not retarget) the export keeps the
//! fixed batch and says why.
//!
//! **Features.** A checkpoint trained on a table read its features divided
//! by a scale, or standardized; the export puts that first in the graph, so
//! the ONNX model reads features as the file holds them, as `aicf predict`
//! does (or, asked, takes them as the model saw them).

use crate::context::{CompilerContext, describe_location};
use crate::interp;
use crate::ir::{self, op_name};
use crate::types::DType;
use aicf_onnx::proto::{
    self, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto, attribute_proto::AttributeType, tensor_proto::DataType,
    tensor_shape_proto::dimension::Value as DimValue,
};
use aicf_runtime::checkpoint::Entry;
use melior::ir::Location;
use mlir_sys::*;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The opset of the default domain the export writes (ReduceMean and
/// ReduceMax take their axes as an input from 18; onnxruntime 1.14 and
/// later read it).
pub const OPSET: i64 = 18;

/// The ONNX IR version of opset 18.
const IR_VERSION: i64 = 8;

/// The largest model written (protobuf's own limit for one message).
const MAX_BYTES: usize = (2usize << 30) - 1;

/// Why a model could not be exported, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Model(String),
    #[error("{location}: '{op}': {message}")]
    Op { location: String, op: String, message: String },
}

type Result<T, E = ExportError> = std::result::Result<T, E>;

/// How the graph reads its first float input before the model does: as
/// the checkpoint's run read its data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Preprocess {
    /// Features divided by this (a table's largest magnitude).
    pub scale: Option<f64>,
    /// Features read as `(x - mean) / std`, per element of an example.
    pub standardize: Option<(Vec<f64>, Vec<f64>)>,
}

impl Preprocess {
    pub fn is_empty(&self) -> bool {
        self.scale.is_none_or(|s| s == 1.0) && self.standardize.is_none()
    }
}

/// What to export.
pub struct ExportOptions<'a> {
    /// Parameter (and `hl.get_state`) values by name.
    pub weights: &'a BTreeMap<String, Entry>,
    pub preprocess: Preprocess,
    /// A dynamic batch where the model allows one; else the model's own.
    pub dynamic_batch: bool,
    /// `@forward`'s first result read back in the data's units, `y * std +
    /// mean` per element of an example (a run's standardized targets).
    pub postprocess: Option<(Vec<f64>, Vec<f64>)>,
    /// The names of `@forward`'s results (an imported model's own graph
    /// outputs), where there is one for each; else `output`, `output_1`.
    pub output_names: Vec<String>,
    /// The graph's name and the model's `doc_string`.
    pub graph_name: String,
    pub doc: String,
}

/// One of the graph's inputs or outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Port {
    pub name: String,
    /// Dimensions as written: numbers, or `batch` (`2*batch`).
    pub dims: Vec<String>,
    /// ONNX's name of the element type (`float`, `int32`).
    pub dtype: &'static str,
}

impl std::fmt::Display for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}] {}", self.name, self.dims.join(", "), self.dtype)
    }
}

/// The exported model and what a user is told of it.
pub struct Exported {
    pub model: ModelProto,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// `Ok(())` for a dynamic batch; else the model's batch and why it is
    /// fixed.
    pub batch: std::result::Result<(), (usize, String)>,
    /// Parameters written (initializers from the weights).
    pub parameters: usize,
}

impl Exported {
    /// The model's bytes, as `onnx.load` reads them.
    pub fn encode(&self) -> Result<Vec<u8>> {
        use prost::Message;
        let n = self.model.encoded_len();
        if n > MAX_BYTES {
            return Err(ExportError::Model(format!(
                "the model takes {n} bytes, past protobuf's 2 GiB for one file (ONNX's external data is not written)"
            )));
        }
        Ok(self.model.encode_to_vec())
    }
}

/// A dimension of a value: fixed, or `k` times the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dim {
    Fixed(usize),
    Batch(usize),
}

/// Why the dynamic batch was given up (the export starts again at the
/// model's batch).
struct NotDynamic(String);

enum Failure {
    Error(ExportError),
    NotDynamic(NotDynamic),
}

impl From<ExportError> for Failure {
    fn from(e: ExportError) -> Self {
        Failure::Error(e)
    }
}

impl From<NotDynamic> for Failure {
    fn from(e: NotDynamic) -> Self {
        Failure::NotDynamic(e)
    }
}

/// Exports `@forward` of the model `source` (named `name` in messages).
pub fn export_onnx(source: &str, name: &str, options: &ExportOptions) -> Result<Exported> {
    let ctx = CompilerContext::new();
    let model_error = |e: crate::error::CompileError| ExportError::Model(e.to_string());
    let mut module = ctx.parse(source, name).map_err(model_error)?;
    crate::pipeline::inline_calls(&ctx, &mut module, source).map_err(model_error)?;
    let forward = find_forward(module.as_operation().to_raw(), name)?;
    let batch = leading_batch(forward);
    // The same model at the next batch size, read beside it.
    let mut fixed_because = None;
    let other_source = if !options.dynamic_batch {
        None
    } else if let Some(b) = batch {
        match crate::pipeline::rebatched_source(source, name, b + 1) {
            Ok(s) => Some(s),
            Err(e) => {
                // (The pass's own line, not the pipeline's.)
                let text = e.to_string();
                let line = text
                    .lines()
                    .find(|l| l.contains("hl-set-batch: "))
                    .or(text.lines().find(|l| l.contains("error: ")))
                    .or(text.lines().next())
                    .unwrap_or("");
                let why = line.replace("error: hl-set-batch: ", "").replace("error: ", "");
                fixed_because = Some(format!("the model does not retarget to another batch size ({})", why.trim()));
                None
            }
        }
    } else {
        fixed_because = Some("@forward's first input has no leading dimension to be the batch".into());
        None
    };
    let other_ctx = CompilerContext::new();
    let mut other = None;
    if let Some(s) = &other_source {
        let mut m = other_ctx.parse(s, name).map_err(model_error)?;
        crate::pipeline::inline_calls(&other_ctx, &mut m, s).map_err(model_error)?;
        other = Some(m);
    }
    let other_forward = match &other {
        Some(m) => Some(find_forward(m.as_operation().to_raw(), name)?),
        None => None,
    };
    if let Some(f) = other_forward {
        match Builder::new(name, options, Some((f, batch.unwrap_or(1) + 1))).build(forward) {
            Ok(exported) => return Ok(exported),
            Err(Failure::Error(e)) => return Err(e),
            Err(Failure::NotDynamic(NotDynamic(why))) => fixed_because = Some(why),
        }
    }
    match Builder::new(name, options, None).build(forward) {
        Ok(mut exported) => {
            if options.dynamic_batch {
                exported.batch = Err((batch.unwrap_or(0), fixed_because.unwrap_or_default()));
            }
            Ok(exported)
        }
        Err(Failure::Error(e)) => Err(e),
        Err(Failure::NotDynamic(NotDynamic(why))) => Err(ExportError::Model(why)),
    }
}

fn find_forward(module: MlirOperation, name: &str) -> Result<MlirOperation> {
    ir::functions(module)
        .into_iter()
        .map(|(f, _)| f)
        .find(|&f| ir::string_attr(f, "sym_name").as_deref() == Some("forward"))
        .ok_or_else(|| ExportError::Model(format!("{name}: the model has no @forward to export")))
}

fn body(func: MlirOperation) -> MlirBlock {
    unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)) }
}

fn arguments(func: MlirOperation) -> Vec<MlirValue> {
    let block = body(func);
    (0..unsafe { mlirBlockGetNumArguments(block) }).map(|i| unsafe { mlirBlockGetArgument(block, i) }).collect()
}

/// The batch `hl-set-batch` finds: `@forward`'s first input's leading
/// dimension.
fn leading_batch(forward: MlirOperation) -> Option<usize> {
    arguments(forward).first().and_then(|&v| ir::spec(v).shape.first().copied()).filter(|&b| b > 0)
}

fn onnx_type(dtype: DType) -> DataType {
    match dtype {
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::F32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::I1 => DataType::Bool,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
    }
}

fn type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I1 => "bool",
        DType::I32 => "int32",
        DType::I64 => "int64",
    }
}

/// Little-endian bytes of `values` as `dtype`.
fn bytes_of(values: &[f64], dtype: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * ir::dtype_bytes(dtype) as usize);
    for &v in values {
        match dtype {
            DType::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(v).to_le_bytes()),
            DType::F32 => out.extend((v as f32).to_le_bytes()),
            DType::F64 => out.extend(v.to_le_bytes()),
            DType::I1 => out.push((v != 0.0) as u8),
            DType::I32 => out.extend((v as i32).to_le_bytes()),
            DType::I64 => out.extend((v as i64).to_le_bytes()),
        }
    }
    out
}

fn attr_i(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(i),
        ..Default::default()
    }
}

fn attr_f(name: &str, f: f64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(f as f32),
        ..Default::default()
    }
}

fn attr_s(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(s.as_bytes().to_vec()),
        ..Default::default()
    }
}

fn attr_ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: ints.to_vec(),
        ..Default::default()
    }
}

fn value_info(name: &str, dtype: DType, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| proto::tensor_shape_proto::Dimension {
            value: Some(match d {
                Dim::Fixed(n) => DimValue::DimValue(*n as i64),
                Dim::Batch(k) => DimValue::DimParam(dim_text(Dim::Batch(*k))),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(proto::type_proto::Value::TensorType(proto::type_proto::Tensor {
                elem_type: Some(onnx_type(dtype) as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn dim_text(d: Dim) -> String {
    match d {
        Dim::Fixed(n) => n.to_string(),
        Dim::Batch(1) => "batch".into(),
        Dim::Batch(k) => format!("{k}*batch"),
    }
}

struct Builder<'o> {
    name: &'o str,
    options: &'o ExportOptions<'o>,
    /// The model at another batch (its `@forward`, and that batch).
    other: Option<(MlirOperation, usize)>,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    /// Each value's name in the graph, by [`ir::key`].
    names: HashMap<usize, String>,
    taken: HashSet<String>,
    /// Values read once into the graph (a parameter's initializer).
    params: HashSet<String>,
    /// The batch as a one-element int64 tensor, once made.
    batch_value: Option<String>,
    /// The graph's first input (the batch is its leading dimension).
    first_input: String,
    parameters: usize,
}

impl<'o> Builder<'o> {
    fn new(name: &'o str, options: &'o ExportOptions<'o>, other: Option<(MlirOperation, usize)>) -> Self {
        Builder {
            name,
            options,
            other,
            nodes: Vec::new(),
            initializers: Vec::new(),
            names: HashMap::new(),
            taken: HashSet::new(),
            params: HashSet::new(),
            batch_value: None,
            first_input: String::new(),
            parameters: 0,
        }
    }

    fn fresh(&mut self, stem: &str) -> String {
        let mut n = self.taken.len();
        loop {
            let candidate = format!("{stem}_{n}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }

    /// A name no other value takes: `want` if free.
    fn claim(&mut self, want: &str) -> String {
        if self.taken.insert(want.to_string()) { want.to_string() } else { self.fresh(want) }
    }

    fn node(&mut self, op_type: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        let out = self.fresh(&op_type.to_lowercase());
        self.push(op_type, inputs, attrs, &out);
        out
    }

    fn push(&mut self, op_type: &str, inputs: &[&str], attrs: Vec<AttributeProto>, out: &str) {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            name: Some(out.to_string()),
            op_type: Some(op_type.into()),
            attribute: attrs,
            ..Default::default()
        });
    }

    fn initializer(&mut self, name: &str, dtype: DType, dims: &[usize], bytes: Vec<u8>) {
        self.initializers.push(TensorProto {
            name: Some(name.into()),
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: Some(onnx_type(dtype) as i32),
            raw_data: Some(bytes),
            ..Default::default()
        });
    }

    /// A constant of the graph: a `Constant` node, so that the
    /// initializers are the parameters alone (a PyTorch user loads them by
    /// name into a `state_dict`).
    fn constant(&mut self, stem: &str, dtype: DType, dims: &[usize], values: &[f64]) -> String {
        self.constant_bytes(stem, dtype, dims, bytes_of(values, dtype))
    }

    fn constant_bytes(&mut self, stem: &str, dtype: DType, dims: &[usize], bytes: Vec<u8>) -> String {
        let name = self.fresh(stem);
        let value = TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: Some(onnx_type(dtype) as i32),
            raw_data: Some(bytes),
            ..Default::default()
        };
        let attr = AttributeProto {
            name: Some("value".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(value),
            ..Default::default()
        };
        self.push("Constant", &[], vec![attr], &name);
        name
    }

    fn ints(&mut self, values: &[i64]) -> String {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant_bytes("shape", DType::I64, &[values.len()], bytes)
    }

    fn scalar(&mut self, dtype: DType, v: f64) -> String {
        self.constant("c", dtype, &[], &[v])
    }

    fn input(&self, v: MlirValue) -> Result<String> {
        self.names.get(&ir::key(v)).cloned().ok_or_else(|| ExportError::Model("a value read before it is made".into()))
    }

    /// The batch, a one-element int64 tensor: the first input's leading
    /// dimension.
    fn batch(&mut self) -> String {
        if let Some(b) = &self.batch_value {
            return b.clone();
        }
        let first = self.first_input.clone();
        let b = self.node("Shape", &[&first], vec![attr_i("start", 0), attr_i("end", 1)]);
        self.batch_value = Some(b.clone());
        b
    }

    /// A shape as an int64 tensor: constant, or computed from the batch.
    fn shape(&mut self, dims: &[Dim]) -> String {
        if dims.iter().all(|d| matches!(d, Dim::Fixed(_))) {
            let v: Vec<i64> = dims.iter().map(|d| if let Dim::Fixed(n) = d { *n as i64 } else { 0 }).collect();
            return self.ints(&v);
        }
        let mut pieces = Vec::new();
        let mut run: Vec<i64> = Vec::new();
        for d in dims {
            match *d {
                Dim::Fixed(n) => run.push(n as i64),
                Dim::Batch(k) => {
                    if !run.is_empty() {
                        pieces.push(self.ints(&run));
                        run.clear();
                    }
                    let b = self.batch();
                    pieces.push(if k == 1 {
                        b
                    } else {
                        let kk = self.ints(&[k as i64]);
                        self.node("Mul", &[&b, &kk], vec![])
                    });
                }
            }
        }
        if !run.is_empty() {
            pieces.push(self.ints(&run));
        }
        let refs: Vec<&str> = pieces.iter().map(|s| s.as_str()).collect();
        self.node("Concat", &refs, vec![attr_i("axis", 0)])
    }

    /// The dimensions of `v` (of the op at `index` of `@forward`, or of its
    /// argument `index` where `arg`), against the model at the other batch.
    fn dims(&self, v: MlirValue, other: Option<MlirValue>) -> Result<Vec<Dim>, NotDynamic> {
        let here = ir::spec(v).shape;
        let Some((o, ob)) = other.zip(self.other.map(|(_, b)| b)) else {
            return Ok(here.into_iter().map(Dim::Fixed).collect());
        };
        let there = ir::spec(o).shape;
        if here.len() != there.len() {
            return Err(NotDynamic(format!(
                "a value of rank {} at one batch size has rank {} at another",
                here.len(),
                there.len()
            )));
        }
        let b = ob - 1;
        here.iter()
            .zip(&there)
            .map(|(&h, &t)| {
                if h == t {
                    Ok(Dim::Fixed(h))
                } else if h % b == 0 && t % ob == 0 && h / b == t / ob {
                    Ok(Dim::Batch(h / b))
                } else {
                    Err(NotDynamic(format!(
                        "a dimension is {h} at batch {b} and {t} at batch {ob}: not a multiple of the batch"
                    )))
                }
            })
            .collect()
    }

    fn build(mut self, forward: MlirOperation) -> Result<Exported, Failure> {
        let opts = self.options;
        let args = arguments(forward);
        let other_args = self.other.map(|(f, _)| arguments(f));
        let other_ops = self.other.map(|(f, _)| ir::ops_of(body(f)));
        let ops = ir::ops_of(body(forward));
        // Parameters keep their names: no input or constant takes one first.
        for &op in &ops {
            if let Some(p) = ir::flat_symbol(op, "name").filter(|_| op_name(op).starts_with("hl.get_")) {
                self.taken.insert(p);
            }
        }
        let mut inputs = Vec::new();
        let mut ports = Vec::new();
        // Which input the preprocessing reads: the one float input.
        let floats: Vec<usize> = (0..args.len()).filter(|&i| ir::spec(args[i]).dtype.is_float()).collect();
        let preprocessed = if opts.preprocess.is_empty() {
            None
        } else {
            match floats[..] {
                [i] => Some(i),
                _ => {
                    return Err(ExportError::Model(format!(
                        "{}: the checkpoint's run read its features scaled or standardized, and @forward has {} \
                         float inputs: which one it read so is not recorded (export with --raw-features)",
                        self.name,
                        floats.len()
                    ))
                    .into());
                }
            }
        };
        for (i, &a) in args.iter().enumerate() {
            let spec = ir::spec(a);
            let dims = self.dims(a, other_args.as_ref().map(|o| o[i]))?;
            if i == 0 && self.other.is_some() && dims.first() != Some(&Dim::Batch(1)) {
                return Err(NotDynamic("@forward's first input does not lead with the batch".into()).into());
            }
            let want = ir::arg_string_attr(forward, i, "hl.name")
                .unwrap_or_else(|| if args.len() == 1 { "input".into() } else { format!("input_{i}") });
            let name = self.claim(&want);
            if i == 0 {
                self.first_input = name.clone();
            }
            inputs.push(value_info(&name, spec.dtype, &dims));
            ports.push(Port {
                name: name.clone(),
                dims: dims.iter().map(|&d| dim_text(d)).collect(),
                dtype: type_name(spec.dtype),
            });
            let read = if preprocessed == Some(i) { self.preprocess(&name, &spec)? } else { name };
            self.names.insert(ir::key(a), read);
        }
        if let Some(o) = &other_ops
            && (o.len() != ops.len() || o.iter().zip(&ops).any(|(a, b)| op_name(*a) != op_name(*b)))
        {
            return Err(NotDynamic("the model at another batch size has other ops".into()).into());
        }
        let mut outputs = Vec::new();
        let mut out_ports = Vec::new();
        for (i, &op) in ops.iter().enumerate() {
            let other = other_ops.as_ref().map(|o| o[i]);
            let name = op_name(op);
            if name == "func.return" {
                let values = ir::operands(op);
                for (k, &v) in values.iter().enumerate() {
                    let mut src = self.input(v)?;
                    if let (0, Some(stats)) = (k, &opts.postprocess) {
                        src = self.per_element(&src, &ir::spec(v), stats, false)?;
                    }
                    let want = match opts.output_names.get(k).filter(|_| opts.output_names.len() == values.len()) {
                        Some(n) => n.clone(),
                        None if values.len() == 1 => "output".to_string(),
                        None => format!("output_{k}"),
                    };
                    let out = self.claim(&want);
                    self.push("Identity", &[&src], vec![], &out);
                    let spec = ir::spec(v);
                    let dims = self.dims(v, other.map(|o| ir::operands(o)[k]))?;
                    outputs.push(value_info(&out, spec.dtype, &dims));
                    out_ports.push(Port {
                        name: out.clone(),
                        dims: dims.iter().map(|&d| dim_text(d)).collect(),
                        dtype: type_name(spec.dtype),
                    });
                }
                break;
            }
            let result = self.op(op, &name, other).map_err(|f| match f {
                Failure::Error(ExportError::Model(m)) => Failure::Error(at(op, m)),
                f => f,
            })?;
            if let Some(r) = result {
                self.names.insert(ir::key(unsafe { mlirOperationGetResult(op, 0) }), r);
            }
        }
        // Constants no node reads (a random op's seed) are left out.
        let read: HashSet<String> = self.nodes.iter().flat_map(|n| n.input.iter().cloned()).collect();
        let initializers: Vec<TensorProto> = std::mem::take(&mut self.initializers)
            .into_iter()
            .filter(|t| t.name.as_ref().is_some_and(|n| read.contains(n)))
            .collect();
        let nodes: Vec<NodeProto> = std::mem::take(&mut self.nodes)
            .into_iter()
            .filter(|n| n.op_type.as_deref() != Some("Constant") || n.output.iter().any(|o| read.contains(o)))
            .collect();
        let graph = GraphProto {
            node: nodes,
            name: Some(opts.graph_name.clone()),
            initializer: initializers,
            input: inputs,
            output: outputs,
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: Some(IR_VERSION),
            opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(OPSET) }],
            producer_name: Some("aicf".into()),
            producer_version: Some(env!("CARGO_PKG_VERSION").into()),
            doc_string: Some(opts.doc.clone()),
            graph: Some(graph),
            ..Default::default()
        };
        Ok(Exported { model, inputs: ports, outputs: out_ports, batch: Ok(()), parameters: self.parameters })
    }

    /// The preprocessing of input `name` (of `spec`): its value as the model
    /// reads it.
    fn preprocess(&mut self, name: &str, spec: &crate::types::TensorSpec) -> Result<String, Failure> {
        let p = self.options.preprocess.clone();
        let mut x = name.to_string();
        if let Some(stats) = &p.standardize {
            x = self.per_element(&x, spec, stats, true)?;
        }
        if let Some(s) = p.scale.filter(|&s| s != 1.0) {
            let c = self.scalar(spec.dtype, s);
            x = self.node("Div", &[&x, &c], vec![]);
        }
        Ok(x)
    }

    /// `x` (of `spec`, its first dimension the batch) standardized by
    /// `(mean, std)` per element of an example, `(x - mean) / std` (a
    /// run's features), or read back, `x * std + mean` (its targets).
    fn per_element(
        &mut self,
        x: &str,
        spec: &crate::types::TensorSpec,
        (mean, std): &(Vec<f64>, Vec<f64>),
        standardize: bool,
    ) -> Result<String, Failure> {
        let dims = &spec.shape[1.min(spec.shape.len())..];
        let per: usize = dims.iter().product::<usize>().max(1);
        if mean.len() != per || std.len() != per {
            let what = if standardize {
                "features an example; @forward's input"
            } else {
                "targets an example; @forward's output"
            };
            return Err(ExportError::Model(format!(
                "{}: the checkpoint standardized {} {what} '{x}' has {per}",
                self.name,
                mean.len()
            ))
            .into());
        }
        let m = self.constant("mean", spec.dtype, dims, mean);
        let s = self.constant("std", spec.dtype, dims, std);
        Ok(if standardize {
            let centred = self.node("Sub", &[x, &m], vec![]);
            self.node("Div", &[&centred, &s], vec![])
        } else {
            let scaled = self.node("Mul", &[x, &s], vec![]);
            self.node("Add", &[&scaled, &m], vec![])
        })
    }

    /// `x` in NCHW, ONNX's image layout, where the op reads NHWC.
    fn nchw(&mut self, x: &str, nhwc: bool) -> String {
        if nhwc { self.node("Transpose", &[x], vec![attr_ints("perm", &[0, 3, 1, 2])]) } else { x.to_string() }
    }

    /// An NCHW result back in the op's layout.
    fn back_from_nchw(&mut self, y: String, nhwc: bool) -> String {
        if nhwc { self.node("Transpose", &[&y], vec![attr_ints("perm", &[0, 2, 3, 1])]) } else { y }
    }

    /// One op's nodes; the name of its result (`None`: an op of no result).
    fn op(&mut self, op: MlirOperation, name: &str, other: Option<MlirOperation>) -> Result<Option<String>, Failure> {
        let x: Vec<String> = ir::operands(op).into_iter().map(|v| self.input(v)).collect::<Result<_>>()?;
        let xs: Vec<&str> = x.iter().map(|s| s.as_str()).collect();
        let result = unsafe { mlirOperationGetResult(op, 0) };
        let spec = ir::spec(result);
        let dtype = spec.dtype;
        let other_result = other.map(|o| unsafe { mlirOperationGetResult(o, 0) });
        let unit = |key: &str| ir::has(op, key);
        let int = |key: &str| ir::int_attr(op, key).ok_or_else(|| ExportError::Model(missing(key)));
        let float = |key: &str| ir::float_attr(op, key).ok_or_else(|| ExportError::Model(missing(key)));
        let ints = |key: &str| ir::i64_array(op, key).ok_or_else(|| ExportError::Model(missing(key)));
        let rank = |v: usize| ir::spec(ir::operands(op)[v]).shape.len() as i64;
        let simple = |s: &mut Self, onnx: &str| Ok(Some(s.node(onnx, &xs, vec![])));
        match name {
            "hl.get_param" | "hl.get_state" => {
                let p = ir::flat_symbol(op, "name").ok_or_else(|| ExportError::Model(missing("name")))?;
                if self.params.insert(p.clone()) {
                    let e = self.options.weights.get(&p).ok_or_else(|| {
                        ExportError::Model(format!("parameter @{p} has no tensor among the weights given"))
                    })?;
                    if e.shape != spec.shape || !same_type(e.dtype, dtype) {
                        return Err(ExportError::Model(format!(
                            "parameter @{p} is {:?} {:?} among the weights; the model reads {:?} {}",
                            e.shape,
                            e.dtype,
                            spec.shape,
                            dtype.mlir()
                        ))
                        .into());
                    }
                    self.initializer(&p, dtype, &spec.shape, e.bytes.clone());
                    self.parameters += 1;
                }
                Ok(Some(p))
            }
            "hl.constant" => {
                let value = interp::constant(op, spec.shape.clone(), dtype).map_err(ExportError::Model)?;
                let dims = self.dims(result, other_result)?;
                if dims.iter().all(|d| matches!(d, Dim::Fixed(_))) {
                    if let Some(o) = other {
                        let there = interp::constant(o, spec.shape.clone(), dtype).map_err(ExportError::Model)?;
                        if there.data != value.data {
                            return Err(NotDynamic("a constant's values change with the batch size".into()).into());
                        }
                    }
                    return Ok(Some(self.constant("const", dtype, &spec.shape, &value.data)));
                }
                // A splat whose shape follows the batch: its one value
                // spread to the batch's shape.
                let first = value.data.first().copied().unwrap_or(0.0);
                if value.data.iter().any(|v| v.to_bits() != first.to_bits()) {
                    return Err(NotDynamic("a dense constant's shape follows the batch size".into()).into());
                }
                let one = self.scalar(dtype, first);
                let shape = self.shape(&dims);
                Ok(Some(self.node("Expand", &[&one, &shape], vec![])))
            }
            "hl.add" => simple(self, "Add"),
            "hl.sub" => simple(self, "Sub"),
            "hl.mul" => simple(self, "Mul"),
            "hl.div" => simple(self, "Div"),
            "hl.pow" => simple(self, "Pow"),
            "hl.max" => simple(self, "Max"),
            "hl.min" => simple(self, "Min"),
            "hl.neg" => simple(self, "Neg"),
            "hl.abs" => simple(self, "Abs"),
            "hl.exp" => simple(self, "Exp"),
            "hl.log" => simple(self, "Log"),
            "hl.sqrt" => simple(self, "Sqrt"),
            "hl.erf" => simple(self, "Erf"),
            "hl.sin" => simple(self, "Sin"),
            "hl.cos" => simple(self, "Cos"),
            "hl.atan" => simple(self, "Atan"),
            "hl.floor" => simple(self, "Floor"),
            "hl.ceil" => simple(self, "Ceil"),
            "hl.round" => simple(self, "Round"),
            "hl.tanh" => simple(self, "Tanh"),
            "hl.sigmoid" => simple(self, "Sigmoid"),
            "hl.relu" => simple(self, "Relu"),
            "hl.select" => simple(self, "Where"),
            // Inference: no gradient to stop, no dropout.
            "hl.stop_gradient" | "hl.dropout" => Ok(Some(x[0].clone())),
            "hl.rsqrt" => {
                let s = self.node("Sqrt", &xs, vec![]);
                Ok(Some(self.node("Reciprocal", &[&s], vec![])))
            }
            "hl.silu" => {
                let s = self.node("Sigmoid", &xs, vec![]);
                Ok(Some(self.node("Mul", &[&x[0], &s], vec![])))
            }
            "hl.gelu" => Ok(Some(self.gelu(&x[0], dtype, ir::int_attr(op, "approximate").unwrap_or(0) == 1))),
            "hl.compare" => {
                let (a, b) = (xs[0], xs[1]);
                Ok(Some(match int("predicate")? {
                    0 => self.node("Equal", &[a, b], vec![]),
                    1 => {
                        let e = self.node("Equal", &[a, b], vec![]);
                        self.node("Not", &[&e], vec![])
                    }
                    2 => self.node("Less", &[a, b], vec![]),
                    3 => self.node("LessOrEqual", &[a, b], vec![]),
                    4 => self.node("Greater", &[a, b], vec![]),
                    _ => self.node("GreaterOrEqual", &[a, b], vec![]),
                }))
            }
            "hl.cast" => Ok(Some(self.node("Cast", &xs, vec![attr_i("to", onnx_type(dtype) as i64)]))),
            "hl.matmul" => {
                let l = if unit("transpose_lhs") { self.swap_last(&x[0], rank(0)) } else { x[0].clone() };
                let r = if unit("transpose_rhs") { self.swap_last(&x[1], rank(1)) } else { x[1].clone() };
                Ok(Some(self.node("MatMul", &[&l, &r], vec![])))
            }
            "hl.linear" => {
                if rank(0) == 2 {
                    return Ok(Some(self.node("Gemm", &xs, vec![attr_i("transB", 1)])));
                }
                let w = self.swap_last(&x[1], 2);
                let y = self.node("MatMul", &[&x[0], &w], vec![]);
                Ok(Some(if x.len() > 2 { self.node("Add", &[&y, &x[2]], vec![]) } else { y }))
            }
            "hl.reduce_sum" | "hl.reduce_mean" | "hl.reduce_max" => {
                let axes = ints("axes")?;
                if axes.is_empty() {
                    return Ok(Some(x[0].clone()));
                }
                let onnx = match name {
                    "hl.reduce_sum" => "ReduceSum",
                    "hl.reduce_mean" => "ReduceMean",
                    _ => "ReduceMax",
                };
                let a = self.ints(&axes);
                Ok(Some(self.node(onnx, &[&x[0], &a], vec![attr_i("keepdims", unit("keepdim") as i64)])))
            }
            "hl.argmax" => Ok(Some(self.node(
                "ArgMax",
                &xs,
                vec![attr_i("axis", int("axis")?), attr_i("keepdims", unit("keepdim") as i64)],
            ))),
            "hl.softmax" => Ok(Some(self.node("Softmax", &xs, vec![attr_i("axis", int("axis")?)]))),
            "hl.log_softmax" => Ok(Some(self.node("LogSoftmax", &xs, vec![attr_i("axis", int("axis")?)]))),
            "hl.layer_norm" | "hl.rms_norm" => {
                let segments =
                    ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, (x.len() > 1) as i64]);
                let has = |k: usize| segments.get(k).copied().unwrap_or(0) > 0;
                let (weight, bias) = (has(1).then(|| x[1].clone()), has(2).then(|| x[x.len() - 1].clone()));
                let dims = int("dims")?;
                let eps = float("eps")?;
                let normalized = &spec.shape[spec.shape.len() - dims as usize..];
                if let (Some(o), true) = (other_result, weight.is_none()) {
                    let there = ir::spec(o).shape;
                    if there[there.len() - dims as usize..] != *normalized {
                        return Err(NotDynamic("a normalization's axes follow the batch size".into()).into());
                    }
                }
                if name == "hl.layer_norm" {
                    let n: usize = normalized.iter().product();
                    let w = match weight {
                        Some(w) => w,
                        None => self.constant("ones", dtype, normalized, &vec![1.0; n]),
                    };
                    let mut inputs = vec![x[0].as_str(), w.as_str()];
                    if let Some(b) = &bias {
                        inputs.push(b);
                    }
                    let inputs: Vec<String> = inputs.into_iter().map(String::from).collect();
                    let refs: Vec<&str> = inputs.iter().map(|s| s.as_str()).collect();
                    return Ok(Some(self.node(
                        "LayerNormalization",
                        &refs,
                        vec![attr_i("axis", -dims), attr_f("epsilon", eps)],
                    )));
                }
                // x / sqrt(mean(x^2) + eps) * w
                let axes: Vec<i64> = (-dims..0).collect();
                let a = self.ints(&axes);
                let sq = self.node("Mul", &[&x[0], &x[0]], vec![]);
                let ms = self.node("ReduceMean", &[&sq, &a], vec![attr_i("keepdims", 1)]);
                let e = self.scalar(dtype, eps);
                let shifted = self.node("Add", &[&ms, &e], vec![]);
                let root = self.node("Sqrt", &[&shifted], vec![]);
                let mut y = self.node("Div", &[&x[0], &root], vec![]);
                if let Some(w) = weight {
                    y = self.node("Mul", &[&y, &w], vec![]);
                }
                if let Some(b) = bias {
                    y = self.node("Add", &[&y, &b], vec![]);
                }
                Ok(Some(y))
            }
            "hl.reshape" => {
                let dims = self.dims(result, other_result)?;
                let shape = self.shape(&dims);
                let zero = dims.contains(&Dim::Fixed(0));
                Ok(Some(self.node(
                    "Reshape",
                    &[&x[0], &shape],
                    if zero { vec![attr_i("allowzero", 1)] } else { vec![] },
                )))
            }
            "hl.transpose" => Ok(Some(self.node("Transpose", &xs, vec![attr_ints("perm", &ints("permutation")?)]))),
            "hl.broadcast_to" => {
                let dims = self.dims(result, other_result)?;
                let shape = self.shape(&dims);
                Ok(Some(self.node("Expand", &[&x[0], &shape], vec![])))
            }
            "hl.concat" => Ok(Some(self.node("Concat", &xs, vec![attr_i("axis", int("axis")?)]))),
            "hl.slice" => {
                let (start, limit, strides) = (ints("start")?, ints("limit")?, ints("strides")?);
                let mut ends = limit.clone();
                if let Some(o) = other {
                    let there = |k: &str| ir::i64_array(o, k).unwrap_or_default();
                    let (ostart, olimit) = (there("start"), there("limit"));
                    let input = ir::spec(ir::operands(op)[0]).shape;
                    let oinput = ir::spec(ir::operands(o)[0]).shape;
                    for d in 0..limit.len() {
                        if ostart.get(d) != start.get(d) {
                            return Err(NotDynamic("a slice's start follows the batch size".into()).into());
                        }
                        if olimit.get(d) != limit.get(d) {
                            if limit[d] as usize == input[d]
                                && olimit.get(d).map(|&l| l as usize) == oinput.get(d).copied()
                            {
                                ends[d] = i64::MAX;
                            } else {
                                return Err(NotDynamic(
                                    "a slice ends inside a dimension that follows the batch size".into(),
                                )
                                .into());
                            }
                        }
                    }
                }
                let axes: Vec<i64> = (0..start.len() as i64).collect();
                let (s, e, a, st) = (self.ints(&start), self.ints(&ends), self.ints(&axes), self.ints(&strides));
                Ok(Some(self.node("Slice", &[&x[0], &s, &e, &a, &st], vec![])))
            }
            "hl.gather" => Ok(Some(self.node("Gather", &xs, vec![attr_i("axis", int("axis")?)]))),
            "hl.conv2d" => {
                let nhwc = ir::int_attr(op, "layout").unwrap_or(0) == 1;
                let padding = ints("padding")?;
                let (ph, pw) = (padding.first().copied().unwrap_or(0), padding.get(1).copied().unwrap_or(0));
                let attrs = vec![
                    attr_ints("strides", &ints("stride")?),
                    attr_ints("pads", &[ph, pw, ph, pw]),
                    attr_ints("dilations", &ints("dilation")?),
                    attr_i("group", int("groups")?),
                ];
                let mut inputs: Vec<String> = vec![self.nchw(&x[0], nhwc)];
                inputs.extend(x[1..].iter().cloned());
                let refs: Vec<&str> = inputs.iter().map(|s| s.as_str()).collect();
                let y = self.node("Conv", &refs, attrs);
                Ok(Some(self.back_from_nchw(y, nhwc)))
            }
            "hl.max_pool2d" | "hl.avg_pool2d" => {
                let nhwc = ir::int_attr(op, "layout").unwrap_or(0) == 1;
                let padding = ints("padding")?;
                let (ph, pw) = (padding.first().copied().unwrap_or(0), padding.get(1).copied().unwrap_or(0));
                let mut attrs = vec![
                    attr_ints("kernel_shape", &ints("kernel")?),
                    attr_ints("strides", &ints("stride")?),
                    attr_ints("pads", &[ph, pw, ph, pw]),
                ];
                let onnx = if name == "hl.max_pool2d" {
                    "MaxPool"
                } else {
                    // The padded zeros count, as PyTorch's default.
                    attrs.push(attr_i("count_include_pad", 1));
                    "AveragePool"
                };
                let input = self.nchw(&x[0], nhwc);
                let y = self.node(onnx, &[&input], attrs);
                Ok(Some(self.back_from_nchw(y, nhwc)))
            }
            "hl.attention" => {
                let q = ir::spec(ir::operands(op)[0]).shape;
                let k = ir::spec(ir::operands(op)[1]).shape;
                let (l, s, d) = (q[q.len() - 2], k[k.len() - 2], q[q.len() - 1]);
                let scale = ir::float_attr(op, "scale").unwrap_or(1.0 / (d as f64).sqrt());
                let kt = self.swap_last(&x[1], k.len() as i64);
                let scores = self.node("MatMul", &[&x[0], &kt], vec![]);
                let c = self.scalar(dtype, scale);
                let mut scaled = self.node("Mul", &[&scores, &c], vec![]);
                if unit("causal") {
                    if let Some(o) = other {
                        let oq = ir::spec(ir::operands(o)[0]).shape;
                        let ok = ir::spec(ir::operands(o)[1]).shape;
                        if oq[oq.len() - 2] != l || ok[ok.len() - 2] != s {
                            return Err(
                                NotDynamic("a causal attention's sequence follows the batch size".into()).into()
                            );
                        }
                    }
                    // Query i sees keys j <= i (top-left aligned).
                    let mask: Vec<f64> = (0..l)
                        .flat_map(|i| (0..s).map(move |j| if j <= i { 0.0 } else { f64::NEG_INFINITY }))
                        .collect();
                    let m = self.constant("causal_mask", dtype, &[l, s], &mask);
                    scaled = self.node("Add", &[&scaled, &m], vec![]);
                }
                let p = self.node("Softmax", &[&scaled], vec![attr_i("axis", -1)]);
                Ok(Some(self.node("MatMul", &[&p, &x[2]], vec![])))
            }
            "hl.random_like" => {
                let (a, b) = (float("a")?, float("b")?);
                let normal = ir::string_attr(op, "kind").as_deref() == Some("normal");
                if (normal && b == 0.0) || (!normal && a == b) {
                    // No randomness: `a` everywhere (an import's inference
                    // form of a reparameterization, its deviation 0).
                    let value = self.scalar(dtype, a);
                    let shape = self.node("Shape", &[&x[0]], vec![]);
                    return Ok(Some(self.node("Expand", &[&value, &shape], vec![])));
                }
                // ONNX's own draws (its seed is the runtime's).
                let attrs = if normal {
                    vec![attr_f("mean", a), attr_f("scale", b)]
                } else {
                    vec![attr_f("low", a), attr_f("high", b)]
                };
                let onnx = if normal { "RandomNormalLike" } else { "RandomUniformLike" };
                Ok(Some(self.node(onnx, &[&x[0]], attrs)))
            }
            "hl.gather_backward" => Ok(Some(self.scatter_add(op, &x, other, dtype)?)),
            "hl.slice_backward" => {
                let (start, limit, strides) = (ints("start")?, ints("limit")?, ints("strides")?);
                if strides.iter().any(|&s| s != 1) {
                    return Err(ExportError::Model(
                        "hl.slice_backward of a strided slice has no ONNX form in this export".into(),
                    )
                    .into());
                }
                let ends: Vec<i64> = spec.shape.iter().zip(&limit).map(|(&d, &l)| d as i64 - l).collect();
                if let Some(o) = other {
                    let there = ir::spec(unsafe { mlirOperationGetResult(o, 0) }).shape;
                    let olimit = ir::i64_array(o, "limit").unwrap_or_default();
                    let oends: Vec<i64> = there.iter().zip(&olimit).map(|(&d, &l)| d as i64 - l).collect();
                    if oends != ends || ir::i64_array(o, "start").unwrap_or_default() != start {
                        return Err(NotDynamic("a padded window follows the batch size".into()).into());
                    }
                }
                let mut pads = start.clone();
                pads.extend(ends);
                let p = self.ints(&pads);
                Ok(Some(self.node("Pad", &[&x[0], &p], vec![])))
            }
            other if is_training_only(other) => Err(ExportError::Model(format!(
                "{other} is an op of a train step (a fused or differentiated one); export the model as written, \
                 whose @forward it is not part of"
            ))
            .into()),
            other => Err(ExportError::Model(format!("{other} has no ONNX form in this export")).into()),
        }
    }

    /// `hl.gather_backward`: `x[0]`'s slices added into zeros of the
    /// result's shape at the indices `x[1]` on the op's axis (ScatterND
    /// with `add`, the axis moved first and back).
    fn scatter_add(
        &mut self,
        op: MlirOperation,
        x: &[String],
        other: Option<MlirOperation>,
        dtype: DType,
    ) -> Result<String, Failure> {
        let axis = ir::int_attr(op, "axis").ok_or_else(|| ExportError::Model(missing("axis")))? as usize;
        let result = unsafe { mlirOperationGetResult(op, 0) };
        let dims = self.dims(result, other.map(|o| unsafe { mlirOperationGetResult(o, 0) }))?;
        let index_rank = ir::spec(ir::operands(op)[1]).shape.len();
        let rank = dims.len();
        // Zeros with the axis first.
        let mut moved = vec![dims[axis]];
        moved.extend(dims[..axis].iter().chain(&dims[axis + 1..]).copied());
        let zero = self.scalar(dtype, 0.0);
        let shape = self.shape(&moved);
        let zeros = self.node("Expand", &[&zero, &shape], vec![]);
        // The gradient with the index dimensions first.
        let grad = if axis == 0 {
            x[0].clone()
        } else {
            let perm: Vec<i64> = (axis..axis + index_rank)
                .chain(0..axis)
                .chain(axis + index_rank..rank - 1 + index_rank)
                .map(|d| d as i64)
                .collect();
            self.node("Transpose", &[&x[0]], vec![attr_ints("perm", &perm)])
        };
        let wide = self.node("Cast", &[&x[1]], vec![attr_i("to", DataType::Int64 as i64)]);
        let last = self.ints(&[-1]);
        let indices = self.node("Unsqueeze", &[&wide, &last], vec![]);
        let summed = self.node("ScatterND", &[&zeros, &indices, &grad], vec![attr_s("reduction", "add")]);
        if axis == 0 {
            return Ok(summed);
        }
        let back: Vec<i64> = (1..=axis).chain([0]).chain(axis + 1..rank).map(|d| d as i64).collect();
        Ok(self.node("Transpose", &[&summed], vec![attr_ints("perm", &back)]))
    }

    /// `x` with its last two axes swapped (of a tensor of `rank`).
    fn swap_last(&mut self, x: &str, rank: i64) -> String {
        let mut perm: Vec<i64> = (0..rank).collect();
        let n = perm.len();
        perm.swap(n - 2, n - 1);
        self.node("Transpose", &[x], vec![attr_ints("perm", &perm)])
    }

    fn gelu(&mut self, x: &str, dtype: DType, tanh_form: bool) -> String {
        let half = self.scalar(dtype, 0.5);
        let one = self.scalar(dtype, 1.0);
        let inner = if tanh_form {
            // tanh(sqrt(2/pi) (x + 0.044715 x^3))
            let c = self.scalar(dtype, 0.044715);
            let k = self.scalar(dtype, (2.0 / std::f64::consts::PI).sqrt());
            let x2 = self.node("Mul", &[x, x], vec![]);
            let x3 = self.node("Mul", &[&x2, x], vec![]);
            let cx3 = self.node("Mul", &[&x3, &c], vec![]);
            let sum = self.node("Add", &[x, &cx3], vec![]);
            let arg = self.node("Mul", &[&sum, &k], vec![]);
            self.node("Tanh", &[&arg], vec![])
        } else {
            let r = self.scalar(dtype, std::f64::consts::SQRT_2);
            let scaled = self.node("Div", &[x, &r], vec![]);
            self.node("Erf", &[&scaled], vec![])
        };
        let plus = self.node("Add", &[&inner, &one], vec![]);
        let halfx = self.node("Mul", &[x, &half], vec![]);
        self.node("Mul", &[&halfx, &plus], vec![])
    }
}

/// Whether a checkpoint's tensor of `stored` type holds a value of `dtype`.
fn same_type(stored: aicf_runtime::artifact::DType, dtype: DType) -> bool {
    use aicf_runtime::artifact::DType as R;
    matches!(
        (stored, dtype),
        (R::F32, DType::F32)
            | (R::F64, DType::F64)
            | (R::F16, DType::F16)
            | (R::BF16, DType::BF16)
            | (R::I32, DType::I32)
            | (R::I64, DType::I64)
            | (R::I1, DType::I1)
    )
}

fn is_training_only(name: &str) -> bool {
    (name.ends_with("_backward") && !matches!(name, "hl.gather_backward" | "hl.slice_backward"))
        || matches!(
            name,
            "hl.gemm"
                | "hl.fused_elementwise"
                | "hl.multi_tensor_apply"
                | "hl.set_state"
                | "hl.all_reduce"
                | "hl.cross_entropy"
                | "hl.softmax_cross_entropy"
                | "hl.mse_loss"
        )
}

fn missing(key: &str) -> String {
    format!("missing or mistyped attribute '{key}'")
}

fn at(op: MlirOperation, message: String) -> ExportError {
    let location = describe_location(unsafe { Location::from_raw(mlirOperationGetLocation(op)) });
    ExportError::Op { location, op: op_name(op), message }
}
