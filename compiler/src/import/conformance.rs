//! ONNX's backend node tests through the importer, the compiler and the
//! CPU runtime: a test directory (`model.onnx`,
//! `test_data_set_0/input_K.pb`, `output_K.pb`; written by
//! `tools/onnx/node_tests.py`) is imported without a loss, compiled for
//! inference, run, and compared with its expected outputs as ONNX's own
//! runner does (`|got - want| <= atol + rtol |want|`, rtol 1e-3, atol 1e-7).

use super::onnx::{self, ImportError, ImportOptions, Loss};
use crate::codegen::KernelCache;
use crate::pipeline::{self, Target};
use aicf_runtime::{Tensor, artifact::DType};
use prost::Message;
use std::path::Path;

pub const RTOL: f64 = 1e-3;
pub const ATOL: f64 = 1e-7;

/// How one node test went.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The outputs match.
    Passed,
    /// The importer refused the model with a clear error (an op, attribute
    /// or input it does not support).
    Unsupported(String),
    /// It imported but failed to compile or run, or its outputs differ.
    Failed(String),
}

/// The op type a test is about: its first node's ("?" without one).
fn op_of(model: &aicf_onnx::proto::ModelProto) -> String {
    model.graph.as_ref().and_then(|g| g.node.first()).map_or_else(|| "?".into(), |n| n.op_type().to_string())
}

fn read_tensor(path: &Path) -> Result<Tensor, String> {
    read_typed(path).map(|(t, _)| t)
}

/// A test tensor with its ONNX element type.
fn read_typed(path: &Path) -> Result<(Tensor, aicf_onnx::proto::tensor_proto::DataType), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let proto =
        aicf_onnx::proto::TensorProto::decode(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))?;
    let t = aicf_onnx::tensor(&proto, path.parent().unwrap_or(Path::new("."))).map_err(|e| e.to_string())?;
    let dtype = match (&t.data, t.data_type) {
        (aicf_onnx::Data::F32(_), _) => DType::F32,
        (_, aicf_onnx::proto::tensor_proto::DataType::Bool) => DType::I1,
        _ => DType::I32,
    };
    Ok((Tensor::new(t.dims.clone(), dtype, t.data.to_f64()), t.data_type))
}

/// Runs the node test in `dir`, compiling into `work` (a scratch directory,
/// with the kernel cache `cache`): the op it is about, and how it went.
pub fn run_case(dir: &Path, work: &Path, cache: &Path) -> (String, Outcome) {
    let model = match aicf_onnx::load(&dir.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return ("?".into(), Outcome::Unsupported(e.to_string())),
    };
    let op = op_of(&model);
    // A random op's values are not the reference's (AICF draws its own
    // numbers, in @loss; @forward, which a node test runs, takes their
    // mean): not comparable, so not counted as passed or failed.
    if onnx::NOISE.contains(&op.as_str()) {
        return (op, Outcome::Unsupported("random numbers: not comparable with the reference's".into()));
    }
    (op, run_model(&model, dir, work, cache))
}

fn run_model(model: &aicf_onnx::proto::ModelProto, dir: &Path, work: &Path, cache: &Path) -> Outcome {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let data = dir.join("test_data_set_0");
    let options = ImportOptions { batch: None, loss: Loss::None, ..Default::default() };
    let imported = match onnx::import_model(model, &name, dir, &options) {
        Ok(i) => i,
        // A node test feeds as graph inputs what an exported model holds as
        // constants (a Reshape's shape, a Slice's bounds, Clip's limits):
        // those inputs (all but the first) are bound to the test's values
        // as initializers, and the import tried again.
        Err(ImportError::Node { message, .. }) if message.contains("must be known at import time") => {
            match with_constant_inputs(&model, &data)
                .and_then(|m| onnx::import_model(&m, &name, dir, &options).map_err(|e| e.to_string()))
            {
                Ok(i) => i,
                Err(e) => return Outcome::Unsupported(e),
            }
        }
        Err(e @ (ImportError::Node { .. } | ImportError::Model { .. } | ImportError::Onnx(_))) => {
            return Outcome::Unsupported(e.to_string());
        }
    };
    let mut inputs = Vec::new();
    for k in 0..imported.inputs.len() {
        match read_tensor(&data.join(format!("input_{k}.pb"))) {
            Ok(t) => inputs.push(t),
            Err(e) => return Outcome::Failed(format!("input {k}: {e}")),
        }
    }
    let _ = std::fs::remove_dir_all(work);
    if let Err(e) = std::fs::create_dir_all(work) {
        return Outcome::Failed(format!("{}: {e}", work.display()));
    }
    let mlir = work.join("model.mlir");
    if let Err(e) = imported.write(&mlir) {
        return Outcome::Failed(e.to_string());
    }
    let Ok(source) = std::fs::read_to_string(&mlir) else {
        return Outcome::Failed("the imported model was not written".into());
    };
    let artifact = work.join("artifact");
    let target = Target::Cpu(KernelCache::new(cache.to_path_buf()));
    if let Err(e) = pipeline::compile_inference(&source, &mlir.display().to_string(), &target, &artifact) {
        return Outcome::Failed(format!("compile: {e}"));
    }
    let mut backend = match aicf_runtime::open(&artifact, &aicf_runtime::Device::Cpu { threads: 1 }, 0) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(format!("load: {e}")),
    };
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let outs = match backend.call("forward", &refs) {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(format!("run: {e}")),
    };
    for (k, got) in outs.iter().enumerate() {
        let (want, declared) = match read_typed(&data.join(format!("output_{k}.pb"))) {
            Ok(t) => t,
            Err(e) => return Outcome::Failed(format!("output {k}: {e}")),
        };
        // A half-precision output is the reference's value rounded to its
        // type; AICF imports half graphs as f32 (its own casts decide the
        // precision), so its value is rounded to the declared type as the
        // model's consumer would read it, then compared.
        let round: fn(f64) -> f64 = match declared {
            aicf_onnx::proto::tensor_proto::DataType::Bfloat16 => |v| half::bf16::from_f64(v).to_f64(),
            aicf_onnx::proto::tensor_proto::DataType::Float16 => |v| half::f16::from_f64(v).to_f64(),
            _ => |v| v,
        };
        let got = Tensor::new(got.shape.clone(), got.dtype, got.values.iter().map(|&v| round(v)).collect());
        if got.shape != want.shape {
            return Outcome::Failed(format!("output {k} is {:?}, expected {:?}", got.shape, want.shape));
        }
        let bad = got.values.iter().zip(&want.values).enumerate().find(|(_, (g, w))| {
            let close = (*g - *w).abs() <= ATOL + RTOL * w.abs();
            !(close || (g.is_nan() && w.is_nan()) || (g == w))
        });
        if let Some((i, (g, w))) = bad {
            return Outcome::Failed(format!("output {k} element {i} is {g}, expected {w}"));
        }
    }
    Outcome::Passed
}

/// `model` with its graph inputs after the first turned into initializers
/// holding the test's values for them.
fn with_constant_inputs(
    model: &aicf_onnx::proto::ModelProto,
    data: &Path,
) -> Result<aicf_onnx::proto::ModelProto, String> {
    let mut m = model.clone();
    let graph = m.graph.as_mut().ok_or("no graph")?;
    let inits: std::collections::HashSet<String> = graph.initializer.iter().map(|t| t.name().to_string()).collect();
    let inputs: Vec<String> = graph.input.iter().map(|i| i.name().to_string()).filter(|n| !inits.contains(n)).collect();
    for (k, name) in inputs.iter().enumerate().skip(1) {
        let path = data.join(format!("input_{k}.pb"));
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut t = aicf_onnx::proto::TensorProto::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
        t.name = Some(name.clone());
        graph.initializer.push(t);
    }
    Ok(m)
}
