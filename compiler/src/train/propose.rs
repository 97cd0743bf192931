//! Structure induction: a model, and a growth policy, for a new problem,
//! proposed from the run registry's past runs ([`super::registry`]).
//!
//! The rule is nearest neighbours over problem descriptors, auto-sklearn's
//! warm start applied to whole training runs:
//!
//! 1. The new problem is described as every run's problem is
//!    ([`Problem`]: rows, input size, outputs, how much a linear or bigram
//!    probe explains, the labels' entropy), and compared with each past
//!    problem of the same kind (tables with tables, text with text).
//! 2. For each of the `k` nearest past problems, its plain runs (no growth
//!    policy) are scored at the same budget: the budget is carried over as
//!    epochs of the default model (so a problem twice as large gets twice
//!    the FLOPs), each run's held-out loss is read off its curve where a
//!    `--flops-budget` run would have stopped, and each structure tried on
//!    that problem gets its regret there: the log of its loss over the
//!    problem's best (each plus 1% of the constant predictor's loss, so
//!    that losses near zero compare sanely); 0 for the best. The regret
//!    is free of the loss's scale and, unlike a rank between best and
//!    worst, not squashed by one structure that failed badly.
//! 3. Each structure's predicted regret is the mean of its regrets over
//!    the neighbours, weighted by closeness (a neighbour that never tried
//!    it counts with its mean regret). The proposal is the least predicted
//!    one, built for the new problem's shapes with the layer API.
//! 4. The growth policy: where the neighbours' growth runs (`aicf train
//!    --adapt`) ended better than the same starting structure trained as
//!    it was, their accepted widenings are carried over (the same layer,
//!    grown by the same factor); otherwise the policy only rolls back
//!    instabilities.
//!
//! A learned predictor of held-out loss would replace step 3 only where it
//! beats this rule on held-out problem families (`benches/induction`); it
//! does not yet. The space of structures is the layer API's: ReLU MLPs
//! given by their hidden widths (`mlp 64-64`) for tables, and pre-norm
//! transformer language models given by blocks and width (`lm 2x64`) for
//! text.

use super::TrainError;
use super::data::{DataOptions, Dataset, Peek, Signature};
use super::registry::{CurvePoint, Problem, RunDetail};
use crate::nn::{
    self, DType, Embedding, HlModule, LayerNorm, Linear, Module, ReLU, Sequential, Tensor, TensorSpec,
    TransformerBlock, child, layer,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

type Result<T, E = TrainError> = std::result::Result<T, E>;

fn bad(message: impl Into<String>) -> TrainError {
    TrainError::Input(message.into())
}

/// A language model's context (tokens per window) and batch.
pub const LM_CONTEXT: usize = 32;
pub const LM_BATCH: usize = 16;

/// A model structure, free of the problem's shapes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Structure {
    /// Linear layers of these output widths, each followed by a ReLU, then
    /// a linear layer to the outputs (no hidden layer: a linear model).
    Mlp { hidden: Vec<usize> },
    /// Token and position embeddings of width `dim`, `layers` pre-norm
    /// transformer blocks (causal attention, heads of 16), a final layer
    /// norm and a linear head.
    Lm { layers: usize, dim: usize },
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Structure::Mlp { hidden } if hidden.is_empty() => write!(f, "mlp linear"),
            Structure::Mlp { hidden } => {
                let h: Vec<String> = hidden.iter().map(usize::to_string).collect();
                write!(f, "mlp {}", h.join("-"))
            }
            Structure::Lm { layers, dim } => write!(f, "lm {layers}x{dim}"),
        }
    }
}

/// The largest width or depth a structure may name.
const MAX_WIDTH: usize = 1 << 16;
const MAX_LAYERS: usize = 64;

impl Structure {
    /// `mlp 64-64`, `mlp 128`, `mlp linear`, `lm 2x64`.
    pub fn parse(text: &str) -> Result<Structure> {
        let text = text.trim();
        let err = |why: &str| {
            bad(format!("structure '{text}': {why} (examples: 'mlp 128', 'mlp 64-64', 'mlp linear', 'lm 2x64')"))
        };
        let (kind, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let number = |s: &str, max: usize| -> Result<usize> {
            match s.trim().parse::<usize>() {
                Ok(n) if n >= 1 && n <= max => Ok(n),
                // 'mlp -5' splits at its '-': the empty width before it.
                _ if s.trim().is_empty() => Err(err("a width is missing (or negative)")),
                _ => Err(err(&format!("'{s}' is not a whole number from 1 to {max}"))),
            }
        };
        match kind {
            "mlp" if rest.trim() == "linear" => Ok(Structure::Mlp { hidden: vec![] }),
            "mlp" if !rest.trim().is_empty() => {
                let hidden = rest.trim().split('-').map(|w| number(w, MAX_WIDTH)).collect::<Result<Vec<_>>>()?;
                if hidden.len() > MAX_LAYERS {
                    return Err(err(&format!("more than {MAX_LAYERS} hidden layers")));
                }
                Ok(Structure::Mlp { hidden })
            }
            "lm" => {
                let (l, d) = rest.trim().split_once('x').ok_or_else(|| err("an lm is BLOCKSxWIDTH"))?;
                let (layers, dim) = (number(l, MAX_LAYERS)?, number(d, MAX_WIDTH)?);
                if dim % 16 != 0 {
                    return Err(err("an lm's width is a multiple of 16 (heads of 16)"));
                }
                Ok(Structure::Lm { layers, dim })
            }
            "mlp" => Err(err("an mlp names its hidden widths, or 'linear' for none")),
            _ => Err(err("not an mlp or an lm")),
        }
    }

    /// The default structure of a task: the digits demo's MLP, the char
    /// LM example's transformer.
    pub fn default_for(task: &str) -> Structure {
        if task == "text" { Structure::Lm { layers: 2, dim: 64 } } else { Structure::Mlp { hidden: vec![128] } }
    }

    /// The structures `aicf propose` and its benchmark search over.
    pub fn space(task: &str) -> Vec<Structure> {
        let mlp = |h: &[usize]| Structure::Mlp { hidden: h.to_vec() };
        let lm = |layers, dim| Structure::Lm { layers, dim };
        if task == "text" {
            vec![lm(1, 32), lm(1, 64), lm(2, 32), lm(2, 64)]
        } else {
            vec![mlp(&[16]), mlp(&[64]), mlp(&[128]), mlp(&[256]), mlp(&[32, 32]), mlp(&[128, 128]), mlp(&[64, 64, 64])]
        }
    }

    /// Whether this structure models problems of `task`.
    pub fn fits(&self, task: &str) -> bool {
        matches!(self, Structure::Lm { .. }) == (task == "text")
    }

    fn mlp_dims(hidden: &[usize], shape: &Shape) -> Vec<usize> {
        std::iter::once(shape.features).chain(hidden.iter().copied()).chain([shape.outputs]).collect()
    }

    /// Parameters for `shape`.
    pub fn params(&self, shape: &Shape) -> usize {
        match self {
            Structure::Mlp { hidden } => Self::mlp_dims(hidden, shape).windows(2).map(|w| w[0] * w[1] + w[1]).sum(),
            Structure::Lm { layers, dim } => {
                let (d, v) = (*dim, shape.outputs);
                // Embeddings, blocks (attention 4 d^2 + 4 d, MLP 8 d^2 +
                // 5 d, two norms 4 d), final norm, head.
                v * d + LM_CONTEXT * d + layers * (12 * d * d + 13 * d) + 2 * d + d * v
            }
        }
    }

    /// Training FLOPs per example (text: per token): forward and backward
    /// of the matrix products, and attention, as the train step counts
    /// them: 6 per weight (forward, the weight's gradient, the input's
    /// gradient), but 4 for the first layer's, whose input is the data and
    /// has no gradient.
    pub fn flops_per_example(&self, shape: &Shape) -> f64 {
        match self {
            Structure::Mlp { hidden } => Self::mlp_dims(hidden, shape)
                .windows(2)
                .enumerate()
                .map(|(i, w)| if i == 0 { 4.0 } else { 6.0 } * (w[0] * w[1]) as f64)
                .sum::<f64>(),
            Structure::Lm { layers, dim } => {
                let (l, d, v, t) = (*layers as f64, *dim as f64, shape.outputs as f64, LM_CONTEXT as f64);
                6.0 * (12.0 * l * d * d + v * d) + 12.0 * l * t * d
            }
        }
    }

    /// The model for `shape`, as a verified `hl` module with `@forward` and
    /// `@loss`.
    pub fn build(&self, shape: &Shape) -> Result<HlModule> {
        if !self.fits(&shape.task) {
            return Err(bad(format!("{self} does not model a {} problem", shape.task)));
        }
        let nn_err = |e: nn::NnError| bad(format!("building {self}: {e}"));
        let batch = shape.batch();
        match self {
            Structure::Mlp { hidden } => {
                let dims = Self::mlp_dims(hidden, shape);
                let mut model = Sequential::new();
                for (i, w) in dims.windows(2).enumerate() {
                    model = model.push(Linear::new(format!("fc{}", i + 1), w[0], w[1]));
                    if i + 2 < dims.len() {
                        model = model.push(ReLU);
                    }
                }
                let x = TensorSpec::f32([batch, shape.features]);
                if shape.task == "regression" {
                    nn::regression_module(&model, &x, &TensorSpec::f32([batch])).map_err(nn_err)
                } else {
                    nn::classifier_module(&model, &x, &TensorSpec::new([batch], DType::I32)).map_err(nn_err)
                }
            }
            Structure::Lm { layers, dim } => {
                let model = Lm::new(*layers, *dim, shape.outputs).map_err(nn_err)?;
                let tokens = TensorSpec::new([batch, LM_CONTEXT], DType::I32);
                nn::classifier_module(&model, &tokens, &tokens).map_err(nn_err)
            }
        }
    }
}

/// The transformer language model of [`Structure::Lm`].
struct Lm {
    tok_emb: Embedding,
    pos_emb: Embedding,
    blocks: Vec<TransformerBlock>,
    ln_f: LayerNorm,
    head: Linear,
}

impl Lm {
    fn new(layers: usize, dim: usize, vocab: usize) -> nn::Result<Lm> {
        let blocks = (0..layers)
            .map(|i| TransformerBlock::new(child("blocks", &i.to_string()), dim, (dim / 16).max(1), 4, true))
            .collect::<nn::Result<_>>()?;
        Ok(Lm {
            tok_emb: Embedding::new("tok_emb", vocab, dim),
            pos_emb: Embedding::new("pos_emb", LM_CONTEXT, dim),
            blocks,
            ln_f: LayerNorm::new("ln_f", [dim]),
            head: Linear::new("head", dim, vocab).without_bias(),
        })
    }
}

impl Module for Lm {
    fn forward(&self, tokens: &Tensor) -> nn::Result<Tensor> {
        layer(
            tokens,
            "",
            || "Lm".into(),
            || {
                let seq = tokens.shape().get(1).copied().unwrap_or(LM_CONTEXT);
                let positions = tokens.graph().arange(seq)?;
                let mut x = self.tok_emb.forward(tokens)?.add(&self.pos_emb.forward(&positions)?)?;
                for block in &self.blocks {
                    x = block.forward(&x)?;
                }
                self.head.forward(&self.ln_f.forward(&x)?)
            },
        )
    }
}

/// A problem's shapes, as the structures are built for it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shape {
    /// `classification`, `regression` or `text`.
    pub task: String,
    /// Features per row (text: 1).
    pub features: usize,
    /// Classes, 1 (regression) or the vocabulary.
    pub outputs: usize,
    /// Rows (text: tokens).
    pub rows: usize,
}

impl Shape {
    pub fn of_peek(p: &Peek) -> Shape {
        Shape { task: p.task.clone(), features: p.features, outputs: p.outputs, rows: p.rows }
    }

    /// The batch the models are built for: 16 windows of text (fewer where
    /// the held-out fifth of a short text has fewer whole windows, which a
    /// model of a larger batch would score in a variant of their size), 32
    /// rows of a table (16 where fewer than 256 rows train).
    pub fn batch(&self) -> usize {
        match self.task.as_str() {
            "text" => (self.held_rows().saturating_sub(1) / LM_CONTEXT).clamp(1, LM_BATCH),
            _ if self.rows < 320 => 16,
            _ => 32,
        }
    }

    /// The shape of a past run's problem.
    fn of_problem(p: &Problem) -> Shape {
        Shape {
            task: p.task.clone(),
            features: p.input.iter().product::<usize>().max(1),
            outputs: p.outputs.max(1),
            // The registry counts training rows; the shape, all of them
            // (a fifth held out).
            rows: (p.rows as f64 / 0.8).round() as usize,
        }
    }

    /// Training rows (text: tokens) with a fifth held out.
    fn train_rows(&self) -> f64 {
        (self.rows as f64 * 0.8).max(1.0)
    }

    /// The held-out fifth's rows (text: tokens), as training splits them.
    fn held_rows(&self) -> usize {
        (self.rows as f64 * 0.2).round() as usize
    }
}

/// Reads `path` and describes its problem as a training run would: the
/// task (from the file, or `task` where given), its shapes, the descriptor
/// the registry records ([`Problem`]), and the signature every structure
/// built for it has (the data was loaded for it: a model of this signature
/// feeds from this data).
/// `label`: a table's label column by name (`--label`), else its last.
pub fn describe(
    path: &Path,
    task: Option<&str>,
    label: Option<&str>,
) -> Result<(Shape, Problem, Signature, Option<String>)> {
    let peeked = super::data::peek(path, label)?;
    let mut shape = Shape::of_peek(&peeked);
    let mut note = peeked.note;
    match (task, shape.task.as_str()) {
        (None, _) => {}
        (Some(t), found) if t == found => {
            // A regression asked for: its targets being no classes is no
            // surprise.
            if found == "regression" {
                note = None;
            }
        }
        (Some("regression"), "classification") => {
            shape.task = "regression".into();
            shape.outputs = 1;
        }
        (Some(t), found) => {
            let why = peeked.cause.map(|c| format!(": {c}")).unwrap_or_default();
            return Err(bad(format!("{}: reads as a {found} problem, not {t}{why}", path.display())));
        }
    }
    // Training scores the held-out fifth in whole windows of the context.
    let held = shape.held_rows();
    if shape.task == "text" && held <= LM_CONTEXT {
        return Err(bad(format!(
            "{}: {} tokens: the held-out fifth ({held}) holds no whole window of the {LM_CONTEXT} tokens a proposed \
             language model reads, so no run could score it (at least {} tokens)",
            path.display(),
            shape.rows,
            ((LM_CONTEXT + 1) as f64 / 0.2).ceil() as usize
        )));
    }
    let module = Structure::default_for(&shape.task).build(&shape)?;
    let sig = Signature::of_source(&module.text, "proposal")?;
    // (Read as a run that starts reads it: labels may be names.)
    let reading = DataOptions { starting: true, label: label.map(String::from), ..DataOptions::default() };
    let dataset = Dataset::load(&[path.to_path_buf()], &sig, &reading)?;
    let mut problem = dataset.problem(&super::run::data_name(&[path.to_path_buf()]), &sig);
    problem.data_hash = Some(super::run::data_record(&[path.to_path_buf()])?);
    Ok((shape, problem, sig, note))
}

/// The best held-out loss a run of this curve had when a `--flops-budget
/// budget` run would have stopped (the end of the epoch that spends the
/// budget), or `None` where the run stopped well short of the budget.
pub fn loss_at(curve: &[CurvePoint], budget: Option<f64>) -> Option<f64> {
    let mut best: Option<f64> = None;
    let mut reached = budget.is_none();
    for c in curve {
        if let Some(v) = c.val_loss.filter(|v| v.is_finite()) {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
        if budget.is_some_and(|b| c.train_flops >= b) {
            reached = true;
            break;
        }
    }
    // A run that ended within 10% of the budget counts as having spent it.
    if !reached && let (Some(b), Some(last)) = (budget, curve.last()) {
        reached = last.train_flops >= 0.9 * b;
    }
    best.filter(|_| reached)
}

/// The held-out and training losses of the epoch with the best held-out
/// loss, on the terms of [`loss_at`] (`None` where the run stopped well
/// short of the budget, or that epoch's training loss is not a number).
pub fn fit_at(curve: &[CurvePoint], budget: Option<f64>) -> Option<(f64, f64)> {
    let best_val = loss_at(curve, budget)?;
    let train = curve.iter().find(|c| c.val_loss == Some(best_val))?.train_loss;
    train.is_finite().then_some((best_val, train))
}

/// How far apart two problems are (same kind only: tables or text).
fn distance(a: &Problem, b: &Problem) -> f64 {
    let d = |p: &Problem| {
        let log = |x: f64| x.max(1.0).log10();
        let entropy =
            if p.task != "regression" && p.outputs > 1 { p.label_entropy / (p.outputs as f64).ln() } else { 1.0 };
        [
            log(p.rows as f64),
            log(p.input.iter().product::<usize>() as f64),
            log(p.outputs as f64),
            2.0 * p.probe_ratio(),
            entropy,
            (p.task == "regression") as u8 as f64,
        ]
    };
    let (x, y) = (d(a), d(b));
    x.iter().zip(&y).map(|(p, q)| (p - q).powi(2)).sum::<f64>().sqrt()
}

/// A past problem the proposal drew on.
#[derive(Clone, Debug, Serialize)]
pub struct Neighbour {
    pub problem: String,
    pub distance: f64,
    /// Its weight in the prediction (normalised).
    pub weight: f64,
    /// The budget carried over to it.
    pub budget: Option<f64>,
    /// The runs scored, by structure: (structure, runs, held-out loss at
    /// the budget, regret: 0 for the best).
    pub scored: Vec<(String, Vec<i64>, f64, f64)>,
    /// Growth runs and whether each paid off.
    pub growth: Vec<Growth>,
}

/// A growth run of a neighbour.
#[derive(Clone, Debug, Serialize)]
pub struct Growth {
    pub run: i64,
    pub from: String,
    pub to: String,
    pub loss: f64,
    /// The same starting structure trained as it was.
    pub plain_loss: Option<f64>,
    pub paid_off: bool,
    /// Accepted widenings: (layer, width after).
    pub widened: Vec<(String, usize)>,
}

/// A structure's prediction for the new problem.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub structure: String,
    /// Predicted regret (0: as good as the best of each neighbour).
    pub score: f64,
    /// Neighbours that tried it.
    pub support: usize,
    pub params: usize,
    pub flops_per_step: f64,
}

/// What `aicf propose` proposes, and why.
#[derive(Debug, Serialize)]
pub struct Proposal {
    pub structure: String,
    /// The structure is a start, to be grown by the policy (`aicf train
    /// --adapt`): the neighbours' growth runs from it did best.
    pub grow: bool,
    pub shape: Shape,
    pub problem: Problem,
    pub budget: Option<f64>,
    /// The budget as epochs of the default structure.
    pub default_epochs: Option<f64>,
    /// The default structure's training FLOPs per example (text: per
    /// token) on this problem: a budget of `E` epochs of it is `E` times
    /// this times the training rows (four fifths of them).
    pub default_flops_per_example: f64,
    pub neighbours: Vec<Neighbour>,
    /// Best first.
    pub predictions: Vec<Prediction>,
    /// Problems of the same kind in the registry.
    pub problems_seen: usize,
    pub explanation: Vec<String>,
    /// A growth policy (TOML) for `aicf train --adapt`.
    pub policy: String,
    #[serde(skip)]
    pub module: Option<HlModule>,
}

/// Settings of [`propose`].
#[derive(Clone, Debug)]
pub struct ProposeOptions {
    /// Nearest problems to draw on (5).
    pub neighbours: usize,
    /// Training FLOPs the model will get (`None`: as the past runs had).
    pub budget: Option<f64>,
    /// The next structure of a search (`aicf propose --next`): the
    /// best-ranked one not yet trained on this problem. The problem's own
    /// runs in the registry mark what was tried, and are not a neighbour.
    pub next: bool,
}

impl Default for ProposeOptions {
    fn default() -> Self {
        ProposeOptions { neighbours: 5, budget: None, next: false }
    }
}

/// The width a decision's action grew a layer to: `widen fc1 to 32 (…)`.
fn widened(action: &str) -> Option<(String, usize)> {
    let rest = action.strip_prefix("widen ")?;
    let (layer, rest) = rest.split_once(" to ")?;
    // (A width past the structures' limit is no record of this AICF's.)
    let width = rest.split_whitespace().next()?.parse().ok().filter(|w| (1..=MAX_WIDTH).contains(w))?;
    Some((layer.to_string(), width))
}

/// Proposes a structure for `problem` (of `shape`) from `runs` (a
/// registry's finished runs with their curves and decisions).
pub fn propose(shape: &Shape, problem: &Problem, runs: &[RunDetail], options: &ProposeOptions) -> Result<Proposal> {
    let default = Structure::default_for(&shape.task);
    let epochs_of = |s: &Shape, b: f64| b / (s.train_rows() * default.flops_per_example(s));
    let default_epochs = options.budget.map(|b| epochs_of(shape, b));
    // Past problems of the same kind: by name, shapes and content (two
    // data sets both called `train.csv` are two problems).
    let key = |p: &Problem| {
        let content = p.data_hash.as_deref().map(super::run::data_hashes).unwrap_or_default();
        (p.name.clone(), format!("{} {:?} {} {} {content}", p.task, p.input, p.outputs, p.rows))
    };
    let mut by_problem: BTreeMap<(String, String), Vec<&RunDetail>> = BTreeMap::new();
    // Runs whose held-out loss went below 0 (a loss of the user's own that
    // is not a likelihood's or a squared error's): the ranking compares
    // losses by their ratio, which a negative loss has not.
    let mut negative = Vec::new();
    for r in runs {
        let p = &r.run.problem;
        // Runs on standardized features are another problem to the
        // descriptors (its probe read them standardized) and train another
        // way than a proposal does: left out, as are runs whose losses are
        // of standardized targets (another unit) and runs on augmented
        // images.
        if (p.task == "text") == (shape.task == "text")
            && !p.name.is_empty()
            && r.run.status == "finished"
            && !r.run.settings.standardize
            && !r.run.settings.standardize_targets
            && r.run.settings.augment.is_none()
        {
            if r.curve.iter().any(|c| c.val_loss.is_some_and(|l| l < 0.0)) {
                negative.push(r.run.id);
                continue;
            }
            by_problem.entry(key(p)).or_default().push(r);
        }
    }
    // With `next`, this problem's own runs: what a search has tried on it
    // (by candidate label, with their run ids): the runs on this data (by
    // content where both record it).
    let mut tried: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    // And how each fitted: (held-out loss, training loss) at the best epoch
    // of each of its runs that reached the budget.
    let mut fits: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    // (Then the problems counted are the others: said, as a count one
    // smaller than without --next read as a registry that lost one.)
    let mut own_aside = false;
    if options.next {
        let own: Vec<(String, String)> =
            by_problem.iter().filter(|(_, rs)| rs[0].run.problem.same_data(problem)).map(|(k, _)| k.clone()).collect();
        let own: Vec<&RunDetail> = own.iter().flat_map(|k| by_problem.remove(k).unwrap_or_default()).collect();
        own_aside = !own.is_empty();
        for r in own {
            let label = match Structure::parse(&r.run.fingerprint.structure) {
                Ok(s) if s.fits(&shape.task) && policy_grows(r) => format!("{s} {GROWN}"),
                Ok(s) if s.fits(&shape.task) => s.to_string(),
                _ => continue,
            };
            if let Some(fit) = fit_at(&r.curve, options.budget) {
                fits.entry(label.clone()).or_default().push(fit);
            }
            tried.entry(label).or_default().push(r.run.id);
        }
    }
    let problems_seen = by_problem.len();
    // Problems left out because too few of their runs reached the budget
    // (they stopped short of it).
    let mut short_of_budget = 0;
    // The problems that rank nothing (fewer than two structures), by name.
    let mut unranked: Vec<String> = Vec::new();
    let mut neighbours: Vec<Neighbour> = Vec::new();
    // Two problems of one name (the same data read as rows and as images,
    // say) are told apart by their inputs' shapes.
    // (Then by their rows, then by their data's hash, where those are
    // equal too.)
    let named = |name: &str, past: &Problem| {
        let namesakes: Vec<&Problem> =
            by_problem.iter().filter(|((n, _), _)| n == name).map(|(_, rs)| &rs[0].run.problem).collect();
        if namesakes.len() < 2 {
            return name.to_string();
        }
        let dims: Vec<String> = past.input.iter().map(|d| d.to_string()).collect();
        let mut label = format!("{name} [{}]", dims.join(", "));
        if namesakes.iter().filter(|p| p.input == past.input).count() > 1 {
            label.push_str(&format!(", {} rows", past.rows));
            if namesakes.iter().filter(|p| p.input == past.input && p.rows == past.rows).count() > 1 {
                let hash = past.data_hash.as_deref().map(super::run::data_hashes).unwrap_or_default();
                label.push_str(&format!(", data {}", hash.chars().take(8).collect::<String>()));
            }
        }
        label
    };
    for ((name, _), rs) in &by_problem {
        let past = &rs[0].run.problem;
        let name = &named(name, past);
        let past_shape = Shape::of_problem(past);
        let budget = default_epochs.map(|e| e * past_shape.train_rows() * default.flops_per_example(&past_shape));
        // Plain runs by structure: the mean loss of its runs at the budget.
        let mut plain: BTreeMap<Structure, (Vec<i64>, Vec<f64>)> = BTreeMap::new();
        // Every structure tried, whether or not its runs reached the budget.
        let mut tried = std::collections::BTreeSet::new();
        // A run whose policy never changed its model (one that only rolls
        // back, or whose triggers never fired) trained its structure plain.
        for r in rs.iter().filter(|r| !grew(r)) {
            let Ok(s) = Structure::parse(&r.run.fingerprint.structure) else { continue };
            if !s.fits(&shape.task) {
                continue;
            }
            tried.insert(s.clone());
            if let Some(loss) = loss_at(&r.curve, budget) {
                let e = plain.entry(s).or_default();
                e.0.push(r.run.id);
                e.1.push(loss);
            }
        }
        if plain.len() < 2 {
            // One structure ranks nothing.
            short_of_budget += usize::from(tried.len() >= 2);
            unranked.push(name.clone());
            continue;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        // Growth runs: did they end better than their start trained plain?
        let mut growth = Vec::new();
        for r in rs.iter().filter(|r| grew(r)) {
            let Some(loss) = loss_at(&r.curve, budget) else { continue };
            let from = r.run.fingerprint.structure.clone();
            let to = r.run.final_fingerprint.as_ref().map_or(from.clone(), |f| f.structure.clone());
            let plain_loss = Structure::parse(&from).ok().and_then(|s| plain.get(&s)).map(|(_, l)| mean(l));
            let widened: Vec<(String, usize)> =
                r.decisions.iter().filter(|d| d.outcome == "accepted").filter_map(|d| widened(&d.action)).collect();
            growth.push(Growth {
                run: r.run.id,
                paid_off: !widened.is_empty() && plain_loss.is_some_and(|p| loss < p),
                from,
                to,
                loss,
                plain_loss,
                widened,
            });
        }
        // Scored: the plain structures, and each start that grew (`mlp 16
        // grown`: that start with its growth policy) as a candidate too.
        let mut entries: BTreeMap<String, (Vec<i64>, Vec<f64>)> =
            plain.iter().map(|(s, (ids, l))| (s.to_string(), (ids.clone(), l.clone()))).collect();
        for g in growth.iter().filter(|g| Structure::parse(&g.from).is_ok_and(|s| s.fits(&shape.task))) {
            let e = entries.entry(format!("{} {GROWN}", g.from)).or_default();
            e.0.push(g.run);
            e.1.push(g.loss);
        }
        let best = entries.values().map(|(_, l)| mean(l)).fold(f64::INFINITY, f64::min);
        let eps = if past.baseline_loss > 0.0 { 0.01 * past.baseline_loss } else { 1e-3 * best.abs() + 1e-12 };
        let scored: Vec<(String, Vec<i64>, f64, f64)> = entries
            .iter()
            .map(|(s, (ids, l))| {
                let loss = mean(l);
                let regret = ((loss + eps) / (best + eps)).ln().max(0.0);
                (s.clone(), ids.clone(), loss, regret)
            })
            .collect();
        neighbours.push(Neighbour {
            problem: name.clone(),
            distance: distance(problem, past),
            weight: 0.0,
            budget,
            scored,
            growth,
        });
    }
    neighbours.sort_by(|a, b| a.distance.total_cmp(&b.distance).then(a.problem.cmp(&b.problem)));
    neighbours.truncate(options.neighbours.max(1));
    let weights: Vec<f64> = neighbours.iter().map(|n| 1.0 / (n.distance + 0.1)).collect();
    let total: f64 = weights.iter().sum();
    for (n, w) in neighbours.iter_mut().zip(&weights) {
        n.weight = w / total;
    }
    // Candidates: what the neighbours tried, and the default; each must
    // fit the budget with ten steps at least.
    let mut candidates: Vec<(Structure, bool)> = vec![(default.clone(), false)];
    for n in &neighbours {
        for (s, ..) in &n.scored {
            let c = candidate(s)?;
            if !candidates.contains(&c) {
                candidates.push(c);
            }
        }
    }
    let batch = shape.batch() as f64;
    let step_flops =
        |s: &Structure| s.flops_per_example(shape) * batch * if shape.task == "text" { LM_CONTEXT as f64 } else { 1.0 };
    let mut explanation = Vec::new();
    let mut predictions: Vec<Prediction> = Vec::new();
    // Candidates left out as too large for the budget, and as tried.
    let (mut too_large, mut left_tried) = (0, 0);
    for (s, grow) in &candidates {
        let label = if *grow { format!("{s} {GROWN}") } else { s.to_string() };
        if options.budget.is_some_and(|b| step_flops(s) * 10.0 > b) {
            too_large += 1;
            let its = if *grow { "its start's" } else { "its" };
            explanation.push(format!(
                "{label} left out: ten of {its} steps ({:.2e} FLOPs) exceed the budget",
                step_flops(s) * 10.0
            ));
            continue;
        }
        if let Some(ids) = tried.get(&label) {
            left_tried += 1;
            explanation.push(format!("{label} left out: already trained on this data (runs {})", id_ranges(ids)));
            continue;
        }
        let (mut score, mut support) = (0.0, 0);
        for n in &neighbours {
            match n.scored.iter().find(|(t, ..)| *t == label) {
                Some((_, _, _, regret)) => {
                    score += n.weight * regret;
                    support += 1;
                }
                None => score += n.weight * n.scored.iter().map(|x| x.3).sum::<f64>() / n.scored.len() as f64,
            }
        }
        predictions.push(Prediction {
            structure: label,
            score,
            support,
            params: s.params(shape),
            flops_per_step: step_flops(s),
        });
    }
    if predictions.is_empty() && left_tried > 0 {
        let labels: Vec<&str> = tried.keys().map(String::as_str).collect();
        let rest = if too_large > 0 {
            format!(" or needs more than the budget for ten steps ({too_large})")
        } else {
            "".into()
        };
        return Err(bad(format!(
            "--next: every candidate the registry ranks for {} has been trained on it already ({}){rest}; `aicf runs \
             compare` shows how they did",
            problem.name,
            labels.join(", ")
        )));
    }
    if predictions.is_empty() {
        // Of the candidates the registry ranks (and the default), not of
        // every structure: a smaller one may fit (--structure).
        let budget = options.budget.unwrap_or(0.0);
        let smallest = candidates.iter().map(|(s, _)| (s, step_flops(s) * 10.0)).min_by(|a, b| a.1.total_cmp(&b.1));
        let (name, ten) = smallest.map_or((String::new(), 0.0), |(s, f)| (s.to_string(), f));
        let ranked: Vec<String> =
            candidates.iter().map(|(s, grow)| if *grow { format!("{s} {GROWN}") } else { s.to_string() }).collect();
        // Only the default ranked: why (said, as a smaller structure of the
        // registry read as left out).
        let why = match (candidates.len(), neighbours.is_empty()) {
            (1, true) => " (the default alone: no past problem in the registry ranks structures here)",
            (1, false) => " (the default alone: the nearest problems' runs rank none other)",
            _ => "",
        };
        // The space's smallest that fits, to name (--structure).
        let fitting = Structure::space(&shape.task)
            .into_iter()
            .filter(|s| step_flops(s) * 10.0 <= budget)
            .min_by(|a, b| step_flops(a).total_cmp(&step_flops(b)));
        let remedy = match fitting {
            Some(s) => {
                format!("give a larger --budget, or --structure \"{s}\" (ten steps {:.3e})", step_flops(&s) * 10.0)
            }
            None => "give a larger --budget: no structure of the proposer's space takes ten steps within it".into(),
        };
        return Err(bad(format!(
            "a budget of {budget:.3e} FLOPs is less than ten training steps of every structure ranked here ({}{why}; \
             the smallest, {name}, takes {ten:.3e} for ten): {remedy}",
            ranked.join(", ")
        )));
    }
    // Best predicted first; among equals, the one with more evidence, then
    // the cheaper.
    predictions.sort_by(|a, b| {
        a.score.total_cmp(&b.score).then(b.support.cmp(&a.support)).then(a.flops_per_step.total_cmp(&b.flops_per_step))
    });
    // A search's next step also reads how the best structure it trained
    // fitted: held out above its training loss (it fits the training rows
    // better than it generalises), the structures no larger than it come
    // first; else (it does not even fit them) the larger ones do. Each
    // group keeps the neighbours' order.
    let direction = search_direction(&fits, shape)?;
    if let Some(d) = &direction {
        predictions.sort_by_key(|p| (p.params <= d.params) != d.overfits);
    }
    let (chosen, grow) = candidate(&predictions[0].structure)?;
    // Explain.
    let kind = if shape.task == "text" { "text" } else { "table" };
    explanation.insert(
        0,
        format!(
            "problem {}: {}, {} {}, {} output{}; {}; a {} probe leaves {:.0}% of the constant predictor's loss",
            problem.name,
            problem.task,
            shape.rows,
            match (shape.task == "text", shape.rows == 1) {
                (true, true) => "character",
                (true, false) => "characters",
                (false, true) => "row",
                (false, false) => "rows",
            },
            shape.outputs,
            if shape.outputs == 1 { "" } else { "s" },
            // A regression's `label_entropy` is the log of the targets'
            // standard deviation: shown as that.
            if shape.task == "regression" {
                format!("targets' standard deviation {:.4}", problem.baseline_loss.max(0.0).sqrt())
            } else {
                format!("labels' entropy {:.3} nats", problem.label_entropy)
            },
            if shape.task == "text" {
                "bigram"
            } else if shape.task == "regression" {
                "least-squares"
            } else {
                "softmax"
            },
            100.0 * problem.probe_ratio()
        ),
    );
    match (options.budget, default_epochs) {
        (Some(b), Some(e)) => {
            // Past a million epochs, or under a tenth of one (a text's
            // whole is a large epoch: it read "0.0"), the count in powers
            // of ten.
            let epochs = if (0.1..1e6).contains(&e) { format!("{e:.1}") } else { format!("{e:.2e}") };
            explanation.push(format!("budget {b:.3e} FLOPs: {epochs} epochs of the default {default}"))
        }
        _ => explanation.push("no budget: past runs are scored on their whole curves".into()),
    }
    if !negative.is_empty() {
        explanation.push(format!(
            "runs {} left out: a held-out loss below 0 (the ranking compares losses by their ratio)",
            id_ranges(&negative)
        ));
    }
    let aside = if own_aside { ", besides this data's own runs (what --next has tried)" } else { "" };
    let seen = format!("{problems_seen} problem{}{aside}", if problems_seen == 1 { "" } else { "s" });
    if neighbours.is_empty() && short_of_budget > 0 {
        explanation.push(format!(
            "no past {kind} problem in the registry has runs of two structures or more trained as they are that \
             reached the budget ({seen} seen, {short_of_budget} of them tried two or more but their runs stopped \
             short of it; runs a policy grew are scored beside those, not as a structure of their own): the \
             default {default}"
        ));
    } else if neighbours.is_empty() {
        explanation.push(format!(
            "no past {kind} problem in the registry has runs of two structures or more trained as they are \
             ({seen} seen; runs a policy grew are scored beside those, not as a structure of their own): the \
             default {default}"
        ));
    } else {
        // Those left out, said: the count above read as all of them.
        let left = if unranked.is_empty() {
            String::new()
        } else {
            // (Joined by semicolons: a label may hold a comma,
            // `reg5 [5], 240 rows`.)
            format!(
                " ({} left out, with runs of fewer than two structures trained as they are{}: {})",
                unranked.len(),
                if options.budget.is_some() { " at the budget" } else { "" },
                unranked.join("; ")
            )
        };
        explanation.push(format!("nearest of the registry's {problems_seen} past {kind} problems{aside}{left}:"));
        for n in &neighbours {
            // (A structure's score is the mean of its runs' held-out
            // losses: said, as it matched no run's figure.)
            let best = n.scored.iter().min_by(|a, b| a.2.total_cmp(&b.2)).map(|b| match b.1.len() {
                1 => format!("{} ({:.4}, run #{})", b.0, b.2, b.1[0]),
                k => format!("{} (mean {:.4} of its {k} runs)", b.0, b.2),
            });
            let ids: Vec<i64> = n.scored.iter().flat_map(|s| s.1.iter().copied()).collect();
            explanation.push(format!(
                "  {:<20} distance {:.2}, weight {:.2}: {} structures in runs {}; best {}",
                n.problem,
                n.distance,
                n.weight,
                n.scored.len(),
                id_ranges(&ids),
                best.unwrap_or_default()
            ));
        }
        explanation.push("predicted regret (log of the loss over each neighbour's best; 0: the best):".into());
        for p in &predictions {
            explanation.push(format!(
                "  {:<14} {:.2}  (tried by {} of {}; {} parameters)",
                p.structure,
                p.score,
                p.support,
                neighbours.len(),
                p.params
            ));
        }
        if let Some(d) = &direction {
            let its = if d.label.ends_with(GROWN) { "its start's" } else { "its" };
            let group = if d.overfits {
                format!("structures of at most {its} {} parameters", d.params)
            } else {
                format!("structures of more than {its} {} parameters", d.params)
            };
            let preferred = predictions.iter().filter(|p| (p.params <= d.params) == d.overfits).count();
            explanation.push(format!(
                "the best trained on this data so far, {} ({} run{}): held-out loss {:.4} against training loss {:.4} \
                 at its best epoch, so {group} first{}",
                d.label,
                d.runs,
                if d.runs == 1 { "" } else { "s" },
                d.held_out,
                d.train,
                if preferred == 0 { " (none is left untried)" } else { "" }
            ));
        }
        let rest = if tried.is_empty() { "" } else { " not yet trained on this data" };
        explanation.push(if grow {
            format!("proposal: {chosen}, grown on plateaus by the policy (--policy), the best predicted{rest}")
        } else {
            format!("proposal: {chosen}, the best predicted{rest}")
        });
    }
    // A run on this data of a structure the proposer does not build (a CNN
    // on images): its best is named, as a proposal of an MLP said nothing
    // of a CNN's better run beside it.
    let outside = runs
        .iter()
        .filter(|r| r.run.status == "finished" && r.run.problem.same_data(problem))
        .filter(|r| Structure::parse(&r.run.fingerprint.structure).map_or(true, |s| !s.fits(&shape.task)))
        .filter_map(|r| {
            let best = r.curve.iter().filter_map(|c| c.val_loss).filter(|l| l.is_finite()).reduce(f64::min)?;
            Some((best, r))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((loss, r)) = outside {
        explanation.push(format!(
            "also on this data: run #{} ({}, {} parameters) reached held-out loss {loss:.4}, a structure propose does \
             not build (`aicf runs show {}`)",
            r.run.id, r.run.fingerprint.structure, r.run.fingerprint.params, r.run.id
        ));
    }
    // (Its grown form is a candidate of its own only where the registry
    // ranks one: it was said so of the default alone, never proposed.)
    let grown_ranked = candidates.iter().any(|(s, g)| *g && *s == chosen);
    let next = (options.next, grown_ranked);
    let policy = checked_policy(growth_policy(&chosen, grow, next, shape, &neighbours, &mut explanation))?;
    let module = chosen.build(shape)?;
    Ok(Proposal {
        structure: chosen.to_string(),
        grow,
        shape: shape.clone(),
        problem: problem.clone(),
        budget: options.budget,
        default_epochs,
        default_flops_per_example: default.flops_per_example(shape),
        neighbours,
        predictions,
        problems_seen,
        explanation,
        policy,
        module: Some(module),
    })
}

impl Proposal {
    /// `structure` as asked, for `shape`: the registry is not read, and
    /// there is no policy.
    pub fn asked(structure: &Structure, shape: &Shape, problem: &Problem, budget: Option<f64>) -> Result<Proposal> {
        Ok(Proposal {
            structure: structure.to_string(),
            grow: false,
            shape: shape.clone(),
            problem: problem.clone(),
            budget,
            default_epochs: None,
            default_flops_per_example: Structure::default_for(&shape.task).flops_per_example(shape),
            neighbours: vec![],
            predictions: vec![],
            problems_seen: 0,
            explanation: vec![format!("{structure}, as asked (--structure); the registry was not read")],
            policy: String::new(),
            module: Some(structure.build(shape)?),
        })
    }
}

/// Which way a search goes after what it trained on the problem: see
/// [`search_direction`].
struct Direction {
    /// The tried structure with the lowest mean held-out loss.
    label: String,
    runs: usize,
    held_out: f64,
    train: f64,
    params: usize,
    /// Its held-out loss is above its training loss (mean relative gap
    /// over its runs).
    overfits: bool,
}

/// The direction `--next` searches in, from the best of the structures
/// tried (by mean held-out loss; the first by label among equals) and
/// its runs' mean relative gap `(held-out - training) / held-out`; `None`
/// before anything tried reached the budget.
fn search_direction(fits: &BTreeMap<String, Vec<(f64, f64)>>, shape: &Shape) -> Result<Option<Direction>> {
    let mean = |v: &mut dyn Iterator<Item = f64>, n: usize| v.sum::<f64>() / n as f64;
    let mut best: Option<(&String, f64)> = None;
    for (label, runs) in fits.iter().filter(|(_, r)| !r.is_empty()) {
        let held_out = mean(&mut runs.iter().map(|f| f.0), runs.len());
        if best.is_none_or(|(_, b)| held_out < b) {
            best = Some((label, held_out));
        }
    }
    let Some((label, held_out)) = best else { return Ok(None) };
    let runs = &fits[label];
    let gap = mean(&mut runs.iter().map(|&(v, t)| (v - t) / v.abs().max(1e-12)), runs.len());
    Ok(Some(Direction {
        label: label.clone(),
        runs: runs.len(),
        held_out,
        train: mean(&mut runs.iter().map(|f| f.1), runs.len()),
        params: candidate(label)?.0.params(shape),
        overfits: gap > 0.0,
    }))
}

/// Whether a past run grew its model: a policy's rewrite was accepted (a
/// rollback is none). Every `--adapt` run counted, so runs of `aicf
/// propose`'s rollback-only policy proposed "grown" structures whose policy
/// would never grow them.
fn grew(r: &RunDetail) -> bool {
    r.run.settings.policy.is_some()
        && r.decisions.iter().any(|d| d.outcome == "accepted" && !d.action.starts_with("roll back"))
}

/// Whether a past run tried its structure grown: its policy has a rule
/// that grows (a rollback-only policy, as `propose` writes beside a plain
/// proposal, tried the structure as it is), or, in records from before the
/// registry kept that, it ran under any policy.
fn policy_grows(r: &RunDetail) -> bool {
    let s = &r.run.settings;
    s.policy.is_some() && s.policy_grows.unwrap_or(true)
}

/// How a candidate that starts small and grows is named: `mlp 16 grown`.
pub const GROWN: &str = "grown";

/// A candidate's structure, and whether it grows.
fn candidate(label: &str) -> Result<(Structure, bool)> {
    match label.strip_suffix(GROWN) {
        Some(start) => Ok((Structure::parse(start)?, true)),
        None => Ok((Structure::parse(label)?, false)),
    }
}

/// `3-9, 12`: run ids, consecutive ones as ranges; past 8 ranges, the
/// first 8 and a count of the rest (a registry of 2,000 runs made a line
/// of several kilobytes).
fn id_ranges(ids: &[i64]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("#{}-{}", ids[i], ids[j]) } else { format!("#{}", ids[i]) });
        i = j + 1;
    }
    const SHOWN: usize = 8;
    if out.len() > SHOWN {
        let rest: usize = ids.len() - out[..SHOWN].iter().map(|r| range_len(r)).sum::<usize>();
        return format!("{} and {rest} more", out[..SHOWN].join(", "));
    }
    out.join(", ")
}

/// The runs a range of [`id_ranges`] holds (`#3-9`: 7).
fn range_len(range: &str) -> usize {
    let ids = range.trim_start_matches('#');
    match ids.split_once('-') {
        Some((a, b)) => b.parse::<usize>().unwrap_or(0).saturating_sub(a.parse::<usize>().unwrap_or(0)) + 1,
        None => 1,
    }
}

/// The growth policy for `chosen`: a rollback of instabilities, and the
/// neighbours' widenings carried over where they are the proposal (`grow`:
/// the growth runs from this start did best) or where most growth runs
/// paid off (ended better than their start trained plain). In a search
/// (`next`) a plain proposal's policy only rolls back: its grown form is a
/// candidate of its own, and a policy that grew it recorded that one
/// again, so the search proposed the same structure on and on.
fn growth_policy(
    chosen: &Structure,
    grow: bool,
    (next, grown_ranked): (bool, bool),
    shape: &Shape,
    neighbours: &[Neighbour],
    explanation: &mut Vec<String>,
) -> String {
    let steps_per_epoch = match shape.task.as_str() {
        "text" => (shape.train_rows() / LM_CONTEXT as f64 / shape.batch() as f64).ceil() as u64,
        // The trainer runs the last, short batch too.
        _ => (shape.train_rows() / shape.batch() as f64).ceil() as u64,
    }
    .max(5);
    let growth: Vec<&Growth> = neighbours.iter().flat_map(|n| &n.growth).collect();
    let paid: Vec<&Growth> = growth.iter().copied().filter(|g| g.paid_off).collect();
    let mut text = format!("{POLICY_HEADER}: the growth rules the nearest past problems' runs support.\n");
    text += &format!("observe_every = 10\nwatch_steps = {steps_per_epoch}\nspike_factor = 4.0\n");
    // The runs to learn the widening from: the growth runs from the
    // proposal's start (a grown proposal), or those that paid off where
    // most did.
    let label = chosen.to_string();
    let source: Vec<&Growth> = if grow {
        growth.iter().copied().filter(|g| g.from == label && !g.widened.is_empty()).collect()
    } else if next {
        Vec::new()
    } else if !paid.is_empty() && paid.len() * 2 >= growth.len() {
        paid.clone()
    } else {
        Vec::new()
    };
    // The layer position they widened, and the width they ended at (the
    // median run's): the proposal's layer there grows to that width.
    let rule = match chosen {
        Structure::Mlp { hidden } if !hidden.is_empty() => {
            let mut finals: Vec<(usize, usize)> = source
                .iter()
                .filter_map(|g| {
                    let (layer, width) = g.widened.last()?;
                    let pos = layer.strip_prefix("fc")?.parse::<usize>().ok().filter(|&p| p >= 1)?;
                    Some((pos, *width))
                })
                .collect();
            finals.sort_by_key(|&(_, w)| w);
            finals.get(finals.len() / 2).copied().filter(|&(pos, w)| pos <= hidden.len() && w > hidden[pos - 1])
        }
        _ => None,
    };
    let runs = |g: &[&Growth]| id_ranges(&g.iter().map(|g| g.run).collect::<Vec<_>>());
    match rule {
        None if next && !grow && grown_ranked => explanation.push(format!(
            "growth policy: --next proposes {label} as it is ({label} grown is a candidate of its own); the policy \
             only rolls back instabilities"
        )),
        None if next && !grow => explanation
            .push(format!("growth policy: --next proposes {label} as it is; the policy only rolls back instabilities")),
        Some((pos, max_width)) => {
            text += &format!(
                "\n# Growth from runs {}: widen fc{pos} on each plateau, up to {max_width} units.\n[[rule]]\n\
                 when = \"plateau\"\nwindow = {steps_per_epoch}\nthreshold = 0.1\nmin_gap = {}\n\
                 action = {{ op = \"widen\", layer = \"fc{pos}\", factor = 2.0, max_width = {max_width}, rule = \
                 \"zero-out\" }}\n",
                runs(&source),
                2 * steps_per_epoch
            );
            explanation.push(if grow {
                format!(
                    "growth policy: as the neighbours' growth runs from {label} ({}): widen fc{pos} on plateaus up to \
                     {max_width} units",
                    runs(&source)
                )
            } else {
                format!(
                    "growth policy: {} of {} growth runs of the neighbours ended better than their start trained as \
                     it was ({}); widen fc{pos} on plateaus up to {max_width} units",
                    paid.len(),
                    growth.len(),
                    runs(&paid)
                )
            });
        }
        None if growth.is_empty() => explanation
            .push("growth policy: no neighbour grew a model; the policy only rolls back instabilities".into()),
        None if !source.is_empty() => explanation.push(format!(
            "growth policy: the neighbours' growth ({}) ended, at its median width, no wider than {label}; the \
             policy only rolls back instabilities",
            runs(&source)
        )),
        None => explanation.push(format!(
            "growth policy: {} of the neighbours' {} growth runs ({}) paid off, too few to carry over to {label}; \
             the policy only rolls back instabilities",
            paid.len(),
            growth.len(),
            runs(&growth)
        )),
    }
    text += "\n[[rule]]\nwhen = \"instability\"\naction = { rollback = { lr_factor = 0.5 } }\n";
    text
}

/// The policy text must read back as a policy `aicf train --adapt` takes.
fn checked_policy(text: String) -> Result<String> {
    super::adapt::Policy::parse(&text)
        .map_err(|e| bad(format!("the derived growth policy does not read back: {e}")))?;
    Ok(text)
}

/// The first line of every policy `aicf propose` writes.
pub const POLICY_HEADER: &str = "# Proposed by aicf propose";

/// The line a proposed model carries before its module: the module's hash.
pub const PROPOSED_CONTENT: &str = "//   content ";
/// The last line of a proposed policy: the hash of the lines before it.
pub const PROPOSED_POLICY_CONTENT: &str = "# content ";

/// Whether a proposal's file holds what the proposal wrote: the hash on its
/// `mark` line is that of the text after the line (`after`: a model's
/// module) or before it (a policy). A file of a proposal before the hash
/// was recorded (no such line) is taken as written.
pub fn unedited(text: &str, mark: &str, after: bool) -> bool {
    let Some(at) = text.find(&format!("\n{mark}")).map(|i| i + 1) else { return true };
    let line_end = text[at..].find('\n').map_or(text.len(), |e| at + e + 1);
    let recorded = text[at + mark.len()..line_end].trim();
    let hashed = if after { &text[line_end..] } else { &text[..at] };
    aicf_runtime::artifact::ir_hash(hashed) == recorded
}

/// Where a proposal's policy goes when `--policy` names no file: beside the
/// model `output` (`x.mlir` -> `x.toml`) where the proposal grows, else
/// nowhere. Only over an earlier proposal's policy: a hand-written policy
/// there was replaced, and with `-o x.toml` the model itself.
pub fn policy_path(output: &Path, grow: bool) -> std::result::Result<Option<PathBuf>, String> {
    if !grow {
        return Ok(None);
    }
    let p = output.with_extension("toml");
    if p == output {
        return Err(format!(
            "{}: the proposal grows, and its policy would be written over the model (-o); give --policy or another -o",
            p.display()
        ));
    }
    if p.exists()
        && !std::fs::read_to_string(&p)
            .is_ok_and(|t| t.starts_with(POLICY_HEADER) && unedited(&t, PROPOSED_POLICY_CONTENT, false))
    {
        return Err(format!(
            "{}: the proposal grows, and its policy goes beside the model, where this file is (not an earlier \
             proposal's policy as it wrote it); give --policy, or move it",
            p.display()
        ));
    }
    Ok(Some(p))
}

#[cfg(test)]
mod tests {
    /// A grown proposal's policy goes beside the model, over nothing but
    /// an earlier proposal's policy.
    #[test]
    fn an_implicit_policy_replaces_only_an_earlier_policy() {
        use super::policy_path;
        let dir = std::env::temp_dir().join(format!("aicf-policy-path-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(policy_path(&dir.join("m.mlir"), false).unwrap(), None);
        assert_eq!(policy_path(&dir.join("m.mlir"), true).unwrap(), Some(dir.join("m.toml")));
        let e = policy_path(&dir.join("m.toml"), true).unwrap_err();
        assert!(e.contains("would be written over the model"), "{e}");
        std::fs::write(dir.join("m.toml"), "# my hand-tuned policy\n").unwrap();
        let e = policy_path(&dir.join("m.mlir"), true).unwrap_err();
        assert!(e.contains("not an earlier proposal's policy"), "{e}");
        std::fs::write(dir.join("m.toml"), format!("{}: ...\n", super::POLICY_HEADER)).unwrap();
        assert_eq!(policy_path(&dir.join("m.mlir"), true).unwrap(), Some(dir.join("m.toml")));
        // A proposal's policy as it wrote it (its hash last), and edited.
        let text = format!("{}: ...\n", super::POLICY_HEADER);
        let hash = aicf_runtime::artifact::ir_hash(&text);
        std::fs::write(dir.join("m.toml"), format!("{text}{}{hash}\n", super::PROPOSED_POLICY_CONTENT)).unwrap();
        assert_eq!(policy_path(&dir.join("m.mlir"), true).unwrap(), Some(dir.join("m.toml")));
        std::fs::write(dir.join("m.toml"), format!("{text}max = 9\n{}{hash}\n", super::PROPOSED_POLICY_CONTENT))
            .unwrap();
        assert!(policy_path(&dir.join("m.mlir"), true).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn structures_parse_and_print_alike() {
        for s in ["mlp 128", "mlp 64-64-64", "mlp linear", "lm 2x64"] {
            assert_eq!(Structure::parse(s).unwrap().to_string(), s);
        }
        for s in ["mlp", "mlp 0", "mlp 12-x", "lm 2", "lm 2x20", "cnn 3", "mlp 99999999"] {
            assert!(Structure::parse(s).is_err(), "{s}");
        }
        assert_eq!(widened("widen fc1 to 32 (zeroout)"), Some(("fc1".into(), 32)));
        assert_eq!(id_ranges(&[5, 1, 2, 3, 9]), "#1-3, #5, #9");
        let odd: Vec<i64> = (0..20).map(|k| 2 * k + 1).chain([100, 101, 102]).collect();
        assert_eq!(id_ranges(&odd), "#1, #3, #5, #7, #9, #11, #13, #15 and 15 more");
    }

    fn problem(name: &str, rows: usize, features: usize, classes: usize, probe: f64) -> Problem {
        let entropy = (classes as f64).ln();
        Problem {
            name: name.into(),
            task: "classification".into(),
            input: vec![features],
            outputs: classes,
            rows,
            label_entropy: entropy,
            baseline_loss: entropy,
            probe_loss: probe * entropy,
            data_hash: None,
        }
    }

    /// A finished run of `structure` on `p` whose held-out loss falls to
    /// `loss` at `flops` FLOPs, then rises (overfits) to twice that.
    fn run(id: i64, p: &Problem, structure: &str, points: &[(f64, f64)], policy: bool) -> RunDetail {
        use super::super::registry::{Fingerprint, RunRow, Settings};
        RunDetail {
            run: RunRow {
                id,
                started: String::new(),
                status: "finished".into(),
                model: String::new(),
                problem: p.clone(),
                fingerprint: Fingerprint { structure: structure.into(), ..Fingerprint::default() },
                final_fingerprint: None,
                settings: Settings { policy: policy.then(|| "grow.toml".into()), ..Settings::default() },
                epochs: None,
                steps: None,
                train_flops: None,
                best_val_loss: None,
                final_val_loss: None,
                final_val_accuracy: None,
                seconds: None,
                error: None,
                tags: Vec::new(),
                note: None,
            },
            command: String::new(),
            data: String::new(),
            seed: 0,
            curve: points
                .iter()
                .enumerate()
                .map(|(i, &(flops, loss))| CurvePoint {
                    epoch: i as i64 + 1,
                    step: 0,
                    train_flops: flops,
                    train_loss: loss,
                    val_loss: Some(loss),
                    val_accuracy: None,
                })
                .collect(),
            decisions: vec![],
        }
    }

    /// A new problem and the runs of two neighbours like it, whose order is
    /// mlp 64, mlp 128 (the default, tried by neither), mlp 256, mlp 16.
    fn searched_problem() -> (Problem, Shape, Vec<RunDetail>) {
        let a = problem("a", 1000, 20, 4, 0.5);
        let b = problem("b", 1000, 21, 4, 0.5);
        let new = problem("new", 1000, 20, 4, 0.5);
        let shape = Shape { task: "classification".into(), features: 20, outputs: 4, rows: 1000 };
        let mut runs = Vec::new();
        for (i, p) in [&a, &b].into_iter().enumerate() {
            let id = 10 * i as i64;
            runs.push(run(id + 1, p, "mlp 16", &[(1e6, 0.8), (1e12, 0.6)], false));
            runs.push(run(id + 2, p, "mlp 64", &[(1e6, 0.5), (1e12, 0.4)], false));
            runs.push(run(id + 3, p, "mlp 256", &[(1e6, 0.6), (1e12, 0.5)], false));
        }
        (new, shape, runs)
    }

    /// `r` with its training loss at every point `train`.
    fn trained_to(mut r: RunDetail, train: f64) -> RunDetail {
        for c in &mut r.curve {
            c.train_loss = train;
        }
        r
    }

    /// Two past problems of one name (one data set read as rows and as
    /// images) are told apart by their inputs' shapes in the explanation.
    #[test]
    fn problems_of_one_name_are_told_apart_by_their_inputs() {
        let (new, shape, mut runs) = searched_problem();
        for r in &mut runs {
            r.run.problem.name = "digits".into();
        }
        let p = propose(&shape, &new, &runs, &ProposeOptions::default()).unwrap();
        let mut names: Vec<&str> = p.neighbours.iter().map(|n| n.problem.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["digits [20]", "digits [21]"], "{:#?}", p.explanation);
        assert!(p.explanation.iter().any(|l| l.trim_start().starts_with("digits [20] ")), "{:#?}", p.explanation);
        // Of one input too: by their rows.
        for r in runs.iter_mut().filter(|r| r.run.problem.input == [21]) {
            r.run.problem.input = vec![20];
            r.run.problem.rows = 1200;
        }
        let p = propose(&shape, &new, &runs, &ProposeOptions::default()).unwrap();
        let mut names: Vec<&str> = p.neighbours.iter().map(|n| n.problem.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["digits [20], 1000 rows", "digits [20], 1200 rows"], "{:#?}", p.explanation);
    }

    #[test]
    fn next_searches_smaller_after_an_overfit_and_larger_after_an_underfit() {
        let (new, shape, runs) = searched_problem();
        let next = ProposeOptions { next: true, ..ProposeOptions::default() };
        // The neighbours' order: mlp 64, mlp 128, mlp 256, mlp 16.
        let after = |own: Vec<RunDetail>| {
            let mut all = runs.clone();
            all.extend(own);
            propose(&shape, &new, &all, &next).unwrap()
        };
        // mlp 64 held out well above its training loss: the only smaller
        // structure comes before the neighbours' second choice.
        let p = after(vec![
            trained_to(run(100, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), 0.1),
            trained_to(run(101, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), 0.2),
        ]);
        assert_eq!(p.structure, "mlp 16", "{:#?}", p.explanation);
        let order: Vec<&str> = p.predictions.iter().map(|q| q.structure.as_str()).collect();
        assert_eq!(order, ["mlp 16", "mlp 128", "mlp 256"]);
        assert!(
            p.explanation
                .iter()
                .any(|l| l.contains("mlp 64 (2 runs): held-out loss 0.5000 against training loss 0.1500")
                    && l.contains("structures of at most its")),
            "{:#?}",
            p.explanation
        );
        // Held out below its training loss: larger first, as ranked.
        let p = after(vec![trained_to(run(100, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), 0.7)]);
        assert_eq!(p.structure, "mlp 128");
        assert!(p.explanation.iter().any(|l| l.contains("structures of more than its")), "{:#?}", p.explanation);
        // Overfitting with nothing smaller left: the larger ones, in order,
        // and the explanation says none of the preferred is left.
        let p = after(vec![
            trained_to(run(100, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), 0.1),
            trained_to(run(101, &new, "mlp 16", &[(1e6, 0.6), (1e12, 0.55)], false), 0.1),
        ]);
        assert_eq!(p.structure, "mlp 128", "{:#?}", p.explanation);
        assert!(
            p.explanation
                .iter()
                .any(|l| l.contains("structures of at most its") && l.ends_with("(none is left untried)")),
            "{:#?}",
            p.explanation
        );
        // The best of what was tried decides: mlp 16 (0.4, underfitting)
        // over mlp 64 (0.5, overfitting), so the larger ones come first.
        let p = after(vec![
            trained_to(run(100, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), 0.1),
            trained_to(run(101, &new, "mlp 16", &[(1e6, 0.6), (1e12, 0.4)], false), 0.45),
        ]);
        assert_eq!(p.structure, "mlp 128", "{:#?}", p.explanation);
        // A run that stopped short of the budget (the neighbours' reach it)
        // says nothing of the fit: the neighbours' order.
        let budgeted = ProposeOptions { budget: Some(1e11), ..next.clone() };
        let mut all = runs.clone();
        all.push(trained_to(run(100, &new, "mlp 64", &[(1e6, 0.6), (1e9, 0.5)], false), 0.1));
        let p = propose(&shape, &new, &all, &budgeted).unwrap();
        assert_eq!(p.neighbours.len(), 2, "{:#?}", p.explanation);
        assert_eq!(p.structure, "mlp 128", "{:#?}", p.explanation);
        assert!(!p.explanation.iter().any(|l| l.contains("the best trained on this data so far")));
        // A training loss that is not a number says nothing either.
        let mut nan = all.clone();
        nan.push(trained_to(run(101, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), f64::NAN));
        assert_eq!(propose(&shape, &new, &nan, &budgeted).unwrap().structure, "mlp 128");
        // The same run to the budget with a training loss: mlp 16 next.
        all.push(trained_to(run(101, &new, "mlp 64", &[(1e6, 0.6), (1e12, 0.5)], false), 0.1));
        assert_eq!(propose(&shape, &new, &all, &budgeted).unwrap().structure, "mlp 16");
    }

    /// Two past problems like the new one, where the small MLP wins at a
    /// small budget and the wide one at a large budget; a far problem
    /// where the deep one wins. The proposal follows the near problems,
    /// and the budget.
    #[test]
    fn the_nearest_problems_and_the_budget_decide() {
        let near_a = problem("near_a", 1000, 20, 4, 0.5);
        let near_b = problem("near_b", 1200, 24, 4, 0.6);
        let far = problem("far", 100_000, 500, 100, 0.05);
        let new = problem("new", 1100, 22, 4, 0.55);
        let shape = Shape { task: "classification".into(), features: 22, outputs: 4, rows: 1375 };
        let default = Structure::default_for("classification");
        // Budgets as epochs of the default (40 and 400).
        let budget = |p: &Problem, epochs: f64| {
            let s = Shape::of_problem(p);
            epochs * s.train_rows() * default.flops_per_example(&s)
        };
        let mut runs = Vec::new();
        for (i, p) in [&near_a, &near_b].into_iter().enumerate() {
            let (lo, hi) = (budget(p, 40.0), budget(p, 400.0));
            let id = 10 * i as i64;
            runs.push(run(id + 1, p, "mlp 16", &[(lo * 0.5, 0.8), (lo, 0.5), (hi, 0.45)], false));
            runs.push(run(id + 2, p, "mlp 256", &[(lo * 0.5, 1.2), (lo, 0.9), (hi, 0.2)], false));
            runs.push(run(id + 3, p, "mlp 128", &[(lo * 0.5, 1.0), (lo, 0.7), (hi, 0.3)], false));
        }
        let (lo, hi) = (budget(&far, 40.0), budget(&far, 400.0));
        runs.push(run(30, &far, "mlp 64-64-64", &[(lo, 0.1), (hi, 0.05)], false));
        runs.push(run(31, &far, "mlp 16", &[(lo, 0.9), (hi, 0.8)], false));
        // Another data set of the same file name is another problem.
        let mut namesake = far.clone();
        namesake.name = "near_a".into();
        runs.push(run(40, &namesake, "mlp 16", &[(lo, 0.3), (hi, 0.2)], false));
        runs.push(run(41, &namesake, "mlp 64", &[(lo, 0.2), (hi, 0.1)], false));
        // A problem of one structure ranks nothing: left out, and said so.
        let mut lonely = far.clone();
        lonely.name = "lonely".into();
        runs.push(run(50, &lonely, "mlp 16", &[(lo, 0.3), (hi, 0.2)], false));
        let opts = |epochs: f64| ProposeOptions { neighbours: 2, budget: Some(budget(&new, epochs)), next: false };
        let small = propose(&shape, &new, &runs, &opts(40.0)).unwrap();
        assert_eq!(small.problems_seen, 5);
        assert!(
            small.explanation.iter().any(|l| l.starts_with(
                "nearest of the registry's 5 past table problems (1 left \
                                                             out"
            ) && l.ends_with(": lonely):")),
            "{:#?}",
            small.explanation
        );
        assert_eq!(small.structure, "mlp 16", "{:#?}", small.explanation);
        let mut names: Vec<&str> = small.neighbours.iter().map(|n| n.problem.as_str()).collect();
        names.sort_unstable();
        // (Its namesake told apart by its input.)
        assert_eq!(names, ["near_a [20]", "near_b"], "the two near problems, not the far one");
        assert!(
            small.explanation.iter().any(|l| l.contains("near_a") && l.contains("#1-3")),
            "{:#?}",
            small.explanation
        );
        let large = propose(&shape, &new, &runs, &opts(400.0)).unwrap();
        assert_eq!(large.structure, "mlp 256", "{:#?}", large.explanation);
        // The prediction orders the three structures as the neighbours do.
        let order: Vec<&str> = large.predictions.iter().map(|p| p.structure.as_str()).collect();
        assert_eq!(order, ["mlp 256", "mlp 128", "mlp 16"]);
        // A budget beyond every run's curve: nothing to score, the default.
        let beyond = propose(&shape, &new, &runs, &opts(1e6)).unwrap();
        assert_eq!(beyond.structure, "mlp 128");
        assert!(
            beyond.explanation.iter().any(|l| l.contains("no past table problem") && l.contains("stopped short of it")),
            "{:#?}",
            beyond.explanation
        );
        // Too small a budget for ten steps of anything.
        let e = propose(&shape, &new, &runs, &ProposeOptions { neighbours: 2, budget: Some(10.0), next: false })
            .unwrap_err()
            .to_string();
        assert!(e.contains("no structure of the proposer's space takes ten steps within it"), "{e}");
        // With only the default ranked (no past run), a budget that fits a
        // smaller structure of the space names it (it named only the
        // default, as if nothing smaller were there).
        let ten = |s: &str| Structure::parse(s).unwrap().flops_per_example(&shape) * shape.batch() as f64 * 10.0;
        let between = ProposeOptions { neighbours: 2, budget: Some(ten("mlp 16") * 1.5), next: false };
        assert!(ten("mlp 128") > ten("mlp 16") * 1.5);
        let e = propose(&shape, &new, &[], &between).unwrap_err().to_string();
        assert!(e.contains("(mlp 128 (the default alone") && e.contains("--structure \"mlp 16\""), "{e}");
        // Text problems do not draw on tables.
        let text = Shape { task: "text".into(), features: 1, outputs: 30, rows: 50_000 };
        let mut lm = new.clone();
        lm.task = "text".into();
        let p = propose(&text, &lm, &runs, &ProposeOptions::default()).unwrap();
        assert_eq!((p.structure.as_str(), p.neighbours.len()), ("lm 2x64", 0));
    }

    /// `next`: a search one command at a time. The problem's own runs mark
    /// what was tried and are not a neighbour; the proposal is the
    /// best-ranked structure not yet tried, in the order of the ranking
    /// without them; with everything tried, an error that says so.
    #[test]
    fn next_follows_the_ranking_past_what_was_tried() {
        let (new, shape, mut runs) = searched_problem();
        let next = ProposeOptions { next: true, ..ProposeOptions::default() };
        let ranking: Vec<String> = propose(&shape, &new, &runs, &ProposeOptions::default())
            .unwrap()
            .predictions
            .iter()
            .map(|p| p.structure.clone())
            .collect();
        // mlp 128 (the default), tried by neither, scores the neighbours' mean regret.
        assert_eq!(ranking, ["mlp 64", "mlp 128", "mlp 256", "mlp 16"]);
        // Nothing tried yet: `next` is the plain proposal.
        assert_eq!(propose(&shape, &new, &runs, &next).unwrap().structure, "mlp 64");
        // A CNN's run on this data is named beside the proposal (a structure
        // the proposer does not build; it went unsaid).
        let mut with_cnn = runs.clone();
        with_cnn.push(run(500, &new, "cnn 16-32", &[(1e6, 0.3), (1e12, 0.05)], false));
        let p = propose(&shape, &new, &with_cnn, &ProposeOptions::default()).unwrap();
        assert!(
            p.explanation.iter().any(|l| l.starts_with(
                "also on this data: run #500 (cnn 16-32, 0 parameters) reached held-out loss 0.0500, a structure \
                 propose does not build"
            )),
            "{:#?}",
            p.explanation
        );
        // With no neighbour, the default alone: its grown form is no
        // candidate, and is not said to be (it was, then never proposed).
        let alone = propose(&shape, &new, &[], &next).unwrap();
        assert!(
            alone
                .explanation
                .iter()
                .any(|l| l
                    == "growth policy: --next proposes mlp 128 as it is; the policy only rolls back instabilities"),
            "{:#?}",
            alone.explanation
        );
        // Each structure the search trains (two runs of each, counted as
        // one structure tried) moves it on to the next of the ranking,
        // whatever the tried one reached: even when it did best of all.
        let mut searched = vec![];
        for (i, s) in ranking.iter().enumerate() {
            let p = propose(&shape, &new, &runs, &next).unwrap();
            assert_eq!(&p.structure, s, "{:#?}", p.explanation);
            assert_eq!(p.problems_seen, 2, "the problem's own runs are not a neighbour");
            if i > 0 {
                assert!(
                    p.explanation.iter().any(
                        |l| l.contains("past table problems, besides this data's own runs (what --next has tried)")
                    ),
                    "{:#?}",
                    p.explanation
                );
            }
            assert!(p.neighbours.iter().all(|n| n.problem != "new"));
            if i > 0 {
                assert!(
                    p.explanation.iter().any(|l| l.contains("already trained on this data")),
                    "{:#?}",
                    p.explanation
                );
                assert!(
                    p.explanation
                        .iter()
                        .any(|l| l.starts_with("proposal: ") && l.ends_with("not yet trained on this data")),
                    "{:#?}",
                    p.explanation
                );
            }
            searched.push(p.structure.clone());
            let id = 100 + 2 * i as i64;
            runs.push(run(id, &new, s, &[(1e6, 0.3), (1e12, 0.1)], false));
            runs.push(run(id + 1, &new, s, &[(1e6, 0.3), (1e12, 0.1)], false));
        }
        assert_eq!(searched, ranking);
        let e = propose(&shape, &new, &runs, &next).unwrap_err().to_string();
        assert!(e.contains("--next") && e.contains("mlp 128, mlp 16, mlp 256, mlp 64") && e.contains("new"), "{e}");
        // Without `next` the problem's own runs are one neighbour among the
        // others (at distance 0).
        let p = propose(&shape, &new, &runs, &ProposeOptions::default()).unwrap();
        let own = p.neighbours.iter().find(|n| n.problem == "new").expect("its own runs, a neighbour");
        assert_eq!((own.distance, own.scored.len()), (0.0, 4));
        // A grown run marks `<start> grown` as tried, not its start (held
        // out above its training loss, so its start's size comes next).
        let mut grown = runs[..6].to_vec();
        grown.push(trained_to(run(300, &new, "mlp 64", &[(1e6, 0.3), (1e12, 0.1)], true), 0.05));
        assert_eq!(propose(&shape, &new, &grown, &next).unwrap().structure, "mlp 64");
        // The same run under a policy that only rolls back (what `propose`
        // writes beside a plain proposal) tried mlp 64 itself.
        grown[6].run.settings.policy_grows = Some(false);
        let p = propose(&shape, &new, &grown, &next).unwrap();
        assert_ne!(p.structure, "mlp 64");
        assert!(
            p.explanation.iter().any(|l| l == "mlp 64 left out: already trained on this data (runs #300)"),
            "{p:?}"
        );
        // A budget that holds ten steps of mlp 16 and mlp 64 but not of the
        // wider two: with those two tried, the error counts the others as
        // too large, not as trained.
        let step = |s: &str| Structure::parse(s).unwrap().flops_per_example(&shape) * shape.batch() as f64;
        let budget = 10.0 * step("mlp 64") * 1.01;
        assert!(10.0 * step("mlp 128") > budget);
        let mut small = runs[..6].to_vec();
        small.push(run(400, &new, "mlp 16", &[(1e6, 0.3), (1e12, 0.1)], false));
        small.push(run(401, &new, "mlp 64", &[(1e6, 0.3), (1e12, 0.1)], false));
        let e = propose(&shape, &new, &small, &ProposeOptions { budget: Some(budget), ..next.clone() })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("trained on it already (mlp 16, mlp 64) or needs more than the budget for ten steps (2)"),
            "{e}"
        );
    }

    /// Growth runs are candidates of their own (`mlp 16 grown`: the start
    /// and its policy); a proposal that is not grown still takes a widening
    /// that paid off for most of the neighbours; growth that did not pay
    /// off leaves only the rollback.
    #[test]
    fn growth_that_paid_off_becomes_the_policy() {
        let a = problem("a", 1000, 20, 4, 0.5);
        let b = problem("b", 1000, 21, 4, 0.5);
        let new = problem("new", 1000, 20, 4, 0.5);
        let shape = Shape { task: "classification".into(), features: 20, outputs: 4, rows: 1250 };
        let widen = |to: usize| crate::train::registry::DecisionRecord {
            action: format!("widen fc1 to {to} (zero-out)"),
            outcome: "accepted".into(),
            ..Default::default()
        };
        let registry = |grown_loss: f64| {
            let mut runs = Vec::new();
            for (i, p) in [&a, &b].into_iter().enumerate() {
                let id = 10 * i as i64;
                runs.push(run(id + 1, p, "mlp 16", &[(1e6, 0.8), (1e12, 0.6)], false));
                runs.push(run(id + 2, p, "mlp 64", &[(1e6, 0.5), (1e12, 0.4)], false));
                let mut grown = run(id + 3, p, "mlp 16", &[(1e6, 0.7), (1e12, grown_loss)], true);
                grown.decisions = vec![widen(32), widen(64), widen(128), widen(256)];
                runs.push(grown);
            }
            runs
        };
        // Growing from 16 did best: the proposal is that start and policy.
        let p = propose(&shape, &new, &registry(0.35), &ProposeOptions::default()).unwrap();
        assert_eq!((p.structure.as_str(), p.grow), ("mlp 16", true), "{:#?}", p.explanation);
        assert_eq!(p.predictions[0].structure, "mlp 16 grown");
        let policy = crate::train::adapt::Policy::parse(&p.policy).unwrap();
        assert_eq!(policy.rules.len(), 2, "{}", p.policy);
        assert!(p.policy.contains("layer = \"fc1\"") && p.policy.contains("max_width = 256"), "{}", p.policy);
        // mlp 64 did best, but growth paid off on both: mlp 64, widened to
        // the width the growth runs reached.
        let p = propose(&shape, &new, &registry(0.45), &ProposeOptions::default()).unwrap();
        assert_eq!((p.structure.as_str(), p.grow), ("mlp 64", false), "{:#?}", p.explanation);
        assert!(p.policy.contains("max_width = 256"), "{}", p.policy);
        assert!(p.explanation.iter().any(|l| l.contains("2 of 2 growth runs")), "{:#?}", p.explanation);
        // In a search (--next) a plain proposal is trained as it is: its
        // grown form is a candidate of its own (a widening policy recorded
        // that again, and the search proposed mlp 64 on and on).
        let next = ProposeOptions { next: true, ..ProposeOptions::default() };
        let p = propose(&shape, &new, &registry(0.45), &next).unwrap();
        assert_eq!((p.structure.as_str(), p.grow), ("mlp 64", false), "{:#?}", p.explanation);
        assert!(!p.policy.contains("widen"), "{}", p.policy);
        assert!(p.explanation.iter().any(|l| l.contains("--next proposes mlp 64 as it is")), "{:#?}", p.explanation);
        // Growth that ended worse than the plain start: only the rollback.
        let p = propose(&shape, &new, &registry(0.9), &ProposeOptions::default()).unwrap();
        assert_eq!((p.structure.as_str(), p.grow), ("mlp 64", false));
        assert!(!p.policy.contains("widen"), "{}", p.policy);
        assert!(p.explanation.iter().any(|l| l.contains("0 of the neighbours' 2 growth runs")), "{:#?}", p.explanation);
        assert_eq!(crate::train::adapt::Policy::parse(&p.policy).unwrap().rules.len(), 1);
        // Runs under a policy that never grew them (only rollbacks) are
        // plain runs of their structure: no "grown" candidate comes of them.
        let mut runs = registry(0.35);
        for r in runs.iter_mut().filter(|r| r.run.settings.policy.is_some()) {
            r.decisions = vec![crate::train::registry::DecisionRecord {
                action: "roll back".into(),
                outcome: "accepted".into(),
                ..Default::default()
            }];
        }
        let p = propose(&shape, &new, &runs, &ProposeOptions::default()).unwrap();
        assert!(!p.grow && p.predictions.iter().all(|c| !c.structure.ends_with("grown")), "{:#?}", p.explanation);
    }
}
