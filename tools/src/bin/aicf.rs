//! `aicf`: compile a model, train it on a data set on any device, score a
//! checkpoint, time a train step. The work is the library's
//! (`aicf_compiler::pipeline`, `aicf_compiler::train`); this file parses
//! arguments and prints.
//!
//! ```text
//! aicf compile examples/mlp/digits_mlp.mlir -o target/digits.aicf [--timing]
//! aicf compile examples/mlp/digits_mlp.mlir --emit ll        # print a stage
//! aicf train examples/cnn/digits_cnn.mlir --data data/digits.csv.gz --epochs 20
//! aicf train examples/char_lm/char_lm.mlir --data data/tinyshakespeare.txt --device cuda
//! aicf eval examples/mlp/digits_mlp.mlir --data data/digits.csv.gz --checkpoint ckpt/last.safetensors
//! aicf bench examples/mlp784/mlp784.mlir --optimizer sgd --profile
//! ```

use aicf_compiler::{
    CompilerContext,
    codegen::{GpuOptions, KernelCache, ptx_files, ptxas, validate_ptx},
    import::onnx::{self, ImportOptions, Loss},
    pipeline::{self, MemoryBudget, Precision, TrainOptions},
    run_pipeline,
    train::{
        Compiled, Options, Trainer,
        data::DataOptions,
        predict,
        report::{EpochRecord, StepRecord},
        run::{self, LrSchedule, Report, RunOptions, Start},
    },
};
use aicf_runtime::collective::{self, Communicator};
use aicf_runtime::{Device, Tensor, artifact::Role};
use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "aicf", version, about = "AICF: a training compiler (compile and train models written in hl)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Optimizer {
    Sgd,
    Adam,
    Adamw,
}

impl Optimizer {
    fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Adam => "adam",
            Optimizer::Adamw => "adamw",
        }
    }
}

/// What `aicf predict` gives for each row.
#[derive(Clone, Copy, ValueEnum)]
enum PredictValues {
    /// A classifier's class (the argmax of its output).
    Class,
    /// A classifier's probabilities (the softmax of its output).
    Probabilities,
    /// @forward's output as it is.
    Raw,
}

/// The order of `aicf runs list`.
#[derive(Clone, Copy, ValueEnum)]
enum RunsOrder {
    /// As recorded (by id).
    Id,
    /// By best held-out loss, lowest first (runs without one last).
    Loss,
    /// By training FLOPs, fewest first.
    Flops,
}

#[derive(Clone, Copy, ValueEnum)]
enum Schedule {
    Constant,
    Cosine,
    Wsd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Target {
    /// This machine's CPU
    Cpu,
    /// NVIDIA GPUs (`gpu` names it too)
    #[value(alias = "gpu")]
    Cuda,
}

#[derive(Clone, Copy, ValueEnum)]
enum AttentionBackward {
    /// Fused (as `fused`).
    Auto,
    /// One fused op: on the CPU for every attention (its blocked kernel),
    /// on a GPU where its tensor cores take the heads (16-bit, head sizes
    /// multiples of 16 up to 128).
    Fused,
    /// GEMMs over the materialised probabilities.
    Gemm,
}

impl AttentionBackward {
    /// Whether to fuse: `None` for the device to choose.
    fn fused(self) -> Option<bool> {
        match self {
            AttentionBackward::Auto => None,
            AttentionBackward::Fused => Some(true),
            AttentionBackward::Gemm => Some(false),
        }
    }
}

/// How a convolution runs (`--conv`).
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Conv {
    /// Products on the CPU, direct kernels on a GPU.
    Auto,
    /// Matrix products over the image's window rows (im2col, the GEMM,
    /// col2im), ungrouped convolutions whose rows take at most 1 GiB.
    Gemm,
    /// One direct kernel per convolution and gradient.
    Direct,
}

impl Conv {
    /// Whether as products: `None` for the device to choose.
    fn as_gemm(self) -> Option<bool> {
        match self {
            Conv::Auto => None,
            Conv::Gemm => Some(true),
            Conv::Direct => Some(false),
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Stage {
    /// The model as parsed and verified.
    Hl,
    /// The fused hl train step (after autodiff, optimizer and fusion).
    Fused,
    /// The planned, scheduled ll train step.
    Ll,
}

#[derive(clap::Args, Clone)]
struct ModelArgs {
    /// The model: an hl module with @forward and @loss, or an ONNX model
    /// (.onnx), imported first with --loss and --batch (`aicf compile -`
    /// reads an hl module from standard input; the other commands read a
    /// file).
    model: PathBuf,
    /// An ONNX model's loss: cross_entropy (integer labels) or mse (a
    /// target of the output's shape) on its first output, or graph: the
    /// loss the graph computes itself, its one scalar float output (a
    /// `forward(x, targets)` returning `(logits, loss)`; graph:NAME names
    /// the output), whose other inputs are the targets. (Not given: the
    /// graph's own where it has one scalar output, else cross_entropy.)
    #[arg(long, value_parser = Loss::parse)]
    loss: Option<Loss>,
    /// An ONNX model's initializers to keep constant, not trained (names,
    /// or prefixes ending in `*`, comma-separated): a TorchScript export's
    /// buffers (a positional-encoding table), which it does not mark.
    #[arg(long, value_delimiter = ',')]
    freeze: Vec<String>,
    /// An ONNX model's float initializers to train whatever their use
    /// (names, or prefixes ending in `*`, comma-separated): a learned value
    /// no op reads as a weight (an LSTM's learned initial state `h0`),
    /// which imports as a constant otherwise.
    #[arg(long, value_delimiter = ',')]
    trainable: Vec<String>,
    /// An ONNX model imported with the parameter names of before
    /// 2026-12-07, for a checkpoint trained then (not a flag: set from the
    /// checkpoint, [`onnx_names_of_checkpoint`]).
    #[arg(skip)]
    legacy_names: bool,
    /// An ONNX model's cross-entropy (--loss cross_entropy, or the default)
    /// leaves out targets of this label: PyTorch's ignore_index, -100 where
    /// Hugging Face pads its labels. (An hl model's @loss states its own.)
    #[arg(long, allow_negative_numbers = true, value_name = "LABEL")]
    ignore_index: Option<i64>,
    /// The size of an ONNX model's symbolic batch dimension; with an hl
    /// model, its rows per batch (hl-set-batch: train, eval and bench run
    /// the model so retargeted, written to <stem>.batch<N>.mlir in the
    /// output directory; compile makes a variant on the same parameters;
    /// sample runs one row at a time and takes none). Under --nproc N and
    /// --accumulate K, each process's micro-batch: a step takes N x K x
    /// this many rows.
    #[arg(long, allow_negative_numbers = true, value_parser = batch_size)]
    batch: Option<usize>,
    /// The optimizer the train step applies after the gradients: sgd,
    /// adam or adamw.
    #[arg(long, value_enum, default_value = "adam")]
    optimizer: Optimizer,
    /// Weight decay: an L2 term added to the gradient for sgd and adam (as
    /// PyTorch's weight_decay), decoupled (lr x decay x weight) for adamw.
    /// Default: 0.01 for adamw (torch.optim.AdamW's), 0 for sgd and adam.
    #[arg(long, allow_negative_numbers = true)]
    weight_decay: Option<f64>,
    /// SGD's momentum (PyTorch's buffer form); 0: none. Adam's and AdamW's
    /// moments are set by --betas.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    momentum: f64,
    /// SGD's Nesterov momentum (PyTorch's nesterov=True; with --momentum).
    #[arg(long)]
    nesterov: bool,
    /// Adam's and AdamW's beta1,beta2 (nanoGPT trains with 0.9,0.99).
    #[arg(long, allow_negative_numbers = true, default_value = "0.9,0.999", value_parser = betas)]
    betas: (f64, f64),
    /// Adam's and AdamW's eps, the term added to the denominator
    /// [default: 1e-8, PyTorch's].
    #[arg(long, allow_negative_numbers = true)]
    adam_eps: Option<f64>,
    /// Weight decay for matrices and convolution kernels only: biases and
    /// norm weights (parameters of fewer than two dimensions) take none,
    /// as nanoGPT's and Hugging Face's parameter groups (with
    /// --weight-decay).
    #[arg(long)]
    no_decay_1d: bool,
    /// Clip all gradients together to this global L2 norm before each
    /// update (PyTorch's clip_grad_norm_); none by default (0: none, as
    /// Hugging Face's max_grad_norm=0, which turns a checkpoint's clipping
    /// off on a resume with --override-resume).
    #[arg(long, allow_negative_numbers = true)]
    clip_norm: Option<f64>,
    /// Arena budget of the train step's memory plan: bytes (12000000, or
    /// with a K, M or G suffix for KiB, MiB, GiB: 12M) or a percentage of
    /// the plan without a budget (60%); activations are recomputed to meet
    /// it.
    #[arg(long, allow_hyphen_values = true, value_parser = memory_budget)]
    memory_budget: Option<MemoryBudget>,
    /// fp32, or mixed precision: bf16 or fp16 contractions with f32
    /// accumulation, master weights and losses (hl-autocast). fp32 by
    /// default; eval, sample and a resumed train take the checkpoint's.
    #[arg(long, default_value = "fp32", hide_default_value = true, value_parser = Precision::parse)]
    precision: Precision,
    /// Leave large 16-bit contractions (--precision bf16/fp16, or a model
    /// written in 16 bits) whose dimensions are not multiples of 8
    /// unpadded (by default they are padded with zeros, as Inductor's
    /// pad_mm, so tensor-core GEMMs read aligned rows: GPT-2's vocabulary
    /// of 50,257)
    #[arg(long)]
    no_shape_padding: bool,
    /// Attention's gradient: one fused op (FlashAttention-2's backward,
    /// the probabilities recomputed, never materialised; each attention's
    /// output and log-sum-exp kept from the forward) on the CPU for every
    /// attention and on a GPU where its tensor cores take the heads
    /// (--precision bf16/fp16, head sizes multiples of 16 up to 128), or
    /// GEMMs over the probabilities (gemm); auto: fused
    #[arg(long, value_enum, default_value = "auto")]
    attention_backward: AttentionBackward,
    /// Convolutions: matrix products over the image's window rows (gemm:
    /// im2col, the GEMM the runtime measures fastest, col2im; ungrouped
    /// ones) or one direct kernel each (direct); auto: gemm on the CPU,
    /// direct on a GPU
    #[arg(long, value_enum, default_value = "auto")]
    conv: Conv,
    /// Data parallel: compile the step that sums the replicas' gradients,
    /// and (train, bench) run as one replica of the `mpirun` that started
    /// this process. Alone it trains as without.
    #[arg(long)]
    data_parallel: bool,
    /// The least bytes of gradients one all-reduce sums (K, M, G
    /// suffixes; 0: one per gradient), as PyTorch DDP's bucket_cap_mb.
    #[arg(long, allow_negative_numbers = true, default_value = "25M", value_parser = bucket_size)]
    bucket_size: u64,
    /// Gradient accumulation: each step adds the gradients of N
    /// micro-batches of the model's batch before one update (a global
    /// batch N times the model's, at one micro-batch's memory), in order,
    /// as N replicas of a data-parallel run add theirs (the same bits).
    /// The sums stay on the device. [default: 1; a resume: the
    /// checkpoint's]
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, hide_default_value = true, value_parser = accumulate)]
    accumulate: usize,
    /// Data parallel: the most seconds any rank waits for the others in a
    /// collective before it names the ones that did not come and ends the
    /// run (default: $AICF_COLLECTIVE_TIMEOUT, else 300).
    #[arg(long, allow_negative_numbers = true, value_parser = collective_seconds)]
    collective_timeout: Option<f64>,
}

impl ModelArgs {
    /// `--clip-norm`, where 0 is none (as Hugging Face's max_grad_norm=0),
    /// for every command that builds a train step.
    fn clip_norm(&self) -> Option<f64> {
        self.clip_norm.filter(|&c| c != 0.0)
    }

    /// `--weight-decay`, by default PyTorch's for the optimizer: 0.01 for
    /// AdamW (torch.optim.AdamW's; it was 0, so `--optimizer adamw` alone
    /// trained as Adam), 0 for SGD and Adam.
    fn weight_decay(&self) -> f64 {
        self.weight_decay.unwrap_or(if matches!(self.optimizer, Optimizer::Adamw) { 0.01 } else { 0.0 })
    }
}

#[derive(clap::Args, Clone)]
struct DeviceArgs {
    /// Where to run: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu", value_parser = device)]
    device: Device,
    /// CPU worker threads (0: one per core).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
    threads: usize,
    /// CUDA: let f32 GEMMs run in TF32 on the tensor cores (PyTorch's
    /// allow_tf32: inputs rounded to 10 mantissa bits, sums in f32); off
    /// by default, or as AICF_ALLOW_TF32=1 says.
    #[arg(long)]
    allow_tf32: bool,
}

impl DeviceArgs {
    fn device(&self) -> Device {
        match self.device {
            Device::Cpu { .. } => Device::Cpu { threads: self.threads },
            cuda => cuda,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Compile a model's train step (or print one stage).
    Compile {
        #[command(flatten)]
        compile: ModelArgs,
        /// Where to write the artifact (a directory: manifest.json +
        /// kernels.so; default: `<model stem>.aicf` in the current
        /// directory, as a compiler writes its output), or
        /// with --emit the IR (default: printed). An ONNX model's imported
        /// module and weights are written beside the output too.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print this stage's IR instead of writing an artifact.
        #[arg(long, value_enum)]
        emit: Option<Stage>,
        /// What to compile for: the host CPU (kernels.so) or NVIDIA GPUs
        /// (PTX for sm_80 and sm_90, each checked by ptxas when one is found).
        #[arg(long, value_enum, default_value_t = Target::Cpu)]
        target: Target,
        /// Print how long each stage of the compile took.
        #[arg(long)]
        timing: bool,
    },
    /// Translate an ONNX model (PyTorch, TensorFlow, Keras exports) to an hl
    /// module with @forward and @loss; its weights go to a safetensors file
    /// beside it.
    Import {
        /// The .onnx file.
        model: PathBuf,
        /// The hl module to write (default: the model's name with .mlir);
        /// the weights go to `<stem>.weights.safetensors` beside it.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The loss @loss computes: cross_entropy or mse on the first
        /// output, graph (the graph's own scalar output; graph:NAME names
        /// it), auto (graph where the graph has one scalar output, else
        /// cross_entropy), or none (only @forward).
        #[arg(long, default_value = "auto", value_parser = Loss::parse)]
        loss: Loss,
        /// The size of the symbolic batch dimension (64 where not given).
        #[arg(long, allow_negative_numbers = true, value_parser = batch_size)]
        batch: Option<usize>,
        /// Initializers to keep constant, not trained (names, or prefixes
        /// ending in `*`, comma-separated): a TorchScript export's buffers
        /// (a positional-encoding table), which it does not mark.
        #[arg(long, value_delimiter = ',')]
        freeze: Vec<String>,
        /// Float initializers to train whatever their use (names, or
        /// prefixes ending in `*`, comma-separated): a learned value no op
        /// reads as a weight (an LSTM's learned initial state `h0`), which
        /// imports as a constant otherwise.
        #[arg(long, value_delimiter = ',')]
        trainable: Vec<String>,
        /// The cross-entropy's label that counts for nothing (PyTorch's
        /// ignore_index: -100 where Hugging Face pads its labels).
        #[arg(long, allow_negative_numbers = true, value_name = "LABEL")]
        ignore_index: Option<i64>,
    },
    /// Train a model on a data set: a CSV table (features, label last), a
    /// text (next-character prediction), arrays (.safetensors, .npy), or a
    /// folder of images (a subfolder per class, as torchvision's
    /// ImageFolder).
    Train {
        #[command(flatten)]
        compile: ModelArgs,
        #[command(flatten)]
        device: DeviceArgs,
        /// The data: .csv or .csv.gz, .txt or .txt.gz, .safetensors, one .npy per
        /// input (repeat --data), or a folder of images: DIR/<class>/*.png
        /// (JPEG, BMP, GIF, WebP, TIFF, PNM), or DIR/train/<class> and
        /// DIR/val/<class>, read as the model's input takes them (channels,
        /// size) as 0 to 1.
        #[arg(long, required = true)]
        data: Vec<PathBuf>,
        /// Learning rate (Adam's steps are small: 3e-3 trains the examples
        /// in their default 10 epochs).
        #[arg(long, default_value_t = 3e-3, allow_negative_numbers = true)]
        lr: f64,
        /// Passes over the training data (a resumed run: the epoch to end
        /// at; left out, the checkpoint's run's).
        #[arg(long, allow_negative_numbers = true, default_value_t = 10)]
        epochs: usize,
        /// Seeds the initial parameters (with the model's own seed), the
        /// held-out split, the data order, dropout's masks and a model's noise.
        /// The same seed repeats a run bit for bit where its GEMM kernels
        /// are the same too: by default each shape runs the kernel this
        /// machine measured fastest, and another choice (another machine,
        /// a fresh registry) changes the last bits; `--gemm generated`
        /// fixes them.
        #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
        seed: u64,
        /// Fraction held out for validation (tables: a seeded shuffle of the
        /// rows; text: the end of the file).
        #[arg(long, default_value_t = 0.2, allow_negative_numbers = true)]
        val_split: f64,
        /// Tables and arrays: read each feature as (x - mean) / deviation,
        /// by the training rows' statistics (kept in checkpoints: eval and
        /// resume read features the same way), instead of one scale for
        /// every feature (a CSV's largest magnitude; arrays as they are).
        #[arg(long)]
        standardize: bool,
        /// Tables: read a regression's targets as (y - mean) / deviation by
        /// the training rows' statistics (prices of 1e5 that a network's
        /// outputs, starting near 0, would take long to reach); losses are
        /// of the standardized targets, predictions in the file's units
        /// (kept in checkpoints: eval, predict, export and resume read them).
        #[arg(long)]
        standardize_targets: bool,
        /// Images (an image folder, or arrays of [N, C, H, W]): change each
        /// training example at random, each step, as torchvision's
        /// transforms do: `flip` (RandomHorizontalFlip), `crop=P`
        /// (RandomCrop of the image's size after padding P zeros on each
        /// side), or both, `flip,crop=4` (CIFAR's recipe). Held-out examples
        /// are as they are; recorded in checkpoints (a resume asks for the
        /// same).
        #[arg(long, value_name = "flip,crop=P", value_parser = aicf_compiler::train::data::augment::Augment::parse)]
        augment: Option<aicf_compiler::train::data::augment::Augment>,
        /// Tables: the label is this column of the header row (Kaggle's
        /// `Survived`, `SalePrice`), wherever it is; the others are the
        /// features, in order. Without it, the last column. Recorded in
        /// checkpoints: eval, predict and a resume read tables so.
        #[arg(long, value_name = "COLUMN")]
        label: Option<String>,
        /// Tables: divide the features by this instead of the training
        /// rows' largest magnitude (1: as the file holds them, as a model's
        /// own pretrained weights may expect); recorded in checkpoints.
        #[arg(long, conflicts_with = "standardize", value_name = "SCALE", allow_negative_numbers = true)]
        feature_scale: Option<f64>,
        /// Text: training windows per epoch (default: as many as fill the
        /// training text once).
        #[arg(long, allow_negative_numbers = true)]
        windows_per_epoch: Option<usize>,
        /// Text: held-out windows evaluated each epoch, at most (spread evenly
        /// over the held-out text; default 256).
        #[arg(long, allow_negative_numbers = true)]
        eval_windows: Option<usize>,
        /// Run directory: metrics.jsonl, plot.svg and the compiled artifacts.
        #[arg(long, default_value = "target/aicf-run")]
        out: PathBuf,
        /// Save `last.safetensors` here after every epoch (atomically), and
        /// keep the epoch with the lowest held-out loss as
        /// `best.safetensors`.
        #[arg(long)]
        checkpoint_dir: Option<PathBuf>,
        /// Continue from `<checkpoint-dir>/last.safetensors` (written on any
        /// device): parameters, optimizer state, epoch and data order.
        #[arg(long, requires = "checkpoint_dir")]
        resume: bool,
        /// Continue from this checkpoint instead: any one a run wrote (an
        /// earlier model version's `v<k>.safetensors` in a checkpoint
        /// directory; the model comes from the checkpoint). With
        /// `--checkpoint-dir` elsewhere, a fork.
        #[arg(long, conflicts_with = "resume")]
        resume_from: Option<PathBuf>,
        /// Resume where `--checkpoint-dir` holds a checkpoint, else start
        /// (said which): one command for a job's first launch and its
        /// restarts (a Slurm requeue, a preempted machine). As Composer's
        /// autoresume. A directory whose last.safetensors is gone resumes
        /// from the latest it holds, never starting over it.
        #[arg(long, requires = "checkpoint_dir", conflicts_with_all = ["resume", "resume_from"])]
        auto_resume: bool,
        /// Resume even where the learning rate, optimizer, seed, split, data
        /// or model differ from what the checkpoint records (each difference
        /// is printed).
        #[arg(long)]
        override_resume: bool,
        /// Change the model while it trains by this policy (TOML: rules of
        /// a trigger and a growth action; see examples/grow/policy.toml).
        /// Decisions go to `<out>/decisions.jsonl`.
        #[arg(long)]
        adapt: Option<PathBuf>,
        /// Write the kernel timeline of a few steps (after two warm-up
        /// steps) to this file: trace-event JSON for Perfetto or
        /// chrome://tracing.
        #[arg(long)]
        profile: Option<PathBuf>,
        /// Steps the profile records.
        #[arg(long, allow_negative_numbers = true, default_value_t = 10)]
        profile_steps: usize,
        /// No progress bar (it is drawn only on a terminal anyway).
        #[arg(long)]
        no_progress: bool,
        /// Run every GEMM with this candidate instead of the registry's
        /// measured choice, so the run's bits do not depend on timings
        /// (CPU: generated, library, library-swapped, gemm-rs, openblas,
        /// avx512, avx2, bf16-dot, mkl, mkl-bf16; CUDA: generated,
        /// cublaslt). A candidate that cannot run a GEMM (OpenBLAS or MKL
        /// not installed, avx512 on a CPU without AVX-512, avx2 on one
        /// without AVX2 and FMA, bf16-dot on f32 operands or on a CPU
        /// without AVX-512 BF16, mkl-bf16 on f32 or f16 operands or with an
        /// MKL that has no cblas_gemm_bf16bf16f32) runs it as `library`.
        #[arg(long)]
        gemm: Option<String>,
        /// How the learning rate changes: constant; cosine (a linear
        /// warm-up over --warmup-steps, then a cosine decay that reaches
        /// --min-lr-factor times --lr one step past the last, as Hugging
        /// Face's and PyTorch's CosineAnnealingLR do); or wsd (warm-up, stable, decay: the
        /// warm-up, then --lr until the last --decay-fraction of the run,
        /// then a linear decay to --min-lr-factor times --lr).
        #[arg(long, value_enum, default_value_t = Schedule::Constant)]
        lr_schedule: Schedule,
        /// Steps of the cosine or wsd schedule's linear warm-up.
        #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
        warmup_steps: u64,
        /// Where the cosine or wsd schedule ends, as a fraction of --lr.
        #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
        min_lr_factor: f64,
        /// The share of the run the wsd schedule decays over (at its end;
        /// 0.2 if neither this nor --decay-steps is given).
        #[arg(long, allow_negative_numbers = true)]
        decay_fraction: Option<f64>,
        /// The wsd schedule's decay in steps, in place of --decay-fraction
        /// (with a growth policy's restart_schedule, the small model's
        /// steps then stay at the full rate whatever the run's length).
        #[arg(long, allow_negative_numbers = true, conflicts_with = "decay_fraction")]
        decay_steps: Option<u64>,
        /// Train data parallel on N processes of this machine: starts
        /// `mpirun -n N` of this command with --data-parallel (the global
        /// batch is N times the model's; each process a shard, and
        /// --threads cores / N worker threads unless given). On several
        /// machines, run `mpirun ... aicf train --data-parallel` yourself.
        #[arg(long, allow_negative_numbers = true)]
        nproc: Option<usize>,
        /// Record the run in this run registry (SQLite; default
        /// $AICF_RUNS_DB, else ~/.local/share/aicf/runs.sqlite; see `aicf
        /// runs`).
        #[arg(long)]
        runs_db: Option<PathBuf>,
        /// Do not record the run in the run registry.
        #[arg(long, conflicts_with = "runs_db")]
        no_runs_db: bool,
        /// Stop once training has spent this many FLOPs (the epoch in
        /// progress ends there and is evaluated); --epochs still bounds it.
        #[arg(long, allow_negative_numbers = true)]
        flops_budget: Option<f64>,
        /// End the run after this many epochs without a lower held-out loss
        /// than its best (early stopping's patience; needs held-out
        /// examples). The best epoch's checkpoint is
        /// `<checkpoint-dir>/best.safetensors`, kept with or without this.
        #[arg(long, value_name = "EPOCHS")]
        early_stop: Option<usize>,
        /// A checkpoint every this many steps inside an epoch too (into
        /// --checkpoint-dir; each epoch's end saves as ever): a kill then
        /// loses at most these steps, not a long epoch, and `--resume` goes
        /// on inside the epoch, bit for bit.
        #[arg(long, value_name = "STEPS")]
        save_every: Option<u64>,
        /// A line every this many steps (and a record in <out>/steps.jsonl,
        /// drawn in plot.svg): the mean training loss since the last line,
        /// the rate, the speed. For long epochs (a language model's text),
        /// whose own line comes at their end.
        #[arg(long, value_name = "STEPS")]
        log_every: Option<u64>,
        /// The held-out loss every this many steps too (in the step's line
        /// and record), as nanoGPT's eval_interval; each epoch's end is
        /// evaluated as ever. A text scores --eval-windows windows each time.
        #[arg(long, value_name = "STEPS")]
        eval_every: Option<u64>,
    },
    /// The run registry: every `aicf train` run, its model's structure, its
    /// problem, its held-out loss against FLOPs, its decisions.
    Runs {
        #[command(subcommand)]
        what: RunsCommand,
        /// The registry (default $AICF_RUNS_DB, else
        /// ~/.local/share/aicf/runs.sqlite).
        #[arg(long, global = true)]
        runs_db: Option<PathBuf>,
    },
    /// Propose a model for a data set, and a growth policy, from the run
    /// registry's past runs: the structures that did best on the nearest
    /// past problems (see `aicf runs`), built for this data's shapes.
    Propose {
        /// The data: a CSV table (features, label last) or a text.
        #[arg(long)]
        data: PathBuf,
        /// A table's label column, by its header's name, wherever it is
        /// (as train's --label).
        #[arg(long, value_name = "COLUMN")]
        label: Option<String>,
        /// The task where the file does not tell it (integer targets to
        /// regress: regression).
        #[arg(long, value_parser = ["classification", "regression", "text"])]
        task: Option<String>,
        /// The training FLOPs the model will get (`aicf train
        /// --flops-budget`); past runs are scored where they had spent as
        /// many epochs of the default model.
        #[arg(long, allow_negative_numbers = true)]
        budget: Option<f64>,
        /// Emit this structure instead of asking the registry ('mlp 64-64',
        /// 'mlp linear', 'lm 2x64').
        #[arg(long)]
        structure: Option<String>,
        /// Nearest past problems to draw on.
        #[arg(long, allow_negative_numbers = true, default_value_t = 5)]
        neighbours: usize,
        /// The next structure of a search: the best-ranked one not yet
        /// trained on this data (its runs in the registry mark what was
        /// tried); train it, then ask again.
        #[arg(long)]
        next: bool,
        /// Where to write the model (hl).
        #[arg(short, long)]
        output: PathBuf,
        /// Write a growth policy for `aicf train --adapt` here (default, where the proposal grows: beside the model, `x.mlir` -> `x.toml`).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Write the proposal's reasoning as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The registry (default $AICF_RUNS_DB, else
        /// ~/.local/share/aicf/runs.sqlite).
        #[arg(long)]
        runs_db: Option<PathBuf>,
        /// Replace a model (-o) or policy (--policy) file that no earlier
        /// proposal wrote (a hand-edited one is refused otherwise).
        #[arg(long)]
        force: bool,
    },
    /// Accuracy and loss of a checkpoint on a data set: on the data it
    /// trained on, what its run held out (the same rows, the text's end);
    /// on other data, all of it.
    Eval {
        #[command(flatten)]
        compile: ModelArgs,
        #[command(flatten)]
        device: DeviceArgs,
        /// The data to score, as train reads it (a table, a text, arrays, or
        /// a folder of images);
        /// the data the checkpoint trained on is scored on what its run held
        /// out, other data whole.
        #[arg(long, required = true)]
        data: Vec<PathBuf>,
        /// A checkpoint written by `aicf train --checkpoint-dir` (its
        /// `last.safetensors`, which the directory itself stands for, or a
        /// model version `v0.safetensors`, ...);
        /// its own model is scored (MODEL is the fallback for a checkpoint
        /// that holds none). Without one, a model with weights of its own
        /// (an imported ONNX model's) is scored on all of the data.
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        /// Text: score at most this many held-out windows, spread over the
        /// held-out text as training's figures are (default: every one).
        #[arg(long, allow_negative_numbers = true)]
        eval_windows: Option<usize>,
        /// Run every GEMM with this candidate (as `aicf train --gemm`; its
        /// names there). Default: the checkpoint's run's `--gemm`, where
        /// it gave one; else the registry's measured choice for each
        /// shape, so the last bits may differ with --batch and the machine.
        #[arg(long)]
        gemm: Option<String>,
        /// Where the compiled artifacts go.
        #[arg(long, default_value = "target/aicf-eval")]
        out: PathBuf,
    },
    /// Text from a language model trained by `aicf train` on a text: the
    /// checkpoint's model continues the prompt one token at a time (as
    /// nanoGPT's sample.py); the text goes to stdout, compile messages to
    /// stderr.
    Sample {
        #[command(flatten)]
        compile: ModelArgs,
        #[command(flatten)]
        device: DeviceArgs,
        /// A checkpoint written by `aicf train --checkpoint-dir` on a text
        /// (the directory stands for its `last.safetensors`).
        #[arg(long)]
        checkpoint: PathBuf,
        /// The text to continue (default, and for an empty one: a newline,
        /// as nanoGPT's sample.py starts; a vocabulary without a newline
        /// starts from its first character).
        #[arg(long)]
        prompt: Option<String>,
        /// Tokens (characters, or bytes) to draw.
        #[arg(long, allow_negative_numbers = true, default_value_t = 500)]
        tokens: usize,
        /// Below 1 more likely tokens, above 1 more varied (nanoGPT's 0.8);
        /// 0: the most likely token each time (greedy).
        #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
        temperature: f64,
        /// Draw among the k most likely tokens only (1: greedy); all by
        /// default.
        #[arg(long, allow_negative_numbers = true)]
        top_k: Option<usize>,
        /// Seeds the draws (the same seed, the same text).
        #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
        seed: u64,
        /// Run every GEMM with this candidate (as `aicf train --gemm`; its
        /// names there). Default: the checkpoint's run's `--gemm`, where
        /// it gave one; else the registry's measured choice for each
        /// shape, so the last bits may differ with --batch and the machine.
        #[arg(long)]
        gemm: Option<String>,
        /// Where the compiled artifacts go.
        #[arg(long, default_value = "target/aicf-sample")]
        out: PathBuf,
    },
    /// A model's predictions for every row of a data set, in its order: a
    /// classifier's classes (or probabilities), other models' outputs, from
    /// a checkpoint of `aicf train` or an imported model's own weights;
    /// written as .npy or CSV (-o), or as CSV to stdout.
    Predict {
        #[command(flatten)]
        compile: ModelArgs,
        #[command(flatten)]
        device: DeviceArgs,
        /// The rows to predict for: a table (the features, with or without
        /// the label column: last, or where the run's --label named it), arrays (one .npy per data input,
        /// or a .safetensors file), or images (a folder of them, at any
        /// depth, or image files; each CSV row starts with the image's
        /// path); targets given with them are not read.
        #[arg(long, required = true)]
        data: Vec<PathBuf>,
        /// A checkpoint written by `aicf train --checkpoint-dir` (the
        /// directory stands for its last.safetensors); without one, the
        /// model's own weights (an imported ONNX model's).
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        /// Each row's prediction: class (the argmax: a classifier's
        /// default), probabilities (the softmax), or raw (@forward's output
        /// as it is: a classifier's logits, other models' default).
        #[arg(long, value_enum)]
        values: Option<PredictValues>,
        /// Which of @forward's results to write, counting from 0 (a model
        /// of two outputs: its second is 1); the first by default. Only
        /// the first is a classifier's logits: another is written raw.
        #[arg(long, default_value_t = 0)]
        result: usize,
        /// The file to write, .npy or .csv (default: CSV to stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Run every GEMM with this candidate (as `aicf train --gemm`; its
        /// names there). Default: the checkpoint's run's `--gemm`, where
        /// it gave one; else the registry's measured choice for each
        /// shape, so the last bits may differ with --batch and the machine.
        #[arg(long)]
        gemm: Option<String>,
        /// Where the compiled artifacts go.
        #[arg(long, default_value = "target/aicf-predict")]
        out: PathBuf,
    },
    /// A trained model as an ONNX file for onnxruntime, TensorRT or any
    /// runtime that reads ONNX: @forward with a checkpoint's parameters (or
    /// an imported model's own weights), at a dynamic batch where the model
    /// allows one, reading features as the checkpoint's run read them.
    Export {
        #[command(flatten)]
        compile: ModelArgs,
        /// A checkpoint written by `aicf train --checkpoint-dir` (the
        /// directory stands for its last.safetensors); without one, the
        /// model's own weights (an imported ONNX model's).
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        /// The ONNX file to write (.onnx).
        #[arg(short, long)]
        output: PathBuf,
        /// The graph takes features as the model saw them. By default it
        /// first reads them as the checkpoint's run read its data: divided
        /// by the table's scale, or standardized (--standardize), so that
        /// it takes rows as the data file holds them, as `aicf predict`
        /// does.
        #[arg(long)]
        raw_features: bool,
        /// Where a checkpoint's own model version (a grown one) and an ONNX
        /// model's import are written.
        #[arg(long, default_value = "target/aicf-export")]
        out: PathBuf,
    },
    /// The compile cache ($AICF_CACHE_DIR, else ~/.cache/aicf): what it
    /// holds, and cleaning it (it grows with every model and shape
    /// compiled, and nothing removes it).
    Cache {
        #[command(subcommand)]
        what: CacheCommand,
    },
    /// Time the compiled train step on a fixed random batch (median of
    /// `--steps` after warm-up).
    Bench {
        #[command(flatten)]
        compile: ModelArgs,
        #[command(flatten)]
        device: DeviceArgs,
        /// Learning rate; default that of the baselines' spec (SGD 0.1,
        /// Adam and AdamW 1e-3), so the timed steps train rather than diverge.
        #[arg(long, allow_negative_numbers = true)]
        lr: Option<f64>,
        /// Timed steps (after warm-up steps that are not timed).
        #[arg(long, allow_negative_numbers = true, default_value_t = 50)]
        steps: usize,
        /// Where the compiled artifact goes.
        #[arg(long, default_value = "target/aicf-bench")]
        out: PathBuf,
        /// Print the time of each kernel call, slowest first.
        #[arg(long)]
        profile: bool,
        /// Write the timed steps' kernel timeline to this file (trace-event
        /// JSON).
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Run every GEMM with this candidate instead of the registry's
        /// measured choice (CPU: generated, library, library-swapped,
        /// gemm-rs, openblas, avx512, avx2, bf16-dot, mkl, mkl-bf16; CUDA:
        /// generated, cublaslt; one that cannot run a GEMM here runs it as
        /// `library`).
        #[arg(long)]
        gemm: Option<String>,
        /// (Not bench's: it times one process's step. Refused, saying how to
        /// time a data-parallel one; clap's tip read it as a value.)
        #[arg(long, hide = true, allow_negative_numbers = true)]
        nproc: Option<String>,
    },
}

#[derive(Subcommand)]
enum CacheCommand {
    /// Where it is, and what it holds: compiled kernels, eager mode's ops,
    /// the GEMM registry's decisions.
    Info,
    /// Removes compiled kernels and eager ops (each is compiled again when
    /// a model needs it); the GEMM registry's decisions are kept (they are
    /// timings of this machine, measured again only with --gemm-registry).
    /// Best run when no aicf is compiling: one compiling then may fail,
    /// and compiles again when run again.
    Clean {
        /// Only what is older than this many days (by its file's time).
        #[arg(long)]
        older_than: Option<u64>,
        /// Removes the GEMM registry's decisions too: every shape's
        /// candidates are timed again on its next use.
        #[arg(long)]
        gemm_registry: bool,
    },
}

#[derive(Subcommand)]
enum RunsCommand {
    /// One line per run.
    List {
        /// Only the runs of a problem whose name holds this text (its data
        /// file's name: `digits`).
        #[arg(long)]
        problem: Option<String>,
        /// The order: id, loss (best held-out loss first) or flops.
        #[arg(long, value_enum, default_value = "id")]
        sort: RunsOrder,
        /// Only the first N runs of that order.
        #[arg(long)]
        limit: Option<usize>,
        /// Only the runs with this tag (`aicf runs tag`).
        #[arg(long)]
        tag: Option<String>,
        /// The runs as a JSON array, each run's whole row (for jq, pandas'
        /// `read_json`, a notebook), in place of the table.
        #[arg(long)]
        json: bool,
    },
    /// A run's record: structure, problem, settings, curve, decisions.
    Show {
        /// The run's id (`aicf runs list`'s first column).
        id: i64,
        /// The record as JSON (with its curve, decisions and the IR before
        /// and after each), in place of the text.
        #[arg(long)]
        json: bool,
    },
    /// Tags on a run, to find it again (`aicf runs list --tag`):
    /// `aicf runs tag 7 baseline lr-sweep`.
    Tag {
        /// The run's id.
        id: i64,
        /// The tags: words without spaces or commas, 64 characters at most.
        #[arg(required = true)]
        tags: Vec<String>,
        /// Takes these tags from the run.
        #[arg(long)]
        remove: bool,
    },
    /// A note on a run (`aicf runs show` prints it): `aicf runs note 7
    /// "diverged: lr too high"`. A new note replaces the old.
    Note {
        /// The run's id.
        id: i64,
        /// The note.
        #[arg(required_unless_present = "clear", conflicts_with = "clear")]
        text: Option<String>,
        /// Takes the run's note away.
        #[arg(long)]
        clear: bool,
    },
    /// Deletes runs from the registry (their curves, decisions, tags and
    /// notes; not their checkpoints or other files), all or none: runs of
    /// a bug, or tries that should not inform `aicf propose`. Their ids are
    /// not given again.
    Delete {
        /// The runs' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
        /// Deletes a run recorded as running whose process is alive too.
        #[arg(long)]
        force: bool,
    },
    /// Runs side by side.
    Compare {
        /// Two run ids or more.
        #[arg(required = true, num_args = 2..)]
        ids: Vec<i64>,
    },
    /// The registry's SQL schema.
    Schema,
    /// Whether SQLite finds the database whole (PRAGMA integrity_check).
    Check,
}

type Result<T> = std::result::Result<T, String>;

/// Refuses `--loss none` where the command trains, before the import
/// writes anything (the import wrote its model and weights, then training
/// found no `@loss`).
fn no_loss_to_train(c: &ModelArgs) -> Result<()> {
    if matches!(c.loss, Some(Loss::None)) {
        return Err(format!(
            "--loss none imports {} without a @loss (for inference alone); training needs cross_entropy, mse or graph",
            c.model.display()
        ));
    }
    Ok(())
}

/// A checkpoint directory given where a checkpoint file is read
/// (`--checkpoint ck`, `--resume-from ck`) stands for the `last.safetensors`
/// that `--checkpoint-dir ck` wrote in it (it was "is a directory, not a
/// checkpoint file"); a directory without one is said as such.
fn checkpoints_in_dirs(command: &mut Command) -> Result<()> {
    let file = |p: &mut PathBuf, flag: &str| {
        // (The reader's own "No such file" named no option.)
        if std::fs::symlink_metadata(&*p).is_err() {
            return Err(format!("{flag} {}: no such file or directory", p.display()));
        }
        if !p.is_dir() {
            return Ok(());
        }
        let last = p.join("last.safetensors");
        // (One there that is no file, a pipe or a link to a device, is said
        // as such: "holds no last.safetensors" sent the user looking.)
        if std::fs::symlink_metadata(&last).is_ok() && !last.is_file() {
            return Err(format!(
                "{flag} {}: its last.safetensors is not a regular file (a directory, device, pipe, or a link to one \
                 or to nothing)",
                p.display()
            ));
        }
        if !last.is_file() {
            return Err(format!(
                "{flag} {}: a directory that holds no last.safetensors: give a checkpoint file (its v0.safetensors, \
                 ...) or the --checkpoint-dir of a run",
                p.display()
            ));
        }
        *p = last;
        Ok(())
    };
    match command {
        Command::Eval { checkpoint: Some(checkpoint), .. }
        | Command::Sample { checkpoint, .. }
        | Command::Predict { checkpoint: Some(checkpoint), .. }
        | Command::Export { checkpoint: Some(checkpoint), .. } => file(checkpoint, "--checkpoint"),
        Command::Train { resume_from: Some(p), .. } => file(p, "--resume-from"),
        _ => Ok(()),
    }
}

/// Refuses an input file that is not a regular file (a pipe, a device, a
/// socket) before anything reads it: models, policies and checkpoints are
/// read more than once (hashed, then parsed), so a pipe gave an empty
/// second read (a policy with no rules, silently), a FIFO with no writer
/// hung, and a device was read as a checkpoint of any size. A missing file
/// is left to the reader's own message.
fn regular_inputs(command: &Command) -> Result<()> {
    let mut inputs: Vec<(&Path, &str)> = Vec::new();
    match command {
        Command::Compile { compile, .. } | Command::Bench { compile, .. } => inputs.push((&compile.model, "the model")),
        Command::Import { model, .. } => inputs.push((model, "the model")),
        Command::Train { compile, adapt, resume_from, .. } => {
            inputs.push((&compile.model, "the model"));
            inputs.extend(adapt.as_deref().map(|p| (p, "--adapt")));
            inputs.extend(resume_from.as_deref().map(|p| (p, "--resume-from")));
        }
        Command::Eval { compile, checkpoint, data, .. } => {
            inputs.push((&compile.model, "the model"));
            inputs.extend(checkpoint.as_deref().map(|p| (p, "--checkpoint")));
            // Read more than once (hashed, then parsed): a FIFO hung.
            inputs.extend(data.iter().map(|p| (p.as_path(), "--data")));
        }
        Command::Sample { compile, checkpoint, .. } => {
            inputs.push((&compile.model, "the model"));
            inputs.push((checkpoint, "--checkpoint"));
        }
        Command::Predict { compile, checkpoint, data, .. } => {
            inputs.push((&compile.model, "the model"));
            inputs.extend(checkpoint.as_deref().map(|p| (p, "--checkpoint")));
            inputs.extend(data.iter().map(|p| (p.as_path(), "--data")));
        }
        Command::Export { compile, checkpoint, .. } => {
            inputs.push((&compile.model, "the model"));
            inputs.extend(checkpoint.as_deref().map(|p| (p, "--checkpoint")));
        }
        Command::Runs { .. } | Command::Propose { .. } | Command::Cache { .. } => {}
    }
    for (path, what) in inputs {
        aicf_compiler::train::refuse_special_file(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    }
    // Files written in place, or as more than one file: a FIFO blocked the
    // process (past a SIGTERM) until something read it, and SQLite cannot
    // keep a registry in one.
    // A trace is written to a device as it is (`--profile /dev/null`); only
    // a pipe waits for a reader there.
    // (`devices`: whether a device is refused too.)
    use std::os::unix::fs::FileTypeExt;
    let mut outputs: Vec<(&Path, &str, bool)> = Vec::new();
    match command {
        Command::Train { profile, runs_db, .. } => {
            outputs.extend(profile.as_deref().map(|p| (p, "--profile", false)));
            outputs.extend(runs_db.as_deref().map(|p| (p, "--runs-db", true)));
        }
        Command::Runs { runs_db, .. } | Command::Propose { runs_db, .. } => {
            outputs.extend(runs_db.as_deref().map(|p| (p, "--runs-db", true)));
        }
        // (Its weights go beside it: /dev/null.weights.safetensors.)
        Command::Import { output, .. } => outputs.extend(output.as_deref().map(|p| (p, "-o", true))),
        Command::Export { output, .. } => outputs.push((output, "-o", true)),
        _ => {}
    }
    for (path, what, devices) in outputs {
        let refused = |m: std::fs::Metadata| {
            let t = m.file_type();
            t.is_fifo() || t.is_socket() || (devices && !m.is_file() && !m.is_dir())
        };
        if std::fs::metadata(path).is_ok_and(refused) {
            return Err(format!(
                "{what} {}: not a regular file (a device, pipe or socket): an output is written to a file, and is not \
                 replaced",
                path.display()
            ));
        }
    }
    Ok(())
}

/// `println!` that leaves a closed stdout alone: a run whose output went
/// into a pipe that closed (`| head`, or a `| tee` a Ctrl-C ended) goes on
/// to its next save instead of panicking on the write. (Commands with
/// nothing to lose end on SIGPIPE instead: `main`.)
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!`, as [`println!`] here (a stderr closed with stdout, as
/// `2>&1 | head` closes it).
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `print!`, as [`println!`] here.
macro_rules! print {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

fn main() {
    // Before any thread exists: OpenBLAS's kernels for this CPU (a GEMM
    // candidate; see aicf_runtime::cpu::blas).
    aicf_runtime::cpu::blas::prepare_openblas_env();
    // A Ctrl-C or a kill during a checkpoint's write removes its temporary
    // file before the process ends as the signal says.
    aicf_runtime::checkpoint::remove_partial_on_signal();
    rank0_stdout_to_launcher();
    // eval and sample take the model's compile settings but train nothing:
    // the training settings are hidden from their help (and refused if
    // given, `refuse_unused`).
    let mut command = <Cli as clap::CommandFactory>::command();
    for sub in ["eval", "sample", "predict"] {
        command = command.mut_subcommand(sub, |mut c| {
            for (id, _) in TRAINING {
                c = c.mut_arg(id, |a| a.hide(true));
            }
            c
        });
    }
    let matches = command.get_matches();
    let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Err(e) = checkpoints_in_dirs(&mut cli.command) {
        eprintln!("aicf: error: {e}");
        std::process::exit(1);
    }
    if let Err(e) = no_training_options(&matches) {
        eprintln!("aicf: error: {e}");
        std::process::exit(1);
    }
    // Output piped into `head` ends a short command quietly, as any Unix
    // tool (Rust ignores SIGPIPE). `train` goes on with its output dropped
    // (`println!` here leaves a closed stdout alone: `aicf train ... |
    // head -1` ended in a panic, and a Ctrl-C that ends a `| tee` must not
    // end the run before it stops at its next step and saves), as does a
    // data-parallel run, whose MPI sockets must fail loudly. (`sample`
    // ends its text quietly on a closed pipe itself.)
    let quiet_pipe = match &cli.command {
        Command::Runs { .. }
        | Command::Propose { .. }
        | Command::Import { .. }
        | Command::Predict { .. }
        | Command::Export { .. } => true,
        Command::Compile { compile, .. } | Command::Eval { compile, .. } | Command::Bench { compile, .. } => {
            !compile.data_parallel
        }
        _ => false,
    };
    if quiet_pipe {
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // A file past `ulimit -f` ended the process by SIGXFSZ, without a
    // word; ignored, the write fails with EFBIG, said as a full disk is.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    if let Err(e) = regular_inputs(&cli.command) {
        eprintln!("aicf: error: {e}");
        std::process::exit(1);
    }
    // Whether the subcommand's option `id` was given on the command line
    // (not its default).
    let given = |id: &str| {
        matches.subcommand().is_some_and(|(_, sub)| {
            sub.try_contains_id(id).unwrap_or(false)
                && sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        })
    };
    // The checkpoint a run resumes from (or eval and sample read): where it
    // does not read, the one saved before it is named after the error.
    let mut resumed_from: Option<PathBuf> = None;
    let result = match cli.command {
        Command::Compile { compile, output, emit, target, timing } => {
            run_compile(&compile, output, emit, target, timing)
        }
        Command::Import { model, output, loss, batch, freeze, trainable, ignore_index } => {
            let output = output.unwrap_or_else(|| model.with_extension("mlir"));
            // A symbolic batch without --batch: imported at the batch eval,
            // predict and train run such a model at, said (it was refused).
            let batch = batch.or_else(|| {
                (onnx::leading_dim(&model) == Some(None)).then(|| {
                    eprintln!(
                        "note: {}: its batch dimension is symbolic: imported at {ONNX_RUN_BATCH} rows a batch \
                         (--batch chooses it; aicf train --batch retargets the imported model)",
                        model.display()
                    );
                    ONNX_RUN_BATCH
                })
            });
            import(
                &model,
                &output,
                &ImportOptions { batch, loss, freeze, trainable, legacy_names: false, ignore_index },
            )
        }
        Command::Train {
            compile,
            device,
            data,
            lr,
            epochs,
            seed,
            val_split,
            standardize,
            standardize_targets,
            augment,
            label,
            feature_scale,
            windows_per_epoch,
            eval_windows,
            out,
            checkpoint_dir,
            resume,
            resume_from,
            auto_resume,
            override_resume,
            adapt,
            profile,
            profile_steps,
            no_progress,
            gemm,
            lr_schedule,
            warmup_steps,
            min_lr_factor,
            decay_fraction,
            decay_steps,
            nproc,
            runs_db,
            no_runs_db,
            flops_budget,
            early_stop,
            save_every,
            log_every,
            eval_every,
        } => {
            if let Err(e) = no_loss_to_train(&compile) {
                eprintln!("aicf: error: {e}");
                std::process::exit(1);
            }
            // A resume without --precision goes on in the precision its
            // checkpoint trained in, as eval and sample run it (the default,
            // fp32, was refused as another precision than the checkpoint's).
            // So does --accumulate (a resume at another global batch was
            // noted, and went on at the default's).
            let (mut compile, mut gemm, mut save_every) = (compile, gemm, save_every);
            let (mut log_every, mut eval_every) = (log_every, eval_every);
            // (Its resume check compares the clipping: 0 is none there too.)
            compile.clip_norm = compile.clip_norm();
            let (resume, resume_from) = match checkpoint_dir.as_deref().filter(|_| auto_resume) {
                Some(dir) => auto_resumed(dir),
                None => (resume, resume_from),
            };
            let checkpoint = resume_from
                .clone()
                .or_else(|| checkpoint_dir.as_ref().filter(|_| resume).map(|d| d.join("last.safetensors")))
                .filter(|c| c.is_file());
            resumed_from = checkpoint.clone();
            let (mut windows_per_epoch, mut eval_windows) = (windows_per_epoch, eval_windows);
            let (mut lr, mut seed, mut val_split, mut epochs) = (lr, seed, val_split, epochs);
            let (mut lr_schedule, mut warmup_steps, mut min_lr_factor, mut decay_fraction, mut decay_steps) =
                (lr_schedule, warmup_steps, min_lr_factor, decay_fraction, decay_steps);
            // (Of a file AICF reads: another's error is its format's, below.)
            let tables = !data.iter().any(|p| aicf_compiler::train::data::is_text(p))
                && data.iter().all(|p| aicf_compiler::train::data::is_rows(p));
            if let Some(c) = &checkpoint {
                // (Read once: a record that does not read is said below.)
                let meta = aicf_runtime::checkpoint::read_metadata(c).ok();
                // A text's windows an epoch and held-out windows scored go
                // on as the checkpoint's run had them unless given (an
                // epoch of 320 windows became the whole text's 13942). A
                // text run's checkpoint given to a run on a table (another
                // model: refused below, by the checkpoint's record) sets
                // neither.
                if let Some(meta) = &meta
                    && !tables
                {
                    let recorded = |k: &str| meta.get(k).and_then(|v| v.parse::<usize>().ok());
                    if windows_per_epoch.is_none() {
                        windows_per_epoch = recorded("windows_per_epoch");
                    }
                    if eval_windows.is_none() {
                        eval_windows = recorded("eval_windows");
                    }
                }
                // (A record that does not read is said, not taken for the
                // default: fp32, one micro-batch.)
                if !given("precision")
                    && let Some(trained) = recorded_or_exit(c, run::trained_precision(c))
                {
                    compile.precision = trained;
                }
                if !given("accumulate")
                    && let Some(trained) = recorded_or_exit(c, run::trained_accumulate(c))
                {
                    compile.accumulate = trained;
                }
                // So do the optimizer's settings, the seed, the held-out
                // fraction and the batch the checkpoint's run trained with:
                // each had to be given again (an lr given before, left out
                // on resume, was refused as "this run asks for 0.003"). One
                // given goes on only where it is the checkpoint's (or with
                // --override-resume). A value the record does not read as
                // is left to that check to name.
                if let Some(meta) = &meta {
                    let recorded = |k: &str| meta.get(k).map(String::as_str);
                    let number = |k: &str| recorded(k).and_then(|v| v.parse::<f64>().ok());
                    if !given("optimizer")
                        && let Some(o) = recorded("optimizer").and_then(|v| Optimizer::from_str(v, false).ok())
                    {
                        compile.optimizer = o;
                    }
                    if !given("lr")
                        && let Some(v) = number("lr")
                    {
                        lr = v;
                    }
                    // (Another optimizer given: its own defaults, not the
                    // checkpoint's optimizer's settings.)
                    let same = recorded("optimizer") == Some(compile.optimizer.name());
                    if same
                        && !given("momentum")
                        && let Some(v) = number("momentum")
                    {
                        compile.momentum = v;
                    }
                    // (Its meaning is the optimizer's: an L2 term for SGD
                    // and Adam, decoupled for AdamW.)
                    if same
                        && !given("weight_decay")
                        && let Some(v) = number("weight_decay")
                    {
                        compile.weight_decay = Some(v);
                    }
                    if same
                        && !given("nesterov")
                        && let Some(v) = recorded("nesterov").and_then(|v| v.parse::<bool>().ok())
                    {
                        compile.nesterov = v;
                    }
                    if same
                        && !given("betas")
                        && let Some(v) = recorded("betas").and_then(|v| betas(v).ok())
                    {
                        compile.betas = v;
                    }
                    // (Recorded for SGD too, as the default.)
                    if same
                        && !given("adam_eps")
                        && let Some(v) = number("eps").filter(|&e| e != 1e-8)
                    {
                        compile.adam_eps = Some(v);
                    }
                    if !given("no_decay_1d")
                        && let Some(v) = recorded("decay_1d").and_then(|v| v.parse::<bool>().ok())
                    {
                        compile.no_decay_1d = !v;
                    }
                    if !given("clip_norm") {
                        match recorded("clip_norm") {
                            Some("none") => compile.clip_norm = None,
                            Some(v) if let Ok(v) = v.parse::<f64>() => compile.clip_norm = Some(v),
                            _ => {}
                        }
                    }
                    if !given("seed")
                        && let Some(v) = recorded("seed").and_then(|v| v.parse::<u64>().ok())
                    {
                        seed = v;
                    }
                    if !given("val_split")
                        && let Some(v) = number("val_split")
                    {
                        val_split = v;
                    }
                    if save_every.is_none() {
                        save_every = recorded(aicf_compiler::train::run::SAVE_EVERY_KEY).and_then(|v| v.parse().ok());
                    }
                    if log_every.is_none() {
                        log_every = recorded(aicf_compiler::train::run::LOG_EVERY_KEY).and_then(|v| v.parse().ok());
                    }
                    if eval_every.is_none() {
                        eval_every = recorded(aicf_compiler::train::run::EVAL_EVERY_KEY).and_then(|v| v.parse().ok());
                    }
                    // A run pinned to one GEMM candidate stays pinned (its
                    // resume timed the candidates and changed its bits); one
                    // given otherwise is said to.
                    let pinned = recorded(aicf_compiler::train::run::GEMM_KEY);
                    match (&gemm, pinned) {
                        // (As eval's: a GPU's candidate resumed on the CPU is
                        // said, and each GEMM runs the measured choice.)
                        (None, Some(_)) => gemm = gemm_of_run(None, Some(c), &device).ok().flatten(),
                        (Some(now), was) if was != Some(now.as_str()) => eprintln!(
                            "aicf: note: {}: the checkpoint's run {}; this run uses --gemm {now}, so it does not \
                             continue bit for bit",
                            c.display(),
                            was.map_or("chose each GEMM's kernel by the registry's timings".into(), |w| format!(
                                "ran every GEMM with --gemm {w}"
                            ))
                        ),
                        _ => {}
                    }
                    // The run's length: a bare --resume finishes the
                    // checkpoint's run (it ended at the default's 10 epochs,
                    // a run of 20 resumed at 19 trained nothing, a decaying
                    // schedule recomputed over 10).
                    if !given("epochs")
                        && let Some(v) = recorded("schedule_epochs").and_then(|v| v.parse::<usize>().ok())
                    {
                        epochs = v;
                    }
                    // The schedule, where none of its flags is given.
                    let flags = ["lr_schedule", "warmup_steps", "min_lr_factor", "decay_fraction", "decay_steps"];
                    if !flags.iter().any(|f| given(f))
                        && let Some(trained) =
                            recorded("lr_schedule").and_then(aicf_compiler::train::run::LrSchedule::from_description)
                    {
                        use aicf_compiler::train::run::LrSchedule as L;
                        match trained {
                            L::Constant => lr_schedule = Schedule::Constant,
                            L::Cosine { warmup_steps: w, min_factor } => {
                                (lr_schedule, warmup_steps, min_lr_factor) = (Schedule::Cosine, w, min_factor);
                            }
                            L::Wsd { warmup_steps: w, decay_fraction: f, decay_steps: n, min_factor } => {
                                (lr_schedule, warmup_steps, min_lr_factor) = (Schedule::Wsd, w, min_factor);
                                (decay_fraction, decay_steps) = if n.is_some() { (None, n) } else { (Some(f), None) };
                            }
                        }
                    }
                    // The model at the batch it trained at, where the file
                    // given is that model at another (an ONNX file's batch
                    // is its import's).
                    if !given("batch")
                        && compile.model.extension().is_none_or(|e| e != "onnx")
                        && let Some(ir) = meta.get(aicf_compiler::train::run::IR_KEY)
                        && let Ok(text) = aicf_compiler::train::read_model(&compile.model)
                        && let Some(b) = aicf_compiler::pipeline::checkpoint_batch(
                            &text,
                            ir,
                            recorded("model"),
                            &compile.model.display().to_string(),
                        )
                    {
                        compile.batch = Some(b);
                    }
                }
                onnx_batch_of_checkpoint(&mut compile, c, given("batch"));
                onnx_names_of_checkpoint(&mut compile, c);
                onnx_ignore_index_of_checkpoint(&mut compile, c);
            }
            if let Some(n) = nproc {
                // The device is checked once here, before mpirun starts the
                // ranks: each rank refused it after Open MPI's start-up,
                // whose noise followed the error.
                if let Err(e) = aicf_runtime::backend::check_device(&device.device()) {
                    eprintln!("aicf: error: {e}");
                    std::process::exit(1);
                }
                // (--auto-resume decided here, once: the ranks take the
                // decision, not each its own look at the directory.)
                let decided = auto_resume.then(|| (resume, resume_from.clone()));
                std::process::exit(launch_mpirun(n, decided));
            }
            let runs_db =
                if no_runs_db { None } else { runs_db.or_else(aicf_compiler::train::registry::Runs::default_path) };
            // No registry for want of a home: said, as a registry that
            // cannot be written is (AICF_RUNS_DB=off and --no-runs-db ask
            // for none).
            if runs_db.is_none()
                && !no_runs_db
                && !matches!(std::env::var("AICF_RUNS_DB").as_deref(), Ok("off" | ""))
                && aicf_runtime::collective::launcher_rank() == 0
            {
                eprintln!(
                    "aicf: note: {}; the run is not recorded (give --runs-db FILE)",
                    aicf_compiler::train::registry::Runs::no_default_reason()
                );
            }
            if !matches!(lr_schedule, Schedule::Wsd) && (decay_steps.is_some() || decay_fraction.is_some()) {
                eprintln!(
                    "aicf: error: --decay-steps and --decay-fraction are the wsd schedule's: add --lr-schedule wsd"
                );
                std::process::exit(1);
            }
            if matches!(lr_schedule, Schedule::Constant) && min_lr_factor != 0.1 {
                eprintln!(
                    "aicf: error: --min-lr-factor is the cosine and wsd schedules': add --lr-schedule cosine or wsd"
                );
                std::process::exit(1);
            }
            if matches!(lr_schedule, Schedule::Constant) && warmup_steps > 0 {
                eprintln!(
                    "aicf: error: --warmup-steps is the cosine and wsd schedules': add --lr-schedule cosine or wsd"
                );
                std::process::exit(1);
            }
            // Settings that would do nothing are refused, not ignored.
            if override_resume && !resume && resume_from.is_none() && !auto_resume {
                eprintln!(
                    "aicf: error: --override-resume goes with --resume or --resume-from (it lets a resume differ)"
                );
                std::process::exit(1);
            }
            if profile.is_none() && profile_steps != 10 {
                eprintln!("aicf: error: --profile-steps is --profile's: add --profile FILE");
                std::process::exit(1);
            }
            if eval_windows.is_some() && tables {
                eprintln!(
                    "aicf: error: --eval-windows samples a text's held-out windows; {} is no text (a table's held-out \
                     rows are scored every one)",
                    data.first().map_or(String::new(), |p| p.display().to_string())
                );
                std::process::exit(1);
            }
            if windows_per_epoch.is_some() && tables {
                eprintln!(
                    "aicf: error: --windows-per-epoch draws a text's windows; {} is no text (a table's epoch is its \
                     rows)",
                    data.first().map_or(String::new(), |p| p.display().to_string())
                );
                std::process::exit(1);
            }
            let lr_schedule = match lr_schedule {
                Schedule::Constant => LrSchedule::Constant,
                Schedule::Cosine => LrSchedule::Cosine { warmup_steps, min_factor: min_lr_factor },
                Schedule::Wsd => {
                    let decay_fraction = decay_fraction.unwrap_or(0.2);
                    LrSchedule::Wsd { warmup_steps, decay_fraction, decay_steps, min_factor: min_lr_factor }
                }
            };
            let run = RunOptions {
                epochs,
                lr,
                lr_schedule,
                seed,
                data: DataOptions {
                    seed,
                    val_split,
                    windows_per_epoch,
                    eval_windows: eval_windows.unwrap_or(256),
                    feature_scale,
                    vocabulary: None,
                    whole_text: false,
                    standardize,
                    feature_stats: None,
                    columns: None,
                    class_names: None,
                    standardize_targets,
                    target_stats: None,
                    predicting: false,
                    augment: augment.unwrap_or_default(),
                    label,
                    // (Said by the run, which knows whether it resumes.)
                    starting: false,
                },
                out,
                checkpoint_dir,
                resume,
                resume_from,
                override_resume,
                adapt,
                profile,
                profile_steps,
                progress: !no_progress,
                data_parallel: None,
                runs_db,
                flops_budget,
                early_stop,
                save_every,
                log_every,
                eval_every,
            };
            train(&compile, &device, &data, run, gemm)
        }
        Command::Eval { mut compile, device, data, checkpoint, eval_windows, gemm, out } => {
            resumed_from = checkpoint.clone();
            run_settings(&mut compile, checkpoint.as_deref(), (given("batch"), given("precision"), given("loss")))
                .and_then(|()| gemm_of_run(gemm, checkpoint.as_deref(), &device))
                .and_then(|gemm| eval(&compile, &device, &data, checkpoint.as_deref(), eval_windows, gemm, &out))
        }
        Command::Sample { mut compile, device, checkpoint, prompt, tokens, temperature, top_k, seed, gemm, out } => {
            resumed_from = Some(checkpoint.clone());
            let s = aicf_compiler::train::sample::SampleOptions {
                prompt,
                tokens,
                temperature,
                top_k,
                seed,
                same_model_at_one_row: false,
            };
            checkpoint_precision(&mut compile, &checkpoint, given("precision"))
                .and_then(|()| gemm_of_run(gemm, Some(&checkpoint), &device))
                .and_then(|gemm| sample(&compile, &device, &checkpoint, &s, gemm, &out))
        }
        Command::Predict { mut compile, device, data, checkpoint, values, result, output, gemm, out } => {
            resumed_from = checkpoint.clone();
            let values = values.map(|v| match v {
                PredictValues::Class => predict::Values::Class,
                PredictValues::Probabilities => predict::Values::Probabilities,
                PredictValues::Raw => predict::Values::Raw,
            });
            let settings = (given("batch"), given("precision"), given("loss"));
            run_settings(&mut compile, checkpoint.as_deref(), settings)
                .and_then(|()| gemm_of_run(gemm, checkpoint.as_deref(), &device))
                .and_then(|gemm| {
                    let to = (output.as_deref(), gemm);
                    predict(&compile, &device, &data, checkpoint.as_deref(), (values, result), to, &out)
                })
        }
        Command::Export { mut compile, checkpoint, output, raw_features, out } => {
            resumed_from = checkpoint.clone();
            // (An ONNX model's --batch binds its import's symbolic batch.)
            let fixed = if given("batch") && !is_onnx(&compile.model) { compile.batch } else { None };
            let precision = if given("precision") {
                Err(format!(
                    "--precision {}: the export writes the model in f32, its master weights' type (a runtime's own \
                     options cast it: onnxruntime's float16 converter, TensorRT's --bf16)",
                    compile.precision.name()
                ))
            } else {
                Ok(())
            };
            let settings = (given("batch"), given("precision"), given("loss"));
            precision
                .and_then(|()| run_settings(&mut compile, checkpoint.as_deref(), settings))
                .and_then(|()| export(&compile, checkpoint.as_deref(), &output, (fixed, raw_features), &out))
        }
        Command::Runs { what, runs_db } => runs(what, runs_db),
        Command::Cache { what } => cache(what),
        Command::Propose {
            data,
            label,
            task,
            budget,
            structure,
            neighbours,
            next,
            output,
            policy,
            json,
            runs_db,
            force,
        } => propose(
            (&data, label.as_deref()),
            task.as_deref(),
            budget,
            structure.as_deref(),
            neighbours,
            next,
            (&output, force),
            policy,
            json,
            runs_db,
        ),
        Command::Bench { nproc: Some(n), .. } => Err(format!(
            "--nproc {n}: bench times one process's step; a data-parallel step's, all-reduces included, is timed \
             under mpirun: mpirun -n {} aicf bench MODEL --data-parallel (--profile shows the all-reduce's wait)",
            if n.parse::<usize>().is_ok() { n.as_str() } else { "N" }
        )),
        Command::Bench { compile, device, lr, steps, out, profile, trace, gemm, nproc: None } => {
            // SGD's rate is 0.1; Adam's and AdamW's 1e-3 (AdamW at SGD's
            // rate diverged: GPT-2 small's loss went from 10.8 to 36).
            let lr = lr.unwrap_or(if compile.optimizer.name() == "sgd" { 0.1 } else { 1e-3 });
            no_loss_to_train(&compile)
                .and_then(|()| bench(&compile, &device, lr, steps, &out, profile, trace.as_deref(), gemm.as_deref()))
        }
    };
    let comm = WORLD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Err(e) = result {
        match comm.filter(|c| c.size() > 1) {
            // Stopped by a Ctrl-C or SIGTERM: every rank at the same step
            // (they agree on it), so none waits for another; rank 0 says
            // where the run stands, and each ends as a program the signal
            // stopped (MPI finalized as at a run's end, no abort).
            Some(c)
                if aicf_runtime::checkpoint::interrupted_status().is_some() && e.starts_with(run::INTERRUPTED_AT) =>
            {
                if c.rank() == 0 {
                    eprintln!("aicf: error: {e}");
                    // `aicf train --nproc` ends with the ranks' status
                    // (mpirun's own is 1), having nothing more to say.
                    if let (Some(record), Some(status)) = (
                        std::env::var_os(aicf_compiler::train::registry::NPROC_RECORD_ENV),
                        aicf_runtime::checkpoint::interrupted_status(),
                    ) {
                        let file = aicf_compiler::train::registry::nproc_status_file(&record);
                        let _ = std::fs::write(file, status.to_string());
                    }
                }
                drop(c);
            }
            Some(c) => {
                // The other ranks would wait for this one: end them all.
                // (One write: a line written in pieces was mixed with
                // another rank's.)
                let line = format!("aicf: error (rank {} of {}): {}\n", c.rank(), c.size(), run::as_the_user_named(&e));
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
                // (Before the abort, which does not return; rank 0's.)
                if let Some(checkpoint) = resumed_from.as_deref().filter(|_| c.rank() == 0) {
                    previous_checkpoint_note(checkpoint, &e);
                }
                c.abort(1);
            }
            None => eprintln!("aicf: error: {e}"),
        }
        if let Some(c) = &resumed_from {
            previous_checkpoint_note(c, &e);
        }
        // A run a Ctrl-C (or SIGTERM, SIGHUP) stopped between two steps
        // ends as an interrupted program does (128 + the signal).
        std::process::exit(aicf_runtime::checkpoint::interrupted_status().unwrap_or(1));
    }
}

/// `aicf eval` and `aicf sample` run the checkpoint's model in the
/// precision its run trained in (the run's own figures came from it:
/// scored in fp32, an fp16 checkpoint's accuracy differed from its run's
/// on the same rows), unless `--precision` is `given` (the library notes a
/// precision other than the checkpoint's).
fn checkpoint_precision(c: &mut ModelArgs, checkpoint: &Path, given: bool) -> Result<()> {
    if !given && let Some(trained) = run::trained_precision(checkpoint).map_err(|e| e.to_string())? {
        c.precision = trained;
    }
    Ok(())
}

/// `aicf eval` and `aicf sample` share the model options with `train`, but
/// those that only shape training (the optimizer's, gradient accumulation,
/// data parallelism, the train step's memory budget) change nothing there:
/// given on their command line, they are refused rather than silently
/// ignored.
fn no_training_options(matches: &clap::ArgMatches) -> Result<()> {
    // The collectives' settings shape a data-parallel run only: given
    // without --data-parallel (train, bench, compile), they changed nothing.
    if let Some((command @ ("train" | "bench" | "compile"), sub)) = matches.subcommand() {
        let given = |id: &str| {
            sub.try_contains_id(id).unwrap_or(false)
                && sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        };
        let parallel =
            sub.try_get_one::<bool>("data_parallel").ok().flatten().copied().unwrap_or(false) || given("nproc");
        if !parallel
            && let Some(flag) = [("bucket_size", "--bucket-size"), ("collective_timeout", "--collective-timeout")]
                .into_iter()
                .find(|(id, _)| given(id))
                .map(|(_, flag)| flag)
        {
            return Err(format!(
                "{flag} sets a data-parallel run's all-reduces: `aicf {command}` without --data-parallel has none \
                 (give --data-parallel, under mpirun or with --nproc)"
            ));
        }
    }
    let Some((command @ ("eval" | "sample" | "predict" | "export"), sub)) = matches.subcommand() else { return Ok(()) };
    let given: Vec<&str> = TRAINING
        .iter()
        .filter(|(id, _)| {
            sub.try_contains_id(id).unwrap_or(false)
                && sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|(_, flag)| *flag)
        .collect();
    if given.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} {} training's: `aicf {command}` trains nothing, so {} would change nothing here",
        given.join(", "),
        if given.len() == 1 { "is" } else { "are" },
        if given.len() == 1 { "it" } else { "they" }
    ))
}

/// The settings of training alone (by argument id and flag): eval and
/// sample hide and refuse them.
const TRAINING: [(&str, &str); 13] = [
    ("optimizer", "--optimizer"),
    ("nesterov", "--nesterov"),
    ("adam_eps", "--adam-eps"),
    ("no_decay_1d", "--no-decay-1d"),
    ("weight_decay", "--weight-decay"),
    ("momentum", "--momentum"),
    ("betas", "--betas"),
    ("clip_norm", "--clip-norm"),
    ("accumulate", "--accumulate"),
    ("data_parallel", "--data-parallel"),
    ("bucket_size", "--bucket-size"),
    ("collective_timeout", "--collective-timeout"),
    // The budget plans the train step's arena, which neither runs.
    ("memory_budget", "--memory-budget"),
];

fn memory_budget(text: &str) -> Result<MemoryBudget> {
    MemoryBudget::parse(text)
}

/// `--batch`: rows, at least 1 and at most what a pass option (an i64)
/// holds (larger ones failed inside the pipeline, naming neither).
fn batch_size(text: &str) -> Result<usize> {
    let n: u64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number of rows"))?;
    if n == 0 {
        return Err("a batch has at least one row".into());
    }
    if n > i64::MAX as u64 {
        return Err(format!("{n} rows: at most {} (2^63 - 1)", i64::MAX));
    }
    Ok(n as usize)
}

/// `25M`, `512K`, `0`: bytes, with a K, M or G suffix for KiB, MiB, GiB.
fn bucket_size(text: &str) -> Result<u64> {
    if text.trim() == "0" {
        return Ok(0);
    }
    // (A memory budget's own errors suggest percentages, which a bucket
    // size is not.)
    let bytes = "a bucket size is bytes: a whole number, with K, M or G for KiB, MiB, GiB (25M, 512K), or 0";
    match MemoryBudget::parse(text) {
        Ok(MemoryBudget::Bytes(b)) => Ok(b),
        Ok(MemoryBudget::Fraction(_)) => Err(format!("'{text}': {bytes}, not a percentage")),
        Err(e) if e.contains("more bytes") => Err(e),
        Err(_) => Err(format!("'{text}': {bytes}")),
    }
}

/// Copies mpirun's stderr to this process's, leaving out Open MPI's help
/// text for an MPI_ABORT (a block between lines of dashes whose first line
/// says so, and the aggregated repeats' line with its advice): it followed
/// every failed data-parallel start, after the rank's own error, and says
/// nothing the error does not. Every other line passes at once and whole
/// (which rank a signal ended, the ranks' own errors); an abort block cut
/// short is written out as it came.
/// Says whether rank 0's words for an interrupted run (`aicf: error:
/// interrupted at ...`) were among the lines passed on.
fn forward_without_abort_help(from: impl std::io::Read, to: &mut dyn std::io::Write, ranks: usize) -> bool {
    use std::io::BufRead;
    let mut repeats = RankRepeats::new(ranks);
    let dashes = |l: &[u8]| {
        let t = l.trim_ascii_end();
        t.len() >= 20 && t.iter().all(|&b| b == b'-')
    };
    let mut reader = std::io::BufReader::new(from);
    // A line of dashes not yet written: the start of a block, if the next
    // line says it is an abort's.
    let mut opening: Option<Vec<u8>> = None;
    // The abort block being dropped (kept, in case it never closes).
    let mut dropping: Option<Vec<u8>> = None;
    let mut after_aggregate = false;
    let mut said_interrupted = false;
    // Whether a rank said it failed (or aborted).
    let mut rank_failed = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(block) = dropping.as_mut() {
            block.extend_from_slice(&line);
            // Closed: dropped; a block past any help text's length is not
            // one (written out).
            if dashes(&line) {
                dropping = None;
            } else if block.len() > 4096 {
                let _ = to.write_all(block);
                dropping = None;
            }
            continue;
        }
        if let Some(open) = opening.take() {
            let first = String::from_utf8_lossy(&line);
            // After rank 0 said the run was interrupted (the ranks stopped
            // together on a signal), mpirun's report of their exit status
            // says nothing more.
            let exit_report = said_interrupted
                && (first.starts_with("Primary job")
                    || first.starts_with("mpirun detected that one or more processes"));
            if first.starts_with("MPI_ABORT was invoked") || exit_report {
                rank_failed = true;
                let mut block = open;
                block.extend_from_slice(&line);
                dropping = Some(block);
                continue;
            }
            let _ = to.write_all(&open);
        }
        if dashes(&line) {
            opening = Some(line.clone());
            continue;
        }
        // Two ranks' output interleaved: a block's opening dashes after
        // the start of another rank's line (`aicf: error (rank ------`).
        // The start is passed on, the dashes open the block (the line's
        // rest follows the block).
        let t = line.trim_ascii_end();
        let trailing = t.iter().rev().take_while(|&&b| b == b'-').count();
        if trailing >= 20 && trailing < t.len() {
            let at = t.len() - trailing;
            let _ = to.write_all(&line[..at]);
            opening = Some(line[at..].to_vec());
            continue;
        }
        // "[host:pid] 1 more process has sent help message help-mpi-api.txt
        // / mpi-abort", and the advice right after it.
        let text = String::from_utf8_lossy(&line);
        if text.contains("help-mpi-api.txt / mpi-abort") {
            after_aggregate = true;
            continue;
        }
        if after_aggregate && text.contains("\"orte_base_help_aggregate\" to 0") {
            after_aggregate = false;
            continue;
        }
        after_aggregate = false;
        // Open MPI's runtime tripping over its own teardown after a rank
        // failed and said why ("[vm:5306] [[30788,0],0] ORTE_ERROR_LOG: Out
        // of resource in file ../orte/util/show_help.c at line 507", "Data
        // unpack would read past end of buffer"): in 1 of 3 failed starts,
        // read as a second failure. (Before a rank's error, they pass: a
        // "Data unpack" is also mpirun's and the ranks' Open MPI versions
        // differing.)
        if rank_failed && is_orte_teardown_noise(&text) {
            continue;
        }
        rank_failed |= text.starts_with("aicf: error");
        said_interrupted |= text.strip_prefix("aicf: error: ").is_some_and(|t| t.starts_with(run::INTERRUPTED_AT));
        if !repeats.admit(&text) {
            continue;
        }
        let _ = to.write_all(&line);
        let _ = to.flush();
    }
    for rest in [opening, dropping].into_iter().flatten() {
        let _ = to.write_all(&rest);
    }
    let _ = to.write_all(repeats.summary().as_bytes());
    let _ = to.flush();
    said_interrupted
}

/// What every rank of an `--nproc` run says alike, said once: a rank's
/// error that an earlier rank said in the same words (its lines after the
/// first too), and a note or warning each rank printed (their stderr
/// passes through mpirun; a bad flag was said once per rank, and two
/// ranks' errors mixed). [`RankRepeats::summary`] names the ranks left out.
struct RankRepeats {
    ranks: usize,
    /// Each error said: its message, its ranks' count, the ranks that said
    /// it again, its lines after the first.
    errors: Vec<(String, usize, Vec<usize>, Vec<String>)>,
    /// How often each note line came.
    notes: std::collections::HashMap<String, usize>,
    /// The error whose lines after the first are being seen.
    recording: Option<usize>,
    /// A repeated error's lines being left out: which, and the next line.
    skipping: Option<(usize, usize)>,
}

impl RankRepeats {
    fn new(ranks: usize) -> Self {
        Self { ranks: ranks.max(1), errors: Vec::new(), notes: Default::default(), recording: None, skipping: None }
    }

    /// `aicf: error (rank R of N): MESSAGE` as (R, N, MESSAGE).
    fn rank_error(line: &str) -> Option<(usize, usize, &str)> {
        let rest = line.strip_prefix("aicf: error (rank ")?;
        let (r, rest) = rest.split_once(" of ")?;
        let (n, message) = rest.split_once("): ")?;
        Some((r.parse().ok()?, n.parse().ok()?, message))
    }

    /// Whether `line` is written.
    fn admit(&mut self, line: &str) -> bool {
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some((i, k)) = self.skipping {
            if self.errors[i].3.get(k).is_some_and(|l| l == line) {
                self.skipping = Some((i, k + 1));
                return false;
            }
            self.skipping = None;
        }
        if let Some((rank, size, message)) = Self::rank_error(line) {
            if let Some(i) = self.errors.iter().position(|e| e.0 == message && e.1 == size) {
                self.errors[i].2.push(rank);
                self.skipping = Some((i, 0));
                self.recording = None;
                return false;
            }
            self.errors.push((message.to_string(), size, Vec::new(), Vec::new()));
            self.recording = Some(self.errors.len() - 1);
            return true;
        }
        let own_line = ["aicf:", "note:", "warning:", "[", "---"].iter().any(|p| line.starts_with(p));
        match self.recording {
            Some(i) if !own_line && !line.is_empty() => {
                self.errors[i].3.push(line.to_string());
                return true;
            }
            _ => self.recording = None,
        }
        if line.starts_with("note: ") || line.starts_with("warning: ") {
            let seen = self.notes.entry(line.to_string()).or_insert(0);
            *seen += 1;
            // (Once for every `ranks` times it came: a note one process
            // says twice is said twice.)
            return (*seen - 1) % self.ranks == 0;
        }
        true
    }

    /// A line for each error other ranks said too: which ranks.
    fn summary(&self) -> String {
        let mut out = String::new();
        for (_, size, others, _) in self.errors.iter().filter(|e| !e.2.is_empty()) {
            let list = others.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
            let s = if others.len() == 1 { "" } else { "s" };
            out.push_str(&format!("aicf: the same error on rank{s} {list} of {size}\n"));
        }
        out
    }
}

/// Whether `line` is one of Open MPI's internal error logs that its
/// runtime prints while tearing down an aborted job: the help-message
/// relay's, and a daemon message that no longer unpacks.
fn is_orte_teardown_noise(line: &str) -> bool {
    line.starts_with('[')
        && line
            .split_once("ORTE_ERROR_LOG: ")
            .is_some_and(|(_, what)| what.contains("show_help.c") || what.starts_with("Data unpack"))
}

/// Records the run whose registry row rank 0 named in `record` (written
/// where the run was recorded) as interrupted, where it is still
/// unfinished; a registry that cannot be written is said, not an error.
fn mark_interrupted(record: &Path, message: &str, seconds: f64) {
    let Ok(text) = std::fs::read_to_string(record) else { return };
    let Some((db, id)) = text.rsplit_once('#') else { return };
    let Ok(id) = id.parse::<i64>() else { return };
    let marked = aicf_compiler::train::registry::Runs::open(Path::new(db))
        .and_then(|runs| runs.interrupt_unfinished(id, message, seconds));
    if let Err(e) = marked {
        eprintln!("aicf: note: the run registry: {e}; run {id} stays recorded as unfinished");
    }
}

/// Where this process runs, as a name's part: a hash of the host's name
/// and the PID namespace's, so that a launcher's process id is only read
/// where it means the same process (a container sharing /tmp, or a TMPDIR
/// on shared storage, has other processes under the same ids).
fn launcher_place() -> String {
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most the buffer's length.
    let host = if unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0 {
        host.split(|&b| b == 0).next().unwrap_or_default().to_vec()
    } else {
        Vec::new()
    };
    let namespace = std::fs::read_link("/proc/self/ns/pid").map(|p| p.display().to_string()).unwrap_or_default();
    // FNV-1a, the same in every build.
    let hash = host
        .iter()
        .chain(b"\0")
        .chain(namespace.as_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// Removes the folders of earlier `--nproc` launchers that are gone (a
/// launcher killed by SIGKILL cannot remove its own):
/// `aicf-nproc-<pid>-<time>-<place>` in the temporary directory, of this
/// user and this place (`launcher_place`), whose process no longer exists.
fn remove_stale_record_dirs(place: &str) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    // SAFETY: geteuid cannot fail.
    let user = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("aicf-nproc-"))
            .and_then(|rest| rest.split_once('-'))
            .filter(|(_, rest)| rest.rsplit_once('-').is_some_and(|(_, p)| p == place))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
            .filter(|&pid| pid > 0)
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == user);
        if gone && ours {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The FIFO (its path in the environment) that rank 0 of a `--nproc` run
/// writes its standard output into, for the launching process to copy.
const NPROC_STDOUT_ENV: &str = "AICF_NPROC_STDOUT";

/// A FIFO in `dir` (the launcher's own new folder), open for reading
/// without waiting for a writer; none where one cannot be made (rank 0's
/// output then comes through mpirun).
fn rank0_stdout_fifo(dir: &Path) -> Option<(PathBuf, std::fs::File)> {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join("stdout");
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return None;
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).ok()?;
    Some((path, file))
}

/// Copies what rank 0 writes into `fifo` to this process's standard output
/// until mpirun has ended (`ended`) and the FIFO is drained: mpirun waits
/// for its ranks, so nothing is written after it ends. The FIFO is read
/// into memory by one thread and written out by another, as mpirun keeps
/// a rank's output: a standard output not read for a while (`| less`, a
/// stopped terminal) must not stop rank 0 in a write, and every rank with
/// it at the next all-reduce's timeout.
/// Returns how many bytes came.
fn copy_until_ended(mut fifo: std::fs::File, ended: std::sync::Arc<std::sync::atomic::AtomicBool>) -> usize {
    use std::io::Read as _;
    let (send, receive) = std::sync::mpsc::channel::<Vec<u8>>();
    let writer = std::thread::spawn(move || {
        for piece in receive {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&piece);
            let _ = out.flush();
        }
    });
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    loop {
        // Read before the FIFO is: an end seen here means every byte was
        // written before the reads below.
        let last = ended.load(std::sync::atomic::Ordering::Acquire);
        match fifo.read(&mut buf) {
            Ok(n) if n > 0 => {
                total += n;
                let _ = send.send(buf[..n].to_vec());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Empty (no writer yet, or none any more) or would block.
            Ok(_) | Err(_) if !last => std::thread::sleep(std::time::Duration::from_millis(20)),
            Ok(_) | Err(_) => break,
        }
    }
    drop(send);
    let _ = writer.join();
    total
}

/// In rank 0 of a `--nproc` run, standard output goes to the launcher's
/// FIFO (`NPROC_STDOUT_ENV`), where one is open; it is left as it is
/// otherwise (another launcher, another rank, the launcher gone).
fn rank0_stdout_to_launcher() {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Some(path) = std::env::var_os(NPROC_STDOUT_ENV) else { return };
    if !collective::launched_by_mpi() || collective::launcher_rank() != 0 {
        return;
    }
    // Without waiting: no reader means no launcher (ENXIO).
    let Ok(fifo) = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&path) else {
        return;
    };
    let fd = fifo.as_raw_fd();
    // SAFETY: fcntl and dup2 on descriptors this process holds; fd 1 is
    // replaced before anything was written to it.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        // Writes wait for the launcher's reads, as a pipe's do.
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) != 0 {
            return;
        }
        libc::dup2(fd, libc::STDOUT_FILENO);
    }
}

/// The value of `flag` in a command line's `args` (`--flag V` or
/// `--flag=V`), as the `--nproc` launcher reads the few it needs before
/// the ranks parse the rest.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str).or_else(|| {
        let prefix = format!("{flag}=");
        args.iter().find_map(|a| a.strip_prefix(prefix.as_str()))
    })
}

/// Runs this command again under `mpirun -n n` with --data-parallel (and
/// without --nproc), and returns its exit status. `auto_resumed`: what
/// --auto-resume decided (`--resume`, `--resume-from`, or neither), which
/// the ranks are given in its place.
fn launch_mpirun(n: usize, auto_resumed: Option<(bool, Option<PathBuf>)>) -> i32 {
    if n == 0 {
        eprintln!("aicf: error: --nproc 0: at least one process");
        return 2;
    }
    if collective::launched_by_mpi() {
        eprintln!(
            "aicf: error: --nproc starts mpirun, and this process is already one of an mpirun's: give \
             --data-parallel without --nproc under mpirun"
        );
        return 2;
    }
    // What the ranks would each refuse after mpirun started them all,
    // refused once, here.
    if let Err(e) = collective::timeout_from_env(std::time::Duration::from_secs(300)) {
        eprintln!("aicf: error: {e}");
        return 2;
    }
    // Processes on this machine (mpirun is told to oversubscribe it), as
    // many as the threads a run may ask for: 1000 swamped 2 cores, and
    // mpirun went on starting them after aicf was killed.
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let most = cores * aicf_runtime::backend::MAX_THREADS_PER_CORE;
    if n > most {
        eprintln!(
            "aicf: error: --nproc {n}: at most {most} on this machine ({} per core); across machines, start \
             mpirun yourself with --data-parallel",
            aicf_runtime::backend::MAX_THREADS_PER_CORE
        );
        return 2;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("aicf: error: cannot find this program to start it under mpirun: {e}");
            return 1;
        }
    };
    let mut args: Vec<String> = Vec::new();
    let mut skip = false;
    for a in std::env::args().skip(1) {
        if skip {
            skip = false;
            continue;
        }
        if a == "--nproc" {
            skip = true;
            continue;
        }
        if a.starts_with("--nproc=") || (a == "--auto-resume" && auto_resumed.is_some()) {
            continue;
        }
        args.push(a);
    }
    match auto_resumed {
        Some((true, _)) => args.push("--resume".into()),
        Some((false, Some(from))) => args.extend(["--resume-from".into(), from.display().to_string()]),
        _ => {}
    }
    if !args.iter().any(|a| a == "--data-parallel") {
        args.push("--data-parallel".into());
    }
    // Threads asked of each process past this machine's cores contend (each
    // rank takes its share of the cores only where --threads is not given).
    let threads = flag_value(&args, "--threads").and_then(|t| t.parse::<usize>().ok());
    if let Some(t) = threads
        && t.saturating_mul(n) > cores
    {
        eprintln!(
            "note: --nproc {n} with --threads {t}: {} threads on this machine's {cores} core{}, which contend; \
             --threads {} gives each process its share",
            t * n,
            if cores == 1 { "" } else { "s" },
            (cores / n).max(1)
        );
    }
    let mut command = std::process::Command::new("mpirun");
    command.arg("-n").arg(n.to_string());
    // Each rank takes its share of the cores itself (cores / ranks on the
    // node): Open MPI's default binding pinned a lone rank to one core.
    command.arg("--bind-to").arg("none");
    if n > cores {
        command.arg("--oversubscribe");
    }
    // Open MPI refuses root unless told; a container's user often is root.
    #[cfg(unix)]
    if std::env::var("USER").as_deref() == Ok("root") || is_root() {
        command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    // Rank 0 says where it records the run (`aicf runs`), so that a run
    // this process interrupts is recorded as interrupted, not unfinished:
    // into a folder of this process's own (made new, so no one else's file
    // or link is read or written), removed at the end.
    let place = launcher_place();
    remove_stale_record_dirs(&place);
    let record_dir = std::env::temp_dir().join(format!(
        "aicf-nproc-{}-{}-{place}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
    ));
    let record = std::fs::create_dir(&record_dir).ok().map(|()| record_dir.join("run"));
    if let Some(record) = &record {
        command.env(aicf_compiler::train::registry::NPROC_RECORD_ENV, record);
    }
    command.env(aicf_compiler::train::registry::NPROC_COMMAND_ENV, std::env::args().collect::<Vec<_>>().join(" "));
    // Rank 0's standard output comes here through a FIFO of this process's
    // own (`rank0_stdout_to_launcher`), not through mpirun: mpirun stopping
    // on a Ctrl-C dropped what its ranks had written last (an interrupted
    // run's last 20-100 epoch lines, which its metrics and checkpoint held).
    let rank0_out = record.as_ref().and_then(|_| rank0_stdout_fifo(&record_dir));
    // (Neither is taken from this process's environment where not set
    // here: an inherited one is another launcher's.)
    match &rank0_out {
        Some((fifo, _)) => command.env(NPROC_STDOUT_ENV, fifo),
        None => command.env_remove(NPROC_STDOUT_ENV),
    };
    if record.is_none() {
        command.env_remove(aicf_compiler::train::registry::NPROC_RECORD_ENV);
    }
    // Training reads no standard input: mpirun would pass this process's
    // on to rank 0, reading it up (a `while read` loop around `aicf train
    // --nproc` ended after its first line).
    command.stdin(std::process::Stdio::null());
    command.arg(exe).args(&args);
    // Open MPI's help text for an MPI_ABORT (a failed rank's way out) is
    // left out of what mpirun prints: it followed the rank's own error.
    command.stderr(std::process::Stdio::piped());
    // mpirun ends with this process, however it ends (a SIGTERM or SIGKILL
    // sent to it alone left mpirun and its ranks training, holding the
    // checkpoint directory's lock): the kernel sends it SIGTERM, which
    // mpirun passes on to the ranks.
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl and getppid are async-signal-safe, as a child
        // between fork and exec needs.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Its stderr is a pipe to this process: were this process
                // gone, a write there must not end mpirun before it has
                // stopped the ranks.
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                // The parent ended before the request took hold.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("aicf ended while starting mpirun"));
                }
                Ok(())
            });
        }
    }
    // A Ctrl-C (or a SIGINT, SIGTERM or SIGHUP sent to this process alone,
    // as `timeout` or a scheduler does) is passed on to mpirun as a SIGINT,
    // which stops the ranks; then the run says where it stands, as a
    // single process does (it ended without a word). A second one ends
    // this process at once (and mpirun with it: the kernel's SIGTERM).
    let checkpoint_dir = flag_value(&args, "--checkpoint-dir").map(PathBuf::from);
    let _interruptible = aicf_runtime::checkpoint::interruptible();
    // (A Ctrl-C at a terminal reaches mpirun too: it is passed on only
    // where mpirun has not ended a second later, as a second SIGINT makes
    // mpirun print that an abort is already under way.)
    let started = Instant::now();
    let mut forward = None;
    let mpirun_ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let copy_out = rank0_out.map(|(_, fifo)| {
        let ended = mpirun_ended.clone();
        std::thread::spawn(move || copy_until_ended(fifo, ended))
    });
    let waited = command.spawn().and_then(|mut child| {
        if let Some(err) = child.stderr.take() {
            forward = Some(std::thread::spawn(move || forward_without_abort_help(err, &mut std::io::stderr(), n)));
        }
        let (mut seen, mut passed_on) = (None, false);
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if aicf_runtime::checkpoint::interrupted() {
                let at = *seen.get_or_insert_with(std::time::Instant::now);
                if !passed_on && at.elapsed() > std::time::Duration::from_secs(1) {
                    passed_on = true;
                    // SAFETY: kill(2) on the child's pid, which has not
                    // been waited for, so it is not reused.
                    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    });
    // (Everything mpirun and rank 0 printed is out before this process's
    // last words.)
    mpirun_ended.store(true, std::sync::atomic::Ordering::Release);
    let rank0_wrote = copy_out.map(|copy| copy.join().unwrap_or(1));
    let said_interrupted = forward.is_some_and(|f| f.join().unwrap_or(false));
    let mark = |message: &str| {
        if let Some(record) = &record {
            mark_interrupted(record, message, started.elapsed().as_secs_f64());
        }
    };
    // The ranks stopped together on a signal of their own (Slurm sends
    // SIGTERM to every process of a job): rank 0 said where the run
    // stands and recorded it; this process ends with their status.
    // What the checkpoint directory holds, once rank 0 has let go of it
    // (its `.lock`): the ranks outlive a mpirun killed under them by a
    // moment, and rank 0 wrote a checkpoint after this process had said
    // the run ended.
    let kept = || -> String {
        let Some(dir) = checkpoint_dir else { return "no checkpoint is written without --checkpoint-dir".into() };
        let released = std::fs::File::open(dir.join(".lock")).is_ok_and(|lock| {
            let deadline = Instant::now() + std::time::Duration::from_secs(15);
            loop {
                if lock.try_lock().is_ok() {
                    return true;
                }
                if Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        let last = dir.join("last.safetensors");
        let holds = match aicf_runtime::checkpoint::read_metadata(&last).ok().and_then(|m| m.get("epoch").cloned()) {
            Some(epoch) => run::resume_here(&last, epoch),
            None => format!("no epoch ended, so {} was not written", last.display()),
        };
        if released || !dir.join(".lock").exists() {
            holds
        } else {
            format!("{holds} (rank 0 still holds {}: its process may still be running)", dir.join(".lock").display())
        }
    };
    let ranks_stopped = record.as_ref().and_then(|r| {
        let file = aicf_compiler::train::registry::nproc_status_file(r.as_os_str());
        std::fs::read_to_string(file).ok()?.trim().parse::<i32>().ok()
    });
    // (Where mpirun, stopping on this process's signal, did not pass on
    // rank 0's words, this process says where the run stands below.)
    // (Its status is this process's own signal's where it had one: a
    // Ctrl-C's 130, though mpirun stopped the ranks with a SIGTERM.)
    if let Some(status) = ranks_stopped.filter(|_| waited.as_ref().is_ok_and(|s| !s.success()) && said_interrupted) {
        let _ = std::fs::remove_dir_all(&record_dir);
        return aicf_runtime::checkpoint::interrupted_status().unwrap_or(status);
    }
    // (A run that ended well, or that failed on its own, says so as usual.)
    if waited.as_ref().is_ok_and(|s| !s.success())
        && (aicf_runtime::checkpoint::interrupted() || ranks_stopped.is_some())
    {
        let message = format!("interrupted: the data-parallel run's {n} processes were stopped");
        mark(&message);
        if record.is_some() {
            let _ = std::fs::remove_dir_all(&record_dir);
        }
        eprintln!("aicf: error: {message}; {}", kept());
        return aicf_runtime::checkpoint::interrupted_status().or(ranks_stopped).unwrap_or(130);
    }
    if record.is_some() {
        let _ = std::fs::remove_dir_all(&record_dir);
    }
    match waited {
        // A launcher that ended well without running the ranks (rank 0
        // writes its lines to the FIFO on any run): not a trained model.
        Ok(status) if status.success() && rank0_wrote == Some(0) => {
            eprintln!(
                "aicf: error: mpirun ended with status 0, but rank 0 wrote nothing: the run's {n} processes did not \
                 train (is `mpirun` Open MPI's launcher?)"
            );
            1
        }
        Ok(status) => match status.code() {
            // A rank ended by a signal (killed, out of memory): mpirun
            // reports it as 128 + the signal, in its own words only.
            #[cfg(unix)]
            Some(code) if code > 128 && code < 128 + 65 => {
                let signal = code - 128;
                // (What the checkpoint directory holds: "--resume continues"
                // was said where no epoch had ended, and none was written.)
                eprintln!(
                    "aicf: error: the data-parallel run ended: one of its {n} processes was ended by signal {signal} \
                     ({}; Open MPI's report above names which rank); {}",
                    signal_name(signal),
                    kept()
                );
                code
            }
            // mpirun failing before any rank wrote (a launch that did not
            // start, a host it could not reach): said, not only its status.
            Some(code) if code != 0 && rank0_wrote == Some(0) => {
                eprintln!(
                    "aicf: error: mpirun ended with status {code} before the run's rank 0 wrote its first line (the \
                     errors above, a rank's or Open MPI's, say why); {}",
                    kept()
                );
                code
            }
            Some(code) => code,
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::process::ExitStatusExt;
                    let signal = status.signal().unwrap_or(0);
                    eprintln!("aicf: error: mpirun was ended by signal {signal} ({}); {}", signal_name(signal), kept());
                    128 + signal
                }
                #[cfg(not(unix))]
                1
            }
        },
        Err(e) => {
            eprintln!("aicf: error: cannot start mpirun (Open MPI's launcher; tools/setup.sh installs it): {e}");
            1
        }
    }
}

/// A signal's name, for messages.
#[cfg(unix)]
fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

#[cfg(unix)]
fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false)
}

/// The communicator of a --data-parallel command: MPI's world under
/// mpirun (else a group of one), waiting at most AICF_COLLECTIVE_TIMEOUT
/// seconds (300) for the other processes.
fn world(seconds: Option<f64>) -> Result<std::sync::Arc<dyn Communicator>> {
    let timeout = match seconds {
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => std::time::Duration::from_secs_f64(s),
        Some(s) if s >= 1e9 => return Err(format!("--collective-timeout {s:e}: at most 1e9 seconds")),
        Some(s) => return Err(format!("--collective-timeout {s} is not a positive number of seconds")),
        None => collective::timeout_from_env(std::time::Duration::from_secs(300))?,
    };
    let comm = collective::world(timeout)?;
    *WORLD.lock().unwrap_or_else(|e| e.into_inner()) = Some(comm.clone());
    Ok(comm)
}

/// The communicator a command joined: `main` ends it (MPI_Finalize) after
/// success, and ends every rank (MPI_Abort) after an error.
static WORLD: std::sync::Mutex<Option<std::sync::Arc<dyn Communicator>>> = std::sync::Mutex::new(None);

/// One replica's device: on the CPU, the worker threads asked for, else
/// this machine's cores over the replicas that share it; on CUDA, `cuda`
/// (or `cuda:0`) is the GPU of the replica's place on its machine (its
/// local rank, modulo the GPUs there), another `cuda:N` stays as given.
fn replica_device(d: &DeviceArgs) -> DeviceArgs {
    let local = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<usize>().ok());
    let mut d = d.clone();
    match d.device {
        Device::Cpu { .. } if d.threads == 0 => {
            let sharing = local("OMPI_COMM_WORLD_LOCAL_SIZE").unwrap_or(1);
            let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
            d.threads = (cores / sharing.max(1)).max(1);
        }
        Device::Cuda { ordinal: 0 } => {
            let rank = local("OMPI_COMM_WORLD_LOCAL_RANK").unwrap_or(0);
            let gpus = aicf_runtime::cuda::device_count().unwrap_or(1).max(1);
            d.device = Device::Cuda { ordinal: rank % gpus };
        }
        _ => {}
    }
    d
}

fn device(text: &str) -> Result<Device> {
    Device::parse(text)
}

fn betas(text: &str) -> Result<(f64, f64)> {
    let parsed = text.split_once(',').and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
    match parsed {
        Some((b1, b2)) if (0.0..1.0).contains(&b1) && (0.0..1.0).contains(&b2) => Ok((b1, b2)),
        _ => Err(format!("'{text}': betas are two numbers in [0, 1), as 0.9,0.999")),
    }
}

/// The most micro-batches `--accumulate` takes (a step is this many calls).
const MAX_ACCUMULATE: usize = 1 << 16;

/// `--collective-timeout`, checked when the command line is read (it was
/// checked only where a data-parallel run joined its group).
fn collective_seconds(text: &str) -> Result<f64> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(s),
        _ => Err(format!("'{text}': the seconds a rank waits in a collective, a positive number under 1e9")),
    }
}

fn accumulate(text: &str) -> Result<usize> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_ACCUMULATE).contains(&n) => Ok(n),
        _ => Err(format!("'{text}': micro-batches per step are a whole number from 1 to {MAX_ACCUMULATE}")),
    }
}

fn train_options(c: &ModelArgs) -> TrainOptions {
    TrainOptions {
        optimizer: c.optimizer.name().into(),
        momentum: c.momentum,
        nesterov: c.nesterov,
        weight_decay: c.weight_decay(),
        betas: c.betas,
        eps: c.adam_eps.unwrap_or(1e-8),
        decay_min_rank: if c.no_decay_1d { 2 } else { 0 },
        clip_norm: c.clip_norm(),
        memory_budget: c.memory_budget,
        precision: c.precision,
        shape_padding: !c.no_shape_padding,
        data_parallel: c.data_parallel,
        bucket_bytes: c.bucket_size,
        accumulate: c.accumulate > 1,
        // `run_compile` decides which heads by its target.
        fused_attention_backward: c.attention_backward.fused().unwrap_or(true),
        fused_attention_any_heads: false,
        conv_as_gemm: c.conv.as_gemm().unwrap_or(true),
    }
}

/// Refuses an optimizer setting that the chosen optimizer does not take
/// (it would be ignored, silently), and notes a fused attention backward
/// asked for where it does not apply (flags of the model's compile for a
/// GPU when `gpu`).
fn check_model_flags(c: &ModelArgs, gpu: bool) -> Result<()> {
    if gpu && matches!(c.attention_backward, AttentionBackward::Fused) && c.precision == Precision::Fp32 {
        eprintln!(
            "note: --attention-backward fused takes 16-bit attention heads on a GPU (--precision bf16 or fp16, \
             head sizes multiples of 16 up to 128); in fp32 attention's gradient stays GEMMs there"
        );
    }
    // A flag for ops the model has none of did nothing, without a word
    // (an hl model's text is read; an ONNX file's ops are seen at import).
    if !matches!(c.attention_backward, AttentionBackward::Auto) || !matches!(c.conv, Conv::Auto) {
        let text = std::fs::read(&c.model).ok().filter(|_| c.model.extension().is_none_or(|e| e != "onnx"));
        if let Some(text) = text.map(|t| String::from_utf8_lossy(&t).into_owned()) {
            // (Attention written out as its ops is fused from a softmax.)
            if !matches!(c.attention_backward, AttentionBackward::Auto)
                && !text.contains("hl.attention")
                && !text.contains("hl.softmax")
            {
                eprintln!("note: --attention-backward does nothing here: the model has no attention");
            }
            if !matches!(c.conv, Conv::Auto) && !text.contains("hl.conv") {
                eprintln!("note: --conv does nothing here: the model has no convolution");
            }
        }
    }
    // A model written by hand states its network twice (@forward, @loss):
    // one edited without the other made predictions and the held-out
    // accuracy another network's, without a word.
    if c.model.extension().is_none_or(|e| e != "onnx")
        && let Ok(text) = std::fs::read_to_string(&c.model)
        && let Some(m) = aicf_compiler::pipeline::forward_differs(&text, &c.model.display().to_string())
    {
        eprintln!("warning: {m}");
    }
    if c.no_shape_padding && c.precision == Precision::Fp32 {
        eprintln!(
            "note: --no-shape-padding leaves 16-bit contractions unpadded (--precision bf16 or fp16); in fp32 only \
             a model written in bf16 or f16 has any"
        );
    }
    aicf_compiler::train::run::check_optimizer_settings(c.momentum, c.weight_decay(), c.betas, c.clip_norm())?;
    // (Given at all, it is Adam's: SGD's 1e-8 too.)
    if let Some(eps) = c.adam_eps {
        if matches!(c.optimizer, Optimizer::Sgd) {
            return Err(format!("--adam-eps {eps:e} is Adam's and AdamW's; SGD has none"));
        }
        aicf_compiler::train::run::check_eps(c.optimizer.name(), eps).map_err(|e| format!("--adam-eps: {e}"))?;
    }
    aicf_compiler::train::run::check_groups(!c.no_decay_1d, c.weight_decay())
        .map_err(|e| format!("--no-decay-1d: {e} (--weight-decay)"))?;
    match c.optimizer {
        Optimizer::Adam | Optimizer::Adamw if c.momentum != 0.0 => {
            Err(format!("--momentum {} is SGD's; Adam's and AdamW's moments are set by --betas", c.momentum))
        }
        Optimizer::Sgd if c.betas != (0.9, 0.999) => Err("--betas are Adam's and AdamW's; SGD's is --momentum".into()),
        Optimizer::Adam | Optimizer::Adamw if c.nesterov => {
            Err("--nesterov is SGD's: --optimizer sgd --momentum 0.9 --nesterov, say (the default optimizer is adam)"
                .into())
        }
        Optimizer::Sgd if c.nesterov && c.momentum == 0.0 => {
            Err("--nesterov needs a momentum: --momentum 0.9, say (PyTorch's SGD refuses it without one)".into())
        }
        _ => Ok(()),
    }
}

fn options(c: &ModelArgs, d: &DeviceArgs, seed: u64, out: &Path) -> Result<Options> {
    if d.allow_tf32 && !d.device().is_cuda() {
        return Err("--allow-tf32 is for CUDA devices: on the CPU f32 GEMMs compute in f32".into());
    }
    check_model_flags(c, d.device().is_cuda())?;
    Ok(Options {
        optimizer: c.optimizer.name().into(),
        momentum: c.momentum,
        nesterov: c.nesterov,
        weight_decay: c.weight_decay(),
        betas: c.betas,
        eps: c.adam_eps.unwrap_or(1e-8),
        decay_1d: !c.no_decay_1d,
        clip_norm: c.clip_norm(),
        memory_budget: c.memory_budget,
        device: d.device(),
        seed,
        cache_dir: out.to_path_buf(),
        gemm: None,
        allow_tf32: d.allow_tf32,
        precision: c.precision,
        shape_padding: !c.no_shape_padding,
        data_parallel: c.data_parallel,
        bucket_bytes: c.bucket_size,
        accumulate: c.accumulate,
        fused_attention_backward: c.attention_backward.fused(),
        conv_as_gemm: c.conv.as_gemm(),
        check_inputs: true,
    })
}

fn is_onnx(model: &Path) -> bool {
    model.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// Whether `output` names the file `input` (so writing it would destroy
/// the input).
fn same_file(input: &Path, output: &Path) -> bool {
    match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The first `shown` of `items`, comma-separated, and a count of the rest
/// (`'a', 'b' and 3 more`): an import note's list.
fn first_few(items: impl ExactSizeIterator<Item = String>, shown: usize) -> String {
    let more = items.len().saturating_sub(shown);
    let listed: Vec<String> = items.take(shown).collect();
    format!("{}{}", listed.join(", "), if more > 0 { format!(" and {more} more") } else { String::new() })
}

/// The Loops an import unrolled over more than 256 iterations, once each
/// (each function traced, `@forward` and `@loss`, records them).
fn long_loops(branches: &[(String, String)]) -> Vec<(&str, usize)> {
    let mut long: Vec<(&str, usize)> = Vec::new();
    for (at, decision) in branches {
        let steps = decision.strip_suffix(" iterations").and_then(|n| n.parse::<usize>().ok());
        if let (Some(n), Some(name)) = (steps.filter(|&n| n > 256), at.strip_prefix("Loop "))
            && !long.iter().any(|(l, _)| *l == name)
        {
            long.push((name, n));
        }
    }
    long
}

/// How the exporter that wrote a model (its `producer_name`) makes the
/// batch axis dynamic, for input `input` (it named PyTorch's `dynamic_axes`
/// to a JAX user).
fn batch_axis_hint(producer: &str, input: &str) -> String {
    match producer {
        "pytorch" => format!("dynamic_axes={{'{input}': {{0: 'batch'}}}}"),
        "jax2onnx" => "a symbolic first dimension, to_onnx(fn, [(\"B\", ...)])".into(),
        "tf2onnx" | "keras2onnx" => "a None first dimension in the input signature (tf.TensorSpec((None, ...)))".into(),
        _ => format!("its first dimension symbolic; from PyTorch, dynamic_axes={{'{input}': {{0: 'batch'}}}}"),
    }
}

/// Imports `model` to `output` (and its weights beside it), printing what
/// it holds.
/// Where an import's summary line goes: stdout (`aicf import`, train,
/// eval), or stderr where stdout carries the command's own output (`aicf
/// sample`'s text).
#[derive(Clone, Copy, PartialEq)]
enum Say {
    Stdout,
    Stderr,
}

fn import(model: &Path, output: &Path, options: &ImportOptions) -> Result<()> {
    import_saying(model, output, options, Say::Stdout).map(|_| ())
}

fn import_saying(model: &Path, output: &Path, options: &ImportOptions, say: Say) -> Result<Option<onnx::GraphLoss>> {
    let batch = options.batch;
    if same_file(model, output) {
        return Err(format!("{}: -o names the model being imported; give another output file", output.display()));
    }
    aicf_compiler::train::refuse_overwriting_weights(output, "the imported model")
        .map_err(|e| format!("{}: {e}", output.display()))?;
    let started = Instant::now();
    // Every import error names the file (some name only a node or tensor).
    let imported = onnx::import(model, options).map_err(|e| {
        let (message, name) = (e.to_string(), model.display().to_string());
        if message.contains(&name) { message } else { format!("{name}: {message}") }
    })?;
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        aicf_compiler::train::run::make_dir(dir).map_err(|e| format!("-o {}: {e}", output.display()))?;
    }
    imported.write(output).map_err(|e| e.to_string())?;
    match (batch, imported.symbolic, &imported.batch_of_one) {
        (Some(b), _, Some(Ok(()))) => eprintln!(
            "note: {} was exported at a static batch of 1: its inputs' first dimension is read as the batch, at \
             --batch {b} (export with a dynamic batch axis to say so: {})",
            model.display(),
            batch_axis_hint(&imported.producer, imported.inputs.first().map_or("x", |(n, _)| n.as_str()))
        ),
        (Some(b), _, Some(Err(why))) => eprintln!(
            "note: --batch {b} is unused: {} was exported at a static batch of 1, and the graph fixes it ({why}); \
             it runs one row at a time (export it with a dynamic batch axis)",
            model.display()
        ),
        (Some(b), false, None) => eprintln!(
            "note: --batch {b} is unused: {}'s inputs have no symbolic dimension (they keep their sizes)",
            model.display()
        ),
        _ => {}
    }
    if !imported.frozen.is_empty() {
        let total: usize = imported.frozen.iter().map(|(_, n)| n).sum();
        let named: Vec<String> = imported.frozen.iter().take(5).map(|(n, v)| format!("'{n}' ({v} values)")).collect();
        let more = imported.frozen.len().saturating_sub(5);
        // (TorchScript's exporter names what it folded `onnx::<Op>_<n>`:
        // a norm of a parameter, say, whose computation it left out.)
        let folded = imported.frozen.iter().any(|(n, _)| n.starts_with("onnx::"));
        eprintln!(
            "note: {} float initializer{} ({total} values) {}, not trained (no op uses {} as a weight; \
             --trainable NAME trains one, a learned initial state say): {}{}{}",
            imported.frozen.len(),
            if imported.frozen.len() == 1 { "" } else { "s" },
            if imported.frozen.len() == 1 { "imports as a constant" } else { "import as constants" },
            if imported.frozen.len() == 1 { "it" } else { "them" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            if folded {
                " (an `onnx::` one is a value the exporter computed and folded: where it came from parameters, a \
                 weight's norm, export with do_constant_folding=False so that it trains as PyTorch's)"
            } else {
                ""
            }
        );
    }
    if !imported.unread_inputs.is_empty() {
        let named: Vec<String> = imported.unread_inputs.iter().map(|n| format!("'{n}'")).collect();
        eprintln!(
            "note: no node reads the input{} {}: {} fed and ignored{}",
            if named.len() == 1 { "" } else { "s" },
            named.join(", "),
            if named.len() == 1 { "it is" } else { "they are" },
            if imported.dynamo {
                " (the dynamo exporter wires a tensor passed twice, `model(ids, labels=ids)`, to one input and reads \
                 it for both: export with a copy, `labels=ids.clone()`)"
            } else {
                ""
            }
        );
    }
    if let Some(gl) = &imported.graph_loss {
        let quoted = |v: &[String]| v.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
        eprintln!(
            "note: @loss is the graph's own loss, its output '{}'{}: it takes {}{}; {}",
            gl.output,
            if matches!(options.loss, Loss::Auto) { " (its one scalar output)" } else { "" },
            if gl.predictions.is_empty() {
                format!("the data {}", quoted(&gl.data))
            } else {
                "the inputs @forward takes".to_string()
            },
            if gl.targets.is_empty() {
                String::new()
            } else {
                format!(
                    ", then the targets {} (a table's last column, a text's next tokens, or --data files: given \
                     to `aicf train`, `eval` or `predict` of the .onnx, one per input in the graph's order; to \
                     the written module, in @loss's)",
                    quoted(&gl.targets)
                )
            },
            if gl.predictions.is_empty() {
                "the graph has no other output, so there is no @forward (the held-out figure is the loss alone)"
                    .to_string()
            } else {
                format!("@forward takes {} and returns {}", quoted(&gl.data), quoted(&gl.predictions))
            }
        );
        for (target, ids) in &gl.shifted {
            eprintln!(
                "note: the graph shifts its target '{target}' itself (Hugging Face's causal language models: the \
                 labels are the input ids, position t scored against label t + 1): @loss takes the next tokens, as \
                 a text's targets are, and hands the graph the ids of '{ids}' as its labels (arrays given with \
                 --data hold the next tokens too; -100 there is ignored as the graph ignores it)"
            );
        }
    }
    if !imported.fills.is_empty() {
        let named: Vec<String> = imported
            .fills
            .iter()
            .map(|(n, v)| {
                format!(
                    "'{n}' with {}",
                    if *v == 1.0 {
                        "ones".to_string()
                    } else if *v == 0.0 {
                        "zeros".to_string()
                    } else {
                        format!("{v}")
                    }
                )
            })
            .collect();
        eprintln!(
            "note: a text does not give {}: the trainer fills {} (a text's windows are whole, one segment), and \
             `sample` does too; arrays given with --data feed {} as given",
            if named.len() == 1 { "this input" } else { "these inputs" },
            named.join(", "),
            if named.len() == 1 { "it" } else { "them" }
        );
    }
    if !imported.noise.is_empty() {
        let named: Vec<String> = imported.noise.iter().map(|(op, out)| format!("{op} '{out}'")).collect();
        let one = named.len() == 1;
        let bernoulli = imported.noise.iter().any(|(op, _)| op == "Bernoulli");
        eprintln!(
            "note: {} draw{} afresh each training step from the run's --seed{}, with no gradient; the held-out loss \
             draws {} too, the same numbers at every evaluation (PyTorch's randn_like draws in eval mode too); \
             @forward (`predict`, `eval`'s accuracy) takes {} mean instead{}, as dropout is off there",
            named.join(", "),
            if one { "s" } else { "" },
            if imported.noise_seeded { " (not the node's own seed attribute)" } else { "" },
            if one { "it" } else { "them" },
            if one { "its" } else { "each one's" },
            if bernoulli { " (a float Bernoulli's p, an integer one's likelier value)" } else { "" }
        );
    }
    if !imported.scalar_params.is_empty() {
        let named: Vec<String> = imported.scalar_params.iter().map(|n| format!("'{n}'")).collect();
        eprintln!(
            "note: one-value initializer{} {} train{} as {} (TorchScript's export records a parameter as it \
             records a buffer; --freeze NAME keeps a buffer constant)",
            if named.len() == 1 { "" } else { "s" },
            named.join(", "),
            if named.len() == 1 { "s" } else { "" },
            if named.len() == 1 { "a learned scale" } else { "learned scales" }
        );
    }
    if !imported.arithmetic_params.is_empty() {
        let named: Vec<String> = imported.arithmetic_params.iter().take(8).map(|n| format!("'{n}'")).collect();
        let more = imported.arithmetic_params.len().saturating_sub(8);
        let one = imported.arithmetic_params.len() == 1;
        eprintln!(
            "note: {} train{} as {} because the graph adds, subtracts, multiplies or joins {} with activations, or \
             gathers from {} as a table of one axis: {}{}; TorchScript's export records a buffer (register_buffer: \
             a normalization's mean, a loss's quantiles, a diffusion schedule) as it records a parameter: where {} \
             a buffer, --freeze NAME keeps it constant (the dynamo exporter records which are buffers)",
            if one { "an initializer" } else { "initializers" },
            if one { "s" } else { "" },
            if one { "a learned bias, scale or table" } else { "learned biases, scales or tables" },
            if one { "it" } else { "them" },
            if one { "it" } else { "them" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            if one { "it is" } else { "one is" },
        );
    }
    if !imported.exporter_named.is_empty() {
        let named: Vec<String> = imported.exporter_named.iter().take(5).map(|n| format!("'{n}'")).collect();
        let more = imported.exporter_named.len().saturating_sub(5);
        eprintln!(
            "note: {} initializer{} the exporter named (onnx::...) train{} as parameters: {}{}; where TorchScript \
             computed one from parameters and folded it (a weight norm, a table read at constant indices), it \
             trains as a tensor of its own, not through that computation; one it computed from buffers alone (`1 - \
             q` of a buffer q) trains where PyTorch's does not (--freeze NAME keeps it constant); export with \
             do_constant_folding=False to keep the computation",
            imported.exporter_named.len(),
            if imported.exporter_named.len() == 1 { "" } else { "s" },
            if imported.exporter_named.len() == 1 { "s" } else { "" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    if !imported.constant_folds.is_empty() {
        let named: Vec<String> =
            imported.constant_folds.iter().map(|(n, ops)| format!("'{n}' (by {})", ops.join(", "))).collect();
        eprintln!(
            "note: the exporter computed {} from parameters and folded {} into {}, which import{} as {}: no \
             gradient reaches those parameters through {} (a weight penalty in the loss trains no weight); export \
             with torch.onnx.export(..., dynamo=True, optimize=False) to keep the computation",
            named.join(", "),
            if named.len() == 1 { "it" } else { "them" },
            if named.len() == 1 { "a constant" } else { "constants" },
            if named.len() == 1 { "s" } else { "" },
            if named.len() == 1 { "one" } else { "such" },
            if named.len() == 1 { "it" } else { "them" },
        );
    }
    if !imported.computed_folds.is_empty() {
        let named: Vec<String> =
            imported.computed_folds.iter().map(|(n, ops)| format!("'{n}' (by {})", ops.join(", "))).collect();
        eprintln!(
            "note: the exporter computed {} from parameters and folded the result (the computation is not in the \
             file): {} as a tensor of its own, not through that computation as PyTorch's parameter would (a \
             normalized or reparametrized weight trains otherwise); export with \
             torch.onnx.export(..., dynamo=True, optimize=False) to keep it: {}",
            if named.len() == 1 { "an initializer" } else { "initializers" },
            if named.len() == 1 { "it trains" } else { "each trains" },
            named.join(", ")
        );
    }
    if !imported.folded_norms.is_empty() {
        let n = &imported.folded_norms;
        let named: Vec<String> = n.iter().take(5).map(|(m, _)| format!("'{m}'")).collect();
        let more = n.len().saturating_sub(5);
        let training = n.iter().filter(|(_, t)| *t).count();
        let (one, each, them) = if n.len() == 1 { ("", "it", "it") } else { ("s", "each", "them") };
        eprintln!(
            "note: the exporter's optimizer folded {} batch norm{one} into the layer before {each} (its \
             FuseBatchNorm rewrites): {}{}; {each} trains as part of that layer's weights{}; export with \
             torch.onnx.export(..., dynamo=True, optimize=False) to keep {them} as PyTorch trains {them}",
            n.len(),
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            if training > 0 {
                format!(
                    ", and {} exported in training mode, where PyTorch normalizes by the batch's statistics, which \
                     the folded graph does not do at all: this is not the model PyTorch trains",
                    match (training == n.len(), n.len()) {
                        (true, 1) => "it was".to_string(),
                        (true, _) => "all were".to_string(),
                        (false, _) if training == 1 => "1 was".to_string(),
                        _ => format!("{training} were"),
                    }
                )
            } else {
                String::new()
            },
        );
    }
    if !imported.frozen_by_option.is_empty() {
        let named: Vec<String> = imported.frozen_by_option.iter().map(|(n, v)| format!("'{n}' ({v} values)")).collect();
        eprintln!("note: --freeze keeps {} constant, not trained", named.join(", "));
    }
    if !imported.broadcast.is_empty() {
        let named: Vec<String> =
            imported.broadcast.iter().map(|(n, copies)| format!("'{n}' ({copies} equal copies)")).collect();
        eprintln!(
            "note: the exporter folded a parameter into its copies over the batch; each trains as one parameter, \
             broadcast (as copies they would train apart): {}",
            named.join(", ")
        );
    }
    if !imported.exported_constants.is_empty() {
        let c = &imported.exported_constants;
        let total: usize = c.iter().map(|(_, n)| n).sum();
        let named: Vec<String> = c.iter().take(5).map(|(n, v)| format!("'{n}' ({v} values)")).collect();
        let more = c.len().saturating_sub(5);
        eprintln!(
            "note: {} float initializer{} ({total} values) the exporter names a buffer or a computed constant \
             (register_buffer, a folded table), not trained: {}{}",
            c.len(),
            if c.len() == 1 { "" } else { "s" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    if !imported.masks.is_empty() {
        let named: Vec<String> = imported.masks.iter().take(5).map(|(n, v)| format!("'{n}' ({v} values)")).collect();
        let more = imported.masks.len().saturating_sub(5);
        eprintln!(
            "note: {} float initializer{} holding infinities or magnitudes of 1e30 and more (a mask, as a PyTorch \
             buffer holds one) {}, not trained: {}{}",
            imported.masks.len(),
            if imported.masks.len() == 1 { "" } else { "s" },
            if imported.masks.len() == 1 { "imports as a constant" } else { "import as constants" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    if !imported.untied.is_empty() {
        let named: Vec<String> = imported.untied.iter().take(4).map(|(p, i)| format!("'{p}' (from '{i}')")).collect();
        let more = imported.untied.len().saturating_sub(4);
        eprintln!(
            "note: {} parameter{} the exporter had merged with an equal one (its metadata names each) {} apart \
             again: {}{}",
            imported.untied.len(),
            if imported.untied.len() == 1 { "" } else { "s" },
            if imported.untied.len() == 1 { "imports" } else { "import" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    // A long loop unrolled: said, as its compile takes minutes (a Loop of
    // 4,096 steps of a small body, three).
    for (name, n) in long_loops(&imported.branches) {
        eprintln!(
            "note: Loop {name} is unrolled over {n} iterations: AICF compiles static graphs, so compile time and \
             memory grow with the sequence (a shorter sequence, or chunks of it, compiles faster)"
        );
    }
    if !imported.inference_dropouts.is_empty() {
        let d = &imported.inference_dropouts;
        eprintln!(
            "note: the export marks {} Dropout node{} for inference (training_mode false, as a deterministic \
             apply exports it): {}; AICF applies {} while training, as the model's framework does in training, \
             and never in @forward (predict, eval)",
            d.len(),
            if d.len() == 1 { "" } else { "s" },
            first_few(d.iter().map(|n| format!("'{n}'")), 4),
            if d.len() == 1 { "it" } else { "them" }
        );
    }
    if !imported.seeded_random.is_empty() {
        let r = &imported.seeded_random;
        eprintln!(
            "note: the export fixes the seed of {} random node{} ({}); AICF draws {} from the run's --seed (the \
             same seed, the same draws), not from the seed in the export",
            r.len(),
            if r.len() == 1 { "" } else { "s" },
            first_few(r.iter().map(|n| format!("'{n}'")), 4),
            if r.len() == 1 { "its randomness" } else { "their randomness" }
        );
    }
    if !imported.other_floats.is_empty() {
        eprintln!(
            "note: {} declares {} tensors; AICF imports and computes them in f32 (--precision bf16 or fp16 trains in \
             mixed precision; predict writes f32)",
            model.display(),
            imported.other_floats.join(" and ")
        );
    }
    if !imported.transposed_in_place.is_empty() {
        let t = &imported.transposed_in_place;
        eprintln!(
            "note: {} weight{} stored [in, out] for a Gemm or MatMul {} held [out, in] (transposed, as AICF's linear \
             layer reads it) under {} own name{}: {}; a checkpoint holds {} so: transpose {} back to load it into \
             the exporting framework's layer",
            t.len(),
            if t.len() == 1 { "" } else { "s" },
            if t.len() == 1 { "is" } else { "are" },
            if t.len() == 1 { "its" } else { "their" },
            if t.len() == 1 { "" } else { "s" },
            first_few(t.iter().map(|n| format!("'{n}'")), 4),
            if t.len() == 1 { "it" } else { "them" },
            if t.len() == 1 { "it" } else { "them" },
        );
    }
    if !imported.untied_tf2onnx.is_empty() {
        let u = &imported.untied_tf2onnx;
        eprintln!(
            "note: tf2onnx keeps one initializer of equal values, so a fresh Keras model's equal weights (its \
             norms' ones and zeros, its recurrent layers' zero biases) read one tensor; each layer reading it gets \
             its own again ({} cop{}; a layer the model calls twice, shared, stays one): {}",
            u.len(),
            if u.len() == 1 { "y" } else { "ies" },
            first_few(u.iter().map(|(c, i)| format!("'{c}' (from '{i}')")), 4)
        );
    }
    if !imported.restored.is_empty() {
        eprintln!(
            "note: {} bias{} the exporter dropped (zero when exported; its metadata names {}) {} as zeros, as the \
             model trains {}: {}",
            imported.restored.len(),
            if imported.restored.len() == 1 { "" } else { "es" },
            if imported.restored.len() == 1 { "it" } else { "them" },
            if imported.restored.len() == 1 { "imports" } else { "import" },
            if imported.restored.len() == 1 { "it" } else { "them" },
            first_few(imported.restored.iter().map(|b| format!("'{b}'")), 4)
        );
    }
    for (export, table) in &imported.renamed_tables {
        eprintln!(
            "note: embedding table '{export}' imports as '{table}': the model ties the two (one tensor), and the \
             export named it by the output layer; PyTorch's named_parameters() and Hugging Face's checkpoints name \
             it by the embedding (a state_dict lists both names: load the checkpoint's tensor under each)"
        );
    }
    if let Some(folds) = &imported.tf2onnx_folds {
        let some = |names: &[String]| first_few(names.iter().map(|n| format!("'{n}'")), 3);
        let mut what = Vec::new();
        if !folds.biasless.is_empty() {
            what.push(format!(
                "{} layer{} read{} no bias ({}): tf2onnx drops a bias of zeros, a fresh Keras model's, so such a \
                 layer trains without one (right only where it has none, use_bias=False)",
                folds.biasless.len(),
                if folds.biasless.len() == 1 { "" } else { "s" },
                if folds.biasless.len() == 1 { "s" } else { "" },
                some(&folds.biasless),
            ));
        }
        if !folds.betaless.is_empty() {
            what.push(format!(
                "{} norm{} of a fresh scale read{} no shift ({}): tf2onnx drops a beta of zeros too, so such a norm \
                 trains without one",
                folds.betaless.len(),
                if folds.betaless.len() == 1 { "" } else { "s" },
                if folds.betaless.len() == 1 { "s" } else { "" },
                some(&folds.betaless),
            ));
        }
        if !folds.norms_folded.is_empty() {
            what.push(format!(
                "{} batch norm{} folded into the layer before (an inference-mode export: {}), which trains as one \
                 layer, without the norm's batch statistics",
                folds.norms_folded.len(),
                if folds.norms_folded.len() == 1 { " is" } else { "s are" },
                some(&folds.norms_folded)
            ));
        }
        eprintln!(
            "note: tf2onnx wrote this model, and its optimizer folded away parts of the Keras model: {}; to train \
             the Keras model's layers, export it once its biases are not zero (after a training step, or with \
             another bias_initializer){}",
            what.join("; "),
            if folds.norms_folded.is_empty() { "" } else { ", with its batch norms in training mode" }
        );
    }
    if let Some(node) = &imported.softmax_output_other_axis {
        eprintln!(
            "note: the model's output is a Softmax (node '{node}') over another axis than the last, the classes a \
             cross-entropy reads: @loss takes the probabilities as logits, and learns little; export the model \
             without its final softmax (its logits) to train it"
        );
    }
    if let Some(node) = &imported.softmax_output {
        eprintln!(
            "note: the model's output is a Softmax (node '{node}'): @loss is the cross-entropy of its input, the \
             logits (-log p, as Keras's sparse_categorical_crossentropy of probabilities); @forward returns the \
             probabilities"
        );
    }
    for (table, row) in &imported.padding_rows {
        eprintln!(
            "note: embedding '{table}' was declared with padding_idx {row} in PyTorch (the export's metadata says \
             so; ONNX's Gather carries no padding index): its row {row} takes no gradient here either, as in \
             PyTorch"
        );
    }
    if !imported.shared_norms.is_empty() {
        let named: Vec<String> = imported.shared_norms.iter().map(|(n, k)| format!("'{n}' ({k} norms)")).collect();
        eprintln!(
            "note: one parameter serves several normalizations, which train tied: {}{}",
            named.join(", "),
            if imported.dynamo {
                " (PyTorch's dynamo exporter reads one initializer wherever values are equal, as in a freshly \
                 initialized model; export with dynamo=False, or after training, to keep them apart)"
            } else {
                ", as the model shares it"
            }
        );
    }
    if !imported.shared_weights.is_empty() {
        let named: Vec<String> =
            imported.shared_weights.iter().take(5).map(|(n, k)| format!("'{n}' ({k} layers)")).collect();
        let more = imported.shared_weights.len().saturating_sub(5);
        eprintln!(
            "note: {} weight{} or bias{} {} several layers, which train tied: {}{}{}",
            imported.shared_weights.len(),
            if imported.shared_weights.len() == 1 { "" } else { "s" },
            if imported.shared_weights.len() == 1 { "" } else { "es" },
            if imported.shared_weights.len() == 1 { "serves" } else { "serve" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            // (Another exporter's shared initializer is the model's own
            // sharing: an encoder applied twice.)
            if imported.dynamo {
                " (where the model keeps them apart, PyTorch's dynamo exporter merged equal initializers, as in a \
                 fresh stack of copied layers; export with dynamo=False, or after training)"
            } else {
                ", as the model shares them"
            }
        );
    }
    if imported.dynamo_records_lost {
        // (Those under no module's name, trained for their use alone: a
        // frozen norm's folded scale may be a buffer's.)
        let guessed: Vec<String> =
            imported.weights.iter().filter(|(n, _, _)| !n.contains('.')).map(|(n, _, _)| format!("'{n}'")).collect();
        eprintln!(
            "note: this dynamo export has lost its record of which values are parameters (the exporter builds at \
             opset 18, and converting down drops its metadata): parameters are told from buffers and constants by \
             their names and uses{}; export with opset_version=18 or later to have them as declared, or name them \
             with --trainable and --freeze",
            if guessed.is_empty() {
                String::new()
            } else {
                format!(" ({} trained for their use alone)", guessed.join(", "))
            }
        );
    }
    for (copy, weight) in &imported.tied {
        eprintln!(
            "note: '{copy}' is the exact transpose of '{weight}' (an output layer tied to an embedding, which the \
             export writes again; a layer reading `W.t()`, which it folds): the layer reads '{weight}', one \
             parameter, as the model does"
        );
    }
    let values: usize = imported.weights.iter().map(|(_, s, _)| s.iter().product::<usize>()).sum();
    let inputs: Vec<String> = imported.inputs.iter().map(|(n, s)| format!("{n}: {}", s.mlir_type())).collect();
    let summary = format!(
        "imported {} (opset {}) -> {} in {:.2} s: inputs {}, {} parameters ({values} values){}",
        model.display(),
        imported.opset,
        output.display(),
        started.elapsed().as_secs_f64(),
        inputs.join(", "),
        imported.weights.len(),
        if imported.weights.is_empty() {
            String::new()
        } else {
            format!(" in {}", onnx::Imported::weights_path(output).display())
        }
    );
    match say {
        _ if collective::launcher_rank() != 0 => {}
        Say::Stdout => println!("{summary}"),
        Say::Stderr => eprintln!("{summary}"),
    }
    Ok(imported.graph_loss)
}

/// The hl model the command works on: the model itself, or an ONNX model
/// imported into `out` (its .mlir and weights).
fn hl_model(c: &ModelArgs, out: &Path) -> Result<PathBuf> {
    hl_model_saying(c, out, Say::Stdout)
}

/// [`hl_model`], the import's summary to `say`.
fn hl_model_saying(c: &ModelArgs, out: &Path, say: Say) -> Result<PathBuf> {
    hl_model_ordered(c, out, say).map(|(model, _)| model)
}

/// One `--data` file per input of an ONNX model that computes its own
/// loss, given in the graph's input order (`forward(clean, noisy)`'s),
/// put in the order `@loss` takes them (the inputs `@forward` reads, then
/// the targets), and said; other data as given.
fn data_in_loss_order(data: &[PathBuf], graph_loss: Option<&onnx::GraphLoss>) -> Vec<PathBuf> {
    let Some(gl) = graph_loss else { return data.to_vec() };
    let loss_order: Vec<&String> = gl.data.iter().chain(&gl.targets).collect();
    if data.len() != gl.graph_order.len()
        || data.len() < 2
        || loss_order.iter().zip(&gl.graph_order).all(|(a, b)| *a == b)
    {
        return data.to_vec();
    }
    let reordered: Vec<PathBuf> = loss_order
        .iter()
        .filter_map(|name| gl.graph_order.iter().position(|g| g == *name).map(|k| data[k].clone()))
        .collect();
    if reordered.len() != data.len() {
        return data.to_vec();
    }
    if collective::launcher_rank() == 0 {
        let fed: Vec<String> =
            loss_order.iter().zip(&reordered).map(|(n, f)| format!("'{n}' <- {}", f.display())).collect();
        eprintln!(
            "note: the --data files are taken in the graph's input order ({}): {}",
            gl.graph_order.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", "),
            fed.join(", ")
        );
    }
    reordered
}

/// [`hl_model_saying`], with an ONNX model's own loss where it has one.
fn hl_model_ordered(c: &ModelArgs, out: &Path, say: Say) -> Result<(PathBuf, Option<onnx::GraphLoss>)> {
    if !is_onnx(&c.model) {
        return match c.batch {
            Some(size) => rebatched(&c.model, size, out, say),
            None => Ok(c.model.clone()),
        }
        .map(|m| (m, None));
    }
    let stem = c.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let output = out.join(format!("{stem}.mlir"));
    // The import writes `<stem>.mlir` and `<stem>.weights.safetensors`
    // into `out`: it replaces an earlier import of them, nothing else.
    let weights = format!("{stem}.weights.safetensors");
    if output.is_file() {
        use std::io::BufRead;
        let first = std::fs::File::open(&output)
            .ok()
            .and_then(|f| std::io::BufReader::new(f).lines().next())
            .and_then(|l| l.ok());
        if !first.is_some_and(|l| l.contains(&format!("hl.weights = {{file = \"{weights}\""))) {
            return Err(format!(
                "{}: importing {} writes its model here, and this file is not an earlier import of it; move it, or \
                 give another output directory",
                output.display(),
                c.model.display()
            ));
        }
    }
    let weights = out.join(weights);
    if aicf_runtime::checkpoint::holds_checkpoint(&weights) {
        return Err(format!(
            "{}: importing {} writes its weights here, and this file is a checkpoint; move it, or give another output \
             directory",
            weights.display(),
            c.model.display()
        ));
    }
    aicf_compiler::train::run::make_dir(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let options = ImportOptions {
        batch: c.batch,
        loss: c.loss.clone().unwrap_or(Loss::Auto),
        freeze: c.freeze.clone(),
        trainable: c.trainable.clone(),
        legacy_names: c.legacy_names,
        ignore_index: c.ignore_index,
    };
    let graph_loss = import_saying(&c.model, &output, &options, say)?;
    Ok((output, graph_loss))
}

/// `--batch` on an hl model: the model retargeted to `size` rows
/// (`hl-set-batch`, as `aicf-opt --hl-set-batch` or `aicf compile --batch
/// --emit hl` write it) in `out`, `<stem>.batch<size>.mlir`, on the same
/// parameters. Its checkpoints are of that model: a resume or an eval of
/// them gives the same `--batch` (or the written file).
fn rebatched(model: &Path, size: usize, out: &Path, say: Say) -> Result<PathBuf> {
    let name = model.display().to_string();
    let source = aicf_compiler::train::read_model(model).map_err(|e| e.to_string())?;
    let text = aicf_compiler::pipeline::rebatched_source(&source, &name, size).map_err(|e| {
        // An ONNX import's reshapes fix the batch it was imported at: the
        // .onnx imports at any (an import's module names its weights file).
        let hint = if source.contains("hl.weights = {file") {
            format!(
                " (an ONNX import's reshapes fix its batch: give the .onnx itself with --batch {size}, or import it \
                 again with --batch {size})"
            )
        } else {
            String::new()
        };
        format!("--batch {size}: {e}{hint}")
    })?;
    if let Some((at, written, value)) = aicf_compiler::pipeline::loss_batch_constant(&source, &name)
        && written != size
        && collective::launcher_rank() == 0
    {
        eprintln!("warning: {}", aicf_compiler::pipeline::batch_constant_warning(&at, written, value, &[size]));
    }
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let output = out.join(format!("{stem}.batch{size}.mlir"));
    aicf_compiler::train::run::make_dir(out).map_err(|e| format!("{}: {e}", out.display()))?;
    aicf_compiler::codegen::write_atomically(&output, text.as_bytes())
        .map_err(|e| format!("{}: {e}", output.display()))?;
    aicf_compiler::weights::carry(&text, model, &output).map_err(|e| e.to_string())?;
    let line = format!("--batch {size}: {name} at {size} rows per batch -> {}", output.display());
    // (Rank 0 says it for a data-parallel run's ranks.)
    match say {
        _ if collective::launcher_rank() != 0 => {}
        Say::Stdout => println!("{line}"),
        Say::Stderr => eprintln!("{line}"),
    }
    Ok(output)
}

/// An ONNX language model to sample from, imported at one row, where its
/// import at the checkpoint's batch is the model the checkpoint holds: the
/// import folds the batch into its reshapes (batch x context rows), so the
/// checkpoint's model could not run at one row, and an import at one row
/// differs from it by that alone. `None` for an hl model, or a checkpoint
/// of another (a grown) model, which sampling takes from the checkpoint.
fn one_row_import(c: &ModelArgs, checkpoint: &Path, out: &Path) -> Result<Option<PathBuf>> {
    use aicf_compiler::train::data::Signature;
    if !is_onnx(&c.model) {
        return Ok(None);
    }
    let meta =
        aicf_runtime::checkpoint::read_metadata(checkpoint).map_err(|e| format!("{}: {e}", checkpoint.display()))?;
    let Some(ir) = meta.get("aicf.ir") else { return Ok(None) };
    let name = checkpoint.display().to_string();
    let Ok(batch) = Signature::of_source(ir, &name).map(|s| s.batch()) else { return Ok(None) };
    if batch == 1 {
        return Ok(None);
    }
    let check = out.join("import-at-checkpoint-batch");
    let at_batch = hl_model_saying(&ModelArgs { batch: Some(batch), ..c.clone() }, &check, Say::Stderr)?;
    let canonical = |source: &str| aicf_compiler::pipeline::identity_source(source, &name).ok();
    let imported = std::fs::read_to_string(&at_batch).map_err(|e| format!("{}: {e}", at_batch.display()))?;
    let same = canonical(&imported);
    if same.is_none() || same != canonical(ir) {
        return Ok(None);
    }
    hl_model_saying(&ModelArgs { batch: Some(1), ..c.clone() }, out, Say::Stderr).map(Some)
}

/// `--loss` is an ONNX model's: an hl model's @loss is its own (it was
/// silently ignored).
fn no_loss(c: &ModelArgs, command: &str) -> Result<()> {
    if !c.freeze.is_empty() && !is_onnx(&c.model) {
        return Err(format!(
            "--freeze names an ONNX model's initializers; {} is an hl model, whose hl.params all train",
            c.model.display()
        ));
    }
    if !c.trainable.is_empty() && !is_onnx(&c.model) {
        return Err(format!(
            "--trainable names an ONNX model's initializers; {} is an hl model, whose hl.params all train (a \
             constant is an hl.constant)",
            c.model.display()
        ));
    }
    if let Some(i) = c.ignore_index.filter(|_| !is_onnx(&c.model)) {
        return Err(format!(
            "--ignore-index {i} sets the cross-entropy of an ONNX model being imported; {}'s @loss is its own \
             (hl.cross_entropy's ignore_index)",
            c.model.display()
        ));
    }
    match &c.loss {
        Some(l) if !is_onnx(&c.model) => Err(format!(
            "--loss {} chooses the loss of an ONNX model being imported; {}'s @loss is its own (`aicf {command}` \
             {} that)",
            l.name(),
            c.model.display(),
            match command {
                "predict" => "predicts with the @forward beside",
                "export" => "exports the @forward beside",
                _ => "trains and scores",
            }
        )),
        _ => Ok(()),
    }
}

/// Sampling runs one row at a time: `--batch` has nothing to set there for
/// an hl model (an ONNX model's import takes it).
fn no_batch(c: &ModelArgs, command: &str) -> Result<()> {
    no_loss(c, command)?;
    match c.batch {
        Some(_) if !is_onnx(&c.model) => Err(format!(
            "--batch sets the rows per batch of a model that trains or is scored; `aicf {command}` runs an hl model \
             one row at a time"
        )),
        _ => Ok(()),
    }
}

/// The model `aicf compile -` reads from standard input: MLIR text, or
/// bytecode (`aicf-opt --emit-bytecode`) as a file's is read.
fn model_from_stdin() -> Result<String> {
    use std::io::{IsTerminal, Read};
    if std::io::stdin().is_terminal() {
        return Err("-: reads the model from standard input, which is a terminal; pipe a module in (`aicf-opt m.mlir \
                    | aicf compile - --emit ll`) or give its file"
            .into());
    }
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).map_err(|e| format!("<stdin>: {e}"))?;
    if bytes.starts_with(b"ML\xefR") {
        return aicf_compiler::context::bytecode_text(&bytes, "<stdin>").map_err(|e| e.to_string());
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        format!("<stdin>: not a model: the input is not UTF-8 text, as an hl module is, from line {line} (byte {at})")
    })
}

/// An ONNX model resumed, scored or run from a checkpoint without
/// `--batch` takes the batch the checkpoint's run imported it at, where the
/// export leaves its batch open or fixes another (a static batch of 1 read
/// as `--batch`'s): "give --batch" refused it.
/// The batch an ONNX model whose batch dimension is symbolic is scored or
/// run at without a checkpoint (`eval`, `predict`), where none is given:
/// the batch changes their speed alone (a last batch is filled), and both
/// refused the model without one.
const ONNX_RUN_BATCH: usize = 64;

/// `--batch` for `eval` and `predict` of an ONNX model with no checkpoint
/// to take it from: [`ONNX_RUN_BATCH`] where its batch dimension is
/// symbolic and none is given, said on stderr.
fn onnx_batch_to_run(compile: &mut ModelArgs, given: bool) {
    if given || !is_onnx(&compile.model) {
        return;
    }
    if onnx::leading_dim(&compile.model) == Some(None) {
        compile.batch = Some(ONNX_RUN_BATCH);
        eprintln!(
            "note: {}: its batch dimension is symbolic: run at {ONNX_RUN_BATCH} rows a batch (the batch changes the \
             speed alone here; --batch chooses it)",
            compile.model.display()
        );
    }
}

/// The batch and precision `eval` and `predict` run at: a checkpoint's
/// (where not given), or, without one, an ONNX model's run batch.
fn run_settings(
    compile: &mut ModelArgs,
    checkpoint: Option<&Path>,
    (batch, precision, loss): (bool, bool, bool),
) -> Result<()> {
    match checkpoint {
        Some(c) => {
            onnx_batch_of_checkpoint(compile, c, batch);
            onnx_names_of_checkpoint(compile, c);
            onnx_loss_of_checkpoint(compile, c, loss);
            onnx_ignore_index_of_checkpoint(compile, c);
            checkpoint_precision(compile, c, precision)
        }
        None => {
            onnx_batch_to_run(compile, batch);
            Ok(())
        }
    }
}

/// An ONNX model resumed, scored or predicted from a checkpoint without
/// --ignore-index is imported with its run's (its IR's cross-entropy's):
/// without it, another model.
fn onnx_ignore_index_of_checkpoint(compile: &mut ModelArgs, checkpoint: &Path) {
    if !is_onnx(&compile.model) {
        return;
    }
    let Ok(meta) = aicf_runtime::checkpoint::read_metadata(checkpoint) else { return };
    if let Some(ir) = meta.get(aicf_compiler::train::run::IR_KEY)
        && let Ok(sig) = aicf_compiler::train::data::Signature::of_source(ir, "the checkpoint's model")
        && (sig.ignore_index.is_some() || compile.ignore_index.is_some())
    {
        // (A graph's own loss keeps what it was exported with: the model
        // is read for it only here.)
        let graph_loss = match &compile.loss {
            Some(Loss::Graph(_)) => true,
            Some(Loss::Auto) | None => onnx::computes_its_loss(&compile.model).unwrap_or(true),
            Some(_) => false,
        };
        if graph_loss {
            return;
        }
        // Another given is the checkpoint's model's all the same (its IR:
        // with another, the checkpoint was "of another model"): said.
        if let Some(given) = compile.ignore_index
            && sig.ignore_index != Some(given)
            && collective::launcher_rank() == 0
        {
            eprintln!(
                "note: --ignore-index {given}: {}'s model was trained with {}; it goes on with that (a loss over \
                 other labels is another model's: train one)",
                checkpoint.display(),
                sig.ignore_index.map_or("none".to_string(), |i| format!("--ignore-index {i}"))
            );
        }
        compile.ignore_index = sig.ignore_index;
    }
}

/// An ONNX model scored or predicted from a checkpoint without --loss is
/// imported with the loss its run trained (mse: a regression's checkpoint
/// was refused as another model's until --loss mse was given again).
fn onnx_loss_of_checkpoint(compile: &mut ModelArgs, checkpoint: &Path, given: bool) {
    if given || compile.loss.is_some() || !is_onnx(&compile.model) {
        return;
    }
    let Ok(meta) = aicf_runtime::checkpoint::read_metadata(checkpoint) else { return };
    if let Some(ir) = meta.get(aicf_compiler::train::run::IR_KEY)
        && aicf_compiler::train::eval::loss_kind(ir) == Some("mse")
    {
        compile.loss = Some(Loss::Mse);
    }
}

/// An ONNX model's parameter names as the checkpoint's run had them: a
/// checkpoint trained before 2026-12-07 holds `p0.weight` for
/// `nn.Sequential`'s `0.weight` (a leading digit got a `p`; it is kept
/// now), so the model is imported with those names (it was "another
/// model"). Its IR has a parameter named `p<digit>...` and none that starts
/// with a digit.
fn onnx_names_of_checkpoint(compile: &mut ModelArgs, checkpoint: &Path) {
    if !is_onnx(&compile.model) {
        return;
    }
    let Ok(meta) = aicf_runtime::checkpoint::read_metadata(checkpoint) else { return };
    let Some(ir) = meta.get(aicf_compiler::train::run::IR_KEY) else { return };
    let names: Vec<&str> = ir
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("hl.param @"))
        .map(|rest| rest.trim_start_matches('"'))
        .collect();
    let digit = |n: &str| n.starts_with(|c: char| c.is_ascii_digit());
    if !names.iter().any(|n| digit(n)) && names.iter().any(|n| n.strip_prefix('p').is_some_and(digit)) {
        compile.legacy_names = true;
    }
}

fn onnx_batch_of_checkpoint(compile: &mut ModelArgs, checkpoint: &Path, given: bool) {
    if given || !is_onnx(&compile.model) {
        return;
    }
    let Ok(meta) = aicf_runtime::checkpoint::read_metadata(checkpoint) else { return };
    if let Some(ir) = meta.get(aicf_compiler::train::run::IR_KEY)
        && let Ok(sig) = aicf_compiler::train::data::Signature::of_source(ir, "the checkpoint's model")
        && let Some(leading) = onnx::leading_dim(&compile.model)
        && leading != Some(sig.batch())
    {
        compile.batch = Some(sig.batch());
    }
}

/// A directory beside an artifact's `-o` that the compile writes into,
/// then takes the artifact's place (removed if the compile fails).
struct Staged {
    dir: PathBuf,
}

impl Staged {
    /// None where `out` is a link or a mount point, or its parent takes no
    /// new directory: the artifact is then written into `out` as it is.
    fn beside(out: &Path) -> Option<Staged> {
        let meta = std::fs::symlink_metadata(out).ok()?;
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        use std::os::unix::fs::MetadataExt;
        if !meta.is_dir() || std::fs::metadata(parent).is_ok_and(|p| p.dev() != meta.dev()) {
            return None;
        }
        let name = out.file_name()?.to_string_lossy().into_owned();
        let short = if name.len() > 200 { "artifact".to_string() } else { name };
        let prefix = format!(".{short}.partial-");
        // (One a killed compile left is removed: its process is gone.)
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let pid = file.strip_prefix(&prefix).map(|p| p.trim_end_matches(".old"));
            if let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok())
                && aicf_runtime::checkpoint::process_gone(pid)
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = out.with_file_name(format!("{prefix}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).ok()?;
        Some(Staged { dir })
    }

    /// Puts the compiled artifact where `out` is: what else `out` holds
    /// (a user's notes, a kernel cache, an earlier artifact's files this
    /// compile did not write) is moved into it first, with `out`'s
    /// permissions; then an empty `out` is removed, or the earlier
    /// artifact's own files moved aside and removed after.
    fn replace(&self, out: &Path) -> std::result::Result<(), String> {
        let mut kept: Vec<(PathBuf, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(out).into_iter().flatten().flatten() {
            let to = self.dir.join(entry.file_name());
            if std::fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            if let Err(e) = std::fs::rename(entry.path(), &to) {
                // (Put back: the staging directory is removed with what it
                // holds.)
                for (from, to) in kept.iter().rev() {
                    let _ = std::fs::rename(to, from);
                }
                return Err(format!("{}: could not keep it in the new artifact: {e}", entry.path().display()));
            }
            kept.push((entry.path(), to));
        }
        if let Ok(meta) = std::fs::metadata(out) {
            let _ = std::fs::set_permissions(&self.dir, meta.permissions());
        }
        let put_back = || {
            for (from, to) in kept.iter().rev() {
                let _ = std::fs::rename(to, from);
            }
        };
        let aside =
            self.dir.with_file_name(format!("{}.old", self.dir.file_name().unwrap_or_default().to_string_lossy()));
        let moved = match std::fs::remove_dir(out) {
            Ok(()) => false,
            Err(_) => {
                if let Err(e) = std::fs::rename(out, &aside) {
                    put_back();
                    return Err(format!("{}: could not move the earlier artifact aside: {e}", out.display()));
                }
                true
            }
        };
        if let Err(e) = std::fs::rename(&self.dir, out) {
            if moved {
                let _ = std::fs::rename(&aside, out);
            } else {
                let _ = std::fs::create_dir(out);
            }
            put_back();
            return Err(format!("{}: could not put the compiled artifact in place: {e}", out.display()));
        }
        if moved {
            let _ = std::fs::remove_dir_all(&aside);
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run_compile(
    c: &ModelArgs,
    output: Option<PathBuf>,
    emit: Option<Stage>,
    target: Target,
    timing: bool,
) -> Result<()> {
    no_loss(c, "compile")?;
    let (model, batch) = if is_onnx(&c.model) {
        let dir = output.as_deref().and_then(Path::parent).unwrap_or(Path::new("target")).to_path_buf();
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        (hl_model(c, &dir)?, None)
    } else {
        (c.model.clone(), c.batch)
    };
    let c = &ModelArgs { model, ..c.clone() };
    // `-` reads the module from standard input, as `aicf-opt -` and
    // `mlir-opt -` do (`aicf-opt ... | aicf compile - --emit ll`); it was
    // "-: No such file or directory".
    let stdin = c.model.as_os_str() == "-";
    let source = if stdin {
        model_from_stdin()?
    } else {
        aicf_compiler::train::read_model(&c.model).map_err(|e| e.to_string())?
    };
    let name = if stdin { "<stdin>".to_string() } else { c.model.display().to_string() };
    if source.trim().is_empty() {
        return Err(format!("{name}: the file is empty; a model is an hl module with func.func @loss (and @forward)"));
    }
    check_model_flags(c, matches!(target, Target::Cuda))?;
    // The CPU's blocked kernel takes every attention's fused gradient; a
    // GPU's, 16-bit heads at tensor-core sizes.
    let options = TrainOptions {
        fused_attention_any_heads: !matches!(target, Target::Cuda),
        conv_as_gemm: c.conv.as_gemm().unwrap_or(!matches!(target, Target::Cuda)),
        ..train_options(c)
    };
    if let Some(out) = &output
        && same_file(&c.model, out)
    {
        return Err(format!("{}: -o names the model being compiled; give another output", out.display()));
    }
    if timing && emit.is_some() {
        return Err("--timing times the compile to an artifact; with --emit nothing is compiled to time".into());
    }
    if let (Some(out), Some(_)) = (&output, &emit) {
        aicf_compiler::train::refuse_overwriting_weights(out, "the printed stage")
            .map_err(|e| format!("{}: {e}", out.display()))?;
        // Only IR is replaced by IR: data, a trace or anything else given
        // as -o by mistake would be lost.
        // (An empty file loses nothing; a printed stage names a function in
        // its first lines.)
        if out.is_file() && out.metadata().is_ok_and(|m| m.len() > 0) {
            use std::io::Read;
            let mut head = Vec::new();
            let read = std::fs::File::open(out).and_then(|f| f.take(1 << 16).read_to_end(&mut head));
            let ir = read.is_ok() && String::from_utf8_lossy(&head).contains("func.func");
            if !ir {
                return Err(format!(
                    "{}: the printed stage would overwrite this file, which holds no IR; give a new file (or remove \
                     this one)",
                    out.display()
                ));
            }
        }
    }
    let Some(stage) = emit else {
        let out = output.unwrap_or_else(|| {
            // (Beside the model, it wrote into the source tree: an example
            // compiled by `aicf compile examples/...` landed in examples/.)
            let stem = c
                .model
                .file_stem()
                .filter(|_| !stdin)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "model".into());
            PathBuf::from(format!("{stem}.aicf"))
        });
        // An artifact is written into its own directory: one holding other
        // files (not an earlier artifact) would have them overwritten.
        if out.is_dir()
            && !out.join("manifest.json").exists()
            && std::fs::read_dir(&out).map_err(|e| format!("{}: {e}", out.display()))?.next().is_some()
        {
            return Err(format!(
                "{}: a directory holding other files, not an artifact; give a new or empty one",
                out.display()
            ));
        }
        // (Made here, so that a place that cannot take it is said as -o's:
        // the bare OS error came after the compile.)
        let made = std::fs::symlink_metadata(&out).is_err();
        if let Err(e) = std::fs::create_dir_all(&out)
            && matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem)
        {
            return Err(format!("{}: {e} (-o: give a place this user can write the artifact)", out.display()));
        }
        let started = Instant::now();
        // Compiled beside -o and moved into place whole: a compile that
        // fails (a full disk, a kernel that does not build) leaves an
        // earlier artifact there as it was. Written into it, its kernels
        // were replaced before its manifest, a mix that loaded no more.
        let staged = Staged::beside(&out);
        let into = staged.as_ref().map_or(out.as_path(), |s| s.dir.as_path());
        // (Of `out`, where there is no home for it: the next compile into
        // `out` finds it there, and the swap keeps it.)
        let target = match target {
            Target::Cpu => pipeline::Target::Cpu(KernelCache::new(KernelCache::default_dir(&out))),
            Target::Cuda => pipeline::Target::Cuda(GpuOptions::default()),
        };
        let earlier = out.join("manifest.json").exists();
        let compiled = pipeline::compile_source(&source, &name, &options, batch, &target, into)
            .map_err(|e| match &staged {
                // (Named as -o's files: the staging directory is gone.)
                Some(s) => {
                    let e = e.to_string().replace(&s.dir.display().to_string(), &out.display().to_string());
                    if earlier {
                        format!("{e}\n(the earlier artifact in {} is kept as it was)", out.display())
                    } else {
                        e
                    }
                }
                None => e.to_string(),
            })
            .and_then(|compiled| match &staged {
                Some(s) => s.replace(&out).map(|()| compiled),
                None => Ok(compiled),
            })
            .map_err(|e| {
                // (A directory this command made for an artifact it did not
                // write is not left behind.)
                if made {
                    let _ = std::fs::remove_dir_all(&out);
                }
                e
            })?;
        let manifest = &compiled.manifest;
        let seconds = started.elapsed().as_secs_f64();
        if let pipeline::Target::Cuda(_) = target {
            if ptxas().is_some() {
                for chip in ["sm_80", "sm_90"] {
                    for file in ptx_files(&out, chip).map_err(|e| e.to_string())? {
                        validate_ptx(&file, chip).map_err(|e| e.to_string())?;
                    }
                }
                println!("ptxas accepts the PTX for sm_80 and sm_90");
            } else {
                println!("ptxas not found: the PTX was not assembled here (run `make setup`)");
            }
        }
        let kernels: usize = manifest.functions.iter().map(|f| f.calls.len()).sum();
        let variant = c.batch.map(|b| format!(" for batch {b}")).unwrap_or_default();
        println!(
            "compiled {name}{variant} -> {} ({} functions, {kernels} kernel calls, {} distinct kernels, {} compiled, \
             {}) in {:.2} s",
            out.display(),
            manifest.functions.len(),
            compiled.kernels,
            compiled.compiled_kernels,
            manifest.target,
            seconds
        );
        let note = direct_convolutions_note(&compiled.timings);
        if !note.is_empty() {
            println!("{note}");
        }
        if timing {
            print!("{}", compiled.timings.report());
        }
        return Ok(());
    };
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(&source, &name).map_err(|e| e.to_string())?;
    // A model with a gradient of its own, refused as training refuses it
    // (the fused stage trained on it).
    if !matches!(stage, Stage::Hl) {
        pipeline::refuse_differentiated(&module, &name).map_err(|e| e.to_string())?;
    }
    if let Some(b) = batch {
        run_pipeline(&ctx, &mut module, &pipeline::set_batch(b)).map_err(|e| e.to_string())?;
    }
    match stage {
        Stage::Hl => {}
        Stage::Fused => {
            // As the train step's compile: calls inlined first (the stage
            // stopped at autodiff's "inline it first"), and `@loss` without
            // its dropout beside it.
            pipeline::refuse_oversized(&module, &name).map_err(|e| e.to_string())?;
            pipeline::inline_calls(&ctx, &mut module, &source).map_err(|e| e.to_string())?;
            pipeline::add_loss_eval(&mut module);
            run_pipeline(&ctx, &mut module, &options.fusion_pipeline()).map_err(|e| e.to_string())?
        }
        Stage::Ll => {
            pipeline::train_step(&ctx, &mut module, (&source, &name, batch), &options, &mut Default::default())
                .map_err(|e| e.to_string())?
        }
    }
    if let Some(path) = output {
        let text = format!("{}\n", module.as_operation());
        // As an artifact's directory is: the directories on the way are
        // made (a missing one was a bare "No such file or directory").
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            aicf_compiler::train::run::make_dir(parent).map_err(|e| format!("-o {}: {e}", path.display()))?;
        }
        return aicf_compiler::codegen::write_atomically(&path, text.as_bytes())
            .map_err(|e| format!("-o {}: {e}", path.display()));
    }
    // A closed pipe (`| head`) ends the output quietly.
    match writeln!(std::io::stdout().lock(), "{}", module.as_operation()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing the IR: {e}")),
        _ => Ok(()),
    }
}

/// `--auto-resume` into `dir`: a resume (`--resume`) where it holds
/// `last.safetensors` (or something in its place, which the run names),
/// or where another run is writing its first (the run says so); from the
/// latest checkpoint it holds where the last is gone (a fresh run would
/// write over it); else a fresh run. Each said.
fn auto_resumed(dir: &Path) -> (bool, Option<PathBuf>) {
    // (Under mpirun each rank decides alike: none can have saved before all
    // have, since a checkpoint follows a step that all take. Rank 0 says.)
    let says = collective::launcher_rank() == 0;
    let last = dir.join("last.safetensors");
    if std::fs::symlink_metadata(&last).is_ok() {
        return (true, None);
    }
    if let Some((previous, epoch)) = aicf_compiler::train::run::latest_checkpoint_left(dir) {
        if says {
            println!(
                "note: --auto-resume: {} is not there; {} holds epoch {epoch}: the run goes on from it",
                last.display(),
                previous.display()
            );
        }
        return (false, Some(previous));
    }
    let busy = aicf_compiler::train::run::directory_busy(dir);
    // (A checkpoint directory that is a file is the run's error to say.)
    let elsewhere = std::fs::metadata(dir).is_ok_and(|m| !m.is_dir());
    if !busy && says && !elsewhere {
        println!("note: --auto-resume: {} holds no checkpoint yet: the run starts afresh", dir.display());
    }
    (busy, None)
}

/// What a run says of a model it compiled (or found compiled).
fn compiled_message(model: &Path, c: &Compiled) -> String {
    let variant = c.batch.map(|b| format!(" for batch {b}")).unwrap_or_default();
    match c.seconds {
        Some(s) => format!("compiled {}{variant} in {s:.2} s -> {}", model.display(), c.dir.display()),
        None => format!("using the compiled {}", c.dir.display()),
    }
}

/// Where the memory budget made the convolutions direct kernels, a line
/// saying so (they ran several times slower, without a word).
fn direct_convolutions_note(timings: &aicf_compiler::timing::Timings) -> &'static str {
    if timings.stages.iter().any(|s| s.name == pipeline::DIRECT_CONVOLUTIONS) {
        "note: the convolutions' window rows (their products' scratch) do not fit --memory-budget: they run as \
         direct kernels, which need none and are slower; a larger budget keeps them as products"
    } else {
        ""
    }
}

/// Prints what a run reports.
#[derive(Default)]
struct Printer {
    /// The run holds no examples out: its held-out figures are "n/a", not NaN.
    nothing_held: bool,
    /// Whether the direct convolutions' note was printed (once a run).
    said_direct: bool,
    /// A text's tokens a step (its speed said in tokens a second too).
    tokens_per_step: Option<usize>,
}

impl Report for Printer {
    fn compiled(&mut self, model: &Path, c: &Compiled) {
        println!("{}", compiled_message(model, c));
        let note = direct_convolutions_note(&c.timings);
        if !note.is_empty() && !std::mem::replace(&mut self.said_direct, true) {
            println!("{note}");
        }
    }

    fn started(&mut self, s: &Start) {
        self.nothing_held = s.held_examples == 0;
        self.tokens_per_step = s.tokens_per_step;
        println!("data: {}", s.data);
        // A text's held-out figure is of the windows scored, not of its
        // whole held-out part (the data line gives its length).
        let (examples, held) = match (s.text, s.train_examples == 1, s.held_examples == 1) {
            (true, one, held_one) => (
                if one { "window" } else { "windows" },
                if held_one { "held-out window scored" } else { "held-out windows scored" },
            ),
            (false, one, _) => (if one { "example" } else { "examples" }, "held out"),
        };
        println!(
            "training on {} {examples} ({} {held}), batch {}, {} step{} per epoch, {}",
            s.train_examples,
            s.held_examples,
            s.batch,
            s.steps_per_epoch,
            if s.steps_per_epoch == 1 { "" } else { "s" },
            s.device
        );
    }

    fn resumed(&mut self, checkpoint: &Path, epoch: usize, step: u64, within: Option<usize>) {
        match within {
            Some(batch) => println!(
                "resumed from {} inside epoch {epoch}, after its batch {batch} (step {step})",
                checkpoint.display()
            ),
            None => println!("resumed from {} at epoch {epoch} (step {step})", checkpoint.display()),
        }
    }

    fn epoch(&mut self, r: &EpochRecord, epochs: usize) {
        let unit = if r.unit == "nats" || r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
        // A regression (or a run without held-out rows) has no accuracy.
        let accuracy =
            if r.val_accuracy.is_nan() { String::new() } else { format!("  val accuracy {}", percent(r.val_accuracy)) };
        let val = if self.nothing_held { "n/a".to_string() } else { format!("{:.4}{unit}", r.val_loss) };
        // An fp16 run's loss scale, and whether it fell over the epoch
        // (steps skipped for overflowing gradients: seen only in a
        // checkpoint's tensors). Against the epoch's start: the first
        // epoch's fall, where a run finds its scale, went unsaid.
        let scale = match (r.loss_scale, r.loss_scale_start) {
            (Some(now), Some(before)) if now < before && now > 0.0 => {
                // Each skipped step halves it; a doubling (after 2000 clean
                // steps) in between hides one: at least this many.
                let halvings = (before / now).log2().round() as u64;
                format!(
                    "  loss scale {now} (from {before}: at least {halvings} step{} overflowed and {} skipped)",
                    if halvings == 1 { "" } else { "s" },
                    if halvings == 1 { "was" } else { "were" }
                )
            }
            (Some(now), _) => format!("  loss scale {now}"),
            (None, _) => String::new(),
        };
        let tokens = self.tokens(r.steps_per_second);
        println!(
            "epoch {:>3}/{epochs}  train loss {:.4}  val loss {val}{accuracy}  ({:.2} s, {:.1} steps/s{tokens}){scale}",
            r.epoch, r.train_loss, r.seconds, r.steps_per_second
        );
    }

    fn step(&mut self, r: &StepRecord, _epochs: usize) {
        let unit = if r.unit == "nats" || r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
        let val = if r.val_loss.is_nan() {
            String::new()
        } else {
            let accuracy = if r.val_accuracy.is_nan() {
                String::new()
            } else {
                format!("  val accuracy {}", percent(r.val_accuracy))
            };
            format!("  val loss {:.4}{unit}{accuracy}", r.val_loss)
        };
        println!(
            "step {:>6} (epoch {}, {}/{})  train loss {:.4}{val}  lr {:.3e}  ({:.1} steps/s{})",
            r.step,
            r.epoch,
            r.batch,
            r.steps_per_epoch,
            r.train_loss,
            r.lr,
            r.steps_per_second,
            self.tokens(r.steps_per_second)
        );
    }

    fn decision(&mut self, summary: &str) {
        println!("  {summary}");
    }

    fn note(&mut self, message: &str) {
        println!("note: {message}");
    }
}

impl Printer {
    /// A language model's speed in tokens too.
    fn tokens(&self, steps_per_second: f64) -> String {
        self.tokens_per_step.map_or(String::new(), |t| {
            let per_second = steps_per_second * t as f64;
            if per_second >= 1e4 {
                format!(", {:.0}k tokens/s", per_second / 1e3)
            } else {
                format!(", {per_second:.0} tokens/s")
            }
        })
    }
}

/// An accuracy as a percentage, or "n/a" where there is none (a
/// regression, or no examples to measure it on).
fn percent(accuracy: f64) -> String {
    if accuracy.is_nan() { "n/a".to_string() } else { format!("{:.2}%", 100.0 * accuracy) }
}

/// The GEMM candidate that evaluating `checkpoint` runs with: `given`
/// (`--gemm`), else the one its run forced on every GEMM (its outputs then
/// those of its training's kernels), else none (the registry's choices).
fn gemm_of_run(given: Option<String>, checkpoint: Option<&Path>, d: &DeviceArgs) -> Result<Option<String>> {
    check_gemm_flag(given.as_deref(), d)?;
    Ok(given.or_else(|| {
        // (A checkpoint that does not read is said by the command itself;
        // one of another device's candidate is not taken.)
        let checkpoint = checkpoint?;
        let meta = aicf_runtime::checkpoint::read_metadata(checkpoint).ok()?;
        let g = meta.get(aicf_compiler::train::run::GEMM_KEY)?;
        match check_gemm_flag(Some(g), d) {
            Ok(()) => Some(g.clone()),
            Err(_) => {
                eprintln!(
                    "note: {}: its run ran every GEMM with --gemm {g}, which this device has not: each GEMM runs \
                     the registry's measured choice",
                    checkpoint.display()
                );
                None
            }
        }
    }))
}

/// Refuses a `--gemm` candidate that `d`'s device does not have, before
/// anything compiles.
fn check_gemm_flag(gemm: Option<&str>, d: &DeviceArgs) -> Result<()> {
    let Some(name) = gemm else { return Ok(()) };
    let (known, names) = if d.device().is_cuda() {
        (matches!(name, "generated" | "cublaslt"), "generated, cublaslt".to_string())
    } else {
        let all = aicf_runtime::registry::Choice::ALL.map(|c| c.name());
        (all.contains(&name), all.join(", "))
    };
    if known { Ok(()) } else { Err(format!("--gemm {name}: not a GEMM candidate of this device ({names})")) }
}

fn train(c: &ModelArgs, d: &DeviceArgs, data: &[PathBuf], run: RunOptions, gemm: Option<String>) -> Result<()> {
    check_gemm_flag(gemm.as_deref(), d)?;
    if !(0.0..1.0).contains(&run.data.val_split) {
        return Err(format!("--val-split {} is not in [0, 1)", run.data.val_split));
    }
    no_loss(c, "train")?;
    if !c.data_parallel {
        // Several processes of one mpirun, each training alone into the
        // same files, is a mistake, not a run.
        let size = std::env::var("OMPI_COMM_WORLD_SIZE").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1);
        if size > 1 {
            return Err(format!(
                "started by mpirun as one of {size} processes, without --data-parallel: each would train alone into \
                 the same files (add --data-parallel, or run one process)"
            ));
        }
        return train_on(c, d, data, &run, gemm);
    }
    // One replica of a data-parallel run: rank 0 prints; an error on any
    // rank ends every rank (`main`; mpirun reports which one).
    let comm = world(c.collective_timeout)?;
    let rank = comm.rank();
    let d = replica_device(d);
    let run = RunOptions { progress: run.progress && rank == 0, data_parallel: Some(comm.clone()), ..run };
    train_on(c, &d, data, &run, gemm)
}

fn train_on(c: &ModelArgs, d: &DeviceArgs, data: &[PathBuf], run: &RunOptions, gemm: Option<String>) -> Result<()> {
    let rank = run.data_parallel.as_ref().map_or(0, |c| c.rank());
    // Each replica imports an ONNX model into its own directory.
    let import_dir = if rank == 0 { run.out.clone() } else { run.out.join(format!("rank{rank}")) };
    let (model, graph_loss) = hl_model_ordered(c, &import_dir, Say::Stdout)?;
    let data = &data_in_loss_order(data, graph_loss.as_ref());
    let options = Options { gemm, ..options(c, d, run.seed, &run.out)? };
    if matches!(c.optimizer, Optimizer::Adamw) && c.weight_decay.is_none() && rank == 0 {
        println!(
            "note: --optimizer adamw decays the weights by 0.01 (torch.optim.AdamW's default; --weight-decay 0 for none)"
        );
    }
    if run.lr == 0.0 && rank == 0 {
        println!(
            "note: --lr 0: the parameters stay as they are (a batch norm's running statistics still follow the \
             data, and the optimizer's moments the gradients)"
        );
    }
    let mut printer = Printer::default();
    let summary = if rank == 0 {
        run::fit(&model, &options, data, run, &mut printer)
    } else {
        run::fit(&model, &options, data, run, &mut run::Quiet)
    }
    .map_err(|e| e.to_string())?;
    if rank != 0 {
        return Ok(());
    }
    let last = summary.last();
    if last.is_none() {
        // No epoch ran (--epochs 0, or a resume with none left): no
        // metrics to report (a fresh run's metrics.jsonl is there, empty:
        // said, as "none written" read as no file).
        if summary.metrics.metadata().is_ok_and(|m| m.len() == 0) {
            println!(
                "no epoch trained, so no held-out figures: {} holds no epoch, and no plot is drawn",
                summary.metrics.display()
            );
        } else {
            println!("no epoch trained, so no held-out figures and no metrics or plot written");
        }
        return Ok(());
    }
    let accuracy = last.map_or(f64::NAN, |r| r.val_accuracy);
    let what = match last {
        Some(r) if accuracy.is_nan() && r.val_loss.is_finite() => format!("loss {:.4}", r.val_loss),
        // (A text's held-out part is kept out of training all the same.)
        _ if accuracy.is_nan() && run.data.val_split > 0.0 && run.data.eval_windows == 0 => {
            "figures n/a (--eval-windows 0 scores no held-out window)".into()
        }
        _ if accuracy.is_nan() && run.data.val_split == 0.0 => {
            "figures n/a (no held-out examples: --val-split 0)".into()
        }
        // (Rounded to none, or left out by a model fixed at one batch:
        // said above where so.)
        _ if accuracy.is_nan() => "figures n/a (no held-out example was scored)".to_string(),
        _ => format!("accuracy {}", percent(accuracy)),
    };
    // Timing GEMM candidates happens once per shape and machine (later runs
    // re-check briefly): said, so that a first run's time is not read as
    // the step's.
    let timing = if summary.gemm_timing_seconds >= 0.01 {
        format!(", {:.2} s of it timing GEMM candidates for this machine's GEMM registry", summary.gemm_timing_seconds)
    } else {
        String::new()
    };
    let epochs = last.map_or(0, |r| r.epoch);
    println!(
        "final held-out {what} after {epochs} epoch{} ({} step{}, training {:.2} s{timing}); metrics {}, plot {}",
        if epochs == 1 { "" } else { "s" },
        summary.steps,
        if summary.steps == 1 { "" } else { "s" },
        summary.training_seconds,
        summary.metrics.display(),
        summary.plot.display()
    );
    if let Some(r) = last.filter(|r| r.unit != "nats" && !r.unit.is_empty() && !printer.nothing_held) {
        let best = summary.records.iter().map(|r| r.val_loss).fold(f64::INFINITY, f64::min);
        println!("final held-out loss {:.4} {} (best {best:.4})", r.val_loss, r.unit);
    }
    // The best epoch's checkpoint, where it is not the last one.
    if let (Some((loss, at)), Some(dir)) = (summary.best, &run.checkpoint_dir)
        && at != epochs
        && let Some(best) = run::best_checkpoint(dir, (loss, at))
    {
        let unit = last.map_or("", |r| r.unit.as_str());
        let accuracy = summary
            .records
            .iter()
            .rfind(|r| r.epoch == at)
            .filter(|r| r.val_accuracy.is_finite())
            .map_or(String::new(), |r| format!(", accuracy {}", percent(r.val_accuracy)));
        println!("best held-out loss {loss:.4} {unit} at epoch {at}{accuracy}: {}", best.display());
    }
    if let Some(log) = &summary.decisions_log {
        println!(
            "adaptive run: {} decision{} (log {}), final model {} parameters",
            summary.decisions,
            if summary.decisions == 1 { "" } else { "s" },
            log.display(),
            summary.params
        );
    }
    if let Some(trace) = &summary.trace {
        println!("profile: {} (open in https://ui.perfetto.dev or chrome://tracing)", trace.display());
    }
    println!(
        "training FLOPs {:.3e} (the train step's matrix products, convolutions and attention)",
        summary.train_flops
    );
    Ok(())
}

fn eval(
    c: &ModelArgs,
    d: &DeviceArgs,
    data: &[PathBuf],
    checkpoint: Option<&Path>,
    eval_windows: Option<usize>,
    gemm: Option<String>,
    out: &Path,
) -> Result<()> {
    no_loss(c, "eval")?;
    let (model, graph_loss) = hl_model_ordered(c, out, Say::Stdout)?;
    let data = &data_in_loss_order(data, graph_loss.as_ref());
    let options = Options { gemm, ..options(c, d, 0, out)? };
    let scored = run::evaluate_checkpoint(
        &model,
        &options,
        data,
        checkpoint,
        out,
        eval_windows,
        c.batch.is_some(),
        &mut Printer::default(),
    )
    .map_err(|e| e.to_string())?;
    // ("on 1 windows" read as a slip.)
    let what = if scored.examples == 1 { scored.what.trim_end_matches('s') } else { scored.what };
    // What was scored: a checkpoint at its epoch, or the model's own weights.
    let whose = match checkpoint {
        Some(c) => format!("checkpoint {}, epoch {}", c.display(), scored.epoch.as_deref().unwrap_or("?")),
        None => format!("{}'s own weights", c.model.display()),
    };
    // A regression has no accuracy: its loss alone.
    if scored.accuracy.is_nan() {
        println!(
            "loss {:.4} {} on {} {} of {} ({whose})",
            scored.loss,
            scored.unit,
            scored.examples,
            what,
            data[0].display(),
        );
        return Ok(());
    }
    // A language model's loss in the units papers and nanoGPT's users
    // compare too: bits per character (or byte) and perplexity.
    let also = match scored.unit.strip_prefix("nats/") {
        Some(per) if scored.loss.is_finite() => {
            format!(" ({:.4} bits/{per}, perplexity {:.3})", scored.loss / std::f64::consts::LN_2, scored.loss.exp())
        }
        _ => String::new(),
    };
    println!(
        "accuracy {} on {} {} of {} ({whose}); loss {:.4} {}{also}",
        percent(scored.accuracy),
        scored.examples,
        what,
        data[0].display(),
        scored.loss,
        scored.unit
    );
    Ok(())
}

/// `aicf predict`: the predictions to `output` (.npy or .csv), or as CSV
/// to stdout; messages to stderr.
fn predict(
    c: &ModelArgs,
    d: &DeviceArgs,
    data: &[PathBuf],
    checkpoint: Option<&Path>,
    (values, result): (Option<predict::Values>, usize),
    (output, gemm): (Option<&Path>, Option<String>),
    out: &Path,
) -> Result<()> {
    no_loss(c, "predict")?;
    no_loss_to_train(c).map_err(|e| format!("{e} (predict compiles the model as train does)"))?;
    // Where the predictions go is checked before anything compiles.
    if let Some(o) = output {
        if !predict::known_format(o) {
            return Err(format!("-o {}: predictions are written as {}", o.display(), predict::FORMATS));
        }
        let inputs: Vec<&Path> = [Some(c.model.as_path()), checkpoint]
            .into_iter()
            .flatten()
            .chain(data.iter().map(PathBuf::as_path))
            .collect();
        output_file(o, "the predictions", &inputs)?;
    }
    let (model, graph_loss) = hl_model_ordered(c, out, Say::Stderr)?;
    // (Given a file per input of a model that computes its own loss, in the
    // graph's order: @forward's.)
    let data = &match &graph_loss {
        Some(gl) if data.len() == gl.graph_order.len() && gl.data.len() < data.len() => {
            let mut ordered = data_in_loss_order(data, Some(gl));
            ordered.truncate(gl.data.len());
            ordered
        }
        _ => data.to_vec(),
    };
    let options = Options { gemm, ..options(c, d, 0, out)? };
    let predictions =
        predict::predict(&model, &options, data, checkpoint, out, (c.batch.is_some(), result), &mut ToStderr)
            .map_err(|e| e.to_string())?;
    let values = values.unwrap_or(predictions.default_values());
    let t = predictions.values(values).map_err(|e| e.to_string())?;
    let rows = t.shape.first().copied().unwrap_or(0);
    // Classes by name where the run read its labels so (CSV; a .npy holds
    // their indices, said).
    let names = predictions.class_names.as_deref().filter(|_| values == predict::Values::Class);
    if let (Some(n), Some(o)) = (names, output)
        && o.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        eprintln!(
            "note: {} holds the classes' indices; their names, in order: {}",
            o.display(),
            n.iter().map(|c| format!("'{c}'")).collect::<Vec<_>>().join(", ")
        );
    }
    // Rows named by the data (an image folder's paths): written first on
    // each CSV row; a .npy's order said.
    let row_names = predictions.row_names.as_deref();
    if let (Some(n), Some(o)) = (row_names, output)
        && o.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        eprintln!(
            "note: {}'s rows are the images in the order of their paths ({}{})",
            o.display(),
            n.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if n.len() > 3 { ", ..." } else { "" }
        );
    }
    match output {
        Some(o) => {
            predict::write_named(&t, names, row_names, o).map_err(|e| e.to_string())?;
            let shape: Vec<String> = t.shape.iter().map(usize::to_string).collect();
            println!(
                "{} of {} row{} ({}, [{}]) written to {}",
                values.name(),
                rows,
                if rows == 1 { "" } else { "s" },
                if t.dtype == aicf_runtime::artifact::DType::I64 { "int64" } else { "float32" },
                shape.join(", "),
                o.display()
            );
        }
        None => match predict::write_csv_named(&t, names, row_names, std::io::stdout().lock()) {
            // A closed pipe (`| head`) ends the output quietly.
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(format!("writing the predictions: {e}"));
            }
            _ => {}
        },
    }
    Ok(())
}

/// `aicf export`: the model's @forward as an ONNX file (`fixed`: a batch
/// the user gave, which the export keeps).
fn export(
    c: &ModelArgs,
    checkpoint: Option<&Path>,
    output: &Path,
    (fixed, raw_features): (Option<usize>, bool),
    out: &Path,
) -> Result<()> {
    no_loss(c, "export")?;
    aicf_compiler::train::export::onnx_file(output)?;
    let inputs: Vec<&Path> = [Some(c.model.as_path()), checkpoint].into_iter().flatten().collect();
    output_file(output, "the ONNX model", &inputs)?;
    // An hl model is exported at the batch asked for (else a dynamic one),
    // not retargeted to a file first; an ONNX model's import binds its
    // batch (the checkpoint's run's).
    let mut model_args = c.clone();
    if !is_onnx(&c.model) {
        model_args.batch = None;
    }
    let (model, _) = hl_model_ordered(&model_args, out, Say::Stderr)?;
    // An imported model's outputs keep their names (a deployment asks for
    // `output0`): the graph's outputs but a scalar loss it computes.
    let output_names = if is_onnx(&c.model) { onnx::output_names(&c.model) } else { Vec::new() };
    let request = aicf_compiler::train::export::ExportRequest {
        model: &model,
        checkpoint,
        output,
        batch: fixed,
        raw_features,
        out,
        source: &c.model,
        output_names,
    };
    let exported = aicf_compiler::train::export::export(&request, &mut ToStderr).map_err(|e| e.to_string())?;
    let ports = |p: &[aicf_compiler::export::Port]| p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
    println!(
        "{} written: ONNX opset {}, {} parameter tensor{}, {} nodes",
        output.display(),
        aicf_compiler::export::OPSET,
        exported.parameters,
        if exported.parameters == 1 { "" } else { "s" },
        exported.model.graph.as_ref().map_or(0, |g| g.node.len())
    );
    println!("  inputs: {}", ports(&exported.inputs));
    println!("  outputs: {}", ports(&exported.outputs));
    if let Err((batch, why)) = &exported.batch {
        eprintln!("note: the batch is fixed at {batch}: {why}; --batch N exports another fixed size");
    }
    // (run_settings set the checkpoint's precision.)
    if c.precision.name() != "fp32" {
        eprintln!(
            "note: the checkpoint's run computed its products in {} (--precision); the graph computes in f32 on its \
             f32 master weights, so its outputs differ from `aicf predict`'s in about the third digit",
            c.precision.name()
        );
    }
    Ok(())
}

/// Checks the file `-o` names before anything compiles (`what` it will
/// hold): not a directory, nor weights, nor one of the command's `inputs`;
/// its directory is made now (a missing one failed after the work was
/// done, naming no option).
fn output_file(o: &Path, what: &str, inputs: &[&Path]) -> Result<()> {
    if o.is_dir() {
        return Err(format!("-o {}: is a directory, not a file", o.display()));
    }
    if let Some(parent) = o.parent().filter(|p| !p.as_os_str().is_empty() && !p.is_dir()) {
        if let Some(file) = parent.ancestors().find(|a| a.is_file()) {
            return Err(format!("-o {}: {} is a file, not a directory to write it in", o.display(), file.display()));
        }
        run::make_dir(parent).map_err(|e| format!("-o {}: {e}", o.display()))?;
    }
    aicf_compiler::train::refuse_overwriting_weights(o, what).map_err(|e| format!("-o {}: {e}", o.display()))?;
    if inputs.iter().any(|given| aicf_compiler::train::same_path(o, given)) {
        return Err(format!("-o {}: is an input of this command; give another file", o.display()));
    }
    Ok(())
}

/// Reports on stderr, so that stdout holds only the sampled text.
struct ToStderr;

impl Report for ToStderr {
    fn compiled(&mut self, model: &Path, c: &Compiled) {
        eprintln!("{}", compiled_message(model, c));
    }

    fn note(&mut self, message: &str) {
        eprintln!("note: {message}");
    }
}

fn sample(
    c: &ModelArgs,
    d: &DeviceArgs,
    checkpoint: &Path,
    s: &aicf_compiler::train::sample::SampleOptions,
    gemm: Option<String>,
    out: &Path,
) -> Result<()> {
    no_batch(c, "sample")?;
    let (model, s) = match one_row_import(c, checkpoint, out)? {
        Some(model) => {
            (model, &aicf_compiler::train::sample::SampleOptions { same_model_at_one_row: true, ..s.clone() })
        }
        // (The import's line to stderr: stdout is the text.)
        None => (hl_model_saying(c, out, Say::Stderr)?, s),
    };
    let options = Options { gemm, ..options(c, d, s.seed, out)? };
    let mut stdout = std::io::stdout().lock();
    let mut failed = None;
    let mut emit = |piece: &[u8]| {
        if failed.is_none()
            && let Err(e) = stdout.write_all(piece).and_then(|()| stdout.flush())
        {
            failed = Some(e);
        }
        failed.is_none()
    };
    aicf_compiler::train::sample::sample_checkpoint(&model, &options, checkpoint, out, s, &mut ToStderr, &mut emit)
        .map_err(|e| e.to_string())?;
    emit(b"\n");
    match failed {
        // A closed pipe (`| head`) ends the output quietly.
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing the text: {e}")),
        _ => Ok(()),
    }
}

#[allow(clippy::too_many_arguments)]
fn bench(
    c: &ModelArgs,
    d: &DeviceArgs,
    lr: f64,
    steps: usize,
    out: &Path,
    profile: bool,
    trace: Option<&Path>,
    gemm: Option<&str>,
) -> Result<()> {
    check_gemm_flag(gemm, d)?;
    if steps == 0 {
        return Err("--steps must be at least 1".into());
    }
    // Every step's time is kept for the median: a bound that still allows
    // hours of timing.
    const MAX_STEPS: usize = 10_000_000;
    if steps > MAX_STEPS {
        return Err(format!("--steps {steps}: at most {MAX_STEPS}"));
    }
    if !lr.is_finite() || lr < 0.0 || lr.is_sign_negative() {
        return Err(format!("the learning rate {lr} is not a finite number of at least 0"));
    }
    if lr != 0.0 && (lr as f32) == 0.0 {
        // As train refuses it: the timed steps would not train.
        return Err(format!("the learning rate {lr:e} is 0 in f32, the precision the step computes in"));
    }
    no_loss(c, "bench")?;
    // Where the trace goes is checked before the benchmark runs.
    if let Some(t) = trace {
        aicf_compiler::train::refuse_overwriting_all_but_traces(t, "the trace")
            .map_err(|e| format!("{}: {e}", t.display()))?;
        if t.is_dir() {
            return Err(format!("--trace {}: is a directory, not a file", t.display()));
        }
        if let Some(parent) = t.parent().filter(|p| !p.as_os_str().is_empty())
            && !parent.is_dir()
        {
            // A file where a directory of the path must go: said as such
            // (create_dir_all's "File exists" named neither).
            if let Some(file) = parent.ancestors().find(|a| a.is_file()) {
                return Err(format!(
                    "--trace {}: {} is a file, not a directory to write it in",
                    t.display(),
                    file.display()
                ));
            }
            aicf_compiler::train::run::make_dir(parent).map_err(|e| format!("--trace {}: {e}", t.display()))?;
        }
        // Writable, before the benchmark runs (a read-only place was found
        // only after it, in an error that did not name --trace). The trace
        // is written to a temporary file beside it and renamed into place:
        // that the directory takes a new file is what matters (opening the
        // path itself would wait on a FIFO).
        aicf_runtime::checkpoint::refuse_replacing_special(t).map_err(|e| format!("--trace {}: {e}", t.display()))?;
        let probe = aicf_runtime::checkpoint::temp_beside(t, &format!("{}.probe.tmp", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(|e| format!("--trace {}: cannot be written: {e}", t.display()))?;
        let _ = std::fs::remove_file(&probe);
    }
    // Data parallel: every replica times its step, which sums over all.
    let comm = if c.data_parallel { Some(world(c.collective_timeout)?) } else { None };
    let rank = comm.as_ref().map_or(0, |c| c.rank());
    let d = &if comm.is_some() { replica_device(d) } else { d.clone() };
    let out = &if rank == 0 { out.to_path_buf() } else { out.join(format!("rank{rank}")) };
    let model = hl_model(c, out)?;
    let c = &ModelArgs { model, ..c.clone() };
    // The batch is random and finite: the timed step scans nothing.
    let options = Options { check_inputs: false, ..options(c, d, 0, out)? };
    if let Some(comm) = &comm
        && rank != 0
    {
        comm.barrier_within("rank 0 compiles first", std::time::Duration::from_secs(3600))
            .map_err(|e| e.to_string())?;
    }
    let mut trainer = Trainer::from_file(&c.model, options).map_err(|e| e.to_string())?;
    if let Some(comm) = &comm {
        if rank == 0 {
            comm.barrier_within("rank 0 compiles first", std::time::Duration::from_secs(3600))
                .map_err(|e| e.to_string())?;
        }
        trainer.set_communicator(comm.clone()).map_err(|e| e.to_string())?;
    }
    let replicas = comm.as_ref().map_or(1, |c| c.size());
    if rank == 0 {
        for compiled in trainer.compiled() {
            Printer::default().compiled(&c.model, compiled);
        }
    }
    trainer.backend_mut().force_gemm(gemm).map_err(|e| e.to_string())?;
    let backend = trainer.backend();
    let step = backend.function("train_step").map_err(|e| e.to_string())?.clone();
    let classes = backend
        .function("forward")
        .ok()
        .and_then(|f| f.args.iter().find(|a| a.role() == Role::Output).and_then(|a| a.shape.last().copied()))
        .unwrap_or(2) as f64;
    let mut state = 1u64;
    let mut random = |n: usize, f: &dyn Fn(f64) -> f64| -> Vec<f64> {
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                f((state >> 40) as f64 / (1u64 << 24) as f64)
            })
            .collect()
    };
    let mut inputs = Vec::new();
    for a in step.args.iter().filter(|a| a.role() == Role::Input) {
        let n: usize = a.shape.iter().product();
        let values = match (a.bind.as_str(), a.dtype) {
            ("lr", _) => vec![lr],
            ("replica_weight", _) => vec![1.0 / replicas as f64],
            // labels and token ids: below the class count
            (_, aicf_runtime::artifact::DType::I32 | aicf_runtime::artifact::DType::I64) => {
                random(n, &|u| (u * classes).floor())
            }
            // Booleans (a mask) and bytes as their types hold them.
            (_, aicf_runtime::artifact::DType::I1) => random(n, &|u| f64::from(u8::from(u < 0.5))),
            (_, aicf_runtime::artifact::DType::U8) => random(n, &|u| (u * 256.0).floor().min(255.0)),
            _ => random(n, &|u| u * 2.0 - 1.0),
        };
        inputs.push(Tensor::new(a.shape.clone(), a.dtype, values));
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    // Gradient accumulation: a step is N micro-batches (the same batch N
    // times, each at its share) through @train_grad, their sums, and
    // @train_apply.
    let accumulate = c.accumulate.max(1);
    let batch: Vec<&Tensor> = step
        .args
        .iter()
        .filter(|a| a.role() == Role::Input)
        .zip(&inputs)
        .filter(|(a, _)| a.bind != "lr" && a.bind != "replica_weight")
        .map(|(_, t)| t)
        .collect();
    let share = 1.0 / (accumulate * replicas) as f64;
    let micro: Vec<(Vec<&Tensor>, f64)> = (0..accumulate).map(|_| (batch.clone(), share)).collect();
    let one_step = |trainer: &mut Trainer| -> Result<f64> {
        if accumulate > 1 {
            return trainer.step_micro(&micro, lr).map(|m| m.loss).map_err(|e| e.to_string());
        }
        let out = trainer.backend_mut().call("train_step", &refs).map_err(|e| e.to_string())?;
        Ok(out.first().and_then(|t| t.values.first()).copied().unwrap_or(f64::NAN))
    };
    // The warm-up steps time GEMM candidates for shapes the machine's
    // registry has not measured: minutes for a large model, said after the
    // result (the wall time was many times the steps', unexplained).
    // (Shapes measured for the first time alone: the re-checks of recorded
    // decisions, a fraction of a second each run, are no reason to say it.)
    let gemm_timing = aicf_runtime::registry::first_measuring_seconds();
    let warm = Instant::now();
    for _ in 0..5 {
        one_step(&mut trainer)?;
    }
    let warm_seconds = warm.elapsed().as_secs_f64();
    let timed_gemms = aicf_runtime::registry::first_measuring_seconds() - gemm_timing;
    trainer.backend_mut().set_profiling(profile || trace.is_some());
    let mut times = Vec::new();
    let mut loss = f64::NAN;
    for _ in 0..steps {
        let t = Instant::now();
        loss = one_step(&mut trainer)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let precision = trainer.options().precision;
    let backend = trainer.backend_mut();
    let events = backend.take_trace();
    backend.set_profiling(false);
    times.sort_by(f64::total_cmp);
    if rank != 0 {
        return Ok(());
    }
    let mut device = match &comm {
        Some(comm) => format!("{}, {} replicas ({})", backend.device(), replicas, comm.engine()),
        None => backend.device(),
    };
    if accumulate > 1 {
        device = format!("{device}, accumulating {accumulate} micro-batches");
    }
    // (Said as the training line says it: a bf16 step read as fp32's.)
    if precision != aicf_compiler::pipeline::Precision::Fp32 {
        device = format!("{device}, {} mixed precision", precision.name());
    }
    println!(
        "{}: train step ({}, lr {}) median {:.3} ms, min {:.3} ms over {steps} step{}, {}, last step's loss {} (one \
         random batch, stepped on {} times: it may near 0)",
        c.model.display(),
        c.optimizer.name(),
        aicf_compiler::train::rate_text(lr),
        times[times.len() / 2],
        times[0],
        if steps == 1 { "" } else { "s" },
        device,
        // (0.000000 read as a bug: a fixed batch is learnt by heart.)
        if loss != 0.0 && loss.abs() < 1e-3 { format!("{loss:.3e}") } else { format!("{loss:.6}") },
        steps + 5
    );
    if timed_gemms >= 0.1 {
        println!(
            "(the 5 warm-up steps took {warm_seconds:.1} s, {timed_gemms:.1} s of it timing GEMM candidates for shapes \
             this machine's GEMM registry had not measured: a second run finds them measured)"
        );
    }
    // A forced candidate that could not run this model's GEMMs here (f32
    // operands for a bf16 one, a library not installed, an instruction set
    // the CPU lacks) ran them as `library`: said, since the line above
    // names the candidate asked for.
    if let Some(g) = gemm.filter(|g| !matches!(*g, "library" | "generated"))
        && backend.gemm_runs(g) == Some(0)
        && backend.gemm_runs("library").is_some_and(|n| n > 0)
    {
        eprintln!(
            "note: --gemm {g} ran none of this model's GEMMs here (it cannot take their operands, or is not \
             available on this machine): they ran as `library`"
        );
    }
    if !loss.is_finite() {
        // Kernels on infinities and NaNs can take other paths than on the
        // numbers a training run sees.
        let remedy = if aicf_compiler::train::run::decay_overshoots(c.optimizer.name(), lr, c.weight_decay()) {
            let decay = aicf_compiler::train::run::short(c.weight_decay());
            format!("a smaller --weight-decay keeps it finite ({decay} times the rate is above 2)")
        } else {
            "a smaller --lr keeps it finite".to_string()
        };
        eprintln!(
            "note: the loss is {loss} after the timed steps (lr {} on a fixed random batch): the step still ran, but \
             its times are those of arithmetic on non-finite values; {remedy}",
            aicf_compiler::train::rate_text(lr)
        );
    }
    // The functions a step runs, whose kernels the profile lists.
    let timed = |f: &str| if accumulate > 1 { f == "train_grad" || f == "train_apply" } else { f == "train_step" };
    if profile {
        // Per kernel call of the train step, on whichever stream it ran: its
        // time per step, slowest first. (A collective's time in flight, on
        // its own stream, overlaps the kernels: only the time the step
        // waited for it, on stream 0, is listed.)
        let mut per_call: std::collections::BTreeMap<(String, usize), (String, String, u32, f64)> = Default::default();
        let mut per_op: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
        for e in events.iter().filter(|e| timed(&e.function) && (e.stream == 0 || !e.op.starts_with("ll.all_reduce"))) {
            let entry = per_call
                .entry((e.function.clone(), e.call))
                .or_insert_with(|| (e.op.clone(), e.origin.clone().unwrap_or_default(), e.stream, 0.0));
            entry.3 += e.duration_us / 1e3;
            let op = per_op.entry(e.op.clone()).or_default();
            op.0 += 1;
            op.1 += e.duration_us / 1e3;
        }
        let (mut flight, mut wait) = (0.0, 0.0);
        for e in events.iter().filter(|e| timed(&e.function) && e.op.starts_with("ll.all_reduce")) {
            match e.stream {
                0 => wait += e.duration_us / 1e3,
                _ => flight += e.duration_us / 1e3,
            }
        }
        if flight > 0.0 {
            let per = |ms: f64| ms / steps as f64;
            // Means over the timed steps, so the wait's share is of the
            // mean step (of the median it read 150-220% where a few steps
            // waited long).
            let mean = times.iter().sum::<f64>() / times.len() as f64;
            println!(
                "  all-reduce: {:.3} ms/step in flight, of which the step waited {:.3} ms/step ({:.1}% of the mean \
                 step, {mean:.3} ms)",
                per(flight),
                per(wait),
                100.0 * per(wait) / mean
            );
        }
        let mut rows: Vec<_> = per_call.into_iter().collect();
        rows.sort_by(|a, b| b.1.3.total_cmp(&a.1.3));
        for ((function, k), (op, origin, stream, ms)) in rows.into_iter().take(12) {
            println!("  @{function} #{k:<3} {op:<28} {:.3} ms/step  stream {stream}  {origin}", ms / steps as f64);
        }
        // Each op kind's kernels together (the streams may overlap, so the
        // sum can exceed the step).
        let mut ops: Vec<_> = per_op.into_iter().collect();
        ops.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
        let total: f64 = ops.iter().map(|(_, (_, ms))| ms).sum();
        for (op, (calls, ms)) in ops {
            println!(
                "  {op:<28} {:.3} ms/step in {} calls ({:.1}% of the kernel time)",
                ms / steps as f64,
                calls / steps.max(1),
                100.0 * ms / total.max(f64::MIN_POSITIVE)
            );
        }
    }
    if let Some(path) = trace {
        aicf_compiler::train::report::write_trace(path, &backend.device(), &events).map_err(|e| e.to_string())?;
        println!("trace of {steps} steps: {}", path.display());
    }
    Ok(())
}

/// The cache's parts that `aicf cache clean` removes: compiled kernels
/// and eager mode's ops.
const CACHE_PARTS: [&str; 2] = ["kernels", "eager"];

/// What `aicf cache clean` leaves: entries written in the last minutes,
/// which a compile at work may hold.
const CACHE_IN_USE_SECONDS: u64 = 300;

/// The files of `dir` (its entries, each counted whole), their bytes, and
/// those of each entry older than `before` (all where `None`).
fn cache_entries(dir: &Path, before: Option<std::time::SystemTime>) -> (u64, u64, Vec<(PathBuf, u64)>) {
    fn bytes(p: &Path) -> u64 {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p).map_or(0, |d| d.flatten().map(|e| bytes(&e.path())).sum()),
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    let (mut count, mut total, mut old) = (0, 0, Vec::new());
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let size = bytes(&e.path());
        count += 1;
        total += size;
        let modified = e.metadata().and_then(|m| m.modified()).ok();
        if before.is_none_or(|b| modified.is_some_and(|m| m < b)) {
            old.push((e.path(), size));
        }
    }
    (count, total, old)
}

/// `aicf cache info|clean`.
fn cache(what: CacheCommand) -> Result<()> {
    let dir = aicf_runtime::registry::cache_dir()
        .ok_or("no cache directory: HOME is unset or not absolute, and AICF_CACHE_DIR is not given")?;
    let human = |b: u64| match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    };
    // (A file in its place, or a directory that cannot be read, is said:
    // it read as an empty cache.)
    if let Ok(m) = std::fs::metadata(&dir)
        && !m.is_dir()
    {
        return Err(format!("{}: the cache is not a directory", dir.display()));
    }
    for part in CACHE_PARTS {
        if let Err(e) = std::fs::read_dir(dir.join(part))
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(format!("{}: {e}", dir.join(part).display()));
        }
    }
    let registry = dir.join("gemm-registry.json");
    match what {
        CacheCommand::Info => {
            println!("{}", dir.display());
            for part in CACHE_PARTS {
                let (count, total, _) = cache_entries(&dir.join(part), None);
                let what = if part == "kernels" { "compiled kernels" } else { "eager mode's compiled ops" };
                println!("  {part}/: {count} entries, {} ({what})", human(total));
            }
            // (Each decision has a line of its times beside it.)
            let decisions = std::fs::read_to_string(&registry)
                .ok()
                .and_then(|t| serde_json::from_str::<std::collections::BTreeMap<String, String>>(&t).ok())
                .map(|d| d.keys().filter(|k| !k.ends_with(" (ms)")).count());
            match decisions {
                Some(n) => println!("  gemm-registry.json: {n} GEMM decisions of this machine"),
                None if registry.exists() => println!("  gemm-registry.json: does not read (it is measured anew)"),
                None => println!("  gemm-registry.json: none yet"),
            }
        }
        CacheCommand::Clean { older_than, gemm_registry } => {
            // (Nothing written in the last minutes: a compile at work now
            // holds it, and failed when it went.)
            let now = std::time::SystemTime::now();
            let ago =
                |secs: u64| now.checked_sub(std::time::Duration::from_secs(secs)).unwrap_or(std::time::UNIX_EPOCH);
            let before = Some(ago(older_than
                .map_or(CACHE_IN_USE_SECONDS, |d| d.saturating_mul(86_400))
                .max(CACHE_IN_USE_SECONDS)));
            let (mut removed, mut freed, mut failed) = (0usize, 0u64, Vec::new());
            for part in CACHE_PARTS {
                for (path, size) in cache_entries(&dir.join(part), before).2 {
                    let gone = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
                    match gone {
                        Ok(()) => (removed, freed) = (removed + 1, freed + size),
                        // (Another process's removal first is no failure.)
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => failed.push(format!("{}: {e}", path.display())),
                    }
                }
            }
            if gemm_registry {
                match std::fs::remove_file(&registry) {
                    Ok(()) => println!("removed {} (GEMM candidates are timed again)", registry.display()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => failed.push(format!("{}: {e}", registry.display())),
                }
            }
            let older = older_than
                .map_or(" (all but those of the last 5 minutes, which a compile may hold)".to_string(), |d| {
                    format!(" older than {d} day{}", if d == 1 { "" } else { "s" })
                });
            println!("removed {removed} cache entries{older}, {} in {}", human(freed), dir.display());
            if !failed.is_empty() {
                return Err(format!("not removed: {}", failed.join("; ")));
            }
        }
    }
    Ok(())
}

/// `aicf runs list|show|compare|schema`.
fn runs(what: RunsCommand, db: Option<PathBuf>) -> Result<()> {
    use aicf_compiler::train::registry::{RunRow, Runs, SCHEMA};
    if let RunsCommand::Schema = what {
        println!("{}", SCHEMA.trim());
        return Ok(());
    }
    let path = db
        .or_else(Runs::default_path)
        .ok_or_else(|| format!("no run registry: {} and no --runs-db was given", Runs::no_default_reason()))?;
    if let RunsCommand::Check = what {
        return check_runs(&path);
    }
    // Read without writing: no file, or an empty one, is no registry yet.
    let registry = Runs::read(&path).map_err(|e| e.to_string())?.ok_or_else(|| {
        format!("{}: no run registry there (no file, or an empty one; aicf train records its runs)", path.display())
    })?;
    // Tags, notes and deletions write: the registry opened for writing
    // (it is there: read above).
    if matches!(what, RunsCommand::Tag { .. } | RunsCommand::Note { .. } | RunsCommand::Delete { .. }) {
        if let RunsCommand::Tag { tags, .. } = &what {
            for t in tags {
                aicf_compiler::train::registry::check_tag(t)?;
            }
        }
        drop(registry);
        let registry = Runs::open(&path).map_err(|e| e.to_string())?;
        match what {
            RunsCommand::Tag { id, tags, remove } => {
                let now = registry.tag(id, &tags, remove).map_err(|e| e.to_string())?;
                if now.is_empty() {
                    println!("run {id}: no tags");
                } else {
                    println!("run {id}: tags {}", now.join(", "));
                }
            }
            RunsCommand::Note { id, text, clear: _ } => {
                let text = text.filter(|t| !t.trim().is_empty());
                registry.note(id, text.as_deref()).map_err(|e| e.to_string())?;
                match text {
                    Some(t) => println!("run {id}: note {t:?}"),
                    None => println!("run {id}: no note"),
                }
            }
            RunsCommand::Delete { mut ids, force } => {
                ids.sort_unstable();
                ids.dedup();
                for (id, dir) in registry.delete(&ids, force).map_err(|e| e.to_string())? {
                    match dir {
                        Some(d) => println!("deleted run {id} (its checkpoints in {d} are left)"),
                        None => println!("deleted run {id}"),
                    }
                }
            }
            _ => {}
        }
        return Ok(());
    }
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    match what {
        RunsCommand::List { problem: wanted, sort, limit, tag, json } => {
            let (mut rows, unread) = registry.list_readable().map_err(|e| e.to_string())?;
            for e in &unread {
                eprintln!("aicf: note: {e}; left out of the list (`aicf runs check` reads every run)");
            }
            // Many runs: those of one problem, best first, the first few
            // (a registry of hundreds was one list by id).
            let total = rows.len();
            if let Some(w) = &wanted {
                rows.retain(|r| r.problem.name.contains(w.as_str()));
            }
            if let Some(t) = &tag {
                rows.retain(|r| r.tags.contains(t));
            }
            let last = |v: Option<f64>| v.filter(|v| v.is_finite()).unwrap_or(f64::INFINITY);
            match sort {
                RunsOrder::Id => {}
                RunsOrder::Loss => rows.sort_by(|a, b| last(a.best_val_loss).total_cmp(&last(b.best_val_loss))),
                RunsOrder::Flops => rows.sort_by(|a, b| last(a.train_flops).total_cmp(&last(b.train_flops))),
            }
            if let Some(n) = limit {
                rows.truncate(n);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?);
                return Ok(());
            }
            // (The task's whole word: cut to 5 letters, a regression read
            // "(regre)".)
            let problem = |r: &RunRow| format!("{} ({})", r.problem.name, r.problem.task);
            // The text columns as wide as their widest entry (a deep
            // model's structure pushed its row out of line).
            let wide = |min: usize, f: &dyn Fn(&RunRow) -> String| {
                rows.iter().map(|r| f(r).chars().count()).max().unwrap_or(0).max(min)
            };
            // A grown run's structure as it started and as it ended
            // (`mlp 16-10 -> 32-32-32-10`), its parameters as it ended.
            let structure = |r: &RunRow| {
                let (start, end) = start_and_end(&r.fingerprint, r.final_fingerprint.as_ref());
                match end {
                    // (Grown within its terms: more heads, a wider MLP.)
                    Some(end) if end == start => format!("{start}, grown"),
                    // (`mlp 16-10 -> 32-32-32-10`; `lm 2x64 -> lm 2x128`.)
                    Some(end) => {
                        let end = match end.strip_prefix(&format!("{} ", r.fingerprint.kind)) {
                            Some(rest) if start.starts_with(&format!("{} ", r.fingerprint.kind)) => rest.to_string(),
                            _ => end.clone(),
                        };
                        format!("{start} -> {end}")
                    }
                    None => start,
                }
            };
            let params = |r: &RunRow| r.final_fingerprint.as_ref().unwrap_or(&r.fingerprint).params;
            let (pw, sw) = (wide(16, &problem), wide(22, &structure));
            let tw = wide(10, &|r| r.status.clone());
            // Tags last, where a run shown has any.
            let tagged = rows.iter().any(|r| !r.tags.is_empty());
            let tags = |r: &RunRow| match (tagged, r.tags.is_empty()) {
                (false, _) => String::new(),
                (true, true) => "  -".into(),
                (true, false) => format!("  {}", r.tags.join(",")),
            };
            println!(
                "{:>4}  {:<tw$}  {:<20}  {:<pw$}  {:<sw$}  {:>9}  {:>10}  {:>9}  {:>6}{}",
                "id",
                "status",
                "started",
                "problem",
                "structure",
                "params",
                "FLOPs",
                "best val",
                "epochs",
                if tagged { "  tags" } else { "" }
            );
            for r in &rows {
                println!(
                    "{:>4}  {:<tw$}  {:<20}  {:<pw$}  {:<sw$}  {:>9}  {:>10}  {:>9}  {:>6}{}",
                    r.id,
                    r.status,
                    r.started,
                    problem(r),
                    structure(r),
                    params(r),
                    r.train_flops.map_or("-".into(), |f| format!("{f:.3e}")),
                    opt(r.best_val_loss, 4),
                    r.epochs.map_or("-".into(), |e| e.to_string()),
                    tags(r)
                );
            }
            if !unread.is_empty() {
                // (Not "N runs in": more are there, past the damage.)
                let shown = match (&wanted, rows.len() == total) {
                    (None, true) => format!("{total} runs read"),
                    (Some(w), _) => format!("{} of the {total} runs that read (of problems named *{w}*)", rows.len()),
                    (None, false) => format!("{} of the {total} runs that read", rows.len()),
                };
                println!("{shown} in {}; more do not (above: `aicf runs check` says what)", path.display());
            } else if rows.len() == total {
                println!("{} runs in {}", rows.len(), path.display());
            } else {
                let mut of = wanted.map_or(String::new(), |w| format!(", of problems named *{w}*"));
                if let Some(t) = tag {
                    of.push_str(&format!(", tagged {t}"));
                }
                println!("{} of the {total} runs in {}{of}", rows.len(), path.display());
            }
        }
        RunsCommand::Show { id, json } => {
            let d = registry.get(id).map_err(|e| e.to_string())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&d).map_err(|e| e.to_string())?);
                return Ok(());
            }
            let r = &d.run;
            println!("run {id}: {} ({}), started {}", r.status, r.model, r.started);
            if !r.tags.is_empty() {
                println!("  tags: {}", r.tags.join(", "));
            }
            if let Some(n) = &r.note {
                // (A note of several lines keeps the indent.)
                println!("  note: {}", n.trim_end().replace('\n', "\n        "));
            }
            // A resumed run's commands, one a line: the first, then each
            // resume's.
            for (i, c) in d.command.lines().enumerate() {
                println!("  {}: {c}", if i == 0 { "command" } else { "resumed" });
            }
            println!("  data: {} (seed {})", d.data, d.seed);
            let p = &r.problem;
            println!(
                "  problem: {} ({}), input {:?}, {} outputs, {} rows, label entropy {:.4}, constant {:.4}, probe {:.4}",
                p.name, p.task, p.input, p.outputs, p.rows, p.label_entropy, p.baseline_loss, p.probe_loss
            );
            let f = &r.fingerprint;
            println!(
                "  structure: {}, depth {}, {} parameters, {:.3e} FLOPs a step, graph {}",
                structure(f),
                f.depth,
                f.params,
                f.flops_per_step,
                f.graph_hash
            );
            // (Grown: another structure or parameter count; a graph of
            // another hash alone is the model at another batch, --batch on
            // a resume.)
            if let Some(end) = r
                .final_fingerprint
                .as_ref()
                .filter(|e| e.widths != f.widths || e.kind != f.kind || e.params != f.params)
            {
                println!("  grown into: {}, depth {}, {} parameters", structure(end), end.depth, end.params);
            }
            let ops: Vec<String> = f.ops.iter().map(|(k, v)| format!("{}: {v}", k.trim_start_matches("hl."))).collect();
            println!("  ops: {}", ops.join(", "));
            let s = &r.settings;
            println!(
                "  settings: {} lr {} (momentum {}{}, weight decay {}), {}, batch {}, {} epochs{}{}{}",
                s.optimizer,
                s.lr,
                s.momentum,
                if s.nesterov { ", Nesterov" } else { "" },
                s.weight_decay,
                s.precision,
                s.batch,
                s.epochs,
                s.policy.as_ref().map_or(String::new(), |p| format!(", policy {p}")),
                if s.replicas > 1 { format!(", {} replicas", s.replicas) } else { String::new() },
                if s.standardize { ", features standardized" } else { "" }
            );
            // (Momentum and weight decay are on the line above.)
            let more: Vec<String> = settings_beyond(s)
                .into_iter()
                .filter(|(k, _)| !matches!(*k, "momentum" | "weight decay" | "replicas"))
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            if !more.is_empty() {
                println!("  also: {}", more.join("; "));
            }
            // Where its files are, and whether its checkpoints still are.
            let mut places = Vec::new();
            if let Some(out) = &s.out {
                places.push(format!("out {out}"));
            }
            if let Some(dir) = &s.checkpoint_dir {
                let here = Path::new(dir).join("last.safetensors").is_file();
                places.push(format!("checkpoints {dir}{}", if here { "" } else { " (no last.safetensors there now)" }));
            }
            if let Some(w) = &s.workdir {
                places.push(format!("ran in {w}"));
            }
            if !places.is_empty() {
                println!("  files: {}", places.join(", "));
            }
            println!(
                "  {:>5}  {:>7}  {:>11}  {:>10}  {:>10}  {:>9}",
                "epoch", "step", "FLOPs", "train", "val", "accuracy"
            );
            for c in &d.curve {
                println!(
                    "  {:>5}  {:>7}  {:>11.3e}  {:>10.4}  {:>10}  {:>9}",
                    c.epoch,
                    c.step,
                    c.train_flops,
                    c.train_loss,
                    opt(c.val_loss, 4),
                    c.val_accuracy.map_or("-".into(), |a| format!("{:.2}%", 100.0 * a))
                );
            }
            for (i, x) in d.decisions.iter().enumerate() {
                // A rejected growth left the model as it was: the count it
                // would have had is not the model's.
                let params = match x.outcome.as_str() {
                    "accepted" if x.params_after != x.params_before => {
                        format!("{} -> {} parameters", x.params_before, x.params_after)
                    }
                    "rejected" if x.params_after != x.params_before && x.params_after > 0 => {
                        format!("{} parameters kept; the growth would have made {}", x.params_before, x.params_after)
                    }
                    _ => format!("{} parameters", x.params_before),
                };
                let losses = match (x.loss_before, x.loss_after) {
                    (Some(a), Some(b)) => format!(", probe loss {a:.6} -> {b:.6}"),
                    _ => String::new(),
                };
                println!(
                    "  decision {i}: step {} (epoch {}): {} on {} -> {} ({params}{losses}){}{}",
                    x.step,
                    x.epoch,
                    x.action,
                    x.trigger,
                    x.outcome,
                    if x.reason.is_empty() { String::new() } else { format!(": {}", x.reason) },
                    if x.ir_after.is_empty() { String::new() } else { "; IR before and after recorded".into() }
                );
            }
            if let Some(e) = &r.error {
                println!("  error: {e}");
            }
        }
        RunsCommand::Compare { ids } => {
            if ids.len() < 2 {
                return Err("compare takes two runs or more".into());
            }
            let rows: Vec<_> = ids
                .iter()
                .map(|&i| registry.get(i))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| e.to_string())?;
            // The lines, then printed with columns as wide as their widest
            // entry (a deep model's structure broke the alignment).
            let table = std::cell::RefCell::new(Vec::<(String, Vec<String>)>::new());
            let line = |what: &str, f: &dyn Fn(&aicf_compiler::train::registry::RunDetail) -> String| {
                table.borrow_mut().push((what.to_string(), rows.iter().map(f).collect()));
            };
            line("run", &|d| d.run.id.to_string());
            line("status", &|d| d.run.status.clone());
            line("problem", &|d| d.run.problem.name.clone());
            // A grown run: what it started as, and what it ended as (the
            // list shows both; compare showed the start alone), named as
            // the list names them.
            fn grown(
                d: &aicf_compiler::train::registry::RunDetail,
            ) -> Option<&aicf_compiler::train::registry::Fingerprint> {
                d.run.final_fingerprint.as_ref().filter(|f| {
                    f.widths != d.run.fingerprint.widths
                        || f.kind != d.run.fingerprint.kind
                        || f.params != d.run.fingerprint.params
                })
            }
            line("structure", &|d| start_and_end(&d.run.fingerprint, grown(d)).0);
            if rows.iter().any(|d| grown(d).is_some()) {
                line("grown to", &|d| {
                    let (start, end) = start_and_end(&d.run.fingerprint, grown(d));
                    match end {
                        Some(end) if end != start => end,
                        // (Grown within its terms, or its parameters alone.)
                        _ if grown(d).is_some() => format!("{start}, grown"),
                        _ => "-".into(),
                    }
                });
            }
            line("params", &|d| match grown(d) {
                Some(f) => format!("{} -> {}", d.run.fingerprint.params, f.params),
                None => d.run.fingerprint.params.to_string(),
            });
            line("optimizer", &|d| format!("{} {}", d.run.settings.optimizer, d.run.settings.lr));
            line("precision", &|d| d.run.settings.precision.clone());
            line("batch", &|d| d.run.settings.batch.to_string());
            line("seed", &|d| d.seed.to_string());
            // What else tells them apart, a line each where they differ.
            let beyond: Vec<Vec<(&str, String)>> = rows.iter().map(|d| settings_beyond(&d.run.settings)).collect();
            let mut keys: Vec<&str> = beyond.iter().flatten().map(|(k, _)| *k).collect();
            keys.dedup();
            for key in keys.iter().copied().collect::<std::collections::BTreeSet<_>>() {
                let value = |b: &Vec<(&str, String)>| b.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
                if beyond.iter().any(|b| value(b) != value(&beyond[0])) {
                    // (Left out where it is the default: said as such.)
                    let cells: Vec<String> = beyond
                        .iter()
                        .zip(&rows)
                        .map(|(b, d)| {
                            value(b).unwrap_or_else(|| {
                                let s = &d.run.settings;
                                match key {
                                    "lr schedule" => s.lr_schedule.clone().unwrap_or_else(|| "-".into()),
                                    "clip norm" => "none".into(),
                                    // (Adam has no momentum of SGD's.)
                                    "momentum" if s.optimizer.starts_with("adam") => "-".into(),
                                    "momentum" | "weight decay" => "0".into(),
                                    "micro-batches" if s.accumulate.is_some() => "1".into(),
                                    "replicas" => "1".into(),
                                    "betas" if s.betas.is_some() => "0.9,0.999".into(),
                                    "eps" if s.eps.is_some() => "1e-8".into(),
                                    "gemm" => "measured".into(),
                                    _ => "-".into(),
                                }
                            })
                        })
                        .collect();
                    table.borrow_mut().push((key.to_string(), cells));
                }
            }
            if rows.iter().any(|d| d.run.settings.standardize != rows[0].run.settings.standardize) {
                line("standardized", &|d| if d.run.settings.standardize { "yes" } else { "no" }.into());
            }
            line("epochs", &|d| d.run.epochs.map_or("-".into(), |e| e.to_string()));
            line("training FLOPs", &|d| d.run.train_flops.map_or("-".into(), |f| format!("{f:.3e}")));
            line("best val loss", &|d| opt(d.run.best_val_loss, 4));
            line("final val loss", &|d| opt(d.run.final_val_loss, 4));
            line("final accuracy", &|d| d.run.final_val_accuracy.map_or("-".into(), |a| format!("{:.2}%", 100.0 * a)));
            line("decisions", &|d| d.decisions.len().to_string());
            if rows.iter().any(|d| !d.run.tags.is_empty()) {
                line("tags", &|d| if d.run.tags.is_empty() { "-".into() } else { d.run.tags.join(",") });
            }
            let table = table.into_inner();
            // Each run's column as wide as its widest entry (one long
            // schedule widened every column).
            let widths: Vec<usize> = (0..rows.len())
                .map(|k| {
                    table.iter().filter_map(|(_, cells)| cells.get(k)).map(|c| c.chars().count()).max().unwrap_or(0)
                })
                .collect();
            for (what, cells) in table {
                print!("{what:<16}");
                for (c, width) in cells.iter().zip(&widths) {
                    print!("  {c:>width$}");
                }
                println!();
            }
        }
        // (Each written above.)
        RunsCommand::Tag { .. }
        | RunsCommand::Note { .. }
        | RunsCommand::Delete { .. }
        | RunsCommand::Check
        | RunsCommand::Schema => {}
    }
    Ok(())
}

/// A run's settings beyond the optimizer, rate, precision and batch, where
/// they are not the defaults: momentum (and Nesterov's), weight decay, the
/// schedule, Adam's betas and eps, the clip norm, accumulation, a text's
/// windows (absent in older records).
fn settings_beyond(s: &aicf_compiler::train::registry::Settings) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if s.momentum != 0.0 {
        out.push(("momentum", format!("{}{}", s.momentum, if s.nesterov { " (Nesterov)" } else { "" })));
    }
    if s.weight_decay != 0.0 {
        out.push(("weight decay", s.weight_decay.to_string()));
    }
    if let Some(schedule) = s.lr_schedule.as_deref().filter(|l| *l != "constant") {
        out.push(("lr schedule", schedule.to_string()));
    }
    if let Some((b1, b2)) = s.betas.filter(|&b| b != (0.9, 0.999)) {
        out.push(("betas", format!("{b1},{b2}")));
    }
    if let Some(eps) = s.eps.filter(|&e| e != 1e-8) {
        out.push(("eps", format!("{eps:e}")));
    }
    if let Some(c) = s.clip_norm {
        out.push(("clip norm", c.to_string()));
    }
    if let Some(a) = s.accumulate.filter(|&a| a > 1) {
        out.push(("micro-batches", a.to_string()));
    }
    // (A data-parallel run's global batch is the replicas' batches: its
    // `batch` row alone read as one process's.)
    if s.replicas > 1 {
        out.push(("replicas", s.replicas.to_string()));
    }
    if let Some(w) = s.windows_per_epoch {
        out.push(("windows an epoch", w.to_string()));
    }
    if let Some(w) = s.eval_windows {
        out.push(("held-out windows", w.to_string()));
    }
    if let Some(g) = &s.gemm {
        out.push(("gemm", g.clone()));
    }
    if s.standardize_targets {
        out.push(("targets", "standardized".to_string()));
    }
    if let Some(a) = &s.augment {
        out.push(("augment", a.clone()));
    }
    if let Some(d) = &s.device {
        out.push(("device", d.clone()));
    }
    out
}

/// `aicf runs check`: SQLite's check of the registry's pages, then every
/// run read as `runs show` reads it. A damaged registry is reported, not
/// refused at its first bad page: what SQLite found, and which runs still
/// read.
fn check_runs(path: &Path) -> Result<()> {
    use aicf_compiler::train::registry::Runs;
    let checked = Runs::check(path).map_err(|e| e.to_string())?.ok_or_else(|| {
        format!("{}: no run registry there (no file, or an empty one; aicf train records its runs)", path.display())
    })?;
    if !checked.pages.is_empty() {
        println!("{}: SQLite's integrity check finds it damaged:", path.display());
        for line in checked.pages.iter().flat_map(|p| p.lines()) {
            println!("  {line}");
        }
    }
    let (runs, unreadable) = match &checked.read {
        Ok((runs, unreadable)) => (*runs, unreadable.as_slice()),
        Err(e) => {
            return Err(format!(
                "{}: no run reads (the list of runs does not: {e}); move the file aside to start a new registry \
                 there, or give another with --runs-db",
                path.display()
            ));
        }
    };
    for e in unreadable {
        eprintln!("aicf: {e}");
    }
    let read = runs - unreadable.len();
    match (checked.pages.is_empty(), unreadable.is_empty()) {
        (true, true) => {
            println!("{}: ok ({runs} runs read)", path.display());
            Ok(())
        }
        (true, false) => Err(format!(
            "{}: {} of {runs} runs do not read (above); the database itself is whole",
            path.display(),
            unreadable.len()
        )),
        (false, _) => Err(format!(
            "{}: the file is damaged (SQLite's findings above); {read} of its {runs} runs still read{}; move it \
             aside to start a new registry there",
            path.display(),
            match &checked.opens {
                Ok(()) => " whole (their curves and decisions too, as `aicf runs show` reads them; `aicf runs list` \
                           lists every row that reads)"
                    .to_string(),
                Err(e) => format!(", but the other commands stop at the damage ({e})"),
            }
        )),
    }
}

/// A run's structure: its kind and every width.
fn structure(f: &aicf_compiler::train::registry::Fingerprint) -> String {
    let widths = f.widths.iter().map(|w| w.to_string()).collect::<Vec<_>>().join("-");
    format!("{} {widths}", f.kind)
}

/// [`structure`], a deep model's widths cut short (nanoGPT's row of `runs
/// list` was 250 characters wide): the first three, the last, and how
/// many; `runs show` gives them all.
fn short_structure(f: &aicf_compiler::train::registry::Fingerprint) -> String {
    // A transformer LM in the proposer's terms (`lm 2x64`), short or not
    // (`transformer 65-64-32-32-32-32-128-32-65` beside `lm 1x32` was the
    // same structure): its widths read the same before and after a stream
    // widening.
    if f.kind == "transformer" && !f.structure.is_empty() {
        return f.structure.clone();
    }
    let full = structure(f);
    if full.chars().count() <= 40 || f.widths.len() <= 4 {
        return full;
    }
    let w = &f.widths;
    format!("{} {}-{}-{}-...-{} ({} widths)", f.kind, w[0], w[1], w[2], w[w.len() - 1], w.len())
}

/// A run's structure as it started and, where it grew into another, as it
/// ended: both in the proposer's terms (`lm 2x64`) where either is (a
/// small LM's widths fit them, its grown one's may not), else both short
/// (`transformer 65-64-...`). `runs list` and `runs compare` name runs
/// alike.
fn start_and_end(
    start: &aicf_compiler::train::registry::Fingerprint,
    end: Option<&aicf_compiler::train::registry::Fingerprint>,
) -> (String, Option<String>) {
    let short = short_structure(start);
    let Some(f) = end.filter(|f| f.widths != start.widths || f.kind != start.kind) else { return (short, None) };
    let end = short_structure(f);
    let terms = f.kind == "transformer" && !start.structure.is_empty() && !f.structure.is_empty();
    if terms && (short == start.structure || end == f.structure) {
        (start.structure.clone(), Some(f.structure.clone()))
    } else {
        (short, Some(end))
    }
}

/// `aicf propose`.
#[allow(clippy::too_many_arguments)]
fn propose(
    (data, label): (&Path, Option<&str>),
    task: Option<&str>,
    budget: Option<f64>,
    structure: Option<&str>,
    neighbours: usize,
    next: bool,
    (output, force): (&Path, bool),
    policy: Option<PathBuf>,
    json: Option<PathBuf>,
    runs_db: Option<PathBuf>,
) -> Result<()> {
    use aicf_compiler::codegen::write_atomically;
    use aicf_compiler::train::data::Signature;
    use aicf_compiler::train::propose::{self, ProposeOptions, Structure};
    use aicf_compiler::train::registry::Runs;
    if let Some(b) = budget
        && !(b.is_finite() && b > 0.0)
    {
        return Err(format!("--budget {b}: a budget is a finite positive number of FLOPs"));
    }
    let outputs = [("the model", Some(output)), ("the policy", policy.as_deref()), ("the JSON", json.as_deref())];
    let registry = runs_db.clone().or_else(Runs::default_path);
    for (i, &(what, p)) in outputs.iter().enumerate() {
        if let Some(p) = p
            && p.canonicalize().ok().is_some_and(|p| data.canonicalize().ok() == Some(p))
        {
            return Err(format!("{}: {what} would overwrite the data", p.display()));
        }
        if let (Some(p), Some(r)) = (p, registry.as_deref())
            && Runs::would_overwrite(p, r)
        {
            return Err(format!(
                "{}: {what} would overwrite the run registry (or a file SQLite keeps beside it)",
                p.display()
            ));
        }
        // Every output's directory exists (made, as train's --out is)
        // before anything is written: no model is left behind by a policy
        // that could not be.
        if let Some(p) = p {
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    format!("{}: {what} goes in {}, which cannot be made ({e})", p.display(), dir.display())
                })?;
            }
            if !dir.is_dir() {
                return Err(format!("{}: {what} goes in {}, which is not a directory", p.display(), dir.display()));
            }
        }
        if let Some(p) = p {
            aicf_compiler::train::refuse_overwriting_weights(p, what).map_err(|e| format!("{}: {e}", p.display()))?;
            if let Some((other, _)) =
                outputs[..i].iter().find(|(_, q)| q.is_some_and(|q| aicf_compiler::train::same_path(p, q)))
            {
                return Err(format!("{}: {what} and {other} would be written to the same file", p.display()));
            }
        }
        if let Some(p) = p
            && p.is_dir()
        {
            return Err(format!("{}: {what} is written to a file, and this is a directory", p.display()));
        }
    }
    // A file the proposal would replace that no proposal wrote, or one a
    // proposal wrote and the user edited since (its content no longer its
    // recorded hash), is refused without --force: it was replaced without
    // a word.
    // (A file larger than any proposal is none: not read whole.)
    let ours = |p: &Path, mark: &dyn Fn(&str) -> bool| {
        if std::fs::metadata(p)?.len() > 64 << 20 {
            return Ok(false);
        }
        std::fs::read(p).map(|b| mark(String::from_utf8_lossy(&b).as_ref()))
    };
    let model_mark = |t: &str| {
        t.lines().next().is_some_and(|l| l.starts_with("// ") && l.ends_with("proposed by aicf propose:"))
            && propose::unedited(t, propose::PROPOSED_CONTENT, true)
    };
    let policy_mark = |t: &str| {
        t.starts_with(propose::POLICY_HEADER) && propose::unedited(t, propose::PROPOSED_POLICY_CONTENT, false)
    };
    for (file, flag, mark) in
        [(Some(output), "-o", &model_mark as &dyn Fn(&str) -> bool), (policy.as_deref(), "--policy", &policy_mark)]
    {
        if let Some(file) = file
            && !force
            && ours(file, mark).is_ok_and(|ours| !ours)
        {
            return Err(format!(
                "{flag} {}: the file is there, and is no earlier proposal as it wrote it (another file, or one \
                 edited since); give another file, or --force to replace it",
                file.display()
            ));
        }
    }
    if structure.is_some() && next {
        return Err("--next: a --structure proposal reads no past runs, so it has no search to go on with".into());
    }
    if structure.is_some() && policy.is_some() {
        return Err("--policy: a --structure proposal derives no policy (it reads no past runs)".into());
    }
    let (shape, problem, sig, note) = propose::describe(data, task, label).map_err(|e| e.to_string())?;
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    let proposal = match structure {
        Some(s) => {
            let s = Structure::parse(s).map_err(|e| e.to_string())?;
            propose::Proposal::asked(&s, &shape, &problem, budget).map_err(|e| e.to_string())?
        }
        None => {
            let path = runs_db.or_else(Runs::default_path).ok_or_else(|| {
                format!(
                    "no run registry: {} and no --runs-db was given (or give --structure)",
                    Runs::no_default_reason()
                )
            })?;
            let runs = match Runs::read(&path).map_err(|e| e.to_string())? {
                Some(registry) => {
                    let (rows, unread) = registry.list_readable().map_err(|e| e.to_string())?;
                    // A run whose curve or decisions do not read is left
                    // out, named, as a run whose row does not; one note for
                    // each error (a damaged page said the same for each of
                    // twelve runs).
                    let mut errors: Vec<String> = unread.iter().map(|e| e.to_string()).collect();
                    let mut runs = Vec::new();
                    for r in rows.iter().filter(|r| r.status == "finished") {
                        match registry.get(r.id) {
                            Ok(d) => runs.push(d),
                            Err(e) => errors.push(e.to_string()),
                        }
                    }
                    let mut said: Vec<(String, usize)> = Vec::new();
                    for e in errors {
                        match said.iter_mut().find(|(m, _)| *m == e) {
                            Some((_, n)) => *n += 1,
                            None => said.push((e, 1)),
                        }
                    }
                    for (e, n) in said {
                        let what = if n == 1 { "it".to_string() } else { format!("these {n} runs") };
                        eprintln!("aicf: note: {e}; the proposal does not draw on {what}");
                    }
                    runs
                }
                None => {
                    eprintln!("aicf: {}: no run registry yet; proposing the default", path.display());
                    Vec::new()
                }
            };
            if neighbours == 0 {
                return Err("--neighbours 0: the proposal draws on at least 1 past problem".into());
            }
            let options = ProposeOptions { neighbours, budget, next };
            propose::propose(&shape, &problem, &runs, &options).map_err(|e| e.to_string())?
        }
    };
    // A proposal that grows needs its policy: beside the model unless asked
    // elsewhere (see `propose::policy_path`).
    let policy = match policy {
        Some(p) => Some(p),
        None => propose::policy_path(output, proposal.grow)?,
    };
    let module = proposal.module.as_ref().ok_or("no model was built")?;
    // The model must feed from this data as `aicf train` will feed it:
    // it takes what the model the data was loaded for takes.
    let takes = Signature::of_source(&module.text, &output.display().to_string()).map_err(|e| e.to_string())?;
    if takes != sig {
        return Err(format!("internal error: the proposed {} does not take what the data feeds", proposal.structure));
    }
    for line in &proposal.explanation {
        println!("{line}");
    }
    let mut text = format!("// {} for {}, proposed by aicf propose:\n", proposal.structure, data.display());
    for line in &proposal.explanation {
        text += &format!("//   {line}\n");
    }
    // (The module's hash: a later proposal tells an edited one by it.)
    text += &format!("{}{}\n", propose::PROPOSED_CONTENT, aicf_runtime::artifact::ir_hash(&module.text));
    text += &module.text;
    write_atomically(output, text.as_bytes()).map_err(|e| e.to_string())?;
    let params: usize = module.params.iter().map(|p| p.spec.num_elements()).sum();
    println!("wrote {} ({}, {params} parameters)", output.display(), proposal.structure);
    // Its parameters with Adam's two moments and the gradients, in f32: a
    // model this machine cannot hold says so now, not when it trains.
    let bytes = (params as u64).saturating_mul(16);
    if let Some(free) = aicf_runtime::host::available_memory().filter(|&free| bytes > free) {
        eprintln!(
            "note: training it needs at least {:.1} GiB (parameters, gradients and Adam's state in f32); this \
             machine has {:.1} GiB available",
            bytes as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        );
    }
    if let Some(p) = &policy {
        let policy_text = format!(
            "{}{}{}\n",
            proposal.policy,
            propose::PROPOSED_POLICY_CONTENT,
            aicf_runtime::artifact::ir_hash(&proposal.policy)
        );
        write_atomically(p, policy_text.as_bytes()).map_err(|e| e.to_string())?;
        println!("wrote {} (aicf train --adapt)", p.display());
    } else {
        // The explanation's growth policy, which a plain proposal writes
        // only where asked: said, as it reads as written.
        if proposal.policy.contains("op = \"widen\"") {
            println!("its growth policy is not written (the proposal does not grow as it is): --policy FILE writes it");
        }
        // An earlier proposal's policy beside the model, left as it was:
        // said, as it is not this proposal's.
        let beside = output.with_extension("toml");
        if beside != *output && std::fs::read_to_string(&beside).is_ok_and(|t| t.starts_with(propose::POLICY_HEADER)) {
            eprintln!(
                "note: {} is an earlier proposal's growth policy; this proposal does not grow, and wrote none (delete it, or it may be given to aicf train --adapt with this model by mistake)",
                beside.display()
            );
        }
    }
    if let Some(j) = &json {
        let text = serde_json::to_string_pretty(&proposal).map_err(|e| e.to_string())?;
        write_atomically(j, text.as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::forward_without_abort_help;

    /// An import note's list: the first few, and a count of the rest.
    #[test]
    fn a_notes_list_counts_what_it_leaves_out() {
        let names = |n: usize| (0..n).map(|k| format!("'w{k}'")).collect::<Vec<_>>().into_iter();
        assert_eq!(super::first_few(names(2), 4), "'w0', 'w1'");
        assert_eq!(super::first_few(names(6), 4), "'w0', 'w1', 'w2', 'w3' and 2 more");
    }

    /// A loop unrolled over more than 256 iterations is named once; a
    /// short one and an If are not.
    #[test]
    fn long_loops_are_named_once() {
        let b = |a: &str, d: &str| (a.to_string(), d.to_string());
        let branches = [
            b("Loop 'scan'", "512 iterations"),
            b("Loop 'short'", "8 iterations"),
            b("If 'squeeze'", "then"),
            b("Loop 'scan'", "512 iterations"),
        ];
        assert_eq!(super::long_loops(&branches), [("'scan'", 512)]);
    }

    /// The batch-axis hint is the exporter's own API (a JAX user was told
    /// PyTorch's `dynamic_axes`).
    #[test]
    fn the_batch_axis_hint_is_the_exporters() {
        use super::batch_axis_hint;
        assert_eq!(batch_axis_hint("pytorch", "x"), "dynamic_axes={'x': {0: 'batch'}}");
        assert!(batch_axis_hint("jax2onnx", "in_0").contains("to_onnx(fn, [(\"B\", ...)])"));
        assert!(batch_axis_hint("tf2onnx", "x").contains("tf.TensorSpec((None, ...))"));
        assert!(batch_axis_hint("", "x").ends_with("from PyTorch, dynamic_axes={'x': {0: 'batch'}}"));
    }

    fn forwarded(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        forward_without_abort_help(input, &mut out, 2);
        out
    }

    /// Open MPI's MPI_ABORT help block and its aggregated repeat are left
    /// out; the ranks' errors, and every other block (which rank a signal
    /// ended), pass whole; a cut-short block, a last line without a newline
    /// and bytes that are not UTF-8 pass as they came.
    #[test]
    fn only_the_abort_help_is_left_out_of_mpiruns_stderr() {
        let dashes = "-".repeat(74);
        let abort = format!(
            "aicf: error (rank 1 of 2): x.csv: No such file\n{dashes}\nMPI_ABORT was invoked on rank 1 in communicator \
             MPI_COMM_WORLD\nwith errorcode 1.\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n\
             {dashes}\naicf: error (rank 0 of 2): x.csv: No such file\n[vm:1] 1 more process has sent help message \
             help-mpi-api.txt / mpi-abort\n[vm:1] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help \
             / error messages\n"
        );
        assert_eq!(
            String::from_utf8(forwarded(abort.as_bytes())).unwrap(),
            "aicf: error (rank 1 of 2): x.csv: No such file\naicf: the same error on rank 0 of 2\n"
        );
        let signal = format!(
            "{dashes}\nmpirun noticed that process rank 1 with PID 7 on node vm exited on signal 9 (Killed).\n{dashes}\n"
        );
        assert_eq!(forwarded(signal.as_bytes()), signal.as_bytes());
        // Advice after another aggregated message is not the abort's.
        let other = "[vm:1] 1 more process has sent help message help-x.txt / y\n[vm:1] Set MCA parameter \
                     \"orte_base_help_aggregate\" to 0 to see all help / error messages\n";
        assert_eq!(forwarded(other.as_bytes()), other.as_bytes());
        let cut = format!("{dashes}\nMPI_ABORT was invoked on rank 1\nwith errorcode 1.");
        assert_eq!(forwarded(cut.as_bytes()), cut.as_bytes());
        let raw = b"a stray line\n\xff\xfe not utf-8\nlast without a newline";
        assert_eq!(forwarded(raw), raw);
        let lone = format!("{dashes}\n");
        assert_eq!(forwarded(lone.as_bytes()), lone.as_bytes());
        // Another rank's line cut by the block (mpirun passes output on in
        // pieces): the block goes, the line is whole again.
        let cut_line = format!(
            "aicf: error (rank {dashes}\nMPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode \
             1.\n{dashes}\n1 of 2): x.csv: No such file\n"
        );
        assert_eq!(
            String::from_utf8(forwarded(cut_line.as_bytes())).unwrap(),
            "aicf: error (rank 1 of 2): x.csv: No such file\n"
        );
        // Open MPI's runtime tripping over its teardown is left out; its
        // other error logs pass.
        let teardown = "aicf: error (rank 0 of 2): x.csv: No such file\n[vm:05306] [[30788,0],0] ORTE_ERROR_LOG: Out \
                        of resource in file ../../../orte/util/show_help.c at line 507\n[vm:05306] [[30788,0],0] \
                        ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ../../../orte/orted/\
                        orted_comm.c at line 1080\n[vm:05306] [[30788,0],0] ORTE_ERROR_LOG: Data unpack had \
                        inadequate space in file ../dss/dss_unpack.c at line 80\n";
        assert_eq!(
            String::from_utf8(forwarded(teardown.as_bytes())).unwrap(),
            "aicf: error (rank 0 of 2): x.csv: No such file\n"
        );
        let other = "[vm:1] [[3,0],0] ORTE_ERROR_LOG: Not found in file ../ess_hnp_module.c at line 320\n";
        assert_eq!(forwarded(other.as_bytes()), other.as_bytes());
        // Before any rank failed, they pass (versions that differ).
        let first =
            "[vm:1] [[3,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file x.c at line 1\n";
        assert_eq!(forwarded(first.as_bytes()), first.as_bytes());
    }

    /// What each rank says alike is said once: an error in the same words
    /// (its later lines too), then which
    /// ranks said it too; a note once per round of ranks. Errors that
    /// differ, and a note said twice by each rank, pass.
    #[test]
    fn what_every_rank_says_alike_is_said_once() {
        let ranks = "note: --conv does nothing here\nnote: --conv does nothing here\n\
                     aicf: error (rank 2 of 3): bad.csv: rows have 2 features\n  the model takes 64\n\
                     aicf: error (rank 0 of 3): bad.csv: rows have 2 features\n  the model takes 64\n\
                     aicf: error (rank 1 of 3): other.csv: missing\n\
                     note: --conv does nothing here\n\
                     aicf: error (rank 1 of 3): bad.csv: rows have 2 features\n  the model takes 64\n\
                     note: --conv does nothing here\n";
        let mut out = Vec::new();
        forward_without_abort_help(ranks.as_bytes(), &mut out, 3);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "note: --conv does nothing here\naicf: error (rank 2 of 3): bad.csv: rows have 2 features\n  the model \
             takes 64\naicf: error (rank 1 of 3): other.csv: missing\nnote: --conv does nothing here\n\
             aicf: the same error on ranks 0, 1 of 3\n"
        );
    }

    /// After rank 0's words for an interrupted run, mpirun's reports of the
    /// ranks' exit status are left out, and the words are seen; before
    /// them (a rank that failed on its own) those reports pass.
    #[test]
    fn an_interrupted_runs_exit_reports_are_left_out() {
        let dashes = "-".repeat(74);
        let reports = format!(
            "{dashes}\nPrimary job  terminated normally, but 1 process returned\na non-zero exit code.\n{dashes}\n\
             {dashes}\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job \
             to be terminated.\n  Exit code:    143\n{dashes}\n"
        );
        let words = "aicf: error: interrupted at epoch 3, step 434 of 436; ckpt/last.safetensors holds epoch 2\n";
        let mut out = Vec::new();
        assert!(forward_without_abort_help(format!("{words}{reports}").as_bytes(), &mut out, 2));
        assert_eq!(String::from_utf8(out).unwrap(), words);
        let mut out = Vec::new();
        assert!(!forward_without_abort_help(reports.as_bytes(), &mut out, 2));
        assert_eq!(out, reports.as_bytes());
    }
}

/// What a resumed checkpoint's record holds (`read`), or, where it does
/// not read, the process ends saying why.
fn recorded_or_exit<T>(checkpoint: &Path, read: aicf_compiler::train::Result<Option<T>>) -> Option<T> {
    read.unwrap_or_else(|e| {
        eprintln!("aicf: error: {e}");
        previous_checkpoint_note(checkpoint, &e.to_string());
        std::process::exit(1)
    })
}

/// After an error saying that `checkpoint` (a resumed run's) does not read,
/// a note naming the checkpoint before it, where the directory keeps one.
fn previous_checkpoint_note(checkpoint: &Path, error: &str) {
    if error.contains(&format!("{}: not a valid checkpoint", checkpoint.display()))
        && let Some(note) = aicf_compiler::train::run::previous_checkpoint_note(checkpoint)
    {
        eprintln!("note: {note}");
    }
}
