//! `hl-fuse-optimizer`: the per-parameter update kernels of a train step
//! become one `hl.multi_tensor_apply` per distinct body.
//!
//! Algorithm, per function:
//! 1. Candidates are the `hl.fused_elementwise` ops whose results only the
//!    function's `return` uses (the updates: nothing inside the step waits
//!    for them, so moving them later is always legal).
//! 2. Candidates are grouped by the signature of their body: each scalar
//!    op's name, attributes, result types and operands (as block-argument
//!    or earlier-result positions). Equal signatures compute the same
//!    function of their inputs, whatever the tensors' shapes.
//! 3. Each group of two or more becomes one op at the place of its last
//!    member, with the members' inputs concatenated (group-major) and the
//!    first member's body.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, op_loc, op_name, operands, ops_of, users};
use melior::ir::{Location, OperationRef};
use mlir_sys::*;
use std::collections::HashMap;

pub(super) fn run(module: OperationRef<'_, '_>, _options: &PassOptions) -> PassResult {
    fuse_optimizer(module.to_raw()).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-fuse-optimizer: {m}"));
        PassFailed
    })
}

/// Fuses every function of `module`; returns the number of multi-tensor
/// ops made.
pub fn fuse_optimizer(module: MlirOperation) -> Result<usize, Failure> {
    let mut made = 0;
    for (_, block) in ir::functions(module) {
        let mut groups: Vec<(String, Vec<MlirOperation>)> = Vec::new();
        for op in ops_of(block) {
            if op_name(op) != "hl.fused_elementwise" || !only_returned(op) {
                continue;
            }
            let key = signature(op);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, members)) => members.push(op),
                None => groups.push((key, vec![op])),
            }
        }
        for (_, members) in groups.into_iter().filter(|(_, m)| m.len() >= 2) {
            build(block, &members)?;
            made += 1;
        }
    }
    Ok(made)
}

fn results(op: MlirOperation) -> Vec<MlirValue> {
    (0..unsafe { mlirOperationGetNumResults(op) }).map(|i| unsafe { mlirOperationGetResult(op, i) }).collect()
}

fn only_returned(op: MlirOperation) -> bool {
    results(op).into_iter().all(|r| users(r).iter().all(|&u| op_name(u) == "func.return"))
}

/// The body's computation, independent of the tensors' shapes.
fn signature(op: MlirOperation) -> String {
    let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
    let mut names: HashMap<usize, String> = HashMap::new();
    let mut out = String::new();
    for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
        let a = unsafe { mlirBlockGetArgument(block, i) };
        names.insert(ir::key(a), format!("a{i}"));
        out += &format!("arg {i}: {};", ir::type_text(unsafe { mlirValueGetType(a) }));
    }
    for (n, inner) in ops_of(block).into_iter().enumerate() {
        let args: Vec<String> =
            operands(inner).iter().map(|v| names.get(&ir::key(*v)).cloned().unwrap_or_else(|| "?".into())).collect();
        let mut attrs = Vec::new();
        for i in 0..unsafe { mlirOperationGetNumAttributes(inner) } {
            let named = unsafe { mlirOperationGetAttribute(inner, i) };
            let name = unsafe { melior::StringRef::from_raw(mlirIdentifierStr(named.name)) };
            attrs.push(format!("{}={}", name.as_str().unwrap_or("?"), ir::attr_text_raw(named.attribute)));
        }
        let mut types = Vec::new();
        for (r, v) in results(inner).into_iter().enumerate() {
            names.insert(ir::key(v), format!("o{n}.{r}"));
            types.push(ir::type_text(unsafe { mlirValueGetType(v) }));
        }
        out += &format!("{}({}) {{{}}} -> {};", op_name(inner), args.join(","), attrs.join(","), types.join(","));
    }
    out
}

fn build(block: MlirBlock, members: &[MlirOperation]) -> Result<(), Failure> {
    let (first, last) = (members[0], members[members.len() - 1]);
    let loc = op_loc(last);
    let ctx = unsafe { mlirOperationGetContext(last) };
    let inputs: Vec<MlirValue> = members.iter().flat_map(|&m| operands(m)).collect();
    let outputs: Vec<MlirValue> = members.iter().flat_map(|&m| results(m)).collect();
    let types: Vec<MlirType> = outputs.iter().map(|&r| unsafe { mlirValueGetType(r) }).collect();
    // The first member's body, moved out of a clone.
    let region = unsafe {
        let clone = mlirOperationClone(first);
        let region = mlirRegionCreate();
        mlirRegionTakeBody(region, mlirOperationGetRegion(clone, 0));
        mlirOperationDestroy(clone);
        region
    };
    let spec =
        OpSpec { operands: &inputs, results: Some(&types), regions: &[region], ..OpSpec::new("hl.multi_tensor_apply") };
    let fused = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("internal error: {e:?}")))?;
    unsafe {
        mlirBlockInsertOwnedOperationAfter(block, last, fused);
        for (i, &r) in outputs.iter().enumerate() {
            mlirValueReplaceAllUsesOfWith(r, mlirOperationGetResult(fused, i as isize));
        }
        for &m in members {
            mlirOperationDestroy(m);
        }
    }
    Ok(())
}
