//! `hl-autocast`: mixed precision as an IR rewrite, before autodiff (so
//! the backward pass inherits each op's precision), in the spirit of
//! `torch.autocast` and XLA's float normalisation.
//!
//! Each op of every function falls under one rule of a policy table:
//!
//! - **low**: contractions (`matmul`, `linear`, `gemm`, `conv2d`,
//!   `attention`) take their float operands in the low type (bf16 or f16);
//!   their kernels accumulate in f32 and round the result once.
//! - **f32**: `exp`, `log`, `pow`, `rsqrt`, `softmax`, `log_softmax`, the
//!   norms, `reduce_sum`/`reduce_mean` and every loss take 16-bit operands
//!   widened to f32.
//! - **promote**: mixed-type elementwise ops (`add`, `sub`, `mul`, `div`,
//!   `max`, `min`, `select`, `concat`, `compare`) widen to their widest
//!   float operand; a scalar or splat constant does not take part (it
//!   follows the others, as a Python scalar does in PyTorch).
//! - **keep**: everything else (shape ops, activations, dropout, pooling,
//!   gathers) computes in its input's type.
//!
//! Parameters and optimizer state are untouched (f32 master weights): a
//! contraction reads `hl.cast` of the parameter, made once per step (`cse`
//! merges the casts of one parameter), and the gradient flows back through
//! the cast to f32, where it is accumulated and applied. Each function keeps
//! its signature: a returned value of another type is cast back.
//!
//! The table is overridable: `fp32-ops` and `low-ops` move ops (names with
//! or without `hl.`) to the f32 or low rule, and `fp32-layers` keeps every
//! op that reads a parameter under one of the given prefixes (`head`,
//! `blocks.0`) in f32.

use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ffi;
use crate::ir::{self, op_loc, op_name, ops_of};
use crate::types::DType;
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashSet;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    Low,
    F32,
    Promote,
    Keep,
}

/// The default policy's rule for op `name`.
fn default_rule(name: &str) -> Rule {
    match name {
        "hl.matmul" | "hl.linear" | "hl.gemm" | "hl.conv2d" | "hl.attention" => Rule::Low,
        "hl.exp"
        | "hl.log"
        | "hl.pow"
        | "hl.rsqrt"
        | "hl.softmax"
        | "hl.log_softmax"
        | "hl.layer_norm"
        | "hl.rms_norm"
        | "hl.reduce_sum"
        | "hl.reduce_mean"
        | "hl.cross_entropy"
        | "hl.softmax_cross_entropy"
        | "hl.mse_loss" => Rule::F32,
        "hl.add" | "hl.sub" | "hl.mul" | "hl.div" | "hl.max" | "hl.min" | "hl.select" | "hl.concat" | "hl.compare" => {
            Rule::Promote
        }
        _ => Rule::Keep,
    }
}

/// The policy: the low type and the table's overrides.
struct Policy {
    low: DType,
    fp32_ops: HashSet<String>,
    low_ops: HashSet<String>,
    fp32_layers: Vec<String>,
}

impl Policy {
    fn rule(&self, op: MlirOperation) -> Rule {
        let name = op_name(op);
        if self.fp32_ops.contains(&name) {
            return Rule::F32;
        }
        if !self.fp32_layers.is_empty() && reads_layer(op, &self.fp32_layers) {
            return match default_rule(&name) {
                Rule::Low => Rule::F32,
                r => r,
            };
        }
        if self.low_ops.contains(&name) {
            return Rule::Low;
        }
        default_rule(&name)
    }
}

/// Op names of a comma-separated list, `hl.` added where missing.
fn op_list(text: &str) -> HashSet<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| if s.contains('.') && s.starts_with("hl.") { s.to_string() } else { format!("hl.{s}") })
        .collect()
}

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = |m: String| {
        emit_error(module.location(), &format!("hl-autocast: {m}"));
        PassFailed
    };
    let low = match options.get("dtype").map_err(report)? {
        "bf16" => DType::BF16,
        "f16" | "fp16" => DType::F16,
        "f32" | "fp32" => return Ok(()),
        other => return Err(report(format!("dtype={other}: expected bf16, f16 or f32"))),
    };
    let list = |key: &str| options.get(key).map(str::to_string).map_err(report);
    let policy = Policy {
        low,
        fp32_ops: op_list(&list("fp32-ops")?),
        low_ops: op_list(&list("low-ops")?),
        fp32_layers: list("fp32-layers")?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
    };
    let module = module.to_raw();
    // Autocast rewrites the forward; autodiff then derives a backward that
    // inherits its casts. A module differentiated already (whose backward
    // would keep f32 types the casts break) is refused before this body
    // runs (`passes::FORWARD_ONLY`).
    for (func, _) in ir::functions(module) {
        if let Err((loc, m)) = super::common::retypable("hl-autocast", func, false) {
            emit_error(unsafe { Location::from_raw(loc) }, &m);
            return Err(PassFailed);
        }
    }
    // Values cast to the other 16-bit type already (an earlier autocast, or
    // the model's own casts) would be rounded twice: bf16's 8-bit mantissa,
    // then f16's range.
    for (_, block) in ir::functions(module) {
        let other = ops_of(block).into_iter().find_map(|op| {
            let cast = op_name(op) == "hl.cast" && unsafe { mlirOperationGetNumResults(op) } == 1;
            let to = cast.then(|| float_of(unsafe { mlirOperationGetResult(op, 0) })).flatten()?;
            (bits(to) == 16 && to != low).then_some((op, to))
        });
        // (Said at the cast, not at the module's location.)
        if let Some((op, other)) = other {
            emit_error(
                unsafe { Location::from_raw(op_loc(op)) },
                &format!(
                    "hl-autocast: the module casts to {other:?} already (an earlier hl-autocast, or the model's own \
                     casts): casting it to {low:?} would round those values twice; autocast a module without them, \
                     or to {other:?}"
                ),
            );
            return Err(PassFailed);
        }
    }
    // An override naming nothing would leave the op or layer as it was,
    // silently: a misspelt name is an error.
    let ctx = unsafe { mlirOperationGetContext(module) };
    for name in policy.fp32_ops.iter().chain(&policy.low_ops) {
        if !unsafe { mlir_sys::mlirContextIsRegisteredOperation(ctx, crate::ffi::string_ref(name)) } {
            return Err(report(format!("'{name}' is not an hl op")));
        }
    }
    // An op in both lists: f32 won, silently.
    let mut both: Vec<&String> = policy.fp32_ops.intersection(&policy.low_ops).collect();
    both.sort();
    if let Some(name) = both.first() {
        return Err(report(format!("'{name}' is in both fp32-ops and low-ops: name it in one")));
    }
    let params: Vec<String> = ir::ops_of(super::grow::module_body(module))
        .into_iter()
        .filter(|&op| matches!(op_name(op).as_str(), "hl.param" | "hl.state"))
        .filter_map(|op| ir::string_attr(op, "sym_name"))
        .collect();
    for layer in &policy.fp32_layers {
        if !params.iter().any(|p| p == layer || p.starts_with(&format!("{layer}."))) {
            return Err(report(format!(
                "fp32-layers names '{layer}', which no parameter or state of the module is in"
            )));
        }
    }
    for (func, block) in ir::functions(module) {
        cast_block(block, &policy)?;
        cast_returns(func, block)?;
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err(PassFailed);
    }
    Ok(())
}

/// The element type of a ranked tensor value, if it is a float.
fn float_of(v: MlirValue) -> Option<DType> {
    let t = unsafe { mlirValueGetType(v) };
    if !unsafe { mlirTypeIsARankedTensor(t) } {
        return None;
    }
    ir::element_dtype(unsafe { mlirShapedTypeGetElementType(t) }).filter(|d| d.is_float())
}

fn bits(t: DType) -> u32 {
    match t {
        DType::F16 | DType::BF16 => 16,
        DType::F64 => 64,
        _ => 32,
    }
}

/// The widest of two float types (bf16 and f16 meet at f32).
fn wider(a: DType, b: DType) -> DType {
    if a == b {
        a
    } else if bits(a) == 16 && bits(b) == 16 {
        DType::F32
    } else if bits(a) >= bits(b) {
        a
    } else {
        b
    }
}

/// Whether `v` is a constant whose type should follow its neighbours': a
/// scalar or a splat.
fn weak(v: MlirValue) -> bool {
    ir::producer(v).is_some_and(|p| op_name(p) == "hl.constant") && ir::splat_value(v).is_some()
}

/// Whether `op` reads (through casts and shape ops) a parameter or state
/// whose symbol starts with one of `prefixes` (as a whole path component).
fn reads_layer(op: MlirOperation, prefixes: &[String]) -> bool {
    let mut stack: Vec<MlirValue> = ir::operands(op);
    let mut seen = HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(ir::key(v)) {
            continue;
        }
        let Some(p) = ir::producer(v) else { continue };
        match op_name(p).as_str() {
            "hl.get_param" | "hl.get_state" => {
                let name = ir::flat_symbol(p, "name").unwrap_or_default();
                if prefixes.iter().any(|x| name == *x || name.starts_with(&format!("{x}."))) {
                    return true;
                }
            }
            "hl.cast" | "hl.reshape" | "hl.transpose" | "hl.broadcast_to" => stack.extend(ir::operands(p)),
            _ => {}
        }
    }
    false
}

/// The tensor type `ty` with element type `to`.
fn with_element(ty: MlirType, to: DType) -> MlirType {
    unsafe {
        let ctx = mlirTypeGetContext(ty);
        let rank = mlirShapedTypeGetRank(ty) as isize;
        let shape: Vec<i64> = (0..rank).map(|d| mlirShapedTypeGetDimSize(ty, d)).collect();
        mlirRankedTensorTypeGet(rank, shape.as_ptr(), element_type(ctx, to), mlirAttributeGetNull())
    }
}

fn element_type(ctx: MlirContext, t: DType) -> MlirType {
    unsafe {
        match t {
            DType::F16 => mlirF16TypeGet(ctx),
            DType::BF16 => mlirBF16TypeGet(ctx),
            DType::F64 => mlirF64TypeGet(ctx),
            _ => mlirF32TypeGet(ctx),
        }
    }
}

/// Replaces operand `i` of `op` by `hl.cast` of it to `to`, built before `op`.
fn cast_operand(op: MlirOperation, i: usize, to: DType) -> PassResult {
    let v = unsafe { mlirOperationGetOperand(op, i as isize) };
    let ty = with_element(unsafe { mlirValueGetType(v) }, to);
    let cast = cast_value(op, v, ty)?;
    unsafe { mlirOperationSetOperand(op, i as isize, cast) };
    Ok(())
}

/// `hl.cast v : ... to ty`, inserted before `at`.
fn cast_value(at: MlirOperation, v: MlirValue, ty: MlirType) -> Result<MlirValue, PassFailed> {
    let ctx = unsafe { mlirOperationGetContext(at) };
    let types = [ty];
    let operands = [v];
    let spec = ir::OpSpec { operands: &operands, results: Some(&types), ..ir::OpSpec::new("hl.cast") };
    let cast = ir::create_op(ctx, op_loc(at), &spec).map_err(|e| {
        emit_error(unsafe { Location::from_raw(op_loc(at)) }, &format!("hl-autocast: building a cast: {e:?}"));
        PassFailed
    })?;
    unsafe { mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(at), at, cast) };
    Ok(unsafe { mlirOperationGetResult(cast, 0) })
}

/// Applies the policy to each op of `block` in order; an op whose operands
/// changed type (cast here, or produced by an op retyped before it) infers
/// its result types again.
fn cast_block(block: MlirBlock, policy: &Policy) -> PassResult {
    let mut retyped: HashSet<usize> = HashSet::new();
    for op in ops_of(block) {
        let name = op_name(op);
        if name == "func.return" {
            continue;
        }
        if name == "func.call" {
            cast_call_operands(op)?;
            continue;
        }
        let operands = ir::operands(op);
        let floats: Vec<(usize, DType)> =
            operands.iter().enumerate().filter_map(|(i, v)| float_of(*v).map(|t| (i, t))).collect();
        let targets: Vec<(usize, DType)> = match policy.rule(op) {
            _ if name == "hl.cast" => vec![],
            Rule::Low => floats.iter().map(|&(i, _)| (i, policy.low)).collect(),
            // 16-bit operands widen to f32, or to f64 beside an f64 one
            // (an f64 model's loss reads its contraction's bf16 result
            // beside an f64 target).
            Rule::F32 => {
                let wide = floats.iter().map(|&(_, t)| t).fold(DType::F32, wider);
                floats.iter().map(|&(i, t)| (i, if bits(t) == 16 { wide } else { t })).collect()
            }
            Rule::Promote => {
                let strong: Vec<DType> = floats.iter().filter(|(i, _)| !weak(operands[*i])).map(|&(_, t)| t).collect();
                match strong.iter().copied().reduce(wider) {
                    Some(w) => floats.iter().map(|&(i, _)| (i, w)).collect(),
                    None => vec![],
                }
            }
            Rule::Keep => vec![],
        };
        let mut changed = operands.iter().any(|v| retyped.contains(&ir::key(*v)));
        for ((i, from), (_, to)) in floats.iter().zip(&targets) {
            if from != to {
                cast_operand(op, *i, *to)?;
                changed = true;
            }
        }
        if changed && name != "hl.cast" {
            let results: Vec<MlirValue> = (0..unsafe { mlirOperationGetNumResults(op) })
                .map(|r| unsafe { mlirOperationGetResult(op, r) })
                .collect();
            let before: Vec<MlirType> = results.iter().map(|r| unsafe { mlirValueGetType(*r) }).collect();
            reinfer(op)?;
            for (r, ty) in results.iter().zip(before) {
                if !unsafe { mlirTypeEqual(mlirValueGetType(*r), ty) } {
                    retyped.insert(ir::key(*r));
                }
            }
        }
    }
    Ok(())
}

/// Infers `op`'s result types again from its (recast) operands; an op that
/// states its result types (`hl.reshape`) takes its first float operand's
/// element type for its float results.
fn reinfer(op: MlirOperation) -> PassResult {
    match unsafe { ffi::aicfInferResultTypes(op) } {
        1 => Ok(()),
        0 => {
            let Some(t) = ir::operands(op).into_iter().find_map(float_of) else { return Ok(()) };
            for r in 0..unsafe { mlirOperationGetNumResults(op) } {
                let v = unsafe { mlirOperationGetResult(op, r) };
                if float_of(v).is_some() {
                    unsafe { mlirValueSetType(v, with_element(mlirValueGetType(v), t)) };
                }
            }
            Ok(())
        }
        _ => {
            let loc = unsafe { Location::from_raw(op_loc(op)) };
            emit_error(loc, &format!("hl-autocast: '{}' does not take its operands in mixed precision", op_name(op)));
            Err(PassFailed)
        }
    }
}

/// Casts each operand of a `func.call` whose type is no longer the
/// callee's argument type back to it (the callee keeps its signature).
fn cast_call_operands(call: MlirOperation) -> PassResult {
    let Some(callee) = ir::flat_symbol(call, "callee") else { return Ok(()) };
    let module = {
        let mut op = call;
        loop {
            let parent = unsafe { mlirOperationGetParentOperation(op) };
            if parent.ptr.is_null() {
                break op;
            }
            op = parent;
        }
    };
    let Some((func, _)) = ir::functions(module)
        .into_iter()
        .find(|(f, _)| ir::string_attr(*f, "sym_name").as_deref() == Some(callee.as_str()))
    else {
        return Ok(());
    };
    let fty = unsafe { mlirTypeAttrGetValue(ir::attr(func, "function_type")) };
    cast_operands(call, |i| unsafe { mlirFunctionTypeGetInput(fty, i) })
}

/// Casts each operand `i` of `op` whose type is not `want(i)` to it.
fn cast_operands(op: MlirOperation, want: impl Fn(isize) -> MlirType) -> PassResult {
    for (i, v) in ir::operands(op).into_iter().enumerate() {
        let want = want(i as isize);
        if !unsafe { mlirTypeEqual(mlirValueGetType(v), want) } {
            let cast = cast_value(op, v, want)?;
            unsafe { mlirOperationSetOperand(op, i as isize, cast) };
        }
    }
    Ok(())
}

/// Casts each returned value whose type is no longer the function's result
/// type back to it: a function's signature does not change.
fn cast_returns(func: MlirOperation, block: MlirBlock) -> PassResult {
    let Some(ret) = ops_of(block).into_iter().rev().find(|op| op_name(*op) == "func.return") else {
        return Ok(());
    };
    let fty = unsafe { mlirTypeAttrGetValue(ir::attr(func, "function_type")) };
    cast_operands(ret, |i| unsafe { mlirFunctionTypeGetResult(fty, i) })
}
