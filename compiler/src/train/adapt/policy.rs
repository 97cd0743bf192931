//! Growth policies: rules of a trigger and an action, read from TOML.

use super::{BlockInit, Operator, Result, SlotRule, WidenRule};
use crate::CompilerContext;
use crate::passes::{grow, grow_stream};
use crate::train::{TrainError, Trainer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// When a rule fires.
#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    /// At the end of every `every`-th epoch.
    Epoch { every: usize },
    /// Once, after `at` steps (a warm-up).
    Steps { at: u64 },
    /// Every `every` steps (the step count a multiple of it).
    EverySteps { every: u64 },
    /// When the run's training FLOPs (as `metrics.jsonl` counts them) pass
    /// `at`.
    Flops { at: f64 },
    /// When the training loss stops improving: see [`Observer::plateau`].
    Plateau { window: usize, threshold: f64 },
    /// When the held-out loss stops improving, checked at epoch ends (the
    /// window in epochs): see [`Observer::val_plateau`].
    ValPlateau { window: usize, threshold: f64 },
    /// A non-finite loss, or a loss or gradient-norm spike.
    Instability,
}

/// The longest plateau window a policy may give (steps, or epochs).
const MAX_WINDOW: usize = 1_000_000_000;
/// The most steps a fork may train each candidate (a pause in training).
const MAX_FORK_STEPS: usize = 100_000;

/// A growth operator as a policy states it: a fixed width, or a factor of
/// the current one up to a cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Template {
    Widen {
        layer: String,
        #[serde(default)]
        width: Option<usize>,
        #[serde(default)]
        factor: Option<f64>,
        #[serde(default)]
        max_width: Option<usize>,
        #[serde(default)]
        rule: WidenRule,
        #[serde(default)]
        split_noise: f64,
        #[serde(default)]
        noise: f64,
        #[serde(default)]
        mask: Option<usize>,
        #[serde(default)]
        mask_delay: usize,
    },
    Deepen {
        after: String,
        #[serde(default)]
        residual: bool,
    },
    /// `add` heads (default 1) up to `max_heads`.
    Heads {
        attention: String,
        #[serde(default)]
        add: Option<usize>,
        #[serde(default)]
        max_heads: Option<usize>,
        #[serde(default)]
        mask: Option<usize>,
        #[serde(default)]
        mask_delay: usize,
    },
    /// The residual stream to `width`, or `factor` times its width (2 if
    /// neither), at most `max_width`.
    WidenResidual {
        #[serde(default)]
        width: Option<usize>,
        #[serde(default)]
        factor: Option<f64>,
        #[serde(default)]
        max_width: Option<usize>,
        /// `mean` (the default) or `duplicate`.
        #[serde(default)]
        rule: grow_stream::ResidualRule,
        /// Under `duplicate`: the readers' symmetry-breaking noise (0.5 if
        /// not given).
        #[serde(default)]
        noise: Option<f64>,
    },
    /// `count` new blocks (1 if not given) in the stack `prefix`, while it
    /// has fewer than `max_blocks`: at `at` (after the last if not given),
    /// each built like `from` (the block before it if not given); `init`
    /// and `state` as [`Operator::AddBlock`].
    AddBlock {
        #[serde(default = "super::rewrite::default_prefix")]
        prefix: String,
        #[serde(default)]
        at: Option<usize>,
        #[serde(default)]
        from: Option<usize>,
        #[serde(default)]
        count: Option<usize>,
        #[serde(default)]
        max_blocks: Option<usize>,
        #[serde(default)]
        init: BlockInit,
        #[serde(default)]
        state: SlotRule,
        #[serde(default)]
        mask: Option<usize>,
        #[serde(default)]
        mask_delay: usize,
    },
    /// Several growths at once, in this order (each resolved against the
    /// model before any of them).
    Compose { ops: Vec<Template> },
}

use crate::passes::grow::MOST_MASK_STEPS;

/// `width` times `factor`, rounded up; past 2^40 units, 2^40 (which the
/// rewrite refuses by its tensor-size cap, saying so; a factor of 1e300
/// saturated to 2^64 - 1, which no pass option could spell).
fn times(width: usize, factor: f64) -> usize {
    let grown = (width as f64 * factor).ceil();
    if grown >= (1u64 << 40) as f64 { 1 << 40 } else { grown as usize }
}

/// The most blocks one rule adds at once: each is a rewrite of the whole
/// model (a million hung the run while memory grew; grow over several
/// triggers instead).
const MOST_BLOCKS_AT_ONCE: usize = 64;

impl Template {
    /// What the template grows again each time it acts, with no cap to
    /// stop it (a factor without `max_width`, heads without `max_heads`,
    /// blocks without `max_blocks`, a deepening), said for a note; `None`
    /// where it stops by itself.
    pub fn uncapped(&self) -> Option<String> {
        match self {
            // (Neither a width nor a factor doubles it.)
            Template::Widen { layer, width: None, max_width: None, .. } => {
                Some(format!("widens {layer} by a factor with no max_width"))
            }
            Template::WidenResidual { width: None, max_width: None, .. } => {
                Some("widens the residual stream by a factor with no max_width".into())
            }
            Template::Heads { attention, max_heads: None, .. } => {
                Some(format!("adds heads to {attention} with no max_heads"))
            }
            Template::AddBlock { prefix, max_blocks: None, .. } => {
                Some(format!("adds blocks to {prefix} with no max_blocks"))
            }
            Template::Deepen { after, .. } => Some(format!("deepens after {after}")),
            Template::Compose { ops } => ops.iter().find_map(Template::uncapped),
            _ => None,
        }
    }

    /// Counts that must be at least 1 (`count`, `mask`), here and in a
    /// composition's templates.
    fn check(&self) -> std::result::Result<(), String> {
        let zero = |what: &str| Err(format!("{what} = 0: it counts from 1"));
        match self {
            Template::Widen { mask: Some(0), .. } | Template::Heads { mask: Some(0), .. } => zero("mask"),
            Template::AddBlock { mask: Some(0), .. } => zero("mask"),
            Template::AddBlock { count: Some(0), .. } => zero("count"),
            Template::AddBlock { count: Some(n), .. } if *n > MOST_BLOCKS_AT_ONCE => Err(format!(
                "count = {n}: at most {MOST_BLOCKS_AT_ONCE} blocks at once (each is a rewrite of the whole model; \
                 grow over several triggers)"
            )),
            Template::WidenResidual { rule: grow_stream::ResidualRule::Mean, noise: Some(_), .. } => {
                Err("widen-residual: noise is the duplicate rule's; give rule = \"duplicate\" or no noise".into())
            }
            Template::WidenResidual { noise: Some(n), .. } if !n.is_finite() || *n < 0.0 => {
                Err(format!("widen-residual: noise = {n}: it must be at least 0"))
            }
            Template::Widen { factor: Some(f), .. } | Template::WidenResidual { factor: Some(f), .. }
                if !(f.is_finite() && *f > 1.0) =>
            {
                Err(format!("factor = {f}: a widening multiplies the width by a finite number above 1"))
            }
            Template::Widen { width: Some(0), .. } | Template::WidenResidual { width: Some(0), .. } => zero("width"),
            Template::Widen { width: Some(_), factor: Some(_), .. }
            | Template::WidenResidual { width: Some(_), factor: Some(_), .. } => {
                Err("width and factor both: give one (a width, or a factor of the current one)".into())
            }
            Template::Widen { mask: None, mask_delay: 1.., .. }
            | Template::Heads { mask: None, mask_delay: 1.., .. }
            | Template::AddBlock { mask: None, mask_delay: 1.., .. } => {
                Err("mask_delay delays a mask's ramp: give mask = STEPS too".into())
            }
            Template::Widen { max_width: Some(0), .. } | Template::WidenResidual { max_width: Some(0), .. } => {
                zero("max_width")
            }
            // A cap below the width asked for made the width the cap,
            // without a word.
            Template::Widen { width: Some(w), max_width: Some(m), .. }
            | Template::WidenResidual { width: Some(w), max_width: Some(m), .. }
                if w > m =>
            {
                Err(format!(
                    "width = {w} is above max_width = {m}: the rule would widen to {m}; give one of them (max_width caps \
                     a factor's growth)"
                ))
            }
            Template::AddBlock { count: Some(n), max_blocks: Some(m), .. } if n > m => Err(format!(
                "count = {n} is above max_blocks = {m}: the stack never holds more than {m} blocks, so no rule adds {n}"
            )),
            Template::AddBlock { state: SlotRule::Copy, init, .. } if *init != BlockInit::Copy => Err(
                "state = \"copy\" needs init = \"copy\": a new block's fresh values have no optimizer state to copy"
                    .into(),
            ),
            Template::Heads { add: Some(0), .. } => zero("add"),
            Template::Heads { max_heads: Some(0), .. } => zero("max_heads"),
            Template::AddBlock { max_blocks: Some(0), .. } => zero("max_blocks"),
            Template::Widen { split_noise: n, .. } if !(n.is_finite() && (0.0..1.0).contains(n)) => {
                Err(format!("split_noise = {n}: it must be in [0, 1) (net2wider's split of a unit's outgoing weights)"))
            }
            Template::Widen { noise: n, .. } if !(n.is_finite() && *n >= 0.0) => {
                Err(format!("noise = {n}: it must be at least 0"))
            }
            Template::Widen { mask, mask_delay, .. }
            | Template::Heads { mask, mask_delay, .. }
            | Template::AddBlock { mask, mask_delay, .. }
                if mask.unwrap_or(0).saturating_add(*mask_delay) > MOST_MASK_STEPS =>
            {
                Err(format!(
                    "mask = {}, mask_delay = {mask_delay}: together at most {MOST_MASK_STEPS} steps (2^24: the mask \
                     counts its steps in f32, exact to there, and ramps up to mask_delay + mask)",
                    mask.unwrap_or_default()
                ))
            }
            Template::Widen { rule: WidenRule::Net2wider, mask: Some(_), .. } => {
                Err("a mask needs rule = \"zero-out\" or \"fresh\" (net2wider splits the kept units' outgoing weights \
                 with the masked copies)"
                    .into())
            }
            Template::Compose { ops } if ops.is_empty() => Err("a composition of no operators".into()),
            Template::Compose { ops } => ops.iter().try_for_each(Template::check),
            _ => Ok(()),
        }
    }
}

/// Whether `name` matches `pattern`, where a `*` segment of the pattern
/// stands for any one dot-separated segment (`blocks.*.mlp.fc`).
fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    p.len() == n.len() && p.iter().zip(&n).all(|(a, b)| *a == "*" || a == b)
}

/// The layers (`<layer>.weight` parameters) a pattern names, in
/// declaration order; the pattern itself when it has no `*`.
fn expand(trainer: &Trainer, pattern: &str, suffix: &str) -> Vec<String> {
    if !pattern.contains('*') {
        return vec![pattern.to_string()];
    }
    let mut out: Vec<String> = Vec::new();
    for s in &trainer.backend().manifest().symbols {
        if let Some(layer) = s.name.strip_suffix(suffix)
            && matches(pattern, layer)
            && !out.iter().any(|l| l == layer)
        {
            out.push(layer.to_string());
        }
    }
    out
}

/// The module paths (dot-separated prefixes of parameter names) a pattern
/// names, in declaration order: the attentions `heads = "blocks.*"` may
/// mean, whatever their projections are called.
fn expand_paths(trainer: &Trainer, pattern: &str) -> Vec<String> {
    if !pattern.contains('*') {
        return vec![pattern.to_string()];
    }
    let depth = pattern.split('.').count();
    let mut out: Vec<String> = Vec::new();
    for s in &trainer.backend().manifest().symbols {
        let parts: Vec<&str> = s.name.split('.').collect();
        if parts.len() > depth {
            let path = parts[..depth].join(".");
            if matches(pattern, &path) && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// Rewrites `source` by `op` without compiling anything, a composition's
/// operators in turn (each on the model the ones before it make): whether
/// the growth applies to the model.
fn dry_run(source: &str, name: &str, op: &Operator) -> Result<String, TrainError> {
    super::grown_source(source, name, op, false)
}

/// Why the model `source` could never be grown into on this machine: its
/// parameters alone (4 bytes each) with the state the growth carries into
/// it (two f64 a value) are more than its free memory; `None` where they
/// fit (or the memory is unknown). A width of 400 million trained to the
/// rule's step and was refused only then.
fn never_fits(source: &str, name: &str) -> Option<String> {
    let ctx = CompilerContext::new();
    let module = ctx.parse(source, name).ok()?;
    let values = super::rewrite::params_of(module.as_operation().to_raw())
        .iter()
        .map(|(_, shape)| shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64)))
        .fold(0u64, u64::saturating_add);
    let need = values.saturating_mul(4 + 2 * std::mem::size_of::<f64>() as u64);
    let what = format!("the grown model's {values} parameter values and the state carried into them, at least");
    aicf_runtime::host::check_memory(&what, need).err().map(|e| e.to_string())
}

/// One operator, or their composition.
fn one_or_all(mut ops: Vec<Operator>) -> Option<Operator> {
    match ops.len() {
        0 => None,
        1 => ops.pop(),
        _ => Some(Operator::Compose { ops }),
    }
}

/// ` (its layers: fc1, fc2)`: the model's layers with a weight, for a
/// message about one it does not have (empty where it has none).
fn layers_of(trainer: &Trainer) -> String {
    let layers: Vec<&str> =
        trainer.backend().manifest().symbols.iter().filter_map(|s| s.name.strip_suffix(".weight")).collect();
    match layers.len() {
        0 => String::new(),
        n if n > 12 => format!(" (its layers: {}, ... {} in all)", layers[..12].join(", "), n),
        _ => format!(" (its layers: {})", layers.join(", ")),
    }
}

impl Template {
    /// The action as a policy file writes it, the settings left out
    /// omitted: `{ op = "widen", layer = "fc9", width = 32 }`.
    pub fn toml(&self) -> String {
        fn text(v: &serde_json::Value) -> String {
            match v {
                serde_json::Value::Object(m) => {
                    // `op` first; settings unset, or at zero (no noise, no
                    // mask delay), left out.
                    let unset = |v: &serde_json::Value| v.is_null() || v.as_f64() == Some(0.0);
                    let fields: Vec<String> = m
                        .get_key_value("op")
                        .into_iter()
                        .chain(m.iter().filter(|(k, v)| *k != "op" && !unset(v)))
                        .map(|(k, v)| format!("{k} = {}", text(v)))
                        .collect();
                    format!("{{ {} }}", fields.join(", "))
                }
                serde_json::Value::Array(a) => format!("[{}]", a.iter().map(text).collect::<Vec<_>>().join(", ")),
                other => other.to_string(),
            }
        }
        serde_json::to_value(self).map_or_else(|_| format!("{self:?}"), |v| text(&v))
    }

    /// Why [`Template::resolve`] finds nothing to grow in `trainer`'s
    /// model, as a note says it: the layer missing, or the width asked not
    /// above the current one, or at the cap.
    pub fn nothing_to_grow(&self, trainer: &Trainer) -> String {
        let generic = "no such layer, or at its cap".to_string();
        match self {
            Template::Widen { layer, width, max_width, .. } if !layer.contains('*') => {
                let weight = format!("{layer}.weight");
                let symbols = &trainer.backend().manifest().symbols;
                match symbols.iter().find(|s| s.name == weight).and_then(|s| s.shape.first().copied()) {
                    None => format!("the model has no layer {layer}{}", layers_of(trainer)),
                    Some(current) if max_width.is_some_and(|m| m <= current) => {
                        format!("{layer} has {current} units, at or above max_width = {}", max_width.unwrap_or(0))
                    }
                    Some(current) if width.is_some_and(|w| w <= current) => {
                        format!("width = {} is not above {layer}'s {current} units", width.unwrap_or(0))
                    }
                    Some(_) => generic,
                }
            }
            Template::Widen { layer, .. } => match expand(trainer, layer, ".weight")[..] {
                [] => format!("no layer of the model matches {layer}{}", layers_of(trainer)),
                _ => format!("every layer matching {layer} is at its width or max_width already"),
            },
            Template::Heads { attention, max_heads, .. } => {
                let ctx = CompilerContext::new();
                let Ok(module) = ctx.parse(trainer.source(), trainer.name()) else { return generic };
                let raw = module.as_operation().to_raw();
                let paths = expand_paths(trainer, attention);
                if paths.is_empty() {
                    return format!("no attention of the model matches {attention}{}", layers_of(trainer));
                }
                let mut why = Vec::new();
                for path in &paths {
                    match grow::attention_heads(raw, path) {
                        Ok((heads, _)) if max_heads.is_some_and(|m| m <= heads) => why.push(format!(
                            "{path} has {heads} heads, at or above max_heads = {}",
                            max_heads.unwrap_or(0)
                        )),
                        Ok(_) => {}
                        Err((_, e)) => why.push(format!("{path} is no attention the pass grows ({e})")),
                    }
                }
                if why.is_empty() { generic } else { why.join("; ") }
            }
            Template::AddBlock { prefix, max_blocks: Some(m), .. } => {
                let mut blocks: Vec<usize> = trainer
                    .backend()
                    .manifest()
                    .symbols
                    .iter()
                    .filter_map(|s| grow_stream::block_of(&s.name, prefix).map(|(i, _)| i))
                    .collect();
                blocks.sort_unstable();
                blocks.dedup();
                format!("the model has {} blocks {prefix}.*, at or above max_blocks = {m}", blocks.len())
            }
            Template::WidenResidual { width, max_width, .. } => {
                let ctx = CompilerContext::new();
                let current = ctx
                    .parse(trainer.source(), trainer.name())
                    .map_err(|e| e.to_string())
                    .and_then(|m| grow_stream::residual_width(m.as_operation().to_raw()).map_err(|(_, why)| why));
                match (current, width) {
                    (Ok(c), Some(w)) if *w <= c => format!("width = {w} is not above the residual stream's {c}"),
                    (Ok(c), _) if max_width.is_some_and(|m| m <= c) => {
                        format!("the residual stream's {c} is at or above max_width = {}", max_width.unwrap_or(0))
                    }
                    // The stream the pass refuses, and why (a tied
                    // embedding, a norm it cannot rescale).
                    (Err(why), _) => why,
                    _ => generic,
                }
            }
            _ => generic,
        }
    }

    /// What a rule that resolves would still not find in `trainer`'s
    /// model: the layer a deepening follows, the blocks a new block copies
    /// (each found only when the rule fires, else).
    pub fn cannot_apply(&self, trainer: &Trainer) -> Option<String> {
        let symbols = &trainer.backend().manifest().symbols;
        match self {
            Template::Deepen { after, .. } if !symbols.iter().any(|s| s.name == format!("{after}.weight")) => {
                Some(format!("the model has no layer {after}{}", layers_of(trainer)))
            }
            Template::AddBlock { prefix, .. }
                if !symbols.iter().any(|s| grow_stream::block_of(&s.name, prefix).is_some()) =>
            {
                Some(format!("the model has no blocks {prefix}.0, {prefix}.1, ..."))
            }
            _ => None,
        }
    }

    /// The operator for the model as it is now; `None` when it has reached
    /// its cap (or the layer is gone).
    pub fn resolve(&self, trainer: &Trainer, serial: usize) -> Option<Operator> {
        match self {
            Template::Widen { layer, .. } if layer.contains('*') => {
                let ops = expand(trainer, layer, ".weight").into_iter().filter_map(|l| {
                    let Template::Widen {
                        width, factor, max_width, rule, split_noise, noise, mask, mask_delay, ..
                    } = self.clone()
                    else {
                        return None;
                    };
                    Template::Widen { layer: l, width, factor, max_width, rule, split_noise, noise, mask, mask_delay }
                        .resolve(trainer, serial)
                });
                one_or_all(ops.collect())
            }
            Template::Heads { attention, add, max_heads, mask, mask_delay } if attention.contains('*') => {
                let ops = expand_paths(trainer, attention).into_iter().filter_map(|a| {
                    Template::Heads {
                        attention: a,
                        add: *add,
                        max_heads: *max_heads,
                        mask: *mask,
                        mask_delay: *mask_delay,
                    }
                    .resolve(trainer, serial)
                });
                one_or_all(ops.collect())
            }
            Template::WidenResidual { width, factor, max_width, rule, noise } => {
                let ctx = CompilerContext::new();
                let module = ctx.parse(trainer.source(), trainer.name()).ok()?;
                let current = grow_stream::residual_width(module.as_operation().to_raw()).ok()?;
                let target = match (width, factor) {
                    (Some(w), _) => *w,
                    (None, Some(f)) => times(current, *f),
                    (None, None) => current * 2,
                };
                let target = max_width.map_or(target, |m| target.min(m));
                let noise = noise.unwrap_or(if *rule == grow_stream::ResidualRule::Duplicate { 0.5 } else { 0.0 });
                (target > current).then_some(Operator::WidenResidual { width: target, rule: *rule, noise })
            }
            Template::AddBlock { prefix, at, from, count, max_blocks, init, state, mask, mask_delay } => {
                let symbols = &trainer.backend().manifest().symbols;
                let mut indices: Vec<usize> =
                    symbols.iter().filter_map(|s| grow_stream::block_of(&s.name, prefix).map(|(i, _)| i)).collect();
                indices.sort_unstable();
                indices.dedup();
                let have = indices.len();
                let want = have + count.unwrap_or(1);
                let want = max_blocks.map_or(want, |m| want.min(m));
                let ops: Vec<Operator> = (0..want.saturating_sub(have))
                    .map(|k| Operator::AddBlock {
                        prefix: prefix.clone(),
                        at: at.map(|a| a + k),
                        from: *from,
                        init: *init,
                        state: *state,
                        mask: *mask,
                        mask_delay: *mask_delay,
                    })
                    .collect();
                one_or_all(ops)
            }
            Template::Compose { ops } => {
                let ops: Vec<Operator> = ops.iter().filter_map(|t| t.resolve(trainer, serial)).collect();
                // A nested composition flattens.
                let flat = ops.into_iter().flat_map(|o| match o {
                    Operator::Compose { ops } => ops,
                    o => vec![o],
                });
                one_or_all(flat.collect())
            }
            Template::Widen { layer, width, factor, max_width, rule, split_noise, noise, mask, mask_delay } => {
                let weight = format!("{layer}.weight");
                let symbols = &trainer.backend().manifest().symbols;
                let current = symbols.iter().find(|s| s.name == weight)?.shape.first().copied()?;
                let target = match (width, factor) {
                    (Some(w), _) => *w,
                    (None, Some(f)) => times(current, *f),
                    (None, None) => current * 2,
                };
                let target = max_width.map_or(target, |m| target.min(m));
                (target > current).then(|| Operator::Widen {
                    layer: layer.clone(),
                    width: target,
                    rule: *rule,
                    split_noise: *split_noise,
                    noise: *noise,
                    mask: *mask,
                    mask_delay: *mask_delay,
                })
            }
            Template::Deepen { after, residual } => {
                // A name no layer has (a policy started afresh on a grown
                // checkpoint counts its rewrites from 0 again).
                let symbols = &trainer.backend().manifest().symbols;
                let taken = |k: usize| {
                    let prefix = format!("{after}_deep{k}.");
                    symbols.iter().any(|s| s.name.starts_with(&prefix))
                };
                let k = (serial..).find(|&k| !taken(k)).unwrap_or(serial);
                Some(Operator::Deepen {
                    after: after.clone(),
                    name: Some(format!("{after}_deep{k}")),
                    residual: *residual,
                })
            }
            Template::Heads { attention, add, max_heads, mask, mask_delay } => {
                let ctx = CompilerContext::new();
                let module = ctx.parse(trainer.source(), trainer.name()).ok()?;
                let (heads, _) = grow::attention_heads(module.as_operation().to_raw(), attention).ok()?;
                let target = max_heads.map_or(heads + add.unwrap_or(1), |m| (heads + add.unwrap_or(1)).min(m));
                (target > heads).then(|| Operator::Heads {
                    attention: attention.clone(),
                    heads: target,
                    mask: *mask,
                    mask_delay: *mask_delay,
                })
            }
        }
    }
}

/// What a rule does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Grow(Template),
    /// Grow each candidate from the same state, train each `steps` steps on
    /// the fork batches, keep the one with the lowest loss on the
    /// evaluation batches.
    Fork {
        candidates: Vec<Template>,
        steps: usize,
    },
    /// Back to the model and state before the last rewrite (or the last
    /// epoch's end), with the learning rate times `lr_factor` from then on.
    Rollback {
        lr_factor: f64,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub trigger: Trigger,
    pub action: Action,
    /// Steps since the last rewrite before the rule may fire again.
    pub min_gap: u64,
    /// How many times it may act (0: no limit).
    pub max_times: usize,
    /// After a growth this rule makes, the learning rate times this from
    /// then on (1: unchanged; a rollback of the growth undoes it). A wider
    /// model usually wants a smaller rate than the small one it grew from.
    pub lr_factor: f64,
    /// After a growth this rule makes, every parameter's optimizer state
    /// starts again (`optimizer_state = "reset"`): moments zero, step count
    /// and ages 0, so Adam's bias corrections start over. The default,
    /// `"carry"`, keeps each slot by its operator's rule.
    pub reset_optimizer: bool,
    /// After a growth this rule makes, every parameter becomes `shrink`
    /// times its value plus `1 - shrink` times a fresh draw of its
    /// initialiser (Ash and Adams' shrink and perturb against the warm
    /// start's loss of generalisation; 1: unchanged). The rewrite is then
    /// inexact, checked against `max_loss_increase`.
    pub shrink: f64,
}

/// How the runtime may change the model while it trains.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Observe gradient norms and update ratios every this many steps.
    pub observe_every: u64,
    /// Largest relative probe-loss change a function-preserving rewrite may
    /// make before it is rejected (none given: [`Policy::tolerance`]'s
    /// default for the run's precision).
    pub verify_tolerance: Option<f64>,
    /// Largest relative rise of the probe loss an inexact rewrite (Net2Wider
    /// with `noise`) may cause before it is rejected.
    pub max_loss_increase: f64,
    /// After a rewrite, the learning rate ramps from 10% to 100% over this
    /// many steps (0: no re-warm-up).
    pub rewarmup_steps: u64,
    /// After a growth, the run's learning-rate schedule (its warm-up and
    /// cosine or WSD decay, `--lr-schedule`) starts again over the steps left, as
    /// if the grown model's training were a run of its own; without it the
    /// schedule goes on over the whole run. No effect on a constant rate.
    pub restart_schedule: bool,
    /// Grown parameters get per-entry ages, and Adam bias-corrects each
    /// entry by its own (`adapt::rewrite_with`).
    pub age_bias_correction: bool,
    /// After a rewrite, this many steps are watched; an instability in them
    /// rolls the rewrite back.
    pub watch_steps: u64,
    /// The factor over the recent median that counts as a spike.
    pub spike_factor: f64,
    /// Rewrites at most (0: no limit).
    pub max_rewrites: usize,
    /// Where to write a checkpoint before each rewrite.
    pub checkpoint_dir: Option<PathBuf>,
    /// Compile the models the rules would grow into ahead of time, on a
    /// background thread (every batch size in use), so that a rewrite only
    /// loads them.
    pub prefetch: bool,
    /// Seeds Net2Wider's choices.
    pub seed: u64,
    pub rules: Vec<Rule>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            observe_every: 10,
            verify_tolerance: None,
            max_loss_increase: 0.05,
            rewarmup_steps: 0,
            restart_schedule: false,
            age_bias_correction: false,
            watch_steps: 50,
            spike_factor: 4.0,
            max_rewrites: 0,
            checkpoint_dir: None,
            prefetch: true,
            seed: 0,
            rules: Vec::new(),
        }
    }
}

/// The policy-wide keys ([`RawPolicy`]'s), for the message of one
/// written inside a rule.
const POLICY_KEYS: [&str; 12] = [
    "observe_every",
    "verify_tolerance",
    "max_loss_increase",
    "rewarmup_steps",
    "restart_schedule",
    "age_bias_correction",
    "watch_steps",
    "spike_factor",
    "max_rewrites",
    "checkpoint_dir",
    "prefetch",
    "seed",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    observe_every: Option<u64>,
    verify_tolerance: Option<f64>,
    max_loss_increase: Option<f64>,
    rewarmup_steps: Option<u64>,
    restart_schedule: Option<bool>,
    age_bias_correction: Option<bool>,
    watch_steps: Option<u64>,
    spike_factor: Option<f64>,
    max_rewrites: Option<usize>,
    checkpoint_dir: Option<PathBuf>,
    prefetch: Option<bool>,
    seed: Option<u64>,
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    when: String,
    every: Option<usize>,
    at: Option<u64>,
    window: Option<usize>,
    threshold: Option<f64>,
    flops: Option<f64>,
    min_gap: Option<u64>,
    max_times: Option<usize>,
    lr_factor: Option<f64>,
    optimizer_state: Option<String>,
    shrink: Option<f64>,
    action: toml::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFork {
    fork: Vec<Template>,
    steps: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRollback {
    rollback: RawLrFactor,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLrFactor {
    lr_factor: f64,
}

impl Policy {
    /// The rules against the model a run starts from: notes, and what can
    /// never act (empty where all can), each saying why. An operator that
    /// finds nothing there (a layer the model lacks, a width at or below the
    /// layer's) makes its rule one that can never act where no rule of the
    /// policy that can act adds layers (deepen, add-block), and is noted
    /// where one does (a misspelt layer otherwise never acted, silently); a
    /// composition's operator is judged so too, and a fork skips such a
    /// candidate (noted). A single operator's rewrite is also tried on the
    /// IR: one that fails (the output layer, which no widening takes) can
    /// never act where no other rule of the policy can change the model (it
    /// stays as it is), and is noted where one can, as its decision would be
    /// rejected until then. A composition is not tried whole: its operators
    /// apply one after another, each to the last one's model.
    ///
    /// `start`: the step the policy starts at (0; a checkpoint's, where a
    /// policy starts afresh on it): a step rule at or before it is noted as
    /// never acting and left out of the checks (the model may already hold
    /// its growth).
    pub fn check_start(&self, trainer: &Trainer, start: u64) -> (Vec<String>, Vec<String>) {
        // A composition's operators each (one misspelt among them would
        // otherwise be dropped silently).
        fn flat(t: &Template) -> Vec<&Template> {
            match t {
                Template::Compose { ops } => ops.iter().flat_map(flat).collect(),
                other => vec![other],
            }
        }
        // The templates a rule acts by: its growth, or a fork's candidates.
        fn tops(action: &Action) -> &[Template] {
            match action {
                Action::Grow(t) => std::slice::from_ref(t),
                Action::Fork { candidates, .. } => candidates,
                Action::Rollback { .. } => &[],
            }
        }
        // Why an operator finds nothing in the starting model.
        let lacks = |t: &Template| match t.resolve(trainer, 0) {
            None => Some(t.nothing_to_grow(trainer)),
            Some(_) => t.cannot_apply(trainer),
        };
        // What each rule finds in the starting model: per candidate, its
        // composition's operators that find nothing (position, operator,
        // why), and why the candidate cannot act at all (action, why,
        // found by rewriting).
        struct Found<'a> {
            missing: Vec<(usize, usize, &'a Template, String)>, // (operators, position, operator, why)
            cannot: Vec<(String, String, bool)>,
            candidates: usize,
            // Candidates that act with an operator missing (a fork goes on
            // without them only where another acts whole).
            partial: usize,
        }
        let passed = |rule: &Rule| start > 0 && matches!(rule.trigger, Trigger::Steps { at } if at <= start);
        let found: Vec<Found> = self
            .rules
            .iter()
            .map(|rule| {
                let candidates = if passed(rule) { &[][..] } else { tops(&rule.action) };
                let (mut missing, mut cannot, mut partial) = (Vec::new(), Vec::new(), 0);
                for t in candidates {
                    let ops = flat(t);
                    let lacking: Vec<(usize, usize, &Template, String)> = ops
                        .iter()
                        .enumerate()
                        .filter_map(|(i, op)| lacks(op).map(|why| (ops.len(), i + 1, *op, why)))
                        .collect();
                    if lacking.len() == ops.len() {
                        let why = lacking.iter().map(|(_, _, _, w)| w.as_str()).collect::<Vec<_>>().join("; ");
                        cannot.push((t.toml(), why, false));
                        continue;
                    }
                    if !lacking.is_empty() {
                        partial += 1;
                    }
                    missing.extend(lacking);
                    // (A composition, or a `*` path's layers, in turn: each
                    // on the model the ones before it make.)
                    if let Some(op) = t.resolve(trainer, 0) {
                        match dry_run(trainer.source(), trainer.name(), &op) {
                            Err(e) => {
                                // In the pass's own words, not the pipeline's.
                                let e = e.to_string().replace(" (see the errors above)", "");
                                let why = e.rsplit_once("error: ").map_or(e.clone(), |(_, w)| w.trim().into());
                                cannot.push((t.toml(), why, true));
                            }
                            Ok(grown) => {
                                if let Some(why) = never_fits(&grown, trainer.name()) {
                                    cannot.push((t.toml(), why, true));
                                }
                            }
                        }
                    }
                }
                Found { missing, cannot, candidates: candidates.len(), partial }
            })
            .collect();
        // Whether a rule can change the starting model: a growth with a
        // candidate that acts on it.
        let grows = |k: usize| found[k].candidates > 0 && found[k].cannot.len() < found[k].candidates;
        let adds_layers = self.rules.iter().enumerate().any(|(k, r)| {
            grows(k)
                && tops(&r.action)
                    .iter()
                    .flat_map(flat)
                    .any(|t| matches!(t, Template::Deepen { .. } | Template::AddBlock { .. }) && lacks(t).is_none())
        });
        let later = "it acts only on what an earlier growth makes";
        let no_adding = "no rule of the policy adds layers for it to act on later; fix the rule, or drop it";
        let (mut notes, mut never) = (Vec::new(), Vec::new());
        for (k, rule) in self.rules.iter().enumerate() {
            if let Trigger::Steps { at } = rule.trigger
                && passed(rule)
            {
                notes.push(format!(
                    "policy rule {} fires at step {at}, which the checkpoint's run has passed (step {start}): it \
                     never acts",
                    k + 1
                ));
            }
            // The step rules act once a step, the first whose rewrite
            // changes the model (epoch rules at the epoch's end, apart): a
            // second rule at one step is a fallback, silent until now.
            if let Trigger::Steps { at } = rule.trigger
                && let Some(j) =
                    self.rules[..k].iter().position(|q| matches!(q.trigger, Trigger::Steps { at: a } if a == at))
            {
                notes.push(format!(
                    "policy rule {} is set for step {at}, as rule {} is: it acts there only where rule {}'s rewrite \
                     does not change the model (rejected, or at its cap); compose the two (action = {{ op = \
                     \"compose\", ops = [...] }}) to apply both",
                    k + 1,
                    j + 1,
                    j + 1
                ));
            }
            let f = &found[k];
            let others_grow = (0..self.rules.len()).any(|j| j != k && grows(j));
            let n = k + 1;
            // An operator of a composition that finds nothing: the rest go
            // on without it where a rule adds layers (it may act on them),
            // else it never acts (a misspelt layer dropped).
            let none_acts = f.candidates > 0 && f.cannot.len() == f.candidates;
            // (A fork's other candidates act: it goes on, as it skips a
            // candidate that finds nothing.)
            let fork_acts =
                matches!(rule.action, Action::Fork { .. }) && !none_acts && f.partial < f.candidates - f.cannot.len();
            for (ops, i, op, why) in &f.missing {
                let which = format!("operator {i} of {ops} of its composition (action {})", op.toml());
                if adds_layers || fork_acts {
                    notes.push(format!(
                        "policy rule {n}'s {which} cannot grow the model it starts from ({why}): the composition goes \
                         on without it; {later}"
                    ));
                } else {
                    never.push(format!("policy rule {n}'s {which} can never act on this model: {why} ({no_adding})"));
                }
            }
            for (action, why, rewriting) in &f.cannot {
                if matches!(rule.action, Action::Fork { .. }) && !none_acts {
                    notes.push(format!(
                        "policy rule {n}'s fork candidate {action} cannot grow the model it starts from ({why}): the \
                         fork skips it while that holds"
                    ));
                } else if *rewriting && others_grow {
                    notes.push(format!(
                        "policy rule {n} (action {action}) cannot rewrite the model it starts from ({why}): its \
                         decision will be rejected unless an earlier growth changes that"
                    ));
                } else if *rewriting {
                    never.push(format!(
                        "policy rule {n} (action {action}) can never act on this model: {why} (no other rule of the \
                         policy changes the model; fix the rule, or drop it)"
                    ));
                } else if adds_layers {
                    notes.push(format!(
                        "policy rule {n} (action {action}) cannot grow the model it starts from ({why}): {later}"
                    ));
                } else {
                    never.push(format!(
                        "policy rule {n} (action {action}) can never act on this model: {why} ({no_adding})"
                    ));
                }
            }
        }
        // A cap on the run's rewrites stops its rules without a word when
        // they reach it: said up front.
        if self.max_rewrites > 0 {
            let mut times = Some(0usize);
            for rule in &self.rules {
                if matches!(rule.action, Action::Rollback { .. }) {
                    continue;
                }
                // (A step and a FLOPs trigger fire once.)
                let once = matches!(rule.trigger, Trigger::Steps { .. } | Trigger::Flops { .. });
                times = match (times, once, rule.max_times) {
                    (Some(t), true, _) => Some(t + 1),
                    (Some(t), false, m) if m > 0 => Some(t + m),
                    _ => None,
                };
            }
            if times.is_none_or(|t| t > self.max_rewrites) {
                let may = times.map_or("with no limit".to_string(), |t| format!("{t} times"));
                notes.push(format!(
                    "max_rewrites = {}: after {} rewrite{} no rule changes the model again (its rules may act {may})",
                    self.max_rewrites,
                    self.max_rewrites,
                    if self.max_rewrites == 1 { "" } else { "s" }
                ));
            }
        }
        (notes, never)
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TrainError::Io { path: path.to_path_buf(), message: e.to_string() })?;
        Self::parse(&text).map_err(|message| TrainError::Io { path: path.to_path_buf(), message })
    }

    /// Reads a policy (TOML); the error names the rule and field.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| {
            let e = e.to_string();
            // A policy-wide key written after a `[[rule]]` belongs to that
            // rule in TOML, which takes no such key.
            let global = POLICY_KEYS.iter().find(|k| e.contains(&format!("unknown field `{k}`")));
            match global {
                Some(k) => format!(
                    "{e}\n{k} is a policy-wide setting: TOML gives every key after a [[rule]] header to that rule, \
                     so write {k} above the first [[rule]]"
                ),
                None => e,
            }
        })?;
        let d = Policy::default();
        let mut rules = Vec::new();
        for (i, r) in raw.rule.iter().enumerate() {
            // Counted from 1, as the notes and decisions count rules.
            let at = |m: String| format!("policy rule {}: {m}", i + 1);
            let need = |v: Option<f64>, name: &str| v.ok_or_else(|| at(format!("when = \"{}\" needs {name}", r.when)));
            // Each trigger takes its own keys; another trigger's key would be
            // silently ignored, so it is an error.
            let takes: &[&str] = match r.when.as_str() {
                "epoch" => &["every"],
                "steps" => &["at", "every"],
                "flops" => &["flops"],
                "plateau" | "val-plateau" => &["window", "threshold"],
                "instability" => &[],
                other => {
                    return Err(at(format!(
                        "unknown trigger when = \"{other}\" (epoch, steps, flops, plateau, val-plateau, instability)"
                    )));
                }
            };
            let given = [
                ("every", r.every.is_some()),
                ("at", r.at.is_some()),
                ("window", r.window.is_some()),
                ("threshold", r.threshold.is_some()),
                ("flops", r.flops.is_some()),
            ];
            if let Some((key, _)) = given.iter().find(|(k, set)| *set && !takes.contains(k)) {
                let takes = if takes.is_empty() {
                    "no trigger keys".to_string()
                } else {
                    takes.iter().map(|k| format!("{k} = ...")).collect::<Vec<_>>().join(" and ")
                };
                // (Once at one epoch: every = N, max_times = 1.)
                let once = if r.when == "epoch" && *key == "at" {
                    format!(
                        " (to act once, at epoch {0}: every = {0} with max_times = 1)",
                        r.at.map_or("N".to_string(), |a| a.to_string())
                    )
                } else {
                    String::new()
                };
                return Err(at(format!("when = \"{}\" takes {takes}, not {key}{once}", r.when)));
            }
            if r.every == Some(0) || r.window == Some(0) || r.at == Some(0) {
                return Err(at("every, at and window count from 1".into()));
            }
            if let Some(t) = r.threshold
                && !(t.is_finite() && t >= 0.0)
            {
                return Err(at(format!("threshold = {t} is not a number of at least 0")));
            }
            if r.max_times == Some(0) {
                return Err(at("max_times = 0 would let the rule act never; leave it out for no limit".into()));
            }
            let trigger = match r.when.as_str() {
                "epoch" => Trigger::Epoch { every: r.every.unwrap_or(1) },
                "steps" => match (r.at, r.every) {
                    (Some(at), None) => Trigger::Steps { at },
                    (None, Some(every)) => Trigger::EverySteps { every: every as u64 },
                    _ => return Err(at("when = \"steps\" needs at = STEP or every = STEPS (one of them)".into())),
                },
                "flops" => {
                    let f = need(r.flops, "flops = TRAINING_FLOPS")?;
                    if !(f.is_finite() && f > 0.0) {
                        return Err(at(format!("flops = {f} is not a positive number")));
                    }
                    Trigger::Flops { at: f }
                }
                "plateau" | "val-plateau" if r.window.is_some_and(|w| w > MAX_WINDOW) => {
                    return Err(at(format!(
                        "window = {}: at most {MAX_WINDOW} (more than any run's steps or epochs)",
                        r.window.unwrap_or_default()
                    )));
                }
                "plateau" => Trigger::Plateau {
                    window: need(r.window.map(|w| w as f64), "window = STEPS")? as usize,
                    threshold: need(r.threshold, "threshold = RELATIVE_IMPROVEMENT")?,
                },
                "val-plateau" => Trigger::ValPlateau {
                    window: need(r.window.map(|w| w as f64), "window = EPOCHS")? as usize,
                    threshold: need(r.threshold, "threshold = RELATIVE_IMPROVEMENT")?,
                },
                "instability" => Trigger::Instability,
                other => {
                    return Err(at(format!(
                        "unknown trigger when = \"{other}\" (epoch, steps, flops, plateau, val-plateau, instability)"
                    )));
                }
            };
            let action = match &r.action {
                toml::Value::String(s) if s == "rollback" => Action::Rollback { lr_factor: 0.5 },
                toml::Value::Table(t) if t.contains_key("fork") => {
                    let f: RawFork =
                        r.action.clone().try_into().map_err(|e: toml::de::Error| at(format!("action: {e}")))?;
                    for t in &f.fork {
                        t.check().map_err(|m| at(format!("fork candidate: {m}")))?;
                    }
                    if f.fork.is_empty() || f.steps == 0 {
                        return Err(at("a fork needs candidates and steps > 0".into()));
                    }
                    if f.steps > MAX_FORK_STEPS {
                        return Err(at(format!(
                            "a fork of steps = {}: each candidate trains at most {MAX_FORK_STEPS} steps",
                            f.steps
                        )));
                    }
                    Action::Fork { candidates: f.fork, steps: f.steps }
                }
                toml::Value::Table(t) if t.contains_key("rollback") => {
                    let f: RawRollback =
                        r.action.clone().try_into().map_err(|e: toml::de::Error| at(format!("action: {e}")))?;
                    let lr_factor = f.rollback.lr_factor;
                    if !(lr_factor > 0.0 && lr_factor <= 1.0) {
                        return Err(at(format!("rollback lr_factor = {lr_factor} is not in (0, 1]")));
                    }
                    Action::Rollback { lr_factor }
                }
                toml::Value::Table(_) => {
                    let t: Template =
                        r.action.clone().try_into().map_err(|e: toml::de::Error| at(format!("action: {e}")))?;
                    t.check().map_err(|m| at(format!("action: {m}")))?;
                    Action::Grow(t)
                }
                other => {
                    return Err(at(format!(
                        "action = {other} is not \"rollback\", {{ op = \"widen\" | \"deepen\", ... }} or {{ fork = [...], steps = N }}"
                    )));
                }
            };
            let lr_factor = r.lr_factor.unwrap_or(1.0);
            if r.lr_factor.is_some() && matches!(action, Action::Rollback { .. }) {
                return Err(at(
                    "a rollback takes its learning-rate factor as action = { rollback = { lr_factor = F } }".into(),
                ));
            }
            if !(lr_factor.is_finite() && lr_factor > 0.0 && lr_factor <= 100.0) {
                return Err(at(format!("lr_factor = {lr_factor} is not in (0, 100]")));
            }
            let reset_optimizer = match r.optimizer_state.as_deref() {
                None | Some("carry") => false,
                Some("reset") => true,
                Some(other) => {
                    return Err(at(format!("optimizer_state = \"{other}\": expected \"carry\" or \"reset\"")));
                }
            };
            if reset_optimizer && matches!(action, Action::Rollback { .. }) {
                return Err(at("optimizer_state applies to a growth; a rollback restores the state it had".into()));
            }
            let shrink = r.shrink.unwrap_or(1.0);
            if !(shrink > 0.0 && shrink <= 1.0) {
                return Err(at(format!("shrink = {shrink} is not in (0, 1]")));
            }
            if r.shrink.is_some() && matches!(action, Action::Rollback { .. }) {
                return Err(at("shrink applies to a growth; a rollback restores the state it had".into()));
            }
            rules.push(Rule {
                trigger,
                action,
                min_gap: r.min_gap.unwrap_or(0),
                max_times: r.max_times.unwrap_or(0),
                lr_factor,
                reset_optimizer,
                shrink,
            });
        }
        let policy = Policy {
            observe_every: raw.observe_every.unwrap_or(d.observe_every),
            verify_tolerance: raw.verify_tolerance.or(d.verify_tolerance),
            max_loss_increase: raw.max_loss_increase.unwrap_or(d.max_loss_increase),
            rewarmup_steps: raw.rewarmup_steps.unwrap_or(d.rewarmup_steps),
            restart_schedule: raw.restart_schedule.unwrap_or(d.restart_schedule),
            age_bias_correction: raw.age_bias_correction.unwrap_or(d.age_bias_correction),
            watch_steps: raw.watch_steps.unwrap_or(d.watch_steps),
            spike_factor: raw.spike_factor.unwrap_or(d.spike_factor),
            max_rewrites: raw.max_rewrites.unwrap_or(d.max_rewrites),
            checkpoint_dir: raw.checkpoint_dir,
            prefetch: raw.prefetch.unwrap_or(d.prefetch),
            seed: raw.seed.unwrap_or(d.seed),
            rules,
        };
        if !(policy.max_loss_increase >= 0.0) {
            return Err(format!("max_loss_increase ({}) must be at least 0", policy.max_loss_increase));
        }
        if let Some(t) = policy.verify_tolerance.filter(|t| !(*t >= 0.0)) {
            return Err(format!("verify_tolerance = {t} must be at least 0"));
        }
        if !(policy.spike_factor > 1.0) {
            return Err(format!(
                "spike_factor = {} must be above 1 (a loss that many times the recent median is a spike)",
                policy.spike_factor
            ));
        }
        Ok(policy)
    }

    /// The largest relative probe-loss change a function-preserving
    /// rewrite may make: the policy's `verify_tolerance`, else 1e-5, or
    /// 4e-3 (about one bf16 rounding) where the step runs in 16 bits: the
    /// rewritten model rounds differently, and an exact Net2Wider widening
    /// moved the digits MLP's bf16 loss by 2e-4.
    pub fn tolerance(&self, precision: crate::pipeline::Precision) -> f64 {
        self.verify_tolerance.unwrap_or(match precision {
            crate::pipeline::Precision::Fp32 => 1e-5,
            _ => 4e-3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{POLICY_KEYS, Policy};

    /// The policy-wide keys the hint names are the policy's own: serde's
    /// list of them (its error for an unknown key) is `POLICY_KEYS` and the
    /// rules, so a key added to the policy without the hint fails here.
    #[test]
    fn the_policy_wide_keys_of_the_hint_are_the_policys() {
        let e = Policy::parse("not_a_key = 1").unwrap_err();
        let listed = e.split("expected one of ").nth(1).unwrap_or_default();
        let mut keys: Vec<&str> = listed.split(", ").map(|k| k.trim().trim_matches('`')).collect();
        keys.retain(|k| *k != "rule");
        assert_eq!(keys, POLICY_KEYS, "{e}");
    }
}
