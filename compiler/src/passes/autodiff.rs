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

use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::{
    ffi,
    ir::{self, OpSpec},
    nn::{DType, TensorSpec, spec_of_type},
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
    differentiate(module.to_raw(), &function, wrt_inputs).map_err(|(location, message)| {
        emit_error(unsafe { Location::from_raw(location) }, &format!("hl-autodiff: {message}"));
        PassFailed
    })
}

type Failure = (MlirLocation, String);

/// Adds `@<function>_grad` to `module` (see the module docs).
pub fn differentiate(module: MlirOperation, function: &str, wrt_inputs: bool) -> Result<(), Failure> {
    let ctx = unsafe { mlirOperationGetContext(module) };
    let module_loc = unsafe { mlirOperationGetLocation(module) };
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) };
    let mut forward = None;
    let mut params: Vec<(String, TensorSpec)> = Vec::new();
    for op in ops_of(body) {
        match op_name(op).as_str() {
            "hl.param" => {
                let name = string_attr(op, "sym_name");
                let ty = unsafe { mlirTypeAttrGetValue(mlirOperationGetAttributeByName(op, ffi::string_ref("type"))) };
                params.push((name, spec_of_type(ty).map_err(|e| (module_loc, e.to_string()))?));
            }
            "func.func" if string_attr(op, "sym_name") == function => forward = Some(op),
            "func.func" if string_attr(op, "sym_name") == format!("{function}_grad") => {
                return Err((unsafe { mlirOperationGetLocation(op) }, format!("@{function}_grad already exists")));
            }
            _ => {}
        }
    }
    let forward = forward.ok_or_else(|| (module_loc, format!("no function @{function} to differentiate")))?;
    let fwd_block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(forward, 0)) };
    let fwd_loc = unsafe { mlirOperationGetLocation(forward) };

    // 2. The gradient function's block, with the forward's arguments.
    let nargs = unsafe { mlirBlockGetNumArguments(fwd_block) };
    let arg_types: Vec<MlirType> =
        (0..nargs).map(|i| unsafe { mlirValueGetType(mlirBlockGetArgument(fwd_block, i)) }).collect();
    let locs = vec![fwd_loc; arg_types.len()];
    let block = unsafe { mlirBlockCreate(arg_types.len() as isize, arg_types.as_ptr(), locs.as_ptr()) };
    let region = unsafe { mlirRegionCreate() };
    unsafe { mlirRegionAppendOwnedBlock(region, block) };
    let result = build_gradient(ctx, forward, fwd_block, block, &params, wrt_inputs);
    let outputs = match result {
        Ok(outputs) => outputs,
        Err(e) => {
            unsafe { mlirRegionDestroy(region) };
            return Err(e);
        }
    };
    let e = Emitter { ctx, block, loc: fwd_loc };
    e.append(&OpSpec { operands: &outputs, results: Some(&[]), verify: false, ..OpSpec::new("func.return") })
        .inspect_err(|_| unsafe { mlirRegionDestroy(region) })?;
    let arg_text: Vec<String> = arg_types.iter().map(|&t| type_text(t)).collect();
    let out_text: Vec<String> = outputs.iter().map(|&v| type_text(unsafe { mlirValueGetType(v) })).collect();
    let attrs = [
        ("sym_name", format!("\"{function}_grad\"")),
        ("function_type", format!("({}) -> ({})", arg_text.join(", "), out_text.join(", "))),
    ];
    let spec = OpSpec { attributes: &attrs, results: Some(&[]), regions: &[region], verify: false, ..OpSpec::new("func.func") };
    let func = ir::create_op(ctx, fwd_loc, &spec).map_err(|e| {
        unsafe { mlirRegionDestroy(region) };
        (fwd_loc, format!("cannot create @{function}_grad: {e:?}"))
    })?;
    unsafe { mlirBlockInsertOwnedOperationAfter(body, forward, func) };
    Ok(())
}

fn build_gradient(
    ctx: MlirContext,
    forward: MlirOperation,
    fwd_block: MlirBlock,
    block: MlirBlock,
    params: &[(String, TensorSpec)],
    wrt_inputs: bool,
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
    for op in ops_of(fwd_block) {
        let n = unsafe { mlirOperationGetNumOperands(op) };
        let operands: Vec<MlirValue> = (0..n)
            .map(|i| map.get(&key(unsafe { mlirOperationGetOperand(op, i) })).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| (op_loc(op), "an operand is defined outside the function body".to_string()))?;
        if op_name(op) == "func.return" {
            if operands.len() != 1 {
                return Err((op_loc(op), format!("the function must return one scalar loss, it returns {}", operands.len())));
            }
            loss = Some(operands[0]);
            return_loc = op_loc(op);
            break;
        }
        if unsafe { mlirOperationGetNumRegions(op) } > 0 {
            return Err((op_loc(op), format!("cannot differentiate through '{}' (it has regions)", op_name(op))));
        }
        let copy = unsafe { mlirOperationClone(op) };
        for (i, v) in operands.iter().enumerate() {
            unsafe { mlirOperationSetOperand(copy, i as isize, *v) };
        }
        unsafe { mlirBlockAppendOwnedOperation(block, copy) };
        let is_active = op_name(op) == "hl.get_param" || operands.iter().any(|v| active.contains(&key(*v)));
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

    // 3. Reverse sweep.
    let mut e = Emitter { ctx, block, loc: fwd_loc };
    let mut adjoint: HashMap<usize, MlirValue> = HashMap::new();
    adjoint.insert(key(loss), e.splat(1.0, &loss_spec)?);
    let mut param_grads: HashMap<String, MlirValue> = HashMap::new();
    for &op in cloned.iter().rev() {
        let n = unsafe { mlirOperationGetNumResults(op) };
        if n != 1 {
            continue;
        }
        let y = unsafe { mlirOperationGetResult(op, 0) };
        let Some(&g) = adjoint.get(&key(y)) else { continue };
        if !active.contains(&key(y)) {
            continue;
        }
        e.loc = op_loc(op);
        let name = op_name(op);
        if name == "hl.get_param" {
            let p = flat_symbol(op, "name");
            let total = match param_grads.get(&p) {
                Some(&prev) => e.binary("hl.add", prev, g)?,
                None => g,
            };
            param_grads.insert(p, total);
            continue;
        }
        let operands: Vec<MlirValue> =
            (0..unsafe { mlirOperationGetNumOperands(op) }).map(|i| unsafe { mlirOperationGetOperand(op, i) }).collect();
        let grads = vjp(&mut e, op, &name, &operands, y, g)?;
        for (x, dx) in operands.iter().zip(grads) {
            let Some(dx) = dx else { continue };
            if !active.contains(&key(*x)) {
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

/// Emits `hl` ops at the end of a block, with the location of the op being
/// differentiated.
struct Emitter {
    ctx: MlirContext,
    block: MlirBlock,
    loc: MlirLocation,
}

impl Emitter {
    fn append(&self, spec: &OpSpec<'_>) -> Result<MlirOperation, Failure> {
        let op = ir::create_op(self.ctx, self.loc, spec)
            .map_err(|e| (self.loc, format!("internal error building '{}' for a gradient: {e:?}", spec.name)))?;
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
        Ok(op)
    }
    fn op(&self, name: &str, operands: &[MlirValue], attrs: &[(&str, String)]) -> Result<MlirValue, Failure> {
        let op = self.append(&OpSpec { operands, attributes: attrs, ..OpSpec::new(name) })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    fn typed(&self, name: &str, operands: &[MlirValue], result: &TensorSpec) -> Result<MlirValue, Failure> {
        let ty = ir::parse_type(self.ctx, &result.mlir_type()).map_err(|e| (self.loc, format!("{e:?}")))?;
        let op = self.append(&OpSpec { operands, results: Some(&[ty]), ..OpSpec::new(name) })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    fn binary(&self, name: &str, a: MlirValue, b: MlirValue) -> Result<MlirValue, Failure> {
        self.op(name, &[a, b], &[])
    }
    fn unary(&self, name: &str, a: MlirValue) -> Result<MlirValue, Failure> {
        self.op(name, &[a], &[])
    }
    /// A splat constant of `spec`.
    fn splat(&self, value: f64, spec: &TensorSpec) -> Result<MlirValue, Failure> {
        let literal = if spec.dtype.is_float() {
            crate::nn::float_literal(value, spec.dtype)
        } else {
            format!("{}", value as i64)
        };
        let attr = format!("dense<{literal}> : {}", spec.mlir_type());
        let ty = ir::parse_type(self.ctx, &spec.mlir_type()).map_err(|e| (self.loc, format!("{e:?}")))?;
        let op = self.append(&OpSpec {
            attributes: &[("value", attr)],
            results: Some(&[ty]),
            ..OpSpec::new("hl.constant")
        })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    /// A rank-0 constant of `like`'s element type.
    fn scalar(&self, value: f64, like: MlirValue) -> Result<MlirValue, Failure> {
        self.splat(value, &TensorSpec::new([], spec(like).dtype))
    }
    fn scale(&self, x: MlirValue, factor: f64) -> Result<MlirValue, Failure> {
        let c = self.scalar(factor, x)?;
        self.binary("hl.mul", x, c)
    }
    fn reshape(&self, x: MlirValue, shape: &[usize]) -> Result<MlirValue, Failure> {
        let s = spec(x);
        if s.shape == shape {
            return Ok(x);
        }
        self.typed("hl.reshape", &[x], &TensorSpec::new(shape, s.dtype))
    }
    fn broadcast(&self, x: MlirValue, shape: &[usize]) -> Result<MlirValue, Failure> {
        let s = spec(x);
        if s.shape == shape {
            return Ok(x);
        }
        self.typed("hl.broadcast_to", &[x], &TensorSpec::new(shape, s.dtype))
    }
    fn sum(&self, x: MlirValue, axes: &[usize], keepdim: bool) -> Result<MlirValue, Failure> {
        let mut attrs = vec![("axes", array(axes))];
        if keepdim {
            attrs.push(("keepdim", "unit".into()));
        }
        self.op("hl.reduce_sum", &[x], &attrs)
    }
    /// Sums a gradient over the dimensions broadcasting stretched, back to
    /// `target`'s shape.
    fn unbroadcast(&self, g: MlirValue, target: &TensorSpec) -> Result<MlirValue, Failure> {
        let gs = spec(g);
        if gs.shape == target.shape {
            return Ok(g);
        }
        let lead = gs.shape.len() - target.shape.len();
        let axes: Vec<usize> = (0..gs.shape.len())
            .filter(|&i| i < lead || (target.shape[i - lead] == 1 && gs.shape[i] != 1))
            .collect();
        let summed = if axes.is_empty() { g } else { self.sum(g, &axes, true)? };
        self.reshape(summed, &target.shape)
    }
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
            let zero = e.scalar(0.0, y)?;
            let pos = e.op("hl.compare", &[x[0], zero], &[("predicate", "4 : i32".into())])?;
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
            let wt = e.op("hl.transpose", &[x[1]], &[("permutation", array(&[1, 0]))])?;
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
            let axes = i64_array(op, "axes");
            let kept: Vec<usize> =
                xs.shape.iter().enumerate().map(|(d, &n)| if axes.contains(&(d as i64)) { 1 } else { n }).collect();
            let mut d = e.broadcast(e.reshape(g, &kept)?, &xs.shape)?;
            if name == "hl.reduce_mean" {
                let count: usize = axes.iter().map(|&a| xs.shape[a as usize]).product();
                d = e.scale(d, 1.0 / count as f64)?;
            }
            one(d)
        }
        "hl.reshape" => one(e.reshape(g, &spec(x[0]).shape)?),
        "hl.transpose" => {
            let perm = i64_array(op, "permutation");
            let mut inverse = vec![0usize; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p as usize] = i;
            }
            one(e.op("hl.transpose", &[g], &[("permutation", array(&inverse))])?)
        }
        "hl.broadcast_to" => one(e.unbroadcast(g, &spec(x[0]))?),
        "hl.cast" if spec(x[0]).dtype.is_float() => one(e.typed("hl.cast", &[g], &spec(x[0]))?),
        "hl.cast" => Ok(vec![None]),
        "hl.softmax" | "hl.log_softmax" => {
            let axis = int_attr(op, "axis") as usize;
            let d = if name == "hl.softmax" {
                // y (g - sum(g y))
                let gy = e.binary("hl.mul", g, y)?;
                let s = e.sum(gy, &[axis], true)?;
                e.binary("hl.mul", y, e.binary("hl.sub", g, s)?)?
            } else {
                // g - exp(y) sum(g)
                let s = e.sum(g, &[axis], true)?;
                e.binary("hl.sub", g, e.binary("hl.mul", e.unary("hl.exp", y)?, s)?)?
            };
            one(d)
        }
        "hl.cross_entropy" => cross_entropy_vjp(e, op, x, g),
        "hl.mse_loss" => {
            let xs = spec(x[0]);
            let sum = int_attr_or(op, "reduction", 0) == 1;
            let factor = if sum { 2.0 } else { 2.0 / xs.num_elements() as f64 };
            let diff = e.binary("hl.sub", x[0], x[1])?;
            let d = e.binary("hl.mul", e.scale(diff, factor)?, g)?;
            Ok(vec![Some(d), Some(e.unary("hl.neg", d)?)])
        }
        other => Err((e.loc, format!("no gradient rule for '{other}' yet"))),
    }
}

/// d logits = (softmax(logits) - onehot(labels)) * mask * g / count.
fn cross_entropy_vjp(e: &mut Emitter, op: MlirOperation, x: &[MlirValue], g: MlirValue) -> Result<Vec<Option<MlirValue>>, Failure> {
    let ls = spec(x[0]);
    let labels = spec(x[1]);
    let rank = ls.shape.len();
    let classes = ls.shape[rank - 1];
    let p = e.op("hl.softmax", &[x[0]], &[("axis", format!("{} : i64", rank - 1))])?;
    let mut with_class = labels.shape.clone();
    with_class.push(1);
    let l = e.reshape(x[1], &with_class)?;
    let iota_attr = format!(
        "dense<[{}]> : {}",
        (0..classes).map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
        TensorSpec::new([classes], labels.dtype).mlir_type()
    );
    let iota_ty = TensorSpec::new([classes], labels.dtype);
    let ty = ir::parse_type(e.ctx, &iota_ty.mlir_type()).map_err(|err| (e.loc, format!("{err:?}")))?;
    let iota = e.append(&OpSpec { attributes: &[("value", iota_attr)], results: Some(&[ty]), ..OpSpec::new("hl.constant") })?;
    let iota = unsafe { mlirOperationGetResult(iota, 0) };
    let hot = e.op("hl.compare", &[l, iota], &[("predicate", "0 : i32".into())])?;
    let hot = e.typed("hl.cast", &[hot], &ls)?;
    let mut d = e.binary("hl.sub", p, hot)?;
    let sum = int_attr_or(op, "reduction", 0) == 1;
    let ignore = optional_int_attr(op, "ignore_index");
    let mut count = None;
    if let Some(ignore) = ignore {
        let ig = e.splat(ignore as f64, &TensorSpec::new([], labels.dtype))?;
        let keep = e.op("hl.compare", &[l, ig], &[("predicate", "1 : i32".into())])?;
        let mut keep_shape = with_class.clone();
        keep_shape.truncate(rank);
        let keep = e.typed("hl.cast", &[keep], &TensorSpec::new(keep_shape, ls.dtype))?;
        d = e.binary("hl.mul", d, keep)?;
        if !sum {
            let all: Vec<usize> = (0..rank).collect();
            count = Some(e.sum(keep, &all, false)?);
        }
    }
    d = e.binary("hl.mul", d, g)?;
    if !sum {
        d = match count {
            Some(c) => e.binary("hl.div", d, c)?,
            None => e.scale(d, 1.0 / labels.num_elements().max(1) as f64)?,
        };
    }
    Ok(vec![Some(d), None])
}

fn key(v: MlirValue) -> usize {
    v.ptr as usize
}

fn spec(v: MlirValue) -> TensorSpec {
    spec_of_type(unsafe { mlirValueGetType(v) }).unwrap_or(TensorSpec::new([], DType::I1))
}

fn ops_of(block: MlirBlock) -> Vec<MlirOperation> {
    let mut out = Vec::new();
    let mut op = unsafe { mlirBlockGetFirstOperation(block) };
    while !op.ptr.is_null() {
        out.push(op);
        op = unsafe { mlirOperationGetNextInBlock(op) };
    }
    out
}

fn op_name(op: MlirOperation) -> String {
    unsafe { ffi::to_string(mlirIdentifierStr(mlirOperationGetName(op))) }
}

fn op_loc(op: MlirOperation) -> MlirLocation {
    unsafe { mlirOperationGetLocation(op) }
}

fn attr(op: MlirOperation, key: &str) -> MlirAttribute {
    unsafe { mlirOperationGetAttributeByName(op, ffi::string_ref(key)) }
}

fn has(op: MlirOperation, key: &str) -> bool {
    !attr(op, key).ptr.is_null()
}

fn string_attr(op: MlirOperation, key: &str) -> String {
    let a = attr(op, key);
    if a.ptr.is_null() || !unsafe { mlirAttributeIsAString(a) } {
        return String::new();
    }
    unsafe { ffi::to_string(mlirStringAttrGetValue(a)) }
}

fn flat_symbol(op: MlirOperation, key: &str) -> String {
    let a = attr(op, key);
    if a.ptr.is_null() {
        return String::new();
    }
    unsafe { ffi::to_string(mlirFlatSymbolRefAttrGetValue(a)) }
}

fn optional_int_attr(op: MlirOperation, key: &str) -> Option<i64> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsAInteger(a) }).then(|| unsafe { mlirIntegerAttrGetValueInt(a) })
}

fn int_attr_or(op: MlirOperation, key: &str, default: i64) -> i64 {
    optional_int_attr(op, key).unwrap_or(default)
}

fn int_attr(op: MlirOperation, key: &str) -> i64 {
    int_attr_or(op, key, 0)
}

fn i64_array(op: MlirOperation, key: &str) -> Vec<i64> {
    let a = attr(op, key);
    if a.ptr.is_null() || !unsafe { mlirAttributeIsADenseI64Array(a) } {
        return Vec::new();
    }
    (0..unsafe { mlirDenseArrayGetNumElements(a) }).map(|i| unsafe { mlirDenseI64ArrayGetElement(a, i) }).collect()
}

fn array(values: &[usize]) -> String {
    let items: Vec<String> = values.iter().map(usize::to_string).collect();
    format!("array<i64: {}>", items.join(", "))
}

fn type_text(t: MlirType) -> String {
    unsafe { melior::ir::Type::from_raw(t) }.to_string()
}
