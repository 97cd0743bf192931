//! The adaptive run: each step under the policy's rules, every rewrite a
//! transaction (kept model, probe check, watch window, rollback).

use super::{
    Action, Grown, Observation, Observer, Operator, Policy, Result, State, Template, Trigger, grow_with, grown_source,
    keeps_ages, step_flops,
};
use crate::train::{Metrics, TrainError, Trainer};
use aicf_runtime::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Where the caller's data loop is: the epoch, the batch within it, and the
/// data-order RNG state the epoch's order was drawn from. A rollback hands
/// back the one saved with the state it restores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub epoch: usize,
    pub batch: usize,
    pub rng: u64,
}

/// One decision of the policy, as logged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// Of an inexact rewrite: the rise of the probe loss the policy
    /// allows (its `max_loss_increase`).
    pub max_rise: Option<f64>,
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
    #[serde(deserialize_with = "super::pairs_nan_if_null")]
    pub candidates: Vec<(String, f64)>,
}

impl Decision {
    pub fn summary(&self) -> String {
        let losses = match (self.loss_before, self.loss_after, self.max_rise) {
            // (An inexact rewrite's loss moves by design: said, so that it
            // does not read as a broken function-preserving one.)
            (Some(a), Some(b), Some(m)) if !self.exact => {
                format!(", probe loss {a:.6} -> {b:.6} (inexact rewrite: a rise of up to {:.2}% allowed)", 100.0 * m)
            }
            (Some(a), Some(b), _) => format!(", probe loss {a:.6} -> {b:.6}"),
            _ => String::new(),
        };
        let diff = match self.diff.len() {
            0 => String::new(),
            1..=8 => format!(" [{}]", self.diff.join(", ")),
            n => format!(" [{}, ... {} more changes in the decision log]", self.diff[..6].join(", "), n - 6),
        };
        let compile = if self.kernels == 0 {
            format!("compiled ahead, {:.2} s waiting for it", self.waited_seconds)
        } else {
            format!("{} of {} kernels compiled", self.compiled_kernels, self.kernels)
        };
        format!(
            "step {} (epoch {}): {} on {} -> {}{diff}{losses}, pause {:.2} s ({compile}){}",
            self.step,
            self.epoch,
            self.action,
            self.trigger,
            self.outcome,
            self.pause_seconds,
            if self.reason.is_empty() { String::new() } else { format!(": {}", self.reason) }
        )
    }
}

/// Steps (and observations) before the last three that the instability
/// trigger compares them with.
const INSTABILITY_WINDOW: usize = 20;

/// What one step of an adaptive run did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Trained; `Some(i)`: decision `i` then changed the model.
    Trained(Metrics, Option<usize>),
    /// Rolled back (decision `i`): continue the data loop from `Progress`.
    RolledBack(usize, Progress),
}

/// What an adaptive run carries through a checkpoint to go on exactly as
/// it would have: its decisions, the rules' counters, the losses its
/// triggers read, and the model it still watches (whose state the
/// checkpoint holds beside the current one).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Snapshot {
    pub decisions: Vec<Decision>,
    pub last_rewrite: u64,
    pub rewrites: usize,
    pub fired: Vec<usize>,
    /// Rollback rules that said they had nothing to go back to (absent in
    /// older checkpoints: said again at most once).
    #[serde(default)]
    pub nothing_said: Vec<bool>,
    pub rejected: Vec<Operator>,
    pub rolled_back_to: Vec<u64>,
    pub lr_factor: f64,
    /// The step the run's learning-rate schedule counts from (the last
    /// growth's under `restart_schedule`; 0 in older checkpoints).
    #[serde(default)]
    pub schedule_from: u64,
    pub flops: f64,
    /// The most recent losses, as many as the triggers read.
    #[serde(deserialize_with = "super::pairs_nan_if_null")]
    pub losses: Vec<(u64, f64)>,
    #[serde(deserialize_with = "super::pairs_nan_if_null")]
    pub val_losses: Vec<(u64, f64)>,
    pub observations: Vec<Observation>,
    /// The run's early loss and gradient-norm scales, which a spike must
    /// rise by a part of (absent in older checkpoints: measured again from
    /// the losses kept, which late in a run are smaller, so a resumed run
    /// saw spikes the uninterrupted one did not).
    #[serde(default)]
    pub loss_scale: Option<f64>,
    #[serde(default)]
    pub grad_scale: Option<f64>,
    /// Where the epoch-end state an instability rule returns to was taken:
    /// it is the checkpoint's own state.
    pub last_good: Option<(u64, Progress)>,
    pub kept: Option<KeptModel>,
}

/// The model a watched rewrite replaced: its source and where it was.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeptModel {
    pub source: String,
    pub op: Option<Operator>,
    pub steps: u64,
    pub progress: Progress,
    pub decision: Option<usize>,
    pub until: u64,
    /// The learning-rate factor before the rewrite (a rollback restores it).
    #[serde(default = "one")]
    pub lr_factor: f64,
    /// Where the schedule counted from before the rewrite.
    #[serde(default)]
    pub schedule_from: u64,
}

fn one() -> f64 {
    1.0
}

/// The lowest factor a rollback rule's learning-rate factors, compounded,
/// take the run's rate to: past it the rule stops (a rate 1000x lower
/// trains little; lowering it further only hid the rule's misfires).
pub const LOWEST_ROLLBACK_FACTOR: f64 = 1e-3;

/// Observations a snapshot keeps: the instability trigger reads the last
/// 21, the metrics the last one.
const KEPT_OBSERVATIONS: usize = 32;

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
    /// The learning-rate factor in effect there.
    lr_factor: f64,
    /// Where the learning-rate schedule counted from there.
    schedule_from: u64,
}

/// A [`Trainer`] run under a [`Policy`].
pub struct Adaptive {
    trainer: Trainer,
    policy: Policy,
    observer: Observer,
    decisions: Vec<Decision>,
    log: Option<(PathBuf, std::fs::File)>,
    /// What the data's reading adds to a checkpoint (its feature scale or
    /// standardization, its vocabulary), written into the before-rewrite
    /// checkpoints too: eval reads the data by it.
    data_metadata: BTreeMap<String, String>,
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
    /// Rollback rules that fired with nothing to go back to and said so
    /// (once each: a plateau trigger fires every epoch).
    nothing_said: Vec<bool>,
    rejected: Vec<Operator>,
    rolled_back_to: Vec<u64>,
    probe: Option<Vec<Tensor>>,
    fork_train: Vec<Vec<Tensor>>,
    fork_eval: Vec<Vec<Tensor>>,
    lr_factor: f64,
    /// The step the run's learning-rate schedule counts from
    /// ([`Adaptive::schedule_from`]).
    schedule_from: u64,
    /// The learning rate of the last step (a fork trains at it), and the
    /// rate it trained at (times the factors, [`Adaptive::lr_scale`]).
    last_lr: f64,
    applied_lr: f64,
    /// The background compile of the models the rules may grow into.
    prefetch: Prefetch,
    /// Whether it was started for the current model.
    prefetched: bool,
    /// Training FLOPs so far ([`step_flops`]).
    pub flops: f64,
    /// The next step's inputs, copied to a GPU while this step runs.
    next: Option<Vec<Tensor>>,
    /// Whether the growth being applied starts the optimizer state again
    /// (its rule's `optimizer_state = "reset"`).
    reset_optimizer: bool,
    /// The growth being applied's rule's `shrink` (1: none).
    shrink: f64,
}

/// The background compile's thread, joined when dropped: a run that
/// ends (or is interrupted) while it compiles must not exit under it. The
/// process's exit runs LLVM's static destructors, and a thread still in
/// MLIR or LLVM code then crashes the process (a segmentation fault after
/// a run that had finished, seen in CI).
/// The thread stops before its next model once `cancel` is set (a run
/// that ends waits for the compile under way only, not the rest).
struct Prefetch(Option<std::thread::JoinHandle<()>>, Arc<AtomicBool>);

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.1.store(true, Ordering::SeqCst);
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
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
            data_metadata: BTreeMap::new(),
            kept: None,
            last_good: None,
            last_rewrite: 0,
            rewrites: 0,
            fired: vec![0; rules],
            idle: vec![false; rules],
            nothing_said: vec![false; rules],
            rejected: Vec::new(),
            rolled_back_to: Vec::new(),
            probe: None,
            fork_train: Vec::new(),
            fork_eval: Vec::new(),
            lr_factor: 1.0,
            schedule_from: 0,
            last_lr: 0.0,
            applied_lr: 0.0,
            prefetch: Prefetch(None, Arc::new(AtomicBool::new(false))),
            prefetched: false,
            flops: 0.0,
            next: None,
            reset_optimizer: false,
            shrink: 1.0,
        }
    }

    /// The next step's inputs (before the learning rate), which a GPU copies
    /// while the next [`Adaptive::step`] computes.
    pub fn stage_next(&mut self, next: Vec<Tensor>) {
        self.next = Some(next);
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

    /// The run's adaptive state at an epoch end, and the state of the model
    /// a watched rewrite replaced (if one is watched), for a checkpoint.
    pub fn snapshot(&self) -> (Snapshot, Option<State>) {
        let windows = self
            .policy
            .rules
            .iter()
            .map(|r| match r.trigger {
                Trigger::Plateau { window, .. } => 2 * window,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let keep = windows.max(3 + INSTABILITY_WINDOW) + 1;
        let tail = |v: &[(u64, f64)], n: usize| v[v.len().saturating_sub(n)..].to_vec();
        let steps = self.trainer.steps();
        let snapshot = Snapshot {
            decisions: self.decisions.clone(),
            last_rewrite: self.last_rewrite,
            rewrites: self.rewrites,
            fired: self.fired.clone(),
            nothing_said: self.nothing_said.clone(),
            rejected: self.rejected.clone(),
            rolled_back_to: self.rolled_back_to.clone(),
            lr_factor: self.lr_factor,
            schedule_from: self.schedule_from,
            flops: self.flops,
            losses: tail(&self.observer.losses, keep),
            val_losses: self.observer.val_losses.clone(),
            observations: self.observer.observations
                [self.observer.observations.len().saturating_sub(KEPT_OBSERVATIONS)..]
                .to_vec(),
            loss_scale: self.observer.loss_scale,
            grad_scale: self.observer.grad_scale,
            last_good: self.last_good.as_ref().filter(|k| k.steps == steps).map(|k| (k.steps, k.progress)),
            kept: self.kept.as_ref().map(|k| KeptModel {
                source: k.trainer.as_ref().unwrap_or(&self.trainer).source().to_string(),
                op: k.op.clone(),
                steps: k.steps,
                progress: k.progress,
                decision: k.decision,
                until: k.until,
                lr_factor: k.lr_factor,
                schedule_from: k.schedule_from,
            }),
        };
        (snapshot, self.kept.as_ref().map(|k| k.state.clone()))
    }

    /// Continues from `snapshot` (see [`Adaptive::snapshot`]) with the
    /// current trainer holding the checkpoint's state; `kept_state` is the
    /// watched model's. The decision log is rewritten with the snapshot's
    /// decisions, and later ones are appended.
    pub fn restore(&mut self, snapshot: Snapshot, kept_state: Option<State>) -> Result<()> {
        let rules = self.policy.rules.len();
        if snapshot.fired.len() != rules {
            return Err(TrainError::Input(format!(
                "the checkpoint's adaptive state has {} rules; the policy has {rules} (resume with the policy the run \
                 used)",
                snapshot.fired.len()
            )));
        }
        self.kept = match (snapshot.kept, kept_state) {
            (Some(k), Some(state)) => {
                let options = self.trainer.options().clone();
                let mut old = Trainer::from_source(&k.source, self.trainer.name(), options)?;
                old.backend_mut().pin_gemm_choices(&self.trainer.backend().gemm_choices());
                for b in self.trainer.compiled().iter().filter_map(|c| c.batch) {
                    old.add_batch(b)?;
                }
                old.set_state(&state)?;
                old.set_steps(k.steps);
                old.join_group_of(&self.trainer)?;
                Some(Kept {
                    trainer: Some(old),
                    op: k.op,
                    state,
                    steps: k.steps,
                    progress: k.progress,
                    decision: k.decision,
                    until: k.until,
                    lr_factor: k.lr_factor,
                    schedule_from: k.schedule_from,
                })
            }
            (Some(_), None) => {
                return Err(TrainError::Input(
                    "the checkpoint watches a rewrite but holds no state of the model \
                                              it replaced"
                        .into(),
                ));
            }
            (None, _) => None,
        };
        self.last_good = snapshot.last_good.map(|(steps, progress)| Kept {
            trainer: None,
            op: None,
            state: self.trainer.state(),
            steps,
            progress,
            decision: None,
            until: 0,
            lr_factor: snapshot.lr_factor,
            schedule_from: snapshot.schedule_from,
        });
        self.decisions = snapshot.decisions;
        self.last_rewrite = snapshot.last_rewrite;
        self.rewrites = snapshot.rewrites;
        self.fired = snapshot.fired;
        if snapshot.nothing_said.len() == rules {
            self.nothing_said = snapshot.nothing_said;
        }
        self.rejected = snapshot.rejected;
        self.rolled_back_to = snapshot.rolled_back_to;
        self.lr_factor = snapshot.lr_factor;
        self.schedule_from = snapshot.schedule_from;
        self.flops = snapshot.flops;
        self.observer.losses = snapshot.losses;
        self.observer.val_losses = snapshot.val_losses;
        self.observer.observations = snapshot.observations;
        self.observer.loss_scale = snapshot.loss_scale;
        self.observer.grad_scale = snapshot.grad_scale;
        self.idle.fill(false);
        self.prefetched = false;
        if let Some((path, file)) = &mut self.log {
            for d in &self.decisions {
                let line = serde_json::to_string(d).map_err(|e| TrainError::Input(e.to_string()))?;
                writeln!(file, "{line}").map_err(|e| TrainError::Io { path: path.clone(), message: e.to_string() })?;
            }
        }
        Ok(())
    }

    /// Sets what the data's reading adds to the checkpoints this run
    /// writes (see `data_metadata`).
    pub fn set_data_metadata(&mut self, metadata: BTreeMap<String, String>) {
        self.data_metadata = metadata;
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

    /// The rate the last step trained at: its learning rate times
    /// [`Adaptive::lr_scale`] as it was then.
    pub fn applied_lr(&self) -> f64 {
        self.applied_lr
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

    /// The step the run's learning-rate schedule counts from: 0, or under
    /// the policy's `restart_schedule` the step of the last growth (a
    /// rollback of it restores the one before). The run's schedule (warm-up
    /// and decay) then runs again over the steps left.
    pub fn schedule_from(&self) -> u64 {
        self.schedule_from
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
        self.step_micro(&[(inputs.to_vec(), 1.0)], lr, progress)
    }

    /// [`Adaptive::step`] on a batch of micro-batches: with gradient
    /// accumulation ([`crate::train::Options::accumulate`]) each with its
    /// share of the global batch ([`Trainer::step_micro`]); without, the
    /// one entry's inputs (at the trainer's replica share). The first
    /// micro-batch is the probe batch of a rewrite where the policy sets
    /// none.
    pub fn step_micro(&mut self, micro: &[(Vec<&Tensor>, f64)], lr: f64, progress: Progress) -> Result<Outcome> {
        let inputs: &[&Tensor] = micro.first().map(|(i, _)| i.as_slice()).unwrap_or_default();
        self.last_lr = lr;
        if !self.prefetched {
            self.prefetch_next();
        }
        let lr = lr * self.lr_scale();
        self.applied_lr = lr;
        self.observer.before_step(&self.trainer, self.policy.observe_every);
        let rows = inputs.first().and_then(|t| t.shape.first()).copied().unwrap_or(0);
        let next = self.next.take();
        let next: Option<Vec<&Tensor>> = next.as_ref().map(|n| n.iter().collect());
        let stepped = if self.trainer.options().accumulate > 1 {
            self.trainer.step_micro(micro, lr)
        } else {
            self.trainer.step_staging_next(inputs, lr, next.as_deref())
        };
        let metrics = match stepped {
            Ok(m) => m,
            Err(TrainError::NonFinite { step, loss, lr: at_lr, cause }) => {
                self.observer.losses.push((step, loss));
                let reason = format!(
                    "instability: the loss became {loss} at step {step} (lr {})",
                    crate::train::rate_text(at_lr)
                );
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
                    None => Err(TrainError::NonFinite { step, loss, lr: at_lr, cause }),
                };
            }
            Err(e) => return Err(e),
        };
        let flops_before = self.flops;
        // Data parallel: the global batch's FLOPs, the same on every replica.
        let rows = self.trainer.global_rows().unwrap_or(rows);
        self.flops += step_flops(&self.trainer, rows);
        self.observer.after_step(&self.trainer, metrics.loss, lr);
        let step = self.trainer.steps();
        // A watched rewrite that destabilised training goes back.
        let unstable = self.observer.instability(self.policy.spike_factor, INSTABILITY_WINDOW);
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
            // A step or FLOPs count reached fires once: after a rollback to
            // before it the run reaches it again (a rule that rolled back
            // there went back a second time).
            let once = self.fired[i] == 0;
            let reason = match &rule.trigger {
                Trigger::Steps { at } if step == *at && once => Some(format!("step {at} reached")),
                Trigger::EverySteps { every } if step.is_multiple_of(*every) => {
                    Some(format!("step {step} (every {every})"))
                }
                Trigger::Flops { at } if flops_before < *at && self.flops >= *at && once => {
                    Some(format!("{:.3e} training FLOPs reached", at))
                }
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
        // The last epoch's end is what an instability, or any rule that
        // rolls back, goes back to (one on a step or plateau trigger too).
        let rolls_back = self.policy.rules.iter().any(|r| matches!(r.action, Action::Rollback { .. }));
        if self.kept.is_none() && (self.instability_rule().is_some() || rolls_back) {
            self.last_good = Some(Kept {
                trainer: None,
                op: None,
                state: self.trainer.state(),
                steps: self.trainer.steps(),
                progress,
                decision: None,
                until: 0,
                lr_factor: self.lr_factor,
                schedule_from: self.schedule_from,
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
            // Each rollback lowers the rate by its factor, and they
            // compound: a converged model whose ordinary batches read as
            // spikes was rolled back 114 times, to a rate of 1e-12 that
            // trained nothing. Past a thousandth of the run's rate the
            // rule stops, said once; the run goes on at the rate it has.
            if lr_factor < 1.0 && self.lr_factor * lr_factor < LOWEST_ROLLBACK_FACTOR {
                self.idle[i] = true;
                let mut d = self.decision(reason, "roll back".into(), progress);
                d.outcome = "rejected".into();
                d.reason = format!(
                    "the rollbacks have lowered the learning rate to {:.2e}x the run's already ({} of them); another \
                     would take it under {LOWEST_ROLLBACK_FACTOR}x, so this rule stops and training goes on at this rate",
                    self.lr_factor, self.fired[i]
                );
                self.record(d)?;
                return Ok(None);
            }
            self.fired[i] += 1;
            let target = self.kept.as_ref().or(self.last_good.as_ref()).map(|k| k.steps);
            let rolled = self.roll_back(reason, progress)?;
            if rolled.is_none() && !self.nothing_said[i] {
                // Said, not silently skipped: the user's rule fired.
                self.nothing_said[i] = true;
                let mut d = self.decision(reason, "roll back".into(), progress);
                d.outcome = "rejected".into();
                d.reason = match target {
                    Some(t) => format!(
                        "nothing to go back to: the run went back to step {t} already, and no epoch has ended since"
                    ),
                    None => "nothing to go back to: no epoch has ended yet, and no rewrite is being watched".into(),
                };
                self.record(d)?;
            }
            return Ok(rolled.map(|(d, p)| {
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
                Some(op) if !self.rejected.contains(&op) => {
                    (self.reset_optimizer, self.shrink) = (rule.reset_optimizer, rule.shrink);
                    let decided = self.apply(&op, reason, inputs, progress);
                    (self.reset_optimizer, self.shrink) = (false, 1.0);
                    decided?
                }
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
                (self.reset_optimizer, self.shrink) = (rule.reset_optimizer, rule.shrink);
                let decided = self.fork(&ops, *steps, reason, progress);
                (self.reset_optimizer, self.shrink) = (false, 1.0);
                decided?
            }
            Action::Rollback { .. } => return Ok(None),
        };
        self.fired[i] += 1;
        if decided.is_some() {
            // The kept model remembers the factor before; a rollback restores it.
            self.lr_factor *= rule.lr_factor;
        }
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
        // Data parallel: rank 0's to write.
        if self.trainer.communicator().is_some_and(|c| c.rank() != 0) {
            return Ok(());
        }
        if let Some(dir) = &self.policy.checkpoint_dir {
            crate::train::run::create_dir(dir)?;
            let path = dir.join(format!("before-rewrite-{}.safetensors", self.rewrites + 1));
            let mut meta = self.data_metadata.clone();
            meta.insert("rewrite".to_string(), (self.rewrites + 1).to_string());
            // Its model's IR: `aicf eval` scores it as that model (the
            // starting model's was taken, and refused by its hash).
            meta.insert(crate::train::run::IR_KEY.to_string(), self.trainer.source().to_string());
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
        // Data parallel: every replica decides on rank 0's probe losses.
        let before = match probe.is_empty() {
            true => None,
            false => {
                let local = self.trainer.loss(&probe)?;
                Some(self.trainer.agreed(local)?)
            }
        };
        let grown =
            grow_with(&self.trainer, op, self.policy.seed ^ self.rewrites as u64, self.policy.age_bias_correction)
                .and_then(|g| self.after_growth(g));
        self.note_state_rules(&mut d.action);
        let mut grown = match grown {
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
        let after = match probe.is_empty() {
            true => None,
            false => {
                let local = grown.trainer.loss(&probe)?;
                Some(grown.trainer.agreed(local)?)
            }
        };
        d.diff = grown.rewrite.diff.clone();
        d.exact = grown.rewrite.exact;
        d.max_rise = (!d.exact).then_some(self.policy.max_loss_increase);
        d.params_after = param_count(&grown.trainer);
        d.kernels = grown.kernels;
        d.compiled_kernels = grown.compiled_kernels;
        d.loss_before = before;
        d.loss_after = after;
        if let (Some(a), Some(b)) = (before, after) {
            let change = (b - a).abs() / a.abs().max(1e-12);
            d.relative_change = Some(change);
            let rise = (b - a) / a.abs().max(1e-12);
            let tolerance = self.policy.tolerance(self.trainer.options().precision);
            let refused = if d.exact {
                (!(change <= tolerance)).then(|| {
                    format!(
                        "the probe loss changed by {change:.2e} (tolerance {tolerance:.0e}) under a function-preserving \
                         rewrite"
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
            lr_factor: self.lr_factor,
            schedule_from: self.schedule_from,
        });
        self.last_good = None;
        self.last_rewrite = self.trainer.steps();
        if self.policy.restart_schedule {
            self.schedule_from = self.last_rewrite;
        }
        self.rewrites += 1;
        self.prefetched = false;
        self.idle.fill(false);
    }

    /// Starts compiling, on a background thread, the model each growth
    /// rule (and fork candidate) would turn the current one into, at every
    /// batch size the current one runs.
    fn prefetch_next(&mut self) {
        self.prefetched = true;
        if !self.policy.prefetch || self.prefetch.0.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        // No rewrite is left to the run (its policy's max_rewrites spent):
        // nothing to compile ahead for.
        if self.policy.max_rewrites > 0 && self.rewrites >= self.policy.max_rewrites {
            return;
        }
        let serial = self.rewrites;
        let mut ops: Vec<Operator> = Vec::new();
        for (i, rule) in self.policy.rules.iter().enumerate() {
            // (A rule that has fired its max_times, or is idle, grows
            // nothing more.)
            if (rule.max_times > 0 && self.fired[i] >= rule.max_times) || self.idle[i] {
                continue;
            }
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
        // The model the growth will compile, byte for byte (a composition's
        // last, the ages the run gives), or the cache misses.
        let ages = keeps_ages(&options, self.policy.age_bias_correction);
        // Failures are left for the rewrite itself to report.
        let cancel = self.prefetch.1.clone();
        self.prefetch.0 = Some(std::thread::spawn(move || {
            for op in ops {
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(grown) = grown_source(&source, &name, &op, ages) {
                    let _ = crate::train::precompile(&grown, &name, &options, &batches);
                }
            }
        }));
    }

    /// Waits for the background compile; returns the seconds waited.
    fn wait_for_prefetch(&mut self) -> f64 {
        let started = Instant::now();
        if let Some(h) = self.prefetch.0.take() {
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
        self.lr_factor = kept.lr_factor;
        self.schedule_from = kept.schedule_from;
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
            // (The growth undone is not tried again: a rule that would make
            // it stays idle from here, which went unsaid.)
            Some(i) => {
                self.decisions[i].outcome = "rolled back".into();
                self.decisions[i].reason = reason.to_string();
                format!(
                    "rewrite at step {} ({}) rolled back to step {}{}",
                    self.decisions[i].step,
                    self.decisions[i].action,
                    kept.steps,
                    if kept.op.is_some() { "; that growth is not tried again" } else { "" }
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

    /// What [`Adaptive::after_growth`] does besides the operator's rules,
    /// added to a decision's action.
    fn note_state_rules(&self, action: &mut String) {
        if self.reset_optimizer {
            action.push_str("; optimizer state reset");
        }
        if self.shrink < 1.0 {
            action.push_str(&format!(
                "; shrunk to {} x toward a fresh initialisation",
                crate::train::run::short(self.shrink)
            ));
        }
    }

    /// What follows every growth before its checks: under a rule's
    /// `optimizer_state = "reset"`, the grown model's optimizer state starts
    /// again (the function is unchanged); under its `shrink`, the
    /// parameters move toward a fresh initialisation (the rewrite becomes
    /// inexact).
    fn after_growth(&self, mut g: Grown) -> Result<Grown> {
        if self.reset_optimizer {
            super::rewrite::reset_optimizer_state(&mut g.trainer)?;
        }
        if self.shrink < 1.0 {
            super::rewrite::shrink_toward_init(&mut g.trainer, self.shrink)?;
            g.rewrite.exact = false;
        }
        Ok(g)
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
            let g =
                grow_with(&self.trainer, op, self.policy.seed ^ self.rewrites as u64, self.policy.age_bias_correction)
                    .and_then(|g| self.after_growth(g));
            let mut g = match g {
                Ok(g) => g,
                Err(e) => {
                    d.candidates.push((format!("{} (failed: {e})", op.describe()), f64::NAN));
                    continue;
                }
            };
            // Every replica trains the candidate on the same batches: each
            // contributes an equal share of the (identical) gradients.
            let replicas = self.trainer.communicator().map_or(1, |c| c.size());
            g.trainer.set_replica_share(1.0 / replicas as f64, None);
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
            let loss = g.trainer.agreed(total / self.fork_eval.len() as f64)?;
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
        d.exact = g.rewrite.exact;
        d.diff = g.rewrite.diff.clone();
        d.params_after = param_count(&g.trainer);
        d.kernels = g.kernels;
        d.compiled_kernels = g.compiled_kernels;
        self.note_state_rules(&mut d.action);
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
        .backend()
        .manifest()
        .symbols
        .iter()
        .filter(|s| s.kind == "param")
        .map(|s| s.shape.iter().product::<usize>())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::Prefetch;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;

    /// Dropping the background compile waits for its thread (a process
    /// that exited under a thread in MLIR crashed), which stops before its
    /// next model rather than compiling them all.
    #[test]
    fn dropping_the_background_compile_joins_it_and_stops_the_rest() {
        let cancel = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let (c, d) = (cancel.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            for _ in 0..100 {
                if c.load(SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
                d.fetch_add(1, SeqCst);
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(Prefetch(Some(thread), cancel));
        let at_drop = done.load(SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(done.load(SeqCst), at_drop, "the thread went on after the drop");
        assert!(at_drop < 100, "the drop waited for every model, not only the one under way");
    }
}
