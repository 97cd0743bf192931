//! Parameters whose initial value is data (`init <data>`): an imported
//! model's trained weights.
//!
//! The module names the file that holds them in its `hl.weights`
//! attribute, `{file = "model.weights.safetensors", hash = "..."}`: the
//! file is a safetensors file (f32 tensors by parameter name) relative to
//! the model's own file, as ONNX's external data is, and `hash` is the
//! hash of its bytes. The hash is part of the module's canonical text, so
//! the IR hash that checkpoints and cached artifacts are keyed by changes
//! with the weights; a file that no longer matches is refused. A compiled
//! artifact carries a copy of the file (`weights.safetensors`, hash-checked
//! like its kernels), so it runs without the model's directory.

use crate::ir::{self, attr_text, op_name, ops_of};
use crate::{CompileError, Result};
use aicf_runtime::artifact::{Manifest, file_hash};
use melior::ir::Module;
use std::path::{Path, PathBuf};

/// The name of the copy inside an artifact directory.
pub const ARTIFACT_FILE: &str = "weights.safetensors";

/// What a module's `hl.weights` attribute says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsRef {
    pub file: String,
    pub hash: String,
}

impl WeightsRef {
    /// The attribute's text, as it is written on the module.
    pub fn attribute(&self) -> String {
        format!("{{file = {:?}, hash = {:?}}}", self.file, self.hash)
    }
}

/// The module's `hl.weights`, if it has one; a module with `init <data>`
/// parameters and no (or an unreadable) `hl.weights` is an error.
pub fn declared(module: &Module<'_>, name: &str) -> Result<Option<WeightsRef>> {
    let raw = module.as_operation().to_raw();
    let text = attr_text(raw, "hl.weights");
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(raw, 0)) };
    let data_param = ops_of(body)
        .into_iter()
        .filter(|&op| op_name(op) == "hl.param")
        .find(|&op| attr_text(op, "init") == "#hl.init<data>")
        .map(|op| ir::string_attr(op, "sym_name").unwrap_or_default());
    if text.is_empty() {
        return match data_param {
            Some(p) => Err(CompileError::Unsupported(format!(
                "{name}: parameter @{p} is `init <data>` but the module has no `hl.weights` attribute naming the \
                 file that holds it"
            ))),
            None => Ok(None),
        };
    }
    let field = |key: &str| -> Option<String> {
        let at = text.find(&format!("{key} = \""))? + key.len() + 4;
        let end = text[at..].find('"')?;
        Some(text[at..at + end].to_string())
    };
    match (field("file"), field("hash")) {
        (Some(file), Some(hash)) if !file.is_empty() => Ok(Some(WeightsRef { file, hash })),
        _ => Err(CompileError::Unsupported(format!(
            "{name}: `hl.weights` must be {{file = \"...\", hash = \"...\"}}, got {text}"
        ))),
    }
}

/// The weights file of `w` for the model read from `name` (its path):
/// relative to the model's directory, and holding the bytes the hash
/// names.
pub fn resolve(w: &WeightsRef, name: &str) -> Result<PathBuf> {
    let file = Path::new(&w.file);
    let path = if file.is_absolute() {
        file.to_path_buf()
    } else {
        Path::new(name).parent().unwrap_or(Path::new("")).join(file)
    };
    let found = file_hash(&path).map_err(|e| CompileError::Io {
        path: path.display().to_string(),
        message: format!("the weights of {name}: {e}"),
    })?;
    if found != w.hash {
        return Err(CompileError::Io {
            path: path.display().to_string(),
            message: format!(
                "the weights of {name} changed since the model was written (hash {found}, the model names {}); \
                 import the model again",
                w.hash
            ),
        });
    }
    Ok(path)
}

/// The resolved weights file of a module, if it declares one.
pub fn of_module(module: &Module<'_>, name: &str) -> Result<Option<PathBuf>> {
    declared(module, name)?.map(|w| resolve(&w, name)).transpose()
}

/// Copies `source` into the artifact at `dir` as [`ARTIFACT_FILE`] and
/// seals the manifest with it.
pub fn attach(manifest: &mut Manifest, dir: &Path, source: &Path) -> Result<()> {
    let bytes = std::fs::read(source).map_err(|e| crate::codegen::io_error(source, e))?;
    crate::codegen::write_atomically(&dir.join(ARTIFACT_FILE), &bytes)?;
    let mut files: Vec<String> = manifest.files.keys().cloned().collect();
    files.push(ARTIFACT_FILE.into());
    manifest.weights = Some(ARTIFACT_FILE.into());
    manifest.seal(dir, &files).map_err(|e| crate::codegen::io_error(dir, e))?;
    let text = crate::codegen::serde_json_string(manifest)?;
    crate::codegen::write_atomically(&dir.join("manifest.json"), text.as_bytes())
}
