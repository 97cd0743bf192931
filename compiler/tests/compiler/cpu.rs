//! Compiled CPU kernels against the reference interpreter: the same train
//! step, the same starting parameters, the same numbers (f32 tolerances).

use crate::models::mlp;
use aicf_compiler::{
    CompilerContext,
    codegen::compile_cpu,
    interp::{Array, Interpreter},
    nn::DType,
    run_pipeline,
};
use aicf_runtime::{
    artifact::{self, ir_hash},
    cpu::CpuModule,
    registry::Choice,
    session::{Session, Tensor},
};
use std::path::PathBuf;

/// A fresh directory under the target dir for one artifact.
fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Deterministic inputs in [-1, 1) and labels in [0, classes).
fn data(n: usize, seed: u64) -> Vec<f64> {
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
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: compiled {g}, interpreter {w}");
    }
}

/// One optimizer's train step of the digits MLP, compiled and interpreted.
fn train_step_matches(optimizer: &str, steps: usize, gemm: Choice) {
    let traced = mlp::build(mlp::BATCH).unwrap();
    let ctx = CompilerContext::new();
    let mut planned = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut planned, &format!("builtin.module(aicf-train-pipeline{{optimizer={optimizer}}})")).unwrap();
    let dir = out_dir(&format!("digits_mlp_{optimizer}_{gemm:?}"));
    let manifest = compile_cpu(&ctx, &planned, &ir_hash(&traced.text), &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut module = CpuModule::load(&dir, 2).unwrap();
    module.force_gemm(Some(gemm));
    let mut session = Session::new(module, 7).unwrap();

    let mut reference = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut reference, &format!("builtin.module(hl-optimizer{{kind={optimizer}}},canonicalize,cse)"))
        .unwrap();
    let mut interp = Interpreter::new(&reference);
    for s in &manifest.symbols {
        let t = session.symbol(&s.name).unwrap();
        let dtype = if s.dtype == artifact::DType::I64 { DType::I64 } else { DType::F32 };
        interp.set_param(&s.name, Array::new(t.shape.clone(), dtype, t.values.clone()).unwrap());
    }
    let names: Vec<String> = manifest.symbols.iter().map(|s| s.name.clone()).collect();
    for step in 0..steps {
        let b = mlp::BATCH;
        let x = data(b * 64, 11 + step as u64);
        let y: Vec<f64> = data(b, 5 + step as u64).iter().map(|v| ((v + 1.0) * 5.0).floor().min(9.0)).collect();
        let lr = 0.05;
        let out = session
            .call(
                "train_step",
                &[
                    &Tensor::new([b, 64], artifact::DType::F32, x.clone()),
                    &Tensor::new([b], artifact::DType::I32, y.clone()),
                    &Tensor::scalar(lr, artifact::DType::F32),
                ],
            )
            .unwrap();
        let want = interp
            .run(
                "train_step",
                &[
                    Array::new([b, 64], DType::F32, x).unwrap(),
                    Array::new([b], DType::I32, y).unwrap(),
                    Array::scalar(lr, DType::F32),
                ],
            )
            .unwrap();
        close("loss", &out[0].values, &want[0].data, 1e-5);
        // The interpreter returns the new value of every symbol it updates,
        // in the symbol table's order.
        let updated: Vec<&String> = names.iter().filter(|n| interp.param(n).is_some()).collect();
        for (name, value) in updated.iter().zip(&want[1..]) {
            close(name, &session.symbol(name).unwrap().values, &value.data, 1e-4);
            interp.set_param(name, value.clone());
        }
    }
}

#[test]
fn digits_mlp_sgd_train_step_matches_the_interpreter() {
    train_step_matches("sgd", 3, Choice::Generated);
}

#[test]
fn digits_mlp_adam_train_step_matches_the_interpreter() {
    train_step_matches("adam", 3, Choice::Generated);
}

/// The registry's library candidate (sgemm + the generated epilogue,
/// lhs_sum included) computes the same step.
#[test]
fn library_gemm_train_step_matches_the_interpreter() {
    train_step_matches("sgd", 2, Choice::Library);
}
