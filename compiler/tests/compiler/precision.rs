//! Mixed precision: `hl-autocast` train steps against the interpreter's
//! bf16/f16 emulation, master weights, and fp16 loss scaling decided inside
//! the compiled step.

use crate::cpu::{
    kernel_matches_with, narrow_kernel_cases, out_dir, split_gemm_case, step_inputs, train_step_matches_in,
    train_step_matches_piped,
};
use crate::models::{cnn, mlp};
use aicf_compiler::{CompilerContext, codegen::compile_cpu, nn::DType, pipeline::Precision, run_pipeline};
use aicf_runtime::{
    Backend, Tensor,
    artifact::{self, ir_hash},
    cpu::{CpuModule, CpuSession},
    registry::Choice,
};

/// SGD steps of the digits MLP in bf16 and in f16: the compiled step (16-bit
/// storage, f32 arithmetic inside each kernel, fused epilogues rounded
/// once) against the interpreter rounding every op: the loss within a few
/// units in the last place of the low type, the f32 master weights within
/// what those gradients move them.
#[test]
fn digits_mlp_mixed_precision_train_steps_match_the_interpreter() {
    let traced = mlp::build(mlp::BATCH).unwrap();
    train_step_matches_in(&traced, "digits_mlp_bf16", "sgd", 3, Choice::Generated, 10, (2e-2, 1e-4), Precision::Bf16);
    train_step_matches_in(&traced, "digits_mlp_f16", "sgd", 3, Choice::Generated, 10, (3e-3, 2e-5), Precision::Fp16);
}

/// 16-bit GEMMs by the library candidates: f32 copies of A and B
/// multiplied by sgemm (either orientation), the gemm crate, OpenBLAS or
/// the runtime's AVX2 kernel into an f32 product, which the generated
/// epilogue rounds into the output.
#[test]
fn sixteen_bit_gemms_match_with_every_library_candidate() {
    for dtype in [DType::BF16, DType::F16] {
        let tol = if dtype == DType::BF16 { 2.0 / 256.0 } else { 2.0 / 2048.0 };
        let (name, source, inputs) =
            narrow_kernel_cases(dtype).into_iter().find(|(n, _, _)| n.starts_with("gemm_shapes")).unwrap();
        for gemm in [Choice::Library, Choice::LibrarySwapped, Choice::GemmRs, Choice::OpenBlas, Choice::Avx2] {
            kernel_matches_with(&name, &source, &inputs, tol, gemm);
        }
    }
    let traced = mlp::build(mlp::BATCH).unwrap();
    train_step_matches_in(&traced, "digits_mlp_bf16_lib", "sgd", 2, Choice::Library, 10, (2e-2, 1e-4), Precision::Bf16);
}

/// bf16 GEMMs on the CPU's bf16 dot product (`bf16-dot`: the operands
/// multiplied as they are, in f32 sums) and on the runtime's AVX-512 f32
/// kernel over widened copies: every GEMM shape of the kernel cases, and
/// the bf16 MLP's train step.
#[test]
#[cfg_attr(not(aicf_avx512bf16), ignore = "needs a CPU with AVX-512 BF16 (vdpbf16ps); the build found none")]
fn bf16_gemms_match_on_the_cpus_bf16_dot_product() {
    use aicf_runtime::cpu::packed_gemm::Kernel;
    assert!(Kernel::Avx512Bf16.available());
    let (name, source, inputs) =
        narrow_kernel_cases(DType::BF16).into_iter().find(|(n, _, _)| n.starts_with("gemm_shapes")).unwrap();
    for gemm in [Choice::Bf16Dot, Choice::Avx512] {
        assert_eq!(kernel_matches_with(&name, &source, &inputs, 2.0 / 256.0, gemm), 4, "GEMMs {gemm:?}'s own code ran");
    }
    let traced = mlp::build(mlp::BATCH).unwrap();
    train_step_matches_in(&traced, "digits_mlp_bf16_dot", "sgd", 2, Choice::Bf16Dot, 10, (2e-2, 1e-4), Precision::Bf16);
}

/// bf16 GEMMs on MKL's bf16 GEMM (`mkl-bf16`: the operands as they are,
/// on AMX tiles where the CPU has them, else MKL's AVX-512/AVX2 code):
/// every GEMM shape of the kernel cases, batched and transposed operands
/// among them, and the bf16 MLP's train step.
#[test]
#[cfg_attr(not(target_arch = "x86_64"), ignore = "MKL is installed on x86-64 only")]
fn bf16_gemms_match_on_mkls_bf16_gemm() {
    assert!(
        aicf_runtime::cpu::blas::mkl().is_some_and(|m| m.has_bf16()),
        "MKL with cblas_gemm_bf16bf16f32 cannot be opened (tools/setup.sh installs the mkl wheel into .venv)"
    );
    let (name, source, inputs) =
        narrow_kernel_cases(DType::BF16).into_iter().find(|(n, _, _)| n.starts_with("gemm_shapes")).unwrap();
    // MKL's code ran every GEMM of the cases (4 and 5), not a fallback.
    assert_eq!(kernel_matches_with(&name, &source, &inputs, 2.0 / 256.0, Choice::MklBf16), 4);
    // Products that split over 2 threads: each block's bf16 operands and
    // f32 product offset by the split.
    let (source, inputs) = split_gemm_case();
    let inputs: Vec<_> =
        inputs.into_iter().map(|a| aicf_compiler::interp::Array::new(a.shape, DType::BF16, a.data).unwrap()).collect();
    let split = kernel_matches_with(
        "split_gemms_bf16",
        &source.replace("f32>", "bf16>"),
        &inputs,
        2.0 / 256.0,
        Choice::MklBf16,
    );
    assert_eq!(split, 6);
    let traced = mlp::build(mlp::BATCH).unwrap();
    train_step_matches_in(&traced, "digits_mlp_mkl_bf16", "sgd", 2, Choice::MklBf16, 10, (2e-2, 1e-4), Precision::Bf16);
}

/// `hl-pad-contractions` on every contraction (min-macs 0): the MLP's
/// 10-class head pads to 16 outputs, and its gradients through the
/// zero-padding and the slice back; the padded bf16 step matches the
/// interpreter's unpadded one as closely as the plain step does, and the
/// planned step holds the padded GEMMs and one cross-entropy over the
/// padded bf16 logits (`classes = 10`: no slice or casts around it).
#[test]
fn padded_bf16_contractions_train_as_the_unpadded_model() {
    let traced = mlp::build(mlp::BATCH).unwrap();
    let pipeline = "builtin.module(hl-autocast{dtype=bf16},hl-pad-contractions{multiple=8 min-macs=0},\
        hl-optimizer{kind=adam},canonicalize,cse,hl-fuse-gemm-epilogue,canonicalize,hl-fuse-reductions,\
        hl-fuse-elementwise,hl-fuse-optimizer,canonicalize,cse,convert-hl-to-ll,ll-plan-memory,ll-schedule)";
    train_step_matches_piped(
        &traced,
        "digits_mlp_bf16_padded",
        "adam",
        3,
        Choice::Generated,
        10,
        (2e-2, 1e-4),
        Precision::Bf16,
        pipeline,
    );
    let ctx = CompilerContext::new();
    let mut m = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut m, pipeline).unwrap();
    let planned = m.as_operation().to_string();
    let padded: Vec<&str> = planned.lines().filter(|l| l.contains("ll.gemm") && l.contains("x16xbf16>")).collect();
    assert!(padded.len() >= 2, "no GEMM on the padded head (16 outputs):\n{planned}");
    // The loss reads the padded bf16 logits itself (no slice and casts
    // around it), its gradient zero on the padding.
    assert!(
        planned.lines().any(|l| l.contains("ll.softmax_cross_entropy")
            && l.contains("classes = 10")
            && l.contains("memref<32x16xbf16>, memref<32xi32>")
            && l.contains("-> memref<f32>, memref<32x16xbf16>")),
        "the cross-entropy does not read the padded head:\n{planned}"
    );
    // By default (min-macs 2^27) the digits MLP is too small to pad.
    let mut m = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut m, "builtin.module(aicf-train-pipeline{optimizer=adam precision=bf16})").unwrap();
    assert!(!m.as_operation().to_string().contains("x16xbf16>"), "the small MLP was padded");
}

/// The train pipeline pads a large bf16 head (256 x 1001 x 768, over the
/// default 2^27 multiply-adds) to 1008 outputs by default, and leaves it
/// with `shape_padding: false` (`--no-shape-padding`); fp32 pads none of
/// this f32 model's contractions;
/// in bf16 and fp16 the loss reads the padded logits.
#[test]
fn the_train_pipeline_pads_large_bf16_heads_unless_told_not_to() {
    use aicf_compiler::pipeline::TrainOptions;
    let source = "module {\n  hl.param @head.weight : tensor<1001x768xf32> owner \"head\" init <normal>\n\
        func.func @forward(%x: tensor<256x768xf32>) -> tensor<256x1001xf32> {\n\
        %w = hl.get_param @head.weight : tensor<1001x768xf32>\n\
        %y = hl.linear %x, %w : tensor<256x768xf32>, tensor<1001x768xf32>\n\
        return %y : tensor<256x1001xf32>\n  }\n\
        func.func @loss(%x: tensor<256x768xf32>, %t: tensor<256xi32>) -> tensor<f32> {\n\
        %w = hl.get_param @head.weight : tensor<1001x768xf32>\n\
        %y = hl.linear %x, %w : tensor<256x768xf32>, tensor<1001x768xf32>\n\
        %l = hl.cross_entropy %y, %t : tensor<256x1001xf32>, tensor<256xi32>\n\
        return %l : tensor<f32>\n  }\n}\n";
    let planned = |precision, shape_padding| {
        let ctx = CompilerContext::new();
        let mut m = ctx.parse(source, "head").unwrap();
        let options = TrainOptions { precision, shape_padding, ..TrainOptions::default() };
        run_pipeline(&ctx, &mut m, &options.train_pipeline()).unwrap_or_else(|e| panic!("{e}"));
        m.as_operation().to_string()
    };
    let padded = |text: &str| text.lines().any(|l| l.contains("ll.gemm") && l.contains("1008x768xbf16"));
    assert!(padded(&planned(Precision::Bf16, true)), "the bf16 head is not padded to 1008");
    assert!(!padded(&planned(Precision::Bf16, false)), "padded with shape_padding false");
    assert!(!planned(Precision::Fp32, true).contains("1008"), "an fp32 head was padded");
    // In both 16-bit precisions (fp16's loss scaled by the state its
    // backward reads, before the backward) the train step's loss is one
    // kernel over the padded 16-bit logits.
    for (precision, t) in [(Precision::Bf16, "bf16"), (Precision::Fp16, "f16")] {
        let text = planned(precision, true);
        let step = text.split("func.func @train_step").nth(1).unwrap();
        let losses: Vec<&str> = step.lines().filter(|l| l.contains("ll.softmax_cross_entropy")).collect();
        assert_eq!(losses.len(), 1, "{t}: {losses:#?}");
        assert!(
            losses[0].contains("classes = 1001") && losses[0].contains(&format!("memref<256x1008x{t}>")),
            "{t}: {}",
            losses[0]
        );
    }
}

/// The CNN's convolutions, pooling and their gradients in bf16.
#[test]
fn digits_cnn_bf16_train_step_matches_the_interpreter() {
    let traced = cnn::build(cnn::BATCH).unwrap();
    train_step_matches_in(&traced, "digits_cnn_bf16", "sgd", 2, Choice::Generated, 10, (2e-2, 1e-4), Precision::Bf16);
}

/// Master weights: in bf16 the parameters and optimizer state stay f32, the
/// model's functions keep their signatures, and the contractions run on
/// 16-bit buffers.
#[test]
fn bf16_keeps_f32_master_weights_and_signatures() {
    let ctx = CompilerContext::new();
    let traced = mlp::build(mlp::BATCH).unwrap();
    let mut m = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut m, "builtin.module(aicf-train-pipeline{optimizer=adam precision=bf16})").unwrap();
    let dir = out_dir("bf16_master");
    let manifest = compile_cpu(&ctx, &m, &ir_hash(&traced.text), &dir).unwrap_or_else(|e| panic!("{e}"));
    for s in &manifest.symbols {
        assert!(matches!(s.dtype, artifact::DType::F32 | artifact::DType::I64), "@{}: {:?}", s.name, s.dtype);
    }
    let step = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    for a in step.args.iter().filter(|a| a.role() == artifact::Role::Input) {
        assert_ne!(a.dtype, artifact::DType::BF16, "train_step argument {}", a.bind);
    }
    let planned = m.as_operation().to_string();
    let gemms: Vec<&str> = planned.lines().filter(|l| l.contains("ll.gemm")).collect();
    assert!(!gemms.is_empty() && gemms.iter().all(|l| l.contains("bf16")), "GEMMs not on bf16 operands: {gemms:?}");
}

/// fp16 dynamic loss scaling, in the compiled step: finite steps train and
/// double the scale every `scale-growth-interval` (here 2) of them; an
/// injected overflow (a scale so large that the f16 gradients are infinite)
/// changes no parameter or optimizer state and halves the scale; training
/// goes on, halving until the gradients fit, then updating again.
#[test]
fn fp16_overflow_skips_the_step_and_halves_the_scale() {
    let ctx = CompilerContext::new();
    let traced = mlp::build(mlp::BATCH).unwrap();
    let mut m = traced.parse(&ctx).unwrap();
    run_pipeline(
        &ctx,
        &mut m,
        "builtin.module(hl-autocast{dtype=f16},hl-optimizer{kind=adam loss-scale=65536 scale-growth-interval=2},\
         canonicalize,cse,hl-fuse-gemm-epilogue,canonicalize,hl-fuse-reductions,hl-fuse-elementwise,\
         hl-fuse-optimizer,canonicalize,cse,convert-hl-to-ll,ll-plan-memory,ll-schedule)",
    )
    .unwrap();
    let dir = out_dir("fp16_overflow");
    let manifest = compile_cpu(&ctx, &m, &ir_hash(&traced.text), &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 5).unwrap();
    let step_fn = manifest.functions.iter().find(|f| f.name == "train_step").unwrap().clone();
    let scalar = |s: &CpuSession, name: &str| s.symbol(name).unwrap().values[0];
    let weights = |s: &CpuSession| s.symbol("fc1.weight").unwrap().values;
    assert_eq!(scalar(&session, "loss_scale"), 65536.0, "the initial scale");
    let run = |s: &mut CpuSession, k: usize| -> f64 {
        let (tensors, _) = step_inputs(&step_fn, k, 10);
        s.call("train_step", &tensors.iter().collect::<Vec<_>>()).unwrap()[0].values[0]
    };

    // Two finite steps: both update, and the second doubles the scale.
    let before = weights(&session);
    let loss = run(&mut session, 0);
    assert!(loss.is_finite() && loss > 0.5, "loss {loss}");
    assert_ne!(weights(&session), before);
    assert_eq!((scalar(&session, "loss_scale"), scalar(&session, "loss_scale.good_steps")), (65536.0, 1.0));
    run(&mut session, 1);
    assert_eq!((scalar(&session, "loss_scale"), scalar(&session, "loss_scale.good_steps")), (131072.0, 0.0));
    assert_eq!(scalar(&session, "step"), 2.0);

    // An overflow: the loss gradient times 2^40 is past f16's 65504.
    let huge = 2f64.powi(40);
    session.set_symbol("loss_scale", &Tensor::scalar(huge, artifact::DType::F32)).unwrap();
    let (params, moments) = (weights(&session), session.symbol("fc1.weight.exp_avg").unwrap().values);
    let loss = run(&mut session, 2);
    assert!(loss.is_finite(), "the reported loss is unscaled: {loss}");
    assert_eq!(weights(&session), params, "a skipped step changes no parameter");
    assert_eq!(session.symbol("fc1.weight.exp_avg").unwrap().values, moments, "nor the optimizer state");
    assert_eq!(scalar(&session, "step"), 2.0, "nor Adam's step count");
    assert_eq!(scalar(&session, "loss_scale"), huge / 2.0, "the scale is halved");
    assert_eq!(scalar(&session, "loss_scale.good_steps"), 0.0);

    // Training continues: each overflowing step halves the scale, until a
    // step fits and updates the weights.
    let mut scale = huge / 2.0;
    for k in 3..40 {
        let held = weights(&session);
        let loss = run(&mut session, k);
        assert!(loss.is_finite(), "step {k}: loss {loss}");
        let now = scalar(&session, "loss_scale");
        if weights(&session) != held {
            assert!(scale <= 2f64.powi(24), "step {k} fit at scale {scale}");
            assert_eq!(scalar(&session, "step"), 3.0);
            return;
        }
        assert_eq!(now, scale / 2.0, "step {k}: overflowed at {scale}");
        scale = now;
    }
    panic!("no step fit after 37 halvings");
}

/// Growth on a mixed-precision model: the rewrite is of the f32 source and
/// the new model compiles in the same precision; the master weights, Adam's
/// moments, the step count and fp16's loss scale carry over, and the grown
/// model computes the same function and trains on.
#[test]
fn growth_carries_master_weights_and_the_loss_scale() {
    use crate::adapt::zero_widen;
    use aicf_compiler::train::adapt::{Operator, grow};
    use aicf_compiler::train::{Options, Trainer};
    let narrow = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/grow/narrow_mlp.mlir"));
    let options = Options {
        device: aicf_runtime::Device::Cpu { threads: 2 },
        seed: 3,
        cache_dir: crate::tmp_root().join("precision_growth"),
        precision: Precision::Fp16,
        ..Options::default()
    };
    let mut t = Trainer::from_file(&narrow, options).unwrap();
    let batch = |k: u64| {
        let x = Tensor::new(vec![32, 64], artifact::DType::F32, crate::cpu::data(32 * 64, 70 + k));
        let y = Tensor::new(vec![32], artifact::DType::I32, crate::cpu::indices(&[32], 10, 80 + k).data);
        [x, y]
    };
    for k in 0..4 {
        let [x, y] = batch(k);
        t.step(&[&x, &y], 3e-3).unwrap();
    }
    // A scale of its own, as after some overflows.
    t.backend_mut().set_symbol("loss_scale", &Tensor::scalar(1024.0, artifact::DType::F32)).unwrap();
    let op = zero_widen("fc1", 24);
    // A composition rebinds through an intermediate model's table, which
    // has the loss-scaling states too.
    let wider = zero_widen("fc1", 32);
    let composed = grow(&t, &Operator::Compose { ops: vec![op.clone(), wider] }, 0).unwrap();
    assert_eq!(composed.trainer.state()["loss_scale"].values, [1024.0], "carried through the composition");
    let mut g = grow(&t, &op, 0).unwrap();
    let (before, after) = (t.state(), g.trainer.state());
    assert_eq!(after["loss_scale"].values, [1024.0]);
    assert_eq!(after["loss_scale.good_steps"].values, before["loss_scale.good_steps"].values);
    assert_eq!(after["step"].values, [4.0]);
    assert_eq!(after["fc1.weight"].dtype, artifact::DType::F32, "master weights stay f32");
    assert_eq!(after["fc1.weight"].values[..16 * 64], before["fc1.weight"].values[..], "kept rows carried");
    assert_eq!(after["fc1.weight.exp_avg"].values[..16 * 64], before["fc1.weight.exp_avg"].values[..]);
    // The same function (the new units' outputs are zero), and it trains on.
    let [x, y] = batch(9);
    let (a, b) = (t.loss(&[&x, &y]).unwrap(), g.trainer.loss(&[&x, &y]).unwrap());
    assert!((a - b).abs() <= 1e-3 * a.abs(), "loss before {a}, after {b}");
    let loss = g.trainer.step(&[&x, &y], 3e-3).unwrap().loss;
    assert!(loss.is_finite());
    assert_eq!(g.trainer.state()["step"].values, [5.0]);
}

/// A forward pass past f16's range (inputs of 1e6): the loss is not a
/// number, the compiled step skipped its update, and the trainer says what
/// happened instead of a generic divergence.
#[test]
fn an_fp16_forward_overflow_is_named_and_changes_nothing() {
    use aicf_compiler::train::{Options, TrainError, Trainer};
    let mlp = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mlp/digits_mlp.mlir"));
    let options = Options {
        device: aicf_runtime::Device::Cpu { threads: 2 },
        cache_dir: crate::tmp_root().join("precision_overflow"),
        precision: Precision::Fp16,
        ..Options::default()
    };
    let mut t = Trainer::from_file(&mlp, options).unwrap();
    let big: Vec<f64> = crate::cpu::data(32 * 64, 5).iter().map(|v| v * 1e6).collect();
    let x = Tensor::new(vec![32, 64], artifact::DType::F32, big);
    let y = Tensor::new(vec![32], artifact::DType::I32, crate::cpu::indices(&[32], 10, 6).data);
    let before = t.state();
    let e = t.step(&[&x, &y], 3e-3).unwrap_err();
    assert!(matches!(e, TrainError::Fp16Overflow { .. }), "{e}");
    assert!(e.to_string().contains("overflowed fp16") && e.to_string().contains("--precision bf16"), "{e}");
    let after = t.state();
    assert_eq!(after["fc1.weight"], before["fc1.weight"], "the update was skipped");
    assert_eq!(after["loss_scale"].values, [32768.0], "and the scale halved");
}

/// A checkpoint carries across precisions: f32 master weights are the same
/// either way, and an fp16 run from an fp32 checkpoint starts from the
/// initial loss scale.
#[test]
fn checkpoints_carry_across_precisions() {
    use aicf_compiler::train::{Options, Trainer};
    let mlp = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mlp/digits_mlp.mlir"));
    let options = |precision| Options {
        device: aicf_runtime::Device::Cpu { threads: 2 },
        cache_dir: crate::tmp_root().join("precision_checkpoint"),
        precision,
        ..Options::default()
    };
    let mut fp32 = Trainer::from_file(&mlp, options(Precision::Fp32)).unwrap();
    let x = Tensor::new(vec![32, 64], artifact::DType::F32, crate::cpu::data(32 * 64, 8));
    let y = Tensor::new(vec![32], artifact::DType::I32, crate::cpu::indices(&[32], 10, 9).data);
    fp32.step(&[&x, &y], 3e-3).unwrap();
    let path = crate::tmp_root().join("precision_checkpoint.safetensors");
    fp32.save_checkpoint(&path, &Default::default()).unwrap();
    let mut fp16 = Trainer::from_file(&mlp, options(Precision::Fp16)).unwrap();
    fp16.load_checkpoint(&path).unwrap();
    let (a, b) = (fp32.state(), fp16.state());
    assert_eq!(a["fc1.weight"], b["fc1.weight"]);
    assert_eq!(a["fc1.weight.exp_avg"], b["fc1.weight.exp_avg"]);
    assert_eq!(b["loss_scale"].values, [65536.0]);
    assert!(fp16.step(&[&x, &y], 3e-3).unwrap().loss.is_finite());
}

/// The cross-entropy that reads 16-bit (and padded) logits itself, as
/// `hl-fuse-reductions` makes it of autocast's casts and a padded head's
/// slice, has the bits of the unfused ops on the CPU: the loss and every
/// gradient element, in bf16 and f16, padded and not, with logits of a
/// trained LM's range and spread wide enough that some probabilities are
/// f32 denormals, on rows longer and shorter than a vector. (The CPU keeps
/// each row's exponentials in a row of f32 scratch between the loss's
/// passes, as an f32 gradient kept them; computed again in the gradient's
/// loop, as the GPU does, a few elements in a million moved one 16-bit
/// unit, and as exp(x - lse), 22 of 147,456.)
#[test]
fn the_fused_16bit_cross_entropy_has_the_bits_of_the_casts_around_it() {
    let cases = [
        ("bf16", 2048, 65, 72, 90.0),
        ("f16", 2048, 65, 72, 9.0),
        ("bf16", 16384, 65, 65, 3.0),
        ("f16", 16384, 65, 65, 3.0),
        ("bf16", 3, 5, 8, 3.0),
    ];
    for (t, rows, classes, padded, spread) in cases {
        // The logits a prefix of padded rows and the gradient padded back,
        // or (no padding) the rows as they are.
        let (slice, pad) = if padded == classes {
            (
                "%s = hl.reshape %p : tensor<{R}x{C}x{T}> to tensor<{R}x{C}x{T}>",
                "%q = hl.reshape %e : tensor<{R}x{C}x{T}> to tensor<{R}x{C}x{T}>",
            )
        } else {
            (
                "%s = hl.slice %p start = [0, 0] limit = [{R}, {C}] strides = [1, 1] : tensor<{R}x{P}x{T}>",
                "%q = hl.slice_backward %e start = [0, 0] limit = [{R}, {C}] strides = [1, 1] : tensor<{R}x{C}x{T}> -> tensor<{R}x{P}x{T}>",
            )
        };
        let source = format!(
            "func.func @f(%p: tensor<{{R}}x{{P}}x{{T}}>, %y: tensor<{{R}}xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<{{R}}x{{P}}x{{T}}>) {{\n\
             {slice}\n\
             %c = hl.cast %s : tensor<{{R}}x{{C}}x{{T}}> to tensor<{{R}}x{{C}}xf32>\n\
             %l = hl.cross_entropy %c, %y : tensor<{{R}}x{{C}}xf32>, tensor<{{R}}xi32>\n\
             %d = hl.cross_entropy_backward %c, %y, %g : tensor<{{R}}x{{C}}xf32>, tensor<{{R}}xi32>, tensor<f32>\n\
             %e = hl.cast %d : tensor<{{R}}x{{C}}xf32> to tensor<{{R}}x{{C}}x{{T}}>\n\
             {pad}\n\
             return %l, %q : tensor<f32>, tensor<{{R}}x{{P}}x{{T}}>\n}}"
        )
        .replace("{R}", &rows.to_string())
        .replace("{C}", &classes.to_string())
        .replace("{P}", &padded.to_string())
        .replace("{T}", t);
        let dtype = if t == "bf16" { artifact::DType::BF16 } else { artifact::DType::F16 };
        let logits: Vec<f64> = crate::cpu::data(rows * padded, 7)
            .iter()
            .enumerate()
            .map(|(i, v)| v * spread * (1.0 + (i / padded % 17) as f64 / 2.0) + (i / padded % 5) as f64 * 10.0)
            .collect();
        let labels: Vec<f64> = (0..rows).map(|r| ((r * 7) % classes) as f64).collect();
        let inputs = [
            Tensor::new(vec![rows, padded], dtype, logits),
            Tensor::new(vec![rows], artifact::DType::I32, labels),
            Tensor::new(vec![], artifact::DType::F32, vec![0.75]),
        ];
        let what = format!("{t}, {rows} rows of {classes} classes in {padded}, logits up to {spread}");
        let run = |fuse: bool| {
            ce_with_and_without_fusion(
                &source,
                fuse,
                &inputs,
                &format!("fused_ce_bits_{t}_{rows}_{padded}_{fuse}"),
                &|text| {
                    let casts = text.matches("ll.elementwise").count();
                    assert_eq!(casts, if fuse { 0 } else { 2 }, "{what}: fused {fuse}, the casts' kernels:\n{text}");
                },
            )
        };
        let (plain, fused) = (run(false), run(true));
        assert_eq!(plain[0].values[0].to_bits(), fused[0].values[0].to_bits(), "{what}: the loss");
        let values = plain[1].values.len();
        let differ = plain[1].values.iter().zip(&fused[1].values).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "{what}: {differ} of {values} gradient elements differ");
        assert!(fused[1].values.chunks(padded).all(|r| r[classes..].iter().all(|&v| v == 0.0)), "{what}: padding");
    }
}

/// An evaluation's loss (a cross-entropy with no backward) of a padded
/// 16-bit head, sliced and cast to f32, reads the padded 16-bit rows
/// itself (`hl-fuse-reductions`): no slice, cast or reshape kernel and no
/// gradient buffer, and the same loss to the bit as the ops it replaces, in
/// bf16 and f16, with the importer's reshape of the leading dims and
/// without padding.
#[test]
fn an_evaluations_16bit_padded_loss_reads_the_padded_rows_with_the_same_bits() {
    let cases = [("bf16", 2048, 65, 72, true), ("f16", 2048, 65, 72, false), ("bf16", 333, 65, 65, false)];
    for (t, rows, classes, padded, reshaped) in cases {
        let (half, b) = (rows / 2, 2);
        let mut body = String::new();
        let mut last = "%p".to_string();
        if padded != classes {
            body += &format!(
                "%s = hl.slice %p start = [0, 0] limit = [{rows}, {classes}] strides = [1, 1] : tensor<{rows}x{padded}x{t}>\n"
            );
            last = "%s".into();
        }
        let (logits_shape, labels_shape) = if reshaped {
            body +=
                &format!("%r = hl.reshape {last} : tensor<{rows}x{classes}x{t}> to tensor<{b}x{half}x{classes}x{t}>\n");
            last = "%r".into();
            (format!("{b}x{half}x{classes}"), format!("{b}x{half}"))
        } else {
            (format!("{rows}x{classes}"), format!("{rows}"))
        };
        let source = format!(
            "func.func @f(%p: tensor<{rows}x{padded}x{t}>, %y: tensor<{labels_shape}xi32>) -> tensor<f32> {{\n{body}\
             %c = hl.cast {last} : tensor<{logits_shape}x{t}> to tensor<{logits_shape}xf32>\n\
             %l = hl.cross_entropy %c, %y : tensor<{logits_shape}xf32>, tensor<{labels_shape}xi32>\n\
             return %l : tensor<f32>\n}}"
        );
        let dtype = if t == "bf16" { artifact::DType::BF16 } else { artifact::DType::F16 };
        let logits: Vec<f64> = crate::cpu::data(rows * padded, 11)
            .iter()
            .enumerate()
            .map(|(i, v)| v * 6.0 + (i / padded % 5) as f64)
            .collect();
        let labels: Vec<f64> = (0..rows).map(|r| ((r * 7) % classes) as f64).collect();
        let label_dims = if reshaped { vec![b, half] } else { vec![rows] };
        let inputs =
            [Tensor::new(vec![rows, padded], dtype, logits), Tensor::new(label_dims, artifact::DType::I32, labels)];
        let what = format!("{t}, {rows} rows of {classes} classes in {padded}, reshaped {reshaped}");
        let run = |fuse: bool| {
            let dir = format!("eval_ce_bits_{t}_{rows}_{padded}_{reshaped}_{fuse}");
            ce_with_and_without_fusion(&source, fuse, &inputs, &dir, &|text| {
                if fuse {
                    assert_eq!(text.matches("ll.elementwise").count(), 0, "{what}: a cast's kernel is left:\n{text}");
                    assert!(
                        !text.contains("ll.slice") && !text.contains("ll.copy"),
                        "{what}: a slice is left:\n{text}"
                    );
                    // The loss alone: no gradient operand (`into %loss, %grad`).
                    let line = text.lines().find(|l| l.contains("ll.softmax_cross_entropy")).unwrap_or_default();
                    assert!(line.contains("-> memref<f32> rows"), "{what}: a gradient is written:\n{text}");
                }
            })
        };
        let (plain, fused) = (run(false), run(true));
        assert_eq!(plain[0].values[0].to_bits(), fused[0].values[0].to_bits(), "{what}: the loss");
    }
}

/// `@f` of `source` lowered with `hl-fuse-reductions` (`fuse`) or without,
/// its `ll` text checked by `check`, compiled for the CPU into `dir` (under
/// the test scratch) and called on `inputs`.
fn ce_with_and_without_fusion(
    source: &str,
    fuse: bool,
    inputs: &[Tensor],
    dir: &str,
    check: &dyn Fn(&str),
) -> Vec<Tensor> {
    let ctx = CompilerContext::new();
    let mut m = ctx.parse(source, "ce").unwrap_or_else(|e| panic!("{dir}: {e}"));
    let fusion = if fuse { "canonicalize,hl-fuse-reductions," } else { "canonicalize," };
    run_pipeline(&ctx, &mut m, &format!("builtin.module({fusion}convert-hl-to-ll,ll-plan-memory)")).unwrap();
    check(&m.as_operation().to_string());
    let dir = out_dir(dir);
    compile_cpu(&ctx, &m, "test", &dir).unwrap();
    let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 0).unwrap();
    session.call("f", &inputs.iter().collect::<Vec<_>>()).unwrap()
}
