//! Growth operators: `hl-widen`, `hl-deepen` and `hl-add-heads` rewrite a
//! model's architecture in `hl`; the runtime side (`crate::adapt`) carries
//! the trained parameters and optimizer state across by each operator's
//! rule.
//!
//! The passes work on the model as written (`@forward`, `@loss`, any other
//! function), before autodiff: a grown model is compiled again from them.
//!
//! `hl-widen{layer=fc1 width=N}`:
//! 1. Plan ([`plan_widen`]): `@fc1.weight` (`[H, in]`) and `@fc1.bias` are
//!    the incoming parameters (axis 0). Every `hl.linear` that reads them is
//!    followed through elementwise activations (relu, gelu, tanh, ...) to
//!    the `hl.linear`s that take the result as their input; their weights
//!    are the outgoing parameters (axis 1). Anything else reached (an add, a
//!    norm, a return) is an error at that op: the hidden width would leak.
//! 2. Give the parameters their new types (and the outgoing layers' bias
//!    initialisers PyTorch's bound for the new fan-in), retype their
//!    `hl.get_param`s, infer every op's result types again, retype the
//!    functions and verify.
//!
//! `hl-deepen{after=fc1 name=fc1_deep residual=false}`:
//! 1. Plan ([`plan_deepen`]): in each function, the activation chain after
//!    each `hl.linear` of `@fc1.weight` ends at a value `a` of width `H`.
//! 2. Declare the new layer's parameters after fc1's (PyTorch's `nn.Linear`
//!    initialisers) and insert after `a`: `relu(linear(a))` (identity mode;
//!    the chain must end in `hl.relu`, so `a >= 0`), or
//!    `a + linear_out(relu(linear_in(a)))` (residual mode, any activation);
//!    every other use of `a` then reads the new value.
//!
//! `hl-add-heads{attention=attn heads=N}`: the widening of the attention's
//! q/k/v projections (incoming) and output projection (outgoing) by whole
//! heads ([`plan_heads`]); the head split and merge `hl.reshape`s, which
//! state their result types, get the new head count ([`apply_heads`]).
//! Where q, k and v come from one linear layer under the path, sliced into
//! thirds (nanoGPT's `c_attn`, as PyTorch exports it), that layer's rows
//! grow in each third (`WidenPlan::segments`), the slices move to the new
//! thirds, and the output projection is the layer reading the merged heads
//! ([`fused_projections`]); a masked growth needs separate projections.

use super::set_batch::{reinfer, retype_function};
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, op_loc, op_name, operands, ops_of, string_attr, users};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashSet;

/// An error at a place of the module: (location, message).
pub type Failure = (MlirLocation, String);

/// MSG-style masked entry of new structure: its contribution is
/// multiplied by `clamp((c - delay) / steps, 0, 1)`, where `c` is a counter
/// state (slot `mask`) the train step increments. While the mask is 0 the
/// new structure adds nothing and gets zero gradients, whatever its values.
/// A new block has one counter; widened units one per unit (kept units
/// start full, new ones at 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    pub steps: usize,
    pub delay: usize,
}

/// The longest a mask ramps, its delay included: its step counter is a
/// float, an f32 counting steps exactly to 2^24, after which it stops and
/// a longer ramp never ended (a delay of 2^31 rounded the old units'
/// counters to the delay and masked them off).
pub const MOST_MASK_STEPS: usize = 1 << 24;

/// Whether mask `name` is declared already (a later masked growth of its
/// layer grows it, keeping its ramp and delay): a mask asked with another
/// ramp or delay is an error, not silently the declared one.
fn same_mask(module: MlirOperation, name: &str, mask: Option<Mask>, pass: &str) -> Result<bool, Failure> {
    let Some(decl) =
        ops_of(module_body(module)).into_iter().find(|op| string_attr(*op, "sym_name").as_deref() == Some(name))
    else {
        return Ok(false);
    };
    let (ramp, delay) = (ir::int_attr(decl, "ramp").unwrap_or(0), ir::int_attr(decl, "delay").unwrap_or(0));
    if let Some(m) = mask
        && (m.steps as i64, m.delay as i64) != (ramp, delay)
    {
        return Err((
            op_loc(decl),
            format!(
                "{pass}: @{name} already ramps its units over {ramp} steps after a delay of {delay}; a later masked \
                 growth of the layer uses that mask: give mask={ramp} mask_delay={delay}, or no mask, not mask={} \
                 mask_delay={}",
                m.steps, m.delay
            ),
        ));
    }
    Ok(true)
}

/// The per-unit mask counter of a masked widening of `layer`.
pub fn unit_mask(layer: &str) -> String {
    format!("{layer}.mask")
}

/// Whether `op` applies a growth mask (a product with a tagged mask value).
pub(super) fn is_mask(op: MlirOperation) -> bool {
    op_name(op) == "hl.mul" && operands(op).get(1).and_then(|m| ir::producer(*m)).is_some_and(|p| ir::has(p, "hl.mask"))
}

/// Elementwise ops that keep a hidden unit a hidden unit: unit `j` of their
/// result depends on unit `j` of their operand only.
const ACTIVATIONS: &[&str] = &[
    "hl.relu",
    "hl.gelu",
    "hl.tanh",
    "hl.sigmoid",
    "hl.silu",
    "hl.neg",
    "hl.abs",
    "hl.exp",
    "hl.erf",
    "hl.sin",
    "hl.cos",
];

/// What `hl-widen` changes: the parameters whose `axis` grows from `old`
/// to `width` units.
#[derive(Clone, Debug, PartialEq)]
pub struct WidenPlan {
    pub layer: String,
    pub old: usize,
    pub width: usize,
    /// Parameters that produce the hidden units (the layer's weight rows and
    /// bias): `(name, axis)`.
    pub incoming: Vec<(String, usize)>,
    /// Parameters that read them (the next layers' weight columns).
    pub outgoing: Vec<(String, usize)>,
    /// How many equal parts the incoming parameters' axis holds, each
    /// growing from `old` to `width` units: 3 for a fused q/k/v projection
    /// (its rows are q's, then k's, then v's), else 1.
    pub segments: usize,
}

impl WidenPlan {
    /// For each entry of a grown axis of `len` entries (`width`, or
    /// `segments * width` for an incoming parameter): the old entry it
    /// keeps, or `None` for a new unit.
    pub fn kept(&self, len: usize) -> Vec<Option<usize>> {
        let w = self.width.max(1);
        (0..len).map(|j| (j % w < self.old).then_some((j / w) * self.old + j % w)).collect()
    }
}

/// What `hl-deepen` adds: new parameters of width `width`, the new layer's
/// (`residual`: `.fc_in` and `.fc_out`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeepenPlan {
    pub after: String,
    pub name: String,
    pub width: usize,
    pub residual: bool,
}

impl DeepenPlan {
    /// The new layers' names, in declaration order.
    pub fn layers(&self) -> Vec<String> {
        if self.residual {
            vec![format!("{}.fc_in", self.name), format!("{}.fc_out", self.name)]
        } else {
            vec![self.name.clone()]
        }
    }
}

pub(super) fn module_body(module: MlirOperation) -> MlirBlock {
    unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) }
}

/// The `hl.param` declaring `name`.
pub(super) fn find_param(module: MlirOperation, name: &str) -> Option<MlirOperation> {
    ops_of(module_body(module))
        .into_iter()
        .find(|&op| op_name(op) == "hl.param" && string_attr(op, "sym_name").as_deref() == Some(name))
}

pub(super) fn param_shape(op: MlirOperation) -> Vec<usize> {
    let t = unsafe { mlirTypeAttrGetValue(ir::attr(op, "type")) };
    crate::nn::spec_of_type(t).map(|s| s.shape).unwrap_or_default()
}

/// Every `hl.get_param @name` of every function (top level of its body).
fn reads_of(module: MlirOperation, name: &str) -> Vec<MlirOperation> {
    let mut out = Vec::new();
    for (_, block) in ir::functions(module) {
        for op in ops_of(block) {
            if op_name(op) == "hl.get_param" && ir::flat_symbol(op, "name").as_deref() == Some(name) {
                out.push(op);
            }
        }
    }
    out
}

/// The `hl.linear`s that take `@<layer>.weight` as their weight; an error
/// if the layer or its weight does not exist or is used otherwise.
fn layer_linears(
    module: MlirOperation,
    layer: &str,
    pass: &str,
) -> Result<(MlirOperation, Vec<MlirOperation>), Failure> {
    let module_loc = op_loc(module);
    let weight = format!("{layer}.weight");
    let decl = find_param(module, &weight).ok_or_else(|| {
        (module_loc, format!("{pass}: no parameter @{weight} (is '{layer}' a linear layer of this model?)"))
    })?;
    if param_shape(decl).len() != 2 {
        return Err((op_loc(decl), format!("{pass}: @{weight} is not a matrix; only linear layers can grow")));
    }
    let mut linears = Vec::new();
    for read in reads_of(module, &weight) {
        let w = unsafe { mlirOperationGetResult(read, 0) };
        for user in users(w) {
            if op_name(user) != "hl.linear" || !unsafe { mlirValueEqual(operands(user)[1], w) } {
                return Err((
                    op_loc(user),
                    format!("{pass}: @{weight} is read by '{}' here, not as a linear layer's weight", op_name(user)),
                ));
            }
            linears.push(user);
        }
    }
    if linears.is_empty() {
        return Err((op_loc(decl), format!("{pass}: no function uses @{weight} in an hl.linear")));
    }
    Ok((decl, linears))
}

/// The parameter an `hl.get_param` result names, if `v` is one.
pub(super) fn param_of(v: MlirValue) -> Option<String> {
    let op = ir::producer(v)?;
    (op_name(op) == "hl.get_param").then(|| ir::flat_symbol(op, "name")).flatten()
}

/// Plans `hl-widen` of linear layer `layer` to `width` hidden units.
pub fn plan_widen(module: MlirOperation, layer: &str, width: usize) -> Result<WidenPlan, Failure> {
    const PASS: &str = "hl-widen";
    let (decl, linears) = layer_linears(module, layer, PASS)?;
    let old = param_shape(decl)[0];
    if width < old {
        return Err((
            op_loc(decl),
            format!("{PASS}: width={width} is narrower than {layer}'s {old} units; widening only grows"),
        ));
    }
    let mut incoming = vec![(format!("{layer}.weight"), 0)];
    let bias = format!("{layer}.bias");
    if find_param(module, &bias).is_some() {
        incoming.push((bias, 0));
    }
    let mut outgoing: Vec<(String, usize)> = Vec::new();
    for linear in linears {
        if let Some(b) = operands(linear).get(2)
            && param_of(*b).as_deref() != Some(&format!("{layer}.bias"))
        {
            return Err((
                op_loc(linear),
                format!("{PASS}: this linear of @{layer}.weight has a bias other than @{layer}.bias"),
            ));
        }
        let mut frontier = vec![unsafe { mlirOperationGetResult(linear, 0) }];
        let mut seen = HashSet::new();
        while let Some(v) = frontier.pop() {
            if !seen.insert(ir::key(v)) {
                continue;
            }
            for user in users(v) {
                let name = op_name(user);
                if ACTIVATIONS.contains(&name.as_str()) || is_mask(user) {
                    frontier.push(unsafe { mlirOperationGetResult(user, 0) });
                    continue;
                }
                let args = operands(user);
                if name == "hl.linear" && unsafe { mlirValueEqual(args[0], v) } {
                    let Some(w) = param_of(args[1]) else {
                        return Err((
                            op_loc(user),
                            format!("{PASS}: {layer}'s units feed a linear whose weight is not a parameter"),
                        ));
                    };
                    if !outgoing.iter().any(|(p, _)| *p == w) {
                        outgoing.push((w, 1));
                    }
                    continue;
                }
                return Err((
                    op_loc(user),
                    format!(
                        "{PASS}: {layer}'s units reach '{name}' here; widening supports a linear layer followed by elementwise activations and linear layers"
                    ),
                ));
            }
        }
    }
    if outgoing.is_empty() {
        return Err((
            op_loc(decl),
            format!("{PASS}: {layer}'s output reaches no linear layer; its width is the model's output"),
        ));
    }
    // A parameter past the 1 TiB a tensor may hold (a factor of 1e30) is
    // said here, by name: the verifier's words were lost behind "the
    // rewritten module does not verify".
    for (name, axis) in incoming.iter().chain(&outgoing) {
        let Some(p) = find_param(module, name) else { continue };
        let mut shape = param_shape(p);
        if let Some(d) = shape.get_mut(*axis) {
            *d = width;
        }
        let bytes = shape.iter().try_fold(4u64, |b, &d| b.checked_mul(d as u64)).unwrap_or(u64::MAX);
        if bytes > 1 << 40 {
            return Err((
                op_loc(p),
                format!(
                    "{PASS}: width={width} makes @{name} {shape:?}, {bytes:.3e} bytes as f32: more than the 1 TiB a \
                     tensor may hold",
                    bytes = bytes as f64
                ),
            ));
        }
    }
    Ok(WidenPlan { layer: layer.to_string(), old, width, incoming, outgoing, segments: 1 })
}

/// Applies a [`WidenPlan`] to `module`; with `mask`, the layer's units
/// (as its activation chain ends) are multiplied by a per-unit mask before
/// the next layers read them (declared on the first masked widening;
/// later widenings grow it).
pub fn apply_widen(module: MlirOperation, plan: &WidenPlan, mask: Option<Mask>) -> Result<(), Failure> {
    const PASS: &str = "hl-widen";
    let name = unit_mask(&plan.layer);
    let declared = same_mask(module, &name, mask, PASS)?;
    widen_only(module, plan)?;
    let Some(mask) = mask.filter(|_| !declared) else { return Ok(()) };
    let (decl, linears) = layer_linears(module, &plan.layer, PASS)?;
    let mut anchor = decl;
    for op in ops_of(module_body(module)) {
        if matches!(op_name(op).as_str(), "hl.param" | "hl.state")
            && string_attr(op, "sym_name").is_some_and(|n| n.starts_with(&format!("{}.", plan.layer)))
        {
            anchor = op;
        }
    }
    let state = format!("tensor<{}xf32>", plan.width);
    crate::passes::grow_stream::declare_mask(module, anchor, &name, &state, mask)
        .map_err(|(l, m)| (l, format!("{PASS}: {m}")))?;
    for linear in linears {
        let (v, last) = chain_end(linear);
        let next = unsafe { mlirOperationGetNextInBlock(last) };
        let mut emitted = Vec::new();
        let dtype = ir::spec(v).dtype;
        let m = crate::passes::grow_stream::mask_value(next, &name, &state, mask, dtype, &mut emitted)
            .map_err(|(l, m)| (l, format!("{PASS}: {m}")))?;
        let masked = crate::passes::grow_stream::insert_before(next, "hl.mul", &[v, m], None, &[], &mut emitted)
            .map_err(|(l, m)| (l, format!("{PASS}: {m}")))?;
        unsafe { mlirValueReplaceAllUsesExcept(v, masked, emitted.len() as isize, emitted.as_mut_ptr()) };
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err((op_loc(module), format!("{PASS}: the rewritten module does not verify (see the errors above)")));
    }
    Ok(())
}

fn widen_only(module: MlirOperation, plan: &WidenPlan) -> Result<(), Failure> {
    resize(
        module,
        plan,
        &mut |op, _, _| {
            let loc = unsafe { Location::from_raw(op_loc(op)) };
            emit_error(
                loc,
                &format!("hl-widen: '{}' states its result type and cannot follow the new width", op_name(op)),
            );
            Err(PassFailed)
        },
        "hl-widen",
    )
}

/// Gives `plan`'s parameters their new sizes and retypes every function;
/// an op that states its result type and reads a changed value goes to
/// `fixed`.
pub(super) fn resize(
    module: MlirOperation,
    plan: &WidenPlan,
    fixed: &mut dyn FnMut(MlirOperation, &[MlirValue], &[MlirType]) -> PassResult,
    pass: &str,
) -> Result<(), Failure> {
    let ctx = unsafe { mlirOperationGetContext(module) };
    let mut changed = HashSet::new();
    let incoming = plan.incoming.iter().map(|p| (p, plan.segments.max(1)));
    for ((name, axis), segments) in incoming.chain(plan.outgoing.iter().map(|p| (p, 1))) {
        let decl = find_param(module, name).ok_or_else(|| (op_loc(module), format!("{pass}: no parameter @{name}")))?;
        let t = unsafe { mlirTypeAttrGetValue(ir::attr(decl, "type")) };
        let mut shape = param_shape(decl);
        shape[*axis] = segments * plan.width;
        let new = resized(t, &shape);
        unsafe { mlirOperationSetAttributeByName(decl, crate::ffi::string_ref("type"), mlirTypeAttrGet(new)) };
        // A state of the parameter's shape the model declares (a grown
        // parameter's ages) follows it, keeping its own element type (a
        // 16-bit parameter's optimizer slots are f32).
        for op in ops_of(module_body(module)) {
            if op_name(op) == "hl.state" && ir::flat_symbol(op, "param").as_deref() == Some(name.as_str()) {
                let own = resized(unsafe { mlirTypeAttrGetValue(ir::attr(op, "type")) }, &shape);
                unsafe { mlirOperationSetAttributeByName(op, crate::ffi::string_ref("type"), mlirTypeAttrGet(own)) };
            }
        }
        for read in reads_of(module, name) {
            let v = unsafe { mlirOperationGetResult(read, 0) };
            unsafe { mlirValueSetType(v, new) };
            changed.insert(ir::key(v));
        }
    }
    // A masked widening's per-unit counter follows the width.
    let mask = unit_mask(&plan.layer);
    if let Some(state) = ops_of(module_body(module))
        .into_iter()
        .find(|&op| op_name(op) == "hl.state" && string_attr(op, "sym_name").as_deref() == Some(&mask))
    {
        let t = unsafe { mlirTypeAttrGetValue(ir::attr(state, "type")) };
        let new = resized(t, &[plan.width]);
        unsafe { mlirOperationSetAttributeByName(state, crate::ffi::string_ref("type"), mlirTypeAttrGet(new)) };
        for (_, block) in ir::functions(module) {
            for op in ops_of(block) {
                if op_name(op) == "hl.get_state" && ir::flat_symbol(op, "name").as_deref() == Some(&mask) {
                    let v = unsafe { mlirOperationGetResult(op, 0) };
                    unsafe { mlirValueSetType(v, new) };
                    changed.insert(ir::key(v));
                }
            }
        }
    }
    // The next layers' biases: PyTorch's bound 1/sqrt(fan_in) for the new fan-in.
    for (name, _) in &plan.outgoing {
        let Some(layer) = name.strip_suffix(".weight") else { continue };
        let Some(bias) = find_param(module, &format!("{layer}.bias")) else { continue };
        let text = ir::attr_text(bias, "init");
        let old_bound = 1.0 / (plan.old as f64).sqrt();
        if let Some((low, high)) = uniform_bounds(&text)
            && (high - old_bound).abs() < 1e-9 * old_bound.max(1.0)
            && (low + old_bound).abs() < 1e-9 * old_bound.max(1.0)
        {
            let b = 1.0 / (plan.width as f64).sqrt();
            let (low, high) = (ir::float_literal(-b), ir::float_literal(b));
            let attr = ir::parse_attribute(ctx, &format!("#hl.init<uniform, low = {low}, high = {high}>"))
                .map_err(|e| (op_loc(bias), format!("{pass}: {e:?}")))?;
            unsafe { mlirOperationSetAttributeByName(bias, crate::ffi::string_ref("init"), attr) };
        }
    }
    for (func, block) in ir::functions(module) {
        reinfer(block, &mut changed, fixed, &mut |_, _| {}, &format!("{pass}: '{{op}}' does not accept the new width"))
            .map_err(|_| {
                (op_loc(func), format!("{pass}: the rewritten function does not type (see the error above)"))
            })?;
        retype_function(func, block);
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err((op_loc(module), format!("{pass}: the rewritten module does not verify (see the errors above)")));
    }
    Ok(())
}

/// What `hl-add-heads` changes: the attention's q/k/v projections grow
/// by whole heads (incoming), its output projection's columns with them
/// (outgoing).
#[derive(Clone, Debug, PartialEq)]
pub struct HeadsPlan {
    pub widen: WidenPlan,
    pub heads: usize,
    pub new_heads: usize,
    pub head_dim: usize,
}

/// Plans `hl-add-heads` on the multi-head attention at `path` (its
/// `q_proj`, `k_proj`, `v_proj` and `out_proj` linears, the layer API's
/// layout): `heads` heads in all.
pub fn plan_heads(module: MlirOperation, path: &str, heads: usize) -> Result<HeadsPlan, Failure> {
    const PASS: &str = "hl-add-heads";
    let (old, head_dim) = attention_heads(module, path)?;
    if find_param(module, &format!("{path}.q_proj.weight")).is_none() {
        let fused = fused_projections(module, path)?;
        let inner = old * head_dim;
        let anchor = find_param(module, &format!("{}.weight", fused.qkv)).map_or(op_loc(module), op_loc);
        if heads <= old {
            return Err((anchor, format!("{PASS}: heads={heads} does not add to {path}'s {old} heads")));
        }
        let width = heads
            .checked_mul(head_dim)
            .ok_or_else(|| (anchor, format!("{PASS}: {heads} heads of {head_dim} overflow a width")))?;
        let mut incoming = vec![(format!("{}.weight", fused.qkv), 0)];
        if find_param(module, &format!("{}.bias", fused.qkv)).is_some() {
            incoming.push((format!("{}.bias", fused.qkv), 0));
        }
        let widen = WidenPlan {
            layer: path.to_string(),
            old: inner,
            width,
            incoming,
            outgoing: vec![(format!("{}.weight", fused.out), 1)],
            segments: 3,
        };
        return Ok(HeadsPlan { widen, heads: old, new_heads: heads, head_dim });
    }
    let (q, _) = layer_linears(module, &format!("{path}.q_proj"), PASS)?;
    let inner = old * head_dim;
    if heads <= old {
        return Err((op_loc(q), format!("{PASS}: heads={heads} does not add to {path}'s {old} heads")));
    }
    let mut incoming = Vec::new();
    for p in ["q_proj", "k_proj", "v_proj"] {
        incoming.push((format!("{path}.{p}.weight"), 0));
        if find_param(module, &format!("{path}.{p}.bias")).is_some() {
            incoming.push((format!("{path}.{p}.bias"), 0));
        }
    }
    let width = heads
        .checked_mul(head_dim)
        .ok_or_else(|| (op_loc(q), format!("{PASS}: {heads} heads of {head_dim} overflow a width")))?;
    let widen = WidenPlan {
        layer: path.to_string(),
        old: inner,
        width,
        incoming,
        outgoing: vec![(format!("{path}.out_proj.weight"), 1)],
        segments: 1,
    };
    Ok(HeadsPlan { widen, heads: old, new_heads: heads, head_dim })
}

/// A multi-head attention whose q, k and v come from one linear layer
/// (`qkv`, sliced into thirds on its last axis: nanoGPT's `c_attn`, as
/// PyTorch exports it), its heads merged into the output projection `out`.
pub struct FusedProjections {
    pub qkv: String,
    pub out: String,
    /// The three slices of each function's projection, in q, k, v order.
    pub slices: Vec<[MlirOperation; 3]>,
}

/// The fused projections of the attention at `path`: the one linear layer
/// under `path.` whose output is read by three slices of its last axis
/// into equal thirds, and the one whose input merges heads (a reshape of
/// `[.., heads, head_dim]` to `[.., heads * head_dim]`).
pub fn fused_projections(module: MlirOperation, path: &str) -> Result<FusedProjections, Failure> {
    const PASS: &str = "hl-add-heads";
    let prefix = format!("{path}.");
    let (mut qkv, mut out): (Option<String>, Option<String>) = (None, None);
    let mut slices = Vec::new();
    let mut inner = 0;
    let under = |op: MlirOperation| {
        operands(op).get(1).and_then(|w| param_of(*w)).filter(|w| w.starts_with(&prefix) && w.ends_with(".weight"))
    };
    for (_, block) in ir::functions(module) {
        for op in ops_of(block).into_iter().filter(|&op| op_name(op) == "hl.linear") {
            let Some(weight) = under(op) else { continue };
            let y = unsafe { mlirOperationGetResult(op, 0) };
            let shape = ir::spec(y).shape;
            let (rank, features) = (shape.len(), shape.last().copied().unwrap_or(0));
            let readers = users(y);
            if readers.len() == 3 && features % 3 == 0 && readers.iter().all(|&r| op_name(r) == "hl.slice") {
                let third = features / 3;
                let mut parts: Vec<(i64, MlirOperation)> = Vec::new();
                for &r in &readers {
                    let (Some(start), Some(limit), Some(strides)) =
                        (ir::i64_array(r, "start"), ir::i64_array(r, "limit"), ir::i64_array(r, "strides"))
                    else {
                        continue;
                    };
                    let whole = (0..rank - 1).all(|d| start[d] == 0 && limit[d] == shape[d] as i64);
                    if whole && strides.iter().all(|&s| s == 1) && limit[rank - 1] - start[rank - 1] == third as i64 {
                        parts.push((start[rank - 1], r));
                    }
                }
                parts.sort_by_key(|(s, _)| *s);
                if parts.iter().map(|(s, _)| *s).eq([0, third as i64, 2 * third as i64]) {
                    let name = weight.trim_end_matches(".weight").to_string();
                    if qkv.as_ref().is_some_and(|q| *q != name) {
                        return Err((op_loc(op), format!("{PASS}: {path} has two fused q/k/v projections")));
                    }
                    qkv = Some(name);
                    inner = third;
                    slices.push([parts[0].1, parts[1].1, parts[2].1]);
                    continue;
                }
            }
            // The output projection reads the heads merged.
            let x = operands(op)[0];
            if let Some(merge) = ir::producer(x).filter(|p| op_name(*p) == "hl.reshape") {
                let from = ir::spec(operands(merge)[0]).shape;
                let n = from.len();
                if n >= 2 && shape.len() + 1 == n && ir::spec(x).shape.last() == Some(&(from[n - 2] * from[n - 1])) {
                    let name = weight.trim_end_matches(".weight").to_string();
                    if out.as_ref().is_some_and(|o| *o != name) {
                        return Err((op_loc(op), format!("{PASS}: {path} has two output projections of merged heads")));
                    }
                    out = Some(name);
                }
            }
        }
    }
    let anchor = op_loc(module);
    let qkv = qkv.ok_or_else(|| {
        (
            anchor,
            format!(
                "{PASS}: no parameter @{path}.q_proj.weight, and no fused q/k/v projection under {path} (a linear \
                 layer sliced into thirds): is '{path}' an attention of this model?"
            ),
        )
    })?;
    let out = out.ok_or_else(|| {
        (
            anchor,
            format!("{PASS}: {path}'s fused projection {qkv} has no output projection of merged heads under {path}"),
        )
    })?;
    let out_in = find_param(module, &format!("{out}.weight")).map(param_shape).and_then(|s| s.get(1).copied());
    if out_in != Some(inner) {
        return Err((
            anchor,
            format!("{PASS}: {out} reads {out_in:?} features, not the {inner} that {qkv}'s thirds give"),
        ));
    }
    Ok(FusedProjections { qkv, out, slices })
}

/// `(heads, head_dim)` of the multi-head attention at `path`.
pub fn attention_heads(module: MlirOperation, path: &str) -> Result<(usize, usize), Failure> {
    const PASS: &str = "hl-add-heads";
    if find_param(module, &format!("{path}.q_proj.weight")).is_none() {
        let fused = fused_projections(module, path)?;
        let q = fused.slices[0][0];
        let inner = *ir::spec(unsafe { mlirOperationGetResult(q, 0) }).shape.last().unwrap_or(&0);
        let split = ir::single_user(unsafe { mlirOperationGetResult(q, 0) })
            .filter(|op| op_name(*op) == "hl.reshape")
            .ok_or_else(|| {
                (op_loc(q), format!("{PASS}: {path}'s queries are not split into heads by an hl.reshape here"))
            })?;
        let shape = ir::spec(unsafe { mlirOperationGetResult(split, 0) }).shape;
        return match shape[..] {
            [_, _, h, d] if h * d == inner => Ok((h, d)),
            _ => Err((
                op_loc(split),
                format!("{PASS}: expected a split into [batch, seq, heads, head_dim], got {shape:?}"),
            )),
        };
    }
    let (q, linears) = layer_linears(module, &format!("{path}.q_proj"), PASS)?;
    for p in ["k_proj", "v_proj", "out_proj"] {
        layer_linears(module, &format!("{path}.{p}"), PASS)?;
    }
    let inner = param_shape(q)[0];
    // [B, T, C] -> reshape [B, T, H, D]: the head count and size.
    let split = ir::single_user(unsafe { mlirOperationGetResult(linears[0], 0) })
        .filter(|op| op_name(*op) == "hl.reshape")
        .ok_or_else(|| {
            (
                op_loc(linears[0]),
                format!("{PASS}: {path}.q_proj's output is not split into heads by an hl.reshape here"),
            )
        })?;
    let shape = ir::spec(unsafe { mlirOperationGetResult(split, 0) }).shape;
    match shape[..] {
        [_, _, h, d] if h * d == inner => Ok((h, d)),
        _ => {
            Err((op_loc(split), format!("{PASS}: expected a split into [batch, seq, heads, head_dim], got {shape:?}")))
        }
    }
}

/// Applies a [`HeadsPlan`]: the projections resize, the head split
/// `[B, T, H, D]` becomes `[B, T, H', D]` and the merge `[B, T, C]`
/// becomes `[B, T, H' D]`.
pub fn apply_heads(module: MlirOperation, plan: &HeadsPlan, mask: Option<Mask>) -> Result<(), Failure> {
    const PASS: &str = "hl-add-heads";
    if plan.widen.segments > 1 {
        let fused = fused_projections(module, &plan.widen.layer)?;
        if mask.is_some() {
            return Err((
                op_loc(fused.slices[0][0]),
                format!(
                    "{PASS}: a masked head growth ramps each projection's new heads; {}'s q, k and v are one \
                     fused projection ({}): grow it without a mask",
                    plan.widen.layer, fused.qkv
                ),
            ));
        }
        // Each third's slice moves to the new width.
        let width = plan.widen.width as i64;
        for parts in &fused.slices {
            for (k, slice) in parts.iter().enumerate() {
                let k = k as i64;
                for (key, bound) in [("start", k * width), ("limit", (k + 1) * width)] {
                    let mut v = ir::i64_array(*slice, key).unwrap_or_default();
                    if let Some(last) = v.last_mut() {
                        *last = bound;
                    }
                    let ctx = unsafe { mlirOperationGetContext(*slice) };
                    let attr = unsafe { mlirDenseI64ArrayGet(ctx, v.len() as isize, v.as_ptr()) };
                    unsafe { mlirOperationSetAttributeByName(*slice, crate::ffi::string_ref(key), attr) };
                }
            }
        }
    }
    let name = unit_mask(&plan.widen.layer);
    let declared = same_mask(module, &name, mask, PASS)?;
    heads_only(module, plan)?;
    let Some(mask) = mask.filter(|_| !declared) else { return Ok(()) };
    // The merged heads, where the output projection reads them, times a
    // per-channel mask (a head's channels share its ramp).
    let (decl, linears) = layer_linears(module, &format!("{}.out_proj", plan.widen.layer), PASS)?;
    let mut anchor = decl;
    for op in ops_of(module_body(module)) {
        if matches!(op_name(op).as_str(), "hl.param" | "hl.state")
            && string_attr(op, "sym_name").is_some_and(|n| n.starts_with(&format!("{}.", plan.widen.layer)))
        {
            anchor = op;
        }
    }
    let state = format!("tensor<{}xf32>", plan.widen.width);
    crate::passes::grow_stream::declare_mask(module, anchor, &name, &state, mask)
        .map_err(|(l, m)| (l, format!("{PASS}: {m}")))?;
    for linear in linears {
        let v = operands(linear)[0];
        let mut emitted = Vec::new();
        let m = crate::passes::grow_stream::mask_value(linear, &name, &state, mask, ir::spec(v).dtype, &mut emitted)
            .map_err(|(l, m)| (l, format!("{PASS}: {m}")))?;
        let masked = crate::passes::grow_stream::insert_before(linear, "hl.mul", &[v, m], None, &[], &mut emitted)
            .map_err(|(l, m)| (l, format!("{PASS}: {m}")))?;
        unsafe { mlirOperationSetOperand(linear, 0, masked) };
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err((op_loc(module), format!("{PASS}: the rewritten module does not verify (see the errors above)")));
    }
    Ok(())
}

fn heads_only(module: MlirOperation, plan: &HeadsPlan) -> Result<(), Failure> {
    let (h, d, c) = (plan.heads as i64, plan.head_dim as i64, plan.widen.old as i64);
    let (h2, c2) = (plan.new_heads as i64, plan.widen.width as i64);
    let mut fixed = |op: MlirOperation, results: &[MlirValue], before: &[MlirType]| -> PassResult {
        let loc = unsafe { Location::from_raw(op_loc(op)) };
        let fail = |m: String| {
            emit_error(loc, &format!("hl-add-heads: {m}"));
            PassFailed
        };
        if op_name(op) != "hl.reshape" || results.len() != 1 {
            return Err(fail(format!("'{}' states its result type and cannot follow the new head count", op_name(op))));
        }
        let t = before[0];
        let rank = unsafe { mlirShapedTypeGetRank(t) };
        let mut dims: Vec<i64> = (0..rank as isize).map(|i| unsafe { mlirShapedTypeGetDimSize(t, i) }).collect();
        let n = dims.len();
        if n >= 2 && dims[n - 2] == h && dims[n - 1] == d {
            dims[n - 2] = h2;
        } else if n >= 1 && dims[n - 1] == c {
            dims[n - 1] = c2;
        } else {
            return Err(fail(format!("cannot tell the heads axis of this reshape's result {dims:?}")));
        }
        let shape: Vec<usize> = dims.iter().map(|&x| x as usize).collect();
        unsafe { mlirValueSetType(results[0], resized(t, &shape)) };
        Ok(())
    };
    resize(module, &plan.widen, &mut fixed, "hl-add-heads")
}

/// `(low, high)` of an `#hl.init<uniform, low = a, high = b>` text.
fn uniform_bounds(text: &str) -> Option<(f64, f64)> {
    let inner = text.strip_prefix("#hl.init<")?.strip_suffix('>')?;
    let mut parts = inner.split(',').map(str::trim);
    if parts.next()? != "uniform" {
        return None;
    }
    let (mut low, mut high) = (None, None);
    for part in parts {
        let (k, v) = part.split_once('=')?;
        let v: f64 = v.trim().parse().ok()?;
        match k.trim() {
            "low" => low = Some(v),
            "high" => high = Some(v),
            _ => {}
        }
    }
    Some((low?, high?))
}

/// A ranked tensor type like `t` with `shape`.
fn resized(t: MlirType, shape: &[usize]) -> MlirType {
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    unsafe {
        mlirRankedTensorTypeGet(
            dims.len() as isize,
            dims.as_ptr(),
            mlirShapedTypeGetElementType(t),
            mlirRankedTensorTypeGetEncoding(t),
        )
    }
}

/// The end of the activation chain after `linear`: the last value reached
/// through single-use activations, and the op that defines it.
fn chain_end(linear: MlirOperation) -> (MlirValue, MlirOperation) {
    let mut op = linear;
    loop {
        let v = unsafe { mlirOperationGetResult(op, 0) };
        match ir::single_user(v) {
            Some(user) if ACTIVATIONS.contains(&op_name(user).as_str()) => op = user,
            _ => return (v, op),
        }
    }
}

/// Plans `hl-deepen`: a layer `name` after linear layer `after`.
pub fn plan_deepen(module: MlirOperation, after: &str, name: &str, residual: bool) -> Result<DeepenPlan, Failure> {
    const PASS: &str = "hl-deepen";
    let (decl, linears) = layer_linears(module, after, PASS)?;
    let width = param_shape(decl)[0];
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '@') {
        return Err((op_loc(module), format!("{PASS}: name='{name}' is not a layer name")));
    }
    let plan = DeepenPlan { after: after.to_string(), name: name.to_string(), width, residual };
    for layer in plan.layers() {
        for p in ["weight", "bias"] {
            if find_param(module, &format!("{layer}.{p}")).is_some() {
                return Err((op_loc(module), format!("{PASS}: the model already has @{layer}.{p}; pick another name")));
            }
        }
    }
    for linear in linears {
        let (_, last) = chain_end(linear);
        if !residual && op_name(last) != "hl.relu" {
            return Err((
                op_loc(last),
                format!(
                    "{PASS}: {after} is not followed by a relu here ('{}'), so an identity layer would not preserve the function; use residual=true",
                    op_name(last)
                ),
            ));
        }
    }
    Ok(plan)
}

/// Applies a [`DeepenPlan`] to `module`.
pub fn apply_deepen(module: MlirOperation, plan: &DeepenPlan) -> Result<(), Failure> {
    const PASS: &str = "hl-deepen";
    let ctx = unsafe { mlirOperationGetContext(module) };
    let (decl, linears) = layer_linears(module, &plan.after, PASS)?;
    let elem = unsafe { mlirShapedTypeGetElementType(mlirTypeAttrGetValue(ir::attr(decl, "type"))) };
    let elem_text = ir::type_text(elem);
    let h = plan.width;
    // Declarations: after the last parameter of `after`.
    let body = module_body(module);
    let mut anchor = decl;
    for op in ops_of(body) {
        if op_name(op) == "hl.param" && string_attr(op, "owner").as_deref() == Some(plan.after.as_str()) {
            anchor = op;
        }
    }
    let bound = 1.0 / (h as f64).sqrt();
    for layer in plan.layers() {
        for (p, ty, init) in [
            (
                "weight",
                format!("tensor<{h}x{h}x{elem_text}>"),
                "#hl.init<kaiming_uniform, gain = 0.57735026918962584>".to_string(),
            ),
            (
                "bias",
                format!("tensor<{h}x{elem_text}>"),
                format!("#hl.init<uniform, low = {}, high = {}>", ir::float_literal(-bound), ir::float_literal(bound)),
            ),
        ] {
            let attrs = [
                ("sym_name", ir::quoted(&format!("{layer}.{p}"))),
                ("type", ty),
                ("owner", ir::quoted(&layer)),
                ("init", init),
            ];
            let op = ir::create_op(
                ctx,
                op_loc(decl),
                &OpSpec { attributes: &attrs, results: Some(&[]), verify: false, ..OpSpec::new("hl.param") },
            )
            .map_err(|e| (op_loc(decl), format!("{PASS}: declaring @{layer}.{p}: {e:?}")))?;
            unsafe { mlirBlockInsertOwnedOperationAfter(body, anchor, op) };
            anchor = op;
        }
    }
    for linear in linears {
        let (a, last) = chain_end(linear);
        let loc = op_loc(last);
        let block = unsafe { mlirOperationGetBlock(last) };
        let a_type = unsafe { mlirValueGetType(a) };
        let mut at = last;
        let mut new_ops = Vec::new();
        let mut emit = |spec: OpSpec<'_>| -> Result<MlirValue, Failure> {
            let op = ir::create_op(ctx, loc, &spec)
                .map_err(|e| (loc, format!("{PASS}: building '{}': {e:?}", spec.name)))?;
            unsafe { mlirBlockInsertOwnedOperationAfter(block, at, op) };
            at = op;
            new_ops.push(op);
            Ok(unsafe { mlirOperationGetResult(op, 0) })
        };
        let dense = |layer: &str, x: MlirValue, emit: &mut dyn FnMut(OpSpec<'_>) -> Result<MlirValue, Failure>| {
            let mut read = |p: &str, ty: String| -> Result<MlirValue, Failure> {
                let t = ir::parse_type(ctx, &ty).map_err(|e| (loc, format!("{PASS}: {e:?}")))?;
                emit(OpSpec {
                    attributes: &[("name", ir::symbol_ref(&format!("{layer}.{p}")))],
                    results: Some(&[t]),
                    verify: false,
                    ..OpSpec::new("hl.get_param")
                })
            };
            let w = read("weight", format!("tensor<{h}x{h}x{elem_text}>"))?;
            let b = read("bias", format!("tensor<{h}x{elem_text}>"))?;
            emit(OpSpec { operands: &[x, w, b], results: Some(&[a_type]), ..OpSpec::new("hl.linear") })
        };
        let relu = |x: MlirValue, emit: &mut dyn FnMut(OpSpec<'_>) -> Result<MlirValue, Failure>| {
            emit(OpSpec { operands: &[x], results: Some(&[a_type]), ..OpSpec::new("hl.relu") })
        };
        let out = if plan.residual {
            let layers = plan.layers();
            let hidden = dense(&layers[0], a, &mut emit)?;
            let act = relu(hidden, &mut emit)?;
            let delta = dense(&layers[1], act, &mut emit)?;
            emit(OpSpec { operands: &[a, delta], results: Some(&[a_type]), ..OpSpec::new("hl.add") })?
        } else {
            let hidden = dense(&plan.name, a, &mut emit)?;
            relu(hidden, &mut emit)?
        };
        unsafe { mlirValueReplaceAllUsesExcept(a, out, new_ops.len() as isize, new_ops.as_mut_ptr()) };
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err((op_loc(module), format!("{PASS}: the rewritten module does not verify (see the errors above)")));
    }
    Ok(())
}

pub(super) fn report(module: OperationRef<'_, '_>, pass: &'static str) -> impl Fn(String) -> PassFailed {
    let loc = module.location().to_raw();
    move |m: String| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("{pass}: {m}"));
        PassFailed
    }
}

/// The `mask` and `mask_delay` options of a growth pass.
pub(super) fn mask_option(
    options: &PassOptions,
    report: &impl Fn(String) -> PassFailed,
) -> Result<Option<Mask>, PassFailed> {
    let steps = options.get_i64("mask").map_err(report)?;
    let delay = options.get_i64("mask_delay").map_err(report)?;
    if steps < 0 || delay < 0 {
        return Err(report(format!("mask={steps} and mask_delay={delay} count steps (0: no mask)")));
    }
    // A delay without a mask delayed nothing, silently.
    if steps == 0 && delay > 0 {
        return Err(report(format!("mask_delay={delay} delays a mask: give mask=N (the steps it ramps over) too")));
    }
    if steps.saturating_add(delay) > MOST_MASK_STEPS as i64 {
        return Err(report(format!(
            "mask={steps} and mask_delay={delay}: together at most {MOST_MASK_STEPS} steps (2^24: the mask counts \
             its steps in f32, exact to there)"
        )));
    }
    Ok((steps > 0).then_some(Mask { steps: steps as usize, delay: delay as usize }))
}

pub(super) fn failed((loc, message): Failure) -> PassFailed {
    emit_error(unsafe { Location::from_raw(loc) }, &message);
    PassFailed
}

pub(super) fn run_widen(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = report(module, "hl-widen");
    let layer = options.get("layer").map_err(&report)?.to_string();
    let width = options.get_i64("width").map_err(&report)?;
    if layer.is_empty() || width <= 0 {
        return Err(report(format!("give layer=NAME and width=N (N > 0); got layer='{layer}' width={width}")));
    }
    let mask = mask_option(options, &report)?;
    let raw = module.to_raw();
    let plan = plan_widen(raw, &layer, width as usize).map_err(failed)?;
    apply_widen(raw, &plan, mask).map_err(failed)
}

pub(super) fn run_heads(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = report(module, "hl-add-heads");
    let attention = options.get("attention").map_err(&report)?.to_string();
    let heads = options.get_i64("heads").map_err(&report)?;
    if attention.is_empty() || heads <= 0 {
        return Err(report(format!(
            "give attention=PATH and heads=N (N > 0); got attention='{attention}' heads={heads}"
        )));
    }
    let mask = mask_option(options, &report)?;
    let raw = module.to_raw();
    let plan = plan_heads(raw, &attention, heads as usize).map_err(failed)?;
    apply_heads(raw, &plan, mask).map_err(failed)
}

pub(super) fn run_deepen(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = report(module, "hl-deepen");
    let after = options.get("after").map_err(&report)?.to_string();
    let residual = options.get_bool("residual").map_err(&report)?;
    let mut name = options.get("name").map_err(&report)?.to_string();
    if after.is_empty() {
        return Err(report("give after=LAYER, the linear layer to insert after".into()));
    }
    if name.is_empty() {
        name = format!("{after}_deep");
    }
    let raw = module.to_raw();
    let plan = plan_deepen(raw, &after, &name, residual).map_err(failed)?;
    apply_deepen(raw, &plan).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::WidenPlan;

    #[test]
    fn a_fused_projections_parts_keep_their_own_units() {
        let plan = WidenPlan {
            layer: "attn".into(),
            old: 2,
            width: 3,
            incoming: vec![("attn.c_attn.weight".into(), 0)],
            outgoing: vec![("attn.c_proj.weight".into(), 1)],
            segments: 3,
        };
        // q, k, v rows [0, 2), [2, 4), [4, 6) go to [0, 2), [3, 5), [6, 8).
        assert_eq!(plan.kept(9), [Some(0), Some(1), None, Some(2), Some(3), None, Some(4), Some(5), None]);
        // The output projection's columns: one part.
        assert_eq!(plan.kept(3), [Some(0), Some(1), None]);
    }
}
