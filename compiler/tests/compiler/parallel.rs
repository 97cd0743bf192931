//! Data parallel inside one process: the data-parallel train step against
//! the interpreter, a replica among identical ones against one process, and
//! the buckets. (Several processes under `mpirun`: `tools/tests/data_parallel.rs`.)

use crate::cpu::{out_dir, step_inputs};
use crate::models::mlp;
use crate::optimizer::digits;
use aicf_compiler::{
    CompilerContext,
    codegen::compile_cpu,
    interp::{Array, Interpreter},
    nn::DType,
    run_pipeline,
    train::{Options, Trainer},
};
use aicf_runtime::{
    Backend, Tensor,
    artifact::{self, ir_hash},
    collective::{CollectiveError, Communicator, PendingSum, Values},
    cpu::{CpuModule, CpuSession},
};
use std::path::PathBuf;
use std::sync::Arc;

/// A replica among `size` that all hold the same values: every sum is
/// `size` times this replica's own (what MPI would return if every rank
/// trained on the same batch). Counts the sums it started.
struct Twins {
    size: usize,
    sums: std::sync::atomic::AtomicUsize,
}

struct Scaled(Values);

impl PendingSum for Scaled {
    fn test(&mut self) -> Result<bool, CollectiveError> {
        Ok(true)
    }
    fn wait(self: Box<Self>) -> Result<Values, CollectiveError> {
        Ok(self.0)
    }
}

impl Communicator for Twins {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        self.size
    }
    fn engine(&self) -> String {
        "identical twins".into()
    }
    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
    fn start_sum(&self, values: Values, _what: &str) -> Result<Box<dyn PendingSum>, CollectiveError> {
        self.sums.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let n = self.size as f64;
        Ok(Box::new(Scaled(match values {
            Values::F32(v) => Values::F32(v.into_iter().map(|x| x * n as f32).collect()),
            Values::F64(v) => Values::F64(v.into_iter().map(|x| x * n).collect()),
        })))
    }
    fn broadcast(&self, _bytes: &mut Vec<u8>, _root: usize, _what: &str) -> Result<(), CollectiveError> {
        Ok(())
    }
    fn barrier_within(&self, _what: &str, _limit: std::time::Duration) -> Result<(), CollectiveError> {
        Ok(())
    }
    fn abort(&self, code: i32) -> ! {
        panic!("abort({code})")
    }
}

/// The data-parallel step of one replica alone (its collectives scale by
/// its weight, 0.25 here) matches the interpreter's `hl.all_reduce` (the
/// weighted sum over one replica) for several steps.
#[test]
fn a_data_parallel_step_matches_the_interpreter() {
    let traced = mlp::build(mlp::BATCH).unwrap();
    let ctx = CompilerContext::new();
    let mut planned = traced.parse(&ctx).unwrap();
    run_pipeline(
        &ctx,
        &mut planned,
        "builtin.module(aicf-train-pipeline{optimizer=adam data-parallel=true bucket-bytes=0})",
    )
    .unwrap();
    let dir = out_dir("data_parallel_interp");
    let manifest = compile_cpu(&ctx, &planned, &ir_hash(&traced.text), &dir).unwrap();
    let step_fn = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
    let collectives = step_fn.calls.iter().filter(|c| c.collective.is_some()).count();
    let params = manifest.symbols.iter().filter(|s| s.kind == "param").count();
    assert_eq!(collectives, params + 1, "bucket-bytes=0: the loss and each gradient alone");
    let mut session = CpuSession::new(CpuModule::load(&dir, 2).unwrap(), 7).unwrap();
    let mut reference = traced.parse(&ctx).unwrap();
    run_pipeline(&ctx, &mut reference, "builtin.module(hl-optimizer{kind=adam data-parallel=true},canonicalize,cse)")
        .unwrap();
    let mut interp = Interpreter::new(&reference);
    for s in &manifest.symbols {
        let t = session.symbol(&s.name).unwrap();
        let dtype = if s.dtype == artifact::DType::I64 { DType::I64 } else { DType::F32 };
        interp.set_param(&s.name, Array::new(t.shape.clone(), dtype, t.values.clone()).unwrap());
    }
    let names: Vec<String> = manifest.symbols.iter().map(|s| s.name.clone()).collect();
    for step in 0..3 {
        let (tensors, arrays) = step_inputs(step_fn, step, 10);
        let weight = step_fn.args.iter().filter(|a| a.role() == artifact::Role::Input).last().unwrap();
        assert_eq!(weight.bind, "replica_weight");
        assert_eq!(tensors.last().unwrap().values, [0.25]);
        let out = session.call("train_step", &tensors.iter().collect::<Vec<_>>()).unwrap();
        let want = interp.run("train_step", &arrays).unwrap();
        let close = |what: &str, got: &[f64], want: &[f64], tol: f64| {
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: compiled {g}, interpreter {w}");
            }
        };
        close("loss", &out[0].values, &want[0].data, 1e-5);
        for (name, value) in names.iter().zip(&want[1..]) {
            close(name, &session.symbol(name).unwrap().values, &value.data, 1e-4);
            interp.set_param(name, value.clone());
        }
    }
}

fn model() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mlp/digits_mlp.mlir"))
}

fn options(tag: &str, optimizer: &str, data_parallel: bool, bucket_bytes: u64) -> Options {
    let cache_dir = crate::tmp_root().join(tag);
    let _ = std::fs::remove_dir_all(&cache_dir);
    Options {
        optimizer: optimizer.into(),
        momentum: if optimizer == "sgd" { 0.9 } else { 0.0 },
        device: aicf_runtime::Device::Cpu { threads: 2 },
        seed: 3,
        cache_dir,
        gemm: Some("generated".into()),
        data_parallel,
        bucket_bytes,
        ..Options::default()
    }
}

/// One replica of two identical ones (each sum twice its own values)
/// trains as one process does (within 1e-6): the buckets are packed,
/// weighted, summed and unpacked, and each waited for before the first
/// kernel that reads it, whatever the bucket size.
#[test]
fn a_replica_among_identical_replicas_trains_as_one_process() {
    let rows = digits();
    let batches: Vec<(Tensor, Tensor)> = (0..12)
        .map(|b| {
            let take = &rows[b * 32..b * 32 + 32];
            let x = take.iter().flat_map(|r| r.0).collect();
            let y = take.iter().map(|r| r.1 as f64).collect();
            (
                Tensor::new([32, 64], aicf_runtime::artifact::DType::F32, x),
                Tensor::new([32], aicf_runtime::artifact::DType::I32, y),
            )
        })
        .collect();
    // SGD at weight 1/4 (sums half the gradient) against one process at
    // half the rate: a kernel that read a gradient before its sum was
    // written back would see it whole. Adam at weight 1/2.
    for (optimizer, weight, rate) in [("sgd", 0.25, 0.5e-2), ("adam", 0.5, 1e-2)] {
        let mut alone =
            Trainer::from_file(&model(), options(&format!("dp_alone_{optimizer}"), optimizer, false, 0)).unwrap();
        for (x, y) in &batches {
            alone.step(&[x, y], rate).unwrap();
        }
        for bucket_bytes in [0, 4096, 25 << 20] {
            let tag = format!("dp_twin_{optimizer}_{bucket_bytes}");
            let mut replica = Trainer::from_file(&model(), options(&tag, optimizer, true, bucket_bytes)).unwrap();
            let twins = Arc::new(Twins { size: 2, sums: Default::default() });
            replica.set_communicator(twins.clone()).unwrap();
            replica.set_replica_share(weight, Some(64));
            for (x, y) in &batches {
                replica.step(&[x, y], 1e-2).unwrap();
            }
            let calls = replica
                .backend()
                .function("train_step")
                .unwrap()
                .calls
                .iter()
                .filter(|c| c.collective.is_some())
                .count();
            assert_eq!(twins.sums.load(std::sync::atomic::Ordering::SeqCst), calls * batches.len());
            match bucket_bytes {
                0 => assert_eq!(calls, 5, "the loss and four gradients"),
                4096 => assert!((2..5).contains(&calls), "{calls} buckets of 4 KiB"),
                _ => assert_eq!(calls, 1, "one bucket of 25 MiB holds every gradient"),
            }
            // The same arithmetic, but not the same kernels: the reductions
            // split the fused update groups, and LLVM contracts other
            // multiply-adds (last-bit differences).
            // (SGD's momentum holds the halved gradients: twice it is one
            // process's at half the rate.)
            for (name, value) in alone.state() {
                let scale = if name.ends_with(".momentum") { 2.0 } else { 1.0 };
                for (a, b) in replica.state()[&name].values.iter().zip(&value.values) {
                    let a = a * scale;
                    assert!((a - b).abs() <= 1e-6, "{name} ({optimizer}, bucket {bucket_bytes}): {a} against {b}");
                }
            }
        }
    }
}

/// A model compiled for one process refuses to be a replica of several
/// (its step would not sum the gradients); one of a group of one is fine.
#[test]
fn a_model_compiled_alone_is_no_replica() {
    let mut t = Trainer::from_file(&model(), options("dp_refused", "sgd", false, 0)).unwrap();
    let twins = Arc::new(Twins { size: 2, sums: Default::default() });
    let e = t.set_communicator(twins).unwrap_err().to_string();
    assert!(e.contains("compiled for it (Options::data_parallel)"), "{e}");
    t.set_communicator(Arc::new(aicf_runtime::collective::Local)).unwrap();
}

/// Growth and rollback keep a trainer in its group: the grown model and
/// the model a rollback goes back to are replicas too (their steps sum
/// over the group), at the replica's weight.
#[test]
fn grown_and_rolled_back_models_stay_in_the_group() {
    use aicf_compiler::train::adapt::{Adaptive, Operator, Outcome, Policy, Progress, WidenRule};
    let narrow = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/grow/narrow_mlp.mlir"));
    let mut t = Trainer::from_file(&narrow, options("dp_grow", "adam", true, 0)).unwrap();
    let twins = Arc::new(Twins { size: 2, sums: Default::default() });
    t.set_communicator(twins.clone()).unwrap();
    t.set_replica_share(0.5, Some(64));
    let rows = digits();
    let batch = |i: usize| {
        let take = &rows[(i * 32) % 1760..(i * 32) % 1760 + 32];
        let x = take.iter().flat_map(|r| r.0.map(|v| v / 16.0)).collect();
        let y = take.iter().map(|r| r.1 as f64).collect();
        [
            Tensor::new([32, 64], aicf_runtime::artifact::DType::F32, x),
            Tensor::new([32], aicf_runtime::artifact::DType::I32, y),
        ]
    };
    let mut run = Adaptive::new(t, Policy { prefetch: false, watch_steps: 50, rules: vec![], ..Policy::default() });
    let progress = |i: usize| Progress { epoch: 1, batch: i + 1, rng: 7 };
    let sums = || twins.sums.load(std::sync::atomic::Ordering::SeqCst);
    for i in 0..5 {
        let [x, y] = batch(i);
        run.step(&[&x, &y], 3e-3, progress(i)).unwrap();
    }
    let op = Operator::Widen {
        layer: "fc1".into(),
        width: 32,
        rule: WidenRule::Net2wider,
        split_noise: 0.1,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    };
    run.apply(&op, "test", &[], progress(4)).unwrap().expect("the widening is accepted");
    assert!(run.trainer().communicator().is_some(), "the grown model left the group");
    let before = sums();
    let [x, y] = batch(5);
    run.step(&[&x, &y], 3e-3, progress(5)).unwrap();
    assert!(sums() > before, "the grown model's step summed over nothing");
    // An absurd rate: the next loss is not finite, and the watched rewrite
    // goes back to the narrow model, still a replica.
    let [x, y] = batch(6);
    run.step(&[&x, &y], 1e30, progress(6)).unwrap();
    let [x, y] = batch(7);
    assert!(matches!(run.step(&[&x, &y], 3e-3, progress(7)).unwrap(), Outcome::RolledBack(..)));
    assert!(run.trainer().communicator().is_some(), "the model rolled back to left the group");
    let before = sums();
    let [x, y] = batch(8);
    run.step(&[&x, &y], 3e-3, progress(8)).unwrap();
    assert!(sums() > before, "the rolled-back model's step summed over nothing");
}

/// Gradient accumulation: a step of two micro-batches of 32 rows, each at
/// its share of the 64, trains as one step of the 64 rows does (SGD with
/// momentum, within 1e-6: the same arithmetic, summed in another order),
/// a short last micro-batch runs its own variant (32 + 8 rows at 0.8 and
/// 0.2), and what is no accumulated step is refused, saying why.
#[test]
fn micro_batches_accumulate_as_one_batch() {
    let rows = digits();
    let batch = |start: usize, n: usize| -> [Tensor; 2] {
        let take = &rows[start..start + n];
        [
            Tensor::new([n, 64], aicf_runtime::artifact::DType::F32, take.iter().flat_map(|r| r.0).collect()),
            Tensor::new([n], aicf_runtime::artifact::DType::I32, take.iter().map(|r| r.1 as f64).collect()),
        ]
    };
    let mut one = Trainer::from_file(&model(), options("acc_one", "sgd", false, 0)).unwrap();
    let mut acc =
        Trainer::from_file(&model(), Options { accumulate: 2, ..options("acc_two", "sgd", false, 0) }).unwrap();
    let close = |what: &str, a: f64, b: f64| assert!((a - b).abs() <= 1e-6, "{what}: {a} against {b}");
    for (start, first, second) in [(0, 32, 32), (64, 32, 32), (128, 32, 32), (192, 32, 8)] {
        let total = first + second;
        let [x, y] = batch(start, total);
        let want = one.step(&[&x, &y], 0.05).unwrap();
        let [x0, y0] = batch(start, first);
        let [x1, y1] = batch(start + first, second);
        let (w0, w1) = (first as f64 / total as f64, second as f64 / total as f64);
        let got = acc.step_micro(&[(vec![&x0, &y0], w0), (vec![&x1, &y1], w1)], 0.05).unwrap();
        assert_eq!((got.rows, got.step), (total, want.step));
        close("loss", got.loss, want.loss);
    }
    for (name, value) in one.state() {
        for (a, b) in acc.state()[&name].values.iter().zip(&value.values) {
            close(&name, *a, *b);
        }
    }
    let [x, y] = batch(0, 32);
    let e = one.step_micro(&[(vec![&x, &y], 1.0)], 0.05).unwrap_err().to_string();
    assert!(e.contains("compiled for gradient accumulation"), "{e}");
    let e = acc.step_micro(&[(vec![&x, &y], 1.5)], 0.05).unwrap_err().to_string();
    assert!(e.contains("share 1.5 is not in [0, 1]"), "{e}");
    let e = acc.step_micro(&[], 0.05).unwrap_err().to_string();
    assert!(e.contains("no micro-batches"), "{e}");
    // Shares that do not make the global batch, more micro-batches than
    // compiled for, and inputs counted as the caller gives them.
    let e = acc.step_micro(&[(vec![&x, &y], 0.1), (vec![&x, &y], 0.1)], 0.05).unwrap_err().to_string();
    assert!(e.contains("shares add up to 0.2, not 1"), "{e}");
    let third = 1.0 / 3.0;
    let e = acc.step_micro(&[(vec![&x, &y], third), (vec![&x, &y], third), (vec![&x, &y], third)], 0.05);
    let e = e.unwrap_err().to_string();
    assert!(e.contains("3 micro-batches, more than the 2"), "{e}");
    let e = acc.step_micro(&[(vec![&x], 1.0)], 0.05).unwrap_err().to_string();
    assert!(e.contains("@train_grad: 1 inputs given, the model takes 2"), "{e}");
    let zero = Options { accumulate: 0, ..options("acc_zero", "sgd", false, 0) };
    let Err(e) = Trainer::from_file(&model(), zero) else { panic!("0 micro-batches were accepted") };
    assert!(e.to_string().contains("over 0 micro-batches"), "{e}");
}

/// A state the loss sets (a batch norm's running mean) under gradient
/// accumulation is the weighted mean of the micro-batches' values, as over
/// replicas: two micro-batches of 16 rows at shares 0.75 and 0.25.
#[test]
fn a_set_state_accumulates_as_the_weighted_mean_of_the_micro_batches() {
    const MODEL: &str = r#"
hl.param @fc1.weight : tensor<8x4xf32> owner "fc1" init <uniform, low = -1.0, high = 1.0>
hl.param @fc1.bias : tensor<8xf32> owner "fc1" init <zeros>
hl.state @bn.running_mean : tensor<8xf32> slot "running_mean" init <zeros>
func.func @forward(%x: tensor<16x4xf32>) -> tensor<16x8xf32> {
  %w = hl.get_param @fc1.weight : tensor<8x4xf32>
  %b = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w, %b : tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>
  return %h : tensor<16x8xf32>
}
func.func @loss(%x: tensor<16x4xf32>, %y: tensor<16xi32>) -> tensor<f32> {
  %w = hl.get_param @fc1.weight : tensor<8x4xf32>
  %b = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w, %b : tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>
  %m = hl.reduce_mean %h axes = [0] : tensor<16x8xf32>
  hl.set_state @bn.running_mean, %m : tensor<8xf32>
  %l = hl.cross_entropy %h, %y : tensor<16x8xf32>, tensor<16xi32>
  return %l : tensor<f32>
}
"#;
    use aicf_runtime::artifact::DType as D;
    let mut t = Trainer::from_source(MODEL, "bn.mlir", Options { accumulate: 2, ..options("acc_bn", "sgd", false, 0) })
        .unwrap();
    let x = |seed: f64| Tensor::new([16, 4], D::F32, (0..64).map(|i| (i as f64 * 0.37 + seed).sin()).collect());
    let y = Tensor::new([16], D::I32, (0..16).map(|i| (i % 8) as f64).collect());
    let (x0, x1) = (x(0.0), x(1.0));
    // The row means of each micro-batch's layer output, before the update.
    let means = |t: &mut Trainer, x: &Tensor| -> Vec<f64> {
        let h = &t.predict(&[x]).unwrap()[0];
        (0..8).map(|j| (0..16).map(|r| h.values[r * 8 + j]).sum::<f64>() / 16.0).collect()
    };
    let (m0, m1) = (means(&mut t, &x0), means(&mut t, &x1));
    t.step_micro(&[(vec![&x0, &y], 0.75), (vec![&x1, &y], 0.25)], 0.1).unwrap();
    let got = &t.state()["bn.running_mean"].values;
    for j in 0..8 {
        let want = 0.75 * m0[j] + 0.25 * m1[j];
        assert!((got[j] - want).abs() <= 1e-5, "running mean [{j}]: {} against {want}", got[j]);
    }
}
