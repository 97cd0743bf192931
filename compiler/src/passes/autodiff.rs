//! `hl-autodiff`: reverse-mode differentiation of an `hl` function.
//!
//! Algorithm:
//! 1. Find `@<function>`; it must return one floating-point scalar (the loss).
//! 2. Create `@<function>_grad` with the same arguments and clone the forward
//!    ops into it: the forward values that gradient rules read are these
//!    clones (saved, not recomputed).
//! 3. Seed d(loss) = 1 and walk the cloned ops in reverse. For each op with
//!    an adjoint, its rule (one per op kind, [`vjp`]) emits `hl` ops that
//!    compute the gradient of each floating-point operand; a gradient is
//!    brought back to its operand's shape (`unbroadcast`) and added to what
//!    that operand already has (fan-out). Integer values (labels, indices,
//!    masks) get no gradient. `hl.get_param` passes its adjoint to its
//!    parameter; a parameter read twice sums both.
//! 4. Return the loss, then d(loss)/d(param) for every `hl.param` in
//!    declaration order (zeros for a parameter the loss does not read), then,
//!    under `wrt-inputs`, one gradient per floating-point argument.
//!
//! Only ops on a path from what is differentiated to the loss are visited
//! (activity analysis); a rule may still emit a gradient for an inactive
//! operand, which is then unused and removed by `-canonicalize`. An op on
//! the differentiable path without a rule is an error on that op.

use super::common::{Emitter, Failure};
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::{
    ir::{
        self, OpSpec, attr_text, flat_symbol, float_attr, has, i32_array, i64_array, i64_array_text, int_attr, key,
        op_loc, op_name, ops_of, spec, string_attr,
    },
    nn::spec_of_type,
    types::TensorSpec,
};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashMap;

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = |m: String| {
        emit_error(module.location(), &format!("hl-autodiff: {m}"));
        PassFailed
    };
    let function = options.get("function").map_err(report)?.to_string();
    let wrt_inputs = options.get_bool("wrt-inputs").map_err(report)?;
    let fused_attention = FusedAttention::of(
        options.get_bool("fused-attention-backward").map_err(report)?,
        options.get_bool("fused-attention-any-heads").map_err(report)?,
    );
    differentiate(module.to_raw(), &function, wrt_inputs, fused_attention).map_err(|(location, message)| {
        emit_error(unsafe { Location::from_raw(location) }, &format!("hl-autodiff: {message}"));
        PassFailed
    })
}

/// Which attention gradients are one `hl.attention_backward` (the
/// probabilities recomputed inside it, never materialised); the others are
/// GEMMs, a softmax and its backward over the materialised probabilities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusedAttention {
    /// None: every attention's gradient is GEMMs.
    #[default]
    None,
    /// Those whose heads take the GPU's tensor-core kernels (f16/bf16,
    /// head sizes multiples of 16 up to 128): the GPU's choice, where f32
    /// heads run faster as GEMMs.
    TensorCoreHeads,
    /// Every one: the CPU's choice (its blocked kernel takes every head).
    All,
}

impl FusedAttention {
    /// From the passes' two options (`fused-attention-backward`,
    /// `fused-attention-any-heads`).
    pub fn of(fused: bool, any_heads: bool) -> Self {
        match (fused, any_heads) {
            (false, _) => FusedAttention::None,
            (true, false) => FusedAttention::TensorCoreHeads,
            (true, true) => FusedAttention::All,
        }
    }

    /// Whether the attention of operands `x` takes the fused gradient.
    fn takes(self, x: &[MlirValue]) -> bool {
        match self {
            FusedAttention::None => false,
            FusedAttention::TensorCoreHeads => tensor_core_heads(x),
            FusedAttention::All => true,
        }
    }
}

/// Adds `@<function>_grad` to `module` (see the module docs), with the
/// attention gradients `fused_attention` says fused.
pub fn differentiate(
    module: MlirOperation,
    function: &str,
    wrt_inputs: bool,
    fused_attention: FusedAttention,
) -> Result<(), Failure> {
    let ctx = unsafe { mlirOperationGetContext(module) };
    let module_loc = unsafe { mlirOperationGetLocation(module) };
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) };
    let mut forward = None;
    let mut params: Vec<(String, TensorSpec)> = Vec::new();
    for op in ops_of(body) {
        match op_name(op).as_str() {
            "hl.param" => {
                let name = string_attr(op, "sym_name").unwrap_or_default();
                let ty = unsafe { mlirTypeAttrGetValue(ir::attr(op, "type")) };
                params.push((name, spec_of_type(ty).map_err(|e| (module_loc, e.to_string()))?));
            }
            "func.func" if string_attr(op, "sym_name").unwrap_or_default() == function => forward = Some(op),
            "func.func" if string_attr(op, "sym_name").unwrap_or_default() == format!("{function}_grad") => {
                return Err((unsafe { mlirOperationGetLocation(op) }, format!("@{function}_grad already exists")));
            }
            _ => {}
        }
    }
    let forward = forward.ok_or_else(|| (module_loc, format!("no function @{function} to differentiate")))?;
    let fwd_block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(forward, 0)) };
    let fwd_loc = unsafe { mlirOperationGetLocation(forward) };
    // Branches (`cf.cond_br`) were read as a first block without a return.
    if !fwd_block.ptr.is_null() && !unsafe { mlirBlockGetNextInRegion(fwd_block) }.ptr.is_null() {
        return Err((
            fwd_loc,
            format!(
                "@{function} has more than one block (control flow): AICF differentiates straight-line functions \
                 (write a branch as hl.select over both sides)"
            ),
        ));
    }

    // 2. The gradient function's block, with the forward's arguments.
    let nargs = unsafe { mlirBlockGetNumArguments(fwd_block) };
    let arg_types: Vec<MlirType> =
        (0..nargs).map(|i| unsafe { mlirValueGetType(mlirBlockGetArgument(fwd_block, i)) }).collect();
    let locs = vec![fwd_loc; arg_types.len()];
    let block = unsafe { mlirBlockCreate(arg_types.len() as isize, arg_types.as_ptr(), locs.as_ptr()) };
    let region = unsafe { mlirRegionCreate() };
    unsafe { mlirRegionAppendOwnedBlock(region, block) };
    let result = build_gradient(ctx, forward, fwd_block, block, &params, (wrt_inputs, fused_attention));
    let outputs = match result {
        Ok(outputs) => outputs,
        Err(e) => {
            unsafe { mlirRegionDestroy(region) };
            return Err(e);
        }
    };
    let func = ir::create_function(ctx, fwd_loc, &format!("{function}_grad"), region, &outputs, &[])
        .map_err(|e| (fwd_loc, format!("cannot create @{function}_grad: {e:?}")))?;
    unsafe { mlirBlockInsertOwnedOperationAfter(body, forward, func) };
    Ok(())
}

fn build_gradient(
    ctx: MlirContext,
    forward: MlirOperation,
    fwd_block: MlirBlock,
    block: MlirBlock,
    params: &[(String, TensorSpec)],
    (wrt_inputs, fused_attention): (bool, FusedAttention),
) -> Result<Vec<MlirValue>, Failure> {
    let fwd_loc = unsafe { mlirOperationGetLocation(forward) };
    let mut map: HashMap<usize, MlirValue> = HashMap::new();
    let nargs = unsafe { mlirBlockGetNumArguments(fwd_block) };
    for i in 0..nargs {
        map.insert(key(unsafe { mlirBlockGetArgument(fwd_block, i) }), unsafe { mlirBlockGetArgument(block, i) });
    }
    // Clone the forward, marking the values that depend on what is
    // differentiated (parameters, and inputs under `wrt-inputs`): only those
    // receive gradients.
    let mut active: std::collections::HashSet<usize> = std::collections::HashSet::new();
    if wrt_inputs {
        for i in 0..nargs {
            active.insert(key(unsafe { mlirBlockGetArgument(block, i) }));
        }
    }
    let mut cloned = Vec::new();
    let mut loss = None;
    let mut return_loc = fwd_loc;
    // A value of dynamic or unranked shape has no element count to
    // differentiate: its gradient was silently skipped ("the loss depends on
    // no parameter").
    let refuse_dynamic = |v: MlirValue, at: MlirLocation| -> Result<(), Failure> {
        if super::common::dynamic(v) {
            return Err((
                at,
                format!(
                    "{} has a dynamic shape: AICF differentiates static shapes (write the batch's size in the types; \
                     an ONNX model's with aicf import --batch N)",
                    ir::type_text(unsafe { mlirValueGetType(v) })
                ),
            ));
        }
        Ok(())
    };
    for i in 0..nargs {
        refuse_dynamic(unsafe { mlirBlockGetArgument(fwd_block, i) }, fwd_loc)?;
    }
    for op in ops_of(fwd_block) {
        for r in 0..unsafe { mlirOperationGetNumResults(op) } {
            refuse_dynamic(unsafe { mlirOperationGetResult(op, r) }, op_loc(op))?;
        }
        let n = unsafe { mlirOperationGetNumOperands(op) };
        let operands: Vec<MlirValue> = (0..n)
            .map(|i| map.get(&key(unsafe { mlirOperationGetOperand(op, i) })).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| (op_loc(op), "an operand is defined outside the function body".to_string()))?;
        if op_name(op) == "func.return" {
            if operands.len() != 1 {
                return Err((
                    op_loc(op),
                    format!("the function must return one scalar loss, it returns {}", operands.len()),
                ));
            }
            loss = Some(operands[0]);
            return_loc = op_loc(op);
            break;
        }
        if unsafe { mlirOperationGetNumRegions(op) } > 0 {
            return Err((op_loc(op), format!("cannot differentiate through '{}' (it has regions)", op_name(op))));
        }
        // A call's callee would have to be differentiated too: its
        // parameters' gradients would silently be zero.
        if op_name(op) == "func.call" {
            // (The inliner does not inline a recursive call.)
            let own = string_attr(forward, "sym_name").unwrap_or_default();
            if flat_symbol(op, "callee").as_deref() == Some(own.as_str()) {
                return Err((
                    op_loc(op),
                    format!("@{own} calls itself: AICF differentiates functions without recursion"),
                ));
            }
            return Err((
                op_loc(op),
                format!(
                    "cannot differentiate through 'func.call' (to {}): inline it first (aicf-opt --inline), or write \
                     @loss without calls (a call the inliner leaves is recursive, which AICF does not differentiate)",
                    ir::attr_text(op, "callee")
                ),
            ));
        }
        // An op of another dialect on the differentiable path has no rule:
        // a gradient through it (`tensor.extract` of an activation) was
        // dropped without a word, or the loss was said to depend on no
        // parameter. Its integer results (`tensor.dim`'s) carry none.
        let name = op_name(op);
        if !name.starts_with("hl.")
            && operands.iter().any(|v| active.contains(&key(*v)))
            && (0..unsafe { mlirOperationGetNumResults(op) })
                .any(|r| carries_float(unsafe { mlirValueGetType(mlirOperationGetResult(op, r)) }))
        {
            return Err((
                op_loc(op),
                format!("no gradient rule for '{name}' (AICF differentiates hl ops; write this step with hl ops)"),
            ));
        }
        let copy = unsafe { mlirOperationClone(op) };
        for (i, v) in operands.iter().enumerate() {
            unsafe { mlirOperationSetOperand(copy, i as isize, *v) };
        }
        unsafe { mlirBlockAppendOwnedOperation(block, copy) };
        // A rounding's result carries no gradient, as an integer's does
        // not: a loss reached through it alone is refused below.
        let piecewise_constant =
            matches!(op_name(op).as_str(), "hl.floor" | "hl.ceil" | "hl.round" | "hl.stop_gradient" | "hl.random_like");
        let is_active = op_name(op) == "hl.get_param"
            || (!piecewise_constant && operands.iter().any(|v| active.contains(&key(*v))));
        for r in 0..unsafe { mlirOperationGetNumResults(op) } {
            let result = unsafe { mlirOperationGetResult(copy, r) };
            map.insert(key(unsafe { mlirOperationGetResult(op, r) }), result);
            if is_active && spec(result).dtype.is_float() {
                active.insert(key(result));
            }
        }
        cloned.push(copy);
    }
    let loss = loss.ok_or_else(|| (fwd_loc, "the function has no func.return".to_string()))?;
    let loss_spec = spec(loss);
    if !loss_spec.dtype.is_float() || !loss_spec.shape.is_empty() {
        return Err((return_loc, format!("the loss must be a floating-point scalar, got {loss_spec}")));
    }
    // Nothing to differentiate: a step that trains nothing, silently.
    if !wrt_inputs && params.is_empty() {
        return Err((
            return_loc,
            "the module declares no parameter (hl.param): there is nothing to differentiate, and training would \
             change nothing (differentiate with respect to the inputs with wrt-inputs)"
                .into(),
        ));
    }
    // Every gradient would be zero: a step that trains nothing, silently.
    if !wrt_inputs && !active.contains(&key(loss)) {
        return Err((
            return_loc,
            "the loss depends on no parameter through differentiable ops (an integer value, such as hl.argmax's or a \
             cast to an integer, or a rounding's, carries no gradient): every gradient would be 0 and training would \
             change nothing"
                .into(),
        ));
    }

    // 3. Reverse sweep.
    let mut e = Emitter { ctx, block, loc: fwd_loc };
    let mut adjoint: HashMap<usize, MlirValue> = HashMap::new();
    adjoint.insert(key(loss), e.splat(1.0, &loss_spec)?);
    let mut param_grads: HashMap<String, MlirValue> = HashMap::new();
    backprop(&mut e, &cloned, &mut adjoint, &|v| active.contains(&key(v)), &mut param_grads, fused_attention)?;

    // 4. Outputs.
    e.loc = fwd_loc;
    let mut outputs = vec![loss];
    for (name, spec) in params {
        outputs.push(match param_grads.get(name) {
            Some(&g) => g,
            None => e.splat(0.0, spec)?,
        });
    }
    if wrt_inputs {
        for i in 0..nargs {
            let arg = unsafe { mlirBlockGetArgument(block, i) };
            let s = spec(arg);
            if s.dtype.is_float() {
                outputs.push(match adjoint.get(&key(arg)) {
                    Some(&g) => g,
                    None => e.splat(0.0, &s)?,
                });
            }
        }
    }
    Ok(outputs)
}

/// Walks `ops` in reverse, propagating adjoints from results to operands
/// through each op's rule; `is_active` says which values take gradients.
fn backprop(
    e: &mut Emitter,
    ops: &[MlirOperation],
    adjoint: &mut HashMap<usize, MlirValue>,
    is_active: &dyn Fn(MlirValue) -> bool,
    param_grads: &mut HashMap<String, MlirValue>,
    fused_attention: FusedAttention,
) -> Result<(), Failure> {
    let outer_loc = e.loc;
    for &op in ops.iter().rev() {
        let results = unsafe { mlirOperationGetNumResults(op) };
        if results != 1 {
            // An op of several results (`hl.softmax_cross_entropy`'s loss
            // and gradient, a backward op's) has no rule: its operands'
            // gradients came out as zeros, silently.
            let reached = (0..results)
                .map(|r| unsafe { mlirOperationGetResult(op, r) })
                .any(|y| adjoint.contains_key(&key(y)) && is_active(y));
            if reached {
                return Err((
                    op_loc(op),
                    format!("no gradient rule for '{}' (an op of {results} results) yet", op_name(op)),
                ));
            }
            continue;
        }
        let y = unsafe { mlirOperationGetResult(op, 0) };
        let Some(&g) = adjoint.get(&key(y)) else { continue };
        if !is_active(y) {
            continue;
        }
        e.loc = op_loc(op);
        let name = op_name(op);
        if name == "hl.get_param" {
            let p = flat_symbol(op, "name").unwrap_or_default();
            let total = match param_grads.get(&p) {
                Some(&prev) => e.binary("hl.add", prev, g)?,
                None => g,
            };
            param_grads.insert(p, total);
            continue;
        }
        let operands: Vec<MlirValue> = (0..unsafe { mlirOperationGetNumOperands(op) })
            .map(|i| unsafe { mlirOperationGetOperand(op, i) })
            .collect();
        let grads = vjp(e, op, &name, &operands, y, g, fused_attention)?;
        for (x, dx) in operands.iter().zip(grads) {
            let Some(dx) = dx else { continue };
            if !is_active(*x) {
                continue;
            }
            let dx = e.unbroadcast(dx, &spec(*x))?;
            let total = match adjoint.get(&key(*x)) {
                Some(&prev) => e.binary("hl.add", prev, dx)?,
                None => dx,
            };
            adjoint.insert(key(*x), total);
        }
    }
    e.loc = outer_loc;
    Ok(())
}

/// The gradient of each operand of `op` (result `y`, adjoint `g`), `None`
/// for operands that have none.
fn vjp(
    e: &mut Emitter,
    op: MlirOperation,
    name: &str,
    x: &[MlirValue],
    y: MlirValue,
    g: MlirValue,
    fused_attention: FusedAttention,
) -> Result<Vec<Option<MlirValue>>, Failure> {
    let one = |v| Ok(vec![Some(v)]);
    match name {
        "hl.constant" => Ok(vec![]),
        "hl.add" => Ok(vec![Some(g), Some(g)]),
        "hl.sub" => Ok(vec![Some(g), Some(e.unary("hl.neg", g)?)]),
        "hl.mul" => Ok(vec![Some(e.binary("hl.mul", g, x[1])?), Some(e.binary("hl.mul", g, x[0])?)]),
        "hl.div" => {
            // d/da = g / b; d/db = -g * y / b
            let da = e.binary("hl.div", g, x[1])?;
            let gy = e.binary("hl.mul", g, y)?;
            let db = e.unary("hl.neg", e.binary("hl.div", gy, x[1])?)?;
            Ok(vec![Some(da), Some(db)])
        }
        "hl.neg" => one(e.unary("hl.neg", g)?),
        "hl.exp" => one(e.binary("hl.mul", g, y)?),
        "hl.sin" => one(e.binary("hl.mul", g, e.unary("hl.cos", x[0])?)?),
        "hl.cos" => one(e.unary("hl.neg", e.binary("hl.mul", g, e.unary("hl.sin", x[0])?)?)?),
        // d/dx atan(x) = 1 / (1 + x^2)
        // (In f32 for 16-bit operands, as erf's: x^2 of an f16 past 256
        // is inf, and the gradient 0 where it is about 1/x^2.)
        "hl.atan" => {
            let x0 = e.widened(x[0])?;
            let one_plus = e.binary("hl.add", e.scalar(1.0, x0)?, e.binary("hl.mul", x0, x0)?)?;
            one(e.cast_like(e.binary("hl.div", e.widened(g)?, one_plus)?, g)?)
        }
        // Piecewise constant: no gradient (PyTorch's is 0).
        "hl.floor" | "hl.ceil" | "hl.round" | "hl.stop_gradient" => Ok(vec![None]),
        // Noise: its value does not depend on `like`'s.
        "hl.random_like" => Ok(vec![None]),
        "hl.log" => one(e.binary("hl.div", g, x[0])?),
        "hl.sqrt" => one(e.scale(e.binary("hl.div", g, y)?, 0.5)?),
        "hl.rsqrt" => {
            // dy/dx = -y^3 / 2
            let y3 = e.binary("hl.mul", e.binary("hl.mul", y, y)?, y)?;
            one(e.scale(e.binary("hl.mul", g, y3)?, -0.5)?)
        }
        "hl.tanh" => {
            let one_minus = e.binary("hl.sub", e.scalar(1.0, y)?, e.binary("hl.mul", y, y)?)?;
            one(e.binary("hl.mul", g, one_minus)?)
        }
        "hl.sigmoid" => {
            let d = e.binary("hl.mul", y, e.binary("hl.sub", e.scalar(1.0, y)?, y)?)?;
            one(e.binary("hl.mul", g, d)?)
        }
        "hl.relu" => {
            // The mask reads the result (y > 0 exactly where x > 0), so the
            // pre-activation need not be kept and the forward GEMM can fuse
            // the ReLU.
            let zero = e.scalar(0.0, y)?;
            let pos = e.op("hl.compare", &[y, zero], &[("predicate", "4 : i32".into())])?;
            one(e.op("hl.select", &[pos, g, zero], &[])?)
        }
        "hl.silu" => {
            // d/dx x s(x) = s (1 + x (1 - s))
            let s = e.unary("hl.sigmoid", x[0])?;
            let inner = e.binary("hl.mul", x[0], e.binary("hl.sub", e.scalar(1.0, s)?, s)?)?;
            let d = e.binary("hl.mul", s, e.binary("hl.add", e.scalar(1.0, s)?, inner)?)?;
            one(e.binary("hl.mul", g, d)?)
        }
        "hl.linear" => {
            let (xs, ws) = (spec(x[0]), spec(x[1]));
            let (out, inp) = (ws.shape[0], ws.shape[1]);
            let rows: usize = xs.shape[..xs.shape.len() - 1].iter().product();
            // dx = g W, as linear(g, W^T)
            let wt = e.op("hl.transpose", &[x[1]], &[("permutation", i64_array_text(&[1, 0]))])?;
            let dx = e.op("hl.linear", &[g, wt], &[])?;
            // dW = g2^T x2 over the flattened leading dims
            let g2 = e.reshape(g, &[rows, out])?;
            let x2 = e.reshape(x[0], &[rows, inp])?;
            let dw = e.op("hl.matmul", &[g2, x2], &[("transpose_lhs", "unit".into())])?;
            let mut grads = vec![Some(dx), Some(dw)];
            if x.len() > 2 {
                grads.push(Some(e.sum(g2, &[0], false)?));
            }
            Ok(grads)
        }
        "hl.matmul" => {
            let (ta, tb) = (has(op, "transpose_lhs"), has(op, "transpose_rhs"));
            let mm = |a, b, t1: bool, t2: bool| -> Result<MlirValue, Failure> {
                let mut attrs = Vec::new();
                if t1 {
                    attrs.push(("transpose_lhs", "unit".to_string()));
                }
                if t2 {
                    attrs.push(("transpose_rhs", "unit".to_string()));
                }
                e.op("hl.matmul", &[a, b], &attrs)
            };
            let (a, b) = (x[0], x[1]);
            let (da, db) = match (ta, tb) {
                (false, false) => (mm(g, b, false, true)?, mm(a, g, true, false)?),
                (true, false) => (mm(b, g, false, true)?, mm(a, g, false, false)?),
                (false, true) => (mm(g, b, false, false)?, mm(g, a, true, false)?),
                (true, true) => (mm(b, g, true, true)?, mm(g, a, true, true)?),
            };
            Ok(vec![Some(da), Some(db)])
        }
        "hl.reduce_sum" | "hl.reduce_mean" => {
            let xs = spec(x[0]);
            let axes = i64_array(op, "axes").unwrap_or_default();
            let kept: Vec<usize> =
                xs.shape.iter().enumerate().map(|(d, &n)| if axes.contains(&(d as i64)) { 1 } else { n }).collect();
            let count: usize = axes.iter().map(|&a| xs.shape[a as usize]).product();
            let g = if name == "hl.reduce_mean" { e.scale_exact(g, 1.0 / count as f64)? } else { g };
            one(e.broadcast(e.reshape(g, &kept)?, &xs.shape)?)
        }
        "hl.reshape" => one(e.reshape(g, &spec(x[0]).shape)?),
        "hl.transpose" => {
            let perm = i64_array(op, "permutation").unwrap_or_default();
            let mut inverse = vec![0usize; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p as usize] = i;
            }
            one(e.op("hl.transpose", &[g], &[("permutation", i64_array_text(&inverse))])?)
        }
        "hl.broadcast_to" => one(e.unbroadcast(g, &spec(x[0]))?),
        "hl.cast" if spec(x[0]).dtype.is_float() => one(e.typed("hl.cast", &[g], &spec(x[0]))?),
        "hl.cast" => Ok(vec![None]),
        "hl.softmax" | "hl.log_softmax" => {
            // softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), one kernel
            let mut attrs = vec![("axis", attr_text(op, "axis"))];
            if name == "hl.log_softmax" {
                attrs.push(("log", "unit".into()));
            }
            one(e.op("hl.softmax_backward", &[y, g], &attrs)?)
        }
        "hl.cross_entropy" => {
            let attrs: Vec<(&str, String)> =
                ["reduction", "ignore_index"].iter().filter(|k| has(op, k)).map(|&k| (k, attr_text(op, k))).collect();
            Ok(vec![Some(e.op("hl.cross_entropy_backward", &[x[0], x[1], g], &attrs)?), None])
        }
        "hl.pow" => {
            // d/da = g b a^(b-1); d/db = g y ln(a)
            let bm1 = e.binary("hl.sub", x[1], e.scalar(1.0, x[1])?)?;
            let da = e.binary("hl.mul", g, e.binary("hl.mul", x[1], e.binary("hl.pow", x[0], bm1)?)?)?;
            let db = e.binary("hl.mul", g, e.binary("hl.mul", y, e.unary("hl.log", x[0])?)?)?;
            // PyTorch's limits where the formulas read 0 * inf: d/da is 0
            // where b = 0 (a^0 is 1 for every a, 0 included), d/db is 0
            // where a = 0 and b >= 0 (0^b is 0 or 1 there).
            let zero = e.scalar(0.0, g)?;
            let (a0, b0) = (e.scalar(0.0, x[0])?, e.scalar(0.0, x[1])?);
            let b_zero = e.op("hl.compare", &[x[1], b0.clone()], &[("predicate", "0 : i32".into())])?;
            let da = e.op("hl.select", &[b_zero, zero.clone(), da], &[])?;
            let a_zero = e.op("hl.compare", &[x[0], a0], &[("predicate", "0 : i32".into())])?;
            let b_nonneg = e.op("hl.compare", &[x[1], b0], &[("predicate", "5 : i32".into())])?;
            let db_where_a_zero = e.op("hl.select", &[b_nonneg, zero, db.clone()], &[])?;
            let db = e.op("hl.select", &[a_zero, db_where_a_zero, db], &[])?;
            Ok(vec![Some(da), Some(db)])
        }
        "hl.max" | "hl.min" => {
            // The gradient goes to the chosen side; ties go to lhs.
            let predicate = if name == "hl.max" { "5 : i32" } else { "3 : i32" };
            let lhs = e.op("hl.compare", &[x[0], x[1]], &[("predicate", predicate.into())])?;
            let zero = e.scalar(0.0, g)?;
            Ok(vec![Some(e.op("hl.select", &[lhs, g, zero], &[])?), Some(e.op("hl.select", &[lhs, zero, g], &[])?)])
        }
        "hl.abs" => {
            // g sign(x), sign(0) = 0
            let zero = e.scalar(0.0, x[0])?;
            let pos = e.op("hl.compare", &[x[0], zero], &[("predicate", "4 : i32".into())])?;
            let neg = e.op("hl.compare", &[x[0], zero], &[("predicate", "2 : i32".into())])?;
            let ng = e.unary("hl.neg", g)?;
            let inner = e.op("hl.select", &[neg, ng, zero], &[])?;
            one(e.op("hl.select", &[pos, g, inner], &[])?)
        }
        "hl.select" => {
            let zero = e.scalar(0.0, g)?;
            Ok(vec![
                None,
                Some(e.op("hl.select", &[x[0], g, zero], &[])?),
                Some(e.op("hl.select", &[x[0], zero, g], &[])?),
            ])
        }
        "hl.reduce_max" => {
            // Split evenly among the positions equal to the maximum.
            let xs = spec(x[0]);
            let axes = i64_array(op, "axes").unwrap_or_default();
            let kept: Vec<usize> =
                xs.shape.iter().enumerate().map(|(d, &n)| if axes.contains(&(d as i64)) { 1 } else { n }).collect();
            let ymax = e.reshape(y, &kept)?;
            let hit = e.op("hl.compare", &[x[0], ymax], &[("predicate", "0 : i32".into())])?;
            let hit = e.typed("hl.cast", &[hit], &xs)?;
            let axes_u: Vec<usize> = axes.iter().map(|&a| a as usize).collect();
            let count = e.sum(hit, &axes_u, true)?;
            let share = e.binary("hl.div", e.reshape(g, &kept)?, count)?;
            one(e.binary("hl.mul", hit, share)?)
        }
        "hl.concat" => {
            let axis = int_attr(op, "axis").unwrap_or(0) as usize;
            let gs = spec(g);
            let mut start = 0;
            let mut grads = Vec::new();
            for v in x {
                let len = spec(*v).shape[axis];
                let mut lo = vec![0; gs.shape.len()];
                let mut hi = gs.shape.clone();
                lo[axis] = start;
                hi[axis] = start + len;
                let ones = vec![1; gs.shape.len()];
                let attrs = [
                    ("start", i64_array_text(&lo)),
                    ("limit", i64_array_text(&hi)),
                    ("strides", i64_array_text(&ones)),
                ];
                grads.push(Some(e.op("hl.slice", &[g], &attrs)?));
                start += len;
            }
            Ok(grads)
        }
        "hl.slice" => slice_vjp(e, op, x, g),
        // zero-padding (hl-pad-contractions): the window of g it wrote
        "hl.slice_backward" => {
            let attrs = [
                ("start", attr_text(op, "start")),
                ("limit", attr_text(op, "limit")),
                ("strides", attr_text(op, "strides")),
            ];
            one(e.op("hl.slice", &[g], &attrs)?)
        }
        "hl.conv2d" => {
            let window = ["stride", "padding", "dilation", "groups", "layout"];
            let attrs: Vec<(&str, String)> =
                window.iter().filter(|k| has(op, k)).map(|&k| (k, attr_text(op, k))).collect();
            let dx = e.append(&OpSpec {
                operands: &[g, x[1]],
                attributes: &attrs,
                results: Some(&[unsafe { mlirValueGetType(x[0]) }]),
                ..OpSpec::new("hl.conv2d_backward_input")
            })?;
            let dw = e.append(&OpSpec {
                operands: &[g, x[0]],
                attributes: &attrs,
                results: Some(&[unsafe { mlirValueGetType(x[1]) }]),
                ..OpSpec::new("hl.conv2d_backward_weight")
            })?;
            let mut grads =
                vec![Some(unsafe { mlirOperationGetResult(dx, 0) }), Some(unsafe { mlirOperationGetResult(dw, 0) })];
            if x.len() > 2 {
                // db: the sum over batch and space of each channel
                let channel = if int_attr(op, "layout").unwrap_or(0) == 1 { 3 } else { 1 };
                let axes: Vec<usize> = (0..4).filter(|&a| a != channel).collect();
                grads.push(Some(e.sum(g, &axes, false)?));
            }
            Ok(grads)
        }
        "hl.max_pool2d" | "hl.avg_pool2d" => {
            let window = ["kernel", "stride", "padding", "layout"];
            let attrs: Vec<(&str, String)> =
                window.iter().filter(|k| has(op, k)).map(|&k| (k, attr_text(op, k))).collect();
            one(e.op(&format!("{name}_backward"), &[g, x[0]], &attrs)?)
        }
        "hl.dropout" => {
            // The same mask and scale: dropout of g with the op's seed,
            // offset, p and stream.
            let attrs = [("p", attr_text(op, "p")), ("stream", attr_text(op, "stream"))];
            one(e.op("hl.dropout", &[g, x[1], x[2]], &attrs)?)
        }
        "hl.layer_norm" | "hl.rms_norm" => norm_vjp(e, op, name == "hl.layer_norm", x, g),
        "hl.attention" if fused_attention.takes(x) => attention_fused_vjp(e, op, x, y, g),
        "hl.attention" => attention_vjp(e, op, x, g),
        "hl.gather" => gather_vjp(e, op, x, g),
        // A scatter-add's (an imported ScatterElements'): each slice's
        // gradient is g's slice where it was added, a gather.
        "hl.gather_backward" => {
            let back = e.append(&OpSpec {
                operands: &[g, x[1]],
                attributes: &[("axis", attr_text(op, "axis"))],
                results: Some(&[unsafe { mlirValueGetType(x[0]) }]),
                ..OpSpec::new("hl.gather")
            })?;
            Ok(vec![Some(unsafe { mlirOperationGetResult(back, 0) }), None])
        }
        // erf and GELU: g times a formula with irrational constants,
        // computed in f32 for 16-bit operands and rounded once (`widened`).
        "hl.erf" => {
            // d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
            let x0 = e.widened(x[0])?;
            let e2 = e.unary("hl.exp", e.unary("hl.neg", e.binary("hl.mul", x0, x0)?)?)?;
            let d = e.scale(e2, 2.0 / std::f64::consts::PI.sqrt())?;
            one(e.cast_like(e.binary("hl.mul", e.widened(g)?, d)?, g)?)
        }
        "hl.gelu" if int_attr(op, "approximate").unwrap_or(0) != 1 => {
            // d/dx x Phi(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x/sqrt2))/2
            let x0 = e.widened(x[0])?;
            let erf = e.unary("hl.erf", e.scale(x0, std::f64::consts::FRAC_1_SQRT_2)?)?;
            let cdf = e.scale(e.binary("hl.add", e.scalar(1.0, erf)?, erf)?, 0.5)?;
            let x2 = e.binary("hl.mul", x0, x0)?;
            let pdf = e.scale(e.unary("hl.exp", e.scale(x2, -0.5)?)?, 1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
            let d = e.binary("hl.add", cdf, e.binary("hl.mul", x0, pdf)?)?;
            one(e.cast_like(e.binary("hl.mul", e.widened(g)?, d)?, g)?)
        }
        "hl.gelu" => {
            // tanh form: y = x/2 (1 + t), t = tanh(k (x + c x^3)):
            // dy/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2), as PyTorch
            // writes it. (In the negative tail 1 + t cancels in f32 and the
            // derivative below x = -5, about 1e-6, comes out 0; written with
            // s = sigmoid(2u) = (1 + t)/2 it keeps its precision there, but
            // the bf16 transformer block's GELU backward took 0.49 ms
            // against 0.42: not adopted.)
            let (k, c) = ((2.0 / std::f64::consts::PI).sqrt(), 0.044715);
            let x0 = e.widened(x[0])?;
            let x2 = e.binary("hl.mul", x0, x0)?;
            let inner = e.binary("hl.add", x0, e.scale(e.binary("hl.mul", x2, x0)?, c)?)?;
            let t = e.unary("hl.tanh", e.scale(inner, k)?)?;
            let half_one_plus_t = e.scale(e.binary("hl.add", e.scalar(1.0, t)?, t)?, 0.5)?;
            let sech2 = e.binary("hl.sub", e.scalar(1.0, t)?, e.binary("hl.mul", t, t)?)?;
            let poly = e.scale(e.binary("hl.add", e.scalar(1.0 / (3.0 * c), x2)?, x2)?, 3.0 * c * k)?;
            let second = e.binary("hl.mul", e.scale(x0, 0.5)?, e.binary("hl.mul", sech2, poly)?)?;
            let d = e.binary("hl.add", half_one_plus_t, second)?;
            one(e.cast_like(e.binary("hl.mul", e.widened(g)?, d)?, g)?)
        }
        "hl.mse_loss" => {
            let xs = spec(x[0]);
            let sum = int_attr(op, "reduction").unwrap_or(0) == 1;
            let factor = if sum { 2.0 } else { 2.0 / xs.num_elements() as f64 };
            let diff = e.binary("hl.sub", x[0], x[1])?;
            let d = e.binary("hl.mul", e.scale_exact(diff, factor)?, g)?;
            Ok(vec![Some(d), Some(e.unary("hl.neg", d)?)])
        }
        other => Err((e.loc, format!("no gradient rule for '{other}' yet"))),
    }
}

/// layer_norm / rms_norm: one `hl.norm_backward`, which recomputes the row
/// statistics from the input and gives dx, dw (with a weight) and db (with a
/// bias) together; its description has the formulas.
fn norm_vjp(
    e: &mut Emitter,
    op: MlirOperation,
    center: bool,
    x: &[MlirValue],
    g: MlirValue,
) -> Result<Vec<Option<MlirValue>>, Failure> {
    // Which operands are present: layer_norm has operand segments.
    let (has_w, has_b) = if center {
        let seg = i32_array(op, "operandSegmentSizes").unwrap_or_default();
        (seg.get(1).copied().unwrap_or(0) > 0, seg.get(2).copied().unwrap_or(0) > 0)
    } else {
        (x.len() > 1, false)
    };
    let xt = unsafe { mlirValueGetType(x[0]) };
    let mut operands = vec![g, x[0]];
    let mut types = vec![xt];
    if has_w {
        operands.push(x[1]);
        types.push(unsafe { mlirValueGetType(x[1]) });
    }
    if has_b {
        types.push(unsafe { mlirValueGetType(x[x.len() - 1]) });
    }
    let mut attrs = vec![
        ("dims", attr_text(op, "dims")),
        ("eps", attr_text(op, "eps")),
        ("resultSegmentSizes", format!("array<i32: 1, {}, {}>", has_w as i32, has_b as i32)),
    ];
    if !center {
        attrs.push(("rms", "unit".into()));
    }
    if has_b {
        attrs.push(("bias", "unit".into()));
    }
    let back = e.append(&OpSpec {
        operands: &operands,
        attributes: &attrs,
        results: Some(&types),
        ..OpSpec::new("hl.norm_backward")
    })?;
    Ok((0..types.len()).map(|i| Some(unsafe { mlirOperationGetResult(back, i as isize) })).collect())
}

/// slice: g goes back to the positions it was taken from, zeros elsewhere
/// (`hl.slice_backward`, one kernel).
fn slice_vjp(
    e: &mut Emitter,
    op: MlirOperation,
    x: &[MlirValue],
    g: MlirValue,
) -> Result<Vec<Option<MlirValue>>, Failure> {
    let attrs =
        [("start", attr_text(op, "start")), ("limit", attr_text(op, "limit")), ("strides", attr_text(op, "strides"))];
    let back = e.append(&OpSpec {
        operands: &[g],
        attributes: &attrs,
        results: Some(&[unsafe { mlirValueGetType(x[0]) }]),
        ..OpSpec::new("hl.slice_backward")
    })?;
    Ok(vec![Some(unsafe { mlirOperationGetResult(back, 0) })])
}

/// Scaled dot-product attention, recomputing the probabilities:
/// S = q k^T s (+ causal mask), P = softmax(S), O = P v;
/// dv = P^T dO, dP = dO v^T, dS = P (dP - sum(dP P)) (hl.softmax_backward),
/// dq = dS k s,
/// dk = dS^T q s. Masked positions have P = 0, hence dS = 0.
fn attention_vjp(
    e: &mut Emitter,
    op: MlirOperation,
    x: &[MlirValue],
    g: MlirValue,
) -> Result<Vec<Option<MlirValue>>, Failure> {
    let (q, k, v) = (x[0], x[1], x[2]);
    let qs = spec(q);
    let rank = qs.shape.len();
    let (l, d) = (qs.shape[rank - 2], qs.shape[rank - 1]);
    let s_len = spec(k).shape[rank - 2];
    let scale = float_attr(op, "scale").unwrap_or(1.0 / (d as f64).sqrt());
    let mm = |a: MlirValue, b: MlirValue, ta: bool, tb: bool| -> Result<MlirValue, Failure> {
        let mut attrs = Vec::new();
        if ta {
            attrs.push(("transpose_lhs", "unit".to_string()));
        }
        if tb {
            attrs.push(("transpose_rhs", "unit".to_string()));
        }
        e.op("hl.matmul", &[a, b], &attrs)
    };
    let mut scores = e.scale(mm(q, k, false, true)?, scale)?;
    if has(op, "causal") {
        // query i sees keys j <= i
        let rows = e.iota(l, rank, rank - 2)?;
        let cols = e.iota(s_len, rank, rank - 1)?;
        let visible = e.op("hl.compare", &[cols, rows], &[("predicate", "3 : i32".into())])?;
        let ninf = e.scalar(f64::NEG_INFINITY, scores)?;
        scores = e.op("hl.select", &[visible, scores, ninf], &[])?;
    }
    let p = e.op("hl.softmax", &[scores], &[("axis", format!("{} : i64", rank - 1))])?;
    let dv = mm(p, g, true, false)?;
    let dp = mm(g, v, false, true)?;
    let ds = e.op("hl.softmax_backward", &[p, dp], &[("axis", format!("{} : i64", rank - 1))])?;
    let dq = e.scale(mm(ds, k, false, false)?, scale)?;
    let dk = e.scale(mm(ds, q, true, false)?, scale)?;
    Ok(vec![Some(dq), Some(dk), Some(dv)])
}

/// Whether attention over q, k, v (`x`) has the GPU's tensor-core form
/// (codegen's `tensor_core_attention` rule): f16 or bf16 operands, head
/// sizes multiples of 16 up to 128. Others (f32 heads) keep the GEMM form
/// on the GPU too: the fused op has only its row kernels for them, a
/// thread per row, untimed on a GPU against the GEMMs.
fn tensor_core_heads(x: &[MlirValue]) -> bool {
    let specs: Vec<TensorSpec> = x[..3].iter().map(|&v| spec(v)).collect();
    let t = specs[0].dtype;
    matches!(t, crate::types::DType::BF16 | crate::types::DType::F16)
        && specs.iter().all(|s| s.dtype == t)
        && specs.iter().all(|s| s.shape.last().is_some_and(|&h| h > 0 && h % 16 == 0 && h <= 128))
}

/// Scaled dot-product attention in one op: `hl.attention_backward` from
/// the operands, the result y and g (the probabilities recomputed inside
/// it, never materialised).
fn attention_fused_vjp(
    e: &mut Emitter,
    op: MlirOperation,
    x: &[MlirValue],
    y: MlirValue,
    g: MlirValue,
) -> Result<Vec<Option<MlirValue>>, Failure> {
    let attrs: Vec<(&str, String)> =
        ["causal", "scale"].iter().filter(|k| has(op, k)).map(|&k| (k, attr_text(op, k))).collect();
    let back = e.append(&OpSpec {
        operands: &[x[0], x[1], x[2], y, g],
        attributes: &attrs,
        results: None,
        ..OpSpec::new("hl.attention_backward")
    })?;
    Ok((0..3).map(|i| Some(unsafe { mlirOperationGetResult(back, i) })).collect())
}

/// gather along `axis`: the input's gradient is a scatter-add of g into
/// zeros (`hl.gather_backward`, one kernel; repeated indices add up).
fn gather_vjp(
    e: &mut Emitter,
    op: MlirOperation,
    x: &[MlirValue],
    g: MlirValue,
) -> Result<Vec<Option<MlirValue>>, Failure> {
    let back = e.append(&OpSpec {
        operands: &[g, x[1]],
        attributes: &[("axis", attr_text(op, "axis"))],
        results: Some(&[unsafe { mlirValueGetType(x[0]) }]),
        ..OpSpec::new("hl.gather_backward")
    })?;
    Ok(vec![Some(unsafe { mlirOperationGetResult(back, 0) }), None])
}

/// Whether a value of type `t` holds floating-point data: a float, or a
/// shaped type of floats (what a gradient flows through).
fn carries_float(t: MlirType) -> bool {
    unsafe {
        let element = if mlirTypeIsAShaped(t) { mlirShapedTypeGetElementType(t) } else { t };
        mlirTypeIsAFloat(element)
    }
}
