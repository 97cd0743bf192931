//! GPU code generation, checked here without a GPU: every `ll` kernel kind
//! and the example train steps compile to PTX that `ptxas` accepts for
//! sm_80 and sm_90, and invalid PTX is rejected.
//!
//! The same tests write the GPU test bundle's cases (`make gpu-bundle`):
//! each GPU artifact beside the calls to make and what the CPU path
//! returned (the interpreter for single kernels, the CPU backend for train
//! steps), which the runtime's GPU test (`runtime/tests/gpu.rs`) replays on
//! a GPU machine, a machine without LLVM or MLIR.

use crate::cpu::{kernel_cases, out_dir, step_inputs};
use aicf_compiler::{
    CompilerContext,
    codegen::{compile_cpu, compile_gpu, validate_ptx},
    interp::Interpreter,
    nn::DType,
    run_pipeline,
};
use aicf_runtime::{
    artifact::{self, ir_hash},
    cpu::CpuModule,
    cuda::{BundleCall, BundleCase},
    registry::Choice,
    session::{Session, Tensor},
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the cases are written: target/gpu-bundle/cases.
fn bundle_cases() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("../gpu-bundle/cases")
}

fn ptxas_accepts(dir: &Path, what: &str) {
    for chip in ["sm_80", "sm_90"] {
        validate_ptx(&dir.join(format!("kernels.{chip}.ptx")), chip).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// Writes `case` and its artifact (from `artifact`) under the bundle.
fn write_case(case: &BundleCase, artifact: &Path) {
    let dir = bundle_cases().join(&case.name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["manifest.json", "kernels.sm_80.ptx", "kernels.sm_90.ptx"] {
        std::fs::copy(artifact.join(file), dir.join(file)).unwrap();
    }
    std::fs::write(dir.join("case.json"), serde_json::to_string(case).unwrap()).unwrap();
}

fn tensor_of(a: &aicf_compiler::interp::Array) -> Tensor {
    let dtype = match a.dtype {
        DType::I32 => artifact::DType::I32,
        DType::I64 => artifact::DType::I64,
        _ => artifact::DType::F32,
    };
    Tensor::new(a.shape.clone(), dtype, a.data.clone())
}

/// Every kernel case of the CPU tests, compiled for the GPU: ptxas accepts
/// the PTX for both chips; the bundle gets the interpreter's results.
#[test]
fn every_kernel_compiles_to_ptx_that_ptxas_accepts() {
    for (name, source, inputs) in kernel_cases() {
        let ctx = CompilerContext::new();
        let reference = ctx.parse(&source, name).unwrap();
        let want = Interpreter::new(&reference).run("f", &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut planned = ctx.parse(&source, name).unwrap();
        run_pipeline(&ctx, &mut planned, "builtin.module(convert-hl-to-ll,ll-plan-memory)").unwrap();
        let dir = out_dir(&format!("gpu_kernel_{name}"));
        let manifest = compile_gpu(&ctx, &planned, "test", &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(manifest.target.starts_with("cuda"), "{name}: {}", manifest.target);
        for c in manifest.functions.iter().flat_map(|f| &f.calls) {
            let launch = c.launch.unwrap_or_else(|| panic!("{name}: {} has no launch shape", c.symbol));
            let threads: u64 = launch.block.iter().map(|&b| b as u64).product::<u64>() * launch.grid.iter().map(|&g| g as u64).product::<u64>();
            assert!(launch.block[0] > 0 && threads > 0, "{name}: {} launches nothing", c.symbol);
        }
        ptxas_accepts(&dir, name);
        let case = BundleCase {
            name: format!("kernel_{name}"),
            function: "f".into(),
            seed: 0,
            tol: 2e-5,
            calls: vec![BundleCall { inputs: inputs.iter().map(tensor_of).collect(), outputs: want.iter().map(tensor_of).collect() }],
            symbols: BTreeMap::new(),
        };
        write_case(&case, &dir);
    }
}

/// `steps` train steps of a model with `optimizer` on the CPU backend
/// (the library GEMM, the fastest CPU path) recorded as a bundle case of
/// its GPU artifact, after ptxas accepts that artifact.
fn train_case(name: &str, source: &str, optimizer: &str, steps: usize, classes: usize, tol: f64) {
    let ctx = CompilerContext::new();
    let mut planned = ctx.parse(source, name).unwrap();
    run_pipeline(&ctx, &mut planned, &format!("builtin.module(aicf-train-pipeline{{optimizer={optimizer}}})")).unwrap();
    let gpu = out_dir(&format!("gpu_{name}_{optimizer}"));
    let manifest = compile_gpu(&ctx, &planned, &ir_hash(source), &gpu).unwrap_or_else(|e| panic!("{name}: {e}"));
    ptxas_accepts(&gpu, name);
    let cpu = out_dir(&format!("gpu_{name}_{optimizer}_cpu"));
    compile_cpu(&ctx, &planned, &ir_hash(source), &cpu).unwrap();
    let mut module = CpuModule::load(&cpu, 2).unwrap();
    module.force_gemm(Some(Choice::Library));
    let seed = 11;
    let mut session = Session::new(module, seed).unwrap();
    let step_fn = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    let mut calls = Vec::new();
    for step in 0..steps {
        let (inputs, _) = step_inputs(step_fn, step, classes);
        let outputs = session.call("train_step", &inputs.iter().collect::<Vec<_>>()).unwrap();
        assert!(outputs[0].values[0].is_finite(), "{name}: loss {:?}", outputs[0].values);
        calls.push(BundleCall { inputs, outputs });
    }
    let symbols = manifest.symbols.iter().map(|s| (s.name.clone(), session.symbol(&s.name).unwrap())).collect();
    let case = BundleCase { name: format!("train_{name}_{optimizer}"), function: "train_step".into(), seed, tol, calls, symbols };
    write_case(&case, &gpu);
}

/// The example models' train steps (MLP, CNN, the character transformer,
/// the benchmark MLP 784-512-512-10) compile for the GPU.
#[test]
fn train_steps_compile_to_ptx_that_ptxas_accepts() {
    let mlp = crate::models::mlp::build(crate::models::mlp::BATCH).unwrap();
    train_case("digits_mlp", &mlp.text, "adam", 3, 10, 1e-4);
    let cnn = crate::models::cnn::build(crate::models::cnn::BATCH).unwrap();
    train_case("digits_cnn", &cnn.text, "sgd", 2, 10, 1e-4);
    let config = crate::models::char_lm::Config { batch: 2, ..crate::models::char_lm::CONFIG };
    let lm = crate::models::char_lm::build(config).unwrap();
    train_case("char_lm", &lm.text, "adam", 2, 65, 1e-3);
    train_case("mlp784", include_str!("../../../examples/mlp784/mlp784.mlir"), "sgd", 3, 10, 1e-4);
}

/// ptxas is the check: PTX with an undefined register, or for an
/// instruction the chip lacks, is rejected with ptxas's message.
#[test]
fn ptxas_rejects_invalid_ptx() {
    let dir = out_dir("gpu_invalid_ptx");
    std::fs::create_dir_all(&dir).unwrap();
    let good = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n  .reg .b64 %rd<2>;\n  ld.param.u64 %rd1, [p];\n  ret;\n}\n";
    let path = dir.join("good.ptx");
    std::fs::write(&path, good).unwrap();
    validate_ptx(&path, "sm_80").unwrap();
    let bad = good.replace("ld.param.u64 %rd1, [p];", "ld.param.u64 %rd9, [p];");
    let path = dir.join("bad.ptx");
    std::fs::write(&path, bad).unwrap();
    let e = validate_ptx(&path, "sm_80").unwrap_err().to_string();
    assert!(e.contains("ptxas -arch=sm_80 rejects") && e.contains("bad.ptx") && e.contains("%rd9"), "{e}");
}

/// The bundle's benchmark artifacts (compiled and checked by ptxas here,
/// timed by `gpu_bench` on a GPU): a fused elementwise chain over 2^24
/// elements (bandwidth) and an f32 GEMM 4096^3 (FLOP rate).
#[test]
fn benchmark_kernels_compile_to_ptx_that_ptxas_accepts() {
    let t = "tensor<4096x4096xf32>";
    let cases = [
        (
            "elementwise",
            format!("func.func @f(%x: {t}, %y: {t}) -> {t} {{\n  %a = hl.mul %x, %y : {t}, {t}\n  %b = hl.add %a, %x : {t}, {t}\n  return %b : {t}\n}}"),
        ),
        ("gemm4096", format!("func.func @f(%a: {t}, %b: {t}) -> {t} {{\n  %p = hl.matmul %a, %b : {t}, {t}\n  return %p : {t}\n}}")),
    ];
    for (name, source) in cases {
        let ctx = CompilerContext::new();
        let mut planned = ctx.parse(&source, name).unwrap();
        run_pipeline(&ctx, &mut planned, "builtin.module(hl-fuse-elementwise,convert-hl-to-ll,ll-plan-memory)").unwrap();
        let dir = out_dir(&format!("gpu_bench_{name}"));
        let manifest = compile_gpu(&ctx, &planned, "bench", &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(manifest.functions[0].calls.len(), 1, "{name}: one fused kernel");
        ptxas_accepts(&dir, name);
        let bench = bundle_cases().join("../bench").join(name);
        let _ = std::fs::remove_dir_all(&bench);
        std::fs::create_dir_all(&bench).unwrap();
        for file in ["manifest.json", "kernels.sm_80.ptx", "kernels.sm_90.ptx"] {
            std::fs::copy(dir.join(file), bench.join(file)).unwrap();
        }
    }
}
