//! `hl-fuse-attention`: attention written out as its ops (what an ONNX
//! export of a PyTorch GPT or a hand-written `hl` model holds) becomes one
//! `hl.attention`, so that it runs as the fused (FlashAttention-style)
//! kernel, never materialising the `[L, S]` scores, and differentiates into
//! one `hl.attention_backward` where the train pipeline fuses attention's
//! gradient.
//!
//! The pattern, from the softmax outwards:
//!
//! ```mlir
//! %s = hl.matmul %q, %kt : tensor<BxHxLxDxf32>, tensor<BxHxDxSxf32>   // or %k transpose_rhs
//! %c = hl.mul %s, %scale : ..., tensor<f32>                          // or hl.div; none: scale 1
//! %m = hl.select %upper, %neg_inf, %c : ...                          // optional causal mask
//! %p = hl.softmax %m axis = 3 : tensor<BxHxLxSxf32>
//! %o = hl.matmul %p, %v : tensor<BxHxLxSxf32>, tensor<BxHxSxDvxf32>
//! ```
//!
//! becomes `%o = hl.attention %q, %k, %v causal scale = ...`. The scale is
//! any chain of positive constant factors and divisors on the scores (an
//! importer's `1 / sqrt(D)` may still be `div(1, 2.83) * 1`: evaluated
//! here). A causal mask is accepted in the forms exporters write:
//! `select(mask, -inf, scores)` with `mask[i][j] = j > i` (nanoGPT's
//! `masked_fill(~tril, -inf)`), `select(tril, scores, -inf)`, or
//! `scores + M` with `M[i][j]` 0 for `j <= i` and `-inf` (or at most -1e30,
//! as `finfo.min`) above: a constant, possibly reshaped or broadcast from
//! `[L, S]`. Since query `i` always sees key `i`, a finite "minus infinity"
//! gives exactly what the causal kernel does wherever the scores are below
//! 1e29.
//!
//! The guard an exported SDPA with a boolean mask puts between the softmax
//! and the values, `select(p != p, 0, p)` (zeroing rows a mask hides
//! wholly), is read through: a causal mask hides no row wholly.
//!
//! The match is taken only where it is whole: every value of the chain is
//! read once (probabilities also returned, or dropped out, keep the ops),
//! the softmax is over the last axis, query, key and value have one float
//! type and rank, and any other mask (padding, a data-dependent one)
//! leaves the ops as they are.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, has, int_attr, op_loc, op_name, ops_of};
use crate::types::TensorSpec;
use aicf_runtime::init::Float;
use melior::ir::{Location, OperationRef};
use mlir_sys::*;

pub(super) fn run(module: OperationRef<'_, '_>, _options: &PassOptions) -> PassResult {
    fuse_attention(module.to_raw()).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-fuse-attention: {m}"));
        PassFailed
    })
}

/// Fuses every written-out attention of `module`'s functions; returns how
/// many became `hl.attention`.
pub fn fuse_attention(module: MlirOperation) -> Result<usize, Failure> {
    let mut fused = 0;
    for (_, block) in ir::functions(module) {
        // Listed first: a rewrite erases ops around each softmax.
        let softmaxes: Vec<MlirOperation> =
            ops_of(block).into_iter().filter(|&op| op_name(op) == "hl.softmax").collect();
        for softmax in softmaxes {
            if let Some(found) = match_attention(softmax) {
                rewrite(block, &found)?;
                fused += 1;
            }
        }
    }
    Ok(fused)
}

/// A written-out attention.
struct Attention {
    query: MlirValue,
    /// The keys as the scores' product reads them: `[.., S, D]` (the
    /// product's `transpose_rhs`), or `[.., D, S]` to be transposed back.
    keys: MlirValue,
    keys_transposed: bool,
    /// The values as the product reads them: `[.., S, Dv]`, or `[.., Dv,
    /// S]` with its `transpose_rhs`.
    values: MlirValue,
    values_transposed: bool,
    scale: f64,
    causal: bool,
    /// The product of the probabilities and the values: its result becomes
    /// the attention's.
    output: MlirOperation,
    /// The ops replaced, users before producers (the output, the softmax,
    /// the scale and mask ops, the scores' product).
    replaced: Vec<MlirOperation>,
}

fn operand(op: MlirOperation, i: isize) -> MlirValue {
    unsafe { mlirOperationGetOperand(op, i) }
}

fn result(op: MlirOperation) -> MlirValue {
    unsafe { mlirOperationGetResult(op, 0) }
}

fn match_attention(softmax: MlirOperation) -> Option<Attention> {
    let probabilities = result(softmax);
    let shape = ir::spec(probabilities).shape;
    let rank = shape.len();
    let axis = int_attr(softmax, "axis")?;
    if rank < 2 || !(axis == rank as i64 - 1 || axis == -1) {
        return None;
    }
    let (l, s) = (shape[rank - 2], shape[rank - 1]);
    // PyTorch's exported SDPA with a boolean mask zeroes the probabilities
    // of rows the mask hides wholly: select(p != p, 0, p). No row of a
    // causal mask (or of none) is hidden wholly, so on finite scores the
    // guard changes nothing and the attention reads through it (on scores
    // that are not finite, the fused kernel's output is NaN where the
    // guard's rows were zeros: a run that diverged says so either way).
    let guard = nan_guard(probabilities);
    let read = guard.map_or(probabilities, |(select, _)| result(select));
    // The probabilities' only reader: their product with the values.
    let output = ir::single_user(read).filter(|&op| op_name(op) == "hl.matmul")?;
    if ir::key(operand(output, 0)) != ir::key(read)
        || ir::key(operand(output, 1)) == ir::key(read)
        || has(output, "transpose_lhs")
    {
        return None;
    }
    let values = operand(output, 1);
    let values_transposed = has(output, "transpose_rhs");
    let mut replaced = vec![output];
    if let Some((select, compare)) = guard {
        replaced.extend([select, compare]);
    }
    replaced.push(softmax);
    let (mut scale, mut causal) = (1.0f64, false);
    // From the softmax's input back to the scores' product: constant
    // factors and one causal mask, each value read once.
    let mut x = operand(softmax, 0);
    let scores = loop {
        ir::single_user(x)?;
        let op = ir::producer(x)?;
        let same_shape = |v: MlirValue| ir::spec(v).shape == shape;
        match op_name(op).as_str() {
            "hl.matmul" => break op,
            "hl.mul" => {
                let (a, b) = (operand(op, 0), operand(op, 1));
                let (data, factor) = match (scalar(a), scalar(b)) {
                    (None, Some(f)) if same_shape(a) => (a, f),
                    (Some(f), None) if same_shape(b) => (b, f),
                    _ => return None,
                };
                scale *= positive(factor)?;
                x = data;
            }
            "hl.div" => {
                let (data, divisor) = (operand(op, 0), scalar(operand(op, 1))?);
                if !same_shape(data) {
                    return None;
                }
                scale /= positive(divisor)?;
                x = data;
            }
            "hl.select" if !causal => {
                let (mask, a, b) = (operand(op, 0), operand(op, 1), operand(op, 2));
                // select(upper, -inf, scores) or select(tril, scores, -inf).
                // `scale` so far: the factors applied after the mask.
                let (data, masked_where_true) = match (minus_infinity(a, scale), minus_infinity(b, scale)) {
                    (true, false) if same_shape(b) => (b, true),
                    (false, true) if same_shape(a) => (a, false),
                    _ => return None,
                };
                // A key is seen where the mask is false (true) for the
                // first form (the second).
                if !causal_pattern(mask, l, s, &|v| (v != 0.0) != masked_where_true)? {
                    return None;
                }
                causal = true;
                x = data;
            }
            "hl.add" if !causal => {
                let (a, b) = (operand(op, 0), operand(op, 1));
                let (data, mask) = if same_shape(a) && constant_source(b).is_some() {
                    (a, b)
                } else if same_shape(b) && constant_source(a).is_some() {
                    (b, a)
                } else {
                    return None;
                };
                // 0 where a key is seen, minus infinity where it is not
                // (after the factors applied to it since).
                let seen = |v: f64| {
                    if v == 0.0 {
                        Some(true)
                    } else if masks(v, scale) {
                        Some(false)
                    } else {
                        None
                    }
                };
                if !causal_pattern_values(mask, l, s, &seen)? {
                    return None;
                }
                causal = true;
                x = data;
            }
            _ => return None,
        }
        replaced.push(op);
    };
    replaced.push(scores);
    if has(scores, "transpose_lhs") {
        return None;
    }
    let (mut query, mut keys) = (operand(scores, 0), operand(scores, 1));
    // A factor on the queries or the keys (PyTorch's exported SDPA scales
    // both by sqrt(scale)), each read only by the product.
    for side in [&mut query, &mut keys] {
        let Some(op) = ir::producer(*side).filter(|&op| op_name(op) == "hl.mul") else { continue };
        if ir::single_user(*side).is_none() {
            continue;
        }
        let (a, b) = (operand(op, 0), operand(op, 1));
        let same_shape = |v: MlirValue| ir::spec(v).shape == ir::spec(*side).shape;
        let (data, factor) = match (scalar(a), scalar(b)) {
            (None, Some(f)) if same_shape(a) => (a, f),
            (Some(f), None) if same_shape(b) => (b, f),
            _ => continue,
        };
        scale *= positive(factor)?;
        replaced.push(op);
        *side = data;
    }
    let mut keys_transposed = !has(scores, "transpose_rhs");
    // Keys transposed with their batch and head axes merged (the dynamo
    // exporter's SDPA: reshape [B, H, S, D] -> [B H, S, D], transpose the
    // last two, reshape back to [B, H, D, S]), each read only by the next:
    // the 4-D keys, their transpose undone.
    if let Some((source, chain)) = merged_transpose(keys) {
        replaced.extend(chain);
        keys = source;
        keys_transposed = !keys_transposed;
    }
    // One float type and rank for query, keys and values (the scores'
    // product may broadcast a rank-2 operand; the attention does not).
    let (q, k, v) = (ir::spec(query), ir::spec(keys), ir::spec(values));
    if !q.dtype.is_float()
        || k.dtype != q.dtype
        || v.dtype != q.dtype
        || k.shape.len() != rank
        || v.shape.len() != rank
        || q.shape.len() != rank
        || q.shape[..rank - 2] != k.shape[..rank - 2]
        || v.shape[..rank - 2] != q.shape[..rank - 2]
    {
        return None;
    }
    if !(scale > 0.0 && scale <= f32::MAX as f64) {
        return None;
    }
    Some(Attention { query, keys, keys_transposed, values, values_transposed, scale, causal, output, replaced })
}

/// `v` = reshape(transpose(reshape(x))) where the inner reshape merges
/// `x`'s leading axes (keeping its last two), the transpose swaps the last
/// two, and the outer reshape splits the leading axes back: `v` is `x`
/// with its last two axes swapped. Returns `x` and the three ops (outer
/// first), each read only by the next.
fn merged_transpose(v: MlirValue) -> Option<(MlirValue, Vec<MlirOperation>)> {
    let single =
        |v: MlirValue, name: &str| ir::producer(v).filter(|&op| op_name(op) == name && ir::single_user(v).is_some());
    let outer = single(v, "hl.reshape")?;
    let t = single(operand(outer, 0), "hl.transpose")?;
    let inner = single(operand(t, 0), "hl.reshape")?;
    let x = operand(inner, 0);
    let (xs, merged, out) = (ir::spec(x).shape, ir::spec(operand(t, 0)).shape, ir::spec(v).shape);
    let (n, m) = (xs.len(), merged.len());
    if n < 3 || m < 2 || out.len() != n {
        return None;
    }
    let perm = ir::i64_array(t, "permutation")?;
    let swap: Vec<i64> = (0..m as i64 - 2).chain([m as i64 - 1, m as i64 - 2]).collect();
    let leading = |s: &[usize]| s.iter().product::<usize>();
    let swapped_ok = perm == swap
        && merged[m - 2..] == xs[n - 2..]
        && leading(&merged[..m - 2]) == leading(&xs[..n - 2])
        && out[..n - 2] == xs[..n - 2]
        && (out[n - 2], out[n - 1]) == (xs[n - 1], xs[n - 2]);
    swapped_ok.then(|| (x, vec![outer, t, inner]))
}

/// The guard `select(compare ne(p, p), 0, p)` on probabilities `p` (its
/// select and compare), where `p` is read by those two ops alone.
fn nan_guard(p: MlirValue) -> Option<(MlirOperation, MlirOperation)> {
    // Once per op (the compare reads `p` twice).
    let mut users = ir::users(p);
    users.sort_by_key(|u| u.ptr as usize);
    users.dedup_by(|a, b| a.ptr == b.ptr);
    if users.len() != 2 {
        return None;
    }
    let (compare, select) = match (op_name(users[0]).as_str(), op_name(users[1]).as_str()) {
        ("hl.compare", "hl.select") => (users[0], users[1]),
        ("hl.select", "hl.compare") => (users[1], users[0]),
        _ => return None,
    };
    let same = |a: MlirValue, b: MlirValue| ir::key(a) == ir::key(b);
    let is_nan_test = int_attr(compare, "predicate") == Some(1) // ne
        && same(operand(compare, 0), p)
        && same(operand(compare, 1), p);
    let zeroes_nan = same(operand(select, 0), result(compare))
        && scalar(operand(select, 1)) == Some(0.0)
        && same(operand(select, 2), p)
        && ir::spec(result(select)).shape == ir::spec(p).shape;
    (is_nan_test && zeroes_nan && ir::single_user(result(compare)).is_some()).then_some((select, compare))
}

fn positive(factor: f64) -> Option<f64> {
    (factor > 0.0 && factor.is_finite()).then_some(factor)
}

/// The value of `v` where it is a constant scalar expression: a splat
/// constant, or a reshape, broadcast, product, quotient, sum, difference,
/// negation or square root of such (an importer's unfolded `1 / sqrt(D)`).
fn scalar(v: MlirValue) -> Option<f64> {
    if let Some(c) = ir::splat_value(v) {
        return Some(c);
    }
    let op = ir::producer(v)?;
    // A 16-bit splat (an fp16 export's), which `splat_value` leaves out.
    let dtype = ir::spec(v).dtype;
    if op_name(op) == "hl.constant" && matches!(dtype, crate::types::DType::F16 | crate::types::DType::BF16) {
        let a = ir::attr(op, "value");
        if a.ptr.is_null() || unsafe { !mlirAttributeIsADenseElements(a) || !mlirDenseElementsAttrIsSplat(a) } {
            return None;
        }
        return Some(unsafe { ir::dense_16bit_element(a, 0, dtype) });
    }
    let arg = |i| scalar(operand(op, i));
    Some(match op_name(op).as_str() {
        "hl.reshape" | "hl.broadcast_to" => arg(0)?,
        "hl.mul" => arg(0)? * arg(1)?,
        "hl.div" => arg(0)? / arg(1)?,
        "hl.add" => arg(0)? + arg(1)?,
        "hl.sub" => arg(0)? - arg(1)?,
        "hl.neg" => -arg(0)?,
        "hl.sqrt" => arg(0)?.sqrt(),
        _ => return None,
    })
}

/// Whether `v` is minus infinity everywhere, or a finite value that is at
/// most -1e30 (`finfo.min`) once multiplied by `after`, the positive
/// factors applied to the masked scores after it, as a constant scalar
/// expression.
fn minus_infinity(v: MlirValue, after: f64) -> bool {
    scalar(v).is_some_and(|c| masks(c, after))
}

/// Whether a mask value `c`, scaled by `after` later, still masks: minus
/// infinity, or at most -1e30 (a finite mask scaled down by a tiny factor
/// after it is a mask no longer: `(s + finfo.min) * 1e-38` is about -3.4).
fn masks(c: f64, after: f64) -> bool {
    c == f64::NEG_INFINITY || c * after <= -1e30
}

/// The `hl.constant` whose elements `v` holds, through reshapes and
/// broadcasts that keep its last two dimensions where they are (leading
/// ones only added or removed): the constant's elements, row-major, then
/// index `[i, j]` of the trailing `[L, S]` as `i * S + j`.
fn constant_source(v: MlirValue) -> Option<MlirOperation> {
    let op = ir::producer(v)?;
    match op_name(op).as_str() {
        "hl.constant" => Some(op),
        "hl.reshape" | "hl.broadcast_to" => {
            let (from, to) = (ir::spec(operand(op, 0)).shape, ir::spec(v).shape);
            let tail = |s: &[usize]| -> Option<(usize, usize)> {
                let n = s.len();
                (n >= 2).then(|| (s[n - 2], s[n - 1]))
            };
            let leading_ones = from.len() < 2 || from[..from.len() - 2].iter().all(|&d| d == 1);
            (tail(&from)? == tail(&to)? && leading_ones).then_some(())?;
            constant_source(operand(op, 0))
        }
        _ => None,
    }
}

/// Whether the mask `v` (a constant of `[.., L, S]`, leading dims one) is
/// causal: `keep(element)` true exactly where key `j <= i`.
fn causal_pattern(v: MlirValue, l: usize, s: usize, keep: &dyn Fn(f64) -> bool) -> Option<bool> {
    causal_pattern_values(v, l, s, &|x| Some(keep(x)))
}

/// `causal_pattern` where `seen(element)` may refuse an element (None).
fn causal_pattern_values(v: MlirValue, l: usize, s: usize, seen: &dyn Fn(f64) -> Option<bool>) -> Option<bool> {
    let constant = constant_source(v)?;
    let spec = ir::spec(result(constant));
    let n = spec.shape.len();
    if n < 2 || spec.shape[n - 2] != l || spec.shape[n - 1] != s {
        return None;
    }
    // A mask with leading axes (Hugging Face's [batch, 1, l, s], one copy
    // per sequence) is causal in every slice; its op broadcasts it onto the
    // scores.
    let slices = spec.num_elements() / (l * s).max(1);
    let a = ir::attr(constant, "value");
    if a.ptr.is_null() || unsafe { !mlirAttributeIsADenseElements(a) || mlirDenseElementsAttrIsSplat(a) } {
        return None;
    }
    let element = |pos: usize| -> Option<f64> {
        let p = pos as isize;
        unsafe {
            Some(match spec.dtype {
                crate::types::DType::I1 => mlirDenseElementsAttrGetBoolValue(a, p) as u8 as f64,
                crate::types::DType::F32 => mlirDenseElementsAttrGetFloatValue(a, p) as f64,
                crate::types::DType::F64 => mlirDenseElementsAttrGetDoubleValue(a, p),
                crate::types::DType::F16 | crate::types::DType::BF16 => ir::dense_16bit_element(a, p, spec.dtype),
                _ => return None,
            })
        }
    };
    for slice in 0..slices {
        for i in 0..l {
            for j in 0..s {
                if seen(element(slice * l * s + i * s + j)?)? != (j <= i) {
                    return Some(false);
                }
            }
        }
    }
    Some(true)
}

fn rewrite(block: MlirBlock, found: &Attention) -> Result<(), Failure> {
    let at = found.output;
    let loc = op_loc(at);
    let ctx = unsafe { mlirOperationGetContext(at) };
    let build = |name: &str, operands: &[MlirValue], attributes: &[(&str, String)], result: &TensorSpec| {
        let ty = ir::parse_type(ctx, &result.mlir_type()).map_err(|e| (loc, format!("internal error: {e:?}")))?;
        let spec = OpSpec { operands, attributes, results: Some(&[ty]), ..OpSpec::new(name) };
        let op =
            ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("internal error building '{name}': {e:?}")))?;
        unsafe { mlirBlockInsertOwnedOperationBefore(block, at, op) };
        Ok::<MlirValue, Failure>(unsafe { mlirOperationGetResult(op, 0) })
    };
    // `v` with its last two dimensions swapped, through the transpose that
    // made it where that is read only here (composed: one transpose, or
    // none); the transpose absorbed.
    let untranspose = |v: MlirValue| -> Result<(MlirValue, Option<MlirOperation>), Failure> {
        let spec = ir::spec(v);
        let rank = spec.shape.len();
        let mut swap: Vec<usize> = (0..rank).collect();
        swap.swap(rank - 2, rank - 1);
        let producer = ir::producer(v).filter(|&t| op_name(t) == "hl.transpose" && ir::single_user(v).is_some());
        let (source, permutation, absorbed) = match producer.and_then(|t| Some((t, ir::i64_array(t, "permutation")?))) {
            Some((t, p)) if p.len() == rank => {
                (operand(t, 0), swap.iter().map(|&i| p[i] as usize).collect::<Vec<usize>>(), Some(t))
            }
            _ => (v, swap, None),
        };
        let source_shape = ir::spec(source).shape;
        let shape: Vec<usize> = permutation.iter().map(|&d| source_shape[d]).collect();
        if permutation.iter().enumerate().all(|(i, &d)| i == d) {
            return Ok((source, absorbed));
        }
        let attributes = [("permutation", ir::i64_array_text(&permutation))];
        Ok((build("hl.transpose", &[source], &attributes, &TensorSpec::new(shape, spec.dtype))?, absorbed))
    };
    // The keys as `[.., S, D]` (the product read `[.., D, S]` unless it
    // transposed them itself), the values as `[.., S, Dv]`.
    let (keys, absorbed_keys) = if found.keys_transposed { untranspose(found.keys)? } else { (found.keys, None) };
    let (values, absorbed_values) =
        if found.values_transposed { untranspose(found.values)? } else { (found.values, None) };
    let absorbed: Vec<MlirOperation> = absorbed_keys.into_iter().chain(absorbed_values).collect();
    let mut attributes = vec![("scale", format!("{} : f64", Float(found.scale)))];
    if found.causal {
        attributes.push(("causal", "unit".to_string()));
    }
    let out = ir::spec(result(found.output));
    let attention = build("hl.attention", &[found.query, keys, values], &attributes, &out)?;
    // The producers of what the replaced ops read besides the chain (the
    // constants of the scale and mask), which may be left unused.
    let replaced: std::collections::HashSet<usize> =
        found.replaced.iter().chain(absorbed.iter()).map(|op| op.ptr as usize).collect();
    let mut inputs: Vec<MlirOperation> = Vec::new();
    for &op in &found.replaced {
        for v in ir::operands(op) {
            if let Some(p) = ir::producer(v).filter(|p| !replaced.contains(&(p.ptr as usize))) {
                if !inputs.iter().any(|q| q.ptr == p.ptr) {
                    inputs.push(p);
                }
            }
        }
    }
    unsafe {
        mlirValueReplaceAllUsesOfWith(result(found.output), attention);
        // Users before producers, each now unused.
        for &op in &found.replaced {
            mlirOperationDestroy(op);
        }
        for &t in &absorbed {
            mlirOperationDestroy(t);
        }
    }
    erase_unused_constants(inputs);
    Ok(())
}

/// Erases each of `ops` (and then their operands' producers) that nothing
/// reads and that is one of the constant expressions the match reads
/// through (`scalar`, `constant_source`).
fn erase_unused_constants(mut ops: Vec<MlirOperation>) {
    let mut erased: std::collections::HashSet<usize> = std::collections::HashSet::new();
    while let Some(op) = ops.pop() {
        if erased.contains(&(op.ptr as usize)) || unsafe { mlirOperationGetNumResults(op) } != 1 {
            continue;
        }
        let v = result(op);
        let constant = op_name(op) == "hl.constant" || scalar(v).is_some() || constant_source(v).is_some();
        if !constant || !ir::users(v).is_empty() {
            continue;
        }
        let producers: Vec<MlirOperation> = ir::operands(op).into_iter().filter_map(ir::producer).collect();
        erased.insert(op.ptr as usize);
        unsafe { mlirOperationDestroy(op) };
        ops.extend(producers);
    }
}
