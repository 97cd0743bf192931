//! Training that changes the model while it trains: observe, decide,
//! rewrite the IR, carry the state, resume.
//!
//! ```ignore
//! use aicf_compiler::adapt::{Adaptive, Policy, Progress};
//!
//! let policy = Policy::from_file("examples/grow/policy.toml".as_ref())?;
//! let mut run = Adaptive::new(trainer, policy);
//! run.set_probe(vec![x_probe, y_probe]);            // verifies function-preserving rewrites
//! for (x, y) in batches {
//!     let outcome = run.step(&[&x, &y], lr, progress)?;   // may widen/deepen the model, or roll back
//! }
//! run.epoch_end(progress, Some(held_out_loss))?;
//! for d in run.decisions() { println!("{}", d.summary()); }
//! ```
//!
//! The pieces:
//! - [`Operator`]s rewrite the `hl` source with the growth passes
//!   (`hl-widen`, `hl-deepen`, see `passes::grow`), and [`rebind`] maps every
//!   parameter and optimizer-state value onto the new model by the
//!   operator's rule (documented on [`WidenRule`] and [`Operator::Deepen`]).
//!   [`grow`] does both and compiles the new model; kernels whose IR did not
//!   change come from the kernel cache (`codegen::KernelCache`).
//! - An [`Observer`] keeps the loss history and, every few steps, gradient
//!   norms and update/parameter ratios per layer, recovered from the change
//!   of the parameters and optimizer state over the step.
//! - A [`Policy`] (TOML) holds rules: a [`Trigger`] (epoch boundary, step
//!   count, plateau of the training or the held-out loss, instability) and an [`Action`] (widen, deepen,
//!   fork candidates, roll back).
//! - [`Adaptive`] runs the rules as a transaction: it keeps the model it
//!   replaces (and writes a checkpoint of it when given a directory),
//!   verifies on a probe batch that a function-preserving rewrite left the
//!   loss unchanged (relative difference at most `verify_tolerance`) or
//!   rejects it, watches the next `watch_steps` steps and rolls back to the
//!   kept model (parameters, optimizer state, step and data-order RNG, bit
//!   for bit) when they blow up, and logs every decision.

use crate::passes::grow::{self, DeepenPlan, WidenPlan};
use crate::trainer::{Metrics, TrainError, Trainer};
use crate::{CompileError, CompilerContext, Diagnostic, Severity};
use aicf_runtime::session::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Every parameter and optimizer-state value of a model, by symbol name.
pub type State = BTreeMap<String, Tensor>;

pub type Result<T, E = TrainError> = std::result::Result<T, E>;

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
    Heads { attention: String, heads: usize },
}

impl Operator {
    /// Whether the rewrite, with its rule's values, computes the same
    /// function (the probe check then enforces it).
    pub fn exact(&self) -> bool {
        match self {
            Operator::Widen { noise, .. } => *noise == 0.0,
            Operator::Deepen { .. } | Operator::Heads { .. } => true,
        }
    }

    /// The pass pipeline that rewrites the architecture.
    pub fn pipeline(&self) -> String {
        match self {
            Operator::Widen { layer, width, .. } => format!("builtin.module(hl-widen{{layer={layer} width={width}}})"),
            Operator::Deepen { after, name, residual } => format!(
                "builtin.module(hl-deepen{{after={after} name={} residual={residual}}})",
                name.clone().unwrap_or_else(|| format!("{after}_deep"))
            ),
            Operator::Heads { attention, heads } => {
                format!("builtin.module(hl-add-heads{{attention={attention} heads={heads}}})")
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Operator::Widen { layer, width, rule, .. } => format!("widen {layer} to {width} ({rule:?})").to_lowercase(),
            Operator::Deepen { after, residual, .. } => {
                format!("deepen after {after} ({})", if *residual { "residual, zero output" } else { "identity" })
            }
            Operator::Heads { attention, heads } => format!("grow {attention} to {heads} heads"),
        }
    }
}

/// What a rewrite planned, for [`rebind`].
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Widen { plan: WidenPlan, rule: WidenRule, split_noise: f64, noise: f64 },
    Deepen(DeepenPlan),
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
}

fn params_of(module: mlir_sys::MlirOperation) -> Vec<(String, Vec<usize>)> {
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

fn shape_text(shape: &[usize]) -> String {
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// Rewrites the `hl` module `source` by `op` (the growth pass), returning
/// the new module's text and the plan its state rebinding follows.
pub fn rewrite(source: &str, name: &str, op: &Operator) -> Result<Rewrite, CompileError> {
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
        Operator::Widen { layer, width, rule, split_noise, noise } => {
            if !(0.0..1.0).contains(split_noise) || !noise.is_finite() || *noise < 0.0 {
                return Err(CompileError::Pipeline {
                    pipeline: op.pipeline(),
                    message: format!("split_noise {split_noise} must be in [0, 1) and noise {noise} at least 0"),
                });
            }
            Plan::Widen {
                plan: grow::plan_widen(raw, layer, *width).map_err(failed)?,
                rule: *rule,
                split_noise: *split_noise,
                noise: *noise,
            }
        }
        Operator::Deepen { after, name, residual } => {
            let name = name.clone().unwrap_or_else(|| format!("{after}_deep"));
            Plan::Deepen(grow::plan_deepen(raw, after, &name, *residual).map_err(failed)?)
        }
        // New heads are zero-out units, a head at a time.
        Operator::Heads { attention, heads } => Plan::Widen {
            plan: grow::plan_heads(raw, attention, *heads).map_err(failed)?.widen,
            rule: WidenRule::ZeroOut,
            split_noise: 0.0,
            noise: 0.0,
        },
    };
    let before = params_of(raw);
    crate::run_pipeline(&ctx, &mut module, &op.pipeline())?;
    let after = params_of(module.as_operation().to_raw());
    let mut diff = Vec::new();
    for (name, shape) in &after {
        match before.iter().find(|(n, _)| n == name) {
            Some((_, old)) if old != shape => diff.push(format!("{name} {} -> {}", shape_text(old), shape_text(shape))),
            Some(_) => {}
            None => diff.push(format!("+{name} {}", shape_text(shape))),
        }
    }
    Ok(Rewrite { source: module.as_operation().to_string(), plan, diff })
}

/// The optimizer-state kinds a parameter can have, by symbol suffix.
const STATE_KINDS: [&str; 3] = ["momentum", "exp_avg", "exp_avg_sq"];

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
                    let values = match (rule, is_incoming, kind) {
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
                        // Zero-out: new incoming from the initialiser, new outgoing and all new state zero.
                        (WidenRule::ZeroOut, _, _) => {
                            let kept: Vec<Option<usize>> = (0..w.width).map(|j| (j < w.old).then_some(j)).collect();
                            let fill = if is_incoming && kind.is_none() { &fresh_t.values } else { &zeros };
                            gather_axis(&o.values, &o.shape, axis, &kept, &vec![1.0; w.width], fill)
                        }
                    };
                    Some(values)
                }
            }
        } else {
            None
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

/// Training FLOPs of one step of a model: 6 per weight-matrix element per
/// row (2 forward, 4 backward), the usual dense-layer count; biases,
/// activations and the optimizer are left out.
pub fn step_flops(trainer: &Trainer, rows: usize) -> f64 {
    let weights: usize = trainer
        .session()
        .module()
        .manifest()
        .symbols
        .iter()
        .filter(|s| s.kind == "param" && s.shape.len() >= 2)
        .map(|s| s.shape.iter().product::<usize>())
        .sum();
    6.0 * weights as f64 * rows as f64
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
    let started = Instant::now();
    let rewrite = rewrite(trainer.source(), trainer.name(), op)?;
    // The new model at every batch size the old one ran, compiled at once.
    let batches: Vec<Option<usize>> = trainer.compiled().iter().map(|c| c.batch).collect();
    let compiled = crate::trainer::precompile(&rewrite.source, trainer.name(), trainer.options(), &batches)?;
    let mut new = Trainer::from_source(&rewrite.source, trainer.name(), trainer.options().clone())?;
    for b in batches.iter().flatten() {
        new.add_batch(*b)?;
    }
    let state = rebind(&rewrite.plan, &trainer.state(), &new.state(), seed)?;
    new.set_state(&state)?;
    new.set_steps(trainer.steps());
    Ok(Grown {
        trainer: new,
        rewrite,
        seconds: started.elapsed().as_secs_f64(),
        kernels: compiled.iter().map(|c| c.kernels).sum(),
        compiled_kernels: compiled.iter().map(|c| c.compiled_kernels).sum(),
    })
}

// ---------------------------------------------------------------------------
// Observing
// ---------------------------------------------------------------------------

/// Gradient norm and update/parameter ratio of one layer over one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LayerStats {
    pub grad_norm: f64,
    pub update_ratio: f64,
}

/// What the observer measured at one observed step.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Observation {
    pub step: u64,
    pub loss: f64,
    /// The global gradient norm (all layers).
    pub grad_norm: f64,
    /// By layer (a parameter's owner: `fc1` for `fc1.weight`).
    pub layers: BTreeMap<String, LayerStats>,
}

/// Whether the mean of the last `window` values of `series` after step
/// `since` improved on the `window` before it by less than `threshold`.
fn plateau_of(
    series: &[(u64, f64)],
    since: u64,
    window: usize,
    threshold: f64,
    what: &str,
    unit: &str,
) -> Option<String> {
    // The last 2 window values after `since`, read from the end (a check
    // costs the window, not the history).
    let mut recent: Vec<f64> =
        series.iter().rev().take_while(|(s, _)| *s > since).take(2 * window).map(|l| l.1).collect();
    if window == 0 || recent.len() < 2 * window {
        return None;
    }
    recent.reverse();
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let last = mean(&recent[window..]);
    let prev = mean(&recent[..window]);
    let improvement = (prev - last) / prev.abs().max(1e-12);
    (improvement < threshold).then(|| {
        format!(
            "plateau: mean {what} {last:.4} over the last {window} {unit}, {prev:.4} before ({:.2}% better, threshold {:.2}%)",
            100.0 * improvement,
            100.0 * threshold
        )
    })
}

/// Loss history, and every `every` steps gradient norms and update ratios
/// per layer. The gradient is recovered from the step's change of the
/// optimizer state (Adam: `g = (m' - beta1 m) / (1 - beta1)`; SGD with
/// momentum: `g = buf' - momentum buf`; plain SGD: `g = (p - p') / lr`), so
/// the compiled train step is unchanged and unobserved steps cost nothing.
#[derive(Debug, Default)]
pub struct Observer {
    /// `(step, loss)` of every step.
    pub losses: Vec<(u64, f64)>,
    /// `(step, held-out loss)` at each epoch end that reported one.
    pub val_losses: Vec<(u64, f64)>,
    pub observations: Vec<Observation>,
    before: Option<State>,
}

fn layer_of(param: &str) -> &str {
    param.rsplit_once('.').map_or(param, |(l, _)| l)
}

impl Observer {
    fn before_step(&mut self, trainer: &Trainer, every: u64) {
        self.before = (every > 0 && (trainer.steps() + 1).is_multiple_of(every)).then(|| trainer.state());
    }

    fn after_step(&mut self, trainer: &Trainer, loss: f64, lr: f64) {
        let step = trainer.steps();
        self.losses.push((step, loss));
        let Some(before) = self.before.take() else { return };
        let after = trainer.state();
        let options = trainer.options();
        let mut layers: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new(); // grad^2, update^2, param^2
        let params = trainer.session().module().manifest().symbols.iter().filter(|s| s.kind == "param");
        for s in params {
            let (Some(p0), Some(p1)) = (before.get(&s.name), after.get(&s.name)) else { continue };
            let state = |kind: &str| {
                Some((before.get(&format!("{}.{kind}", s.name))?, after.get(&format!("{}.{kind}", s.name))?))
            };
            let grad: Vec<f64> = match options.optimizer.as_str() {
                "adam" | "adamw" => match state("exp_avg") {
                    Some((m0, m1)) => m0.values.iter().zip(&m1.values).map(|(a, b)| (b - 0.9 * a) / 0.1).collect(),
                    None => continue,
                },
                _ if options.momentum > 0.0 => match state("momentum") {
                    Some((b0, b1)) => b0.values.iter().zip(&b1.values).map(|(a, b)| b - options.momentum * a).collect(),
                    None => continue,
                },
                _ => p0.values.iter().zip(&p1.values).map(|(a, b)| (a - b) / lr.max(f64::MIN_POSITIVE)).collect(),
            };
            let e = layers.entry(layer_of(&s.name).to_string()).or_default();
            e.0 += grad.iter().map(|g| g * g).sum::<f64>();
            e.1 += p0.values.iter().zip(&p1.values).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
            e.2 += p0.values.iter().map(|v| v * v).sum::<f64>();
        }
        let grad_norm = layers.values().map(|e| e.0).sum::<f64>().sqrt();
        let layers = layers
            .into_iter()
            .map(|(k, (g, u, p))| (k, LayerStats { grad_norm: g.sqrt(), update_ratio: u.sqrt() / p.sqrt().max(1e-30) }))
            .collect();
        self.observations.push(Observation { step, loss, grad_norm, layers });
    }

    /// Mean loss of the last `window` steps after `since`, against the
    /// `window` before them: a plateau when it improved by less than
    /// `threshold` (relative). `None` until there are `2 window` steps.
    pub fn plateau(&self, since: u64, window: usize, threshold: f64) -> Option<String> {
        plateau_of(&self.losses, since, window, threshold, "training loss", "steps")
    }

    /// [`Observer::plateau`] of the held-out loss, a value per epoch end
    /// (`window` in epochs).
    pub fn val_plateau(&self, since: u64, window: usize, threshold: f64) -> Option<String> {
        plateau_of(&self.val_losses, since, window, threshold, "held-out loss", "epochs")
    }

    /// A non-finite loss, a loss spike (the mean of the last 3 steps above
    /// `factor` times the median of the `window` steps before them: one
    /// hard batch is not a spike), or a gradient norm above `factor` times
    /// the median of the observations before it.
    pub fn instability(&self, factor: f64, window: usize) -> Option<String> {
        let &(step, loss) = self.losses.last()?;
        if !loss.is_finite() {
            return Some(format!("instability: the loss became {loss} at step {step}"));
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        const RECENT: usize = 3;
        let n = self.losses.len();
        if n >= RECENT + window.max(1) {
            let recent = self.losses[n - RECENT..].iter().map(|l| l.1).sum::<f64>() / RECENT as f64;
            let prior: Vec<f64> = self.losses[n - RECENT - window.max(1)..n - RECENT].iter().map(|l| l.1).collect();
            if let Some(m) = median(prior)
                && recent > factor * m
            {
                return Some(format!(
                    "instability: mean loss {recent:.4} over steps {}..{step} is over {factor}x the median {m:.4} before",
                    step + 1 - RECENT as u64
                ));
            }
        }
        let k = self.observations.len();
        if let Some(last) = self.observations.last()
            && last.step == step
            && k > 4
        {
            let prior: Vec<f64> =
                self.observations[k.saturating_sub(1 + window)..k - 1].iter().map(|o| o.grad_norm).collect();
            if let Some(m) = median(prior)
                && (last.grad_norm > factor * m || !last.grad_norm.is_finite())
            {
                return Some(format!(
                    "instability: gradient norm {:.4} at step {step} is over {factor}x the recent median {m:.4}",
                    last.grad_norm
                ));
            }
        }
        None
    }
}

// ---------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------

/// When a rule fires.
#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    /// At the end of every `every`-th epoch.
    Epoch { every: usize },
    /// Once, after `at` steps (a warm-up).
    Steps { at: u64 },
    /// When the training loss stops improving: see [`Observer::plateau`].
    Plateau { window: usize, threshold: f64 },
    /// When the held-out loss stops improving, checked at epoch ends (the
    /// window in epochs): see [`Observer::val_plateau`].
    ValPlateau { window: usize, threshold: f64 },
    /// A non-finite loss, or a loss or gradient-norm spike.
    Instability,
}

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
    },
}

impl Template {
    /// The operator for the model as it is now; `None` when it has reached
    /// its cap (or the layer is gone).
    pub fn resolve(&self, trainer: &Trainer, serial: usize) -> Option<Operator> {
        match self {
            Template::Widen { layer, width, factor, max_width, rule, split_noise, noise } => {
                let current = trainer.session().symbol(&format!("{layer}.weight"))?.shape.first().copied()?;
                let target = match (width, factor) {
                    (Some(w), _) => *w,
                    (None, Some(f)) => (current as f64 * f).ceil() as usize,
                    (None, None) => current * 2,
                };
                let target = max_width.map_or(target, |m| target.min(m));
                (target > current).then(|| Operator::Widen {
                    layer: layer.clone(),
                    width: target,
                    rule: *rule,
                    split_noise: *split_noise,
                    noise: *noise,
                })
            }
            Template::Deepen { after, residual } => Some(Operator::Deepen {
                after: after.clone(),
                name: Some(format!("{after}_deep{serial}")),
                residual: *residual,
            }),
            Template::Heads { attention, add, max_heads } => {
                let ctx = CompilerContext::new();
                let module = ctx.parse(trainer.source(), trainer.name()).ok()?;
                let (heads, _) = grow::attention_heads(module.as_operation().to_raw(), attention).ok()?;
                let target = max_heads.map_or(heads + add.unwrap_or(1), |m| (heads + add.unwrap_or(1)).min(m));
                (target > heads).then(|| Operator::Heads { attention: attention.clone(), heads: target })
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
}

/// How the runtime may change the model while it trains.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Observe gradient norms and update ratios every this many steps.
    pub observe_every: u64,
    /// Largest relative probe-loss change a function-preserving rewrite may
    /// make before it is rejected.
    pub verify_tolerance: f64,
    /// Largest relative rise of the probe loss an inexact rewrite (Net2Wider
    /// with `noise`) may cause before it is rejected.
    pub max_loss_increase: f64,
    /// After a rewrite, the learning rate ramps from 10% to 100% over this
    /// many steps (0: no re-warm-up).
    pub rewarmup_steps: u64,
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
            verify_tolerance: 1e-5,
            max_loss_increase: 0.05,
            rewarmup_steps: 0,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    observe_every: Option<u64>,
    verify_tolerance: Option<f64>,
    max_loss_increase: Option<f64>,
    rewarmup_steps: Option<u64>,
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
    min_gap: Option<u64>,
    max_times: Option<usize>,
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
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TrainError::Io { path: path.to_path_buf(), message: e.to_string() })?;
        Self::parse(&text).map_err(|message| TrainError::Io { path: path.to_path_buf(), message })
    }

    /// Reads a policy (TOML); the error names the rule and field.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| e.to_string())?;
        let d = Policy::default();
        let mut rules = Vec::new();
        for (i, r) in raw.rule.iter().enumerate() {
            let at = |m: String| format!("rule {} ([[rule]] number {}): {m}", i, i + 1);
            let need = |v: Option<f64>, name: &str| v.ok_or_else(|| at(format!("when = \"{}\" needs {name}", r.when)));
            let trigger = match r.when.as_str() {
                "epoch" => Trigger::Epoch { every: r.every.unwrap_or(1).max(1) },
                "steps" => Trigger::Steps { at: need(r.at.map(|a| a as f64), "at = STEPS")? as u64 },
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
                        "unknown trigger when = \"{other}\" (epoch, steps, plateau, val-plateau, instability)"
                    )));
                }
            };
            let action = match &r.action {
                toml::Value::String(s) if s == "rollback" => Action::Rollback { lr_factor: 0.5 },
                toml::Value::Table(t) if t.contains_key("fork") => {
                    let f: RawFork =
                        r.action.clone().try_into().map_err(|e: toml::de::Error| at(format!("action: {e}")))?;
                    if f.fork.is_empty() || f.steps == 0 {
                        return Err(at("a fork needs candidates and steps > 0".into()));
                    }
                    Action::Fork { candidates: f.fork, steps: f.steps }
                }
                toml::Value::Table(t) if t.contains_key("rollback") => {
                    let f: RawRollback =
                        r.action.clone().try_into().map_err(|e: toml::de::Error| at(format!("action: {e}")))?;
                    Action::Rollback { lr_factor: f.rollback.lr_factor }
                }
                toml::Value::Table(_) => {
                    Action::Grow(r.action.clone().try_into().map_err(|e: toml::de::Error| at(format!("action: {e}")))?)
                }
                other => {
                    return Err(at(format!(
                        "action = {other} is not \"rollback\", {{ op = \"widen\" | \"deepen\", ... }} or {{ fork = [...], steps = N }}"
                    )));
                }
            };
            rules.push(Rule { trigger, action, min_gap: r.min_gap.unwrap_or(0), max_times: r.max_times.unwrap_or(0) });
        }
        let policy = Policy {
            observe_every: raw.observe_every.unwrap_or(d.observe_every),
            verify_tolerance: raw.verify_tolerance.unwrap_or(d.verify_tolerance),
            max_loss_increase: raw.max_loss_increase.unwrap_or(d.max_loss_increase),
            rewarmup_steps: raw.rewarmup_steps.unwrap_or(d.rewarmup_steps),
            watch_steps: raw.watch_steps.unwrap_or(d.watch_steps),
            spike_factor: raw.spike_factor.unwrap_or(d.spike_factor),
            max_rewrites: raw.max_rewrites.unwrap_or(d.max_rewrites),
            checkpoint_dir: raw.checkpoint_dir,
            prefetch: raw.prefetch.unwrap_or(d.prefetch),
            seed: raw.seed.unwrap_or(d.seed),
            rules,
        };
        if !(policy.verify_tolerance >= 0.0) || !(policy.spike_factor > 1.0) {
            return Err(format!(
                "verify_tolerance ({}) must be at least 0 and spike_factor ({}) above 1",
                policy.verify_tolerance, policy.spike_factor
            ));
        }
        Ok(policy)
    }
}

// ---------------------------------------------------------------------------
// The adaptive run
// ---------------------------------------------------------------------------

/// Where the caller's data loop is: the epoch, the batch within it, and the
/// data-order RNG state the epoch's order was drawn from. A rollback hands
/// back the one saved with the state it restores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub epoch: usize,
    pub batch: usize,
    pub rng: u64,
}

/// One decision of the policy, as logged.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Decision {
    pub step: u64,
    pub epoch: usize,
    pub trigger: String,
    pub action: String,
    /// The parameter table's changes.
    pub diff: Vec<String>,
    pub params_before: usize,
    pub params_after: usize,
    /// `@loss` on the probe batch before and after the rewrite.
    pub loss_before: Option<f64>,
    pub loss_after: Option<f64>,
    pub relative_change: Option<f64>,
    /// Whether the operator preserves the function (the check enforced).
    pub exact: bool,
    /// Seconds training stood still: rewrite, compile, state carried,
    /// probe check.
    pub pause_seconds: f64,
    /// Of them, seconds spent waiting for the background compile of the
    /// new model to finish.
    pub waited_seconds: f64,
    pub kernels: usize,
    pub compiled_kernels: usize,
    /// "accepted", "rejected" or "rolled back".
    pub outcome: String,
    pub reason: String,
    /// A fork's candidates and their evaluation losses.
    pub candidates: Vec<(String, f64)>,
}

impl Decision {
    pub fn summary(&self) -> String {
        let losses = match (self.loss_before, self.loss_after) {
            (Some(a), Some(b)) => format!(", probe loss {a:.6} -> {b:.6}"),
            _ => String::new(),
        };
        let compile = if self.kernels == 0 {
            format!("compiled ahead, {:.2} s waiting for it", self.waited_seconds)
        } else {
            format!("{} of {} kernels compiled", self.compiled_kernels, self.kernels)
        };
        format!(
            "step {} (epoch {}): {} on {} -> {} [{}]{losses}, pause {:.2} s ({compile}){}",
            self.step,
            self.epoch,
            self.action,
            self.trigger,
            self.outcome,
            self.diff.join(", "),
            self.pause_seconds,
            if self.reason.is_empty() { String::new() } else { format!(": {}", self.reason) }
        )
    }
}

/// What one step of an adaptive run did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Trained; `Some(i)`: decision `i` then changed the model.
    Trained(Metrics, Option<usize>),
    /// Rolled back (decision `i`): continue the data loop from `Progress`.
    RolledBack(usize, Progress),
}

/// A model and state to return to.
struct Kept {
    /// The model before a rewrite (`None`: the current one) and the
    /// operator that replaced it.
    trainer: Option<Trainer>,
    op: Option<Operator>,
    state: State,
    steps: u64,
    progress: Progress,
    /// The decision that replaced it, and the step its watch ends at.
    decision: Option<usize>,
    until: u64,
}

/// A [`Trainer`] run under a [`Policy`].
pub struct Adaptive {
    trainer: Trainer,
    policy: Policy,
    observer: Observer,
    decisions: Vec<Decision>,
    log: Option<(PathBuf, std::fs::File)>,
    /// The model before the last rewrite, while it is watched.
    kept: Option<Kept>,
    /// The state at the last epoch end (same model).
    last_good: Option<Kept>,
    last_rewrite: u64,
    rewrites: usize,
    fired: Vec<usize>,
    /// Rules with nothing to grow the current model by (at their cap):
    /// not resolved again (an attention's heads are read from the IR)
    /// until the model changes.
    idle: Vec<bool>,
    rejected: Vec<Operator>,
    rolled_back_to: Vec<u64>,
    probe: Option<Vec<Tensor>>,
    fork_train: Vec<Vec<Tensor>>,
    fork_eval: Vec<Vec<Tensor>>,
    lr_factor: f64,
    /// The learning rate of the last step (a fork trains at it).
    last_lr: f64,
    /// The background compile of the models the rules may grow into.
    prefetch: Option<std::thread::JoinHandle<()>>,
    /// Whether it was started for the current model.
    prefetched: bool,
    /// Training FLOPs so far (6 per weight element per row).
    pub flops: f64,
}

impl Adaptive {
    pub fn new(trainer: Trainer, policy: Policy) -> Self {
        let rules = policy.rules.len();
        Adaptive {
            trainer,
            policy,
            observer: Observer::default(),
            decisions: Vec::new(),
            log: None,
            kept: None,
            last_good: None,
            last_rewrite: 0,
            rewrites: 0,
            fired: vec![0; rules],
            idle: vec![false; rules],
            rejected: Vec::new(),
            rolled_back_to: Vec::new(),
            probe: None,
            fork_train: Vec::new(),
            fork_eval: Vec::new(),
            lr_factor: 1.0,
            last_lr: 0.0,
            prefetch: None,
            prefetched: false,
            flops: 0.0,
        }
    }

    pub fn trainer(&self) -> &Trainer {
        &self.trainer
    }

    pub fn trainer_mut(&mut self) -> &mut Trainer {
        &mut self.trainer
    }

    pub fn into_trainer(self) -> Trainer {
        self.trainer
    }

    pub fn observer(&self) -> &Observer {
        &self.observer
    }

    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Writes every decision to `path` as JSON lines.
    pub fn log_to(&mut self, path: &Path) -> Result<()> {
        let file = std::fs::File::create(path)
            .map_err(|e| TrainError::Io { path: path.to_path_buf(), message: e.to_string() })?;
        self.log = Some((path.to_path_buf(), file));
        Ok(())
    }

    /// The batch (features, labels, at the model's batch size) on which
    /// rewrites are checked.
    pub fn set_probe(&mut self, probe: Vec<Tensor>) {
        self.probe = Some(probe);
    }

    /// Batches a fork trains its candidates on, and those it compares them on.
    pub fn set_fork_data(&mut self, train: Vec<Vec<Tensor>>, eval: Vec<Vec<Tensor>>) {
        self.fork_train = train;
        self.fork_eval = eval;
    }

    /// The learning rate's factor now: the rollback factor times the
    /// re-warm-up ramp after a rewrite.
    pub fn lr_scale(&self) -> f64 {
        let ramp = self.policy.rewarmup_steps;
        let since = self.trainer.steps().saturating_sub(self.last_rewrite);
        let warm =
            if ramp > 0 && self.rewrites > 0 && since < ramp { 0.1 + 0.9 * since as f64 / ramp as f64 } else { 1.0 };
        self.lr_factor * warm
    }

    fn record(&mut self, d: Decision) -> Result<usize> {
        if let Some((path, file)) = &mut self.log {
            let line = serde_json::to_string(&d).map_err(|e| TrainError::Input(e.to_string()))?;
            writeln!(file, "{line}").map_err(|e| TrainError::Io { path: path.clone(), message: e.to_string() })?;
        }
        self.decisions.push(d);
        Ok(self.decisions.len() - 1)
    }

    /// One train step on `inputs` at `lr` (times [`Adaptive::lr_scale`]),
    /// observed; then the step rules (steps, plateau, instability) run. A
    /// non-finite loss with nothing to roll back to is an error.
    pub fn step(&mut self, inputs: &[&Tensor], lr: f64, progress: Progress) -> Result<Outcome> {
        self.last_lr = lr;
        if !self.prefetched {
            self.prefetch_next();
        }
        let lr = lr * self.lr_scale();
        self.observer.before_step(&self.trainer, self.policy.observe_every);
        let rows = inputs.first().and_then(|t| t.shape.first()).copied().unwrap_or(0);
        let metrics = match self.trainer.step(inputs, lr) {
            Ok(m) => m,
            Err(TrainError::NonFinite { step, loss, lr: at_lr }) => {
                self.observer.losses.push((step, loss));
                let reason = format!("instability: the loss became {loss} at step {step} (lr {at_lr})");
                // A watched rewrite goes back; otherwise an instability
                // rule decides; without one the error stands.
                let watched = self.kept.as_ref().is_some_and(|k| k.decision.is_some());
                let rolled = if watched {
                    self.roll_back(&reason, progress)?
                } else if let Some(i) = self.instability_rule() {
                    match self.act(i, &reason, inputs, progress)? {
                        Some(Acted::RolledBack(d, p)) => Some((d, p)),
                        _ => None,
                    }
                } else {
                    None
                };
                return match rolled {
                    Some((d, p)) => Ok(Outcome::RolledBack(d, p)),
                    None => Err(TrainError::NonFinite { step, loss, lr: at_lr }),
                };
            }
            Err(e) => return Err(e),
        };
        self.flops += step_flops(&self.trainer, rows);
        self.observer.after_step(&self.trainer, metrics.loss, lr);
        let step = self.trainer.steps();
        // A watched rewrite that destabilised training goes back.
        let unstable = self.observer.instability(self.policy.spike_factor, 20);
        if let Some(reason) = &unstable
            && self.kept.as_ref().is_some_and(|k| k.decision.is_some() && step <= k.until)
            && let Some((d, p)) = self.roll_back(reason, progress)?
        {
            return Ok(Outcome::RolledBack(d, p));
        }
        if self.kept.as_ref().is_some_and(|k| step > k.until) {
            self.kept = None;
        }
        for i in 0..self.policy.rules.len() {
            let rule = self.policy.rules[i].clone();
            let reason = match &rule.trigger {
                Trigger::Steps { at } if step == *at => Some(format!("step {at} reached")),
                Trigger::Plateau { window, threshold } => self.observer.plateau(self.last_rewrite, *window, *threshold),
                Trigger::Instability => unstable.clone(),
                _ => None,
            };
            if let Some(reason) = reason
                && let Some(outcome) = self.act(i, &reason, inputs, progress)?
            {
                return Ok(match outcome {
                    Acted::Changed(d) => Outcome::Trained(metrics, Some(d)),
                    Acted::RolledBack(d, p) => Outcome::RolledBack(d, p),
                });
            }
        }
        Ok(Outcome::Trained(metrics, None))
    }

    /// Runs the epoch rules (epoch, held-out plateau) at the end of epoch
    /// `progress.epoch`, given its held-out loss, and keeps the state as the
    /// last good one for an instability rule. `progress` is the epoch's end.
    pub fn epoch_end(&mut self, progress: Progress, val_loss: Option<f64>) -> Result<Option<usize>> {
        if let Some(v) = val_loss.filter(|v| v.is_finite()) {
            self.observer.val_losses.push((self.trainer.steps(), v));
        }
        let mut changed = None;
        for i in 0..self.policy.rules.len() {
            let reason = match self.policy.rules[i].trigger {
                Trigger::Epoch { every } if progress.epoch.is_multiple_of(every) => {
                    Some(format!("end of epoch {}", progress.epoch))
                }
                Trigger::ValPlateau { window, threshold } => {
                    self.observer.val_plateau(self.last_rewrite, window, threshold)
                }
                _ => None,
            };
            if let Some(reason) = reason
                && changed.is_none()
                && let Some(Acted::Changed(d)) = self.act(i, &reason, &[], progress)?
            {
                changed = Some(d);
            }
        }
        if self.kept.is_none() && self.instability_rule().is_some() {
            self.last_good = Some(Kept {
                trainer: None,
                op: None,
                state: self.trainer.state(),
                steps: self.trainer.steps(),
                progress,
                decision: None,
                until: 0,
            });
        }
        Ok(changed)
    }

    fn decision(&self, trigger: &str, action: String, progress: Progress) -> Decision {
        Decision {
            step: self.trainer.steps(),
            epoch: progress.epoch,
            trigger: trigger.to_string(),
            action,
            params_before: param_count(&self.trainer),
            params_after: param_count(&self.trainer),
            ..Decision::default()
        }
    }

    /// Rule `i` fired for `reason`: act if its limits allow.
    fn act(&mut self, i: usize, reason: &str, inputs: &[&Tensor], progress: Progress) -> Result<Option<Acted>> {
        let rule = self.policy.rules[i].clone();
        if (rule.max_times > 0 && self.fired[i] >= rule.max_times) || self.idle[i] {
            return Ok(None);
        }
        let step = self.trainer.steps();
        if let Action::Rollback { lr_factor } = rule.action {
            self.fired[i] += 1;
            return Ok(self.roll_back(reason, progress)?.map(|(d, p)| {
                self.lr_factor *= lr_factor;
                Acted::RolledBack(d, p)
            }));
        }
        if (self.rewrites > 0 && step < self.last_rewrite + rule.min_gap)
            || (self.policy.max_rewrites > 0 && self.rewrites >= self.policy.max_rewrites)
        {
            return Ok(None);
        }
        let serial = self.rewrites;
        let decided = match &rule.action {
            Action::Grow(t) => match t.resolve(&self.trainer, serial) {
                Some(op) if !self.rejected.contains(&op) => self.apply(&op, reason, inputs, progress)?,
                _ => {
                    self.idle[i] = true;
                    return Ok(None);
                }
            },
            Action::Fork { candidates, steps } => {
                let ops: Vec<Operator> = candidates.iter().filter_map(|t| t.resolve(&self.trainer, serial)).collect();
                if ops.is_empty() {
                    self.idle[i] = true;
                    return Ok(None);
                }
                self.fork(&ops, *steps, reason, progress)?
            }
            Action::Rollback { .. } => return Ok(None),
        };
        self.fired[i] += 1;
        Ok(decided.map(Acted::Changed))
    }

    fn instability_rule(&self) -> Option<usize> {
        self.policy.rules.iter().position(|r| r.trigger == Trigger::Instability)
    }

    /// The probe batch: the one set, else the step's inputs.
    fn probe_inputs<'a>(&'a self, inputs: &[&'a Tensor]) -> Vec<&'a Tensor> {
        match &self.probe {
            Some(p) => p.iter().collect(),
            None => inputs.to_vec(),
        }
    }

    fn save_before_rewrite(&self) -> Result<()> {
        if let Some(dir) = &self.policy.checkpoint_dir {
            std::fs::create_dir_all(dir).map_err(|e| TrainError::Io { path: dir.clone(), message: e.to_string() })?;
            let path = dir.join(format!("before-rewrite-{}.safetensors", self.rewrites + 1));
            let meta = BTreeMap::from([("rewrite".to_string(), (self.rewrites + 1).to_string())]);
            self.trainer.save_checkpoint(&path, &meta)?;
        }
        Ok(())
    }

    /// Rewrites the model by `op` as a transaction: checkpoint, grow, probe
    /// check; the new model replaces the current one only if it passes.
    /// Returns the decision's index when the model changed.
    pub fn apply(
        &mut self,
        op: &Operator,
        trigger: &str,
        inputs: &[&Tensor],
        progress: Progress,
    ) -> Result<Option<usize>> {
        let started = Instant::now();
        let waited = self.wait_for_prefetch();
        self.save_before_rewrite()?;
        let mut d = self.decision(trigger, op.describe(), progress);
        d.exact = op.exact();
        d.waited_seconds = waited;
        let probe: Vec<Tensor> = self.probe_inputs(inputs).into_iter().cloned().collect();
        let probe: Vec<&Tensor> = probe.iter().collect();
        let before = if probe.is_empty() { None } else { Some(self.trainer.loss(&probe)?) };
        let mut grown = match grow(&self.trainer, op, self.policy.seed ^ self.rewrites as u64) {
            Ok(g) => g,
            Err(e) => {
                d.outcome = "rejected".into();
                d.reason = format!("the rewrite failed: {e}");
                d.pause_seconds = started.elapsed().as_secs_f64();
                self.rejected.push(op.clone());
                self.record(d)?;
                return Ok(None);
            }
        };
        let after = if probe.is_empty() { None } else { Some(grown.trainer.loss(&probe)?) };
        d.diff = grown.rewrite.diff.clone();
        d.params_after = param_count(&grown.trainer);
        d.kernels = grown.kernels;
        d.compiled_kernels = grown.compiled_kernels;
        d.loss_before = before;
        d.loss_after = after;
        if let (Some(a), Some(b)) = (before, after) {
            let change = (b - a).abs() / a.abs().max(1e-12);
            d.relative_change = Some(change);
            let rise = (b - a) / a.abs().max(1e-12);
            let refused = if d.exact {
                (!(change <= self.policy.verify_tolerance)).then(|| {
                    format!(
                        "the probe loss changed by {change:.2e} (tolerance {:.0e}) under a function-preserving rewrite",
                        self.policy.verify_tolerance
                    )
                })
            } else {
                (!(rise <= self.policy.max_loss_increase)).then(|| {
                    format!(
                        "the probe loss rose by {:.2}% (at most {:.2}%)",
                        100.0 * rise,
                        100.0 * self.policy.max_loss_increase
                    )
                })
            };
            if let Some(reason) = refused {
                d.outcome = "rejected".into();
                d.reason = reason;
                d.pause_seconds = started.elapsed().as_secs_f64();
                self.rejected.push(op.clone());
                self.record(d)?;
                return Ok(None);
            }
        }
        d.outcome = "accepted".into();
        d.pause_seconds = started.elapsed().as_secs_f64();
        let index = self.decisions.len();
        self.replace(grown.trainer, op.clone(), progress, index);
        self.record(d)?;
        Ok(Some(index))
    }

    /// Makes `new` the current model, keeping the old one (and its state)
    /// to roll back to while decision `index` (of `op`) is watched.
    fn replace(&mut self, new: Trainer, op: Operator, progress: Progress, index: usize) {
        let old = std::mem::replace(&mut self.trainer, new);
        let steps = old.steps();
        self.kept = Some(Kept {
            state: old.state(),
            steps,
            trainer: Some(old),
            op: Some(op),
            progress,
            decision: Some(index),
            until: self.trainer.steps() + self.policy.watch_steps,
        });
        self.last_good = None;
        self.last_rewrite = self.trainer.steps();
        self.rewrites += 1;
        self.prefetched = false;
        self.idle.fill(false);
    }

    /// Starts compiling, on a background thread, the model each growth
    /// rule (and fork candidate) would turn the current one into, at every
    /// batch size the current one runs.
    fn prefetch_next(&mut self) {
        self.prefetched = true;
        if !self.policy.prefetch || self.prefetch.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let serial = self.rewrites;
        let mut ops: Vec<Operator> = Vec::new();
        for rule in &self.policy.rules {
            let templates: Vec<&Template> = match &rule.action {
                Action::Grow(t) => vec![t],
                Action::Fork { candidates, .. } => candidates.iter().collect(),
                Action::Rollback { .. } => vec![],
            };
            for t in templates {
                if let Some(op) = t.resolve(&self.trainer, serial)
                    && !self.rejected.contains(&op)
                    && !ops.contains(&op)
                {
                    ops.push(op);
                }
            }
        }
        if ops.is_empty() {
            return;
        }
        let (source, name, options) =
            (self.trainer.source().to_string(), self.trainer.name().to_string(), self.trainer.options().clone());
        let batches: Vec<Option<usize>> = self.trainer.compiled().iter().map(|c| c.batch).collect();
        // Failures are left for the rewrite itself to report.
        self.prefetch = Some(std::thread::spawn(move || {
            for op in ops {
                if let Ok(r) = rewrite(&source, &name, &op) {
                    let _ = crate::trainer::precompile(&r.source, &name, &options, &batches);
                }
            }
        }));
    }

    /// Waits for the background compile; returns the seconds waited.
    fn wait_for_prefetch(&mut self) -> f64 {
        let started = Instant::now();
        if let Some(h) = self.prefetch.take() {
            let _ = h.join();
        }
        started.elapsed().as_secs_f64()
    }

    /// Back to the model before the watched rewrite, else to the state of
    /// the last epoch's end: parameters, optimizer state and step count bit
    /// for bit, and the data loop's progress (returned). `None` when there
    /// is nothing to go back to.
    pub fn roll_back(&mut self, reason: &str, progress: Progress) -> Result<Option<(usize, Progress)>> {
        let target = self.kept.as_ref().or(self.last_good.as_ref()).map(|k| k.steps);
        // Going back to the same point twice would replay the same steps:
        // the second time, there is nothing to go back to.
        if target.is_none_or(|t| self.rolled_back_to.contains(&t)) {
            return Ok(None);
        }
        let Some(kept) = self.kept.take().or_else(|| self.last_good.take()) else { return Ok(None) };
        self.rolled_back_to.push(kept.steps);
        let mut d = self.decision(reason, "roll back".into(), progress);
        if let Some(t) = kept.trainer {
            self.trainer = t;
        }
        self.trainer.set_state(&kept.state)?;
        self.trainer.set_steps(kept.steps);
        self.observer.losses.retain(|(s, _)| *s <= kept.steps);
        self.observer.val_losses.retain(|(s, _)| *s <= kept.steps);
        self.observer.observations.retain(|o| o.step <= kept.steps);
        d.params_after = param_count(&self.trainer);
        d.outcome = "accepted".into();
        d.reason = match kept.decision {
            Some(i) => {
                self.decisions[i].outcome = "rolled back".into();
                self.decisions[i].reason = reason.to_string();
                format!(
                    "rewrite at step {} ({}) rolled back to step {}",
                    self.decisions[i].step, self.decisions[i].action, kept.steps
                )
            }
            None => format!("back to the state of step {} (end of epoch {})", kept.steps, kept.progress.epoch),
        };
        if let Some(op) = kept.op {
            self.rejected.push(op);
        }
        self.prefetched = false;
        self.idle.fill(false);
        self.last_rewrite = kept.steps;
        if kept.decision.is_none() {
            // The epoch-end state stays the last good one.
            self.last_good =
                Some(Kept { trainer: None, state: kept.state, op: None, decision: None, until: 0, ..kept });
        }
        let index = self.record(d)?;
        Ok(Some((index, kept.progress)))
    }

    /// Grows each of `ops` from the current state, trains each `steps`
    /// steps on the fork batches, and keeps the one with the lowest mean
    /// loss on the evaluation batches (its training counts in the FLOPs and
    /// the pause).
    fn fork(&mut self, ops: &[Operator], steps: usize, trigger: &str, progress: Progress) -> Result<Option<usize>> {
        let started = Instant::now();
        let mut d = self.decision(
            trigger,
            format!("fork {}", ops.iter().map(Operator::describe).collect::<Vec<_>>().join(" | ")),
            progress,
        );
        if self.fork_train.is_empty() || self.fork_eval.is_empty() {
            d.outcome = "rejected".into();
            d.reason = "no fork data (Adaptive::set_fork_data)".into();
            self.record(d)?;
            return Ok(None);
        }
        d.waited_seconds = self.wait_for_prefetch();
        self.save_before_rewrite()?;
        let lr = self.last_lr * self.lr_factor;
        let mut best: Option<(f64, Grown, Operator)> = None;
        for op in ops {
            let mut g = match grow(&self.trainer, op, self.policy.seed ^ self.rewrites as u64) {
                Ok(g) => g,
                Err(e) => {
                    d.candidates.push((format!("{} (failed: {e})", op.describe()), f64::NAN));
                    continue;
                }
            };
            for k in 0..steps {
                let batch: Vec<&Tensor> = self.fork_train[k % self.fork_train.len()].iter().collect();
                let rows = batch.first().and_then(|t| t.shape.first()).copied().unwrap_or(0);
                self.flops += step_flops(&g.trainer, rows);
                if g.trainer.step(&batch, lr).is_err() {
                    break;
                }
            }
            let mut total = 0.0;
            for batch in &self.fork_eval {
                let batch: Vec<&Tensor> = batch.iter().collect();
                total += g.trainer.loss(&batch).unwrap_or(f64::NAN);
            }
            let loss = total / self.fork_eval.len() as f64;
            d.candidates.push((op.describe(), loss));
            if loss.is_finite() && best.as_ref().is_none_or(|b| loss < b.0) {
                best = Some((loss, g, op.clone()));
            }
        }
        d.pause_seconds = started.elapsed().as_secs_f64();
        let Some((_, g, op)) = best else {
            d.outcome = "rejected".into();
            d.reason = "no candidate trained to a finite loss".into();
            self.record(d)?;
            return Ok(None);
        };
        d.exact = op.exact();
        d.diff = g.rewrite.diff.clone();
        d.params_after = param_count(&g.trainer);
        d.kernels = g.kernels;
        d.compiled_kernels = g.compiled_kernels;
        d.outcome = "accepted".into();
        d.reason = format!("kept {} after {steps} steps each", op.describe());
        let index = self.decisions.len();
        self.replace(g.trainer, op, progress, index);
        self.record(d)?;
        Ok(Some(index))
    }
}

enum Acted {
    Changed(usize),
    RolledBack(usize, Progress),
}

/// Parameters (elements) of the model.
pub fn param_count(trainer: &Trainer) -> usize {
    trainer
        .session()
        .module()
        .manifest()
        .symbols
        .iter()
        .filter(|s| s.kind == "param")
        .map(|s| s.shape.iter().product::<usize>())
        .sum()
}
