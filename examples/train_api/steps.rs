//! README's "Training from a Rust program", as code that compiles and runs
//! (examples/train_api.rs; tested in compiler/tests/compiler/trainer.rs).

use aicf_compiler::train::{
    Options, Trainer,
    run::{self, Quiet, RunOptions},
};
use aicf_runtime::{Device, Tensor, artifact::DType};
use std::path::Path;

/// A batch of `rows` digit-shaped rows (64 features) and their labels,
/// drawn from `seed` (any values do for the API's calls).
pub fn batch(rows: usize, seed: u64) -> (Tensor, Tensor) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let x: Vec<f64> = (0..rows * 64).map(|_| (next() % 17) as f64).collect();
    let y: Vec<f64> = (0..rows).map(|_| (next() % 10) as f64).collect();
    (Tensor::new([rows, 64], DType::F32, x), Tensor::new([rows], DType::I32, y))
}

/// Trains the digits MLP on `device` (its files under `out`): the whole
/// loop, then step by step, then with gradient accumulation. Returns a line
/// per part.
pub fn run(device: &Device, out: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let model = root.join("examples/mlp/digits_mlp.mlir");
    let options = Options { device: device.clone(), cache_dir: out.join("cache"), ..Options::default() };
    let mut lines = Vec::new();

    // The whole loop, as `aicf train` runs it (a `Report` receives its lines).
    let fitted = RunOptions { epochs: 2, out: out.join("run"), ..RunOptions::default() };
    let summary = run::fit(&model, &options, &[root.join("data/digits.csv.gz")], &fitted, &mut Quiet)?;
    let last = summary.records.last().ok_or("no epoch ran")?;
    lines.push(format!("fit: held-out {:.4} {} after {} steps", last.val_loss, last.unit, summary.steps));

    // Or step by step.
    let mut trainer = Trainer::from_file(&model, options.clone())?; // compiles, or finds it cached
    let (x, labels) = batch(32, 1);
    let m = trainer.step(&[&x, &labels], 3e-3)?; // Metrics { step, loss, rows }; a NaN loss is an error naming the step
    let logits = trainer.predict(&[&x])?; // @forward
    let classes: Vec<i64> = labels.values.iter().map(|&v| v as i64).collect();
    let e = trainer.evaluate(&x, &classes)?; // Evaluation { accuracy, rows }, any number of rows
    trainer.save_checkpoint(&out.join("ckpt.safetensors"), &Default::default())?;
    lines.push(format!(
        "step {}: loss {:.4} on {} rows; logits {:?}; accuracy {:.3} on {} rows",
        m.step, m.loss, m.rows, logits[0].shape, e.accuracy, e.rows
    ));

    // Gradient accumulation: each micro-batch with its share of the global batch.
    let mut acc = Trainer::from_file(&model, Options { accumulate: 2, ..options })?;
    let ((x0, y0), (x1, y1)) = (batch(32, 2), batch(32, 3));
    let m = acc.step_micro(&[(vec![&x0, &y0], 0.5), (vec![&x1, &y1], 0.5)], 3e-3)?;
    lines.push(format!("accumulated step {}: loss {:.4} on {} rows", m.step, m.loss, m.rows));
    Ok(lines)
}
