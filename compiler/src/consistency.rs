//! Whether a model's `@forward` computes what its `@loss` trains.
//!
//! A model written in `hl` by hand states its network twice: `@forward`
//! (what `aicf predict`, `aicf sample` and the held-out accuracy run) and
//! `@loss` (what training differentiates). The examples write both out in
//! full, so a layer added to one, or an activation changed in one, made
//! `predict` and the accuracy score another network than the one trained,
//! without a word. [`forward_differs`] compares the two structurally: the
//! values `@forward` returns against the prediction `@loss`'s
//! cross-entropy or MSE takes, op by op back to the arguments, with the
//! same parameters, attributes and types.
//!
//! What `@forward` leaves out by design is passed over: dropout in
//! `@loss` (off at inference), the view of the prediction the loss takes
//! (a reshape to `[B*T, V]`, a transpose to classes last, a slice for a
//! shifted target, a cast), and a softmax, log-softmax or argmax that
//! `@forward` puts on top of the logits. A random draw in `@loss` (an imported
//! model's noise, whose mean `@forward` takes) matches anything, as does
//! what `@forward` computes from running statistics alone (a batch norm's,
//! where `@loss` normalizes by the batch's). A loss
//! written out in ops of its own (no `hl.cross_entropy`,
//! `hl.softmax_cross_entropy` or `hl.mse_loss`) is not compared.

use crate::ir::{self, op_name};
use mlir_sys::*;
use std::collections::HashSet;

/// Where `@forward` and `@loss` first differ, said for a note: `None`
/// where they agree, one of `@forward`'s outputs being `@loss`'s
/// prediction (or there is nothing to compare).
pub fn forward_differs(module: MlirOperation) -> Option<String> {
    let functions = ir::functions(module);
    let named = |name: &str| {
        functions.iter().find(|(f, _)| ir::string_attr(*f, "sym_name").as_deref() == Some(name)).map(|&(_, b)| b)
    };
    // (A module the verifier refuses is its error to say, where it is
    // compiled: a @forward without its return has no terminator here.)
    if !unsafe { mlirOperationVerify(module) } {
        return None;
    }
    let (forward, loss) = (named("forward")?, named("loss")?);
    let terminator = unsafe { mlirBlockGetTerminator(forward) };
    if terminator.ptr.is_null() {
        return None;
    }
    let returned = ir::operands(terminator);
    // The loss op: exactly one; its first operand the prediction (either
    // of a squared error's, which is symmetric).
    let losses: Vec<_> = ir::ops_of(loss)
        .into_iter()
        .filter(|&op| matches!(op_name(op).as_str(), "hl.cross_entropy" | "hl.softmax_cross_entropy" | "hl.mse_loss"))
        .collect();
    let [loss_op] = losses[..] else { return None };
    let operands = ir::operands(loss_op);
    let predicted = if op_name(loss_op) == "hl.mse_loss" { &operands[..operands.len().min(2)] } else { &operands[..1] };
    let head = |mut v: MlirValue, over: &[&str]| {
        while let Some(op) = ir::producer(v).filter(|&op| over.contains(&op_name(op).as_str())) {
            match ir::operands(op).first() {
                Some(&x) => v = x,
                None => break,
            }
        }
        v
    };
    // Each as it is and without its view (a network whose own last op is
    // a slice has it on both sides).
    let predictions: Vec<MlirValue> = predicted
        .iter()
        .flat_map(|&p| [head(p, &["hl.reshape", "hl.transpose", "hl.slice", "hl.cast", "hl.dropout"]), p])
        .collect();
    // Any output @forward returns may be the prediction; one that reads no
    // argument (a table an imported graph returns beside its loss) is
    // none.
    let outputs: Vec<MlirValue> = returned
        .into_iter()
        .filter(|&v| reads_an_argument(v))
        .flat_map(|v| {
            [head(v, &["hl.softmax", "hl.log_softmax", "hl.argmax", "hl.reshape", "hl.transpose", "hl.cast"]), v]
        })
        .collect();
    // Agreeing where any pair agrees; else the first pair's difference
    // (both without their views) is said.
    let mut differences = Vec::new();
    for &o in &outputs {
        for &p in &predictions {
            match first_difference(o, p) {
                None => return None,
                Some(d) => differences.push(d),
            }
        }
    }
    let (f, l) = differences.into_iter().next()?;
    let say = |v: MlirValue, side: &str| match ir::producer(v) {
        Some(op) => {
            let name = ir::flat_symbol(op, "name").map(|n| format!(" @{n}")).unwrap_or_default();
            format!("{side} {}{name} at {}", op_name(op), place(op))
        }
        None => format!("{side} argument #{}", unsafe { mlirBlockArgumentGetArgNumber(v) }),
    };
    Some(format!(
        "@forward does not compute what @loss trains: {} where {}; `aicf predict`, `aicf sample` and the held-out \
         accuracy run @forward, so they would score another network than the one trained (write @forward's network \
         in @loss, or have @loss call @forward)",
        say(f, "@forward has"),
        say(l, "@loss has")
    ))
}

/// The earliest pair (in `@forward`'s order) of values that do not match,
/// going back from `f` and `l` together; two ops before an op and an
/// argument.
fn first_difference(f: MlirValue, l: MlirValue) -> Option<(MlirValue, MlirValue)> {
    let mut seen = HashSet::new();
    let mut work = vec![(f, l)];
    let mut found: Option<(MlirValue, MlirValue)> = None;
    while let Some((f, l)) = work.pop() {
        // Dropout in @loss is off in @forward.
        let mut l = l;
        while let Some(x) =
            ir::producer(l).filter(|&op| op_name(op) == "hl.dropout").and_then(|op| ir::operands(op).first().copied())
        {
            l = x;
        }
        if !seen.insert((ir::key(f), ir::key(l))) {
            continue;
        }
        match pair(f, l) {
            Some(operands) => work.extend(operands),
            // Two ops that differ say more than an op against an
            // argument (a layer added to one side puts the argument
            // against that layer's output, and its parameters against the
            // next layer's).
            None => {
                let ops = |(f, l): (MlirValue, MlirValue)| ir::producer(f).is_some() && ir::producer(l).is_some();
                let better = match found {
                    None => true,
                    Some(g) if ops((f, l)) != ops(g) => ops((f, l)),
                    Some((g, _)) => before(f, g),
                };
                if better {
                    found = Some((f, l));
                }
            }
        }
    }
    found
}

/// The operand pairs to compare next where `f` and `l` match here; `None`
/// where they do not.
fn pair(f: MlirValue, l: MlirValue) -> Option<Vec<(MlirValue, MlirValue)>> {
    let arg = |v: MlirValue| unsafe { mlirValueIsABlockArgument(v) };
    if arg(f) || arg(l) {
        let same = arg(f)
            && arg(l)
            && unsafe { mlirBlockArgumentGetArgNumber(f) == mlirBlockArgumentGetArgNumber(l) }
            && unsafe { mlirTypeEqual(mlirValueGetType(f), mlirValueGetType(l)) };
        return same.then(Vec::new);
    }
    let (a, b) = (unsafe { mlirOpResultGetOwner(f) }, unsafe { mlirOpResultGetOwner(l) });
    // A draw in @loss, whose mean @forward takes, matches anything; so
    // does a value @forward computes from running statistics alone (a
    // batch norm's, where @loss takes the batch's).
    if op_name(b) == "hl.random_like" || (op_name(a) != op_name(b) && from_state_alone(f)) {
        return Some(Vec::new());
    }
    let same = op_name(a) == op_name(b)
        && unsafe { mlirOpResultGetResultNumber(f) == mlirOpResultGetResultNumber(l) }
        && unsafe { mlirTypeEqual(mlirValueGetType(f), mlirValueGetType(l)) }
        && unsafe { mlirOperationGetNumOperands(a) == mlirOperationGetNumOperands(b) }
        && same_attributes(a, b);
    same.then(|| ir::operands(a).into_iter().zip(ir::operands(b)).collect())
}

/// Whether `v` is computed from `hl.get_state` and constants, reading no
/// argument.
fn from_state_alone(v: MlirValue) -> bool {
    let (mut work, mut seen, mut state) = (vec![v], HashSet::new(), false);
    while let Some(v) = work.pop() {
        let Some(op) = ir::producer(v) else { return false };
        if !seen.insert(ir::key(v)) {
            continue;
        }
        state |= op_name(op) == "hl.get_state";
        work.extend(ir::operands(op));
    }
    state
}

/// Whether `v` is computed from an argument of its function.
fn reads_an_argument(v: MlirValue) -> bool {
    let (mut work, mut seen) = (vec![v], HashSet::new());
    while let Some(v) = work.pop() {
        let Some(op) = ir::producer(v) else { return true };
        if seen.insert(ir::key(v)) {
            work.extend(ir::operands(op));
        }
    }
    false
}

fn same_attributes(a: MlirOperation, b: MlirOperation) -> bool {
    let n = unsafe { mlirOperationGetNumAttributes(a) };
    n == unsafe { mlirOperationGetNumAttributes(b) }
        && (0..n).all(|i| unsafe {
            let named = mlirOperationGetAttribute(a, i);
            let other = mlirOperationGetAttributeByName(b, mlirIdentifierStr(named.name));
            !other.ptr.is_null() && mlirAttributeEqual(named.attribute, other)
        })
}

/// Whether `v` comes before `w` in `@forward` (an argument before any op;
/// ops of two blocks, in no order).
fn before(v: MlirValue, w: MlirValue) -> bool {
    match (ir::producer(v), ir::producer(w)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(b)) => unsafe {
            mlirOperationGetBlock(a).ptr == mlirOperationGetBlock(b).ptr && mlirOperationIsBeforeInBlock(a, b)
        },
    }
}

fn place(op: MlirOperation) -> String {
    // SAFETY: a location of a live op's context.
    crate::context::describe_location(unsafe { melior::ir::Location::from_raw(ir::op_loc(op)) })
}

/// Where `@loss` takes a mean over the batch by hand, with the batch it
/// was written for as a number: a sum over the batch divided by `batch`
/// (or multiplied by `1 / batch`; or by the count of every summed element,
/// a language model's `B T`). `hl-set-batch` retargets the shapes, not a
/// number, so at another batch (`--batch`, or a smaller last batch) that
/// loss and its gradients are scaled by the ratio, without a word, where
/// `hl.reduce_mean` or a loss op's `reduction = mean` follow the batch.
/// The op's place and the number.
pub fn batch_constant(module: MlirOperation, batch: usize) -> Option<(String, f64)> {
    // (At a batch of 2, the half of a sum of squares is 1/2 too.)
    if batch < 3 {
        return None;
    }
    let (_, loss) =
        ir::functions(module).into_iter().find(|(f, _)| ir::string_attr(*f, "sym_name").as_deref() == Some("loss"))?;
    for op in ir::ops_of(loss) {
        let name = op_name(op);
        if name != "hl.div" && name != "hl.mul" {
            continue;
        }
        let [a, b] = ir::operands(op)[..] else { continue };
        // (A product's constant may come first.)
        let pairs: &[(MlirValue, MlirValue)] = if name == "hl.div" { &[(a, b)] } else { &[(a, b), (b, a)] };
        for &(x, c) in pairs {
            let Some(v) = ir::splat_value(c) else { continue };
            if ir::spec(c).shape.iter().product::<usize>() != 1 {
                continue;
            }
            let Some(summed) = batch_sum(x, batch) else { continue };
            let counts = [batch as f64, summed as f64];
            let n = if name == "hl.div" { v } else { 1.0 / v };
            if counts.iter().any(|&k| (n - k).abs() <= 1e-6 * k) {
                return Some((place(op), v));
            }
        }
    }
    None
}

/// The count of elements summed when `v` is a sum over everything of a
/// value of `batch` rows (through a negation, cast or reshape).
fn batch_sum(mut v: MlirValue, batch: usize) -> Option<usize> {
    loop {
        let op = ir::producer(v)?;
        match op_name(op).as_str() {
            "hl.neg" | "hl.cast" | "hl.reshape" => v = *ir::operands(op).first()?,
            "hl.reduce_sum" => {
                let input = ir::spec(*ir::operands(op).first()?);
                let rank = input.shape.len();
                let axes = ir::i64_array(op, "axes")?;
                // Every axis, the batch's first among them.
                return (input.shape.first() == Some(&batch) && axes.len() == rank)
                    .then(|| input.shape.iter().product());
            }
            // A loss op's sum: over every row's (a token's) loss, or every
            // element's squared error.
            "hl.cross_entropy" | "hl.softmax_cross_entropy" | "hl.mse_loss" => {
                // (reduction: mean 0, sum 1.)
                let input = ir::spec(*ir::operands(op).first()?);
                let rows = if op_name(op) == "hl.mse_loss" {
                    input.shape.iter().product()
                } else {
                    input.shape[..input.shape.len().saturating_sub(1)].iter().product()
                };
                return (ir::int_attr(op, "reduction") == Some(1) && input.shape.first() == Some(&batch))
                    .then_some(rows);
            }
            _ => return None,
        }
    }
}

/// A value less its own mean over the batch where that mean is over one
/// value each (the other axes it is over hold one: a batch norm in
/// training mode over 1x1 maps, or over features), at a batch of one row:
/// zero for every input, so nothing learns through it, and a batch norm's
/// running variance falls to 0. PyTorch refuses the case in training
/// ("Expected more than 1 value per channel when training"). (A mean over
/// one value that does not take in the batch, a layer norm over one
/// feature, PyTorch trains, and so does AICF.)
#[derive(Clone, Debug, PartialEq)]
pub struct Centring {
    /// The subtraction's place.
    pub at: String,
    /// The centred value's shape at the model's batch, and the axes its
    /// mean is over.
    pub shape: Vec<usize>,
    pub axes: Vec<i64>,
}

/// The fewest rows a training batch of a model with a [`Centring`] takes.
pub const CENTRING_ROWS: usize = 2;

/// Where `@loss` centres a value on its mean over the batch and axes of
/// one value (`hl.sub` of a value and its `hl.reduce_mean` with `keepdim`),
/// for a model at a batch of `batch` rows: the first.
pub fn one_value_centring(module: MlirOperation, batch: usize) -> Option<Centring> {
    let (_, loss) =
        ir::functions(module).into_iter().find(|(f, _)| ir::string_attr(*f, "sym_name").as_deref() == Some("loss"))?;
    for op in ir::ops_of(loss) {
        if op_name(op) != "hl.sub" {
            continue;
        }
        let [a, b] = ir::operands(op)[..] else { continue };
        let Some(mean) = ir::producer(b).filter(|&m| op_name(m) == "hl.reduce_mean") else { continue };
        if ir::operands(mean).first().map(|v| ir::key(*v)) != Some(ir::key(a)) || !ir::has(mean, "keepdim") {
            continue;
        }
        let shape = ir::spec(a).shape;
        let Some(axes) = ir::i64_array(mean, "axes") else { continue };
        let rank = shape.len() as i64;
        let dims: Vec<usize> = axes.iter().map(|&x| (x + if x < 0 { rank } else { 0 }) as usize).collect();
        if dims.iter().any(|&d| d >= shape.len()) || !dims.contains(&0) || shape.first() != Some(&batch) {
            continue;
        }
        if dims.iter().filter(|&&d| d != 0).map(|&d| shape[d]).product::<usize>() == 1 {
            return Some(Centring { at: place(op), shape, axes });
        }
    }
    None
}

impl Centring {
    /// Why a batch of `rows` rows does not train the model (`None`: it
    /// does).
    pub fn refuses(&self, rows: usize) -> Option<String> {
        if rows >= CENTRING_ROWS {
            return None;
        }
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        let axes: Vec<String> = self.axes.iter().map(|a| a.to_string()).collect();
        Some(format!(
            "{}: @loss subtracts from a value of shape [{}] its mean over axes [{}], which at a batch of {rows} row{} \
             is over one value each: the difference is 0 for every input, so nothing trains through it (a batch \
             norm in training mode takes more than 1 value per channel, as PyTorch says), and a batch norm's running \
             variance would fall to 0; train with batches of {CENTRING_ROWS} rows or more",
            self.at,
            dims.join(", "),
            axes.join(", "),
            if rows == 1 { "" } else { "s" }
        ))
    }
}
