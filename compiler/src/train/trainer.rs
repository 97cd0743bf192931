//! A model compiled for training on one device, with its parameters and
//! optimizer state.
//!
//! ```ignore
//! use aicf_compiler::train::{Options, Trainer};
//! use aicf_runtime::{Device, Tensor, artifact::DType};
//!
//! let options = Options { device: Device::parse("cuda")?, ..Options::default() };
//! let mut trainer = Trainer::from_file("examples/mlp/digits_mlp.mlir".as_ref(), options)?;
//! let m = trainer.step(&[&x, &labels], 1e-3)?;          // compiles a variant for a new batch size
//! println!("step {} loss {}", m.step, m.loss);
//! let logits = trainer.predict(&[&x])?;                  // @forward
//! let e = trainer.evaluate(&features, &classes)?;        // accuracy over any number of rows
//! trainer.save_checkpoint("ckpt.safetensors".as_ref(), &Default::default())?;
//! ```
//!
//! A [`Trainer`] compiles the model's train step for its device's target
//! (the whole `aicf-train-pipeline` and code generation: host code for the
//! CPU, PTX for CUDA) into a cache directory, keyed by the IR, the pipeline
//! options, the target, the batch size and the compiler build, and runs it
//! through the runtime's [`Backend`] for that device. Inputs of a batch size
//! it has not run before (a smaller last batch) compile once, as a variant
//! of the model on the same parameters and optimizer state
//! (`hl-set-batch`), and are cached like the first.

use crate::CompileError;
use crate::codegen::{GpuOptions, KernelCache};
use crate::passes::{FIRST_MICRO_BATCH, REPLICA_WEIGHT};
use crate::pipeline::{self, MemoryBudget, Precision, Target, TrainOptions};
use crate::timing::Timings;
use aicf_runtime::collective::Communicator;
use aicf_runtime::{
    Backend, Device, RuntimeError, Tensor,
    artifact::{Role, ir_hash},
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
    /// SGD's Nesterov momentum (PyTorch's `nesterov=True`; needs a
    /// momentum).
    pub nesterov: bool,
    pub weight_decay: f64,
    /// Adam's and AdamW's (beta1, beta2), (0.9, 0.999) by default.
    pub betas: (f64, f64),
    /// Adam's and AdamW's denominator term, PyTorch's 1e-8 by default.
    pub eps: f64,
    /// Whether parameters of fewer than two dimensions (biases, norm
    /// weights) take weight decay too: true by default, as PyTorch's
    /// optimizers decay every parameter given; false makes the parameter
    /// groups of nanoGPT's `configure_optimizers` (and Hugging Face's
    /// `Trainer`), which decay only matrices and convolution kernels.
    pub decay_1d: bool,
    /// Clip all gradients to this global L2 norm before each update.
    pub clip_norm: Option<f64>,
    /// The memory plan's budget (activations recomputed to meet it).
    pub memory_budget: Option<MemoryBudget>,
    /// Where the model runs (the CPU's worker threads are part of it).
    pub device: Device,
    /// Seeds the parameters' initializers.
    pub seed: u64,
    /// Where compiled artifacts are cached. (`run::fit` compiles into its
    /// run directory, `RunOptions::out`, as `aicf train` does.)
    pub cache_dir: PathBuf,
    /// Runs every GEMM with this candidate instead of the one the GEMM
    /// registry measured fastest on this machine: a timing-independent
    /// choice, so a run's bits do not depend on the machine's load when
    /// the registry was filled (CPU: generated, library, library-swapped,
    /// gemm-rs, openblas, avx512, avx2, bf16-dot, mkl, mkl-bf16; CUDA:
    /// generated, cublaslt).
    pub gemm: Option<String>,
    /// fp32, or mixed precision in bf16/fp16 (`hl-autocast`).
    pub precision: Precision,
    /// Let f32 GEMMs run in TF32 on a GPU's tensor cores (PyTorch's
    /// `allow_tf32`); off by default (or as `AICF_ALLOW_TF32` says).
    pub allow_tf32: bool,
    /// With 16-bit precision, pad large contractions to aligned dimensions
    /// ([`TrainOptions::shape_padding`]); on by default.
    pub shape_padding: bool,
    /// Compile the data-parallel train step ([`TrainOptions::data_parallel`]):
    /// with [`Trainer::set_communicator`] the trainer is one replica of a
    /// run; alone it trains as without.
    pub data_parallel: bool,
    /// The least bytes of gradients one all-reduce sums (25 MiB).
    pub bucket_bytes: u64,
    /// Gradient accumulation: each step adds the gradients of this many
    /// micro-batches of the model's batch (in order, as this many replicas
    /// of a data-parallel run do) before one update ([`Trainer::step_micro`]);
    /// 1: off. The sums stay on the device (accumulator states).
    pub accumulate: usize,
    /// Attention's gradient as one fused op
    /// ([`TrainOptions::fused_attention_backward`]) rather than GEMMs over
    /// the materialised probabilities: on the CPU for every attention (its
    /// blocked kernel), on a GPU where its tensor cores take the heads
    /// (16-bit heads of multiples of 16 up to 128). `None` (the default)
    /// and `Some(true)`: fused so; `Some(false)`: GEMMs.
    pub fused_attention_backward: Option<bool>,
    /// Ungrouped convolutions as matrix products over their window rows
    /// ([`TrainOptions::conv_as_gemm`]) or as direct kernels: `None` (the
    /// default) for products on the CPU and direct kernels on a GPU, where
    /// the products are not yet measured.
    pub conv_as_gemm: Option<bool>,
    /// Whether each train step scans its inputs itself, for NaN (refused:
    /// the step would make every parameter NaN) and for an infinity to name
    /// where the loss comes out NaN; on by default. The training loop turns
    /// it off: its data loader refused non-finite values already, and the
    /// scan is a pass over every batch. Off, the runtime still refuses a
    /// NaN or a value past the type's range in a train step's inputs (its
    /// own check, on every call).
    pub check_inputs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            optimizer: "adam".into(),
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
            betas: (0.9, 0.999),
            eps: 1e-8,
            decay_1d: true,
            clip_norm: None,
            memory_budget: None,
            device: Device::default(),
            seed: 0,
            cache_dir: PathBuf::from("target/aicf-cache"),
            gemm: None,
            precision: Precision::Fp32,
            allow_tf32: false,
            shape_padding: true,
            data_parallel: false,
            bucket_bytes: pipeline::DEFAULT_BUCKET_BYTES,
            accumulate: 1,
            fused_attention_backward: None,
            conv_as_gemm: None,
            check_inputs: true,
        }
    }
}

impl Options {
    /// The compile options of the train step.
    pub fn train_options(&self) -> TrainOptions {
        TrainOptions {
            optimizer: self.optimizer.clone(),
            momentum: self.momentum,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
            betas: self.betas,
            eps: self.eps,
            decay_min_rank: if self.decay_1d { 0 } else { 2 },
            clip_norm: self.clip_norm,
            memory_budget: self.memory_budget,
            precision: self.precision,
            shape_padding: self.shape_padding,
            data_parallel: self.data_parallel,
            bucket_bytes: self.bucket_bytes,
            accumulate: self.accumulate > 1,
            fused_attention_backward: self.fused_attention_backward.unwrap_or(true),
            fused_attention_any_heads: matches!(self.device, Device::Cpu { .. }),
            conv_as_gemm: self.conv_as_gemm.unwrap_or(matches!(self.device, Device::Cpu { .. })),
        }
    }

    /// What the device's code is generated for.
    pub fn target(&self) -> Target {
        match self.device {
            Device::Cpu { .. } => Target::Cpu(KernelCache::new(KernelCache::default_dir(&self.cache_dir))),
            Device::Cuda { .. } => Target::Cuda(GpuOptions::default()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    /// The inputs or data do not fit the model, or an option is invalid.
    #[error("{0}")]
    Input(String),
    /// Training diverged (a loss far above the run's first, a non-finite
    /// held-out loss or state); nothing was saved after it.
    #[error("{0}")]
    Diverged(String),
    /// A Ctrl-C, SIGTERM or SIGHUP stopped the run between two steps (the
    /// message says where
    /// it stands).
    #[error("{0}")]
    Interrupted(String),
    /// The loss stopped being a number; the step's update was applied.
    /// `cause`, where one is seen: an infinite input, or a previous step's
    /// other learning rate.
    #[error(
        "the loss became {loss} at step {step} (lr {}); {}",
        super::rate_text(*.lr),
        .cause.as_deref().unwrap_or("lower the learning rate")
    )]
    NonFinite { step: u64, loss: f64, lr: f64, cause: Option<String> },
    /// An fp16 model's loss stopped being a number: its forward pass
    /// overflowed f16 (the step's update was skipped, and the loss scale
    /// halved, inside the compiled step).
    #[error(
        "the loss became {loss} at step {step} (lr {}): the forward pass overflowed fp16 (the step was skipped; \
         loss scaling cannot help a forward overflow); train with --precision bf16, or lower the learning rate",
        super::rate_text(*.lr)
    )]
    Fp16Overflow { step: u64, loss: f64, lr: f64 },
    /// The model runs at its own batch size only (an op fixes it): no
    /// variant for `rows` (a smaller last batch) compiles.
    #[error(
        "{model}: the model does not run at a batch of {rows} rows, only at {batch} (an op fixes the batch size: \
         {why}); a last batch this size comes from a row (or window) count that is not a multiple of the batch: make \
         it one (--val-split, --windows-per-epoch, --eval-windows), or export the model with a dynamic batch dimension"
    )]
    FixedBatch { model: String, rows: usize, batch: String, why: String },
}

impl From<aicf_runtime::checkpoint::CheckpointError> for TrainError {
    fn from(e: aicf_runtime::checkpoint::CheckpointError) -> Self {
        TrainError::Runtime(e.into())
    }
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
    /// The compile's stages (empty when the cache had it).
    pub timings: Timings,
}

/// A model compiled for training on one device, with its parameters and
/// optimizer state.
pub struct Trainer {
    source: String,
    name: String,
    options: Options,
    backend: Box<dyn Backend>,
    compiled: Vec<Compiled>,
    steps: u64,
    /// The learning rate of the last step run.
    last_lr: Option<f64>,
    /// Where the last step's inputs held an infinity (input, index,
    /// value): its loss can be finite while its update makes the
    /// parameters non-finite, and the next step's NaN loss names it.
    last_infinite: Option<(usize, usize, f64)>,
    /// This replica's share of the next steps' global batch (1 alone), and
    /// the global batch's rows (data parallel).
    replica_weight: f64,
    global_rows: Option<usize>,
    comm: Option<std::sync::Arc<dyn Communicator>>,
    /// The model's signature where its `@loss` has dropout (takes a seed
    /// and an offset): a step given the inputs without them draws them.
    rng: Option<super::data::Signature>,
    /// Where `@loss` centres a value on a mean over one value at some batch
    /// sizes (a batch norm at a batch of 1): a step of that many rows is
    /// refused, as PyTorch refuses it.
    centring: Option<crate::consistency::Centring>,
}

/// A learning rate a step can take: finite and not negative (0 is a
/// schedule's warm-up start).
fn check_lr(lr: f64) -> Result<()> {
    if lr.is_finite() && lr >= 0.0 {
        Ok(())
    } else {
        Err(TrainError::Input(format!("the learning rate {lr} is not a finite number of at least 0")))
    }
}

/// Refuses a step's inputs where one holds a NaN: the step would end in a
/// NaN loss after its update had made every parameter NaN (and the error
/// would blame the learning rate). Nothing runs, so the model is as it
/// was. (Infinities pass: an additive attention mask holds -inf.)
fn check_nan_inputs(function: &str, inputs: &[&Tensor]) -> Result<()> {
    for (i, t) in inputs.iter().enumerate() {
        if let Some(at) = t.values.iter().position(|v| v.is_nan()) {
            return Err(TrainError::Input(format!(
                "@{function}: input #{i} holds {} at index {at} (of shape {:?}); nothing was run or updated",
                t.values[at], t.shape
            )));
        }
    }
    Ok(())
}

/// The inputs a caller gives `function` of `f`: its inputs less those the
/// Trainer adds itself (the learning rate, a data-parallel replica's
/// weight, a micro-batch's share and whether it is a step's first).
fn caller_inputs(f: &aicf_runtime::artifact::Function) -> Vec<&aicf_runtime::artifact::Arg> {
    f.args
        .iter()
        .filter(|a| a.role() == Role::Input)
        .filter(|a| !["lr", REPLICA_WEIGHT, FIRST_MICRO_BATCH].contains(&a.bind.as_str()))
        .collect()
}

impl Trainer {
    /// A step given another number of inputs than the model takes: said in
    /// the caller's count (the call's own error counted the inputs the
    /// Trainer adds).
    fn check_input_count(&self, function: &str, given: usize) -> Result<()> {
        let takes = caller_inputs(self.backend.function(function)?);
        if given == takes.len() {
            return Ok(());
        }
        // Each input by its type (a layer-API model's were all "input"),
        // and dropout's seed and offset said as such.
        let types: Vec<String> =
            takes.iter().map(|a| format!("{} {:?}", format!("{:?}", a.dtype).to_lowercase(), a.shape)).collect();
        // (By the model's signature, where its @loss has dropout.)
        let rng = takes.len() >= 2 && self.rng.is_some();
        let hint = if rng {
            "; the last two, i64 scalars, are the seed and offset of its random numbers (dropout's masks, \
             noise): leave both out (the trainer draws them from Options::seed and the step, as `aicf train` does), \
             or give a seed and an offset that moves on each step (by 2^24), or the same numbers are drawn every \
             step"
        } else {
            ""
        };
        Err(TrainError::Input(format!(
            "@{function}: {given} inputs given, the model takes {} ({}){hint}",
            takes.len(),
            types.join(", ")
        )))
    }

    /// Dropout's seed and offset for step `step` where the model's `@loss`
    /// takes them and the caller's `given` inputs leave them out: drawn as
    /// `aicf train` draws them (from [`Options::seed`], 2^24 counters a
    /// step, so no two steps share a mask). None otherwise.
    /// Each part of a step (a data-parallel replica's, a micro-batch's:
    /// `part`, rank r's j-th micro-batch `r M + j`) draws its own masks.
    fn implied_rng(&self, function: &str, given: usize, step: u64, part: usize) -> Result<Vec<Tensor>> {
        let Some(sig) = &self.rng else { return Ok(Vec::new()) };
        if given + 2 != caller_inputs(self.backend.function(function)?).len() {
            return Ok(Vec::new());
        }
        Ok(super::run::rng_inputs(sig, super::run::part_seed(self.options.seed, part), step))
    }

    /// This replica's rank (0 alone).
    fn rank(&self) -> usize {
        self.comm.as_ref().map_or(0, |c| c.rank())
    }

    /// Reads an `hl` module (`@forward`, `@loss`) from `path` and compiles it.
    pub fn from_file(path: &Path, options: Options) -> Result<Self> {
        let source = super::read_model(path)?;
        Self::from_source(&source, &path.display().to_string(), options)
    }

    /// Compiles the `hl` module `source` (named `name` in diagnostics).
    pub fn from_source(source: &str, name: &str, options: Options) -> Result<Self> {
        // A device that is not there is an error before anything compiles.
        aicf_runtime::check_device(&options.device)?;
        if options.accumulate == 0 {
            return Err(TrainError::Input("gradient accumulation over 0 micro-batches: at least 1".into()));
        }
        // The optimizer's settings as the CLI checks them, before anything
        // compiles (a clip_norm of 0 reached the pass as "off" and trained
        // unclipped, where PyTorch's clip_grad_norm_(0) zeroes the step).
        super::run::check_optimizer_settings(options.momentum, options.weight_decay, options.betas, options.clip_norm)
            .map_err(|e| TrainError::Input(format!("Options: {e}")))?;
        if !matches!(options.optimizer.as_str(), "sgd" | "adam" | "adamw") {
            return Err(TrainError::Input(format!(
                "Options: optimizer \"{}\": \"sgd\", \"adam\" or \"adamw\"",
                options.optimizer
            )));
        }
        if options.nesterov && (options.optimizer != "sgd" || options.momentum == 0.0) {
            return Err(TrainError::Input(
                "Options: nesterov is SGD's with a momentum (optimizer \"sgd\", momentum above 0)".into(),
            ));
        }
        super::run::check_eps(&options.optimizer, options.eps)
            .map_err(|e| TrainError::Input(format!("Options: eps: {e}")))?;
        super::run::check_groups(options.decay_1d, options.weight_decay)
            .map_err(|e| TrainError::Input(format!("Options: decay_1d: {e}")))?;

        let compiled = compile_artifact(source, name, &options, None)?;
        let mut backend = aicf_runtime::open(&compiled.dir, &options.device, options.seed)?;
        backend.force_gemm(options.gemm.as_deref())?;
        if options.allow_tf32 {
            backend.set_allow_tf32(true);
        }
        Ok(Trainer {
            source: source.into(),
            name: name.into(),
            options,
            backend,
            compiled: vec![compiled],
            steps: 0,
            last_lr: None,
            last_infinite: None,
            replica_weight: 1.0,
            global_rows: None,
            comm: None,
            rng: super::data::Signature::of_source(source, name).ok().filter(|s| s.takes_rng()),
            centring: crate::pipeline::one_value_centring(source, name),
        })
    }

    /// Makes this trainer one replica of a data-parallel run over `comm`
    /// (its model compiled with [`Options::data_parallel`]): each step sums
    /// the replicas' weighted gradients before the update. The parameters
    /// and state are rank 0's from here on (broadcast).
    pub fn set_communicator(&mut self, comm: std::sync::Arc<dyn Communicator>) -> Result<()> {
        if comm.size() > 1 && !self.options.data_parallel {
            return Err(TrainError::Input(
                "a replica of a data-parallel run needs its model compiled for it (Options::data_parallel)".into(),
            ));
        }
        self.backend.set_communicator(comm.clone())?;
        self.comm = Some(comm);
        self.broadcast_state()
    }

    /// Makes this trainer a replica of the run `other` is one of (a grown
    /// or restored model of it), at its replica weight; nothing when
    /// `other` trains alone.
    pub fn join_group_of(&mut self, other: &Trainer) -> Result<()> {
        if let Some(comm) = other.comm.clone() {
            self.set_communicator(comm)?;
        }
        self.replica_weight = other.replica_weight;
        self.global_rows = other.global_rows;
        Ok(())
    }

    /// Rank 0's `value` on every replica (itself alone): what a decision
    /// every replica takes is made from, so they all take the same.
    pub fn agreed(&self, value: f64) -> Result<f64> {
        let Some(comm) = self.comm.as_ref().filter(|c| c.size() > 1) else { return Ok(value) };
        let mut bytes = value.to_le_bytes().to_vec();
        comm.broadcast(&mut bytes, 0, "rank 0's measurement").map_err(RuntimeError::from)?;
        let bytes: [u8; 8] =
            bytes.try_into().map_err(|_| TrainError::Input("rank 0's measurement came back in pieces".into()))?;
        Ok(f64::from_le_bytes(bytes))
    }

    /// Whether this trainer is one replica of several: a refusal on one
    /// replica alone would leave the others waiting in the step's
    /// collectives until their timeout (a NaN batch is not refused there;
    /// it reaches every replica's loss through the all-reduce).
    fn replicated(&self) -> bool {
        self.comm.as_ref().is_some_and(|c| c.size() > 1)
    }

    /// The communicator of a data-parallel trainer.
    pub fn communicator(&self) -> Option<&std::sync::Arc<dyn Communicator>> {
        self.comm.as_ref()
    }

    /// Makes every replica's parameters, state and step count rank 0's
    /// (after a start, a resume or a change of the model).
    pub fn broadcast_state(&mut self) -> Result<()> {
        let Some(comm) = self.comm.clone().filter(|c| c.size() > 1) else { return Ok(()) };
        let symbols: Vec<String> =
            self.backend.manifest().symbols.iter().filter(|s| !s.is_accumulator()).map(|s| s.name.clone()).collect();
        let mut bytes = Vec::new();
        if comm.rank() == 0 {
            bytes.extend_from_slice(&self.steps.to_le_bytes());
            for name in &symbols {
                bytes.extend(self.backend.symbol_bytes(name).unwrap_or_default());
            }
        }
        comm.broadcast(&mut bytes, 0, "the parameters and state from rank 0").map_err(RuntimeError::from)?;
        if comm.rank() != 0 {
            let mismatch = || TrainError::Input("rank 0's model state does not fit this replica's model".into());
            let (steps, mut rest) = bytes.split_at_checked(8).ok_or_else(mismatch)?;
            self.steps = u64::from_le_bytes(steps.try_into().map_err(|_| mismatch())?);
            for name in &symbols {
                let n = self.backend.symbol_bytes(name).map_or(0, |b| b.len());
                let (mine, tail) = rest.split_at_checked(n).ok_or_else(mismatch)?;
                self.backend.set_symbol_bytes(name, mine)?;
                rest = tail;
            }
            if !rest.is_empty() {
                return Err(mismatch());
            }
        }
        Ok(())
    }

    /// This replica's rows over the global batch's, for the next steps
    /// (`replica_weight` of a data-parallel step; 1 alone), and the global
    /// batch's rows (what a step's FLOPs are counted for; `None`: the
    /// step's own inputs).
    pub fn set_replica_share(&mut self, weight: f64, global_rows: Option<usize>) {
        self.replica_weight = weight;
        self.global_rows = global_rows;
    }

    /// The rows of the global batch the next steps train on, under data
    /// parallel.
    pub fn global_rows(&self) -> Option<usize> {
        self.global_rows
    }

    /// The batch size the model was written for (the leading dimension of
    /// `@train_step`'s first input).
    pub fn batch(&self) -> Option<usize> {
        let f = self.backend.function("train_step").ok()?;
        f.args.iter().find(|a| a.role() == Role::Input)?.shape.first().copied()
    }

    /// What was compiled (or found cached), in order.
    pub fn compiled(&self) -> &[Compiled] {
        &self.compiled
    }

    /// The runtime backend the model runs on.
    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    pub fn backend_mut(&mut self) -> &mut dyn Backend {
        self.backend.as_mut()
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
        self.backend.symbols()
    }

    /// Replaces every symbol's value with `state`'s (which must hold each
    /// symbol with its shape); nothing changes when it does not fit. The
    /// trainer's step count ([`Trainer::steps`]: a checkpoint's `step`,
    /// dropout's offsets) is not a symbol and stays; an optimizer's `step`
    /// symbol is its bias correction's count, which may differ (reset with
    /// its moments). Carrying a run from elsewhere (an eager
    /// [`crate::eager::optim::Optim::state`]), give its count to
    /// [`Trainer::set_steps`] too.
    pub fn set_state(&mut self, state: &BTreeMap<String, Tensor>) -> Result<()> {
        for s in self.backend.manifest().symbols.iter().filter(|s| !s.is_accumulator()) {
            match state.get(&s.name) {
                // A NaN was set, and the next step's NaN loss blamed the
                // learning rate (an eager optimizer's state refuses it).
                Some(t)
                    if t.shape == s.shape
                        && t.filled()
                        && let Some(i) = t.values.iter().position(|v| !v.is_finite()) =>
                {
                    return Err(TrainError::Input(format!(
                        "state for {}: {} at index {i} is not a finite number; nothing was set",
                        s.name, t.values[i]
                    )));
                }
                Some(t) if t.shape == s.shape && t.filled() => {}
                Some(t) if t.shape == s.shape => {
                    return Err(TrainError::Input(format!(
                        "state for {}: {} values do not fill its shape {:?}",
                        s.name,
                        t.values.len(),
                        t.shape
                    )));
                }
                Some(t) => {
                    return Err(TrainError::Input(format!(
                        "state for {} is {:?}, the model has {:?}",
                        s.name, t.shape, s.shape
                    )));
                }
                None => return Err(TrainError::Input(format!("no state for {}", s.name))),
            }
        }
        let symbols = &self.backend.manifest().symbols;
        if let Some(name) = state.keys().find(|n| !symbols.iter().any(|s| &s.name == *n)) {
            // An eager optimizer's own count for a parameter that missed
            // updates (`Optim::state`): the compiled step counts one for all.
            if let Some(param) = name.strip_suffix(".step").filter(|p| symbols.iter().any(|s| s.name == *p)) {
                return Err(TrainError::Input(format!(
                    "state for {name}: {param} has had fewer updates than the other parameters (steps without a \
                     gradient in eager mode); the compiled step keeps one step count for every parameter"
                )));
            }
            return Err(TrainError::Input(format!("state for {name}: the model has no such symbol")));
        }
        for (name, t) in state {
            self.backend.set_symbol(name, t)?;
        }
        Ok(())
    }

    /// Sets the step count (carried across a rewrite or a rollback).
    pub fn set_steps(&mut self, steps: u64) {
        self.steps = steps;
        // (The last step's rate is of a state no longer there.)
        self.last_lr = None;
        self.last_infinite = None;
    }

    /// `@loss` on `inputs` (features and labels) without updating anything.
    pub fn loss(&mut self, inputs: &[&Tensor]) -> Result<f64> {
        self.scalar_call("loss", inputs)
    }

    /// Whether the artifact holds `@loss` with its dropout off
    /// ([`crate::pipeline::LOSS_EVAL`]: a model with dropout whose `@loss`
    /// sets no state).
    pub fn has_loss_eval(&self) -> bool {
        self.backend.function(crate::pipeline::LOSS_EVAL).is_ok()
    }

    /// `@loss` on held-out `inputs` (the same inputs as [`Trainer::loss`]),
    /// without dropout's noise where the artifact has that form
    /// ([`Trainer::has_loss_eval`]).
    pub fn held_out_loss(&mut self, inputs: &[&Tensor]) -> Result<f64> {
        let function = if self.has_loss_eval() { crate::pipeline::LOSS_EVAL } else { "loss" };
        self.scalar_call(function, inputs)
    }

    /// The first value `function` (`@loss`, or its form without dropout,
    /// which takes the same inputs) returns on `inputs`.
    fn scalar_call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<f64> {
        let drawn = self.implied_rng("loss", inputs.len(), self.steps, self.rank() * self.options.accumulate.max(1))?;
        let inputs: &[&Tensor] = &inputs.iter().copied().chain(&drawn).collect::<Vec<_>>();
        // Said as `step`'s is: dropout's seed and offset named where missing.
        self.check_input_count("loss", inputs.len())?;
        let converted = self.integer_inputs(function, inputs)?;
        let inputs: &[&Tensor] = &converted.iter().map(|t| t.as_ref()).collect::<Vec<_>>();
        self.ensure_compiled(function, inputs)?;
        let out = self.backend.call(function, inputs)?;
        Ok(out.first().and_then(|t| t.values.first()).copied().unwrap_or(f64::NAN))
    }

    /// Compiles (or finds in the cache) the variant of the model for
    /// `batch` rows, if the backend has none, and adds it.
    pub fn add_batch(&mut self, batch: usize) -> Result<()> {
        if self.compiled.iter().any(|c| c.batch == Some(batch)) || self.batch() == Some(batch) {
            return Ok(());
        }
        // A model whose ops fix its batch (an ONNX export's reshapes to
        // constant shapes, say) has no variant at another size: said as
        // such, with the way round, rather than as the pass's error alone.
        let compiled = compile_artifact(&self.source, &self.name, &self.options, Some(batch)).map_err(|e| {
            let text = e.to_string();
            if !text.contains("hl-set-batch") {
                return TrainError::from(e);
            }
            // The pass's own diagnostic, not the pipeline's header.
            let why = text.lines().find(|l| l.contains("error:")).or(text.lines().next()).unwrap_or_default();
            // As a sentence with its place after it, not the verifier's
            // raw "file:line:col: error: ..." inside a note.
            let why = match why.trim().split_once(": error: ") {
                Some((at, message)) => format!("{message}, at {at}"),
                None => why.trim().to_string(),
            };
            TrainError::FixedBatch {
                model: self.name.clone(),
                rows: batch,
                batch: self.batch().map_or("its own".to_string(), |b| b.to_string()),
                why,
            }
        })?;
        self.backend.add_variant(&compiled.dir)?;
        self.compiled.push(compiled);
        Ok(())
    }

    /// Steps taken so far (restored by [`Trainer::load_checkpoint`] from the
    /// checkpoint's `step`, when it has one).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Makes sure a module of the backend runs `function` on inputs of these
    /// shapes: if none does and the inputs differ from the model's only in
    /// their batch size, a variant for that size is compiled (or loaded from
    /// the cache) and added.
    pub fn ensure_compiled(&mut self, function: &str, inputs: &[&Tensor]) -> Result<()> {
        if self.backend.compiled_for(function, inputs) {
            return Ok(());
        }
        // Nothing is compiled for a tensor whose values do not fill its shape.
        if let Some((i, t)) = inputs.iter().enumerate().find(|(_, t)| !t.filled()) {
            return Err(TrainError::Input(format!(
                "@{function}: input #{i} holds {} values; its shape {:?} takes {}",
                t.values.len(),
                t.shape,
                t.shape.iter().product::<usize>()
            )));
        }
        let batch = self.batch();
        let f = self.backend.function(function)?;
        let expected: Vec<_> = f.args.iter().filter(|a| a.role() == Role::Input).collect();
        let size = inputs.first().and_then(|t| t.shape.first()).copied();
        // The inputs that carry the batch (their first dimension is the
        // model's batch) give one number of rows: features of 15 rows with
        // labels of 16 compiled a 15-row variant, then failed naming the
        // features.
        if expected.len() == inputs.len() {
            let rows: Vec<(usize, usize)> = expected
                .iter()
                .zip(inputs)
                .enumerate()
                .filter(|(_, (a, t))| a.shape.first() == batch.as_ref() && t.shape.len() == a.shape.len())
                .filter_map(|(i, (_, t))| t.shape.first().map(|&r| (i, r)))
                .collect();
            if let Some(&(i, _)) = rows.iter().find(|(_, r)| *r == 0) {
                return Err(TrainError::Input(format!("@{function}: input #{i} has no rows (an empty batch)")));
            }
            if let Some(&(first, n)) = rows.first()
                && let Some(&(i, m)) = rows.iter().find(|(_, m)| *m != n)
            {
                return Err(TrainError::Input(format!(
                    "@{function}: input #{i} has {m} rows and input #{first} {n}: the inputs of one batch (features \
                     and labels) have one number of rows"
                )));
            }
        }
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
            Some(size) if size > 0 && only_batch_differs => self.add_batch(size),
            // An input that carries the batch but differs beyond it: what the
            // model takes, with any number of rows (not the batch it was
            // compiled for, which the call's error would name).
            _ if let Some((i, a, t)) = (expected.len() == inputs.len())
                .then(|| {
                    expected.iter().zip(inputs).enumerate().find(|(_, (a, t))| {
                        a.shape.first() == batch.as_ref()
                            && (a.dtype != t.dtype || a.shape.len() != t.shape.len() || a.shape[1..] != t.shape[1..])
                    })
                })
                .flatten()
                .map(|(i, (a, t))| (i, a, t)) =>
            {
                let rest: Vec<String> = a.shape[1..].iter().map(|d| d.to_string()).collect();
                let takes = std::iter::once("rows".to_string()).chain(rest).collect::<Vec<_>>().join(", ");
                Err(TrainError::Input(format!(
                    "@{function}: input #{i} ({}) is {:?} {:?}; the model takes {:?} [{takes}], any number of rows",
                    a.bind, t.dtype, t.shape, a.dtype
                )))
            }
            // No module takes these inputs, so the call fails on them before
            // running anything; its error names what the model expects.
            _ => self.backend.call(function, inputs).map(|_| ()).map_err(Into::into),
        }
    }

    /// One train step on `inputs` (what `@loss` takes after its parameters:
    /// features and labels, and dropout's seed and offset where it has
    /// them) with learning rate `lr`. A non-finite loss is an error naming
    /// the step. It runs `@train_step` on the inputs as given, also where
    /// the model was compiled for gradient accumulation: a step of
    /// micro-batches is [`Trainer::step_micro`].
    pub fn step(&mut self, inputs: &[&Tensor], lr: f64) -> Result<Metrics> {
        self.step_staging_next(inputs, lr, None)
    }

    /// [`Trainer::step`], and while it computes on a GPU, `next` (the next
    /// step's inputs, at the same learning rate) is copied to the device.
    pub fn step_staging_next(&mut self, inputs: &[&Tensor], lr: f64, next: Option<&[&Tensor]>) -> Result<Metrics> {
        check_lr(lr)?;
        self.check_rows_normalize(inputs.first().and_then(|t| t.shape.first()).copied())?;
        // Dropout's seed and offset where left out.
        // (Rank r's first part is r M, M micro-batches a replica, as in
        // `aicf train`.)
        let part = self.rank() * self.options.accumulate.max(1);
        let drawn = self.implied_rng("train_step", inputs.len(), self.steps, part)?;
        let inputs: &[&Tensor] = &inputs.iter().copied().chain(&drawn).collect::<Vec<_>>();
        let drawn_next = match next {
            Some(n) => self.implied_rng("train_step", n.len(), self.steps + 1, part)?,
            None => Vec::new(),
        };
        let next_all: Option<Vec<&Tensor>> = next.map(|n| n.iter().copied().chain(&drawn_next).collect());
        let next = next_all.as_deref();
        self.check_input_count("train_step", inputs.len())?;
        let converted = self.integer_inputs("train_step", inputs)?;
        let inputs: &[&Tensor] = &converted.iter().map(|t| t.as_ref()).collect::<Vec<_>>();
        if self.options.check_inputs && !self.replicated() {
            check_nan_inputs("train_step", inputs)?;
        }
        let lr_t = self.lr_input("train_step", lr)?;
        let weighted = self.backend.function("train_step")?.args.iter().any(|a| a.bind == REPLICA_WEIGHT);
        let weight_t = Tensor::scalar(self.replica_weight, aicf_runtime::artifact::DType::F32);
        let mut all: Vec<&Tensor> = inputs.to_vec();
        all.push(&lr_t);
        if weighted {
            all.push(&weight_t);
        }
        self.ensure_compiled("train_step", &all)?;
        let next_converted = next.map(|n| self.integer_inputs("train_step", n)).transpose()?;
        let next: Option<Vec<&Tensor>> = next_converted.as_ref().map(|n| {
            n.iter().map(|t| t.as_ref()).chain(std::iter::once(&lr_t)).chain(weighted.then_some(&weight_t)).collect()
        });
        let out = self.backend.call_staging_next("train_step", &all, next.as_deref())?;
        let rows = inputs.first().and_then(|t| t.shape.first()).copied().unwrap_or(0);
        self.stepped(&out, lr, rows, &[inputs])
    }

    /// The fewest rows a training batch of this model takes: 2 where its
    /// `@loss` normalizes over the batch alone (a batch norm over 1x1
    /// maps), 1 otherwise.
    pub fn min_train_rows(&self) -> usize {
        if self.centring.is_some() { crate::consistency::CENTRING_ROWS } else { 1 }
    }

    /// Refuses a training batch of `rows` rows (where known) over which
    /// `@loss` would centre a value on a mean of one value.
    fn check_rows_normalize(&self, rows: Option<usize>) -> Result<()> {
        match (&self.centring, rows) {
            (Some(c), Some(rows)) => c.refuses(rows).map_or(Ok(()), |why| Err(TrainError::Input(why))),
            _ => Ok(()),
        }
    }

    /// The learning rate as `function`'s `lr` input (its element type).
    fn lr_input(&self, function: &str, lr: f64) -> Result<Tensor> {
        let dtype = self.backend.function(function)?.args.iter().find(|a| a.bind == "lr").map(|a| a.dtype);
        let dtype = dtype.ok_or_else(|| TrainError::Input(format!("@{function} takes no learning rate")))?;
        Ok(Tensor::scalar(lr, dtype))
    }

    /// Counts a step that returned `out` (its loss first); a non-finite
    /// loss is an error naming the step.
    fn stepped(&mut self, out: &[Tensor], lr: f64, rows: usize, inputs: &[&[&Tensor]]) -> Result<Metrics> {
        self.steps = self.steps.saturating_add(1);
        let before = self.last_lr.replace(lr);
        let loss = out.first().and_then(|t| t.values.first()).copied().unwrap_or(f64::NAN);
        // (Looked for on each step only where the inputs are checked: the
        // training loop's data refused non-finite values when it loaded.)
        let infinite = (self.options.check_inputs || !loss.is_finite())
            .then(|| {
                inputs.iter().flat_map(|micro| micro.iter().enumerate()).find_map(|(i, t)| {
                    t.values.iter().position(|v| v.is_infinite()).map(|at| (i, at, t.values[at], &t.shape))
                })
            })
            .flatten();
        let infinite_before = std::mem::replace(&mut self.last_infinite, infinite.map(|(i, at, v, _)| (i, at, v)));
        if !loss.is_finite() {
            if self.backend.manifest().symbols.iter().any(|s| s.name == "loss_scale") {
                return Err(TrainError::Fp16Overflow { step: self.steps, loss, lr });
            }
            // An infinity passes the input check (a mask may hold -inf); a
            // NaN loss on one is the likely cause. Else a step before at
            // another rate may have made the parameters non-finite.
            let cause = match (infinite, before) {
                (Some((i, at, v, shape)), _) => Some(format!(
                    "input #{i} holds {v} at index {at} (of shape {shape:?}), the likely cause where it is not a \
                     mask; the step's update was applied, so the parameters may no longer be finite (load a \
                     checkpoint)"
                )),
                // The step before took an infinity with a finite loss; its
                // update is the likely cause (the rate was blamed).
                (None, _) if let Some((i, at, v)) = infinite_before => Some(format!(
                    "the step before's input #{i} held {v} at index {at}, the likely cause where it is not a mask: \
                     its loss was finite, but its update may have made the parameters non-finite (load a \
                     checkpoint)"
                )),
                (None, Some(b)) if b > 2.0 * lr => Some(format!(
                    "lower the learning rate (the step before ran at lr {}, whose update may have made the \
                     parameters non-finite)",
                    super::rate_text(b)
                )),
                _ => None,
            };
            return Err(TrainError::NonFinite { step: self.steps, loss, lr, cause });
        }
        Ok(Metrics { step: self.steps, loss, rows })
    }

    /// One train step of gradient accumulation ([`Options::accumulate`]):
    /// `micro` holds the micro-batches' inputs (each at most the model's
    /// batch; a smaller one compiles its variant once) with each one's
    /// share of the global batch (its rows over the global batch's). Each
    /// micro-batch's weighted loss, gradients and set states are added in
    /// order to accumulators that stay on the device (`@train_grad`), and
    /// `@train_apply` sums them over the replicas of a data-parallel run
    /// (rank order) and makes the update: the same additions in the same
    /// order as replicas of one micro-batch each make, so the bits are
    /// theirs.
    pub fn step_micro(&mut self, micro: &[(Vec<&Tensor>, f64)], lr: f64) -> Result<Metrics> {
        if self.options.accumulate <= 1 || self.backend.function("train_grad").is_err() {
            return Err(TrainError::Input(
                "a step of micro-batches needs the model compiled for gradient accumulation (Options::accumulate \
                 above 1)"
                    .into(),
            ));
        }
        if micro.is_empty() {
            return Err(TrainError::Input("a step of no micro-batches".into()));
        }
        for (inputs, _) in micro {
            self.check_rows_normalize(inputs.first().and_then(|t| t.shape.first()).copied())?;
        }
        // Dropout's seed and offset where left out: each micro-batch its
        // own masks, as `aicf train --accumulate` draws them.
        let drawn: Vec<Vec<Tensor>> = micro
            .iter()
            .enumerate()
            .map(|(j, (inputs, _))| {
                self.implied_rng("train_grad", inputs.len(), self.steps, self.rank() * self.options.accumulate + j)
            })
            .collect::<Result<_>>()?;
        let extended: Vec<(Vec<&Tensor>, f64)> =
            micro.iter().zip(&drawn).map(|((inputs, w), d)| (inputs.iter().copied().chain(d).collect(), *w)).collect();
        let micro = extended.as_slice();
        check_lr(lr)?;
        if let Some((i, (_, w))) =
            micro.iter().enumerate().find(|(_, (_, w))| !(w.is_finite() && (0.0..=1.0).contains(w)))
        {
            return Err(TrainError::Input(format!("micro-batch {i}'s share {w} is not in [0, 1]")));
        }
        let shares: f64 = micro.iter().map(|(_, w)| w).sum();
        for (inputs, _) in micro {
            self.check_input_count("train_grad", inputs.len())?;
        }
        if micro.len() > self.options.accumulate {
            return Err(TrainError::Input(format!(
                "{} micro-batches, more than the {} the model was compiled to accumulate (Options::accumulate)",
                micro.len(),
                self.options.accumulate
            )));
        }
        // (A data-parallel replica's add up to its rows' share of the batch
        // over every replica.)
        if !self.replicated() && (shares - 1.0).abs() > 1e-6 {
            return Err(TrainError::Input(format!(
                "the micro-batches' shares add up to {shares}, not 1 (each is its rows over the global batch's)"
            )));
        }
        if self.options.check_inputs && !self.replicated() {
            for (inputs, _) in micro {
                check_nan_inputs("train_grad", inputs)?;
            }
        }
        let mut rows = 0;
        for (i, (inputs, weight)) in micro.iter().enumerate() {
            let weight_t = Tensor::scalar(*weight, aicf_runtime::artifact::DType::F32);
            let first_t = Tensor::scalar(if i == 0 { 1.0 } else { 0.0 }, aicf_runtime::artifact::DType::F32);
            let converted = self.integer_inputs("train_grad", inputs)?;
            let mut all: Vec<&Tensor> = converted.iter().map(|t| t.as_ref()).collect();
            all.extend([&weight_t, &first_t]);
            self.ensure_compiled("train_grad", &all)?;
            self.backend.call("train_grad", &all)?;
            rows += inputs.first().and_then(|t| t.shape.first()).copied().unwrap_or(0);
        }
        let lr_t = self.lr_input("train_apply", lr)?;
        // The accumulators are already weighted: over the replicas they are
        // summed as they are.
        let one = Tensor::scalar(1.0, aicf_runtime::artifact::DType::F32);
        let out = self.backend.call("train_apply", &[&lr_t, &one])?;
        let micro_inputs: Vec<&[&Tensor]> = micro.iter().map(|(inputs, _)| inputs.as_slice()).collect();
        self.stepped(&out, lr, rows, &micro_inputs)
    }

    /// `@forward` on `inputs` (any batch size; a new one compiles once).
    pub fn predict(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let converted = self.integer_inputs("forward", inputs)?;
        let inputs: &[&Tensor] = &converted.iter().map(|t| t.as_ref()).collect::<Vec<_>>();
        self.ensure_compiled("forward", inputs)?;
        Ok(self.backend.call("forward", inputs)?)
    }

    /// `inputs` with an integer tensor of the other integer width than
    /// `function`'s input takes (PyTorch's labels and token ids are int64;
    /// a model's are i32) read as the model's type: the values are the
    /// same numbers, and one that the type cannot hold is refused naming
    /// the input (as every integer input is checked). Others as given.
    fn integer_inputs<'t>(&self, function: &str, inputs: &[&'t Tensor]) -> Result<Vec<std::borrow::Cow<'t, Tensor>>> {
        use aicf_runtime::artifact::DType::{I32, I64};
        use std::borrow::Cow;
        let f = self.backend.function(function)?;
        let args = f.args.iter().filter(|a| a.role() == aicf_runtime::artifact::Role::Input);
        let mut out: Vec<Cow<'t, Tensor>> = inputs.iter().map(|&t| Cow::Borrowed(t)).collect();
        for (t, a) in out.iter_mut().zip(args) {
            if matches!((t.dtype, a.dtype), (I64, I32) | (I32, I64)) {
                t.to_mut().dtype = a.dtype;
            }
        }
        Ok(out)
    }

    /// Accuracy of `@forward`'s argmax over the last dimension against
    /// `labels`, for `x` of any number of rows: batches of the model's size,
    /// and a smaller last one.
    pub fn evaluate(&mut self, x: &Tensor, labels: &[i64]) -> Result<Evaluation> {
        let Some(&rows) = x.shape.first() else {
            return Err(TrainError::Input("evaluate takes rows of features: a tensor of rank 0 has none".into()));
        };
        if rows == 0 {
            return Err(TrainError::Input("evaluate: no rows (an accuracy of nothing)".into()));
        }
        if !x.filled() {
            return Err(TrainError::Input(format!(
                "evaluate: {} values, which do not fill features of shape {:?}",
                x.values.len(),
                x.shape
            )));
        }
        let per_row = x.values.len() / rows;
        if labels.len() != rows {
            return Err(TrainError::Input(format!("{} labels for {rows} rows", labels.len())));
        }
        let batch = self.batch().unwrap_or(rows).max(1);
        let mut correct = 0;
        for start in (0..rows).step_by(batch) {
            let n = batch.min(rows - start);
            let mut shape = x.shape.clone();
            shape[0] = n;
            let chunk = Tensor::new(shape, x.dtype, x.values[start * per_row..(start + n) * per_row].to_vec());
            let out = self.predict(&[&chunk])?;
            let logits = out.first().ok_or_else(|| TrainError::Input("@forward returns nothing".into()))?;
            let classes = logits.shape.last().copied().unwrap_or(1).max(1);
            if classes == 1 {
                return Err(TrainError::Input(
                    "evaluate measures a classifier's accuracy (the argmax over its classes); @forward gives one value \
                     per row, a regression's (use predict and its loss)"
                        .into(),
                ));
            }
            if let Some(at) = logits.values.iter().position(|v| v.is_nan()) {
                return Err(TrainError::Input(format!(
                    "evaluate: @forward gives NaN for row {} (a parameter or a feature of that row is not finite)",
                    start + at / classes
                )));
            }
            if let Some((i, bad)) =
                labels[start..start + n].iter().enumerate().find(|(_, l)| !(0..classes as i64).contains(l))
            {
                return Err(TrainError::Input(format!(
                    "evaluate: label {bad} of row {} is outside the model's classes [0, {classes})",
                    start + i
                )));
            }
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
        self.save_checkpoint_with(path, metadata, &BTreeMap::new())
    }

    /// [`Trainer::save_checkpoint`] with `extra` tensors stored beside the
    /// model's (under their own names; loading the checkpoint ignores
    /// them; [`aicf_runtime::checkpoint::load`] reads them back).
    pub fn save_checkpoint_with(
        &self,
        path: &Path,
        metadata: &BTreeMap<String, String>,
        extra: &BTreeMap<String, Tensor>,
    ) -> Result<()> {
        // A tensor whose values do not fill its shape would be written with
        // data offsets the header's shape contradicts: a checkpoint no load
        // takes.
        if let Some((name, t)) = extra.iter().find(|(_, t)| !t.filled()) {
            return Err(TrainError::Input(format!(
                "checkpoint entry {name}: {} values do not fill its shape {:?}",
                t.values.len(),
                t.shape
            )));
        }
        // A caller's own "step" is the checkpoint's step count: one that is
        // not a count was written, and the file then loaded nowhere.
        if let Some(text) = metadata.get("step")
            && !text.parse::<u64>().is_ok_and(|s| s <= MAX_STEPS)
        {
            return Err(TrainError::Input(format!(
                "checkpoint metadata step {text:?} is not a step count (0 to 2^53): the key holds the checkpoint's \
                 step, which loading restores (leave it out to write the trainer's, or use another key)"
            )));
        }
        let mut metadata = metadata.clone();
        metadata.entry("step".into()).or_insert_with(|| self.steps.to_string());
        let extra = extra
            .iter()
            .map(|(name, t)| {
                let mut bytes = vec![0u8; t.values.len() * t.dtype.bytes()];
                aicf_runtime::host::write_values(&mut bytes, t.dtype, &t.values);
                aicf_runtime::checkpoint::Entry { name: name.clone(), dtype: t.dtype, shape: t.shape.clone(), bytes }
            })
            .collect();
        Ok(self.backend.save_checkpoint_with(path, &metadata, extra)?)
    }

    /// Restores a checkpoint of this model (written on any device); returns
    /// its metadata.
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<BTreeMap<String, String>> {
        self.load_checkpoint_of(path, true, true)
    }

    /// A checkpoint's parameters and model state (a batch norm's running
    /// statistics), with this trainer's optimizer started afresh (moments
    /// zero, its bias correction's count 0), as a new PyTorch optimizer over
    /// loaded weights: a checkpoint of a run with another optimizer (SGD's
    /// momentum, Adam's moments) goes on under this one. With `same_ir`
    /// false, of this model at another batch size. The step count is the
    /// checkpoint's; returns its metadata. A checkpoint that does not load
    /// changes nothing.
    pub fn load_parameters(&mut self, path: &Path, same_ir: bool) -> Result<BTreeMap<String, String>> {
        let metadata = self.load_checkpoint_of(path, same_ir, false)?;
        // (In place, each slot's bytes: a symbol of this manifest's own.)
        super::adapt::rewrite::reset_optimizer_state(self)?;
        Ok(metadata)
    }

    /// [`Trainer::load_checkpoint`]; with `same_ir` false, of this model at
    /// another batch size (its IR hash is the other batch's): the tensors
    /// checked and loaded by name. Without `state`, for evaluation, the
    /// optimizer's state may be missing (a checkpoint's weights alone).
    pub fn load_checkpoint_of(&mut self, path: &Path, same_ir: bool, state: bool) -> Result<BTreeMap<String, String>> {
        // The step count is checked before any state is restored: a count no
        // run reaches (past 2^53, where f64 step offsets stop being exact) is
        // a damaged or crafted file.
        let metadata = aicf_runtime::checkpoint::read_metadata(path).map_err(RuntimeError::from)?;
        self.last_lr = None;
        self.last_infinite = None;
        let step = match metadata.get("step") {
            None => None,
            Some(text) => match text.parse::<u64>() {
                Ok(step) if step <= MAX_STEPS => Some(step),
                _ => {
                    return Err(TrainError::Io {
                        path: path.to_path_buf(),
                        message: format!("step {text:?} in its metadata is not a step count (0 to 2^53)"),
                    });
                }
            },
        };
        let metadata = self.backend.load_checkpoint_of(path, same_ir, state).map_err(|e| match e {
            // (Another batch's IR hash is another: said with the way.)
            RuntimeError::Checkpoint(aicf_runtime::checkpoint::CheckpointError::OtherModel { .. }) => {
                TrainError::Input(format!(
                    "{e}; of this model at another batch size, `load_checkpoint_of(path, false, ..)` loads its \
                     tensors by name"
                ))
            }
            e => e.into(),
        })?;
        if let Some(step) = step {
            self.steps = step;
        }
        Ok(metadata)
    }
}

/// The most steps a run counts: beyond 2^53 a step offset fed to the model
/// as a number is no longer exact.
pub const MAX_STEPS: u64 = 1 << 53;

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

/// Whether `dir` holds a complete, intact artifact this host can run on
/// `device`: a manifest of this format whose checksum and kernel file hashes
/// hold (a cache entry cut short by a killed process, or written by an older
/// compiler, is compiled again), with host code for this CPU.
fn complete(dir: &Path, device: &Device) -> bool {
    let Ok(manifest) = aicf_runtime::artifact::load_manifest(dir) else { return false };
    match device {
        Device::Cpu { .. } => {
            manifest.files.contains_key("kernels.so") && aicf_runtime::cpu::missing_cpu_feature(&manifest).is_none()
        }
        Device::Cuda { .. } => ["sm_80", "sm_90"]
            .iter()
            .all(|chip| manifest.ptx_files(chip).iter().all(|f| manifest.files.contains_key(f))),
    }
}

/// Whether the artifact in `dir` loads on the CPU (its kernel library opens
/// and holds every kernel the manifest names); a GPU's PTX is checked when
/// a session loads it.
fn loads(dir: &Path, device: &Device) -> std::result::Result<(), String> {
    match device {
        Device::Cpu { .. } => aicf_runtime::cpu::CpuModule::load(dir, 1).map(|_| ()).map_err(|e| e.to_string()),
        Device::Cuda { .. } => Ok(()),
    }
}

/// Compiles `source` (at batch size `batch`, or its own) into the cache,
/// or finds it there.
fn compile_artifact(source: &str, name: &str, options: &Options, batch: Option<usize>) -> Result<Compiled> {
    let train = options.train_options();
    let target = options.target();
    let target_key = match &target {
        // The instruction set too: AICF_CPU_ISA=avx2 never finds the
        // native build's artifact.
        Target::Cpu(_) => format!("cpu -march={}", crate::codegen::target::cpu::march()),
        Target::Cuda(gpu) => format!("cuda {gpu:?}"),
    };
    // Keyed by the canonical IR: a comment or a renamed value in the
    // source finds the same artifact.
    let canonical = pipeline::canonical_source(source, name)?;
    let key = ir_hash(&format!(
        "{canonical}\n{}\n{target_key}\n{}\nbatch {batch:?}",
        train.train_pipeline(),
        compiler_identity()
    ));
    let dir = options.cache_dir.join(format!("artifact-{key}"));
    // A cached artifact whose kernels do not load (a kernel library linked
    // from a damaged kernel cache) is compiled again, not kept failing.
    // Missing, it is compiled under the directory's lock, and looked for
    // again once the lock is held (another thread or process may have just
    // compiled it).
    let ready = || complete(&dir, &options.device) && loads(&dir, &options.device).is_ok();
    let cached = |dir: PathBuf| Compiled {
        batch,
        dir,
        seconds: None,
        kernels: 0,
        compiled_kernels: 0,
        timings: Timings::default(),
    };
    // The weights a module names are checked against its hash here too:
    // an artifact cached before they changed ran the old ones, without a
    // word (compiling again says they changed).
    if let Some(w) = crate::weights::declared_in_text(source) {
        crate::weights::resolve(&w, name)?;
    }
    if ready() {
        return Ok(cached(dir));
    }
    let _lock = crate::codegen::lock_artifact(&dir);
    if ready() {
        return Ok(cached(dir));
    }
    let started = Instant::now();
    let compiled = pipeline::compile_source(source, name, &train, batch, &target, &dir)?;
    if let Err(why) = loads(&dir, &options.device) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(TrainError::Input(format!(
            "{}: the kernels just compiled do not load ({why}); the kernel cache {} may be damaged: delete it \
             and run again",
            dir.display(),
            KernelCache::default_dir(&options.cache_dir).display()
        )));
    }
    Ok(Compiled {
        batch,
        dir,
        seconds: Some(started.elapsed().as_secs_f64()),
        kernels: compiled.kernels,
        compiled_kernels: compiled.compiled_kernels,
        timings: compiled.timings,
    })
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
