//! What several passes share: the failure every pass body returns (a
//! location and a message, turned into a diagnostic), and the emitter the
//! passes that build `hl` (autodiff, the optimizer) append ops with.

use crate::ir::{self, OpSpec, i64_array_text, spec};
use crate::types::{DType, TensorSpec};
use mlir_sys::*;

/// Where a pass failed and why.
pub(super) type Failure = (MlirLocation, String);

/// Emits `hl` ops at the end of a block, with the location of the op being
/// differentiated.
pub(super) struct Emitter {
    pub(super) ctx: MlirContext,
    pub(super) block: MlirBlock,
    pub(super) loc: MlirLocation,
}

impl Emitter {
    pub(super) fn append(&self, spec: &OpSpec<'_>) -> Result<MlirOperation, Failure> {
        let op = ir::create_op(self.ctx, self.loc, spec)
            .map_err(|e| (self.loc, format!("internal error building '{}' for a gradient: {e:?}", spec.name)))?;
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
        Ok(op)
    }
    pub(super) fn op(
        &self,
        name: &str,
        operands: &[MlirValue],
        attrs: &[(&str, String)],
    ) -> Result<MlirValue, Failure> {
        let op = self.append(&OpSpec { operands, attributes: attrs, ..OpSpec::new(name) })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    pub(super) fn typed(&self, name: &str, operands: &[MlirValue], result: &TensorSpec) -> Result<MlirValue, Failure> {
        let ty = ir::parse_type(self.ctx, &result.mlir_type()).map_err(|e| (self.loc, format!("{e:?}")))?;
        let op = self.append(&OpSpec { operands, results: Some(&[ty]), ..OpSpec::new(name) })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    /// `name(operands)` of type `result`, inserted before `at` (not
    /// verified: `hl.get_state` needs its module).
    pub(super) fn op_before(
        &self,
        at: MlirOperation,
        name: &str,
        operands: &[MlirValue],
        attributes: &[(&str, String)],
        result: &TensorSpec,
    ) -> Result<MlirValue, Failure> {
        let ty = ir::parse_type(self.ctx, &result.mlir_type()).map_err(|e| (self.loc, format!("{e:?}")))?;
        let spec = OpSpec { operands, attributes, results: Some(&[ty]), verify: false, ..OpSpec::new(name) };
        let op = ir::create_op(self.ctx, self.loc, &spec)
            .map_err(|e| (self.loc, format!("internal error building '{name}': {e:?}")))?;
        unsafe { mlirBlockInsertOwnedOperationBefore(self.block, at, op) };
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    pub(super) fn binary(&self, name: &str, a: MlirValue, b: MlirValue) -> Result<MlirValue, Failure> {
        self.op(name, &[a, b], &[])
    }
    pub(super) fn unary(&self, name: &str, a: MlirValue) -> Result<MlirValue, Failure> {
        self.op(name, &[a], &[])
    }
    /// A splat constant of `spec`.
    pub(super) fn splat(&self, value: f64, spec: &TensorSpec) -> Result<MlirValue, Failure> {
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
    pub(super) fn scalar(&self, value: f64, like: MlirValue) -> Result<MlirValue, Failure> {
        self.splat(value, &TensorSpec::new([], spec(like).dtype))
    }
    pub(super) fn scale(&self, x: MlirValue, factor: f64) -> Result<MlirValue, Failure> {
        let c = self.scalar(factor, x)?;
        self.binary("hl.mul", x, c)
    }
    /// `x` in f32 where it is a 16-bit float (else `x`): for a gradient
    /// formula whose constants (GELU's sqrt(2/pi), a mean's 1/n) the 16-bit
    /// type would round, computed in f32 and rounded once by [`Self::cast_like`],
    /// as PyTorch's 16-bit backward kernels compute in f32. Fusion makes the
    /// casts free: an elementwise group's body computes in f32 anyway.
    pub(super) fn widened(&self, x: MlirValue) -> Result<MlirValue, Failure> {
        let s = spec(x);
        if matches!(s.dtype, DType::BF16 | DType::F16) {
            self.typed("hl.cast", &[x], &TensorSpec::new(&s.shape[..], DType::F32))
        } else {
            Ok(x)
        }
    }
    /// `x` cast to `like`'s element type where they differ.
    pub(super) fn cast_like(&self, x: MlirValue, like: MlirValue) -> Result<MlirValue, Failure> {
        let (s, to) = (spec(x), spec(like).dtype);
        if s.dtype == to { Ok(x) } else { self.typed("hl.cast", &[x], &TensorSpec::new(&s.shape[..], to)) }
    }
    /// `x * factor` with the factor's f32 value where `x` is 16-bit and the
    /// 16-bit type would round it (a mean's 1/3 is 0.2% high in bf16).
    pub(super) fn scale_exact(&self, x: MlirValue, factor: f64) -> Result<MlirValue, Failure> {
        let dtype = spec(x).dtype;
        let rounded = match dtype {
            DType::BF16 => half::bf16::from_f64(factor).to_f64(),
            DType::F16 => half::f16::from_f64(factor).to_f64(),
            _ => factor,
        };
        if rounded == factor { self.scale(x, factor) } else { self.cast_like(self.scale(self.widened(x)?, factor)?, x) }
    }
    pub(super) fn reshape(&self, x: MlirValue, shape: &[usize]) -> Result<MlirValue, Failure> {
        let s = spec(x);
        if s.shape == shape {
            return Ok(x);
        }
        self.typed("hl.reshape", &[x], &TensorSpec::new(shape, s.dtype))
    }
    pub(super) fn broadcast(&self, x: MlirValue, shape: &[usize]) -> Result<MlirValue, Failure> {
        let s = spec(x);
        if s.shape == shape {
            return Ok(x);
        }
        self.typed("hl.broadcast_to", &[x], &TensorSpec::new(shape, s.dtype))
    }
    pub(super) fn sum(&self, x: MlirValue, axes: &[usize], keepdim: bool) -> Result<MlirValue, Failure> {
        let mut attrs = vec![("axes", i64_array_text(axes))];
        if keepdim {
            attrs.push(("keepdim", "unit".into()));
        }
        self.op("hl.reduce_sum", &[x], &attrs)
    }
    /// `[0, 1, ..., n-1]` of an integer `dtype`.
    pub(super) fn iota_of(&self, n: usize, dtype: DType) -> Result<MlirValue, Failure> {
        let spec = TensorSpec::new([n], dtype);
        let values: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let attr = format!("dense<[{}]> : {}", values.join(", "), spec.mlir_type());
        let ty = ir::parse_type(self.ctx, &spec.mlir_type()).map_err(|e| (self.loc, format!("{e:?}")))?;
        let op = self.append(&OpSpec {
            attributes: &[("value", attr)],
            results: Some(&[ty]),
            ..OpSpec::new("hl.constant")
        })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    }
    /// `iota_of(n)` (i32) shaped to broadcast along dimension `dim` of a
    /// rank-`rank` tensor.
    pub(super) fn iota(&self, n: usize, rank: usize, dim: usize) -> Result<MlirValue, Failure> {
        let flat = self.iota_of(n, DType::I32)?;
        let mut shape = vec![1; rank];
        shape[dim] = n;
        self.reshape(flat, &shape)
    }
    /// Sums a gradient over the dimensions broadcasting stretched, back to
    /// `target`'s shape.
    pub(super) fn unbroadcast(&self, g: MlirValue, target: &TensorSpec) -> Result<MlirValue, Failure> {
        let gs = spec(g);
        if gs.shape == target.shape {
            return Ok(g);
        }
        let lead = gs.shape.len() - target.shape.len();
        let axes: Vec<usize> =
            (0..gs.shape.len()).filter(|&i| i < lead || (target.shape[i - lead] == 1 && gs.shape[i] != 1)).collect();
        let summed = if axes.is_empty() { g } else { self.sum(g, &axes, true)? };
        self.reshape(summed, &target.shape)
    }
}

/// The most bytes one tensor or buffer may hold (1 TiB): more than any
/// device has, and far from overflowing the memory plan's byte counts.
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// Whether `v`'s shaped type holds more than [`MAX_TENSOR_BYTES`] (or more
/// than a `u64` counts).
pub(crate) fn too_large(v: mlir_sys::MlirValue) -> bool {
    crate::ir::buffer_spec(v).is_some_and(|spec| {
        spec.shape
            .iter()
            .try_fold(crate::ir::dtype_bytes(spec.dtype), |n, &d| n.checked_mul(d as u64))
            .is_none_or(|bytes| bytes > MAX_TENSOR_BYTES)
    })
}

/// The first `func.func` of module `op` declared without a body (an
/// external function): its location and a message. The `hl` passes refuse
/// such a module first: AICF compiles whole models, and a pass walking a
/// function's body (or differentiating `@loss`) has none to walk.
pub(crate) fn declaration(op: MlirOperation) -> Option<(MlirLocation, String)> {
    if unsafe { mlirOperationGetNumRegions(op) } == 0 {
        return None;
    }
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
    crate::ir::ops_of(body).into_iter().find_map(|f| {
        let declared = crate::ir::op_name(f) == "func.func"
            && unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0)) }.ptr.is_null();
        declared.then(|| {
            let name = crate::ir::string_attr(f, "sym_name").unwrap_or_default();
            (
                unsafe { mlirOperationGetLocation(f) },
                format!(
                    "@{name} is declared without a body: AICF compiles whole models (define it, or remove the \
                     declaration)"
                ),
            )
        })
    })
}

/// A module nested in the anchored one (`module { module @inner {...} }`):
/// the hl passes work on the functions of the module they run on, and
/// skipped the inner one's without a word (its hl ops left after
/// lowering, its parameters uncounted).
pub(crate) fn nested_module(op: MlirOperation) -> Option<(MlirLocation, String)> {
    if unsafe { mlirOperationGetNumRegions(op) } == 0 {
        return None;
    }
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
    if body.ptr.is_null() {
        return None;
    }
    crate::ir::ops_of(body).into_iter().find(|&m| crate::ir::op_name(m) == "builtin.module").map(|m| {
        let name = crate::ir::string_attr(m, "sym_name").map(|n| format!(" @{n}")).unwrap_or_default();
        (
            unsafe { mlirOperationGetLocation(m) },
            format!(
                "a nested module{name}: AICF's passes run on the functions of one module (move its contents to the \
                 top level, or anchor the pass on it: --pass-pipeline='builtin.module(builtin.module(...))')"
            ),
        )
    })
}

/// What shows that the anchored module is differentiated already: a
/// function `hl-autodiff` or `hl-optimizer` writes, or a backward op. The
/// passes that rewrite a forward refuse such a module: a retyped backward
/// kept the old batch's 1/N (gradients scaled wrong), and a grown layer's
/// weight is read by the backward's transposes.
pub(crate) fn differentiated(op: MlirOperation) -> Option<(MlirLocation, String)> {
    let functions = crate::ir::functions(op);
    let names: Vec<String> =
        functions.iter().map(|(f, _)| crate::ir::string_attr(*f, "sym_name").unwrap_or_default()).collect();
    // (inputs, results) of a function's type.
    let signature = |f: MlirOperation| -> (Vec<MlirType>, Vec<MlirType>) {
        let t = unsafe { mlirTypeAttrGetValue(crate::ir::attr(f, "function_type")) };
        unsafe {
            (
                (0..mlirFunctionTypeGetNumInputs(t)).map(|i| mlirFunctionTypeGetInput(t, i)).collect(),
                (0..mlirFunctionTypeGetNumResults(t)).map(|i| mlirFunctionTypeGetResult(t, i)).collect(),
            )
        }
    };
    for ((func, block), name) in functions.iter().zip(&names) {
        // `@<f>_grad` shaped as hl-autodiff writes it beside `@<f>`: `@f`'s
        // inputs, and its one scalar loss followed by gradients (a model's
        // own `@smooth` and `@smooth_grad` helpers are no gradient), and
        // the optimizer's step functions.
        let gradient = name.strip_suffix("_grad").and_then(|f| names.iter().position(|n| n == f)).is_some_and(|i| {
            let ((inputs, results), (g_inputs, g_results)) = (signature(functions[i].0), signature(*func));
            let same = |a: &[MlirType], b: &[MlirType]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| unsafe { mlirTypeEqual(*x, *y) })
            };
            results.len() == 1
                && crate::nn::spec_of_type(results[0]).is_ok_and(|s| s.shape.is_empty() && s.dtype.is_float())
                && same(&inputs, &g_inputs)
                && g_results.len() >= 2
                && unsafe { mlirTypeEqual(results[0], g_results[0]) }
        });
        if gradient || matches!(name.as_str(), "train_step" | "train_apply") {
            return Some((unsafe { mlirOperationGetLocation(*func) }, format!("@{name}")));
        }
        // (`hl.slice_backward` is also a forward's zero-padding:
        // `hl-pad-contractions` writes it; `hl.gather_backward` a forward's
        // scatter-add: an imported ScatterElements, `index_add`.)
        let backward = crate::ir::ops_of(*block).into_iter().find(|&o| {
            let n = crate::ir::op_name(o);
            n.ends_with("_backward") && n != "hl.slice_backward" && n != "hl.gather_backward"
        });
        if let Some(b) = backward {
            return Some((unsafe { mlirOperationGetLocation(b) }, format!("'{}' in @{name}", crate::ir::op_name(b))));
        }
    }
    None
}

/// A module lowered to `ll` already: a function holding an `ll` op. The
/// hl passes and `convert-hl-to-ll` refuse it (a second lowering failed on
/// "a value of type memref<...>", autodiff on "'ll.elementwise'").
pub(crate) fn lowered(op: MlirOperation) -> Option<(MlirLocation, String)> {
    crate::ir::functions(op).into_iter().find_map(|(func, block)| {
        let name = crate::ir::string_attr(func, "sym_name").unwrap_or_default();
        crate::ir::ops_of(block)
            .into_iter()
            .find(|&o| crate::ir::op_name(o).starts_with("ll."))
            .map(|o| (unsafe { mlirOperationGetLocation(o) }, format!("'{}' in @{name}", crate::ir::op_name(o))))
    })
}

/// Where the module `op` holds an op of `hl-fuse-elementwise`'s making
/// (a fused body), and which.
pub(crate) fn fused(op: MlirOperation) -> Option<(MlirLocation, String)> {
    crate::ir::functions(op).into_iter().find_map(|(func, block)| {
        let name = crate::ir::string_attr(func, "sym_name").unwrap_or_default();
        crate::ir::ops_of(block)
            .into_iter()
            .find(|&o| crate::ir::op_name(o) == "hl.fused_elementwise")
            .map(|o| (unsafe { mlirOperationGetLocation(o) }, format!("'hl.fused_elementwise' in @{name}")))
    })
}

/// Whether `v` is a tensor or buffer of dynamic (or unknown) shape.
pub(crate) fn dynamic(v: MlirValue) -> bool {
    unsafe {
        let t = mlirValueGetType(v);
        mlirTypeIsAShaped(t) && !mlirShapedTypeHasStaticShape(t)
    }
}

/// Refuses a function `pass` cannot retype as a whole: one of more than
/// one block (branches pass values to block arguments the pass does not
/// follow), an op outside `hl` and `func` that holds a region (`scf.for`'s
/// carried values) or makes a tensor (`tensor.empty`, `arith` on tensors:
/// they state their types and do not infer them again), or, where
/// `static_shapes`, a tensor of dynamic shape. Each was the verifier's
/// complaint about the pass's own output ("type mismatch for bb argument").
pub(crate) fn retypable(pass: &str, func: MlirOperation, static_shapes: bool) -> Result<(), Failure> {
    use crate::ir::{op_name, ops_of};
    let region = unsafe { mlirOperationGetRegion(func, 0) };
    let block = unsafe { mlirRegionGetFirstBlock(region) };
    if block.ptr.is_null() {
        return Ok(());
    }
    let name = crate::ir::string_attr(func, "sym_name").unwrap_or_default();
    if !unsafe { mlirBlockGetNextInRegion(block) }.ptr.is_null() {
        return Err((
            unsafe { mlirOperationGetLocation(func) },
            format!("{pass}: @{name} has more than one block: it retypes straight-line functions (no branches)"),
        ));
    }
    if static_shapes {
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            let a = unsafe { mlirBlockGetArgument(block, i) };
            if dynamic(a) {
                let t = crate::ir::type_text(unsafe { mlirValueGetType(a) });
                return Err((
                    unsafe { mlirOperationGetLocation(func) },
                    format!("{pass}: argument #{i} of @{name} is {t}, of dynamic shape: it retypes static shapes"),
                ));
            }
        }
    }
    for op in ops_of(block) {
        let opname = op_name(op);
        let foreign = !opname.starts_with("hl.") && !opname.starts_with("func.");
        let results: Vec<MlirValue> =
            (0..unsafe { mlirOperationGetNumResults(op) }).map(|r| unsafe { mlirOperationGetResult(op, r) }).collect();
        let tensors = results.iter().any(|&r| unsafe { mlirTypeIsAShaped(mlirValueGetType(r)) });
        if foreign && (unsafe { mlirOperationGetNumRegions(op) } > 0 || tensors) {
            return Err((
                unsafe { mlirOperationGetLocation(op) },
                format!(
                    "{pass}: '{opname}' is not an hl op: it retypes functions of hl ops (and calls), whose types \
                     follow their operands"
                ),
            ));
        }
        if let Some(&r) = results.iter().find(|&&r| static_shapes && dynamic(r)) {
            let t = crate::ir::type_text(unsafe { mlirValueGetType(r) });
            return Err((
                unsafe { mlirOperationGetLocation(op) },
                format!("{pass}: {t} has a dynamic shape: it retypes static shapes"),
            ));
        }
    }
    Ok(())
}

/// The first value of `op` (its results, block arguments and nested ops,
/// all the way down) whose type holds more than [`MAX_TENSOR_BYTES`]: its
/// location and a message. Every pass checks this first, so that no size
/// computation of any pass can overflow.
pub(crate) fn oversized(op: MlirOperation) -> Option<(MlirLocation, String)> {
    let describe = |v: MlirValue| {
        let t = crate::ir::type_text(unsafe { mlirValueGetType(v) });
        format!("{t} is larger than the 1 TiB a tensor may hold")
    };
    unsafe {
        for i in 0..mlirOperationGetNumResults(op) {
            let r = mlirOperationGetResult(op, i);
            if too_large(r) {
                return Some((mlirOperationGetLocation(op), describe(r)));
            }
        }
        for r in 0..mlirOperationGetNumRegions(op) {
            let region = mlirOperationGetRegion(op, r);
            let mut block = mlirRegionGetFirstBlock(region);
            while !block.ptr.is_null() {
                for a in 0..mlirBlockGetNumArguments(block) {
                    let arg = mlirBlockGetArgument(block, a);
                    if too_large(arg) {
                        let (loc, m) = (mlirOperationGetLocation(op), describe(arg));
                        return Some((loc, format!("argument #{a}: {m}")));
                    }
                }
                let mut inner = mlirBlockGetFirstOperation(block);
                while !inner.ptr.is_null() {
                    if let Some(found) = oversized(inner) {
                        return Some(found);
                    }
                    inner = mlirOperationGetNextInBlock(inner);
                }
                block = mlirBlockGetNextInRegion(block);
            }
        }
    }
    None
}
