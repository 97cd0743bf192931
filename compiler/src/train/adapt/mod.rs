//! Training that changes the model while it trains: observe, decide,
//! rewrite the IR, carry the state, resume.
//!
//! ```ignore
//! use aicf_compiler::train::adapt::{Adaptive, Policy, Progress};
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

//!
//! Files: [`rewrite`] (operators, the rewrite, the state rebinding,
//! [`grow`]), [`observe`] (the observer), [`policy`] (rules from TOML),
//! [`adaptive`] (the transaction around each step).

pub mod adaptive;
pub mod observe;
pub mod policy;
pub mod rewrite;

pub use adaptive::{Adaptive, Decision, Outcome, Progress, Snapshot, param_count};
pub use observe::{LayerStats, Observation, Observer};
pub use policy::{Action, Policy, Rule, Template, Trigger};
pub use rewrite::{
    BlockInit, Grown, Operator, Plan, Rewrite, SlotRule, State, WidenRule, grow, grow_with, grown_source, keeps_ages,
    rebind, rewrite, rewrite_with, step_flops,
};

pub type Result<T, E = super::TrainError> = std::result::Result<T, E>;

/// An `f64` written by serde_json, where a NaN or an infinity became
/// `null`: read back as NaN.
pub(crate) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    use serde::Deserialize;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// [`nan_if_null`] for the second member of pairs.
pub(crate) fn pairs_nan_if_null<'de, D, K>(d: D) -> std::result::Result<Vec<(K, f64)>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: serde::Deserialize<'de>,
{
    use serde::Deserialize;
    let pairs: Vec<(K, Option<f64>)> = Vec::deserialize(d)?;
    Ok(pairs.into_iter().map(|(k, v)| (k, v.unwrap_or(f64::NAN))).collect())
}
