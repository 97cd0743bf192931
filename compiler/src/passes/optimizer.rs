//! `hl-optimizer`: appends the optimizer update to make a complete train
//! step (see the pass description in Passes.td for the ABI).
//!
//! Algorithm:
//! 1. Make sure `@<function>_grad` exists (running `hl-autodiff` if not).
//! 2. Declare the optimizer state as `hl.state` symbols after the last
//!    `hl.param`: `<param>.momentum` (SGD with momentum) or `<param>.exp_avg`
//!    and `<param>.exp_avg_sq` (Adam, AdamW), each tied to its parameter,
//!    and the step count `@step`.
//! 3. Build `@train_step(<function>'s arguments..., lr)`: the gradient
//!    function's body, then optional clipping by global norm, then one update
//!    per parameter with PyTorch's formulas, reading parameters and state
//!    with `hl.get_param` / `hl.get_state`.
//! 4. Return the loss, the new parameters (declaration order) and the new
//!    state (declaration order), each result tagged `hl.bind` with what it
//!    updates, so the runtime binds them by name.

use super::autodiff::{FusedAttention, differentiate};
use super::common::{Emitter, Failure};
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::{
    ir::{self, OpSpec, key, op_loc, op_name, ops_of, spec, string_attr},
    nn::spec_of_type,
    types::{DType, TensorSpec},
};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashMap;

/// The update rule and its hyper-parameters (PyTorch's names and defaults).
#[derive(Debug, Clone, PartialEq)]
pub enum Optimizer {
    Sgd { momentum: f64, nesterov: bool, weight_decay: f64 },
    Adam { beta1: f64, beta2: f64, eps: f64, weight_decay: f64 },
    AdamW { beta1: f64, beta2: f64, eps: f64, weight_decay: f64 },
}

impl Optimizer {
    /// Why these hyper-parameters (with gradient clipping at `clip_norm`)
    /// make no optimizer, if they do not: PyTorch's ranges.
    /// (`aicf-train-pipeline`'s builder, `RustPasses.cpp`, checks the same
    /// ranges before any of its passes runs: a change here is one there.)
    pub fn check(&self, clip_norm: Option<f64>) -> Result<(), String> {
        let within = |name: &str, v: f64, ok: bool, range: &str| {
            // (An infinite value was "not above 0".)
            if !v.is_finite() {
                Err(format!("{name}={v} is not a finite number"))
            } else if ok {
                Ok(())
            } else {
                Err(format!("{name}={v} is not {range}"))
            }
        };
        match *self {
            Optimizer::Sgd { momentum, nesterov, weight_decay } => {
                within("momentum", momentum, (0.0..1.0).contains(&momentum), "in [0, 1)")?;
                within("weight-decay", weight_decay, weight_decay >= 0.0, "at least 0")?;
                if nesterov && momentum == 0.0 {
                    return Err("nesterov=true needs a momentum above 0".into());
                }
            }
            Optimizer::Adam { beta1, beta2, eps, weight_decay }
            | Optimizer::AdamW { beta1, beta2, eps, weight_decay } => {
                within("beta1", beta1, (0.0..1.0).contains(&beta1), "in [0, 1)")?;
                within("beta2", beta2, (0.0..1.0).contains(&beta2), "in [0, 1)")?;
                within("eps", eps, eps > 0.0, "above 0")?;
                within("weight-decay", weight_decay, weight_decay >= 0.0, "at least 0")?;
            }
        }
        match clip_norm {
            Some(c) => within("clip-norm", c, c > 0.0, "above 0 (0 turns clipping off)"),
            None => Ok(()),
        }
    }
}

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = |m: String| {
        emit_error(module.location(), &format!("hl-optimizer: {m}"));
        PassFailed
    };
    let float = |key: &str| -> Result<f64, PassFailed> {
        let raw = options.get(key).map_err(report)?;
        raw.parse::<f64>().map_err(|_| report(format!("option '{key}' expects a number, got '{raw}'")))
    };
    let kind = options.get("kind").map_err(report)?.to_string();
    let weight_decay = float("weight-decay")?;
    let (beta1, beta2, eps) = (float("beta1")?, float("beta2")?, float("eps")?);
    let optimizer = match kind.as_str() {
        "sgd" => Optimizer::Sgd {
            momentum: float("momentum")?,
            nesterov: options.get_bool("nesterov").map_err(report)?,
            weight_decay,
        },
        "adam" => Optimizer::Adam { beta1, beta2, eps, weight_decay },
        "adamw" => Optimizer::AdamW { beta1, beta2, eps, weight_decay },
        other => return Err(report(format!("unknown optimizer kind '{other}'; expected sgd, adam or adamw"))),
    };
    // Another optimizer's options were ignored, silently (`kind=sgd
    // beta1=0.5` trained plain SGD).
    let adams = (beta1, beta2, eps) != (0.9, 0.999, 1e-8);
    if kind == "sgd" && adams {
        return Err(report(format!(
            "beta1={beta1} beta2={beta2} eps={eps:e} are Adam's options: kind=sgd takes momentum, nesterov and \
             weight-decay"
        )));
    }
    let sgds = (float("momentum")?, options.get_bool("nesterov").map_err(report)?);
    if kind != "sgd" && sgds != (0.0, false) {
        return Err(report(format!(
            "momentum={} nesterov={} are SGD's options: kind={kind} takes beta1, beta2, eps and weight-decay",
            sgds.0, sgds.1
        )));
    }
    let clip = float("clip-norm")?;
    let clip = (clip != 0.0).then_some(clip);
    optimizer.check(clip).map_err(report)?;
    let function = options.get("function").map_err(report)?.to_string();
    let scale = float("loss-scale")?;
    let interval = options.get_i64("scale-growth-interval").map_err(report)?;
    // The scale is an f32 state: one past f32's range would start infinite,
    // and one under its smallest normal (1.2e-38) rounds to 0 or to a
    // subnormal, whose reciprocal unscaling the gradients is infinite.
    let in_f32 = scale == 0.0 || (f32::MIN_POSITIVE as f64..=f32::MAX as f64).contains(&scale);
    if !(scale.is_finite() && in_f32) || interval <= 0 {
        return Err(report(format!(
            "loss-scale={scale:?} scale-growth-interval={interval}: a scale of 0 (off) or between f32's smallest \
             normal, 1.2e-38, and its largest, 3.4e38, and an interval above 0"
        )));
    }
    let loss_scale = (scale > 0.0).then_some(LossScale { init: scale, growth_interval: interval as u64 });
    let data_parallel = options.get_bool("data-parallel").map_err(report)?;
    let accumulate = options.get_bool("accumulate").map_err(report)?;
    let fused_attention = FusedAttention::of(
        options.get_bool("fused-attention-backward").map_err(report)?,
        options.get_bool("fused-attention-any-heads").map_err(report)?,
    );
    let decay_min_rank = options.get_i64("decay-min-rank").map_err(report)?;
    let Ok(decay_min_rank) = usize::try_from(decay_min_rank) else {
        return Err(report(format!("decay-min-rank={decay_min_rank} is not a rank (0 or more)")));
    };
    let step = TrainStep { loss_scale, data_parallel, accumulate, fused_attention, decay_min_rank };
    add_train_step_scaled(module.to_raw(), &function, &optimizer, clip, step).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("hl-optimizer: {m}"));
        PassFailed
    })
}

/// Adds the state declarations and `@train_step` to `module`.
/// Dynamic loss scaling (GradScaler's rule) for f16 training: the loss is
/// multiplied by the scale before the backward pass and the gradients
/// divided by it; a step whose gradients are not all finite changes no
/// parameter or state and halves the scale, and `growth_interval` finite
/// steps in a row double it. The scale and the count of finite steps are
/// states (`@loss_scale`, `@loss_scale.good_steps`): checkpoints carry them
/// and the decision is made inside the compiled step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossScale {
    pub init: f64,
    pub growth_interval: u64,
}

pub fn add_train_step(
    module: MlirOperation,
    function: &str,
    optimizer: &Optimizer,
    clip_norm: Option<f64>,
) -> Result<(), Failure> {
    add_train_step_scaled(module, function, optimizer, clip_norm, TrainStep::default())
}

/// How [`add_train_step_scaled`] builds the step beyond its optimizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainStep {
    /// Dynamic loss scaling.
    pub loss_scale: Option<LossScale>,
    /// The loss and gradients weighted and summed over the replicas.
    pub data_parallel: bool,
    /// Also `@train_grad` and `@train_apply`.
    pub accumulate: bool,
    /// Which attention gradients are one `hl.attention_backward`
    /// ([`differentiate`]).
    pub fused_attention: FusedAttention,
    /// Parameters of fewer dimensions take no weight decay (0: every one
    /// does; 2: biases and norm weights do not, nanoGPT's groups).
    pub decay_min_rank: usize,
}

impl Default for TrainStep {
    fn default() -> Self {
        TrainStep {
            loss_scale: None,
            data_parallel: false,
            accumulate: false,
            fused_attention: FusedAttention::TensorCoreHeads,
            decay_min_rank: 0,
        }
    }
}

/// [`add_train_step`] with optional dynamic loss scaling, and for a
/// data-parallel run (`data_parallel`) the loss, gradients and set states
/// weighted by the replica's share of the batch (the `replica_weight`
/// input) and summed over the replicas (`hl.all_reduce`).
pub fn add_train_step_scaled(
    module: MlirOperation,
    function: &str,
    optimizer: &Optimizer,
    clip_norm: Option<f64>,
    step: TrainStep,
) -> Result<(), Failure> {
    let TrainStep { loss_scale, data_parallel, accumulate, fused_attention, decay_min_rank } = step;
    let ctx = unsafe { mlirOperationGetContext(module) };
    let module_loc = unsafe { mlirOperationGetLocation(module) };
    optimizer.check(clip_norm).map_err(|m| (module_loc, m))?;
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) };
    let grad_name = format!("{function}_grad");
    let find =
        |name: &str| ops_of(body).into_iter().find(|&op| string_attr(op, "sym_name").unwrap_or_default() == name);
    let made: &[&str] = if accumulate { &["train_step", "train_grad", "train_apply"] } else { &["train_step"] };
    for name in made {
        if let Some(op) = find(name) {
            return Err((op_loc(op), format!("@{name} already exists")));
        }
    }
    // hl-autodiff refuses a module without parameters; a gradient function
    // written by hand skipped it (a step that only counted steps).
    if !ops_of(body).into_iter().any(|op| op_name(op) == "hl.param") {
        let at = find(function).map_or(module_loc, op_loc);
        return Err((
            at,
            "the module declares no parameter (hl.param): there is nothing to differentiate, and training would \
             change nothing"
                .into(),
        ));
    }
    if let Some(ls) = loss_scale {
        if !(ls.init.is_finite() && ls.init > 0.0) || ls.growth_interval == 0 {
            return Err((
                module_loc,
                format!(
                    "loss-scale={} growth every {} steps: a positive scale and interval",
                    ls.init, ls.growth_interval
                ),
            ));
        }
    }
    // With loss scaling the gradient is that of `@<function>_scaled`, the
    // loss times `@loss_scale`.
    let grad_name = match loss_scale {
        Some(_) => {
            let scaled = format!("{function}_scaled");
            let f = find(function).ok_or_else(|| (module_loc, format!("no @{function} to differentiate")))?;
            if find(&scaled).is_some() {
                return Err((op_loc(f), format!("@{scaled} exists: loss scaling names its scaled loss so")));
            }
            scaled_loss(ctx, body, f, &scaled)?;
            differentiate(module, &scaled, false, fused_attention)?;
            // The scaled loss itself is not needed once differentiated.
            if let Some(op) = find(&scaled) {
                unsafe { mlirOperationDestroy(op) };
            }
            format!("{scaled}_grad")
        }
        None => {
            if find(&grad_name).is_none() {
                differentiate(module, function, false, fused_attention)?;
            }
            grad_name
        }
    };
    let grad_fn = find(&grad_name).ok_or_else(|| (module_loc, format!("no @{grad_name}")))?;

    // 2. State declarations.
    let mut params: Vec<(String, TensorSpec)> = Vec::new();
    let mut last_param = None;
    for op in ops_of(body) {
        if op_name(op) == "hl.param" {
            let ty = unsafe { mlirTypeAttrGetValue(ir::attr(op, "type")) };
            params.push((
                string_attr(op, "sym_name").unwrap_or_default(),
                spec_of_type(ty).map_err(|e| (op_loc(op), e.to_string()))?,
            ));
            last_param = Some(op);
        }
    }
    let slots: &[&str] = match optimizer {
        Optimizer::Sgd { momentum, .. } if *momentum > 0.0 => &["momentum"],
        Optimizer::Sgd { .. } => &[],
        Optimizer::Adam { .. } | Optimizer::AdamW { .. } => &["exp_avg", "exp_avg_sq"],
    };
    let mut states: Vec<(String, Option<String>, TensorSpec)> = Vec::new();
    for (name, s) in &params {
        for slot in slots {
            let slot_spec = TensorSpec::new(s.shape.clone(), update_dtype(s.dtype));
            states.push((format!("{name}.{slot}"), Some(name.clone()), slot_spec));
        }
    }
    states.push(("step".into(), None, TensorSpec::new([], DType::I64)));
    if loss_scale.is_some() {
        states.push((LOSS_SCALE.into(), None, TensorSpec::new([], DType::F32)));
        states.push((GOOD_STEPS.into(), None, TensorSpec::new([], DType::F32)));
    }
    // States the model declared itself: a masked growth's counters (`slot
    // "mask"`), which the step increments, and a grown parameter's ages
    // (`slot "age" of @p`, its shape: steps each entry has been trained),
    // which give Adam its bias corrections per entry.
    let mut counters: Vec<(String, Option<String>, TensorSpec)> = Vec::new();
    for op in ops_of(body) {
        if op_name(op) == "hl.state" && string_attr(op, "slot").as_deref() == Some("age") {
            let name = string_attr(op, "sym_name").unwrap_or_default();
            let param = ir::flat_symbol(op, "param").unwrap_or_default();
            let Some((_, ps)) = params.iter().find(|(p, _)| *p == param) else {
                return Err((op_loc(op), format!("age state @{name} belongs to no parameter (of @{param})")));
            };
            if name != format!("{param}.age") {
                return Err((op_loc(op), format!("the age state of @{param} must be named @{param}.age")));
            }
            if !matches!(optimizer, Optimizer::Adam { .. } | Optimizer::AdamW { .. }) {
                return Err((
                    op_loc(op),
                    format!("@{name}: ages give Adam's bias corrections; this optimizer has none"),
                ));
            }
            counters.push((name, Some(param), ps.clone()));
        }
        if op_name(op) == "hl.state" && string_attr(op, "slot").as_deref() == Some("mask") {
            let ty = unsafe { mlirTypeAttrGetValue(ir::attr(op, "type")) };
            let s = spec_of_type(ty).map_err(|e| (op_loc(op), e.to_string()))?;
            if !s.dtype.is_float() {
                return Err((op_loc(op), "a mask counter is a float state".into()));
            }
            counters.push((string_attr(op, "sym_name").unwrap_or_default(), None, s));
        }
    }
    // States the model updates itself (`hl.set_state` in the loss: a batch
    // norm's running statistics): the step returns the value it sets.
    let g_body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(grad_fn, 0)) };
    for op in ops_of(g_body) {
        if op_name(op) != "hl.set_state" {
            continue;
        }
        let name = flat_symbol_of(op, "name");
        if counters.iter().any(|(n, _, _)| *n == name) {
            return Err((op_loc(op), format!("state @{name} is set twice in one step")));
        }
        let value = unsafe { mlirOperationGetOperand(op, 0) };
        counters.push((name, None, spec(value)));
    }
    let mut anchor = last_param;
    // Each symbol with its op, so that a clash is said at the op.
    let taken: std::collections::HashMap<String, MlirOperation> =
        ops_of(body).into_iter().filter_map(|op| Some((string_attr(op, "sym_name")?, op))).collect();
    for (name, param, s) in &states {
        if let Some(&op) = taken.get(name) {
            return Err((op_loc(op), format!("cannot declare optimizer state @{name}: the symbol exists")));
        }
        let slot = match (param, name.as_str()) {
            (Some(_), _) => name.rsplit('.').next().unwrap_or(name),
            (None, LOSS_SCALE) => "loss_scale",
            (None, GOOD_STEPS) => "good_steps",
            (None, _) => "step",
        };
        // The scale starts at its initial value: a uniform draw from the
        // one-point interval [init, init].
        let init = match (name.as_str(), loss_scale) {
            (LOSS_SCALE, Some(ls)) => {
                let v = crate::ir::float_literal(ls.init);
                format!("#hl.init<uniform, low = {v}, high = {v}>")
            }
            _ => "#hl.init<zeros>".to_string(),
        };
        let mut attrs = vec![
            ("sym_name", crate::ir::quoted(name)),
            ("type", s.mlir_type()),
            ("slot", format!("\"{slot}\"")),
            ("init", init),
        ];
        if let Some(p) = param {
            attrs.push(("param", crate::ir::symbol_ref(p)));
        }
        anchor = Some(declare_state(ctx, module_loc, body, anchor, &attrs)?);
    }

    states.extend(counters);

    // 3. The train step's body: the gradient function's, then the update.
    let g_block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(grad_fn, 0)) };
    let g_loc = op_loc(grad_fn);
    let nargs = unsafe { mlirBlockGetNumArguments(g_block) };
    let input_types: Vec<MlirType> =
        (0..nargs).map(|i| unsafe { mlirValueGetType(mlirBlockGetArgument(g_block, i)) }).collect();
    let mut ret = None;
    for op in ops_of(g_block) {
        if op_name(op) == "func.return" {
            ret = Some(op);
        }
    }
    let ret = ret.ok_or_else(|| (g_loc, format!("@{grad_name} has no func.return")))?;
    let loss_ty = unsafe { mlirValueGetType(mlirOperationGetOperand(ret, 0)) };
    let f32_scalar = ir::parse_type(ctx, "tensor<f32>").map_err(|e| (g_loc, format!("{e:?}")))?;
    let update = Update { params: &params, states: &states, optimizer, clip_norm, loss_scale, decay_min_rank };
    let input_binds: Vec<String> = (0..nargs).map(|_| "{hl.bind = \"input\"}".to_string()).collect();
    let weight_bind = format!("{{hl.bind = \"{REPLICA_WEIGHT}\"}}");
    let mut update_binds = vec!["{hl.bind = \"loss\"}".to_string()];
    update_binds
        .extend(params.iter().map(|(n, _)| format!("{{hl.bind = {}}}", crate::ir::quoted(&format!("param @{n}")))));
    update_binds
        .extend(states.iter().map(|(n, _, _)| format!("{{hl.bind = {}}}", crate::ir::quoted(&format!("state @{n}")))));

    // @train_step(inputs..., lr[, replica_weight]).
    let mut arg_types = input_types.clone();
    // lr: the loss's type, at least f32 (in f16 a rate of 1e-5 is subnormal).
    let loss_element = unsafe { mlirShapedTypeGetElementType(loss_ty) };
    let sixteen = unsafe { mlirTypeIsAF16(loss_element) || mlirTypeIsABF16(loss_element) };
    let lr_ty = if sixteen { f32_scalar } else { loss_ty };
    arg_types.push(lr_ty);
    if data_parallel {
        arg_types.push(f32_scalar);
    }
    let mut arg_binds = input_binds.clone();
    arg_binds.push("{hl.bind = \"lr\"}".into());
    if data_parallel {
        arg_binds.push(weight_bind.clone());
    }
    let func = build_function(ctx, g_loc, "train_step", &arg_types, &arg_binds, &update_binds, |e, block| {
        let mut g = clone_gradients(g_block, block, ret, params.len())?;
        let lr = unsafe { mlirBlockGetArgument(block, nargs) };
        if data_parallel {
            reduce_gradients(
                e,
                &mut g,
                unsafe { mlirBlockGetArgument(block, nargs + 1) },
                false,
                loss_scale.is_some(),
            )?;
        }
        update.apply(e, g, lr)
    })?;
    unsafe { mlirBlockInsertOwnedOperationAfter(body, grad_fn, func) };

    // Gradient accumulation: the step split where its gradients are summed,
    // the sums kept in accumulator states (`slot "grad_sum"`, on the device
    // beside the parameters; not checkpointed: a step's first micro-batch
    // replaces what they hold). @train_grad(inputs..., replica_weight,
    // first) adds one micro-batch's loss, gradients and set states times
    // its weight (`hl.all_reduce {local}`, scaled as a replica scales its
    // own) to the accumulators (`first` > 0.5: replaces them);
    // @train_apply(lr, replica_weight) sums them over the replicas (data
    // parallel) and makes @train_step's update from them.
    if accumulate {
        let ret_spec = |i: usize| spec(unsafe { mlirOperationGetOperand(ret, i as isize) });
        let mut set_names: Vec<(String, TensorSpec)> = Vec::new();
        for op in ops_of(g_block) {
            if op_name(op) == "hl.set_state" {
                set_names.push((flat_symbol_of(op, "name"), spec(unsafe { mlirOperationGetOperand(op, 0) })));
            }
        }
        set_names.sort_by(|a, b| a.0.cmp(&b.0));
        // The accumulators: the loss's, each gradient's, each set state's.
        let mut sums: Vec<(String, TensorSpec)> = vec![(format!("{ACCUMULATED}loss"), ret_spec(0))];
        sums.extend(params.iter().enumerate().map(|(i, (n, _))| (format!("{ACCUMULATED}{n}"), ret_spec(1 + i))));
        sums.extend(set_names.iter().map(|(n, s)| (format!("{ACCUMULATED}set.{n}"), s.clone())));
        for (name, s) in &sums {
            if let Some(&op) = taken.get(name) {
                return Err((op_loc(op), format!("cannot declare the accumulator @{name}: the symbol exists")));
            }
            let attrs = [
                ("sym_name", crate::ir::quoted(name)),
                ("type", s.mlir_type()),
                ("slot", format!("\"{ACCUMULATOR_SLOT}\"")),
                ("init", "#hl.init<zeros>".to_string()),
            ];
            anchor = Some(declare_state(ctx, module_loc, body, anchor, &attrs)?);
        }
        let sum_binds: Vec<String> =
            sums.iter().map(|(n, _)| format!("{{hl.bind = {}}}", crate::ir::quoted(&format!("state @{n}")))).collect();

        let mut grad_types = input_types.clone();
        grad_types.extend([f32_scalar, f32_scalar]);
        let mut grad_binds = input_binds.clone();
        grad_binds.push(weight_bind.clone());
        grad_binds.push(format!("{{hl.bind = \"{FIRST_MICRO_BATCH}\"}}"));
        let grad = build_function(ctx, g_loc, "train_grad", &grad_types, &grad_binds, &sum_binds, |e, block| {
            let mut g = clone_gradients(g_block, block, ret, params.len())?;
            reduce_gradients(e, &mut g, unsafe { mlirBlockGetArgument(block, nargs) }, true, loss_scale.is_some())?;
            let first = unsafe { mlirBlockGetArgument(block, nargs + 1) };
            let first = e.op("hl.compare", &[first, e.scalar(0.5, first)?], &[("predicate", "5 : i32".into())])?;
            let mut values = vec![g.loss];
            values.extend(&g.grads);
            for (name, _) in &set_names {
                values.push(*g.set.get(name).ok_or_else(|| (g_loc, format!("no value set for @{name}")))?);
            }
            let mut out = Vec::new();
            for (v, (name, s)) in values.into_iter().zip(&sums) {
                if !s.dtype.is_float() {
                    // An integer state the loss sets: this micro-batch's.
                    out.push(v);
                    continue;
                }
                let sum = e.binary("hl.add", get_symbol(e, "hl.get_state", name, s)?, v)?;
                out.push(e.op("hl.select", &[first, v, sum], &[])?);
            }
            Ok(out)
        })?;
        unsafe { mlirBlockInsertOwnedOperationAfter(body, func, grad) };

        let apply_types = vec![lr_ty, f32_scalar];
        let apply_binds = vec!["{hl.bind = \"lr\"}".to_string(), weight_bind];
        let apply =
            build_function(ctx, g_loc, "train_apply", &apply_types, &apply_binds, &update_binds, |e, block| {
                let read = |i: usize| get_symbol(e, "hl.get_state", &sums[i].0, &sums[i].1);
                let p = params.len();
                let mut g = Gradients {
                    loss: read(0)?,
                    grads: (1..=p).map(read).collect::<Result<_, _>>()?,
                    set: set_names
                        .iter()
                        .enumerate()
                        .map(|(i, (n, _))| Ok((n.clone(), read(1 + p + i)?)))
                        .collect::<Result<_, Failure>>()?,
                };
                if data_parallel {
                    reduce_gradients(e, &mut g, unsafe { mlirBlockGetArgument(block, 1) }, false, false)?;
                }
                update.apply(e, g, unsafe { mlirBlockGetArgument(block, 0) })
            })?;
        unsafe { mlirBlockInsertOwnedOperationAfter(body, grad, apply) };
    }
    drop_state_writes(module);
    Ok(())
}

/// Declares `hl.state` with `attrs` after `anchor` (first in the module
/// without one); returns it.
fn declare_state(
    ctx: MlirContext,
    loc: MlirLocation,
    body: MlirBlock,
    anchor: Option<MlirOperation>,
    attrs: &[(&str, String)],
) -> Result<MlirOperation, Failure> {
    let spec = OpSpec { attributes: attrs, results: Some(&[]), verify: false, ..OpSpec::new("hl.state") };
    let op = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("{e:?}")))?;
    unsafe {
        match anchor {
            Some(a) => mlirBlockInsertOwnedOperationAfter(body, a, op),
            None => mlirBlockInsertOwnedOperation(body, 0, op),
        }
    }
    Ok(op)
}

/// A function `name(arg_types...)` tagged with `arg_binds` and
/// `res_binds`, whose body `fill` emits (returning its results).
fn build_function(
    ctx: MlirContext,
    loc: MlirLocation,
    name: &str,
    arg_types: &[MlirType],
    arg_binds: &[String],
    res_binds: &[String],
    fill: impl FnOnce(&Emitter, MlirBlock) -> Result<Vec<MlirValue>, Failure>,
) -> Result<MlirOperation, Failure> {
    let locs = vec![loc; arg_types.len()];
    let block = unsafe { mlirBlockCreate(arg_types.len() as isize, arg_types.as_ptr(), locs.as_ptr()) };
    let region = unsafe { mlirRegionCreate() };
    unsafe { mlirRegionAppendOwnedBlock(region, block) };
    let e = Emitter { ctx, block, loc };
    let outputs = fill(&e, block).inspect_err(|_| unsafe { mlirRegionDestroy(region) })?;
    let binds =
        [("arg_attrs", format!("[{}]", arg_binds.join(", "))), ("res_attrs", format!("[{}]", res_binds.join(", ")))];
    ir::create_function(ctx, loc, name, region, &outputs, &binds)
        .map_err(|err| (loc, format!("cannot create @{name}: {err:?}")))
}

/// What a train step's update reads: the loss, one gradient per parameter
/// (declaration order) and the values the loss sets its states to.
struct Gradients {
    loss: MlirValue,
    grads: Vec<MlirValue>,
    set: HashMap<String, MlirValue>,
}

/// The gradient function's body copied into `block` (its arguments are
/// `block`'s first ones), its `hl.set_state`s turned into values.
fn clone_gradients(
    g_block: MlirBlock,
    block: MlirBlock,
    ret: MlirOperation,
    params: usize,
) -> Result<Gradients, Failure> {
    let loc = op_loc(ret);
    let mut map: HashMap<usize, MlirValue> = HashMap::new();
    for i in 0..unsafe { mlirBlockGetNumArguments(g_block) } {
        map.insert(key(unsafe { mlirBlockGetArgument(g_block, i) }), unsafe { mlirBlockGetArgument(block, i) });
    }
    let mut returned = Vec::new();
    let mut set: HashMap<String, MlirValue> = HashMap::new();
    for op in ops_of(g_block) {
        let n = unsafe { mlirOperationGetNumOperands(op) };
        let operands: Vec<MlirValue> = (0..n)
            .map(|i| map.get(&key(unsafe { mlirOperationGetOperand(op, i) })).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| (op_loc(op), "an operand is defined outside the function body".to_string()))?;
        if op.ptr == ret.ptr {
            returned = operands;
            break;
        }
        if op_name(op) == "hl.set_state" {
            set.insert(flat_symbol_of(op, "name"), operands[0]);
            continue;
        }
        let copy = unsafe { mlirOperationClone(op) };
        for (i, v) in operands.iter().enumerate() {
            unsafe { mlirOperationSetOperand(copy, i as isize, *v) };
        }
        // A fused body reading a value of the function (a constant that
        // canonicalization hoisted out of it) reads its copy.
        crate::ir::remap_captured(copy, &map);
        unsafe { mlirBlockAppendOwnedOperation(block, copy) };
        for r in 0..unsafe { mlirOperationGetNumResults(op) } {
            map.insert(key(unsafe { mlirOperationGetResult(op, r) }), unsafe { mlirOperationGetResult(copy, r) });
        }
    }
    if returned.len() < 1 + params {
        return Err((loc, "the gradient function does not return one gradient per parameter".into()));
    }
    Ok(Gradients { loss: returned[0], grads: returned[1..=params].to_vec(), set })
}

/// Data parallel: each replica's loss, gradients and set states, times
/// its share of the global batch (`weight`), summed over the replicas
/// before anything reads them (or only scaled, `local`: a micro-batch's
/// share); the loss first, then the gradients in the order the backward
/// pass computes them (the last parameter's first), the order
/// `ll-bucket-collectives` keeps.
fn reduce_gradients(
    e: &Emitter,
    g: &mut Gradients,
    weight: MlirValue,
    local: bool,
    scaled: bool,
) -> Result<(), Failure> {
    // The collectives and the accumulators sum f32 (`ll.all_reduce` weighs
    // by an f32 share); a 16-bit loss or gradient failed in lowering.
    let summed = std::iter::once(("the loss".to_string(), g.loss))
        .chain(g.grads.iter().enumerate().map(|(i, &v)| (format!("gradient #{i}"), v)))
        .chain(g.set.iter().filter(|(_, v)| spec(**v).dtype.is_float()).map(|(n, &v)| (format!("state @{n}"), v)));
    for (what, v) in summed {
        let s = spec(v);
        if s.dtype != DType::F32 {
            return Err((
                e.loc,
                format!(
                    "{what} is {}: data-parallel steps and gradient accumulation sum f32 values over replicas and \
                     micro-batches (compute the loss in f32 from f32 parameters, as --precision's hl-autocast does)",
                    s.mlir_type()
                ),
            ));
        }
    }
    let attributes: Vec<(&str, String)> = if local { vec![("local", "unit".into())] } else { vec![] };
    // Under loss scaling, a replica of weight 0 (no rows of a short last
    // batch: it ran one row to take part) adds exact zeros, whatever its
    // one row's scaled gradient is: an overflow there (inf) times 0 is NaN
    // in the sum, which skipped every replica's step as an overflow. (The
    // CPU runtime weighs a weight-0 buffer as zeros too; NCCL's
    // pre-multiplied sum does not.)
    let idle = if scaled {
        Some(e.op("hl.compare", &[weight, e.scalar(0.0, weight)?], &[("predicate", "0 : i32".into())])?)
    } else {
        None
    };
    let reduce = |v: MlirValue| -> Result<MlirValue, Failure> {
        let v = match idle {
            Some(idle) => e.op("hl.select", &[idle, e.scalar(0.0, v)?, v], &[])?,
            None => v,
        };
        let s = spec(v);
        let ty = ir::parse_type(e.ctx, &s.mlir_type()).map_err(|err| (e.loc, format!("{err:?}")))?;
        let operands = [v, cast_to(e, weight, s.dtype)?];
        let op = e.append(&OpSpec {
            operands: &operands,
            attributes: &attributes,
            results: Some(&[ty]),
            ..OpSpec::new("hl.all_reduce")
        })?;
        Ok(unsafe { mlirOperationGetResult(op, 0) })
    };
    g.loss = reduce(g.loss)?;
    for v in g.grads.iter_mut().rev() {
        *v = reduce(*v)?;
    }
    let mut names: Vec<String> = g.set.keys().cloned().collect();
    names.sort();
    for name in names {
        let v = g.set[&name];
        if spec(v).dtype.is_float() {
            g.set.insert(name, reduce(v)?);
        }
    }
    Ok(())
}

/// The update a train step makes from its (summed) gradients.
#[derive(Clone, Copy)]
struct Update<'a> {
    params: &'a [(String, TensorSpec)],
    states: &'a [(String, Option<String>, TensorSpec)],
    optimizer: &'a Optimizer,
    clip_norm: Option<f64>,
    loss_scale: Option<LossScale>,
    decay_min_rank: usize,
}

impl Update<'_> {
    /// Loss scaling's unscale and skip, clipping, the optimizer's update;
    /// returns the loss, the new parameters and the new states.
    fn apply(&self, e: &Emitter, g: Gradients, lr: MlirValue) -> Result<Vec<MlirValue>, Failure> {
        let Update { params, states, optimizer, clip_norm, loss_scale, decay_min_rank } = *self;
        let loc = e.loc;
        let Gradients { mut loss, mut grads, set } = g;

        // Loss scaling: the loss and gradients divided by the scale (a power
        // of two: exact), and whether every gradient is finite (an inf or NaN
        // anywhere makes the sum of all of them times 0 a NaN).
        let scalar = TensorSpec::new([], DType::F32);
        let finite = match loss_scale {
            Some(_) => {
                let scale = get_symbol(&e, "hl.get_state", LOSS_SCALE, &scalar)?;
                let inverse = e.binary("hl.div", e.scalar(1.0, scale)?, scale)?;
                loss = e.binary("hl.mul", loss, cast_to(&e, inverse, spec(loss).dtype)?)?;
                let mut total: Option<MlirValue> = None;
                for g in &mut grads {
                    *g = e.binary("hl.mul", *g, cast_to(&e, inverse, spec(*g).dtype)?)?;
                    let gs = spec(*g);
                    let all: Vec<usize> = (0..gs.shape.len()).collect();
                    let s = if all.is_empty() { *g } else { e.sum(*g, &all, false)? };
                    let s = cast_to(&e, s, DType::F32)?;
                    total = Some(match total {
                        Some(t) => e.binary("hl.add", t, s)?,
                        None => s,
                    });
                }
                let total = match total {
                    Some(t) => t,
                    None => e.splat(0.0, &scalar)?,
                };
                let zero = e.binary("hl.mul", total, e.scalar(0.0, total)?)?;
                Some(e.op("hl.compare", &[zero, e.scalar(0.0, total)?], &[("predicate", "0 : i32".into())])?)
            }
            None => None,
        };

        // Clipping by global norm (torch.nn.utils.clip_grad_norm_):
        // coef = min(1, max_norm / (norm + 1e-6)).
        if let Some(max_norm) = clip_norm {
            // The norm is accumulated in f64 when any gradient is f64, else f32.
            let acc = if grads.iter().any(|&g| spec(g).dtype == DType::F64) { DType::F64 } else { DType::F32 };
            let mut total: Option<MlirValue> = None;
            for &g in &grads {
                let gs = spec(g);
                let sq = e.binary("hl.mul", g, g)?;
                let all: Vec<usize> = (0..gs.shape.len()).collect();
                let mut s = if all.is_empty() { sq } else { e.sum(sq, &all, false)? };
                if gs.dtype != acc {
                    s = e.typed("hl.cast", &[s], &TensorSpec::new([], acc))?;
                }
                total = Some(match total {
                    Some(t) => e.binary("hl.add", t, s)?,
                    None => s,
                });
            }
            if let Some(total) = total {
                let norm = e.unary("hl.sqrt", total)?;
                let coef =
                    e.binary("hl.div", e.scalar(max_norm, norm)?, e.binary("hl.add", norm, e.scalar(1e-6, norm)?)?)?;
                let coef = e.binary("hl.min", coef, e.scalar(1.0, coef)?)?;
                for g in &mut grads {
                    let c = cast_to(&e, coef, spec(*g).dtype)?;
                    *g = e.binary("hl.mul", *g, c)?;
                }
            }
        }

        // Step count t = step + 1.
        let step_ty = TensorSpec::new([], DType::I64);
        let step_val = get_symbol(&e, "hl.get_state", "step", &step_ty)?;
        let next_step = e.binary("hl.add", step_val, e.splat(1.0, &step_ty)?)?;
        // Adam's bias corrections 1 - beta^t, computed in f64 and rounded once
        // (in f32, 0.999 is 0.99900001 and 1 - 0.999^1 comes out 1.3e-5 small,
        // shrinking every early update).
        let corrections = match *optimizer {
            Optimizer::Adam { beta1, beta2, .. } | Optimizer::AdamW { beta1, beta2, .. } => {
                let t = e.typed("hl.cast", &[next_step], &TensorSpec::new([], DType::F64))?;
                let correction = |beta: f64| -> Result<MlirValue, Failure> {
                    e.binary("hl.sub", e.scalar(1.0, t)?, e.binary("hl.pow", e.scalar(beta, t)?, t)?)
                };
                Some((correction(beta1)?, correction(beta2)?))
            }
            Optimizer::Sgd { .. } => None,
        };

        let mut new_params = Vec::new();
        let mut new_states: HashMap<String, MlirValue> = HashMap::new();
        for ((name, ps), g) in params.iter().zip(&grads) {
            // f16 and bf16 parameters update in f32 (their slots are f32):
            // Adam's eps (1e-8) and a small gradient's square are zero in
            // f16, and 0/0 would make every parameter without gradient NaN.
            let cd = update_dtype(ps.dtype);
            let cs = TensorSpec::new(ps.shape.clone(), cd);
            let p_stored = get_symbol(&e, "hl.get_param", name, ps)?;
            let p = cast_to(&e, p_stored, cd)?;
            let g = &cast_to(&e, *g, cd)?;
            let lr_p = cast_to(&e, lr, cd)?;
            let state = |slot: &str| get_symbol(&e, "hl.get_state", &format!("{name}.{slot}"), &cs);
            // (Biases and norm weights take none under decay-min-rank=2.)
            let decays = ps.shape.len() >= decay_min_rank;
            let p_new = match *optimizer {
                Optimizer::Sgd { momentum, nesterov, weight_decay } => {
                    let mut d = *g;
                    if weight_decay != 0.0 && decays {
                        d = e.binary("hl.add", d, e.scale(p, weight_decay)?)?;
                    }
                    if momentum > 0.0 {
                        let buf = e.binary("hl.add", e.scale(state("momentum")?, momentum)?, d)?;
                        new_states.insert(format!("{name}.momentum"), buf);
                        d = if nesterov { e.binary("hl.add", d, e.scale(buf, momentum)?)? } else { buf };
                    }
                    e.binary("hl.sub", p, e.binary("hl.mul", d, lr_p)?)?
                }
                Optimizer::Adam { beta1, beta2, eps, weight_decay }
                | Optimizer::AdamW { beta1, beta2, eps, weight_decay } => {
                    let decoupled = matches!(optimizer, Optimizer::AdamW { .. });
                    let mut d = *g;
                    let mut base = p;
                    if weight_decay != 0.0 && decays {
                        if decoupled {
                            // p (1 - lr wd)
                            let factor = e.binary("hl.sub", e.scalar(1.0, p)?, e.scale(lr_p, weight_decay)?)?;
                            base = e.binary("hl.mul", p, factor)?;
                        } else {
                            d = e.binary("hl.add", d, e.scale(p, weight_decay)?)?;
                        }
                    }
                    let m = e.binary("hl.add", e.scale(state("exp_avg")?, beta1)?, e.scale(d, 1.0 - beta1)?)?;
                    let v = e.binary(
                        "hl.add",
                        e.scale(state("exp_avg_sq")?, beta2)?,
                        e.scale(e.binary("hl.mul", d, d)?, 1.0 - beta2)?,
                    )?;
                    new_states.insert(format!("{name}.exp_avg"), m);
                    new_states.insert(format!("{name}.exp_avg_sq"), v);
                    let (bc1, bc2) = corrections.ok_or_else(|| (loc, "no bias corrections".to_string()))?;
                    let (bc1, bc2) = if states.iter().any(|(n, p, _)| p.as_deref() == Some(name) && n.ends_with(".age"))
                    {
                        // Per entry, by its age (f64, rounded once, as the global ones).
                        let age_now = get_symbol(&e, "hl.get_state", &format!("{name}.age"), ps)?;
                        let age = e.binary("hl.add", age_now, e.scalar(1.0, p_stored)?)?;
                        new_states.insert(format!("{name}.age"), age);
                        let t = e.typed("hl.cast", &[age], &TensorSpec::new(ps.shape.clone(), DType::F64))?;
                        let correction = |beta: f64| -> Result<MlirValue, Failure> {
                            let c =
                                e.binary("hl.sub", e.scalar(1.0, t)?, e.binary("hl.pow", e.scalar(beta, t)?, t)?)?;
                            cast_to(&e, c, cd)
                        };
                        (correction(beta1)?, correction(beta2)?)
                    } else {
                        (cast_to(&e, bc1, cd)?, cast_to(&e, bc2, cd)?)
                    };
                    let denom =
                        e.binary("hl.add", e.unary("hl.sqrt", e.binary("hl.div", v, bc2)?)?, e.scalar(eps, v)?)?;
                    let step_size = e.binary("hl.div", lr_p, bc1)?;
                    let update = e.binary("hl.mul", e.binary("hl.div", m, denom)?, step_size)?;
                    e.binary("hl.sub", base, update)?
                }
            };
            new_params.push(cast_to(&e, p_new, ps.dtype)?);
        }
        new_states.insert("step".into(), next_step);
        new_states.extend(set);
        for (name, param, s) in states {
            if param.is_none()
                && ![LOSS_SCALE, GOOD_STEPS, "step"].contains(&name.as_str())
                && !new_states.contains_key(name)
            {
                let c = get_symbol(&e, "hl.get_state", name, s)?;
                new_states.insert(name.clone(), e.binary("hl.add", c, e.scalar(1.0, c)?)?);
            }
        }
        if let (Some(ls), Some(finite)) = (loss_scale, finite) {
            // A step with a non-finite gradient keeps every parameter and state.
            for (p, (name, ps)) in new_params.iter_mut().zip(params) {
                let old = get_symbol(&e, "hl.get_param", name, ps)?;
                *p = e.op("hl.select", &[finite, *p, old], &[])?;
            }
            for (name, _, s) in states {
                if let Some(v) = new_states.get_mut(name) {
                    let old = get_symbol(&e, "hl.get_state", name, s)?;
                    *v = e.op("hl.select", &[finite, *v, old], &[])?;
                }
            }
            // The scale: halved after an overflow, doubled after
            // `growth_interval` finite steps in a row.
            let scale = get_symbol(&e, "hl.get_state", LOSS_SCALE, &scalar)?;
            let good = get_symbol(&e, "hl.get_state", GOOD_STEPS, &scalar)?;
            let good1 = e.binary("hl.add", good, e.scalar(1.0, good)?)?;
            let grow = e.op(
                "hl.compare",
                &[good1, e.scalar(ls.growth_interval as f64, good1)?],
                &[("predicate", "5 : i32".into())],
            )?;
            let kept = e.op("hl.select", &[grow, e.scale(scale, 2.0)?, scale], &[])?;
            let new_scale = e.op("hl.select", &[finite, kept, e.scale(scale, 0.5)?], &[])?;
            let counted = e.op("hl.select", &[grow, e.scalar(0.0, good1)?, good1], &[])?;
            let new_good = e.op("hl.select", &[finite, counted, e.scalar(0.0, good1)?], &[])?;
            new_states.insert(LOSS_SCALE.into(), new_scale);
            new_states.insert(GOOD_STEPS.into(), new_good);
        }

        let mut outputs = vec![loss];
        outputs.extend(new_params);
        for (name, _, _) in states {
            outputs.push(*new_states.get(name).ok_or_else(|| (loc, format!("no update for state @{name}")))?);
        }
        Ok(outputs)
    }
}

/// The `hl.bind` tag of a data-parallel train step's last input: the
/// replica's rows over the global batch's.
pub const REPLICA_WEIGHT: &str = "replica_weight";

/// The `hl.bind` tag of `@train_grad`'s last input: above 0.5 on a step's
/// first micro-batch (whose values replace the accumulators' instead of
/// adding to them).
pub const FIRST_MICRO_BATCH: &str = "first_micro_batch";

/// The slot of gradient accumulation's accumulator states, and their
/// names' prefix (`@accumulated.fc1.weight`).
pub const ACCUMULATOR_SLOT: &str = "grad_sum";
pub(crate) const ACCUMULATED: &str = "accumulated.";

/// The loss-scaling states' names.
pub(crate) const LOSS_SCALE: &str = "loss_scale";
pub(crate) const GOOD_STEPS: &str = "loss_scale.good_steps";

/// Adds `@<scaled>`: a copy of `f` (a loss function) whose loss is
/// multiplied by `@loss_scale`.
fn scaled_loss(ctx: MlirContext, body: MlirBlock, f: MlirOperation, scaled: &str) -> Result<(), Failure> {
    let copy = unsafe { mlirOperationClone(f) };
    unsafe {
        mlirOperationSetAttributeByName(
            copy,
            crate::ffi::string_ref("sym_name"),
            mlirStringAttrGet(ctx, crate::ffi::string_ref(scaled)),
        );
        mlirBlockInsertOwnedOperationAfter(body, f, copy);
    }
    let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(copy, 0)) };
    let ret = ops_of(block)
        .into_iter()
        .rev()
        .find(|op| op_name(*op) == "func.return")
        .ok_or_else(|| (op_loc(f), "the loss function has no func.return".to_string()))?;
    let loss = unsafe { mlirOperationGetOperand(ret, 0) };
    let e = Emitter { ctx, block, loc: op_loc(ret) };
    let scale = e.op_before(
        ret,
        "hl.get_state",
        &[],
        &[("name", crate::ir::symbol_ref(LOSS_SCALE))],
        &TensorSpec::new([], DType::F32),
    )?;
    let ls = spec(loss);
    let scale = if ls.dtype == DType::F32 {
        scale
    } else {
        e.op_before(ret, "hl.cast", &[scale], &[], &TensorSpec::new([], ls.dtype))?
    };
    let product = e.op_before(ret, "hl.mul", &[loss, scale], &[], &ls)?;
    unsafe { mlirOperationSetOperand(ret, 0, product) };
    Ok(())
}

/// The type a parameter of `dtype` is updated in, and its optimizer slots
/// kept in: f32 for the 16-bit floats (as master weights are), else its own.
pub(crate) fn update_dtype(dtype: DType) -> DType {
    if matches!(dtype, DType::F16 | DType::BF16) { DType::F32 } else { dtype }
}

fn cast_to(e: &Emitter, v: MlirValue, dtype: DType) -> Result<MlirValue, Failure> {
    let s = spec(v);
    if s.dtype == dtype { Ok(v) } else { e.typed("hl.cast", &[v], &TensorSpec::new(s.shape, dtype)) }
}

/// `hl.get_param` / `hl.get_state` of `symbol`.
fn get_symbol(e: &Emitter, op: &str, symbol: &str, ty: &TensorSpec) -> Result<MlirValue, Failure> {
    let t = ir::parse_type(e.ctx, &ty.mlir_type()).map_err(|err| (e.loc, format!("{err:?}")))?;
    let o = e.append(&OpSpec {
        attributes: &[("name", crate::ir::symbol_ref(symbol))],
        results: Some(&[t]),
        verify: false,
        ..OpSpec::new(op)
    })?;
    Ok(unsafe { mlirOperationGetResult(o, 0) })
}

/// A flat symbol reference attribute's name (empty if absent).
fn flat_symbol_of(op: MlirOperation, key: &str) -> String {
    ir::flat_symbol(op, key).unwrap_or_default()
}

/// Removes every `hl.set_state` from the functions other than
/// `@train_step`: evaluating a loss by itself writes no state.
pub(crate) fn drop_state_writes(module: MlirOperation) {
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) };
    for f in ops_of(body) {
        if op_name(f) != "func.func" || string_attr(f, "sym_name").as_deref() == Some("train_step") {
            continue;
        }
        let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0)) };
        for op in ops_of(block) {
            if op_name(op) == "hl.set_state" {
                unsafe { mlirOperationDestroy(op) };
            }
        }
    }
}
