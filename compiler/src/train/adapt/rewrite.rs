//! Growth operators: the rewrite of the `hl` source, and the rebinding of
//! every parameter and optimizer-state value onto the new model.

use super::Result;
use crate::passes::grow::{self, DeepenPlan, WidenPlan};
use crate::passes::grow_stream::{self, BlockPlan, ResidualPlan, ResidualRule};
use crate::train::{TrainError, Trainer};
use crate::{CompileError, CompilerContext, Diagnostic, Severity};
use aicf_runtime::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Every parameter and optimizer-state value of a model, by symbol name.
pub type State = BTreeMap<String, Tensor>;

/// How `widen` fills the new units. Both preserve the function exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WidenRule {
    /// Net2WiderNet (Chen et al. 2016). New unit `j` copies a random
    /// existing unit `g(j)`: its incoming weights and bias are `g(j)`'s; the
    /// outgoing weights of `g(j)` are split among its `c` copies (itself
    /// included): the original keeps `(1 + s (c - 1)) / c`, each copy
    /// `(1 - s) / c` (`s` = `split_noise`, the symmetry breaking; any split
    /// summing to one preserves the function). Optimizer state: a copy's
    /// gradient on its incoming weights is its split factor times the
    /// source's, so first moments (Adam `exp_avg`, SGD `momentum`) are the
    /// source's times the factor and second moments (`exp_avg_sq`) times its
    /// square; a copy's outgoing weights see the source's gradient, so their
    /// moments are copied unchanged.
    #[default]
    Net2wider,
    /// GradMax-style growth (Evci et al. 2022): new units get incoming
    /// weights and bias from the layer's initialiser and zero outgoing
    /// weights, so the function is unchanged while the outgoing weights'
    /// gradient is not zero. Optimizer state of every new entry is zero;
    /// existing entries are copied.
    ZeroOut,
    /// New units' incoming and outgoing weights both from the layers'
    /// initialisers: function-preserving only under a mask (MSG), which
    /// the operator must then ask for. New state zero.
    Fresh,
}

/// A growth operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Operator {
    /// `hl-widen`: linear layer `layer` to `width` units, by `rule`.
    /// `noise` > 0 adds Gaussian noise (times the layer's weight standard
    /// deviation) to the copies' incoming weights: not function-preserving,
    /// so the probe check records the change instead of enforcing it.
    Widen {
        layer: String,
        width: usize,
        #[serde(default)]
        rule: WidenRule,
        #[serde(default)]
        split_noise: f64,
        #[serde(default)]
        noise: f64,
        /// MSG-style masked entry of the new units over this many steps
        /// (after `mask_delay` at 0): a per-unit counter, kept units full.
        /// With `zero-out` or `fresh`.
        #[serde(default)]
        mask: Option<usize>,
        #[serde(default)]
        mask_delay: usize,
    },
    /// `hl-deepen`: a new layer after `after`'s activation. Identity mode
    /// (Net2DeeperNet): weight I, bias 0, exact after a relu. Residual mode:
    /// `fc_in` from its initialiser, `fc_out` weight and bias zero, exact
    /// after any activation. New parameters start with zero optimizer state.
    Deepen {
        after: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        residual: bool,
    },
    /// `hl-add-heads`: the multi-head attention at `attention` to `heads`
    /// heads. New heads' q/k/v projections from their initialiser, the
    /// output projection's new columns zero (exact), new state zero: the
    /// zero-out rule over whole heads.
    Heads {
        attention: String,
        heads: usize,
        /// MSG-style masked entry over this many steps (after
        /// `mask_delay`): then the new heads' output columns come from the
        /// initialiser too (exact under the mask), not zero.
        #[serde(default)]
        mask: Option<usize>,
        #[serde(default)]
        mask_delay: usize,
    },
    /// `hl-widen-residual`: the residual stream of a pre-norm network to
    /// `width` channels (LEMON-style average expansion, made exact): the
    /// new output units of embeddings and of the projections added into the
    /// stream are the mean of the old ones; the layer norms' old weights
    /// are scaled by `sqrt(old / width)` (their `eps` by `old / width`),
    /// their new weights are `sqrt(old / width)` and new biases zero; the
    /// new input columns of linear layers reading a norm come from their
    /// initialiser, of those reading the raw stream zero. Optimizer state:
    /// copied, new entries zero; a norm weight's first moments times
    /// `sqrt(width / old)` and second moments times `width / old` (its
    /// gradient scales so). Exact in evaluation; with dropout on the stream
    /// only in expectation (the probe check then bounds the loss rise).
    ///
    /// `rule = Duplicate` (Net2Net's duplication; `width` a multiple `k`
    /// of the old width): new channel `j` copies old channel `j mod old`
    /// in every producer and layer norm (weights and biases unchanged, as
    /// is `eps`: each token's mean and variance are those of the old
    /// channels), and every reader's column of an old channel is split
    /// among its `k` copies: `w / k` each, plus `noise` times the reader's
    /// initialiser draw for that column less the draws' mean over the
    /// copies (the noise sums to zero over them, so the function is exact
    /// for any `noise`, and the copies' readers differ, which breaks their
    /// symmetry). Optimizer state, as staged training rescales duplicated
    /// units: a copy's producer row (and norm weight and bias) sees `1/k`
    /// of the old gradient, so its first moments are the old times `1/k`
    /// and its second times `1/k^2`; a reader's column sees the old
    /// column's gradient, so its moments are copied; ages are copied.
    WidenResidual {
        width: usize,
        #[serde(default)]
        rule: ResidualRule,
        /// Under `Duplicate`: the readers' symmetry-breaking noise.
        #[serde(default)]
        noise: f64,
    },
    /// `hl-insert-block`: a block of the stack `prefix` at position `at`
    /// (`None`: after the last), built like block `from` (`None`: the one
    /// before), the blocks from `at` on renamed one up. `init`: `zero`
    /// (the block's initialisers, its output projections zero: the
    /// identity, exact) or `copy` (block `from`'s values: stacking, not
    /// function-preserving). `state`: the new block's optimizer state,
    /// `zero` (reset) or `copy` (block `from`'s, with `init = copy`).
    AddBlock {
        #[serde(default = "default_prefix")]
        prefix: String,
        #[serde(default)]
        at: Option<usize>,
        #[serde(default)]
        from: Option<usize>,
        #[serde(default)]
        init: BlockInit,
        #[serde(default)]
        state: SlotRule,
        /// MSG-style masked entry: the block's branches are multiplied by
        /// a mask ramped from 0 to 1 over this many steps (after
        /// `mask_delay` steps at 0), so the function is preserved for any
        /// `init`; the mask's counter is a state the train step advances.
        #[serde(default)]
        mask: Option<usize>,
        #[serde(default)]
        mask_delay: usize,
    },
    /// Several growth operators, one after the other, as one rewrite.
    Compose { ops: Vec<Operator> },
}

/// The layer API's prefix of transformer blocks (`blocks.<i>.*`).
pub(super) fn default_prefix() -> String {
    "blocks".into()
}

/// How a new block's parameters start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockInit {
    /// From the initialisers, output projections zero: the identity.
    #[default]
    Zero,
    /// The values of the block it is built like (G_stack-style stacking).
    Copy,
}

/// What a new parameter's optimizer-state slots start from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlotRule {
    /// Zero (reset).
    #[default]
    Zero,
    /// The source parameter's.
    Copy,
}

impl Operator {
    /// Whether the rewrite, with its rule's values, computes the same
    /// function (the probe check then enforces it).
    pub fn exact(&self) -> bool {
        match self {
            Operator::Widen { rule: WidenRule::Fresh, mask, .. } => mask.is_some(),
            Operator::Widen { noise, .. } => *noise == 0.0,
            Operator::Deepen { .. } | Operator::Heads { .. } | Operator::WidenResidual { .. } => true,
            Operator::AddBlock { init, mask, .. } => *init == BlockInit::Zero || mask.is_some(),
            Operator::Compose { ops } => ops.iter().all(Operator::exact),
        }
    }

    /// The pass pipeline that rewrites the architecture.
    pub fn pipeline(&self) -> String {
        use crate::pipeline;
        // A delay delays a mask's ramp: without a mask there is none (the
        // passes refuse one alone; a policy refuses it when read).
        let delay = |mask: &Option<usize>, delay: &usize| mask.map_or(0, |_| *delay);
        match self {
            Operator::Widen { layer, width, mask, mask_delay, .. } => {
                pipeline::widen(layer, *width, mask.unwrap_or(0), delay(mask, mask_delay))
            }
            Operator::Deepen { after, name, residual } => {
                pipeline::deepen(after, &name.clone().unwrap_or_else(|| format!("{after}_deep")), *residual)
            }
            Operator::Heads { attention, heads, mask, mask_delay } => {
                pipeline::add_heads(attention, *heads, mask.unwrap_or(0), delay(mask, mask_delay))
            }
            Operator::WidenResidual { width, rule, .. } => pipeline::widen_residual(*width, *rule),
            Operator::AddBlock { prefix, at, from, mask, mask_delay, .. } => {
                let index = |i: &Option<usize>| i.map_or(-1, |i| i as i64);
                pipeline::insert_block(prefix, index(at), index(from), mask.unwrap_or(0), delay(mask, mask_delay))
            }
            Operator::Compose { ops } => ops.iter().map(Operator::pipeline).collect::<Vec<_>>().join(" then "),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Operator::Widen { layer, width, rule, mask, .. } => {
                let mask = mask.map_or(String::new(), |k| format!(", masked over {k} steps"));
                // The rule as a policy writes it (`zero-out`; it read
                // `zeroout`), the layer's name as it is.
                let rule = serde_json::to_value(rule).ok().and_then(|v| v.as_str().map(str::to_string));
                format!("widen {layer} to {width} ({}{mask})", rule.unwrap_or_default())
            }
            Operator::Deepen { after, residual, .. } => {
                format!("deepen after {after} ({})", if *residual { "residual, zero output" } else { "identity" })
            }
            Operator::Heads { attention, heads, mask, .. } => {
                let mask = mask.map_or(String::new(), |k| format!(" (fresh, masked over {k} steps)"));
                format!("grow {attention} to {heads} heads{mask}")
            }
            Operator::WidenResidual { width, rule: ResidualRule::Mean, .. } => {
                format!("widen the residual stream to {width}")
            }
            Operator::WidenResidual { width, rule: ResidualRule::Duplicate, noise } => {
                format!("widen the residual stream to {width} (duplicate, noise {noise})")
            }
            Operator::AddBlock { prefix, at, from, init, mask, .. } => {
                let at = at.map_or("after the last".to_string(), |a| format!("at {a}"));
                let from = from.map_or(String::new(), |f| format!(" like {prefix}.{f}"));
                let mask = mask.map_or(String::new(), |k| format!(", masked over {k} steps"));
                format!("add a block to {prefix} {at}{from} ({init:?}{mask})").to_lowercase()
            }
            Operator::Compose { ops } => ops.iter().map(Operator::describe).collect::<Vec<_>>().join("; "),
        }
    }
}

/// What a rewrite planned, for [`rebind`].
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Widen {
        plan: WidenPlan,
        rule: WidenRule,
        split_noise: f64,
        noise: f64,
        mask: Option<grow::Mask>,
    },
    Deepen(DeepenPlan),
    /// The plan and, under `ResidualRule::Duplicate`, the readers' noise.
    Residual(ResidualPlan, f64),
    Block {
        plan: BlockPlan,
        init: BlockInit,
        state: SlotRule,
    },
}

/// A rewritten model.
#[derive(Clone, Debug)]
pub struct Rewrite {
    /// The new `hl` module.
    pub source: String,
    pub plan: Plan,
    /// The parameter table's changes: `fc1.weight 16x64 -> 32x64`,
    /// `+fc1_deep.weight 32x32`.
    pub diff: Vec<String>,
    /// Whether the values the plan's rule carries compute the same
    /// function (a residual widening under dropout does only in
    /// expectation).
    pub exact: bool,
}

pub(super) fn params_of(module: mlir_sys::MlirOperation) -> Vec<(String, Vec<usize>)> {
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(module, 0)) };
    crate::ir::ops_of(body)
        .into_iter()
        .filter(|&op| crate::ir::op_name(op) == "hl.param")
        .map(|op| {
            let t = unsafe { mlir_sys::mlirTypeAttrGetValue(crate::ir::attr(op, "type")) };
            let shape = crate::nn::spec_of_type(t).map(|s| s.shape).unwrap_or_default();
            (crate::ir::string_attr(op, "sym_name").unwrap_or_default(), shape)
        })
        .collect()
}

/// The parameter table's changes from `before` to `after`, in `after`'s
/// order: `fc1.weight 16x64 -> 32x64`, `+fc1_deep.weight 32x32`.
fn param_diff(before: &[(String, Vec<usize>)], after: &[(String, Vec<usize>)]) -> Vec<String> {
    let mut diff = Vec::new();
    for (name, shape) in after {
        match before.iter().find(|(n, _)| n == name) {
            Some((_, old)) if old != shape => diff.push(format!("{name} {} -> {}", shape_text(old), shape_text(shape))),
            Some(_) => {}
            None => diff.push(format!("+{name} {}", shape_text(shape))),
        }
    }
    diff
}

fn shape_text(shape: &[usize]) -> String {
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// Rewrites the `hl` module `source` by `op` (the growth pass), returning
/// the new module's text and the plan its state rebinding follows.
pub fn rewrite(source: &str, name: &str, op: &Operator) -> Result<Rewrite, CompileError> {
    rewrite_with(source, name, op, false)
}

/// [`rewrite`]; with `ages`, every parameter the rewrite changes or adds
/// gets an age state (`hl.state @p.age of @p slot "age"`), so Adam
/// bias-corrects each entry by the steps it has been trained (new entries
/// from 0) instead of by the run's step count.
pub fn rewrite_with(source: &str, name: &str, op: &Operator, ages: bool) -> Result<Rewrite, CompileError> {
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name)?;
    let raw = module.as_operation().to_raw();
    let failed = |(loc, message): grow::Failure| CompileError::PassFailed {
        pipeline: op.pipeline(),
        diagnostics: vec![Diagnostic {
            location: unsafe { melior::ir::Location::from_raw(loc) }.to_string(),
            severity: Severity::Error,
            message,
            notes: vec![],
        }],
    };
    let plan = match op {
        Operator::Widen { layer, width, rule, split_noise, noise, mask, mask_delay } => {
            if !(0.0..1.0).contains(split_noise) || !noise.is_finite() || *noise < 0.0 {
                return Err(CompileError::Pipeline {
                    pipeline: op.pipeline(),
                    message: format!("split_noise {split_noise} must be in [0, 1) and noise {noise} at least 0"),
                });
            }
            if *mask == Some(0) {
                return Err(CompileError::Pipeline {
                    pipeline: op.pipeline(),
                    message: "a mask ramps over at least 1 step".into(),
                });
            }
            if mask.is_some() && *rule == WidenRule::Net2wider {
                return Err(CompileError::Pipeline {
                    pipeline: op.pipeline(),
                    message: "a mask needs rule = \"zero-out\" or \"fresh\" (net2wider splits the kept units' outgoing weights with the masked copies)".into(),
                });
            }
            Plan::Widen {
                plan: grow::plan_widen(raw, layer, *width).map_err(failed)?,
                rule: *rule,
                split_noise: *split_noise,
                noise: *noise,
                mask: mask.map(|steps| grow::Mask { steps, delay: *mask_delay }),
            }
        }
        Operator::Deepen { after, name, residual } => {
            let name = name.clone().unwrap_or_else(|| format!("{after}_deep"));
            Plan::Deepen(grow::plan_deepen(raw, after, &name, *residual).map_err(failed)?)
        }
        Operator::WidenResidual { width, rule, noise } => {
            if !noise.is_finite() || *noise < 0.0 || (*rule == ResidualRule::Mean && *noise != 0.0) {
                return Err(CompileError::Pipeline {
                    pipeline: op.pipeline(),
                    message: format!(
                        "noise {noise}: the duplicate rule's, a number of at least 0 (the mean rule takes none)"
                    ),
                });
            }
            Plan::Residual(grow_stream::plan_residual(raw, *width, *rule).map_err(failed)?, *noise)
        }
        Operator::AddBlock { prefix, at, from, init, state, mask, mask_delay } => {
            let count = grow_stream::block_count(raw, prefix).map_err(failed)?;
            let at = at.unwrap_or(count);
            let from = from.unwrap_or(at.saturating_sub(1).min(count.saturating_sub(1)));
            if *state == SlotRule::Copy && *init != BlockInit::Copy {
                return Err(CompileError::Pipeline {
                    pipeline: op.pipeline(),
                    message:
                        "state = \"copy\" needs init = \"copy\" (a new block's fresh values have no state to copy)"
                            .into(),
                });
            }
            let mask = mask.map(|steps| grow_stream::Mask { steps, delay: *mask_delay });
            let plan = grow_stream::plan_block(raw, prefix, at, from, mask).map_err(failed)?;
            Plan::Block { plan, init: *init, state: *state }
        }
        Operator::Compose { .. } => {
            return Err(CompileError::Pipeline {
                pipeline: op.pipeline(),
                message: "a composition rewrites one operator at a time (adapt::grow runs them in turn)".into(),
            });
        }
        // New heads are zero-out units, a head at a time.
        Operator::Heads { mask: Some(0), .. } => {
            return Err(CompileError::Pipeline {
                pipeline: op.pipeline(),
                message: "a mask ramps over at least 1 step".into(),
            });
        }
        Operator::Heads { attention, heads, mask, mask_delay } => Plan::Widen {
            plan: grow::plan_heads(raw, attention, *heads).map_err(failed)?.widen,
            rule: if mask.is_some() { WidenRule::Fresh } else { WidenRule::ZeroOut },
            split_noise: 0.0,
            noise: 0.0,
            mask: mask.map(|steps| grow::Mask { steps, delay: *mask_delay }),
        },
    };
    let before = params_of(raw);
    crate::run_pipeline(&ctx, &mut module, &op.pipeline())?;
    let after = params_of(module.as_operation().to_raw());
    let grown: Vec<&str> = after
        .iter()
        .filter(|(n, shape)| before.iter().find(|(b, _)| b == n).is_none_or(|(_, old)| old != shape))
        .map(|(n, _)| n.as_str())
        .collect();
    // An imported model's grown parameters leave its weights file.
    crate::weights::refresh_data_inits(module.as_operation().to_raw(), &grown)?;
    if ages {
        // A block inserted before others takes the name of the one at its
        // place and renames the rest up, so its parameters and theirs are
        // the rewrite's too (new ages from 0, moved ones carried).
        let mut aged = grown.clone();
        if let Plan::Block { plan: b, .. } = &plan {
            for (n, _) in &after {
                if grow_stream::block_of(n, &b.prefix).is_some_and(|(i, _)| i >= b.at) && !aged.contains(&n.as_str()) {
                    aged.push(n);
                }
            }
        }
        declare_ages(module.as_operation().to_raw(), &aged)
            .map_err(|message| CompileError::Pipeline { pipeline: op.pipeline(), message })?;
    }
    let diff = param_diff(&before, &after);
    let exact = op.exact() && !matches!(&plan, Plan::Residual(r, _) if r.dropout);
    Ok(Rewrite { source: module.as_operation().to_string(), plan, diff, exact })
}

/// Declares `hl.state @p.age of @p slot "age"` after each of `params`'
/// declarations that has none.
fn declare_ages(module: mlir_sys::MlirOperation, params: &[&str]) -> std::result::Result<(), String> {
    use crate::ir;
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(module, 0)) };
    let ops = ir::ops_of(body);
    let names: std::collections::HashSet<String> =
        ops.iter().filter_map(|&op| ir::string_attr(op, "sym_name")).collect();
    let ctx = unsafe { mlir_sys::mlirOperationGetContext(module) };
    for &decl in &ops {
        if ir::op_name(decl) != "hl.param" {
            continue;
        }
        let Some(p) = ir::string_attr(decl, "sym_name") else { continue };
        let age = format!("{p}.age");
        if !params.contains(&p.as_str()) || names.contains(&age) {
            continue;
        }
        let ty = ir::attr_text(decl, "type");
        let attrs = [
            ("sym_name", ir::quoted(&age)),
            ("type", ty),
            ("param", ir::symbol_ref(&p)),
            ("slot", "\"age\"".to_string()),
            ("init", "#hl.init<zeros>".to_string()),
        ];
        let spec = ir::OpSpec { attributes: &attrs, results: Some(&[]), verify: false, ..ir::OpSpec::new("hl.state") };
        let op = ir::create_op(ctx, ir::op_loc(decl), &spec).map_err(|e| format!("declaring @{age}: {e:?}"))?;
        unsafe { mlir_sys::mlirBlockInsertOwnedOperationAfter(body, decl, op) };
    }
    Ok(())
}

/// The optimizer-state kinds a parameter can have, by symbol suffix
/// (`age`: the steps each entry has been trained, where a growth declared
/// it).
const STATE_KINDS: [&str; 4] = ["momentum", "exp_avg", "exp_avg_sq", "age"];

/// `old` with an age for each of its symbols that has none, where `fresh`
/// declares ages: each entry as old as the run (its `step`). A plan then
/// carries ages by name like any slot, also from a parameter no rewrite
/// gave one yet (kept, moved up, or a stacked block's source). The
/// entries made for symbols that are not parameters are never read: the
/// rules look up only the sources of `fresh`'s symbols.
fn with_ages(old: &State, fresh: &State) -> State {
    let mut out = old.clone();
    if !fresh.keys().any(|name| split_symbol(name).1 == Some("age")) {
        return out;
    }
    let step = old.get("step").and_then(|t| t.values.first()).copied().unwrap_or(0.0);
    for (name, t) in old {
        let age = format!("{name}.age");
        if split_symbol(name).1.is_none() && !old.contains_key(&age) {
            out.insert(age, Tensor::new(t.shape.clone(), t.dtype, vec![step; t.values.len()]));
        }
    }
    out
}

/// `(parameter, state kind)` of a symbol name: `fc1.weight.exp_avg` is
/// `("fc1.weight", Some("exp_avg"))`; a parameter has no kind.
fn split_symbol(name: &str) -> (&str, Option<&'static str>) {
    for kind in STATE_KINDS {
        if let Some(p) = name.strip_suffix(kind).and_then(|p| p.strip_suffix('.')) {
            return (p, Some(kind));
        }
    }
    (name, None)
}

/// `values` (of `shape`) re-indexed along `axis`: index `j` of the result
/// is `source[j]`'s slice times `scale[j]`, or `fill`'s when `source[j]` is
/// `None`.
fn gather_axis(
    values: &[f64],
    shape: &[usize],
    axis: usize,
    source: &[Option<usize>],
    scale: &[f64],
    fill: &[f64],
) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let (old, new) = (shape[axis], source.len());
    let mut out = vec![0.0; outer * new * inner];
    for o in 0..outer {
        for (j, src) in source.iter().enumerate() {
            for i in 0..inner {
                let at = (o * new + j) * inner + i;
                out[at] = match src {
                    Some(s) => values[(o * old + s) * inner + i] * scale[j],
                    None => fill[at],
                };
            }
        }
    }
    out
}

/// A uniform index below `n` and a standard normal, from Philox stream
/// `stream` of `seed`, block `i`.
fn draw(seed: u64, stream: u64, i: u64, n: usize) -> (usize, f64) {
    let b = aicf_runtime::rng::block(seed, stream, i);
    let u1 = aicf_runtime::rng::unit_open_f32(b[1]) as f64;
    let u2 = aicf_runtime::rng::unit_f32(b[2]) as f64;
    ((b[0] as usize) % n.max(1), (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos())
}

/// The new model's state from the old model's (`old`) by `plan`'s rule.
/// `fresh` is the new model's state as initialised (where a rule takes a
/// new parameter's initialiser); `seed` picks Net2Wider's source units and
/// noise. Symbols the plan does not touch are copied (the step count among
/// them); a new symbol no rule covers is an error.
pub fn rebind(plan: &Plan, old: &State, fresh: &State, seed: u64) -> Result<State> {
    let old = &with_ages(old, fresh);
    let missing = |name: &str| TrainError::Input(format!("rebinding: the old model has no {name}"));
    let mut out = State::new();
    // Net2Wider's choice of source units and split factors.
    let widen = match plan {
        Plan::Widen { plan: w, rule, split_noise, .. } => {
            let mut source: Vec<Option<usize>> = (0..w.width).map(|j| (j < w.old).then_some(j)).collect();
            let mut alpha = vec![1.0; w.width];
            if *rule == WidenRule::Net2wider {
                let mut copies = vec![1usize; w.old];
                for (j, s) in source.iter_mut().enumerate().skip(w.old) {
                    let (g, _) = draw(seed, 0xADA7, j as u64, w.old);
                    *s = Some(g);
                    copies[g] += 1;
                }
                for (j, s) in source.iter().enumerate() {
                    let g = s.unwrap_or(0);
                    let c = copies[g] as f64;
                    alpha[j] = if j < w.old { (1.0 + split_noise * (c - 1.0)) / c } else { (1.0 - split_noise) / c };
                }
            }
            Some((w, *rule, source, alpha))
        }
        Plan::Deepen(_) => None,
        Plan::Residual(r, _) if r.rule == ResidualRule::Mean => return rebind_residual(r, old, fresh),
        Plan::Residual(r, noise) => return rebind_duplicated(r, *noise, old, fresh),
        Plan::Block { plan: b, init, state } => return rebind_block(b, *init, *state, old, fresh),
    };
    for (name, fresh_t) in fresh {
        let (param, kind) = split_symbol(name);
        let value = if let Some((w, rule, source, alpha)) = &widen {
            let incoming = w.incoming.iter().find(|(p, _)| p == param).map(|&(_, a)| (a, true));
            let outgoing = w.outgoing.iter().find(|(p, _)| p == param).map(|&(_, a)| (a, false));
            match incoming.or(outgoing) {
                None => None,
                Some((axis, is_incoming)) => {
                    let o = old.get(name).ok_or_else(|| missing(name))?;
                    let zeros = vec![0.0; fresh_t.values.len()];
                    // The grown axis's entries: the width, or a fused
                    // projection's parts of it (each its own kept units).
                    let len = fresh_t.shape.get(axis).copied().unwrap_or(w.width);
                    let kept = w.kept(len);
                    let ones = vec![1.0; len];
                    if len != w.width && *rule == WidenRule::Net2wider {
                        return Err(TrainError::Input(format!(
                            "rebinding: {name} holds {} parts of {}'s units; net2wider splits whole units only",
                            w.segments, w.layer
                        )));
                    }
                    let values = match (rule, is_incoming, kind) {
                        // Ages: kept entries keep theirs, new ones start at 0.
                        (_, _, Some("age")) => gather_axis(&o.values, &o.shape, axis, &kept, &ones, &zeros),
                        // Net2Wider: incoming copied (state scaled by the split), outgoing split (state copied).
                        (WidenRule::Net2wider, true, None) => {
                            gather_axis(&o.values, &o.shape, axis, source, &vec![1.0; w.width], &zeros)
                        }
                        (WidenRule::Net2wider, true, Some("exp_avg_sq")) => {
                            let sq: Vec<f64> = alpha.iter().map(|a| a * a).collect();
                            gather_axis(&o.values, &o.shape, axis, source, &sq, &zeros)
                        }
                        (WidenRule::Net2wider, true, Some(_)) => {
                            gather_axis(&o.values, &o.shape, axis, source, alpha, &zeros)
                        }
                        (WidenRule::Net2wider, false, None) => {
                            gather_axis(&o.values, &o.shape, axis, source, alpha, &zeros)
                        }
                        (WidenRule::Net2wider, false, Some(_)) => {
                            gather_axis(&o.values, &o.shape, axis, source, &vec![1.0; w.width], &zeros)
                        }
                        // Fresh: new incoming and outgoing from the initialisers, new state zero.
                        (WidenRule::Fresh, _, _) => {
                            let fill = if kind.is_none() { &fresh_t.values } else { &zeros };
                            gather_axis(&o.values, &o.shape, axis, &kept, &ones, fill)
                        }
                        // Zero-out: new incoming from the initialiser, new outgoing and all new state zero.
                        (WidenRule::ZeroOut, _, _) => {
                            let fill = if is_incoming && kind.is_none() { &fresh_t.values } else { &zeros };
                            gather_axis(&o.values, &o.shape, axis, &kept, &ones, fill)
                        }
                    };
                    Some(values)
                }
            }
        } else {
            None
        };
        // A masked widening's per-unit counter: kept units full (their
        // counters as they were, or past the ramp on the first masked
        // widening), new units from 0.
        let value = match (&widen, value) {
            (Some((w, ..)), None) if *name == grow::unit_mask(&w.layer) => {
                let full = match plan {
                    Plan::Widen { mask: Some(m), .. } => (m.steps + m.delay) as f64,
                    _ => 0.0,
                };
                Some(
                    (0..w.width)
                        .map(|j| match old.get(name) {
                            Some(o) => o.values.get(j).copied().unwrap_or(0.0),
                            None if j < w.old => full,
                            None => 0.0,
                        })
                        .collect(),
                )
            }
            (_, v) => v,
        };
        let value = match value {
            Some(v) => v,
            None => match old.get(name) {
                Some(o) if o.shape == fresh_t.shape => o.values.clone(),
                Some(o) => {
                    return Err(TrainError::Input(format!(
                        "rebinding: {name} changes from {:?} to {:?} and no rule of the rewrite covers it",
                        o.shape, fresh_t.shape
                    )));
                }
                None => new_symbol(plan, name, param, kind, fresh_t)?,
            },
        };
        out.insert(name.clone(), Tensor::new(fresh_t.shape.clone(), fresh_t.dtype, value));
    }
    // Net2Wider's optional noise on the copies' incoming weights.
    if let Some((w, WidenRule::Net2wider, _, _)) = &widen
        && let Plan::Widen { noise, .. } = plan
        && *noise > 0.0
    {
        let weight = format!("{}.weight", w.layer);
        if let Some(t) = out.get_mut(&weight) {
            let n = t.values.len() as f64;
            let mean = t.values.iter().sum::<f64>() / n;
            let std = (t.values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
            let cols: usize = t.shape[1..].iter().product();
            for (i, v) in t.values.iter_mut().enumerate().skip(w.old * cols) {
                *v += noise * std * draw(seed, 0x0015E, i as u64, 1).1;
            }
        }
    }
    Ok(out)
}

/// How [`extend`] fills the new entries.
enum Fill<'a> {
    Zero,
    /// The mean of the old entries along the axis.
    Mean,
    Value(f64),
    /// The new model's initial values (same shape as the result).
    From(&'a [f64]),
}

/// `o` extended along `axis` to `width` entries: the old ones times
/// `scale`, the new ones by `fill`.
fn extend(o: &Tensor, axis: usize, width: usize, scale: f64, fill: Fill<'_>) -> Vec<f64> {
    let outer: usize = o.shape[..axis].iter().product();
    let inner: usize = o.shape[axis + 1..].iter().product();
    let old = o.shape[axis];
    let mut out = vec![0.0; outer * width * inner];
    for a in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (a * old + j) * inner + i;
            let mean = (0..old).map(|j| o.values[at(j)]).sum::<f64>() / old.max(1) as f64;
            for j in 0..width {
                let k = (a * width + j) * inner + i;
                out[k] = if j < old {
                    o.values[at(j)] * scale
                } else {
                    match fill {
                        Fill::Zero => 0.0,
                        Fill::Mean => mean,
                        Fill::Value(v) => v,
                        Fill::From(f) => f[k],
                    }
                };
            }
        }
    }
    out
}

/// `values` as a tensor of `fresh`'s shape and type, or an error naming
/// `name` when a rule made the wrong number of them.
fn shaped_like(name: &str, fresh: &Tensor, values: Vec<f64>) -> Result<Tensor> {
    if values.len() != fresh.values.len() {
        return Err(TrainError::Input(format!(
            "rebinding: {name} came out with {} values for shape {:?}",
            values.len(),
            fresh.shape
        )));
    }
    Ok(Tensor::new(fresh.shape.clone(), fresh.dtype, values))
}

/// [`rebind`] for a residual widening (the rule in [`Operator::WidenResidual`]).
fn rebind_residual(r: &ResidualPlan, old: &State, fresh: &State) -> Result<State> {
    let s = r.norm_scale();
    let mut out = State::new();
    for (name, fresh_t) in fresh {
        let (param, kind) = split_symbol(name);
        let producer = r.producers.iter().find(|(p, _)| p == param).map(|&(_, a)| a);
        let consumer = r.consumers.iter().find(|(p, _, _)| p == param).map(|&(_, a, n)| (a, n));
        let norm_weight = r.norms.iter().any(|(w, _)| w == param);
        let norm_bias = r.norms.iter().any(|(_, b)| b.as_deref() == Some(param));
        let o = old.get(name);
        let values = match (o, kind) {
            (Some(o), Some("age")) if o.shape != fresh_t.shape => {
                let axis = producer.or(consumer.map(|c| c.0)).unwrap_or(0);
                extend(o, axis, r.width, 1.0, Fill::Zero)
            }
            (Some(o), None) if producer.is_some() => extend(o, producer.unwrap_or(0), r.width, 1.0, Fill::Mean),
            (Some(o), None) if consumer.is_some() => {
                let (axis, normalized) = consumer.unwrap_or((1, false));
                let fill = if normalized { Fill::From(&fresh_t.values) } else { Fill::Zero };
                extend(o, axis, r.width, 1.0, fill)
            }
            (Some(o), None) if norm_weight => extend(o, 0, r.width, s, Fill::Value(s)),
            (Some(o), Some("exp_avg_sq")) if norm_weight => extend(o, 0, r.width, 1.0 / (s * s), Fill::Zero),
            (Some(o), Some(_)) if norm_weight => extend(o, 0, r.width, 1.0 / s, Fill::Zero),
            (Some(o), _) if producer.is_some() || consumer.is_some() || norm_bias => {
                let axis = producer.or(consumer.map(|c| c.0)).unwrap_or(0);
                extend(o, axis, r.width, 1.0, Fill::Zero)
            }
            (Some(o), _) if o.shape == fresh_t.shape => o.values.clone(),
            (Some(o), _) => {
                return Err(TrainError::Input(format!(
                    "rebinding: {name} changes from {:?} to {:?} and the residual widening has no rule for it",
                    o.shape, fresh_t.shape
                )));
            }
            (None, _) => return Err(TrainError::Input(format!("rebinding: the old model has no {name}"))),
        };
        out.insert(name.clone(), shaped_like(name, fresh_t, values)?);
    }
    Ok(out)
}

/// `o` with its `axis` grown to `width` by copies (entry `j` is old entry
/// `j mod old`) times `scale`, plus, where `noise` is given as
/// `(draws, factor)`, `factor` times each entry's draw less the mean of the
/// draws over its copies (so the noise sums to zero over them).
fn duplicate(o: &Tensor, axis: usize, width: usize, scale: f64, noise: Option<(&[f64], f64)>) -> Vec<f64> {
    let outer: usize = o.shape[..axis].iter().product();
    let inner: usize = o.shape[axis + 1..].iter().product();
    let old = o.shape[axis];
    let k = width / old.max(1);
    let mut out = vec![0.0; outer * width * inner];
    for a in 0..outer {
        for i in 0..inner {
            for j in 0..width {
                let at = (a * width + j) * inner + i;
                let mut v = o.values[(a * old + j % old) * inner + i] * scale;
                if let Some((draws, factor)) = noise {
                    let copy = |c: usize| draws[(a * width + j % old + c * old) * inner + i];
                    let mean = (0..k).map(copy).sum::<f64>() / k as f64;
                    v += factor * (draws[at] - mean);
                }
                out[at] = v;
            }
        }
    }
    out
}

/// [`rebind`] for a residual widening by duplication (the `Duplicate` rule
/// in [`Operator::WidenResidual`]).
fn rebind_duplicated(r: &ResidualPlan, noise: f64, old: &State, fresh: &State) -> Result<State> {
    let k = r.copies() as f64;
    let mut out = State::new();
    for (name, fresh_t) in fresh {
        let (param, kind) = split_symbol(name);
        let o = old.get(name).ok_or_else(|| TrainError::Input(format!("rebinding: the old model has no {name}")))?;
        let reader = r.consumers.iter().find(|(p, _, _)| p == param).map(|&(_, a, _)| a);
        let writer = r
            .producers
            .iter()
            .find(|(p, _)| p == param)
            .map(|&(_, a)| a)
            .or_else(|| r.norms.iter().any(|(w, b)| w == param || b.as_deref() == Some(param)).then_some(0));
        let values = match (reader, writer, kind) {
            (Some(axis), _, None) => duplicate(o, axis, r.width, 1.0 / k, Some((&fresh_t.values, noise))),
            // A reader's column sees its old column's gradient: moments and age copied.
            (Some(axis), _, Some(_)) => duplicate(o, axis, r.width, 1.0, None),
            (None, Some(axis), None | Some("age")) => duplicate(o, axis, r.width, 1.0, None),
            // A writer's copy sees 1/k of the old gradient.
            (None, Some(axis), Some("exp_avg_sq")) => duplicate(o, axis, r.width, 1.0 / (k * k), None),
            (None, Some(axis), Some(_)) => duplicate(o, axis, r.width, 1.0 / k, None),
            (None, None, _) if o.shape == fresh_t.shape => o.values.clone(),
            (None, None, _) => {
                return Err(TrainError::Input(format!(
                    "rebinding: {name} changes from {:?} to {:?} and the residual widening has no rule for it",
                    o.shape, fresh_t.shape
                )));
            }
        };
        out.insert(name.clone(), shaped_like(name, fresh_t, values)?);
    }
    Ok(out)
}

/// [`rebind`] for a new block (the rule in [`Operator::AddBlock`]).
fn rebind_block(b: &BlockPlan, init: BlockInit, state: SlotRule, old: &State, fresh: &State) -> Result<State> {
    let mut out = State::new();
    for (name, fresh_t) in fresh {
        let (param, kind) = split_symbol(name);
        let suffix = kind.map_or(String::new(), |k| format!(".{k}"));
        let block = grow_stream::block_of(param, &b.prefix);
        let source = |i: usize, rest: &str| format!("{}.{i}.{rest}{suffix}", b.prefix);
        let copied = |from: String| -> Result<Vec<f64>> {
            let o =
                old.get(&from).ok_or_else(|| TrainError::Input(format!("rebinding: the old model has no {from}")))?;
            if o.shape != fresh_t.shape {
                return Err(TrainError::Input(format!(
                    "rebinding: {name} is {:?}, its source {from} {:?}",
                    fresh_t.shape, o.shape
                )));
            }
            Ok(o.values.clone())
        };
        let n = fresh_t.values.len();
        let values = match block {
            Some((i, "mask")) if i == b.at => vec![0.0; n],
            Some((i, rest)) if i == b.at => match (init, kind) {
                (BlockInit::Zero, None) if b.outputs.iter().any(|p| p == rest) => vec![0.0; n],
                (BlockInit::Zero, None) => fresh_t.values.clone(),
                (BlockInit::Copy, None) => copied(source(b.from, rest))?,
                (BlockInit::Copy, Some(_)) if state == SlotRule::Copy => copied(source(b.from, rest))?,
                (_, Some(_)) => vec![0.0; n],
            },
            Some((i, rest)) if i > b.at => copied(source(i - 1, rest))?,
            _ => copied(name.clone())?,
        };
        out.insert(name.clone(), Tensor::new(fresh_t.shape.clone(), fresh_t.dtype, values));
    }
    Ok(out)
}

/// The value of a symbol a deepening added.
fn new_symbol(plan: &Plan, name: &str, param: &str, kind: Option<&str>, fresh: &Tensor) -> Result<Vec<f64>> {
    let Plan::Deepen(d) = plan else {
        return Err(TrainError::Input(format!("rebinding: the rewrite added {name}, which no rule covers")));
    };
    let layers = d.layers();
    let Some(layer) =
        layers.iter().find(|l| param.strip_prefix(l.as_str()).is_some_and(|r| r == ".weight" || r == ".bias"))
    else {
        return Err(TrainError::Input(format!("rebinding: {name} is new and not the new layer's")));
    };
    let n = fresh.values.len();
    if kind.is_some() {
        return Ok(vec![0.0; n]);
    }
    let is_weight = param.ends_with(".weight");
    Ok(if d.residual {
        // fc_in from its initialiser; fc_out zero.
        if layer.ends_with(".fc_in") { fresh.values.clone() } else { vec![0.0; n] }
    } else if is_weight {
        let h = d.width;
        (0..h * h).map(|i| if i / h == i % h { 1.0 } else { 0.0 }).collect()
    } else {
        vec![0.0; n]
    })
}

/// Training FLOPs of one step on `rows` examples, counted from the
/// compiled train step's kernels: its matrix products, convolutions and
/// attention, forward and backward, 2 per multiply-add (what an MFU
/// counts; elementwise work, reductions and the optimizer are left out),
/// scaled from the model's batch to `rows`.
pub fn step_flops(trainer: &Trainer, rows: usize) -> f64 {
    let Ok(step) = trainer.backend().function("train_step") else { return 0.0 };
    let batch = step
        .args
        .iter()
        .find(|a| a.role() == aicf_runtime::artifact::Role::Input)
        .and_then(|a| a.shape.first().copied())
        .unwrap_or(rows)
        .max(1);
    step.flops() as f64 * rows as f64 / batch as f64
}

/// How a growth went.
pub struct Grown {
    pub trainer: Trainer,
    pub rewrite: Rewrite,
    /// Seconds from the old model to the new one, state carried.
    pub seconds: f64,
    /// Distinct kernels of the new model (summed over its batch sizes) and
    /// how many were compiled (the rest came from the kernel cache; both 0
    /// when the whole model was compiled ahead).
    pub kernels: usize,
    pub compiled_kernels: usize,
}

/// Rewrites `trainer`'s model by `op`, compiles it (unchanged kernels from
/// the kernel cache) and carries the parameters, optimizer state and step
/// count over by the operator's rule. `trainer` is left as it was.
pub fn grow(trainer: &Trainer, op: &Operator, seed: u64) -> Result<Grown> {
    grow_with(trainer, op, seed, false)
}

/// Whether a run with `options` gives grown parameters ages when its
/// policy asks for them: ages serve Adam's bias corrections; SGD has none
/// to correct.
pub fn keeps_ages(options: &crate::train::Options, asked: bool) -> bool {
    asked && matches!(options.optimizer.as_str(), "adam" | "adamw")
}

/// The model `op` turns `source` into, as [`grow_with`] compiles it: a
/// composition's operators in turn; `ages` as [`keeps_ages`] says. What
/// a policy's prefetch compiles ahead.
pub fn grown_source(source: &str, name: &str, op: &Operator, ages: bool) -> Result<String> {
    let ops = match op {
        Operator::Compose { ops } => &ops[..],
        single => std::slice::from_ref(single),
    };
    let mut source = source.to_string();
    for step in ops {
        if matches!(step, Operator::Compose { .. }) {
            return Err(TrainError::Input("a composition inside a composition: list its operators instead".into()));
        }
        source = rewrite_with(&source, name, step, ages)?.source;
    }
    Ok(source)
}

/// [`grow`]; with `ages`, the parameters the rewrite changes or adds get
/// per-entry ages for Adam's bias correction ([`rewrite_with`]).
pub fn grow_with(trainer: &Trainer, op: &Operator, seed: u64, ages: bool) -> Result<Grown> {
    let started = Instant::now();
    let ages = keeps_ages(trainer.options(), ages);
    // A composition rewrites and rebinds through its intermediate models
    // without compiling them (their initial values need only their
    // parameter table); only the last model is compiled.
    let (steps, last) = match op {
        Operator::Compose { ops } => {
            let (last, steps) =
                ops.split_last().ok_or_else(|| TrainError::Input("an empty composition of growth operators".into()))?;
            (steps, last)
        }
        single => (&[][..], single),
    };
    let mut source = trainer.source().to_string();
    let mut state = trainer.state();
    let mut exact = true;
    let seed_of = |k: usize| seed ^ (k as u64).wrapping_mul(0x9E37_79B9);
    for (k, step) in steps.iter().enumerate() {
        if matches!(step, Operator::Compose { .. }) {
            return Err(TrainError::Input("a composition inside a composition: list its operators instead".into()));
        }
        let r = rewrite_with(&source, trainer.name(), step, ages)?;
        let fresh = initial_state(&r.source, trainer.name(), trainer.options())?;
        state = rebind(&r.plan, &state, &fresh, seed_of(k))?;
        exact &= r.exact;
        source = r.source;
    }
    if matches!(last, Operator::Compose { .. }) {
        return Err(TrainError::Input("a composition inside a composition: list its operators instead".into()));
    }
    let mut rewrite = rewrite_with(&source, trainer.name(), last, ages)?;
    // The new model at every batch size the old one ran, compiled at once.
    let batches: Vec<Option<usize>> = trainer.compiled().iter().map(|c| c.batch).collect();
    let compiled = crate::train::precompile(&rewrite.source, trainer.name(), trainer.options(), &batches)?;
    grown_memory_fits(&compiled)?;
    let mut new = Trainer::from_source(&rewrite.source, trainer.name(), trainer.options().clone())?;
    // The state is carried as host tensors of f64 (the grown model's own
    // and the rebound one). `grown_memory_fits` counted them before the
    // grown model existed; checked again now that its initial values are
    // written, against what is left free, so that a model that only just
    // fitted is still a rejected rewrite rather than the out-of-memory
    // killer's.
    let values: u64 = new.backend().manifest().symbols.iter().map(|s| s.shape.iter().product::<usize>() as u64).sum();
    aicf_runtime::host::check_memory(
        &format!("carrying the state into the grown model ({values} values)"),
        values.saturating_mul(2 * std::mem::size_of::<f64>() as u64),
    )?;
    // The GEMM choices the run made (or resumed with) carry over: a resumed
    // run grows into the kernels the interrupted one ran.
    new.backend_mut().pin_gemm_choices(&trainer.backend().gemm_choices());
    for b in batches.iter().flatten() {
        new.add_batch(*b)?;
    }
    let state = rebind(&rewrite.plan, &state, &new.state(), seed_of(steps.len()))?;
    new.set_state(&state)?;
    new.set_steps(trainer.steps());
    new.join_group_of(trainer)?;
    // A composition's changes are the whole rewrite's, each parameter once
    // (its steps' were listed one after another: q_proj 32x32 -> 32x64,
    // then 32x64 -> 64x64).
    if !steps.is_empty() {
        let table = |source: &str| -> Result<Vec<(String, Vec<usize>)>> {
            let ctx = CompilerContext::new();
            let module = ctx.parse(source, trainer.name())?;
            Ok(params_of(module.as_operation().to_raw()))
        };
        rewrite.diff = param_diff(&table(trainer.source())?, &table(&rewrite.source)?);
    }
    rewrite.exact &= exact;
    Ok(Grown {
        trainer: new,
        rewrite,
        seconds: started.elapsed().as_secs_f64(),
        kernels: compiled.iter().map(|c| c.kernels).sum(),
        compiled_kernels: compiled.iter().map(|c| c.compiled_kernels).sum(),
    })
}

/// Starts `trainer`'s optimizer state again without touching its
/// parameters: every moment (`momentum`, `exp_avg`, `exp_avg_sq`) zero, and
/// the step count and every per-entry age 0, so Adam's bias corrections
/// start over as in a fresh run. Other states (a masked growth's counters,
/// fp16's loss scale, a batch norm's running statistics) are kept.
pub fn reset_optimizer_state(trainer: &mut Trainer) -> Result<()> {
    // Zeroed in place, a tensor at a time: the whole state copied out as
    // f64 and set back took several times its memory.
    let zeroed: Vec<(String, usize)> = trainer
        .backend()
        .manifest()
        .symbols
        .iter()
        .filter(|s| s.name == "step" || split_symbol(&s.name).1.is_some())
        .map(|s| (s.name.clone(), s.shape.iter().product::<usize>() * s.dtype.bytes()))
        .collect();
    for (name, bytes) in zeroed {
        trainer.backend_mut().set_symbol_bytes(&name, &vec![0u8; bytes])?;
    }
    Ok(())
}

/// Shrink and perturb (Ash and Adams 2020) after a growth: every
/// parameter becomes `shrink` times its value plus `1 - shrink` times a
/// fresh draw of its initialiser (the options' seed), so weights move
/// toward zero with noise of their initialiser's scale and norm weights
/// toward one. Optimizer state is kept.
pub fn shrink_toward_init(trainer: &mut Trainer, shrink: f64) -> Result<()> {
    let fresh = initial_state(trainer.source(), trainer.name(), trainer.options())?;
    let params: std::collections::HashSet<String> =
        trainer.backend().manifest().symbols.iter().filter(|s| s.kind == "param").map(|s| s.name.clone()).collect();
    let mut state = trainer.state();
    for (name, t) in state.iter_mut() {
        // Parameters only: optimizer slots, mask counters, a loss scale
        // and running statistics are kept.
        if !params.contains(name) {
            continue;
        }
        let init = fresh.get(name).ok_or_else(|| TrainError::Input(format!("shrink: no initial value of {name}")))?;
        if init.values.len() != t.values.len() {
            return Err(TrainError::Input(format!(
                "shrink: {name} has {} values, its initialiser {}",
                t.values.len(),
                init.values.len()
            )));
        }
        for (v, i) in t.values.iter_mut().zip(&init.values) {
            *v = shrink * *v + (1.0 - shrink) * i;
        }
    }
    trainer.set_state(&state)
}

/// The state a model compiled from `source` starts from (parameters from
/// their initialisers with the options' seed, optimizer state zero),
/// without compiling it: its parameter table is the module's after
/// `hl-optimizer`, in declaration order, as a compiled artifact's is.
pub fn initial_state(source: &str, name: &str, options: &crate::train::Options) -> Result<State> {
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name)?;
    let weights = crate::weights::of_module(&module, name)?;
    let t = options.train_options();
    // fp16's loss-scaling states are part of the table.
    let scaling = if t.precision == crate::pipeline::Precision::Fp16 { " loss-scale=65536" } else { "" };
    let pipeline = format!(
        "builtin.module(hl-optimizer{{kind={} weight-decay={} momentum={}{scaling}}})",
        t.optimizer, t.weight_decay, t.momentum
    );
    crate::run_pipeline(&ctx, &mut module, &pipeline)?;
    let raw = module.as_operation().to_raw();
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(raw, 0)) };
    let mut table = Vec::new();
    for op in crate::ir::ops_of(body) {
        if matches!(crate::ir::op_name(op).as_str(), "hl.param" | "hl.state") {
            table.push(crate::codegen::symbol_entry(op).map_err(TrainError::from)?);
        }
    }
    Ok(aicf_runtime::host::initial_state(&table, options.seed, weights.as_deref())?)
}

/// Refuses, as a rejected rewrite and before anything is allocated, a
/// grown model whose memory the machine does not have free: its parameters
/// and optimizer state, the arena of its largest function at any batch
/// size it runs at (a CPU session runs every function in one), and the
/// state carried into it as host tensors of f64 (the old state and the
/// grown one). Each allocation was checked alone as it came, against the
/// memory free at that moment, and zeroed pages are not counted as used
/// until written: a widen to 20 million units passed every check and the
/// out-of-memory killer ended the run (24 GiB resident on a 23 GiB machine).
fn grown_memory_fits(compiled: &[crate::train::Compiled]) -> Result<()> {
    let mut need = 0u64;
    let mut values = 0u64;
    let mut arena = 0u64;
    for (i, c) in compiled.iter().enumerate() {
        let manifest = aicf_runtime::artifact::load_manifest(&c.dir)?;
        arena = manifest.functions.iter().map(|f| f.arena_bytes).fold(arena, u64::max);
        if i == 0 {
            for s in &manifest.symbols {
                let n = s.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
                values = values.saturating_add(n);
                need = need.saturating_add(n.saturating_mul(s.dtype.bytes() as u64));
            }
        }
    }
    need = need.saturating_add(arena);
    need = need.saturating_add(values.saturating_mul(2 * std::mem::size_of::<f64>() as u64));
    aicf_runtime::host::check_memory(
        &format!(
            "the grown model ({values} values of parameters and optimizer state, the arena of the largest function \
             of {} batch sizes, the state carried into it)",
            compiled.len()
        ),
        need,
    )?;
    Ok(())
}
