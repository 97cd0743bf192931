//! Predictions of a model on data (`aicf predict`): `@forward`'s output for
//! every row of a table or of arrays, in the file's order, from a
//! checkpoint's parameters (or an imported model's own weights), as a
//! classifier's classes or probabilities, or the output as it is; written
//! as `.npy` or CSV.

use super::data::{DataOptions, Dataset, Role, STANDARDIZE_KEY, Scores, Signature, Split};
use super::eval::{checkpoint_trainer, data_name, model_of_checkpoint, table_scale};
use super::run::{Report, create_dir};
use super::{Options, TrainError, Trainer};
use aicf_runtime::Tensor;
use aicf_runtime::artifact::DType;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Result<T, E = TrainError> = std::result::Result<T, E>;

/// What a prediction gives for each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// A classifier's class: the argmax of the output's last dimension
    /// (its first on ties, as `torch.argmax`), an integer.
    Class,
    /// A classifier's probabilities: the softmax of the output's last
    /// dimension (the output itself where `@forward` ends in a softmax).
    Probabilities,
    /// `@forward`'s output as it is (a classifier's logits).
    Raw,
}

impl Values {
    pub fn name(self) -> &'static str {
        match self {
            Values::Class => "class",
            Values::Probabilities => "probabilities",
            Values::Raw => "raw",
        }
    }
}

/// `@forward`'s first result for every row of the data, in its order.
#[derive(Clone, Debug)]
pub struct Predictions {
    /// `[rows, ...]`: the output's shape with the batch's dimension as the
    /// data's rows.
    pub output: Tensor,
    /// Whether the model is a classifier (its `@loss` a cross-entropy of
    /// the output against class labels): what [`Values`] it defaults to.
    pub classifies: bool,
    /// What the output holds: logits, or the probabilities (or their
    /// logarithms) of a softmax at `@forward`'s end.
    pub scores: Scores,
    /// The classes' names, in class order, where the checkpoint's run read
    /// its labels as names: classes are written as them in CSV.
    pub class_names: Option<Vec<String>>,
    /// Each row's name where the data names its examples (an image
    /// folder's paths): written first on each row of a CSV.
    pub row_names: Option<Vec<String>>,
}

/// The formats predictions are written in, by the file's name.
pub const FORMATS: &str = ".npy (an array, numpy.load reads it) or .csv (a row per example)";

/// Whether `path` names a format predictions are written in.
pub fn known_format(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    name.ends_with(".npy") || name.ends_with(".csv")
}

/// The model in `model` (name, source) where it holds weights of its own
/// (an imported model's `hl.weights`): what runs without a checkpoint.
/// Random initial values `doing` (predict, score) nothing: refused.
pub(crate) fn model_with_own_weights(model: &Path, doing: &str) -> Result<(String, String)> {
    let source = super::read_model(model)?;
    if crate::weights::declared_in_text(&source).is_none() {
        let why = if has_params(&source, &model.display().to_string())? {
            "no --checkpoint, and the model holds no weights of its own (an imported model's): its parameters would \
             be their random initial values; give a checkpoint of a run (`aicf train --checkpoint-dir DIR` writes \
             DIR/last.safetensors)"
                .to_string()
        } else {
            format!(
                "the model declares no parameters (hl.param): AICF compiles a model that trains, and this one has \
                 nothing to train or to {doing} with"
            )
        };
        return Err(TrainError::Input(format!("{}: {why}", model.display())));
    }
    Ok((model.display().to_string(), source))
}

/// The trainer of a model with weights of its own
/// ([`model_with_own_weights`]), compiled in `out`: its initial state is
/// those weights.
pub(crate) fn own_weights_trainer(source: &str, name: &str, options: &Options, out: &Path) -> Result<Trainer> {
    create_dir(out)?;
    Trainer::from_source(source, name, Options { cache_dir: out.to_path_buf(), ..options.clone() })
}

/// Runs `@forward` of the model in `model` on every row of `data` (a table,
/// or arrays: the data inputs alone, or with the targets, which are not
/// read) with the parameters of `checkpoint`, or, without one, the model's
/// own weights (an imported model's `hl.weights`). Features are read as the
/// checkpoint's run read them (its table's scale or standardization);
/// without a checkpoint, as the file holds them. `keep_batch`: as
/// [`super::eval::evaluate_checkpoint`]'s; `result`: which of `@forward`'s
/// results (from 0; another than the first is written raw, as no
/// classifier's logits).
pub fn predict(
    model: &Path,
    options: &Options,
    data: &[PathBuf],
    checkpoint: Option<&Path>,
    out: &Path,
    (keep_batch, result): (bool, usize),
    report: &mut dyn Report,
) -> Result<Predictions> {
    if let Some(text) = data.iter().find(|p| super::data::is_text(p)) {
        return Err(TrainError::Input(format!(
            "{}: a text; predictions are of rows (a table, or .npy/.safetensors arrays): a language model continues \
             a text with `aicf sample` and is scored on one by `aicf eval`",
            text.display()
        )));
    }
    let (name, source, meta, other_batch) = match checkpoint {
        Some(c) => model_of_checkpoint(model, c, out, "predicting with", keep_batch, report)?,
        None => {
            let (name, source) = model_with_own_weights(model, "predict")?;
            (name, source, BTreeMap::new(), false)
        }
    };
    let sig = Signature::of_source(&source, &name)?;
    let Some((output_shape, _)) = sig.output.clone() else {
        return Err(TrainError::Input(format!("{name}: the model has no @forward to predict with")));
    };
    if output_shape.is_empty() {
        return Err(TrainError::Input(format!(
            "{name}: @forward returns a scalar, not an output per example (its first dimension the batch)"
        )));
    }
    // A checkpoint's table was read divided by its scale (or standardized):
    // the features to predict from are read so too. Without a record (an
    // imported model, a `Trainer` run's tensors), as the file holds them.
    let scale = table_scale(&meta, checkpoint, data, report)?;
    let standardized = meta.get(STANDARDIZE_KEY).cloned();
    let trained_on = match meta.get("data") {
        Some(d) => super::run::records_data(d, data)?,
        None => false,
    };
    let data_options = DataOptions {
        val_split: 0.0,
        feature_scale: Some(scale),
        feature_stats: standardized.clone(),
        columns: meta.get(super::data::COLUMNS_KEY).cloned(),
        class_names: meta.get(super::data::CLASSES_KEY).cloned(),
        target_stats: meta.get(super::data::TARGETS_KEY).cloned(),
        label: meta.get(super::data::LABEL_KEY).cloned(),
        predicting: true,
        ..DataOptions::default()
    };
    let dataset = Dataset::load(data, &sig, &data_options)?;
    // Arrays are divided by the scale the checkpoint's run read its table
    // with, as that table was: arrays divided already (their largest far
    // below the table's) would be divided twice, and are said to be.
    // (An image folder's pixels are read as 0 to 1, not divided so.)
    let arrays = !data.iter().any(|p| super::data::is_table(p) || super::data::images::is_images(p));
    // (Said so, the cause named; else data read at another scale than the
    // run's is said below.)
    let mut said = false;
    if let (Some(s), Some(largest)) =
        (Some(scale).filter(|&s| s != 1.0 && standardized.is_none()), dataset.largest_data())
        && arrays
        && !trained_on
        && largest < 0.25
    {
        said = true;
        let inputs = sig.inputs.iter().filter(|i| i.role == Role::Data).count();
        let files: Vec<PathBuf> = data.iter().take(if data.len() > 1 { inputs } else { 1 }).cloned().collect();
        report.note(&format!(
            "{}: the largest feature is {}, and the checkpoint's run read its table divided by {s} (its largest): \
             these are divided by {s} too; if they are divided already, give them as that table held them",
            data_name(&files),
            super::rate_text(largest * s),
        ));
    }
    let magnitude = meta.get(super::data::INPUT_MAGNITUDE_KEY);
    if !trained_on
        && !said
        && let Some(note) = super::data::other_magnitude(&data_name(data), magnitude, &dataset)
    {
        report.note(&note);
    }
    if let Some(outlier) = &dataset.outlier {
        report.note(&format!("{outlier}: the model's predictions for it may mean little; check the data"));
    }
    for note in &dataset.notes {
        report.note(note);
    }
    let mut trainer = match checkpoint {
        Some(c) => checkpoint_trainer(&source, &name, options, &meta, c, out, other_batch, report)?,
        None => own_weights_trainer(&source, &name, options, out)?,
    };
    let batch = sig.batch();
    let n = dataset.train_len();
    // A model whose ops fix its batch runs its last rows in a batch filled
    // with repeats of the first of them, whose outputs are dropped.
    let fill = super::eval::last_batch(&mut trainer, n, batch)?;
    for c in trainer.compiled() {
        report.compiled(Path::new(&name), c);
    }
    // (Another result's shape is its own, read from the first batch.)
    let mut output_shape = output_shape;
    let mut per: usize = output_shape[1..].iter().product();
    let mut values = Vec::with_capacity(n.saturating_mul(per));
    let mut output_dtype = None;
    super::eval::each_batch(n, batch, fill, "predicting", |rows, counted| {
        let fed = dataset.batch(Split::Train, rows);
        let data_in: Vec<&Tensor> =
            fed.iter().zip(sig.fed()).filter(|(_, i)| i.role == Role::Data).map(|(t, _)| t).collect();
        let results = trainer.predict(&data_in)?;
        if results.is_empty() {
            return Err(TrainError::Input(format!("{name}: @forward returns nothing to predict with")));
        }
        let Some(y) = results.get(result) else {
            return Err(TrainError::Input(format!(
                "--result {result}: @forward returns {} result{} (0 to {})",
                results.len(),
                if results.len() == 1 { "" } else { "s" },
                results.len() - 1
            )));
        };
        if output_dtype.is_none() && results.len() > 1 {
            report.note(&format!(
                "{name}: @forward returns {} results; result {result} is predicted (--result picks another)",
                results.len()
            ));
        }
        if output_dtype.is_none() && result > 0 {
            if !matches!(y.shape.first(), Some(&b) if b == rows.len() || b == batch) {
                return Err(TrainError::Input(format!(
                    "--result {result}: @forward's result {result} is {:?}, not one row per example",
                    y.shape
                )));
            }
            output_shape = y.shape.clone();
            per = output_shape[1..].iter().product();
        }
        output_dtype = Some(y.dtype);
        let kept = &y.values[..(per * counted).min(y.values.len())];
        if let Some(at) = kept.iter().position(|v| v.is_nan()) {
            return Err(TrainError::Input(format!(
                "{}: row {} (counting from 0): the model's output is NaN: {}",
                data_name(data),
                rows[at / per.max(1)],
                match checkpoint {
                    Some(c) =>
                        format!("a parameter of {} is not finite, or the row is far outside its data", c.display()),
                    None => "a weight of the model is not finite, or the row is far outside its data".to_string(),
                } + &crate::train::fp16_range_hint(trainer.options().precision)
            )));
        }
        values.extend_from_slice(kept);
        Ok(())
    })?;
    // (Only the first result is the logits a classifier's loss reads.)
    let first = result == 0;
    // A run that standardized its targets predicts standardized values:
    // read back in the file's units.
    let mut values = values;
    if first && let Some(text) = meta.get(super::data::TARGETS_KEY) {
        let stats: super::data::Standardization = serde_json::from_str(text).map_err(|e| TrainError::Io {
            path: checkpoint.map(Path::to_path_buf).unwrap_or_default(),
            message: format!("its {} does not read ({e})", super::data::TARGETS_KEY),
        })?;
        let per: usize = output_shape[1..].iter().product::<usize>().max(1);
        if stats.mean.len() != per || stats.std.len() != per {
            return Err(TrainError::Input(format!(
                "the checkpoint standardized {} targets an example; @forward's output has {per}",
                stats.mean.len()
            )));
        }
        for row in values.chunks_mut(per) {
            for ((v, m), d) in row.iter_mut().zip(&stats.mean).zip(&stats.std) {
                *v = *v * d + m;
            }
        }
    }
    let shape: Vec<usize> = std::iter::once(n).chain(output_shape[1..].iter().copied()).collect();
    let output = Tensor::new(shape, output_dtype.unwrap_or(DType::F32), values);
    let class_names = meta.get(super::data::CLASSES_KEY).and_then(|t| serde_json::from_str(t).ok());
    Ok(Predictions {
        output,
        classifies: first && sig.classifies(),
        scores: if first { sig.scores } else { super::data::Scores::Logits },
        class_names: class_names.filter(|_| first),
        row_names: dataset.row_names.clone(),
    })
}

/// Whether the module `source` declares parameters (`hl.param`).
fn has_params(source: &str, name: &str) -> Result<bool> {
    let ctx = crate::CompilerContext::new();
    let module = ctx.parse(source, name)?;
    let raw = module.as_operation().to_raw();
    // SAFETY: `module` is alive here; its body is its region's first block.
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(raw, 0)) };
    Ok(crate::ir::ops_of(body).into_iter().any(|op| crate::ir::op_name(op) == "hl.param"))
}

impl Predictions {
    /// The values a classifier defaults to (its classes), or the output.
    pub fn default_values(&self) -> Values {
        if self.classifies { Values::Class } else { Values::Raw }
    }

    /// The predictions as `values` asks: `[rows, ...]` as the output, or
    /// without its last dimension for classes.
    pub fn values(&self, values: Values) -> Result<Tensor> {
        let out = &self.output;
        if values != Values::Raw && !self.classifies {
            return Err(TrainError::Input(format!(
                "--values {}: the model is not a classifier (its @loss is no cross-entropy of @forward's output \
                 against class labels): its predictions are its output as it is (--values raw)",
                values.name()
            )));
        }
        // (An output per example has the examples' axis: a scalar has no
        // rows, and no classes to take.)
        let Some(&classes) = out.shape.last() else {
            return Err(TrainError::Input("predictions of a scalar output: no rows to give".into()));
        };
        let classes = classes.max(1);
        Ok(match values {
            Values::Raw => out.clone(),
            Values::Class => {
                let best = out
                    .values
                    .chunks(classes)
                    .map(|row| {
                        // The first of the largest (a NaN was refused).
                        let mut at = 0;
                        for (i, v) in row.iter().enumerate() {
                            if *v > row[at] {
                                at = i;
                            }
                        }
                        at as f64
                    })
                    .collect();
                Tensor::new(&out.shape[..out.shape.len() - 1], DType::I64, best)
            }
            // (A softmax at @forward's end already made them.)
            Values::Probabilities => {
                let p = out.values.chunks(classes).flat_map(|row| self.scores.probabilities(row)).collect();
                Tensor::new(out.shape.clone(), DType::F32, p)
            }
        })
    }
}

/// `t` as a `.npy` file's bytes: integers as int64, floats as float32
/// (float64 where the model's output is).
pub fn npy_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    match t.dtype {
        DType::I64 | DType::I32 | DType::I1 | DType::U8 => npy_of(&shape, t.values.iter().map(|&v| v as i64)),
        DType::F64 => npy_of(&shape, t.values.iter().copied()),
        DType::F32 | DType::F16 | DType::BF16 => npy_of(&shape, t.values.iter().map(|&v| v as f32)),
    }
}

/// A `.npy` array of `shape` holding `values`, in their type.
fn npy_of<T: npyz::AutoSerialize>(shape: &[u64], values: impl Iterator<Item = T>) -> Result<Vec<u8>> {
    use npyz::WriterBuilder;
    let failed = |e: std::io::Error| TrainError::Input(format!("writing the .npy array: {e}"));
    let mut bytes = Vec::new();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(&mut bytes).begin_nd().map_err(failed)?;
    w.extend(values).map_err(failed)?;
    w.finish().map_err(failed)?;
    Ok(bytes)
}

/// `t` as CSV: a line per row (its first dimension), the row's values in
/// order; floats as the shortest text that reads back to the same f32 (or
/// f64), below 1e-4 in exponent form, integers as integers.
pub fn write_csv(t: &Tensor, to: impl std::io::Write) -> std::io::Result<()> {
    write_csv_named(t, None, None, to)
}

/// [`write_csv`], integer classes written as `names` (a classifier whose
/// labels were names); `row_names`: each row's name, written as its first
/// value (an image's path).
pub fn write_csv_named(
    t: &Tensor,
    names: Option<&[String]>,
    row_names: Option<&[String]>,
    to: impl std::io::Write,
) -> std::io::Result<()> {
    let rows = t.shape.first().copied().unwrap_or(1);
    let per = if rows == 0 { 0 } else { t.values.len() / rows };
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(to);
    // (Small magnitudes in exponent form: 2.5918052e-7, not 0.00000025918052.)
    let float = |v: f64, text: String, exponent: String| if v != 0.0 && v.abs() < 1e-4 { exponent } else { text };
    let cell = |v: f64| match t.dtype {
        DType::I64 if names.is_some_and(|n| (v as usize) < n.len() && v >= 0.0) => {
            names.map(|n| n[v as usize].clone()).unwrap_or_default()
        }
        DType::I64 | DType::I32 | DType::I1 | DType::U8 => format!("{}", v as i64),
        DType::F64 => float(v, format!("{v}"), format!("{v:e}")),
        _ => float(v, format!("{}", v as f32), format!("{:e}", v as f32)),
    };
    for (r, row) in t.values.chunks(per.max(1)).enumerate() {
        let name = row_names.map(|n| n.get(r).cloned().unwrap_or_default());
        w.write_record(name.into_iter().chain(row.iter().map(|&v| cell(v))))?;
    }
    w.flush()
}

/// Writes `t` to `path` as its name says ([`FORMATS`]), replacing it
/// whole: a file cut short by a full disk is never left in its place.
pub fn write(t: &Tensor, path: &Path) -> Result<()> {
    write_named(t, None, None, path)
}

/// [`write`], a CSV's integer classes written as `names`, each row after
/// its name in `rows` (a `.npy` holds the values alone).
pub fn write_named(t: &Tensor, names: Option<&[String]>, rows: Option<&[String]>, path: &Path) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let bytes = if name.ends_with(".npy") {
        npy_bytes(t)?
    } else if name.ends_with(".csv") {
        let mut bytes = Vec::new();
        write_csv_named(t, names, rows, &mut bytes).map_err(|e| TrainError::Input(format!("writing the CSV: {e}")))?;
        bytes
    } else {
        return Err(TrainError::Input(format!("{}: predictions are written as {FORMATS}", path.display())));
    };
    crate::codegen::write_atomically(path, &bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Predictions {
        // Two rows of three classes: a tie (the first wins, as torch.argmax)
        // and a clear largest.
        let output = Tensor::new([2, 3], DType::F32, vec![1.0, 3.0, 3.0, -1.0, 0.0, 2.0]);
        Predictions { output, classifies: true, scores: Scores::Logits, class_names: None, row_names: None }
    }

    #[test]
    fn classes_are_the_first_largest() {
        let p = logits();
        assert_eq!(p.default_values(), Values::Class);
        let c = p.values(Values::Class).expect("classes");
        assert_eq!((c.shape.clone(), c.dtype, c.values.clone()), (vec![2], DType::I64, vec![1.0, 2.0]));
    }

    #[test]
    fn probabilities_are_the_softmax() {
        let p = logits().values(Values::Probabilities).expect("probabilities");
        assert_eq!(p.shape, vec![2, 3]);
        let e = [(-1f64).exp(), 0f64.exp(), 2f64.exp()];
        let sum: f64 = e.iter().sum();
        for (got, want) in p.values[3..].iter().zip(e.iter().map(|v| v / sum)) {
            assert!((got - want).abs() < 1e-12, "{got} against {want}");
        }
        assert!((p.values[..3].iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_softmax_output_is_not_taken_again() {
        let output = Tensor::new([1, 3], DType::F32, vec![0.7, 0.2, 0.1]);
        let p = Predictions {
            output: output.clone(),
            classifies: true,
            scores: Scores::Probabilities,
            class_names: None,
            row_names: None,
        };
        assert_eq!(p.values(Values::Probabilities).expect("probabilities").values, output.values);
        let logs = Tensor::new([1, 3], DType::F32, output.values.iter().map(|v| v.ln()).collect());
        let p = Predictions {
            output: logs,
            classifies: true,
            scores: Scores::LogProbabilities,
            class_names: None,
            row_names: None,
        };
        let got = p.values(Values::Probabilities).expect("probabilities").values;
        assert!(got.iter().zip(&output.values).all(|(a, b)| (a - b).abs() < 1e-12), "{got:?}");
        assert_eq!(p.values(Values::Class).expect("classes").values, vec![0.0]);
    }

    #[test]
    fn a_probability_of_zero_is_a_large_finite_loss() {
        let nll = Scores::Probabilities.nll(&[0.0, 1.0], 0);
        assert!(nll.is_finite() && nll > 100.0, "{nll}");
        assert_eq!(Scores::LogProbabilities.nll(&[-2.0, -0.1], 0), 2.0);
        let logits = Scores::Logits.nll(&[0.0, 0.0], 1);
        assert!((logits - 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn a_regression_has_no_classes() {
        let p = Predictions {
            output: Tensor::new([2, 1], DType::F32, vec![0.5, -1.0]),
            classifies: false,
            scores: Scores::Logits,
            class_names: None,
            row_names: None,
        };
        assert_eq!(p.default_values(), Values::Raw);
        let e = p.values(Values::Probabilities).expect_err("no probabilities of a regression");
        assert!(e.to_string().contains("not a classifier"), "{e}");
    }

    #[test]
    fn npy_reads_back_as_written() {
        let classes = Tensor::new([3], DType::I64, vec![0.0, 7.0, 2.0]);
        let bytes = npy_bytes(&classes).expect("npy");
        let npy = npyz::NpyFile::new(&bytes[..]).expect("an .npy file");
        assert_eq!(npy.shape(), &[3]);
        assert_eq!(npy.into_vec::<i64>().expect("int64"), vec![0, 7, 2]);
        let raw = Tensor::new([2, 2], DType::F32, vec![0.25, -1.5, 3.0, 1e-7]);
        let bytes = npy_bytes(&raw).expect("npy");
        let npy = npyz::NpyFile::new(&bytes[..]).expect("an .npy file");
        assert_eq!(npy.shape(), &[2, 2]);
        assert_eq!(npy.into_vec::<f32>().expect("float32"), vec![0.25, -1.5, 3.0, 1e-7]);
    }

    #[test]
    fn csv_has_a_line_per_row() {
        let mut text = Vec::new();
        let raw = Tensor::new([2, 2], DType::F32, vec![0.1, -1.5, 3.0, 2.5e-7]);
        write_csv(&raw, &mut text).expect("csv");
        assert_eq!(String::from_utf8(text).expect("utf-8"), "0.1,-1.5\n3,2.5e-7\n");
        let mut text = Vec::new();
        write_csv(&Tensor::new([3], DType::I64, vec![4.0, 0.0, 9.0]), &mut text).expect("csv");
        assert_eq!(String::from_utf8(text).expect("utf-8"), "4\n0\n9\n");
    }
}
