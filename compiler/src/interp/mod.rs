//! The reference interpreter: runs any `hl` function on the CPU, simply and
//! obviously correctly, as the numerical oracle every compiled path is
//! tested against. It is not AICF's execution path (that is compiled
//! kernels); it favours clarity over speed.
//!
//! Values are [`Array`]s of `f64` tagged with their dtype; every float
//! result is rounded to its dtype, so an `f32` function computes in `f32`
//! and an `f64` function in `f64`. Parameters are bound by name
//! (`hl.get_param @fc1.weight` reads `params["fc1.weight"]`).

mod array;
mod kernels;

pub use array::Array;

use crate::{
    context::describe_location,
    ir::{self, has as unit, op_name, string_attr},
    types::DType,
};
use kernels::Window;
use melior::ir::{Location, Module};
use mlir_sys::*;
use std::collections::HashMap;

/// Why a function could not be run, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{location}: '{op}': {message}")]
pub struct InterpError {
    pub location: String,
    pub op: String,
    pub message: String,
}

pub type Result<T, E = InterpError> = std::result::Result<T, E>;

/// Runs functions of one verified module.
pub struct Interpreter<'m, 'c> {
    module: &'m Module<'c>,
    params: HashMap<String, Array>,
}

impl<'m, 'c> Interpreter<'m, 'c> {
    pub fn new(module: &'m Module<'c>) -> Self {
        Interpreter { module, params: HashMap::new() }
    }

    /// Binds (or replaces) the value of parameter or optimizer state `name`
    /// (`hl.param` and `hl.state` share the module's symbol names).
    pub fn set_param(&mut self, name: &str, value: Array) {
        self.params.insert(name.to_string(), value);
    }

    pub fn param(&self, name: &str) -> Option<&Array> {
        self.params.get(name)
    }

    /// Runs `@name` on `args`, returning its results.
    pub fn run(&self, name: &str, args: &[Array]) -> Result<Vec<Array>> {
        let func = self.find_function(name)?;
        self.call(func, args)
    }

    fn find_function(&self, name: &str) -> Result<MlirOperation> {
        let body = self.module.body();
        let mut op = unsafe { mlirBlockGetFirstOperation(body.to_raw()) };
        while !op.ptr.is_null() {
            if op_name(op) == "func.func" && string_attr(op, "sym_name").as_deref() == Some(name) {
                return Ok(op);
            }
            op = unsafe { mlirOperationGetNextInBlock(op) };
        }
        Err(InterpError {
            location: "<module>".into(),
            op: "func.call".into(),
            message: format!("no function @{name}"),
        })
    }

    fn call(&self, func: MlirOperation, args: &[Array]) -> Result<Vec<Array>> {
        let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)) };
        let nargs = unsafe { mlirBlockGetNumArguments(block) } as usize;
        let name = string_attr(func, "sym_name").unwrap_or_default();
        let fail = |message: String| InterpError { location: format!("@{name}"), op: "func.func".into(), message };
        if args.len() != nargs {
            return Err(fail(format!("takes {nargs} arguments, got {}", args.len())));
        }
        let mut env: HashMap<usize, Array> = HashMap::new();
        for (i, a) in args.iter().enumerate() {
            let v = unsafe { mlirBlockGetArgument(block, i as isize) };
            let (shape, dtype) = type_of(v).map_err(&fail)?;
            if a.shape != shape || a.dtype != dtype {
                return Err(fail(format!("argument {i} must be {shape:?} {dtype:?}, got {:?} {:?}", a.shape, a.dtype)));
            }
            env.insert(v.ptr as usize, a.clone());
        }
        let mut op = unsafe { mlirBlockGetFirstOperation(block) };
        while !op.ptr.is_null() {
            let name = op_name(op);
            let operands: Vec<&Array> = (0..unsafe { mlirOperationGetNumOperands(op) })
                .map(|i| {
                    let v = unsafe { mlirOperationGetOperand(op, i) };
                    env.get(&(v.ptr as usize)).ok_or_else(|| error(op, "an operand has no value".into()))
                })
                .collect::<Result<_>>()?;
            if name == "func.return" {
                return Ok(operands.into_iter().cloned().collect());
            }
            let results = self.eval(op, &name, &operands).map_err(|message| error(op, message))?;
            for (i, r) in results.into_iter().enumerate() {
                env.insert(unsafe { mlirOperationGetResult(op, i as isize) }.ptr as usize, r);
            }
            op = unsafe { mlirOperationGetNextInBlock(op) };
        }
        Err(fail("has no func.return".into()))
    }

    /// One op. Errors are plain messages; the caller adds the location.
    fn eval(&self, op: MlirOperation, name: &str, x: &[&Array]) -> Result<Vec<Array>, String> {
        let results = unsafe { mlirOperationGetNumResults(op) } as usize;
        let (shape, dtype) =
            if results > 0 { type_of(unsafe { mlirOperationGetResult(op, 0) })? } else { (Vec::new(), DType::F32) };
        let map2 = |f: fn(f64, f64) -> f64| kernels::map_n(&x[..2], dtype, |a| f(a[0], a[1]));
        let map1 = |f: &dyn Fn(f64) -> f64| kernels::map_n(&x[..1], dtype, |a| f(a[0]));
        let int = !dtype.is_float();
        let axes = |key: &str| -> Result<Vec<usize>, String> {
            Ok(i64_array(op, key)?.into_iter().map(|a| a as usize).collect())
        };
        let window = |kernel: [usize; 2], dilation: [usize; 2]| -> Result<Window, String> {
            Ok(Window {
                kernel,
                stride: pair(&axes("stride")?),
                padding: pair(&axes("padding")?),
                dilation,
                nhwc: int_attr(op, "layout").unwrap_or(0) == 1,
            })
        };
        let out = match name {
            // A function evaluated by itself writes no state.
            "hl.set_state" => return Ok(vec![]),
            // The interpreter is one replica alone: the weighted sum over
            // it is its own input times its weight.
            "hl.all_reduce" => map2(|a, w| a * w),
            "hl.constant" => constant(op, shape.clone(), dtype)?,
            "hl.get_param" | "hl.get_state" => {
                let p = flat_symbol(op, "name")?;
                let v = self.params.get(&p).ok_or_else(|| format!("parameter @{p} has no value bound"))?;
                if v.shape != shape || v.dtype != dtype {
                    return Err(format!(
                        "parameter @{p} is bound to {:?} {:?}, the IR reads {shape:?} {dtype:?}",
                        v.shape, v.dtype
                    ));
                }
                v.clone()
            }
            "hl.add" => map2(|a, b| a + b),
            "hl.sub" => map2(|a, b| a - b),
            "hl.mul" => map2(|a, b| a * b),
            "hl.div" if int => {
                if x[1].data.contains(&0.0) {
                    return Err("integer division by zero".into());
                }
                map2(|a, b| (a / b).trunc())
            }
            "hl.div" => map2(|a, b| a / b),
            "hl.pow" => map2(f64::powf),
            "hl.max" => map2(kernels::nan_max),
            "hl.min" => map2(kernels::nan_min),
            "hl.compare" => {
                let p = int_attr(op, "predicate")?;
                kernels::map_n(&x[..2], DType::I1, move |a| {
                    let (l, r) = (a[0], a[1]);
                    let t = match p {
                        0 => l == r,
                        1 => l != r,
                        2 => l < r,
                        3 => l <= r,
                        4 => l > r,
                        _ => l >= r,
                    };
                    t as i32 as f64
                })
            }
            "hl.select" => kernels::map_n(x, dtype, |a| if a[0] != 0.0 { a[1] } else { a[2] }),
            "hl.neg" => map1(&|v| -v),
            "hl.abs" => map1(&f64::abs),
            "hl.exp" => map1(&f64::exp),
            "hl.log" => map1(&f64::ln),
            "hl.sqrt" => map1(&f64::sqrt),
            "hl.erf" => map1(&libm::erf),
            "hl.sin" => map1(&f64::sin),
            "hl.cos" => map1(&f64::cos),
            "hl.atan" => map1(&f64::atan),
            "hl.floor" => map1(&f64::floor),
            "hl.ceil" => map1(&f64::ceil),
            "hl.round" => map1(&f64::round_ties_even),
            "hl.stop_gradient" => map1(&|v| v),
            "hl.rsqrt" => map1(&|v| 1.0 / v.sqrt()),
            "hl.tanh" => map1(&f64::tanh),
            "hl.sigmoid" => map1(&kernels::sigmoid),
            "hl.relu" => map1(&|v| if v > 0.0 || v.is_nan() { v } else { 0.0 }),
            "hl.silu" => map1(&|v| v * kernels::sigmoid(v)),
            "hl.gelu" => {
                let tanh_form = int_attr(op, "approximate").unwrap_or(0) == 1;
                map1(&move |v| kernels::gelu(v, tanh_form))
            }
            "hl.cast" => Array::from_parts(shape.clone(), dtype, x[0].data.clone()),
            "hl.matmul" => kernels::matmul(x[0], x[1], unit(op, "transpose_lhs"), unit(op, "transpose_rhs"), dtype),
            "hl.linear" => kernels::linear(x[0], x[1], x.get(2).copied()),
            "hl.gemm" => {
                let seg = i32_array(op, "operandSegmentSizes")?;
                let mut next = 2;
                let mut take = |present: i64| {
                    (present > 0).then(|| {
                        next += 1;
                        x[next - 1]
                    })
                };
                let (bias, mask, residual) = (take(seg[2]), take(seg[3]), take(seg[4]));
                let (tl, tr) = (unit(op, "transpose_lhs"), unit(op, "transpose_rhs"));
                let mut y = if x[1].rank() == 2 && x[0].rank() > 2 {
                    let k = x[0].shape.last().copied().unwrap_or(1);
                    let rows = x[0].len() / k.max(1);
                    let flat = Array { shape: vec![rows, k], ..x[0].clone() };
                    let mut y = kernels::matmul(&flat, x[1], false, tr, dtype);
                    y.shape = shape.clone();
                    y
                } else {
                    kernels::matmul(x[0], x[1], tl, tr, dtype)
                };
                let alpha = float_attr(op, "alpha").unwrap_or(1.0);
                let act = int_attr(op, "act").unwrap_or(0);
                let n = *shape.last().unwrap_or(&1);
                for (i, v) in y.data.iter_mut().enumerate() {
                    let mut t = alpha * *v + bias.map_or(0.0, |b| b.data[i % n.max(1)]);
                    t = match act {
                        1 => {
                            if t > 0.0 || t.is_nan() {
                                t
                            } else {
                                0.0
                            }
                        }
                        2 => kernels::gelu(t, false),
                        3 => kernels::gelu(t, true),
                        4 => t * kernels::sigmoid(t),
                        5 => t.tanh(),
                        6 => kernels::sigmoid(t),
                        _ => t,
                    };
                    // NaN in the mask counts as not positive.
                    if mask.is_some_and(|m| m.data[i].partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)) {
                        t = 0.0;
                    }
                    *v = t + residual.map_or(0.0, |r| r.data[i]);
                }
                y.round();
                if unit(op, "sum_lhs") {
                    // sum_k op(lhs)[m, k]: over the stored lhs's rows when transposed
                    let axis = if tl { 0 } else { 1 };
                    let mut s = kernels::reduce(x[0], &[axis], false, 0.0, |a, v| a + v, |a, _| a);
                    s.round();
                    return Ok(vec![y, s]);
                }
                y
            }
            "hl.reduce_sum" => kernels::reduce(x[0], &axes("axes")?, unit(op, "keepdim"), 0.0, |a, v| a + v, |a, _| a),
            "hl.reduce_mean" => {
                kernels::reduce(x[0], &axes("axes")?, unit(op, "keepdim"), 0.0, |a, v| a + v, |a, n| a / n as f64)
            }
            "hl.reduce_max" => kernels::reduce(
                x[0],
                &axes("axes")?,
                unit(op, "keepdim"),
                f64::NEG_INFINITY,
                kernels::nan_max,
                |a, _| a,
            ),
            "hl.argmax" => kernels::argmax(x[0], int_attr(op, "axis")? as usize, unit(op, "keepdim")),
            "hl.softmax" => kernels::softmax(x[0], int_attr(op, "axis")? as usize, false),
            "hl.log_softmax" => kernels::softmax(x[0], int_attr(op, "axis")? as usize, true),
            "hl.layer_norm" | "hl.rms_norm" => {
                let segments = i32_array(op, "operandSegmentSizes").unwrap_or_else(|_| vec![1, (x.len() > 1) as i64]);
                let w = (segments.get(1).copied().unwrap_or(0) > 0).then(|| x[1]);
                let b = (segments.get(2).copied().unwrap_or(0) > 0).then(|| x[x.len() - 1]);
                let dims = int_attr(op, "dims")? as usize;
                let eps = float_attr(op, "eps")?;
                kernels::normalize(x[0], w, b, dims, eps, name == "hl.layer_norm")
            }
            "hl.softmax_backward" => {
                kernels::softmax_backward(x[0], x[1], int_attr(op, "axis")? as usize, unit(op, "log"))
            }
            "hl.norm_backward" => {
                let dims = int_attr(op, "dims")? as usize;
                let (eps, rms, bias) = (float_attr(op, "eps")?, unit(op, "rms"), unit(op, "bias"));
                return Ok(kernels::norm_backward(x[0], x[1], x.get(2).copied(), dims, eps, !rms, bias));
            }
            "hl.gather_backward" => kernels::gather_backward(x[0], x[1], int_attr(op, "axis")? as usize, &shape)?,
            "hl.slice_backward" => kernels::slice_backward(x[0], &shape, &axes("start")?, &axes("strides")?),
            "hl.cross_entropy" => {
                let sum = int_attr(op, "reduction").unwrap_or(0) == 1;
                kernels::cross_entropy(x[0], x[1], sum, int_attr(op, "ignore_index").ok())?
            }
            "hl.cross_entropy_backward" => {
                let sum = int_attr(op, "reduction").unwrap_or(0) == 1;
                kernels::cross_entropy_backward(x[0], x[1], scalar(x[2])?, sum, int_attr(op, "ignore_index").ok())?
            }
            "hl.softmax_cross_entropy" => {
                let sum = int_attr(op, "reduction").unwrap_or(0) == 1;
                let ignore = int_attr(op, "ignore_index").ok();
                // `classes`: the rows' first entries are the classes, the
                // rest padding (zero gradient).
                let stride = x[0].shape.last().copied().unwrap_or(1).max(1);
                let classes = int_attr(op, "classes").map_or(stride as i64, |c| c);
                if classes < 1 || classes as usize > stride {
                    return Err(format!("classes = {classes} outside [1, {stride}]").into());
                }
                let classes = classes as usize;
                // Computed in the loss's type (f32 for 16-bit logits, or
                // theirs: the 16-bit values are exact in it); the gradient
                // rounded to the logits' type after.
                let mut narrowed = x[0].shape.clone();
                *narrowed.last_mut().ok_or("cross-entropy of a scalar")? = classes;
                let data = x[0].data.chunks(stride).flat_map(|row| row[..classes].iter().copied()).collect();
                let logits = Array::from_parts(narrowed, x[2].dtype, data);
                let loss = kernels::cross_entropy(&logits, x[1], sum, ignore)?;
                let grad = kernels::cross_entropy_backward(&logits, x[1], scalar(x[2])?, sum, ignore)?;
                let mut data = vec![0.0; x[0].len()];
                for (row, g) in data.chunks_mut(stride).zip(grad.data.chunks(classes)) {
                    row[..classes].copy_from_slice(g);
                }
                return Ok(vec![loss, Array::from_parts(x[0].shape.clone(), x[0].dtype, data)]);
            }
            "hl.mse_loss" => {
                let sum = int_attr(op, "reduction").unwrap_or(0) == 1;
                let total: f64 = x[0].data.iter().zip(&x[1].data).map(|(a, b)| (a - b) * (a - b)).sum();
                Array::scalar(if sum { total } else { total / x[0].len() as f64 }, dtype)
            }
            "hl.reshape" => Array::from_parts(shape.clone(), dtype, x[0].data.clone()),
            "hl.transpose" => kernels::permute(x[0], &axes("permutation")?),
            "hl.broadcast_to" => {
                let target = Array::zeros(shape.clone(), dtype);
                kernels::map_n(&[x[0], &target], dtype, |a| a[0])
            }
            "hl.concat" => kernels::concat(x, int_attr(op, "axis")? as usize),
            "hl.slice" => kernels::slice(x[0], &axes("start")?, &axes("limit")?, &axes("strides")?),
            "hl.gather" => kernels::gather(x[0], x[1], int_attr(op, "axis")? as usize)?,
            "hl.conv2d" => {
                let k = [x[1].shape[2], x[1].shape[3]];
                let win = window(k, pair(&axes("dilation")?))?;
                kernels::conv2d(x[0], x[1], x.get(2).copied(), &win, int_attr(op, "groups")? as usize)
            }
            "hl.conv2d_backward_input" | "hl.conv2d_backward_weight" => {
                let input = name == "hl.conv2d_backward_input";
                let (x_shape, w_shape) =
                    if input { (shape.clone(), x[1].shape.clone()) } else { (x[1].shape.clone(), shape.clone()) };
                let win = window([w_shape[2], w_shape[3]], pair(&axes("dilation")?))?;
                let groups = int_attr(op, "groups")? as usize;
                let (wt, xv) = if input { (Some(x[1]), None) } else { (None, Some(x[1])) };
                let (dx, dw) = kernels::conv2d_backward(x[0], xv, wt, &x_shape, &w_shape, &win, groups);
                if input { dx } else { dw }
            }
            "hl.max_pool2d_backward" | "hl.avg_pool2d_backward" => {
                let win = window(pair(&axes("kernel")?), [1, 1])?;
                kernels::pool2d_backward(x[0], x[1], &win, name == "hl.max_pool2d_backward")
            }
            "hl.max_pool2d" | "hl.avg_pool2d" => {
                let win = window(pair(&axes("kernel")?), [1, 1])?;
                kernels::pool2d(x[0], &win, name == "hl.max_pool2d")
            }
            "hl.attention" => kernels::attention(x[0], x[1], x[2], unit(op, "causal"), float_attr(op, "scale").ok()),
            "hl.attention_backward" => {
                let (causal, scale) = (unit(op, "causal"), float_attr(op, "scale").ok());
                return Ok(kernels::attention_backward(x[0], x[1], x[2], x[3], x[4], causal, scale));
            }
            "hl.dropout" => {
                let p = float_attr(op, "p")?;
                let stream = int_attr(op, "stream")? as u64;
                kernels::dropout(x[0], scalar(x[1])? as i64 as u64, scalar(x[2])? as i64 as u64, p, stream)
            }
            "hl.random_like" => {
                let normal = string_attr(op, "kind").as_deref() == Some("normal");
                let (a, b) = (float_attr(op, "a")?, float_attr(op, "b")?);
                let stream = int_attr(op, "stream")? as u64;
                let (seed, offset) = (scalar(x[1])? as i64 as u64, scalar(x[2])? as i64 as u64);
                kernels::random_like(x[0], seed, offset, normal, a, b, stream)
            }
            "hl.fused_elementwise" => return fused_elementwise(op, x, &result_specs(op, 0..results)),
            "hl.multi_tensor_apply" => {
                // group g: inputs [g*k, (g+1)*k), results [g*m, (g+1)*m)
                let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
                let k = unsafe { mlirBlockGetNumArguments(block) } as usize;
                let m = results / (x.len() / k.max(1)).max(1);
                let mut out = Vec::with_capacity(results);
                for (g, group) in x.chunks(k.max(1)).enumerate() {
                    out.extend(fused_elementwise(op, group, &result_specs(op, g * m..(g + 1) * m))?);
                }
                return Ok(out);
            }
            "func.call" => {
                let callee = flat_symbol(op, "callee")?;
                let func = self.find_function(&callee).map_err(|e| e.message)?;
                let args: Vec<Array> = x.iter().map(|a| (*a).clone()).collect();
                return self.call(func, &args).map_err(|e| e.to_string());
            }
            other => return Err(format!("the reference interpreter does not implement '{other}'")),
        };
        if out.shape != shape || out.dtype != dtype {
            return Err(format!("computed {:?} {:?} but the IR says {shape:?} {dtype:?}", out.shape, out.dtype));
        }
        Ok(vec![out])
    }
}

/// The shapes and dtypes of `op`'s results in `range`.
fn result_specs(op: MlirOperation, range: std::ops::Range<usize>) -> Vec<(Vec<usize>, DType)> {
    range
        .map(|i| {
            let s = ir::spec(unsafe { mlirOperationGetResult(op, i as isize) });
            (s.shape, s.dtype)
        })
        .collect()
}

/// Runs the elementwise body of `op` once per element of `results` (one
/// shape; one dtype each) over the inputs `x`.
fn fused_elementwise(op: MlirOperation, x: &[&Array], results: &[(Vec<usize>, DType)]) -> Result<Vec<Array>, String> {
    let shape = results.first().map(|r| r.0.clone()).ok_or("the fused op has no results")?;
    // Read the body once: every value gets a slot; constants are evaluated
    // here, the other ops once per element below.
    struct Step {
        op: MlirOperation,
        name: String,
        args: Vec<usize>,
        result: usize,
        dtype: DType,
    }
    let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
    let mut slot_of: HashMap<usize, usize> = HashMap::new();
    let mut slots: Vec<f64> = Vec::new();
    let mut slot = |v: MlirValue, slots: &mut Vec<f64>| {
        *slot_of.entry(ir::key(v)).or_insert_with(|| {
            slots.push(0.0);
            slots.len() - 1
        })
    };
    let nargs = unsafe { mlirBlockGetNumArguments(block) } as usize;
    for i in 0..nargs {
        slot(unsafe { mlirBlockGetArgument(block, i as isize) }, &mut slots);
    }
    let mut steps = Vec::new();
    let mut yielded = None;
    for o in ir::ops_of(block) {
        let name = op_name(o);
        let args: Vec<usize> = ir::operands(o).into_iter().map(|v| slot(v, &mut slots)).collect();
        if name == "hl.yield" {
            yielded = Some(args);
            break;
        }
        let r = unsafe { mlirOperationGetResult(o, 0) };
        let (result, rt) = (slot(r, &mut slots), scalar_dtype(unsafe { mlirValueGetType(r) }));
        if name == "arith.constant" {
            slots[result] = array::round_scalar(eval_scalar(o, &name, &[], rt)?, rt);
        } else {
            steps.push(Step { op: o, name, args, result, dtype: rt });
        }
    }
    let yielded = yielded.ok_or("the fused body has no terminator")?;
    if yielded.len() != results.len() {
        return Err(format!("the fused body yields {} scalars for {} results", yielded.len(), results.len()));
    }
    let strides: Vec<Vec<usize>> = x.iter().map(|a| array::strides(&a.shape)).collect();
    let n: usize = shape.iter().product();
    let mut idx = vec![0; shape.len()];
    let mut vals = Vec::new();
    let mut data: Vec<Vec<f64>> = vec![Vec::with_capacity(n); results.len()];
    for i in 0..n {
        array::unravel(i, &shape, &mut idx);
        for (k, a) in x.iter().enumerate() {
            slots[k] = a.data[array::broadcast_index(&idx, &a.shape, &strides[k])];
        }
        for step in &steps {
            vals.clear();
            vals.extend(step.args.iter().map(|&a| slots[a]));
            let v = eval_scalar(step.op, &step.name, &vals, step.dtype)?;
            slots[step.result] = array::round_scalar(v, step.dtype);
        }
        for (d, &y) in data.iter_mut().zip(&yielded) {
            d.push(slots[y]);
        }
    }
    Ok(results.iter().zip(data).map(|((s, dtype), d)| Array::from_parts(s.clone(), *dtype, d)).collect())
}

fn scalar_dtype(t: MlirType) -> DType {
    ir::element_dtype(t).unwrap_or(DType::I1)
}

/// One scalar `arith` / `math` op of a fused body.
fn eval_scalar(op: MlirOperation, name: &str, v: &[f64], out: DType) -> Result<f64, String> {
    let b = |t: bool| if t { 1.0 } else { 0.0 };
    Ok(match name {
        "arith.constant" => {
            let a = attr(op, "value")?;
            unsafe {
                if mlirAttributeIsAFloat(a) {
                    mlirFloatAttrGetValueDouble(a)
                } else if mlirAttributeIsABool(a) {
                    b(mlirBoolAttrGetValue(a))
                } else {
                    mlirIntegerAttrGetValueInt(a) as f64
                }
            }
        }
        "arith.addf" | "arith.addi" => v[0] + v[1],
        "arith.subf" | "arith.subi" => v[0] - v[1],
        "arith.mulf" | "arith.muli" => v[0] * v[1],
        "arith.divf" => v[0] / v[1],
        "arith.divsi" => {
            if v[1] == 0.0 {
                return Err("integer division by zero".into());
            }
            (v[0] / v[1]).trunc()
        }
        "arith.maximumf" => kernels::nan_max(v[0], v[1]),
        "arith.minimumf" => kernels::nan_min(v[0], v[1]),
        "arith.maxsi" => v[0].max(v[1]),
        "arith.minsi" => v[0].min(v[1]),
        "arith.negf" => -v[0],
        "arith.select" => {
            if v[0] != 0.0 {
                v[1]
            } else {
                v[2]
            }
        }
        "arith.cmpf" | "arith.cmpi" => {
            let p = int_attr(op, "predicate")?;
            let (l, r) = (v[0], v[1]);
            let unordered = l.is_nan() || r.is_nan();
            b(if name == "arith.cmpf" {
                match p {
                    1 => l == r,
                    2 => l > r,
                    3 => l >= r,
                    4 => l < r,
                    5 => l <= r,
                    13 => unordered || l != r,
                    _ => return Err(format!("cmpf predicate {p} is not interpreted")),
                }
            } else {
                match p {
                    0 => l == r,
                    1 => l != r,
                    2 => l < r,
                    3 => l <= r,
                    4 => l > r,
                    5 => l >= r,
                    _ => return Err(format!("cmpi predicate {p} is not interpreted")),
                }
            })
        }
        "arith.extf" | "arith.truncf" | "arith.sitofp" | "arith.uitofp" | "arith.extsi" | "arith.extui"
        | "arith.trunci" => v[0],
        "arith.fptosi" => v[0].trunc(),
        "math.powf" => v[0].powf(v[1]),
        "math.absf" | "math.absi" => v[0].abs(),
        "math.exp" => v[0].exp(),
        "math.log" => v[0].ln(),
        "math.erf" => libm::erf(v[0]),
        "math.sin" => v[0].sin(),
        "math.cos" => v[0].cos(),
        "math.atan" => v[0].atan(),
        "math.floor" => v[0].floor(),
        "math.ceil" => v[0].ceil(),
        "math.roundeven" => v[0].round_ties_even(),
        "math.sqrt" => v[0].sqrt(),
        "math.rsqrt" => 1.0 / v[0].sqrt(),
        "math.tanh" => v[0].tanh(),
        other => return Err(format!("the reference interpreter does not implement '{other}' in a fused body")),
    })
    .map(|x| if out == DType::I1 { b(x != 0.0) } else { x })
}

fn pair(v: &[usize]) -> [usize; 2] {
    [v.first().copied().unwrap_or(1), v.get(1).copied().unwrap_or(1)]
}

fn error(op: MlirOperation, message: String) -> InterpError {
    let location = describe_location(unsafe { Location::from_raw(mlirOperationGetLocation(op)) });
    InterpError { location, op: op_name(op), message }
}

/// The value of a one-element operand (verified IR gives one).
fn scalar(a: &Array) -> Result<f64, String> {
    a.item().ok_or_else(|| format!("expected a one-element operand, got shape {:?}", a.shape))
}

fn missing(key: &str) -> String {
    format!("missing or mistyped attribute '{key}'")
}

fn attr(op: MlirOperation, key: &str) -> Result<MlirAttribute, String> {
    let a = ir::attr(op, key);
    if a.ptr.is_null() { Err(missing(key)) } else { Ok(a) }
}

fn int_attr(op: MlirOperation, key: &str) -> Result<i64, String> {
    ir::int_attr(op, key).ok_or_else(|| missing(key))
}

fn float_attr(op: MlirOperation, key: &str) -> Result<f64, String> {
    ir::float_attr(op, key).ok_or_else(|| missing(key))
}

fn i64_array(op: MlirOperation, key: &str) -> Result<Vec<i64>, String> {
    ir::i64_array(op, key).ok_or_else(|| missing(key))
}

fn i32_array(op: MlirOperation, key: &str) -> Result<Vec<i64>, String> {
    ir::i32_array(op, key).ok_or_else(|| missing(key))
}

fn flat_symbol(op: MlirOperation, key: &str) -> Result<String, String> {
    ir::flat_symbol(op, key).ok_or_else(|| missing(key))
}

fn type_of(v: MlirValue) -> Result<(Vec<usize>, DType), String> {
    let spec = crate::nn::spec_of_type(unsafe { mlirValueGetType(v) }).map_err(|e| e.to_string())?;
    Ok((spec.shape, spec.dtype))
}

/// The elements of an `hl.constant` (the ONNX export's too).
pub(crate) fn constant(op: MlirOperation, shape: Vec<usize>, dtype: DType) -> Result<Array, String> {
    let a = attr(op, "value")?;
    if !unsafe { mlirAttributeIsADenseElements(a) } {
        return Err("only dense constants are supported".into());
    }
    let n: usize = shape.iter().product();
    let splat = unsafe { mlirDenseElementsAttrIsSplat(a) };
    let get = |i: isize| -> f64 {
        unsafe {
            match dtype {
                DType::F64 => mlirDenseElementsAttrGetDoubleValue(a, i),
                DType::F32 => mlirDenseElementsAttrGetFloatValue(a, i) as f64,
                DType::I1 => mlirDenseElementsAttrGetBoolValue(a, i) as i32 as f64,
                DType::I32 => mlirDenseElementsAttrGetInt32Value(a, i) as f64,
                DType::I64 => mlirDenseElementsAttrGetInt64Value(a, i) as f64,
                DType::F16 | DType::BF16 => crate::ir::dense_16bit_element(a, i, dtype),
            }
        }
    };
    let data = if splat { vec![get(0); n] } else { (0..n as isize).map(get).collect() };
    Ok(Array::from_parts(shape, dtype, data))
}
