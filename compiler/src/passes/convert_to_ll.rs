//! `convert-hl-to-ll`: every function of the module from `hl` tensors to
//! `ll` buffers, one `ll` op (one kernel launch) per remaining `hl` op or
//! fused group. `hl` is illegal afterwards: an op without a lowering is a
//! located error.
//!
//! Algorithm, per function:
//! 1. Every elementwise `hl` op still on its own becomes a one-op
//!    `hl.fused_elementwise` (its splat constants become body scalars), so
//!    all elementwise work lowers through one path.
//! 2. The new signature: the original arguments, one output buffer per
//!    result that is not a parameter or state, one buffer per parameter and
//!    state symbol the function touches (declaration order), tagged
//!    `ll.bind`.
//! 3. Each op in order: its operands' buffers (parameters are their symbol's
//!    buffer; a splat constant is materialised by a fill kernel only where a
//!    kernel needs it as a buffer; a dense constant is a `memref.global`),
//!    a fresh `memref.alloc` per result, one `ll` op.
//! 4. Each result goes to its buffer: the kernel that computed it writes
//!    there directly when safe (nothing reads the old contents afterwards,
//!    or the kernel is elementwise and reads them at the same index),
//!    otherwise an `ll.copy` at the end.

use super::common::Failure;
use super::fuse_elementwise::{build_group, is_elementwise};
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::{
    ir::{
        self, OpSpec, attr_text, flat_symbol, float_attr, has, i32_array, i64_array, int_attr, key, op_loc, op_name,
        operands, ops_of, producer, spec, splat_value, users,
    },
    types::{DType, TensorSpec},
};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashMap;

/// Chunks of rows a norm's gradient sums split into (`ll.norm_backward`'s
/// `partials`): enough for the threads of a CPU at hand, few enough that
/// adding the chunks' sums stays a small pass.
const NORM_CHUNKS: usize = 16;

/// Slices a reduction of `rows` values into each of `outs` outputs splits
/// into (`ll.reduce`'s `partials`; 1: no split). The GPU's one block per 32
/// outputs, or its one block for a whole sum, leaves most of the chip idle
/// (a 16384 x 384 bias gradient took 0.1 ms on an H200, a 6.3 M sum 0.38
/// ms): a sum or mean of everything splits into slices of at least 8192
/// values (at most 256), a reduction over leading dims into slices of at
/// least 256 rows (at most 64) until there are about 512 blocks. The CPU
/// has no split form: its work items already cover the outputs.
fn reduce_slices(rows: usize, outs: usize, kind: i64, leading: bool) -> usize {
    if outs == 1 && kind != 2 {
        (rows / 8192).clamp(1, 256)
    } else if leading && outs > 0 {
        let blocks = outs.div_ceil(32);
        (rows / 256).min(64).min(512usize.div_ceil(blocks)).max(1)
    } else {
        1
    }
}

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let conv_as_gemm = options.get_bool("conv-as-gemm").map_err(|m| {
        emit_error(module.location(), &format!("convert-hl-to-ll: {m}"));
        PassFailed
    })?;
    convert_to_ll_with(module.to_raw(), conv_as_gemm).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("convert-hl-to-ll: {m}"));
        PassFailed
    })
}

/// `memref<...>` text for a tensor spec.
pub(crate) fn memref_text(s: &TensorSpec) -> String {
    let mut t = String::from("memref<");
    for d in &s.shape {
        t += &format!("{d}x");
    }
    t + s.dtype.mlir() + ">"
}

/// Converts every function of `module`, convolutions as products
/// (`conv-as-gemm`, the default); returns how many `ll` kernels were made.
pub fn convert_to_ll(module: MlirOperation) -> Result<usize, Failure> {
    convert_to_ll_with(module, true)
}

/// The most bytes the window rows of one convolution may take for it to
/// run as a product (`conv-as-gemm`); a larger one runs as one direct
/// kernel, which needs no scratch.
pub const CONV_WINDOW_BYTES: usize = 1 << 30;

/// [`convert_to_ll`], with ungrouped convolutions as products over their
/// window rows where `conv_as_gemm`, else as direct kernels.
pub fn convert_to_ll_with(module: MlirOperation, conv_as_gemm: bool) -> Result<usize, Failure> {
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) };
    // The module's parameters and state, in declaration order.
    let symbols: Vec<(String, &'static str)> = ops_of(body)
        .into_iter()
        .filter_map(|op| match op_name(op).as_str() {
            "hl.param" => ir::string_attr(op, "sym_name").map(|s| (s, "param")),
            "hl.state" => ir::string_attr(op, "sym_name").map(|s| (s, "state")),
            _ => None,
        })
        .collect();
    let mut kernels = 0;
    // Constants' globals are numbered past any the module has (one written
    // by hand, or kept from another lowering, was defined twice).
    let mut constants = ops_of(body)
        .into_iter()
        .filter_map(|op| ir::string_attr(op, "sym_name")?.strip_prefix("__aicf_constant_")?.parse::<usize>().ok())
        .max()
        .unwrap_or(0);
    for (func, block) in ir::functions(module) {
        require_static(func, block)?;
        for op in ops_of(block) {
            if is_elementwise(op) {
                build_group(block, &[op])?;
            }
        }
        let mut lower = Lower::new(func, &symbols, &mut constants)?;
        lower.conv_as_gemm = conv_as_gemm;
        for op in ops_of(block) {
            lower.op(op)?;
        }
        kernels += lower.kernels;
        lower.finish(func)?;
    }
    Ok(kernels)
}

/// Buffers need static shapes: AICF compiles once per input shape (a new
/// shape is a new compilation, cached by its shape key), so a dynamic
/// dimension is an error at the value's definition.
fn require_static(func: MlirOperation, block: MlirBlock) -> Result<(), Failure> {
    let dynamic = |v: MlirValue| unsafe {
        let t = mlirValueGetType(v);
        mlirTypeIsAShaped(t) && (!mlirShapedTypeHasRank(t) || !mlirShapedTypeHasStaticShape(t))
    };
    let empty = |v: MlirValue| unsafe {
        let t = mlirValueGetType(v);
        mlirTypeIsAShaped(t)
            && mlirShapedTypeHasRank(t)
            && (0..mlirShapedTypeGetRank(t)).any(|d| mlirShapedTypeGetDimSize(t, d as isize) == 0)
    };
    // Bytes past MAX_TENSOR_BYTES (or past u64) would overflow the plan.
    let huge = super::common::too_large;
    let message = |v: MlirValue| {
        let t = ir::type_text(unsafe { mlirValueGetType(v) });
        if huge(v) {
            format!("{t} is larger than the 1 TiB a tensor may hold")
        } else if empty(v) {
            format!("{t} has a zero-size dimension; AICF compiles no empty tensors (a batch, width or length of 0)")
        } else {
            format!("{t} has a dynamic shape; buffers need static shapes (compile once per input shape)")
        }
    };
    for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
        let arg = unsafe { mlirBlockGetArgument(block, i) };
        if dynamic(arg) || empty(arg) || huge(arg) {
            return Err((op_loc(func), format!("argument #{i}: {}", message(arg))));
        }
    }
    for op in ops_of(block) {
        for i in 0..unsafe { mlirOperationGetNumResults(op) } {
            let r = unsafe { mlirOperationGetResult(op, i) };
            if dynamic(r) || empty(r) || huge(r) {
                return Err((op_loc(op), message(r)));
            }
        }
    }
    Ok(())
}

/// The `hl.bind` tags of a function's arguments or results.
fn binds(func: MlirOperation, key_name: &str, count: usize) -> Vec<Option<String>> {
    let attrs = ir::attr(func, key_name);
    (0..count)
        .map(|i| unsafe {
            if attrs.ptr.is_null() || (i as isize) >= mlirArrayAttrGetNumElements(attrs) {
                return None;
            }
            let dict = mlirArrayAttrGetElement(attrs, i as isize);
            let tag = mlirDictionaryAttrGetElementByName(dict, crate::ffi::string_ref("hl.bind"));
            if tag.ptr.is_null() || !mlirAttributeIsAString(tag) {
                return None;
            }
            melior::StringRef::from_raw(mlirStringAttrGetValue(tag)).as_str().ok().map(str::to_string)
        })
        .collect()
}

struct Lower<'a> {
    ctx: MlirContext,
    func: MlirOperation,
    loc: MlirLocation,
    region: MlirRegion,
    block: MlirBlock,
    /// hl value -> buffer
    map: HashMap<usize, MlirValue>,
    /// an `hl.attention`'s result -> the buffer its kernel writes each
    /// query row's log-sum-exp into, for the backward that pairs with it
    lse: HashMap<usize, MlirValue>,
    /// symbol -> its buffer argument
    symbol_args: HashMap<String, MlirValue>,
    /// convolutions as products over their window rows
    conv_as_gemm: bool,
    /// (a convolution's output gradient (hl value), whether its windows
    /// are columns) -> the gradient as the products' matrix
    /// ([`Lower::gradient_matrix`]), made once for both gradients
    conv_gradients: HashMap<(usize, bool), MlirValue>,
    /// per original result: the output argument (None for param/state)
    outputs: Vec<(Option<String>, MlirValue)>,
    arg_tags: Vec<String>,
    returned: Vec<MlirValue>,
    kernels: usize,
    constants: &'a mut usize,
}

impl<'a> Lower<'a> {
    fn new(func: MlirOperation, symbols: &[(String, &'static str)], constants: &'a mut usize) -> Result<Self, Failure> {
        let loc = op_loc(func);
        let ctx = unsafe { mlirOperationGetContext(func) };
        let old = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)) };
        let nargs = unsafe { mlirBlockGetNumArguments(old) } as usize;
        let ret = ops_of(old).into_iter().last().filter(|&o| op_name(o) == "func.return");
        let Some(ret) = ret else { return Err((loc, "the function has no func.return".into())) };
        let returned = operands(ret);
        let arg_binds = binds(func, "arg_attrs", nargs);
        let res_binds = binds(func, "res_attrs", returned.len());
        let mut types: Vec<MlirType> = Vec::new();
        let mut tags: Vec<String> = Vec::new();
        let typed = |v: MlirValue| -> Result<MlirType, Failure> {
            let t = unsafe { mlirValueGetType(v) };
            if !unsafe { mlirTypeIsARankedTensor(t) } {
                return Err((loc, format!("cannot lower a value of type {} to a buffer", ir::type_text(t))));
            }
            ir::parse_type(ctx, &memref_text(&spec(v))).map_err(|e| (loc, format!("{e:?}")))
        };
        for (i, tag) in arg_binds.iter().enumerate() {
            types.push(typed(unsafe { mlirBlockGetArgument(old, i as isize) })?);
            tags.push(tag.clone().unwrap_or_else(|| "input".into()));
        }
        // Outputs for results that are not parameters or state.
        let mut outputs = Vec::new();
        for (i, &v) in returned.iter().enumerate() {
            let tag = res_binds[i].clone();
            let symbol = tag.as_deref().and_then(|t| t.strip_prefix("param @").or_else(|| t.strip_prefix("state @")));
            if symbol.is_some() {
                outputs.push((tag.clone(), MlirValue { ptr: std::ptr::null() }));
            } else {
                types.push(typed(v)?);
                tags.push(tag.clone().unwrap_or_else(|| format!("result {i}")));
                outputs.push((tag, MlirValue { ptr: std::ptr::null() }));
            }
        }
        // Symbols the function reads or writes, in declaration order.
        let mut touched: HashMap<String, MlirType> = HashMap::new();
        for op in ops_of(old) {
            if matches!(op_name(op).as_str(), "hl.get_param" | "hl.get_state") {
                let name = flat_symbol(op, "name").unwrap_or_default();
                touched.insert(name, typed(unsafe { mlirOperationGetResult(op, 0) })?);
            }
        }
        for (i, &v) in returned.iter().enumerate() {
            if let Some(t) = &res_binds[i]
                && let Some(s) = t.strip_prefix("param @").or_else(|| t.strip_prefix("state @"))
            {
                touched.insert(s.to_string(), typed(v)?);
            }
        }
        let mut symbol_order = Vec::new();
        for (name, kind) in symbols {
            if let Some(&t) = touched.get(name) {
                types.push(t);
                tags.push(format!("{kind} @{name}"));
                symbol_order.push(name.clone());
            }
        }
        let declared: std::collections::HashSet<&str> = symbols.iter().map(|(s, _)| s.as_str()).collect();
        if let Some(missing) = touched.keys().find(|k| !declared.contains(k.as_str())) {
            return Err((loc, format!("@{missing} is not declared by an hl.param or hl.state")));
        }
        let locs = vec![loc; types.len()];
        let block = unsafe { mlirBlockCreate(types.len() as isize, types.as_ptr(), locs.as_ptr()) };
        let region = unsafe { mlirRegionCreate() };
        unsafe { mlirRegionAppendOwnedBlock(region, block) };
        let mut map = HashMap::new();
        for i in 0..nargs {
            map.insert(key(unsafe { mlirBlockGetArgument(old, i as isize) }), unsafe {
                mlirBlockGetArgument(block, i as isize)
            });
        }
        let mut next = nargs;
        for out in outputs.iter_mut() {
            let symbol = out.0.as_deref().is_some_and(|t| t.starts_with("param @") || t.starts_with("state @"));
            if !symbol {
                out.1 = unsafe { mlirBlockGetArgument(block, next as isize) };
                next += 1;
            }
        }
        let mut symbol_args = HashMap::new();
        for name in symbol_order {
            symbol_args.insert(name, unsafe { mlirBlockGetArgument(block, next as isize) });
            next += 1;
        }
        Ok(Lower {
            ctx,
            func,
            loc,
            region,
            block,
            map,
            lse: HashMap::new(),
            symbol_args,
            conv_as_gemm: true,
            conv_gradients: HashMap::new(),
            outputs,
            arg_tags: tags,
            returned,
            kernels: 0,
            constants,
        })
    }

    fn ty(&self, s: &TensorSpec) -> Result<MlirType, Failure> {
        ir::parse_type(self.ctx, &memref_text(s)).map_err(|e| (self.loc, format!("{e:?}")))
    }

    /// Appends an op to the new body.
    fn emit(&mut self, loc: MlirLocation, spec: &OpSpec<'_>) -> Result<MlirOperation, Failure> {
        let op = ir::create_op(self.ctx, loc, spec)
            .map_err(|e| (loc, format!("internal error building '{}': {e:?}", spec.name)))?;
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
        if spec.name.starts_with("ll.") && !matches!(spec.name, "ll.reshape" | "ll.all_reduce") {
            self.kernels += 1;
        }
        Ok(op)
    }

    /// Appends the `ll` kernel `name` over `operands` (inputs, then outputs).
    fn kernel(
        &mut self,
        loc: MlirLocation,
        name: &str,
        operands: &[MlirValue],
        attributes: Vec<(&str, String)>,
    ) -> Result<(), Failure> {
        let spec = OpSpec { operands, attributes: &attributes, results: Some(&[]), ..OpSpec::new(name) };
        self.emit(loc, &spec).map(|_| ())
    }

    /// A fresh temporary buffer of type `t`.
    fn fresh(&mut self, t: MlirType) -> Result<MlirValue, Failure> {
        let op = ir::alloc(self.ctx, self.loc, t).map_err(|e| (self.loc, format!("internal error: {e:?}")))?;
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }

    /// A fresh temporary buffer for the hl value `v`.
    fn alloc(&mut self, v: MlirValue) -> Result<MlirValue, Failure> {
        let b = self.fresh(self.ty(&spec(v))?)?;
        self.map.insert(key(v), b);
        Ok(b)
    }

    /// An `ll.elementwise` from `inputs` (buffer, scalar type) to `out`
    /// whose body yields what `body` builds in it (given the block).
    fn scalar_kernel(
        &mut self,
        loc: MlirLocation,
        inputs: &[(MlirValue, MlirType)],
        out: MlirValue,
        body: impl FnOnce(MlirBlock) -> Result<MlirValue, Failure>,
    ) -> Result<(), Failure> {
        let region = unsafe { mlirRegionCreate() };
        let arg: Vec<MlirType> = inputs.iter().map(|i| i.1).collect();
        let locs = vec![loc; arg.len()];
        let block = unsafe { mlirBlockCreate(arg.len() as isize, arg.as_ptr(), locs.as_ptr()) };
        unsafe { mlirRegionAppendOwnedBlock(region, block) };
        let built = body(block).and_then(|value| {
            let spec = OpSpec { operands: &[value], results: Some(&[]), verify: false, ..OpSpec::new("ll.yield") };
            ir::create_op(self.ctx, loc, &spec).map_err(|e| (loc, format!("{e:?}")))
        });
        let y = match built {
            Ok(y) => y,
            Err(e) => {
                unsafe { mlirRegionDestroy(region) };
                return Err(e);
            }
        };
        unsafe { mlirBlockAppendOwnedOperation(block, y) };
        let mut operands: Vec<MlirValue> = inputs.iter().map(|i| i.0).collect();
        operands.push(out);
        let segments = format!("array<i32: {}, 1>", operands.len() - 1);
        self.emit(
            loc,
            &OpSpec {
                operands: &operands,
                attributes: &[("operandSegmentSizes", segments)],
                results: Some(&[]),
                regions: &[region],
                ..OpSpec::new("ll.elementwise")
            },
        )?;
        Ok(())
    }

    /// The buffer holding the hl value `v`.
    fn buf(&mut self, v: MlirValue) -> Result<MlirValue, Failure> {
        if let Some(&b) = self.map.get(&key(v)) {
            return Ok(b);
        }
        let Some(p) = producer(v).filter(|&p| op_name(p) == "hl.constant") else {
            return Err((self.loc, "internal error: a value was used before it was lowered".into()));
        };
        let loc = op_loc(p);
        let s = spec(v);
        if let Some(c) = splat_value(v) {
            // A fill kernel: an elementwise op with no inputs.
            let out = self.alloc(v)?;
            let scalar = ir::parse_type(self.ctx, s.dtype.mlir()).map_err(|e| (loc, format!("{e:?}")))?;
            let text = scalar_text(c, s.dtype);
            let ctx = self.ctx;
            self.scalar_kernel(loc, &[], out, |body| {
                let spec = OpSpec {
                    attributes: &[("value", text)],
                    results: Some(&[scalar]),
                    ..OpSpec::new("arith.constant")
                };
                let k = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("{e:?}")))?;
                unsafe { mlirBlockAppendOwnedOperation(body, k) };
                Ok(unsafe { mlirOperationGetResult(k, 0) })
            })?;
            return Ok(out);
        }
        // A dense constant: a private global of the module.
        *self.constants += 1;
        let name = format!("__aicf_constant_{}", *self.constants);
        let t = self.ty(&s)?;
        let global = ir::create_op(
            self.ctx,
            loc,
            &OpSpec {
                attributes: &[
                    ("sym_name", ir::quoted(&name)),
                    ("sym_visibility", "\"private\"".into()),
                    ("type", ir::type_text(t)),
                    ("initial_value", attr_text(p, "value")),
                    ("constant", "unit".into()),
                ],
                results: Some(&[]),
                ..OpSpec::new("memref.global")
            },
        )
        .map_err(|e| (loc, format!("internal error building a constant: {e:?}")))?;
        unsafe { mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(self.func), self.func, global) };
        let get = self.emit(
            loc,
            &OpSpec {
                attributes: &[("name", ir::symbol_ref(&name))],
                results: Some(&[t]),
                ..OpSpec::new("memref.get_global")
            },
        )?;
        let b = unsafe { mlirOperationGetResult(get, 0) };
        self.map.insert(key(v), b);
        Ok(b)
    }

    fn result(op: MlirOperation, i: isize) -> MlirValue {
        unsafe { mlirOperationGetResult(op, i) }
    }

    /// Lowers one hl op.
    fn op(&mut self, op: MlirOperation) -> Result<(), Failure> {
        let name = op_name(op);
        let loc = op_loc(op);
        let x = operands(op);
        let unit = |k: &str| has(op, k);
        match name.as_str() {
            // Scalar constants hoisted out of bodies by canonicalize are
            // copied back into each body that reads them (`take_body`).
            "func.return" | "hl.constant" | "arith.constant" => {}
            // Only @train_step writes state, through its results
            // (hl-optimizer); elsewhere a state write does nothing.
            "hl.set_state" => {}
            // Summed over the replicas in place: in the input's own buffer
            // where nothing else reads the value (a gradient), else in a
            // copy.
            "hl.all_reduce" => {
                let weight = self.buf(x[1])?;
                if spec(x[1]).dtype != DType::F32 {
                    return Err((loc, format!("an all-reduce weighted by {}: the weight is f32", spec(x[1]))));
                }
                let input = self.buf(x[0])?;
                let temporary = producer(input).is_some_and(|p| op_name(p) == "memref.alloc");
                let buffer = if temporary && users(x[0]).len() == 1 {
                    self.map.insert(key(Self::result(op, 0)), input);
                    input
                } else {
                    let out = self.alloc(Self::result(op, 0))?;
                    self.kernel(loc, "ll.copy", &[input, out], vec![])?;
                    out
                };
                let local = if unit("local") { vec![("local", "unit".to_string())] } else { vec![] };
                self.kernel(loc, "ll.all_reduce", &[buffer, weight], local)?;
            }
            "hl.get_param" | "hl.get_state" => {
                let s = flat_symbol(op, "name").unwrap_or_default();
                let b = self.symbol_args[&s];
                self.map.insert(key(Self::result(op, 0)), b);
            }
            "hl.gemm" | "hl.matmul" | "hl.linear" => {
                let (a, b) = (self.buf(x[0])?, self.buf(x[1])?);
                let seg = if name == "hl.gemm" {
                    i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 0, 0])
                } else {
                    vec![1, 1, (name == "hl.linear" && x.len() > 2) as i64, 0, 0]
                };
                let mut ins = vec![a, b];
                for v in &x[2..] {
                    ins.push(self.buf(*v)?);
                }
                let out = self.alloc(Self::result(op, 0))?;
                ins.push(out);
                let sum = name == "hl.gemm" && unit("sum_lhs");
                if sum {
                    let s = self.alloc(Self::result(op, 1))?;
                    ins.push(s);
                }
                let mut attrs = vec![(
                    "operandSegmentSizes",
                    format!("array<i32: 1, 1, {}, {}, {}, 1, {}>", seg[2], seg[3], seg[4], sum as i32),
                )];
                let (ta, tb) = match name.as_str() {
                    "hl.linear" => (false, true),
                    _ => (unit("transpose_lhs"), unit("transpose_rhs")),
                };
                if ta {
                    attrs.push(("transpose_a", "unit".into()));
                }
                if tb {
                    attrs.push(("transpose_b", "unit".into()));
                }
                if let Some(alpha) = float_attr(op, "alpha").filter(|&a| a != 1.0) {
                    attrs.push(("alpha", format!("{} : f64", aicf_runtime::init::Float(alpha))));
                }
                if let Some(act) = int_attr(op, "act").filter(|&a| a != 0) {
                    attrs.push(("act", format!("{act} : i32")));
                }
                let (sa, sb) = (spec(x[0]), spec(x[1]));
                if sb.shape.len() > 2 && sa.shape[..sa.shape.len() - 2] != sb.shape[..sb.shape.len() - 2] {
                    return Err((loc, format!("no kernel for a matmul broadcasting batch dimensions ({sa} and {sb})")));
                }
                self.emit(
                    loc,
                    &OpSpec { operands: &ins, attributes: &attrs, results: Some(&[]), ..OpSpec::new("ll.gemm") },
                )?;
            }
            "hl.fused_elementwise" | "hl.multi_tensor_apply" => {
                let mut ins = Vec::new();
                for v in &x {
                    ins.push(self.buf(*v)?);
                }
                let n = unsafe { mlirOperationGetNumResults(op) };
                let mut outs = Vec::new();
                for i in 0..n {
                    outs.push(self.alloc(Self::result(op, i))?);
                }
                let region = self.take_body(op)?;
                let segments = format!("array<i32: {}, {}>", ins.len(), outs.len());
                ins.extend(outs);
                let ll = if name == "hl.fused_elementwise" { "ll.elementwise" } else { "ll.multi_tensor_apply" };
                self.emit(
                    loc,
                    &OpSpec {
                        operands: &ins,
                        attributes: &[("operandSegmentSizes", segments)],
                        results: Some(&[]),
                        regions: &[region],
                        ..OpSpec::new(ll)
                    },
                )?;
            }
            "hl.broadcast_to" => {
                let input = self.buf(x[0])?;
                let out = self.alloc(Self::result(op, 0))?;
                let scalar = ir::parse_type(self.ctx, spec(x[0]).dtype.mlir()).map_err(|e| (loc, format!("{e:?}")))?;
                self.scalar_kernel(loc, &[(input, scalar)], out, |body| Ok(unsafe { mlirBlockGetArgument(body, 0) }))?;
            }
            "hl.softmax_cross_entropy" | "hl.cross_entropy" | "hl.cross_entropy_backward" => {
                let (logits, labels) = (self.buf(x[0])?, self.buf(x[1])?);
                let mut ins = vec![logits, labels];
                let mut attrs = Vec::new();
                let mut grad_output = 0;
                if let Some(&g) = x.get(2) {
                    match splat_value(g) {
                        Some(c) => {
                            if c != 1.0 {
                                attrs.push(("grad_scale", format!("{} : f64", aicf_runtime::init::Float(c))));
                            }
                        }
                        None => {
                            ins.push(self.buf(g)?);
                            grad_output = 1;
                        }
                    }
                }
                let (loss, grad) = match name.as_str() {
                    // An evaluation's loss folded with its casts has a
                    // gradient nothing reads: the loss alone.
                    "hl.softmax_cross_entropy" if ir::users(Self::result(op, 1)).is_empty() => {
                        (self.alloc(Self::result(op, 0))?, None)
                    }
                    "hl.softmax_cross_entropy" => {
                        (self.alloc(Self::result(op, 0))?, Some(self.alloc(Self::result(op, 1))?))
                    }
                    "hl.cross_entropy" => (self.alloc(Self::result(op, 0))?, None),
                    _ => {
                        // The loss is not wanted: a scratch buffer.
                        let scratch = self.fresh(self.ty(&TensorSpec::new([], spec(x[0]).dtype))?)?;
                        (scratch, Some(self.alloc(Self::result(op, 0))?))
                    }
                };
                ins.push(loss);
                ins.extend(grad);
                // A value per row and the labelled count: the rows run in
                // parallel, their losses summed after in a fixed order
                // (where there are rows to share out).
                let logits_spec = spec(x[0]);
                let rows: usize = logits_spec.shape[..logits_spec.shape.len().saturating_sub(1)].iter().product();
                let parallel = rows > 1 && logits_spec.shape.last().is_some_and(|&c| c > 0);
                if parallel {
                    let row_type = if logits_spec.dtype == DType::F64 { DType::F64 } else { DType::F32 };
                    ins.push(self.fresh(self.ty(&TensorSpec::new([rows + 1], row_type))?)?);
                }
                attrs.push((
                    "operandSegmentSizes",
                    format!("array<i32: 1, 1, {grad_output}, 1, {}, {}>", grad.is_some() as i32, parallel as i32),
                ));
                if int_attr(op, "reduction") == Some(1) {
                    attrs.push(("reduction", "1 : i32".into()));
                }
                if let Some(i) = int_attr(op, "ignore_index") {
                    attrs.push(("ignore_index", format!("{i} : i64")));
                }
                if let Some(c) = int_attr(op, "classes") {
                    attrs.push(("classes", format!("{c} : i64")));
                }
                self.emit(
                    loc,
                    &OpSpec {
                        operands: &ins,
                        attributes: &attrs,
                        results: Some(&[]),
                        ..OpSpec::new("ll.softmax_cross_entropy")
                    },
                )?;
            }
            "hl.softmax" | "hl.log_softmax" => {
                let input = self.buf(x[0])?;
                let out = self.alloc(Self::result(op, 0))?;
                let mut attrs = vec![("axis", format!("{} : i64", int_attr(op, "axis").unwrap_or(0)))];
                if name == "hl.log_softmax" {
                    attrs.push(("log", "unit".into()));
                }
                self.emit(
                    loc,
                    &OpSpec {
                        operands: &[input, out],
                        attributes: &attrs,
                        results: Some(&[]),
                        ..OpSpec::new("ll.softmax")
                    },
                )?;
            }
            "hl.layer_norm" | "hl.rms_norm" => {
                let layer = name == "hl.layer_norm";
                let (w, b) = if layer {
                    let seg = i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 0, 0]);
                    (seg.get(1).copied().unwrap_or(0) > 0, seg.get(2).copied().unwrap_or(0) > 0)
                } else {
                    (x.len() > 1, false)
                };
                let mut ins = Vec::new();
                for v in &x {
                    ins.push(self.buf(*v)?);
                }
                ins.push(self.alloc(Self::result(op, 0))?);
                let mut attrs = vec![
                    ("operandSegmentSizes", format!("array<i32: 1, {}, {}, 1>", w as i32, b as i32)),
                    ("dims", format!("{} : i64", int_attr(op, "dims").unwrap_or(1))),
                    ("eps", format!("{} : f64", aicf_runtime::init::Float(float_attr(op, "eps").unwrap_or(1e-5)))),
                ];
                if !layer {
                    attrs.push(("rms", "unit".into()));
                }
                self.emit(
                    loc,
                    &OpSpec { operands: &ins, attributes: &attrs, results: Some(&[]), ..OpSpec::new("ll.norm") },
                )?;
            }
            "hl.reduce_sum" | "hl.reduce_mean" | "hl.reduce_max" => {
                let input = self.buf(x[0])?;
                let out = self.alloc(Self::result(op, 0))?;
                let kind = match name.as_str() {
                    "hl.reduce_sum" => 0,
                    "hl.reduce_mean" => 1,
                    _ => 2,
                };
                let attrs = [("kind", format!("{kind} : i32")), ("dims", attr_text(op, "axes"))];
                // Scratch for the split form (see `reduce_slices`).
                let x_spec = spec(x[0]);
                let axes: Vec<usize> =
                    i64_array(op, "axes").unwrap_or_default().into_iter().map(|d| d as usize).collect();
                let reduced: usize = axes.iter().filter_map(|&d| x_spec.shape.get(d)).product();
                let outs = x_spec.num_elements() / reduced.max(1);
                let leading = axes.iter().enumerate().all(|(i, &d)| d == i);
                let mut operands = vec![input, out];
                let slices = reduce_slices(reduced, outs, kind, leading);
                if slices > 1 {
                    let t = if x_spec.dtype == DType::F64 { DType::F64 } else { DType::F32 };
                    operands.push(self.fresh(self.ty(&TensorSpec::new([slices * outs], t))?)?);
                }
                self.emit(
                    loc,
                    &OpSpec { operands: &operands, attributes: &attrs, results: Some(&[]), ..OpSpec::new("ll.reduce") },
                )?;
            }
            "hl.transpose" => {
                let input = self.buf(x[0])?;
                let out = self.alloc(Self::result(op, 0))?;
                let attrs = [("permutation", attr_text(op, "permutation"))];
                self.emit(
                    loc,
                    &OpSpec {
                        operands: &[input, out],
                        attributes: &attrs,
                        results: Some(&[]),
                        ..OpSpec::new("ll.transpose")
                    },
                )?;
            }
            "hl.reshape" => {
                let input = self.buf(x[0])?;
                let r = Self::result(op, 0);
                let t = self.ty(&spec(r))?;
                let view =
                    self.emit(loc, &OpSpec { operands: &[input], results: Some(&[t]), ..OpSpec::new("ll.reshape") })?;
                self.map.insert(key(r), Self::result(view, 0));
            }
            "hl.attention" => {
                let (q, k, v) = (self.buf(x[0])?, self.buf(x[1])?, self.buf(x[2])?);
                let r = Self::result(op, 0);
                let out = self.alloc(r)?;
                let attrs = attention_attrs(op, &spec(x[0]));
                let mut operands = vec![q, k, v, out];
                // Where a backward of this very attention follows, the
                // kernel keeps each row's log-sum-exp for it, which the
                // backward would otherwise recompute with a pass over the
                // scores of its own.
                if users(r).into_iter().any(|u| backward_of(op, u)) {
                    let rows = query_rows(&spec(x[0]));
                    let lse = self.fresh(self.ty(&TensorSpec::new([rows], DType::F32))?)?;
                    self.lse.insert(key(r), lse);
                    operands.push(lse);
                }
                self.emit(
                    loc,
                    &OpSpec {
                        operands: &operands,
                        attributes: &attrs,
                        results: Some(&[]),
                        ..OpSpec::new("ll.attention")
                    },
                )?;
            }
            "hl.attention_backward" => {
                let mut ins = Vec::new();
                for &v in &x[..5] {
                    ins.push(self.buf(v)?);
                }
                for i in 0..3 {
                    ins.push(self.alloc(Self::result(op, i))?);
                }
                // Each query row's rowsum(grad_output * out), and its
                // log-sum-exp: the forward's where it kept them, else
                // recomputed into the first half of the scratch.
                let q = spec(x[0]);
                let rows = query_rows(&q);
                let lse =
                    producer(x[3]).filter(|&f| backward_of(f, op)).and_then(|_| self.lse.get(&key(x[3])).copied());
                let n = if lse.is_some() { rows } else { 2 * rows };
                ins.push(self.fresh(self.ty(&TensorSpec::new([n], DType::F32))?)?);
                ins.extend(lse);
                let attrs = attention_attrs(op, &q);
                self.emit(
                    loc,
                    &OpSpec {
                        operands: &ins,
                        attributes: &attrs,
                        results: Some(&[]),
                        ..OpSpec::new("ll.attention_backward")
                    },
                )?;
            }
            "hl.softmax_backward" => {
                let ins = vec![self.buf(x[0])?, self.buf(x[1])?, self.alloc(Self::result(op, 0))?];
                let mut attrs = copied(op, &["axis"]);
                if unit("log") {
                    attrs.push(("log", "unit".into()));
                }
                self.kernel(loc, "ll.softmax_backward", &ins, attrs)?;
            }
            "hl.norm_backward" => {
                let results = i32_array(op, "resultSegmentSizes").unwrap_or_else(|| vec![1, 0, 0]);
                let mut ins = Vec::new();
                for v in &x {
                    ins.push(self.buf(*v)?);
                }
                let mut r = 0;
                for &present in &results {
                    if present > 0 {
                        ins.push(self.alloc(Self::result(op, r))?);
                        r += 1;
                    }
                }
                // The sums over rows (grad_weight, grad_bias) in fixed
                // chunks of rows, each chunk's into its slice of a scratch
                // buffer (the CPU's parallel form; see ll.norm_backward).
                let parts = (results[1] > 0) as usize + (results[2] > 0) as usize;
                let input = spec(x[1]);
                let dims = int_attr(op, "dims").unwrap_or(1).max(1) as usize;
                let n: usize = input.shape[input.shape.len().saturating_sub(dims)..].iter().product();
                let rows = input.num_elements() / n.max(1);
                let chunks = rows.clamp(1, NORM_CHUNKS);
                let partials = parts > 0 && n > 0 && rows > 1;
                if partials {
                    let t = if input.dtype == DType::F64 { DType::F64 } else { DType::F32 };
                    ins.push(self.fresh(self.ty(&TensorSpec::new([chunks * parts * n], t))?)?);
                }
                let mut attrs = copied(op, &["dims", "eps"]);
                attrs.push((
                    "operandSegmentSizes",
                    format!(
                        "array<i32: 1, 1, {}, 1, {}, {}, {}>",
                        x.len() - 2,
                        results[1],
                        results[2],
                        partials as i32
                    ),
                ));
                if unit("rms") {
                    attrs.push(("rms", "unit".into()));
                }
                self.kernel(loc, "ll.norm_backward", &ins, attrs)?;
            }
            "hl.gather" | "hl.gather_backward" => {
                let ins = vec![self.buf(x[0])?, self.buf(x[1])?, self.alloc(Self::result(op, 0))?];
                let ll = if name == "hl.gather" { "ll.gather" } else { "ll.scatter_add" };
                self.kernel(loc, ll, &ins, copied(op, &["axis"]))?;
            }
            "hl.slice" | "hl.slice_backward" => {
                let ins = vec![self.buf(x[0])?, self.alloc(Self::result(op, 0))?];
                let mut attrs = copied(op, &["start", "strides"]);
                if name == "hl.slice_backward" {
                    attrs.push(("backward", "unit".into()));
                }
                self.kernel(loc, "ll.slice", &ins, attrs)?;
            }
            "hl.concat" => {
                let mut ins = Vec::new();
                for v in &x {
                    ins.push(self.buf(*v)?);
                }
                ins.push(self.alloc(Self::result(op, 0))?);
                self.kernel(loc, "ll.concat", &ins, copied(op, &["axis"]))?;
            }
            "hl.argmax" => {
                let ins = vec![self.buf(x[0])?, self.alloc(Self::result(op, 0))?];
                self.kernel(loc, "ll.argmax", &ins, copied(op, &["axis"]))?;
            }
            "hl.conv2d" | "hl.conv2d_backward_input" | "hl.conv2d_backward_weight" => {
                if let Some(w) = conv_windows(op).filter(|_| self.conv_as_gemm) {
                    return self.conv_as_product(op, &w);
                }
                let mut ins = Vec::new();
                for v in &x {
                    ins.push(self.buf(*v)?);
                }
                ins.push(self.alloc(Self::result(op, 0))?);
                let mut attrs = copied(op, &["stride", "padding", "dilation", "groups"]);
                attrs.extend(layout(op));
                self.kernel(loc, &name.replace("hl.", "ll."), &ins, attrs)?;
            }
            "hl.max_pool2d" | "hl.avg_pool2d" | "hl.max_pool2d_backward" | "hl.avg_pool2d_backward" => {
                let mut ins = Vec::new();
                for v in &x {
                    ins.push(self.buf(*v)?);
                }
                ins.push(self.alloc(Self::result(op, 0))?);
                let mut attrs = copied(op, &["kernel", "stride", "padding"]);
                attrs.push(("kind", format!("{} : i32", name.starts_with("hl.avg") as i32)));
                attrs.extend(layout(op));
                let ll = if name.ends_with("_backward") { "ll.pool2d_backward" } else { "ll.pool2d" };
                self.kernel(loc, ll, &ins, attrs)?;
            }
            "hl.dropout" => {
                let ins = vec![self.buf(x[0])?, self.buf(x[1])?, self.buf(x[2])?, self.alloc(Self::result(op, 0))?];
                self.kernel(loc, "ll.dropout", &ins, copied(op, &["p", "stream"]))?;
            }
            "hl.random_like" => {
                let ins = vec![self.buf(x[1])?, self.buf(x[2])?, self.alloc(Self::result(op, 0))?];
                self.kernel(loc, "ll.random", &ins, copied(op, &["kind", "a", "b", "stream"]))?;
            }
            "hl.mse_loss" => {
                let ins = vec![self.buf(x[0])?, self.buf(x[1])?, self.alloc(Self::result(op, 0))?];
                let mut attrs = Vec::new();
                if int_attr(op, "reduction") == Some(1) {
                    attrs.push(("reduction", "1 : i32".into()));
                }
                self.kernel(loc, "ll.mse_loss", &ins, attrs)?;
            }
            other if other.starts_with("hl.") => {
                return Err((loc, format!("'{other}' has no ll kernel yet, and hl must not remain after this pass")));
            }
            "func.call" => {
                return Err((loc, "cannot lower a call inside a function: inline calls first (--inline)".into()));
            }
            other => {
                return Err((
                    loc,
                    format!("cannot lower '{other}': no ll kernel takes it (not an hl op, nor a func one)"),
                ));
            }
        }
        Ok(())
    }

    /// A view of buffer `b` as `shape` (`ll.reshape`, no kernel).
    fn view(&mut self, loc: MlirLocation, b: MlirValue, shape: Vec<usize>, dtype: DType) -> Result<MlirValue, Failure> {
        let t = self.ty(&TensorSpec::new(shape, dtype))?;
        if unsafe { mlirTypeEqual(mlirValueGetType(b), t) } {
            return Ok(b);
        }
        let op = self.emit(loc, &OpSpec { operands: &[b], results: Some(&[t]), ..OpSpec::new("ll.reshape") })?;
        Ok(Self::result(op, 0))
    }

    /// `out = op(a) @ op(b) (+ bias)` on rank-2 buffers.
    fn product(
        &mut self,
        loc: MlirLocation,
        (a, b, bias, out): (MlirValue, MlirValue, Option<MlirValue>, MlirValue),
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<(), Failure> {
        let mut ins = vec![a, b];
        ins.extend(bias);
        ins.push(out);
        let mut attrs =
            vec![("operandSegmentSizes", format!("array<i32: 1, 1, {}, 0, 0, 1, 0>", bias.is_some() as i32))];
        if transpose_a {
            attrs.push(("transpose_a", "unit".into()));
        }
        if transpose_b {
            attrs.push(("transpose_b", "unit".into()));
        }
        self.kernel(loc, "ll.gemm", &ins, attrs)
    }

    /// The windows of image `x` (`ll.im2col`) as a matrix: the window rows
    /// `[N*OH*OW, C*KH*KW]`, or the columns `[C*KH*KW, N*OH*OW]`
    /// (`columns`: runs of an image row copy as runs).
    fn windows(&mut self, op: MlirOperation, x: MlirValue, w: &Windows) -> Result<MlirValue, Failure> {
        let loc = op_loc(op);
        let image = self.buf(x)?;
        let cols = self.fresh(self.ty(&TensorSpec::new(w.cols_shape(), w.dtype))?)?;
        self.kernel(loc, "ll.im2col", &[image, cols], window_attrs(op, w))?;
        self.view(loc, cols, w.matrix(), w.dtype)
    }

    /// The output gradient `dy` as the product's matrix, made once for both
    /// of the convolution's gradients: with window rows `[N*OH*OW, O]` (a
    /// view in NHWC, a transpose in NCHW), with window columns `[O,
    /// N*OH*OW]` (a view for one image, else a transpose of whole planes).
    fn gradient_matrix(&mut self, loc: MlirLocation, dy: MlirValue, w: &Windows) -> Result<MlirValue, Failure> {
        if let Some(&m) = self.conv_gradients.get(&(key(dy), w.columns)) {
            return Ok(m);
        }
        let g = self.buf(dy)?;
        let m = if w.nhwc {
            self.view(loc, g, vec![w.rows(), w.out], w.dtype)?
        } else if !w.columns {
            let t = self.fresh(self.ty(&TensorSpec::new([w.n, w.positions(), w.out], w.dtype))?)?;
            let planes = self.view(loc, g, vec![w.n, w.out, w.positions()], w.dtype)?;
            self.kernel(loc, "ll.transpose", &[planes, t], vec![("permutation", "array<i64: 0, 2, 1>".into())])?;
            self.view(loc, t, vec![w.rows(), w.out], w.dtype)?
        } else if w.n == 1 {
            self.view(loc, g, vec![w.out, w.positions()], w.dtype)?
        } else {
            let t = self.fresh(self.ty(&TensorSpec::new([w.out, w.n, w.positions()], w.dtype))?)?;
            let planes = self.view(loc, g, vec![w.n, w.out, w.positions()], w.dtype)?;
            self.kernel(loc, "ll.transpose", &[planes, t], vec![("permutation", "array<i64: 1, 0, 2>".into())])?;
            self.view(loc, t, vec![w.out, w.rows()], w.dtype)?
        };
        self.conv_gradients.insert((key(dy), w.columns), m);
        Ok(m)
    }

    /// `out[n, o, p] = planes[n, o, p] + bias[o]` (an NCHW convolution's
    /// bias after its product), in f32 where `planes` is f32 over a 16-bit
    /// `out`.
    fn add_channel_bias(
        &mut self,
        loc: MlirLocation,
        planes: MlirValue,
        wide: DType,
        bias: MlirValue,
        out: MlirValue,
        w: &Windows,
    ) -> Result<(), Failure> {
        let planes = self.view(loc, planes, vec![w.n, w.out, w.positions()], wide)?;
        let bias = self.view(loc, bias, vec![w.out, 1], w.dtype)?;
        let target = self.view(loc, out, vec![w.n, w.out, w.positions()], w.dtype)?;
        let scalar = |t: DType| ir::parse_type(self.ctx, t.mlir()).map_err(|e| (loc, format!("{e:?}")));
        let (narrow, wide_t) = (scalar(w.dtype)?, scalar(wide)?);
        let ctx = self.ctx;
        self.scalar_kernel(loc, &[(planes, wide_t), (bias, narrow)], target, |body| {
            let one = |name: &str, operands: &[MlirValue], result: MlirType| -> Result<MlirValue, Failure> {
                let spec = OpSpec { operands, results: Some(&[result]), ..OpSpec::new(name) };
                let op = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("{e:?}")))?;
                unsafe { mlirBlockAppendOwnedOperation(body, op) };
                Ok(unsafe { mlirOperationGetResult(op, 0) })
            };
            let (p, b) = unsafe { (mlirBlockGetArgument(body, 0), mlirBlockGetArgument(body, 1)) };
            if wide == w.dtype {
                return one("arith.addf", &[p, b], narrow);
            }
            let b = one("arith.extf", &[b], wide_t)?;
            let sum = one("arith.addf", &[p, b], wide_t)?;
            one("arith.truncf", &[sum], narrow)
        })
    }

    /// An ungrouped convolution or one of its gradients as a matrix product
    /// over the image's windows (`conv-as-gemm`), with `W` viewed as `[O,
    /// C*KH*KW]`. With `R` the window rows `[N*OH*OW, C*KH*KW]` (NHWC, and
    /// NCHW with short output rows, [`columns_suit`]):
    /// - forward: `Y = R W^T (+ bias)`, rows `[N*OH*OW, O]`: NHWC itself,
    ///   transposed into NCHW;
    /// - input gradient: `dR = dY W`, summed back into the image by
    ///   `ll.col2im`;
    /// - weight gradient: `dW = dY^T R`.
    ///
    /// With `C` the window columns `[C*KH*KW, N*OH*OW]` (NCHW; Caffe's
    /// order over the batch) and `dY'` the output gradient as `[O,
    /// N*OH*OW]`:
    /// - forward: `Y' = W C`, `[O, N, OH*OW]`, whose planes transpose into
    ///   NCHW (none for one image), then the bias added;
    /// - input gradient: `dC = W^T dY'`, summed back by `ll.col2im`;
    /// - weight gradient: `dW = dY' C^T`.
    fn conv_as_product(&mut self, op: MlirOperation, w: &Windows) -> Result<(), Failure> {
        let loc = op_loc(op);
        let x = operands(op);
        let result = Self::result(op, 0);
        let rows = !w.columns;
        match op_name(op).as_str() {
            "hl.conv2d" => {
                let cols = self.windows(op, x[0], w)?;
                let weight = self.buf(x[1])?;
                let weight = self.view(loc, weight, vec![w.out, w.depth()], w.dtype)?;
                let bias = if x.len() > 2 { Some(self.buf(x[2])?) } else { None };
                let out = self.alloc(result)?;
                if w.nhwc {
                    let target = self.view(loc, out, vec![w.rows(), w.out], w.dtype)?;
                    return self.product(loc, (cols, weight, bias, target), false, true);
                }
                if !w.columns {
                    // Rows [N, P, O], transposed into NCHW.
                    let t = self.fresh(self.ty(&TensorSpec::new([w.n, w.positions(), w.out], w.dtype))?)?;
                    let target = self.view(loc, t, vec![w.rows(), w.out], w.dtype)?;
                    self.product(loc, (cols, weight, bias, target), false, true)?;
                    let planes = self.view(loc, out, vec![w.n, w.out, w.positions()], w.dtype)?;
                    let perm = vec![("permutation", "array<i64: 0, 2, 1>".into())];
                    return self.kernel(loc, "ll.transpose", &[t, planes], perm);
                }
                // [O, N, P]: NCHW itself for one image without a bias. A
                // 16-bit one with a bias is f32 until the bias is added,
                // rounded once (as the GEMM's epilogue adds it).
                let direct = w.n == 1 && bias.is_none();
                let wide = match w.dtype {
                    DType::F16 | DType::BF16 if bias.is_some() => DType::F32,
                    t => t,
                };
                let product = if direct {
                    out
                } else {
                    self.fresh(self.ty(&TensorSpec::new([w.out, w.n, w.positions()], wide))?)?
                };
                let target = self.view(loc, product, vec![w.out, w.rows()], wide)?;
                self.product(loc, (weight, cols, None, target), false, false)?;
                if direct {
                    return Ok(());
                }
                let planes = if w.n == 1 {
                    product
                } else {
                    let t = match bias {
                        Some(_) => self.fresh(self.ty(&TensorSpec::new([w.n, w.out, w.positions()], wide))?)?,
                        None => self.view(loc, out, vec![w.n, w.out, w.positions()], w.dtype)?,
                    };
                    let p = self.view(loc, product, vec![w.out, w.n, w.positions()], wide)?;
                    self.kernel(loc, "ll.transpose", &[p, t], vec![("permutation", "array<i64: 1, 0, 2>".into())])?;
                    t
                };
                if let Some(b) = bias {
                    self.add_channel_bias(loc, planes, wide, b, out, w)?;
                }
            }
            "hl.conv2d_backward_input" => {
                let dy = self.gradient_matrix(loc, x[0], w)?;
                let weight = self.buf(x[1])?;
                let weight = self.view(loc, weight, vec![w.out, w.depth()], w.dtype)?;
                // 16-bit windows of the gradient would round each product
                // before col2im sums them: f32 ones (the GEMM's mixed form).
                let wide = if matches!(w.dtype, DType::F16 | DType::BF16) { DType::F32 } else { w.dtype };
                let cols = self.fresh(self.ty(&TensorSpec::new(w.cols_shape(), wide))?)?;
                let target = self.view(loc, cols, w.matrix(), wide)?;
                if rows {
                    self.product(loc, (dy, weight, None, target), false, false)?;
                } else {
                    self.product(loc, (weight, dy, None, target), true, false)?;
                }
                let out = self.alloc(result)?;
                self.kernel(loc, "ll.col2im", &[cols, out], window_attrs(op, w))?;
            }
            _ => {
                let dy = self.gradient_matrix(loc, x[0], w)?;
                let cols = self.windows(op, x[1], w)?;
                let out = self.alloc(result)?;
                let target = self.view(loc, out, vec![w.out, w.depth()], w.dtype)?;
                if rows {
                    self.product(loc, (dy, cols, None, target), true, false)?;
                } else {
                    self.product(loc, (dy, cols, None, target), false, true)?;
                }
            }
        }
        Ok(())
    }

    /// The scalar body of a fused hl op, with `ll.yield` as its terminator.
    fn take_body(&self, op: MlirOperation) -> Result<MlirRegion, Failure> {
        let loc = op_loc(op);
        unsafe {
            let clone = mlirOperationClone(op);
            let region = mlirRegionCreate();
            mlirRegionTakeBody(region, mlirOperationGetRegion(clone, 0));
            mlirOperationDestroy(clone);
            let block = mlirRegionGetFirstBlock(region);
            // Constants defined outside the body (hoisted by canonicalize)
            // are cloned into it: a kernel body is self-contained.
            let first = mlirBlockGetFirstOperation(block);
            for inner in ops_of(block) {
                for (i, v) in operands(inner).into_iter().enumerate() {
                    let Some(def) = producer(v) else { continue };
                    if mlirOperationGetBlock(def).ptr == block.ptr {
                        continue;
                    }
                    if op_name(def) != "arith.constant" {
                        return Err((loc, format!("a fused body reads '{}' from outside", op_name(def))));
                    }
                    let copy = mlirOperationClone(def);
                    mlirBlockInsertOwnedOperationBefore(block, first, copy);
                    mlirOperationSetOperand(inner, i as isize, mlirOperationGetResult(copy, 0));
                }
            }
            let term = mlirBlockGetTerminator(block);
            let spec =
                OpSpec { operands: &operands(term), results: Some(&[]), verify: false, ..OpSpec::new("ll.yield") };
            let y = ir::create_op(self.ctx, loc, &spec).map_err(|e| (loc, format!("{e:?}")))?;
            mlirBlockInsertOwnedOperationBefore(block, term, y);
            mlirOperationDestroy(term);
            Ok(region)
        }
    }

    /// Writes every result to its buffer and replaces the function.
    fn finish(mut self, func: MlirOperation) -> Result<(), Failure> {
        let returned = std::mem::take(&mut self.returned);
        let outputs = std::mem::take(&mut self.outputs);
        // Every result's buffer first (a returned constant is lowered
        // here): a buffer made after a redirect below could take the
        // address of an alloc it destroyed, and be taken for that one.
        let sources: Vec<MlirValue> = returned.iter().map(|v| self.buf(*v)).collect::<Result<_, _>>()?;
        // Positions of the kernels; redirecting a result destroys only its
        // alloc, so the other entries stay valid.
        let order: HashMap<usize, usize> =
            ops_of(self.block).iter().enumerate().map(|(i, o)| (o.ptr as usize, i)).collect();
        let mut copies = Vec::new();
        // Buffers whose kernel now writes a result's target instead.
        let mut moved: HashMap<usize, MlirValue> = HashMap::new();
        let mut groups = GroupIndex::default();
        let mut returned_targets = Vec::new();
        for (&first, (tag, out)) in sources.iter().zip(outputs) {
            let target =
                match tag.as_deref().and_then(|t| t.strip_prefix("param @").or_else(|| t.strip_prefix("state @"))) {
                    Some(symbol) => self.symbol_args[symbol],
                    None => out,
                };
            returned_targets.push(target);
            let mut src = first;
            // a value returned twice now lives in the first target
            while let Some(&t) = moved.get(&(src.ptr as usize)) {
                src = t;
            }
            if src.ptr == target.ptr {
                continue;
            }
            let alloc = producer(src).filter(|&p| op_name(p) == "memref.alloc");
            if let Some(alloc) = alloc.filter(|_| self.safe_to_target(src, target, &order, &mut groups)) {
                unsafe {
                    mlirValueReplaceAllUsesOfWith(src, target);
                    mlirOperationDestroy(alloc);
                }
                moved.insert(src.ptr as usize, target);
            } else {
                copies.push((src, target));
            }
        }
        // A result that is a symbol's value at entry (`hl.get_state` returned
        // as it is) where the function also writes that symbol: copied
        // before any kernel, while the buffer still holds the entry value.
        let written: std::collections::HashSet<usize> = returned_targets.iter().map(|t| t.ptr as usize).collect();
        for (src, target) in copies {
            let op = self
                .emit(self.loc, &OpSpec { operands: &[src, target], results: Some(&[]), ..OpSpec::new("ll.copy") })?;
            let entry_value =
                self.symbol_args.values().any(|a| a.ptr == src.ptr) && written.contains(&(src.ptr as usize));
            if entry_value {
                unsafe { mlirOperationMoveBefore(op, mlirBlockGetFirstOperation(self.block)) };
            }
        }
        let tags: Vec<String> = self.arg_tags.iter().map(|t| format!("{{ll.bind = {}}}", ir::quoted(t))).collect();
        let name = ir::string_attr(func, "sym_name").unwrap_or_default();
        let mut attrs = vec![("arg_attrs", format!("[{}]", tags.join(", ")))];
        if let Some(vis) = ir::string_attr(func, "sym_visibility") {
            attrs.push(("sym_visibility", format!("\"{vis}\"")));
        }
        let new = ir::create_function(self.ctx, op_loc(func), &name, self.region, &[], &attrs)
            .map_err(|e| (self.loc, format!("internal error building the function: {e:?}")))?;
        unsafe {
            mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(func), func, new);
            mlirOperationDestroy(func);
        }
        Ok(())
    }

    /// May the kernel that writes `src` write `target` instead? Yes when no
    /// kernel after it reads `target`'s old contents, and the kernel itself
    /// reads them only elementwise at the same index.
    fn safe_to_target(
        &self,
        src: MlirValue,
        target: MlirValue,
        order: &HashMap<usize, usize>,
        groups: &mut GroupIndex,
    ) -> bool {
        let Some(writer) = users(src).into_iter().min_by_key(|u| order.get(&(u.ptr as usize)).copied()) else {
            return false;
        };
        let Some(&at) = order.get(&(writer.ptr as usize)) else { return false };
        let mut readers = vec![target];
        let mut i = 0;
        while i < readers.len() {
            for u in users(readers[i]) {
                if op_name(u) == "ll.reshape" {
                    readers.push(unsafe { mlirOperationGetResult(u, 0) });
                }
            }
            i += 1;
        }
        for r in &readers {
            for u in users(*r) {
                if op_name(u) == "ll.reshape" {
                    continue;
                }
                let Some(&pos) = order.get(&(u.ptr as usize)) else { return false };
                if pos < at {
                    continue;
                }
                if pos > at || !groups.same_index(writer, *r, src) {
                    return false;
                }
            }
        }
        true
    }
}

/// The sizes of a convolution run as a product over its window rows.
struct Windows {
    n: usize,
    /// output channels
    out: usize,
    channels: usize,
    kernel: [usize; 2],
    output: [usize; 2],
    nhwc: bool,
    /// The windows as columns `[C, KH, KW, N, OH, OW]`, else as rows `[N,
    /// OH, OW, C, KH, KW]` ([`columns_suit`]).
    columns: bool,
    dtype: DType,
}

impl Windows {
    fn positions(&self) -> usize {
        self.output[0] * self.output[1]
    }
    fn rows(&self) -> usize {
        self.n * self.positions()
    }
    fn depth(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }
    /// The windows' buffer: rows `[N, OH, OW, C, KH, KW]` or columns `[C,
    /// KH, KW, N, OH, OW]`.
    fn cols_shape(&self) -> Vec<usize> {
        let ([kh, kw], [oh, ow]) = (self.kernel, self.output);
        if self.columns {
            vec![self.channels, kh, kw, self.n, oh, ow]
        } else {
            vec![self.n, oh, ow, self.channels, kh, kw]
        }
    }
    /// The windows as the product's matrix.
    fn matrix(&self) -> Vec<usize> {
        if self.columns { vec![self.depth(), self.rows()] } else { vec![self.rows(), self.depth()] }
    }
}

/// The shortest output row for which an NCHW convolution takes its windows
/// as columns: each column row is a run of `OW` copied from an image row,
/// and below a vector's length the runs' bounds cost more than the rows'
/// element-at-a-time copy (the digits CNN's 4 x 4 layer: 0.08 ms against
/// 0.06 as rows, Zen 4).
const COLUMNS_MIN_RUN: usize = 8;

/// Whether an NCHW convolution producing rows of `ow` takes its windows as
/// columns. NHWC keeps rows: its channels are the runs, and the rows'
/// product is NHWC itself.
fn columns_suit(nhwc: bool, ow: usize) -> bool {
    !nhwc && ow >= COLUMNS_MIN_RUN
}

/// The attributes of a convolution's `ll.im2col` / `ll.col2im`.
fn window_attrs(op: MlirOperation, w: &Windows) -> Vec<(&'static str, String)> {
    let mut attrs = copied(op, &["stride", "padding", "dilation"]);
    attrs.extend(layout(op));
    if w.columns {
        attrs.push(("columns", "unit".into()));
    }
    attrs
}

/// The sizes of `hl.conv2d` (or a gradient of it) where it runs as a
/// product: ungrouped, one element type throughout, its window rows at
/// most [`CONV_WINDOW_BYTES`].
fn conv_windows(op: MlirOperation) -> Option<Windows> {
    if int_attr(op, "groups").unwrap_or(1) != 1 {
        return None;
    }
    let x = operands(op);
    let name = op_name(op);
    // (image, weight, output) specs
    let r = spec(unsafe { mlirOperationGetResult(op, 0) });
    let (image, weight, output) = match name.as_str() {
        "hl.conv2d" => (spec(x[0]), spec(x[1]), r),
        "hl.conv2d_backward_input" => (r, spec(x[1]), spec(x[0])),
        _ => (spec(x[1]), r, spec(x[0])),
    };
    let dtype = image.dtype;
    if weight.dtype != dtype || output.dtype != dtype || !dtype.is_float() || x.len() > 3 {
        return None;
    }
    if image.shape.len() != 4 || weight.shape.len() != 4 || output.shape.len() != 4 {
        return None;
    }
    let nhwc = int_attr(op, "layout").unwrap_or(0) == 1;
    let (c, h, w) = if nhwc { (3, 1, 2) } else { (1, 2, 3) };
    let windows = Windows {
        n: image.shape[0],
        out: weight.shape[0],
        channels: image.shape[c],
        kernel: [weight.shape[2], weight.shape[3]],
        output: [output.shape[h], output.shape[w]],
        nhwc,
        columns: columns_suit(nhwc, output.shape[w]),
        dtype,
    };
    // An input gradient's rows of a 16-bit convolution are f32.
    let width = match dtype {
        DType::F16 | DType::BF16 if name == "hl.conv2d_backward_input" => 4,
        DType::F16 | DType::BF16 => 2,
        DType::F64 => 8,
        _ => 4,
    };
    let bytes = windows.cols_shape().iter().try_fold(width, |a: usize, &d| a.checked_mul(d))?;
    (bytes <= CONV_WINDOW_BYTES && bytes > 0).then_some(windows)
}

/// The attributes `keys` of `op` that it has, as text to copy onto its kernel.
fn copied<'k>(op: MlirOperation, keys: &[&'k str]) -> Vec<(&'k str, String)> {
    keys.iter().filter(|k| has(op, k)).map(|&k| (k, attr_text(op, k))).collect()
}

/// An image op's layout as the `ll` enum (absent for the default NCHW).
fn layout(op: MlirOperation) -> Option<(&'static str, String)> {
    int_attr(op, "layout").filter(|&l| l != 0).map(|l| ("layout", format!("{l} : i32")))
}

/// Per multi-tensor op, which group each of its operands belongs to, built
/// once: the op has thousands of operands and `safe_to_target` asks about
/// each result.
#[derive(Default)]
struct GroupIndex {
    /// op -> (input value -> its groups, output value -> its group)
    of: HashMap<usize, (HashMap<usize, Vec<usize>>, HashMap<usize, usize>)>,
}

impl GroupIndex {
    /// Does elementwise `op` read `input` only at the indices where it
    /// writes `output` (same shape, and for a multi-tensor op, the same
    /// group)?
    fn same_index(&mut self, op: MlirOperation, input: MlirValue, output: MlirValue) -> bool {
        let name = op_name(op);
        if name != "ll.elementwise" && name != "ll.multi_tensor_apply" {
            return false;
        }
        if unsafe { !mlirTypeEqual(mlirValueGetType(input), mlirValueGetType(output)) } {
            return false;
        }
        if name == "ll.elementwise" {
            return true;
        }
        let (ins, outs) = self.of.entry(op.ptr as usize).or_insert_with(|| {
            let seg = i32_array(op, "operandSegmentSizes").unwrap_or_default();
            let (n_in, n_out) = (seg.first().copied().unwrap_or(0) as usize, seg.get(1).copied().unwrap_or(0) as usize);
            let all = operands(op);
            let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
            let k = (unsafe { mlirBlockGetNumArguments(block) } as usize).max(1);
            let m = (n_out / (n_in / k).max(1)).max(1);
            let mut ins: HashMap<usize, Vec<usize>> = HashMap::new();
            for (i, v) in all[..n_in].iter().enumerate() {
                ins.entry(v.ptr as usize).or_default().push(i / k);
            }
            let mut outs = HashMap::new();
            for (j, v) in all[n_in..n_in + n_out].iter().enumerate() {
                outs.entry(v.ptr as usize).or_insert(j / m);
            }
            (ins, outs)
        });
        let Some(&group) = outs.get(&(output.ptr as usize)) else { return false };
        ins.get(&(input.ptr as usize)).is_none_or(|gs| gs.iter().all(|&g| g == group))
    }
}

fn scalar_text(c: f64, dtype: DType) -> String {
    if dtype.is_float() {
        format!("{} : {}", crate::nn::float_literal(c, dtype), dtype.mlir())
    } else if dtype == DType::I1 {
        (if c != 0.0 { "true" } else { "false" }).to_string()
    } else {
        format!("{} : {}", c as i64, dtype.mlir())
    }
}

/// Query rows of an attention whose queries are `q`: the rows of every
/// leading dimension.
fn query_rows(q: &TensorSpec) -> usize {
    q.shape[..q.shape.len().saturating_sub(1)].iter().product()
}

/// Whether `user` is the `hl.attention_backward` of the `hl.attention`
/// `forward`: the same queries, keys, values, mask and scale, and the
/// forward's result as its `out`.
fn backward_of(forward: MlirOperation, user: MlirOperation) -> bool {
    if op_name(forward) != "hl.attention" || op_name(user) != "hl.attention_backward" {
        return false;
    }
    let (f, b) = (operands(forward), operands(user));
    let result = unsafe { mlirOperationGetResult(forward, 0) };
    b.len() == 5
        && f.len() == 3
        && (0..3).all(|i| f[i].ptr == b[i].ptr)
        && b[3].ptr == result.ptr
        && attention_attrs(forward, &spec(f[0])) == attention_attrs(user, &spec(b[0]))
}

/// `ll.attention`'s (and its backward's) attributes from `hl` op `op`
/// with queries `q`: the scale, given or 1 / sqrt(head size), and
/// `causal`.
fn attention_attrs(op: MlirOperation, q: &TensorSpec) -> Vec<(&'static str, String)> {
    let d = q.shape.last().copied().unwrap_or(1) as f64;
    let scale = float_attr(op, "scale").unwrap_or(1.0 / d.sqrt());
    let mut attrs = vec![("scale", format!("{} : f64", aicf_runtime::init::Float(scale)))];
    if ir::has(op, "causal") {
        attrs.push(("causal", "unit".into()));
    }
    attrs
}
