//! The observer: the loss history and, every few steps, gradient norms and
//! update/parameter ratios per layer, recovered from the change of the
//! parameters and optimizer state over the step.

use super::State;
use crate::train::Trainer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Gradient norm and update/parameter ratio of one layer over one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    #[serde(deserialize_with = "super::nan_if_null")]
    pub grad_norm: f64,
    #[serde(deserialize_with = "super::nan_if_null")]
    pub update_ratio: f64,
}

/// What the observer measured at one observed step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub step: u64,
    #[serde(deserialize_with = "super::nan_if_null")]
    pub loss: f64,
    /// The global gradient norm (all layers).
    #[serde(deserialize_with = "super::nan_if_null")]
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
        series.iter().rev().take_while(|(s, _)| *s > since).take(window.saturating_mul(2)).map(|l| l.1).collect();
    if window == 0 || recent.len() < window.saturating_mul(2) {
        return None;
    }
    recent.reverse();
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let last = mean(&recent[window..]);
    let prev = mean(&recent[..window]);
    let improvement = (prev - last) / prev.abs().max(1e-12);
    (improvement < threshold).then(|| {
        // (A mean that rose is said as worse, not as a negative "better".)
        let change = if improvement >= 0.0 {
            format!("{:.2}% better", 100.0 * improvement)
        } else {
            format!("{:.2}% worse", -100.0 * improvement)
        };
        // ("over the last 1 epoch", not "1 epochs".)
        let unit = if window == 1 { unit.strip_suffix('s').unwrap_or(unit) } else { unit };
        format!(
            "plateau: mean {what} {last:.4} over the last {window} {unit}, {prev:.4} before ({change}, threshold {:.2}% \
             better)",
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
    /// The median of the first [`SCALE_STEPS`] finite losses, and of the
    /// first [`SCALE_OBSERVATIONS`] gradient norms: what a spike must rise
    /// by a part of (see [`Observer::instability`]).
    pub loss_scale: Option<f64>,
    pub grad_scale: Option<f64>,
    before: Option<State>,
}

/// Steps whose losses set [`Observer::loss_scale`].
const SCALE_STEPS: usize = 20;
/// Observations whose gradient norms set [`Observer::grad_scale`].
const SCALE_OBSERVATIONS: usize = 5;
/// The least rise a loss spike needs, as a fraction of the run's early
/// loss.
const LOSS_SPIKE_FLOOR: f64 = 0.1;
/// The least rise a gradient-norm spike needs, as a fraction of the run's
/// early gradient norm: late in a run, when most examples are fit, one
/// misfit example moves the norm by several times its median (0.02 to 0.1
/// on the digits MLP, whose early norm is 0.7) and the loss barely.
const GRAD_SPIKE_FLOOR: f64 = 0.5;

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn layer_of(param: &str) -> &str {
    param.rsplit_once('.').map_or(param, |(l, _)| l)
}

impl Observer {
    pub(super) fn before_step(&mut self, trainer: &Trainer, every: u64) {
        self.before = (every > 0 && (trainer.steps() + 1).is_multiple_of(every)).then(|| trainer.state());
    }

    pub(super) fn after_step(&mut self, trainer: &Trainer, loss: f64, lr: f64) {
        let step = trainer.steps();
        self.losses.push((step, loss));
        if self.loss_scale.is_none() {
            let early: Vec<f64> = self.losses.iter().map(|l| l.1).filter(|l| l.is_finite()).take(SCALE_STEPS).collect();
            if early.len() == SCALE_STEPS {
                self.loss_scale = median(early);
            }
        }
        let Some(before) = self.before.take() else { return };
        let after = trainer.state();
        let options = trainer.options();
        let mut layers: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new(); // grad^2, update^2, param^2
        let params = trainer.backend().manifest().symbols.iter().filter(|s| s.kind == "param");
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
        if self.grad_scale.is_none() && self.observations.len() >= SCALE_OBSERVATIONS {
            let early: Vec<f64> = self.observations.iter().map(|o| o.grad_norm).filter(|g| g.is_finite()).collect();
            if early.len() >= SCALE_OBSERVATIONS {
                self.grad_scale = median(early[..SCALE_OBSERVATIONS].to_vec());
            }
        }
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
    /// the median of the observations before it. Once the run's early scale
    /// is known ([`Observer::loss_scale`], [`Observer::grad_scale`]), a
    /// spike must also rise by a part of it ([`LOSS_SPIKE_FLOOR`],
    /// [`GRAD_SPIKE_FLOOR`]): near a loss of 0 an ordinary batch is many
    /// times the median (0.01 against 0.001) without anything going wrong.
    pub fn instability(&self, factor: f64, window: usize) -> Option<String> {
        let &(step, loss) = self.losses.last()?;
        if !loss.is_finite() {
            return Some(format!("instability: the loss became {loss} at step {step}"));
        }
        let floor =
            |scale: Option<f64>, fraction: f64| scale.filter(|s| s.is_finite()).map_or(0.0, |s| fraction * s.abs());
        const RECENT: usize = 3;
        let n = self.losses.len();
        if n >= RECENT + window.max(1) {
            let recent = self.losses[n - RECENT..].iter().map(|l| l.1).sum::<f64>() / RECENT as f64;
            let prior: Vec<f64> = self.losses[n - RECENT - window.max(1)..n - RECENT].iter().map(|l| l.1).collect();
            if let Some(m) = median(prior)
                && recent > factor * m
                && recent - m > floor(self.loss_scale, LOSS_SPIKE_FLOOR)
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
                && ((last.grad_norm > factor * m && last.grad_norm - m > floor(self.grad_scale, GRAD_SPIKE_FLOOR))
                    || !last.grad_norm.is_finite())
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
