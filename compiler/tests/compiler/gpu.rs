//! GPU code generation, checked here without a GPU: every `ll` kernel kind
//! and the example train steps compile to PTX that `ptxas` accepts for
//! sm_80 and sm_90, and invalid PTX is rejected.
//!
//! The same tests write the GPU test bundle's cases (`make gpu-bundle`):
//! each GPU artifact beside the calls to make and what the CPU path
//! returned (the interpreter for single kernels, the CPU backend for train
//! steps), which the runtime's GPU test (`runtime/tests/gpu.rs`) replays on
//! a GPU machine, a machine without LLVM or MLIR.

use crate::cpu::{kernel_cases, narrow_kernel_cases, out_dir, step_inputs};
use aicf_compiler::{
    CompilerContext,
    codegen::{
        AttentionTile, GpuOptions, TensorCoreTile, compile_cpu, compile_gpu, compile_gpu_with, ptx_files, validate_ptx,
    },
    interp::Interpreter,
    nn::DType,
    run_pipeline,
};
use aicf_runtime::{
    Backend, Tensor,
    artifact::{self, ir_hash},
    cpu::{CpuModule, CpuSession},
    cuda::{BundleCall, BundleCase, GemmCheck},
    registry::Choice,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the cases are written: target/gpu-bundle/cases.
fn bundle_cases() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("../gpu-bundle/cases")
}

/// ptxas accepts the PTX for both chips, and every shared-memory buffer
/// is 16-byte aligned (cp.async, ldmatrix and vector loads need it; ptxas
/// does not check, the hardware faults).
fn ptxas_accepts(dir: &Path, what: &str) {
    for chip in ["sm_80", "sm_90"] {
        let ptx = ptx_text(dir, chip);
        for path in ptx_files(dir, chip).unwrap() {
            validate_ptx(&path, chip).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        let shared = |l: &&str| {
            let l = l.trim_start();
            l.starts_with(".shared ") || l.starts_with(".extern .shared ")
        };
        for line in ptx.lines().filter(shared) {
            assert!(line.contains(".align 16"), "{what} ({chip}): shared buffer not 16-byte aligned: {line}");
        }
    }
}

/// Every PTX module of `chip` in an artifact, one after the other.
fn ptx_text(dir: &Path, chip: &str) -> String {
    ptx_files(dir, chip).unwrap().iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
}

/// Copies a GPU artifact: its manifest and every PTX module it lists.
fn copy_artifact(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(from.join("manifest.json"), to.join("manifest.json")).unwrap();
    for chip in ["sm_80", "sm_90"] {
        for file in ptx_files(from, chip).unwrap() {
            std::fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
        }
    }
}

/// Writes `case` and its artifact (from `artifact`) under the bundle.
fn write_case(case: &BundleCase, artifact: &Path) {
    let dir = bundle_cases().join(&case.name);
    let _ = std::fs::remove_dir_all(&dir);
    copy_artifact(artifact, &dir);
    std::fs::write(dir.join("case.json"), serde_json::to_string(case).unwrap()).unwrap();
}

fn tensor_of(a: &aicf_compiler::interp::Array) -> Tensor {
    let dtype = match a.dtype {
        DType::I32 => artifact::DType::I32,
        DType::I64 => artifact::DType::I64,
        DType::BF16 => artifact::DType::BF16,
        DType::F16 => artifact::DType::F16,
        DType::I1 => artifact::DType::I1,
        DType::F64 => artifact::DType::F64,
        _ => artifact::DType::F32,
    };
    Tensor::new(a.shape.clone(), dtype, a.data.clone())
}

/// Bundle case `kernel_<name>`: one call of `@f` on `inputs`, which must
/// give `want` within `tol`.
fn kernel_case(
    name: &str,
    inputs: &[aicf_compiler::interp::Array],
    want: &[aicf_compiler::interp::Array],
    tol: f64,
) -> BundleCase {
    BundleCase {
        name: format!("kernel_{name}"),
        function: "f".into(),
        seed: 0,
        tol,
        calls: vec![BundleCall {
            inputs: inputs.iter().map(tensor_of).collect(),
            outputs: want.iter().map(tensor_of).collect(),
        }],
        symbols: BTreeMap::new(),
        nccl: false,
    }
}

/// Every kernel case of the CPU tests, compiled for the GPU, in f32, bf16
/// and f16: ptxas accepts the PTX for both chips; the bundle gets the
/// interpreter's results (16-bit cases within 2 units in the last place).
/// The convolution cases come twice: as products over window rows (the
/// pass's default) and as the direct kernels a GPU runs by default
/// (`_direct`).
#[test]
fn every_kernel_compiles_to_ptx_that_ptxas_accepts() {
    let cases = kernel_cases().into_iter().map(|(n, s, i)| (n.to_string(), s, i, 2e-5));
    let bf16 = narrow_kernel_cases(DType::BF16).into_iter().map(|(n, s, i)| (n, s, i, 2.0 / 256.0));
    let f16 = narrow_kernel_cases(DType::F16).into_iter().map(|(n, s, i)| (n, s, i, 2.0 / 2048.0));
    let lowered = cases.chain(bf16).chain(f16).flat_map(|(n, s, i, t)| {
        let direct = n.starts_with("conv").then(|| (format!("{n}_direct"), s.clone(), i.clone(), t, false));
        std::iter::once((n, s, i, t, true)).chain(direct)
    });
    for (name, source, inputs, tol, conv_as_gemm) in lowered {
        let name = name.as_str();
        let ctx = CompilerContext::new();
        let reference = ctx.parse(&source, name).unwrap();
        let want = Interpreter::new(&reference).run("f", &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut planned = ctx.parse(&source, name).unwrap();
        let pipeline = format!("builtin.module(convert-hl-to-ll{{conv-as-gemm={conv_as_gemm}}},ll-plan-memory)");
        run_pipeline(&ctx, &mut planned, &pipeline).unwrap();
        let dir = out_dir(&format!("gpu_kernel_{name}"));
        let manifest = compile_gpu(&ctx, &planned, "test", &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(manifest.target.starts_with("cuda"), "{name}: {}", manifest.target);
        for c in manifest.functions.iter().flat_map(|f| &f.calls) {
            let launch = c.launch.unwrap_or_else(|| panic!("{name}: {} has no launch shape", c.symbol));
            let threads: u64 = launch.block.iter().map(|&b| b as u64).product::<u64>()
                * launch.grid.iter().map(|&g| g as u64).product::<u64>();
            assert!(launch.block[0] > 0 && threads > 0, "{name}: {} launches nothing", c.symbol);
        }
        ptxas_accepts(&dir, name);
        write_case(&kernel_case(name, &inputs, &want, tol), &dir);
    }
    attention_tile_cases();
}

/// Tilings of the tensor-core attention beside the default, for tuning
/// on a GPU: one fragment of 16 query rows a warp or two, tiles of 64 or
/// 128 keys, one buffer of k and v or two.
fn attention_tiles() -> Vec<AttentionTile> {
    let t = |m_frags, keys, double_buffer| AttentionTile { m_frags, keys, double_buffer };
    vec![t(1, 64, false), t(1, 64, true), t(2, 64, false), t(1, 128, true)]
}

/// The bf16 attention kernel case under every tiling of
/// [`attention_tiles`], as bundle cases of their own (the GPU checks each
/// against the interpreter, as the default's); a tiling the kernel cannot
/// take is a clear error.
fn attention_tile_cases() {
    let (name, source, inputs) = narrow_kernel_cases(DType::BF16)
        .into_iter()
        .find(|(n, ..)| n == "attention_heads_bf16")
        .expect("the attention_heads kernel case");
    let ctx = CompilerContext::new();
    let reference = ctx.parse(&source, &name).unwrap();
    let want = Interpreter::new(&reference).run("f", &inputs).unwrap();
    let mut planned = ctx.parse(&source, &name).unwrap();
    run_pipeline(&ctx, &mut planned, "builtin.module(convert-hl-to-ll,ll-plan-memory)").unwrap();
    for old in std::fs::read_dir(bundle_cases()).into_iter().flatten().flatten() {
        if old.file_name().to_string_lossy().starts_with(&format!("kernel_{name}-")) {
            std::fs::remove_dir_all(old.path()).unwrap();
        }
    }
    for tile in attention_tiles() {
        let variant = format!("{name}-{}", tile.name());
        let dir = out_dir(&format!("gpu_kernel_{variant}"));
        let options = GpuOptions { attention_tile: Some(tile), ..GpuOptions::default() };
        let manifest =
            compile_gpu_with(&ctx, &planned, "test", &dir, &options).unwrap_or_else(|e| panic!("{variant}: {e}"));
        let heads = [(64, 64), (32, 48), (32, 16)].map(|(d, dv)| tile.shared_bytes(d, dv));
        let calls: Vec<_> = manifest.functions[0].calls.iter().filter(|c| c.op == "ll.attention").collect();
        assert_eq!(calls.len(), 3, "{variant}");
        for (call, want) in calls.iter().zip(heads) {
            assert_eq!(call.launch.unwrap().shared_bytes as usize, want, "{variant}");
        }
        ptxas_accepts(&dir, &variant);
        write_case(&kernel_case(&variant, &inputs, &want, 2.0 / 256.0), &dir);
    }
    let bad = GpuOptions {
        attention_tile: Some(AttentionTile { m_frags: 3, keys: 64, double_buffer: true }),
        ..GpuOptions::default()
    };
    let err = compile_gpu_with(&ctx, &planned, "test", &out_dir("gpu_attention_bad_tile"), &bad).unwrap_err();
    assert!(
        err.to_string().contains("the attention tile option") && err.to_string().contains("m_frags must be 1 or 2"),
        "{err}"
    );
}

/// `steps` train steps of a model with `optimizer` on the CPU backend
/// (the library GEMM, the fastest CPU path) recorded as a bundle case of
/// its GPU artifact, after ptxas accepts that artifact.
fn train_case(name: &str, source: &str, optimizer: &str, steps: usize, classes: usize, tol: f64) {
    train_case_with(name, source, optimizer, "", steps, classes, tol)
}

/// [`train_case`] with more options of `aicf-train-pipeline` (a leading
/// space): `data-parallel=true` makes an NCCL case, whose steps' weight
/// (1/4, from `step_inputs`) a group of one applies.
fn train_case_with(name: &str, source: &str, optimizer: &str, more: &str, steps: usize, classes: usize, tol: f64) {
    let ctx = CompilerContext::new();
    let mut planned = ctx.parse(source, name).unwrap();
    run_pipeline(&ctx, &mut planned, &format!("builtin.module(aicf-train-pipeline{{optimizer={optimizer}{more}}})"))
        .unwrap();
    let gpu = out_dir(&format!("gpu_{name}_{optimizer}"));
    let manifest = compile_gpu(&ctx, &planned, &ir_hash(source), &gpu).unwrap_or_else(|e| panic!("{name}: {e}"));
    ptxas_accepts(&gpu, name);
    // The schedule reaches the manifest: every event a call waits for is
    // recorded by an earlier call.
    for f in &manifest.functions {
        for (k, c) in f.calls.iter().enumerate() {
            for w in &c.waits {
                assert!(
                    f.calls[..k].iter().any(|p| p.event == Some(*w)),
                    "{name} @{}: call {k} waits for event {w}, never recorded before it",
                    f.name
                );
            }
        }
    }
    let cpu = out_dir(&format!("gpu_{name}_{optimizer}_cpu"));
    compile_cpu(&ctx, &planned, &ir_hash(source), &cpu).unwrap();
    let mut module = CpuModule::load(&cpu, 2).unwrap();
    module.force_gemm(Some(Choice::Library));
    let seed = 11;
    let mut session = CpuSession::new(module, seed).unwrap();
    let step_fn = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    let mut calls = Vec::new();
    for step in 0..steps {
        let (inputs, _) = step_inputs(step_fn, step, classes);
        let outputs = session.call("train_step", &inputs.iter().collect::<Vec<_>>()).unwrap();
        assert!(outputs[0].values[0].is_finite(), "{name}: loss {:?}", outputs[0].values);
        calls.push(BundleCall { inputs, outputs });
    }
    let symbols = manifest.symbols.iter().map(|s| (s.name.clone(), session.symbol(&s.name).unwrap())).collect();
    let case = BundleCase {
        name: format!("train_{name}_{optimizer}"),
        function: "train_step".into(),
        seed,
        tol,
        calls,
        symbols,
        nccl: more.contains("data-parallel=true"),
    };
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
    // Data parallel: the MLP's step with its gradients in buckets of 4 KiB
    // (several NCCL all-reduces, on their own stream), at weight 1/4.
    train_case_with("digits_mlp_dp", &mlp.text, "adam", " data-parallel=true bucket-bytes=4096", 3, 10, 1e-4);
    // The ONNX-exported GPT, whose written-out attention the train pipeline
    // fuses (`hl-fuse-attention`): heads of 8, the GPU's non-tensor-core
    // attention kernels forward and backward.
    use aicf_compiler::import::onnx::{self, ImportOptions, Loss};
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../test/onnx/gpt.onnx");
    let gpt = onnx::import(&fixture, &ImportOptions { batch: Some(4), loss: Loss::CrossEntropy, ..Default::default() })
        .unwrap();
    let dir = out_dir("gpu_onnx_gpt_source");
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("gpt.mlir");
    gpt.write(&model).unwrap();
    // Its weights drawn here instead of read from the exported file (the
    // bundle's case carries no weights file; CPU and GPU start alike).
    let text = std::fs::read_to_string(&model)
        .unwrap()
        .replace("init <data>", "init <uniform, low = -1.250000e-01, high = 1.250000e-01>");
    let text = match text.split_once("module attributes {hl.weights") {
        Some((_, rest)) => format!("module {}", &rest[rest.find("} {").map_or(0, |i| i + 2)..]),
        None => text,
    };
    assert!(text.contains("hl.softmax") && !text.contains("<data>"), "the import writes attention out");
    train_case_with(
        "onnx_gpt",
        &text,
        "adam",
        " fused-attention-backward=true fused-attention-any-heads=true",
        2,
        65,
        1e-3,
    );
}

/// The MLP784 train step's schedule runs on several streams (what the
/// CUDA session forks and joins), ordered by events.
#[test]
fn train_step_schedule_reaches_the_gpu_manifest() {
    let ctx = CompilerContext::new();
    let source = include_str!("../../../examples/mlp784/mlp784.mlir");
    let mut planned = ctx.parse(source, "mlp784").unwrap();
    run_pipeline(&ctx, &mut planned, "builtin.module(aicf-train-pipeline{optimizer=sgd})").unwrap();
    let dir = out_dir("gpu_schedule_mlp784");
    let manifest = compile_gpu(&ctx, &planned, "schedule", &dir).unwrap();
    let step = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    let streams: std::collections::BTreeSet<u32> = step.calls.iter().map(|c| c.stream).collect();
    assert!(streams.len() > 1 && streams.contains(&0), "streams {streams:?}");
    assert!(step.calls.iter().any(|c| !c.waits.is_empty()) && step.calls.iter().any(|c| c.event.is_some()));
}

/// A bf16 model whose GEMM feeds an elementwise op compiles for both
/// targets: 16-bit buffers are no longer confined to the GPU GEMM.
#[test]
fn sixteen_bit_models_compile_for_both_targets() {
    let ctx = CompilerContext::new();
    let t = "tensor<8x8xbf16>";
    let source = format!(
        "func.func @f(%a: {t}, %b: {t}) -> {t} {{\n  %p = hl.matmul %a, %b : {t}, {t}\n  %q = hl.add %p, %a : {t}, {t}\n  return %q : {t}\n}}"
    );
    let lower = || {
        let mut m = ctx.parse(&source, "bf16").unwrap();
        run_pipeline(&ctx, &mut m, "builtin.module(convert-hl-to-ll,ll-plan-memory)").unwrap();
        m
    };
    let cpu = compile_cpu(&ctx, &lower(), "x", &out_dir("bf16_cpu")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpu.functions[0].args[0].dtype, artifact::DType::BF16);
    let dir = out_dir("bf16_gpu");
    compile_gpu(&ctx, &lower(), "x", &dir).unwrap_or_else(|e| panic!("{e}"));
    ptxas_accepts(&dir, "bf16");
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

/// The runtime's built-in kernel of a micro-batch's share (gradient
/// accumulation's `ll.all_reduce {local}` on CUDA) assembles for both
/// chips.
#[test]
fn ptxas_accepts_the_built_in_scale_kernel() {
    let dir = out_dir("gpu_scale_ptx");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("scale.ptx");
    std::fs::write(&path, aicf_runtime::cuda::SCALE_PTX).unwrap();
    assert!(aicf_runtime::cuda::SCALE_PTX.contains(&format!(".entry {}(", aicf_runtime::cuda::SCALE_ENTRY)));
    for chip in ["sm_80", "sm_90"] {
        validate_ptx(&path, chip).unwrap_or_else(|e| panic!("{chip}: {e}"));
    }
}

/// The bundle's benchmark artifacts (compiled and checked by ptxas here,
/// timed by `gpu_bench` on a GPU): a fused elementwise chain over 2^24
/// elements (bandwidth), GEMMs 4096^3 in f32 and in bf16 (FLOP rate), and
/// causal attention over 8x8 heads of 1024 x 64 in f32 and 8x12 in bf16
/// (FLOP rate).
#[test]
fn benchmark_kernels_compile_to_ptx_that_ptxas_accepts() {
    let t = "tensor<4096x4096xf32>";
    let h = "tensor<4096x4096xbf16>";
    let a = "tensor<8x8x1024x64xf32>";
    let ah = "tensor<8x12x1024x64xbf16>";
    let cases = [
        (
            "elementwise",
            format!(
                "func.func @f(%x: {t}, %y: {t}) -> {t} {{\n  %a = hl.mul %x, %y : {t}, {t}\n  %b = hl.add %a, %x : {t}, {t}\n  return %b : {t}\n}}"
            ),
        ),
        (
            "gemm4096",
            format!(
                "func.func @f(%a: {t}, %b: {t}) -> {t} {{\n  %p = hl.matmul %a, %b : {t}, {t}\n  return %p : {t}\n}}"
            ),
        ),
        (
            "gemm4096_bf16",
            format!(
                "func.func @f(%a: {h}, %b: {h}) -> {h} {{\n  %p = hl.matmul %a, %b : {h}, {h}\n  return %p : {h}\n}}"
            ),
        ),
        (
            "attention",
            format!(
                "func.func @f(%q: {a}, %k: {a}, %v: {a}) -> {a} {{\n  %o = hl.attention %q, %k, %v causal : {a}, {a}, {a}\n  return %o : {a}\n}}"
            ),
        ),
        (
            // GPT-2 small's heads in bf16: the tensor-core attention
            "attention_bf16",
            format!(
                "func.func @f(%q: {ah}, %k: {ah}, %v: {ah}) -> {ah} {{\n  %o = hl.attention %q, %k, %v causal : {ah}, {ah}, {ah}\n  return %o : {ah}\n}}"
            ),
        ),
    ];
    for (name, source) in cases {
        let ctx = CompilerContext::new();
        let mut planned = ctx.parse(&source, name).unwrap();
        run_pipeline(&ctx, &mut planned, "builtin.module(hl-fuse-elementwise,convert-hl-to-ll,ll-plan-memory)")
            .unwrap();
        let dir = out_dir(&format!("gpu_bench_{name}"));
        let manifest = compile_gpu(&ctx, &planned, "bench", &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(manifest.functions[0].calls.len(), 1, "{name}: one fused kernel");
        ptxas_accepts(&dir, name);
        let bench = bundle_cases().join("../bench").join(name);
        let _ = std::fs::remove_dir_all(&bench);
        std::fs::create_dir_all(&bench).unwrap();
        copy_artifact(&dir, &bench);
    }
    gemm_tile_variants();
    attention_benchmarks();
}

/// The bf16 attention benchmark under the other tilings
/// ([`attention_tiles`]; `run.sh` times each as `attention_bf16-<tile>`),
/// and its forward and backward as a model's gradient runs them
/// (`attention_bf16_train`: `hl-autodiff` of sum(attention(q, k, v) * g),
/// the backward recomputing the probabilities as GEMMs and a softmax
/// backward).
fn attention_benchmarks() {
    let ah = "tensor<8x12x1024x64xbf16>";
    let forward = format!(
        "func.func @f(%q: {ah}, %k: {ah}, %v: {ah}) -> {ah} {{\n  %o = hl.attention %q, %k, %v causal : {ah}, {ah}, {ah}\n  return %o : {ah}\n}}"
    );
    let benches = bundle_cases().join("../bench");
    for old in std::fs::read_dir(&benches).into_iter().flatten().flatten() {
        if old.file_name().to_string_lossy().starts_with("attention_bf16-") {
            std::fs::remove_dir_all(old.path()).unwrap();
        }
    }
    let ctx = CompilerContext::new();
    let mut planned = ctx.parse(&forward, "attention_bf16").unwrap();
    run_pipeline(&ctx, &mut planned, "builtin.module(convert-hl-to-ll,ll-plan-memory)").unwrap();
    for tile in attention_tiles() {
        let name = format!("attention_bf16-{}", tile.name());
        let dir = out_dir(&format!("gpu_bench_{name}"));
        let options = GpuOptions { attention_tile: Some(tile), ..GpuOptions::default() };
        compile_gpu_with(&ctx, &planned, "bench", &dir, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        ptxas_accepts(&dir, &name);
        copy_artifact(&dir, &benches.join(&name));
    }
    let mut train = String::new();
    for p in ["q", "k", "v"] {
        train += &format!("hl.param @{p} : {ah} owner \"\" init <normal>\n");
    }
    train += &format!("func.func @loss(%g: {ah}) -> tensor<bf16> {{\n");
    for p in ["q", "k", "v"] {
        train += &format!("  %{p} = hl.get_param @{p} : {ah}\n");
    }
    train += &format!(
        "  %o = hl.attention %q, %k, %v causal : {ah}, {ah}, {ah}\n  %w = hl.mul %o, %g : {ah}, {ah}\n  \
         %l = hl.reduce_sum %w axes = [0, 1, 2, 3] : {ah}\n  return %l : tensor<bf16>\n}}\n"
    );
    let mut module = ctx.parse(&train, "attention_bf16_train").unwrap();
    run_pipeline(&ctx, &mut module, "builtin.module(hl-autodiff{fused-attention-backward=true})").unwrap();
    // The gradient function as the `f` gpu_bench runs.
    let text = module.as_operation().to_string().replace("func.func @loss(", "func.func @forward(");
    let text = text.replace("func.func @loss_grad(", "func.func @f(");
    let mut planned = ctx.parse(&text, "attention_bf16_train").unwrap();
    run_pipeline(&ctx, &mut planned, "builtin.module(hl-fuse-elementwise,convert-hl-to-ll,ll-plan-memory)").unwrap();
    let dir = out_dir("gpu_bench_attention_bf16_train");
    let manifest = compile_gpu(&ctx, &planned, "bench", &dir).unwrap();
    let f = manifest.functions.iter().find(|f| f.name == "f").expect("the gradient function as f");
    assert!(f.calls.iter().any(|c| c.op == "ll.attention"), "the forward's fused kernel in the gradient");
    ptxas_accepts(&dir, "attention_bf16_train");
    let bench = benches.join("attention_bf16_train");
    let _ = std::fs::remove_dir_all(&bench);
    copy_artifact(&dir, &bench);
}

/// The bf16 GEMM benchmark under other tilings than the default, for
/// tuning on a GPU (`run.sh` times each as `gemm4096_bf16-<tile>`); a tile
/// the kernel cannot take is a clear error.
fn gemm_tile_variants() {
    let h = "tensor<4096x4096xbf16>";
    let source =
        format!("func.func @f(%a: {h}, %b: {h}) -> {h} {{\n  %p = hl.matmul %a, %b : {h}, {h}\n  return %p : {h}\n}}");
    let ctx = CompilerContext::new();
    let mut planned = ctx.parse(&source, "gemm").unwrap();
    run_pipeline(&ctx, &mut planned, "builtin.module(convert-hl-to-ll,ll-plan-memory)").unwrap();
    let tile = |warps_m, warps_n, frags_m, frags_n, bk, stages| TensorCoreTile {
        warps_m,
        warps_n,
        frags_m,
        frags_n,
        bk,
        stages,
    };
    // mma.sync tilings (the default benchmark's kernel is wgmma on sm_90),
    // and wgmma 4 stages deep.
    let variants = [
        (tile(2, 4, 4, 4, 32, 4), false),
        (tile(2, 4, 4, 4, 64, 3), false),
        (tile(2, 2, 4, 4, 32, 4), false),
        (tile(2, 4, 4, 4, 64, 4), true),
    ];
    let benches = bundle_cases().join("../bench");
    for old in std::fs::read_dir(&benches).into_iter().flatten().flatten() {
        if old.file_name().to_string_lossy().starts_with("gemm4096_bf16-") {
            std::fs::remove_dir_all(old.path()).unwrap();
        }
    }
    for (t, wgmma) in variants {
        let (bm, bn) = t.block();
        let kind = if wgmma { "wgmma" } else { "mma" };
        let name = format!("gemm4096_bf16-{kind}-{bm}x{bn}x{}-w{}x{}-s{}", t.bk, t.warps_m, t.warps_n, t.stages);
        let dir = out_dir(&format!("gpu_bench_{name}"));
        let options = GpuOptions { gemm_tile: Some(t), wgmma, ..GpuOptions::default() };
        let manifest =
            compile_gpu_with(&ctx, &planned, "bench", &dir, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        // wgmma: stages of 48 KiB and 1 KiB to align them (if over mma.sync).
        let wgmma_bytes = if wgmma { t.stages * 48 * 1024 + 1024 } else { 0 };
        let shared = t.shared_bytes(false, false).max(wgmma_bytes);
        assert_eq!(manifest.functions[0].calls[0].launch.unwrap().shared_bytes as usize, shared, "{name}");
        ptxas_accepts(&dir, &name);
        let ptx = ptx_text(&dir, "sm_90");
        assert_eq!(ptx.contains("wgmma"), wgmma, "{name}: wgmma on sm_90");
        let bench = benches.join(&name);
        let _ = std::fs::remove_dir_all(&bench);
        std::fs::create_dir_all(&bench).unwrap();
        copy_artifact(&dir, &bench);
    }
    // 128 x 256 tiles with bk 64 take 51 KiB a stage: 5 stages are over
    // a block's 227 KiB. Three warps cannot split a 16 x 16 tile of B.
    let too_big = GpuOptions { gemm_tile: Some(tile(2, 4, 4, 4, 64, 5)), ..GpuOptions::default() };
    let err = compile_gpu_with(&ctx, &planned, "bench", &out_dir("gpu_bench_too_big"), &too_big).unwrap_err();
    assert!(err.to_string().contains("over 227 KiB"), "{err}");
    let ragged = GpuOptions { gemm_tile: Some(tile(3, 1, 1, 1, 16, 2)), ..GpuOptions::default() };
    let err = compile_gpu_with(&ctx, &planned, "bench", &out_dir("gpu_bench_ragged"), &ragged).unwrap_err();
    assert!(err.to_string().contains("16-byte chunks"), "{err}");
}

/// The `ll` text of a GemmCheck's one GEMM: `f(a, b[, bias]) -> out`.
fn gemm_source(c: &GemmCheck) -> String {
    let ty = |dims: [usize; 2], t: artifact::DType| {
        let lead = if c.batch > 1 { format!("{}x", c.batch) } else { String::new() };
        format!(
            "memref<{lead}{}x{}x{}>",
            dims[0],
            dims[1],
            if t == artifact::DType::BF16 {
                "bf16"
            } else if t == artifact::DType::F16 {
                "f16"
            } else {
                "f32"
            }
        )
    };
    let a = ty(if c.ta { [c.k, c.m] } else { [c.m, c.k] }, c.dtype);
    let b = ty(if c.tb { [c.n, c.k] } else { [c.k, c.n] }, c.dtype);
    let o = ty([c.m, c.n], c.out);
    let bias_t = ty([1, c.n], c.out).replace("1x", "").replace(&format!("{}x", c.batch), "");
    let mut args = vec![format!("%a: {a} {{ll.bind = \"input\"}}"), format!("%b: {b} {{ll.bind = \"input\"}}")];
    if c.bias {
        args.push(format!("%bias: {bias_t} {{ll.bind = \"input\"}}"));
    }
    args.push(format!("%out: {o} {{ll.bind = \"result 0\"}}"));
    args.push("%arena: memref<0xi8> {ll.bind = \"arena\"}".into());
    let op = format!(
        "ll.gemm %a, %b{} into %out{}{}{} : {a}, {b}{} -> {o}",
        if c.bias { " bias(%bias)" } else { "" },
        if c.ta { " transpose_a" } else { "" },
        if c.tb { " transpose_b" } else { "" },
        if c.relu { " act = relu" } else { "" },
        if c.bias { format!(" bias {bias_t}") } else { String::new() },
    );
    format!(
        "func.func @f({}) attributes {{ll.memory = {{arena_bytes = 0 : i64, buffers = 0 : i64, in_place = 0 : i64, \
         lower_bound_bytes = 0 : i64, naive_bytes = 0 : i64, recomputed = 0 : i64}}}} {{\n  {op}\n  return\n}}\n",
        args.join(", ")
    )
}

/// Tensor-core GEMMs (f16 and bf16 operands, f32 accumulation) on the
/// layouts, transposes, result types and tile configurations the generator
/// has, odd and round sizes, the copy paths (cp.async where the contiguous
/// dimension is a multiple of 8, else plain loads): ptxas accepts each, the
/// PTX holds the tensor-core instructions, and the bundle gets a GEMM check
/// (inputs made and reference computed on the GPU machine).
#[test]
fn tensor_core_gemms_compile_to_ptx_that_ptxas_accepts() {
    use artifact::DType::{BF16, F16, F32};
    let check = |batch, m, k, n, ta, tb, dtype, out, bias, relu| {
        let tol = match out {
            F32 => 1e-5,
            F16 => 2e-3,
            _ => 8e-3,
        };
        GemmCheck { batch, m, k, n, ta, tb, dtype, out, bias, relu, tol }
    };
    let cases = [
        // (name, check, cp.async copies, the block's output tile)
        ("bf16_bias_relu", check(1, 100, 72, 56, false, false, BF16, BF16, true, true), true, (64, 64)),
        ("bf16_ta_f32", check(1, 40, 64, 24, true, false, BF16, F32, false, false), true, (64, 64)),
        ("bf16_tb_odd", check(1, 33, 37, 29, false, true, BF16, F32, true, false), false, (64, 64)),
        ("f16_ta_tb_batched", check(3, 48, 40, 16, true, true, F16, F16, false, false), true, (64, 64)),
        ("f16_odd", check(1, 17, 9, 13, false, false, F16, F32, false, true), false, (64, 64)),
        ("bf16_big", check(1, 1536, 96, 1536, false, false, BF16, BF16, false, false), true, (128, 128)),
        ("bf16_wide", check(1, 2048, 136, 2304, false, false, BF16, BF16, true, true), true, (128, 256)),
        ("bf16_big_tb", check(1, 2048, 72, 2304, false, true, BF16, F32, true, false), true, (128, 256)),
        ("bf16_big_ta", check(1, 2304, 80, 2048, true, false, BF16, F32, false, true), true, (128, 256)),
    ];
    for (name, c, asynchronous, block) in cases {
        let (dir, manifest) = compile_gemm_check(name, &c, "tc");
        let launch = manifest.functions[0].calls[0].launch.unwrap();
        let tile = TensorCoreTile::for_shape(c.m, c.n, c.batch);
        assert_eq!(tile.block(), block, "{name}");
        assert_eq!(launch.block[0] as usize, tile.threads(), "{name}: {launch:?}");
        assert_eq!(launch.grid, [c.n.div_ceil(block.1) as u32, c.m.div_ceil(block.0) as u32, c.batch as u32]);
        // 128 x 256 tiles take wgmma on sm_90: 3 stages of 48 KiB and 1 KiB
        // to align them for the swizzle, more than the mma.sync kernel's.
        let hopper = block == (128, 256);
        let shared = if hopper { 3 * 48 * 1024 + 1024 } else { tile.shared_bytes(c.ta, c.tb) };
        assert_eq!(launch.shared_bytes as usize, shared, "{name}: dynamic shared memory");
        let sm90 = ptx_text(&dir, "sm_90");
        assert!(sm90.contains(".target sm_90a"), "{name}: built for sm_90a");
        assert_eq!(sm90.contains("wgmma.mma_async.sync.aligned.m64n256k16.f32"), hopper, "{name}: wgmma on sm_90");
        assert_eq!(sm90.contains("mma.sync.aligned.m16n8k16"), !hopper, "{name}: mma.sync on sm_90");
        // The call carries its cuBLASLt candidate: the same product and the
        // whole epilogue (the runtime's GPU test runs it both ways).
        let library = manifest.functions[0].calls[0].library.clone().unwrap_or_else(|| panic!("{name}: no candidate"));
        let gpu = library.gpu.unwrap_or_else(|| panic!("{name}: no GPU part"));
        assert_eq!((library.batch, library.m, library.n, library.k), (c.batch, c.m, c.n, c.k), "{name}");
        assert_eq!((library.a_strides[1] != 1, library.b_strides[1] != 1), (c.ta, c.tb), "{name}: transposes");
        assert_eq!((gpu.operands, gpu.output, gpu.bias.is_some(), gpu.act), (c.dtype, c.out, c.bias, c.relu as i64));
        let ptx = ptx_text(&dir, "sm_80");
        let kind = if c.dtype == BF16 { "bf16" } else { "f16" };
        assert!(
            ptx.contains(&format!("mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32")),
            "{name}: no mma.sync"
        );
        assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4"), "{name}: no ldmatrix");
        assert_eq!(ptx.contains("cp.async"), asynchronous, "{name}: cp.async copies");
        bundle_gemm_check(name, &dir, &c);
    }
}

/// The GEMM check `c` as a one-GEMM function compiled for the GPU into
/// `gpu_<tag>_<name>`, which ptxas accepts.
fn compile_gemm_check(name: &str, c: &GemmCheck, tag: &str) -> (PathBuf, artifact::Manifest) {
    let ctx = CompilerContext::new();
    let source = gemm_source(c);
    let module = ctx.parse(&source, name).unwrap_or_else(|e| panic!("{name}: {e}\n{source}"));
    let dir = out_dir(&format!("gpu_{tag}_{name}"));
    let manifest = compile_gpu(&ctx, &module, tag, &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    ptxas_accepts(&dir, name);
    (dir, manifest)
}

/// The compiled GEMM check in `dir` into the bundle's `gemm/<name>`, with
/// its `gemm.json` (the GPU machine makes the inputs and the reference).
fn bundle_gemm_check(name: &str, dir: &Path, c: &GemmCheck) {
    let bundle = bundle_cases().join("../gemm").join(name);
    let _ = std::fs::remove_dir_all(&bundle);
    std::fs::create_dir_all(&bundle).unwrap();
    copy_artifact(dir, &bundle);
    std::fs::write(bundle.join("gemm.json"), serde_json::to_string(c).unwrap()).unwrap();
}

/// f32 GEMM checks for the bundle: the generated SIMT kernel, cuBLASLt in
/// fp32 and cuBLASLt in TF32 (`allow_tf32`) each against the host
/// reference on the GPU machine; odd, round and transposed shapes. Each
/// carries its cuBLASLt candidate, and ptxas accepts the kernels.
#[test]
fn f32_gemm_checks_for_the_gpu_bundle() {
    use artifact::DType::F32;
    let check = |m, k, n, ta, tb, bias, relu| GemmCheck {
        batch: 1,
        m,
        k,
        n,
        ta,
        tb,
        dtype: F32,
        out: F32,
        bias,
        relu,
        tol: 1e-5,
    };
    let cases = [
        ("f32_bias_relu", check(100, 72, 56, false, false, true, true)),
        ("f32_odd_tb", check(33, 37, 29, false, true, true, false)),
        ("f32_big_ta", check(512, 256, 384, true, false, false, false)),
    ];
    for (name, c) in cases {
        let (dir, manifest) = compile_gemm_check(name, &c, "f32");
        let library = manifest.functions[0].calls[0].library.clone().unwrap_or_else(|| panic!("{name}: no candidate"));
        let gpu = library.gpu.unwrap_or_else(|| panic!("{name}: no GPU part"));
        assert_eq!((gpu.operands, gpu.output, gpu.bias.is_some()), (F32, F32, c.bias), "{name}");
        bundle_gemm_check(name, &dir, &c);
    }
}

/// The host reference of the GEMM checks agrees with the CPU backend's
/// f32 GEMM on the same (exact) inputs, so a GPU failure is the GPU's.
#[test]
fn gemm_check_reference_matches_the_cpu_backend() {
    use artifact::DType::F32;
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let c =
            GemmCheck { batch: 2, m: 7, k: 5, n: 6, ta, tb, dtype: F32, out: F32, bias: false, relu: true, tol: 1e-6 };
        let ctx = CompilerContext::new();
        let module = ctx.parse(&gemm_source(&c), "check").unwrap();
        let dir = out_dir(&format!("gemm_check_{ta}_{tb}"));
        compile_cpu(&ctx, &module, "check", &dir).unwrap();
        let mut session = CpuSession::new(CpuModule::load(&dir, 1).unwrap(), 0).unwrap();
        let inputs = c.inputs();
        let got = session.call("f", &inputs.iter().collect::<Vec<_>>()).unwrap();
        aicf_runtime::cuda::compare("cpu", &got[0], &c.reference(&inputs), 1e-6).unwrap();
    }
}

/// A GEMM whose epilogue cuBLASLt lacks (here a mask, the ReLU gradient)
/// carries no cuBLASLt candidate; the same product without it does.
#[test]
fn only_gemms_cublaslt_can_finish_carry_its_candidate() {
    let ctx = CompilerContext::new();
    let source = "func.func @f(%g: memref<32x10xf32> {ll.bind = \"input\"}, %w: memref<10x128xf32> {ll.bind = \"input\"}, \
         %h: memref<32x128xf32> {ll.bind = \"input\"}, %dh: memref<32x128xf32> {ll.bind = \"result 0\"}, \
         %p: memref<32x128xf32> {ll.bind = \"result 1\"}, %arena: memref<0xi8> {ll.bind = \"arena\"}) \
         attributes {ll.memory = {arena_bytes = 0 : i64, buffers = 0 : i64, in_place = 0 : i64, lower_bound_bytes = 0 : i64, \
         naive_bytes = 0 : i64, recomputed = 0 : i64}} {\n  \
         ll.gemm %g, %w mask(%h) into %dh : memref<32x10xf32>, memref<10x128xf32> mask memref<32x128xf32> -> memref<32x128xf32>\n  \
         ll.gemm %g, %w into %p : memref<32x10xf32>, memref<10x128xf32> -> memref<32x128xf32>\n  return\n}\n";
    let module = ctx.parse(source, "masked").unwrap();
    let dir = out_dir("gpu_gemm_candidates");
    let manifest = compile_gpu(&ctx, &module, "candidates", &dir).unwrap();
    let calls = &manifest.functions[0].calls;
    assert_eq!(calls.len(), 2);
    assert!(calls[0].library.is_none(), "masked GEMM: {:?}", calls[0].library);
    let plain = calls[1].library.as_ref().and_then(|l| l.gpu.as_ref()).expect("plain GEMM: a cuBLASLt candidate");
    assert_eq!(
        (plain.operands, plain.output, plain.bias, plain.act),
        (artifact::DType::F32, artifact::DType::F32, None, 0)
    );
}

/// The first `steps` steps of training `model` on `data` with Adam at
/// `lr`: the CPU's losses and checkpoints, and the model compiled for CUDA
/// (and for the smaller last batch), written as a training run of the GPU
/// bundle (`runs/<name>`), which the runtime's GPU test replays through the
/// `Backend` interface.
fn train_run(name: &str, model: &str, data: &str, steps: usize, lr: f64, tol: f64, state_tol: f64) {
    train_run_in(name, model, data, steps, lr, (tol, state_tol), aicf_compiler::pipeline::Precision::Fp32, false);
}

/// [`train_run`] in `precision`, the GPU's convolutions as products over
/// their window rows where `conv_as_gemm` (else its default, direct
/// kernels; the CPU's reference run takes products either way).
#[allow(clippy::too_many_arguments)]
fn train_run_in(
    name: &str,
    model: &str,
    data: &str,
    steps: usize,
    lr: f64,
    (tol, state_tol): (f64, f64),
    precision: aicf_compiler::pipeline::Precision,
    conv_as_gemm: bool,
) {
    use aicf_compiler::pipeline::{Target, compile_source};
    use aicf_compiler::train::{
        Options, Trainer,
        data::{DataOptions, Dataset, Signature, Split},
        run::step_inputs,
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join(model)).unwrap();
    let sig = Signature::of_source(&source, model).unwrap();
    let batch = sig.batch();
    let options = DataOptions { windows_per_epoch: Some(steps * batch), ..DataOptions::default() };
    let dataset = Dataset::load(&[root.join(data)], &sig, &options).unwrap();
    let seed = 5;
    let mut rng = seed;
    let mut order = Vec::new();
    while order.len() < steps {
        let epoch = dataset.epoch_order(&mut rng);
        order.extend(epoch.chunks(batch).map(<[usize]>::to_vec));
    }
    order.truncate(steps);
    let dir = bundle_cases().join("../runs").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // 16-bit runs take attention's fused backward (its tensor-core
    // kernels on the GPU, the row kernels on the CPU).
    let fused_attention_backward = Some(precision != aicf_compiler::pipeline::Precision::Fp32);
    let train = Options {
        cache_dir: out_dir(&format!("run_{name}")),
        seed,
        precision,
        fused_attention_backward,
        ..Options::default()
    };
    let ragged = order.iter().map(Vec::len).find(|&n| n != batch);
    let gpu = Target::Cuda(GpuOptions::default());
    for (sub, size) in [("main", None), ("variant", ragged)] {
        if sub == "main" || size.is_some() {
            let options = aicf_compiler::pipeline::TrainOptions { conv_as_gemm, ..train.train_options() };
            compile_source(&source, model, &options, size, &gpu, &dir.join(sub))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            ptxas_accepts(&dir.join(sub), name);
        }
    }
    let mut trainer = Trainer::from_source(&source, model, train).unwrap();
    let lr_of = trainer.backend().function("train_step").unwrap().args.iter().find(|a| a.bind == "lr").unwrap().dtype;
    let resume_at = steps / 2;
    let mut runs = Vec::new();
    let mut losses = Vec::new();
    for (step, examples) in order.iter().enumerate() {
        if step == resume_at {
            trainer.save_checkpoint(&dir.join("cpu-resume.safetensors"), &Default::default()).unwrap();
        }
        let mut inputs = step_inputs(&sig, &dataset, Split::Train, examples, seed, step as u64);
        losses.push(trainer.step(&inputs.iter().collect::<Vec<_>>(), lr).unwrap().loss);
        inputs.push(Tensor::scalar(lr, lr_of));
        runs.push(inputs);
    }
    trainer.save_checkpoint(&dir.join("cpu-final.safetensors"), &Default::default()).unwrap();
    assert!(losses[steps - 1] < losses[0], "{name} trains on the CPU: {losses:?}");
    let run = aicf_runtime::cuda::TrainRun { name: name.into(), seed, tol, state_tol, steps: runs, losses, resume_at };
    std::fs::write(dir.join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
}

/// `aicf train`'s first 100 steps of the digits MLP and CNN (through the
/// epoch's smaller last batch) and of the char LM on tiny Shakespeare, for
/// the GPU bundle.
#[test]
fn training_runs_for_the_gpu_bundle() {
    train_run("digits_mlp", "examples/mlp/digits_mlp.mlir", "data/digits.csv.gz", 100, 3e-3, 1e-3, 1e-2);
    train_run("digits_cnn", "examples/cnn/digits_cnn.mlir", "data/digits.csv.gz", 100, 3e-3, 1e-3, 1e-2);
    // The same with the GPU's convolutions as products (`--conv gemm`),
    // for its check and its step time beside the direct kernels'.
    let (cnn, digits) = ("examples/cnn/digits_cnn.mlir", "data/digits.csv.gz");
    let fp32 = aicf_compiler::pipeline::Precision::Fp32;
    train_run_in("digits_cnn_products", cnn, digits, 100, 3e-3, (1e-3, 1e-2), fp32, true);
    train_run("char_lm", "examples/char_lm/char_lm.mlir", "data/tinyshakespeare.txt", 100, 3e-3, 5e-3, 5e-2);
    // Mixed precision: the GPU's bf16 run against the CPU's (both round
    // each kernel's output to bf16, in different orders of summation).
    let bf16 = aicf_compiler::pipeline::Precision::Bf16;
    train_run_in(
        "char_lm_bf16",
        "examples/char_lm/char_lm.mlir",
        "data/tinyshakespeare.txt",
        100,
        3e-3,
        (2e-2, 1e-1),
        bf16,
        false,
    );
}

/// The char LM in bf16 for the GPU, attention's backward fused: every
/// contraction of its train step (the GEMMs forward and backward, on bf16
/// operands, and the attention's products forward and backward) runs on
/// the tensor cores: its kernel's PTX holds `mma.sync` (sm_80) or
/// `wgmma` (sm_90a), and ptxas accepts it.
#[test]
fn bf16_char_lm_gemms_run_on_tensor_cores() {
    use aicf_compiler::pipeline::{Precision, Target, TrainOptions, compile_source};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join("examples/char_lm/char_lm.mlir")).unwrap();
    let options =
        TrainOptions { precision: Precision::Bf16, fused_attention_backward: true, ..TrainOptions::default() };
    let dir = out_dir("gpu_char_lm_bf16");
    let compiled = compile_source(&source, "char_lm", &options, None, &Target::Cuda(GpuOptions::default()), &dir)
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = out_dir_kept("gpu_char_lm_bf16");
    // Its manifest passes the loader's checks (the GEMM bounds check read
    // its bf16 operands as f32, and refused every 16-bit CUDA artifact).
    aicf_runtime::artifact::load_manifest(&dir).unwrap_or_else(|e| panic!("{e}"));
    ptxas_accepts(&dir, "char_lm bf16");
    let step = compiled.manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    let gemms: Vec<&str> = step.calls.iter().filter(|c| c.op == "ll.gemm").map(|c| c.symbol.as_str()).collect();
    assert!(gemms.len() >= 12, "GEMMs of the char LM's train step: {gemms:?}");
    // The attention forward's two products too (heads of 16: the
    // tensor-core attention), and its fused backward's three kernels: D
    // (a row kernel: the forward kept each row's log-sum-exp, so no pass
    // over the scores is left to it), dk and dv, dq.
    let calls =
        |op: &str| -> Vec<&str> { step.calls.iter().filter(|c| c.op == op).map(|c| c.symbol.as_str()).collect() };
    let (forward, backward) = (calls("ll.attention"), calls("ll.attention_backward"));
    assert!(
        !forward.is_empty() && backward.len() == 3 * forward.len(),
        "the char LM's attention kernels: {forward:?} {backward:?}"
    );
    for chip in ["sm_80", "sm_90"] {
        let ptx = ptx_text(&dir, chip);
        let on_tensor_cores = |symbol: &str| {
            let at = ptx.find(&format!(".entry {symbol}(")).unwrap_or_else(|| panic!("{chip}: no kernel {symbol}"));
            let end = ptx[at + 1..].find(".entry ").map_or(ptx.len(), |e| at + 1 + e);
            let body = &ptx[at..end];
            body.contains("mma.sync") || body.contains("wgmma")
        };
        for symbol in gemms.iter().chain(&forward) {
            assert!(on_tensor_cores(symbol), "{chip}: contraction {symbol} is not on the tensor cores");
        }
        let rows: Vec<&&str> = backward.iter().filter(|s| !on_tensor_cores(s)).collect();
        assert_eq!(
            rows.len(),
            forward.len(),
            "{chip}: the backward's kernels off the tensor cores (D alone): {rows:?}"
        );
    }
}

/// GPU kernels come from the kernel cache by their content: the narrow
/// MLP widened (a growth rewrite) compiles only the kernels whose shapes
/// changed, and the same model again compiles none.
#[test]
fn a_rewrite_compiles_only_its_changed_gpu_kernels() {
    use crate::adapt::zero_widen;
    use aicf_compiler::pipeline::{Target, TrainOptions, compile_source};
    use aicf_compiler::train::adapt::rewrite;
    let narrow = include_str!("../../../examples/grow/narrow_mlp.mlir");
    let op = zero_widen("fc1", 24);
    let wide = rewrite(narrow, "narrow_mlp.mlir", &op).unwrap().source;
    let gpu = Target::Cuda(GpuOptions::default());
    let options = TrainOptions::default();
    let compile = |source: &str, dir: &str| compile_source(source, "m", &options, None, &gpu, &out_dir(dir)).unwrap();
    let before = compile(narrow, "gpu_grow_before");
    let after = compile(&wide, "gpu_grow_after");
    assert!(
        after.compiled_kernels < after.kernels,
        "{} of {} kernels compiled again",
        after.compiled_kernels,
        after.kernels
    );
    let again = compile(&wide, "gpu_grow_again");
    assert_eq!(again.compiled_kernels, 0, "every kernel of a model compiled before is cached");
    for (dir, c) in [("gpu_grow_before", &before), ("gpu_grow_after", &after), ("gpu_grow_again", &again)] {
        ptxas_accepts(&out_dir_kept(dir), dir);
        assert_eq!(c.manifest.ptx.len(), 2, "{dir}: PTX modules for both chips");
    }
}

/// `out_dir`'s directory, without clearing it.
fn out_dir_kept(name: &str) -> PathBuf {
    crate::tmp_root().join(name)
}
