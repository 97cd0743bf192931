//! The training loop as a library: [`fit`] trains a model on a data set for
//! a number of epochs on any device and reports through a [`Report`]; `aicf
//! train` is this call with a printer.
//!
//! The order of work: the model's signature and the data are read and
//! checked against each other, the options and (resuming) the checkpoint's
//! record of them are checked, and only then is anything compiled. Each
//! epoch trains on every training example once (tables: a seeded shuffle of
//! the rows, a smaller last batch running a variant compiled for its size;
//! text: random windows), then evaluates the held-out examples, writes the
//! metrics line, and with a checkpoint directory saves `last.safetensors`
//! atomically (and links the best epoch's as `best.safetensors`; early
//! stopping ends the run some epochs after it). A resumed run continues bit for bit: parameters, optimizer
//! state, step, epoch and the data order's RNG come from the checkpoint.

use super::adapt::{Action, Adaptive, Outcome, Policy, Progress, Trigger, param_count, step_flops};
use super::data::{DataOptions, Dataset, Role, Signature, Split};
use super::report::{self, EpochRecord, StepRecord};
use super::{Compiled, Options, TrainError, Trainer};
use aicf_runtime::collective::{Communicator, Values};
use aicf_runtime::{RuntimeError, Tensor, artifact::DType};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

pub use super::eval::{Scored, evaluate_checkpoint, trained_precision};

type Result<T, E = TrainError> = std::result::Result<T, E>;

/// The learning rate over a run: `lr` throughout; a linear warm-up over
/// `warmup_steps` (from `lr / warmup_steps`, as PyTorch's `LinearLR`) then
/// a cosine decay that reaches `min_factor` times `lr` one step past the
/// run's last (nanoGPT's schedule, and `CosineAnnealingLR` over the steps
/// after the warm-up); or warm-up, stable, decay (WSD,
/// MiniCPM's and Hägele et al.'s 2024): the warm-up, then `lr` until the
/// last `decay_fraction` of the run (or its last `decay_steps`, where
/// given), then a linear decay to `min_factor` times `lr` at its last step.
/// A WSD run's rate before its decay does not depend on the run's length,
/// so a small model grown part-way (with a policy's `restart_schedule`)
/// trains at the full rate until the growth, and only the end of the run
/// anneals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    Constant,
    Cosine { warmup_steps: u64, min_factor: f64 },
    Wsd { warmup_steps: u64, decay_fraction: f64, decay_steps: Option<u64>, min_factor: f64 },
}

impl LrSchedule {
    /// The rate of step `step` (0-based) of `total`.
    pub fn at(&self, lr: f64, step: u64, total: u64) -> f64 {
        match *self {
            LrSchedule::Constant => lr,
            LrSchedule::Cosine { warmup_steps, min_factor } => {
                if step < warmup_steps {
                    return lr * (step + 1) as f64 / warmup_steps as f64;
                }
                let span = total.saturating_sub(warmup_steps).max(1) as f64;
                let progress = ((step - warmup_steps) as f64 / span).min(1.0);
                let min = lr * min_factor;
                min + 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()) * (lr - min)
            }
            LrSchedule::Wsd { warmup_steps, decay_fraction, decay_steps, min_factor } => {
                if step < warmup_steps {
                    return lr * (step + 1) as f64 / warmup_steps as f64;
                }
                // The decay's steps: the last `decay_fraction` of the run
                // (or `decay_steps`, at most the whole run), ending at its
                // last step (`total - 1`) at the floor.
                let decay = match decay_steps {
                    Some(n) => n as f64,
                    None => (total as f64 * decay_fraction).round(),
                }
                .min(total as f64)
                .max(1.0);
                let into = step as f64 - (total as f64 - decay);
                if into < 0.0 {
                    return lr;
                }
                let progress = ((into + 1.0) / decay).min(1.0);
                lr - progress * (lr - lr * min_factor)
            }
        }
    }

    /// `constant`, `cosine` or `wsd`.
    fn name(&self) -> &'static str {
        match self {
            LrSchedule::Constant => "constant",
            LrSchedule::Cosine { .. } => "cosine",
            LrSchedule::Wsd { .. } => "wsd",
        }
    }

    /// The schedule a checkpoint's record describes ([`LrSchedule::describe`]);
    /// `None` where it does not read as one.
    pub fn from_description(text: &str) -> Option<LrSchedule> {
        if text == "constant" {
            return Some(LrSchedule::Constant);
        }
        let number = |s: &str| s.trim().parse::<f64>().ok().filter(|v| v.is_finite());
        let (head, rest) = text.split_once(", warm-up ")?;
        let (warmup, rest) = rest.split_once(" steps, ")?;
        let warmup_steps = warmup.parse::<u64>().ok()?;
        match head {
            "cosine" => {
                let min = rest.strip_prefix("down to ")?.strip_suffix(" x lr")?;
                Some(LrSchedule::Cosine { warmup_steps, min_factor: number(min)? })
            }
            "wsd" => {
                let (decay, min) = rest.strip_prefix("the last ")?.split_once(" down to ")?;
                let min_factor = number(min.strip_suffix(" x lr")?)?;
                let (decay_fraction, decay_steps) = match decay.strip_suffix(" steps") {
                    Some(n) => (0.2, Some(n.parse::<u64>().ok()?)),
                    None => (number(decay.strip_suffix(" of the run")?)?, None),
                };
                Some(LrSchedule::Wsd { warmup_steps, decay_fraction, decay_steps, min_factor })
            }
            _ => None,
        }
    }

    /// For the checkpoint's record (older checkpoints have none, and
    /// resume as before).
    fn describe(&self) -> String {
        match self {
            LrSchedule::Constant => "constant".into(),
            LrSchedule::Cosine { warmup_steps, min_factor } => {
                format!("cosine, warm-up {warmup_steps} steps, down to {min_factor} x lr")
            }
            LrSchedule::Wsd { warmup_steps, decay_fraction, decay_steps, min_factor } => {
                let decay = match decay_steps {
                    Some(n) => format!("{n} steps"),
                    None => format!("{decay_fraction} of the run"),
                };
                format!("wsd, warm-up {warmup_steps} steps, the last {decay} down to {min_factor} x lr")
            }
        }
    }
}

/// The steps a schedule spans, from the run's first: its epochs' steps,
/// or, with a FLOPs budget, the steps already taken (`step`) and those the
/// budget still buys (`budget_left`, at the model's current FLOPs per step;
/// recomputed at every step, so a growth that makes steps dearer shortens
/// the schedule), whichever ends first. So a cosine or WSD run under a
/// budget decays to its floor where the budget ends, not where its
/// `--epochs` would.
fn schedule_steps(run: &RunOptions, (steps_per_epoch, step): (usize, u64), budget_left: Option<u64>) -> u64 {
    let epochs = (run.epochs as u64).saturating_mul(steps_per_epoch as u64);
    budget_left.map_or(epochs, |left| epochs.min(step.saturating_add(left)))
}

/// How to run training.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub epochs: usize,
    pub lr: f64,
    /// How the rate changes over the run.
    pub lr_schedule: LrSchedule,
    /// Seeds the data split and order and dropout.
    pub seed: u64,
    /// How the data is read and split.
    pub data: DataOptions,
    /// The run directory: `metrics.jsonl`, `plot.svg`, `decisions.jsonl`,
    /// and the compiled artifacts (`Options::cache_dir` is not read by
    /// [`fit`]).
    pub out: PathBuf,
    /// Save `last.safetensors` here after every epoch.
    pub checkpoint_dir: Option<PathBuf>,
    /// Continue from `<checkpoint_dir>/last.safetensors`.
    pub resume: bool,
    /// Continue from this checkpoint instead (any one a run wrote: an
    /// earlier model version's `v<k>.safetensors`, another run's), saving
    /// to `checkpoint_dir` if given: a fork.
    pub resume_from: Option<PathBuf>,
    /// Resume even where this run's options (learning rate, optimizer,
    /// seed, data, model) differ from the checkpoint's record: the
    /// differences are reported and the new values recorded.
    pub override_resume: bool,
    /// Change the model while it trains by this policy (TOML).
    pub adapt: Option<PathBuf>,
    /// Write the kernel timeline of `profile_steps` steps here.
    pub profile: Option<PathBuf>,
    pub profile_steps: usize,
    /// Show a progress bar (steps per second, ETA) on the terminal.
    pub progress: bool,
    /// Train as one replica of a data-parallel run over this communicator
    /// (`mpirun -n N aicf train --data-parallel`): each step's global batch
    /// is `N x` the model's batch, in the single-process order; this
    /// replica computes its shard, the step sums the weighted gradients
    /// over the replicas, and rank 0 alone writes metrics and checkpoints.
    pub data_parallel: Option<Arc<dyn Communicator>>,
    /// Record the run in this run registry (SQLite; see
    /// [`super::registry`]): its model's structure, its problem, its
    /// settings, its held-out loss against FLOPs, its growth decisions and
    /// its outcome. `aicf train` records into
    /// [`super::registry::Runs::default_path`] unless told otherwise.
    pub runs_db: Option<PathBuf>,
    /// Stop once training has spent this many FLOPs (the train step's
    /// matrix products, convolutions and attention, for the global batch):
    /// the epoch in progress ends there, is evaluated and recorded.
    pub flops_budget: Option<f64>,
    /// End the run once this many epochs have passed without a lower
    /// held-out loss than the best so far (early stopping's patience;
    /// needs held-out examples). The best epoch's checkpoint is
    /// `best.safetensors` in the checkpoint directory, kept with or
    /// without this.
    pub early_stop: Option<usize>,
    /// A checkpoint every this many steps inside an epoch too (each
    /// epoch's end saves as ever): a resume of it goes on inside the epoch
    /// on the uninterrupted run's bits, so a long epoch (a language model's
    /// text) is not lost whole to a kill. Needs `checkpoint_dir`.
    pub save_every: Option<u64>,
    /// A line (and a record in the run directory's `steps.jsonl`) every
    /// this many steps: the mean training loss since the last, the rate,
    /// the speed; an epoch's own line waits for its end.
    pub log_every: Option<u64>,
    /// The held-out loss every this many steps too (in the step's line
    /// and record), as nanoGPT's `eval_interval`: for a language model's
    /// long epoch. Each epoch's end is evaluated as ever.
    pub eval_every: Option<u64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            epochs: 10,
            lr: 3e-3,
            lr_schedule: LrSchedule::Constant,
            seed: 0,
            data: DataOptions::default(),
            out: PathBuf::from("target/aicf-run"),
            checkpoint_dir: None,
            resume: false,
            resume_from: None,
            override_resume: false,
            adapt: None,
            profile: None,
            profile_steps: 10,
            progress: false,
            data_parallel: None,
            runs_db: None,
            flops_budget: None,
            early_stop: None,
            save_every: None,
            log_every: None,
            eval_every: None,
        }
    }
}

/// What training starts with.
#[derive(Clone, Debug)]
pub struct Start {
    pub data: String,
    /// Examples a training epoch reads: a table's rows, a text's windows.
    pub train_examples: usize,
    /// Held-out examples scored each epoch: a table's held-out rows, the
    /// windows drawn from a text's held-out part (`--eval-windows`).
    pub held_examples: usize,
    /// Whether the data is a text (its examples are windows).
    pub text: bool,
    pub batch: usize,
    pub steps_per_epoch: usize,
    pub device: String,
    /// A text's tokens a step predicts (the batch's windows times their
    /// length): an epoch's speed is also said in tokens a second, as
    /// language models' are. `None` for rows.
    pub tokens_per_step: Option<usize>,
}

/// What a run reports as it goes; every method does nothing by default.
pub trait Report {
    /// The model was compiled (or found compiled) for this batch size.
    fn compiled(&mut self, _model: &Path, _compiled: &Compiled) {}
    fn started(&mut self, _start: &Start) {}
    /// `within`: the epoch's batches done, where the checkpoint was saved
    /// inside `epoch` (`--save-every`, a stop, a FLOPs budget).
    fn resumed(&mut self, _checkpoint: &Path, _epoch: usize, _step: u64, _within: Option<usize>) {}
    fn epoch(&mut self, _record: &EpochRecord, _epochs: usize) {}
    /// A logged step (`--log-every`, `--eval-every`).
    fn step(&mut self, _record: &StepRecord, _epochs: usize) {}
    /// An adaptive run's decision, summarised.
    fn decision(&mut self, _summary: &str) {}
    /// Something the user should know that does not stop the run.
    fn note(&mut self, _message: &str) {}
}

/// A report that says nothing.
pub struct Quiet;
impl Report for Quiet {}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Summary {
    pub records: Vec<EpochRecord>,
    pub steps: u64,
    pub training_seconds: f64,
    /// Of the training time, the seconds spent timing GEMM candidates for
    /// the GEMM registry: all of them once per shape and machine (the
    /// choices are kept in its cache file), then a short re-check of each
    /// recorded choice on its first use in a process.
    pub gemm_timing_seconds: f64,
    pub metrics: PathBuf,
    pub plot: PathBuf,
    pub trace: Option<PathBuf>,
    /// Adaptive runs: decisions taken and where they are logged.
    pub decisions: usize,
    pub decisions_log: Option<PathBuf>,
    pub params: usize,
    pub train_flops: f64,
    /// The lowest held-out loss of the run (its checkpoint's run's too)
    /// and its epoch: `best.safetensors` in the checkpoint directory.
    pub best: Option<(f64, usize)>,
    /// Whether `--early-stop` ended the run before its last epoch.
    pub stopped_early: bool,
}

impl Summary {
    pub fn last(&self) -> Option<&EpochRecord> {
        self.records.last()
    }
}

/// Checks what does not need the model compiled.
fn check_options(options: &Options, run: &RunOptions) -> Result<()> {
    let bad = |m: String| Err(TrainError::Input(m));
    for (flag, n) in [("--log-every", run.log_every), ("--eval-every", run.eval_every)] {
        if n == Some(0) {
            return bad(format!("{flag} 0: every 1 step or more"));
        }
    }
    match run.save_every {
        Some(0) => return bad("--save-every 0: a checkpoint every 1 step or more".into()),
        Some(n) if run.checkpoint_dir.is_none() => {
            return bad(format!("--save-every {n} saves into --checkpoint-dir, and none is given"));
        }
        _ => {}
    }
    // (0 is a rate: the parameters stay, as PyTorch's lr=0, while a batch
    // norm's running statistics follow the data; it was refused.)
    if !run.lr.is_finite() || run.lr < 0.0 || run.lr.is_sign_negative() {
        return bad(format!("the learning rate {} is not a finite number of at least 0", run.lr));
    }
    if run.lr != 0.0 && (run.lr as f32) == 0.0 {
        return bad(format!("the learning rate {:e} is 0 in f32, the precision the step computes in", run.lr));
    }
    if let Some(b) = run.flops_budget
        && !(b.is_finite() && b > 0.0)
    {
        return bad(format!("the FLOPs budget {b} is not a finite positive number"));
    }
    if let Some(s) = run.data.feature_scale
        && !(s.is_finite() && s > 0.0)
    {
        return bad(format!("--feature-scale {s}: the features are divided by it: a finite positive number"));
    }
    if run.early_stop == Some(0) {
        return bad(
            "--early-stop 0: the patience is a count of epochs without a better held-out loss, 1 or more".into()
        );
    }
    if let LrSchedule::Cosine { min_factor, .. } | LrSchedule::Wsd { min_factor, .. } = run.lr_schedule
        && !(0.0..=1.0).contains(&min_factor)
    {
        let name = if matches!(run.lr_schedule, LrSchedule::Wsd { .. }) { "wsd" } else { "cosine" };
        return bad(format!("the {name} schedule's minimum factor {min_factor} is not in [0, 1]"));
    }
    if let LrSchedule::Wsd { decay_fraction, .. } = run.lr_schedule
        && !(decay_fraction > 0.0 && decay_fraction <= 1.0)
    {
        return bad(format!("the wsd schedule's decay fraction {decay_fraction} is not in (0, 1]"));
    }
    if let LrSchedule::Wsd { decay_steps: Some(0), .. } = run.lr_schedule {
        return bad("the wsd schedule's decay takes at least 1 step".into());
    }
    check_optimizer_settings(options.momentum, options.weight_decay, options.betas, options.clip_norm)
        .map_err(TrainError::Input)?;
    if run.epochs > MAX_EPOCHS {
        return bad(format!("{} epochs: at most {MAX_EPOCHS} (--flops-budget ends a run by its compute)", run.epochs));
    }
    if run.resume && run.checkpoint_dir.is_none() && run.resume_from.is_none() {
        return bad("resuming needs a checkpoint directory".into());
    }
    if run.profile.is_some() && run.profile_steps == 0 {
        return bad("a profile of 0 steps".into());
    }
    Ok(())
}

/// The optimizer's settings in range (the same checks for `aicf train`,
/// `bench` and `compile`): momentum in [0, 1), weight decay at least 0,
/// betas in [0, 1), a clipping norm positive.
pub fn check_optimizer_settings(
    momentum: f64,
    weight_decay: f64,
    (b1, b2): (f64, f64),
    clip_norm: Option<f64>,
) -> std::result::Result<(), String> {
    if !momentum.is_finite() || !(0.0..1.0).contains(&momentum) {
        return Err(format!("the momentum {momentum} is not in [0, 1)"));
    }
    // The step computes in f32: a setting just under 1 that rounds to 1
    // there is refused here, by its flag's name, not by the optimizer pass
    // with the rounded value.
    if momentum as f32 >= 1.0 {
        return Err(format!(
            "the momentum {momentum} is 1 in f32, the precision the step computes in (at most 0.99999994)"
        ));
    }
    if !weight_decay.is_finite() || weight_decay < 0.0 {
        return Err(format!("the weight decay {weight_decay} is not a number of at least 0"));
    }
    if (weight_decay as f32).is_infinite() {
        return Err(format!(
            "the weight decay {} is infinite in f32, the precision the step computes in",
            short(weight_decay)
        ));
    }
    if !(0.0..1.0).contains(&b1) || !(0.0..1.0).contains(&b2) {
        return Err(format!("the betas {b1}, {b2} are not both in [0, 1)"));
    }
    if let Some(b) = [b1, b2].into_iter().find(|&b| b as f32 >= 1.0) {
        return Err(format!("the beta {b} is 1 in f32, the precision the step computes in (at most 0.99999994)"));
    }
    if let Some(c) = clip_norm
        && !(c.is_finite() && c > 0.0)
    {
        return Err(format!("the gradient clipping norm {c} is not a positive number"));
    }
    Ok(())
}

/// Adam's eps for `optimizer`: a positive number f32 holds, and PyTorch's
/// 1e-8 (the default) for SGD, which has none.
pub fn check_eps(optimizer: &str, eps: f64) -> std::result::Result<(), String> {
    if !(eps.is_finite() && eps > 0.0) {
        return Err(format!("Adam's eps {eps} is not a positive number"));
    }
    if (eps as f32) == 0.0 {
        return Err(format!("Adam's eps {eps:e} is 0 in f32, the precision the step computes in"));
    }
    if optimizer == "sgd" && eps != 1e-8 {
        return Err(format!("eps {eps:e} is Adam's and AdamW's; SGD has none"));
    }
    Ok(())
}

/// Whether parameters of one dimension or none take weight decay
/// (`decay_1d`): false asks for nanoGPT's groups, which mean something
/// only with a weight decay.
pub fn check_groups(decay_1d: bool, weight_decay: f64) -> std::result::Result<(), String> {
    if !decay_1d && weight_decay == 0.0 {
        return Err("weight decay kept off biases and norm weights changes nothing without a weight decay: give \
                    one too (0.1, as nanoGPT)"
            .into());
    }
    Ok(())
}

/// Whether `optimizer`'s weight decay alone makes the weights grow: SGD's
/// (L2, in the gradient) and AdamW's (decoupled) multiply each weight by
/// `1 - lr * decay` per step, above 1 in size once `lr * decay > 2`.
/// Adam's L2 term is normalised with the gradient, so no product of the
/// two settings does that.
pub fn decay_overshoots(optimizer: &str, lr: f64, decay: f64) -> bool {
    matches!(optimizer, "sgd" | "adamw") && lr * decay > 2.0
}

/// `x` as a person writes it: to 7 significant digits, plainly between
/// 1e-4 and 1e6, else with an exponent (1e300 printed plainly is 301
/// digits; 1e300 * 0.003 is 3.0000000000000003e297).
pub fn short(x: f64) -> String {
    let x: f64 = format!("{x:.6e}").parse().unwrap_or(x);
    if x == 0.0 || (1e-4..1e6).contains(&x.abs()) { x.to_string() } else { format!("{x:e}") }
}

/// The most epochs a run may ask for (the step and progress arithmetic
/// stays far from overflow).
const MAX_EPOCHS: usize = 1_000_000_000;

/// Whether checkpoint `from` is one of checkpoint directory `dir`'s (a run
/// resumed from it replays in place; from elsewhere, it is a fork).
fn in_place(from: &Path, dir: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let from_dir = from.parent().map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d });
    from_dir.is_some_and(|from_dir| canonical(from_dir).is_some_and(|d| Some(d) == canonical(dir)))
}

/// Locks the checkpoint directories that the checkpoint directory `dir`'s
/// files link into: a save writes through a link to the file it names, so
/// a `last.safetensors` linked into another run's checkpoint directory
/// wrote there past that directory's lock (two runs saved one checkpoint
/// at once). Each with a `.lock` (a checkpoint directory's) is locked as
/// `dir` is, held as long as the returned files; one another run holds is
/// refused.
fn lock_link_targets(dir: &Path) -> Result<Vec<std::fs::File>> {
    let (Ok(listing), Ok(own)) = (std::fs::read_dir(dir), std::fs::canonicalize(dir)) else { return Ok(Vec::new()) };
    let mut targets: Vec<(PathBuf, PathBuf)> = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.ends_with(".safetensors") || name.ends_with(".mlir"))
            || !entry.file_type().is_ok_and(|t| t.is_symlink())
        {
            continue;
        }
        let target = aicf_runtime::checkpoint::through_links(&entry.path());
        if let Some(there) = target.parent().and_then(|p| std::fs::canonicalize(p).ok())
            && there != own
            && !targets.iter().any(|(t, _)| *t == there)
        {
            targets.push((there, entry.path()));
        }
    }
    let mut locks = Vec::new();
    for (there, link) in targets {
        // (Only a checkpoint directory has one: plain storage that several
        // runs link into is not locked, nor given a file.)
        let Ok(lock) = std::fs::OpenOptions::new().write(true).open(there.join(".lock")) else { continue };
        if let Err(std::fs::TryLockError::WouldBlock) = try_lock_briefly(&lock) {
            return Err(TrainError::Io {
                path: link,
                message: format!(
                    "links into {}, where another run is writing its checkpoints: this run's saves would write \
                     there too; replace the link with a copy of the file it names, or give another --checkpoint-dir",
                    there.display()
                ),
            });
        }
        locks.push(lock);
    }
    Ok(locks)
}

/// Locks checkpoint directory `dir` for this run (`dir/.lock`, released
/// when the returned file closes, also when the process is killed), and
/// refuses to write over checkpoints it holds (`last.safetensors`, or any
/// model version's `v<k>.safetensors`) unless the run continues from one
/// of them (`resume_from` inside `dir`, a run of `epochs` epochs that
/// reaches the latest): a fresh run, or one resumed from a checkpoint
/// elsewhere (a fork), needs a directory of its own. Returns the lock and,
/// for a replay in place (resumed from an earlier checkpoint here), the
/// epoch of the directory's latest checkpoint.
fn claim_checkpoint_dir(
    dir: &Path,
    resume_from: Option<&Path>,
    epochs: usize,
) -> Result<(std::fs::File, Option<usize>)> {
    let io = |path: &Path, message: String| TrainError::Io { path: path.to_path_buf(), message };
    let path = dir.join(".lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io(&path, unwritable(e, "the checkpoints", "--checkpoint-dir")))?;
    match try_lock_briefly(&lock) {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(io(
                dir,
                "another run is writing its checkpoints here; give this one another --checkpoint-dir".into(),
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(&path, format!("cannot lock it: {e}"))),
    }
    // A lock file left by an earlier run opens in a directory where no new
    // file can be made (read-only or immutable since): tried here, before
    // any training, as the checkpoints will be (each a new file renamed).
    let probe = dir.join(format!(".probe.{}.tmp", std::process::id()));
    std::fs::File::create(&probe).map_err(|e| io(dir, unwritable(e, "the checkpoints", "--checkpoint-dir")))?;
    let _ = std::fs::remove_file(&probe);
    if resume_from.is_some_and(|from| in_place(from, dir)) {
        // Resumed from an earlier checkpoint of this directory, the run
        // replays the epochs after it (the same options and policy, so the
        // same checkpoints again); one that ends before this directory's
        // latest checkpoint would leave an earlier one in its place: a good
        // checkpoint lost, silently.
        // (Earlier by its step: two checkpoints inside one epoch, a stop's,
        // are of one epoch; by the epoch where a checkpoint has no step.)
        let at = |p: &Path| -> Option<(usize, Option<u64>)> {
            let meta = aicf_runtime::checkpoint::read_metadata(p).ok()?;
            let epoch = meta.get("epoch").and_then(|s| s.parse().ok())?;
            Some((epoch, meta.get("step").and_then(|s| s.parse().ok())))
        };
        let last = at(&dir.join("last.safetensors"));
        let earlier = |from: (usize, Option<u64>), held: (usize, Option<u64>)| match (from.1, held.1) {
            (Some(a), Some(b)) => a < b,
            _ => from.0 < held.0,
        };
        let replay = resume_from
            .and_then(|from| last.filter(|&h| at(from).is_some_and(|f| earlier(f, h))))
            .map(|(epoch, _)| epoch);
        if let (Some(from), Some(held)) = (resume_from, replay)
            && held > epochs
        {
            return Err(io(
                dir,
                format!(
                    "holds this run's later checkpoint last.safetensors (epoch {held}): replayed from {} to epoch \
                     {epochs}, the run would leave an earlier one in its place; give --epochs {held} or more, \
                     --resume to continue the latest, or another --checkpoint-dir (a fork)",
                    from.display()
                ),
            ));
        }
        return Ok((lock, replay));
    }
    if let Some(held) = held_checkpoint(dir) {
        let epoch = aicf_runtime::checkpoint::read_metadata(&held)
            .ok()
            .and_then(|m| m.get("epoch").cloned())
            .map_or(String::new(), |e| format!(" (epoch {e})"));
        let name = held.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let what = if name == "last.safetensors" { String::new() } else { format!(", {name}") };
        let continues = if name == PREVIOUS || name == BEST {
            format!("--resume-from {} continues it", held.display())
        } else {
            "--resume continues it".to_string()
        };
        let message = match resume_from {
            None => format!(
                "holds an earlier run's checkpoint{epoch}{what}: {continues}; a fresh run needs another \
                 --checkpoint-dir (or this one emptied)"
            ),
            Some(from) => format!(
                "holds an earlier run's checkpoint{epoch}{what}: a run resumed from {} writes its checkpoints into \
                 another --checkpoint-dir (a new or empty one); {continues}",
                from.display()
            ),
        };
        return Err(io(dir, message));
    }
    Ok((lock, None))
}

/// Locks the policy's directory of pre-rewrite checkpoints for this run
/// (as [`claim_checkpoint_dir`]), and refuses one that holds another run's
/// `before-rewrite-<k>.safetensors` unless this run resumes.
fn claim_rewrites_dir(dir: &Path, resuming: bool) -> Result<std::fs::File> {
    let (lock, _) = claim_checkpoint_dir(dir, None, 0).map_err(|e| match e {
        // Its own message for a directory that is also another run's
        // checkpoint directory.
        // (Its remedy names the policy's setting, not --checkpoint-dir.)
        TrainError::Io { path, message } => TrainError::Io {
            path,
            message: format!(
                "the policy's checkpoint_dir: {}",
                message.replace("give --checkpoint-dir a writable", "give the policy's checkpoint_dir a writable")
            ),
        },
        other => other,
    })?;
    let held = std::fs::read_dir(dir).ok().and_then(|entries| {
        entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| numbered(n, "before-rewrite-", ".safetensors"))
    });
    if let (Some(name), false) = (held, resuming) {
        return Err(TrainError::Io {
            path: dir.to_path_buf(),
            message: format!(
                "the policy's checkpoint_dir holds another run's pre-rewrite checkpoints ({name}): give this run's \
                 policy another checkpoint_dir, or empty this one"
            ),
        });
    }
    Ok(lock)
}

/// Locks run directory `dir` for this run (`dir/.run.lock`, released when
/// the returned file closes, also when the process is killed): a second
/// run into it would write its metrics and plot over this one's.
fn claim_run_dir(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(".run.lock");
    let io = |message: String| TrainError::Io { path: path.clone(), message };
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io(unwritable(e, "the run's files", "--out")))?;
    match try_lock_briefly(&lock) {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(TrainError::Io {
            path: dir.to_path_buf(),
            message: "another run is writing its metrics here; give this one another --out".into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io(format!("cannot lock it: {e}"))),
    }
}

/// Whether file name `name` is `<prefix><k><suffix>` for a number `k`.
fn numbered(name: &str, prefix: &str, suffix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|r| r.strip_suffix(suffix))
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// The checkpoint a run left in `dir`, if any: `last.safetensors`, or else
/// a model version's `v<k>.safetensors` (the first by name).
fn held_checkpoint(dir: &Path) -> Option<PathBuf> {
    let last = dir.join("last.safetensors");
    if last.exists() {
        return Some(last);
    }
    // (Left alone where last was removed: a fresh run replaced it.)
    let previous = dir.join(PREVIOUS);
    if previous.exists() {
        return Some(previous);
    }
    let best = dir.join(BEST);
    if best.exists() {
        return Some(best);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| numbered(n, "v", ".safetensors")))
        .collect();
    versions.sort();
    versions.into_iter().next()
}

/// The options a checkpoint records, which a resume must match: the
/// model (its canonical IR hash), the optimizer and its settings, the
/// seed, the split and the data (each file's name and content hash).
/// The data files as a checkpoint records them: each one's name and the
/// hash of its bytes.
pub(crate) fn data_record(data: &[PathBuf]) -> Result<String> {
    hashed_record(data, content_hash)
}

/// `name (hash), ...` of `data` by `hash`.
fn hashed_record(data: &[PathBuf], hash: fn(&Path) -> std::io::Result<String>) -> Result<String> {
    let mut files = Vec::new();
    for p in data {
        let hash = hash(p).map_err(|e| TrainError::Io { path: p.clone(), message: e.to_string() })?;
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        files.push(format!("{name} ({hash})"));
    }
    Ok(files.join(", "))
}

/// The hash of what a data file holds: a gzipped file's decompressed bytes
/// (the same table decompressed, or compressed again with another header,
/// is the same data; `aicf eval` scored the training rows of a
/// decompressed copy as other data), any other file's bytes.
fn content_hash(path: &Path) -> std::io::Result<String> {
    // An image folder: its files' paths and bytes.
    if path.is_dir() {
        return super::data::images::folder_hash(path);
    }
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz")) {
        let file = std::fs::File::open(path)?;
        match aicf_runtime::artifact::reader_hash(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file))) {
            Ok(hash) => return Ok(hash),
            // Damaged gzip data is the loader's to name (where it breaks);
            // its record is its bytes.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound && e.kind() != std::io::ErrorKind::PermissionDenied => {}
            Err(e) => return Err(e),
        }
    }
    aicf_runtime::artifact::file_hash(path)
}

/// Whether `saved` (a checkpoint's [`data_record`]) names `data`: by
/// content, or by the files' own bytes as records before content hashes
/// named a gzipped file.
pub(crate) fn records_data(saved: &str, data: &[PathBuf]) -> Result<bool> {
    Ok(same_data(saved, &data_record(data)?) || records_bytes(saved, data)?)
}

/// Whether `saved` names `data` by the files' own bytes (a record written
/// before content hashes).
fn records_bytes(saved: &str, data: &[PathBuf]) -> Result<bool> {
    // (An image folder was recorded by its contents from the first.)
    if data.iter().any(|p| p.is_dir()) {
        return Ok(false);
    }
    Ok(same_data(saved, &hashed_record(data, aicf_runtime::artifact::file_hash)?))
}

/// Whether two [`data_record`]s name the same data: the same files' bytes
/// in the same order, whatever the files are called now.
pub(crate) fn same_data(a: &str, b: &str) -> bool {
    data_hashes(a) == data_hashes(b)
}

/// The file names of a [`data_record`], without the hashes.
pub(crate) fn data_names(record: &str) -> Vec<String> {
    record.split("), ").map(|e| e.rsplit_once(" (").map_or(e, |(name, _)| name).to_string()).collect()
}

/// The hashes of a [`data_record`] (`name (hash), name (hash)`: what is in
/// parentheses at each entry's end), without the names.
pub(crate) fn data_hashes(record: &str) -> String {
    record.split("), ").map(|e| e.trim_end_matches(')').rsplit(" (").next().unwrap_or("")).collect::<Vec<_>>().join(",")
}

fn recorded(
    options: &Options,
    run: &RunOptions,
    data: &[PathBuf],
    model_hash: &str,
) -> Result<Vec<(&'static str, String)>> {
    let mut record = vec![
        ("model", model_hash.to_string()),
        ("optimizer", options.optimizer.clone()),
        ("lr", run.lr.to_string()),
        ("momentum", options.momentum.to_string()),
        ("nesterov", options.nesterov.to_string()),
        ("weight_decay", options.weight_decay.to_string()),
        ("betas", format!("{},{}", options.betas.0, options.betas.1)),
        ("eps", format!("{:e}", options.eps)),
        ("decay_1d", options.decay_1d.to_string()),
        ("clip_norm", options.clip_norm.map_or("none".into(), |c| c.to_string())),
        // An fp16 run's loss scale lives in its checkpoint: another
        // precision would drop it, or start without one.
        ("precision", options.precision.name().to_string()),
        ("seed", run.seed.to_string()),
        ("val_split", run.data.val_split.to_string()),
        ("data", data_record(data)?),
        ("augment", run.data.augment.describe()),
    ];
    record.push(("lr_schedule", run.lr_schedule.describe()));
    Ok(record)
}

/// Checkpoint metadata: the model's IR (the checkpoint and the model it
/// belongs to are one file).
pub const IR_KEY: &str = "aicf.ir";
/// Checkpoint metadata: the model version (0: the model the run started
/// with; each accepted rewrite a new one) and the hash of every version's
/// IR.
const VERSION_KEY: &str = "aicf.model_version";
pub(crate) const VERSIONS_KEY: &str = "aicf.versions";
/// Checkpoint metadata: the `--epochs` of the run that saved it (what its
/// learning-rate schedule spanned).
const SCHEDULE_EPOCHS_KEY: &str = "schedule_epochs";
/// Checkpoint metadata: the `--flops-budget` of the run that saved it
/// (`none`), which a decaying schedule's length was sized to.
const SCHEDULE_BUDGET_KEY: &str = "schedule_flops_budget";
/// Checkpoint metadata: an adaptive run's [`super::adapt::Snapshot`].
const ADAPT_KEY: &str = "aicf.adapt";
/// Checkpoint metadata: the run registry's row of the run that saved it
/// (`<registry file>#<id>`): a resumed run continues that row.
const REGISTRY_RUN_KEY: &str = "registry_run";
/// That row's identity ([`super::registry::Runs::identity_of`]): a row of
/// its id of another identity is another run's.
const REGISTRY_IDENTITY_KEY: &str = "registry_run_identity";
/// The training FLOPs a checkpoint's run had spent.
const FLOPS_KEY: &str = "train_flops";
/// The rows a step of the checkpoint's run took (batch x micro-batches x
/// replicas).
const GLOBAL_BATCH_KEY: &str = "global_batch";
/// The schedule's step less the optimizer's (absent: 0), where a run
/// resumed at another global batch moved it.
const SCHEDULE_SHIFT_KEY: &str = "schedule_shift";
const ACCUMULATE_KEY: &str = "accumulate";
/// The GEMM candidate a run forced on every GEMM (`--gemm`; absent: the
/// registry's measured choices, which the checkpoint records apart): a
/// resume without the flag goes on with it, so that its bits are an
/// uninterrupted run's.
pub const GEMM_KEY: &str = "gemm";
/// The `--save-every` of the run that saved a checkpoint.
pub const SAVE_EVERY_KEY: &str = "save_every";
/// Its `--log-every` and `--eval-every` (a bare resume logs as it did).
pub const LOG_EVERY_KEY: &str = "log_every";
pub const EVAL_EVERY_KEY: &str = "eval_every";
/// The files a run writes in its run directory (`--out`).
const OWN_FILES: [&str; 4] = ["metrics.jsonl", "plot.svg", "decisions.jsonl", STEPS_FILE];
/// The logged steps' records (`--log-every`, `--eval-every`).
pub const STEPS_FILE: &str = "steps.jsonl";

/// The micro-batches a step of `checkpoint`'s run took (`--accumulate`;
/// `None` where its record has none, a checkpoint of before 2026-12-05):
/// what `aicf train --resume` goes on with unless given another, as it goes
/// on in the checkpoint's precision.
pub fn trained_accumulate(checkpoint: &Path) -> Result<Option<usize>> {
    let meta = aicf_runtime::checkpoint::read_metadata(checkpoint)?;
    meta.get(ACCUMULATE_KEY)
        .map(|v| {
            v.parse::<usize>().ok().filter(|&m| m >= 1).ok_or_else(|| TrainError::Io {
                path: checkpoint.to_path_buf(),
                message: format!(
                    "its record's {ACCUMULATE_KEY} {v:?} is not a count of micro-batches (give --accumulate N to \
                     resume)"
                ),
            })
        })
        .transpose()
}
/// Checkpoint entries: the state of the model a watched rewrite replaced.
const KEPT_PREFIX: &str = "aicf.kept/";
/// The longest the replicas of a data-parallel run wait for rank 0 to
/// compile the model before they start (a step's collectives wait the
/// communicator's timeout).
const COMPILE_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// A step's loss over this many times the run's first loss (at least 1) is
/// divergence: the run stops before a checkpoint could take the state.
pub const DIVERGENCE_FACTOR: f64 = 1e4;

/// Trains the model in `model` on `data` by `run`, compiled and run by
/// `options`. The summary holds one record per epoch trained: none for
/// `epochs: 0`, or a resume with none left.
pub fn fit(
    model: &Path,
    options: &Options,
    data: &[PathBuf],
    run: &RunOptions,
    report: &mut dyn Report,
) -> Result<Summary> {
    // A checkpoint directory this run made, and left holding nothing (it
    // failed before its first save: a checkpoint that does not read, a
    // model that does not compile), is removed with it.
    let made = run.checkpoint_dir.as_ref().filter(|d| std::fs::symlink_metadata(d).is_err()).cloned();
    let result = fit_run(model, options, data, run, report);
    if result.is_err()
        && let Some(dir) = made
    {
        remove_if_unused(&dir);
    }
    result
}

/// Removes `dir` where it holds no more than its lock, which no one holds.
fn remove_if_unused(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    if !entries.flatten().all(|e| e.file_name() == ".lock") {
        return;
    }
    let lock = dir.join(".lock");
    if let Ok(file) = std::fs::File::open(&lock) {
        if file.try_lock().is_err() {
            return;
        }
        let _ = std::fs::remove_file(&lock);
    }
    let _ = std::fs::remove_dir(dir);
}

fn fit_run(
    model: &Path,
    options: &Options,
    data: &[PathBuf],
    run: &RunOptions,
    report: &mut dyn Report,
) -> Result<Summary> {
    check_options(options, run)?;
    aicf_runtime::check_device(&options.device)?;
    // Data files are read whole (and hashed for the checkpoint's record): a
    // device such as /dev/zero would never end. The model, the policy and
    // the checkpoint resumed from are read twice (hashed, then parsed): a
    // pipe's second read is empty (a policy without rules, silently).
    let inputs = std::iter::once(model).chain(data.iter().map(PathBuf::as_path));
    for p in inputs.chain(run.adapt.as_deref()).chain(run.resume_from.as_deref()) {
        super::refuse_special_file(p).map_err(|message| TrainError::Io { path: p.to_path_buf(), message })?;
    }
    // Where the run writes is checked before anything is compiled or
    // trained. Rank 0 reads the checkpoint a run resumes from (the other
    // replicas get it from rank 0, on any file system).
    let first_rank = run.data_parallel.as_ref().is_none_or(|c| c.rank() == 0);
    // A checkpoint's place taken by something else than a file (a
    // directory): said as it is (--resume said there was no checkpoint, a
    // fresh run that the directory held one to --resume).
    if let Some(dir) = &run.checkpoint_dir {
        let last = dir.join("last.safetensors");
        if last.exists() && !last.is_file() {
            return Err(TrainError::Io {
                path: last,
                message: "is not a file (a directory?), where the checkpoint directory's checkpoint goes: move it \
                          away, or give another --checkpoint-dir"
                    .into(),
            });
        }
    }
    if let (true, true, None, Some(dir)) = (first_rank, run.resume, &run.resume_from, &run.checkpoint_dir)
        && !dir.join("last.safetensors").is_file()
    {
        let busy = directory_busy(dir);
        let held = latest_checkpoint_left(dir);
        let message = if busy {
            "no checkpoint yet: another run is writing this directory and has not saved its first (resume once it \
             has, or stopped)"
                .to_string()
        } else if let Some((previous, epoch)) = held {
            // (A last removed, or never renamed into place: the one before
            // is there, and a version's, which may be the last's own.)
            format!("not here; {} holds epoch {epoch}: --resume-from it goes on from there", previous.display())
        } else {
            "no checkpoint to resume from (train without --resume to start one)".to_string()
        };
        return Err(TrainError::Io { path: dir.join("last.safetensors"), message });
    }
    if let Some(dir) = &run.checkpoint_dir {
        create_flag_dir(dir, "--checkpoint-dir")?;
    }
    if let Some(profile) = &run.profile {
        super::refuse_overwriting_all_but_traces(profile, "the profile")
            .map_err(|message| TrainError::Io { path: profile.clone(), message })?;
        if profile.is_dir() {
            return Err(TrainError::Io { path: profile.clone(), message: "is a directory, not a file".into() });
        }
        if let Some(dir) = profile.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_dir(dir)?;
        }
        // Nor a file this run writes itself (it replaced the final
        // checkpoint, or the metrics the run then named).
        let own = OWN_FILES.iter().any(|f| super::same_path(profile, &run.out.join(f)));
        let folder = profile.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let in_checkpoints = run.checkpoint_dir.as_ref().is_some_and(|d| super::same_path(folder, d));
        if own || in_checkpoints {
            return Err(TrainError::Io {
                path: profile.clone(),
                message: format!(
                    "the profile would overwrite {} this run writes; give another file",
                    if own {
                        "a file of the run directory (--out) that"
                    } else {
                        "the checkpoint directory's files, which"
                    }
                ),
            });
        }
    }
    // The run directory's own files are written where they are: a link
    // there was written through (metrics.jsonl linked to a checkpoint
    // replaced the checkpoint with the metrics).
    for own in OWN_FILES {
        let path = run.out.join(own);
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        // (Anything else not a file is refused below, where it is written.)
        if !meta.file_type().is_symlink() {
            continue;
        }
        return Err(TrainError::Io {
            message: format!(
                "is a symbolic link (to {}): the run writes its {own} here, and would write through it; remove it, or \
                 give another --out",
                std::fs::read_link(&path).unwrap_or_default().display()
            ),
            path,
        });
    }
    if let Some(db) = run.runs_db.as_ref().filter(|_| first_rank) {
        refuse_registry_over_run_files(db, model, data, run)?;
    }
    let name = model.display().to_string();
    let original = super::read_model(model)?;
    let model_hash = crate::pipeline::model_hash(&original, &name)?;
    let mut record = recorded(options, run, data, &model_hash)?;
    // An adaptive run records its policy (a resume with another one would
    // replay other decisions); a run without one takes any checkpoint's.
    if let Some(policy) = &run.adapt {
        let hash = aicf_runtime::artifact::file_hash(policy)
            .map_err(|e| TrainError::Io { path: policy.clone(), message: e.to_string() })?;
        record.push(("policy", hash));
    }
    let checkpoint = run.checkpoint_dir.as_ref().map(|d| d.join("last.safetensors"));
    if run.resume_from.is_some() && run.checkpoint_dir.is_none() {
        report.note(
            "--resume-from without --checkpoint-dir: the epochs trained from the checkpoint are saved nowhere \
             (add --checkpoint-dir to keep them)",
        );
    }
    let resume_from = run.resume_from.clone().or_else(|| if run.resume { checkpoint.clone() } else { None });
    // Data parallel: rank 0's run directory is the run's; every other
    // replica compiles into its own below it, and resumes from rank 0's
    // checkpoint, sent to it (no file system need be shared).
    let comm = run.data_parallel.clone().filter(|c| c.size() > 1);
    let rank = comm.as_ref().map_or(0, |c| c.rank());
    // Replicas started by hand (`mpirun ... aicf train --data-parallel`,
    // across machines) must run one command on one data set: checked
    // before any collective (ranks of other bucket sizes failed inside MPI;
    // of other data or rates, trained apart without a word).
    if let Some(c) = &comm {
        check_replicas_agree(c.as_ref(), &replica_settings(options, run, &record))?;
    }
    let own_dir = if rank == 0 { run.out.clone() } else { run.out.join(format!("rank{rank}")) };
    // One run at a time writes a checkpoint directory, and a fresh run
    // never writes over another run's checkpoints (rank 0 writes them).
    let (_lock, replay_until) = match (&run.checkpoint_dir, rank) {
        (Some(dir), 0) => {
            let (lock, replay) = claim_checkpoint_dir(dir, resume_from.as_deref(), run.epochs)?;
            (Some(lock), replay)
        }
        _ => (None, None),
    };
    let _link_locks = match &_lock {
        Some(_) => lock_link_targets(run.checkpoint_dir.as_deref().unwrap_or(Path::new(".")))?,
        None => Vec::new(),
    };
    let resume_from = match (&comm, resume_from) {
        (Some(c), Some(path)) => Some(share_checkpoint(c.as_ref(), &path, &own_dir)?),
        (_, other) => other,
    };
    let policy = match &run.adapt {
        Some(path) => Policy::from_file(path)?,
        None => Policy { observe_every: 0, ..Policy::default() },
    };
    // The policy's directory of pre-rewrite checkpoints is this run's too:
    // locked, and not another run's (unless it is the checkpoint
    // directory, claimed above).
    let _rewrites_lock = match (&policy.checkpoint_dir, rank) {
        (Some(dir), 0)
            if run
                .checkpoint_dir
                .as_ref()
                .is_none_or(|c| std::fs::canonicalize(c).ok() != std::fs::canonicalize(dir).ok()) =>
        {
            // (Said as the policy's: the path alone named no file or field.)
            make_dir(dir).map_err(|message| TrainError::Io {
                path: dir.to_path_buf(),
                message: format!(
                    "{message} (the policy's checkpoint_dir{})",
                    run.adapt.as_ref().map_or(String::new(), |p| format!(", in {}", p.display()))
                ),
            })?;
            Some(claim_rewrites_dir(dir, resume_from.is_some())?)
        }
        _ => None,
    };
    // A resume checks the checkpoint's record of the run before compiling,
    // and trains the model the checkpoint holds (an adaptive run's grown
    // one), written to the run directory for its diagnostics.
    // A rate as the flag takes it (1e30, not thirty digits).
    let shown = |key: &str, v: &str| -> String {
        match (key, v.parse::<f64>()) {
            ("lr", Ok(r)) => super::rate_text(r),
            _ => v.to_string(),
        }
    };
    // What this run trains otherwise than the checkpoint's run did (a
    // replay in place must not: it would replace the directory's later
    // checkpoints with others).
    let mut changed: Vec<String> = Vec::new();
    // Whether the held-out part's change was said (once for a seed and a
    // fraction changed together).
    let mut said_redrawn = false;
    // Whether the checkpoint's model goes on at another batch (its IR hash
    // is then the other batch's).
    let mut other_batch = false;
    let (source, model_file, resume) = match &resume_from {
        Some(path) => {
            let meta = aicf_runtime::checkpoint::read_metadata(path)?;
            let mut other_model = false;
            // The batch the checkpoint's model trained at, where this run
            // gives the same model at another (--batch): its model goes on
            // at this run's batch, as another --accumulate does.
            let mut rebatch_from = None;
            // Every setting the resume differs in, said at once (each was
            // refused alone, fixed one rerun at a time).
            let mut refusals: Vec<String> = Vec::new();
            // A checkpoint from before a setting was recorded trained
            // without it (Nesterov: off; a resume with --nesterov switched
            // its optimizer silently).
            let unrecorded = |key: &str| match key {
                "nesterov" => Some("false"),
                "eps" => Some("1e-8"),
                "decay_1d" => Some("true"),
                "augment" => Some("none"),
                _ => None,
            };
            for (key, value) in &record {
                if let Some(saved) = meta.get(*key).map(String::as_str).or_else(|| unrecorded(key))
                    && saved != value
                    && !(*key == "data" && (same_data(saved, value) || records_bytes(saved, data)?))
                {
                    // The file given may be the model the checkpoint holds
                    // (an adaptive run's model.mlir, grown): said so.
                    let holds = *key == "model"
                        && meta
                            .get(IR_KEY)
                            .and_then(|ir| crate::pipeline::model_hash(ir, &name).ok())
                            .is_some_and(|h| h == *value);
                    let message = if holds {
                        let first = path.with_file_name("model-v0.mlir");
                        format!(
                            "{}: {} is the model this checkpoint holds (grown by its run's policy), not the one its \
                             run started from (IR hash {saved}); resume with the run's first model{} (the checkpoint \
                             carries the growth)",
                            path.display(),
                            model.display(),
                            if first.is_file() { format!(", {}", first.display()) } else { String::new() }
                        )
                    } else if *key == "model"
                        && let Some(batch) = meta
                            .get(IR_KEY)
                            .and_then(|ir| crate::pipeline::checkpoint_batch(&original, ir, Some(saved), &name))
                    {
                        // The parameters and optimizer state do not depend on
                        // the batch: the checkpoint's model goes on at this
                        // run's (a step then takes other rows: said below,
                        // with the global batch).
                        rebatch_from = Some(batch);
                        other_batch = true;
                        continue;
                    } else if *key == "model" {
                        // The run's own first model beside it (an ONNX
                        // model an earlier AICF imported otherwise: the
                        // same file, another IR) is named.
                        let first = path.with_file_name("model-v0.mlir");
                        let own = std::fs::read_to_string(&first).is_ok_and(|t| {
                            crate::pipeline::model_hash(&t, &first.display().to_string()).ok().as_deref() == Some(saved)
                        });
                        format!(
                            "{}: the checkpoint is of another model (IR hash {saved}, this model's is {value}){}",
                            path.display(),
                            if own {
                                // (An ONNX model an earlier AICF imported
                                // otherwise, an edited file, another
                                // --ignore-index: the file names it all.)
                                format!("; {} is the model its run started from: give that", first.display())
                            } else {
                                String::new()
                            }
                        )
                    } else if *key == "policy" {
                        format!(
                            "{}: the checkpoint's run grew by another policy (file hash {saved}) than {} (hash \
                             {value}): its decisions would replay differently",
                            path.display(),
                            run.adapt.as_ref().map_or_else(|| "this run's".into(), |p| p.display().to_string())
                        )
                    } else if *key == "decay_1d" {
                        // (Said as the flag is, not by the record's key.)
                        let groups = |v: &str| {
                            if v == "false" {
                                "no weight decay on biases and norm weights (--no-decay-1d)"
                            } else {
                                "weight decay on every parameter"
                            }
                        };
                        format!(
                            "{}: the checkpoint was trained with {}; this run asks for {}",
                            path.display(),
                            groups(saved),
                            groups(value)
                        )
                    } else {
                        format!(
                            "{}: the checkpoint was trained with {key} {}; this run asks for {}",
                            path.display(),
                            shown(key, saved),
                            shown(key, value)
                        )
                    };
                    // Another precision given: parameters and optimizer
                    // state are f32 in every one, so they carry whole; only
                    // fp16's loss scale is the precision's own. It went on
                    // only with --override-resume, which also lets the
                    // rate, the model and the data differ.
                    if *key == "precision" {
                        let scale = if value == "fp16" {
                            "; fp16's loss scale starts at 65536"
                        } else if saved == "fp16" {
                            "; the checkpoint's fp16 loss scale is dropped"
                        } else {
                            ""
                        };
                        report.note(&format!(
                            "{message}: going on in {value} (the parameters and optimizer state are f32 in every \
                             precision and carry as they are{scale}; --precision {saved} resumes as it trained)"
                        ));
                        changed.push(format!("precision ({saved}, now {value})"));
                        continue;
                    }
                    if !run.override_resume {
                        // A setting of the command line: the flag that
                        // resumes as the checkpoint trained, named too.
                        let flag = match *key {
                            "optimizer" | "lr" | "momentum" | "weight_decay" | "precision" | "seed" | "val_split" => {
                                Some(key.replace('_', "-"))
                            }
                            "clip_norm" if saved != "none" => Some("clip-norm".into()),
                            _ => None,
                        };
                        refusals.push(match flag {
                            // A switch: given or not.
                            _ if *key == "nesterov" => format!(
                                "{message} ({} resumes as it trained; --override-resume goes on anyway)",
                                if saved == "true" { "--nesterov" } else { "leaving out --nesterov" }
                            ),
                            _ if *key == "decay_1d" => format!(
                                "{message} ({} resumes as it trained; --override-resume goes on anyway)",
                                if saved == "false" { "--no-decay-1d" } else { "leaving out --no-decay-1d" }
                            ),
                            _ if *key == "eps" => format!(
                                "{message} (--adam-eps {saved} resumes as it trained; --override-resume goes on \
                                 anyway)"
                            ),
                            Some(flag) => format!(
                                "{message} (--{flag} {} resumes as it trained; --override-resume goes on anyway)",
                                shown(key, saved)
                            ),
                            None => format!("{message} (--override-resume goes on anyway)"),
                        });
                        continue;
                    }
                    let with = if *key == "model" {
                        other_model = !holds;
                        format!(" with the checkpoint's model, not {}", model.display())
                    } else {
                        String::new()
                    };
                    // Another seed or fraction draws a table's held-out rows
                    // anew: some of them trained before.
                    // A text's held-out part is its end: a larger fraction
                    // holds out text that trained before; a seed moves none.
                    // (Said once, where both change.)
                    let text = data.iter().any(|p| super::data::is_text(p));
                    let grows = saved.parse::<f64>().ok().zip(value.parse::<f64>().ok()).is_some_and(|(a, b)| b > a);
                    let redrawn = if ((!text && matches!(*key, "seed" | "val_split"))
                        || (text && *key == "val_split" && grows))
                        && !std::mem::replace(&mut said_redrawn, true)
                    {
                        if text {
                            "; the held-out part now holds text trained on before, so its held-out figures read \
                             better than they are (a fresh run's are true)"
                        } else {
                            "; the held-out rows are drawn anew, so some of them were trained on and its held-out \
                             figures read better than they are (a fresh run's are true)"
                        }
                    } else {
                        ""
                    };
                    report.note(&format!("{message}; going on{with} (--override-resume){redrawn}"));
                    changed.push(format!("{key} (--override-resume)"));
                }
            }
            if !refusals.is_empty() {
                return Err(TrainError::Input(refusals.join("\n")));
            }
            // A run that changed its model by a policy, resumed without
            // one, trains its model on unchanged from here: said (its
            // decisions and triggers' state were dropped without a word).
            // Continuing the growth needs --adapt and that policy.
            if run.adapt.is_none() && meta.contains_key("policy") {
                report.note(&format!(
                    "{}: the checkpoint's run changed its model by a policy; without --adapt this run trains the \
                     model on as it is, with no policy (give --adapt and that policy to go on growing it)",
                    path.display()
                ));
            }
            // A decaying schedule spans --epochs: more of them on resume
            // stretch it, and a rate already decayed rises again.
            if !matches!(run.lr_schedule, LrSchedule::Constant)
                && run.flops_budget.is_none()
                && meta.get(SCHEDULE_BUDGET_KEY).is_none_or(|b| b == "none")
                && meta.get("epoch").and_then(|e| e.parse::<usize>().ok()).is_some_and(|e| e < run.epochs)
                && let Some(before) = meta.get(SCHEDULE_EPOCHS_KEY).and_then(|e| e.parse::<usize>().ok())
                && before != run.epochs
            {
                changed.push(format!(
                    "the {} schedule's length (--epochs {before}, now {})",
                    run.lr_schedule.name(),
                    run.epochs
                ));
                report.note(&format!(
                    "the {} schedule spanned {before} epochs in the checkpoint's run and spans {} in this one: the \
                     rate follows the new length from the checkpoint's step on ({})",
                    run.lr_schedule.name(),
                    run.epochs,
                    if before < run.epochs { "a decayed rate rises again" } else { "it decays faster" }
                ));
            }
            // A budget sizes the schedule too: resumed with another (or
            // none), the rate follows the new length, unannounced before.
            let budget_now = run.flops_budget.map_or("none".into(), |b| format!("{b:e}"));
            if !matches!(run.lr_schedule, LrSchedule::Constant)
                && let Some(before) = meta.get(SCHEDULE_BUDGET_KEY)
                && *before != budget_now
            {
                let describe = |b: &str| {
                    if b == "none" { format!("--epochs {}", run.epochs) } else { format!("--flops-budget {b}") }
                };
                report.note(&format!(
                    "the {} schedule was sized to {} in the checkpoint's run and to {} in this one: the rate follows \
                     the new length from the checkpoint's step on",
                    run.lr_schedule.name(),
                    if before == "none" {
                        meta.get(SCHEDULE_EPOCHS_KEY).map_or("its --epochs".into(), |e| format!("--epochs {e}"))
                    } else {
                        describe(before)
                    },
                    describe(&budget_now)
                ));
            }
            match meta.get(IR_KEY) {
                Some(ir) => {
                    // (Retargeted to this run's batch, as --batch retargets
                    // the model file.)
                    let rebatched = match rebatch_from {
                        Some(before) => {
                            let now = Signature::of_source(&original, &name)?.batch();
                            report.note(&format!(
                                "{}: the checkpoint's model trained at {before} rows per batch; it goes on at {now}",
                                path.display()
                            ));
                            Some(crate::pipeline::rebatched_source(ir, &name, now)?)
                        }
                        None => None,
                    };
                    let ir = rebatched.as_ref().unwrap_or(ir);
                    create_flag_dir(&run.out, "--out")?;
                    let file = run.out.join("resumed-model.mlir");
                    crate::codegen::write_atomically(&file, ir.as_bytes())?;
                    crate::weights::carry(ir, model, &file)?;
                    // A grown model goes on, not the file named: said (eval
                    // and sample say it too).
                    // (Compared as canonical IR: comments and value names
                    // do not make a model another.)
                    // A fork of another model's checkpoint (--override-resume)
                    // starts its run from that model: its checkpoints record
                    // it (they recorded the model given, so the model-v0.mlir
                    // a resume of them asks for was refused as "grown").
                    if other_model && let Ok(h) = crate::pipeline::model_hash(ir, &name) {
                        for entry in record.iter_mut().filter(|(k, _)| *k == "model") {
                            entry.1 = h.clone();
                        }
                    }
                    if rank == 0
                        && !other_model
                        && crate::pipeline::model_hash(ir, &name).ok().as_deref() != Some(model_hash.as_str())
                    {
                        report.note(&format!(
                            "{}: the checkpoint holds a grown version of {} ({}); training goes on with it",
                            path.display(),
                            model.display(),
                            file.display()
                        ));
                    }
                    (ir.clone(), file, Some((path.clone(), meta)))
                }
                None => (original, model.to_path_buf(), Some((path.clone(), meta))),
            }
        }
        None => (original, model.to_path_buf(), None),
    };
    let name = model_file.display().to_string();
    let sig = Signature::of_source(&source, &name)?;
    if rank == 0 {
        for note in sig.untrained_notes(&name) {
            report.note(&note);
        }
    }
    if sig.output.is_none() && rank == 0 {
        // (Its run reported a held-out loss alone, unsaid.)
        report.note(&format!(
            "{name} has no @forward: the held-out figure is @loss's loss alone (a @forward returning the logits \
             gives the accuracy, and serves eval and sample)"
        ));
    }
    // A resumed text is read with the checkpoint's vocabulary: ids by the
    // characters of another file would mean other characters to the model
    // (its embedding rows and logits are the checkpoint's characters).
    let vocabulary = resume.as_ref().and_then(|(_, meta)| meta.get("vocabulary").cloned());
    // Likewise its features: by the statistics it standardized with (a
    // resume need not repeat --standardize), and never standardized where
    // it trained without.
    let feature_stats = resume.as_ref().and_then(|(_, meta)| meta.get(super::data::STANDARDIZE_KEY).cloned());
    if let Some((path, _)) = &resume
        && run.data.standardize
        && feature_stats.is_none()
    {
        return Err(TrainError::Input(format!(
            "--standardize: {} trained on features read without it; resuming with it would change what every \
             feature means to the model (drop it, or start a new run)",
            path.display()
        )));
    }
    if let Some(l) = &run.data.label
        && let Some(other) = data.iter().find(|p| !super::data::is_table(p))
    {
        return Err(TrainError::Input(format!(
            "--label {l}: names a column of a table's header (a CSV); {} is no table",
            other.display()
        )));
    }
    // And its label's column (a resume need not repeat --label; another is
    // another task).
    if let (Some((path, meta)), Some(given)) = (&resume, &run.data.label)
        && !meta.get(super::data::LABEL_KEY).is_some_and(|l| l.eq_ignore_ascii_case(given))
        && !run.override_resume
    {
        let trained = match meta.get(super::data::LABEL_KEY) {
            Some(l) => format!("column '{l}'"),
            None => "its table's last column".to_string(),
        };
        return Err(TrainError::Input(format!(
            "--label {given}: {} trained to predict {trained}; another label is another task (drop it, or start a \
             new run)",
            path.display()
        )));
    }
    // And a table's scale: the one its run divided by (a --feature-scale
    // given there need not be given again).
    let recorded_scale = match &resume {
        Some((path, meta)) => super::eval::recorded_scale(meta, path)?,
        None => None,
    };
    if let (Some(given), Some(recorded), Some((path, _))) = (run.data.feature_scale, recorded_scale, &resume)
        && given != recorded
        && !run.override_resume
    {
        return Err(TrainError::Input(format!(
            "--feature-scale {given}: {} trained on its table's features divided by {recorded}; another scale \
             would change what every feature means to the model (drop it, or --override-resume)",
            path.display()
        )));
    }
    let data_options = DataOptions {
        seed: run.seed,
        vocabulary: vocabulary.or(run.data.vocabulary.clone()),
        feature_stats: feature_stats.or(run.data.feature_stats.clone()),
        columns: resume.as_ref().and_then(|(_, meta)| meta.get(super::data::COLUMNS_KEY).cloned()),
        class_names: resume.as_ref().and_then(|(_, meta)| meta.get(super::data::CLASSES_KEY).cloned()),
        // A resume reads the label from the column its run did.
        label: run
            .data
            .label
            .clone()
            .or_else(|| resume.as_ref().and_then(|(_, m)| m.get(super::data::LABEL_KEY).cloned())),
        target_stats: resume.as_ref().and_then(|(_, meta)| meta.get(super::data::TARGETS_KEY).cloned()),
        feature_scale: run.data.feature_scale.or(recorded_scale),
        starting: resume.is_none(),
        ..run.data.clone()
    };
    // Reading a large file takes a while (1.3 GB of CSV: 18 s): said
    // before, not after a silence.
    let bytes: u64 = data.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    if bytes >= LARGE_DATA {
        report.note(&format!(
            "reading {} ({:.1} GB{})",
            data.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            bytes as f64 / 1e9,
            if data.iter().any(|p| p.extension().is_some_and(|e| e == "gz")) { ", compressed" } else { "" }
        ));
    }
    let mut dataset = Dataset::load(data, &sig, &data_options)?;
    if run.data.feature_scale.is_some() && dataset.is_text() {
        return Err(TrainError::Input(format!(
            "--feature-scale divides a table's features; {} is a text, read as token ids",
            dataset.description
        )));
    }
    if run.data.feature_scale.is_some() && dataset.metadata.contains_key(super::data::images::IMAGES_KEY) {
        return Err(TrainError::Input(format!(
            "--feature-scale divides a table's features; the images of {} are read as pixels / 255 (0 to 1): \
             --standardize reads them per channel, as torchvision's Normalize",
            data.first().map(|d| d.display().to_string()).unwrap_or_default()
        )));
    }
    // A model that starts from weights of its own (an imported one's,
    // trained on what its exporter fed it) is fed a table divided by its
    // largest magnitude, as any run's: said, with the way to feed it the
    // values as they are (fine-tuning a pretrained model on raw pixels
    // read them 16 times smaller, at 29% where its own weights scored 99%).
    if rank == 0
        && resume.is_none()
        && run.data.feature_scale.is_none()
        && crate::weights::declared_in_text(&source).is_some()
        && let Some(scale) = dataset.metadata.get("feature_scale").and_then(|s| s.parse::<f64>().ok())
        && scale != 1.0
    {
        report.note(&format!(
            "{}: the table's features are divided by their largest magnitude, {scale}, as a run reads a table; \
             the model starts from its own weights (an imported model's), which may expect them as the file holds \
             them: --feature-scale 1 reads them so",
            data.first().map(|p| p.display().to_string()).unwrap_or_default()
        ));
    }
    if let Some(outlier) = &dataset.outlier {
        report.note(&format!("{outlier}: training may diverge on it, or learn little else; check the data"));
    }
    for note in &dataset.notes {
        report.note(note);
    }
    if rank == 0
        && let Some(note) =
            dataset.missing_classes(&data.last().map(|p| p.display().to_string()).unwrap_or_default(), &sig)
    {
        report.note(&note);
    }
    if dataset.train_len() == 0 {
        let why = if dataset.held_len() > 0 {
            format!(" (--val-split {} holds out {} of them)", run.data.val_split, dataset.held_len())
        } else {
            String::new()
        };
        return Err(TrainError::Input(format!("{}: no training examples{why}", dataset.description)));
    }
    // A held-out fraction of a text that leaves no whole window scores
    // nothing (--eval-windows 0 asks for none; --val-split 0 holds nothing
    // out). Fewer windows than a batch are scored by a variant of their
    // size, as the last partial batch is.
    let held = dataset.held_len();
    let held_asked = run.data.val_split > 0.0 && run.data.eval_windows > 0;
    if dataset.is_text() && held_asked && held == 0 {
        return Err(TrainError::Input(format!(
            "{}: the held-out part holds no whole window: a larger held-out fraction (--val-split) or a longer \
             text (--val-split 0 holds none out; --eval-windows 0 scores none)",
            dataset.description
        )));
    }
    // Early stopping watches the held-out loss: without held-out examples
    // it would never act, silently.
    if held == 0 && run.early_stop.is_some() {
        return Err(TrainError::Input(format!(
            "{}: --early-stop watches the held-out loss, but the run holds no examples out (--val-split{})",
            dataset.description,
            if dataset.is_text() { ", --eval-windows" } else { "" }
        )));
    }
    // A held-out plateau needs held-out examples: without them the rule
    // would never act, silently.
    if held == 0
        && let Some(k) = policy.rules.iter().position(|r| matches!(r.trigger, Trigger::ValPlateau { .. }))
    {
        return Err(TrainError::Input(format!(
            "{}: policy rule {} triggers on a held-out plateau (val-plateau), but the run holds no examples out \
             (--val-split{}); use the training-loss plateau (plateau) or hold some out",
            run.adapt.as_ref().map_or_else(|| "the policy".into(), |p| p.display().to_string()),
            k + 1,
            if dataset.is_text() { ", --eval-windows" } else { "" }
        )));
    }
    if let Some((path, meta)) = &resume
        && let Some(summary) = nothing_to_train(path, meta, run, data, report)?
    {
        return Ok(summary);
    }
    create_flag_dir(&run.out, "--out")?;
    create_dir(&own_dir)?;
    // One run at a time writes a run directory (its metrics, plot and
    // compiled model).
    let _run_lock = claim_run_dir(&own_dir)?;
    let trainer_options = Options {
        cache_dir: own_dir.clone(),
        data_parallel: options.data_parallel || run.data_parallel.is_some(),
        // The data loader refused non-finite values: no step need scan its
        // batch again.
        check_inputs: false,
        ..options.clone()
    };
    // A model that normalizes over the batch alone (a batch norm over 1x1
    // maps, or over features) trains no batch of one row (PyTorch refuses
    // one): a --batch of 1 is refused, and each epoch leaves out a last
    // batch that small, on every replica alike (one that has no rows of it
    // runs one). Before rank 0 compiles: every replica says so, none is
    // left waiting for it.
    if let Some(centring) = crate::pipeline::one_value_centring(&source, &name) {
        let batch = sig.batch();
        let micro = trainer_options.accumulate.max(1);
        let replicas = comm.as_ref().map_or(1, |c| c.size());
        let needed = crate::consistency::CENTRING_ROWS;
        if let Some(why) = centring.refuses(batch) {
            return Err(TrainError::Input(why));
        }
        if (0..replicas).any(|r| train_tail_rows(&dataset, batch, micro, replicas, r) < needed) {
            let global = batch * micro * replicas;
            let (left, _) = dataset.whole_batches(global, 1);
            if dataset.train_len() == 0 {
                return Err(TrainError::Input(format!(
                    "{}: {left} training example{}, fewer than one global batch of {global} rows, whose last part \
                     (a micro-batch, a replica's share) holds fewer than {needed}: {name} normalizes over the batch \
                     alone ({}), which a part of one row cannot train; give more data, or a smaller batch",
                    dataset.description,
                    if left == 1 { "" } else { "s" },
                    centring.at
                )));
            }
            report.note(&format!(
                "{name}: the model normalizes over the batch alone ({}: a batch norm over 1x1 maps, or over \
                 features), which a batch of fewer than {needed} rows cannot train; each epoch takes whole batches, \
                 leaving out {left} training example{} (a table's: other rows each epoch)",
                centring.at,
                if left == 1 { "" } else { "s" }
            ));
        }
    }
    // Rank 0 compiles first; the others then find its kernels cached.
    if let Some(c) = &comm
        && rank != 0
    {
        c.barrier_within("waiting for rank 0 to compile the model", COMPILE_WAIT.max(c.timeout()))
            .map_err(RuntimeError::from)?;
    }
    // (A model without parameters, or whose loss reaches none, is
    // hl-autodiff's error: one with none at all trained to "0.00%" and
    // exit 0.)
    let mut trainer = Trainer::from_source(&source, &name, trainer_options)?;
    // A model whose ops fix its batch size (an ONNX export's reshapes to
    // constant shapes) runs no smaller last batch: its epochs take whole
    // batches and leave the rest out (PyTorch's drop_last), said.
    {
        let batch = sig.batch();
        let micro = trainer.options().accumulate.max(1);
        let replicas = comm.as_ref().map_or(1, |c| c.size());
        // The smaller last batches the model runs (none where an op fixes
        // its batch).
        let mut tails = Vec::new();
        for rows in tail_batches(&dataset, batch, micro, replicas, rank) {
            match trainer.add_batch(rows) {
                Ok(()) => tails.push(rows),
                Err(TrainError::FixedBatch { why, .. }) => {
                    let global = batch * micro * replicas;
                    let (train, held) = dataset.whole_batches(global, batch);
                    if dataset.train_len() == 0 {
                        return Err(TrainError::Input(format!(
                            "{}: {} training examples, fewer than one batch of {global}, and the model runs at a \
                             batch of {batch} only (an op fixes it: {why})",
                            dataset.description, train
                        )));
                    }
                    report.note(&format!(
                        "{name}: the model runs at a batch of {batch} only (an op fixes it: {why}); each epoch takes \
                         whole batches, leaving out {train} training example{} (a table's: other rows each epoch) and \
                         {held} held-out one{}",
                        if train == 1 { "" } else { "s" },
                        if held == 1 { "" } else { "s" }
                    ));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        // A mean over the batch written with the batch as a number scales
        // a smaller last batch's loss (and gradients), without a word.
        if rank == 0
            && !tails.is_empty()
            && let Some((at, written, value)) = crate::pipeline::loss_batch_constant(&source, &name)
        {
            report.note(&crate::pipeline::batch_constant_warning(&at, written, value, &tails));
        }
    }
    // The step the policy starts at on the model it is checked against: a
    // fresh run's 0, or a resume's step where the checkpoint does not carry
    // this very policy's state (another policy with --override-resume, or a
    // checkpoint of a run without one: nothing to go on with).
    let policy_starts = match &resume {
        None => Some(0),
        Some((_, meta)) => {
            let same = record.iter().any(|(k, v)| *k == "policy" && meta.get("policy") == Some(v));
            (run.adapt.is_some() && !(same && meta.contains_key(ADAPT_KEY)))
                .then(|| meta.get("step").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0))
        }
    };
    let mut loop_ = Loop::new(trainer, &sig, &dataset, run, policy, &model_file, policy_starts, report)?;
    loop_.dir_lock = _lock;
    loop_.dir_id = run.checkpoint_dir.as_ref().filter(|_| loop_.dir_lock.is_some()).and_then(|d| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(d).ok().map(|m| (m.dev(), m.ino()))
    });
    if let Some(c) = &comm {
        if rank == 0 {
            c.barrier_within("waiting for rank 0 to compile the model", COMPILE_WAIT.max(c.timeout()))
                .map_err(RuntimeError::from)?;
        }
        loop_.adaptive.trainer_mut().set_communicator(c.clone())?;
    }
    // A policy's before-rewrite snapshots carry the run's record too (its
    // data, held-out split and seed, optimizer): eval scores one on the
    // rows the run held out (it scored every row, the trained ones too).
    let mut snapshot_metadata = dataset.metadata.clone();
    snapshot_metadata.extend(record.iter().map(|(k, v)| (k.to_string(), v.clone())));
    loop_.adaptive.set_data_metadata(snapshot_metadata);
    loop_.record = record;
    // Resumed from an earlier checkpoint of its own directory, the run
    // replays the epochs to the directory's latest: it writes no checkpoint
    // before that epoch, so a replay killed midway leaves the latest one.
    loop_.replay_until = replay_until;
    loop_.changed = changed;
    if let Some((path, meta)) = &resume {
        loop_.resume(path, meta, run, other_batch, report)?;
    } else if let Some(dir) = &run.checkpoint_dir {
        loop_.write_version(dir)?;
    }
    // The run registry (rank 0 of a data-parallel run): a registry that
    // cannot be written is noted, never a reason to stop training.
    let recorder = match (&run.runs_db, rank) {
        (Some(db), 0) => {
            let mut problem = dataset.problem(&data_name(data), &sig);
            problem.data_hash = loop_.record.iter().find(|(k, _)| *k == "data").map(|(_, v)| v.clone());
            // The row a resumed run's checkpoint names, in this registry; a
            // fork (resumed from a checkpoint outside its own checkpoint
            // directory) is a run of its own (it took over its parent's row,
            // mixing their epochs).
            let forked = run
                .resume_from
                .as_deref()
                .is_some_and(|from| run.checkpoint_dir.as_deref().is_none_or(|dir| !in_place(from, dir)));
            // A resume on other data (--override-resume) is a run of its
            // own too: its row's problem is this data's, and its held-out
            // losses are of this data (they were credited to the
            // checkpoint's problem).
            // (By the files' contents, as the resume's own check reads them:
            // a data file renamed or moved, or recorded by its compressed
            // bytes before content hashes, is the same data.)
            let other_data = resume.as_ref().is_some_and(|(_, meta)| {
                meta.get("data").is_some_and(|before| !records_data(before, data).unwrap_or(true))
            });
            if other_data && !forked && resume.as_ref().is_some_and(|(_, meta)| meta.contains_key(REGISTRY_RUN_KEY)) {
                report.note(
                    "the run goes on with other data than its checkpoint's: the registry records it as a run of its \
                     own, on this data's problem (its epochs and FLOPs count from the start of the checkpoint's run)",
                );
            }
            // The model the run trains from: the file given, or the
            // checkpoint's where --override-resume took another's (its
            // checkpoints record it; the row records the same).
            let run_model =
                loop_.record.iter().find(|(k, _)| *k == "model").map_or(model_hash.clone(), |(_, v)| v.clone());
            let continued = resume.as_ref().filter(|_| !forked && !other_data).and_then(|(_, meta)| {
                let (file, id) = meta.get(REGISTRY_RUN_KEY)?.rsplit_once('#')?;
                let id = (registry_key(db) == file).then(|| id.parse::<i64>().ok())??;
                // The row holds the model of the run's part before this one:
                // the checkpoint's (this part's differs where --batch
                // retargets it).
                let model = meta.get("model").cloned().unwrap_or_else(|| run_model.clone());
                Some((id, model, meta.get(REGISTRY_IDENTITY_KEY).cloned()))
            });
            // (Where a lock held past the wait: a recorder that keeps the
            // records and writes the row at the run's end, [`Recorder::late`].)
            let begun =
                match Recorder::prepare(db, &loop_, options, run, problem, &model_file, &run_model, data, continued) {
                    Ok(row) => Recorder::begin(&row).map_err(|e| {
                        let late = (super::registry::is_locked(&e.to_string())
                            && std::env::var_os(super::registry::NPROC_RECORD_ENV).is_none())
                        .then(|| Recorder::late(row))
                        .flatten();
                        (e, late)
                    }),
                    Err(e) => Err((e, None)),
                };
            match begun {
                Ok(r) => {
                    // A resumed run in a row of its own (a fork, another
                    // registry, a row its settings no longer fit) records
                    // the decisions from here on: those the checkpoint
                    // carries are its parent's, in the parent's row.
                    if resume.is_some() && !r.continued {
                        loop_.recorded_decisions = loop_.adaptive.decisions().len();
                    }
                    // `aicf train --nproc` asks where rank 0 recorded the
                    // run, to mark it interrupted after a Ctrl-C (mpirun
                    // ends the ranks, which record nothing then).
                    if let Some(file) = std::env::var_os(super::registry::NPROC_RECORD_ENV) {
                        let _ = std::fs::write(file, format!("{}#{}", r.runs.path().display(), r.id));
                    }
                    Some(Rc::new(r))
                }
                // A lock held past the wait: the run keeps its records and
                // writes its row at its end (it went unrecorded, though the
                // lock went seconds later). (The checkpoint's decisions
                // are in its row or its parent's.)
                Err((e, Some(r))) => {
                    if resume.is_some() {
                        loop_.recorded_decisions = loop_.adaptive.decisions().len();
                    }
                    report.note(&format!(
                        "{e} (another process holds it, past a 30 s wait); this run writes its record there at its \
                         end"
                    ));
                    Some(Rc::new(r))
                }
                Err((e, _)) => {
                    // (The error names the registry's file.)
                    // A lock held past the wait: by whom, and what to do.
                    let held = if super::registry::is_locked(&e.to_string()) {
                        " (another process holds it, a program in a transaction on it, past a 30 s wait; or the \
                         file system takes no locks, as some network ones: --runs-db gives another registry, \
                         --no-runs-db none)"
                    } else {
                        ""
                    };
                    report.note(&format!("{e}{held}; the run is not recorded"));
                    None
                }
            }
        }
        _ => None,
    };
    loop_.recorder = recorder.clone();
    let started = Instant::now();
    let remedy = loop_.remedy();
    let result = loop_.train(run, checkpoint.as_deref(), report).map_err(|e| match e {
        // A replica lost outside the train step's all-reduce (held-out
        // scoring, the agreement check): where the run goes on from is
        // said, as the step's own mapping says it.
        TrainError::Runtime(e @ aicf_runtime::RuntimeError::Collective(_)) => {
            let kept = checkpoint.as_deref().filter(|p| p.is_file()).and_then(|p| {
                let meta = aicf_runtime::checkpoint::read_metadata(p).ok()?;
                meta.get("epoch").map(|epoch| resume_here(p, epoch))
            });
            TrainError::Input(format!("{e}; {}", kept.unwrap_or_else(|| "no checkpoint was written".into())))
        }
        other => other,
    });
    if let Ok(summary) = &result {
        // A run early stopping ended is judged by its best epoch, the
        // model it kept.
        // (A fork holds no record of a best epoch its checkpoint's run
        // had: judged by its own last.)
        let best = summary.best.filter(|_| summary.stopped_early);
        let at_best = best.and_then(|(_, at)| summary.records.iter().rposition(|r| r.epoch == at));
        let judged = at_best.map_or(&summary.records[..], |i| &summary.records[..=i]);
        let stopped = best.map(|(_, at)| at);
        let remedy = |guess: f64| match stopped {
            Some(at) => format!(
                "--early-stop ended the run, its best held-out loss at epoch {at}: a lower learning rate, or more \
                 data (or a larger patience, if the held-out loss was still falling now and then)"
            ),
            None => unconverged_remedy(run, summary.steps, &summary.records, guess, &remedy),
        };
        // (A run at --lr 0 trains nothing by design: no remedy to give.)
        if run.lr != 0.0 {
            note_worse_than_guessing(&sig, (judged, at_best.is_some()), &remedy, report);
        }
    }
    // A registry the run stopped writing to (a failed write) is not told
    // the run finished: its curve there has a gap.
    // A row the lock held back at the start: written now, with what the
    // run kept (its wait once more).
    let recorder = match recorder.as_ref().map(|r| r.late.borrow_mut().take()) {
        Some(Some(row)) => match Recorder::begin(&row) {
            Ok(fresh) => {
                *fresh.deferred.borrow_mut() = recorder.as_ref().and_then(|r| r.deferred.borrow_mut().take());
                if run.checkpoint_dir.is_some() {
                    report.note(&format!(
                        "{}: the run is recorded as run {} at its end; its checkpoints, saved before, do not name \
                         it, so a resume of them records a row of its own",
                        row.db.display(),
                        fresh.id
                    ));
                }
                Some(Rc::new(fresh))
            }
            Err(e) => {
                report.note(&format!("{e}; the run is not recorded"));
                None
            }
        },
        _ => recorder,
    };
    if let Some(r) = recorder.as_ref().filter(|r| !r.stopped.get()) {
        // What a lock held back first (its wait once more).
        let written = r.catch_up().and_then(|()| match &result {
            Ok(summary) => r.runs.finish(r.id, &summary.records, summary.steps, started.elapsed().as_secs_f64()),
            // Stopped by the user, resumable: not a failure.
            Err(e @ TrainError::Interrupted(_)) => {
                r.runs.interrupt(r.id, &e.to_string(), started.elapsed().as_secs_f64())
            }
            Err(e) => r.runs.fail(r.id, &e.to_string()),
        });
        if let Err(e) = written {
            report.note(&format!("{e}; the run stays unfinished there"));
        }
    }
    result
}

/// What to do about a run that ended without fitting (no error, no
/// divergence): a warm-up as long as the run, or a run of few steps, or
/// one whose training loss still fell in each epoch, trains longer; else
/// `remedy` (lower the learning rate, or what the run found first).
fn unconverged_remedy(run: &RunOptions, steps: u64, records: &[EpochRecord], guess: f64, remedy: &str) -> String {
    // (A cause the run found, the weight decay or the data, comes first.)
    if remedy != LOWER_RATE {
        return remedy.to_string();
    }
    if let LrSchedule::Cosine { warmup_steps, .. } | LrSchedule::Wsd { warmup_steps, .. } = run.lr_schedule
        && warmup_steps >= steps
    {
        return format!(
            "the warm-up ({warmup_steps} steps) covers the whole run ({steps} steps), so the rate was below --lr \
             until its end: shorten --warmup-steps or train longer"
        );
    }
    // A training loss that rose from epoch to epoch, that stands well above
    // the guess at the end, or that blew up in some epoch (far past what an
    // untrained model starts at), is the rate's doing (the updates throw
    // the weights about).
    let losses: Vec<f64> = records.iter().map(|r| r.train_loss).collect();
    let rose = losses.len() > 1 && losses.last() > losses.first();
    let high = losses.last().is_some_and(|&l| !(l <= 1.5 * guess));
    let blew_up = losses.iter().any(|&l| !(l <= 10.0 * guess));
    if rose || high || blew_up {
        return remedy.to_string();
    }
    // (A few hundred steps is what the repo's smallest models take to
    // leave the guess behind.)
    if steps < FEW_STEPS {
        return format!(
            "it took only {steps} step{}: train longer (more epochs, rows or windows), and if that does not help, \
             {remedy}",
            if steps == 1 { "" } else { "s" }
        );
    }
    if losses.len() > 1 && losses.windows(2).all(|w| w[1] < w[0]) {
        return "its training loss still fell in every epoch: train longer".into();
    }
    remedy.to_string()
}

/// The remedy of a run that diverged for no cause the run can name.
const LOWER_RATE: &str = "lower the learning rate";

/// Fewer steps than this are too few to judge a learning rate by.
const FEW_STEPS: u64 = 200;

/// Data files of at least this many bytes are said as they are read.
const LARGE_DATA: u64 = 256 << 20;

/// A classifier (or language model) whose final held-out loss is above
/// a uniform guess's, ln(classes), is said: such a run ended without an
/// error (a rate that threw the weights about stays under the
/// divergence check's factor: an LM ended at 101.7 nats/char, 24 times
/// ln 65, as a normal result).
fn note_worse_than_guessing(
    sig: &Signature,
    (records, best): (&[EpochRecord], bool),
    remedy: &dyn Fn(f64) -> String,
    report: &mut dyn Report,
) {
    // (A loss that is not a mean cross-entropy alone, a sum or one plus a
    // penalty, is no measure against the guess.)
    let Some(classes) = sig.classes().filter(|&c| c > 1 && sig.classifies() && sig.mean_cross_entropy) else {
        return;
    };
    let Some(last) = records.last().filter(|r| r.val_loss.is_finite()) else { return };
    let guess = (classes as f64).ln();
    if last.val_loss <= guess {
        return;
    }
    // (Fitting means clearly below the guess: a training loss of ln 3 to
    // the fourth digit, a model that learned nothing, was called a fit.)
    let why = if last.train_loss.is_finite() && last.train_loss < 0.9 * guess {
        // (After one epoch, fewer is no remedy: the held-out part may be
        // unlike the rest, as a file's end unlike its start.)
        let remedies = if records.len() > 1 {
            "a smaller model, fewer epochs or more data"
        } else {
            "the held-out part may be unlike what it trained on (a text holds out its end), or the model too large \
             for the data"
        };
        format!("it fits the training data (training loss {:.4}) and not the held-out: {remedies}", last.train_loss)
    } else {
        format!("training did not converge; {}", remedy(guess))
    };
    let which = if best { format!("best epoch's ({})", last.epoch) } else { "final".to_string() };
    report.note(&format!(
        "the {which} held-out loss {:.4} {} is above a uniform guess's over the model's {classes} classes (ln \
         {classes} = {guess:.4}): the model predicts the held-out data worse than guessing; {why}",
        last.val_loss, last.unit
    ));
}

/// Refuses a run registry (`--runs-db`) that is, or whose SQLite
/// companions are, a file the run reads or writes: the registry would
/// replace the file, or the run the registry (with every run in it).
fn refuse_registry_over_run_files(db: &Path, model: &Path, data: &[PathBuf], run: &RunOptions) -> Result<()> {
    use super::registry::Runs;
    let own = OWN_FILES.map(|f| run.out.join(f));
    let mut files: Vec<(&Path, &str)> = vec![(model, "the model")];
    files.extend(data.iter().map(|d| (d.as_path(), "the data")));
    files.extend(own.iter().map(|f| (f.as_path(), "a file of the run directory (--out)")));
    files.extend(run.profile.as_deref().map(|p| (p, "the profile")));
    files.extend(run.adapt.as_deref().map(|p| (p, "the policy")));
    files.extend(run.resume_from.as_deref().map(|p| (p, "the checkpoint resumed from")));
    let clash = files.iter().find(|(f, _)| Runs::would_overwrite(f, db)).map(|(_, what)| what.to_string());
    let folder = db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let clash = clash.or_else(|| {
        run.checkpoint_dir
            .as_ref()
            .filter(|d| super::same_path(folder, d))
            .map(|_| "a file in the checkpoint directory (the run replaces its files)".to_string())
    });
    match clash {
        Some(what) => Err(TrainError::Io {
            path: db.to_path_buf(),
            message: format!("the run registry (--runs-db) names {what}; give the registry another file"),
        }),
        None => Ok(()),
    }
}

/// The name of a run's data: its first file's name without extensions.
/// A data set's name in the run registry: its first file's name up to the
/// first dot.
pub fn data_name(data: &[PathBuf]) -> String {
    let name = data.first().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.split('.').next().unwrap_or_default().to_string()
}

/// How a checkpoint names a run registry: its file's canonical path where
/// it exists, else the path given.
fn registry_key(db: &Path) -> String {
    std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf()).display().to_string()
}

/// How the error of a run stopped by a Ctrl-C or SIGTERM starts (the
/// `--nproc` launcher and the ranks' exit path look for it).
pub const INTERRUPTED_AT: &str = "interrupted at epoch ";

/// That checkpoint `path`, holding `epoch`, is where `--resume` goes on.
pub fn resume_here(path: &Path, epoch: impl std::fmt::Display) -> String {
    // (One written inside its epoch, at a stop or a spent budget, says so.)
    let inside = aicf_runtime::checkpoint::read_metadata(path)
        .ok()
        .and_then(|m| m.get(WITHIN_KEYS[0]).cloned())
        .map_or(String::new(), |rows| format!(" up to {rows} of its examples"));
    format!("{} holds epoch {epoch}{inside}: --resume goes on from there", path.display())
}

/// The records a run keeps for a locked registry ([`Recorder::deferred`]).
#[derive(Default)]
struct Deferred {
    epochs: Vec<EpochRecord>,
    decisions: Vec<(usize, super::registry::DecisionRecord)>,
}

impl Recorder {
    /// The note of a run that defers its records for a lock (`e`).
    fn deferring(e: &dyn std::fmt::Display) -> String {
        format!("{e} (another process holds it); this run writes its epochs and decisions there at its end")
    }

    /// Writes what a lock held back, in order; `Err` where it still fails.
    fn catch_up(&self) -> Result<()> {
        let Some(d) = self.deferred.borrow_mut().take() else { return Ok(()) };
        for r in &d.epochs {
            self.runs.epoch(self.id, r)?;
        }
        for (seq, r) in &d.decisions {
            self.runs.decision(self.id, *seq, r)?;
        }
        Ok(())
    }
}

/// A run's entry in the run registry.
struct Recorder {
    runs: super::registry::Runs,
    id: i64,
    /// Set where a write failed: the run writes nothing more there.
    stopped: std::cell::Cell<bool>,
    /// Where another process held the registry locked past the wait: the
    /// epochs and decisions since, kept to be written at the run's end
    /// (every epoch would have waited 30 s again; a short lock lost the
    /// whole record, the run left unfinished).
    deferred: std::cell::RefCell<Option<Deferred>>,
    /// Whether the run goes on in its checkpoint's row (else a row of its
    /// own: a fresh run, a fork, or a resume that row no longer fits).
    continued: bool,
    /// The row not yet written, where the registry was locked at the
    /// run's start ([`Recorder::late`]).
    late: std::cell::RefCell<Option<RowToBe>>,
    /// Its row's identity (its checkpoints record it with the row's id).
    identity: String,
}

/// A run's row as the run starts it (the model it starts from), kept to
/// be written at its end where the registry was locked at its start.
struct RowToBe {
    db: PathBuf,
    /// The row it goes on in, the model that row holds, and its identity
    /// (where the checkpoint records it).
    continued: Option<(i64, String, Option<String>)>,
    new_run: super::registry::NewRun,
}

impl Recorder {
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        db: &Path,
        loop_: &Loop<'_>,
        options: &Options,
        run: &RunOptions,
        problem: super::registry::Problem,
        model: &Path,
        model_hash: &str,
        data: &[PathBuf],
        continued: Option<(i64, String, Option<String>)>,
    ) -> Result<RowToBe> {
        use super::registry::{NewRun, Settings, fingerprint};
        let settings = Settings {
            optimizer: options.optimizer.clone(),
            lr: run.lr,
            momentum: options.momentum,
            nesterov: options.nesterov,
            weight_decay: options.weight_decay,
            precision: options.precision.name().into(),
            batch: loop_.batch * loop_.micro * loop_.replicas,
            epochs: run.epochs,
            policy: run.adapt.as_ref().map(|p| p.display().to_string()),
            policy_grows: run.adapt.as_ref().map(|_| {
                use super::adapt::policy::Action;
                loop_.adaptive.policy().rules.iter().any(|r| !matches!(r.action, Action::Rollback { .. }))
            }),
            replicas: loop_.replicas,
            standardize: loop_.data.metadata.contains_key(super::data::STANDARDIZE_KEY),
            standardize_targets: loop_.data.metadata.contains_key(super::data::TARGETS_KEY),
            augment: (!run.data.augment.is_none()).then(|| run.data.augment.describe()),
            checkpoint_dir: run
                .checkpoint_dir
                .as_deref()
                .and_then(|d| std::fs::canonicalize(d).ok())
                .map(|d| d.display().to_string()),
            lr_schedule: Some(run.lr_schedule.describe()),
            betas: options.optimizer.starts_with("adam").then_some(options.betas),
            eps: options.optimizer.starts_with("adam").then_some(options.eps),
            clip_norm: options.clip_norm,
            accumulate: Some(loop_.micro),
            windows_per_epoch: loop_.data.is_text().then(|| loop_.data.train_len()),
            eval_windows: loop_.data.is_text().then(|| loop_.data.held_len()),
            out: std::fs::canonicalize(&run.out).ok().map(|d| d.display().to_string()),
            workdir: std::env::current_dir().ok().map(|d| d.display().to_string()),
            gemm: options.gemm.clone(),
            device: Some(loop_.adaptive.trainer().backend().device()),
        };
        // (Under an mpirun the user started, the command alone trains one
        // process at a global batch of one replica's: the launch is said.)
        let command = match std::env::var(super::registry::NPROC_COMMAND_ENV) {
            Ok(c) if loop_.replicas > 1 && !c.is_empty() => c,
            _ if loop_.replicas > 1 => {
                format!("mpirun -n {} {}", loop_.replicas, std::env::args().collect::<Vec<_>>().join(" "))
            }
            _ => std::env::args().collect::<Vec<_>>().join(" "),
        };
        let trainer = loop_.adaptive.trainer();
        let step_flops = trainer.backend().function("train_step").map_or(0.0, |f| f.flops() as f64);
        let name = model.display().to_string();
        let parts = (loop_.replicas * loop_.micro) as f64;
        let fingerprint = fingerprint(trainer.source(), &name, step_flops * parts)?;
        let new_run = NewRun {
            command,
            model: name,
            model_hash: model_hash.into(),
            fingerprint,
            problem,
            settings,
            data: data.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            seed: run.seed,
            started: Some(super::registry::now()),
        };
        Ok(RowToBe { db: db.to_path_buf(), continued, new_run })
    }

    /// The run's row written: its checkpoint's, or a new one.
    fn begin(row: &RowToBe) -> Result<Recorder> {
        use super::registry::Runs;
        Runs::refuse_foreign(&row.db)?;
        let runs = Runs::open(&row.db)?;
        let recorder = |runs: Runs, id, continued| Recorder {
            identity: runs.identity_of(id).unwrap_or_default(),
            runs,
            id,
            stopped: std::cell::Cell::new(false),
            deferred: Default::default(),
            continued,
            late: Default::default(),
        };
        // A resumed run goes on in its row (its curve, decisions and the
        // model it started with are there): one run, not two, whose second
        // would start from the checkpoint's grown model. Its settings become
        // this part's (the epochs it trains to, a policy given with
        // --override-resume), and its command is added to the first.
        let r = &row.new_run;
        if let Some((id, row_model, identity)) = &row.continued
            && runs.resume(*id, row_model, identity.as_deref(), &r.model_hash, r.seed, &r.settings, &r.command)?
        {
            return Ok(recorder(runs, *id, true));
        }
        let id = runs.begin(r)?;
        Ok(recorder(runs, id, false))
    }

    /// A run whose registry was locked past the wait at its start: its
    /// epochs and decisions kept, its row written with them at its end
    /// (the whole run was lost, though the lock went seconds later). `None`
    /// where the registry cannot be read at all.
    fn late(row: RowToBe) -> Option<Recorder> {
        let runs = super::registry::Runs::connect(&row.db).ok()?;
        Some(Recorder {
            runs,
            id: -1,
            stopped: std::cell::Cell::new(false),
            deferred: std::cell::RefCell::new(Some(Deferred { epochs: Vec::new(), decisions: Vec::new() })),
            continued: false,
            identity: String::new(),
            late: std::cell::RefCell::new(Some(row)),
        })
    }
}

/// Whether another run holds checkpoint directory `dir`'s lock (a run
/// still in its first epoch has no checkpoint there yet).
pub fn directory_busy(dir: &Path) -> bool {
    std::fs::File::open(dir.join(".lock"))
        .is_ok_and(|f| matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)))
}

/// The latest checkpoint a checkpoint directory holds without its
/// `last.safetensors`: of `prev.safetensors` and the versions'
/// `v<k>.safetensors` (each the last checkpoint of its model version; the
/// current one's was the last's own), the one at the latest step, and its
/// epoch.
pub fn latest_checkpoint_left(dir: &Path) -> Option<(PathBuf, String)> {
    let mut candidates = vec![dir.join(PREVIOUS)];
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if super::version_checkpoint(&entry.file_name().to_string_lossy()) {
                candidates.push(entry.path());
            }
        }
    }
    candidates
        .into_iter()
        .filter_map(|path| {
            let meta = aicf_runtime::checkpoint::read_metadata(&path).ok()?;
            let epoch = meta.get("epoch")?.clone();
            let step = meta.get("step").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            Some((step, epoch.parse::<u64>().unwrap_or(0), path, epoch))
        })
        .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| b.2.cmp(&a.2)))
        .map(|(_, _, path, epoch)| (path, epoch))
}

/// A resume asked to train to an epoch the checkpoint has reached: the
/// run's records as they are, and a note (nothing is compiled or written).
fn nothing_to_train(
    path: &Path,
    meta: &BTreeMap<String, String>,
    run: &RunOptions,
    data: &[PathBuf],
    report: &mut dyn Report,
) -> Result<Option<Summary>> {
    let epoch: usize = meta.get("epoch").and_then(|e| e.parse().ok()).unwrap_or(0);
    // The training FLOPs the checkpoint's run spent, against a budget: one
    // spent ends the run before its first step (resumed, it trained one
    // step more, and wrote a checkpoint, each time).
    let spent = meta.get(FLOPS_KEY).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    let budget_spent = run.flops_budget.is_some_and(|b| spent >= b);
    // (An epoch a budget cut short is the one to go on with.)
    let within = meta.contains_key(WITHIN_KEYS[0]);
    if (epoch < run.epochs || (within && epoch == run.epochs)) && !budget_spent {
        return Ok(None);
    }
    if budget_spent {
        report.note(&format!(
            "nothing to train: {} has spent {spent:.4e} training FLOPs, and this run's --flops-budget is {:.4e} \
             (raise it to go on)",
            path.display(),
            run.flops_budget.unwrap_or_default()
        ));
    } else {
        report.note(&format!(
            "nothing to train: {} is at epoch {epoch}, and this run asks for {} epoch{} (raise --epochs to go on)",
            path.display(),
            run.epochs,
            if run.epochs == 1 { "" } else { "s" }
        ));
    }
    let metrics = run.out.join("metrics.jsonl");
    // The figures are the checkpoint's run's only where `--out` holds its
    // records: their last epoch and step are the checkpoint's. Another
    // run's metrics there (a stale or shared --out) are not reported.
    let step: u64 = meta.get("step").and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut records = report::read_metrics(&metrics, usize::MAX);
    // (What the file holds past the checkpoint, for the message: it said
    // "ends at epoch 3, not at epoch 3" of a file that ends at 5.)
    let (last_epoch, at_epoch) =
        (records.last().map(|r| r.epoch), records.iter().rev().find(|r| r.epoch == epoch).map(|r| r.step));
    records.retain(|r| r.epoch <= epoch);
    // Figures of the checkpoint's data are not this data's (a resume on
    // other data with --override-resume): said, not reported as this one's.
    if let Some(before) = meta.get("data")
        && !records_data(before, data).unwrap_or(true)
    {
        report.note(&format!(
            "{}'s held-out figures are of the data it trained on ({}), not of this run's (`aicf eval` scores the \
             checkpoint on it)",
            path.display(),
            data_names(before).join(", ")
        ));
        records.clear();
    } else if records.last().is_none_or(|r| r.epoch != epoch || r.step != step) {
        let held = match (last_epoch, at_epoch) {
            (None, _) => "holds no records of this checkpoint's run".into(),
            (Some(_), Some(other)) => format!(
                "holds another run's records (its epoch {epoch} ends at step {other}, this checkpoint's at step \
                 {step})"
            ),
            (Some(last), None) => format!("ends at epoch {last}, not at this checkpoint's epoch {epoch}"),
        };
        report.note(&format!(
            "{} {held} (its run wrote them to another --out?): no figures to report",
            metrics.display()
        ));
        records.clear();
    }
    Ok(Some(Summary {
        steps: step,
        training_seconds: 0.0,
        gemm_timing_seconds: 0.0,
        plot: run.out.join("plot.svg"),
        trace: None,
        decisions: 0,
        decisions_log: None,
        params: records.last().map_or(0, |r| r.params),
        train_flops: records.last().map_or(0.0, |r| r.train_flops),
        best: meta
            .get(BEST_KEYS[0])
            .and_then(|l| l.parse().ok())
            .zip(meta.get(BEST_KEYS[1]).and_then(|e| e.parse().ok())),
        stopped_early: false,
        metrics,
        records,
    }))
}

/// A place inside an epoch: the batch to run next (of this run's global
/// batch), the data order's RNG at the epoch's start (which draws its
/// order again), and the rows trained so far with their summed loss.
#[derive(Clone, Copy, Debug)]
struct Within {
    batch: usize,
    rng: u64,
    loss_sum: f64,
    /// The epoch's rows before `batch` (where it goes on).
    rows: usize,
    /// The rows `loss_sum` is over: fewer than `rows` after a rollback to
    /// the middle of the epoch (the loss starts over there).
    loss_rows: usize,
}

/// A checkpoint's keys for [`Within`] (the rows trained, not the batch: a
/// resume may take other global batches): written only by a run a FLOPs
/// budget ended mid-epoch, so that a resume with a larger budget trains
/// the rest of that epoch (it went on with the next epoch, the rest never
/// trained, and ended elsewhere than a run given the larger budget).
const WITHIN_KEYS: [&str; 3] = ["epoch_rows_done", "epoch_rng_state", "epoch_loss_sum"];
/// The rows the epoch's loss sum is over, where not `epoch_rows_done` (a
/// rollback to the middle of the epoch started the sum over).
const WITHIN_LOSS_ROWS_KEY: &str = "epoch_loss_rows";

/// The state of one run.
struct Loop<'a> {
    /// The checkpoint directory's lock (rank 0's), checked before each
    /// save ([`Loop::reclaim_directory`]).
    dir_lock: Option<std::fs::File>,
    /// The checkpoint directory the lock was taken in (device, inode).
    dir_id: Option<(u64, u64)>,
    adaptive: Adaptive,
    sig: &'a Signature,
    data: &'a Dataset,
    batch: usize,
    model: PathBuf,
    /// The data order's RNG, at the start of the next epoch.
    rng: u64,
    /// Dropout's seed.
    seed: u64,
    first_epoch: usize,
    /// The schedule's step less the optimizer's: resumed at another global
    /// batch, the schedule goes on from the checkpoint's place in its
    /// epochs (counted in this run's batches), not from its step count (a
    /// fork at a larger batch spent the rest of its run at the floor).
    schedule_shift: i64,
    /// Resumed from a checkpoint of another global batch.
    rebatched: bool,
    /// Where in its epoch the run stands: set where a FLOPs budget ended
    /// it mid-epoch (saved with the checkpoint), or read from such a
    /// checkpoint (where a resume starts).
    within: Option<Within>,
    /// The epoch and batch a resume started inside (its checkpoint holds
    /// that epoch's batches before it).
    held_within: Option<(usize, usize)>,
    records: Vec<EpochRecord>,
    /// The options checkpoints record ([`recorded`]).
    record: Vec<(&'static str, String)>,
    /// The current model's version, and each version's by its IR's hash.
    version: usize,
    versions: BTreeMap<String, usize>,
    /// The run's first loss, which divergence is measured against.
    reference_loss: Option<f64>,
    /// The epoch of the last checkpoint written (or resumed from), and
    /// its batches done where it was saved inside the epoch.
    saved_epoch: Option<usize>,
    saved_within: Option<usize>,
    /// The lowest held-out loss so far and its epoch (of the checkpoint's
    /// run too, on a resume): `best.safetensors`, early stopping's mark.
    best: Option<(f64, usize)>,
    /// Whether the checkpoint directory's `last.safetensors` is known to
    /// read: this run wrote it or resumed from it. Only then does a save
    /// keep it as `prev.safetensors` (a damaged one, left by a resume from
    /// the one before, would have replaced the only good spare).
    last_is_good: bool,
    /// A policy's state (its snapshot) and the policy's hash from a
    /// checkpoint this run resumed without `--adapt`: written on into its
    /// checkpoints, so that a later resume with the policy goes on with its
    /// decisions and rewrite count rather than from zero.
    carried_policy: Option<(super::adapt::Snapshot, Option<String>)>,
    /// A replay in place (resumed from an earlier checkpoint of its own
    /// directory): the epoch of the directory's latest checkpoint, before
    /// which no checkpoint is written.
    replay_until: Option<usize>,
    /// What the run trains otherwise than its checkpoint's run (settings
    /// overridden, the schedule's length): a replay in place with any is
    /// refused, as is one at another global batch.
    changed: Vec<String>,
    /// Data parallel: the replicas (none alone), this one's rank and their
    /// number.
    comm: Option<Arc<dyn Communicator>>,
    rank: usize,
    replicas: usize,
    /// Micro-batches per step and replica (gradient accumulation; 1: off).
    micro: usize,
    /// The run registry's entry, the decisions recorded in it so far, and
    /// the model's IR as the last recorded change left it.
    recorder: Option<Rc<Recorder>>,
    recorded_decisions: usize,
    /// The step the policy starts at on this model (0, or a resume's where
    /// another policy starts afresh); `None` on a plain resume, whose
    /// policy goes on with what it observed.
    policy_starts: Option<u64>,
    last_source: String,
    /// Time spent writing to the run registry (waiting on another run's
    /// lock, up to 30 s a write): not counted as training time.
    registry_time: std::time::Duration,
    /// When `plot.svg` was last drawn during the run (it is redrawn after
    /// an epoch at most every [`PLOT_EVERY`], and at the end).
    plotted: Option<Instant>,
    /// Why `metrics.jsonl` or `plot.svg` could not be written last time
    /// (a full disk under --out): said once, the run going on.
    unwritten: Option<String>,
    /// Decisions printed so far (accepted, rejected and rolled back alike).
    reported_decisions: usize,
    /// The logged steps' records (`steps.jsonl`, the plot's curve inside
    /// epochs), and the steps since the last.
    step_records: Vec<StepRecord>,
    interval: Interval,
    /// `steps.jsonl` lacks records (an append failed, a rollback): each
    /// epoch's end writes it whole until it has them.
    steps_behind: bool,
}

/// The steps since the last logged one: their losses and time.
struct Interval {
    loss_sum: f64,
    rows: usize,
    steps: u64,
    started: Instant,
}

impl Interval {
    fn new() -> Self {
        Interval { loss_sum: 0.0, rows: 0, steps: 0, started: Instant::now() }
    }
}

/// The sizes of the smaller last batches a run's epochs take, each a
/// variant the model needs: under data parallel, this replica's shard of
/// the last global batch (a replica with no rows of it runs one row at
/// weight 0), and of that its last micro-batch; a table's last held-out
/// batch. A text trains on random windows in whole global batches, but a
/// window count that is not a multiple of it leaves a last one, as its
/// held-out windows do.
/// How often a run redraws `plot.svg` after an epoch (runs of short epochs
/// would spend their time drawing).
const PLOT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

fn tail_batches(data: &Dataset, batch: usize, micro: usize, replicas: usize, rank: usize) -> Vec<usize> {
    let train_rows = train_tail_rows(data, batch, micro, replicas, rank);
    let mut sizes = Vec::new();
    for rows in [train_rows, data.held_len() % batch] {
        if rows > 0 && rows != batch && !sizes.contains(&rows) {
            sizes.push(rows);
        }
    }
    sizes
}

/// The rows of the smallest batch `rank` trains on in an epoch: its share
/// of a smaller last global batch (a replica with none runs one row that
/// adds nothing), its last micro-batch's; `batch` where the epoch is whole
/// batches.
fn train_tail_rows(data: &Dataset, batch: usize, micro: usize, replicas: usize, rank: usize) -> usize {
    let last_train = data.train_len() % (batch * micro * replicas);
    if last_train == 0 {
        return batch;
    }
    match shard_range(last_train, batch * micro, rank).len() {
        0 => 1,
        rows if rows % batch == 0 => batch,
        rows => rows % batch,
    }
}

impl<'a> Loop<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        trainer: Trainer,
        sig: &'a Signature,
        data: &'a Dataset,
        run: &RunOptions,
        policy: Policy,
        model: &Path,
        policy_starts: Option<u64>,
        report: &mut dyn Report,
    ) -> Result<Self> {
        let batch = sig.batch();
        let mut trainer = trainer;
        let comm = run.data_parallel.clone().filter(|c| c.size() > 1);
        let (rank, replicas) = comm.as_ref().map_or((0, 1), |c| (c.rank(), c.size()));
        let micro = trainer.options().accumulate.max(1);
        // A last batch smaller than the model's, in training and in
        // evaluation, runs a variant compiled for its size (once; cached).
        for rows in tail_batches(data, batch, micro, replicas, rank) {
            trainer.add_batch(rows)?;
        }
        for c in trainer.compiled() {
            report.compiled(model, c);
        }
        // The policy against the model it starts on (`Policy::check_start`):
        // a fresh run's, or the checkpoint's where another policy starts
        // afresh on it. Not on a plain resume: the model is then grown by
        // rules that have fired.
        if rank == 0
            && let Some(start) = policy_starts
        {
            let (notes, never) = policy.check_start(&trainer, start);
            for note in &notes {
                report.note(note);
            }
            if !never.is_empty() {
                return Err(TrainError::Input(format!(
                    "{}: {}",
                    run.adapt.as_ref().map_or_else(|| "the policy".into(), |p| p.display().to_string()),
                    never.join("; ")
                )));
            }
        }
        let mut adaptive = Adaptive::new(trainer, policy);
        adaptive.set_data_metadata(data.metadata.clone());
        if run.adapt.is_some() && rank == 0 {
            adaptive.log_to(&run.out.join("decisions.jsonl"))?;
        }
        let mut loop_ = Loop {
            adaptive,
            sig,
            data,
            batch,
            model: model.to_path_buf(),
            rng: 0,
            seed: run.seed & ((1 << 52) - 1),
            first_epoch: 1,
            schedule_shift: 0,
            rebatched: false,
            within: None,
            held_within: None,
            records: Vec::new(),
            record: Vec::new(),
            version: 0,
            versions: BTreeMap::new(),
            reference_loss: None,
            saved_epoch: None,
            saved_within: None,
            last_is_good: false,
            best: None,
            carried_policy: None,
            replay_until: None,
            dir_lock: None,
            dir_id: None,
            changed: Vec::new(),
            comm,
            rank,
            replicas,
            micro,
            recorder: None,
            recorded_decisions: 0,
            policy_starts,
            last_source: String::new(),
            registry_time: std::time::Duration::ZERO,
            plotted: None,
            unwritten: None,
            step_records: Vec::new(),
            interval: Interval::new(),
            steps_behind: false,
            reported_decisions: 0,
        };
        loop_.last_source = loop_.adaptive.trainer().source().to_string();
        let first = aicf_runtime::artifact::ir_hash(loop_.adaptive.trainer().source());
        loop_.versions.insert(first, 0);
        loop_.rng = loop_.initial_rng(run.seed);
        if run.adapt.is_some() {
            loop_.set_up_adaptation()?;
        }
        Ok(loop_)
    }

    /// The data order's RNG state after the held-out split (of a table)
    /// drew from the seeded state.
    fn initial_rng(&self, seed: u64) -> u64 {
        let mut state = seed ^ 0x2545F4914F6CDD1D;
        if !self.data.is_text() {
            let mut rows: Vec<usize> = (0..self.data.loaded_len()).collect();
            super::data::shuffle(&mut rows, &mut state);
        }
        state
    }

    /// The probe batch rewrites are checked on (the first full held-out
    /// batch, or training batch), and, with a fork rule, the batches forks
    /// train and compare on.
    fn set_up_adaptation(&mut self) -> Result<()> {
        let held = self.data.held_out(self.batch);
        let probe = match held.iter().find(|b| b.len() == self.batch) {
            Some(b) => Some(self.inputs(Split::HeldOut, b, 0)),
            None if self.data.train_len() >= self.batch => {
                let ids: Vec<usize> = (0..self.batch).collect();
                Some(self.inputs(Split::Train, &ids, 0))
            }
            None => None,
        };
        if let Some(p) = probe {
            self.adaptive.set_probe(p);
        }
        if self.adaptive.policy().rules.iter().any(|r| matches!(r.action, Action::Fork { .. })) {
            let full = |split: Split, n: usize| -> Vec<Vec<Tensor>> {
                let ids: Vec<usize> = (0..n).collect();
                ids.chunks_exact(self.batch).map(|c| self.inputs(split, c, 0)).collect()
            };
            let (train, eval) = (full(Split::Train, self.data.train_len()), full(Split::HeldOut, self.data.held_len()));
            self.adaptive.set_fork_data(train, eval);
        }
        Ok(())
    }

    /// What `@loss` takes for `examples` at `step`. Under data parallel,
    /// each rank's dropout draws its own masks (rank r's seed is offset by
    /// r): with one seed, row i of every rank's shard would drop the same
    /// units.
    fn inputs(&self, split: Split, examples: &[usize], step: u64) -> Vec<Tensor> {
        self.part_inputs(split, examples, step, self.rank * self.micro)
    }

    /// [`Loop::inputs`] of micro-batch `part` of the global batch (rank r's
    /// j-th is `r M + j`, M micro-batches per replica): each part draws
    /// its own dropout masks, the same whether it runs on a replica of
    /// its own or as a micro-batch.
    fn part_inputs(&self, split: Split, examples: &[usize], step: u64, part: usize) -> Vec<Tensor> {
        step_inputs(self.sig, self.data, split, examples, part_seed(self.seed, part), step)
    }

    /// Continues from the checkpoint at `path` (its metadata `meta`):
    /// parameters, optimizer state and GEMM choices, the epoch, the data
    /// order, the model version and, for an adaptive run, the policy's state
    /// and the model it still watches.
    fn resume(
        &mut self,
        path: &Path,
        meta: &BTreeMap<String, String>,
        run: &RunOptions,
        other_batch: bool,
        report: &mut dyn Report,
    ) -> Result<()> {
        let corrupt = |message: String| TrainError::Io { path: path.to_path_buf(), message };
        // A policy's snapshot of the model before a rewrite is no place in
        // the run to go on from (it said only "no epoch").
        if let Some(n) = meta.get("rewrite").filter(|_| !meta.contains_key("epoch")) {
            return Err(corrupt(format!(
                "the model before rewrite {n} (the policy's checkpoint_dir), a snapshot of its parameters and \
                 optimizer state with no place in the run (epoch, data order): resume from the run's \
                 --checkpoint-dir (last.safetensors, or a model version's v<k>.safetensors); `aicf eval` scores it"
            )));
        }
        // A checkpoint that a program saved (the runtime's or a Trainer's
        // save_checkpoint) holds tensors without a run's place: said once,
        // whole (each key was refused in turn).
        // (A Trainer's records its step; neither records an epoch or the
        // data order.)
        if !["epoch", "data_rng_state"].iter().any(|k| meta.contains_key(*k)) {
            return Err(corrupt(
                "no run's record in its metadata (epoch, data_rng_state): a checkpoint a program saved \
                 through the runtime or a Trainer has no place in a run to go on from; `aicf eval`, `predict` \
                 and `sample` read its parameters (--checkpoint), and the program itself loads it to train on"
                    .into(),
            ));
        }
        let field = |k: &str| -> Result<u64> {
            let v = meta.get(k).ok_or_else(|| corrupt(format!("no {k} in the checkpoint's metadata")))?;
            v.parse().map_err(|_| corrupt(format!("the checkpoint's {k} {v:?} is not a whole number")))
        };
        let epoch = field("epoch")? as usize;
        self.first_epoch = epoch.checked_add(1).ok_or_else(|| corrupt(format!("epoch {epoch} cannot be continued")))?;
        self.rng = field("data_rng_state")?;
        // A run a FLOPs budget or a Ctrl-C ended mid-epoch goes on inside
        // that epoch (its batch found below, once this run's global batch
        // is known).
        let within = match meta.contains_key(WITHIN_KEYS[0]) {
            false => None,
            true => {
                let loss_sum = meta
                    .get(WITHIN_KEYS[2])
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| corrupt(format!("{} does not read", WITHIN_KEYS[2])))?;
                let (rows, rng) = (field(WITHIN_KEYS[0])? as usize, field(WITHIN_KEYS[1])?);
                let loss_rows = match meta.get(WITHIN_LOSS_ROWS_KEY) {
                    Some(_) => field(WITHIN_LOSS_ROWS_KEY)? as usize,
                    None => rows,
                };
                (self.first_epoch, self.rng) = (epoch.max(1), rng);
                Some(Within { batch: 0, rng, loss_sum, rows, loss_rows })
            }
        };
        self.reference_loss = meta.get("reference_loss").and_then(|v| v.parse().ok());
        self.best = match (meta.get(BEST_KEYS[0]), meta.get(BEST_KEYS[1])) {
            (None, None) => None,
            (Some(loss), Some(at)) => Some((
                loss.parse::<f64>()
                    .ok()
                    .filter(|l| l.is_finite())
                    .ok_or_else(|| corrupt(format!("{} {loss:?} is not a loss", BEST_KEYS[0])))?,
                at.parse::<usize>().map_err(|_| corrupt(format!("{} {at:?} is not an epoch", BEST_KEYS[1])))?,
            )),
            _ => return Err(corrupt(format!("{} without {} (or the other way)", BEST_KEYS[0], BEST_KEYS[1]))),
        };
        if let Some(v) = meta.get(VERSION_KEY) {
            self.version = v.parse().map_err(|_| corrupt(format!("{VERSION_KEY} {v:?} is not a version")))?;
        }
        if let Some(v) = meta.get(VERSIONS_KEY) {
            self.versions = serde_json::from_str(v).map_err(|e| corrupt(format!("{VERSIONS_KEY}: {e}")))?;
        }
        // (At another batch, the tensors are checked by name and shape.)
        // An optimizer switched under --override-resume (SGD to Adam, SGD's
        // momentum turned on or off) keeps other state than the
        // checkpoint's: its parameters go on under this run's optimizer
        // started afresh (SGD to Adam was refused after the compile, for
        // want of Adam's moments; Adam to SGD dropped them unsaid).
        let ours = |k: &str| self.record.iter().find(|(key, _)| *key == k).map(|(_, v)| v.as_str());
        let slots = |optimizer: Option<&str>, momentum: Option<&str>| -> String {
            match optimizer {
                Some("sgd") if momentum.and_then(|m| m.parse::<f64>().ok()).is_some_and(|m| m > 0.0) => {
                    "SGD with momentum".into()
                }
                Some("sgd") => "SGD".into(),
                Some("adam" | "adamw") => "Adam".into(),
                other => other.unwrap_or("no optimizer").into(),
            }
        };
        let theirs = slots(meta.get("optimizer").map(String::as_str), meta.get("momentum").map(String::as_str));
        let mine = slots(ours("optimizer"), ours("momentum"));
        if run.override_resume && meta.contains_key("optimizer") && theirs != mine {
            self.adaptive.trainer_mut().load_parameters(path, !other_batch)?;
            // (Plain SGD keeps no state to speak of.)
            let held = if theirs == "SGD" {
                "was trained with SGD, which keeps no optimizer state".to_string()
            } else {
                format!("holds {theirs}'s state")
            };
            report.note(&format!(
                "{}: the checkpoint {held}; this run's {mine} starts afresh on its parameters (no optimizer state \
                 carried)",
                path.display()
            ));
        } else {
            self.adaptive.trainer_mut().load_checkpoint_of(path, !other_batch, true)?;
        }
        // A text's windows an epoch and held-out windows scored: another
        // number is allowed, and said (it changed without a word).
        let recorded = |key: &str| meta.get(key).zip(self.data.metadata.get(key)).filter(|(a, b)| a != b);
        if let Some((before, now)) = recorded("windows_per_epoch") {
            report.note(&format!(
                "the checkpoint's run trained {before} windows an epoch, this one {now} (--windows-per-epoch, or \
                 its default, which fills the training text once and takes at least a batch): an epoch is another \
                 amount of text from here, and a schedule by epochs follows the new count"
            ));
        }
        if let Some((before, now)) = recorded("eval_windows") {
            report.note(&format!(
                "the checkpoint's run scored {before} held-out windows an epoch, this one {now} (--eval-windows): the \
                 held-out losses from here compare with the earlier epochs' only roughly"
            ));
        }
        // Another --accumulate or replica count is allowed (the sums are a
        // step's scratch), but a step then takes other rows: said.
        let global = self.batch * self.micro * self.replicas;
        // Inside an epoch: the rows trained must be whole batches of this
        // run's, of the same epoch order (the windows an epoch as they were).
        if let Some(mut w) = within {
            if recorded("windows_per_epoch").is_some() {
                return Err(corrupt(format!(
                    "its run stopped inside epoch {epoch} (a FLOPs budget spent, or a Ctrl-C), whose order depends on \
                     the windows an epoch: resume with the checkpoint's --windows-per-epoch ({})",
                    meta.get("windows_per_epoch").map_or("?", |v| v.as_str())
                )));
            }
            if w.rows % global != 0 {
                return Err(corrupt(format!(
                    "its run stopped after {} rows of epoch {epoch} (a FLOPs budget spent, or a Ctrl-C), which this \
                     run's global batch of {global} rows does not divide: resume with the checkpoint's ({}; --batch, \
                     --accumulate, --nproc)",
                    w.rows,
                    meta.get(GLOBAL_BATCH_KEY).map_or("?", |v| v.as_str())
                )));
            }
            w.batch = w.rows / global;
            (self.within, self.held_within) = (Some(w), Some((epoch, w.batch)));
        }
        if let Some((before, now)) = recorded("windows_per_epoch") {
            self.changed.push(format!("the windows an epoch ({before}, now {now})"));
        }
        if let Some(before) = meta.get(GLOBAL_BATCH_KEY).and_then(|v| v.parse::<usize>().ok())
            && before != global
        {
            self.changed.push(format!("the global batch ({before} rows a step, now {global}: --accumulate, --nproc)"));
            self.rebatched = true;
        } else if let Some(v) = meta.get(SCHEDULE_SHIFT_KEY) {
            self.schedule_shift =
                v.parse().map_err(|_| corrupt(format!("{SCHEDULE_SHIFT_KEY} {v:?} is not a count")))?;
        }
        // A replay in place (resumed from an earlier checkpoint of its own
        // directory) rewrites the directory's later checkpoints: as they
        // were where it trains as its run did; trained otherwise, it would
        // replace a good later checkpoint with another, silently.
        if let (Some(held), Some(dir)) = (self.replay_until, &run.checkpoint_dir)
            && !self.changed.is_empty()
        {
            return Err(TrainError::Input(format!(
                "{}: resumed from {} (epoch {epoch}), an earlier checkpoint of this directory, with {} changed: \
                 the run would replace the directory's later checkpoint last.safetensors (epoch {held}) with one \
                 trained otherwise; give another --checkpoint-dir to fork from epoch {epoch} (or --resume to go on \
                 from the latest)",
                dir.display(),
                path.display(),
                self.changed.join(", ")
            )));
        }
        if let Some(before) = meta.get(GLOBAL_BATCH_KEY).and_then(|v| v.parse::<usize>().ok())
            && before != global
        {
            report.note(&format!(
                "the checkpoint's run took global batches of {before} rows a step, this one {global} (--batch, --accumulate, \
                 --nproc): its steps go on counting from the checkpoint's step in batches of {global}, so an epoch \
                 takes another number of them, and a --lr-schedule goes on from the checkpoint's place in its epochs \
                 (counted in this run's batches, as its warm-up is)"
            ));
        }
        if let Some(v) = meta.get(FLOPS_KEY) {
            self.adaptive.flops = v
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| corrupt(format!("{FLOPS_KEY} {v:?} is not a count of FLOPs")))?;
        }
        let current = aicf_runtime::artifact::ir_hash(self.adaptive.trainer().source());
        self.versions.entry(current).or_insert(self.version);
        if run.adapt.is_none()
            && let Some(text) = meta.get(ADAPT_KEY)
        {
            // (One that does not read is not carried: this run needs none.)
            match serde_json::from_str::<super::adapt::Snapshot>(text) {
                Ok(snapshot) => self.carried_policy = Some((snapshot, meta.get("policy").cloned())),
                Err(e) => report.note(&format!(
                    "{}: the policy's state does not read ({e}); this run's checkpoints do not carry it",
                    path.display()
                )),
            }
        }
        // Another policy than the checkpoint's run grew by (--override-resume
        // said to go on): it starts afresh on the checkpoint's model, as a
        // fork from a model version tries another growth (the earlier
        // policy's state, its rules' counts, would not fit it).
        let policy_changed = run.adapt.is_some()
            && meta.get("policy").is_some_and(|saved| self.record.iter().any(|(k, v)| *k == "policy" && v != saved));
        if policy_changed {
            report.note(&format!(
                "{}: its run grew by another policy: {} starts afresh from the checkpoint's model (its rules \
                 act from step {} on)",
                path.display(),
                run.adapt.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                field("step")?
            ));
        }
        if run.adapt.is_some()
            && !policy_changed
            && let Some(text) = meta.get(ADAPT_KEY)
        {
            let snapshot: super::adapt::Snapshot =
                serde_json::from_str(text).map_err(|e| corrupt(format!("{ADAPT_KEY}: {e}")))?;
            // The watched rewrite's state is read only when there is one.
            let kept = match snapshot.kept {
                None => None,
                Some(_) => {
                    let (entries, _) = aicf_runtime::checkpoint::load(path)?;
                    let kept: BTreeMap<String, Tensor> = entries
                        .into_values()
                        .filter_map(|e| {
                            let name = e.name.strip_prefix(KEPT_PREFIX)?.to_string();
                            let values = aicf_runtime::host::read_values(&e.bytes, e.dtype);
                            Some((name, Tensor::new(e.shape, e.dtype, values)))
                        })
                        .collect();
                    (!kept.is_empty()).then_some(kept)
                }
            };
            self.adaptive.restore(snapshot, kept).map_err(|e| match e {
                // The checkpoint named: a policy that does not fit it.
                TrainError::Input(m) => TrainError::Io { path: path.to_path_buf(), message: m },
                e => e,
            })?;
            self.reported_decisions = self.adaptive.decisions().len();
        }
        if let Some(dir) = &run.checkpoint_dir {
            self.write_version(dir)?;
            self.last_is_good = super::same_path(path, &dir.join("last.safetensors"));
        }
        self.saved_epoch = Some(epoch);
        self.saved_within = self.held_within.map(|(_, batch)| batch);
        report.resumed(path, epoch, field("step")?, self.saved_within);
        Ok(())
    }

    /// This replica's micro-batches of a global batch `chunk` (rows `[rMB,
    /// (r+1)MB)` of it, `B` the model's batch, `M` the micro-batches per
    /// step, in pieces of `B`), each with its share of the batch's rows; a
    /// replica past the end of a short last batch runs its first row at
    /// weight 0, and a micro-batch past it is left out (it would add 0).
    fn micro_batches(&self, chunk: &[usize], step: u64) -> Vec<(Vec<Tensor>, f64)> {
        let range = shard_range(chunk.len(), self.batch * self.micro, self.rank);
        let first = self.rank * self.micro;
        if range.is_empty() {
            return vec![(self.part_inputs(Split::Train, &chunk[..1.min(chunk.len())], step, first), 0.0)];
        }
        chunk[range]
            .chunks(self.batch.max(1))
            .enumerate()
            .map(|(j, rows)| {
                (self.part_inputs(Split::Train, rows, step, first + j), rows.len() as f64 / chunk.len() as f64)
            })
            .collect()
    }

    /// Records in the run registry the decisions taken since the last call:
    /// one that changed the model with its IR before and after.
    fn record_decisions(&mut self, bar: Option<&indicatif::ProgressBar>, report: &mut dyn Report) {
        let Some(r) = self.recorder.clone() else { return };
        let started = Instant::now();
        let mut failed = None;
        let decisions = self.adaptive.decisions();
        for (seq, d) in decisions.iter().enumerate().skip(self.recorded_decisions) {
            let source = self.adaptive.trainer().source();
            let changed = d.outcome != "rejected" && source != self.last_source;
            let (before, after) =
                if changed { (self.last_source.clone(), source.to_string()) } else { (String::new(), String::new()) };
            let record = super::registry::DecisionRecord {
                step: d.step,
                epoch: d.epoch,
                trigger: d.trigger.clone(),
                action: d.action.clone(),
                outcome: d.outcome.clone(),
                reason: d.reason.clone(),
                params_before: d.params_before,
                params_after: d.params_after,
                loss_before: d.loss_before,
                loss_after: d.loss_after,
                ir_before: before,
                ir_after: after,
            };
            if changed {
                self.last_source = source.to_string();
            }
            // A registry that cannot be written does not stop training; the
            // run writes nothing more there (as for an epoch's record).
            if let Some(d) = r.deferred.borrow_mut().as_mut() {
                d.decisions.push((seq, record));
                continue;
            }
            if let Err(e) = r.runs.decision(r.id, seq, &record) {
                if super::registry::is_locked(&e.to_string()) {
                    *r.deferred.borrow_mut() = Some(Deferred { epochs: Vec::new(), decisions: vec![(seq, record)] });
                    suspend(bar, || report.note(&Recorder::deferring(&e)));
                    continue;
                }
                failed = Some(e.to_string());
                break;
            }
        }
        self.recorded_decisions = decisions.len();
        self.registry_time += started.elapsed();
        if let Some(e) = failed {
            self.stop_recording(&r, &e, bar, report);
        }
    }

    /// After a failed write to the run registry: says so and writes nothing
    /// more there (the run stays unfinished in it).
    fn stop_recording(
        &mut self,
        r: &Recorder,
        error: &str,
        bar: Option<&indicatif::ProgressBar>,
        report: &mut dyn Report,
    ) {
        // (A row deleted under the run, `aicf runs delete --force`, fails
        // its next write: it does not stay anything.)
        let message = if r.runs.has_run(r.id) {
            format!("{error}; this run records nothing more there (it stays unfinished)")
        } else {
            format!(
                "{}: run {} was deleted from the run registry (aicf runs delete); this run records nothing more there",
                r.runs.path().display(),
                r.id
            )
        };
        suspend(bar, || report.note(&message));
        r.stopped.set(true);
        self.recorder = None;
    }

    /// Under data parallel with a growth policy: every replica must hold
    /// rank 0's model and decisions after step `step` (each decides from
    /// rank 0's measurements, so they do; a difference is an error, never
    /// two models training apart).
    fn check_agreement(&self, step: u64) -> Result<()> {
        let Some(c) = &self.comm else { return Ok(()) };
        let mine = format!(
            "{} {}",
            self.adaptive.decisions().len(),
            aicf_runtime::artifact::ir_hash(self.adaptive.trainer().source())
        );
        let mut theirs = mine.clone().into_bytes();
        c.broadcast(&mut theirs, 0, &format!("rank 0's model after step {step}")).map_err(RuntimeError::from)?;
        let theirs = String::from_utf8_lossy(&theirs).into_owned();
        if theirs != mine {
            return Err(TrainError::Input(format!(
                "data parallel: after step {step} rank {} holds decisions/model {mine}, rank 0 {theirs}: the \
                 replicas disagree on the model",
                self.rank
            )));
        }
        Ok(())
    }

    /// Writes the current model's IR as `model-v<k>.mlir` (and as
    /// `model.mlir`, the latest) in the checkpoint directory `dir` (rank 0
    /// of a data-parallel run; the others only take note).
    fn write_version(&mut self, dir: &Path) -> Result<()> {
        if self.rank != 0 {
            self.model = dir.join(format!("model-v{}.mlir", self.version));
            return Ok(());
        }
        create_dir(dir)?;
        let source = self.adaptive.trainer().source();
        let path = dir.join(format!("model-v{}.mlir", self.version));
        if !path.exists() {
            crate::codegen::write_atomically(&path, source.as_bytes())?;
        }
        crate::codegen::write_atomically(&dir.join("model.mlir"), source.as_bytes())?;
        // An imported model's weights file, which its versions name.
        crate::weights::carry(source, Path::new(self.adaptive.trainer().name()), &path)?;
        self.model = path;
        Ok(())
    }

    /// The version of the current model: a new one for a model not seen
    /// before in this run.
    /// A new version's number is past every one this run knows and every
    /// `model-v<k>.mlir` already in the checkpoint directory (a run resumed
    /// from an earlier version there must not reuse a later one's number).
    fn update_version(&mut self, checkpoint_dir: Option<&Path>) {
        let hash = aicf_runtime::artifact::ir_hash(self.adaptive.trainer().source());
        if let Some(&v) = self.versions.get(&hash) {
            self.version = v;
            return;
        }
        let on_disk: Vec<(usize, PathBuf)> = checkpoint_dir
            .and_then(|d| std::fs::read_dir(d).ok())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let k = name.strip_prefix("model-v")?.strip_suffix(".mlir")?.parse::<usize>().ok()?;
                Some((k, e.path()))
            })
            .collect();
        // The same IR written before (by the run this one was resumed
        // from) keeps its number.
        let same = on_disk.iter().find(|(_, path)| {
            std::fs::read_to_string(path).is_ok_and(|text| aicf_runtime::artifact::ir_hash(&text) == hash)
        });
        if let Some((k, _)) = same {
            self.versions.insert(hash, *k);
            self.version = *k;
            return;
        }
        let newest = on_disk.iter().map(|(k, _)| *k).max();
        let next = self.versions.values().copied().chain(newest).max().map_or(0, |v| v + 1);
        self.versions.insert(hash, next);
        self.version = next;
    }

    /// What to do about a run that diverged: lower the learning rate, or
    /// first fix the data's outlier, where it has one.
    fn remedy(&self) -> String {
        let text = |key: &str| self.record.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str());
        let setting = |key: &str| text(key).and_then(|v| v.parse::<f64>().ok());
        if let (Some(optimizer), Some(decay), Some(lr)) = (text("optimizer"), setting("weight_decay"), setting("lr"))
            && decay_overshoots(optimizer, lr, decay)
        {
            return format!(
                "the weight decay {} times the learning rate {lr} is {}, above 2: each update multiplies the weights \
                 by 1 - {} = {}, so they grow in size and alternate in sign; lower the weight decay",
                short(decay),
                short(decay * lr),
                short(decay * lr),
                short(1.0 - decay * lr)
            );
        }
        match &self.data.outlier {
            Some(outlier) => format!("the data holds an outlier ({outlier}): fix it before lowering the learning rate"),
            // (Inputs of 6e4 trained to a loss 100 times the guess, and the
            // run was told to lower the rate.)
            None if self.data.unscaled => "the inputs are far from a scale of 1 (the note before training says which \
                                           and how to scale them): scale them before lowering the learning rate"
                .into(),
            None => LOWER_RATE.into(),
        }
    }

    /// The error of a run a Ctrl-C (or a first SIGTERM or SIGHUP) stopped
    /// before batch `b` of `epoch`
    /// (the registry told the structure it reached).
    fn interrupted(
        &self,
        epoch: usize,
        b: usize,
        steps_per_epoch: usize,
        checkpoint: Option<&Path>,
        inside: bool,
    ) -> TrainError {
        self.record_final_structure();
        let kept = match (checkpoint, self.saved_epoch) {
            (Some(path), _) if inside => format!(
                "{} holds epoch {epoch} up to its step {b} of {steps_per_epoch}: --resume goes on from there",
                path.display()
            ),
            (Some(path), Some(saved)) => format!("{}{}", resume_here(path, saved), {
                // (A resume inside this epoch: its checkpoint holds the
                // epoch's batches before that.)
                let held = self.held_within.filter(|w| w.0 == epoch).map_or(0, |w| w.1);
                let lost = b.saturating_sub(held);
                match lost {
                    0 => String::new(),
                    1 => " (this epoch's 1 step is not in it)".into(),
                    _ => format!(" (this epoch's {lost} steps are not in it)"),
                }
            }),
            (Some(path), None) => format!("no epoch ended, so {} was not written", path.display()),
            (None, _) => "no checkpoint is written without --checkpoint-dir".into(),
        };
        let all = self.adaptive.trainer().steps();
        TrainError::Interrupted(format!(
            "{INTERRUPTED_AT}{epoch}, step {b} of {steps_per_epoch}, {all} step{} in all; {kept}",
            if all == 1 { "" } else { "s" }
        ))
    }

    /// On a stop inside an epoch (a Ctrl-C, or a first SIGTERM or SIGHUP),
    /// a checkpoint of the epoch so far (`within`: its batches before the
    /// stop), as a FLOPs budget spent inside an epoch writes one: a resume
    /// goes on inside the epoch, on the uninterrupted run's bits; the
    /// epoch's steps were lost, up to a whole epoch of a language model's.
    /// The checkpoint it replaces stays as `prev`. Not where the epoch has
    /// no new step, nor in a replay of an earlier checkpoint (it would
    /// replace the directory's later one). Whether the directory holds it
    /// (rank 0 writes it; every replica stops at the same step). `what`
    /// names the checkpoint in a note (the stop's, `--save-every`'s).
    #[allow(clippy::too_many_arguments)]
    fn save_inside(
        &mut self,
        epoch: usize,
        within: Within,
        checkpoint: Option<&Path>,
        run: &RunOptions,
        writes: bool,
        report: &mut dyn Report,
        what: &str,
    ) -> bool {
        let Some(path) = checkpoint else { return false };
        let held = self.held_within.filter(|w| w.0 == epoch).map_or(0, |w| w.1);
        if within.batch <= held || self.replay_until.is_some() {
            return false;
        }
        if !writes {
            // (Rank 0 saved it: what a replica's message names.)
            (self.saved_epoch, self.saved_within) = (Some(epoch), Some(within.batch));
            return true;
        }
        // (Another run that claimed the directory keeps it.)
        match self.reclaim_directory(path) {
            Ok(Some(note)) => report.note(&note),
            Ok(None) => {}
            Err(e) => {
                report.note(&format!("{what} inside epoch {epoch} was not written: {e}"));
                return false;
            }
        }
        self.within = Some(within);
        match self.save(path, epoch, run) {
            Ok(()) => true,
            Err(e) => {
                // (Written, where what failed came after it: the version's
                // link.)
                let steps = self.adaptive.trainer().steps().to_string();
                let written = aicf_runtime::checkpoint::read_metadata(path)
                    .is_ok_and(|m| m.contains_key(WITHIN_KEYS[0]) && m.get("step") == Some(&steps));
                let how = if written { "was written, but" } else { "was not written:" };
                report.note(&format!("{what} inside epoch {epoch} {how} {e}"));
                written
            }
        }
    }

    /// Where the last good checkpoint is, for messages about a run that
    /// stopped.
    fn kept_checkpoint(&self, checkpoint: Option<&Path>) -> String {
        match (checkpoint, self.saved_epoch) {
            (Some(path), Some(epoch)) => {
                let at = match self.saved_within {
                    Some(batch) => format!("inside epoch {epoch}, after its batch {batch}"),
                    None => format!("epoch {epoch}"),
                };
                format!("the last good checkpoint, {} ({at}), is kept", path.display())
            }
            _ => "no checkpoint was written".to_string(),
        }
    }

    /// Whether the checkpoint directory still holds this run's lock: one
    /// moved or removed during the run was made again by the next save,
    /// unlocked, and a second run then resumed in it beside this one. It
    /// is locked again (a note says so), or, where another run claimed it
    /// in between, the run stops with its last checkpoint where the
    /// directory went.
    fn reclaim_directory(&mut self, path: &Path) -> Result<Option<String>> {
        use std::os::unix::fs::MetadataExt;
        let (Some(lock), Some(dir)) = (&self.dir_lock, path.parent()) else { return Ok(None) };
        let file = dir.join(".lock");
        let ours = lock.metadata().ok().map(|m| (m.dev(), m.ino()));
        if std::fs::metadata(&file).ok().map(|m| (m.dev(), m.ino())) == ours {
            return Ok(None);
        }
        let io = |message: String| TrainError::Io { path: dir.to_path_buf(), message };
        make_dir(dir).map_err(io)?;
        let fresh = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&file)
            .map_err(|e| io(format!("{}: {e}", file.display())))?;
        if fresh.try_lock().is_err() {
            return Err(io(
                "was moved or removed during this run, and another run now writes its checkpoints here: this run \
                 stops (its earlier checkpoints are where the directory went)"
                    .into(),
            ));
        }
        // (Its lock file alone removed leaves the directory in place: the
        // same directory as the lock's was made in.)
        let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        let same = self.dir_id.is_some() && id(dir) == self.dir_id;
        self.dir_lock = Some(fresh);
        self.dir_id = id(dir);
        Ok(Some(if same {
            format!("{}: the checkpoint directory's lock was removed during the run; it is locked again", dir.display())
        } else {
            format!(
                "{}: the checkpoint directory was moved or removed during the run (its earlier checkpoints are \
                 where it went); the run goes on saving in it, locked again",
                dir.display()
            )
        }))
    }

    /// Saves the epoch's state to `path`, and as the last state of the
    /// current model version (`v<k>.safetensors` beside it): the IR, the
    /// run's record, the data order, the GEMM choices and an adaptive run's
    /// state all in the one file, written atomically.
    fn save(&mut self, path: &Path, epoch: usize, run: &RunOptions) -> Result<()> {
        let trainer = self.adaptive.trainer();
        let mut meta: BTreeMap<String, String> = BTreeMap::from([
            ("epoch".to_string(), epoch.to_string()),
            ("step".to_string(), trainer.steps().to_string()),
            ("data_rng_state".to_string(), self.rng.to_string()),
            (IR_KEY.to_string(), trainer.source().to_string()),
            (VERSION_KEY.to_string(), self.version.to_string()),
            (VERSIONS_KEY.to_string(), serde_json::to_string(&self.versions).unwrap_or_default()),
            // Training FLOPs so far: a resumed run goes on counting (its
            // --flops-budget and the registry's curve are the whole run's).
            (FLOPS_KEY.to_string(), format!("{:e}", self.adaptive.flops)),
            (GLOBAL_BATCH_KEY.to_string(), (self.batch * self.micro * self.replicas).to_string()),
            // Its micro-batches a step (--accumulate): a resume without the
            // flag goes on with them ([`trained_accumulate`]).
            (ACCUMULATE_KEY.to_string(), self.micro.to_string()),
        ]);
        if let Some(r) = self.reference_loss {
            meta.insert("reference_loss".into(), r.to_string());
        }
        if let Some(g) = &trainer.options().gemm {
            meta.insert(GEMM_KEY.into(), g.clone());
        }
        // (A bare resume goes on saving as often: the flag is for runs
        // that are killed, and a kill's next step is a bare resume.)
        if let Some(n) = run.save_every {
            meta.insert(SAVE_EVERY_KEY.into(), n.to_string());
        }
        for (key, n) in [(LOG_EVERY_KEY, run.log_every), (EVAL_EVERY_KEY, run.eval_every)] {
            if let Some(n) = n {
                meta.insert(key.into(), n.to_string());
            }
        }
        if self.schedule_shift != 0 {
            meta.insert(SCHEDULE_SHIFT_KEY.into(), self.schedule_shift.to_string());
        }
        if let Some((loss, at)) = self.best {
            meta.insert(BEST_KEYS[0].into(), loss.to_string());
            meta.insert(BEST_KEYS[1].into(), at.to_string());
        }
        if let Some(w) = self.within {
            let values = [w.rows.to_string(), w.rng.to_string(), w.loss_sum.to_string()];
            meta.extend(WITHIN_KEYS.iter().map(|k| k.to_string()).zip(values));
            if w.loss_rows != w.rows {
                meta.insert(WITHIN_LOSS_ROWS_KEY.into(), w.loss_rows.to_string());
            }
        }
        // The epochs a decaying schedule spans (not compared on resume: a
        // run goes on for more epochs; noted where that stretches it).
        meta.insert(SCHEDULE_EPOCHS_KEY.into(), run.epochs.to_string());
        // The budget a decaying schedule was sized to (noted on a resume
        // with another).
        meta.insert(SCHEDULE_BUDGET_KEY.into(), run.flops_budget.map_or("none".into(), |b| format!("{b:e}")));
        meta.extend(self.record.iter().map(|(k, v)| (k.to_string(), v.clone())));
        meta.extend(self.data.metadata.clone());
        // (A row not yet written, the registry locked at the run's start,
        // is named by none: `#-1` sent a resume to no row.)
        if let Some(r) = self.recorder.as_ref().filter(|r| r.late.borrow().is_none()) {
            meta.insert(REGISTRY_RUN_KEY.into(), format!("{}#{}", registry_key(r.runs.path()), r.id));
            if !r.identity.is_empty() {
                meta.insert(REGISTRY_IDENTITY_KEY.into(), r.identity.clone());
            }
        }
        let mut extra = BTreeMap::new();
        if run.adapt.is_some() {
            let (snapshot, kept) = self.adaptive.snapshot();
            let text = serde_json::to_string(&snapshot).map_err(|e| TrainError::Input(e.to_string()))?;
            meta.insert(ADAPT_KEY.into(), text);
            for (name, t) in kept.unwrap_or_default() {
                extra.insert(format!("{KEPT_PREFIX}{name}"), t);
            }
        }
        // A policy's state carried through a run without one: its history
        // (decisions, rewrites, rules fired, the rate's factor) as it was,
        // its window of losses and observations and any watched rewrite
        // over (this run trained on without them), its FLOPs this run's.
        if run.adapt.is_none()
            && let Some((carried, policy)) = &self.carried_policy
        {
            let mut snapshot = carried.clone();
            snapshot.flops = self.adaptive.flops;
            snapshot.losses.clear();
            snapshot.val_losses.clear();
            snapshot.observations.clear();
            snapshot.last_good = None;
            snapshot.kept = None;
            let text = serde_json::to_string(&snapshot).map_err(|e| TrainError::Input(e.to_string()))?;
            meta.insert(ADAPT_KEY.into(), text);
            if let Some(hash) = policy {
                meta.insert("policy".into(), hash.clone());
            }
        }
        // The checkpoint being replaced stays as prev.safetensors (a link:
        // no copy), so a damaged or regretted last one has one before it
        // (v<k> is a link to the same file as last).
        // It becomes prev only once the new one is saved: rotated first, a
        // save that failed (a full disk) left prev the same file as last,
        // and the checkpoint before it was lost.
        // (Not one saved inside an epoch: two stops in one epoch left prev
        // and last both inside it, the last whole epoch's checkpoint gone.)
        let inside_epoch = aicf_runtime::checkpoint::read_metadata(path).is_ok_and(|m| m.contains_key(WITHIN_KEYS[0]));
        let keep = match path.parent() {
            Some(dir) if self.last_is_good && path.is_file() && !inside_epoch => {
                stage_link(path, &dir.join(PREVIOUS), false).ok().flatten()
            }
            _ => None,
        };
        let saved = trainer.save_checkpoint_with(path, &meta, &extra).map_err(|e| self.save_failed(e, epoch, path));
        if let Some(keep) = keep {
            match &saved {
                // (A spare: a file system without links keeps none, rather
                // than copy every epoch's checkpoint.)
                Ok(_) => {
                    let _ = keep.commit();
                }
                Err(_) => drop(keep),
            }
        }
        saved?;
        self.last_is_good = true;
        if let Some(dir) = path.parent() {
            link_or_copy(path, &dir.join(format!("v{}.safetensors", self.version)), true)?;
        }
        self.saved_epoch = Some(epoch);
        self.saved_within = self.within.map(|w| w.batch);
        Ok(())
    }

    /// Whether the loop stops at this step for a Ctrl-C, SIGTERM or
    /// SIGHUP: this process's flag alone, or, on the ranks of a
    /// data-parallel run, the ranks' flags as they were one step before
    /// (`vote`: the sum started then, each rank's signal in its own slot;
    /// a new one is started here, and waited for where the loop stops or
    /// ends). A rank that was not signalled stops as the first rank that
    /// was (its signal, its exit status).
    fn stop_asked(&self, vote: &mut Option<Box<dyn aicf_runtime::collective::PendingSum>>) -> Result<bool> {
        use aicf_runtime::checkpoint::{interrupt_signal, interrupted, mark_interrupted};
        let Some(c) = self.comm.as_ref().filter(|c| c.size() > 1) else { return Ok(interrupted()) };
        let signals = |p: Box<dyn aicf_runtime::collective::PendingSum>| -> Result<Vec<f64>> {
            Ok(match p.wait().map_err(RuntimeError::from)? {
                Values::F32(v) => v.into_iter().map(f64::from).collect(),
                Values::F64(v) => v,
            })
        };
        let before = match vote.take() {
            Some(p) => signals(p)?,
            None => Vec::new(),
        };
        // (A stop with no signal kept counts as a Ctrl-C's, SIGINT.)
        let mut mine = vec![0.0f32; c.size()];
        if let Some(signal) = interrupt_signal() {
            mine[c.rank()] = if signal > 0 { signal as f32 } else { libc::SIGINT as f32 };
        }
        let next = c.start_sum(Values::F32(mine), "the ranks' stop check").map_err(RuntimeError::from)?;
        let Some(&first) = before.iter().find(|&&s| s > 0.0) else {
            *vote = Some(next);
            return Ok(false);
        };
        // Every rank started it: it completes.
        signals(next)?;
        if !interrupted() {
            mark_interrupted(first as i32);
        }
        Ok(true)
    }

    /// A save of `epoch` that failed: what failed, and what the directory
    /// still holds (the save writes a new file and renames it over the
    /// last, so the last stays whole). It read as a bare OS error on the
    /// checkpoint's path.
    fn save_failed(&self, e: TrainError, epoch: usize, path: &Path) -> TrainError {
        // (The checkpoint's path is said once.)
        let why = match e {
            TrainError::Io { path: p, message } if p == path => message,
            e => {
                let text = e.to_string();
                text.strip_prefix(&format!("{}: ", path.display())).map_or(text.clone(), str::to_string)
            }
        };
        let kept = match self.saved_epoch {
            Some(saved) if path.is_file() => {
                format!("{} still holds epoch {saved}: --resume goes on from there", path.display())
            }
            _ => "no checkpoint of this run was saved before it".into(),
        };
        TrainError::Io {
            path: path.to_path_buf(),
            message: format!("could not save epoch {epoch}'s checkpoint: {why}; {kept}"),
        }
    }

    /// The schedule's step for the optimizer's `step` ([`Self::schedule_shift`]).
    fn schedule_step(&self, step: u64) -> u64 {
        (step as i64).saturating_add(self.schedule_shift).max(0) as u64
    }

    /// Steps a FLOPs budget still buys at the current model's FLOPs per
    /// step of `rows` examples (none without a budget, or where the step
    /// counts none).
    fn budget_steps_left(&self, run: &RunOptions, rows: usize) -> Option<u64> {
        let budget = run.flops_budget?;
        let per = step_flops(self.adaptive.trainer(), rows);
        (per > 0.0).then(|| ((budget - self.adaptive.flops).max(0.0) / per).ceil() as u64)
    }

    fn train(mut self, run: &RunOptions, checkpoint: Option<&Path>, report: &mut dyn Report) -> Result<Summary> {
        // The global batch: the model's batch on every replica, times the
        // micro-batches each adds.
        let global = self.batch * self.micro * self.replicas;
        let steps_per_epoch = self.data.train_len().div_ceil(global);
        if self.rebatched {
            let done =
                (self.first_epoch.saturating_sub(1) * steps_per_epoch + self.within.map_or(0, |w| w.batch)) as i64;
            self.schedule_shift = done - self.adaptive.trainer().steps() as i64;
        }
        let writes = self.rank == 0;
        let mut device = self.adaptive.trainer().backend().device();
        if let Some(c) = &self.comm {
            device =
                format!("{device}, {} replicas ({}) of batch {}", self.replicas, c.engine(), self.batch * self.micro);
        }
        if self.micro > 1 {
            device = format!("{device}, accumulating {} micro-batches of {}", self.micro, self.batch);
        }
        // Mixed precision said where it is on (a resumed run takes its
        // checkpoint's, unasked).
        let precision = self.adaptive.trainer().options().precision;
        if precision != crate::pipeline::Precision::Fp32 {
            device = format!("{device}, {} mixed precision", precision.name());
        }
        if global > self.data.train_len() && self.micro == 1 && self.replicas == 1 {
            // (The line below said the batch asked for, or for a text a
            // batch of more windows than an epoch draws.)
            let n = self.data.train_len();
            let what = if self.data.is_text() {
                super::data::count(
                    n,
                    "window an epoch draws (--windows-per-epoch)",
                    "windows an epoch draws (--windows-per-epoch)",
                )
            } else {
                super::data::count(n, "training example", "training examples")
            };
            report.note(&format!(
                "the batch of {global} is larger than the {what}: each epoch is one step of {} (the model compiled \
                 for {})",
                if n == 1 { "it".to_string() } else { format!("all {n}") },
                super::data::count(n, "row", "rows")
            ));
        }
        if !self.data.is_text() && global > self.data.train_len() && (self.micro > 1 || self.replicas > 1) {
            // The fewer micro-batches that hold every example, where fewer
            // than asked (it suggested the very --accumulate given).
            let enough = self.data.train_len().div_ceil(self.batch * self.replicas).max(1);
            let fewer =
                if enough < self.micro { format!("; --accumulate {enough} would do the same") } else { String::new() };
            let (holding, total) = (self.data.train_len().div_ceil(self.batch), self.micro * self.replicas);
            // (Under --nproc alone the parts are the replicas' batches.)
            let parts = if self.micro == 1 { "replicas' batches" } else { "micro-batches" };
            let which = if holding < total {
                format!("only {holding} of its {total} {parts} of {} hold examples, the others none", self.batch)
            } else {
                format!("{holding} {parts} of {} hold examples", self.batch)
            };
            report.note(&format!(
                "the global batch of {global} is larger than the {} training examples: every step takes all of \
                 them ({which}{fewer})",
                self.data.train_len(),
            ));
        }
        // A step takes at most every training example (see the note).
        let batch = global.min(self.data.train_len()).max(1);
        report.started(&Start {
            data: self.data.description.clone(),
            train_examples: self.data.train_len(),
            held_examples: self.data.held_len(),
            text: self.data.is_text(),
            batch,
            steps_per_epoch,
            device,
            tokens_per_step: self.data.window().map(|w| w * batch),
        });
        if let LrSchedule::Cosine { warmup_steps, .. } | LrSchedule::Wsd { warmup_steps, .. } = run.lr_schedule {
            let step = self.schedule_step(self.adaptive.trainer().steps());
            let total = schedule_steps(run, (steps_per_epoch, step), self.budget_steps_left(run, global));
            // The warm-up's step s runs at lr (s + 1) / warmup: one as long
            // as the run reaches --lr at its last step (it was said never to).
            if warmup_steps > total {
                report.note(&format!(
                    "the warm-up ({warmup_steps} steps) is longer than the run ({total} steps): the rate never \
                     reaches --lr {}",
                    run.lr
                ));
            } else if warmup_steps == total {
                report.note(&format!(
                    "the warm-up ({warmup_steps} steps) is as long as the run: the rate reaches --lr {} at the last \
                     step, and no decay follows",
                    run.lr
                ));
            }
            if let LrSchedule::Wsd { decay_steps: Some(decay), .. } = run.lr_schedule
                && decay > total
            {
                report.note(&format!(
                    "the decay ({decay} steps) is longer than the run ({total} steps): it spans the whole run, \
                     from its first step"
                ));
            }
        }
        // A policy that cannot act in this run says so before it starts: no
        // rules, or a rule set for a step past the run's last.
        if run.adapt.is_some() && writes {
            let rules = &self.adaptive.policy().rules;
            if rules.is_empty() {
                report.note("the policy has no rules: the run trains as without --adapt");
            }
            let step = self.adaptive.trainer().steps();
            let last = schedule_steps(run, (steps_per_epoch, step), self.budget_steps_left(run, global));
            for (k, rule) in rules.iter().enumerate() {
                let after = match rule.trigger {
                    Trigger::Steps { at } if at > last => {
                        Some(format!("at step {at}, after this run's last step ({last})"))
                    }
                    Trigger::EverySteps { every } if every > last => {
                        Some(format!("every {every} steps, more than this run's last step ({last})"))
                    }
                    Trigger::Epoch { every } if every > run.epochs => {
                        Some(format!("every {every} epochs, more than this run's {}", run.epochs))
                    }
                    // (The last `window` steps' mean loss against the
                    // `window` before: 2 x window steps of the run's.)
                    // (Only where the policy starts here: a resumed one
                    // goes on with the losses it observed before.)
                    Trigger::Plateau { window, .. }
                        if self.policy_starts.is_some() && (2 * window) as u64 > last.saturating_sub(step) =>
                    {
                        Some(format!(
                            "on a plateau over {window} steps, which compares {} steps' losses; this run trains {}",
                            2 * window,
                            last.saturating_sub(step)
                        ))
                    }
                    Trigger::Flops { at } if run.flops_budget.is_some_and(|b| at > b) => Some(format!(
                        "at {at:.3e} training FLOPs, past this run's --flops-budget {:.3e}",
                        run.flops_budget.unwrap_or_default()
                    )),
                    // (Held-out losses, one an epoch: 2 x window epochs.)
                    Trigger::ValPlateau { window, .. }
                        if self.policy_starts.is_some()
                            && 2 * window > (run.epochs + 1).saturating_sub(self.first_epoch) =>
                    {
                        Some(format!(
                            "on a held-out plateau over {window} epochs, which compares {} epochs' held-out losses; \
                             this run trains {}",
                            2 * window,
                            (run.epochs + 1).saturating_sub(self.first_epoch)
                        ))
                    }
                    _ => None,
                };
                // A relative improvement a positive loss never makes (a
                // loss that can be negative may): the rule fires at every
                // window.
                if let Trigger::Plateau { threshold, .. } | Trigger::ValPlateau { threshold, .. } = rule.trigger
                    && threshold >= 1.0
                {
                    report.note(&format!(
                        "policy rule {} takes a plateau as an improvement below threshold = {threshold} of the \
                         loss (0.01: 1%), which a positive loss never makes at 1 or more: it fires at every window",
                        k + 1
                    ));
                }
                if let Some(after) = after {
                    report.note(&format!("policy rule {} fires {after}: it never acts", k + 1));
                    continue;
                }
                // FLOPs the run does not reach at its model's cost a step
                // (a growth makes the steps costlier: not "never").
                let per = step_flops(self.adaptive.trainer(), global);
                let reach = self.adaptive.flops + per * last.saturating_sub(step) as f64;
                if let Trigger::Flops { at } = rule.trigger
                    && run.flops_budget.is_none()
                    && per > 0.0
                    && at > reach
                {
                    report.note(&format!(
                        "policy rule {} fires at {at:.3e} training FLOPs; this run spends about {reach:.3e} at its \
                         model's {per:.3e} a step: it acts only if a growth makes the steps costlier",
                        k + 1
                    ));
                }
                // A fork's trial longer than the whole run (each candidate
                // trains that long at the fork: 100000 steps on a run of
                // 135 went by unsaid).
                if let Action::Fork { steps: trial, .. } = &rule.action
                    && *trial as u64 > last
                {
                    report.note(&format!(
                        "policy rule {} forks with a trial of {trial} steps a candidate, more than this whole run's \
                         {last}: each candidate trains that long where the rule fires (give steps a part of the run)",
                        k + 1
                    ));
                }
                // A growth that repeats with nothing to stop it grows until
                // the machine's memory refuses a rewrite (a width doubled
                // every step reached 2 million units and 16 GiB, unsaid).
                let repeats = !matches!(rule.trigger, Trigger::Steps { .. } | Trigger::Flops { .. });
                let uncapped = match &rule.action {
                    Action::Grow(t) => t.uncapped(),
                    Action::Fork { candidates, .. } => candidates.iter().find_map(|t| t.uncapped()),
                    Action::Rollback { .. } => None,
                };
                if let (true, 0, Some(what)) = (repeats, rule.max_times, uncapped) {
                    report.note(&format!(
                        "policy rule {} {what}, and may fire again and again (no max_times): the model grows each \
                         time, until a rewrite needs more memory than the machine has (give its cap, or max_times)",
                        k + 1
                    ));
                }
            }
            // A re-warm-up longer than the run keeps the rate low to its end
            // after a growth (1e6 steps: 68.5% held out against 84.9%).
            let ramp = self.adaptive.policy().rewarmup_steps;
            if !rules.is_empty() && ramp > last {
                report.note(&format!(
                    "the policy's rewarmup_steps ({ramp}) is longer than this run ({last} steps): after a growth the \
                     rate ramps from 10% of --lr and never reaches it"
                ));
            }
            let optimizer = self.adaptive.trainer().options().optimizer.clone();
            if self.adaptive.policy().age_bias_correction && !matches!(optimizer.as_str(), "adam" | "adamw") {
                report.note(&format!(
                    "the policy's age_bias_correction serves Adam's bias corrections; {optimizer} has none, so it \
                     does nothing in this run"
                ));
            }
        }
        let metrics = run.out.join("metrics.jsonl");
        // A resumed run keeps the records of the epochs it continues from.
        // (A resume from a named checkpoint too: its records in this --out
        // were rewritten with the new epochs only.)
        let resuming = run.resume || run.resume_from.is_some();
        let (records, damaged) =
            if resuming { report::read_metrics_noting(&metrics, self.first_epoch) } else { (Vec::new(), None) };
        self.records = records;
        // A line that does not read (a damaged file) is said, and the file
        // kept beside before it is written again from what reads: it was
        // said to be another --out's, and rewritten without its lines.
        if let Some((line, why)) = &damaged
            && writes
        {
            // (A second damaged file does not replace the first's copy.)
            let kept = (0..)
                .map(|n| {
                    run.out.join(if n == 0 {
                        "metrics.jsonl.damaged".into()
                    } else {
                        format!("metrics.jsonl.damaged.{n}")
                    })
                })
                .find(|p| !p.exists())
                .unwrap_or_else(|| run.out.join("metrics.jsonl.damaged"));
            let how = match std::fs::copy(&metrics, &kept) {
                Ok(_) => format!("kept as {}", kept.display()),
                Err(e) => format!("not kept ({}: {e})", kept.display()),
            };
            report.note(&format!(
                "{} line {line} is not an epoch record ({why}): the file is damaged; {how}, and the run goes on \
                 with the {} records that read",
                metrics.display(),
                self.records.len()
            ));
        }
        // Records that stop short of the checkpoint's epoch were not all
        // written here (a resume into another --out wrote the rest there).
        let resumed_at = self.first_epoch.saturating_sub(1);
        if run.resume && resumed_at > 0 && self.rank == 0 && damaged.is_none() {
            let last = self.records.last().map_or(0, |r| r.epoch);
            if last < resumed_at {
                let held = if last == 0 { "no epoch".to_string() } else { format!("epochs up to {last}") };
                report.note(&format!(
                    "{} holds {held} of the {resumed_at} this checkpoint has trained (the rest were written to \
                     another --out, or the run stopped between saving its checkpoint and its metrics): its curve \
                     goes on from here with a gap",
                    metrics.display()
                ));
            }
        }
        // A fresh run into an --out holding an earlier run's records
        // replaces them: said (they went without a word).
        if writes && !resuming {
            let earlier = report::read_metrics(&metrics, usize::MAX);
            if let Some(last) = earlier.last() {
                report.note(&format!(
                    "{} held an earlier run's records (epochs up to {}); this run writes its own there, and its \
                     plot (give another --out to keep them)",
                    metrics.display(),
                    last.epoch
                ));
            }
        }
        // The logged steps a resume continues from (up to its checkpoint's
        // step); a fresh run's --out loses an earlier run's with its metrics.
        let steps_path = run.out.join(STEPS_FILE);
        let logs = run.log_every.is_some() || run.eval_every.is_some();
        // (Something else in its place: refused where the run would write
        // it, left alone where it would not.)
        if writes && std::fs::symlink_metadata(&steps_path).is_ok_and(|m| !m.is_file()) {
            if logs {
                return Err(TrainError::Io {
                    path: steps_path,
                    message: "is not a file (a directory, or a link), where the run writes its logged steps: move it \
                              away, or give another --out"
                        .into(),
                });
            }
        } else {
            if resuming {
                self.step_records = report::read_steps(&steps_path, self.adaptive.trainer().steps());
            }
            if writes && (!self.step_records.is_empty() || std::fs::symlink_metadata(&steps_path).is_ok()) {
                report::write_steps(&steps_path, &self.step_records)?;
            }
        }
        // Flags that would log nothing are said.
        if self.rank == 0 {
            let steps_left = (run.epochs.saturating_sub(self.first_epoch) + 1) as u64 * steps_per_epoch as u64;
            let last = self.adaptive.trainer().steps() + steps_left;
            for (flag, n) in [("--log-every", run.log_every), ("--eval-every", run.eval_every)] {
                if let Some(n) = n
                    && n > last
                {
                    report.note(&format!("{flag} {n}: this run ends at step {last}, before any such step"));
                }
            }
            if run.eval_every.is_some() && self.data.held_out(self.batch).is_empty() {
                report.note(&format!(
                    "--eval-every {}: the run holds no examples out (--val-split 0), so its step lines have no \
                     held-out loss",
                    run.eval_every.unwrap_or_default()
                ));
            }
        }
        if writes {
            report::write_metrics(&metrics, &self.records)?;
            // The plot's place taken by a directory (or a pipe) was found
            // after the first epoch had trained.
            for own in ["plot.svg", "decisions.jsonl"] {
                let path = run.out.join(own);
                // (Through a link too: one to a directory, or to nothing.)
                let placed = std::fs::symlink_metadata(&path).is_ok();
                if placed && !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                    return Err(TrainError::Io {
                        path,
                        message: "is not a file (a directory, or a link to one or to nothing), where the run \
                                  writes its own: move it away, or give another --out"
                            .into(),
                    });
                }
            }
        }
        let bar = progress_bar(run, steps_per_epoch, self.first_epoch);
        let started = Instant::now();
        let gemm_timing = aicf_runtime::registry::measuring_seconds();
        let mut profiler = run.profile.as_ref().map(|p| Profiler {
            path: p.clone(),
            left: run.profile_steps,
            warm: 2,
            recording: false,
        });
        let mut trace = None;
        let mut epoch = self.first_epoch;
        // (Resumed inside an epoch: from its next batch, its loss so far.)
        let mut resumed_within = self.within.take();
        let mut start_batch = resumed_within.map_or(0, |w| w.batch);
        let mut budget_spent = false;
        let mut stopped_early = false;
        let mut last_lr = run.lr;
        // A Ctrl-C (or a first SIGTERM or SIGHUP: a scheduler's) stops the
        // loop at its next step, saying where the run stands. The ranks of
        // a data-parallel run stop at one step: each step every rank adds
        // whether it was asked to stop into a sum started the step before
        // (complete by then, so it costs no wait), and all stop where the
        // sum is not 0. A SIGTERM sent to the ranks (Slurm's to every
        // process of a job) ended them by the signal, the run unfinished.
        let _interruptible = aicf_runtime::checkpoint::interruptible();
        let mut stop_vote: Option<Box<dyn aicf_runtime::collective::PendingSum>> = None;
        let mut timed_before = aicf_runtime::registry::measuring_seconds();
        'epochs: while epoch <= run.epochs {
            // Early stopping: `patience` epochs without a lower held-out
            // loss than the best end the run (one resumed past it too).
            if let (Some(patience), Some((loss, at))) = (run.early_stop, self.best)
                && start_batch == 0
                && epoch.saturating_sub(at + 1) >= patience
            {
                let kept = checkpoint
                    .and_then(Path::parent)
                    .and_then(|d| best_checkpoint(d, (loss, at)))
                    .map_or(String::new(), |b| format!(" (its checkpoint: {})", b.display()));
                suspend(bar.as_ref(), || {
                    report.note(&format!(
                        "--early-stop {patience}: the held-out loss has not gone below epoch {at}'s {loss:.4}{kept} \
                         in the {} epoch{} since; the run ends after epoch {} of {}",
                        epoch - 1 - at,
                        if epoch - 1 - at == 1 { "" } else { "s" },
                        epoch - 1,
                        run.epochs
                    ))
                });
                stopped_early = true;
                break;
            }
            let epoch_started = Instant::now();
            let epoch_steps_before = self.adaptive.trainer().steps();
            let scale_before =
                self.adaptive.trainer().backend().symbol("loss_scale").and_then(|t| t.values.first().copied());
            // The epoch's order depends only on the RNG state (checkpointed).
            let epoch_rng = self.rng;
            let order = self.data.epoch_order(&mut self.rng);
            let (mut loss_sum, mut count) = resumed_within.take().map_or((0.0, 0usize), |w| (w.loss_sum, w.loss_rows));
            if start_batch >= steps_per_epoch {
                // Rolled back to the end of this epoch: the next one starts.
                (start_batch, epoch) = (0, epoch + 1);
                continue;
            }
            let chunks: Vec<&[usize]> = order.chunks(global).collect();
            let mut prepared: Option<Vec<(Vec<Tensor>, f64)>> = None;
            // A logged step at the epoch's end, awaiting its evaluation.
            let mut pending_step: Option<StepRecord> = None;
            for (b, chunk) in chunks.iter().enumerate().skip(start_batch) {
                let step = self.adaptive.trainer().steps();
                if self.stop_asked(&mut stop_vote)? {
                    if let Some(bar) = &bar {
                        bar.abandon();
                    }
                    // (The rows before batch b, whole global batches: what
                    // the loss sum is over may be fewer, after a rollback.)
                    let within = Within { batch: b, rng: epoch_rng, loss_sum, rows: b * global, loss_rows: count };
                    let inside =
                        self.save_inside(epoch, within, checkpoint, run, writes, report, "the stop's checkpoint");
                    return Err(self.interrupted(epoch, b, steps_per_epoch, checkpoint, inside));
                }
                // This replica's shard of the global batch (its
                // micro-batches), and its share.
                let micro = match prepared.take() {
                    Some(p) => p,
                    None => self.micro_batches(chunk, step),
                };
                let weight = micro.iter().map(|(_, w)| w).sum();
                let global_rows = (self.replicas > 1 || self.micro > 1).then_some(chunk.len());
                self.adaptive.trainer_mut().set_replica_share(weight, global_rows);
                // On a GPU the next batch is copied while this step runs.
                if self.adaptive.trainer().options().device.is_cuda()
                    && self.micro == 1
                    && let Some(next) = chunks.get(b + 1)
                {
                    let next = self.micro_batches(next, step + 1);
                    if let Some((first, _)) = next.first() {
                        self.adaptive.stage_next(first.clone());
                    }
                    prepared = Some(next);
                }
                let refs: Vec<(Vec<&Tensor>, f64)> = micro.iter().map(|(t, w)| (t.iter().collect(), *w)).collect();
                if let Some(p) = &mut profiler {
                    p.before_step(self.adaptive.trainer_mut());
                }
                let progress = Progress { epoch, batch: b + 1, rng: epoch_rng };
                let at = self.schedule_step(step);
                let total = schedule_steps(run, (steps_per_epoch, at), self.budget_steps_left(run, global));
                // From the last growth under the policy's restart_schedule.
                let from = match self.adaptive.schedule_from() {
                    0 => 0,
                    from => self.schedule_step(from).min(at),
                };
                let lr = run.lr_schedule.at(run.lr, at - from, total.saturating_sub(from));
                last_lr = lr;
                let outcome = self.adaptive.step_micro(&refs, lr, progress).map_err(|e| match e {
                    // A batch whose every label is the loss's
                    // ignore_index: a mean over none is NaN (as
                    // PyTorch's), whatever the rate.
                    TrainError::NonFinite { loss, .. } if self.all_ignored(&micro) => TrainError::Diverged(format!(
                        "the loss is {loss} at epoch {epoch}, step {}: every label of its batch is the \
                                 loss's ignore_index ({}), and a mean over no labels is NaN (as PyTorch's); give \
                                 each example labels that count, or leave out examples of padding alone",
                        step + 1,
                        self.sig.ignore_index.unwrap_or_default()
                    )),
                    // At a run's first step no update has happened yet: the
                    // model or its data gives the non-finite loss, not the rate.
                    TrainError::NonFinite { step: 1, loss, .. } => TrainError::Diverged(format!(
                        "the loss is {loss} at the first step, before any update: the model (its constants or \
                         initial values) or the data gives it, not the learning rate"
                    )),
                    TrainError::NonFinite { step, loss, lr, cause } => TrainError::Diverged(format!(
                        "the loss became {loss} at epoch {epoch}, step {step} (lr {}); {}; {}",
                        super::rate_text(lr),
                        cause.unwrap_or_else(|| self.remedy()),
                        self.kept_checkpoint(checkpoint)
                    )),
                    // Nor is the rate an fp16 forward pass that overflows
                    // on the first step: the data or the initial values
                    // exceed fp16's range.
                    TrainError::Fp16Overflow { step: 1, loss, .. } => TrainError::Diverged(format!(
                        "the loss is {loss} at the first step, before any update: the forward pass overflowed fp16 \
                         (largest 65504) on the initial model and this data, not by the learning rate; inputs of \
                         about 1 fit it (--standardize, or scale the arrays), or train with --precision bf16 (f32's \
                         range)"
                    )),
                    e @ TrainError::Fp16Overflow { .. } => {
                        TrainError::Diverged(format!("epoch {epoch}: {e}; {}", self.kept_checkpoint(checkpoint)))
                    }
                    // A replica that died or hung ends the run at its
                    // all-reduce: where it can go on from is said too, as
                    // a rank ended by a signal is.
                    TrainError::Runtime(e @ aicf_runtime::RuntimeError::Collective(_)) => TrainError::Input(format!(
                        "epoch {epoch}, step {}: {e}; {}",
                        step + 1,
                        self.kept_checkpoint(checkpoint)
                    )),
                    other => other,
                })?;
                if !self.adaptive.policy().rules.is_empty() {
                    self.check_agreement(step)?;
                }
                match outcome {
                    Outcome::Trained(m, decision) => {
                        // A loss far above where the run started has
                        // diverged even while it is finite: the state is
                        // not saved over a good checkpoint.
                        let reference = *self.reference_loss.get_or_insert(m.loss);
                        if m.loss > DIVERGENCE_FACTOR * reference.abs().max(1.0) {
                            return Err(TrainError::Diverged(format!(
                                "the loss became {:.4e} at epoch {epoch}, step {} (lr {}), over {DIVERGENCE_FACTOR:e} \
                                 times the run's first loss {reference:.4}: training diverged; {}; {}",
                                m.loss,
                                m.step,
                                super::rate_text(lr),
                                self.remedy(),
                                self.kept_checkpoint(checkpoint)
                            )));
                        }
                        // Each batch's mean loss, weighted by its examples.
                        loss_sum += m.loss * chunk.len() as f64;
                        count += chunk.len();
                        self.interval.loss_sum += m.loss * chunk.len() as f64;
                        self.interval.rows += chunk.len();
                        self.interval.steps += 1;
                        if decision.is_some() {
                            self.after_rewrite(run)?;
                        }
                        // --log-every, --eval-every: the step's line. Where
                        // the epoch ends with this step (its last batch, or
                        // a spent FLOPs budget), its held-out loss is the
                        // epoch's, evaluated once below.
                        let now = self.adaptive.trainer().steps();
                        let due = |n: Option<u64>| n.is_some_and(|n| now.is_multiple_of(n));
                        if due(run.log_every) || due(run.eval_every) {
                            let mut record = self.step_record(epoch, b + 1, steps_per_epoch, lr);
                            let ends = b + 1 == chunks.len()
                                || run.flops_budget.is_some_and(|budget| self.adaptive.flops >= budget);
                            if due(run.eval_every) && ends {
                                pending_step = Some(record);
                            } else {
                                if due(run.eval_every) {
                                    (record.val_loss, record.val_accuracy) = self.evaluate()?;
                                }
                                self.log_step(record, run, writes, report, bar.as_ref());
                            }
                        }
                        // Accepted and rejected rewrites alike.
                        self.report_decisions(bar.as_ref(), report);
                        if let Some(bar) = &bar {
                            bar.inc(1);
                            bar.set_message(format!("epoch {epoch}, loss {:.4}", m.loss));
                            // A step that compiled or timed GEMM candidates
                            // (the first, one after a growth) is no measure
                            // of the rest: the rate and ETA start over.
                            let timing = aicf_runtime::registry::measuring_seconds();
                            if timing > timed_before || decision.is_some() || b == start_batch {
                                bar.reset_eta();
                            }
                            timed_before = timing;
                        }
                        self.record_decisions(bar.as_ref(), report);
                        // A FLOPs budget spent ends the run with this epoch;
                        // mid-epoch, its checkpoint says where (a resume with
                        // a larger budget trains the rest of it).
                        if run.flops_budget.is_some_and(|budget| self.adaptive.flops >= budget) {
                            budget_spent = true;
                            if b + 1 < chunks.len() {
                                self.within = Some(Within {
                                    batch: b + 1,
                                    rng: epoch_rng,
                                    loss_sum,
                                    rows: (b + 1) * global,
                                    loss_rows: count,
                                });
                            }
                            break;
                        }
                        // --save-every: a checkpoint inside the epoch, as a
                        // stop writes one (the epoch's end saves as ever).
                        if let Some(n) = run.save_every
                            && b + 1 < chunks.len()
                            && self.adaptive.trainer().steps().is_multiple_of(n)
                        {
                            let within = Within {
                                batch: b + 1,
                                rng: epoch_rng,
                                loss_sum,
                                rows: (b + 1) * global,
                                loss_rows: count,
                            };
                            let what = format!("--save-every {n}'s checkpoint");
                            suspend(bar.as_ref(), || {
                                self.save_inside(epoch, within, checkpoint, run, writes, report, &what);
                            });
                            self.within = None;
                        }
                    }
                    Outcome::RolledBack(_, to) => {
                        self.record_decisions(bar.as_ref(), report);
                        // The logged steps past the one rolled back to go.
                        let back = self.adaptive.trainer().steps();
                        if self.step_records.last().is_some_and(|r| r.step > back) {
                            self.step_records.retain(|r| r.step <= back);
                            self.steps_behind = true;
                        }
                        self.interval = Interval::new();
                        // model.mlir names the model rolled back to.
                        self.after_rewrite(run)?;
                        self.report_decisions(bar.as_ref(), report);
                        (epoch, start_batch, self.rng) = (to.epoch, to.batch, to.rng);
                        continue 'epochs;
                    }
                }
                if let Some(p) = &mut profiler
                    && let Some(events) = p.after_step(self.adaptive.trainer_mut())
                {
                    let device = self.adaptive.trainer().backend().device();
                    if writes {
                        report::write_trace(&p.path, &device, &events)?;
                        trace = Some(p.path.clone());
                    }
                    profiler = None;
                }
            }
            start_batch = 0;
            // (The epoch's end, its evaluation and checkpoint, is not
            // counted in the next logged step's time.)
            let epoch_end = Instant::now();
            let (val_loss, val_accuracy) = self.evaluate()?;
            // An epoch whose last steps blew the parameters up shows it
            // here (the held-out loss, or the state itself before a save):
            // the run stops and the last good checkpoint stays.
            let evaluated = !self.data.held_out(self.batch).is_empty();
            let limit = self.reference_loss.map_or(f64::INFINITY, |r| DIVERGENCE_FACTOR * r.abs().max(1.0));
            if evaluated && !(val_loss.is_finite() && val_loss <= limit) {
                return Err(TrainError::Diverged(format!(
                    "the held-out loss became {val_loss:.4e} at the end of epoch {epoch} (lr {}): training diverged; \
                     {}; {}",
                    super::rate_text(run.lr),
                    self.remedy(),
                    self.kept_checkpoint(checkpoint)
                )));
            }
            // A clean held-out loss (from @loss) beside logits that are not
            // finite: @forward itself computes them.
            if evaluated && self.sig.classifies() && val_accuracy.is_nan() {
                return Err(TrainError::Diverged(format!(
                    "@forward gives logits that are not finite on held-out data at the end of epoch {epoch} (the \
                     held-out loss from @loss is {val_loss:.4}): the held-out accuracy would mean nothing; {}",
                    self.kept_checkpoint(checkpoint)
                )));
            }
            if checkpoint.is_some()
                && let Some(name) = non_finite_symbol(self.adaptive.trainer())
            {
                return Err(TrainError::Diverged(format!(
                    "{name} holds a value that is not finite at the end of epoch {epoch} (lr {}): training diverged; \
                     {}; {}",
                    super::rate_text(run.lr),
                    self.remedy(),
                    self.kept_checkpoint(checkpoint)
                )));
            }
            let trainer = self.adaptive.trainer();
            let steps = trainer.steps();
            let seconds = epoch_started.elapsed().as_secs_f64();
            let mut record = EpochRecord {
                epoch,
                step: steps,
                train_loss: loss_sum / count.max(1) as f64,
                val_loss,
                val_accuracy,
                unit: self.loss_unit().into(),
                seconds,
                steps_per_second: (steps - epoch_steps_before) as f64 / seconds.max(1e-9),
                params: param_count(trainer),
                train_flops: self.adaptive.flops,
                lr: last_lr,
                lr_applied: (!self.adaptive.policy().rules.is_empty()).then(|| self.adaptive.applied_lr()),
                grad_norm: None,
                layers: None,
                loss_scale: trainer.backend().symbol("loss_scale").and_then(|t| t.values.first().copied()),
                loss_scale_start: scale_before,
            };
            if let Some(o) = self.adaptive.observer().observations.last() {
                record.grad_norm = Some(o.grad_norm);
                record.layers = serde_json::to_value(&o.layers).ok();
            }
            // (Finite where evaluated: checked above.)
            let improved = evaluated && self.best.is_none_or(|(best, _)| val_loss < best);
            if improved {
                self.best = Some((val_loss, epoch));
            }
            if let Some(mut step) = pending_step.take() {
                (step.val_loss, step.val_accuracy) = (val_loss, val_accuracy);
                self.log_step(step, run, writes, report, bar.as_ref());
            }
            suspend(bar.as_ref(), || report.epoch(&record, run.epochs));
            // A registry that failed a write (a full disk) is left alone
            // for the rest of the run: a run with a gap in its curve is
            // left unfinished there, not recorded as whole. One locked
            // past its 30 s wait gets the epochs at the run's end (every
            // epoch would wait again).
            if let Some(r) = self.recorder.clone() {
                let writing = Instant::now();
                let written = match r.deferred.borrow_mut().as_mut() {
                    Some(d) => {
                        d.epochs.push(record.clone());
                        Ok(())
                    }
                    None => r.runs.epoch(r.id, &record),
                };
                self.registry_time += writing.elapsed();
                if let Err(e) = written {
                    if super::registry::is_locked(&e.to_string()) {
                        *r.deferred.borrow_mut() =
                            Some(Deferred { epochs: vec![record.clone()], decisions: Vec::new() });
                        suspend(bar.as_ref(), || report.note(&Recorder::deferring(&e)));
                    } else {
                        self.stop_recording(&r, &e.to_string(), bar.as_ref(), report);
                    }
                }
            }
            self.records.push(record);
            // (An epoch a budget cut short has not ended: a policy's
            // epoch-end rules wait for its end, in the resumed run.)
            if self.within.is_none()
                && self
                    .adaptive
                    .epoch_end(Progress { epoch, batch: steps_per_epoch, rng: epoch_rng }, Some(val_loss))?
                    .is_some()
            {
                self.after_rewrite(run)?;
            }
            self.report_decisions(bar.as_ref(), report);
            if !self.adaptive.policy().rules.is_empty() {
                self.check_agreement(self.adaptive.trainer().steps())?;
            }
            self.record_decisions(bar.as_ref(), report);
            if let Some(path) = checkpoint {
                if self.replay_until.is_some_and(|held| epoch < held) {
                    // The directory's later checkpoint stays until the
                    // replay reaches it.
                } else if writes {
                    if let Some(note) = self.reclaim_directory(path)? {
                        suspend(bar.as_ref(), || report.note(&note));
                    }
                    // (Moved in the middle of the save: saved again, in the
                    // directory made again.)
                    if let Err(e) = self.save(path, epoch, run) {
                        if path.parent().is_none_or(|d| d.is_dir()) {
                            return Err(e);
                        }
                        if let Some(note) = self.reclaim_directory(path)? {
                            suspend(bar.as_ref(), || report.note(&note));
                        }
                        self.save(path, epoch, run)?;
                    }
                    // (And after it: a save made the directory again where
                    // it went between the check and the save.)
                    if let Some(note) = self.reclaim_directory(path)? {
                        suspend(bar.as_ref(), || report.note(&note));
                    }
                    // The best epoch's checkpoint: a link to it (no copy
                    // where links work). Not kept is said; the run goes on.
                    if improved && let Some(dir) = path.parent() {
                        let best = dir.join(BEST);
                        if let Err(e) = link_or_copy(path, &best, true) {
                            suspend(bar.as_ref(), || {
                                report.note(&format!(
                                    "{}: epoch {epoch}'s checkpoint, the best so far, was not kept there: {e}",
                                    best.display()
                                ))
                            });
                        }
                    }
                } else {
                    (self.saved_epoch, self.saved_within) = (Some(epoch), self.within.map(|w| w.batch));
                }
            }
            // After the checkpoint: a metrics file or plot that cannot be
            // written (a full disk under --out) is said, and the run goes
            // on: each epoch writes them whole again from the records it
            // holds (the run ended there, over its plot, its checkpoints on
            // another disk).
            if writes {
                let mut failed = report::write_metrics(&metrics, &self.records).err();
                // (A step record that could not be appended, or one
                // rolled back: the file is written whole.)
                if failed.is_none() && self.steps_behind {
                    failed = report::write_steps(&run.out.join(STEPS_FILE), &self.step_records).err();
                    self.steps_behind = failed.is_some();
                }
                // The curve so far, for a run watched (or stopped) midway.
                if failed.is_none() && self.plotted.is_none_or(|t| t.elapsed() >= PLOT_EVERY) {
                    match report::plot(&run.out.join("plot.svg"), &self.records, &self.step_records) {
                        Ok(()) => self.plotted = Some(Instant::now()),
                        Err(e) => failed = Some(e),
                    }
                }
                match (failed, &self.unwritten) {
                    (Some(e), None) => {
                        suspend(bar.as_ref(), || {
                            report.note(&format!(
                                "{e}; training goes on, and each epoch writes the metrics and plot again"
                            ))
                        });
                        self.unwritten = Some(e.to_string());
                    }
                    (None, Some(_)) => {
                        suspend(bar.as_ref(), || {
                            report.note(&format!("{}: written again, whole (epoch {epoch})", metrics.display()))
                        });
                        self.unwritten = None;
                    }
                    _ => {}
                }
            }
            if budget_spent {
                if epoch < run.epochs || self.within.is_some() {
                    let resume = match (self.within, checkpoint.filter(|_| self.saved_epoch == Some(epoch))) {
                        (Some(w), Some(_)) => format!(
                            " after its batch {} of {steps_per_epoch} (its checkpoint says where: --resume with a \
                             larger budget trains the rest of it)",
                            w.batch
                        ),
                        (Some(w), None) => format!(" after its batch {} of {steps_per_epoch}", w.batch),
                        (None, _) => String::new(),
                    };
                    suspend(bar.as_ref(), || {
                        report.note(&format!(
                            "--flops-budget {:.4e} spent ({:.4e} training FLOPs) during epoch {epoch} of {}: the \
                             run ends with it{resume}",
                            run.flops_budget.unwrap_or_default(),
                            self.adaptive.flops,
                            run.epochs
                        ))
                    });
                }
                break;
            }
            // (From where the interval began, if it began during the
            // epoch's end: a step logged with the epoch's evaluation.)
            let from = self.interval.started.max(epoch_end);
            self.interval.started += from.elapsed();
            epoch += 1;
        }
        // The last step's stop check, which every rank started.
        if let Some(vote) = stop_vote.take() {
            vote.wait().map_err(RuntimeError::from)?;
        }
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if let (Some(held), Some(dir)) = (self.replay_until, &run.checkpoint_dir)
            && self.records.last().is_some_and(|r| r.epoch < held)
            && self.rank == 0
        {
            report.note(&format!(
                "the replay stopped at epoch {} before {}'s latest checkpoint (epoch {held}), which stays: no \
                 checkpoint written",
                self.records.last().map_or(0, |r| r.epoch),
                dir.display()
            ));
        }
        // A run shorter than its profile writes what it recorded.
        if let Some(p) = &mut profiler {
            let events = self.adaptive.trainer_mut().backend_mut().take_trace();
            if !events.is_empty() && writes {
                let device = self.adaptive.trainer().backend().device();
                report::write_trace(&p.path, &device, &events)?;
                trace = Some(p.path.clone());
            } else if events.is_empty() && writes {
                // Said, not a missing file found later.
                report.note(&format!(
                    "{}: not written: the run's {} steps all went to the profile's warm-up (2 steps), none was \
                     profiled",
                    p.path.display(),
                    self.adaptive.trainer().steps()
                ));
            }
        }
        let plot = run.out.join("plot.svg");
        if writes && self.steps_behind {
            match report::write_steps(&run.out.join(STEPS_FILE), &self.step_records) {
                Ok(()) => self.steps_behind = false,
                Err(e) => self.unwritten = Some(e.to_string()),
            }
        }
        if writes && let Err(e) = report::plot(&plot, &self.records, &self.step_records) {
            self.unwritten = Some(e.to_string());
        }
        // (The run's summary is its own: a plot it could not write is no
        // failure of the training.)
        if let Some(e) = self.unwritten.take() {
            report.note(&format!("the run's metrics and plot in {} are not all written ({e})", run.out.display()));
        }
        self.record_final_structure();
        let trainer = self.adaptive.trainer();
        Ok(Summary {
            steps: trainer.steps(),
            training_seconds: started.elapsed().saturating_sub(self.registry_time).as_secs_f64(),
            gemm_timing_seconds: aicf_runtime::registry::measuring_seconds() - gemm_timing,
            metrics,
            plot,
            trace,
            decisions: self.adaptive.decisions().len(),
            decisions_log: run.adapt.as_ref().map(|_| run.out.join("decisions.jsonl")),
            params: param_count(trainer),
            train_flops: self.adaptive.flops,
            best: self.best,
            stopped_early,
            records: self.records,
        })
    }

    /// Records in the run registry the structure the run reached (grown,
    /// or as it started).
    fn record_final_structure(&self) {
        if let Some(r) = &self.recorder {
            let trainer = self.adaptive.trainer();
            let flops = trainer.backend().function("train_step").map_or(0.0, |f| f.flops() as f64);
            let name = self.model.display().to_string();
            if let Ok(f) =
                super::registry::fingerprint(trainer.source(), &name, flops * (self.replicas * self.micro) as f64)
            {
                let _ = r.runs.final_structure(r.id, &f);
            }
        }
    }

    /// After a decision changed the model: save the new model beside the
    /// checkpoint ([`Loop::report_decisions`] prints the decision).
    fn after_rewrite(&mut self, run: &RunOptions) -> Result<()> {
        self.update_version(run.checkpoint_dir.as_deref());
        if let Some(dir) = &run.checkpoint_dir {
            self.write_version(dir)?;
        }
        Ok(())
    }

    /// Prints the decisions not printed yet: the accepted rewrites and
    /// rollbacks, and the rewrites a check rejected (the model unchanged).
    fn report_decisions(&mut self, bar: Option<&indicatif::ProgressBar>, report: &mut dyn Report) {
        let decisions = self.adaptive.decisions();
        for d in decisions.iter().skip(self.reported_decisions) {
            let summary = d.summary();
            suspend(bar, || report.decision(&summary));
        }
        self.reported_decisions = decisions.len();
    }

    /// The unit of the losses reported: nats (per character of a text)
    /// for a cross-entropy, none for a loss of the model's own (a squared
    /// error, an L1 loss, a sum: every regression was said in nats).
    fn loss_unit(&self) -> &'static str {
        let cross_entropy = self.sig.mean_cross_entropy || (self.sig.classifies() && self.sig.sets_state);
        if cross_entropy || !matches!(self.data.loss_unit(), "nats") { self.data.loss_unit() } else { "" }
    }

    /// The held-out loss (mean over every held-out example of `@loss`, or
    /// where the loss takes dropout's seed, the cross-entropy of
    /// `@forward`'s logits)
    /// and accuracy (classifiers), NaN where there is none.
    /// Whether every target of the step's micro-batches is the loss's
    /// ignore_index (a batch of padding alone).
    fn all_ignored(&self, micro: &[(Vec<Tensor>, f64)]) -> bool {
        let Some(ignored) = self.sig.ignore_index else { return false };
        let Some(at) = self.sig.fed().iter().position(|i| i.role == Role::Target) else { return false };
        micro.iter().all(|(t, _)| t.get(at).is_some_and(|y| y.values.iter().all(|&v| v == ignored as f64)))
    }

    /// The record of a step `--log-every` or `--eval-every` logs: the
    /// steps since the last (not evaluated yet).
    fn step_record(&self, epoch: usize, batch: usize, steps_per_epoch: usize, lr: f64) -> StepRecord {
        let seconds = self.interval.started.elapsed().as_secs_f64();
        StepRecord {
            step: self.adaptive.trainer().steps(),
            epoch,
            batch,
            steps_per_epoch,
            train_loss: self.interval.loss_sum / self.interval.rows.max(1) as f64,
            steps: self.interval.steps,
            val_loss: f64::NAN,
            val_accuracy: f64::NAN,
            unit: self.loss_unit().into(),
            lr,
            seconds,
            steps_per_second: self.interval.steps as f64 / seconds.max(1e-9),
        }
    }

    /// Says a logged step, appends it to `steps.jsonl` (rank 0), and
    /// starts the next interval (after any evaluation: not counted in it).
    fn log_step(
        &mut self,
        record: StepRecord,
        run: &RunOptions,
        writes: bool,
        report: &mut dyn Report,
        bar: Option<&indicatif::ProgressBar>,
    ) {
        suspend(bar, || report.step(&record, run.epochs));
        if writes && !self.steps_behind {
            let path = run.out.join(STEPS_FILE);
            if let Err(e) = report::append_step(&path, &record) {
                self.steps_behind = true;
                if self.unwritten.is_none() {
                    suspend(bar, || {
                        report.note(&format!("{e}; training goes on, and each epoch writes the records again"))
                    });
                    self.unwritten = Some(e.to_string());
                }
            }
        }
        self.step_records.push(record);
        self.interval = Interval::new();
    }

    fn evaluate(&mut self) -> Result<(f64, f64)> {
        let batches = self.data.held_out(self.batch);
        if batches.is_empty() {
            return Ok((f64::NAN, f64::NAN));
        }
        let classifies = self.sig.classifies();
        // A classifier whose @loss normalizes by the batch's statistics (a
        // batch norm in training mode) is scored as PyTorch validates in
        // eval mode, and as `aicf eval` scores it: the cross-entropy of
        // @forward's logits (the running statistics). Its @loss gave a
        // held-out loss by the held-out batch's own statistics, beside an
        // accuracy by the running ones.
        // A model with dropout: its @loss without the dropout
        // (`@__aicf_loss_eval`) where the artifact has it; a classifier
        // whose @loss is a mean cross-entropy by its logits' cross-entropy,
        // the same figure at one forward pass. (Without that form, where
        // @loss sets state: a regression by the mean squared error of
        // @forward's output.)
        let loss_eval = self.adaptive.trainer().has_loss_eval();
        let held_out_fn = if loss_eval { crate::pipeline::LOSS_EVAL } else { "loss" };
        let rng = self.sig.takes_rng();
        let by_logits =
            (classifies && (self.sig.sets_state || (rng && self.sig.mean_cross_entropy))) || (rng && !loss_eval);
        let (mut squared, mut elements) = (0.0, 0usize);
        let (mut loss_sum, mut loss_rows) = (0.0, 0usize);
        let (mut nll, mut correct, mut targets) = (0.0, 0usize, 0usize);
        let mut bad_logits = 0usize;
        let (rank, replicas) = (self.rank, self.replicas);
        let trainer = self.adaptive.trainer_mut();
        // Data parallel: replica r evaluates batches r, r + N, ...; the
        // sums are added over the replicas.
        for ids in batches.iter().skip(rank).step_by(replicas) {
            let fed = self.data.batch(Split::HeldOut, ids);
            let data: Vec<&Tensor> =
                fed.iter().zip(self.sig.fed()).filter(|(_, i)| i.role == Role::Data).map(|(t, _)| t).collect();
            if classifies {
                let logits = trainer.predict(&data)?;
                let (Some(logits), Some(labels)) = (logits.first(), fed.last()) else { continue };
                // An argmax over NaN would be an accuracy of nothing:
                // counted, and the accuracy is NaN.
                let finite = logits.values.iter().all(|v| v.is_finite());
                bad_logits += usize::from(!finite);
                let classes = logits.shape.last().copied().unwrap_or(1).max(1);
                let rows = logits.values.chunks(classes).zip(&labels.values).take_while(|_| finite);
                // A label the loss ignores counts for nothing.
                for (row, &label) in rows.filter(|(_, l)| self.sig.counts_label(**l)) {
                    let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |b| b.0);
                    correct += (best as f64 == label) as usize;
                    targets += 1;
                    if by_logits {
                        // (Of a softmax's probabilities at @forward's end
                        // too: `Scores`.)
                        nll += self.sig.scores.nll(row, label as usize);
                    }
                }
            }
            if by_logits && !classifies {
                let out = trainer.predict(&data)?;
                if let (Some(y), Some(target)) = (out.first(), fed.last())
                    && y.values.len() == target.values.len()
                {
                    squared += y.values.iter().zip(&target.values).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
                    elements += y.values.len();
                }
            }
            // Every batch counts by its rows (a smaller last one runs its
            // variant), so the loss is the mean over held-out examples.
            let rng = rng_inputs(&self.sig, 0, 0);
            let refs: Vec<&Tensor> = fed.iter().chain(&rng).collect();
            if !by_logits && trainer.backend().compiled_for(held_out_fn, &refs) {
                loss_sum += held_out_loss(trainer, &self.sig, &fed)? * ids.len() as f64;
                loss_rows += ids.len();
            }
        }
        if let Some(c) = &self.comm {
            let sums = Values::F64(vec![
                loss_sum,
                loss_rows as f64,
                nll,
                correct as f64,
                targets as f64,
                bad_logits as f64,
                squared,
                elements as f64,
            ]);
            let Values::F64(all) = c.sum(sums, "the held-out metrics").map_err(RuntimeError::from)? else {
                return Err(TrainError::Input("the held-out metrics came back in another type".into()));
            };
            (loss_sum, nll) = (all[0], all[2]);
            (loss_rows, correct, targets) = (all[1] as usize, all[3] as usize, all[4] as usize);
            bad_logits = all[5] as usize;
            (squared, elements) = (all[6], all[7] as usize);
        }
        let loss = if by_logits && !classifies {
            if elements > 0 { squared / elements as f64 } else { f64::NAN }
        } else if by_logits {
            if targets > 0 { nll / targets as f64 } else { f64::NAN }
        } else if loss_rows > 0 {
            loss_sum / loss_rows as f64
        } else {
            f64::NAN
        };
        let accuracy =
            if classifies && targets > 0 && bad_logits == 0 { correct as f64 / targets as f64 } else { f64::NAN };
        let loss = if by_logits && bad_logits > 0 { f64::NAN } else { loss };
        Ok((loss, accuracy))
    }
}

/// The rows `[r B, (r + 1) B)` of a global batch of `len` rows that
/// replica `rank` trains on (empty past its end).
fn shard_range(len: usize, batch: usize, rank: usize) -> std::ops::Range<usize> {
    let start = (rank * batch).min(len);
    start..((rank + 1) * batch).min(len)
}

/// Rank 0's checkpoint at `path`, sent to every replica: rank 0 reads it,
/// the others write what they receive to `dir/resume.safetensors` and
/// resume from that (the replicas need not share a file system).
/// What every replica of a data-parallel run shares, as (key, value): the
/// run's record (model, data, optimizer and its settings, rate and its
/// schedule, seed, split, policy), what shapes its collectives (the
/// gradient buckets, the micro-batches) and what ends it. The memory
/// budget, shape padding and attention's backward are among them: they
/// change the compiled step's order and buffer sharing, from which
/// `ll-bucket-collectives` groups the all-reduces, so replicas that differ
/// there could sum gradients in other buckets (an MPI error, or, where the
/// sizes happen to match, gradients summed with the wrong partners).
fn replica_settings(options: &Options, run: &RunOptions, record: &[(&'static str, String)]) -> Vec<(String, String)> {
    let mut settings: Vec<(String, String)> = record.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let more = [
        ("epochs", run.epochs.to_string()),
        ("flops_budget", run.flops_budget.map_or("none".into(), |b| format!("{b:e}"))),
        ("windows_per_epoch", format!("{:?}", run.data.windows_per_epoch)),
        ("eval_windows", run.data.eval_windows.to_string()),
        ("bucket_size", options.bucket_bytes.to_string()),
        ("accumulate", options.accumulate.to_string()),
        ("memory_budget", options.memory_budget.as_ref().map_or("none".into(), |b| b.text())),
        // Features standardized by one replica and not by another would
        // train one model on two preprocessings.
        ("standardize", run.data.standardize.to_string()),
        ("shape_padding", options.shape_padding.to_string()),
        ("attention_backward", format!("{:?}", options.fused_attention_backward)),
        ("conv", format!("{:?}", options.conv_as_gemm)),
    ];
    settings.extend(more.into_iter().map(|(k, v)| (k.to_string(), v)));
    settings
}

/// Refuses a replica whose `settings` ([`replica_settings`]) differ from
/// rank 0's, naming each that differs: rank 0 sends its own to every
/// replica.
fn check_replicas_agree(comm: &dyn Communicator, settings: &[(String, String)]) -> Result<()> {
    let mut bytes: Vec<u8> = settings.iter().flat_map(|(k, v)| format!("{k}\t{v}\n").into_bytes()).collect();
    comm.broadcast(&mut bytes, 0, "the run's settings").map_err(RuntimeError::from)?;
    if comm.rank() == 0 {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&bytes);
    let first: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('\t')).collect();
    let differ: Vec<String> = settings
        .iter()
        .filter_map(|(k, v)| {
            let theirs = first.get(k.as_str()).copied().unwrap_or("none");
            let same = theirs == v || (k == "data" && same_data(theirs, v));
            (!same).then(|| format!("{k} {v} (rank 0: {theirs})"))
        })
        .collect();
    if differ.is_empty() {
        return Ok(());
    }
    Err(TrainError::Input(format!(
        "replica {} of the data-parallel run differs from rank 0 in {}: every replica runs the same command on the \
         same data",
        comm.rank(),
        differ.join("; ")
    )))
}

fn share_checkpoint(comm: &dyn Communicator, path: &Path, dir: &Path) -> Result<PathBuf> {
    let mut bytes = Vec::new();
    // Rank 0's name for the file: an error in the copy names the file it
    // came from (a replica named its own checkpoint, the same path on
    // its own disk, as damaged, where rank 0's was).
    let mut name = path.display().to_string().into_bytes();
    comm.broadcast(&mut name, 0, "the checkpoint's path").map_err(RuntimeError::from)?;
    if comm.rank() == 0 {
        bytes = std::fs::read(path).map_err(|e| TrainError::Io { path: path.to_path_buf(), message: e.to_string() })?;
    }
    comm.broadcast(&mut bytes, 0, &format!("the checkpoint {}", path.display())).map_err(RuntimeError::from)?;
    if comm.rank() == 0 {
        return Ok(path.to_path_buf());
    }
    create_dir(dir)?;
    let local = dir.join("resume.safetensors");
    crate::codegen::write_atomically(&local, &bytes)?;
    if let Ok(mut copy) = SHARED_COPY.lock() {
        *copy = Some((
            local.display().to_string(),
            format!("{} (rank 0's, which it sent to this rank)", String::from_utf8_lossy(&name)),
        ));
    }
    Ok(local)
}

/// A replica's copy of rank 0's checkpoint and the checkpoint it copies
/// ([`share_checkpoint`]), as their paths read.
static SHARED_COPY: std::sync::Mutex<Option<(String, String)>> = std::sync::Mutex::new(None);

/// `message` (a replica's error) with the replica's private copy of the
/// checkpoint named as the checkpoint the user gave: rank 1 named
/// `<out>/rank1/resume.safetensors`, a file the user never made.
pub fn as_the_user_named(message: &str) -> String {
    match SHARED_COPY.lock().ok().and_then(|c| c.clone()) {
        Some((copy, original)) => message.replace(&copy, &original),
        None => message.to_string(),
    }
}

/// Creates `dir` and its parents; a file in the way is named as such.
/// `lock.try_lock()`, tried again for up to a second while another holds
/// it: a process this one forks (a compiler it runs) shares the lock's open
/// file until it execs, so a run that has just ended can hold it for a
/// moment longer (a test's second run in one process was refused so, under
/// load); a run that is training holds it far longer.
fn try_lock_briefly(lock: &std::fs::File) -> std::result::Result<(), std::fs::TryLockError> {
    let mut tries = 0;
    loop {
        match lock.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// An error creating a file where `what` goes: where the system says the
/// place is not writable, with the option (`flag`) that chooses another.
fn unwritable(e: std::io::Error, what: &str, flag: &str) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            format!("{e}: {what} cannot be written here; give {flag} a writable directory")
        }
        _ => e.to_string(),
    }
}

pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    make_dir(dir).map_err(|message| TrainError::Io { path: dir.to_path_buf(), message })
}

/// [`create_dir`] for the directory a flag names, the flag said (the same
/// words came for --out and --checkpoint-dir).
fn create_flag_dir(dir: &Path, flag: &str) -> Result<()> {
    make_dir(dir).map_err(|message| TrainError::Io { path: dir.to_path_buf(), message: format!("{message} ({flag})") })
}

/// Creates `dir` and the directories on its way; the error says why not in
/// words: which ancestor is a file, or that the place cannot hold one
/// (`create_dir_all`'s bare "File exists" or "No such file or directory"
/// named neither). The caller names `dir` itself.
pub fn make_dir(dir: &Path) -> std::result::Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        let blocked = dir.ancestors().find(|a| a.exists() && !a.is_dir());
        match blocked {
            Some(file) => format!(
                "cannot create the directory: {} is {}",
                file.display(),
                if file.is_file() { "a file" } else { "not a directory (a device, pipe or socket)" }
            ),
            None => match e.kind() {
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
                    format!(
                        "{e}: the directory cannot be made here (give --out, or --checkpoint-dir, a writable place)"
                    )
                }
                _ => format!("cannot create the directory: {e}"),
            },
        }
    })
}

/// The first parameter or state symbol of `trainer` holding a NaN or an
/// infinity.
fn non_finite_symbol(trainer: &Trainer) -> Option<String> {
    trainer.state().into_iter().find(|(_, t)| t.values.iter().any(|v| !v.is_finite())).map(|(name, _)| name)
}

/// The checkpoint before a checkpoint directory's `last.safetensors`.
pub const PREVIOUS: &str = "prev.safetensors";

/// The checkpoint of the epoch with the lowest held-out loss so far, in a
/// run's checkpoint directory (a link to that epoch's `last.safetensors`).
pub const BEST: &str = "best.safetensors";

/// Checkpoint metadata: the lowest held-out loss of the run so far and its
/// epoch (what `best.safetensors` holds, and early stopping counts from).
const BEST_KEYS: [&str; 2] = ["best_val_loss", "best_epoch"];

/// `dir/best.safetensors` where it holds `best` (the loss and its epoch):
/// a run forked into another directory, or a replay that stopped before
/// its directory's later checkpoints, carries a best it did not write
/// there.
pub fn best_checkpoint(dir: &Path, (loss, epoch): (f64, usize)) -> Option<PathBuf> {
    let path = dir.join(BEST);
    let meta = aicf_runtime::checkpoint::read_metadata(&path).ok()?;
    (meta.get("epoch") == Some(&epoch.to_string()) && meta.get(BEST_KEYS[0]) == Some(&loss.to_string())).then_some(path)
}

/// Where `checkpoint` (a run's `last.safetensors`) does not read, the
/// checkpoint before it, said as a way on: `prev.safetensors`, and its
/// epoch.
pub fn previous_checkpoint_note(checkpoint: &Path) -> Option<String> {
    if checkpoint.file_name()? != "last.safetensors" {
        return None;
    }
    let previous = checkpoint.with_file_name(PREVIOUS);
    let meta = aicf_runtime::checkpoint::read_metadata(&previous).ok()?;
    let epoch = meta.get("epoch")?;
    Some(format!(
        "{} holds epoch {epoch}, the checkpoint saved before this one (give it to --resume-from, or to \
         --checkpoint)",
        previous.display()
    ))
}

/// A link to the file `from` names (or, with `copy`, a copy where links
/// are not possible), made beside `to` under a temporary name, that
/// [`KeptLink::commit`] renames over `to` (dropped, it is removed): `to`
/// is replaced only once the caller says so. `None` where `from` is `to`.
fn stage_link(from: &Path, to: &Path, copy: bool) -> Result<Option<KeptLink>> {
    // The file a link names: a hard link to a symbolic `last` linked the
    // link, and renaming it over `to`'s target left links to themselves
    // where every checkpoint had been.
    let from = aicf_runtime::checkpoint::through_links(from);
    let to = aicf_runtime::checkpoint::through_links(to);
    if super::same_path(&from, &to) {
        return Ok(None);
    }
    aicf_runtime::checkpoint::refuse_replacing_special(&to)
        .map_err(|message| TrainError::Io { path: to.clone(), message })?;
    aicf_runtime::checkpoint::remove_stale_partials(&to);
    let tmp = partial_of(&to);
    let _ = std::fs::remove_file(&tmp);
    // (Named for a signal's handler to remove: held through a save, it
    // kept the checkpoint before the last alive after a Ctrl-C.)
    let guard = aicf_runtime::checkpoint::PartialGuard::new(&tmp);
    let kept = KeptLink { tmp, to, _guard: guard };
    std::fs::hard_link(&from, &kept.tmp)
        .or_else(|e| if copy { std::fs::copy(&from, &kept.tmp).map(|_| ()) } else { Err(e) })
        .map_err(|e| TrainError::Io { path: kept.to.clone(), message: e.to_string() })?;
    Ok(Some(kept))
}

/// The temporary name [`stage_link`] makes `to`'s link under (`to` the
/// file a link names).
fn partial_of(to: &Path) -> PathBuf {
    to.with_extension(format!("partial{}", std::process::id()))
}

/// See [`stage_link`].
struct KeptLink {
    tmp: PathBuf,
    to: PathBuf,
    _guard: aicf_runtime::checkpoint::PartialGuard,
}

impl KeptLink {
    fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.to)
            .map_err(|e| TrainError::Io { path: self.to.clone(), message: e.to_string() })?;
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Drop for KeptLink {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Links `from` as `to` (or, with `copy`, copies it where links are not
/// possible), replacing `to` atomically.
fn link_or_copy(from: &Path, to: &Path, copy: bool) -> Result<()> {
    // (Named before a copy, which may take a while.)
    let _guard = aicf_runtime::checkpoint::PartialGuard::new(&partial_of(&aicf_runtime::checkpoint::through_links(to)));
    let Some(kept) = stage_link(from, to, copy)? else { return Ok(()) };
    kept.commit()
}

/// What `@loss` takes for `examples` at train step `step` (before the
/// learning rate): the fed inputs, then dropout's seed and the step's
/// offset where the loss takes them (2^24 counters per step and dropout op,
/// so no two steps share a mask).
pub fn step_inputs(
    sig: &Signature,
    data: &Dataset,
    split: Split,
    examples: &[usize],
    seed: u64,
    step: u64,
) -> Vec<Tensor> {
    let mut inputs = data.batch(split, examples);
    if split == Split::Train {
        data.augment(&mut inputs, examples, seed, step);
    }
    inputs.extend(rng_inputs(sig, seed, step));
    inputs
}

/// `@loss` (without dropout where the artifact has that form:
/// [`Trainer::held_out_loss`]) on a held-out batch `fed`, the random seed
/// and offset added where `@loss` takes them: seed 0 at offset 0, so that
/// a model's noise (`hl.random_like`, which that form keeps) is the same at
/// every evaluation, and a form without dropout or noise reads neither.
pub(crate) fn held_out_loss(trainer: &mut Trainer, sig: &Signature, fed: &[Tensor]) -> Result<f64> {
    let rng = rng_inputs(sig, 0, 0);
    let refs: Vec<&Tensor> = fed.iter().chain(&rng).collect();
    trainer.held_out_loss(&refs)
}

/// The dropout seed of part `part` of a step (rank r's j-th micro-batch is
/// `r M + j`): each part draws its own masks.
pub(crate) fn part_seed(seed: u64, part: usize) -> u64 {
    seed.wrapping_add((part as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) & ((1 << 52) - 1)
}

/// The random ops' (dropout's, noise's) seed and step offset where `@loss`
/// takes them (none else): what follows the fed inputs.
pub fn rng_inputs(sig: &Signature, seed: u64, step: u64) -> Vec<Tensor> {
    let mut inputs = Vec::new();
    for i in &sig.inputs {
        match i.role {
            Role::Seed => inputs.push(Tensor::scalar((seed & ((1 << 52) - 1)) as f64, DType::I64)),
            Role::Offset => inputs.push(Tensor::scalar((step * aicf_runtime::rng::STEP_BLOCKS) as f64, DType::I64)),
            _ => {}
        }
    }
    inputs
}

/// Records the kernel timeline of a few steps after a warm-up.
struct Profiler {
    path: PathBuf,
    /// Steps still to record.
    left: usize,
    /// Steps still to skip (the first calls set up the device).
    warm: usize,
    recording: bool,
}

impl Profiler {
    fn before_step(&mut self, trainer: &mut Trainer) {
        if self.warm == 0 && self.left > 0 && !self.recording {
            trainer.backend_mut().set_profiling(true);
            self.recording = true;
        }
    }

    /// The events, once the last step to record has run.
    fn after_step(&mut self, trainer: &mut Trainer) -> Option<Vec<aicf_runtime::TraceEvent>> {
        if self.warm > 0 {
            self.warm -= 1;
            return None;
        }
        self.left = self.left.saturating_sub(1);
        if self.left > 0 {
            return None;
        }
        let events = trainer.backend_mut().take_trace();
        trainer.backend_mut().set_profiling(false);
        Some(events)
    }
}

fn progress_bar(run: &RunOptions, steps_per_epoch: usize, first_epoch: usize) -> Option<indicatif::ProgressBar> {
    if !run.progress {
        return None;
    }
    let total = run.epochs.saturating_add(1).saturating_sub(first_epoch).saturating_mul(steps_per_epoch);
    let bar = indicatif::ProgressBar::new(total as u64);
    let style = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {per_sec}  ETA {eta}  {msg}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

/// Runs `f` with the progress bar out of the way of printed lines.
fn suspend(bar: Option<&indicatif::ProgressBar>, f: impl FnOnce()) {
    match bar {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_that_cannot_be_written_names_the_option_that_moves_it() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let m = unwritable(denied, "the checkpoints", "--checkpoint-dir");
        assert!(
            m.ends_with("the checkpoints cannot be written here; give --checkpoint-dir a writable directory"),
            "{m}"
        );
        let other = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!unwritable(other, "the checkpoints", "--checkpoint-dir").contains("writable"));
    }

    /// One run at a time writes a run directory: a second claim fails and
    /// says why while the first holds it, and succeeds once it is released.
    #[test]
    fn a_run_directory_is_claimed_by_one_run_at_a_time() {
        let dir = std::env::temp_dir().join(format!("aicf-run-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = claim_run_dir(&dir).unwrap();
        let e = claim_run_dir(&dir).err().unwrap().to_string();
        assert!(e.ends_with("another run is writing its metrics here; give this one another --out"), "{e}");
        // A checkpoint directory's lock is another file: one directory can
        // be both.
        let (checkpoints, _) = claim_checkpoint_dir(&dir, None, 0).unwrap();
        drop(first);
        drop(checkpoints);
        assert!(claim_run_dir(&dir).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Each schedule reads back from its record, as a resume without the
    /// flags takes it.
    #[test]
    fn a_schedules_record_reads_back() {
        for schedule in [
            LrSchedule::Constant,
            LrSchedule::Cosine { warmup_steps: 10, min_factor: 0.1 },
            LrSchedule::Wsd { warmup_steps: 0, decay_fraction: 0.25, decay_steps: None, min_factor: 0.0 },
            LrSchedule::Wsd { warmup_steps: 5, decay_fraction: 0.2, decay_steps: Some(40), min_factor: 0.05 },
        ] {
            let text = schedule.describe();
            assert_eq!(LrSchedule::from_description(&text).map(|s| s.describe()), Some(text.clone()), "{text}");
        }
        assert!(LrSchedule::from_description("cosine, warm-up x steps, down to 0.1 x lr").is_none());
    }
}
