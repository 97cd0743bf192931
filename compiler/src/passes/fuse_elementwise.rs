//! `hl-fuse-elementwise`: chains of elementwise ops become one
//! `hl.fused_elementwise` (one kernel) with a scalar `arith`/`math` body.
//!
//! Algorithm, per function:
//! 1. Walk the ops in order. An elementwise op joins the group of each
//!    operand's producer that is elementwise and has this op's result shape
//!    (the cost rule: a value that a consumer would broadcast, and so
//!    recompute per element, is materialised instead), provided every other
//!    use of that group's values comes after this op. A value used outside
//!    its group becomes one more result of the fused op (multi-output
//!    fusion: computed once, stored once, never recomputed), so Adam's two
//!    moments and the parameter update are one kernel. A group takes at
//!    most `MOST_FUSED` ops (a longer chain becomes several kernels: the
//!    host compile of one huge kernel grows faster than its size), and
//!    reads at most `MOST_HELD` computed values of its result's size: each
//!    stays alive until the fused op runs, so a gradient summed over many
//!    uses (an unrolled RNN's `T` slices of one tensor, each zero-padded
//!    back to its full size) fused whole held all `T` full-size terms at
//!    once (memory growing with `T^2`, where the running sum holds two).
//! 2. Every group of two or more ops becomes one op at its last op; all its
//!    outside uses come later, so that is legal. Its inputs are the group's
//!    operands from outside, except splat constants, which become scalar
//!    constants of the body; each op becomes its scalar form; it yields
//!    every value used outside the group, in program order.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::{
    ir::{
        self, OpSpec, element_dtype, int_attr, op_loc, op_name, operands, ops_of, producer, spec, splat_value, users,
    },
    types::DType,
};
use melior::ir::{Location, OperationRef};
use mlir_sys::*;
use std::collections::HashMap;

pub(super) fn run(module: OperationRef<'_, '_>, _options: &PassOptions) -> PassResult {
    fuse_elementwise(module.to_raw()).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-fuse-elementwise: {m}"));
        PassFailed
    })
}

const ELEMENTWISE: &[&str] = &[
    "hl.add",
    "hl.sub",
    "hl.mul",
    "hl.div",
    "hl.pow",
    "hl.max",
    "hl.min",
    "hl.neg",
    "hl.abs",
    "hl.exp",
    "hl.log",
    "hl.erf",
    "hl.sin",
    "hl.cos",
    "hl.atan",
    "hl.floor",
    "hl.ceil",
    "hl.round",
    "hl.stop_gradient",
    "hl.sqrt",
    "hl.rsqrt",
    "hl.tanh",
    "hl.sigmoid",
    "hl.relu",
    "hl.silu",
    "hl.gelu",
    "hl.compare",
    "hl.select",
    "hl.cast",
];

/// The most ops one fused group takes (see [`fuse_elementwise`]): far more
/// than a model's elementwise chains (Adam's update, an activation and its
/// gradient), few enough that each kernel compiles in well under a second.
const MOST_FUSED: usize = 64;

/// The most values of its result's size, computed before it (not the
/// function's arguments, parameters or state, which are alive anyway), one
/// fused group reads (see [`fuse_elementwise`]): Adam's update reads four
/// (parameter, gradient, moments); a sum of many gradient terms is cut into
/// kernels of this many, so at most this many are alive at once.
const MOST_HELD: usize = 8;

/// The distinct values `group` reads from outside it that are of
/// `elements` elements and computed there by an op (not an argument, a
/// splat constant, a parameter or state, which live on anyway).
fn held(group: &[MlirOperation], elements: usize) -> usize {
    let inside: std::collections::HashSet<usize> = group.iter().map(|o| o.ptr as usize).collect();
    let mut seen = std::collections::HashSet::new();
    for &op in group {
        for v in operands(op) {
            let Some(p) = producer(v) else { continue };
            if inside.contains(&(p.ptr as usize))
                || matches!(op_name(p).as_str(), "hl.get_param" | "hl.get_state" | "hl.constant")
                || spec(v).shape.iter().product::<usize>() != elements
            {
                continue;
            }
            seen.insert(v.ptr as usize);
        }
    }
    seen.len()
}

pub(super) fn is_elementwise(op: MlirOperation) -> bool {
    ELEMENTWISE.contains(&op_name(op).as_str())
}

/// Fuses every function of `module`; returns the number of groups made.
pub fn fuse_elementwise(module: MlirOperation) -> Result<usize, Failure> {
    let mut made = 0;
    for (_, block) in ir::functions(module) {
        // 1. Grouping: group id per op (by address), groups as op lists.
        let order: HashMap<usize, usize> = ops_of(block).iter().enumerate().map(|(i, o)| (o.ptr as usize, i)).collect();
        let mut group_of: HashMap<usize, usize> = HashMap::new();
        let mut groups: Vec<Vec<MlirOperation>> = Vec::new();
        for op in ops_of(block) {
            if !is_elementwise(op) || unsafe { mlirOperationGetNumResults(op) } != 1 {
                continue;
            }
            let result_shape = spec(unsafe { mlirOperationGetResult(op, 0) }).shape;
            let id = groups.len();
            groups.push(vec![op]);
            group_of.insert(op.ptr as usize, id);
            for v in operands(op) {
                let Some(p) = producer(v) else { continue };
                let Some(&pg) = group_of.get(&(p.ptr as usize)) else { continue };
                if spec(v).shape != result_shape || pg == id {
                    continue;
                }
                // A group stops growing at MOST_FUSED ops: a kernel's host
                // compile grows faster than its body (a chain of 1000 tanh
                // in one kernel took 38 s under clang -O3, 2000 over 120).
                if groups[id].len() + groups[pg].len() > MOST_FUSED {
                    continue;
                }
                let merged: Vec<MlirOperation> = groups[id].iter().chain(&groups[pg]).copied().collect();
                if held(&merged, result_shape.iter().product()) > MOST_HELD {
                    continue;
                }
                // Every outside use of the producer group's values must come
                // after `op`, where the fused op will stand.
                let here = order[&(op.ptr as usize)];
                let later = groups[pg].iter().all(|&m| {
                    users(unsafe { mlirOperationGetResult(m, 0) }).iter().all(|u| {
                        group_of.get(&(u.ptr as usize)) == Some(&pg)
                            || u.ptr == op.ptr
                            || order.get(&(u.ptr as usize)).is_some_and(|&o| o > here)
                    })
                });
                if !later {
                    continue;
                }
                let moved = std::mem::take(&mut groups[pg]);
                for m in &moved {
                    group_of.insert(m.ptr as usize, id);
                }
                groups[id].extend(moved);
            }
        }
        // 2. Build the fused ops, each group in program order.
        for mut group in groups.into_iter().filter(|g| g.len() >= 2) {
            group.sort_by_key(|o| order[&(o.ptr as usize)]);
            build_group(block, &group)?;
            made += 1;
        }
    }
    Ok(made)
}

pub(super) fn build_group(block: MlirBlock, group: &[MlirOperation]) -> Result<(), Failure> {
    let Some(&root) = group.last() else { return Ok(()) };
    let loc = op_loc(root);
    let ctx = unsafe { mlirOperationGetContext(root) };
    let inside: std::collections::HashSet<usize> = group.iter().map(|o| o.ptr as usize).collect();
    // The values used outside the group, in program order: the results.
    let outputs: Vec<MlirValue> = group
        .iter()
        .map(|&op| unsafe { mlirOperationGetResult(op, 0) })
        .filter(|&r| users(r).iter().any(|u| !inside.contains(&(u.ptr as usize))))
        .collect();
    if outputs.is_empty() {
        // Nothing outside uses the group: it is dead, and elementwise ops
        // have no effects, so it goes (a fused op needs a result).
        for &op in group.iter().rev() {
            unsafe { mlirOperationDestroy(op) };
        }
        return Ok(());
    }
    // External inputs (splat constants become body constants).
    let mut inputs: Vec<MlirValue> = Vec::new();
    let mut constants: HashMap<usize, f64> = HashMap::new();
    for &op in group {
        for v in operands(op) {
            if producer(v).is_some_and(|p| inside.contains(&(p.ptr as usize))) {
                continue;
            }
            if let Some(c) = splat_value(v) {
                constants.insert(v.ptr as usize, c);
            } else if !inputs.iter().any(|i| i.ptr == v.ptr) {
                inputs.push(v);
            }
        }
    }
    let scalar_types: Vec<MlirType> =
        inputs.iter().map(|&v| unsafe { mlirShapedTypeGetElementType(mlirValueGetType(v)) }).collect();
    let locs = vec![loc; inputs.len()];
    let body = unsafe { mlirBlockCreate(scalar_types.len() as isize, scalar_types.as_ptr(), locs.as_ptr()) };
    let region = unsafe { mlirRegionCreate() };
    unsafe { mlirRegionAppendOwnedBlock(region, body) };
    let s = Scalar { ctx, block: body, loc };
    let built = (|| -> Result<Vec<MlirValue>, Failure> {
        let mut map: HashMap<usize, MlirValue> = HashMap::new();
        for (i, v) in inputs.iter().enumerate() {
            map.insert(v.ptr as usize, unsafe { mlirBlockGetArgument(body, i as isize) });
        }
        for &op in group {
            let mut args = Vec::new();
            for v in operands(op) {
                let a = match map.get(&(v.ptr as usize)) {
                    Some(&a) => a,
                    None => {
                        let c = constants[&(v.ptr as usize)];
                        let a = s.constant(c, spec(v).dtype)?;
                        map.insert(v.ptr as usize, a);
                        a
                    }
                };
                args.push(a);
            }
            let r = unsafe { mlirOperationGetResult(op, 0) };
            let out = scalar_op(&s, op, &args, spec(r).dtype)?;
            map.insert(r.ptr as usize, out);
        }
        Ok(outputs.iter().map(|r| map[&(r.ptr as usize)]).collect())
    })();
    let yielded = match built {
        Ok(v) => v,
        Err(e) => {
            unsafe { mlirRegionDestroy(region) };
            return Err(e);
        }
    };
    s.op("hl.yield", &yielded, &[], Some(&[]))?;
    let result_types: Vec<MlirType> = outputs.iter().map(|&r| unsafe { mlirValueGetType(r) }).collect();
    let spec_op = OpSpec {
        operands: &inputs,
        results: Some(&result_types),
        regions: &[region],
        ..OpSpec::new("hl.fused_elementwise")
    };
    let fused = ir::create_op(ctx, loc, &spec_op).map_err(|e| (loc, format!("internal error: {e:?}")))?;
    unsafe {
        mlirBlockInsertOwnedOperationBefore(block, root, fused);
        for (i, &r) in outputs.iter().enumerate() {
            mlirValueReplaceAllUsesOfWith(r, mlirOperationGetResult(fused, i as isize));
        }
        for &op in group.iter().rev() {
            mlirOperationDestroy(op);
        }
    }
    Ok(())
}

/// Builds scalar ops at the end of a body block.
struct Scalar {
    ctx: MlirContext,
    block: MlirBlock,
    loc: MlirLocation,
}

impl Scalar {
    fn op(
        &self,
        name: &str,
        args: &[MlirValue],
        attrs: &[(&str, String)],
        results: Option<&[MlirType]>,
    ) -> Result<MlirValue, Failure> {
        let spec =
            OpSpec { operands: args, attributes: attrs, results, verify: name != "hl.yield", ..OpSpec::new(name) };
        let op = ir::create_op(self.ctx, self.loc, &spec)
            .map_err(|e| (self.loc, format!("internal error building '{name}': {e:?}")))?;
        unsafe { mlirBlockAppendOwnedOperation(self.block, op) };
        Ok(if unsafe { mlirOperationGetNumResults(op) } > 0 {
            unsafe { mlirOperationGetResult(op, 0) }
        } else {
            MlirValue { ptr: std::ptr::null() }
        })
    }
    fn ty(&self, dtype: DType) -> Result<MlirType, Failure> {
        ir::parse_type(self.ctx, dtype.mlir()).map_err(|e| (self.loc, format!("{e:?}")))
    }
    fn constant(&self, value: f64, dtype: DType) -> Result<MlirValue, Failure> {
        let text = if dtype.is_float() {
            format!("{} : {}", crate::nn::float_literal(value, dtype), dtype.mlir())
        } else if dtype == DType::I1 {
            (if value != 0.0 { "true" } else { "false" }).to_string()
        } else {
            format!("{} : {}", value as i64, dtype.mlir())
        };
        let ty = self.ty(dtype)?;
        self.op("arith.constant", &[], &[("value", text)], Some(&[ty]))
    }
    /// A constant of a formula (GELU's), for a body of element type
    /// `dtype`: a 16-bit float body gets it as an f32 constant cast to
    /// `dtype`. The body computes in f32 (`codegen::widen_body` drops the
    /// cast), so it keeps the f32 value, as the GEMM epilogue's GELU and
    /// PyTorch's 16-bit kernels do; rounded to bf16, tanh-GELU's sqrt(2/pi)
    /// was off by 0.13%, which the negative tail amplifies to 1-2%.
    fn formula_constant(&self, value: f64, dtype: DType) -> Result<MlirValue, Failure> {
        if matches!(dtype, DType::BF16 | DType::F16) {
            self.cast("arith.truncf", self.constant(value, DType::F32)?, dtype)
        } else {
            self.constant(value, dtype)
        }
    }
    fn bin(&self, name: &str, a: MlirValue, b: MlirValue) -> Result<MlirValue, Failure> {
        self.op(name, &[a, b], &[], None)
    }
    fn un(&self, name: &str, a: MlirValue) -> Result<MlirValue, Failure> {
        self.op(name, &[a], &[], None)
    }
    fn cast(&self, name: &str, a: MlirValue, to: DType) -> Result<MlirValue, Failure> {
        let ty = self.ty(to)?;
        self.op(name, &[a], &[], Some(&[ty]))
    }
}

/// The element type of a scalar or tensor value (hl's types only reach
/// here, so an unknown one reads as i1 and takes the integer paths).
fn dtype_of(v: MlirValue) -> DType {
    element_dtype(unsafe { mlirValueGetType(v) }).unwrap_or(DType::I1)
}

/// The scalar form of one elementwise hl op.
fn scalar_op(s: &Scalar, op: MlirOperation, a: &[MlirValue], out: DType) -> Result<MlirValue, Failure> {
    let name = op_name(op);
    let float = dtype_of(a[0]).is_float();
    let pick = |f: &str, i: &str| if float { f.to_string() } else { i.to_string() };
    let v = match name.as_str() {
        "hl.add" => s.bin(&pick("arith.addf", "arith.addi"), a[0], a[1])?,
        "hl.sub" => s.bin(&pick("arith.subf", "arith.subi"), a[0], a[1])?,
        "hl.mul" => s.bin(&pick("arith.mulf", "arith.muli"), a[0], a[1])?,
        "hl.div" if float => s.bin("arith.divf", a[0], a[1])?,
        // A kernel's integer division by 0 has no value (undefined, not a
        // NaN), so a fused body cannot hold one.
        "hl.div" => {
            return Err((
                unsafe { mlir_sys::mlirOperationGetLocation(op) },
                format!(
                    "hl.div of {:?} integers is not supported (a division by 0 has no value): cast to a float type",
                    dtype_of(a[0])
                ),
            ));
        }
        "hl.pow" => s.bin("math.powf", a[0], a[1])?,
        "hl.max" => s.bin(&pick("arith.maximumf", "arith.maxsi"), a[0], a[1])?,
        "hl.min" => s.bin(&pick("arith.minimumf", "arith.minsi"), a[0], a[1])?,
        "hl.neg" if float => s.un("arith.negf", a[0])?,
        "hl.neg" => s.bin("arith.subi", s.constant(0.0, out)?, a[0])?,
        "hl.abs" => s.un(&pick("math.absf", "math.absi"), a[0])?,
        "hl.exp" => s.un("math.exp", a[0])?,
        "hl.log" => s.un("math.log", a[0])?,
        "hl.erf" => s.un("math.erf", a[0])?,
        "hl.sin" => s.un("math.sin", a[0])?,
        "hl.cos" => s.un("math.cos", a[0])?,
        "hl.atan" => s.un("math.atan", a[0])?,
        "hl.floor" => s.un("math.floor", a[0])?,
        "hl.ceil" => s.un("math.ceil", a[0])?,
        "hl.round" => s.un("math.roundeven", a[0])?,
        // (Its work was done: differentiation passed no gradient through it.)
        "hl.stop_gradient" => a[0],
        "hl.sqrt" => s.un("math.sqrt", a[0])?,
        "hl.rsqrt" => s.un("math.rsqrt", a[0])?,
        "hl.tanh" => s.un("math.tanh", a[0])?,
        "hl.relu" => s.bin("arith.maximumf", a[0], s.constant(0.0, out)?)?,
        "hl.sigmoid" => sigmoid(s, a[0], out)?,
        "hl.silu" => s.bin("arith.mulf", a[0], sigmoid(s, a[0], out)?)?,
        "hl.gelu" => {
            let x = a[0];
            let half_x = s.bin("arith.mulf", x, s.constant(0.5, out)?)?;
            let inner = if int_attr(op, "approximate") == Some(1) {
                let x3 = s.bin("arith.mulf", s.bin("arith.mulf", x, x)?, x)?;
                let poly = s.bin("arith.addf", x, s.bin("arith.mulf", x3, s.formula_constant(0.044715, out)?)?)?;
                let k = (2.0 / std::f64::consts::PI).sqrt();
                s.un("math.tanh", s.bin("arith.mulf", poly, s.formula_constant(k, out)?)?)?
            } else {
                s.un("math.erf", s.bin("arith.mulf", x, s.formula_constant(std::f64::consts::FRAC_1_SQRT_2, out)?)?)?
            };
            s.bin("arith.mulf", half_x, s.bin("arith.addf", inner, s.constant(1.0, out)?)?)?
        }
        "hl.compare" => {
            let p = int_attr(op, "predicate").unwrap_or(0);
            // eq ne lt le gt ge -> ordered float predicates (ne: unordered,
            // true on NaN), signed integer predicates
            let (fp, ip) = [(1, 0), (13, 1), (4, 2), (5, 3), (2, 4), (3, 5)][p.clamp(0, 5) as usize];
            if float {
                s.op("arith.cmpf", &[a[0], a[1]], &[("predicate", format!("{fp} : i64"))], None)?
            } else {
                s.op("arith.cmpi", &[a[0], a[1]], &[("predicate", format!("{ip} : i64"))], None)?
            }
        }
        "hl.select" => s.op("arith.select", &[a[0], a[1], a[2]], &[], None)?,
        "hl.cast" => cast(s, a[0], out)?,
        other => return Err((op_loc(op), format!("internal error: '{other}' has no scalar form"))),
    };
    Ok(v)
}

fn sigmoid(s: &Scalar, x: MlirValue, t: DType) -> Result<MlirValue, Failure> {
    let e = s.un("math.exp", s.un("arith.negf", x)?)?;
    s.bin("arith.divf", s.constant(1.0, t)?, s.bin("arith.addf", s.constant(1.0, t)?, e)?)
}

/// The attribute of a `truncf` that an `hl.cast` made (not a formula's
/// constant): a 16-bit body computed in f32 still rounds there.
pub(crate) const ROUNDS: &str = "aicf.rounds";

/// hl.cast's semantics on a scalar.
fn cast(s: &Scalar, x: MlirValue, to: DType) -> Result<MlirValue, Failure> {
    let from = dtype_of(x);
    let width = |d: DType| match d {
        DType::F16 | DType::BF16 => 16,
        DType::F32 | DType::I32 => 32,
        DType::F64 | DType::I64 => 64,
        DType::I1 => 1,
    };
    if from == to {
        return Ok(x);
    }
    match (from.is_float(), to.is_float()) {
        // Between the two 16-bit types (neither holds the other): through
        // f32, which holds both exactly.
        (true, true) if matches!((from, to), (DType::BF16, DType::F16) | (DType::F16, DType::BF16)) => {
            let wide = s.cast("arith.extf", x, DType::F32)?;
            s.op("arith.truncf", &[wide], &[(ROUNDS, "unit".into())], Some(&[s.ty(to)?]))
        }
        (true, true) if width(to) > width(from) => s.cast("arith.extf", x, to),
        // A narrowing the model asked for, marked so that the f32 body
        // still rounds there (`codegen::widen_body`).
        (true, true) => s.op("arith.truncf", &[x], &[(ROUNDS, "unit".into())], Some(&[s.ty(to)?])),
        (true, false) if to == DType::I1 => {
            s.op("arith.cmpf", &[x, s.constant(0.0, from)?], &[("predicate", "13 : i64".into())], None)
        }
        (true, false) => s.cast("arith.fptosi", x, to),
        (false, true) if from == DType::I1 => s.cast("arith.uitofp", x, to),
        (false, true) => s.cast("arith.sitofp", x, to),
        (false, false) if to == DType::I1 => {
            s.op("arith.cmpi", &[x, s.constant(0.0, from)?], &[("predicate", "1 : i64".into())], None)
        }
        (false, false) if from == DType::I1 => s.cast("arith.extui", x, to),
        (false, false) if width(to) > width(from) => s.cast("arith.extsi", x, to),
        (false, false) => s.cast("arith.trunci", x, to),
    }
}
