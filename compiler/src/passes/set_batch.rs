//! `hl-set-batch`: the same model at another batch size.
//!
//! 1. Find the model's batch: `from`, or the leading dimension of the first
//!    argument of `@forward` (else of the first function with arguments).
//! 2. In every function, give each argument whose leading dimension is the
//!    batch the new size.
//! 3. Walk each body in order and let every op infer its result types again
//!    (`aicfInferResultTypes`); an op that cannot is an error at that op.
//! 4. Rewrite each function's type from its arguments and returned values,
//!    and verify the module, so that an op that does not infer its types but
//!    no longer fits (a call, a fixed reshape) is reported where it is.
//!
//! A differentiated module is refused (before the pass runs:
//! [`super::common::differentiated`]): its backward's and optimizer's
//! constants follow the batch it was differentiated at.

use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ffi;
use crate::ir::{self, op_name, ops_of};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashSet;

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = |m: String| {
        emit_error(module.location(), &format!("hl-set-batch: {m}"));
        PassFailed
    };
    let size = options.get_i64("size").map_err(report)?;
    let from = options.get_i64("from").map_err(report)?;
    // (0 is the option's default: none given.)
    if size == 0 {
        return Err(report("no size: give the new batch size, size=N (a positive integer)".into()));
    }
    if size < 0 {
        return Err(report(format!("size={size}: give the new batch size, a positive integer")));
    }
    // 0 (the default) detects the batch; a negative one is no batch.
    if from < 0 {
        return Err(report(format!("from={from}: give the batch to replace, a positive integer (or 0 to detect it)")));
    }
    let module = module.to_raw();
    let functions = ir::functions(module);
    let leading = |block: MlirBlock| -> Option<i64> {
        let n = unsafe { mlirBlockGetNumArguments(block) };
        (n > 0).then(|| leading_dim(unsafe { mlirValueGetType(mlirBlockGetArgument(block, 0)) })).flatten()
    };
    let from = if from > 0 {
        from
    } else {
        let forward = functions.iter().find(|(f, _)| ir::string_attr(*f, "sym_name").as_deref() == Some("forward"));
        let detected = match forward {
            Some((_, block)) => leading(*block),
            None => functions.iter().find_map(|(_, block)| leading(*block)),
        };
        detected.ok_or_else(|| {
            report("no function argument has a leading dimension to take as the batch; give from=N".into())
        })?
    };
    if from == size {
        return Ok(());
    }
    for &(func, _) in &functions {
        if let Err((loc, m)) = super::common::retypable("hl-set-batch", func, true) {
            emit_error(unsafe { Location::from_raw(loc) }, &m);
            return Err(PassFailed);
        }
    }
    // A given batch that no argument has would change nothing, silently.
    let any = functions.iter().any(|&(_, block)| {
        (0..unsafe { mlirBlockGetNumArguments(block) })
            .any(|i| leading_dim(unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) }) == Some(from))
    });
    if !any {
        return Err(report(format!("from={from}: no function argument has a leading dimension of {from}")));
    }
    // Every value's type before the pass (a slice's operand's: which of its
    // axes held the old batch).
    let mut original = std::collections::HashMap::new();
    for &(_, block) in &functions {
        record_types(block, &mut original);
    }
    for &(func, block) in &functions {
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            let arg = unsafe { mlirBlockGetArgument(block, i) };
            let ty = unsafe { mlirValueGetType(arg) };
            if leading_dim(ty) == Some(from) {
                unsafe { mlirValueSetType(arg, with_leading_dim(ty, size)) };
            }
        }
        let mut changed = HashSet::new();
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            let arg = unsafe { mlirBlockGetArgument(block, i) };
            if leading_dim(unsafe { mlirValueGetType(arg) }) == Some(size) {
                changed.insert(ir::key(arg));
            }
        }
        // An op that states its result type instead of inferring it
        // (`hl.reshape`, `hl.cast`) and reads a changed value gets the new
        // batch in each result whose leading dimension is the old one; the
        // verifier judges the rest.
        let mut fixed = |op: MlirOperation, results: &[MlirValue], before: &[MlirType]| {
            // A reshape that only adds or drops axes of 1 (`[B, H]` to
            // `[1, 1, B, H]`, as an imported RNN stacks its steps) takes
            // its operand's dimensions, in order, around those axes.
            let operand = ir::operands(op).first().copied();
            if op_name(op) == "hl.reshape"
                && let ([r], [ty], Some(x)) = (results, before, operand)
                && let Some(&was) = original.get(&ir::key(x))
                && let Some(new) = batch_axis_kept(*ty, was, unsafe { mlirValueGetType(x) }, from, size)
            {
                unsafe { mlirValueSetType(*r, new) };
                return Ok(());
            }
            // Else a result whose leading dimension is the old batch takes
            // the new one, where the reshape's operand holds the batch alone
            // in its leading axis (or is not known): one that holds it in
            // another axis, or merged with others, would take the batch for
            // an axis of the same size (`[T B, E]` to `[T, B, E]` with T
            // equal to the batch), and is left to the verifier.
            let leading_batch = match operand.and_then(|x| original.get(&ir::key(x)).map(|&w| (x, w))) {
                Some((x, was)) if op_name(op) == "hl.reshape" => {
                    let (before, now) = (dims_of(was), dims_of(unsafe { mlirValueGetType(x) }));
                    let differ: Vec<usize> =
                        (0..before.len().min(now.len())).filter(|&d| before[d] != now[d]).collect();
                    differ.is_empty() || (differ == [0] && before[0] == from)
                }
                _ => true,
            };
            for (r, ty) in results.iter().zip(before) {
                if leading_batch && leading_dim(*ty) == Some(from) {
                    unsafe { mlirValueSetType(*r, with_leading_dim(*ty, size)) };
                }
            }
            // A stated type that cannot take the new batch (a reshape that
            // folds it into another dimension) is the error, at the op, in
            // its verifier's words: the first later op that could not infer
            // its types was named instead (a cross-entropy two ops on).
            // (An hl op with results: a function's return is checked with
            // the function's type, once that is retyped.)
            if !results.is_empty() && op_name(op).starts_with("hl.") && !unsafe { mlirOperationVerify(op) } {
                return Err(PassFailed);
            }
            Ok(())
        };
        // A broadcast that states its result's shape (a constant spread to
        // `[batch, ...]`, as imported models build for LeakyRelu, Where or
        // Expand), or a splat constant of that shape (ConstantOfShape of a
        // Shape, folded), does not read the batch. Where an op that mixes
        // such a value, of the old batch, with one of the new batch cannot
        // infer its types so (an elementwise op; a concatenation or a product
        // that accepts both is left as it is), the value takes the new batch
        // too, before the op infers its types; only where the op is its first
        // user (an earlier one has typed its result by the old batch).
        let mut prepare = |op: MlirOperation, changed: &mut HashSet<usize>| {
            let operands = ir::operands(op);
            // A slice that takes the whole batch (`hl-pad-contractions`'
            // slice of a padded product, or `x[:, 1:]`) states its window:
            // it takes the whole new batch. In any axis where its operand
            // held the old batch whole (an imported RNN's `[T, B, H]`, a
            // step sliced from it).
            if op_name(op) == "hl.slice"
                && let Some(&x) = operands.first().filter(|v| changed.contains(&ir::key(**v)))
            {
                let window = ["start", "limit", "strides"].map(|k| ir::i64_array(op, k).unwrap_or_default());
                let was = original.get(&ir::key(x)).copied().map(dims_of).unwrap_or_default();
                let now = dims_of(unsafe { mlirValueGetType(x) });
                let whole = |d: usize| {
                    (window[0][d], window[1][d], window[2][d]) == (0, from, 1)
                        && was.get(d) == Some(&from)
                        && now.get(d) == Some(&size)
                };
                // (Axis 0 where it changed, whatever it held: a padded
                // product's rows of the batch. Not where it did not: a
                // time-major `[T, B, 2 H]` with T equal to the batch.)
                let first_changed = was.is_empty() || was.first() != now.first();
                let axes: Vec<usize> = (0..window[0].len().min(window[1].len()).min(window[2].len()))
                    .filter(|&d| {
                        whole(d)
                            || (d == 0 && first_changed && (window[0][0], window[1][0], window[2][0]) == (0, from, 1))
                    })
                    .collect();
                if window.iter().all(|w| !w.is_empty()) && !axes.is_empty() {
                    let mut limit = window[1].clone();
                    for d in axes {
                        limit[d] = size;
                    }
                    unsafe {
                        let ctx = mlirOperationGetContext(op);
                        let attr = mlirDenseI64ArrayGet(ctx, limit.len() as isize, limit.as_ptr());
                        mlirOperationSetAttributeByName(op, ffi::string_ref("limit"), attr);
                    }
                }
            }
            let mixes = from != 1
                && operands.iter().any(|v| {
                    changed.contains(&ir::key(*v)) && leading_dim(unsafe { mlirValueGetType(*v) }) == Some(size)
                });
            if !mixes {
                return;
            }
            // (At a new batch of 1 an elementwise op infers its types by
            // broadcasting the old batch's value over the new one's row:
            // retyped all the same, where its result took the old batch and
            // its operands are of one rank; a concatenation is left.)
            let inferred = infers_quietly(op);
            let rank = |v: &MlirValue| {
                let t = unsafe { mlirValueGetType(*v) };
                unsafe { mlirTypeIsARankedTensor(t) }.then(|| unsafe { mlirShapedTypeGetRank(t) })
            };
            let over_one = size == 1
                && inferred == 1
                && unsafe { mlirOperationGetNumResults(op) } == 1
                && leading_dim(unsafe { mlirValueGetType(mlirOperationGetResult(op, 0)) }) == Some(from)
                && op_name(op) != "hl.concat"
                && operands.iter().all(|v| rank(v).is_some() && rank(v) == rank(&operands[0]));
            if inferred >= 0 && !over_one {
                return;
            }
            for v in operands {
                let ty = unsafe { mlirValueGetType(v) };
                if changed.contains(&ir::key(v)) || leading_dim(ty) != Some(from) {
                    continue;
                }
                if !unsafe { mlirValueIsAOpResult(v) } {
                    continue;
                }
                let block_of = |o: MlirOperation| unsafe { mlirOperationGetBlock(o) }.ptr;
                let later = ir::users(v).into_iter().all(|u| {
                    let same = unsafe { mlirOperationEqual(u, op) };
                    let after = block_of(u) == block_of(op) && !unsafe { mlirOperationIsBeforeInBlock(u, op) };
                    same || after
                });
                if !later {
                    continue;
                }
                let owner = unsafe { mlirOpResultGetOwner(v) };
                // The broadcast's operand: of lower rank, or a leading 1.
                let spread = ir::operands(owner)
                    .first()
                    .map(|x| unsafe { mlirValueGetType(*x) })
                    .filter(|t| unsafe { mlirTypeIsARankedTensor(*t) })
                    .is_some_and(|t| unsafe {
                        mlirShapedTypeGetRank(t) < mlirShapedTypeGetRank(ty) || leading_dim(t) == Some(1)
                    });
                let new = with_leading_dim(ty, size);
                // Further back: a splat constant of the old batch that
                // reaches this op through ops reading nothing else of the
                // batch (an RNN's zero initial state times its recurrent
                // weight), each value read once, takes the new batch, and
                // those ops infer their types again (the op named was the
                // first to mix them, and the constant was not said).
                if op_name(owner) != "hl.broadcast_to" && op_name(owner) != "hl.constant" {
                    retarget_chain(v, from, size, changed, op);
                    continue;
                }
                if op_name(owner) == "hl.broadcast_to" && spread {
                    unsafe { mlirValueSetType(v, new) };
                    changed.insert(ir::key(v));
                } else if op_name(owner) == "hl.constant" {
                    let value = ir::attr(owner, "value");
                    let splat = !value.ptr.is_null()
                        && unsafe { mlirAttributeIsADenseElements(value) && mlirDenseElementsAttrIsSplat(value) };
                    if splat {
                        unsafe {
                            let element = mlirDenseElementsAttrGetSplatValue(value);
                            let attr = mlirDenseElementsAttrSplatGet(new, element);
                            mlirOperationSetAttributeByName(owner, ffi::string_ref("value"), attr);
                            mlirValueSetType(v, new);
                        }
                        changed.insert(ir::key(v));
                    }
                }
            }
        };
        reinfer(
            block,
            &mut changed,
            &mut fixed,
            &mut prepare,
            &format!("hl-set-batch: '{{op}}' cannot take batch size {size}"),
        )?;
        retype_function(func, block);
    }
    // A batch so large that a tensor passes the 1 TiB a tensor may hold is
    // named here (the verifier said only "more than 2^63 elements").
    if let Some((loc, m)) = super::common::oversized(module) {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-set-batch: size={size}: {m}"));
        return Err(PassFailed);
    }
    // What did not infer its types (a call, a fixed shape) must still fit.
    if !unsafe { mlirOperationVerify(module) } {
        return Err(PassFailed);
    }
    Ok(())
}

/// Infers again the result types of every op of `block` (nested regions
/// first), in order. `changed` holds the values whose type changed. An op
/// that does not infer its result types and reads a changed value is handed
/// to `fixed` (with its results and their types before); an op that cannot
/// infer them is an error at it: `refused` with `{op}` for its name.
/// `prepare` sees each op first and may retype what its operands come from.
pub(super) fn reinfer(
    block: MlirBlock,
    changed: &mut HashSet<usize>,
    fixed: &mut dyn FnMut(MlirOperation, &[MlirValue], &[MlirType]) -> PassResult,
    prepare: &mut dyn FnMut(MlirOperation, &mut HashSet<usize>),
    refused: &str,
) -> PassResult {
    for op in ops_of(block) {
        for r in 0..unsafe { mlirOperationGetNumRegions(op) } {
            let mut inner = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)) };
            while !inner.ptr.is_null() {
                reinfer(inner, changed, fixed, prepare, refused)?;
                inner = unsafe { mlirBlockGetNextInRegion(inner) };
            }
        }
        let results: Vec<MlirValue> =
            (0..unsafe { mlirOperationGetNumResults(op) }).map(|i| unsafe { mlirOperationGetResult(op, i) }).collect();
        let before: Vec<MlirType> = results.iter().map(|r| unsafe { mlirValueGetType(*r) }).collect();
        prepare(op, changed);
        match unsafe { ffi::aicfInferResultTypes(op) } {
            1 => {}
            0 if ir::operands(op).iter().any(|v| changed.contains(&ir::key(*v))) => fixed(op, &results, &before)?,
            0 => {}
            _ => {
                let loc = unsafe { Location::from_raw(ir::op_loc(op)) };
                emit_error(loc, &refused.replace("{op}", &op_name(op)));
                return Err(PassFailed);
            }
        }
        for (r, ty) in results.iter().zip(&before) {
            if !unsafe { mlirTypeEqual(mlirValueGetType(*r), *ty) } {
                changed.insert(ir::key(*r));
            }
        }
    }
    Ok(())
}

/// The ops from a splat constant (or a spread of a value without the
/// batch) of leading dimension `from` to `v`, in program order, where each
/// reads exactly one value of the old batch (the one before it) and that
/// value has no other user before `at` (the op that mixes `v` with the new
/// batch): `None` where `v` does not come so from a splat constant (within
/// 16 ops).
fn chain_to_splat(v: MlirValue, from: i64, changed: &HashSet<usize>, at: MlirOperation) -> Option<Vec<MlirOperation>> {
    let mut path = Vec::new();
    let mut cur = v;
    for _ in 0..16 {
        if !unsafe { mlirValueIsAOpResult(cur) } {
            return None;
        }
        let owner = unsafe { mlirOpResultGetOwner(cur) };
        if unsafe { mlirOperationGetNumResults(owner) } != 1 {
            return None;
        }
        path.push(owner);
        // A spread of a value without the batch (`zeros` of an imported
        // RNN's initial state) is as a splat constant.
        if op_name(owner) == "hl.broadcast_to" {
            let spread = ir::operands(owner).first().map(|x| unsafe { mlirValueGetType(*x) }).is_some_and(|t| unsafe {
                mlirTypeIsARankedTensor(t)
                    && (mlirShapedTypeGetRank(t) < mlirShapedTypeGetRank(mlirValueGetType(cur))
                        || leading_dim(t) == Some(1))
            });
            path.reverse();
            return (spread && leading_dim(unsafe { mlirValueGetType(cur) }) == Some(from)).then_some(path);
        }
        if op_name(owner) == "hl.constant" {
            let value = ir::attr(owner, "value");
            let splat = !value.ptr.is_null()
                && unsafe { mlirAttributeIsADenseElements(value) && mlirDenseElementsAttrIsSplat(value) };
            path.reverse();
            return splat.then_some(path);
        }
        // (A parameter or state never carries the batch: a recurrent weight
        // as wide as the batch is not the chain.)
        let weight = |o: &MlirValue| {
            ir::producer(*o).is_some_and(|p| matches!(op_name(p).as_str(), "hl.get_param" | "hl.get_state"))
        };
        let batch: Vec<MlirValue> = ir::operands(owner)
            .into_iter()
            .filter(|o| {
                !weight(o)
                    && (changed.contains(&ir::key(*o)) || leading_dim(unsafe { mlirValueGetType(*o) }) == Some(from))
            })
            .collect();
        let [next] = batch.as_slice() else { return None };
        // Its other users come after `at`, and infer their types from it
        // once retyped (an RNN's zero state read by the cell's update too).
        let later = |u: MlirOperation| unsafe {
            mlirOperationEqual(u, owner)
                || (mlirOperationGetBlock(u).ptr == mlirOperationGetBlock(at).ptr
                    && !mlirOperationEqual(u, at)
                    && mlirOperationIsBeforeInBlock(at, u))
        };
        if changed.contains(&ir::key(*next)) || !ir::users(*next).into_iter().all(later) {
            return None;
        }
        cur = *next;
    }
    None
}

/// Gives the splat constant (or spread) that `v` comes from
/// ([`chain_to_splat`]) the leading dimension `size`, and the ops after it their types again;
/// leaves all as it was where one of them does not infer them.
fn retarget_chain(v: MlirValue, from: i64, size: i64, changed: &mut HashSet<usize>, at: MlirOperation) {
    let Some(path) = chain_to_splat(v, from, changed, at) else { return };
    let result = |op: MlirOperation| unsafe { mlirOperationGetResult(op, 0) };
    let old: Vec<MlirType> = path.iter().map(|&o| unsafe { mlirValueGetType(result(o)) }).collect();
    let constant = path[0];
    let splat = op_name(constant) == "hl.constant";
    let value = ir::attr(constant, "value");
    let new = with_leading_dim(old[0], size);
    unsafe {
        if splat {
            mlirOperationSetAttributeByName(
                constant,
                ffi::string_ref("value"),
                mlirDenseElementsAttrSplatGet(new, mlirDenseElementsAttrGetSplatValue(value)),
            );
        }
        mlirValueSetType(result(constant), new);
    }
    // A slice on the way that took the whole old batch (a gate's columns
    // of a product) takes the whole new one.
    let mut windows = Vec::new();
    let inferred = path[1..].iter().all(|&o| {
        if op_name(o) == "hl.slice"
            && let (Some(start), Some(mut limit), Some(strides)) =
                (ir::i64_array(o, "start"), ir::i64_array(o, "limit"), ir::i64_array(o, "strides"))
            && (start.first(), limit.first(), strides.first()) == (Some(&0), Some(&from), Some(&1))
        {
            windows.push((o, ir::attr(o, "limit")));
            limit[0] = size;
            unsafe {
                let attr = mlirDenseI64ArrayGet(mlirOperationGetContext(o), limit.len() as isize, limit.as_ptr());
                mlirOperationSetAttributeByName(o, ffi::string_ref("limit"), attr);
            }
        }
        infers_quietly(o) == 1 && leading_dim(unsafe { mlirValueGetType(result(o)) }) == Some(size)
    });
    if !inferred {
        unsafe {
            for (o, limit) in windows {
                mlirOperationSetAttributeByName(o, ffi::string_ref("limit"), limit);
            }
            if splat {
                mlirOperationSetAttributeByName(constant, ffi::string_ref("value"), value);
            }
            for (&o, &ty) in path.iter().zip(&old) {
                mlirValueSetType(result(o), ty);
            }
        }
        return;
    }
    for &o in &path {
        changed.insert(ir::key(result(o)));
    }
}

/// Sets `func`'s type from its entry block's arguments and the operands of
/// its `func.return`.
pub(crate) fn retype_function(func: MlirOperation, block: MlirBlock) {
    let ins: Vec<MlirType> = (0..unsafe { mlirBlockGetNumArguments(block) })
        .map(|i| unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) })
        .collect();
    let outs: Vec<MlirType> = ops_of(block)
        .into_iter()
        .rev()
        .find(|op| op_name(*op) == "func.return")
        .map(|ret| ir::operands(ret).iter().map(|v| unsafe { mlirValueGetType(*v) }).collect())
        .unwrap_or_default();
    unsafe {
        let ctx = mlirOperationGetContext(func);
        let ty = mlirFunctionTypeGet(ctx, ins.len() as isize, ins.as_ptr(), outs.len() as isize, outs.as_ptr());
        let name = ffi::string_ref("function_type");
        mlirOperationSetAttributeByName(func, name, mlirTypeAttrGet(ty));
    }
}

/// `aicfInferResultTypes` of `op` with its diagnostics swallowed (a probe:
/// its failure is not the pass's error): 1 inferred, 0 the op does not
/// infer, -1 it cannot with these operands.
fn infers_quietly(op: MlirOperation) -> i32 {
    unsafe extern "C" fn swallow(_: MlirDiagnostic, _: *mut std::ffi::c_void) -> MlirLogicalResult {
        MlirLogicalResult { value: 1 }
    }
    unsafe {
        let ctx = mlirOperationGetContext(op);
        let id = mlirContextAttachDiagnosticHandler(ctx, Some(swallow), std::ptr::null_mut(), None);
        let inferred = ffi::aicfInferResultTypes(op);
        mlirContextDetachDiagnosticHandler(ctx, id);
        inferred as i32
    }
}

/// The types of `block`'s arguments and of its ops' results (nested
/// regions too), by value.
fn record_types(block: MlirBlock, types: &mut std::collections::HashMap<usize, MlirType>) {
    for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
        let arg = unsafe { mlirBlockGetArgument(block, i) };
        types.insert(ir::key(arg), unsafe { mlirValueGetType(arg) });
    }
    for op in ops_of(block) {
        for r in 0..unsafe { mlirOperationGetNumRegions(op) } {
            let mut inner = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)) };
            while !inner.ptr.is_null() {
                record_types(inner, types);
                inner = unsafe { mlirBlockGetNextInRegion(inner) };
            }
        }
        for i in 0..unsafe { mlirOperationGetNumResults(op) } {
            let v = unsafe { mlirOperationGetResult(op, i) };
            types.insert(ir::key(v), unsafe { mlirValueGetType(v) });
        }
    }
}

/// The dimensions of a ranked tensor type (none for another type).
fn dims_of(t: MlirType) -> Vec<i64> {
    if !unsafe { mlirTypeIsARankedTensor(t) } {
        return Vec::new();
    }
    (0..unsafe { mlirShapedTypeGetRank(t) }).map(|i| unsafe { mlirShapedTypeGetDimSize(t, i as isize) }).collect()
}

/// The type a reshape to `stated` gets where its operand, of type `was`
/// before the pass, now has the new batch `size` in the one axis that held
/// the old `from`, and `stated` keeps that axis whole between the same
/// elements before and after it (axes of 1 added or dropped, `[B, H]` to
/// `[1, 1, B, H]` as an imported RNN stacks its steps; the axes after it
/// split or merged, `[T, B, 3 E]` to `[T, B, 3, E]` as attention's
/// projections are), or merges it whole into one axis as its outermost or
/// innermost factor (`[T, B, E]` to `[T, B H, E / H]`, PyTorch's
/// MultiheadAttention): that axis takes the new batch. `None` otherwise.
fn batch_axis_kept(stated: MlirType, was: MlirType, now: MlirType, from: i64, size: i64) -> Option<MlirType> {
    let ranked = |t: MlirType| unsafe { mlirTypeIsARankedTensor(t) };
    // (An old batch of 1 is a factor of every axis: its place is not
    // known.)
    if !(ranked(stated) && ranked(was) && ranked(now)) || from == size || from == 1 {
        return None;
    }
    let (out, before, after) = (dims_of(stated), dims_of(was), dims_of(now));
    if before.len() != after.len() {
        return None;
    }
    let differ: Vec<usize> = (0..before.len()).filter(|&d| before[d] != after[d]).collect();
    // The changed axis holds the batch, alone or as a factor (`[T, B H,
    // E / H]` merged before), of `k`.
    let [p] = differ[..] else { return None };
    if before[p] % from != 0 || after[p] != before[p] / from * size {
        return None;
    }
    let k = before[p] / from;
    // In row-major order the batch's index is the outermost factor of
    // axis q's index where the elements before q are those before the
    // batch, or its innermost where those after q are those after it; the
    // batch outermost or innermost in its own axis.
    let product = |d: &[i64]| d.iter().product::<i64>();
    let (left, right) = (product(&before[..p]), product(&before[p + 1..]));
    let retyped = |(head, tail): (i64, i64)| {
        let q = (0..out.len()).find(|&q| {
            let (pre, post) = (product(&out[..q]), product(&out[q + 1..]));
            out[q] % from == 0
                && ((pre == head && out[q] * post == from * tail) || (post == tail && out[q] * pre == from * head))
        })?;
        let mut shape = out.clone();
        shape[q] = shape[q] / from * size;
        Some(shape)
    };
    let readings: Vec<Vec<i64>> = [(left, k * right), (left * k, right)].into_iter().filter_map(retyped).collect();
    // (Two readings that disagree: the batch's place is not known.)
    let shape = match &readings[..] {
        [one] => one.clone(),
        [a, b] if a == b => a.clone(),
        _ => return None,
    };
    Some(unsafe {
        mlirRankedTensorTypeGet(
            shape.len() as isize,
            shape.as_ptr(),
            mlirShapedTypeGetElementType(stated),
            mlirRankedTensorTypeGetEncoding(stated),
        )
    })
}

/// The leading dimension of a ranked tensor type of rank >= 1.
fn leading_dim(ty: MlirType) -> Option<i64> {
    unsafe { (mlirTypeIsARankedTensor(ty) && mlirShapedTypeGetRank(ty) > 0).then(|| mlirShapedTypeGetDimSize(ty, 0)) }
}

/// `ty` (a ranked tensor) with its leading dimension set to `size`.
fn with_leading_dim(ty: MlirType, size: i64) -> MlirType {
    unsafe {
        let rank = mlirShapedTypeGetRank(ty) as isize;
        let mut shape: Vec<i64> = (0..rank).map(|d| mlirShapedTypeGetDimSize(ty, d)).collect();
        shape[0] = size;
        mlirRankedTensorTypeGet(
            rank,
            shape.as_ptr(),
            mlirShapedTypeGetElementType(ty),
            mlirRankedTensorTypeGetEncoding(ty),
        )
    }
}
