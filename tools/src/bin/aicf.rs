//! `aicf`: compile a model to a CPU artifact, or train it on a data set.
//!
//! ```text
//! aicf compile examples/mlp/digits_mlp.mlir -o target/digits.aicf
//! aicf compile examples/mlp/digits_mlp.mlir --emit ll        # print a stage
//! aicf train examples/mlp/digits_mlp.mlir --data data/digits.csv.gz \
//!     --optimizer adam --lr 3e-3 --epochs 20 --out target/run
//! ```

use aicf_compiler::{
    CompilerContext,
    adapt::{Action, Adaptive, Outcome, Policy, Progress},
    codegen::{GpuOptions, KernelCache, ptxas, validate_ptx},
    pipeline::{self, TrainOptions},
    run_pipeline,
    trainer::{Options, TrainError, Trainer},
};
use aicf_runtime::{
    artifact::{self, Role},
    registry::Choice,
    session::Tensor,
};
use clap::{Parser, Subcommand, ValueEnum};
use std::io::{Read, Write};
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

#[derive(Clone, Copy, ValueEnum)]
enum Target {
    Cpu,
    Cuda,
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
    /// The model: an hl module with @forward and @loss.
    model: PathBuf,
    #[arg(long, value_enum, default_value = "adam")]
    optimizer: Optimizer,
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    #[arg(long, default_value_t = 0.0)]
    momentum: f64,
}

#[derive(Subcommand)]
enum Command {
    /// Compile a model's train step for the CPU (or print one stage).
    Compile {
        #[command(flatten)]
        compile: ModelArgs,
        /// Where to write the artifact (manifest.json + kernels.so).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print this stage's IR instead of writing an artifact.
        #[arg(long, value_enum)]
        emit: Option<Stage>,
        /// Compile for this batch size instead of the model's (hl-set-batch):
        /// a variant that runs on the same parameters and checkpoints.
        #[arg(long)]
        batch: Option<usize>,
        /// What to compile for: the host CPU (kernels.so) or NVIDIA GPUs
        /// (PTX for sm_80 and sm_90, each checked by ptxas when one is found).
        #[arg(long, value_enum, default_value_t = Target::Cpu)]
        target: Target,
        /// Print how long each stage of the compile took.
        #[arg(long)]
        timing: bool,
    },
    /// Train a classifier on a CSV data set (features..., label per row).
    Train {
        #[command(flatten)]
        compile: ModelArgs,
        /// CSV or gzip-compressed CSV: one row per example, the label last.
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value_t = 1e-3)]
        lr: f64,
        #[arg(long, default_value_t = 10)]
        epochs: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Fraction of the rows held out for validation (a seeded shuffle).
        #[arg(long, default_value_t = 0.2)]
        val_split: f64,
        /// Worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Run directory: metrics.jsonl, plot.svg and the compiled artifact.
        #[arg(long, default_value = "target/aicf-run")]
        out: PathBuf,
        /// Save `last.safetensors` here after every epoch (atomically).
        #[arg(long)]
        checkpoint_dir: Option<PathBuf>,
        /// Continue from `<checkpoint-dir>/last.safetensors`: parameters,
        /// optimizer state, epoch and data order, bit for bit.
        #[arg(long, requires = "checkpoint_dir")]
        resume: bool,
        /// Change the model while it trains by this policy (TOML: rules of
        /// a trigger and a growth action; see examples/grow/policy.toml).
        /// Decisions go to `<out>/decisions.jsonl`.
        #[arg(long)]
        adapt: Option<PathBuf>,
    },
    /// Accuracy of a checkpoint on a CSV data set (every row).
    Eval {
        #[command(flatten)]
        compile: ModelArgs,
        #[arg(long)]
        data: PathBuf,
        /// A `last.safetensors` written by `aicf train --checkpoint-dir`.
        #[arg(long)]
        checkpoint: PathBuf,
        #[arg(long, default_value_t = 0)]
        threads: usize,
        #[arg(long, default_value = "target/aicf-run")]
        out: PathBuf,
    },
    /// Time the compiled train step on a fixed random batch (median of
    /// `--steps` after warm-up).
    Bench {
        #[command(flatten)]
        compile: ModelArgs,
        /// Learning rate; default that of the baselines' spec (SGD 0.1,
        /// Adam 1e-3), so the timed steps train rather than diverge.
        #[arg(long)]
        lr: Option<f64>,
        #[arg(long, default_value_t = 50)]
        steps: usize,
        #[arg(long, default_value_t = 0)]
        threads: usize,
        #[arg(long, default_value = "target/aicf-bench")]
        out: PathBuf,
        /// Print the time of each kernel call, slowest first.
        #[arg(long)]
        profile: bool,
        /// Run every GEMM with this candidate instead of the registry's
        /// measured choice: generated, library, library-swapped or gemm-rs.
        #[arg(long, value_parser = gemm_candidate)]
        gemm: Option<Choice>,
    },
}

type Result<T> = std::result::Result<T, String>;

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile { compile, output, emit, batch, target, timing } => {
            run_compile(&compile, output, emit, batch, target, timing)
        }
        Command::Train { compile, data, lr, epochs, seed, val_split, threads, out, checkpoint_dir, resume, adapt } => {
            let run = Run { lr, epochs, seed, val_split, threads, checkpoint_dir, resume, adapt };
            train(&compile, &data, &run, &out)
        }
        Command::Eval { compile, data, checkpoint, threads, out } => eval(&compile, &data, &checkpoint, threads, &out),
        Command::Bench { compile, lr, steps, threads, out, profile, gemm } => {
            let lr = lr.unwrap_or(if compile.optimizer.name() == "adam" { 1e-3 } else { 0.1 });
            bench(&compile, lr, steps, threads, &out, profile, gemm)
        }
    };
    if let Err(e) = result {
        eprintln!("aicf: error: {e}");
        std::process::exit(1);
    }
}

fn train_options(c: &ModelArgs) -> TrainOptions {
    TrainOptions {
        optimizer: c.optimizer.name().into(),
        momentum: c.momentum,
        weight_decay: c.weight_decay,
        memory_budget: None,
    }
}

fn run_compile(
    c: &ModelArgs,
    output: Option<PathBuf>,
    emit: Option<Stage>,
    batch: Option<usize>,
    target: Target,
    timing: bool,
) -> Result<()> {
    let source = read(&c.model)?;
    let name = c.model.display().to_string();
    let options = train_options(c);
    let Some(stage) = emit else {
        let out = output.unwrap_or_else(|| c.model.with_extension("aicf"));
        let started = Instant::now();
        let target = match target {
            Target::Cpu => pipeline::Target::Cpu(KernelCache::new(KernelCache::default_dir(&out))),
            Target::Cuda => pipeline::Target::Cuda(GpuOptions::default()),
        };
        let compiled =
            pipeline::compile_source(&source, &name, &options, batch, &target, &out).map_err(|e| e.to_string())?;
        let manifest = &compiled.manifest;
        let seconds = started.elapsed().as_secs_f64();
        if let pipeline::Target::Cuda(_) = target {
            if ptxas().is_some() {
                for chip in ["sm_80", "sm_90"] {
                    validate_ptx(&out.join(format!("kernels.{chip}.ptx")), chip).map_err(|e| e.to_string())?;
                }
                println!("ptxas accepts the PTX for sm_80 and sm_90");
            } else {
                println!("ptxas not found: the PTX was not assembled here (run `make setup`)");
            }
        }
        let kernels: usize = manifest.functions.iter().map(|f| f.calls.len()).sum();
        println!(
            "compiled {name} -> {} ({} functions, {kernels} kernel calls, {} distinct kernels, {} compiled, {}) in {:.2} s",
            out.display(),
            manifest.functions.len(),
            compiled.kernels,
            compiled.compiled_kernels,
            manifest.target,
            seconds
        );
        if timing {
            print!("{}", compiled.timings.report());
        }
        return Ok(());
    };
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(&source, &name).map_err(|e| e.to_string())?;
    if let Some(b) = batch {
        run_pipeline(&ctx, &mut module, &pipeline::set_batch(b)).map_err(|e| e.to_string())?;
    }
    match stage {
        Stage::Hl => {}
        Stage::Fused => run_pipeline(&ctx, &mut module, &options.fusion_pipeline()).map_err(|e| e.to_string())?,
        Stage::Ll => run_pipeline(&ctx, &mut module, &options.train_pipeline()).map_err(|e| e.to_string())?,
    }
    // A closed pipe (`| head`) ends the output quietly.
    match writeln!(std::io::stdout().lock(), "{}", module.as_operation()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing the IR: {e}")),
        _ => Ok(()),
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Rows of (features, label) from a CSV file, gzip-compressed or not.
fn load_csv(path: &Path) -> Result<Vec<(Vec<f64>, i64)>> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    let read = if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file).read_to_string(&mut text)
    } else {
        std::io::BufReader::new(file).read_to_string(&mut text)
    };
    read.map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let values: Vec<f64> = line
            .split(',')
            .map(|v| v.trim().parse::<f64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
        let Some((&label, features)) = values.split_last() else { continue };
        if label.fract() != 0.0 || label < 0.0 {
            return Err(format!("{}:{}: the label {label} is not a class index", path.display(), n + 1));
        }
        if let Some(first) = rows.first().map(|r: &(Vec<f64>, i64)| r.0.len())
            && first != features.len()
        {
            return Err(format!(
                "{}:{}: {} features, earlier rows have {first}",
                path.display(),
                n + 1,
                features.len()
            ));
        }
        rows.push((features.to_vec(), label as i64));
    }
    if rows.is_empty() {
        return Err(format!("{}: no rows", path.display()));
    }
    Ok(rows)
}

/// A fixed-seed LCG shuffle: the same order on every run and machine.
fn shuffle<T>(items: &mut [T], state: &mut u64) {
    for i in (1..items.len()).rev() {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        items.swap(i, (*state >> 33) as usize % (i + 1));
    }
}

fn gemm_candidate(name: &str) -> Result<Choice> {
    Choice::from_name(name).ok_or_else(|| "not a candidate (generated, library, library-swapped, gemm-rs)".to_string())
}

/// The model compiled for training (from the cache under `out`, or now),
/// with a line per compilation.
fn trainer_for(c: &ModelArgs, threads: usize, seed: u64, out: &Path) -> Result<Trainer> {
    let options = Options {
        optimizer: c.optimizer.name().into(),
        momentum: c.momentum,
        weight_decay: c.weight_decay,
        threads,
        seed,
        cache_dir: out.to_path_buf(),
    };
    let trainer = Trainer::from_file(&c.model, options).map_err(|e| e.to_string())?;
    report_compiled(&trainer, 0, &c.model);
    Ok(trainer)
}

/// Prints the trainer's compilations from number `from` on.
fn report_compiled(trainer: &Trainer, from: usize, model: &Path) {
    for c in trainer.compiled().iter().skip(from) {
        let variant = c.batch.map(|b| format!(" for batch {b}")).unwrap_or_default();
        match c.seconds {
            Some(s) => println!("compiled {}{variant} in {s:.2} s -> {}", model.display(), c.dir.display()),
            None => println!("using the compiled {}{variant}", c.dir.display()),
        }
    }
}

/// Compiles (or finds) the variant of the model for `rows` rows (a smaller
/// last batch), before training starts.
fn prepare_rows(trainer: &mut Trainer, model: &Path, rows: usize) -> Result<()> {
    let before = trainer.compiled().len();
    if rows > 0 {
        trainer.add_batch(rows).map_err(|e| e.to_string())?;
    }
    report_compiled(trainer, before, model);
    Ok(())
}

fn eval(c: &ModelArgs, data: &Path, checkpoint: &Path, threads: usize, out: &Path) -> Result<()> {
    let mut trainer = trainer_for(c, threads, 0, out)?;
    let forward = trainer.session().module().function("forward").map_err(|e| e.to_string())?.clone();
    let x = forward.args.iter().find(|a| a.role() == Role::Input).ok_or("@forward takes no input")?;
    let (batch, features) = match x.shape[..] {
        [b, f] => (b, f),
        _ => return Err(format!("the model's input is {:?}; `aicf eval` feeds [batch, features]", x.shape)),
    };
    let meta = trainer.load_checkpoint(checkpoint).map_err(|e| e.to_string())?;
    let scale: f64 = meta.get("feature_scale").and_then(|v| v.parse().ok()).unwrap_or(1.0);
    let rows = load_csv(data)?;
    if rows[0].0.len() != features {
        return Err(format!(
            "{}: rows have {} features, the model takes [{batch}, {features}]",
            data.display(),
            rows[0].0.len()
        ));
    }
    prepare_rows(&mut trainer, &c.model, rows.len() % batch)?;
    let accuracy = evaluate(&mut trainer, &rows, features, scale)?;
    println!(
        "accuracy {:.2}% on {} rows of {} (checkpoint {}, epoch {})",
        100.0 * accuracy,
        rows.len(),
        data.display(),
        checkpoint.display(),
        meta.get("epoch").map_or("?", String::as_str)
    );
    Ok(())
}

fn bench(
    c: &ModelArgs,
    lr: f64,
    steps: usize,
    threads: usize,
    out: &Path,
    profile: bool,
    gemm: Option<Choice>,
) -> Result<()> {
    let mut trainer = trainer_for(c, threads, 0, out)?;
    let session = trainer.session_mut();
    session.module_mut().force_gemm(gemm);
    if profile {
        session.module_mut().enable_profile();
    }
    let step = session.module().function("train_step").map_err(|e| e.to_string())?.clone();
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
            (_, artifact::DType::I32 | artifact::DType::I64) => {
                // labels: below the class count (the last dim of @forward's result)
                let classes = session
                    .module()
                    .function("forward")
                    .ok()
                    .and_then(|f| {
                        f.args.iter().find(|a| a.role() == Role::Output).and_then(|a| a.shape.last().copied())
                    })
                    .unwrap_or(2) as f64;
                random(n, &|u| (u * classes).floor())
            }
            _ => random(n, &|u| u * 2.0 - 1.0),
        };
        inputs.push(Tensor::new(a.shape.clone(), a.dtype, values));
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    for _ in 0..5 {
        session.call("train_step", &refs).map_err(|e| e.to_string())?;
    }
    let mut times = Vec::new();
    let mut loss = f64::NAN;
    for _ in 0..steps {
        let t = Instant::now();
        let out = session.call("train_step", &refs).map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        loss = out.first().and_then(|t| t.values.first()).copied().unwrap_or(f64::NAN);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{}: train step ({}) median {:.3} ms, min {:.3} ms over {steps} steps, {} threads, final loss {loss:.6}",
        c.model.display(),
        c.optimizer.name(),
        times[times.len() / 2],
        times[0],
        session.module().threads()
    );
    for (f, k, op, ms, n) in session.module().profile().into_iter().filter(|r| r.0 == "train_step").take(12) {
        println!("  @{f} #{k:<3} {op:<28} {:.3} ms/step", ms / n as f64);
    }
    Ok(())
}

/// The options of one training run.
struct Run {
    lr: f64,
    epochs: usize,
    seed: u64,
    val_split: f64,
    threads: usize,
    checkpoint_dir: Option<PathBuf>,
    resume: bool,
    adapt: Option<PathBuf>,
}

fn train(c: &ModelArgs, data: &Path, run: &Run, out: &Path) -> Result<()> {
    let &Run { lr, epochs, seed, val_split, threads, .. } = run;
    if !(0.0..1.0).contains(&val_split) {
        return Err(format!("--val-split {val_split} is not in [0, 1)"));
    }
    let checkpoint = run.checkpoint_dir.as_ref().map(|d| d.join("last.safetensors"));
    // An adaptive run saves the model it has grown into beside its
    // checkpoint, and resumes from it.
    let grown_model = run.checkpoint_dir.as_ref().map(|d| d.join("model.mlir"));
    let mut model = c.model.clone();
    if let (true, Some(_), Some(m)) = (run.resume, &run.adapt, &grown_model)
        && m.exists()
    {
        model = m.clone();
    }
    let c = &ModelArgs { model, ..c.clone() };
    let mut trainer = trainer_for(c, threads, seed, out)?;
    let step = trainer.session().module().function("train_step").map_err(|e| e.to_string())?.clone();
    let forward = trainer.session().module().function("forward").map_err(|e| e.to_string())?.clone();
    let inputs: Vec<&artifact::Arg> = step.args.iter().filter(|a| a.role() == Role::Input).collect();
    let [x_arg, y_arg, _lr] = inputs[..] else {
        return Err(format!("@train_step takes {} inputs; `aicf train` feeds (features, labels, lr)", inputs.len()));
    };
    let (batch, features) = match x_arg.shape[..] {
        [b, f] => (b, f),
        _ => return Err(format!("the model's input is {:?}; `aicf train` feeds [batch, features]", x_arg.shape)),
    };
    let classes =
        forward.args.iter().find(|a| a.role() == Role::Output).and_then(|a| a.shape.last().copied()).unwrap_or(0);

    let mut rows = load_csv(data)?;
    if rows[0].0.len() != features {
        return Err(format!(
            "{}: rows have {} features, the model takes [{batch}, {features}]",
            data.display(),
            rows[0].0.len()
        ));
    }
    if let Some((_, bad)) = rows.iter().find(|r| r.1 as usize >= classes) {
        return Err(format!("{}: label {bad} is not below the model's {classes} classes", data.display()));
    }
    let mut state = seed ^ 0x2545F4914F6CDD1D;
    shuffle(&mut rows, &mut state);
    let held = ((rows.len() as f64) * val_split).round() as usize;
    let (val, train_rows) = rows.split_at(held);
    // Features scaled by the training split's largest magnitude.
    let scale = train_rows.iter().flat_map(|r| r.0.iter()).fold(0.0f64, |m, v| m.max(v.abs())).max(1e-12);
    // A last batch smaller than the model's, in training and in validation,
    // runs a variant compiled for its size (once; cached under --out).
    for r in [train_rows.len() % batch, val.len() % batch] {
        prepare_rows(&mut trainer, &c.model, r)?;
    }
    let batch_of = |rows: &[&(Vec<f64>, i64)]| -> [Tensor; 2] {
        let x: Vec<f64> = rows.iter().flat_map(|r| r.0.iter().map(|v| v / scale)).collect();
        let y: Vec<f64> = rows.iter().map(|r| r.1 as f64).collect();
        [Tensor::new([rows.len(), features], x_arg.dtype, x), Tensor::new([rows.len()], y_arg.dtype, y)]
    };
    let policy = match &run.adapt {
        Some(path) => Policy::from_file(path).map_err(|e| e.to_string())?,
        None => Policy { observe_every: 0, ..Policy::default() },
    };
    let mut adaptive = Adaptive::new(trainer, policy);
    if run.adapt.is_some() {
        adaptive.log_to(&out.join("decisions.jsonl")).map_err(|e| e.to_string())?;
        // Rewrites are checked on the first full batch of held-out rows (of
        // training rows without them); forks train on the first training
        // batches and compare on the held-out ones.
        let probe_rows: Vec<&(Vec<f64>, i64)> = if val.len() >= batch {
            val[..batch].iter().collect()
        } else {
            train_rows[..batch.min(train_rows.len())].iter().collect()
        };
        if probe_rows.len() == batch {
            adaptive.set_probe(batch_of(&probe_rows).to_vec());
        }
        let full = |rows: &[(Vec<f64>, i64)]| -> Vec<Vec<Tensor>> {
            rows.chunks_exact(batch).map(|c| batch_of(&c.iter().collect::<Vec<_>>()).to_vec()).collect()
        };
        if adaptive.policy().rules.iter().any(|r| matches!(r.action, Action::Fork { .. })) {
            adaptive.set_fork_data(full(train_rows), full(val));
        }
    }
    let metrics_path = out.join("metrics.jsonl");
    let mut metrics = std::fs::File::create(&metrics_path).map_err(|e| format!("{}: {e}", metrics_path.display()))?;
    println!(
        "training on {} rows ({} held out), batch {batch}, {} steps per epoch, {} threads",
        train_rows.len(),
        val.len(),
        train_rows.len().div_ceil(batch),
        adaptive.trainer().session().module().threads()
    );
    if train_rows.len() < batch {
        return Err(format!("{} training rows, fewer than one batch of {batch}", train_rows.len()));
    }
    let mut history = Vec::new();
    let train_started = Instant::now();
    let mut first_epoch = 1;
    if let (true, Some(path)) = (run.resume, &checkpoint) {
        let meta = adaptive.trainer_mut().load_checkpoint(path).map_err(|e| e.to_string())?;
        let field = |k: &str| -> Result<u64> {
            meta.get(k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{}: no {k} in the checkpoint's metadata", path.display()))
        };
        first_epoch = field("epoch")? as usize + 1;
        state = field("data_rng_state")?;
        println!("resumed from {} at epoch {} (step {})", path.display(), first_epoch - 1, field("step")?);
    }
    let batches = train_rows.len().div_ceil(batch);
    let mut epoch = first_epoch;
    let mut start_batch = 0;
    'epochs: while epoch <= epochs {
        let epoch_started = Instant::now();
        // The epoch's order depends only on the RNG state (checkpointed).
        let epoch_rng = state;
        let mut order: Vec<usize> = (0..train_rows.len()).collect();
        shuffle(&mut order, &mut state);
        if start_batch >= batches {
            // Rolled back to the end of this epoch: the next one starts.
            (start_batch, epoch) = (0, epoch + 1);
            continue;
        }
        let mut loss_sum = 0.0;
        let mut count = 0;
        // Every row once per epoch; the last, smaller batch runs its variant.
        for (b, chunk) in order.chunks(batch).enumerate().skip(start_batch) {
            let [x, y] = batch_of(&chunk.iter().map(|&i| &train_rows[i]).collect::<Vec<_>>());
            let progress = Progress { epoch, batch: b + 1, rng: epoch_rng };
            match adaptive.step(&[&x, &y], lr, progress) {
                Ok(Outcome::Trained(m, decision)) => {
                    // Each batch's mean loss, weighted by its rows.
                    loss_sum += m.loss * chunk.len() as f64;
                    count += chunk.len();
                    if let Some(d) = decision {
                        after_rewrite(&mut adaptive, d, grown_model.as_deref())?;
                    }
                }
                Ok(Outcome::RolledBack(d, to)) => {
                    println!("  {}", adaptive.decisions()[d].summary());
                    (epoch, start_batch, state) = (to.epoch, to.batch, to.rng);
                    continue 'epochs;
                }
                Err(TrainError::NonFinite { step, loss, lr }) => {
                    return Err(format!(
                        "the loss became {loss} at epoch {epoch}, step {step} (lr {lr}); lower the learning rate"
                    ));
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        start_batch = 0;
        let trainer = adaptive.trainer_mut();
        // Without held-out rows there is no accuracy to report (NaN, "null" in JSON).
        let accuracy = if val.is_empty() { f64::NAN } else { evaluate(trainer, val, features, scale)? };
        // The held-out loss over its full batches (NaN with none).
        let val_loss = if val.len() >= batch { held_out_loss(trainer, val, batch, &batch_of)? } else { f64::NAN };
        let steps = trainer.steps();
        let train_loss = loss_sum / count.max(1) as f64;
        let seconds = epoch_started.elapsed().as_secs_f64();
        println!(
            "epoch {epoch:>3}/{epochs}  train loss {train_loss:.4}  val loss {val_loss:.4}  val accuracy {}  ({seconds:.2} s)",
            percent(accuracy)
        );
        let params = aicf_compiler::adapt::param_count(trainer);
        let mut record = serde_json::json!({"epoch": epoch, "step": steps, "train_loss": train_loss, "val_loss": val_loss,
            "val_accuracy": accuracy, "seconds": seconds, "params": params, "train_flops": adaptive.flops});
        // An adaptive run's observer: the epoch's last gradient norms and
        // update/parameter ratios per layer.
        if let Some(o) = adaptive.observer().observations.last() {
            record["grad_norm"] = serde_json::json!(o.grad_norm);
            record["layers"] = serde_json::json!(o.layers);
        }
        writeln!(metrics, "{record}").map_err(|e| format!("{}: {e}", metrics_path.display()))?;
        history.push((train_loss, accuracy));
        if let Some(d) = adaptive
            .epoch_end(Progress { epoch, batch: batches, rng: epoch_rng }, Some(val_loss))
            .map_err(|e| e.to_string())?
        {
            after_rewrite(&mut adaptive, d, grown_model.as_deref())?;
        }
        if let Some(path) = &checkpoint {
            let meta = std::collections::BTreeMap::from([
                ("epoch".to_string(), epoch.to_string()),
                ("step".to_string(), adaptive.trainer().steps().to_string()),
                ("data_rng_state".to_string(), state.to_string()),
                ("seed".to_string(), seed.to_string()),
                ("optimizer".to_string(), c.optimizer.name().to_string()),
                ("lr".to_string(), lr.to_string()),
                ("feature_scale".to_string(), scale.to_string()),
            ]);
            adaptive.trainer().save_checkpoint(path, &meta).map_err(|e| e.to_string())?;
        }
        epoch += 1;
    }
    let plot = out.join("plot.svg");
    std::fs::write(&plot, svg_plot(&history)).map_err(|e| format!("{}: {e}", plot.display()))?;
    let final_accuracy = history.last().map_or(0.0, |h| h.1);
    println!(
        "final held-out accuracy {} after {epochs} epochs ({} steps, training {:.2} s); metrics {}, plot {}",
        percent(final_accuracy),
        adaptive.trainer().steps(),
        train_started.elapsed().as_secs_f64(),
        metrics_path.display(),
        plot.display()
    );
    if run.adapt.is_some() {
        println!(
            "adaptive run: {} decisions (log {}), final model {} parameters",
            adaptive.decisions().len(),
            out.join("decisions.jsonl").display(),
            aicf_compiler::adapt::param_count(adaptive.trainer()),
        );
    }
    println!("training FLOPs {:.3e} (6 per weight element per row)", adaptive.flops);
    Ok(())
}

/// After decision `d` changed the model: report it and save the new model
/// beside the checkpoint. (`adapt::grow` compiled the new model at every
/// batch size the old one ran.)
fn after_rewrite(adaptive: &mut Adaptive, d: usize, grown_model: Option<&Path>) -> Result<()> {
    if let Some(path) = grown_model {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        aicf_compiler::codegen::write_atomically(path, adaptive.trainer().source().as_bytes())
            .map_err(|e| e.to_string())?;
    }
    println!("  {}", adaptive.decisions()[d].summary());
    Ok(())
}

/// Mean `@loss` over the full batches of `rows`.
fn held_out_loss(
    trainer: &mut Trainer,
    rows: &[(Vec<f64>, i64)],
    batch: usize,
    batch_of: &dyn Fn(&[&(Vec<f64>, i64)]) -> [Tensor; 2],
) -> Result<f64> {
    let mut total = 0.0;
    let chunks: Vec<_> = rows.chunks_exact(batch).collect();
    for chunk in &chunks {
        let [x, y] = batch_of(&chunk.iter().collect::<Vec<_>>());
        total += trainer.loss(&[&x, &y]).map_err(|e| e.to_string())?;
    }
    Ok(total / chunks.len().max(1) as f64)
}

/// An accuracy as a percentage, or "n/a" where there were no rows to measure it on.
fn percent(accuracy: f64) -> String {
    if accuracy.is_nan() { "n/a (no held-out rows)".to_string() } else { format!("{:.2}%", 100.0 * accuracy) }
}

/// Accuracy on `rows` (features scaled by `scale`): the trainer's
/// evaluation, in batches of the model's size and a smaller last one.
fn evaluate(trainer: &mut Trainer, rows: &[(Vec<f64>, i64)], features: usize, scale: f64) -> Result<f64> {
    let x: Vec<f64> = rows.iter().flat_map(|r| r.0.iter().map(|v| v / scale)).collect();
    let labels: Vec<i64> = rows.iter().map(|r| r.1).collect();
    let x = Tensor::new([rows.len(), features], artifact::DType::F32, x);
    Ok(trainer.evaluate(&x, &labels).map_err(|e| e.to_string())?.accuracy)
}

/// Train loss (left axis) and held-out accuracy (right axis) per epoch.
fn svg_plot(history: &[(f64, f64)]) -> String {
    let (w, h, pad) = (640.0, 360.0, 48.0);
    let n = history.len().max(2) as f64 - 1.0;
    let max_loss = history.iter().map(|p| p.0).fold(1e-9f64, f64::max);
    let x = |i: usize| pad + (w - 2.0 * pad) * i as f64 / n;
    let line = |f: &dyn Fn(&(f64, f64)) -> f64| {
        // Points without a value (accuracy with no held-out rows) are left out.
        history
            .iter()
            .enumerate()
            .filter(|(_, p)| f(p).is_finite())
            .map(|(i, p)| format!("{:.1},{:.1}", x(i), f(p)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let loss = line(&|p| h - pad - (h - 2.0 * pad) * p.0 / max_loss);
    let acc = line(&|p| h - pad - (h - 2.0 * pad) * p.1);
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<line x1="{pad}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{pad}" y1="{pad}" x2="{pad}" y2="{b}" stroke="black"/>
<text x="{pad}" y="20">train loss (blue, max {max_loss:.3}) and held-out accuracy (orange, 0-100%) per epoch</text>
<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{loss}"/>
<polyline fill="none" stroke="#ff7f0e" stroke-width="2" points="{acc}"/>
<text x="{r}" y="{lb}" text-anchor="end">epoch {epochs}</text>
</svg>
"##,
        b = h - pad,
        r = w - pad,
        lb = h - pad + 16.0,
        epochs = history.len()
    )
}
