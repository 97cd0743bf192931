//! Training as a library: a model compiled for a device ([`Trainer`]),
//! data that feeds any model's inputs ([`data`]), the epoch loop with
//! evaluation, checkpoints, resume, metrics, plot, progress and profile
//! ([`run`]), and training that changes the model ([`adapt`]). `aicf
//! train` only parses its arguments and prints what [`run::fit`] reports.

pub mod adapt;
pub mod data;
pub mod eval;
pub mod export;
pub mod predict;
pub mod propose;
pub mod registry;
pub mod report;
pub mod run;
pub mod sample;
pub mod trainer;

pub use trainer::{Compiled, Evaluation, Metrics, Options, Result, TrainError, Trainer, compiler_identity, precompile};

/// Refuses `path` as the file a text output (`what`: a model, a policy, a
/// trace) is written to where it would destroy weights: an existing
/// `.safetensors` file (a checkpoint, an imported model's weights), or an
/// AICF checkpoint by its header whatever its name. Checked before
/// anything runs; an output that is no file yet, or another one, passes.
/// The error is the reason, without the path.
/// Refuses an input that is not a regular file (a device, pipe or
/// socket; a directory or a missing path is left to its reader): models,
/// policies and checkpoints are read twice (hashed, then parsed), data files
/// whole, so a pipe's second read is empty, a FIFO with no writer hangs and
/// a device never ends.
pub fn refuse_special_file(path: &std::path::Path) -> std::result::Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => {
            Err("not a regular file (a device, pipe or socket); it is read from a file".into())
        }
        _ => Ok(()),
    }
}

/// For a message about a non-finite output of a model run in `precision`:
/// under fp16, that its values overflow past 65504 and that another
/// precision scores it (eval and predict run a checkpoint in its run's
/// precision, and blamed its weights or the data); empty otherwise.
pub fn fp16_range_hint(precision: crate::pipeline::Precision) -> String {
    if precision == crate::pipeline::Precision::Fp16 {
        " (it runs in fp16, whose values overflow past 65504: --precision fp32 or bf16 runs it in f32's range)".into()
    } else {
        String::new()
    }
}

/// A learning rate (or another hyperparameter) for a message: as written
/// where it is of an ordinary size, in scientific notation where it is not
/// (`1e-30`, not thirty digits).
pub fn rate_text(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..=1e6).contains(&v.abs()) { format!("{v}") } else { format!("{v:e}") }
}

/// Reads the `hl` model at `path` as text; a binary file (a checkpoint
/// given where the model goes) is named as not a model.
pub fn read_model(path: &std::path::Path) -> Result<String> {
    if path.is_dir() {
        let message = if path.join("manifest.json").is_file() {
            "a compiled artifact (what `aicf compile` writes), not a model: give the .mlir or .onnx model it was \
             compiled from (a Rust program runs an artifact itself: aicf_runtime::open)"
        } else {
            "a directory, not a model file (an hl module's .mlir, or an .onnx)"
        };
        return Err(TrainError::Io { path: path.to_path_buf(), message: message.into() });
    }
    // Read once: MLIR bytecode (`aicf-opt --emit-bytecode`), as mlir-opt
    // reads it, becomes its text with the places it kept (it was "not
    // UTF-8 text"); anything else must be UTF-8 text.
    let bytes = std::fs::read(path).map_err(|e| TrainError::Io { path: path.to_path_buf(), message: e.to_string() })?;
    if bytes.starts_with(b"ML\xefR") {
        return Ok(crate::context::bytecode_text(&bytes, &path.display().to_string())?);
    }
    String::from_utf8(bytes).map_err(|e| {
        // Where the text stops being UTF-8 (a Latin-1 comment in an
        // otherwise good model was refused with no line).
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        TrainError::Io {
            path: path.to_path_buf(),
            message: format!(
                "not a model: the file is not UTF-8 text, as an hl module is, from line {line} (byte {at}; a Latin-1 \
                 comment? a checkpoint, data or another binary file? an ONNX model's name ends in .onnx)"
            ),
        }
    })
}

pub fn refuse_overwriting_weights(path: &std::path::Path, what: &str) -> std::result::Result<(), String> {
    if !path.is_file() {
        return Ok(());
    }
    let named = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    let checkpoint = aicf_runtime::checkpoint::holds_checkpoint(path);
    if named || checkpoint {
        return Err(format!(
            "{what} would overwrite a weights file (a checkpoint or a model's weights); give another output"
        ));
    }
    if checkpoint_model(path) {
        return Err(format!(
            "{what} would overwrite a model of a checkpoint directory (the model its checkpoints hold, which `aicf \
             eval` and --resume read); give another output"
        ));
    }
    Ok(())
}

/// Whether `path` is a checkpoint directory's model (`model.mlir`,
/// `model-v<k>.mlir`, as `aicf train --checkpoint-dir` writes them) in a
/// directory that holds a checkpoint.
fn checkpoint_model(path: &std::path::Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    let version = name.strip_prefix("model-v").and_then(|v| v.strip_suffix(".mlir"));
    if name != "model.mlir" && !version.is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n == "last.safetensors" || n == "prev.safetensors" || version_checkpoint(&n)
        })
    })
}

/// Whether `name` is a model version's checkpoint (`v<k>.safetensors`) in a
/// checkpoint directory.
pub(crate) fn version_checkpoint(name: &str) -> bool {
    let v = name.strip_prefix('v').and_then(|v| v.strip_suffix(".safetensors"));
    v.is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether two paths name one file: equal, or equal once resolved (the
/// file's own path where it exists, else its directory's, symbolic links
/// and `..` followed).
pub fn same_path(a: &std::path::Path, b: &std::path::Path) -> bool {
    let resolve = |p: &std::path::Path| -> Option<std::path::PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        Some(parent.canonicalize().ok()?.join(p.file_name()?))
    };
    a == b || resolve(a).is_some_and(|x| Some(x) == resolve(b))
}

/// Refuses `path` as the file a trace (`what`: `--profile`, `--trace`) is
/// written to where it holds anything but an earlier trace: a model, data,
/// metrics or a checkpoint given there by mistake would be lost. The
/// error is the reason, without the path.
pub fn refuse_overwriting_all_but_traces(path: &std::path::Path, what: &str) -> std::result::Result<(), String> {
    if !path.is_file() || report::is_trace(path) {
        return Ok(());
    }
    Err(format!("{what} would overwrite this file, which holds no trace; give a new file (or remove this one)"))
}

#[cfg(test)]
mod rate_text_tests {
    #[test]
    fn rates_of_any_size_print_short() {
        assert_eq!(super::rate_text(3e-3), "0.003");
        assert_eq!(super::rate_text(0.0), "0");
        assert_eq!(super::rate_text(1e-30), "1e-30");
        assert_eq!(super::rate_text(1e30), "1e30");
        assert_eq!(super::rate_text(f64::NAN), "NaN");
    }
}
