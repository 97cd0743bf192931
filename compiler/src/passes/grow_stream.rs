//! Growth operators for residual networks (transformers): the width of the
//! residual stream (`hl-widen-residual`) and a new block in the stack
//! (`hl-insert-block`). Like `passes::grow`, the passes rewrite the
//! architecture; the values (and optimizer state) are carried by the rules
//! in `crate::train::adapt::rewrite`.
//!
//! `hl-widen-residual{width=N}`:
//! 1. Trace the stream ([`plan_residual`]): it starts at every embedding
//!    lookup (`hl.gather` of a parameter table, axis 0) and runs through
//!    adds, subs and dropouts. Every value added into it is traced back to
//!    the embedding table or linear layer that produced it (the
//!    *producers*: their output axis grows). Every linear layer that reads
//!    the stream or a layer norm of it is a *consumer* (its input axis
//!    grows). Every layer norm of it has its weight and bias grow. Anything
//!    else touching the stream (a norm over other axes, a reduction, the
//!    function's result, a post-norm add, a parameter both writing and
//!    reading it) is an error at that op, except an embedding table that
//!    the output layer reads through a layer norm (a tied head): a
//!    producer only, as the norm's new channels are zero (mean rule only).
//! 2. Resize those parameters, scale each of those layer norms' `eps` by
//!    `old / width`, and infer every op's types again.
//!
//! The rule that makes it exact (LEMON's average expansion, with the layer
//! norm made exact instead of approximate): a producer's new output units
//! are the mean of its old ones, so each token's new stream channels equal
//! the mean of its old channels; the stream's mean is unchanged and its
//! variance is `old / width` times the old one. A layer norm's old weights
//! times `sqrt(old / width)`, with `eps` times `old / width`, gives its old
//! output on the old channels and exactly zero on the new ones (new bias
//! zero), so a consumer's new input columns can start from its
//! initialiser; a consumer of the raw stream gets zero new columns. Exact in
//! evaluation; a dropout on the stream draws different masks for the wider
//! tensor, so with dropout the function is preserved in expectation only.
//!
//! `hl-insert-block{prefix=blocks at=K from=J}`: blocks are the parameters
//! `<prefix>.<i>.*`, `i = 0..n`. Block `J`'s ops (the ops that depend on its
//! parameters and on no later parameter) are cloned into position `K` of
//! the residual stream (between blocks `K-1` and `K`), reading new
//! parameters `<prefix>.<K>.*` declared like block `J`'s; the blocks from
//! `K` on are renamed one up, so the grown model reads like one built with
//! `n + 1` blocks. The block's *output projections* (the linear layers
//! whose results are added into the stream, [`BlockPlan::outputs`]) are
//! listed: with them zero the new block is the identity (exact, dropout
//! included, as the old ops keep their dropout streams).

use super::grow::{Failure, WidenPlan, failed, find_param, module_body, param_of, param_shape, report, resize};
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, op_loc, op_name, operands, ops_of, string_attr, users};
use melior::ir::{Location, OperationRef};
use mlir_sys::*;
use std::collections::{HashMap, HashSet};

/// How `hl-widen-residual` makes its new channels (the values themselves
/// are carried by `Operator::WidenResidual`'s rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResidualRule {
    /// New channels are the mean of the old ones (LEMON's average
    /// expansion); the layer norms' `eps` scales by `old / width`.
    #[default]
    Mean,
    /// New channel `j` copies old channel `j mod old` (Net2Net's
    /// duplication, as bert2BERT's function-preserving initialisation):
    /// the stream's statistics, and so the norms' `eps`, are unchanged.
    /// `width` must be a multiple of the old width.
    Duplicate,
}

impl ResidualRule {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "mean" => Ok(ResidualRule::Mean),
            "duplicate" => Ok(ResidualRule::Duplicate),
            other => Err(format!("rule={other}: expected mean or duplicate")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ResidualRule::Mean => "mean",
            ResidualRule::Duplicate => "duplicate",
        }
    }
}

/// What `hl-widen-residual` changes.
#[derive(Clone, Debug, PartialEq)]
pub struct ResidualPlan {
    pub old: usize,
    pub width: usize,
    pub rule: ResidualRule,
    /// Parameters whose `axis` writes the stream (embedding tables, the
    /// output rows and biases of linear layers added into it).
    pub producers: Vec<(String, usize)>,
    /// Linear weights whose `axis` reads it; `true` where they read a layer
    /// norm's output (new columns may take any value), `false` where they
    /// read the raw stream (new columns must be zero).
    pub consumers: Vec<(String, usize, bool)>,
    /// Layer norms of the stream: weight, and bias if any.
    pub norms: Vec<(String, Option<String>)>,
    /// Whether a dropout acts on the stream (then the rewrite is exact in
    /// evaluation only).
    pub dropout: bool,
}

impl ResidualPlan {
    /// The factor on the old layer-norm weights, `sqrt(old / width)`.
    pub fn norm_scale(&self) -> f64 {
        (self.old as f64 / self.width as f64).sqrt()
    }

    /// Under [`ResidualRule::Duplicate`]: how many channels each old one
    /// becomes.
    pub fn copies(&self) -> usize {
        self.width / self.old.max(1)
    }
}

#[derive(Default)]
struct Trace {
    width: usize,
    stream: HashSet<usize>,
    work: Vec<MlirValue>,
    producers: Vec<(String, usize)>,
    consumers: Vec<(String, usize, bool)>,
    norms: Vec<(String, Option<String>)>,
    norm_ops: Vec<MlirOperation>,
    dropout: bool,
    /// Embedding tables a tied output layer reads through a layer norm.
    tied: Vec<String>,
}

const RESIDUAL: &str = "hl-widen-residual";

impl Trace {
    fn check_width(&self, v: MlirValue, at: MlirOperation) -> Result<(), Failure> {
        let shape = ir::spec(v).shape;
        if shape.last() != Some(&self.width) {
            return Err((
                op_loc(at),
                format!(
                    "{RESIDUAL}: a value of the residual stream here has shape {shape:?}, not a last axis of {} (the embedding width)",
                    self.width
                ),
            ));
        }
        Ok(())
    }

    fn producer(&mut self, name: String, axis: usize) {
        if !self.producers.iter().any(|(p, _)| *p == name) {
            self.producers.push((name, axis));
        }
    }

    /// `v` is part of the stream: trace what produced it.
    fn claim(&mut self, v: MlirValue, at: MlirOperation) -> Result<(), Failure> {
        if !self.stream.insert(ir::key(v)) {
            return Ok(());
        }
        self.work.push(v);
        let Some(p) = ir::producer(v) else {
            return Err((
                op_loc(at),
                format!("{RESIDUAL}: a function argument joins the residual stream here; its width cannot grow"),
            ));
        };
        self.check_width(v, p)?;
        let args = operands(p);
        match op_name(p).as_str() {
            "hl.linear" => {
                let weight = param_of(args[1]).ok_or_else(|| {
                    (
                        op_loc(p),
                        format!(
                            "{RESIDUAL}: this linear writes the residual stream with a weight that is not a parameter"
                        ),
                    )
                })?;
                self.producer(weight, 0);
                if let Some(b) = args.get(2) {
                    let bias = param_of(*b).ok_or_else(|| {
                        (
                            op_loc(p),
                            format!(
                                "{RESIDUAL}: this linear writes the residual stream with a bias that is not a parameter"
                            ),
                        )
                    })?;
                    self.producer(bias, 0);
                }
            }
            "hl.gather" => self.embedding(p)?,
            // A parameter added into the stream as it is: a positional
            // table the dynamo exporter folded out of its lookup (`wpe` of
            // `arange(T)`), whose channels are the stream's.
            "hl.get_param" => {
                let v = unsafe { mlirOperationGetResult(p, 0) };
                let name = param_of(v).ok_or_else(|| (op_loc(p), format!("{RESIDUAL}: an unnamed parameter")))?;
                self.producer(name, ir::spec(v).shape.len() - 1);
            }
            "hl.add" | "hl.sub" => {
                for a in args {
                    self.claim(a, p)?;
                }
            }
            "hl.dropout" => {
                self.dropout = true;
                self.claim(args[0], p)?;
            }
            // A masked block's branch: the mask scales every channel alike.
            "hl.mul" if super::grow::is_mask(p) => self.claim(args[0], p)?,
            "hl.layer_norm" => {
                return Err((
                    op_loc(p),
                    format!(
                        "{RESIDUAL}: a layer norm's output is added into the residual stream here (post-norm); only pre-norm residual networks can widen exactly"
                    ),
                ));
            }
            other => {
                return Err((
                    op_loc(p),
                    format!(
                        "{RESIDUAL}: '{other}' writes the residual stream here; it can be written by embeddings, linear layers, adds and dropout"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// An embedding lookup: its table's columns are the stream's channels.
    fn embedding(&mut self, gather: MlirOperation) -> Result<(), Failure> {
        let table = param_of(operands(gather)[0]).filter(|_| ir::int_attr(gather, "axis") == Some(0));
        let Some(table) = table else {
            return Err((
                op_loc(gather),
                format!(
                    "{RESIDUAL}: this gather writes the residual stream but is not an embedding lookup (a parameter table, axis 0)"
                ),
            ));
        };
        self.producer(table, 1);
        Ok(())
    }

    fn consumer(&mut self, linear: MlirOperation, normalized: bool) -> Result<(), Failure> {
        let weight = param_of(operands(linear)[1]).ok_or_else(|| {
            (
                op_loc(linear),
                format!("{RESIDUAL}: this linear reads the residual stream with a weight that is not a parameter"),
            )
        })?;
        match self.consumers.iter_mut().find(|(p, _, _)| *p == weight) {
            Some(c) => c.2 &= normalized,
            None => self.consumers.push((weight, 1, normalized)),
        }
        Ok(())
    }

    /// Follows the users of stream value `v`.
    fn forward(&mut self, v: MlirValue) -> Result<(), Failure> {
        for user in users(v) {
            let args = operands(user);
            let first = unsafe { mlirValueEqual(args[0], v) };
            match op_name(user).as_str() {
                "hl.dropout" if first => {
                    self.dropout = true;
                    self.claim(unsafe { mlirOperationGetResult(user, 0) }, user)?;
                }
                "hl.add" | "hl.sub" => {
                    for a in args {
                        self.claim(a, user)?;
                    }
                    self.claim(unsafe { mlirOperationGetResult(user, 0) }, user)?;
                }
                "hl.mul" if first && super::grow::is_mask(user) => {
                    self.claim(unsafe { mlirOperationGetResult(user, 0) }, user)?;
                }
                "hl.layer_norm" if first => self.norm(user)?,
                "hl.linear" if first => self.consumer(user, false)?,
                other => {
                    return Err((
                        op_loc(user),
                        format!(
                            "{RESIDUAL}: the residual stream reaches '{other}' here; it may reach adds, dropout, layer norms over its last axis and linear layers"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn norm(&mut self, ln: MlirOperation) -> Result<(), Failure> {
        if ir::int_attr(ln, "dims") != Some(1) {
            return Err((
                op_loc(ln),
                format!("{RESIDUAL}: this layer norm normalises more than the stream's last axis"),
            ));
        }
        let args = operands(ln);
        // Operand segments: input, then the optional weight and bias.
        let weight = args.get(1).map(|w| param_of(*w));
        let bias = args.get(2).map(|b| param_of(*b));
        let (Some(Some(weight)), bias) = (weight, bias) else {
            return Err((
                op_loc(ln),
                format!(
                    "{RESIDUAL}: this layer norm of the residual stream has no weight parameter, so its output cannot keep its scale"
                ),
            ));
        };
        let bias = match bias {
            None => None,
            Some(Some(b)) => Some(b),
            Some(None) => {
                return Err((op_loc(ln), format!("{RESIDUAL}: this layer norm's bias is not a parameter")));
            }
        };
        if !self.norms.iter().any(|(w, _)| *w == weight) {
            self.norms.push((weight, bias));
        }
        if !self.norm_ops.iter().any(|o| o.ptr == ln.ptr) {
            self.norm_ops.push(ln);
        }
        let out = unsafe { mlirOperationGetResult(ln, 0) };
        for user in users(out) {
            if op_name(user) == "hl.linear" && unsafe { mlirValueEqual(operands(user)[0], out) } {
                self.consumer(user, true)?;
            } else {
                return Err((
                    op_loc(user),
                    format!(
                        "{RESIDUAL}: a layer norm of the residual stream reaches '{}' here; only linear layers may read it",
                        op_name(user)
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn trace(module: MlirOperation) -> Result<Trace, Failure> {
    let mut t = Trace::default();
    let mut seeds = Vec::new();
    for (_, block) in ir::functions(module) {
        for op in ops_of(block) {
            if op_name(op) == "hl.gather"
                && ir::int_attr(op, "axis") == Some(0)
                && let Some(table) = param_of(operands(op)[0])
                && find_param(module, &table).is_some_and(|d| param_shape(d).len() == 2)
            {
                seeds.push(op);
            }
        }
    }
    let Some(first) = seeds.first() else {
        return Err((
            op_loc(module),
            format!(
                "{RESIDUAL}: no embedding lookup (an hl.gather of a parameter table) starts a residual stream in this model"
            ),
        ));
    };
    t.width = *ir::spec(unsafe { mlirOperationGetResult(*first, 0) }).shape.last().unwrap_or(&0);
    for op in seeds {
        t.claim(unsafe { mlirOperationGetResult(op, 0) }, op)?;
    }
    while let Some(v) = t.work.pop() {
        t.forward(v)?;
    }
    // An embedding table that an output layer also reads through a layer
    // norm (a tied head, as nanoGPT's and GPT-2's) has one rule: the
    // table's new columns are the embedding's (the mean of its old ones),
    // which the head multiplies by the norm's new channels, exactly zero.
    // It stays a producer only.
    let tied: Vec<String> = t
        .consumers
        .iter()
        .filter(|(p, axis, normalized)| *axis == 1 && *normalized && t.producers.iter().any(|(q, a)| q == p && *a == 1))
        .map(|(p, _, _)| p.clone())
        .collect();
    t.consumers.retain(|(p, _, _)| !tied.contains(p));
    t.tied = tied;
    // Any other parameter with two roles (tied weights) has no single rule.
    let mut roles: HashMap<&str, &str> = HashMap::new();
    let named = t.producers.iter().map(|(p, _)| (p.as_str(), "writes"));
    let named = named.chain(t.consumers.iter().map(|(p, _, _)| (p.as_str(), "reads")));
    let named =
        named.chain(t.norms.iter().flat_map(|(w, b)| std::iter::once(w).chain(b)).map(|p| (p.as_str(), "normalises")));
    for (p, role) in named {
        if let Some(other) = roles.insert(p, role)
            && other != role
        {
            let at = find_param(module, p).map_or(op_loc(module), op_loc);
            return Err((
                at,
                format!("{RESIDUAL}: @{p} both {other} and {role} the residual stream (tied weights cannot widen)"),
            ));
        }
    }
    Ok(t)
}

/// The residual stream's width (its embeddings' columns).
pub fn residual_width(module: MlirOperation) -> Result<usize, Failure> {
    Ok(trace(module)?.width)
}

/// Plans `hl-widen-residual` to `width` channels by `rule`.
pub fn plan_residual(module: MlirOperation, width: usize, rule: ResidualRule) -> Result<ResidualPlan, Failure> {
    let t = trace(module)?;
    if width <= t.width {
        return Err((
            op_loc(module),
            format!("{RESIDUAL}: width={width} does not grow the residual stream's {} channels", t.width),
        ));
    }
    if rule == ResidualRule::Duplicate
        && let Some(table) = t.tied.first()
    {
        // Duplicated channels reach the head through the norm as copies,
        // which a tied table's copied columns would count twice.
        return Err((
            find_param(module, table).map_or(op_loc(module), op_loc),
            format!(
                "{RESIDUAL}: @{table} is also the output layer's weight (tied); a tied stream widens by rule=mean only"
            ),
        ));
    }
    if rule == ResidualRule::Duplicate && width % t.width != 0 {
        return Err((
            op_loc(module),
            format!(
                "{RESIDUAL}: rule=duplicate copies every channel the same number of times, so width={width} must be a multiple of the stream's {} channels",
                t.width
            ),
        ));
    }
    Ok(ResidualPlan {
        old: t.width,
        width,
        rule,
        producers: t.producers,
        consumers: t.consumers,
        norms: t.norms,
        dropout: t.dropout,
    })
}

/// Applies a [`ResidualPlan`].
pub fn apply_residual(module: MlirOperation, plan: &ResidualPlan) -> Result<(), Failure> {
    let t = trace(module)?;
    if t.width != plan.old {
        return Err((op_loc(module), format!("{RESIDUAL}: the stream is {} wide, the plan {}", t.width, plan.old)));
    }
    // Duplicated channels keep every token's mean and variance: eps stays.
    let ratio = match plan.rule {
        ResidualRule::Mean => plan.old as f64 / plan.width as f64,
        ResidualRule::Duplicate => 1.0,
    };
    for ln in t.norm_ops.iter().filter(|_| ratio != 1.0) {
        let eps = ir::attr(*ln, "eps");
        let value = unsafe { mlirFloatAttrGetValueDouble(eps) } * ratio;
        let ctx = unsafe { mlirOperationGetContext(*ln) };
        let attr = unsafe { mlirFloatAttrDoubleGet(ctx, mlirAttributeGetType(eps), value) };
        unsafe { mlirOperationSetAttributeByName(*ln, crate::ffi::string_ref("eps"), attr) };
    }
    let mut incoming = plan.producers.clone();
    for (w, b) in &plan.norms {
        incoming.push((w.clone(), 0));
        incoming.extend(b.iter().map(|b| (b.clone(), 0)));
    }
    let widen = WidenPlan {
        layer: "the residual stream".into(),
        old: plan.old,
        width: plan.width,
        incoming,
        outgoing: plan.consumers.iter().map(|(p, a, _)| (p.clone(), *a)).collect(),
        segments: 1,
    };
    resize(module, &widen, &mut same_type, RESIDUAL)
}

/// The `fixed` rule for ops that state their result type: a dropout keeps
/// its input's.
fn same_type(op: MlirOperation, results: &[MlirValue], _: &[MlirType]) -> PassResult {
    if op_name(op) == "hl.dropout" && results.len() == 1 {
        unsafe { mlirValueSetType(results[0], mlirValueGetType(operands(op)[0])) };
        return Ok(());
    }
    let loc = unsafe { Location::from_raw(op_loc(op)) };
    emit_error(loc, &format!("growth: '{}' states its result type and cannot follow the new width", op_name(op)));
    Err(PassFailed)
}

/// What `hl-insert-block` adds.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockPlan {
    /// The blocks' parameter prefix (`blocks` for `blocks.0.ln1.weight`).
    pub prefix: String,
    /// Blocks before the insertion.
    pub count: usize,
    /// The new block's index.
    pub at: usize,
    /// The block it is built like (its index before the insertion).
    pub from: usize,
    /// Block `from`'s parameters, without the `<prefix>.<from>.` part.
    pub params: Vec<String>,
    /// Its output projections' parameters (the linear layers added into
    /// the stream), without the prefix: zero, they make the block the
    /// identity.
    pub outputs: Vec<String>,
    /// MSG-style masked entry: each branch the new block adds into the
    /// stream is multiplied by a mask ramped from 0 to 1.
    pub mask: Option<Mask>,
}

impl BlockPlan {
    /// The new block's mask counter, if masked.
    pub fn mask_symbol(&self) -> Option<String> {
        self.mask.map(|_| format!("{}.{}.mask", self.prefix, self.at))
    }
}

impl BlockPlan {
    /// The name block `index` (before the insertion) has after it.
    pub fn renamed(&self, index: usize) -> usize {
        if index >= self.at { index + 1 } else { index }
    }
}

const BLOCK: &str = "hl-insert-block";

/// `(index, rest)` of a parameter `<prefix>.<index>.<rest>`.
pub use super::grow::Mask;

pub fn block_of<'a>(name: &'a str, prefix: &str) -> Option<(usize, &'a str)> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('.')?;
    let (i, rest) = rest.split_once('.')?;
    Some((i.parse().ok()?, rest))
}

/// One function's ops of a block.
struct BlockOps {
    /// In program order.
    ops: Vec<MlirOperation>,
    input: MlirValue,
    output: MlirValue,
}

/// The ops of block `index` in `block` (a function body): those depending
/// on its parameters and on no parameter declared after them. `None` if
/// the function does not read the block.
fn block_ops(module: MlirOperation, body: MlirBlock, prefix: &str, index: usize) -> Result<Option<BlockOps>, Failure> {
    // Declaration order of the parameters.
    let decls: HashMap<String, usize> = ops_of(module_body(module))
        .into_iter()
        .filter(|&op| matches!(op_name(op).as_str(), "hl.param" | "hl.state"))
        .filter_map(|op| string_attr(op, "sym_name"))
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    let last_own =
        decls.iter().filter(|(n, _)| block_of(n, prefix).is_some_and(|(i, _)| i == index)).map(|(_, &i)| i).max();
    let Some(last_own) = last_own else { return Ok(None) };
    let ops = ops_of(body);
    let (mut own, mut later) = (HashSet::new(), HashSet::new());
    for &op in &ops {
        let (mut o, mut l) = (false, false);
        if matches!(op_name(op).as_str(), "hl.get_param" | "hl.get_state")
            && let Some(name) = ir::flat_symbol(op, "name")
        {
            o = block_of(&name, prefix).is_some_and(|(i, _)| i == index);
            // Later: a later block's, or (not a block's) declared after this block's.
            l = match block_of(&name, prefix) {
                Some((i, _)) => i > index,
                None => decls.get(&name).is_some_and(|&d| d > last_own),
            };
        }
        for a in operands(op) {
            if let Some(p) = ir::producer(a) {
                o |= own.contains(&p.ptr);
                l |= later.contains(&p.ptr);
            }
        }
        if o {
            own.insert(op.ptr);
        }
        if l {
            later.insert(op.ptr);
        }
    }
    let members: Vec<MlirOperation> =
        ops.iter().copied().filter(|op| own.contains(&op.ptr) && !later.contains(&op.ptr)).collect();
    if members.is_empty() {
        return Ok(None);
    }
    let inside: HashSet<_> = members.iter().map(|o| o.ptr).collect();
    let is_inside = |v: MlirValue| ir::producer(v).is_some_and(|p| inside.contains(&p.ptr));
    let mut outputs: Vec<MlirValue> = Vec::new();
    for &op in &members {
        for r in 0..unsafe { mlirOperationGetNumResults(op) } {
            let v = unsafe { mlirOperationGetResult(op, r) };
            if users(v).iter().any(|u| !inside.contains(&u.ptr))
                && !outputs.iter().any(|o| unsafe { mlirValueEqual(*o, v) })
            {
                outputs.push(v);
            }
        }
    }
    let first = members[0];
    let [output] = outputs[..] else {
        return Err((
            op_loc(first),
            format!("{BLOCK}: block {prefix}.{index} has {} values used after it, not one (its output)", outputs.len()),
        ));
    };
    let out_type = unsafe { mlirValueGetType(output) };
    let mut inputs: Vec<MlirValue> = Vec::new();
    for &op in &members {
        for a in operands(op) {
            if !is_inside(a)
                && unsafe { mlirTypeEqual(mlirValueGetType(a), out_type) }
                && !inputs.iter().any(|i| unsafe { mlirValueEqual(*i, a) })
            {
                inputs.push(a);
            }
        }
    }
    let [input] = inputs[..] else {
        return Err((
            op_loc(first),
            format!(
                "{BLOCK}: block {prefix}.{index} reads {} values of its output's type, not one (its input)",
                inputs.len()
            ),
        ));
    };
    Ok(Some(BlockOps { ops: members, input, output }))
}

/// The output projections of a block: walking its residual adds from the
/// input to the output, the linear layer (through dropout) each adds.
fn output_projections(b: &BlockOps, prefix: &str, index: usize) -> Result<Vec<String>, Failure> {
    Ok(spine(b, prefix, index)?.into_iter().flat_map(|(_, _, params)| params).collect())
}

/// A block's residual adds from its input to its output: each add, the
/// operand index of the branch it adds, and the parameters (without the
/// prefix) of the linear layer that branch ends in.
fn spine(b: &BlockOps, prefix: &str, index: usize) -> Result<Vec<(MlirOperation, usize, Vec<String>)>, Failure> {
    let inside: HashSet<_> = b.ops.iter().map(|o| o.ptr).collect();
    let at = op_loc(b.ops[0]);
    let mut v = b.input;
    let mut out = Vec::new();
    for _ in 0..=b.ops.len() {
        if unsafe { mlirValueEqual(v, b.output) } {
            return Ok(out);
        }
        let adds: Vec<MlirOperation> =
            users(v).into_iter().filter(|u| inside.contains(&u.ptr) && op_name(*u) == "hl.add").collect();
        let [add] = adds[..] else {
            return Err((
                at,
                format!("{BLOCK}: block {prefix}.{index}'s residual stream does not run through one add per branch"),
            ));
        };
        let args = operands(add);
        let branch_index = if unsafe { mlirValueEqual(args[0], v) } { 1 } else { 0 };
        let mut branch = args[branch_index];
        // Through dropout, and a mask (a product with a rank-0 value).
        while let Some(p) = ir::producer(branch).filter(|p| {
            op_name(*p) == "hl.dropout" || (op_name(*p) == "hl.mul" && ir::spec(operands(*p)[1]).shape.is_empty())
        }) {
            branch = operands(p)[0];
        }
        let linear = ir::producer(branch).filter(|p| op_name(*p) == "hl.linear").ok_or_else(|| {
            (op_loc(add), format!("{BLOCK}: this residual add of block {prefix}.{index} adds no linear layer's output"))
        })?;
        let mut params = Vec::new();
        for p in operands(linear).iter().skip(1).filter_map(|w| param_of(*w)) {
            let rest =
                block_of(&p, prefix).filter(|(i, _)| *i == index).map(|(_, r)| r.to_string()).ok_or_else(|| {
                    (
                        op_loc(linear),
                        format!(
                            "{BLOCK}: block {prefix}.{index}'s output projection reads @{p}, not its own parameter"
                        ),
                    )
                })?;
            params.push(rest);
        }
        out.push((add, branch_index, params));
        v = unsafe { mlirOperationGetResult(add, 0) };
    }
    Err((at, format!("{BLOCK}: block {prefix}.{index}'s residual adds do not reach its output")))
}

/// How many blocks `<prefix>.<i>.*` the model has; an error if none, or if
/// they are not numbered from 0 without gaps.
pub fn block_count(module: MlirOperation, prefix: &str) -> Result<usize, Failure> {
    let indices: HashSet<usize> = ops_of(module_body(module))
        .into_iter()
        .filter(|&op| op_name(op) == "hl.param")
        .filter_map(|op| string_attr(op, "sym_name"))
        .filter_map(|name| block_of(&name, prefix).map(|(i, _)| i))
        .collect();
    let count = indices.len();
    if count == 0 {
        return Err((op_loc(module), format!("{BLOCK}: no parameters named {prefix}.<i>.* (prefix={prefix})")));
    }
    if (0..count).any(|i| !indices.contains(&i)) {
        return Err((op_loc(module), format!("{BLOCK}: the blocks {prefix}.<i> are not numbered 0 to {}", count - 1)));
    }
    Ok(count)
}

/// Plans `hl-insert-block`: a block at `at` (0 ..= n) built like `from`.
pub fn plan_block(
    module: MlirOperation,
    prefix: &str,
    at: usize,
    from: usize,
    mask: Option<Mask>,
) -> Result<BlockPlan, Failure> {
    if mask.is_some_and(|m| m.steps == 0) {
        return Err((op_loc(module), format!("{BLOCK}: a mask ramps over at least 1 step")));
    }
    let count = block_count(module, prefix)?;
    let params: Vec<String> = ops_of(module_body(module))
        .into_iter()
        .filter(|&op| op_name(op) == "hl.param")
        .filter_map(|op| string_attr(op, "sym_name"))
        .filter_map(|name| block_of(&name, prefix).filter(|(i, _)| *i == from).map(|(_, rest)| rest.to_string()))
        .collect();
    // (Each bound said alone: a bad from= named the good at= first.)
    if at > count {
        return Err((
            op_loc(module),
            format!("{BLOCK}: at={at} must be at most {count} (the model has {count} blocks)"),
        ));
    }
    if from >= count {
        return Err((
            op_loc(module),
            format!("{BLOCK}: from={from} must be below {count} (the model has {count} blocks, counted from 0)"),
        ));
    }
    let mut outputs: Option<Vec<String>> = None;
    for (_, body) in ir::functions(module) {
        if let Some(b) = block_ops(module, body, prefix, from)? {
            let found = output_projections(&b, prefix, from)?;
            if outputs.as_ref().is_some_and(|o| *o != found) {
                return Err((op_loc(b.ops[0]), format!("{BLOCK}: block {prefix}.{from} differs between functions")));
            }
            outputs = Some(found);
        }
    }
    let outputs = outputs
        .ok_or_else(|| (op_loc(module), format!("{BLOCK}: no function reads block {prefix}.{from}'s parameters")))?;
    Ok(BlockPlan { prefix: prefix.to_string(), count, at, from, params, outputs, mask })
}

fn set_string(op: MlirOperation, key: &str, value: &str) {
    unsafe {
        let ctx = mlirOperationGetContext(op);
        let attr = mlirStringAttrGet(ctx, crate::ffi::string_ref(value));
        mlirOperationSetAttributeByName(op, crate::ffi::string_ref(key), attr);
    }
}

fn set_symbol(op: MlirOperation, key: &str, value: &str) {
    unsafe {
        let ctx = mlirOperationGetContext(op);
        let attr = mlirFlatSymbolRefAttrGet(ctx, crate::ffi::string_ref(value));
        mlirOperationSetAttributeByName(op, crate::ffi::string_ref(key), attr);
    }
}

/// Renames block parameter `name` (declaration or read) by `map`.
fn rename(name: &str, prefix: &str, map: impl Fn(usize) -> usize) -> Option<String> {
    let (i, rest) = block_of(name, prefix)?;
    (map(i) != i).then(|| format!("{prefix}.{}.{rest}", map(i)))
}

/// Applies a [`BlockPlan`] to `module`.
pub fn apply_block(module: MlirOperation, plan: &BlockPlan) -> Result<(), Failure> {
    let prefix = plan.prefix.as_str();
    // Every function's copy source and insertion point, before renaming.
    let mut sites = Vec::new();
    for (_, body) in ir::functions(module) {
        let Some(src) = block_ops(module, body, prefix, plan.from)? else { continue };
        let stream = if plan.at < plan.count {
            block_ops(module, body, prefix, plan.at)?.map(|b| b.input)
        } else {
            block_ops(module, body, prefix, plan.count - 1)?.map(|b| b.output)
        };
        let stream = stream.ok_or_else(|| {
            (
                op_loc(src.ops[0]),
                format!(
                    "{BLOCK}: this function reads block {} but not the blocks around position {}",
                    plan.from, plan.at
                ),
            )
        })?;
        let adds = spine(&src, prefix, plan.from)?;
        sites.push((body, src, stream, adds));
    }
    // Blocks at..count move one up, declarations and reads.
    let up = |i: usize| plan.renamed(i);
    let body = module_body(module);
    for op in ops_of(body) {
        if matches!(op_name(op).as_str(), "hl.param" | "hl.state")
            && let Some(name) = string_attr(op, "sym_name")
            && let Some(new) = rename(&name, prefix, up)
        {
            set_string(op, "sym_name", &new);
            if let Some(owner) = string_attr(op, "owner")
                && let Some(new_owner) = rename(&format!("{owner}.x"), prefix, up)
            {
                set_string(op, "owner", new_owner.trim_end_matches(".x"));
            }
            if let Some(param) = ir::flat_symbol(op, "param")
                && let Some(new_param) = rename(&param, prefix, up)
            {
                set_symbol(op, "param", &new_param);
            }
        }
    }
    for (_, block) in ir::functions(module) {
        for op in ops_of(block) {
            if matches!(op_name(op).as_str(), "hl.get_param" | "hl.get_state")
                && let Some(name) = ir::flat_symbol(op, "name")
                && let Some(new) = rename(&name, prefix, up)
            {
                set_symbol(op, "name", &new);
            }
        }
    }
    // The new block's declarations, like block `from`'s, after block at-1's (or before the first).
    let src = up(plan.from);
    let to_new = |name: &str| -> Option<String> {
        let (i, rest) = block_of(name, prefix)?;
        (i == src).then(|| format!("{prefix}.{}.{rest}", plan.at))
    };
    let decls = ops_of(body);
    let anchor_after = decls.iter().rev().find(|&&op| {
        matches!(op_name(op).as_str(), "hl.param" | "hl.state")
            && string_attr(op, "sym_name")
                .and_then(|n| block_of(&n, prefix).map(|(i, _)| i))
                .is_some_and(|i| i < plan.at)
    });
    let anchor_before = decls.iter().find(|&&op| {
        matches!(op_name(op).as_str(), "hl.param" | "hl.state")
            && string_attr(op, "sym_name")
                .and_then(|n| block_of(&n, prefix).map(|(i, _)| i))
                .is_some_and(|i| i > plan.at)
    });
    let mut last: Option<MlirOperation> = None;
    for &op in &decls {
        if !matches!(op_name(op).as_str(), "hl.param" | "hl.state") {
            continue;
        }
        let Some(new) = string_attr(op, "sym_name").and_then(|n| to_new(&n)) else { continue };
        let copy = unsafe { mlirOperationClone(op) };
        set_string(copy, "sym_name", &new);
        let owner = string_attr(op, "owner").and_then(|o| to_new(&format!("{o}.x")));
        if let Some(owner) = owner {
            set_string(copy, "owner", owner.trim_end_matches(".x"));
        }
        if let Some(param) = ir::flat_symbol(op, "param").and_then(|p| to_new(&p)) {
            set_symbol(copy, "param", &param);
        }
        unsafe {
            match (last, anchor_after, anchor_before) {
                (Some(l), _, _) => mlirBlockInsertOwnedOperationAfter(body, l, copy),
                (None, Some(a), _) => mlirBlockInsertOwnedOperationAfter(body, *a, copy),
                (None, None, Some(b)) => mlirBlockInsertOwnedOperationBefore(body, *b, copy),
                (None, None, None) => mlirBlockInsertOwnedOperationAfter(body, op, copy),
            }
        }
        last = Some(copy);
    }
    // The mask counter, after the new block's declarations.
    // A block built like a masked one is masked by its clone of the
    // source's mask (its counter restarts at 0); a requested mask sets
    // that clone's ramp. Otherwise a requested mask gets its counter here.
    let source_masked = decls
        .iter()
        .any(|&op| string_attr(op, "sym_name").as_deref() == Some(&format!("{prefix}.{}.mask", up(plan.from))));
    if let (Some(mask), Some(name)) = (plan.mask, plan.mask_symbol()) {
        if source_masked {
            let clone = ops_of(body).into_iter().find(|&op| string_attr(op, "sym_name").as_deref() == Some(&name));
            if let Some(clone) = clone {
                let ctx = unsafe { mlirOperationGetContext(module) };
                for (key, value) in [("ramp", mask.steps), ("delay", mask.delay)] {
                    let attr = unsafe { mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), value as i64) };
                    unsafe { mlirOperationSetAttributeByName(clone, crate::ffi::string_ref(key), attr) };
                }
            }
        } else if let Some(after) = last {
            declare_mask(module, after, &name, "tensor<f32>", mask).map_err(|(l, m)| (l, format!("{BLOCK}: {m}")))?;
        }
    }
    // Random streams (dropout's, noise's) stay unique: the clones draw new
    // ones.
    let mut next_stream = 0i64;
    for (_, block) in ir::functions(module) {
        for op in ops_of(block) {
            if matches!(op_name(op).as_str(), "hl.dropout" | "hl.random_like") {
                next_stream = next_stream.max(ir::int_attr(op, "stream").unwrap_or(0) + 1);
            }
        }
    }
    for (block, b, stream, adds) in sites {
        let order: HashMap<_, usize> = ops_of(block).iter().enumerate().map(|(i, o)| (o.ptr, i)).collect();
        let def = ir::producer(stream);
        let def_at = def.and_then(|d| order.get(&d.ptr)).map_or(0, |i| i + 1);
        let mut map: HashMap<usize, MlirValue> = HashMap::new();
        map.insert(ir::key(b.input), stream);
        let mut clones = Vec::new();
        let mut cloned: HashMap<usize, MlirOperation> = HashMap::new();
        let mut prev = def;
        for &op in &b.ops {
            let copy = unsafe { mlirOperationClone(op) };
            for (k, a) in operands(op).iter().enumerate() {
                if let Some(v) = map.get(&ir::key(*a)) {
                    unsafe { mlirOperationSetOperand(copy, k as isize, *v) };
                } else if ir::producer(*a).is_some_and(|p| order.get(&p.ptr).is_some_and(|&i| i >= def_at)) {
                    return Err((
                        op_loc(op),
                        format!(
                            "{BLOCK}: block {} reads a value defined after position {} of the stream",
                            plan.from, plan.at
                        ),
                    ));
                }
            }
            if matches!(op_name(copy).as_str(), "hl.get_param" | "hl.get_state")
                && let Some(new) = ir::flat_symbol(copy, "name").and_then(|n| to_new(&n))
            {
                set_symbol(copy, "name", &new);
            }
            if ir::has(copy, "hl.mask")
                && let Some(new) = string_attr(copy, "hl.mask").and_then(|n| to_new(&n))
            {
                set_string(copy, "hl.mask", &new);
            }
            if matches!(op_name(copy).as_str(), "hl.dropout" | "hl.random_like") {
                let ctx = unsafe { mlirOperationGetContext(copy) };
                let attr = unsafe { mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), next_stream) };
                unsafe { mlirOperationSetAttributeByName(copy, crate::ffi::string_ref("stream"), attr) };
                next_stream += 1;
            }
            unsafe {
                match prev {
                    Some(p) => mlirBlockInsertOwnedOperationAfter(block, p, copy),
                    None => mlirBlockInsertOwnedOperation(block, 0, copy),
                }
            }
            prev = Some(copy);
            clones.push(copy);
            cloned.insert(op.ptr as usize, copy);
            for r in 0..unsafe { mlirOperationGetNumResults(op) } {
                map.insert(ir::key(unsafe { mlirOperationGetResult(op, r) }), unsafe {
                    mlirOperationGetResult(copy, r)
                });
            }
        }
        if let (Some(mask), Some(name), false) = (plan.mask, plan.mask_symbol(), source_masked) {
            let mut first = true;
            let mut m = None;
            for (add, index, _) in &adds {
                let add = cloned[&(add.ptr as usize)];
                let branch = operands(add)[*index];
                let mut emitted = Vec::new();
                if first {
                    m = Some(mask_value(add, &name, "tensor<f32>", mask, ir::spec(branch).dtype, &mut emitted)?);
                    first = false;
                }
                let m = m.ok_or_else(|| (op_loc(add), format!("{BLOCK}: no mask value")))?;
                let masked = insert_before(add, "hl.mul", &[branch, m], None, &[], &mut emitted)?;
                unsafe { mlirOperationSetOperand(add, *index as isize, masked) };
                clones.extend(emitted);
            }
        }
        let out = map[&ir::key(b.output)];
        unsafe { mlirValueReplaceAllUsesExcept(stream, out, clones.len() as isize, clones.as_mut_ptr()) };
    }
    if !unsafe { mlirOperationVerify(module) } {
        return Err((op_loc(module), format!("{BLOCK}: the rewritten module does not verify (see the errors above)")));
    }
    Ok(())
}

/// Inserts `name(operands)` before `at`, recording it in `emitted`.
pub(super) fn insert_before(
    at: MlirOperation,
    name: &str,
    operands: &[MlirValue],
    result: Option<&str>,
    attributes: &[(&str, String)],
    emitted: &mut Vec<MlirOperation>,
) -> Result<MlirValue, Failure> {
    let ctx = unsafe { mlirOperationGetContext(at) };
    let loc = op_loc(at);
    let ty = match result {
        Some(t) => Some(ir::parse_type(ctx, t).map_err(|e| (loc, format!("{BLOCK}: {e:?}")))?),
        None => None,
    };
    let types = ty.map(|t| [t]);
    let spec = ir::OpSpec { operands, attributes, results: types.as_ref().map(|t| &t[..]), ..ir::OpSpec::new(name) };
    let op = ir::create_op(ctx, loc, &spec).map_err(|e| (loc, format!("{BLOCK}: building '{name}': {e:?}")))?;
    unsafe { mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(at), at, op) };
    emitted.push(op);
    Ok(unsafe { mlirOperationGetResult(op, 0) })
}

/// `clamp((c - delay) / steps, 0, 1)` of the counter `@name` (of type
/// `state`, f32), before `at`, in `dtype`; the `hl.min` that makes it is
/// tagged `hl.mask = "<name>"` so later rewrites can tell a mask from the
/// model's own products.
pub(super) fn mask_value(
    at: MlirOperation,
    name: &str,
    state: &str,
    mask: Mask,
    dtype: crate::types::DType,
    emitted: &mut Vec<MlirOperation>,
) -> Result<MlirValue, Failure> {
    let f32 = "tensor<f32>";
    let constant = |v: f64, emitted: &mut Vec<MlirOperation>| {
        let value = format!("dense<{}> : tensor<f32>", crate::nn::float_literal(v, crate::types::DType::F32));
        insert_before(at, "hl.constant", &[], Some(f32), &[("value", value)], emitted)
    };
    let c = insert_before(at, "hl.get_state", &[], Some(state), &[("name", crate::ir::symbol_ref(name))], emitted)?;
    let delay = constant(mask.delay as f64, emitted)?;
    let steps = constant(mask.steps as f64, emitted)?;
    let (zero, one) = (constant(0.0, emitted)?, constant(1.0, emitted)?);
    let since = insert_before(at, "hl.sub", &[c, delay], None, &[], emitted)?;
    let ramp = insert_before(at, "hl.div", &[since, steps], None, &[], emitted)?;
    let low = insert_before(at, "hl.max", &[ramp, zero], None, &[], emitted)?;
    let m = insert_before(at, "hl.min", &[low, one], None, &[("hl.mask", crate::ir::quoted(name))], emitted)?;
    if dtype == crate::types::DType::F32 {
        return Ok(m);
    }
    let shape = ir::spec(m).shape;
    let ty = crate::types::TensorSpec::new(shape, dtype).mlir_type();
    insert_before(at, "hl.cast", &[m], Some(&ty), &[], emitted)
}

/// Declares the mask counter `@name : state slot "mask" {ramp, delay}`
/// after `after` in the module body.
pub(super) fn declare_mask(
    module: MlirOperation,
    after: MlirOperation,
    name: &str,
    state: &str,
    mask: Mask,
) -> Result<(), Failure> {
    let ctx = unsafe { mlirOperationGetContext(module) };
    let attrs = [
        ("sym_name", crate::ir::quoted(name)),
        ("type", state.to_string()),
        ("slot", "\"mask\"".to_string()),
        ("init", "#hl.init<zeros>".to_string()),
        ("ramp", format!("{} : i64", mask.steps)),
        ("delay", format!("{} : i64", mask.delay)),
    ];
    let op = ir::create_op(
        ctx,
        op_loc(after),
        &ir::OpSpec { attributes: &attrs, results: Some(&[]), verify: false, ..ir::OpSpec::new("hl.state") },
    )
    .map_err(|e| (op_loc(after), format!("declaring @{name}: {e:?}")))?;
    unsafe { mlirBlockInsertOwnedOperationAfter(module_body(module), after, op) };
    Ok(())
}

pub(super) fn run_residual(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = report(module, RESIDUAL);
    let width = options.get_i64("width").map_err(&report)?;
    if width <= 0 {
        return Err(report(format!("give width=N (N > 0); got width={width}")));
    }
    let rule = ResidualRule::parse(options.get("rule").map_err(&report)?).map_err(&report)?;
    let raw = module.to_raw();
    let plan = plan_residual(raw, width as usize, rule).map_err(failed)?;
    apply_residual(raw, &plan).map_err(failed)
}

pub(super) fn run_block(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = report(module, BLOCK);
    let prefix = options.get("prefix").map_err(&report)?.to_string();
    let at = options.get_i64("at").map_err(&report)?;
    let from = options.get_i64("from").map_err(&report)?;
    if prefix.is_empty() || at < -1 || from < -1 {
        return Err(report(format!(
            "give prefix=NAME, at=K (-1: after the last block) and from=J (-1: the block before K); got prefix='{prefix}' at={at} from={from}"
        )));
    }
    let mask = super::grow::mask_option(options, &report)?;
    let raw = module.to_raw();
    let count = block_count(raw, &prefix).map_err(failed)?;
    let at = if at < 0 { count } else { at as usize };
    let from = if from < 0 { at.saturating_sub(1).min(count - 1) } else { from as usize };
    let plan = plan_block(raw, &prefix, at, from, mask).map_err(failed)?;
    apply_block(raw, &plan).map_err(failed)
}
