//! The embedding API: a model file in, compiled training out.

use crate::optimizer::digits;
use aicf_compiler::train::{Options, TrainError, Trainer};
use aicf_runtime::{Tensor, artifact::DType};
use std::path::PathBuf;

fn model() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mlp/digits_mlp.mlir"))
}

fn options(tag: &str, optimizer: &str) -> Options {
    let cache_dir = crate::tmp_root().join(tag);
    let _ = std::fs::remove_dir_all(&cache_dir);
    Options {
        optimizer: optimizer.into(),
        device: aicf_runtime::Device::Cpu { threads: 2 },
        seed: 1,
        cache_dir,
        ..Options::default()
    }
}

/// Rows `[start, start + n)` of the digits as (features, labels).
fn batch(rows: &[([f64; 64], usize)], start: usize, n: usize) -> (Tensor, Tensor) {
    let take = &rows[start..start + n];
    let x = take.iter().flat_map(|r| r.0).collect();
    let y = take.iter().map(|r| r.1 as f64).collect();
    (Tensor::new([n, 64], DType::F32, x), Tensor::new([n], DType::I32, y))
}

/// Train steps (a smaller last batch included), predict, evaluate, a
/// checkpoint round trip and the compile cache, as an embedding program
/// would use them.
#[test]
fn the_trainer_trains_predicts_evaluates_and_caches() {
    let rows = digits();
    let (train, held) = rows.split_at(1500);
    let options = options("trainer_api", "adam");
    let mut t = Trainer::from_file(&model(), options.clone()).unwrap();
    assert_eq!(t.batch(), Some(32));
    assert!(t.compiled()[0].seconds.is_some(), "the first trainer compiles");
    let before =
        t.evaluate(&batch(held, 0, held.len()).0, &held.iter().map(|r| r.1 as i64).collect::<Vec<_>>()).unwrap();
    let mut first = None;
    let mut last = 0.0;
    for _epoch in 0..3 {
        // 1500 = 46 x 32 + 28: the last batch runs a variant.
        for start in (0..train.len()).step_by(32) {
            let n = 32.min(train.len() - start);
            let (x, y) = batch(train, start, n);
            let m = t.step(&[&x, &y], 3e-3).unwrap();
            assert_eq!(m.rows, n);
            first.get_or_insert(m.loss);
            last = m.loss;
        }
    }
    assert_eq!(t.steps(), 3 * 47);
    assert!(last < first.unwrap() / 4.0, "loss {first:?} -> {last}");
    let batches: Vec<Option<usize>> = t.compiled().iter().map(|c| c.batch).collect();
    // 297 held-out rows = 9 x 32 + 9: evaluation compiled a variant for 9.
    assert_eq!(batches, [None, Some(9), Some(28)]);
    let labels: Vec<i64> = held.iter().map(|r| r.1 as i64).collect();
    let after = t.evaluate(&batch(held, 0, held.len()).0, &labels).unwrap();
    assert_eq!(after.rows, 297);
    assert!(
        after.accuracy > 0.8 && after.accuracy > before.accuracy,
        "accuracy {} -> {}",
        before.accuracy,
        after.accuracy
    );
    let logits = t.predict(&[&batch(held, 0, 5).0]).unwrap();
    assert_eq!(logits[0].shape, [5, 10]);

    // A checkpoint restores parameters, optimizer state and the step count.
    let ckpt = options.cache_dir.join("ckpt.safetensors");
    t.save_checkpoint(&ckpt, &Default::default()).unwrap();
    let saved = t.backend().symbol("fc1.weight").unwrap();
    let (x, y) = batch(train, 0, 32);
    t.step(&[&x, &y], 3e-3).unwrap();
    assert_ne!(t.backend().symbol("fc1.weight").unwrap(), saved);
    t.load_checkpoint(&ckpt).unwrap();
    assert_eq!(t.backend().symbol("fc1.weight").unwrap(), saved);
    assert_eq!(t.steps(), 3 * 47);

    // A second trainer finds every compilation in the cache.
    let mut again = Trainer::from_file(&model(), options).unwrap();
    assert_eq!(again.compiled()[0].seconds, None);
    let (x, y) = batch(train, 0, 28);
    again.step(&[&x, &y], 3e-3).unwrap();
    assert_eq!(again.compiled()[1].seconds, None);
}

/// A checkpoint of another optimizer's run is refused by
/// `load_checkpoint` either way (Adam's moments into SGD were dropped
/// unsaid, SGD's momentum into Adam was refused), and both name
/// `load_parameters`, which loads its parameters with this optimizer
/// started afresh.
#[test]
fn another_optimizers_checkpoint_loads_its_parameters_alone() {
    let rows = digits();
    let (x, y) = batch(&rows, 0, 32);
    let mut adam = Trainer::from_file(&model(), options("trainer_switch_adam", "adam")).unwrap();
    for _ in 0..3 {
        adam.step(&[&x, &y], 3e-3).unwrap();
    }
    let ckpt = adam.options().cache_dir.join("adam.safetensors");
    adam.save_checkpoint(&ckpt, &Default::default()).unwrap();
    let mut sgd = Trainer::from_file(&model(), options("trainer_switch_sgd", "sgd")).unwrap();
    let initial = sgd.state();
    let e = sgd.load_checkpoint(&ckpt).unwrap_err().to_string();
    assert!(
        e.contains("it holds optimizer state fc1.bias.exp_avg, which this train step's optimizer does not keep"),
        "{e}"
    );
    assert!(e.contains("Trainer::load_parameters"), "{e}");
    assert_eq!(sgd.state(), initial, "nothing was loaded");
    sgd.load_parameters(&ckpt, true).unwrap();
    assert_eq!(sgd.backend().symbol("fc1.weight").unwrap(), adam.backend().symbol("fc1.weight").unwrap());
    assert_eq!(sgd.steps(), 3, "the checkpoint's step count");
    sgd.step(&[&x, &y], 0.05).unwrap();
    // The same model at another batch size has another IR hash: the way
    // to load it is said.
    let text = std::fs::read_to_string(model()).unwrap().replace("<32x", "<16x").replace("<32xi32>", "<16xi32>");
    let mut sixteen = Trainer::from_source(&text, "digits16", options("trainer_switch_16", "adam")).unwrap();
    assert_eq!(sixteen.batch(), Some(16));
    let e = sixteen.load_checkpoint(&ckpt).unwrap_err().to_string();
    assert!(
        e.contains("the checkpoint is of another model") && e.contains("load_checkpoint_of(path, false, ..)"),
        "{e}"
    );
    sixteen.load_checkpoint_of(&ckpt, false, true).unwrap();
    // SGD with momentum's checkpoint into Adam: refused, then loaded with
    // Adam's moments zero and its bias correction from the start.
    let mut momentum = Options { momentum: 0.9, ..options("trainer_switch_momentum", "sgd") };
    momentum.seed = 2;
    let mut m = Trainer::from_file(&model(), momentum).unwrap();
    m.step(&[&x, &y], 0.05).unwrap();
    let ckpt = m.options().cache_dir.join("momentum.safetensors");
    m.save_checkpoint(&ckpt, &Default::default()).unwrap();
    let e = adam.load_checkpoint(&ckpt).unwrap_err().to_string();
    assert!(e.contains("it holds optimizer state fc1.bias.momentum, which") && e.contains("load_parameters"), "{e}");
    adam.load_parameters(&ckpt, true).unwrap();
    let state = adam.state();
    assert_eq!(state["fc1.weight"], m.backend().symbol("fc1.weight").unwrap());
    assert!(state["fc1.weight.exp_avg"].values.iter().all(|&v| v == 0.0));
    assert_eq!(state["step"].values, [0.0]);
    adam.step(&[&x, &y], 3e-3).unwrap();
}

/// Inputs that do not fit beyond the batch size, a missing model file and a
/// diverging run are errors that say what happened.
#[test]
fn trainer_errors_name_the_problem() {
    let e = Trainer::from_file("no/such/model.mlir".as_ref(), options("trainer_missing", "sgd")).err().unwrap();
    assert!(e.to_string().starts_with("no/such/model.mlir: "), "{e}");

    let mut t = Trainer::from_file(&model(), options("trainer_errors", "sgd")).unwrap();
    let x = Tensor::new([32, 63], DType::F32, vec![0.0; 32 * 63]);
    let y = Tensor::new([32], DType::I32, vec![0.0; 32]);
    let e = t.step(&[&x, &y], 0.1).unwrap_err().to_string();
    assert!(e.contains("input #0 (input) is F32 [32, 63]; the model takes F32 [rows, 64], any number of rows"), "{e}");
    assert_eq!(t.compiled().len(), 1, "no variant for a feature mismatch");
    let x5 = Tensor::new([5, 63], DType::F32, vec![0.0; 5 * 63]);
    let e = t.predict(&[&x5]).unwrap_err().to_string();
    assert!(e.contains("is F32 [5, 63]; the model takes F32 [rows, 64]"), "{e}");
    // A value past f32's range would arrive as an infinity: named, and
    // nothing runs (the step ran, and the NaN loss blamed the rate).
    let mut far = Tensor::new([32, 64], DType::F32, vec![0.1; 32 * 64]);
    far.values[9] = 1e39;
    let e = t.step(&[&far, &y], 0.1).unwrap_err().to_string();
    assert!(e.contains("input #0 (input) holds 1e39 at index 9") && e.contains("beyond F32's range"), "{e}");
    assert_eq!(t.steps(), 0, "nothing ran");
    // So does predict (it gave NaN) and the accuracy (which blamed a
    // feature "not finite").
    let e = t.predict(&[&far]).unwrap_err().to_string();
    assert!(e.contains("input #0 (input) holds 1e39 at index 9") && e.contains("beyond F32's range"), "{e}");
    let labels = vec![0i64; 32];
    let e = t.evaluate(&far, &labels).unwrap_err().to_string();
    assert!(e.contains("beyond F32's range"), "{e}");
    // Values that do not fill their shape, found before anything is
    // compiled or read (they were read past their end: a NaN loss).
    let y = Tensor::new([32], DType::I32, vec![0.0; 32]);
    let short = Tensor::new([32, 64], DType::F32, vec![0.5; 10]);
    let e = t.step(&[&short, &y], 0.1).unwrap_err().to_string();
    assert!(e.contains("input #0 holds 10 values; its shape [32, 64] takes 2048"), "{e}");
    let huge = Tensor::new([1 << 40, 64], DType::F32, vec![]);
    let e = t.step(&[&huge, &y], 0.1).unwrap_err().to_string();
    assert!(e.contains("holds 0 values"), "{e}");
    assert_eq!(t.compiled().len(), 1, "no variant for values that do not fill their shape");
    // Features and labels of different row counts, and an empty batch,
    // are said as such before any variant is compiled (a 15-row variant
    // was, then the call named the features).
    let x15 = Tensor::new([15, 64], DType::F32, vec![0.5; 15 * 64]);
    let e = t.step(&[&x15, &y], 0.1).unwrap_err().to_string();
    assert!(e.contains("input #1 has 32 rows and input #0 15: the inputs of one batch"), "{e}");
    let empty = Tensor::new([0, 64], DType::F32, vec![]);
    let y0 = Tensor::new([0], DType::I32, vec![]);
    let e = t.step(&[&empty, &y0], 0.1).unwrap_err().to_string();
    assert!(e.contains("input #0 has no rows (an empty batch)"), "{e}");
    assert_eq!(t.compiled().len(), 1, "no variant for rows that disagree");
    // A learning rate that is not a finite number of at least 0.
    let good = Tensor::new([32, 64], DType::F32, vec![0.5; 32 * 64]);
    for lr in [f64::NAN, -1.0, f64::INFINITY] {
        let e = t.step(&[&good, &y], lr).unwrap_err().to_string();
        assert!(e.contains("is not a finite number of at least 0"), "{e}");
    }
    assert_eq!(t.steps(), 0, "a refused step is not counted");
    // The runtime's own call (a program on aicf-runtime alone) refuses a
    // NaN feature and a rate that is not a finite number of at least 0 in
    // a train step: they returned a loss and left the parameters NaN.
    let before = t.state();
    let mut nan_x = good.values.clone();
    nan_x[7] = f64::NAN;
    let nan_x = Tensor::new([32, 64], DType::F32, nan_x);
    let labels = Tensor::new([32], DType::I32, vec![1.0; 32]);
    let lr = Tensor::scalar(0.1, DType::F32);
    let e = t.backend_mut().call("train_step", &[&nan_x, &labels, &lr]).unwrap_err().to_string();
    assert!(e.contains("input #0 (input) holds NaN at index 7 (of shape [32, 64]); nothing was run"), "{e}");
    for rate in [f64::NAN, -1e-3, f64::INFINITY] {
        let lr = Tensor::scalar(rate, DType::F32);
        let e = t.backend_mut().call("train_step", &[&good, &labels, &lr]).unwrap_err().to_string();
        assert!(e.contains("(lr), the learning rate, is") && e.contains("nothing was run"), "{e}");
    }
    assert_eq!(t.state(), before, "a refused call changed the parameters");
    // Inputs counted as the caller gives them (the call's own count took in
    // the learning rate the Trainer adds).
    let e = t.step(&[&good], 0.1).unwrap_err().to_string();
    assert!(e.contains("@train_step: 1 inputs given, the model takes 2 (f32 [32, 64], i32 [32])"), "{e}");
    let e = t.step(&[], 0.1).unwrap_err().to_string();
    assert!(e.contains("0 inputs given, the model takes 2"), "{e}");
    // Integer labels hold whole numbers in their type's range: a 2.5, a
    // NaN or a 1e12 was cast on the way in (to 2, 0 and 2^31 - 1).
    // (The Trainer's NaN check names a NaN first; the runtime's, below,
    // names the rest, and a NaN where a Backend is called directly.)
    for (bad, why) in [(2.5, "2.5 at index 3"), (f64::NAN, "NaN at index 3"), (1e12, "1000000000000 at index 3")] {
        let mut labels = vec![0.0; 32];
        labels[3] = bad;
        let y = Tensor::new([32], DType::I32, labels);
        let e = t.step(&[&good, &y], 0.1).unwrap_err().to_string();
        assert!(e.contains("input #1 ") && e.contains(why), "{e}");
        let lr = Tensor::scalar(0.1, DType::F32);
        let e = t.backend_mut().call("train_step", &[&good, &y, &lr]).unwrap_err().to_string();
        assert!(e.contains("input #1 (") && e.contains(why) && e.contains("for its element type I32"), "{e}");
    }
    assert_eq!(t.steps(), 0, "a refused step is not counted");
    // evaluate: features of rank 0, too few values, no rows, labels
    // outside the classes (they counted as wrong answers).
    let e = t.evaluate(&Tensor::new(Vec::<usize>::new(), DType::F32, vec![0.5]), &[]).unwrap_err().to_string();
    assert!(e.contains("rank 0"), "{e}");
    let e = t.evaluate(&Tensor::new([40, 64], DType::F32, vec![0.5; 100]), &[0; 40]).unwrap_err().to_string();
    assert!(e.contains("100 values, which do not fill features of shape [40, 64]"), "{e}");
    let e = t.evaluate(&Tensor::new([1 << 40, 1 << 40], DType::F32, vec![0.5]), &[]).unwrap_err().to_string();
    assert!(e.contains("1 values, which do not fill features of shape [1099511627776, 1099511627776]"), "{e}");
    let e = t.evaluate(&Tensor::new([0, 64], DType::F32, vec![]), &[]).unwrap_err().to_string();
    assert!(e.contains("no rows"), "{e}");
    let e = t.evaluate(&good, &[-5; 32]).unwrap_err().to_string();
    assert!(e.contains("label -5 of row 0 is outside the model's classes [0, 10)"), "{e}");
    // A NaN feature gave a NaN row, scored as class 0 (an accuracy, not an
    // error).
    let mut values = good.values.clone();
    values[5 * 64 + 1] = f64::NAN;
    let e = t.evaluate(&Tensor::new([32, 64], DType::F32, values), &[0; 32]).unwrap_err().to_string();
    assert!(e.contains("@forward gives NaN for row 5"), "{e}");
    // A regression's one output per row scored an accuracy of 1.
    let regression = "module {
  hl.param @fc.weight : tensor<1x2xf32> owner \"fc\" init <kaiming_uniform>
  func.func @forward(%x: tensor<4x2xf32>) -> tensor<4x1xf32> {
    %w = hl.get_param @fc.weight : tensor<1x2xf32>
    %y = hl.linear %x, %w : tensor<4x2xf32>, tensor<1x2xf32>
    return %y : tensor<4x1xf32>
  }
  func.func @loss(%x: tensor<4x2xf32>, %t: tensor<4xf32>) -> tensor<f32> {
    %w = hl.get_param @fc.weight : tensor<1x2xf32>
    %y = hl.linear %x, %w : tensor<4x2xf32>, tensor<1x2xf32>
    %r = hl.reshape %y : tensor<4x1xf32> to tensor<4xf32>
    %l = hl.mse_loss %r, %t : tensor<4xf32>, tensor<4xf32>
    return %l : tensor<f32>
  }
}";
    let mut r = Trainer::from_source(regression, "regression", options("trainer_errors_regression", "sgd")).unwrap();
    let e = r.evaluate(&Tensor::new([4, 2], DType::F32, vec![0.5; 8]), &[0; 4]).unwrap_err().to_string();
    assert!(e.contains("evaluate measures a classifier's accuracy"), "{e}");

    let rows = digits();
    let (x, y) = batch(&rows, 0, 32);
    let mut diverged = None;
    for _ in 0..10 {
        match t.step(&[&x, &y], 1e30) {
            Ok(_) => {}
            Err(e) => {
                diverged = Some(e);
                break;
            }
        }
    }
    match diverged {
        Some(TrainError::NonFinite { step, lr, .. }) => {
            assert!(step >= 1 && lr == 1e30);
        }
        other => panic!("expected a non-finite loss, got {other:?}"),
    }
    // A step at a small rate after one at a huge rate names the step before.
    let mut t = Trainer::from_file(&model(), options("trainer_errors", "sgd")).unwrap();
    let e = match t.step(&[&x, &y], 1e30).and_then(|_| t.step(&[&x, &y], 1e-3)).and_then(|_| t.step(&[&x, &y], 1e-3)) {
        Err(e) => e.to_string(),
        Ok(m) => panic!("expected a non-finite loss, got {m:?}"),
    };
    assert!(e.contains("the step before ran at lr 1e30"), "{e}");
    // An infinite feature (which the NaN check lets through, as masks hold
    // -inf) is named as the likely cause of the NaN loss.
    let mut t = Trainer::from_file(&model(), options("trainer_errors", "sgd")).unwrap();
    let mut values = x.values.clone();
    values[70] = f64::INFINITY;
    let inf = Tensor::new([32, 64], DType::F32, values);
    let e = t.step(&[&inf, &y], 1e-3).unwrap_err().to_string();
    assert!(e.contains("input #0 holds inf at index 70 (of shape [32, 64]), the likely cause"), "{e}");
    // Through a tanh, the infinite feature's loss is finite while its update
    // makes the first layer's weights NaN: the next step's NaN loss names
    // the step before's input (it blamed the learning rate).
    let tanh = std::fs::read_to_string(model()).unwrap().replace("hl.relu", "hl.tanh");
    assert!(tanh.contains("hl.tanh"), "the model has an activation to swap");
    let mut t = Trainer::from_source(&tanh, "tanh_mlp.mlir", options("trainer_errors_tanh", "sgd")).unwrap();
    let first = t.step(&[&inf, &y], 1e-3).unwrap();
    assert!(first.loss.is_finite(), "the infinite input's own loss is finite through tanh: {}", first.loss);
    let e = t.step(&[&x, &y], 1e-3).unwrap_err().to_string();
    assert!(
        e.contains("the loss became NaN at step 2") && e.contains("the step before's input #0 held inf at index 70"),
        "{e}"
    );
}

/// `clip_norm` bounds a step's update by the global gradient norm (SGD:
/// the parameters move by at most lr x clip_norm together), and the betas
/// reach Adam's compiled update.
#[test]
fn clipping_and_betas_reach_the_compiled_update() {
    let rows = digits();
    let (x, y) = batch(&rows, 0, 32);
    let params = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let moved = |options: Options, lr: f64, steps: usize| -> Vec<f64> {
        let mut t = Trainer::from_file(&model(), options).unwrap();
        let before: Vec<Tensor> = params.iter().map(|p| t.backend().symbol(p).unwrap()).collect();
        for _ in 0..steps {
            t.step(&[&x, &y], lr).unwrap();
        }
        params
            .iter()
            .zip(&before)
            .flat_map(|(p, b)| {
                let after = t.backend().symbol(p).unwrap();
                after.values.iter().zip(&b.values).map(|(a, b)| a - b).collect::<Vec<_>>()
            })
            .collect()
    };
    let norm = |d: &[f64]| d.iter().map(|v| v * v).sum::<f64>().sqrt();
    let (lr, clip) = (0.5, 1e-3);
    let free = norm(&moved(options("clip_off", "sgd"), lr, 1));
    let clipped = norm(&moved(Options { clip_norm: Some(clip), ..options("clip_on", "sgd") }, lr, 1));
    assert!(free > 10.0 * lr * clip, "an unclipped step moves by {free}");
    assert!(clipped <= lr * clip * (1.0 + 1e-4) && clipped > 0.9 * lr * clip, "clipped step moved by {clipped}");

    let adam = moved(options("betas_default", "adamw"), 1e-3, 3);
    let nano = moved(Options { betas: (0.9, 0.99), ..options("betas_nanogpt", "adamw") }, 1e-3, 3);
    let differ = adam.iter().zip(&nano).filter(|(a, b)| (*a - *b).abs() > 1e-9).count();
    assert!(differ > adam.len() / 2, "beta2 0.99 changed {differ} of {} updates", adam.len());

    // Out-of-range settings are refused before anything compiles.
    let run = aicf_compiler::train::run::RunOptions::default();
    let mut report = aicf_compiler::train::run::Quiet;
    for bad in [
        Options { betas: (0.9, 1.0), ..options("betas_bad", "adam") },
        Options { clip_norm: Some(-1.0), ..options("clip_bad", "adam") },
    ] {
        let e = aicf_compiler::train::run::fit(&model(), &bad, &[], &run, &mut report).unwrap_err().to_string();
        assert!(e.contains("betas") || e.contains("clipping"), "{e}");
    }
}

/// A state that does not fit changes nothing (an entry short of its shape,
/// or naming no symbol, is found before anything is set), and a
/// checkpoint is never renamed over a device, a pipe or a directory (one
/// saved to `/dev/null` replaced the device with a file).
#[test]
fn the_trainer_refuses_states_that_do_not_fit_and_special_checkpoint_paths() {
    let mut t = Trainer::from_file(&model(), options("trainer_bad_state", "sgd")).unwrap();
    let before = t.state();
    // BTreeMap order: the broken entry comes after every other is checked.
    let mut state = before.clone();
    for v in state.values_mut() {
        v.values.iter_mut().for_each(|x| *x += 1.0);
    }
    let mut unfilled = state.clone();
    let last = unfilled.keys().next_back().unwrap().clone();
    unfilled.get_mut(&last).unwrap().values.pop();
    let e = t.set_state(&unfilled).unwrap_err().to_string();
    assert!(e.contains(&format!("state for {last}")) && e.contains("do not fill its shape"), "{e}");
    let mut unknown = state.clone();
    unknown.insert("zzz".into(), Tensor::scalar(1.0, DType::F32));
    let e = t.set_state(&unknown).unwrap_err().to_string();
    assert!(e.contains("state for zzz: the model has no such symbol"), "{e}");
    let mut nan = state.clone();
    nan.get_mut("fc1.weight").unwrap().values[2] = f64::NAN;
    let e = t.set_state(&nan).unwrap_err().to_string();
    assert!(e.contains("state for fc1.weight: NaN at index 2 is not a finite number"), "{e}");
    for (name, v) in t.state() {
        assert_eq!(v.values, before[&name].values, "{name} changed by a refused state");
    }
    t.set_state(&state).unwrap();
    assert_ne!(t.state(), before, "a state that fits is set");

    // A batch holding NaN is refused before the step (its update would
    // make every parameter NaN, and the loss's error blame the rate).
    let set = t.state();
    let mut x = vec![0.5; 4 * 64];
    x[70] = f64::NAN;
    let (x, y) = (Tensor::new([4, 64], DType::F32, x), Tensor::new([4], DType::I32, vec![1.0; 4]));
    let e = t.step(&[&x, &y], 0.1).unwrap_err().to_string();
    assert!(e.contains("@train_step: input #0 holds NaN at index 70 (of shape [4, 64]); nothing was run"), "{e}");
    assert_eq!(t.state(), set, "a refused step changed the model");
    assert_eq!(t.steps(), 0);

    let dir = crate::tmp_root().join("trainer_special_checkpoint");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a_directory")).unwrap();
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    let mut special = vec![dir.join("a_directory")];
    if made {
        special.push(fifo.clone());
    }
    for path in &special {
        let e = t.save_checkpoint(path, &Default::default()).unwrap_err().to_string();
        assert!(e.contains("is not replaced"), "{}: {e}", path.display());
    }
    assert!(dir.join("a_directory").is_dir());
    if made {
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the pipe was replaced");
    }
    // An extra entry short of its shape would be written with offsets its
    // header contradicts.
    let file = dir.join("c.safetensors");
    let short = [("extra".to_string(), Tensor::new([4], DType::F32, vec![1.0; 3]))].into_iter().collect();
    let e = t.save_checkpoint_with(&file, &Default::default(), &short).unwrap_err().to_string();
    assert!(e.contains("checkpoint entry extra: 3 values do not fill its shape [4]"), "{e}");
    assert!(!file.exists());
    // A caller's "step" that is no step count would be a file no load takes.
    let step = [("step".to_string(), "hello".to_string())].into_iter().collect();
    let e = t.save_checkpoint(&file, &step).unwrap_err().to_string();
    assert!(e.contains("checkpoint metadata step \"hello\" is not a step count"), "{e}");
    assert!(!file.exists());
    t.save_checkpoint(&file, &Default::default()).unwrap();
    t.load_checkpoint(&file).unwrap();
}

/// Two threads that find the same artifact missing compile it one after
/// the other: the second finds the first's whole (both wrote into one
/// directory, so one's manifest could sit beside the other's kernels).
#[test]
fn two_compiles_of_one_artifact_take_turns() {
    let options = options("trainer_compile_turns", "sgd");
    let source = std::fs::read_to_string(model()).unwrap();
    let compiled: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| aicf_compiler::train::precompile(&source, "digits_mlp.mlir", &options, &[None])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().unwrap().remove(0)).collect()
    });
    assert_eq!(compiled[0].dir, compiled[1].dir);
    let fresh = compiled.iter().filter(|c| c.seconds.is_some()).count();
    assert_eq!(fresh, 1, "compiled {fresh} times");
    // Each artifact directory has its lock beside it, hidden.
    let lock =
        compiled[0].dir.with_file_name(format!(".{}.lock", compiled[0].dir.file_name().unwrap().to_string_lossy()));
    assert!(lock.is_file(), "{}", lock.display());
    Trainer::from_source(&source, "digits_mlp.mlir", options).unwrap();
}

/// The runtime saves no checkpoint holding a NaN (loading refuses one as
/// damage: a program that trained on NaN data through the runtime saved a
/// checkpoint that then did not load), and the file there stays as it was.
#[test]
fn the_runtime_saves_no_checkpoint_holding_a_nan() {
    let options = options("trainer_nan_save", "sgd");
    let mut t = Trainer::from_file(&model(), options.clone()).unwrap();
    let path = options.cache_dir.join("good.safetensors");
    t.backend().save_checkpoint(&path, &Default::default()).unwrap();
    let before = std::fs::read(&path).unwrap();
    let weight = t.backend().manifest().symbols.iter().find(|s| s.name.ends_with(".weight")).unwrap().clone();
    let mut poisoned = t.state()[&weight.name].clone();
    // (A NaN, an infinity, or a number past f32's range is refused where it
    // is set, as a call's input is; the state is poisoned here by a step on
    // an infinite input, which the runtime takes, as an additive mask's.)
    for bad in [f64::NAN, f64::INFINITY, -1e40] {
        poisoned.values[3] = bad;
        let e = t.backend_mut().set_symbol(&weight.name, &poisoned).unwrap_err().to_string();
        assert!(e.contains(&format!("{bad} at index 3 is not a value a F32 symbol holds")), "{e}");
    }
    let mut adam = Trainer::from_file(&model(), self::options("trainer_nan_save_adam", "adam")).unwrap();
    let e = adam.backend_mut().set_symbol("step", &Tensor::scalar(2.5, DType::I64)).unwrap_err().to_string();
    assert!(e.contains("2.5 at index 0 is not a value a I64 symbol holds"), "{e}");
    let e = adam.backend_mut().set_symbol("step", &Tensor::scalar(2.0, DType::F32)).unwrap_err().to_string();
    assert!(e.contains("a F32 tensor, the symbol is I64"), "{e}");
    let mut x = Tensor::new([32, 64], DType::F32, vec![0.5; 32 * 64]);
    x.values[0] = f64::INFINITY;
    let labels = Tensor::new([32], DType::I32, vec![1.0; 32]);
    t.backend_mut().call("train_step", &[&x, &labels, &Tensor::scalar(0.1, DType::F32)]).unwrap();
    let e = t.backend().save_checkpoint(&path, &Default::default()).unwrap_err().to_string();
    assert!(e.contains("holds a NaN or an infinity (element"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the good checkpoint was replaced");
}

/// A model with dropout takes its seed and offset after its data. A step
/// (or a loss) given only the data draws them as `aicf train` does: the
/// options' seed, and an offset of 2^24 counters a step (the same bits as
/// giving them); given one of the two, it is told what they are.
#[test]
fn a_step_without_dropout_s_seed_and_offset_draws_them() {
    let lm = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/char_lm/char_lm.mlir"));
    let mut t = Trainer::from_file(&lm, options("trainer_dropout_inputs", "adam")).unwrap();
    let mut given = Trainer::from_file(&lm, options("trainer_dropout_inputs", "adam")).unwrap();
    let ids = Tensor::new([16, 64], DType::I32, (0..16 * 64).map(|i| (i * 7 % 65) as f64).collect());
    let seed = Tensor::scalar(options("trainer_dropout_inputs", "adam").seed as f64, DType::I64);
    for step in 0..2u64 {
        let offset = Tensor::scalar((step << 24) as f64, DType::I64);
        let drawn = t.step(&[&ids, &ids], 1e-3).unwrap().loss;
        let explicit = given.step(&[&ids, &ids, &seed, &offset], 1e-3).unwrap().loss;
        assert_eq!(drawn, explicit, "step {step}: the drawn seed and offset are aicf train's");
    }
    assert_eq!(t.steps(), 2);
    let offset = Tensor::scalar((2u64 << 24) as f64, DType::I64);
    assert_eq!(t.loss(&[&ids, &ids]).unwrap(), given.loss(&[&ids, &ids, &seed, &offset]).unwrap());
    // Micro-batches of an accumulated step: each its own masks, as `aicf
    // train --accumulate` draws them (micro-batch j's seed is offset by j).
    let accumulate = || Options { accumulate: 2, ..options("trainer_dropout_micro", "adam") };
    let (mut a, mut b) =
        (Trainer::from_file(&lm, accumulate()).unwrap(), Trainer::from_file(&lm, accumulate()).unwrap());
    let base = accumulate().seed;
    let part = |j: u64| {
        let s = base.wrapping_add(j.wrapping_mul(0x9E37_79B9_7F4A_7C15)) & ((1 << 52) - 1);
        Tensor::scalar(s as f64, DType::I64)
    };
    let (s0, s1, zero) = (part(0), part(1), Tensor::scalar(0.0, DType::I64));
    let drawn = a.step_micro(&[(vec![&ids, &ids], 0.5), (vec![&ids, &ids], 0.5)], 1e-3).unwrap().loss;
    let given =
        b.step_micro(&[(vec![&ids, &ids, &s0, &zero], 0.5), (vec![&ids, &ids, &s1, &zero], 0.5)], 1e-3).unwrap().loss;
    assert_eq!(drawn, given);
    // A seed without its offset: said what the two are.
    let e = t.step(&[&ids, &ids, &seed], 1e-3).unwrap_err().to_string();
    assert!(e.contains("3 inputs given, the model takes 4 (i32 [16, 64], i32 [16, 64], i64 [], i64 [])"), "{e}");
    assert!(e.contains("the last two, i64 scalars, are the seed and offset of its random numbers (dropout's masks, noise): leave both out"), "{e}");
    assert_eq!(t.steps(), 2);
}

/// PyTorch's int64 labels feed a model's i32 labels (the same numbers; one
/// the i32 cannot hold is refused naming the input), and the optimizer's
/// settings are checked as the CLI checks them: a clip norm of 0 trained
/// unclipped (PyTorch's clip_grad_norm_(0) zeroes the step).
#[test]
fn int64_labels_feed_i32_inputs_and_optimizer_settings_are_checked() {
    let rows = digits();
    let (x, y) = batch(&rows, 0, 32);
    let y64 = Tensor::new([32], DType::I64, y.values.clone());
    let mut a = Trainer::from_file(&model(), options("trainer_int64_a", "sgd")).unwrap();
    let mut b = Trainer::from_file(&model(), options("trainer_int64_b", "sgd")).unwrap();
    let (la, lb) = (a.step(&[&x, &y], 0.1).unwrap().loss, b.step(&[&x, &y64], 0.1).unwrap().loss);
    assert_eq!(la, lb);
    assert_eq!(a.predict(&[&x]).unwrap(), b.predict(&[&x]).unwrap());
    assert_eq!(a.loss(&[&x, &y]).unwrap(), b.loss(&[&x, &y64]).unwrap());
    let mut huge = y64.clone();
    huge.values[3] = 3e9;
    let e = b.step(&[&x, &huge], 0.1).unwrap_err().to_string();
    assert!(e.contains("input #1") && e.contains("3000000000"), "{e}");
    for (what, o, expected) in [
        ("clip 0", Options { clip_norm: Some(0.0), ..options("trainer_settings", "sgd") }, "clipping norm 0 is not"),
        (
            "nesterov without momentum",
            Options { nesterov: true, ..options("trainer_settings", "sgd") },
            "nesterov is SGD's",
        ),
        ("nesterov with adam", Options { nesterov: true, ..options("trainer_settings", "adam") }, "nesterov is SGD's"),
        ("a misspelt optimizer", options("trainer_settings", "sgdd"), "Options: optimizer \"sgdd\": \"sgd\""),
    ] {
        let Err(e) = Trainer::from_file(&model(), o) else { panic!("{what}: accepted") };
        assert!(e.to_string().contains(expected), "{what}: {e}");
    }
}

#[path = "../../../examples/train_api/steps.rs"]
pub(crate) mod train_api;

/// README's *Training from a Rust program* (examples/train_api) compiles
/// and runs as shown: the whole loop learns the digits, a step, a
/// prediction, an evaluation and a checkpoint, and an accumulated step
/// (its snippet had drifted from the API: `summary.last()` of a struct).
#[test]
fn the_readmes_rust_training_example_runs() {
    let out = crate::tmp_root().join("train_api");
    let lines = train_api::run(&aicf_runtime::Device::Cpu { threads: 1 }, &out).unwrap();
    println!("{}", lines.join("\n"));
    assert_eq!(lines.len(), 3, "{lines:?}");
    let held_out: f64 = lines[0].split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap();
    assert!(held_out < 1.0, "two epochs of the digits MLP: held-out {held_out} (ln 10 = 2.30 is a guess)");
    assert!(lines[1].starts_with("step 1: loss") && lines[1].contains("logits [32, 10]"), "{}", lines[1]);
    assert!(out.join("ckpt.safetensors").is_file());
    assert!(lines[2].starts_with("accumulated step 1: loss") && lines[2].contains("on 64 rows"), "{}", lines[2]);
}
