//! Training as a library: a model compiled for a device ([`Trainer`]),
//! data that feeds any model's inputs ([`data`]), the epoch loop with
//! evaluation, checkpoints, resume, metrics, plot, progress and profile
//! ([`run`]), and training that changes the model ([`adapt`]). `aicf
//! train` only parses its arguments and prints what [`run::fit`] reports.

pub mod adapt;
pub mod data;
pub mod eval;
pub mod propose;
pub mod registry;
pub mod report;
pub mod run;
pub mod sample;
pub mod trainer;

pub use trainer::{Compiled, Evaluation, Metrics, Options, Result, TrainError, Trainer, compiler_identity, precompile};
