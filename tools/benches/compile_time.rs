//! Compile time against model size: `cargo bench -p aicf-tools --bench compile_time`
//! (release build; `-- --quick` runs the smaller half).
//!
//! 1. The char LM of `examples/char_lm` (width 64, 4 heads, dropout 0)
//!    built through the layer API with 1 to 48 blocks, and the benchmark
//!    transformer block at GPT-2 small's width (768, 12 heads) with 1 and 12
//!    blocks: each compiled (Adam train step, CPU) with an empty kernel
//!    cache ("cold") and again with every kernel cached, as `aicf compile`
//!    does, with the time of each stage.
//! 2. The char LM of 2 to 16 blocks under `--memory-budget 60%` and
//!    `45%`, in bf16: the passes' time (every kernel cached), most of it
//!    the memory plan's recomputation search, with the train step's
//!    arena.
//! 3. A growth rewrite of the 12-block char LM (widen `blocks.0.mlp.fc`
//!    from 256 to 320 units, zero-out): the training pause with the new
//!    model compiled ahead (the default `prefetch`) and without it (the
//!    unchanged kernels still come from the cache).
//!
//! Prints a table (README's) and one JSON line per measurement. Wall-clock
//! times of one run each: read them against each other, on one machine.

#[path = "../../examples/char_lm/model.rs"]
mod char_lm;
#[allow(dead_code)]
#[path = "../../examples/transformer/model.rs"]
mod transformer;

use aicf_compiler::codegen::KernelCache;
use aicf_compiler::pipeline::{Compiled, MemoryBudget, Precision, Target, TrainOptions, compile_source};
use aicf_compiler::train::adapt::{Operator, WidenRule, grow};
use aicf_compiler::train::{Options, Trainer, precompile};
use std::path::Path;
use std::time::Instant;

struct Row {
    model: String,
    lines: usize,
    cold: Compiled,
    cold_s: f64,
    cached: Compiled,
    cached_s: f64,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let scratch = std::env::temp_dir().join(format!("aicf-compile-time-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    // Every cache (kernels, GEMM registry) under the scratch directory, so
    // that "cold" is cold. Set before any thread starts.
    unsafe { std::env::set_var("AICF_CACHE_DIR", scratch.join("cache")) };
    let mut models: Vec<(String, String)> = Vec::new();
    let depths: &[usize] = if quick { &[1, 2, 4, 8, 16] } else { &[1, 2, 4, 8, 12, 16, 24, 32, 48] };
    for &layers in depths {
        let config = char_lm::Config { layers, dropout: 0.0, ..char_lm::CONFIG };
        let module = char_lm::build(config).expect("char LM builds");
        models.push((format!("char LM, {layers} blocks (width 64)"), module.to_string()));
    }
    for blocks in if quick { vec![1] } else { vec![1, 12] } {
        let config = transformer::Config { batch: 8, seq: 128, dim: 768, heads: 12, blocks };
        let module = transformer::build_with(config).expect("transformer builds");
        models.push((format!("transformer, {blocks} block(s) of width 768"), module.to_string()));
    }
    let options = TrainOptions::default();
    let cpu = host_cpu();
    println!("compile time (Adam train step, CPU target) on {cpu}, {} cores", num_cores());
    let mut rows = Vec::new();
    for (i, (model, source)) in models.iter().enumerate() {
        // A kernel cache of its own: the first compile finds it empty.
        let cache = KernelCache::new(scratch.join(format!("kernels-{i}")));
        let target = Target::Cpu(cache);
        let timed = |out: &Path| {
            let started = Instant::now();
            let c = compile_source(source, model, &options, None, &target, out).expect("compiles");
            (c, started.elapsed().as_secs_f64())
        };
        let (cold, cold_s) = timed(&scratch.join(format!("cold-{i}")));
        let (cached, cached_s) = timed(&scratch.join(format!("cached-{i}")));
        let row = Row { model: model.clone(), lines: source.lines().count(), cold, cold_s, cached, cached_s };
        println!("{}", json_line(&row, &cpu));
        rows.push(row);
    }
    println!();
    println!(
        "| model | lines of `hl` | kernel calls | distinct kernels | cold | every kernel cached | passes | kernel generation + lowering | clang |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let calls: usize = r.cold.manifest.functions.iter().map(|f| f.calls.len()).sum();
        println!(
            "| {} | {} | {calls} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {:.2} s |",
            r.model,
            r.lines,
            r.cold.kernels,
            r.cold_s,
            r.cached_s,
            r.cached.timings.seconds("train pipeline (autodiff .. ll-schedule)"),
            generation(&r.cached),
            r.cold.timings.seconds("host compile (clang -O3)"),
        );
    }
    for r in &rows {
        println!("\n{} (cold):\n{}", r.model, r.cold.timings.report());
    }
    budgeted(&scratch, quick);
    if !quick {
        growth_pause(&scratch);
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The char LM in bf16 under a memory budget: the passes' time with every
/// kernel cached (the budgets' plans differ, their kernels barely).
fn budgeted(scratch: &Path, quick: bool) {
    println!("\n| char LM in bf16, memory budget | blocks | passes (every kernel cached) | train step's arena |");
    println!("|---|---|---|---|");
    let cache = KernelCache::new(scratch.join("kernels-budgeted"));
    let target = Target::Cpu(cache);
    for &layers in if quick { &[2usize, 4, 8][..] } else { &[2usize, 4, 8, 16][..] } {
        let config = char_lm::Config { layers, dropout: 0.0, ..char_lm::CONFIG };
        let source = char_lm::build(config).expect("char LM builds").to_string();
        for fraction in [0.6, 0.45] {
            let options = TrainOptions {
                precision: Precision::Bf16,
                memory_budget: Some(MemoryBudget::Fraction(fraction)),
                ..TrainOptions::default()
            };
            let out = scratch.join(format!("budgeted-{layers}-{fraction}"));
            let compile = || compile_source(&source, "char_lm", &options, None, &target, &out).expect("compiles");
            compile();
            let c = compile();
            let arena = c.manifest.functions.iter().find(|f| f.name == "train_step").map_or(0, |f| f.arena_bytes);
            let passes = c.timings.seconds("train pipeline (autodiff .. ll-schedule)");
            println!(
                "| {:.0}% | {layers} | {passes:.2} s | {:.1} MiB |",
                fraction * 100.0,
                arena as f64 / (1 << 20) as f64
            );
        }
    }
}

/// Kernel generation, the kernels' lowering and hashing.
fn generation(c: &Compiled) -> f64 {
    c.timings.stages.iter().filter(|s| s.name.starts_with("kernel")).map(|s| s.seconds).sum()
}

fn json_line(r: &Row, cpu: &str) -> String {
    let stages = |c: &Compiled| -> serde_json::Value {
        c.timings.stages.iter().map(|s| (s.name.clone(), serde_json::json!(s.seconds))).collect()
    };
    serde_json::json!({
        "bench": "compile_time", "model": r.model, "lines": r.lines, "cpu": cpu,
        "kernels": r.cold.kernels, "cold_s": r.cold_s, "cached_s": r.cached_s,
        "cold_stages": stages(&r.cold), "cached_stages": stages(&r.cached),
    })
    .to_string()
}

/// The pause of widening one layer of the 12-block char LM, with and
/// without the new model compiled ahead.
fn growth_pause(scratch: &Path) {
    let config = char_lm::Config { layers: 12, dropout: 0.0, ..char_lm::CONFIG };
    let source = char_lm::build(config).expect("char LM builds").to_string();
    let op = Operator::Widen {
        layer: "blocks.0.mlp.fc".into(),
        width: 320,
        rule: WidenRule::ZeroOut,
        split_noise: 0.0,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    };
    let options = |dir: &str| Options { cache_dir: scratch.join(dir), ..Options::default() };
    println!("\ngrowth rewrite of the 12-block char LM (widen blocks.0.mlp.fc 256 -> 320, zero-out):");
    // On demand first: the kernel cache then holds the old model's kernels
    // and not the new one's.
    for ahead in [false, true] {
        let dir = if ahead { "grow-ahead" } else { "grow-on-demand" };
        let trainer = Trainer::from_source(&source, "char_lm_12", options(dir)).expect("compiles");
        if ahead {
            // What `prefetch` does on a background thread while training runs.
            let rewritten = aicf_compiler::train::adapt::rewrite(&source, "char_lm_12", &op).expect("rewrites");
            precompile(&rewritten.source, "char_lm_12", trainer.options(), &[None]).expect("compiles ahead");
        }
        let started = Instant::now();
        let grown = grow(&trainer, &op, 0).expect("grows");
        let pause = started.elapsed().as_secs_f64();
        let label = if ahead { "compiled ahead" } else { "compiled on demand" };
        println!("  {label}: pause {pause:.2} s ({} of {} kernels compiled)", grown.compiled_kernels, grown.kernels);
        println!(
            "{}",
            serde_json::json!({"bench": "growth_pause", "model": "char LM, 12 blocks", "ahead": ahead,
                "pause_s": pause, "kernels": grown.kernels, "compiled_kernels": grown.compiled_kernels})
        );
    }
}

fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn num_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
