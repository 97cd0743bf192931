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
        .find(|&op| attr_text(op, "init") == "#hl.init<data>");
    // A model's mistake, said at its place.
    let located = |op: mlir_sys::MlirOperation, message: String| {
        // SAFETY: `op` is an operation of `module`, alive here.
        let location = crate::context::describe_location(unsafe {
            melior::ir::Location::from_raw(mlir_sys::mlirOperationGetLocation(op))
        });
        CompileError::not_a_model(name, location, message)
    };
    if text.is_empty() {
        return match data_param {
            Some(op) => Err(located(
                op,
                format!(
                    "parameter @{} is `init <data>` but the module has no `hl.weights` attribute naming the file \
                     that holds it",
                    ir::string_attr(op, "sym_name").unwrap_or_default()
                ),
            )),
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
        _ => Err(located(raw, format!("`hl.weights` must be {{file = \"...\", hash = \"...\"}}, got {text}"))),
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
    let found = hash_once(&path).map_err(|e| CompileError::Io {
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

/// [`file_hash`] of `path`, hashed once per process while the file's
/// size, modification time and inode stay as they were: a model's weights
/// are checked each time one of its variants compiles or is found
/// compiled (a smaller last batch, a held-out batch, a rewrite), and an
/// imported GPT-2's half a gigabyte was read whole each time.
fn hash_once(path: &Path) -> std::io::Result<String> {
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;
    type Seen = HashMap<PathBuf, ((u64, i64, i64, u64), String)>;
    static SEEN: Mutex<Option<Seen>> = Mutex::new(None);
    let meta = std::fs::metadata(path)?;
    let stamp = (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
    let key = std::fs::canonicalize(path)?;
    if let Ok(seen) = SEEN.lock()
        && let Some((at, hash)) = seen.as_ref().and_then(|m| m.get(&key))
        && *at == stamp
    {
        return Ok(hash.clone());
    }
    let hash = file_hash(path)?;
    if let Ok(mut seen) = SEEN.lock() {
        seen.get_or_insert_with(HashMap::new).insert(key, (stamp, hash.clone()));
    }
    Ok(hash)
}

/// What the `hl.weights` attribute of a module's text says, read from the
/// text alone (no context to parse it in): `None` where it has none, or
/// where a name needs escapes this reading does not undo.
pub fn declared_in_text(text: &str) -> Option<WeightsRef> {
    let at = text.find("hl.weights = {file = \"")? + "hl.weights = {file = \"".len();
    let (file, rest) = text[at..].split_once('"')?;
    let rest = rest.strip_prefix(", hash = \"")?;
    let (hash, _) = rest.split_once('"')?;
    (!file.contains('\\')).then(|| WeightsRef { file: file.into(), hash: hash.into() })
}

/// Makes the weights file that the module text `source` names available
/// beside `written`, a copy of the module written elsewhere than the model
/// it came from (`model`: a checkpoint's model in the run directory, a
/// model version in the checkpoint directory): the file is relative to the
/// module's own file, so the copy named one that was not there ("No such
/// file"). Linked where the file system allows, else copied; nothing is
/// done where a file of that name is already there, where the name is
/// absolute, or where the model's own is missing or changed (compiling the
/// copy then says so). Where `source` names another file than `model` does
/// (the model was imported again from a renamed `.onnx` file: its weights
/// file is named after it), the model's own file of the same bytes is the
/// one carried, under the name `source` gives it.
pub fn carry(source: &str, model: &Path, written: &Path) -> Result<()> {
    let Some(w) = declared_in_text(source) else { return Ok(()) };
    let file = Path::new(&w.file);
    if file.is_absolute() {
        return Ok(());
    }
    let dir = |p: &Path| p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let to = dir(written).join(file);
    let holds = |p: &Path| file_hash(p).ok().as_deref() == Some(w.hash.as_str());
    let named = dir(model).join(file);
    let from = if holds(&named) {
        named
    } else {
        // The model's own weights file, where it holds the same bytes.
        let own = std::fs::read_to_string(model).ok().and_then(|text| declared_in_text(&text));
        match own.filter(|o| o.hash == w.hash).map(|o| dir(model).join(o.file)) {
            Some(path) if holds(&path) => path,
            _ => return Ok(()),
        }
    };
    // (A file of that name already there is left as it is, whatever it
    // holds: it may be another model's.)
    if to.exists() {
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| crate::codegen::io_error(parent, e))?;
    }
    if std::fs::hard_link(&from, &to).is_ok() {
        return Ok(());
    }
    let bytes = std::fs::read(&from).map_err(|e| crate::codegen::io_error(&from, e))?;
    crate::codegen::write_atomically(&to, &bytes)
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

/// After a growth rewrite: a data parameter whose shape changed, or a new
/// one that copied a data parameter's declaration, is not in the weights
/// file any more. Its fresh values (what a growth rule takes for new
/// units) come from PyTorch's default initializer for its role instead:
/// a weight of rank >= 2 kaiming_uniform with gain sqrt(1/3) (nn.Linear,
/// nn.Conv2d), the bias of such a weight U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
/// another rank-1 `.weight` (a norm's scale) ones, the rest zeros. Its
/// carried values come from the model it grew from, as for any parameter.
pub fn refresh_data_inits(module: mlir_sys::MlirOperation, grown: &[&str]) -> Result<()> {
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(module, 0)) };
    let params: Vec<mlir_sys::MlirOperation> =
        ops_of(body).into_iter().filter(|&op| op_name(op) == "hl.param").collect();
    let shape_of = |op: mlir_sys::MlirOperation| -> Result<Vec<usize>> {
        let t = unsafe { mlir_sys::mlirTypeAttrGetValue(ir::attr(op, "type")) };
        crate::nn::spec_of_type(t)
            .map(|s| s.shape)
            .map_err(|e| CompileError::Internal(format!("a parameter without a tensor type: {e}")))
    };
    let ctx = unsafe { mlir_sys::mlirOperationGetContext(module) };
    for &op in &params {
        let name = ir::string_attr(op, "sym_name").unwrap_or_default();
        if !grown.contains(&name.as_str()) || attr_text(op, "init") != "#hl.init<data>" {
            continue;
        }
        let shape = shape_of(op)?;
        let owner_weight = name.strip_suffix(".bias").and_then(|owner| {
            params.iter().find(|&&p| ir::string_attr(p, "sym_name").as_deref() == Some(&format!("{owner}.weight")))
        });
        let init = if shape.len() >= 2 {
            "#hl.init<kaiming_uniform, gain = 0.57735026918962573>".to_string()
        } else if let Some(&w) = owner_weight {
            let w = shape_of(w)?;
            if w.len() >= 2 {
                let bound = 1.0 / (w[1..].iter().product::<usize>().max(1) as f64).sqrt();
                format!("#hl.init<uniform, low = {:e}, high = {:e}>", -bound, bound)
            } else {
                "#hl.init<zeros>".to_string()
            }
        } else if name.ends_with(".weight") {
            "#hl.init<ones>".to_string()
        } else {
            "#hl.init<zeros>".to_string()
        };
        let attr = ir::parse_attribute(ctx, &init).map_err(|e| CompileError::Internal(format!("{init}: {e:?}")))?;
        unsafe { mlir_sys::mlirOperationSetAttributeByName(op, crate::ffi::string_ref("init"), attr) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A weights file is hashed once while it stays as it was, and again
    /// once it changes (its size, here).
    #[test]
    fn a_weights_hash_is_kept_while_the_file_stays() {
        let path = std::env::temp_dir().join(format!("aicf-weights-{}.safetensors", std::process::id()));
        std::fs::write(&path, b"first").unwrap();
        let first = super::hash_once(&path).unwrap();
        assert_eq!(first, aicf_runtime::artifact::file_hash(&path).unwrap());
        assert_eq!(super::hash_once(&path).unwrap(), first);
        std::fs::write(&path, b"second, longer").unwrap();
        let second = super::hash_once(&path).unwrap();
        assert_ne!(second, first);
        assert_eq!(second, aicf_runtime::artifact::file_hash(&path).unwrap());
        let _ = std::fs::remove_file(&path);
    }
}
