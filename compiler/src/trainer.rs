//! The embedding API: a model in `hl` in, compiled training out.
//!
//! ```ignore
//! use aicf_compiler::trainer::{Options, Trainer};
//! use aicf_runtime::{artifact::DType, session::Tensor};
//!
//! let mut trainer = Trainer::from_file("examples/mlp/digits_mlp.mlir".as_ref(), Options::default())?;
//! let m = trainer.step(&[&x, &labels], 1e-3)?;          // compiles a variant for a new batch size
//! println!("step {} loss {}", m.step, m.loss);
//! let logits = trainer.predict(&[&x])?;                  // @forward
//! let e = trainer.evaluate(&features, &classes)?;        // accuracy over any number of rows
//! trainer.save_checkpoint("ckpt.safetensors".as_ref(), &Default::default())?;
//! ```
//!
//! A [`Trainer`] compiles the model's train step for the CPU (the whole
//! `aicf-train-pipeline` and code generation) into a cache directory, keyed
//! by the IR, the optimizer options, the batch size and the compiler build,
//! and runs it through an [`aicf_runtime::session::Session`]. Inputs of a
//! batch size it has not run before (a smaller last batch) compile once, as a
//! variant of the model on the same parameters and optimizer state
//! (`hl-set-batch`), and are cached like the first.

use crate::{
    CompileError, CompilerContext,
    codegen::{KernelCache, compile_cpu_cached},
    run_pipeline,
};
use aicf_runtime::{
    artifact::{Role, ir_hash},
    checkpoint::CheckpointError,
    cpu::{CpuModule, RuntimeError},
    session::{Session, Tensor},
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How to compile and run a model.
#[derive(Clone, Debug)]
pub struct Options {
    /// `sgd`, `adam` or `adamw`.
    pub optimizer: String,
    pub momentum: f64,
    pub weight_decay: f64,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Seeds the parameters' initializers.
    pub seed: u64,
    /// Where compiled artifacts are cached.
    pub cache_dir: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            optimizer: "adam".into(),
            momentum: 0.0,
            weight_decay: 0.0,
            threads: 0,
            seed: 0,
            cache_dir: PathBuf::from("target/aicf-cache"),
        }
    }
}

impl Options {
    /// The pass pipeline from a model to its planned train step.
    pub fn pipeline(&self) -> String {
        format!(
            "builtin.module(aicf-train-pipeline{{optimizer={} weight-decay={} momentum={}}})",
            self.optimizer, self.weight_decay, self.momentum
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    /// The inputs do not fit the model (beyond its batch size).
    #[error("{0}")]
    Input(String),
    /// The loss stopped being a number; the step's update was applied.
    #[error("the loss became {loss} at step {step} (lr {lr}); lower the learning rate")]
    NonFinite { step: u64, loss: f64, lr: f64 },
}

pub type Result<T, E = TrainError> = std::result::Result<T, E>;

/// What one train step reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metrics {
    /// Steps taken by this trainer so far, this one included.
    pub step: u64,
    /// The batch's loss (before the update).
    pub loss: f64,
    /// Rows in the batch.
    pub rows: usize,
}

/// Accuracy of `@forward`'s argmax against class labels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    pub accuracy: f64,
    pub rows: usize,
}

/// One compilation the trainer did or found cached.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The batch size it was compiled for (`None`: the model's own).
    pub batch: Option<usize>,
    pub dir: PathBuf,
    /// Seconds spent compiling; `None` when the cache had it.
    pub seconds: Option<f64>,
    /// Distinct kernels, and how many of them were compiled rather than
    /// found in the kernel cache (0, 0 when the whole artifact was cached).
    pub kernels: usize,
    pub compiled_kernels: usize,
}

/// A model compiled for training on the CPU, with its parameters and
/// optimizer state.
pub struct Trainer {
    source: String,
    name: String,
    options: Options,
    session: Session,
    compiled: Vec<Compiled>,
    steps: u64,
}

impl Trainer {
    /// Reads an `hl` module (`@forward`, `@loss`) from `path` and compiles it.
    pub fn from_file(path: &Path, options: Options) -> Result<Self> {
        let source = std::fs::read_to_string(path)
            .map_err(|e| TrainError::Io { path: path.to_path_buf(), message: e.to_string() })?;
        Self::from_source(&source, &path.display().to_string(), options)
    }

    /// Compiles the `hl` module `source` (named `name` in diagnostics).
    pub fn from_source(source: &str, name: &str, options: Options) -> Result<Self> {
        let (module, compiled) = compile_cached(source, name, &options, None)?;
        let session = Session::new(module, options.seed)?;
        Ok(Trainer { source: source.into(), name: name.into(), options, session, compiled: vec![compiled], steps: 0 })
    }

    /// The batch size the model was written for (the leading dimension of
    /// `@train_step`'s first input).
    pub fn batch(&self) -> Option<usize> {
        let f = self.session.module().function("train_step").ok()?;
        f.args.iter().find(|a| a.role() == Role::Input)?.shape.first().copied()
    }

    /// What was compiled (or found cached), in order.
    pub fn compiled(&self) -> &[Compiled] {
        &self.compiled
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The `hl` module this trainer was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The name the source goes by in diagnostics.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Every parameter and optimizer-state symbol's current value, by name.
    pub fn state(&self) -> BTreeMap<String, Tensor> {
        self.session
            .module()
            .manifest()
            .symbols
            .iter()
            .filter_map(|s| Some((s.name.clone(), self.session.symbol(&s.name)?)))
            .collect()
    }

    /// Replaces every symbol's value with `state`'s (which must hold each
    /// symbol with its shape); nothing changes when it does not fit.
    pub fn set_state(&mut self, state: &BTreeMap<String, Tensor>) -> Result<()> {
        for s in &self.session.module().manifest().symbols {
            match state.get(&s.name) {
                Some(t) if t.shape == s.shape => {}
                Some(t) => {
                    return Err(TrainError::Input(format!(
                        "state for {} is {:?}, the model has {:?}",
                        s.name, t.shape, s.shape
                    )));
                }
                None => return Err(TrainError::Input(format!("no state for {}", s.name))),
            }
        }
        for (name, t) in state {
            self.session.set_symbol(name, t)?;
        }
        Ok(())
    }

    /// Sets the step count (carried across a rewrite or a rollback).
    pub fn set_steps(&mut self, steps: u64) {
        self.steps = steps;
    }

    /// `@loss` on `inputs` (features and labels) without updating anything.
    pub fn loss(&mut self, inputs: &[&Tensor]) -> Result<f64> {
        self.ensure_compiled("loss", inputs)?;
        let out = self.session.call("loss", inputs)?;
        Ok(out.first().and_then(|t| t.values.first()).copied().unwrap_or(f64::NAN))
    }

    /// Compiles (or finds in the cache) the variant of the model for
    /// `batch` rows, if the session has none, and adds it.
    pub fn add_batch(&mut self, batch: usize) -> Result<()> {
        if self.compiled.iter().any(|c| c.batch == Some(batch)) || self.batch() == Some(batch) {
            return Ok(());
        }
        let (module, compiled) = compile_cached(&self.source, &self.name, &self.options, Some(batch))?;
        self.session.add_variant(module)?;
        self.compiled.push(compiled);
        Ok(())
    }

    /// Steps taken so far (restored by [`Trainer::load_checkpoint`] from the
    /// checkpoint's `step`, when it has one).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Makes sure a module of the session runs `function` on inputs of these
    /// shapes: if none does and the inputs differ from the model's only in
    /// their batch size, a variant for that size is compiled (or loaded from
    /// the cache) and added.
    pub fn ensure_compiled(&mut self, function: &str, inputs: &[&Tensor]) -> Result<()> {
        if self.session.compiled_for(function, inputs) {
            return Ok(());
        }
        let batch = self.batch();
        let f = self.session.module().function(function)?;
        let expected: Vec<_> = f.args.iter().filter(|a| a.role() == Role::Input).collect();
        let size = inputs.first().and_then(|t| t.shape.first()).copied();
        let only_batch_differs = expected.len() == inputs.len()
            && expected.iter().zip(inputs).all(|(a, t)| {
                a.dtype == t.dtype
                    && a.shape.len() == t.shape.len()
                    && (a.shape == t.shape
                        || (a.shape.first() == batch.as_ref()
                            && a.shape[1..] == t.shape[1..]
                            && t.shape.first() == size.as_ref()))
            });
        match size {
            Some(size) if size > 0 && only_batch_differs => {
                let (module, compiled) = compile_cached(&self.source, &self.name, &self.options, Some(size))?;
                self.session.add_variant(module)?;
                self.compiled.push(compiled);
                Ok(())
            }
            // No module takes these inputs, so the call fails on them before
            // running anything; its error names what the model expects.
            _ => self.session.call(function, inputs).map(|_| ()).map_err(Into::into),
        }
    }

    /// One train step on `inputs` (what `@loss` takes after its parameters:
    /// features and labels) with learning rate `lr`. A non-finite loss is an
    /// error naming the step.
    pub fn step(&mut self, inputs: &[&Tensor], lr: f64) -> Result<Metrics> {
        let lr_arg =
            self.session.module().function("train_step")?.args.iter().find(|a| a.bind == "lr").map(|a| a.dtype);
        let lr_t =
            Tensor::scalar(lr, lr_arg.ok_or_else(|| TrainError::Input("@train_step takes no learning rate".into()))?);
        let mut all: Vec<&Tensor> = inputs.to_vec();
        all.push(&lr_t);
        self.ensure_compiled("train_step", &all)?;
        let out = self.session.call("train_step", &all)?;
        self.steps += 1;
        let loss = out.first().and_then(|t| t.values.first()).copied().unwrap_or(f64::NAN);
        if !loss.is_finite() {
            return Err(TrainError::NonFinite { step: self.steps, loss, lr });
        }
        Ok(Metrics { step: self.steps, loss, rows: inputs.first().and_then(|t| t.shape.first()).copied().unwrap_or(0) })
    }

    /// `@forward` on `inputs` (any batch size; a new one compiles once).
    pub fn predict(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.ensure_compiled("forward", inputs)?;
        Ok(self.session.call("forward", inputs)?)
    }

    /// Accuracy of `@forward`'s argmax over the last dimension against
    /// `labels`, for `x` of any number of rows: batches of the model's size,
    /// and a smaller last one.
    pub fn evaluate(&mut self, x: &Tensor, labels: &[i64]) -> Result<Evaluation> {
        let rows = x.shape.first().copied().unwrap_or(0);
        if labels.len() != rows {
            return Err(TrainError::Input(format!("{} labels for {rows} rows", labels.len())));
        }
        let batch = self.batch().unwrap_or(rows).max(1);
        let per_row: usize = x.shape[1..].iter().product();
        let mut correct = 0;
        for start in (0..rows).step_by(batch) {
            let n = batch.min(rows - start);
            let mut shape = x.shape.clone();
            shape[0] = n;
            let chunk = Tensor::new(shape, x.dtype, x.values[start * per_row..(start + n) * per_row].to_vec());
            let out = self.predict(&[&chunk])?;
            let logits = out.first().ok_or_else(|| TrainError::Input("@forward returns nothing".into()))?;
            let classes = logits.shape.last().copied().unwrap_or(1).max(1);
            for (i, label) in labels[start..start + n].iter().enumerate() {
                let row = &logits.values[i * classes..(i + 1) * classes];
                let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |b| b.0);
                correct += (best as i64 == *label) as usize;
            }
        }
        Ok(Evaluation { accuracy: correct as f64 / rows.max(1) as f64, rows })
    }

    /// Saves parameters, optimizer state, `metadata` and this trainer's step
    /// count, atomically.
    pub fn save_checkpoint(&self, path: &Path, metadata: &BTreeMap<String, String>) -> Result<()> {
        let mut metadata = metadata.clone();
        metadata.entry("step".into()).or_insert_with(|| self.steps.to_string());
        Ok(self.session.save_checkpoint(path, &metadata)?)
    }

    /// Restores a checkpoint of this model; returns its metadata.
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<BTreeMap<String, String>> {
        let metadata = self.session.load_checkpoint(path)?;
        if let Some(step) = metadata.get("step").and_then(|s| s.parse().ok()) {
            self.steps = step;
        }
        Ok(metadata)
    }
}

/// Compiles `source` (at batch size `batch`, or its own) into the cache, or
/// finds it there, and loads it.
fn compile_cached(source: &str, name: &str, options: &Options, batch: Option<usize>) -> Result<(CpuModule, Compiled)> {
    let compiled = compile_artifact(source, name, options, batch)?;
    let module = CpuModule::load(&compiled.dir, options.threads)?;
    Ok((module, compiled))
}

/// Compiles `source` at each of `batches` (`None`: its own batch size) into
/// `options.cache_dir`, where a [`Trainer`] of it will find them: all at
/// once (their MLIR work overlaps, their clang processes share the cores),
/// ahead of a rewrite or during it.
pub fn precompile(source: &str, name: &str, options: &Options, batches: &[Option<usize>]) -> Result<Vec<Compiled>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            batches.iter().map(|b| scope.spawn(move || compile_artifact(source, name, options, *b))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(TrainError::Input("a compile thread panicked".into()))))
            .collect()
    })
}

/// Compiles `source` (at batch size `batch`, or its own) into the cache,
/// or finds it there.
fn compile_artifact(source: &str, name: &str, options: &Options, batch: Option<usize>) -> Result<Compiled> {
    let pipeline = options.pipeline();
    let key = ir_hash(&format!("{source}\n{pipeline}\n{}\nbatch {batch:?}", compiler_identity()));
    let dir = options.cache_dir.join(format!("artifact-{key}"));
    let mut seconds = None;
    let (mut kernels, mut compiled_kernels) = (0, 0);
    if !dir.join("manifest.json").exists() || !dir.join("kernels.so").exists() {
        let started = Instant::now();
        let ctx = CompilerContext::new();
        let mut module = ctx.parse(source, name)?;
        if let Some(b) = batch {
            run_pipeline(&ctx, &mut module, &format!("builtin.module(hl-set-batch{{size={b}}})"))?;
        }
        run_pipeline(&ctx, &mut module, &pipeline)?;
        // The IR hash is the model's at every batch size, so one checkpoint
        // fits all of its variants.
        let cache = KernelCache::new(KernelCache::default_dir(&options.cache_dir));
        let (_, stats) = compile_cpu_cached(&ctx, &module, &ir_hash(source), &dir, &cache)?;
        (kernels, compiled_kernels) = (stats.kernels, stats.compiled);
        seconds = Some(started.elapsed().as_secs_f64());
    }
    Ok(Compiled { batch, dir, seconds, kernels, compiled_kernels })
}

/// What identifies the compiler that wrote an artifact: its version and the
/// running executable's size and modification time, so that a rebuilt
/// compiler never reuses kernels an older one generated.
pub fn compiler_identity() -> String {
    let exe = std::env::current_exe().and_then(std::fs::metadata);
    let stamp = exe.as_ref().ok().map(|m| {
        let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
        format!("{} {}", m.len(), modified.as_nanos())
    });
    format!("aicf {} {}", env!("CARGO_PKG_VERSION"), stamp.unwrap_or_default())
}
