//! Compiled CPU kernels against the reference interpreter: the same train
//! step, the same starting parameters, the same numbers (f32 tolerances).

use crate::models::mlp;
use aicf_compiler::{
    CompilerContext,
    codegen::compile_cpu,
    interp::{Array, Interpreter},
    nn::DType,
    pipeline::{Precision, TrainOptions},
    run_pipeline,
};
use aicf_runtime::{
    Backend, Tensor,
    artifact::{self, ir_hash},
    cpu::{CpuModule, CpuSession},
    registry::Choice,
};
use std::path::PathBuf;

/// A fresh directory under the target dir for one artifact.
pub(crate) fn out_dir(name: &str) -> PathBuf {
    let dir = crate::tmp_root().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Deterministic inputs in [-1, 1) and labels in [0, classes).
pub(crate) fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // Equal infinities are equal (their difference is NaN).
        assert!(g == w || (g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: compiled {g}, interpreter {w}");
    }
}

/// `steps` train steps of `traced` with `optimizer`, compiled and
/// interpreted from the same parameters; integer inputs are drawn below
/// `classes`, i64 scalars (dropout seed and offset) are the step number.
fn train_step_matches_for(
    traced: &aicf_compiler::nn::HlModule,
    tag: &str,
    optimizer: &str,
    steps: usize,
    gemm: Choice,
    classes: usize,
    tol: f64,
) {
    train_step_matches_in(traced, tag, optimizer, steps, gemm, classes, (tol, tol * 10.0), Precision::Fp32);
}

/// [`train_step_matches_for`] in `precision` (the interpreter runs the
/// same `hl-autocast`ed module, rounding each op's result to its type),
/// with tolerances (loss, symbols).
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_step_matches_in(
    traced: &aicf_compiler::nn::HlModule,
    tag: &str,
    optimizer: &str,
    steps: usize,
    gemm: Choice,
    classes: usize,
    (tol, symbol_tol): (f64, f64),
    precision: Precision,
) {
    let p = precision.name();
    let pipeline = format!("builtin.module(aicf-train-pipeline{{optimizer={optimizer} precision={p}}})");
    train_step_matches_piped(traced, tag, optimizer, steps, gemm, classes, (tol, symbol_tol), precision, &pipeline);
}

/// [`train_step_matches_in`] with the compiled step built by `pipeline`
/// (the interpreter's reference is built as there).
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_step_matches_piped(
    traced: &aicf_compiler::nn::HlModule,
    tag: &str,
    optimizer: &str,
    steps: usize,
    gemm: Choice,
    classes: usize,
    (tol, symbol_tol): (f64, f64),
    precision: Precision,
    pipeline: &str,
) {
    let ctx = CompilerContext::new();
    let mut planned = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut planned, pipeline).unwrap();
    let autocast = match precision {
        Precision::Fp32 => "",
        Precision::Bf16 => "hl-autocast{dtype=bf16},",
        Precision::Fp16 => "hl-autocast{dtype=f16},",
    };
    let scaling = if precision == Precision::Fp16 { " loss-scale=65536" } else { "" };
    let dir = out_dir(&format!("{tag}_{optimizer}_{gemm:?}"));
    let manifest = compile_cpu(&ctx, &planned, &ir_hash(&traced.text), &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut module = CpuModule::load(&dir, 2).unwrap();
    module.force_gemm(Some(gemm));
    let mut session = CpuSession::new(module, 7).unwrap();

    let mut reference = traced.parse(&ctx).unwrap();
    run_pipeline(
        &ctx,
        &mut reference,
        &format!("builtin.module({autocast}hl-optimizer{{kind={optimizer}{scaling}}},canonicalize,cse)"),
    )
    .unwrap();
    let mut interp = Interpreter::new(&reference);
    for s in &manifest.symbols {
        let t = session.symbol(&s.name).unwrap();
        let dtype = if s.dtype == artifact::DType::I64 { DType::I64 } else { DType::F32 };
        interp.set_param(&s.name, Array::new(t.shape.clone(), dtype, t.values.clone()).unwrap());
    }
    let names: Vec<String> = manifest.symbols.iter().map(|s| s.name.clone()).collect();
    let step_fn = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    for step in 0..steps {
        let (tensors, arrays) = step_inputs(step_fn, step, classes);
        let out = session.call("train_step", &tensors.iter().collect::<Vec<_>>()).unwrap();
        let want = interp.run("train_step", &arrays).unwrap();
        close("loss", &out[0].values, &want[0].data, tol);
        // The interpreter returns the new value of every symbol it updates,
        // in the symbol table's order.
        for (name, value) in names.iter().zip(&want[1..]) {
            close(name, &session.symbol(name).unwrap().values, &value.data, symbol_tol);
            interp.set_param(name, value.clone());
        }
    }
}

/// The inputs of train step `step`: data in [-1, 1), labels below
/// `classes`, lr 0.01, i64 scalars (dropout seed and offset) step + 3.
pub(crate) fn step_inputs(step_fn: &artifact::Function, step: usize, classes: usize) -> (Vec<Tensor>, Vec<Array>) {
    let mut tensors = Vec::new();
    let mut arrays = Vec::new();
    for (n, a) in step_fn.args.iter().filter(|a| a.role() == artifact::Role::Input).enumerate() {
        let count: usize = a.shape.iter().product();
        let seed = 100 * step as u64 + n as u64;
        let (values, dtype) = match (a.bind.as_str(), a.dtype) {
            ("lr", _) => (vec![0.01], DType::F32),
            ("replica_weight", _) => (vec![0.25], DType::F32),
            (_, artifact::DType::I32) => (indices(&a.shape, classes, seed).data, DType::I32),
            (_, artifact::DType::I64) => (vec![(step + 3) as f64; count], DType::I64),
            _ => (data(count, seed), DType::F32),
        };
        tensors.push(Tensor::new(a.shape.clone(), a.dtype, values.clone()));
        arrays.push(Array::new(a.shape.clone(), dtype, values).unwrap());
    }
    (tensors, arrays)
}

fn train_step_matches(optimizer: &str, steps: usize, gemm: Choice) {
    let traced = mlp::build(mlp::BATCH).unwrap();
    train_step_matches_for(&traced, "digits_mlp", optimizer, steps, gemm, 10, 1e-5);
}

#[test]
fn digits_cnn_adam_train_step_matches_the_interpreter() {
    let traced = crate::models::cnn::build(crate::models::cnn::BATCH).unwrap();
    train_step_matches_for(&traced, "digits_cnn", "adam", 2, Choice::Library, 10, 1e-5);
}

/// Embedding, attention, layer norm and dropout in one train step.
#[test]
fn char_lm_adam_train_step_matches_the_interpreter() {
    let config = crate::models::char_lm::Config { batch: 2, ..crate::models::char_lm::CONFIG };
    let traced = crate::models::char_lm::build(config).unwrap();
    train_step_matches_for(&traced, "char_lm", "adam", 2, Choice::Generated, 65, 1e-4);
}

/// The same step with attention's gradient fused (the CPU's default:
/// `hl.attention_backward` for every head, the blocked kernel), against
/// the interpreter's step over the materialised probabilities; the planned
/// step holds the fused kernel and no softmax backward.
#[test]
fn char_lm_train_step_with_the_fused_attention_backward_matches_the_interpreter() {
    let config = crate::models::char_lm::Config { batch: 2, ..crate::models::char_lm::CONFIG };
    let traced = crate::models::char_lm::build(config).unwrap();
    let options = TrainOptions {
        optimizer: "adam".into(),
        fused_attention_backward: true,
        fused_attention_any_heads: true,
        ..TrainOptions::default()
    };
    let pipeline = options.train_pipeline();
    assert!(pipeline.contains("fused-attention-any-heads=true"), "{pipeline}");
    train_step_matches_piped(
        &traced,
        "char_lm_fused_attention",
        "adam",
        2,
        Choice::Generated,
        65,
        (1e-4, 1e-3),
        Precision::Fp32,
        &pipeline,
    );
    let ctx = CompilerContext::new();
    let mut m = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut m, &pipeline).unwrap();
    let planned = m.as_operation().to_string();
    let step = planned.split("func.func @train_step").nth(1).and_then(|f| f.split("func.func").next()).unwrap();
    assert_eq!(step.matches("ll.attention_backward").count(), 2, "one per block:\n{step}");
    assert!(!step.contains("ll.softmax_backward"), "{step}");
}

#[test]
fn digits_mlp_sgd_train_step_matches_the_interpreter() {
    train_step_matches("sgd", 3, Choice::Generated);
}

#[test]
fn digits_mlp_adam_train_step_matches_the_interpreter() {
    train_step_matches("adam", 3, Choice::Generated);
}

/// A smaller last batch: the model retargeted by `hl-set-batch` and added
/// to the session as a variant trains the session's parameters; its step
/// matches the interpreter on the model traced at that batch size. Without
/// the variant the batch is a clear error.
#[test]
fn a_smaller_batch_runs_its_variant_on_the_session_state() {
    let ctx = CompilerContext::new();
    let traced = mlp::build(mlp::BATCH).unwrap();
    let compiled = |batch: Option<usize>, tag: &str| {
        let mut m = traced.parse(&ctx).unwrap();
        if let Some(b) = batch {
            run_pipeline(&ctx, &mut m, &format!("builtin.module(hl-set-batch{{size={b}}})")).unwrap();
        }
        run_pipeline(&ctx, &mut m, "builtin.module(aicf-train-pipeline{optimizer=sgd})").unwrap();
        let dir = out_dir(tag);
        compile_cpu(&ctx, &m, &ir_hash(&traced.text), &dir).unwrap_or_else(|e| panic!("{e}"));
        CpuModule::load(&dir, 2).unwrap()
    };
    let mut session = CpuSession::new(compiled(None, "variant_main"), 3).unwrap();
    let (rows, features) = (5, 64);
    let x = data(rows * features, 41);
    let y = indices(&[rows], 10, 42).data;
    let inputs = [
        Tensor::new(vec![rows, features], artifact::DType::F32, x.clone()),
        Tensor::new(vec![rows], artifact::DType::I32, y.clone()),
        Tensor::scalar(0.05, artifact::DType::F32),
    ];
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let e = session.call("train_step", &refs).unwrap_err().to_string();
    assert!(e.contains("input #0 (input) is F32 [5, 64], the model expects F32 [32, 64]"), "{e}");
    assert!(!session.compiled_for("train_step", &refs));
    session.add_module(compiled(Some(rows), "variant_small")).unwrap();
    assert!(session.compiled_for("train_step", &refs));

    let small = mlp::build(rows).unwrap();
    let mut reference = small.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut reference, "builtin.module(hl-optimizer{kind=sgd},canonicalize,cse)").unwrap();
    let mut interp = Interpreter::new(&reference);
    let names: Vec<String> = session.module().manifest().symbols.iter().map(|s| s.name.clone()).collect();
    for name in &names {
        let t = session.symbol(name).unwrap();
        let dtype = if t.dtype == artifact::DType::I64 { DType::I64 } else { DType::F32 };
        interp.set_param(name, Array::new(t.shape.clone(), dtype, t.values.clone()).unwrap());
    }
    let got = session.call("train_step", &refs).unwrap();
    let want = interp
        .run(
            "train_step",
            &[
                Array::new(vec![rows, features], DType::F32, x).unwrap(),
                Array::new(vec![rows], DType::I32, y).unwrap(),
                Array::new(vec![], DType::F32, vec![0.05]).unwrap(),
            ],
        )
        .unwrap();
    close("loss", &got[0].values, &want[0].data, 1e-5);
    for (name, value) in names.iter().zip(&want[1..]) {
        close(name, &session.symbol(name).unwrap().values, &value.data, 1e-4);
    }
    // The full batch still runs the first module, on the updated state.
    let full = [
        Tensor::new(vec![32, features], artifact::DType::F32, data(32 * features, 43)),
        Tensor::new(vec![32], artifact::DType::I32, indices(&[32], 10, 44).data),
        Tensor::scalar(0.05, artifact::DType::F32),
    ];
    assert!(session.call("train_step", &full.iter().collect::<Vec<_>>()).unwrap()[0].values[0].is_finite());
    // Every function of both modules runs in one arena, the largest
    // function's (one each held them all resident: a train run's memory
    // was their sum), and a call of each runs from it.
    let largest = |m: &CpuModule| m.manifest().functions.iter().map(|f| f.arena_bytes as usize).max().unwrap();
    let small_module = compiled(Some(rows), "variant_small_again");
    let want = largest(session.module()).max(largest(&small_module));
    assert_eq!(session.arena_bytes(), want.div_ceil(64) * 64);
    let loss = session.call("loss", &refs[..2]).unwrap();
    assert!(loss[0].values[0].is_finite());
    assert!(session.call("train_step", &refs).unwrap()[0].values[0].is_finite());
    // A variant of another model is refused.
    let other = crate::models::cnn::build(crate::models::cnn::BATCH).unwrap();
    let mut m = other.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut m, "builtin.module(aicf-train-pipeline{optimizer=sgd})").unwrap();
    let dir = out_dir("variant_other");
    compile_cpu(&ctx, &m, &ir_hash(&other.text), &dir).unwrap();
    let e = session.add_module(CpuModule::load(&dir, 1).unwrap()).unwrap_err().to_string();
    assert!(e.contains("the variant is another model"), "{e}");
}

/// The registry's library candidates (sgemm in either orientation + the
/// generated epilogue, lhs_sum included) compute the same step.
#[test]
fn library_gemm_train_step_matches_the_interpreter() {
    train_step_matches("sgd", 2, Choice::Library);
    train_step_matches("adam", 2, Choice::LibrarySwapped);
}

/// OpenBLAS's sgemm (opened at run time; `tools/setup.sh` installs it, so
/// its absence is a failure here, not a skip): every GEMM shape and layout
/// of the kernel cases (transposed operands, batches, the epilogues), and a
/// train step.
#[test]
fn openblas_gemms_match_the_interpreter() {
    assert!(
        aicf_runtime::cpu::blas::available(),
        "libopenblas.so.0 cannot be opened (tools/setup.sh installs libopenblas0-pthread)"
    );
    let (name, source, inputs) = kernel_cases().into_iter().find(|(n, _, _)| *n == "gemm_shapes").unwrap();
    assert_eq!(kernel_matches_with(name, &source, &inputs, 1e-4, Choice::OpenBlas), 4, "GEMMs OpenBlas's own code ran");
    train_step_matches("adam", 2, Choice::OpenBlas);
}

/// MKL's sgemm (opened at run time from the project's `.venv`, where
/// `tools/setup.sh` installs it on x86-64, so its absence there is a
/// failure, not a skip): every GEMM shape and layout of the kernel cases,
/// and a train step.
#[test]
#[cfg_attr(not(target_arch = "x86_64"), ignore = "MKL is installed on x86-64 only")]
fn mkl_gemms_match_the_interpreter() {
    assert!(
        aicf_runtime::cpu::blas::mkl().is_some(),
        "MKL cannot be opened (tools/setup.sh installs the mkl wheel into .venv; AICF_MKL names another)"
    );
    let (name, source, inputs) = kernel_cases().into_iter().find(|(n, _, _)| *n == "gemm_shapes").unwrap();
    assert_eq!(kernel_matches_with(name, &source, &inputs, 1e-4, Choice::Mkl), 4, "GEMMs Mkl's own code ran");
    train_step_matches("adam", 2, Choice::Mkl);
}

/// The runtime's own AVX-512 GEMM (`packed_gemm`): every GEMM shape and
/// layout of the kernel cases (edges, transposed operands, a batch, the
/// epilogues), and a train step.
#[test]
#[cfg_attr(not(aicf_avx512f), ignore = "needs a CPU with AVX-512; the build found none")]
fn avx512_gemms_match_the_interpreter() {
    assert!(aicf_runtime::cpu::packed_gemm::Kernel::Avx512F32.available());
    let (name, source, inputs) = kernel_cases().into_iter().find(|(n, _, _)| *n == "gemm_shapes").unwrap();
    assert_eq!(kernel_matches_with(name, &source, &inputs, 1e-4, Choice::Avx512), 4, "GEMMs Avx512's own code ran");
    train_step_matches("adam", 2, Choice::Avx512);
}

/// The runtime's own AVX2 GEMM (`packed_gemm`, the candidate of CPUs
/// without AVX-512; forced here on any CPU with AVX2 and FMA): every GEMM
/// shape and layout of the kernel cases, and a train step.
#[test]
#[cfg_attr(not(aicf_avx2), ignore = "needs a CPU with AVX2 and FMA; the build found none")]
fn avx2_gemms_match_the_interpreter() {
    assert!(aicf_runtime::cpu::packed_gemm::Kernel::Avx2F32.available());
    let (name, source, inputs) = kernel_cases().into_iter().find(|(n, _, _)| *n == "gemm_shapes").unwrap();
    assert_eq!(kernel_matches_with(name, &source, &inputs, 1e-4, Choice::Avx2), 4, "GEMMs Avx2's own code ran");
    train_step_matches("adam", 2, Choice::Avx2);
}

/// Every GEMM candidate on products large enough to split over 2 threads
/// (more than `GEMM_GRAIN_FMAS` multiply-adds): by rows (taller than
/// wide), by columns (a transposed B, a batch of products), with A
/// transposed, each block's operands and output offset by the split.
#[test]
fn split_gemms_match_the_interpreter_with_every_candidate() {
    let (source, inputs) = split_gemm_case();
    let source = source.as_str();
    let g = |batch, shape, tb| aicf_runtime::artifact::LibraryGemm::contiguous(batch, shape, false, tb);
    for product in [g(1, (130, 120, 150), false), g(1, (130, 170, 150), true), g(3, (100, 110, 90), false)] {
        assert_eq!(aicf_runtime::cpu::gemm_threads(&product, 2), 2, "the case must split");
    }
    // The batch of 3 splits each product by rows, the batch of 8 by whole
    // products.
    assert!(!aicf_runtime::cpu::whole_products_split(3, 2) && aicf_runtime::cpu::whole_products_split(8, 2));
    assert_eq!(aicf_runtime::cpu::gemm_threads(&g(8, (40, 80, 90), true), 2), 2, "the batch of 8 must split");
    let mut candidates = vec![Choice::Library, Choice::LibrarySwapped, Choice::GemmRs, Choice::OpenBlas, Choice::Mkl];
    use aicf_runtime::cpu::packed_gemm::Kernel;
    candidates.extend(Kernel::Avx512F32.available().then_some(Choice::Avx512));
    candidates.extend(Kernel::Avx2F32.available().then_some(Choice::Avx2));
    for gemm in candidates {
        assert_eq!(kernel_matches_with("split_gemms", source, &inputs, 1e-4, gemm), 6, "GEMMs {gemm:?}'s own code ran");
    }
}

/// (hl source of `@f`, inputs): products large enough to split over 2
/// threads, by rows, by columns (a transposed B, a batch), with A
/// transposed, a batch split by whole products (B transposed), and the
/// bias epilogue of a product split by columns and of one split by rows
/// (run on each thread's rows) ([`split_gemms_match_the_interpreter_with_every_candidate`]).
pub(crate) fn split_gemm_case() -> (String, Vec<Array>) {
    let source: String = "func.func @f(%a: tensor<130x150xf32>, %b: tensor<150x120xf32>, %w: tensor<170x150xf32>, %bias: tensor<170xf32>, %c: tensor<150x130xf32>, %m: tensor<3x100x90xf32>, %n: tensor<3x90x110xf32>, %u: tensor<8x40x90xf32>, %v: tensor<8x80x90xf32>, %w2: tensor<120x150xf32>, %bias2: tensor<120xf32>) -> (tensor<130x120xf32>, tensor<130x170xf32>, tensor<130x120xf32>, tensor<3x100x110xf32>, tensor<8x40x80xf32>, tensor<130x120xf32>) {\n  %p = hl.matmul %a, %b : tensor<130x150xf32>, tensor<150x120xf32>\n  %q = hl.linear %a, %w, %bias : tensor<130x150xf32>, tensor<170x150xf32>, tensor<170xf32>\n  %r = hl.matmul %c, %b transpose_lhs : tensor<150x130xf32>, tensor<150x120xf32>\n  %s = hl.matmul %m, %n : tensor<3x100x90xf32>, tensor<3x90x110xf32>\n  %t = hl.matmul %u, %v transpose_rhs : tensor<8x40x90xf32>, tensor<8x80x90xf32>\n  %o = hl.linear %a, %w2, %bias2 : tensor<130x150xf32>, tensor<120x150xf32>, tensor<120xf32>\n  return %p, %q, %r, %s, %t, %o : tensor<130x120xf32>, tensor<130x170xf32>, tensor<130x120xf32>, tensor<3x100x110xf32>, tensor<8x40x80xf32>, tensor<130x120xf32>\n}".into();
    let inputs = vec![
        f32s(&[130, 150], 91),
        f32s(&[150, 120], 92),
        f32s(&[170, 150], 93),
        f32s(&[170], 94),
        f32s(&[150, 130], 95),
        f32s(&[3, 100, 90], 96),
        f32s(&[3, 90, 110], 97),
        f32s(&[8, 40, 90], 98),
        f32s(&[8, 80, 90], 99),
        f32s(&[120, 150], 100),
        f32s(&[120], 101),
    ];
    (source, inputs)
}

/// Compiles `@f` of `source` (hl) for the CPU and compares each result
/// with the interpreter's on `inputs`.
fn kernel_matches(name: &str, source: &str, inputs: &[Array], tol: f64) {
    kernel_matches_with(name, source, inputs, tol, Choice::Generated);
}

/// [`kernel_matches`] with every GEMM run by candidate `gemm`; returns how
/// many GEMMs `gemm`'s own code ran (not a fallback's).
pub(crate) fn kernel_matches_with(name: &str, source: &str, inputs: &[Array], tol: f64, gemm: Choice) -> usize {
    kernel_matches_lowered(name, source, inputs, tol, gemm, true)
}

/// [`kernel_matches_with`], convolutions as products where `conv_as_gemm`,
/// else as direct kernels.
pub(crate) fn kernel_matches_lowered(
    name: &str,
    source: &str,
    inputs: &[Array],
    tol: f64,
    gemm: Choice,
    conv_as_gemm: bool,
) -> usize {
    let ctx = CompilerContext::new();
    let reference = ctx.parse(source, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    let want = Interpreter::new(&reference).run("f", inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut planned = ctx.parse(source, name).unwrap();
    let pipeline = format!("builtin.module(convert-hl-to-ll{{conv-as-gemm={conv_as_gemm}}},ll-plan-memory)");
    run_pipeline(&ctx, &mut planned, &pipeline).unwrap_or_else(|e| panic!("{name}: {e}"));
    let dir = out_dir(&format!("kernel_{name}_{gemm:?}"));
    compile_cpu(&ctx, &planned, "test", &dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    // The generated kernels are under test, GEMMs included (or the GEMM
    // candidate asked for).
    let mut module = CpuModule::load(&dir, 2).unwrap();
    module.force_gemm(Some(gemm));
    let mut session = CpuSession::new(module, 0).unwrap();
    let tensors: Vec<Tensor> = inputs
        .iter()
        .map(|a| {
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
        })
        .collect();
    let got = session.call("f", &tensors.iter().collect::<Vec<_>>()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got.len(), want.len(), "{name}: results");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        close(&format!("{name} result {i}"), &g.values, &w.data, tol);
    }
    session.module().gemm_runs(gemm)
}

pub(crate) fn f32s(shape: &[usize], seed: u64) -> Array {
    Array::new(shape.to_vec(), DType::F32, data(shape.iter().product(), seed)).unwrap()
}

pub(crate) fn indices(shape: &[usize], bound: usize, seed: u64) -> Array {
    let v = data(shape.iter().product(), seed)
        .iter()
        .map(|u| ((u + 1.0) / 2.0 * bound as f64).floor().min(bound as f64 - 1.0))
        .collect();
    Array::new(shape.to_vec(), DType::I32, v).unwrap()
}

/// Function `@f` of `source` (one f32 argument `x`) run by the
/// interpreter and compiled for the CPU: (compiled results, the
/// interpreter's).
fn compiled_and_interpreted(source: &str, name: &str, x: &Array) -> (Vec<Tensor>, Vec<Array>) {
    let ctx = CompilerContext::new();
    let want = Interpreter::new(&ctx.parse(source, name).unwrap()).run("f", &[x.clone()]).unwrap();
    let mut planned = ctx.parse(source, name).unwrap();
    run_pipeline(&ctx, &mut planned, "builtin.module(convert-hl-to-ll,ll-plan-memory)").unwrap();
    let dir = out_dir(&format!("kernel_{name}"));
    compile_cpu(&ctx, &planned, "test", &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 0).unwrap();
    let got = session.call("f", &[&Tensor::new(x.shape.clone(), artifact::DType::F32, x.data.clone())]).unwrap();
    (got, want)
}

/// tanh, erf, tanh-GELU and the exact (erf) GELU, which the CPU kernels compute
/// with MLIR's inline rational approximations of tanh and erf, against the
/// interpreter (f64, rounded to f32) on 4096 points of [-12, 12] (both
/// sides of the approximations' clamps and of their interval boundaries):
/// within 1e-6 absolute and relative.
#[test]
fn inline_tanh_and_erf_match_the_interpreter_over_a_dense_range() {
    let n = 4096;
    let x: Vec<f64> = (0..n).map(|i| ((-12.0 + 24.0 * i as f64 / (n - 1) as f64) as f32) as f64).collect();
    let x = Array::new(vec![n], DType::F32, x).unwrap();
    let t = format!("tensor<{n}xf32>");
    let source = format!(
        "func.func @f(%x: {t}) -> ({t}, {t}, {t}, {t}) {{\n  %a = hl.tanh %x : {t}\n  %b = hl.gelu %x approximate = tanh : {t}\n  %c = hl.gelu %x : {t}\n  %d = hl.erf %x : {t}\n  return %a, %b, %c, %d : {t}, {t}, {t}, {t}\n}}"
    );
    let (got, want) = compiled_and_interpreted(&source, "tanh_range", &x);
    for (name, (g, w)) in ["tanh", "tanh gelu", "erf gelu", "erf"].iter().zip(got.iter().zip(&want)) {
        for (i, (g, w)) in g.values.iter().zip(&w.data).enumerate() {
            assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "{name}({}): compiled {g}, interpreter {w}", x.data[i]);
        }
    }
}

/// Both GELUs of a bf16 tensor compute in f32 with f32 constants (as the
/// GEMM epilogue's GELU does, and PyTorch's bf16 kernels), not with
/// constants rounded to bf16 (tanh-GELU's sqrt(2/pi) is 0.7969 in bf16, off
/// by 0.13%): on 4096 bf16 points of [-6, 6] the compiled result is the
/// exact GELU rounded once to bf16, but where the exact value lies within
/// 1e-5 relative (1e-6 absolute) of a rounding boundary, which the f32
/// arithmetic and the inline tanh and erf cannot resolve.
#[test]
fn bf16_gelu_computes_with_f32_constants() {
    use half::bf16;
    let n = 4096;
    let xs: Vec<f64> = (0..n).map(|i| bf16::from_f64(-6.0 + 12.0 * i as f64 / (n - 1) as f64).to_f64()).collect();
    let t = format!("tensor<{n}xbf16>");
    let source = format!(
        "func.func @f(%x: {t}) -> ({t}, {t}) {{\n  %a = hl.gelu %x approximate = tanh : {t}\n  %b = hl.gelu %x : {t}\n  return %a, %b : {t}, {t}\n}}"
    );
    let ctx = CompilerContext::new();
    let mut planned = ctx.parse(&source, "bf16_gelu").unwrap();
    // The pipeline of an imported model's forward: fusion, then
    // canonicalize (which must not fold the constants back to bf16).
    run_pipeline(&ctx, &mut planned, aicf_compiler::pipeline::INFERENCE_PIPELINE).unwrap();
    let dir = out_dir("kernel_bf16_gelu");
    compile_cpu(&ctx, &planned, "test", &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 0).unwrap();
    let got = session.call("f", &[&Tensor::new(vec![n], artifact::DType::BF16, xs.clone())]).unwrap();
    let tanh_gelu =
        |x: f64| 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh());
    let erf_gelu = |x: f64| 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
    for (name, gelu, got) in
        [("tanh gelu", &tanh_gelu as &dyn Fn(f64) -> f64, &got[0]), ("erf gelu", &erf_gelu, &got[1])]
    {
        for (&x, &g) in xs.iter().zip(&got.values) {
            let exact = gelu(x);
            let want = bf16::from_f64(exact).to_f64();
            // What f32 arithmetic cannot resolve: 1e-5 relative, and 1e-6
            // absolute where 1 + tanh cancels in the negative tail.
            let err = 1e-5 * exact.abs() + 1e-6;
            let (lo, hi) = (bf16::from_f64(exact - err).to_f64(), bf16::from_f64(exact + err).to_f64());
            assert!(
                g == want || g == lo || g == hi || (g - exact).abs() <= err,
                "{name}({x}): compiled {g}, exact {exact} rounds to {want}"
            );
        }
    }
}

/// The gradients of bf16 and f16 GELU (both forms) and erf, as `hl-autodiff`
/// writes them and the train pipeline's fusion compiles them, are the exact
/// derivative times the upstream gradient rounded once to the 16-bit type,
/// as PyTorch's `gelu_backward` computes them (in f32): the rules' constants
/// (sqrt(2/pi), 0.044715, 1/sqrt(2 pi), 2/sqrt(pi)) are not rounded to the
/// 16-bit type (in bf16 sqrt(2/pi) is 0.13% low, which biased every tanh-GELU
/// gradient), and no intermediate is.
#[test]
fn sixteen_bit_gelu_and_erf_gradients_compute_in_f32() {
    let n = 4096;
    for (t, dtype) in [("bf16", artifact::DType::BF16), ("f16", artifact::DType::F16)] {
        let round = |v: f64| match dtype {
            artifact::DType::BF16 => half::bf16::from_f64(v).to_f64(),
            _ => half::f16::from_f64(v).to_f64(),
        };
        let xs: Vec<f64> = (0..n).map(|i| round(-6.0 + 12.0 * i as f64 / (n - 1) as f64)).collect();
        // An upstream gradient that is not one, exact in either type.
        let gs: Vec<f64> = (0..n).map(|i| round(0.75 + (i % 7) as f64 / 8.0)).collect();
        let ty = format!("tensor<{n}x{t}>");
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let forms: [(&str, &dyn Fn(f64) -> f64); 3] = [
            ("gelu %x approximate = tanh", &|x: f64| {
                let th = (k * (x + 0.044715 * x * x * x)).tanh();
                0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x)
            }),
            ("gelu %x", &|x: f64| {
                0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
                    + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
            }),
            ("erf %x", &|x: f64| 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp()),
        ];
        for (form, derivative) in forms {
            let source = format!(
                "func.func @loss(%x: {ty}, %g: {ty}) -> tensor<f32> {{\n  %y = hl.{form} : {ty}\n  \
                 %w = hl.mul %y, %g : {ty}, {ty}\n  %c = hl.cast %w : {ty} to tensor<{n}xf32>\n  \
                 %l = hl.reduce_sum %c axes = [0] : tensor<{n}xf32>\n  return %l : tensor<f32>\n}}"
            );
            let what = format!("{t} {form}");
            let ctx = CompilerContext::new();
            let mut m = ctx.parse(&source, "gelu_grad").unwrap_or_else(|e| panic!("{what}: {e}"));
            run_pipeline(
                &ctx,
                &mut m,
                "builtin.module(hl-autodiff{function=loss wrt-inputs=true},canonicalize,hl-fuse-elementwise,\
                 canonicalize,convert-hl-to-ll,ll-plan-memory)",
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let dir = out_dir(&format!("kernel_gelu_grad_{t}_{}", form.len()));
            compile_cpu(&ctx, &m, "test", &dir).unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 0).unwrap();
            let inputs = [Tensor::new(vec![n], dtype, xs.clone()), Tensor::new(vec![n], dtype, gs.clone())];
            let got = session.call("loss_grad", &inputs.iter().collect::<Vec<_>>()).unwrap();
            let dx = &got[1].values;
            for ((&x, &g), &d) in xs.iter().zip(&gs).zip(dx) {
                let exact = g * derivative(x);
                // What f32 arithmetic cannot resolve: 1e-5 relative, and
                // 4e-6 absolute in the derivative (times g) in the negative
                // tail, where 1 + erf cancels and tanh saturates to -1 (below
                // x = -4.9 the tanh form's derivative, under 3e-6, is 0 in
                // f32, as in PyTorch's formula).
                let err = 1e-5 * exact.abs() + 4e-6 * g.abs();
                let (want, lo, hi) = (round(exact), round(exact - err), round(exact + err));
                assert!(
                    d == want || d == lo || d == hi || (d - exact).abs() <= err,
                    "{what}: d/dx at {x} times {g}: compiled {d}, exact {exact} rounds to {want}"
                );
            }
        }
    }
}

/// A bf16 mean's gradient is the upstream gradient times 1/n rounded once,
/// not times 1/n rounded to bf16 (1/3 is 0.333984 there, 0.2% high, so every
/// gradient through a mean of 3 was scaled up).
#[test]
fn a_bf16_means_gradient_scales_by_the_exact_reciprocal() {
    use half::bf16;
    let (rows, n) = (64, 3);
    let source = format!(
        "func.func @loss(%x: tensor<{rows}x{n}xbf16>, %g: tensor<{rows}xbf16>) -> tensor<f32> {{\n  \
         %m = hl.reduce_mean %x axes = [1] : tensor<{rows}x{n}xbf16>\n  \
         %w = hl.mul %m, %g : tensor<{rows}xbf16>, tensor<{rows}xbf16>\n  \
         %c = hl.cast %w : tensor<{rows}xbf16> to tensor<{rows}xf32>\n  \
         %l = hl.reduce_sum %c axes = [0] : tensor<{rows}xf32>\n  return %l : tensor<f32>\n}}"
    );
    let ctx = CompilerContext::new();
    let mut m = ctx.parse(&source, "mean_grad").unwrap();
    run_pipeline(
        &ctx,
        &mut m,
        "builtin.module(hl-autodiff{function=loss wrt-inputs=true},canonicalize,hl-fuse-elementwise,\
         canonicalize,convert-hl-to-ll,ll-plan-memory)",
    )
    .unwrap();
    let dir = out_dir("kernel_bf16_mean_grad");
    compile_cpu(&ctx, &m, "test", &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 0).unwrap();
    let gs: Vec<f64> = (0..rows).map(|i| bf16::from_f64(1.0 + i as f64 / 64.0).to_f64()).collect();
    let inputs = [
        Tensor::new(vec![rows, n], artifact::DType::BF16, vec![0.5; rows * n]),
        Tensor::new(vec![rows], artifact::DType::BF16, gs.clone()),
    ];
    let got = session.call("loss_grad", &inputs.iter().collect::<Vec<_>>()).unwrap();
    for (r, &g) in gs.iter().enumerate() {
        let want = bf16::from_f64(g / n as f64).to_f64();
        for &d in &got[1].values[r * n..(r + 1) * n] {
            assert_eq!(d, want, "row {r}: d mean / dx times {g}");
        }
    }
}

/// Attention written out as its ops, in four forms (nanoGPT's masked_fill
/// on keys laid out `[B, S, H, D]`; PyTorch's exported SDPA, sqrt(scale) on
/// the queries and the keys and an additive -inf mask; no mask or scale;
/// the same with the values read transposed), becomes `hl.attention`
/// (`hl-fuse-attention`) with the values of the ops it replaces: the
/// interpreter gives the same results before and after, and the compiled
/// fused kernels match it.
#[test]
fn written_out_attention_becomes_hl_attention_with_the_same_values() {
    let upper: Vec<String> =
        (0..6).map(|i| format!("[{}]", (0..6).map(|j| (j > i).to_string()).collect::<Vec<_>>().join(", "))).collect();
    // The additive mask as PyTorch's export writes it: hex of the raw f32
    // values, 0 on and below the diagonal and -inf above.
    let additive: String = (0..36)
        .map(|e| if e % 6 > e / 6 { f32::NEG_INFINITY } else { 0.0f32 })
        .flat_map(|v| v.to_le_bytes())
        .map(|b| format!("{b:02X}"))
        .collect();
    let source = format!(
        "func.func @f(%q: tensor<2x3x6x8xf32>, %k: tensor<2x6x3x8xf32>, %v: tensor<2x3x6x8xf32>) -> (tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>) {{
  %kt = hl.transpose %k permutation = [0, 2, 3, 1] : tensor<2x6x3x8xf32>
  %s = hl.matmul %q, %kt : tensor<2x3x6x8xf32>, tensor<2x3x8x6xf32>
  %one = hl.constant dense<1.0> : tensor<f32>
  %root = hl.constant dense<2.82842708> : tensor<f32>
  %inv = hl.div %one, %root : tensor<f32>, tensor<f32>
  %scaled = hl.mul %s, %inv : tensor<2x3x6x6xf32>, tensor<f32>
  %upper = hl.constant dense<[{upper}]> : tensor<6x6xi1>
  %mask = hl.broadcast_to %upper : tensor<6x6xi1> to tensor<2x3x6x6xi1>
  %ninf = hl.constant dense<0xFF800000> : tensor<f32>
  %masked = hl.select %mask, %ninf, %scaled : tensor<2x3x6x6xi1>, tensor<f32>, tensor<2x3x6x6xf32>
  %p = hl.softmax %masked axis = 3 : tensor<2x3x6x6xf32>
  %o1 = hl.matmul %p, %v : tensor<2x3x6x6xf32>, tensor<2x3x6x8xf32>

  %kk = hl.transpose %k permutation = [0, 2, 1, 3] : tensor<2x6x3x8xf32>
  %eight = hl.constant dense<8.0> : tensor<1xf32>
  %r8 = hl.sqrt %eight : tensor<1xf32>
  %sc = hl.div %one, %r8 : tensor<f32>, tensor<1xf32>
  %half = hl.sqrt %sc : tensor<1xf32>
  %qs = hl.mul %q, %half : tensor<2x3x6x8xf32>, tensor<1xf32>
  %kts = hl.transpose %kk permutation = [0, 1, 3, 2] : tensor<2x3x6x8xf32>
  %ks = hl.mul %kts, %half : tensor<2x3x8x6xf32>, tensor<1xf32>
  %s2 = hl.matmul %qs, %ks : tensor<2x3x6x8xf32>, tensor<2x3x8x6xf32>
  %addmask = hl.constant dense<\"0x{additive}\"> : tensor<6x6xf32>
  %m2 = hl.add %s2, %addmask : tensor<2x3x6x6xf32>, tensor<6x6xf32>
  %p2 = hl.softmax %m2 axis = 3 : tensor<2x3x6x6xf32>
  %o2 = hl.matmul %p2, %v : tensor<2x3x6x6xf32>, tensor<2x3x6x8xf32>

  %s3 = hl.matmul %q, %kk transpose_rhs : tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>
  %p3 = hl.softmax %s3 axis = 3 : tensor<2x3x6x6xf32>
  %o3 = hl.matmul %p3, %v : tensor<2x3x6x6xf32>, tensor<2x3x6x8xf32>

  %vt = hl.transpose %v permutation = [0, 1, 3, 2] : tensor<2x3x6x8xf32>
  %s4 = hl.matmul %q, %kk transpose_rhs : tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>
  %p4 = hl.softmax %s4 axis = 3 : tensor<2x3x6x6xf32>
  %o4 = hl.matmul %p4, %vt transpose_rhs : tensor<2x3x6x6xf32>, tensor<2x3x8x6xf32>
  return %o1, %o2, %o3, %o4 : tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>
}}",
        upper = upper.join(", "),
    );
    let inputs = [f32s(&[2, 3, 6, 8], 31), f32s(&[2, 6, 3, 8], 32), f32s(&[2, 3, 6, 8], 33)];
    let ctx = CompilerContext::new();
    let reference = ctx.parse(&source, "written_out").unwrap();
    // canonicalize first, as the inference pipeline runs it (the train
    // pipeline's match reads the unfolded scale itself).
    let mut fused = ctx.parse(&source, "written_out").unwrap();
    run_pipeline(&ctx, &mut fused, "builtin.module(canonicalize,hl-fuse-attention,canonicalize)").unwrap();
    let text = fused.as_operation().to_string();
    assert_eq!(text.matches("hl.attention").count(), 4, "{text}");
    assert_eq!(text.matches("hl.softmax").count(), 0, "{text}");
    assert_eq!(text.matches(" causal").count(), 2, "{text}");
    let want = Interpreter::new(&reference).run("f", &inputs).unwrap();
    let got = Interpreter::new(&fused).run("f", &inputs).unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for (a, b) in g.data.iter().zip(&w.data) {
            assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "output {i}: fused {a}, written out {b}");
        }
    }
    kernel_matches("written_out_attention", &text, &inputs, 1e-5);
}

/// A compiled f32 result `got` against the interpreter's `want` (`what`
/// names it): NaN where it is NaN, the same infinity, else within 1e-6
/// absolute near zero and 1e-6 relative above.
fn assert_like_interpreter(got: f64, want: f64, what: &str) {
    if want.is_nan() {
        assert!(got.is_nan(), "{what}: compiled {got}, interpreter NaN");
    } else if want.is_infinite() {
        assert_eq!(got, want, "{what}");
    } else {
        assert!((got - want).abs() <= 1e-6 * (1.0 + want.abs()), "{what}: compiled {got}, interpreter {want}");
    }
}

/// exp, tanh, sigmoid, tanh-GELU and erf GELU where the vector `exp` would leave its
/// fast path (results below the normal range, -inf, NaN), on rows of 19
/// (vector body and scalar remainder): the guarded `exp` gives exact zeros,
/// saturated +-1 and NaN where the interpreter does.
#[test]
fn transcendentals_at_extreme_inputs_match_the_interpreter() {
    let special = [
        -1e4,
        -1000.0,
        -100.0,
        -87.5,
        -86.9,
        -40.0,
        -9.0,
        -1e-3,
        -1e-40,
        0.0,
        1e-30,
        0.5,
        9.0,
        40.0,
        88.0,
        f64::NAN,
        f64::NEG_INFINITY,
        3.0,
        -3.0,
    ];
    let rows: Vec<f64> =
        (0..3).flat_map(|r| special.iter().map(move |v| v * if r == 1 { -1.0 } else { 1.0 })).collect();
    let x = Array::new(vec![3, 19], DType::F32, rows).unwrap();
    let t = "tensor<3x19xf32>";
    let source = format!(
        "func.func @f(%x: {t}) -> ({t}, {t}, {t}, {t}, {t}) {{\n  %a = hl.exp %x : {t}\n  %b = hl.tanh %x : {t}\n  %c = hl.sigmoid %x : {t}\n  %d = hl.gelu %x approximate = tanh : {t}\n  %e = hl.gelu %x : {t}\n  return %a, %b, %c, %d, %e : {t}, {t}, {t}, {t}, {t}\n}}"
    );
    let (got, want) = compiled_and_interpreted(&source, "extremes", &x);
    for (name, (g, w)) in ["exp", "tanh", "sigmoid", "tanh gelu", "erf gelu"].iter().zip(got.iter().zip(&want)) {
        for (i, (g, w)) in g.values.iter().zip(&w.data).enumerate() {
            assert_like_interpreter(*g, *w, &format!("{name}({})", x.data[i]));
        }
    }
}

/// softmax, log-softmax and their cross-entropy over rows of 133 (the
/// vectorised maximum's body and remainder), rows holding a NaN (at the
/// start, in the body, in the remainder), +inf, -inf everywhere, and
/// values near f32's limits: the maximum that steadies the exponentials
/// skips a NaN, and every output of that row is still NaN where the
/// interpreter's is; the others agree ([`assert_like_interpreter`]).
#[test]
fn softmax_rows_with_nan_and_infinities_match_the_interpreter() {
    let n = 133;
    let rows = 7;
    let mut x: Vec<f64> = (0..rows * n).map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0).collect();
    let mut set = |r: usize, c: usize, v: f64| x[r * n + c] = v;
    set(0, 0, f64::NAN);
    set(1, 70, f64::NAN);
    set(2, 131, f64::NAN);
    set(3, 40, f64::INFINITY);
    for c in 0..n {
        set(4, c, f64::NEG_INFINITY);
    }
    set(5, 9, 3.0e38);
    set(5, 100, -3.0e38);
    let x = Array::new(vec![rows, n], DType::F32, x).unwrap();
    let t = format!("tensor<{rows}x{n}xf32>");
    let source = format!(
        "func.func @f(%x: {t}) -> ({t}, {t}, tensor<f32>) {{\n  %a = hl.softmax %x axis = 1 : {t}\n  %b = hl.log_softmax %x axis = 1 : {t}\n  %l = hl.constant dense<[1, 2, 3, 4, 5, 6, 7]> : tensor<{rows}xi32>\n  %c = hl.cross_entropy %x, %l : {t}, tensor<{rows}xi32>\n  return %a, %b, %c : {t}, {t}, tensor<f32>\n}}"
    );
    let (got, want) = compiled_and_interpreted(&source, "softmax_nan_rows", &x);
    for (name, (g, w)) in ["softmax", "log_softmax", "cross_entropy"].iter().zip(got.iter().zip(&want)) {
        for (i, (g, w)) in g.values.iter().zip(&w.data).enumerate() {
            assert_like_interpreter(*g, *w, &format!("{name}, element {i}"));
        }
    }
    // The rows with a NaN are NaN throughout, as is the loss over them.
    for r in 0..3 {
        assert!(got[0].values[r * n..(r + 1) * n].iter().all(|v| v.is_nan()), "softmax row {r}");
    }
    assert!(got[2].values[0].is_nan());
}

/// A GEMM output row and an attention score row longer than a thread's
/// stack (2.4 MB each; a worker thread has 2 MiB): the kernels take such
/// rows from the heap (a 524,288-wide linear layer overflowed the stack),
/// and still match the interpreter.
#[test]
fn kernels_with_rows_longer_than_a_stack_match_the_interpreter() {
    let n = 600_000;
    let gemm = format!(
        "func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x{n}xf32>) -> tensor<2x{n}xf32> {{\n  %p = hl.matmul %a, %b : \
         tensor<2x3xf32>, tensor<3x{n}xf32>\n  return %p : tensor<2x{n}xf32>\n}}"
    );
    kernel_matches("gemm_long_row", &gemm, &[f32s(&[2, 3], 1), f32s(&[3, n], 2)], 2e-5);
    let attention = format!(
        "func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x{n}x4xf32>, %v: tensor<1x{n}x4xf32>) -> tensor<1x2x4xf32> \
         {{\n  %o = hl.attention %q, %k, %v : tensor<1x2x4xf32>, tensor<1x{n}x4xf32>, tensor<1x{n}x4xf32>\n  return \
         %o : tensor<1x2x4xf32>\n}}"
    );
    kernel_matches(
        "attention_long_row",
        &attention,
        &[f32s(&[1, 2, 4], 3), f32s(&[1, n, 4], 4), f32s(&[1, n, 4], 5)],
        2e-5,
    );
}

/// Every ll kernel kind, on odd and round shapes, against the interpreter.
#[test]
fn every_kernel_matches_the_interpreter() {
    for (name, source, inputs) in kernel_cases() {
        kernel_matches(name, &source, &inputs, 2e-5);
    }
}

/// NCHW convolutions with output rows of at least `COLUMNS_MIN_RUN` take
/// their windows as columns, shorter ones (and NHWC) as rows: the two
/// forms the kernel cases above check against the interpreter.
#[test]
fn convolutions_take_their_windows_as_columns_where_rows_are_long() {
    let cases = kernel_cases();
    let lowered = |name: &str| {
        let (_, source, _) = cases.iter().find(|c| c.0 == name).unwrap();
        let ctx = CompilerContext::new();
        let mut m = ctx.parse(source, name).unwrap();
        run_pipeline(&ctx, &mut m, "builtin.module(convert-hl-to-ll)").unwrap();
        m.as_operation().to_string()
    };
    let columns = lowered("conv_columns");
    let windows = |ir: &str, columns: bool| {
        ir.lines()
            .filter(|l| l.contains("ll.im2col") || l.contains("ll.col2im"))
            .filter(|l| l.contains("{columns}") == columns)
            .count()
    };
    // 4 convolutions: a forward and a weight gradient's im2col, an input
    // gradient's col2im each.
    assert_eq!((windows(&columns, true), windows(&columns, false)), (12, 0), "{columns}");
    let rows = lowered("conv_windows");
    assert_eq!(windows(&rows, true), 0, "{rows}");
    assert!(windows(&rows, false) > 0, "{rows}");
}

/// The convolution cases as direct kernels (`conv-as-gemm=false`, a
/// GPU's choice), in f32 and bf16, against the interpreter.
#[test]
fn direct_convolutions_match_the_interpreter() {
    let bf16 = narrow_kernel_cases(DType::BF16).into_iter().map(|(n, s, i)| (n, s, i, 2.0 / 256.0));
    let f32 = kernel_cases().into_iter().map(|(n, s, i)| (n.to_string(), s, i, 2e-5));
    let mut ran = 0;
    for (name, source, inputs, tol) in f32.chain(bf16).filter(|(n, ..)| n.starts_with("conv")) {
        let ctx = CompilerContext::new();
        let mut planned = ctx.parse(&source, &name).unwrap();
        run_pipeline(&ctx, &mut planned, "builtin.module(convert-hl-to-ll{conv-as-gemm=false})").unwrap();
        let ir = planned.as_operation().to_string();
        assert!(ir.contains("ll.conv2d_backward_weight") && !ir.contains("ll.im2col"), "{name}: {ir}");
        kernel_matches_lowered(&format!("{name}_direct"), &source, &inputs, tol, Choice::Generated, false);
        ran += 1;
    }
    assert_eq!(ran, 8, "the conv, conv_windows, conv_columns and conv_depthwise cases in f32 and bf16");
}

/// Every ll kernel kind in bf16 and in f16 (stored in 16 bits, computed in
/// f32) against the interpreter, which rounds each op's result to the
/// 16-bit type: within 2 units in the last place (bf16 keeps 8 significant
/// bits, f16 11), as a fused kernel rounds once where the interpreter
/// rounds after each op.
#[test]
fn every_kernel_matches_the_interpreter_in_16_bits() {
    for dtype in [DType::BF16, DType::F16] {
        let tol = if dtype == DType::BF16 { 2.0 / 256.0 } else { 2.0 / 2048.0 };
        for (name, source, inputs) in narrow_kernel_cases(dtype) {
            kernel_matches(&name, &source, &inputs, tol);
        }
    }
}

/// [`kernel_cases`] with every f32 tensor as `dtype` (f16 or bf16), inputs
/// rounded to it.
pub(crate) fn narrow_kernel_cases(dtype: DType) -> Vec<(String, String, Vec<Array>)> {
    kernel_cases()
        .into_iter()
        .map(|(name, source, inputs)| {
            // The padded cross-entropy keeps its scalars (the loss and its
            // upstream gradient) in f32, as autocast leaves them.
            let wide_scalars = name == "cross_entropy_padded";
            let inputs = inputs
                .into_iter()
                .map(|a| {
                    let keep = a.dtype != DType::F32 || (wide_scalars && a.shape.is_empty());
                    if keep { a } else { Array::new(a.shape, dtype, a.data).unwrap() }
                })
                .collect();
            let mut source = source.replace("f32>", &format!("{}>", dtype.mlir()));
            if wide_scalars {
                source = source.replace(&format!("tensor<{}>", dtype.mlir()), "tensor<f32>");
            }
            (format!("{name}_{}", dtype.mlir()), source, inputs)
        })
        .collect()
}

/// (name, hl source of `@f`, inputs): every ll kernel kind on odd and
/// round shapes.
pub(crate) fn kernel_cases() -> Vec<(&'static str, String, Vec<Array>)> {
    let t = "tensor<3x5x7xf32>";
    vec![
        (
            "transpose",
            format!("func.func @f(%x: {t}) -> tensor<7x3x5xf32> {{\n  %y = hl.transpose %x permutation = [2, 0, 1] : {t}\n  return %y : tensor<7x3x5xf32>\n}}"),
            vec![f32s(&[3, 5, 7], 1)],
        ),
        (
            // The register-blocked paths with their column and k tails:
            // B rows (n = 45: one block and 13 columns), B transposed
            // (k = 37: four vectors and 5; n = 11: two blocks of 4 and 3),
            // A transposed, and a batched product.
            "gemm_shapes",
            "func.func @f(%a: tensor<5x37xf32>, %b: tensor<37x45xf32>, %w: tensor<11x37xf32>, %bias: tensor<11xf32>, %c: tensor<37x5xf32>, %m: tensor<3x6x37xf32>, %n: tensor<3x37x40xf32>) -> (tensor<5x45xf32>, tensor<5x11xf32>, tensor<5x45xf32>, tensor<3x6x40xf32>) {\n  %p = hl.matmul %a, %b : tensor<5x37xf32>, tensor<37x45xf32>\n  %q = hl.linear %a, %w, %bias : tensor<5x37xf32>, tensor<11x37xf32>, tensor<11xf32>\n  %r = hl.matmul %c, %b transpose_lhs : tensor<37x5xf32>, tensor<37x45xf32>\n  %s = hl.matmul %m, %n : tensor<3x6x37xf32>, tensor<3x37x40xf32>\n  return %p, %q, %r, %s : tensor<5x45xf32>, tensor<5x11xf32>, tensor<5x45xf32>, tensor<3x6x40xf32>\n}".into(),
            vec![f32s(&[5, 37], 51), f32s(&[37, 45], 52), f32s(&[11, 37], 53), f32s(&[11], 54), f32s(&[37, 5], 55), f32s(&[3, 6, 37], 56), f32s(&[3, 37, 40], 57)],
        ),
        (
            "softmax",
            format!("func.func @f(%x: {t}) -> ({t}, {t}) {{\n  %y = hl.softmax %x axis = 1 : {t}\n  %z = hl.log_softmax %x axis = 2 : {t}\n  return %y, %z : {t}, {t}\n}}"),
            vec![f32s(&[3, 5, 7], 2)],
        ),
        (
            "softmax_backward",
            format!("func.func @f(%y: {t}, %g: {t}) -> ({t}, {t}) {{\n  %a = hl.softmax_backward %y, %g axis = 1 : {t}\n  %b = hl.softmax_backward %y, %g axis = 2 log : {t}\n  return %a, %b : {t}, {t}\n}}"),
            vec![f32s(&[3, 5, 7], 3), f32s(&[3, 5, 7], 4)],
        ),
        (
            "norm",
            "func.func @f(%x: tensor<6x10xf32>, %w: tensor<10xf32>, %b: tensor<10xf32>, %r: tensor<4x3x5xf32>, %v: tensor<3x5xf32>) -> (tensor<6x10xf32>, tensor<4x3x5xf32>) {\n  %y = hl.layer_norm %x weight %w bias %b dims = 1 eps = 1.0e-05 : tensor<6x10xf32>, tensor<10xf32>, tensor<10xf32>\n  %z = hl.rms_norm %r weight %v dims = 2 eps = 1.0e-06 : tensor<4x3x5xf32>, tensor<3x5xf32>\n  return %y, %z : tensor<6x10xf32>, tensor<4x3x5xf32>\n}".into(),
            vec![f32s(&[6, 10], 5), f32s(&[10], 6), f32s(&[10], 7), f32s(&[4, 3, 5], 8), f32s(&[3, 5], 9)],
        ),
        (
            "norm_backward",
            "func.func @f(%g: tensor<6x10xf32>, %x: tensor<6x10xf32>, %w: tensor<10xf32>) -> (tensor<6x10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<6x10xf32>) {\n  %dx, %dw, %db = hl.norm_backward %g, %x weight(%w) dims = 1 eps = 1.0e-05 bias : tensor<6x10xf32> weight tensor<10xf32> -> tensor<6x10xf32> grad_weight tensor<10xf32> grad_bias tensor<10xf32>\n  %r = hl.norm_backward %g, %x dims = 1 eps = 1.0e-05 rms : tensor<6x10xf32> -> tensor<6x10xf32>\n  return %dx, %dw, %db, %r : tensor<6x10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<6x10xf32>\n}".into(),
            vec![f32s(&[6, 10], 10), f32s(&[6, 10], 11), f32s(&[10], 12)],
        ),
        (
            "attention",
            "func.func @f(%q: tensor<2x2x5x4xf32>, %k: tensor<2x2x5x4xf32>, %v: tensor<2x2x5x4xf32>, %a: tensor<2x3x4xf32>, %b: tensor<2x6x4xf32>, %c: tensor<2x6x3xf32>) -> (tensor<2x2x5x4xf32>, tensor<2x3x3xf32>) {\n  %o = hl.attention %q, %k, %v causal : tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>\n  %p = hl.attention %a, %b, %c scale = 0.7 : tensor<2x3x4xf32>, tensor<2x6x4xf32>, tensor<2x6x3xf32>\n  return %o, %p : tensor<2x2x5x4xf32>, tensor<2x3x3xf32>\n}".into(),
            vec![f32s(&[2, 2, 5, 4], 13), f32s(&[2, 2, 5, 4], 14), f32s(&[2, 2, 5, 4], 15), f32s(&[2, 3, 4], 16), f32s(&[2, 6, 4], 17), f32s(&[2, 6, 3], 18)],
        ),
        (
            // The fused kernel's tiles: 70 queries (a second, partial block
            // of 64 on the GPU) over 70 keys (three tiles of 32, the last
            // partial), causal; 33 queries over 45 keys with a value head
            // size apart from the key's; a head of 130 (over the register
            // limit: the two-pass row kernel).
            "attention_tiles",
            "func.func @f(%q: tensor<2x70x16xf32>, %k: tensor<2x70x16xf32>, %v: tensor<2x70x24xf32>, %a: tensor<33x8xf32>, %b: tensor<45x8xf32>, %c: tensor<45x12xf32>, %x: tensor<1x3x130xf32>, %y: tensor<1x5x130xf32>, %z: tensor<1x5x7xf32>) -> (tensor<2x70x24xf32>, tensor<33x12xf32>, tensor<1x3x7xf32>) {\n  %o = hl.attention %q, %k, %v causal : tensor<2x70x16xf32>, tensor<2x70x16xf32>, tensor<2x70x24xf32>\n  %p = hl.attention %a, %b, %c : tensor<33x8xf32>, tensor<45x8xf32>, tensor<45x12xf32>\n  %r = hl.attention %x, %y, %z causal : tensor<1x3x130xf32>, tensor<1x5x130xf32>, tensor<1x5x7xf32>\n  return %o, %p, %r : tensor<2x70x24xf32>, tensor<33x12xf32>, tensor<1x3x7xf32>\n}".into(),
            vec![f32s(&[2, 70, 16], 61), f32s(&[2, 70, 16], 62), f32s(&[2, 70, 24], 63), f32s(&[33, 8], 64), f32s(&[45, 8], 65), f32s(&[45, 12], 66), f32s(&[1, 3, 130], 67), f32s(&[1, 5, 130], 68), f32s(&[1, 5, 7], 69)],
        ),
        (
            // Head sizes the GPU's tensor-core attention takes in f16/bf16
            // (multiples of 16): 80 queries (a full and a partial block of
            // 64) over 80 keys (a full and a partial tile of 64), causal;
            // 40 queries over 100 keys, key head 32, value head 48, scaled;
            // 300 queries over 300 keys, causal (three blocks of 128 rows,
            // the last partial, over five tiles of 64 keys: both buffers of
            // a double-buffered tile reused).
            "attention_heads",
            "func.func @f(%q: tensor<2x80x64xf32>, %k: tensor<2x80x64xf32>, %v: tensor<2x80x64xf32>, %a: tensor<40x32xf32>, %b: tensor<100x32xf32>, %c: tensor<100x48xf32>, %x: tensor<1x300x32xf32>, %y: tensor<1x300x32xf32>, %z: tensor<1x300x16xf32>) -> (tensor<2x80x64xf32>, tensor<40x48xf32>, tensor<1x300x16xf32>) {\n  %o = hl.attention %q, %k, %v causal : tensor<2x80x64xf32>, tensor<2x80x64xf32>, tensor<2x80x64xf32>\n  %p = hl.attention %a, %b, %c scale = 0.3 : tensor<40x32xf32>, tensor<100x32xf32>, tensor<100x48xf32>\n  %r = hl.attention %x, %y, %z causal : tensor<1x300x32xf32>, tensor<1x300x32xf32>, tensor<1x300x16xf32>\n  return %o, %p, %r : tensor<2x80x64xf32>, tensor<40x48xf32>, tensor<1x300x16xf32>\n}".into(),
            vec![f32s(&[2, 80, 64], 81), f32s(&[2, 80, 64], 82), f32s(&[2, 80, 64], 83), f32s(&[40, 32], 84), f32s(&[100, 32], 85), f32s(&[100, 48], 86), f32s(&[1, 300, 32], 87), f32s(&[1, 300, 32], 88), f32s(&[1, 300, 16], 89)],
        ),
        (
            // Attention's fused backward (dq, dk, dv from the forward's
            // result): causal over 5 queries and 7 keys with a value head
            // apart; 6 queries over 9 keys, scaled, no batch dims.
            "attention_backward",
            "func.func @f(%q: tensor<2x5x4xf32>, %k: tensor<2x7x4xf32>, %v: tensor<2x7x3xf32>, %g: tensor<2x5x3xf32>, %a: tensor<6x8xf32>, %b: tensor<9x8xf32>, %c: tensor<9x5xf32>, %h: tensor<6x5xf32>) -> (tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>, tensor<6x8xf32>, tensor<9x8xf32>, tensor<9x5xf32>) {\n  %o = hl.attention %q, %k, %v causal : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>\n  %d:3 = hl.attention_backward %q, %k, %v, %o, %g causal : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>, tensor<2x5x3xf32>\n  %p = hl.attention %a, %b, %c scale = 0.3 : tensor<6x8xf32>, tensor<9x8xf32>, tensor<9x5xf32>\n  %e:3 = hl.attention_backward %a, %b, %c, %p, %h scale = 0.3 : tensor<6x8xf32>, tensor<9x8xf32>, tensor<9x5xf32>, tensor<6x5xf32>\n  return %d#0, %d#1, %d#2, %e#0, %e#1, %e#2 : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>, tensor<6x8xf32>, tensor<9x8xf32>, tensor<9x5xf32>\n}".into(),
            vec![f32s(&[2, 5, 4], 91), f32s(&[2, 7, 4], 92), f32s(&[2, 7, 3], 93), f32s(&[2, 5, 3], 94), f32s(&[6, 8], 95), f32s(&[9, 8], 96), f32s(&[9, 5], 97), f32s(&[6, 5], 98)],
        ),
        (
            // The backward alone (its `out` an input, not the forward's
            // result): each row's log-sum-exp computed from the scores, not
            // read from the forward's. 37 queries causal over 37 keys (a
            // full block of 16 and a partial one), 5 over 9 keys, and 19
            // causal over 6 (rows past the last key see them all).
            "attention_backward_alone",
            "func.func @f(%q: tensor<2x37x8xf32>, %k: tensor<2x37x8xf32>, %v: tensor<2x37x6xf32>, %o: tensor<2x37x6xf32>, %g: tensor<2x37x6xf32>, %a: tensor<5x4xf32>, %b: tensor<9x4xf32>, %c: tensor<9x3xf32>, %p: tensor<5x3xf32>, %h: tensor<5x3xf32>, %x: tensor<19x4xf32>, %y: tensor<6x4xf32>, %z: tensor<6x5xf32>, %w: tensor<19x5xf32>, %u: tensor<19x5xf32>) -> (tensor<2x37x8xf32>, tensor<2x37x8xf32>, tensor<2x37x6xf32>, tensor<5x4xf32>, tensor<9x4xf32>, tensor<9x3xf32>, tensor<19x4xf32>, tensor<6x4xf32>, tensor<6x5xf32>) {\n  %d:3 = hl.attention_backward %q, %k, %v, %o, %g causal : tensor<2x37x8xf32>, tensor<2x37x8xf32>, tensor<2x37x6xf32>, tensor<2x37x6xf32>\n  %e:3 = hl.attention_backward %a, %b, %c, %p, %h scale = 0.3 : tensor<5x4xf32>, tensor<9x4xf32>, tensor<9x3xf32>, tensor<5x3xf32>\n  %f:3 = hl.attention_backward %x, %y, %z, %w, %u causal : tensor<19x4xf32>, tensor<6x4xf32>, tensor<6x5xf32>, tensor<19x5xf32>\n  return %d#0, %d#1, %d#2, %e#0, %e#1, %e#2, %f#0, %f#1, %f#2 : tensor<2x37x8xf32>, tensor<2x37x8xf32>, tensor<2x37x6xf32>, tensor<5x4xf32>, tensor<9x4xf32>, tensor<9x3xf32>, tensor<19x4xf32>, tensor<6x4xf32>, tensor<6x5xf32>\n}".into(),
            vec![f32s(&[2, 37, 8], 121), f32s(&[2, 37, 8], 122), f32s(&[2, 37, 6], 123), f32s(&[2, 37, 6], 124), f32s(&[2, 37, 6], 125), f32s(&[5, 4], 126), f32s(&[9, 4], 127), f32s(&[9, 3], 128), f32s(&[5, 3], 129), f32s(&[5, 3], 130), f32s(&[19, 4], 131), f32s(&[6, 4], 132), f32s(&[6, 5], 133), f32s(&[19, 5], 134), f32s(&[19, 5], 135)],
        ),
        (
            // Head sizes the GPU's tensor-core backward takes in f16/bf16:
            // 80 queries causal (a full and a partial block of 64), 40
            // queries over 100 keys with a value head apart, scaled; 200
            // queries causal over four tiles of keys (both buffers reused).
            "attention_backward_heads",
            "func.func @f(%x0q: tensor<2x80x32xf32>, %x0k: tensor<2x80x32xf32>, %x0v: tensor<2x80x16xf32>, %x0g: tensor<2x80x16xf32>, %x1q: tensor<40x32xf32>, %x1k: tensor<100x32xf32>, %x1v: tensor<100x48xf32>, %x1g: tensor<40x48xf32>, %x2q: tensor<1x200x64xf32>, %x2k: tensor<1x200x64xf32>, %x2v: tensor<1x200x64xf32>, %x2g: tensor<1x200x64xf32>) -> (tensor<2x80x32xf32>, tensor<2x80x32xf32>, tensor<2x80x16xf32>, tensor<40x32xf32>, tensor<100x32xf32>, tensor<100x48xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>) {\n  %o0 = hl.attention %x0q, %x0k, %x0v causal : tensor<2x80x32xf32>, tensor<2x80x32xf32>, tensor<2x80x16xf32>\n  %d0:3 = hl.attention_backward %x0q, %x0k, %x0v, %o0, %x0g causal : tensor<2x80x32xf32>, tensor<2x80x32xf32>, tensor<2x80x16xf32>, tensor<2x80x16xf32>\n  %o1 = hl.attention %x1q, %x1k, %x1v scale = 0.3 : tensor<40x32xf32>, tensor<100x32xf32>, tensor<100x48xf32>\n  %d1:3 = hl.attention_backward %x1q, %x1k, %x1v, %o1, %x1g scale = 0.3 : tensor<40x32xf32>, tensor<100x32xf32>, tensor<100x48xf32>, tensor<40x48xf32>\n  %o2 = hl.attention %x2q, %x2k, %x2v causal : tensor<1x200x64xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>\n  %d2:3 = hl.attention_backward %x2q, %x2k, %x2v, %o2, %x2g causal : tensor<1x200x64xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>\n  return %d0#0, %d0#1, %d0#2, %d1#0, %d1#1, %d1#2, %d2#0, %d2#1, %d2#2 : tensor<2x80x32xf32>, tensor<2x80x32xf32>, tensor<2x80x16xf32>, tensor<40x32xf32>, tensor<100x32xf32>, tensor<100x48xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>, tensor<1x200x64xf32>\n}".into(),
            vec![f32s(&[2, 80, 32], 101), f32s(&[2, 80, 32], 102), f32s(&[2, 80, 16], 103), f32s(&[2, 80, 16], 104), f32s(&[40, 32], 105), f32s(&[100, 32], 106), f32s(&[100, 48], 107), f32s(&[40, 48], 108), f32s(&[1, 200, 64], 109), f32s(&[1, 200, 64], 110), f32s(&[1, 200, 64], 111), f32s(&[1, 200, 64], 112)],
        ),
        (
            // 35 rows of 37 classes (more than a warp's 32 lanes), mean,
            // and their gradient summed; 70 rows of 5 classes (fewer than
            // the lanes) with an ignored label, loss and gradient fused.
            "cross_entropy",
            "func.func @f(%x: tensor<5x7x37xf32>, %t: tensor<5x7xi32>, %y: tensor<70x5xf32>, %u: tensor<70xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<5x7x37xf32>, tensor<f32>, tensor<70x5xf32>) {\n  %a = hl.cross_entropy %x, %t : tensor<5x7x37xf32>, tensor<5x7xi32>\n  %b = hl.cross_entropy_backward %x, %t, %g reduction = sum : tensor<5x7x37xf32>, tensor<5x7xi32>, tensor<f32>\n  %c:2 = hl.softmax_cross_entropy %y, %u, %g ignore_index = 1 : tensor<70x5xf32>, tensor<70xi32>, tensor<f32> -> tensor<f32>\n  return %a, %b, %c#0, %c#1 : tensor<f32>, tensor<5x7x37xf32>, tensor<f32>, tensor<70x5xf32>\n}".into(),
            vec![f32s(&[5, 7, 37], 71), indices(&[5, 7], 37, 72), f32s(&[70, 5], 73), indices(&[70], 5, 74), Array::scalar(0.75, DType::F32)],
        ),
        (
            // One row: the one-kernel form (no rows to share out), loss
            // and gradient, mean and sum.
            "cross_entropy_one_row",
            "func.func @f(%x: tensor<1x37xf32>, %t: tensor<1xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<1x37xf32>, tensor<f32>, tensor<1x37xf32>) {\n  %a = hl.cross_entropy %x, %t : tensor<1x37xf32>, tensor<1xi32>\n  %b = hl.cross_entropy_backward %x, %t, %g reduction = sum : tensor<1x37xf32>, tensor<1xi32>, tensor<f32>\n  %c:2 = hl.softmax_cross_entropy %x, %t, %g : tensor<1x37xf32>, tensor<1xi32>, tensor<f32> -> tensor<f32>\n  return %a, %b, %c#0, %c#1 : tensor<f32>, tensor<1x37xf32>, tensor<f32>, tensor<1x37xf32>\n}".into(),
            vec![f32s(&[1, 37], 75), indices(&[1], 37, 76), Array::scalar(0.5, DType::F32)],
        ),
        (
            // A padded head's fused loss (`classes`): 35 rows of 40, 37 of
            // them classes (more than a warp's lanes), with an ignored
            // label; one row of 45 with 3 classes, summed. The 16-bit
            // forms keep the loss and its upstream gradient in f32 (what
            // hl-fuse-reductions makes under autocast); the padding's
            // gradient is zero. The third's gradient is not read (an
            // evaluation's folded loss): the loss alone.
            "cross_entropy_padded",
            "func.func @f(%x: tensor<5x7x40xf32>, %t: tensor<5x7xi32>, %y: tensor<1x45xf32>, %u: tensor<1xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<5x7x40xf32>, tensor<f32>, tensor<1x45xf32>, tensor<f32>) {\n  %a:2 = hl.softmax_cross_entropy %x, %t, %g ignore_index = 1 classes = 37 : tensor<5x7x40xf32>, tensor<5x7xi32>, tensor<f32> -> tensor<f32>\n  %b:2 = hl.softmax_cross_entropy %y, %u, %g reduction = sum classes = 3 : tensor<1x45xf32>, tensor<1xi32>, tensor<f32> -> tensor<f32>\n  %c:2 = hl.softmax_cross_entropy %x, %t, %g classes = 37 : tensor<5x7x40xf32>, tensor<5x7xi32>, tensor<f32> -> tensor<f32>\n  return %a#0, %a#1, %b#0, %b#1, %c#0 : tensor<f32>, tensor<5x7x40xf32>, tensor<f32>, tensor<1x45xf32>, tensor<f32>\n}".into(),
            vec![f32s(&[5, 7, 40], 77), indices(&[5, 7], 37, 78), f32s(&[1, 45], 79), indices(&[1], 3, 80), Array::scalar(0.75, DType::F32)],
        ),
        (
            "gather",
            "func.func @f(%t: tensor<11x4xf32>, %i: tensor<2x3xi32>, %u: tensor<3x7x2xf32>, %j: tensor<5xi32>) -> (tensor<2x3x4xf32>, tensor<3x5x2xf32>, tensor<11x4xf32>) {\n  %a = hl.gather %t[%i] axis = 0 : tensor<11x4xf32>, tensor<2x3xi32>\n  %b = hl.gather %u[%j] axis = 1 : tensor<3x7x2xf32>, tensor<5xi32>\n  %c = hl.gather_backward %a[%i] axis = 0 : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<11x4xf32>\n  return %a, %b, %c : tensor<2x3x4xf32>, tensor<3x5x2xf32>, tensor<11x4xf32>\n}".into(),
            vec![f32s(&[11, 4], 19), indices(&[2, 3], 4, 20), f32s(&[3, 7, 2], 21), indices(&[5], 7, 22)],
        ),
        (
            "slice_concat",
            "func.func @f(%x: tensor<8x9xf32>) -> (tensor<3x3xf32>, tensor<8x9xf32>, tensor<8x12xf32>) {\n  %s = hl.slice %x start = [1, 2] limit = [8, 9] strides = [3, 3] : tensor<8x9xf32>\n  %b = hl.slice_backward %s start = [1, 2] limit = [8, 9] strides = [3, 3] : tensor<3x3xf32> -> tensor<8x9xf32>\n  %t = hl.slice %x start = [0, 0] limit = [8, 3] strides = [1, 1] : tensor<8x9xf32>\n  %c = hl.concat %x, %t axis = 1 : tensor<8x9xf32>, tensor<8x3xf32>\n  return %s, %b, %c : tensor<3x3xf32>, tensor<8x9xf32>, tensor<8x12xf32>\n}".into(),
            vec![f32s(&[8, 9], 23)],
        ),
        (
            // The CPU's row copies: 3-D windows strided in every dim and
            // in the outer ones only, their gradients, a 1-D slice, and
            // concatenations along the first and a middle axis.
            "slice_concat_rows",
            "func.func @f(%x: tensor<4x6x10xf32>, %y: tensor<2x6x10xf32>, %z: tensor<4x3x10xf32>, %v: tensor<9xf32>) -> (tensor<2x2x3xf32>, tensor<4x6x10xf32>, tensor<4x2x4xf32>, tensor<4x6x10xf32>, tensor<3xf32>, tensor<6x6x10xf32>, tensor<4x9x10xf32>) {\n  %a = hl.slice %x start = [1, 0, 1] limit = [4, 5, 10] strides = [2, 3, 3] : tensor<4x6x10xf32>\n  %da = hl.slice_backward %a start = [1, 0, 1] limit = [4, 5, 10] strides = [2, 3, 3] : tensor<2x2x3xf32> -> tensor<4x6x10xf32>\n  %b = hl.slice %x start = [0, 1, 6] limit = [4, 5, 10] strides = [1, 2, 1] : tensor<4x6x10xf32>\n  %db = hl.slice_backward %b start = [0, 1, 6] limit = [4, 5, 10] strides = [1, 2, 1] : tensor<4x2x4xf32> -> tensor<4x6x10xf32>\n  %c = hl.slice %v start = [2] limit = [5] strides = [1] : tensor<9xf32>\n  %d = hl.concat %x, %y axis = 0 : tensor<4x6x10xf32>, tensor<2x6x10xf32>\n  %e = hl.concat %x, %z axis = 1 : tensor<4x6x10xf32>, tensor<4x3x10xf32>\n  return %a, %da, %b, %db, %c, %d, %e : tensor<2x2x3xf32>, tensor<4x6x10xf32>, tensor<4x2x4xf32>, tensor<4x6x10xf32>, tensor<3xf32>, tensor<6x6x10xf32>, tensor<4x9x10xf32>\n}".into(),
            vec![f32s(&[4, 6, 10], 26), f32s(&[2, 6, 10], 27), f32s(&[4, 3, 10], 28), f32s(&[9], 29)],
        ),
        (
            "argmax_mse_reduce",
            format!("func.func @f(%x: {t}, %y: {t}) -> (tensor<3x7xi64>, tensor<f32>, tensor<1x5x1xf32>, tensor<5xf32>) {{\n  %a = hl.argmax %x axis = 1 : {t}\n  %l = hl.mse_loss %x, %y : {t}, {t}\n  %s = hl.reduce_sum %x axes = [0, 2] keepdim : {t}\n  %m = hl.reduce_max %y axes = [0, 2] : {t}\n  return %a, %l, %s, %m : tensor<3x7xi64>, tensor<f32>, tensor<1x5x1xf32>, tensor<5xf32>\n}}"),
            vec![f32s(&[3, 5, 7], 24), f32s(&[3, 5, 7], 25)],
        ),
        (
            // Sums and means of every element, more elements than the GPU's
            // team of 1024 threads (a loss over a large output): sum, mean
            // kept as 1x1x1, and the mean squared error.
            "reduce_whole",
            "func.func @f(%x: tensor<3x40x50xf32>, %y: tensor<3x40x50xf32>) -> (tensor<f32>, tensor<1x1x1xf32>, tensor<f32>) {\n  %s = hl.reduce_sum %x axes = [0, 1, 2] : tensor<3x40x50xf32>\n  %m = hl.reduce_mean %y axes = [0, 1, 2] keepdim : tensor<3x40x50xf32>\n  %l = hl.mse_loss %x, %y : tensor<3x40x50xf32>, tensor<3x40x50xf32>\n  return %s, %m, %l : tensor<f32>, tensor<1x1x1xf32>, tensor<f32>\n}".into(),
            vec![f32s(&[3, 40, 50], 26), f32s(&[3, 40, 50], 27)],
        ),
        (
            // Reductions over leading dims with many rows (the GPU's
            // column form: outputs across lanes, rows across warps and
            // unrolled partials; 300 rows (32 warps) and 70 (16), 45 and 33 outputs leave
            // every tail ragged).
            "column_reduce",
            "func.func @f(%x: tensor<300x45xf32>, %y: tensor<2x35x33xf32>) -> (tensor<45xf32>, tensor<1x45xf32>, tensor<33xf32>) {\n  %s = hl.reduce_sum %x axes = [0] : tensor<300x45xf32>\n  %m = hl.reduce_mean %x axes = [0] keepdim : tensor<300x45xf32>\n  %x2 = hl.reduce_max %y axes = [0, 1] : tensor<2x35x33xf32>\n  return %s, %m, %x2 : tensor<45xf32>, tensor<1x45xf32>, tensor<33xf32>\n}".into(),
            vec![f32s(&[300, 45], 40), f32s(&[2, 35, 33], 41)],
        ),
        (
            // Reductions large enough to run split where a target has a
            // split form (the GPU: `ll.reduce`'s `partials`, two slices
            // here, the last one shorter): a sum and mean over 513 rows, a
            // max over 3 x 171, and a sum and mean of 16400 elements.
            "reduce_split",
            "func.func @f(%x: tensor<513x45xf32>, %y: tensor<3x171x33xf32>, %z: tensor<16400xf32>) -> (tensor<45xf32>, tensor<1x45xf32>, tensor<33xf32>, tensor<f32>, tensor<f32>) {\n  %s = hl.reduce_sum %x axes = [0] : tensor<513x45xf32>\n  %m = hl.reduce_mean %x axes = [0] keepdim : tensor<513x45xf32>\n  %x2 = hl.reduce_max %y axes = [0, 1] : tensor<3x171x33xf32>\n  %w = hl.reduce_sum %z axes = [0] : tensor<16400xf32>\n  %v = hl.reduce_mean %z axes = [0] : tensor<16400xf32>\n  return %s, %m, %x2, %w, %v : tensor<45xf32>, tensor<1x45xf32>, tensor<33xf32>, tensor<f32>, tensor<f32>\n}".into(),
            vec![f32s(&[513, 45], 42), f32s(&[3, 171, 33], 43), f32s(&[16400], 44)],
        ),
        (
            // A norm's gradient over enough rows that the GPU's warps take
            // two rows each (4099: the last warp one), summing dw and db
            // over them before adding atomically.
            "norm_backward_rows",
            "func.func @f(%g: tensor<4099x4xf32>, %x: tensor<4099x4xf32>, %w: tensor<4xf32>) -> (tensor<4099x4xf32>, tensor<4xf32>, tensor<4xf32>) {\n  %dx, %dw, %db = hl.norm_backward %g, %x weight(%w) dims = 1 eps = 1.0e-05 bias : tensor<4099x4xf32> weight tensor<4xf32> -> tensor<4099x4xf32> grad_weight tensor<4xf32> grad_bias tensor<4xf32>\n  return %dx, %dw, %db : tensor<4099x4xf32>, tensor<4xf32>, tensor<4xf32>\n}".into(),
            vec![f32s(&[4099, 4], 45), f32s(&[4099, 4], 46), f32s(&[4], 47)],
        ),
        (
            // Slices whose output rows are long enough for the GPU's warp
            // form (a warp per row, lanes along it): a row window, strided
            // columns, a 3-D window, rows of three chunks (the last short),
            // and each one's gradient (rows and columns outside the window
            // zero).
            "slice_long_rows",
            "func.func @f(%x: tensor<3x75xf32>, %y: tensor<2x200xf32>, %z: tensor<2x3x70xf32>, %w: tensor<2x2100xf32>) -> (tensor<2x72xf32>, tensor<3x75xf32>, tensor<2x100xf32>, tensor<2x200xf32>, tensor<2x2x66xf32>, tensor<2x3x70xf32>, tensor<1x2095xf32>, tensor<2x2100xf32>) {\n  %a = hl.slice %x start = [1, 3] limit = [3, 75] strides = [1, 1] : tensor<3x75xf32>\n  %da = hl.slice_backward %a start = [1, 3] limit = [3, 75] strides = [1, 1] : tensor<2x72xf32> -> tensor<3x75xf32>\n  %b = hl.slice %y start = [0, 1] limit = [2, 200] strides = [1, 2] : tensor<2x200xf32>\n  %db = hl.slice_backward %b start = [0, 1] limit = [2, 200] strides = [1, 2] : tensor<2x100xf32> -> tensor<2x200xf32>\n  %c = hl.slice %z start = [0, 1, 2] limit = [2, 3, 68] strides = [1, 1, 1] : tensor<2x3x70xf32>\n  %dc = hl.slice_backward %c start = [0, 1, 2] limit = [2, 3, 68] strides = [1, 1, 1] : tensor<2x2x66xf32> -> tensor<2x3x70xf32>\n  %e = hl.slice %w start = [1, 5] limit = [2, 2100] strides = [1, 1] : tensor<2x2100xf32>\n  %de = hl.slice_backward %e start = [1, 5] limit = [2, 2100] strides = [1, 1] : tensor<1x2095xf32> -> tensor<2x2100xf32>\n  return %a, %da, %b, %db, %c, %dc, %e, %de : tensor<2x72xf32>, tensor<3x75xf32>, tensor<2x100xf32>, tensor<2x200xf32>, tensor<2x2x66xf32>, tensor<2x3x70xf32>, tensor<1x2095xf32>, tensor<2x2100xf32>\n}".into(),
            vec![f32s(&[3, 75], 48), f32s(&[2, 200], 49), f32s(&[2, 3, 70], 50), f32s(&[2, 2100], 58)],
        ),
        (
            // 35 elements (8 groups of four and a ragged one) and 3003
            // (750 groups split over the threads, and a ragged one).
            "dropout",
            "func.func @f(%x: tensor<5x7xf32>, %s: tensor<i64>, %o: tensor<i64>, %z: tensor<3x1001xf32>) -> (tensor<5x7xf32>, tensor<3x1001xf32>) {\n  %y = hl.dropout %x, %s, %o p = 0.3 stream = 5 : tensor<5x7xf32>\n  %w = hl.dropout %z, %s, %o p = 0.5 stream = 6 : tensor<3x1001xf32>\n  return %y, %w : tensor<5x7xf32>, tensor<3x1001xf32>\n}".into(),
            vec![f32s(&[5, 7], 26), Array::scalar(123456789012.0, DType::I64), Array::scalar(77.0, DType::I64), f32s(&[3, 1001], 59)],
        ),
        (
            // Noise: normal (mean 0.5, deviation 2) over 35 elements (a
            // ragged group, each of a block's two pairs and both of a
            // pair's cosine and sine), uniform in [-1, 3) and standard
            // normal over 3003 (split over the threads); the two 3003s on
            // streams of their own, from a like never read otherwise; an
            // f64 tensor's (drawn in f32, widened).
            "random",
            "func.func @f(%x: tensor<5x7xf32>, %s: tensor<i64>, %o: tensor<i64>, %z: tensor<3x1001xf32>, %w: tensor<2x9xf64>) -> (tensor<5x7xf32>, tensor<3x1001xf32>, tensor<3x1001xf32>, tensor<2x9xf64>) {\n  %y = hl.random_like %x, %s, %o kind = \"normal\" a = 5.000000e-01 b = 2.000000e+00 stream = 5 : tensor<5x7xf32>\n  %u = hl.random_like %z, %s, %o kind = \"uniform\" a = -1.000000e+00 b = 3.000000e+00 stream = 6 : tensor<3x1001xf32>\n  %n = hl.random_like %z, %s, %o kind = \"normal\" a = 0.000000e+00 b = 1.000000e+00 stream = 7 : tensor<3x1001xf32>\n  %d = hl.random_like %w, %s, %o kind = \"normal\" a = 0.000000e+00 b = 1.000000e+00 stream = 8 : tensor<2x9xf64>\n  return %y, %u, %n, %d : tensor<5x7xf32>, tensor<3x1001xf32>, tensor<3x1001xf32>, tensor<2x9xf64>\n}".into(),
            vec![
                f32s(&[5, 7], 26),
                Array::scalar(123456789012.0, DType::I64),
                Array::scalar(77.0, DType::I64),
                f32s(&[3, 1001], 59),
                Array::zeros([2, 9], DType::F64),
            ],
        ),
        (
            // A cast to bf16 and f16 and back, fused with an add: the
            // narrowing rounds (`x.to(bf16).float() + x` is not `2x`; fused,
            // the body's widening to f32 had dropped it).
            "cast_round_trip",
            "func.func @f(%x: tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>) {\n  %b = hl.cast %x : tensor<5x7xf32> to tensor<5x7xbf16>\n  %c = hl.cast %b : tensor<5x7xbf16> to tensor<5x7xf32>\n  %d = hl.add %c, %x : tensor<5x7xf32>, tensor<5x7xf32>\n  %h = hl.cast %x : tensor<5x7xf32> to tensor<5x7xf16>\n  %g = hl.cast %h : tensor<5x7xf16> to tensor<5x7xf32>\n  %e = hl.sub %g, %x : tensor<5x7xf32>, tensor<5x7xf32>\n  return %d, %e : tensor<5x7xf32>, tensor<5x7xf32>\n}".into(),
            vec![f32s(&[5, 7], 33)],
        ),
        (
            // Boolean buffers (bytes in the kernels): a mask stored by a
            // compare, and one loaded and broadcast over a leading
            // dimension by a select, on rows of 37 (two vectors of 16 and
            // a tail).
            "compare_select",
            "func.func @f(%a: tensor<3x4x37xf32>, %b: tensor<4x37xf32>, %m: tensor<4x37xi1>) -> (tensor<3x4x37xi1>, tensor<3x4x37xf32>) {\n  %c = hl.compare gt, %a, %b : tensor<3x4x37xf32>, tensor<4x37xf32>\n  %s = hl.select %m, %a, %b : tensor<4x37xi1>, tensor<3x4x37xf32>, tensor<4x37xf32>\n  return %c, %s : tensor<3x4x37xi1>, tensor<3x4x37xf32>\n}".into(),
            vec![
                f32s(&[3, 4, 37], 70),
                f32s(&[4, 37], 71),
                Array::new(vec![4, 37], DType::I1, data(4 * 37, 72).iter().map(|&u| (u > 0.0) as u8 as f64).collect()).unwrap(),
            ],
        ),
        (
            // Elementwise rows too short to vectorise take further dims on
            // the CPU, the broadcast inputs indexed by their coordinates: a
            // batch norm's per-channel scale and shift over 2 x 2 images
            // (rows of 12: the channel split 16 x 3), an SE block's
            // per-image, per-channel scale, and a prime channel count
            // (nothing to split: rows of 4 stay).
            "elementwise_short_rows",
            "func.func @f(%x: tensor<4x48x2x2xf32>, %s: tensor<1x48x1x1xf32>, %b: tensor<1x48x1x1xf32>, %g: tensor<4x48x1x1xf32>, %p: tensor<4x7x2x2xf32>, %q: tensor<1x7x1x1xf32>) -> (tensor<4x48x2x2xf32>, tensor<4x48x2x2xf32>, tensor<4x7x2x2xf32>) {\n  %t = hl.mul %x, %s : tensor<4x48x2x2xf32>, tensor<1x48x1x1xf32>\n  %u = hl.add %t, %b : tensor<4x48x2x2xf32>, tensor<1x48x1x1xf32>\n  %y = hl.silu %u : tensor<4x48x2x2xf32>\n  %z = hl.mul %y, %g : tensor<4x48x2x2xf32>, tensor<4x48x1x1xf32>\n  %w = hl.mul %p, %q : tensor<4x7x2x2xf32>, tensor<1x7x1x1xf32>\n  return %u, %z, %w : tensor<4x48x2x2xf32>, tensor<4x48x2x2xf32>, tensor<4x7x2x2xf32>\n}".into(),
            vec![f32s(&[4, 48, 2, 2], 90), f32s(&[1, 48, 1, 1], 91), f32s(&[1, 48, 1, 1], 92), f32s(&[4, 48, 1, 1], 93), f32s(&[4, 7, 2, 2], 94), f32s(&[1, 7, 1, 1], 95)],
        ),
        (
            // One buffer read twice by a kernel that writes in place (x * x
            // + x, x dying there): the buffers are not apart, so no
            // `noalias`; and a short-row scale over an input the kernel
            // overwrites.
            "elementwise_aliased",
            "func.func @f(%x: tensor<6x40xf32>, %y: tensor<4x24x2x2xf32>, %s: tensor<1x24x1x1xf32>) -> (tensor<6x40xf32>, tensor<4x24x2x2xf32>) {\n  %a = hl.mul %x, %x : tensor<6x40xf32>, tensor<6x40xf32>\n  %b = hl.add %a, %x : tensor<6x40xf32>, tensor<6x40xf32>\n  %c = hl.mul %y, %s : tensor<4x24x2x2xf32>, tensor<1x24x1x1xf32>\n  %d = hl.add %c, %y : tensor<4x24x2x2xf32>, tensor<4x24x2x2xf32>\n  return %b, %d : tensor<6x40xf32>, tensor<4x24x2x2xf32>\n}".into(),
            vec![f32s(&[6, 40], 119), f32s(&[4, 24, 2, 2], 120), f32s(&[1, 24, 1, 1], 121)],
        ),
        (
            "conv",
            "func.func @f(%x: tensor<2x3x7x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %xn: tensor<2x9x8x4xf32>, %wn: tensor<6x2x3x2xf32>) -> (tensor<2x4x7x6xf32>, tensor<2x3x7x6xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x6xf32>, tensor<2x9x8x4xf32>, tensor<6x2x3x2xf32>) {\n  %y = hl.conv2d %x, %w, %b stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x3x7x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>\n  %dx = hl.conv2d_backward_input %y, %w stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x4x7x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x7x6xf32>\n  %dw = hl.conv2d_backward_weight %y, %x stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x4x7x6xf32>, tensor<2x3x7x6xf32> -> tensor<4x3x3x3xf32>\n  %z = hl.conv2d %xn, %wn stride = [2, 1] padding = [0, 1] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x9x8x4xf32>, tensor<6x2x3x2xf32>\n  %dxn = hl.conv2d_backward_input %z, %wn stride = [2, 1] padding = [0, 1] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x3x8x6xf32>, tensor<6x2x3x2xf32> -> tensor<2x9x8x4xf32>\n  %dwn = hl.conv2d_backward_weight %z, %xn stride = [2, 1] padding = [0, 1] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x3x8x6xf32>, tensor<2x9x8x4xf32> -> tensor<6x2x3x2xf32>\n  return %y, %dx, %dw, %z, %dxn, %dwn : tensor<2x4x7x6xf32>, tensor<2x3x7x6xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x6xf32>, tensor<2x9x8x4xf32>, tensor<6x2x3x2xf32>\n}".into(),
            vec![f32s(&[2, 3, 7, 6], 27), f32s(&[4, 3, 3, 3], 28), f32s(&[4], 29), f32s(&[2, 9, 8, 4], 30), f32s(&[6, 2, 3, 2], 31)],
        ),
        (
            // Ungrouped convolutions, which run as products over their
            // window rows: strides, dilation and padding unequal across
            // the axes and no bias; NHWC with a bias; a strided 1 x 1 (a
            // residual's downsampling); padding wider than the kernel
            // (windows wholly in the padding).
            "conv_windows",
            "func.func @f(%ax: tensor<2x5x9x8xf32>, %aw: tensor<3x5x3x2xf32>, %nx: tensor<2x7x6x4xf32>, %nw: tensor<5x4x2x3xf32>, %nb: tensor<5xf32>, %px: tensor<2x4x5x5xf32>, %pw: tensor<6x4x1x1xf32>, %pb: tensor<6xf32>, %qx: tensor<1x2x3x3xf32>, %qw: tensor<2x2x2x2xf32>) -> (tensor<2x3x4x6xf32>, tensor<2x5x9x8xf32>, tensor<3x5x3x2xf32>, tensor<2x8x2x5xf32>, tensor<2x7x6x4xf32>, tensor<5x4x2x3xf32>, tensor<2x6x3x3xf32>, tensor<2x4x5x5xf32>, tensor<6x4x1x1xf32>, tensor<1x2x6x6xf32>, tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>) {\n  %ay = hl.conv2d %ax, %aw stride = [2, 2] padding = [1, 2] dilation = [2, 1] groups = 1 : tensor<2x5x9x8xf32>, tensor<3x5x3x2xf32>\n  %adx = hl.conv2d_backward_input %ay, %aw stride = [2, 2] padding = [1, 2] dilation = [2, 1] groups = 1 : tensor<2x3x4x6xf32>, tensor<3x5x3x2xf32> -> tensor<2x5x9x8xf32>\n  %adw = hl.conv2d_backward_weight %ay, %ax stride = [2, 2] padding = [1, 2] dilation = [2, 1] groups = 1 : tensor<2x3x4x6xf32>, tensor<2x5x9x8xf32> -> tensor<3x5x3x2xf32>\n  %ny = hl.conv2d %nx, %nw, %nb stride = [1, 2] padding = [1, 0] dilation = [1, 1] groups = 1 layout = nhwc : tensor<2x7x6x4xf32>, tensor<5x4x2x3xf32>, tensor<5xf32>\n  %ndx = hl.conv2d_backward_input %ny, %nw stride = [1, 2] padding = [1, 0] dilation = [1, 1] groups = 1 layout = nhwc : tensor<2x8x2x5xf32>, tensor<5x4x2x3xf32> -> tensor<2x7x6x4xf32>\n  %ndw = hl.conv2d_backward_weight %ny, %nx stride = [1, 2] padding = [1, 0] dilation = [1, 1] groups = 1 layout = nhwc : tensor<2x8x2x5xf32>, tensor<2x7x6x4xf32> -> tensor<5x4x2x3xf32>\n  %py = hl.conv2d %px, %pw, %pb stride = [2, 2] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x4x5x5xf32>, tensor<6x4x1x1xf32>, tensor<6xf32>\n  %pdx = hl.conv2d_backward_input %py, %pw stride = [2, 2] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x6x3x3xf32>, tensor<6x4x1x1xf32> -> tensor<2x4x5x5xf32>\n  %pdw = hl.conv2d_backward_weight %py, %px stride = [2, 2] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x6x3x3xf32>, tensor<2x4x5x5xf32> -> tensor<6x4x1x1xf32>\n  %qy = hl.conv2d %qx, %qw stride = [1, 1] padding = [2, 2] dilation = [1, 1] groups = 1 : tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>\n  %qdx = hl.conv2d_backward_input %qy, %qw stride = [1, 1] padding = [2, 2] dilation = [1, 1] groups = 1 : tensor<1x2x6x6xf32>, tensor<2x2x2x2xf32> -> tensor<1x2x3x3xf32>\n  %qdw = hl.conv2d_backward_weight %qy, %qx stride = [1, 1] padding = [2, 2] dilation = [1, 1] groups = 1 : tensor<1x2x6x6xf32>, tensor<1x2x3x3xf32> -> tensor<2x2x2x2xf32>\n  return %ay, %adx, %adw, %ny, %ndx, %ndw, %py, %pdx, %pdw, %qy, %qdx, %qdw : tensor<2x3x4x6xf32>, tensor<2x5x9x8xf32>, tensor<3x5x3x2xf32>, tensor<2x8x2x5xf32>, tensor<2x7x6x4xf32>, tensor<5x4x2x3xf32>, tensor<2x6x3x3xf32>, tensor<2x4x5x5xf32>, tensor<6x4x1x1xf32>, tensor<1x2x6x6xf32>, tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>\n}".into(),
            vec![f32s(&[2, 5, 9, 8], 80), f32s(&[3, 5, 3, 2], 81), f32s(&[2, 7, 6, 4], 82), f32s(&[5, 4, 2, 3], 83), f32s(&[5], 84), f32s(&[2, 4, 5, 5], 85), f32s(&[6, 4, 1, 1], 86), f32s(&[6], 87), f32s(&[1, 2, 3, 3], 88), f32s(&[2, 2, 2, 2], 89)],
        ),
        (
            // Ungrouped NCHW convolutions with output rows of at least
            // `COLUMNS_MIN_RUN`, which take their windows as columns:
            // with a bias; strided and dilated unequally across the axes
            // (runs read at a stride); padding wider than the kernel on
            // one image (rows and runs wholly in the padding, the product
            // NCHW itself); one image with a bias.
            "conv_columns",
            "func.func @f(%ax: tensor<2x3x5x10xf32>, %aw: tensor<4x3x3x3xf32>, %ab: tensor<4xf32>, %bx: tensor<2x2x7x19xf32>, %bw: tensor<3x2x2x3xf32>, %cx: tensor<1x2x3x9xf32>, %cw: tensor<2x2x2x2xf32>, %dx: tensor<1x3x4x8xf32>, %dw: tensor<2x3x1x3xf32>, %db: tensor<2xf32>) -> (tensor<2x4x5x10xf32>, tensor<2x3x5x10xf32>, tensor<4x3x3x3xf32>, tensor<2x3x3x11xf32>, tensor<2x2x7x19xf32>, tensor<3x2x2x3xf32>, tensor<1x2x6x14xf32>, tensor<1x2x3x9xf32>, tensor<2x2x2x2xf32>, tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32>, tensor<2x3x1x3xf32>) {\n  %ay = hl.conv2d %ax, %aw, %ab stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x3x5x10xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>\n  %adx = hl.conv2d_backward_input %ay, %aw stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x4x5x10xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x5x10xf32>\n  %adw = hl.conv2d_backward_weight %ay, %ax stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x4x5x10xf32>, tensor<2x3x5x10xf32> -> tensor<4x3x3x3xf32>\n  %by = hl.conv2d %bx, %bw stride = [2, 2] padding = [0, 2] dilation = [2, 1] groups = 1 : tensor<2x2x7x19xf32>, tensor<3x2x2x3xf32>\n  %bdx = hl.conv2d_backward_input %by, %bw stride = [2, 2] padding = [0, 2] dilation = [2, 1] groups = 1 : tensor<2x3x3x11xf32>, tensor<3x2x2x3xf32> -> tensor<2x2x7x19xf32>\n  %bdw = hl.conv2d_backward_weight %by, %bx stride = [2, 2] padding = [0, 2] dilation = [2, 1] groups = 1 : tensor<2x3x3x11xf32>, tensor<2x2x7x19xf32> -> tensor<3x2x2x3xf32>\n  %cy = hl.conv2d %cx, %cw stride = [1, 1] padding = [2, 3] dilation = [1, 1] groups = 1 : tensor<1x2x3x9xf32>, tensor<2x2x2x2xf32>\n  %cdx = hl.conv2d_backward_input %cy, %cw stride = [1, 1] padding = [2, 3] dilation = [1, 1] groups = 1 : tensor<1x2x6x14xf32>, tensor<2x2x2x2xf32> -> tensor<1x2x3x9xf32>\n  %cdw = hl.conv2d_backward_weight %cy, %cx stride = [1, 1] padding = [2, 3] dilation = [1, 1] groups = 1 : tensor<1x2x6x14xf32>, tensor<1x2x3x9xf32> -> tensor<2x2x2x2xf32>\n  %dy = hl.conv2d %dx, %dw, %db stride = [1, 1] padding = [0, 1] dilation = [1, 1] groups = 1 : tensor<1x3x4x8xf32>, tensor<2x3x1x3xf32>, tensor<2xf32>\n  %ddx = hl.conv2d_backward_input %dy, %dw stride = [1, 1] padding = [0, 1] dilation = [1, 1] groups = 1 : tensor<1x2x4x8xf32>, tensor<2x3x1x3xf32> -> tensor<1x3x4x8xf32>\n  %ddw = hl.conv2d_backward_weight %dy, %dx stride = [1, 1] padding = [0, 1] dilation = [1, 1] groups = 1 : tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32> -> tensor<2x3x1x3xf32>\n  return %ay, %adx, %adw, %by, %bdx, %bdw, %cy, %cdx, %cdw, %dy, %ddx, %ddw : tensor<2x4x5x10xf32>, tensor<2x3x5x10xf32>, tensor<4x3x3x3xf32>, tensor<2x3x3x11xf32>, tensor<2x2x7x19xf32>, tensor<3x2x2x3xf32>, tensor<1x2x6x14xf32>, tensor<1x2x3x9xf32>, tensor<2x2x2x2xf32>, tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32>, tensor<2x3x1x3xf32>\n}".into(),
            vec![f32s(&[2, 3, 5, 10], 140), f32s(&[4, 3, 3, 3], 141), f32s(&[4], 142), f32s(&[2, 2, 7, 19], 143), f32s(&[3, 2, 2, 3], 144), f32s(&[1, 2, 3, 9], 145), f32s(&[2, 2, 2, 2], 146), f32s(&[1, 3, 4, 8], 147), f32s(&[2, 3, 1, 3], 148), f32s(&[2], 149)],
        ),
        (
            // Depthwise convolutions (a channel per group; on the CPU, an
            // image row a work item): strided with a bias, rows of
            // uneven length; dilated unequally across the axes with
            // padding of 2; 2 x 2 planes whose windows lie mostly in the
            // padding; EfficientNet's 5 x 5 with stride and padding 2 on an
            // even size; stride, padding and dilation unequal across the
            // axes (vertical stride and dilation 2, horizontal padding 2 and
            // a 2-wide kernel). With their gradients.
            "conv_depthwise",
            "func.func @f(%ax: tensor<2x6x7x9xf32>, %aw: tensor<6x1x3x3xf32>, %ab: tensor<6xf32>, %bx: tensor<1x4x8x8xf32>, %bw: tensor<4x1x5x5xf32>, %cx: tensor<2x3x2x2xf32>, %cw: tensor<3x1x3x3xf32>, %dx: tensor<2x5x8x8xf32>, %dw: tensor<5x1x5x5xf32>, %db: tensor<5xf32>, %fx: tensor<1x3x9x7xf32>, %fw: tensor<3x1x3x2xf32>) -> (tensor<2x6x4x5xf32>, tensor<2x6x7x9xf32>, tensor<6x1x3x3xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x8xf32>, tensor<4x1x5x5xf32>, tensor<2x3x1x1xf32>, tensor<2x3x2x2xf32>, tensor<3x1x3x3xf32>, tensor<2x5x4x4xf32>, tensor<2x5x8x8xf32>, tensor<5x1x5x5xf32>, tensor<1x3x4x10xf32>, tensor<1x3x9x7xf32>, tensor<3x1x3x2xf32>) {\n  %ay = hl.conv2d %ax, %aw, %ab stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 6 : tensor<2x6x7x9xf32>, tensor<6x1x3x3xf32>, tensor<6xf32>\n  %adx = hl.conv2d_backward_input %ay, %aw stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 6 : tensor<2x6x4x5xf32>, tensor<6x1x3x3xf32> -> tensor<2x6x7x9xf32>\n  %adw = hl.conv2d_backward_weight %ay, %ax stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 6 : tensor<2x6x4x5xf32>, tensor<2x6x7x9xf32> -> tensor<6x1x3x3xf32>\n  %by = hl.conv2d %bx, %bw stride = [1, 1] padding = [2, 2] dilation = [1, 2] groups = 4 : tensor<1x4x8x8xf32>, tensor<4x1x5x5xf32>\n  %bdx = hl.conv2d_backward_input %by, %bw stride = [1, 1] padding = [2, 2] dilation = [1, 2] groups = 4 : tensor<1x4x8x4xf32>, tensor<4x1x5x5xf32> -> tensor<1x4x8x8xf32>\n  %bdw = hl.conv2d_backward_weight %by, %bx stride = [1, 1] padding = [2, 2] dilation = [1, 2] groups = 4 : tensor<1x4x8x4xf32>, tensor<1x4x8x8xf32> -> tensor<4x1x5x5xf32>\n  %cy = hl.conv2d %cx, %cw stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 3 : tensor<2x3x2x2xf32>, tensor<3x1x3x3xf32>\n  %cdx = hl.conv2d_backward_input %cy, %cw stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 3 : tensor<2x3x1x1xf32>, tensor<3x1x3x3xf32> -> tensor<2x3x2x2xf32>\n  %cdw = hl.conv2d_backward_weight %cy, %cx stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 3 : tensor<2x3x1x1xf32>, tensor<2x3x2x2xf32> -> tensor<3x1x3x3xf32>\n  %ey = hl.conv2d %dx, %dw, %db stride = [2, 2] padding = [2, 2] dilation = [1, 1] groups = 5 : tensor<2x5x8x8xf32>, tensor<5x1x5x5xf32>, tensor<5xf32>\n  %edx = hl.conv2d_backward_input %ey, %dw stride = [2, 2] padding = [2, 2] dilation = [1, 1] groups = 5 : tensor<2x5x4x4xf32>, tensor<5x1x5x5xf32> -> tensor<2x5x8x8xf32>\n  %edw = hl.conv2d_backward_weight %ey, %dx stride = [2, 2] padding = [2, 2] dilation = [1, 1] groups = 5 : tensor<2x5x4x4xf32>, tensor<2x5x8x8xf32> -> tensor<5x1x5x5xf32>\n  %fy = hl.conv2d %fx, %fw stride = [2, 1] padding = [1, 2] dilation = [2, 1] groups = 3 : tensor<1x3x9x7xf32>, tensor<3x1x3x2xf32>\n  %fdx = hl.conv2d_backward_input %fy, %fw stride = [2, 1] padding = [1, 2] dilation = [2, 1] groups = 3 : tensor<1x3x4x10xf32>, tensor<3x1x3x2xf32> -> tensor<1x3x9x7xf32>\n  %fdw = hl.conv2d_backward_weight %fy, %fx stride = [2, 1] padding = [1, 2] dilation = [2, 1] groups = 3 : tensor<1x3x4x10xf32>, tensor<1x3x9x7xf32> -> tensor<3x1x3x2xf32>\n  return %ay, %adx, %adw, %by, %bdx, %bdw, %cy, %cdx, %cdw, %ey, %edx, %edw, %fy, %fdx, %fdw : tensor<2x6x4x5xf32>, tensor<2x6x7x9xf32>, tensor<6x1x3x3xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x8xf32>, tensor<4x1x5x5xf32>, tensor<2x3x1x1xf32>, tensor<2x3x2x2xf32>, tensor<3x1x3x3xf32>, tensor<2x5x4x4xf32>, tensor<2x5x8x8xf32>, tensor<5x1x5x5xf32>, tensor<1x3x4x10xf32>, tensor<1x3x9x7xf32>, tensor<3x1x3x2xf32>\n}".into(),
            vec![f32s(&[2, 6, 7, 9], 100), f32s(&[6, 1, 3, 3], 101), f32s(&[6], 102), f32s(&[1, 4, 8, 8], 103), f32s(&[4, 1, 5, 5], 104), f32s(&[2, 3, 2, 2], 105), f32s(&[3, 1, 3, 3], 106), f32s(&[2, 5, 8, 8], 107), f32s(&[5, 1, 5, 5], 108), f32s(&[5], 109), f32s(&[1, 3, 9, 7], 117), f32s(&[3, 1, 3, 2], 118)],
        ),
        (
            // Reductions over inner dims with kept dims between them: batch
            // norms' statistics over N, H and W (MobileNetV2's shapes
            // among them), a global average pool, a max over alternate
            // dims, a mean over a middle dim, a sum over the innermost.
            "reduce_inner",
            "func.func @f(%x: tensor<3x5x4x7xf32>, %y: tensor<2x96x4x4xf32>, %z: tensor<2x240x2x2xf32>, %v: tensor<2x8x32x32xf32>, %g: tensor<2x64x2x2xf32>, %h: tensor<2x48x8x8xf32>, %q: tensor<2x48x32x32xf32>) -> (tensor<1x48x1x1xf32>, tensor<1x48x1x1xf32>, tensor<1x5x1x1xf32>, tensor<3x4xf32>, tensor<3x5x7xf32>, tensor<3x5x4xf32>, tensor<96xf32>, tensor<240xf32>, tensor<8xf32>, tensor<2x64x1x1xf32>) {\n  %vm = hl.reduce_mean %v axes = [0, 2, 3] : tensor<2x8x32x32xf32>\n  %gm = hl.reduce_mean %g axes = [2, 3] keepdim : tensor<2x64x2x2xf32>\n  %hs = hl.reduce_sum %h axes = [0, 2, 3] keepdim : tensor<2x48x8x8xf32>\n  %qm = hl.reduce_mean %q axes = [0, 2, 3] keepdim : tensor<2x48x32x32xf32>\n  %s = hl.reduce_sum %x axes = [0, 2, 3] keepdim : tensor<3x5x4x7xf32>\n  %ym = hl.reduce_mean %y axes = [0, 2, 3] : tensor<2x96x4x4xf32>\n  %zs = hl.reduce_sum %z axes = [0, 2, 3] : tensor<2x240x2x2xf32>\n  %m = hl.reduce_max %x axes = [1, 3] : tensor<3x5x4x7xf32>\n  %a = hl.reduce_mean %x axes = [2] : tensor<3x5x4x7xf32>\n  %i = hl.reduce_sum %x axes = [3] : tensor<3x5x4x7xf32>\n  return %hs, %qm, %s, %m, %a, %i, %ym, %zs, %vm, %gm : tensor<1x48x1x1xf32>, tensor<1x48x1x1xf32>, tensor<1x5x1x1xf32>, tensor<3x4xf32>, tensor<3x5x7xf32>, tensor<3x5x4xf32>, tensor<96xf32>, tensor<240xf32>, tensor<8xf32>, tensor<2x64x1x1xf32>\n}".into(),
            vec![f32s(&[3, 5, 4, 7], 110), f32s(&[2, 96, 4, 4], 111), f32s(&[2, 240, 2, 2], 112), f32s(&[2, 8, 32, 32], 113), f32s(&[2, 64, 2, 2], 114), f32s(&[2, 48, 8, 8], 115), f32s(&[2, 48, 32, 32], 116)],
        ),
        (
            "pool",
            "func.func @f(%x: tensor<2x3x7x6xf32>) -> (tensor<2x3x3x3xf32>, tensor<2x3x7x6xf32>, tensor<2x3x4x3xf32>, tensor<2x3x7x6xf32>) {\n  %m = hl.max_pool2d %x kernel = [3, 2] stride = [2, 2] padding = [0, 0] : tensor<2x3x7x6xf32>\n  %dm = hl.max_pool2d_backward %m, %x kernel = [3, 2] stride = [2, 2] padding = [0, 0] : tensor<2x3x3x3xf32>, tensor<2x3x7x6xf32>\n  %a = hl.avg_pool2d %x kernel = [3, 3] stride = [2, 2] padding = [1, 1] : tensor<2x3x7x6xf32>\n  %da = hl.avg_pool2d_backward %a, %x kernel = [3, 3] stride = [2, 2] padding = [1, 1] : tensor<2x3x4x3xf32>, tensor<2x3x7x6xf32>\n  return %m, %dm, %a, %da : tensor<2x3x3x3xf32>, tensor<2x3x7x6xf32>, tensor<2x3x4x3xf32>, tensor<2x3x7x6xf32>\n}".into(),
            vec![f32s(&[2, 3, 7, 6], 32)],
        ),
        (
            // A window of -inf only and windows of ties: the gradient goes to
            // the first tap of each (the interpreter's and PyTorch's
            // choice), never nowhere.
            "pool_infinite",
            "func.func @f(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>) {\n  %m = hl.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x2x4x4xf32>\n  %dm = hl.max_pool2d_backward %m, %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>\n  return %m, %dm : tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>\n}".into(),
            vec![
                Array::new(
                    vec![1, 2, 4, 4],
                    DType::F32,
                    (0..32)
                        .map(|i: usize| {
                            let (c, h, w) = (i / 16, i / 4 % 4, i % 4);
                            match (c, h < 2, w < 2) {
                                (0, true, true) => f64::NEG_INFINITY,
                                (1, _, _) if (h + w) % 2 == 0 => 1.5,
                                _ => (i as f64 * 0.7).sin(),
                            }
                        })
                        .collect(),
                )
                .unwrap(),
            ],
        ),
        (
            // Windows apart (stride above the kernel: some elements in no
            // window), overlapping ones, padding: the gradient visits only
            // the windows that can hold each element.
            "pool_windows",
            "func.func @f(%x: tensor<2x3x8x7xf32>) -> (tensor<2x3x8x7xf32>, tensor<2x3x8x7xf32>) {\n  %m = hl.max_pool2d %x kernel = [2, 3] stride = [3, 2] padding = [1, 1] : tensor<2x3x8x7xf32>\n  %dm = hl.max_pool2d_backward %m, %x kernel = [2, 3] stride = [3, 2] padding = [1, 1] : tensor<2x3x3x4xf32>, tensor<2x3x8x7xf32>\n  %a = hl.avg_pool2d %x kernel = [3, 3] stride = [3, 1] padding = [0, 1] : tensor<2x3x8x7xf32>\n  %da = hl.avg_pool2d_backward %a, %x kernel = [3, 3] stride = [3, 1] padding = [0, 1] : tensor<2x3x2x7xf32>, tensor<2x3x8x7xf32>\n  return %dm, %da : tensor<2x3x8x7xf32>, tensor<2x3x8x7xf32>\n}".into(),
            vec![f32s(&[2, 3, 8, 7], 33)],
        ),
    ]
}
