//! Criterion benchmarks of compiled train steps (the workloads of
//! ../shared/bench/common_spec.txt): `cargo bench -p aicf-tools --bench train_step`.
//! Each model is compiled once into target/criterion-artifacts, then its
//! train step runs on a fixed random batch.
//!
//! And the cost of changing a model while it trains (`rewrite/...`): a
//! compile whose kernels are all in the kernel cache (the incremental
//! recompile's floor), and a widening of the digits MLP whose new model was
//! compiled ahead (the pause under the default prefetch: rewrite, load,
//! state rebinding).

use aicf_compiler::{CompilerContext, codegen::compile_cpu, run_pipeline};
use aicf_runtime::{
    Backend, Tensor,
    artifact::{DType, Role, ir_hash},
    cpu::{CpuModule, CpuSession},
};
use criterion::{Criterion, criterion_group, criterion_main};
use std::path::Path;

/// A session of `model` with `optimizer`, and inputs for its train step.
fn prepare(model: &str, optimizer: &str, classes: usize) -> (CpuSession, Vec<Tensor>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join(model)).expect(model);
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(&source, model).expect("model parses");
    run_pipeline(&ctx, &mut module, &format!("builtin.module(aicf-train-pipeline{{optimizer={optimizer}}})"))
        .expect("pipeline");
    let dir = root.join("target/criterion-artifacts").join(format!("{}-{optimizer}", ir_hash(&source)));
    compile_cpu(&ctx, &module, &ir_hash(&source), &dir).expect("codegen");
    let session = CpuSession::new(CpuModule::load(&dir, 2).expect("load"), 0).expect("session");
    let step = session.module().function("train_step").expect("train_step").clone();
    let mut state = 7u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 40) as f64 / (1u64 << 24) as f64
    };
    let inputs = step
        .args
        .iter()
        .filter(|a| a.role() == Role::Input)
        .map(|a| {
            let n: usize = a.shape.iter().product();
            let values = match (a.bind.as_str(), a.dtype) {
                ("lr", _) => vec![0.01],
                (_, DType::I32 | DType::I64) => (0..n).map(|_| (next() * classes as f64).floor()).collect(),
                _ => (0..n).map(|_| next() * 2.0 - 1.0).collect(),
            };
            Tensor::new(a.shape.clone(), a.dtype, values)
        })
        .collect();
    (session, inputs)
}

fn train_steps(c: &mut Criterion) {
    for (name, model, optimizer) in [
        ("mlp784_b256_sgd", "examples/mlp784/mlp784.mlir", "sgd"),
        ("mlp64_b32_sgd", "examples/mlp64/mlp64.mlir", "sgd"),
        ("digits_cnn_b32_adam", "examples/cnn/digits_cnn.mlir", "adam"),
    ] {
        let (mut session, inputs) = prepare(model, optimizer, 10);
        let refs: Vec<&Tensor> = inputs.iter().collect();
        c.bench_function(name, |b| b.iter(|| session.call("train_step", &refs).expect("step")));
    }
}

fn rewrites(c: &mut Criterion) {
    use aicf_compiler::train::adapt::{Operator, WidenRule, grow};
    use aicf_compiler::train::{Options, Trainer};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut group = c.benchmark_group("rewrite");
    group.sample_size(10);
    // Every kernel cached: parse, pipeline, code generation, link.
    let source = std::fs::read_to_string(root.join("examples/mlp/digits_mlp.mlir")).expect("digits MLP");
    let out = root.join("target/criterion-artifacts/recompile");
    let compile = || {
        let ctx = CompilerContext::new();
        let mut module = ctx.parse(&source, "digits_mlp.mlir").expect("parses");
        run_pipeline(&ctx, &mut module, "builtin.module(aicf-train-pipeline{optimizer=adam})").expect("pipeline");
        compile_cpu(&ctx, &module, &ir_hash(&source), &out).expect("codegen");
    };
    compile();
    group.bench_function("digits_mlp_compile_all_kernels_cached", |b| b.iter(compile));
    // The widening of examples/grow, its new model compiled ahead.
    let options = Options {
        cache_dir: root.join("target/criterion-artifacts/grow"),
        device: aicf_runtime::Device::Cpu { threads: 2 },
        ..Options::default()
    };
    let trainer = Trainer::from_file(&root.join("examples/grow/narrow_mlp.mlir"), options).expect("narrow MLP");
    let op = Operator::Widen {
        layer: "fc1".into(),
        width: 32,
        rule: WidenRule::ZeroOut,
        split_noise: 0.0,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    };
    grow(&trainer, &op, 0).expect("widening");
    group.bench_function("widen_fc1_16_to_32_compiled_ahead", |b| b.iter(|| grow(&trainer, &op, 0).expect("widening")));
    group.finish();
}

criterion_group!(benches, train_steps, rewrites);
criterion_main!(benches);
