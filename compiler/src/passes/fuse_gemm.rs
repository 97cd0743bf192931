//! `hl-fuse-gemm-epilogue`: matmul/linear and the elementwise ops that
//! follow them become one `hl.gemm` (one GEMM kernel later).
//!
//! Algorithm, per function:
//! 1. Rewrite every `hl.linear` and `hl.matmul` as an `hl.gemm` with no
//!    epilogue (the same product).
//!    A rank-2 `hl.transpose` feeding a GEMM operand becomes the operand's
//!    transpose flag.
//! 2. For every `hl.gemm` (and every op this step creates) whose result has
//!    exactly one use, absorb that use when it is, in epilogue order,
//!    a multiplication by a constant scalar (into `alpha`, before any bias),
//!    the addition of a `[N]` tensor (into `bias`, before the activation),
//!    an activation (`relu`, `gelu`, `silu`, `tanh`, `sigmoid`), a ReLU
//!    derivative mask `select(compare gt(h, 0), y, 0)` (into `mask`), or
//!    the addition of a tensor of the result's type (into `residual`).
//! 3. A column sum `reduce_sum(G, axes = [0])` of the left operand of a
//!    `transpose_lhs` gemm (the bias gradient next to `dW = dY^T X`), or a
//!    row sum (`axes = [1]`) of a plain left operand, becomes the gemm's
//!    `sum_lhs` side result, provided every use of the sum comes after the
//!    gemm. The sum then costs no pass over `G` of its own.
//! 4. The cost rule: a GEMM whose result has several uses is never fused
//!    into one of them, since the others would still need the plain product
//!    and the GEMM would run twice.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{
    self, OpSpec, float_attr, has, i32_array, int_attr, op_loc, op_name, operands, ops_of, producer, single_user, spec,
    splat_value,
};
use crate::types::DType;
use melior::ir::{Location, OperationRef};
use mlir_sys::*;

pub(super) fn run(module: OperationRef<'_, '_>, _options: &PassOptions) -> PassResult {
    fuse_gemm_epilogues(module.to_raw()).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-fuse-gemm-epilogue: {m}"));
        PassFailed
    })
}

/// The operands and attributes of an `hl.gemm` being built.
#[derive(Clone, Copy)]
struct Gemm {
    lhs: MlirValue,
    rhs: MlirValue,
    bias: Option<MlirValue>,
    mask: Option<MlirValue>,
    residual: Option<MlirValue>,
    transpose_lhs: bool,
    transpose_rhs: bool,
    alpha: f64,
    act: i64,
    sum_lhs: bool,
}

impl Gemm {
    fn read(op: MlirOperation) -> Gemm {
        let operand = |i| unsafe { mlirOperationGetOperand(op, i) };
        let seg = i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 0, 0]);
        let mut next = 2;
        let mut take = |present: i64| {
            (present > 0).then(|| {
                next += 1;
                operand(next - 1)
            })
        };
        let (bias, mask, residual) = (take(seg[2]), take(seg[3]), take(seg[4]));
        Gemm {
            lhs: operand(0),
            rhs: operand(1),
            bias,
            mask,
            residual,
            transpose_lhs: has(op, "transpose_lhs"),
            transpose_rhs: has(op, "transpose_rhs"),
            alpha: float_attr(op, "alpha").unwrap_or(1.0),
            act: int_attr(op, "act").unwrap_or(0),
            sum_lhs: has(op, "sum_lhs"),
        }
    }

    /// Creates the op before `before` and returns it.
    fn build(&self, block: MlirBlock, before: MlirOperation) -> Result<MlirOperation, Failure> {
        let mut operands = vec![self.lhs, self.rhs];
        operands.extend(self.bias);
        operands.extend(self.mask);
        operands.extend(self.residual);
        let mut attrs = vec![(
            "operandSegmentSizes",
            format!(
                "array<i32: 1, 1, {}, {}, {}>",
                self.bias.is_some() as i32,
                self.mask.is_some() as i32,
                self.residual.is_some() as i32
            ),
        )];
        if self.transpose_lhs {
            attrs.push(("transpose_lhs", "unit".into()));
        }
        if self.transpose_rhs {
            attrs.push(("transpose_rhs", "unit".into()));
        }
        if self.alpha != 1.0 {
            attrs.push(("alpha", format!("{} : f64", aicf_runtime::init::Float(self.alpha))));
        }
        if self.act != 0 {
            attrs.push(("act", format!("{} : i32", self.act)));
        }
        if self.sum_lhs {
            attrs.push(("sum_lhs", "unit".into()));
        }
        let loc = op_loc(before);
        let ctx = unsafe { mlirOperationGetContext(before) };
        let op = ir::create_op(ctx, loc, &OpSpec { operands: &operands, attributes: &attrs, ..OpSpec::new("hl.gemm") })
            .map_err(|e| (loc, format!("internal error building hl.gemm: {e:?}")))?;
        unsafe { mlirBlockInsertOwnedOperationBefore(block, before, op) };
        Ok(op)
    }
}

/// Runs the pass on every function of `module`; returns how many ops were
/// absorbed into epilogues.
pub fn fuse_gemm_epilogues(module: MlirOperation) -> Result<usize, Failure> {
    let mut absorbed = 0;
    for (_, block) in ir::functions(module) {
        // 1. linear / matmul -> gemm
        for op in ops_of(block) {
            let name = op_name(op);
            if name != "hl.linear" && name != "hl.matmul" {
                continue;
            }
            let operand = |i| unsafe { mlirOperationGetOperand(op, i) };
            let linear = name == "hl.linear";
            let n = unsafe { mlirOperationGetNumOperands(op) };
            let gemm = Gemm {
                lhs: operand(0),
                rhs: operand(1),
                bias: (linear && n > 2).then(|| operand(2)),
                mask: None,
                residual: None,
                transpose_lhs: !linear && has(op, "transpose_lhs"),
                transpose_rhs: linear || has(op, "transpose_rhs"),
                alpha: 1.0,
                act: 0,
                sum_lhs: false,
            };
            replace(op, gemm.build(block, op)?);
        }
        // 1b. a rank-2 transpose feeding a gemm becomes its transpose flag
        for op in ops_of(block) {
            if op_name(op) != "hl.gemm" {
                continue;
            }
            let mut g = Gemm::read(op);
            let lhs_t = plain_transpose(g.lhs).filter(|_| spec(g.rhs).shape.len() == 2);
            let rhs_t = plain_transpose(g.rhs);
            if lhs_t.is_none() && rhs_t.is_none() {
                continue;
            }
            if let Some(src) = lhs_t {
                g.lhs = src;
                g.transpose_lhs = !g.transpose_lhs;
            }
            if let Some(src) = rhs_t {
                g.rhs = src;
                g.transpose_rhs = !g.transpose_rhs;
            }
            replace(op, g.build(block, op)?);
        }
        // 2. absorb single consumers: a worklist of gemms, each fused op
        // going back on it. Only the popped gemm and its (never gemm) user
        // are destroyed, so no handle on the list goes stale.
        let mut worklist: Vec<MlirOperation> = ops_of(block).into_iter().filter(|&o| op_name(o) == "hl.gemm").collect();
        while let Some(op) = worklist.pop() {
            let y = unsafe { mlirOperationGetResult(op, 0) };
            let Some(user) = single_user(y) else { continue };
            let mut g = Gemm::read(op);
            // (A gemm with its lhs's sums, from an earlier run of the pass,
            // keeps its epilogue: the fused op, placed at the user, would
            // take that second result's uses too, which may come before.)
            if g.sum_lhs || !absorb(&mut g, y, user) {
                continue;
            }
            let fused = g.build(block, user)?;
            replace(user, fused);
            unsafe { mlirOperationDestroy(op) };
            absorbed += 1;
            worklist.push(fused);
        }
        // 3. row / column sums of a gemm's lhs as its side result
        let order: std::collections::HashMap<usize, usize> =
            ops_of(block).iter().enumerate().map(|(i, o)| (o.ptr as usize, i)).collect();
        // A gemm replaced below may come later in this list: its handle is
        // then freed memory, never to be read (reading it crashed one
        // compile in 30).
        let mut destroyed: std::collections::HashSet<usize> = Default::default();
        for sum in ops_of(block) {
            if destroyed.contains(&(sum.ptr as usize)) {
                continue;
            }
            if op_name(sum) != "hl.reduce_sum" || has(sum, "keepdim") {
                continue;
            }
            let v = unsafe { mlirOperationGetOperand(sum, 0) };
            let axes = ir::i64_array(sum, "axes").unwrap_or_default();
            // A 16-bit lhs is a tensor-core GEMM's on the GPU, which has no
            // row-sum epilogue: its sum stays a reduction of its own.
            if spec(v).shape.len() != 2 || axes.len() != 1 || matches!(spec(v).dtype, DType::F16 | DType::BF16) {
                continue;
            }
            let total = unsafe { mlirOperationGetResult(sum, 0) };
            let gemm = ir::users(v).into_iter().find(|&u| {
                if op_name(u) != "hl.gemm" {
                    return false;
                }
                let g = Gemm::read(u);
                g.lhs.ptr == v.ptr
                    && !g.sum_lhs
                    && spec(g.rhs).shape.len() == 2
                    && axes[0] == if g.transpose_lhs { 0 } else { 1 }
                    && ir::users(total).iter().all(|w| order.get(&(w.ptr as usize)) > order.get(&(u.ptr as usize)))
            });
            let Some(gemm) = gemm else { continue };
            let mut g = Gemm::read(gemm);
            g.sum_lhs = true;
            let fused = g.build(block, gemm)?;
            unsafe {
                mlirValueReplaceAllUsesOfWith(total, mlirOperationGetResult(fused, 1));
                mlirOperationDestroy(sum);
            }
            destroyed.insert(gemm.ptr as usize);
            replace(gemm, fused);
            absorbed += 1;
        }
    }
    Ok(absorbed)
}

/// Folds `user` (the only use of the gemm result `y`) into `g` when it is
/// an epilogue step that may come after what `g` already has.
fn absorb(g: &mut Gemm, y: MlirValue, user: MlirOperation) -> bool {
    let name = op_name(user);
    let operands = operands(user);
    let other = |pair: &[MlirValue]| -> Option<MlirValue> {
        match pair {
            [a, b] if a.ptr == y.ptr && b.ptr != y.ptr => Some(*b),
            [a, b] if b.ptr == y.ptr && a.ptr != y.ptr => Some(*a),
            _ => None,
        }
    };
    let ys = spec(y);
    let nothing_after_product = g.bias.is_none() && g.act == 0 && g.mask.is_none() && g.residual.is_none();
    let nothing_after_bias = g.act == 0 && g.mask.is_none() && g.residual.is_none();
    match name.as_str() {
        "hl.mul" if nothing_after_product => match other(&operands).and_then(splat_scalar) {
            Some(s) => {
                g.alpha *= s;
                true
            }
            None => false,
        },
        "hl.add" => {
            let Some(v) = other(&operands) else { return false };
            let vs = spec(v);
            // (A bias only where there is none yet: a second row vector
            // replaced the first, `linear(x, W, b) + p` computing x W + p.)
            if nothing_after_bias
                && g.bias.is_none()
                && vs.shape == [*ys.shape.last().unwrap_or(&0)]
                && vs.dtype == ys.dtype
            {
                g.bias = Some(v);
                true
            } else if g.residual.is_none() && vs == ys {
                g.residual = Some(v);
                true
            } else {
                false
            }
        }
        "hl.relu" | "hl.silu" | "hl.tanh" | "hl.sigmoid" | "hl.gelu"
            if g.act == 0 && g.mask.is_none() && g.residual.is_none() =>
        {
            g.act = match name.as_str() {
                "hl.relu" => 1,
                "hl.gelu" if int_attr(user, "approximate") == Some(1) => 3,
                "hl.gelu" => 2,
                "hl.silu" => 4,
                "hl.tanh" => 5,
                _ => 6,
            };
            true
        }
        "hl.select" if g.mask.is_none() && g.residual.is_none() && operands.len() == 3 && operands[1].ptr == y.ptr => {
            // select(compare gt(h, 0), y, 0)
            let (cond, zero) = (operands[0], operands[2]);
            if splat_scalar(zero) != Some(0.0) {
                return false;
            }
            let Some(cmp) = producer(cond) else { return false };
            if op_name(cmp) != "hl.compare" || int_attr(cmp, "predicate") != Some(4) {
                return false;
            }
            let (h, z) = unsafe { (mlirOperationGetOperand(cmp, 0), mlirOperationGetOperand(cmp, 1)) };
            if splat_scalar(z) != Some(0.0) || spec(h) != ys {
                return false;
            }
            g.mask = Some(h);
            true
        }
        _ => false,
    }
}

/// The input of an `hl.transpose` that swaps the two dimensions of a
/// matrix.
fn plain_transpose(v: MlirValue) -> Option<MlirValue> {
    let op = producer(v)?;
    // (Of the two dimensions swapped: an identity permutation flipped the
    // GEMM's transpose flag where canonicalize had not folded it.)
    if op_name(op) != "hl.transpose" || spec(v).shape.len() != 2 || ir::i64_array(op, "permutation") != Some(vec![1, 0])
    {
        return None;
    }
    Some(unsafe { mlirOperationGetOperand(op, 0) })
}

/// The value of a splat `hl.constant` that broadcasts as a scalar would
/// (all dimensions 1), in a float type.
fn splat_scalar(v: MlirValue) -> Option<f64> {
    let s = spec(v);
    if !s.dtype.is_float() || s.shape.iter().any(|&d| d != 1) {
        return None;
    }
    splat_value(v)
}

/// Replaces `old`'s results with `new`'s and erases `old`.
fn replace(old: MlirOperation, new: MlirOperation) {
    unsafe {
        for i in 0..mlirOperationGetNumResults(old).min(mlirOperationGetNumResults(new)) {
            mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(old, i), mlirOperationGetResult(new, i));
        }
        mlirOperationDestroy(old);
    }
}
