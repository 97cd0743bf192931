//! The ONNX front end on models exported from PyTorch
//! (`tools/onnx/export_models.py` wrote `test/onnx/<name>.onnx` and, in
//! `<name>.io.safetensors`, a batch, labels, onnxruntime's forward output,
//! PyTorch's loss and its autograd gradients): the imported model's
//! compiled forward matches onnxruntime, and its compiled `@loss_grad`
//! matches PyTorch, each within 1e-4 relative to the reference's largest
//! magnitude.

use aicf_compiler::import::onnx::{self, ImportError, ImportOptions, Loss};
use aicf_compiler::train::{Options, Trainer};
use aicf_runtime::{Tensor, checkpoint, host::read_values};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../test/onnx")).join(name)
}

fn io(name: &str) -> BTreeMap<String, Tensor> {
    let (entries, _) = checkpoint::load(&fixture(&format!("{name}.io.safetensors"))).unwrap();
    entries.into_iter().map(|(k, e)| (k, Tensor::new(e.shape.clone(), e.dtype, read_values(&e.bytes, e.dtype)))).collect()
}

/// max |a - b| / max |b|.
fn relative(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn check(name: &str) {
    let io = io(name);
    let x = &io["input0"];
    let labels = &io["labels"];
    let dir = crate::tmp_root().join(format!("onnx-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let imported = onnx::import(
        &fixture(&format!("{name}.onnx")),
        &ImportOptions { batch: Some(x.shape[0]), loss: Loss::CrossEntropy },
    )
    .unwrap();
    let model = dir.join(format!("{name}.mlir"));
    imported.write(&model).unwrap();
    let options = Options {
        optimizer: "sgd".into(),
        device: aicf_runtime::Device::Cpu { threads: 2 },
        cache_dir: dir.clone(),
        ..Options::default()
    };
    let mut t = Trainer::from_file(&model, options).unwrap();
    let out = t.predict(&[x]).unwrap();
    let ort = &io["ort.output0"];
    assert_eq!(out[0].shape, ort.shape, "{name}: output shape");
    let e = relative(&out[0].values, &ort.values);
    assert!(e <= 1e-4, "{name}: forward differs from onnxruntime by {e:.2e} (relative)");
    let r = t.backend_mut().call("loss_grad", &[x, labels]).unwrap();
    let loss = io["torch.loss"].values[0];
    assert!((r[0].values[0] - loss).abs() <= 1e-4 * loss.abs(), "{name}: loss {} vs PyTorch's {loss}", r[0].values[0]);
    assert_eq!(r.len(), 1 + imported.sources.len());
    for (k, source) in imported.sources.iter().enumerate() {
        let reference = io.get(&format!("grad.{source}")).unwrap_or_else(|| panic!("{name}: no gradient of {source}"));
        let g = &r[1 + k];
        assert_eq!(g.shape, reference.shape, "{name}: gradient of {source}");
        let e = relative(&g.values, &reference.values);
        assert!(e <= 1e-4, "{name}: gradient of {source} differs from PyTorch's by {e:.2e} (relative)");
    }
    assert_eq!(imported.sources.len(), io.keys().filter(|k| k.starts_with("grad.")).count(), "{name}: every parameter");
}

#[test]
fn an_imported_mlp_matches_onnxruntime_and_pytorch_gradients() {
    check("mlp");
}

#[test]
fn an_imported_cnn_matches_onnxruntime_and_pytorch_gradients() {
    check("cnn");
}

#[test]
fn an_imported_gpt_matches_onnxruntime_and_pytorch_gradients() {
    check("gpt");
}

#[test]
fn the_weights_are_data_parameters_whose_file_the_ir_names_by_hash() {
    let dir = crate::tmp_root().join("onnx-weights");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let imported =
        onnx::import(&fixture("mlp.onnx"), &ImportOptions { batch: Some(8), loss: Loss::CrossEntropy }).unwrap();
    let model = dir.join("mlp.mlir");
    imported.write(&model).unwrap();
    let text = std::fs::read_to_string(&model).unwrap();
    assert!(text.contains("hl.weights = {file = \"mlp.weights.safetensors\""), "{text}");
    assert!(text.contains("init <data>"), "{text}");
    let options = Options { cache_dir: dir.join("run"), ..Options::default() };
    let t = Trainer::from_file(&model, options.clone()).unwrap();
    let state = t.state();
    let (name, shape, values) = &imported.weights[0];
    assert_eq!(&state[name].shape, shape);
    assert_eq!(state[name].values, values.iter().map(|&v| v as f64).collect::<Vec<_>>(), "the file's values");
    // Changed weights: the IR's hash no longer matches, and the error says so.
    let weights = onnx::Imported::weights_path(&model);
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&weights, &bytes).unwrap();
    let e = Trainer::from_file(&model, Options { cache_dir: dir.join("run2"), ..options.clone() }).err().unwrap();
    assert!(e.to_string().contains("changed since the model was written"), "{e}");
    // A missing file is an error naming it.
    std::fs::remove_file(&weights).unwrap();
    let e = Trainer::from_file(&model, Options { cache_dir: dir.join("run3"), ..options }).err().unwrap();
    assert!(e.to_string().contains("mlp.weights.safetensors"), "{e}");
}

#[test]
fn unsupported_nodes_and_unbound_dimensions_are_errors_naming_them() {
    // The exported GPT's batch is symbolic: without --batch it cannot be static.
    let e = onnx::import(&fixture("gpt.onnx"), &ImportOptions { batch: None, loss: Loss::CrossEntropy }).unwrap_err();
    assert!(e.to_string().contains("input 'input0' dimension 0 is 'batch': give --batch"), "{e}");
    // An op outside the supported set: the node, its op type and opset, and the list.
    let mut model = aicf_onnx::load(&fixture("mlp.onnx")).unwrap();
    let graph = model.graph.as_mut().unwrap();
    graph.node[1].op_type = Some("Celu".into());
    let node = graph.node[1].name().to_string();
    let e = onnx::import_model(&model, "edited.onnx", std::path::Path::new("."), &ImportOptions { batch: Some(2), loss: Loss::None })
        .unwrap_err();
    match &e {
        ImportError::Node { node: n, op, opset, message, .. } => {
            assert_eq!((n.as_str(), op.as_str(), *opset), (node.as_str(), "Celu", 17));
            assert!(message.contains("supports: Abs, Add"), "{message}");
        }
        other => panic!("{other}"),
    }
    // Cross-entropy needs logits.
    let mut model = aicf_onnx::load(&fixture("mlp.onnx")).unwrap();
    model.opset_import[0].version = Some(3);
    let e = onnx::import_model(&model, "old.onnx", std::path::Path::new("."), &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("opset 3 of the default domain is not supported"), "{e}");
}
