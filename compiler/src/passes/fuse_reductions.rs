//! `hl-fuse-reductions`: row reductions that read the same rows become one
//! op (one kernel). Today: a cross-entropy and its backward over the same
//! logits, labels and attributes become `hl.softmax_cross_entropy`, which
//! forms each row's softmax once for the loss and the gradient.
//!
//! Algorithm, per function: for every `hl.cross_entropy_backward`, find an
//! `hl.cross_entropy` of the same operands and attributes. The fused op
//! goes right after the later of the forward and the producer of the
//! backward's upstream gradient (where all its operands are defined), so
//! it is fused only when every use of the forward loss comes after that
//! place. (fp16's loss scaling multiplies the loss by the scale the
//! backward reads, before the backward: placed at the backward, that pair
//! stayed apart, two passes over the logits.)
//!
//! Then the fused op absorbs what mixed precision and shape padding put
//! around it. Under autocast its logits are a cast of 16-bit logits to f32
//! and its gradient is cast back; with a padded head (`hl-pad-contractions`)
//! the 16-bit logits are also a slice of a wider row, and the gradient is
//! zero-padded back (`hl.slice_backward`). GPT-2's head spent four kernels
//! there, about 4 ms of a 34 ms step on an H200, each a pass over 8192
//! rows of 50,257 values:
//!
//! ```mlir
//! %s = hl.slice %yp start = [0, 0] limit = [R, N] strides = [1, 1] : tensor<RxNpxbf16>
//! %c = hl.cast %s : tensor<RxNxbf16> to tensor<RxNxf32>
//! %l, %d = hl.softmax_cross_entropy %c, %y, %g : ... -> tensor<f32>
//! %e = hl.cast %d : tensor<RxNxf32> to tensor<RxNxbf16>
//! %p = hl.slice_backward %e ... -> tensor<RxNpxbf16>
//! ```
//!
//! becomes one op that reads the 16-bit padded rows, computes in f32 as
//! before (each value widened exactly, the gradient rounded once: on the
//! CPU the same bits) and writes a zero gradient on the padding:
//!
//! ```mlir
//! %l, %p = hl.softmax_cross_entropy %yp, %y, %g classes = N : tensor<RxNpxbf16>, ... -> tensor<f32>
//! ```
//!
//! An evaluation's `@loss` has the cross-entropy without its backward; its
//! casts and slice fold the same way (`fold_lone_loss`), into an
//! `hl.softmax_cross_entropy` whose gradient nothing reads, which
//! `convert-hl-to-ll` lowers to the loss alone.
//!
//! Each step is taken only where the value it removes has no other use: a
//! slice whose rows are also read elsewhere keeps the slice (the op then
//! reads the sliced 16-bit logits).

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, attr_text, has, op_loc, op_name, ops_of};
use crate::types::DType;
use melior::ir::{Location, OperationRef};
use mlir_sys::*;

pub(super) fn run(module: OperationRef<'_, '_>, _options: &PassOptions) -> PassResult {
    fuse_reductions(module.to_raw()).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-fuse-reductions: {m}"));
        PassFailed
    })
}

/// Fuses every function of `module`; returns the number of fused pairs.
pub fn fuse_reductions(module: MlirOperation) -> Result<usize, Failure> {
    let fused = fuse_pairs(module)?;
    for (_, block) in ir::functions(module) {
        // Listed first: a fold erases the casts and slices before each.
        let alone: Vec<MlirOperation> =
            ops_of(block).into_iter().filter(|&op| op_name(op) == "hl.cross_entropy").collect();
        for op in alone {
            fold_lone_loss(block, op)?;
        }
    }
    for (_, block) in ir::functions(module) {
        // Listed first: absorbing erases ops after each one (the casts and
        // slices), whose handles a walk of the block's list would read.
        let losses: Vec<MlirOperation> =
            ops_of(block).into_iter().filter(|&op| op_name(op) == "hl.softmax_cross_entropy").collect();
        for op in losses {
            absorb_casts(block, op)?;
        }
    }
    Ok(fused)
}

/// Whether `op` is `hl.slice` or `hl.slice_backward` of the first
/// `limit` entries of the last dimension of `full` (every other dimension
/// whole, unit strides).
fn last_dim_prefix(op: MlirOperation, full: &[usize], limit: usize) -> bool {
    let mut want = full.to_vec();
    let Some(last) = want.last_mut() else { return false };
    *last = limit;
    let wide = |v: Vec<i64>| v.into_iter().map(|x| x as usize).collect::<Vec<_>>();
    ir::i64_array(op, "start").is_some_and(|s| s.iter().all(|&x| x == 0))
        && ir::i64_array(op, "strides").is_some_and(|s| s.iter().all(|&x| x == 1))
        && ir::i64_array(op, "limit").map(wide).is_some_and(|l| l == want)
}

/// `hl.cast` from a 16-bit float to f32 (`widen`) or back, keeping the
/// shape: the 16-bit side's type.
fn cast_16bit(op: MlirOperation, widen: bool) -> Option<MlirType> {
    if op_name(op) != "hl.cast" {
        return None;
    }
    let (from, to) = unsafe { (mlirOperationGetOperand(op, 0), mlirOperationGetResult(op, 0)) };
    let (a, b) = (ir::spec(from), ir::spec(to));
    let (narrow, wide, t) = if widen { (a, b, from) } else { (b, a, to) };
    (matches!(narrow.dtype, DType::BF16 | DType::F16) && wide.dtype == DType::F32 && narrow.shape == wide.shape)
        .then(|| unsafe { mlirValueGetType(t) })
}

/// Folds the casts (and a padded head's slice) around the fused
/// cross-entropy `fused` into it (see the module's doc); leaves it alone
/// where the pattern is not whole.
fn absorb_casts(block: MlirBlock, fused: MlirOperation) -> Result<(), Failure> {
    if has(fused, "classes") {
        return Ok(());
    }
    let result = |op: MlirOperation, i| unsafe { mlirOperationGetResult(op, i) };
    let (logits, grad) = (unsafe { mlirOperationGetOperand(fused, 0) }, result(fused, 1));
    // The forward cast to f32, read only here; the gradient's cast back,
    // its only use.
    let Some(up) = ir::producer(logits).filter(|&p| cast_16bit(p, true).is_some()) else { return Ok(()) };
    if ir::single_user(logits).is_none() {
        return Ok(());
    }
    let same = |a: Option<MlirType>, b: Option<MlirType>| match (a, b) {
        (Some(a), Some(b)) => unsafe { mlirTypeEqual(a, b) },
        _ => false,
    };
    let Some(down) = ir::single_user(grad).filter(|&d| same(cast_16bit(d, false), cast_16bit(up, true))) else {
        return Ok(());
    };
    let narrow = unsafe { mlirOperationGetOperand(up, 0) };
    let narrow_spec = ir::spec(narrow);
    let classes = narrow_spec.shape.last().copied().unwrap_or(1);
    let type_eq = |a: MlirValue, b: MlirValue| unsafe { mlirTypeEqual(mlirValueGetType(a), mlirValueGetType(b)) };
    // Between the slice and the cast, a reshape of the leading dims (an
    // importer's 3-D matmul runs flattened to 2-D and is reshaped back),
    // read only by the cast, and its inverse on the gradient.
    let reshaped = ir::producer(narrow).filter(|&r| op_name(r) == "hl.reshape").and_then(|fwd| {
        let flat = unsafe { mlirOperationGetOperand(fwd, 0) };
        let bwd = ir::single_user(result(down, 0))?;
        (ir::single_user(narrow).is_some()
            && ir::spec(flat).shape.last() == Some(&classes)
            && op_name(bwd) == "hl.reshape"
            && type_eq(result(bwd, 0), flat))
        .then_some((fwd, bwd, flat))
    });
    let (sliced, sliced_grad) = match reshaped {
        Some((_, bwd, flat)) => (flat, result(bwd, 0)),
        None => (narrow, result(down, 0)),
    };
    // A padded head: the 16-bit logits a prefix of wider rows, read only
    // by the cast (or the reshape), and the gradient padded back the same
    // way.
    let padded = ir::producer(sliced).filter(|&s| op_name(s) == "hl.slice").and_then(|slice| {
        let wide = unsafe { mlirOperationGetOperand(slice, 0) };
        let full = ir::spec(wide).shape;
        let pad = ir::single_user(sliced_grad)?;
        let same = |op| last_dim_prefix(op, &full, classes);
        (ir::single_user(sliced).is_some()
            && op_name(pad) == "hl.slice_backward"
            && same(slice)
            && same(pad)
            && type_eq(result(pad, 0), wide))
        .then_some((slice, wide, pad))
    });
    // Without padding, the loss reads the 16-bit logits as they reach it.
    let reshaped = reshaped.filter(|_| padded.is_some());
    let loc = op_loc(fused);
    let ctx = unsafe { mlirOperationGetContext(fused) };
    // `hl.reshape` of `v` to `shape` (a view), inserted before `at` or
    // after it.
    let reshape = |v: MlirValue, shape: &[usize], at: MlirOperation, after: bool| -> Result<MlirValue, Failure> {
        let text = crate::types::TensorSpec::new(shape, ir::spec(v).dtype).mlir_type();
        let ty = ir::parse_type(ctx, &text).map_err(|e| (loc, format!("internal error: {e:?}")))?;
        let spec = OpSpec { operands: &[v], results: Some(&[ty]), ..OpSpec::new("hl.reshape") };
        let op = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("internal error: {e:?}")))?;
        unsafe {
            if after {
                mlirBlockInsertOwnedOperationAfter(block, at, op);
            } else {
                mlirBlockInsertOwnedOperationBefore(block, at, op);
            }
        }
        Ok(result(op, 0))
    };
    let (input, replaced) = match padded {
        // The padded rows in the loss's leading shape.
        Some((_, wide, pad)) if reshaped.is_some() => {
            // The loss's leading dims, the padded row length (logits have
            // a class axis: the verifier's rule).
            let mut shape = narrow_spec.shape.clone();
            shape.pop();
            shape.push(ir::spec(wide).shape.last().copied().unwrap_or(classes));
            (reshape(wide, &shape, fused, false)?, result(pad, 0))
        }
        Some((_, wide, pad)) => (wide, result(pad, 0)),
        None => (narrow, result(down, 0)),
    };
    let operands = unsafe { [input, mlirOperationGetOperand(fused, 1), mlirOperationGetOperand(fused, 2)] };
    let types = unsafe { [mlirValueGetType(result(fused, 0)), mlirValueGetType(input)] };
    let op = fused_loss(fused, &operands, &types, padded.is_some().then_some(classes))?;
    unsafe { mlirBlockInsertOwnedOperationBefore(block, fused, op) };
    // The gradient back in the padded rows' shape.
    let grad = match padded {
        Some((_, wide, _)) if reshaped.is_some() => reshape(result(op, 1), &ir::spec(wide).shape, op, true)?,
        _ => result(op, 1),
    };
    unsafe {
        mlirValueReplaceAllUsesOfWith(result(fused, 0), result(op, 0));
        mlirValueReplaceAllUsesOfWith(replaced, grad);
        // Users before producers, each now unused.
        if let Some((_, _, pad)) = padded {
            mlirOperationDestroy(pad);
        }
        if let Some((_, bwd, _)) = reshaped {
            mlirOperationDestroy(bwd);
        }
        mlirOperationDestroy(down);
        mlirOperationDestroy(fused);
        mlirOperationDestroy(up);
        if let Some((fwd, _, _)) = reshaped {
            mlirOperationDestroy(fwd);
        }
        if let Some((slice, _, _)) = padded {
            mlirOperationDestroy(slice);
        }
    }
    Ok(())
}

/// A cross-entropy with no backward (an evaluation's `@loss`) of 16-bit
/// logits cast to f32, perhaps a padded head's slice: it becomes an
/// `hl.softmax_cross_entropy` that reads the 16-bit (padded) rows itself,
/// as the train step's fused loss does, with an upstream gradient of one
/// and its gradient unused (`convert-hl-to-ll` then computes the loss
/// alone). The slice, the reshape and the cast, each a pass over the
/// logits, are gone.
fn fold_lone_loss(block: MlirBlock, ce: MlirOperation) -> Result<(), Failure> {
    let result = |op: MlirOperation, i| unsafe { mlirOperationGetResult(op, i) };
    let operand = |op: MlirOperation, i| unsafe { mlirOperationGetOperand(op, i) };
    let logits = operand(ce, 0);
    let Some(up) = ir::producer(logits).filter(|&p| cast_16bit(p, true).is_some()) else { return Ok(()) };
    if ir::single_user(logits).is_none() {
        return Ok(());
    }
    let narrow = operand(up, 0);
    let narrow_spec = ir::spec(narrow);
    let classes = narrow_spec.shape.last().copied().unwrap_or(1);
    // A reshape of the leading dims between the slice and the cast, read
    // only by the cast.
    let reshape = ir::producer(narrow).filter(|&r| {
        op_name(r) == "hl.reshape"
            && ir::single_user(narrow).is_some()
            && ir::spec(operand(r, 0)).shape.last() == Some(&classes)
    });
    let sliced = reshape.map_or(narrow, |r| operand(r, 0));
    let slice = ir::producer(sliced).filter(|&s| {
        op_name(s) == "hl.slice"
            && ir::single_user(sliced).is_some()
            && last_dim_prefix(s, &ir::spec(operand(s, 0)).shape, classes)
    });
    let loc = op_loc(ce);
    let ctx = unsafe { mlirOperationGetContext(ce) };
    let insert = |spec: OpSpec<'_>| -> Result<MlirValue, Failure> {
        let op = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("internal error: {e:?}")))?;
        unsafe { mlirBlockInsertOwnedOperationBefore(block, ce, op) };
        Ok(result(op, 0))
    };
    let parse = |text: &str| ir::parse_type(ctx, text).map_err(|e| (loc, format!("internal error: {e:?}")));
    // The padded rows in the loss's leading shape, or (no padding) the
    // 16-bit logits as they reach the cast.
    let input = match slice {
        Some(s) => {
            let wide = operand(s, 0);
            let row = ir::spec(wide).shape.last().copied().unwrap_or(classes);
            if reshape.is_some() {
                let mut shape = narrow_spec.shape.clone();
                shape.pop();
                shape.push(row);
                let ty = parse(&crate::types::TensorSpec::new(shape, narrow_spec.dtype).mlir_type())?;
                insert(OpSpec { operands: &[wide], results: Some(&[ty]), ..OpSpec::new("hl.reshape") })?
            } else {
                wide
            }
        }
        None => narrow,
    };
    let f32_scalar = parse("tensor<f32>")?;
    let one = insert(OpSpec {
        attributes: &[("value", "dense<1.0> : tensor<f32>".into())],
        results: Some(&[f32_scalar]),
        ..OpSpec::new("hl.constant")
    })?;
    let loss = result(ce, 0);
    let types = unsafe { [mlirValueGetType(loss), mlirValueGetType(input)] };
    let op = fused_loss(ce, &[input, operand(ce, 1), one], &types, slice.map(|_| classes))?;
    unsafe {
        mlirBlockInsertOwnedOperationBefore(block, ce, op);
        mlirValueReplaceAllUsesOfWith(loss, result(op, 0));
        // Users before producers, each now unused.
        mlirOperationDestroy(ce);
        mlirOperationDestroy(up);
        if slice.is_some() {
            if let Some(r) = reshape {
                mlirOperationDestroy(r);
            }
        }
        if let Some(s) = slice {
            mlirOperationDestroy(s);
        }
    }
    Ok(())
}

/// A new `hl.softmax_cross_entropy` of `operands` and result `types`, with
/// `like`'s reduction and ignore_index (and `classes`), at `like`'s
/// location; not yet in a block.
fn fused_loss(
    like: MlirOperation,
    operands: &[MlirValue; 3],
    types: &[MlirType; 2],
    classes: Option<usize>,
) -> Result<MlirOperation, Failure> {
    let mut attrs: Vec<(&str, String)> =
        ["reduction", "ignore_index"].iter().filter(|k| has(like, k)).map(|&k| (k, attr_text(like, k))).collect();
    attrs.extend(classes.map(|c| ("classes", format!("{c} : i64"))));
    let loc = op_loc(like);
    let ctx = unsafe { mlirOperationGetContext(like) };
    let spec = OpSpec { operands, attributes: &attrs, results: Some(types), ..OpSpec::new("hl.softmax_cross_entropy") };
    ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("internal error: {e:?}")))
}

/// Fuses each cross-entropy with its backward; returns the number fused.
fn fuse_pairs(module: MlirOperation) -> Result<usize, Failure> {
    let mut fused = 0;
    for (_, block) in ir::functions(module) {
        let ops = ops_of(block);
        let position = |op: MlirOperation| ops.iter().position(|o| o.ptr == op.ptr).unwrap_or(usize::MAX);
        // Ops of `ops` erased by an earlier fusion: their handles are stale.
        let mut erased: std::collections::HashSet<usize> = std::collections::HashSet::new();
        for (bi, &backward) in ops.iter().enumerate() {
            if erased.contains(&(backward.ptr as usize)) || op_name(backward) != "hl.cross_entropy_backward" {
                continue;
            }
            let operand = |op: MlirOperation, i| unsafe { mlirOperationGetOperand(op, i) };
            let same = |fwd: MlirOperation| {
                op_name(fwd) == "hl.cross_entropy"
                    && operand(fwd, 0).ptr == operand(backward, 0).ptr
                    && operand(fwd, 1).ptr == operand(backward, 1).ptr
                    && ["reduction", "ignore_index"].iter().all(|k| attr_text(fwd, k) == attr_text(backward, k))
            };
            let Some(&forward) = ops[..bi].iter().find(|&&f| !erased.contains(&(f.ptr as usize)) && same(f)) else {
                continue;
            };
            // The fused op goes right after the later of the forward and
            // the producer of the backward's upstream gradient (its last
            // operand to be defined), and every use of the loss must come
            // after that place. Under fp16's loss scaling the loss is
            // scaled before the backward, by the scale the backward reads.
            let g = operand(backward, 2);
            let at = match ir::producer(g) {
                Some(p) => position(p),
                None => 0,
            }
            .max(position(forward));
            if at >= bi {
                continue;
            }
            let loss = unsafe { mlirOperationGetResult(forward, 0) };
            if ir::users(loss).iter().any(|&u| position(u) <= at) {
                continue;
            }
            let operands = [operand(backward, 0), operand(backward, 1), operand(backward, 2)];
            let types = unsafe { [mlirValueGetType(loss), mlirValueGetType(mlirOperationGetResult(backward, 0))] };
            let op = fused_loss(backward, &operands, &types, None)?;
            unsafe {
                mlirBlockInsertOwnedOperationAfter(block, ops[at], op);
                mlirValueReplaceAllUsesOfWith(loss, mlirOperationGetResult(op, 0));
                mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(backward, 0), mlirOperationGetResult(op, 1));
                mlirOperationDestroy(backward);
                mlirOperationDestroy(forward);
            }
            erased.extend([backward.ptr as usize, forward.ptr as usize]);
            fused += 1;
        }
    }
    Ok(fused)
}
