//! `hl-fuse-reductions`: row reductions that read the same rows become one
//! op (one kernel). Today: a cross-entropy and its backward over the same
//! logits, labels and attributes become `hl.softmax_cross_entropy`, which
//! forms each row's softmax once for the loss and the gradient.
//!
//! Algorithm, per function: for every `hl.cross_entropy_backward`, find an
//! `hl.cross_entropy` of the same operands and attributes. The fused op
//! takes the backward's place (its upstream gradient is defined there), so
//! it is fused only when every use of the forward loss comes after that
//! place.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, attr_text, has, op_loc, op_name, ops_of};
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
            // Every use of the loss must come after the backward's place.
            let loss = unsafe { mlirOperationGetResult(forward, 0) };
            let mut use_ = unsafe { mlirValueGetFirstUse(loss) };
            let mut movable = true;
            while !use_.ptr.is_null() {
                if position(unsafe { mlirOpOperandGetOwner(use_) }) < bi {
                    movable = false;
                }
                use_ = unsafe { mlirOpOperandGetNextUse(use_) };
            }
            if !movable {
                continue;
            }
            let operands = [operand(backward, 0), operand(backward, 1), operand(backward, 2)];
            let attrs: Vec<(&str, String)> = ["reduction", "ignore_index"]
                .iter()
                .filter(|k| has(backward, k))
                .map(|&k| (k, attr_text(backward, k)))
                .collect();
            let types = unsafe { [mlirValueGetType(loss), mlirValueGetType(mlirOperationGetResult(backward, 0))] };
            let loc = op_loc(backward);
            let ctx = unsafe { mlirOperationGetContext(backward) };
            let spec = OpSpec {
                operands: &operands,
                attributes: &attrs,
                results: Some(&types),
                ..OpSpec::new("hl.softmax_cross_entropy")
            };
            let op = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("internal error: {e:?}")))?;
            unsafe {
                mlirBlockInsertOwnedOperationBefore(block, backward, op);
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
