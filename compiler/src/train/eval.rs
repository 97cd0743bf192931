//! Scoring a checkpoint on a data set (`aicf eval`): accuracy and loss
//! over what the checkpoint's run held out of its training data, or over
//! all of other data.

use super::data::{DataOptions, Dataset, Role, Signature, Split};
use super::run::{Report, create_dir};
use super::{Options, TrainError, Trainer};
use aicf_runtime::Tensor;
use std::path::{Path, PathBuf};

/// The data files' names, for messages.
pub(crate) fn data_name(data: &[PathBuf]) -> String {
    data.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

type Result<T, E = TrainError> = std::result::Result<T, E>;

/// Accuracy (and loss) of a checkpoint on a data set: what its run held out
/// of the data it trained on, or every example of other data.
pub struct Scored {
    pub accuracy: f64,
    pub loss: f64,
    pub unit: String,
    pub examples: usize,
    /// What the examples are: `held-out rows` or `held-out windows` of the
    /// data the checkpoint trained on, `rows` or `windows` of other data.
    pub what: &'static str,
    pub epoch: Option<String>,
}

/// Scores `checkpoint` of the model in `model` on `data`; of a text's
/// held-out windows, at most `eval_windows` spread over it (every one when
/// `None`; the run's own figures sampled its `--eval-windows`). `keep_batch`:
/// `model` is scored at its own batch size where the checkpoint holds it at
/// another (`aicf eval --batch N`), else the checkpoint's model is.
pub fn evaluate_checkpoint(
    model: &Path,
    options: &Options,
    data: &[PathBuf],
    checkpoint: Option<&Path>,
    out: &Path,
    eval_windows: Option<usize>,
    keep_batch: bool,
    report: &mut dyn Report,
) -> Result<Scored> {
    if eval_windows == Some(0) {
        return Err(TrainError::Input("--eval-windows 0: nothing to score".into()));
    }
    // Windows are a text's: a table's rows are scored every one. Refused
    // before anything is read or written.
    if let (Some(k), Some(rows)) = (eval_windows, data.first().filter(|p| super::data::is_rows(p))) {
        return Err(TrainError::Input(format!(
            "--eval-windows {k} samples a text's held-out windows; {} is {}, whose examples are scored every one",
            rows.display(),
            if super::data::is_table(rows) { "a table" } else { "arrays" }
        )));
    }
    // Without a checkpoint, a model with weights of its own (an imported
    // one's) is scored on all of the data, read as the file holds it.
    let (name, source, meta, other_batch) = match checkpoint {
        Some(c) => model_of_checkpoint(model, c, out, "scoring", keep_batch, report)?,
        None => {
            let (name, source) = super::predict::model_with_own_weights(model, "score")?;
            (name, source, std::collections::BTreeMap::new(), false)
        }
    };
    // What a figure that is not a number is of, for its message.
    let scored = match checkpoint {
        Some(c) => format!("{}: the checkpoint's model", c.display()),
        None => format!("{}: the model", model.display()),
    };
    let sig = Signature::of_source(&source, &name)?;
    // A classifier is scored by accuracy and the cross-entropy of its
    // logits; a regression by its @loss's mean over the examples (as
    // training's held-out loss), or, where @loss has dropout in it or a
    // batch is filled, by the mean squared error of @forward's output.
    let classifies = sig.classifies();
    // (Without one, or a checkpoint that records no scale, a table is read
    // as the file holds it, as predict reads it: not divided by its own
    // largest, as a training run's is.)
    let scale = Some(table_scale(&meta, checkpoint, data, report)?);
    let val_split: f64 = meta.get("val_split").and_then(|v| v.parse().ok()).unwrap_or(0.2);
    let seed: u64 = meta.get("seed").and_then(|v| v.parse().ok()).unwrap_or(0);
    // The data the checkpoint trained on is scored on what that run held
    // out (the same rows: its seed and fraction; a text's end); other
    // data, all of it. A table's features take the scale it trained with;
    // every held-out window of a text is scored, not a sample. A text is
    // read with the vocabulary it trained with: ids by the characters of
    // this file would mean other characters to the model.
    let mut trained_on = match meta.get("data") {
        Some(d) => super::run::records_data(d, data)?,
        None => false,
    };
    let text = data.first().is_some_and(|p| super::data::is_text(p));
    let options_for = |held: bool| DataOptions {
        seed,
        val_split: if held { val_split } else { 0.0 },
        feature_scale: scale,
        eval_windows: eval_windows.unwrap_or(usize::MAX),
        vocabulary: meta.get("vocabulary").cloned(),
        feature_stats: meta.get(super::data::STANDARDIZE_KEY).cloned(),
        columns: meta.get(super::data::COLUMNS_KEY).cloned(),
        class_names: meta.get(super::data::CLASSES_KEY).cloned(),
        target_stats: meta.get(super::data::TARGETS_KEY).cloned(),
        label: meta.get(super::data::LABEL_KEY).cloned(),
        whole_text: text && !held,
        ..DataOptions::default()
    };
    let mut dataset = Dataset::load(data, &sig, &options_for(trained_on && val_split > 0.0))?;
    // Another file of the same rows (the table saved again with other line
    // endings, spacing or number formatting) is the data the run trained
    // on: its values are (every training example was scored as held out,
    // with no word).
    if !trained_on
        && !text
        && let (Some(recorded), Some(now)) =
            (meta.get(super::data::VALUES_KEY), dataset.metadata.get(super::data::VALUES_KEY))
        && recorded == now
    {
        trained_on = true;
        report.note(&format!(
            "{}: the same rows as the data the checkpoint's run trained on (another file of them): scored as that \
             data",
            data_name(data)
        ));
        if val_split > 0.0 {
            dataset = Dataset::load(data, &sig, &options_for(true))?;
        }
    }
    // A file of the name the run trained on whose bytes differ (a copy
    // edited since, one line appended) is other data: scored whole,
    // training rows included, where a user expected the held-out figure.
    if !trained_on && let Some(recorded) = meta.get("data") {
        // (Whole names, but for a .gz: digits.csv is digits.csv.gz
        // decompressed; digits.test.csv is no digits.train.csv.)
        let stem = |n: &str| n.strip_suffix(".gz").unwrap_or(n).to_string();
        let names: Vec<String> =
            data.iter().filter_map(|p| p.file_name()).map(|n| stem(&n.to_string_lossy())).collect();
        if names == super::run::data_names(recorded).iter().map(|n| stem(n)).collect::<Vec<_>>() {
            report.note(&format!(
                "{}: named as the data the checkpoint's run trained on, but its {} differ: scored as other data, all \
                 of it (the rows it trained on, if it holds them, too); the held-out figures need the data as it \
                 trained",
                data_name(data),
                if text { "bytes" } else { "rows" }
            ));
        }
    }
    let held = trained_on && val_split > 0.0;
    if trained_on && !held {
        report.note(&format!(
            "{}: the checkpoint's run held none of it out (--val-split 0): every example is scored, the trained ones \
             included",
            data_name(data)
        ));
    }
    // Other data's features are read as the run read its table: divided by
    // its scale (said: arrays already scaled were divided again, unsaid;
    // once they read, not before an error in them).
    if let Some(s) =
        scale.filter(|&s| !trained_on && !text && s != 1.0 && !meta.contains_key(super::data::STANDARDIZE_KEY))
        // (An image folder's pixels are read as 0 to 1, not divided so.)
        && !data.iter().any(|p| super::data::images::is_images(p))
    {
        report.note(&format!(
            "{}: the features are divided by {s}, the scale the checkpoint's run read its table with (as the model \
             trained on them): give them as that table held them",
            data_name(data)
        ));
    }
    // What training would have said of this data, said here too: a score
    // on it may mean little.
    if !trained_on
        && let Some(note) =
            super::data::other_magnitude(&data_name(data), meta.get(super::data::INPUT_MAGNITUDE_KEY), &dataset)
    {
        report.note(&note);
    }
    if let Some(outlier) = &dataset.outlier {
        report.note(&format!("{outlier}: the model's figures on it may mean little; check the data"));
    }
    for note in &dataset.notes {
        report.note(note);
    }
    if text && held && eval_windows.is_none() {
        let sampled = meta.get("eval_windows").and_then(|v| v.parse::<usize>().ok());
        if let Some(k) = sampled.filter(|&k| k < dataset.held_len()) {
            report.note(&format!(
                "every one of the {} held-out windows is scored; the run's held-out figures sampled {k} of them (its \
                 --eval-windows): --eval-windows {k} scores those",
                dataset.held_len()
            ));
        }
    }
    let mut trainer = match checkpoint {
        Some(c) => checkpoint_trainer(&source, &name, options, &meta, c, out, other_batch, report)?,
        None => super::predict::own_weights_trainer(&source, &name, options, out)?,
    };
    let batch = sig.batch();
    // A text not trained on is held out whole.
    let split = if held || text { Split::HeldOut } else { Split::Train };
    let n = if held || text { dataset.held_len() } else { dataset.train_len() };
    let what = match (text, held) {
        (true, true) => "held-out windows",
        (true, false) => "windows",
        (false, true) => "held-out rows",
        (false, false) => "rows",
    };
    if n == 0 {
        // (A window is the model's context and one token more.)
        let what = if text {
            format!(
                "the text holds no whole window ({} tokens) to score",
                sig.inputs[0].shape.get(1).map_or(0, |c| c + 1)
            )
        } else {
            "no examples".to_string()
        };
        return Err(TrainError::Input(format!("{}: {what}: nothing to score", data_name(data))));
    }
    // A model whose ops fix its batch runs no smaller last batch: that one
    // is filled to the batch with repeats of its first example, whose
    // predictions are not counted (each example's prediction is its own).
    let fill = last_batch(&mut trainer, n, batch)?;
    if fill {
        report.note(&format!(
            "{name}: the model runs at a batch of {batch} only (an op fixes it): the last {} {what} are scored in a \
             batch filled with repeats, whose predictions are not counted",
            n % batch
        ));
    }
    for c in trainer.compiled() {
        report.compiled(Path::new(&name), c);
    }
    let (mut correct, mut targets, mut nll) = (0usize, 0usize, 0.0);
    // A model with dropout is scored by its @loss without the dropout
    // (`@__aicf_loss_eval`), as its run's held-out figures were; by @forward's
    // output where a batch is filled with repeats (whose loss would count
    // them) or the artifact has no `@__aicf_loss_eval`.
    let no_eval_loss = sig.takes_rng() && !trainer.has_loss_eval();
    let by_output = no_eval_loss || fill;
    // A classifier whose @loss is not a mean cross-entropy (a sum, or one
    // with a penalty) is scored by its @loss, as its run reported it (one
    // that sets state, a batch norm's, by its logits, as its run did).
    let by_model_loss = classifies && !sig.mean_cross_entropy && !sig.sets_state && !fill && !no_eval_loss;
    let (mut loss_sum, mut loss_rows, mut squared, mut elements) = (0.0, 0usize, 0.0, 0usize);
    each_batch(n, batch, fill, "scoring", |ids, counted| {
        let fed = dataset.batch(split, ids);
        let data_in: Vec<&Tensor> =
            fed.iter().zip(sig.fed()).filter(|(_, i)| i.role == Role::Data).map(|(t, _)| t).collect();
        if !classifies {
            if by_output {
                let out = trainer.predict(&data_in)?;
                let (Some(y), Some(target)) = (out.first(), fed.last()) else { return Ok(()) };
                if y.values.len() != target.values.len() {
                    return Err(TrainError::Input(format!(
                        "{name}: @forward's output {:?} and the target {:?} differ in size: no squared error to score",
                        y.shape, target.shape
                    )));
                }
                let per = y.values.len() / ids.len();
                let pairs = y.values.iter().zip(&target.values).take(per * counted);
                squared += pairs.map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
                elements += per * counted;
            } else {
                loss_sum += super::run::held_out_loss(&mut trainer, &sig, &fed)? * counted as f64;
                loss_rows += counted;
            }
            return Ok(());
        }
        if by_model_loss {
            loss_sum += super::run::held_out_loss(&mut trainer, &sig, &fed)? * counted as f64;
            loss_rows += counted;
        }
        let logits = trainer.predict(&data_in)?;
        let (Some(logits), Some(labels)) = (logits.first(), fed.last()) else { return Ok(()) };
        if let Some(v) = logits.values.iter().find(|v| !v.is_finite()) {
            return Err(TrainError::Input(format!(
                "{scored} gives a logit of {v} on {}{}",
                data_name(data),
                crate::train::fp16_range_hint(trainer.options().precision)
            )));
        }
        let classes = logits.shape.last().copied().unwrap_or(1).max(1);
        // Targets per example (a window's tokens): the filled ones' left out.
        let scored = labels.values.len() / ids.len() * counted;
        // A label the loss ignores counts for nothing.
        let rows = logits.values.chunks(classes).zip(&labels.values).take(scored);
        for (row, &label) in rows.filter(|(_, l)| sig.counts_label(**l)) {
            let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |b| b.0);
            correct += (best as f64 == label) as usize;
            targets += 1;
            // (Of the logits, or of what a softmax at @forward's end made
            // of them: its probabilities taken again by a softmax were
            // scored 1.69 nats where they held 0.48.)
            nll += sig.scores.nll(row, label as usize);
        }
        Ok(())
    })?;
    if !classifies {
        let (loss, unit) = if by_output {
            (squared / elements.max(1) as f64, "(mean squared error of @forward's output)")
        } else {
            (loss_sum / loss_rows.max(1) as f64, "(the model's @loss)")
        };
        if !loss.is_finite() {
            return Err(TrainError::Input(format!(
                "{scored} gives a loss of {loss} on {}{}",
                data_name(data),
                crate::train::fp16_range_hint(trainer.options().precision)
            )));
        }
        // Standardized targets (`--standardize-targets`): the loss is of
        // them; a one-target squared error is also said in the file's units.
        let unit = match meta
            .get(super::data::TARGETS_KEY)
            .and_then(|t| serde_json::from_str::<super::data::Standardization>(t).ok())
        {
            Some(stats) if stats.std.len() == 1 => format!(
                "{} of the standardized targets; as a mean squared error, RMSE {:.4e} in the file's units)",
                unit.trim_end_matches(')'),
                loss.max(0.0).sqrt() * stats.std[0]
            ),
            Some(_) => format!("{} of the standardized targets)", unit.trim_end_matches(')')),
            None => unit.into(),
        };
        return Ok(Scored { accuracy: f64::NAN, loss, unit, examples: n, what, epoch: epoch_of(&meta) });
    }
    // (Where the reported figure is the model's @loss, that one.)
    let reported = if by_model_loss { loss_sum } else { nll };
    if !reported.is_finite() {
        return Err(TrainError::Input(format!(
            "{scored} gives a loss of {reported} on {}: a parameter of it is not finite, or the data is out of its \
             range{}",
            data_name(data),
            crate::train::fp16_range_hint(trainer.options().precision)
        )));
    }
    let (loss, unit) = if by_model_loss {
        (loss_sum / loss_rows.max(1) as f64, "(the model's @loss)".to_string())
    } else {
        (nll / targets.max(1) as f64, dataset.loss_unit().to_string())
    };
    Ok(Scored {
        accuracy: correct as f64 / targets.max(1) as f64,
        loss,
        unit,
        examples: n,
        what,
        epoch: epoch_of(&meta),
    })
}

/// The checkpoint's epoch, or what a policy's before-rewrite snapshot is.
fn epoch_of(meta: &std::collections::BTreeMap<String, String>) -> Option<String> {
    // (One saved inside its epoch, at a stop or a spent budget, says so.)
    let inside = meta.get("epoch_rows_done").map_or(String::new(), |rows| format!(", up to {rows} of its examples"));
    meta.get("epoch").map(|e| format!("{e}{inside}")).or_else(|| {
        let step = meta.get("step").map_or(String::new(), |s| format!(" at step {s}"));
        meta.get("rewrite").map(|n| format!("none: the model before rewrite {n}{step}"))
    })
}

/// Compiles `trainer`'s model for the last, smaller batch of `n` examples
/// (`n % batch` of them); where an op fixes the batch, returns true: that
/// batch is then filled to `batch` with repeats of its first example, whose
/// outputs are not counted ([`each_batch`]).
pub(crate) fn last_batch(trainer: &mut Trainer, n: usize, batch: usize) -> Result<bool> {
    if n % batch == 0 {
        return Ok(false);
    }
    match trainer.add_batch(n % batch) {
        Ok(()) => Ok(false),
        Err(TrainError::FixedBatch { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Calls `each` with the examples of every batch of `0..n` in order (the
/// last filled to `batch` with repeats of its first where `fill`) and how
/// many of them count, under a progress bar saying `doing` (on a terminal:
/// none where stderr is a file or a pipe).
pub(crate) fn each_batch(
    n: usize,
    batch: usize,
    fill: bool,
    doing: &str,
    mut each: impl FnMut(&[usize], usize) -> Result<()>,
) -> Result<()> {
    let bar = indicatif::ProgressBar::new(n.div_ceil(batch.max(1)) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} batches  {{per_sec}}  ETA {{eta}}  {doing}"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(batch.max(1)) {
        bar.inc(1);
        let mut rows = chunk.to_vec();
        if fill {
            rows.resize(batch, chunk[0]);
        }
        each(&rows, chunk.len())?;
    }
    bar.finish_and_clear();
    Ok(())
}

/// The scale a table's features are divided by to score or predict with
/// `checkpoint` (of `meta`): the one its run divided by, or 1 (the values
/// as the file holds them) without a checkpoint, or for one that records
/// none (a `Trainer`'s or the runtime's `save_checkpoint`), said so where
/// `data` is a table: `aicf eval` read such a table divided by its own
/// largest, `aicf predict` as it is, and the two disagreed.
pub(crate) fn table_scale(
    meta: &std::collections::BTreeMap<String, String>,
    checkpoint: Option<&Path>,
    data: &[PathBuf],
    report: &mut dyn Report,
) -> Result<f64> {
    let Some(c) = checkpoint else { return Ok(1.0) };
    if let Some(s) = recorded_scale(meta, c)? {
        return Ok(s);
    }
    if let Some(table) = data.iter().find(|p| super::data::is_table(p)) {
        report.note(&format!(
            "{} records no feature_scale (a checkpoint of `aicf train` records the number its table's features \
             were divided by): {}'s features are read as the file holds them; a program that saves its own \
             checkpoint records the scale it divided by as the metadata key feature_scale",
            c.display(),
            table.display()
        ));
    }
    Ok(1.0)
}

/// The scale `checkpoint`'s run divided its table's features by (its
/// record `meta`'s `feature_scale`), where it records one.
pub(crate) fn recorded_scale(
    meta: &std::collections::BTreeMap<String, String>,
    checkpoint: &Path,
) -> Result<Option<f64>> {
    match meta.get("feature_scale") {
        Some(v) => match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => Ok(Some(s)),
            _ => Err(TrainError::Io {
                path: checkpoint.to_path_buf(),
                message: format!("its feature_scale {v:?} is not a positive number"),
            }),
        },
        None => Ok(None),
    }
}

/// The trainer that scores or samples `checkpoint` (of `meta`), compiled
/// in `out`: `options`, with the optimizer the checkpoint's run trained
/// with (its state is the checkpoint's to load; a score or a sample does
/// not depend on it: an SGD checkpoint failed to load into an Adam step),
/// the checkpoint loaded. It runs in `options.precision`; where that is
/// not the precision the checkpoint trained in (whose figures its run
/// reported), a note says so (`aicf eval` and `sample` take the
/// checkpoint's unless `--precision` is given: [`trained_precision`]).
pub(crate) fn checkpoint_trainer(
    source: &str,
    name: &str,
    options: &Options,
    meta: &std::collections::BTreeMap<String, String>,
    checkpoint: &Path,
    out: &Path,
    other_batch: bool,
    report: &mut dyn Report,
) -> Result<Trainer> {
    if let Some(trained) = meta.get("precision")
        && *trained != options.precision.name()
    {
        report.note(&format!(
            "{} trained in {trained}; this runs it in {}: its run's own figures came from {trained}",
            checkpoint.display(),
            options.precision.name()
        ));
    }
    let mut options = Options { cache_dir: out.to_path_buf(), ..options.clone() };
    if let Some(optimizer) = meta.get("optimizer") {
        options.optimizer = optimizer.clone();
        options.momentum = match meta.get("momentum").map(|m| m.parse::<f64>()) {
            Some(Ok(m)) => m,
            Some(Err(_)) => {
                return Err(TrainError::Io {
                    path: checkpoint.to_path_buf(),
                    message: format!("its record's momentum {:?} is not a number", meta["momentum"]),
                });
            }
            None => 0.0,
        };
        // Adam's betas and eps (and SGD's lack of them) as the step
        // compiles them; the groups change no state a score reads.
        if optimizer == "sgd" {
            options.betas = Options::default().betas;
            options.eps = Options::default().eps;
            options.nesterov = false;
        } else {
            options.momentum = 0.0;
            options.nesterov = false;
        }
        options.decay_1d = true;
    }
    create_dir(out)?;
    let mut trainer = Trainer::from_source(source, name, options)?;
    // The checkpoint's model at another batch size (`aicf eval --batch`):
    // its tensors by name, as a resume loads them. (The optimizer's state
    // scores nothing: a checkpoint stripped to its weights evaluates.)
    trainer.load_checkpoint_of(checkpoint, !other_batch, false)?;
    Ok(trainer)
}

/// The model versions a run wrote (`model-v<k>.mlir`) in the folders of
/// `files`, with their IR hashes.
fn written_versions(files: &[&Path], name: &str) -> Vec<(std::path::PathBuf, String)> {
    let mut folders: Vec<std::path::PathBuf> = Vec::new();
    for f in files {
        let folder = f.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    let mut found = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        let mut paths: Vec<std::path::PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("model-v") && n.ends_with(".mlir"))
            })
            .collect();
        paths.sort();
        for p in paths {
            if let Ok(text) = std::fs::read_to_string(&p)
                && let Ok(hash) = crate::pipeline::model_hash(&text, name)
            {
                found.push((p, hash));
            }
        }
    }
    found
}

/// The precision `checkpoint`'s run trained in (`None` where its record
/// has none): what `aicf eval` and `sample` run it in unless asked for
/// another.
pub fn trained_precision(checkpoint: &Path) -> Result<Option<crate::pipeline::Precision>> {
    let meta = aicf_runtime::checkpoint::read_metadata(checkpoint)?;
    meta.get("precision")
        .map(|p| {
            crate::pipeline::Precision::parse(p).map_err(|e| TrainError::Io {
                path: checkpoint.to_path_buf(),
                message: format!("its record's precision: {e} (give --precision P to resume or score it)"),
            })
        })
        .transpose()
}

/// The loss a model's `@loss` takes (its first `hl.cross_entropy`,
/// `hl.softmax_cross_entropy` or `hl.mse_loss`, as `--loss` names it), or
/// `the graph's own loss` where it has none of them.
pub fn loss_kind(text: &str) -> Option<&'static str> {
    let body = &text[text.find("func.func @loss")?..];
    let body = body.find("\n  func.func").or(body.find("\nfunc.func")).map_or(body, |end| &body[..end]);
    [("hl.mse_loss", "mse"), ("hl.cross_entropy", "cross_entropy"), ("hl.softmax_cross_entropy", "cross_entropy")]
        .iter()
        .filter_map(|(op, kind)| body.find(op).map(|at| (at, *kind)))
        .min()
        .map(|(_, kind)| kind)
        .or(Some("the graph's own loss"))
}

/// The model a checkpoint of `model` holds, as (name, source), and the
/// checkpoint's metadata. A checkpoint of another version of the model (an
/// adaptive run's grown one) holds its own IR: that model is the one
/// `doing` (scoring, sampling) uses, as `--resume-from` trains it, and a
/// note says so. The IR goes to `out` for the diagnostics that name it.
///
/// `keep_batch`: where the checkpoint holds this model at another batch
/// size, `model` runs as given (its parameters are the same; `aicf eval
/// --batch N` asks for that batch, and was answered with the checkpoint's),
/// and the last value returned says so (its tensors load by name).
pub(crate) fn model_of_checkpoint(
    model: &Path,
    checkpoint: &Path,
    out: &Path,
    doing: &str,
    keep_batch: bool,
    report: &mut dyn Report,
) -> Result<(String, String, std::collections::BTreeMap<String, String>, bool)> {
    let mut name = model.display().to_string();
    let mut source = super::read_model(model)?;
    let meta = aicf_runtime::checkpoint::read_metadata(checkpoint)?;
    let own = crate::pipeline::identity_source(&source, &name)?;
    if let Some(ir) = meta.get(super::run::IR_KEY)
        && crate::pipeline::identity_source(ir, &checkpoint.display().to_string())? != own
    {
        let batch = crate::pipeline::batch_of_same_model(&source, ir, &name);
        if keep_batch && batch.is_some() {
            // The model given, at its batch; the checkpoint's tensors by
            // name.
            return Ok((name, source, meta, true));
        }
        // A version of the model given (a grown one, or an earlier one of
        // the same run): its run started from this model (the checkpoint's
        // record), or passed through it (a version's IR), or the run's
        // versions written beside the checkpoint or the model (`model-v<k>
        // .mlir`) hold both. Another model's checkpoint is refused, as
        // `aicf train --resume-from` refuses it: it was scored as that
        // model, under the command that named this one.
        if batch.is_none()
            && let Some(started) = meta.get("model")
        {
            let given = crate::pipeline::model_hash(&source, &name)?;
            let in_versions = meta
                .get(super::run::VERSIONS_KEY)
                .and_then(|v| serde_json::from_str::<std::collections::BTreeMap<String, usize>>(v).ok())
                .is_some_and(|versions| versions.contains_key(&aicf_runtime::artifact::ir_hash(&source)));
            let written = written_versions(&[checkpoint, model], &name);
            let first = written.iter().find(|(_, h)| h == started).map(|(p, _)| p.clone());
            let of_run = first.is_some() && written.iter().any(|(_, h)| *h == given);
            if *started != given && !in_versions && !of_run {
                // The same network under another loss (an ONNX model
                // imported with another --loss) is said as such.
                let other_loss = match (loss_kind(ir), loss_kind(&source)) {
                    (Some(trained), Some(now)) if trained != now => format!(
                        "; its run trained it with {trained} where this is {now} (an ONNX model: give the --loss it \
                         was trained with)"
                    ),
                    _ => String::new(),
                };
                return Err(TrainError::Io {
                    path: checkpoint.to_path_buf(),
                    message: format!(
                        "the checkpoint is of another model (its run started from IR hash {started}, {name}'s is \
                         {given}){other_loss}: give the model its run trained{}",
                        first.map_or(String::new(), |f| format!(" ({} is its first)", f.display()))
                    ),
                });
            }
        }
        if keep_batch {
            // (`--batch` retargets the model file given, not the grown one
            // the checkpoint holds.)
            report.note(&format!(
                "--batch retargets the model file given, and {} holds another version of it (a grown one): scored \
                 at that version's own batch",
                checkpoint.display()
            ));
        }
        create_dir(out)?;
        let file = out.join("checkpoint-model.mlir");
        if super::same_path(&file, model) {
            // Writing the checkpoint's model there would replace the model
            // file the user gave (an earlier run's note named that path).
            return Err(TrainError::Io {
                path: file,
                message: format!(
                    "is MODEL, the model file given; {doing} the other model the checkpoint holds would write that \
                     model here, over it: give another --out"
                ),
            });
        }
        crate::codegen::write_atomically(&file, ir.as_bytes())?;
        crate::weights::carry(ir, model, &file)?;
        let what = match batch {
            Some(batch) => format!("{name} at {batch} rows per batch"),
            None => format!("another version of {name} (a grown one, or an earlier one of its run)"),
        };
        report.note(&format!(
            "{} holds {what}: {doing} the model it holds, written to {}",
            checkpoint.display(),
            file.display()
        ));
        name = file.display().to_string();
        source = ir.clone();
    }
    Ok((name, source, meta, false))
}
