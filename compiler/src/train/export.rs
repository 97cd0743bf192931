//! `aicf export`: a trained model as an ONNX file ([`crate::export`]), from
//! a checkpoint of `aicf train` (its model version and parameters, and the
//! way its run read the features) or from an imported model's own weights.

use super::data::{STANDARDIZE_KEY, Standardization};
use super::eval::{model_of_checkpoint, recorded_scale};
use super::predict::model_with_own_weights;
use super::run::Report;
use super::{Result, TrainError};
use crate::export::{ExportOptions, Exported, Preprocess, export_onnx};
use std::collections::BTreeMap;
use std::path::Path;

/// What `aicf export` was asked.
pub struct ExportRequest<'a> {
    /// The model file (an `hl` module; an ONNX model imported first).
    pub model: &'a Path,
    pub checkpoint: Option<&'a Path>,
    /// The file written.
    pub output: &'a Path,
    /// A fixed batch of this size (else a dynamic one where the model
    /// allows it).
    pub batch: Option<usize>,
    /// The graph takes features as the model saw them, not as the data
    /// file holds them (no scaling or standardization first).
    pub raw_features: bool,
    /// Where a checkpoint's other model version is written.
    pub out: &'a Path,
    /// The model as the user named it (an ONNX file, before its import),
    /// for the file's `doc_string`.
    pub source: &'a Path,
    /// The graph outputs' names of an imported model, for @forward's.
    pub output_names: Vec<String>,
}

/// Refuses an output that is not a `.onnx` file (checked by the CLI too,
/// before it makes the file's directory).
pub fn onnx_file(output: &Path) -> std::result::Result<(), String> {
    if output.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx")) {
        Ok(())
    } else {
        Err(format!("-o {}: an ONNX model is written to a .onnx file", output.display()))
    }
}

/// Exports the model, writes it to `request.output` (whole or not at all),
/// and returns what was written.
pub fn export(request: &ExportRequest, report: &mut dyn Report) -> Result<Exported> {
    let output = request.output;
    onnx_file(output).map_err(TrainError::Input)?;
    let (name, source, meta) = match request.checkpoint {
        Some(c) => {
            let (name, source, meta, _) =
                model_of_checkpoint(request.model, c, request.out, "exporting", false, report)?;
            (name, source, meta)
        }
        None => {
            let (name, source) = model_with_own_weights(request.model, "export")?;
            (name, source, BTreeMap::new())
        }
    };
    let weights = match request.checkpoint {
        Some(c) => aicf_runtime::checkpoint::load(c)?.0,
        None => {
            let w = crate::weights::declared_in_text(&source)
                .ok_or_else(|| TrainError::Input(format!("{name}: the model holds no weights of its own")))?;
            let file = crate::weights::resolve(&w, &name)?;
            aicf_runtime::checkpoint::load(&file)?.0
        }
    };
    let preprocess = match (request.checkpoint, request.raw_features) {
        (Some(c), false) => Preprocess {
            scale: recorded_scale(&meta, c)?,
            standardize: match meta.get(STANDARDIZE_KEY) {
                Some(text) => {
                    let s: Standardization = serde_json::from_str(text).map_err(|e| TrainError::Io {
                        path: c.to_path_buf(),
                        message: format!("its {STANDARDIZE_KEY} does not read ({e})"),
                    })?;
                    Some((s.mean, s.std))
                }
                None => None,
            },
        },
        _ => Preprocess::default(),
    };
    // Standardized targets: the output is read back in the data's units.
    let postprocess = match meta.get(super::data::TARGETS_KEY) {
        Some(text) => {
            let s: Standardization = serde_json::from_str(text).map_err(|e| TrainError::Io {
                path: request.checkpoint.map(Path::to_path_buf).unwrap_or_default(),
                message: format!("its {} does not read ({e})", super::data::TARGETS_KEY),
            })?;
            report.note(
                "the checkpoint's run standardized its targets: the graph's output is read back in the data's units \
                 (times their deviation, plus their mean), as `aicf predict` writes it",
            );
            Some((s.mean, s.std))
        }
        None => None,
    };
    let source = match request.batch {
        Some(b) => crate::pipeline::rebatched_source(&source, &name, b)?,
        None => source,
    };
    let shown = request.source.display();
    let doc = match request.checkpoint {
        Some(c) => format!("{shown} with the parameters of {}, exported by aicf", c.display()),
        None => format!("{shown} with its own weights, exported by aicf"),
    };
    let stem = output.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let options = ExportOptions {
        weights: &weights,
        preprocess,
        dynamic_batch: request.batch.is_none(),
        output_names: request.output_names.clone(),
        postprocess,
        graph_name: stem,
        doc,
    };
    if !options.preprocess.is_empty() {
        let how = match (&options.preprocess.standardize, options.preprocess.scale.filter(|&s| s != 1.0)) {
            (Some(_), _) => "standardizes its input by the training rows' means and deviations".to_string(),
            (None, Some(s)) => format!("divides its input by {s}"),
            (None, None) => String::new(),
        };
        report.note(&format!(
            "the graph {how} first, as the checkpoint's run read its data: it takes features at the scale the data \
             file holds them (--raw-features: as the model saw them)"
        ));
    }
    let mut exported = export_onnx(&source, &name, &options).map_err(|e| TrainError::Input(e.to_string()))?;
    // A classifier whose labels were names carries them (the model's
    // metadata, as skl2onnx's `classlabels`: its output's index i is
    // class_names[i]).
    if let Some(classes) = meta.get(super::data::CLASSES_KEY) {
        exported.model.metadata_props.push(aicf_onnx::proto::StringStringEntryProto {
            key: Some("class_names".into()),
            value: Some(classes.clone()),
        });
        report.note(&format!(
            "the output's classes are named (the model's metadata class_names, output index i is name i): {classes}"
        ));
    }
    // An image folder's run read pixels / 255: the graph takes them so.
    if let Some(images) = meta.get(super::data::images::IMAGES_KEY) {
        exported
            .model
            .metadata_props
            .push(aicf_onnx::proto::StringStringEntryProto { key: Some("images".into()), value: Some(images.clone()) });
        report.note(&format!("the input is images as the run read them: {images}"));
    }
    let bytes = exported.encode().map_err(|e| TrainError::Input(e.to_string()))?;
    crate::codegen::write_atomically(output, &bytes)?;
    Ok(exported)
}
