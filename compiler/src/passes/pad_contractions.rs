//! `hl-pad-contractions`: the dimensions of a large 16-bit contraction
//! padded to a multiple of `multiple` elements, as Inductor's `pad_mm`
//! does. Tensor-core GEMMs read and write 16-byte vectors (TMA boxes,
//! `cp.async`, cuBLASLt's fast kernels); a row of 50,257 bf16 values (GPT-2's
//! vocabulary) is 2-byte aligned, so the three GEMMs of a language model's
//! head fall back to kernels several times slower.
//!
//! For `hl.linear %x, %w, %b` (`x: [..., K]`, `w: [N, K]`) with N or K not
//! a multiple, and at least `min-macs` multiply-adds:
//!
//! ```mlir
//! %wp = hl.slice_backward %w ... : tensor<N x K> -> tensor<Np x Kp>   // zeros beyond
//! %xp = hl.slice_backward %x ... : tensor<... x K> -> tensor<... x Kp> // only if K pads
//! %bp = hl.slice_backward %b ... : tensor<N> -> tensor<Np>            // only with a bias
//! %yp = hl.linear %xp, %wp, %bp
//! %y  = hl.slice %yp start = [0, ...] limit = [..., N] ...
//! ```
//!
//! `hl.matmul` pads its logical N and K the same way. The padded rows and
//! columns are zeros, so every element of the result is the same sum (a
//! zero term added exactly); autodiff sees a slice and zero-padding, whose
//! adjoints are each other, so the backward GEMMs (`dy^T x`, `dy w`) read
//! the padded, aligned gradient. Only 16-bit contractions are padded (where
//! tensor cores need the alignment); f32 and small products stay as they
//! are. Runs after `hl-autocast`, before `hl-optimizer` (autodiff).

use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, op_loc, op_name, ops_of};
use crate::types::{DType, TensorSpec};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;

/// The largest padding multiple taken (an alignment, not a size).
const MOST_MULTIPLE: i64 = 1 << 12;

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = |m: String| {
        emit_error(module.location(), &format!("hl-pad-contractions: {m}"));
        PassFailed
    };
    let multiple = options.get_i64("multiple").map_err(report)?;
    let min_macs = options.get_i64("min-macs").map_err(report)?;
    if !(1..=MOST_MULTIPLE).contains(&multiple) || min_macs < 0 {
        return Err(report(format!(
            "multiple={multiple} min-macs={min_macs}: expected multiple in 1..={MOST_MULTIPLE}, min-macs >= 0"
        )));
    }
    let (multiple, min_macs) = (multiple as usize, min_macs as u128);
    let module = module.to_raw();
    for (_, block) in ir::functions(module) {
        for op in ops_of(block) {
            let Some(plan) = plan(op, multiple, min_macs) else { continue };
            pad(op, &plan)?;
        }
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err(PassFailed);
    }
    Ok(())
}

/// What one contraction pads: its operands' padded shapes (None: kept) and
/// the result's shape before the slice back.
struct Plan {
    operands: Vec<Option<Vec<usize>>>,
    result: Vec<usize>,
}

fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m) * m
}

fn is_16bit(t: DType) -> bool {
    matches!(t, DType::BF16 | DType::F16)
}

/// Whether every operand and result of `op` is a statically shaped tensor.
fn static_shapes(op: MlirOperation) -> bool {
    let typed = |t: MlirType| unsafe { mlirTypeIsARankedTensor(t) && mlirShapedTypeHasStaticShape(t) };
    ir::operands(op).iter().all(|v| typed(unsafe { mlirValueGetType(*v) }))
        && (0..unsafe { mlirOperationGetNumResults(op) })
            .all(|r| typed(unsafe { mlirValueGetType(mlirOperationGetResult(op, r)) }))
}

/// The padding `op` takes, if it is a large 16-bit contraction with a
/// dimension that is not a multiple.
fn plan(op: MlirOperation, multiple: usize, min_macs: u128) -> Option<Plan> {
    let name = op_name(op);
    if (name != "hl.linear" && name != "hl.matmul") || !static_shapes(op) {
        return None;
    }
    let x = ir::operands(op);
    let specs: Vec<TensorSpec> = x.iter().map(|v| ir::spec(*v)).collect();
    if !specs.iter().all(|s| is_16bit(s.dtype)) {
        return None;
    }
    let result = ir::spec(unsafe { mlirOperationGetResult(op, 0) }).shape;
    let macs = |k: usize| result.iter().map(|&d| d as u128).product::<u128>() * k as u128;
    let mut operands: Vec<Option<Vec<usize>>> = vec![None; x.len()];
    let mut padded_result = result.clone();
    let last = |s: &TensorSpec| s.shape.len() - 1;
    if name == "hl.linear" {
        // x: [..., K], w: [N, K], b: [N]
        let (xs, ws) = (&specs[0], &specs[1]);
        let (n, k) = (ws.shape[0], ws.shape[1]);
        let (np, kp) = (round_up(n, multiple), round_up(k, multiple));
        if (np == n && kp == k) || macs(k) < min_macs {
            return None;
        }
        if kp != k {
            let mut s = xs.shape.clone();
            s[last(xs)] = kp;
            operands[0] = Some(s);
        }
        operands[1] = Some(vec![np, kp]);
        if np != n && specs.len() == 3 {
            operands[2] = Some(vec![np]);
        }
        *padded_result.last_mut()? = np;
    } else {
        // lhs: [..., M, K] (or [..., K, M] transposed), rhs: [..., K, N] (or [..., N, K])
        let (ls, rs) = (&specs[0], &specs[1]);
        let (tl, tr) = (ir::has(op, "transpose_lhs"), ir::has(op, "transpose_rhs"));
        let (rl, rr) = (ls.shape.len(), rs.shape.len());
        let k_axis_l = if tl { rl - 2 } else { rl - 1 };
        let (k_axis_r, n_axis_r) = if tr { (rr - 1, rr - 2) } else { (rr - 2, rr - 1) };
        let (k, n) = (ls.shape[k_axis_l], rs.shape[n_axis_r]);
        let (np, kp) = (round_up(n, multiple), round_up(k, multiple));
        if (np == n && kp == k) || macs(k) < min_macs {
            return None;
        }
        if kp != k {
            let mut s = ls.shape.clone();
            s[k_axis_l] = kp;
            operands[0] = Some(s);
        }
        let mut s = rs.shape.clone();
        s[k_axis_r] = kp;
        s[n_axis_r] = np;
        operands[1] = Some(s);
        *padded_result.last_mut()? = np;
    }
    Some(Plan { operands, result: padded_result })
}

fn failed(at: MlirOperation, what: &str, e: impl std::fmt::Debug) -> PassFailed {
    emit_error(unsafe { Location::from_raw(op_loc(at)) }, &format!("hl-pad-contractions: {what}: {e:?}"));
    PassFailed
}

/// Builds `name` with `operands` and `attributes` before `at` (its result
/// type `result` if given, else inferred); returns its result.
fn build_before(
    at: MlirOperation,
    name: &str,
    operands: &[MlirValue],
    attributes: &[(&str, String)],
    result: Option<MlirType>,
) -> Result<MlirValue, PassFailed> {
    let ctx = unsafe { mlirOperationGetContext(at) };
    let types: Vec<MlirType> = result.into_iter().collect();
    let spec = OpSpec {
        operands,
        attributes,
        results: if types.is_empty() { None } else { Some(&types) },
        ..OpSpec::new(name)
    };
    let built = ir::create_op(ctx, op_loc(at), &spec).map_err(|e| failed(at, &format!("building {name}"), e))?;
    unsafe { mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(at), at, built) };
    Ok(unsafe { mlirOperationGetResult(built, 0) })
}

/// The `start`, `limit` and `strides` of the window `shape` at the origin.
fn window(shape: &[usize]) -> [(&'static str, String); 3] {
    [
        ("start", ir::i64_array_text(&vec![0; shape.len()])),
        ("limit", ir::i64_array_text(shape)),
        ("strides", ir::i64_array_text(&vec![1; shape.len()])),
    ]
}

fn tensor_type(at: MlirOperation, shape: &[usize], dtype: DType) -> Result<MlirType, PassFailed> {
    let ctx = unsafe { mlirOperationGetContext(at) };
    let text = TensorSpec::new(shape.to_vec(), dtype).mlir_type();
    ir::parse_type(ctx, &text).map_err(|e| failed(at, "building a type", e))
}

/// Pads `op`'s operands as `plan` says, builds the padded contraction and
/// slices its result back to the original shape for every user.
fn pad(op: MlirOperation, plan: &Plan) -> PassResult {
    let operands = ir::operands(op);
    let mut padded = Vec::with_capacity(operands.len());
    for (v, to) in operands.iter().zip(&plan.operands) {
        padded.push(match to {
            None => *v,
            Some(shape) => {
                let from = ir::spec(*v);
                let ty = tensor_type(op, shape, from.dtype)?;
                build_before(op, "hl.slice_backward", &[*v], &window(&from.shape), Some(ty))?
            }
        });
    }
    let result = unsafe { mlirOperationGetResult(op, 0) };
    let original = ir::spec(result);
    let flags: Vec<(&str, String)> = ["transpose_lhs", "transpose_rhs"]
        .into_iter()
        .filter(|k| ir::has(op, k))
        .map(|k| (k, "unit".to_string()))
        .collect();
    let contraction = build_before(op, &op_name(op), &padded, &flags, None)?;
    let got = ir::spec(contraction);
    if got.shape != plan.result {
        return Err(failed(op, "padded result", format!("{:?}, planned {:?}", got.shape, plan.result)));
    }
    let sliced = build_before(op, "hl.slice", &[contraction], &window(&original.shape), None)?;
    unsafe {
        mlirValueReplaceAllUsesOfWith(result, sliced);
        mlirOperationDestroy(op);
    }
    Ok(())
}
