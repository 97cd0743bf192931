//! `aicf export`: each model's `@forward` written as ONNX, read back by the
//! ONNX import at two batch sizes, computes what the reference interpreter
//! computes on the `hl` model (onnxruntime's check of the same files is
//! `tools/onnx/check_export.py`, run where the ONNX venv is).

use aicf_compiler::{
    CompilerContext,
    export::{ExportOptions, Preprocess, export_onnx},
    import::onnx::{ImportOptions, Loss, import_model},
    interp::{Array, Interpreter},
    nn::DType,
    pipeline::rebatched_source,
};
use aicf_runtime::checkpoint::Entry;
use std::collections::BTreeMap;

/// `hl.param @name : tensor<AxBxf32>` declarations of `source`.
fn declared_params(source: &str) -> Vec<(String, Vec<usize>)> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("hl.param @")?;
            let (name, ty) = rest.split_once(" : tensor<")?;
            let dims = ty.split('>').next()?;
            let shape = dims.split('x').filter_map(|d| d.parse::<usize>().ok()).collect();
            Some((name.trim_matches('"').to_string(), shape))
        })
        .collect()
}

/// Deterministic values in [-0.5, 0.5) (a small LCG: no dependency).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f64 / (1u64 << 24) as f64 - 0.5) as f32 as f64
        })
        .collect()
}

/// Random f32 parameters for `source`: as checkpoint entries and as arrays.
fn weights(source: &str) -> (BTreeMap<String, Entry>, Vec<(String, Array)>) {
    let mut entries = BTreeMap::new();
    let mut arrays = Vec::new();
    for (i, (name, shape)) in declared_params(source).into_iter().enumerate() {
        let n = shape.iter().product();
        let v = values(n, i as u64 + 7);
        let bytes = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
        entries.insert(
            name.clone(),
            Entry { name: name.clone(), dtype: aicf_runtime::artifact::DType::F32, shape: shape.clone(), bytes },
        );
        arrays.push((name, Array::new(shape, DType::F32, v).unwrap()));
    }
    (entries, arrays)
}

fn run(source: &str, params: &[(String, Array)], args: &[Array]) -> Vec<Array> {
    let ctx = CompilerContext::new();
    let module = ctx.parse(source, "model.mlir").unwrap();
    let mut interp = Interpreter::new(&module);
    for (name, value) in params {
        interp.set_param(name, value.clone());
    }
    interp.run("forward", args).unwrap_or_else(|e| panic!("{e}"))
}

/// The arguments of `@forward` at `batch`: floats in [-1, 1), integers
/// below `classes`.
fn inputs(source: &str, classes: usize) -> Vec<Array> {
    let ctx = CompilerContext::new();
    let module = ctx.parse(source, "model.mlir").unwrap();
    let text = module.as_operation().to_string();
    let line = text.lines().find(|l| l.contains("func.func @forward(")).unwrap();
    let args = line.split("@forward(").nth(1).unwrap().split(") ->").next().unwrap();
    args.split("%")
        .filter(|a| a.contains("tensor<"))
        .enumerate()
        .map(|(i, a)| {
            let ty = a.split("tensor<").nth(1).unwrap().split('>').next().unwrap();
            let parts: Vec<&str> = ty.split('x').collect();
            let shape: Vec<usize> = parts[..parts.len() - 1].iter().map(|d| d.parse().unwrap()).collect();
            let n = shape.iter().product();
            let el = parts[parts.len() - 1];
            let v = values(n, 100 + i as u64);
            if el.starts_with('i') {
                let ints = v.iter().map(|x| ((x + 0.5) * classes as f64).floor().min(classes as f64 - 1.0)).collect();
                Array::new(shape, if el == "i64" { DType::I64 } else { DType::I32 }, ints).unwrap()
            } else {
                Array::new(shape, DType::F32, v.iter().map(|x| x * 2.0).collect()).unwrap()
            }
        })
        .collect()
}

fn assert_close(what: &str, a: &Array, b: &Array, tol: f64) {
    assert_eq!(a.shape, b.shape, "{what}: shapes");
    let scale = b.data.iter().fold(0f64, |m, v| m.max(v.abs())).max(1.0);
    let worst = a.data.iter().zip(&b.data).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max);
    assert!(worst <= tol * scale, "{what}: differs by {worst:.3e} (largest value {scale:.3e})");
}

/// What the tests export with: `weights`, at a dynamic batch.
fn options(weights: &BTreeMap<String, Entry>, preprocess: Preprocess) -> ExportOptions<'_> {
    ExportOptions {
        weights,
        preprocess,
        dynamic_batch: true,
        output_names: Vec::new(),
        postprocess: None,
        graph_name: "forward".into(),
        doc: String::new(),
    }
}

/// The exported `model` imported at `batch`: its `hl` text and weights.
fn imported(model: &aicf_onnx::proto::ModelProto, file: &str, batch: usize) -> (String, Vec<(String, Array)>) {
    let options = ImportOptions { batch: Some(batch), loss: Loss::Mse, ..Default::default() };
    let imported = import_model(model, file, std::path::Path::new("."), &options)
        .unwrap_or_else(|e| panic!("{file} exported, imported at batch {batch}: {e}"));
    let params = imported
        .weights
        .iter()
        .map(|(n, s, v)| (n.clone(), Array::new(s.clone(), DType::F32, v.iter().map(|&x| x as f64).collect()).unwrap()))
        .collect();
    (imported.module.text, params)
}

/// Exports `source` at a dynamic batch, imports the file at `batch` and at
/// `batch + 3`, and compares each with the interpreter on the model at
/// that batch. Returns the export.
fn round_trip(file: &str, source: &str, batch: usize, classes: usize) -> aicf_compiler::export::Exported {
    round_trip_to(file, source, batch, classes, None)
}

/// What the export of a model at a fixed batch is checked for.
fn fixed_round_trip(file: &str, source: &str, batch: usize, classes: usize, dump: Option<&std::path::Path>) -> String {
    let exported = round_trip_to(file, source, batch, classes, dump);
    let Err((b, why)) = exported.batch else { panic!("{file}: exported at a dynamic batch") };
    assert_eq!(b, batch);
    assert_eq!(exported.inputs[0].dims[0], batch.to_string());
    why
}

/// [`round_trip`], writing the model, and each batch's inputs and the
/// interpreter's outputs as .npy, to `dump` (for onnxruntime).
fn round_trip_to(
    file: &str,
    source: &str,
    batch: usize,
    classes: usize,
    dump: Option<&std::path::Path>,
) -> aicf_compiler::export::Exported {
    let source = rebatched_source(source, file, batch).unwrap();
    let (entries, params) = weights(&source);
    let exported =
        export_onnx(&source, file, &options(&entries, Preprocess::default())).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(exported.parameters, params.len(), "{file}: every parameter an initializer");
    let bytes = exported.encode().unwrap();
    let model = aicf_onnx::decode(&bytes).unwrap();
    let stem = file.rsplit('/').next().unwrap().trim_end_matches(".mlir");
    if let Some(dir) = dump {
        std::fs::write(dir.join(format!("{stem}.onnx")), &bytes).unwrap();
    }
    let batches = if exported.batch.is_ok() { vec![batch, batch + 3] } else { vec![batch] };
    for b in batches {
        let at = rebatched_source(&source, file, b).unwrap();
        let args = inputs(&at, classes);
        let want = run(&at, &params, &args);
        if let Some(dir) = dump {
            for (i, a) in args.iter().enumerate() {
                write_npy(&dir.join(format!("{stem}.b{b}.in{i}.npy")), a);
            }
            for (i, a) in want.iter().enumerate() {
                write_npy(&dir.join(format!("{stem}.b{b}.out{i}.npy")), a);
            }
        }
        let (text, back) = imported(&model, file, b);
        let got = run(&text, &back, &args);
        assert_eq!(got.len(), want.len(), "{file}: outputs");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(&format!("{file} at batch {b}, output {i}"), g, w, 2e-5);
        }
    }
    exported
}

fn write_npy(path: &std::path::Path, a: &Array) {
    let mut bytes = Vec::new();
    {
        use npyz::WriterBuilder;
        let shape: Vec<u64> = a.shape.iter().map(|&d| d as u64).collect();
        let mut w =
            npyz::WriteOptions::<f64>::new().default_dtype().shape(&shape).writer(&mut bytes).begin_nd().unwrap();
        a.data.iter().for_each(|v| w.push(v).unwrap());
        w.finish().unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

/// The examples: file, batch, the vocabulary of integer inputs.
const EXAMPLES: [(&str, usize, usize); 4] = [
    ("examples/mlp/digits_mlp.mlir", 4, 10),
    ("examples/cnn/digits_cnn.mlir", 2, 10),
    ("examples/char_lm/char_lm.mlir", 2, 65),
    ("examples/transformer/transformer_block.mlir", 2, 10),
];

fn example(file: &str) -> String {
    std::fs::read_to_string(format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn the_examples_export_and_compute_what_they_compute_in_hl() {
    for (file, batch, classes) in EXAMPLES {
        let exported = round_trip(file, &example(file), batch, classes);
        assert_eq!(exported.batch, Ok(()), "{file}: a dynamic batch");
        assert_eq!(exported.inputs[0].dims[0], "batch", "{file}: {}", exported.inputs[0]);
        assert_eq!(exported.outputs[0].dims[0], "batch", "{file}: {}", exported.outputs[0]);
    }
}

/// The same files in onnxruntime (with `onnx.checker`'s full check): the
/// check that does not go through AICF's own reading of ONNX.
#[test]
#[ignore = "needs Python with onnx and onnxruntime: make onnx-venv, then make onnx-export-check"]
fn exported_models_run_in_onnxruntime() {
    let python = std::env::var("AICF_ONNX_PYTHON").unwrap_or_else(|_| "target/onnx-venv/bin/python".into());
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/onnx-export-check");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, batch, classes) in EXAMPLES {
        round_trip_to(file, &example(file), batch, classes, Some(&dir));
    }
    round_trip_to("every_op.mlir", EVERY_OP, 4, 5, Some(&dir));
    fixed_round_trip("imported_ops.mlir", IMPORTED_OPS, 4, 3, Some(&dir));
    let status = std::process::Command::new(root.join(&python))
        .arg(root.join("tools/onnx/check_export.py"))
        .arg(&dir)
        .status()
        .unwrap_or_else(|e| panic!("{python}: {e} (set AICF_ONNX_PYTHON to a Python with onnx and onnxruntime)"));
    assert!(status.success(), "onnxruntime disagrees (its report above)");
}

/// The ops no example uses, in one model.
const EVERY_OP: &str = r#"
hl.param @w : tensor<6x8xf32> owner "" init <zeros>
hl.param @g : tensor<6xf32> owner "" init <ones>
hl.param @k : tensor<3x2x3x3xf32> owner "" init <zeros>
hl.param @table : tensor<5x6xf32> owner "" init <zeros>
func.func @forward(%x: tensor<4x8xf32>, %img: tensor<4x5x5x2xf32>, %ids: tensor<4x3xi32>) -> (tensor<4x6xf32>, tensor<4xi64>, tensor<4x3x3x3xf32>, tensor<4x3x6xf32>) {
  %w = hl.get_param @w : tensor<6x8xf32>
  %y = hl.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<6x8xf32>
  %g = hl.get_param @g : tensor<6xf32>
  %n = hl.rms_norm %y weight %g dims = 1 eps = 1.000000e-05 : tensor<4x6xf32>, tensor<6xf32>
  %a = hl.gelu %n approximate = tanh : tensor<4x6xf32>
  %b = hl.gelu %a : tensor<4x6xf32>
  %s = hl.silu %b : tensor<4x6xf32>
  %sq = hl.mul %s, %s : tensor<4x6xf32>, tensor<4x6xf32>
  %one = hl.constant dense<1.0> : tensor<f32>
  %p = hl.add %sq, %one : tensor<4x6xf32>, tensor<f32>
  %r = hl.rsqrt %p : tensor<4x6xf32>
  %zero = hl.constant dense<0.0> : tensor<f32>
  %c = hl.compare gt, %y, %zero : tensor<4x6xf32>, tensor<f32>
  %sel = hl.select %c, %r, %y : tensor<4x6xi1>, tensor<4x6xf32>, tensor<4x6xf32>
  %l = hl.layer_norm %sel dims = 1 eps = 1.000000e-05 : tensor<4x6xf32>
  %ls = hl.log_softmax %l axis = 1 : tensor<4x6xf32>
  %m = hl.reduce_mean %ls axes = [1] keepdim : tensor<4x6xf32>
  %o = hl.sub %ls, %m : tensor<4x6xf32>, tensor<4x1xf32>
  %am = hl.argmax %o axis = 1 : tensor<4x6xf32>
  %k = hl.get_param @k : tensor<3x2x3x3xf32>
  %conv = hl.conv2d %img, %k stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 layout = nhwc : tensor<4x5x5x2xf32>, tensor<3x2x3x3xf32>
  %pool = hl.avg_pool2d %conv kernel = [2, 2] stride = [2, 2] padding = [1, 1] layout = nhwc : tensor<4x5x5x3xf32>
  %t = hl.get_param @table : tensor<5x6xf32>
  %e = hl.gather %t[%ids] axis = 0 : tensor<5x6xf32>, tensor<4x3xi32>
  %e2 = hl.slice %e start = [0, 1, 0] limit = [4, 3, 6] strides = [1, 1, 1] : tensor<4x3x6xf32>
  %e3 = hl.slice %e start = [0, 0, 0] limit = [4, 1, 6] strides = [1, 1, 1] : tensor<4x3x6xf32>
  %cat = hl.concat %e3, %e2 axis = 1 : tensor<4x1x6xf32>, tensor<4x2x6xf32>
  %half = hl.constant dense<0.5> : tensor<4x3x6xf32>
  %h = hl.mul %cat, %half : tensor<4x3x6xf32>, tensor<4x3x6xf32>
  %row = hl.reduce_max %o axes = [0] : tensor<4x6xf32>
  %wide = hl.broadcast_to %row : tensor<6xf32> to tensor<4x3x6xf32>
  %sum = hl.add %h, %wide : tensor<4x3x6xf32>, tensor<4x3x6xf32>
  %flat = hl.reshape %sum : tensor<4x3x6xf32> to tensor<4x18xf32>
  %back = hl.reshape %flat : tensor<4x18xf32> to tensor<4x3x6xf32>
  %q = hl.transpose %back permutation = [0, 2, 1] : tensor<4x3x6xf32>
  %att = hl.attention %back, %back, %back scale = 5.000000e-01 : tensor<4x3x6xf32>, tensor<4x3x6xf32>, tensor<4x3x6xf32>
  %mm = hl.matmul %q, %att transpose_lhs transpose_rhs : tensor<4x6x3xf32>, tensor<4x3x6xf32>
  %ex = hl.exp %mm : tensor<4x3x3xf32>
  %lg = hl.log %ex : tensor<4x3x3xf32>
  %sum2 = hl.reduce_sum %att axes = [1] : tensor<4x3x6xf32>
  %fin = hl.add %o, %sum2 : tensor<4x6xf32>, tensor<4x6xf32>
  return %fin, %am, %pool, %att : tensor<4x6xf32>, tensor<4xi64>, tensor<4x3x3x3xf32>, tensor<4x3x6xf32>
}
func.func @loss(%x: tensor<4x8xf32>, %img: tensor<4x5x5x2xf32>, %ids: tensor<4x3xi32>, %t: tensor<4x6xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<6x8xf32>
  %y = hl.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<6x8xf32>
  %l = hl.mse_loss %y, %t : tensor<4x6xf32>, tensor<4x6xf32>
  return %l : tensor<f32>
}
"#;

/// Ops an import puts in `@forward`: a scatter-add (PyTorch's
/// `index_add`), a window padded with zeros, noise of deviation 0.
const IMPORTED_OPS: &str = r#"
hl.param @w : tensor<2x6xf32> owner "" init <zeros>
func.func @forward(%x: tensor<4x6xf32>, %ids: tensor<2xi32>) -> (tensor<4x5xf32>, tensor<4x9xf32>, tensor<4x6xf32>) {
  %w = hl.get_param @w : tensor<2x6xf32>
  %y = hl.linear %x, %w : tensor<4x6xf32>, tensor<2x6xf32>
  %s = hl.gather_backward %y[%ids] axis = 1 : tensor<4x2xf32>, tensor<2xi32> -> tensor<4x5xf32>
  %p = hl.slice_backward %x start = [0, 2] limit = [4, 8] strides = [1, 1] : tensor<4x6xf32> -> tensor<4x9xf32>
  %seed = hl.constant dense<0> : tensor<i64>
  %n = hl.random_like %x, %seed, %seed kind = "normal" a = 2.500000e-01 b = 0.000000e+00 stream = 0 : tensor<4x6xf32>
  %m = hl.mul %x, %n : tensor<4x6xf32>, tensor<4x6xf32>
  return %s, %p, %m : tensor<4x5xf32>, tensor<4x9xf32>, tensor<4x6xf32>
}
func.func @loss(%x: tensor<4x6xf32>, %ids: tensor<2xi32>, %t: tensor<4x2xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<2x6xf32>
  %y = hl.linear %x, %w : tensor<4x6xf32>, tensor<2x6xf32>
  %l = hl.mse_loss %y, %t : tensor<4x2xf32>, tensor<4x2xf32>
  return %l : tensor<f32>
}
"#;

#[test]
fn every_forward_op_exports_and_computes_what_it_computes_in_hl() {
    assert_eq!(round_trip("every_op.mlir", EVERY_OP, 4, 5).batch, Ok(()));
    // (hl-set-batch does not retarget a padded window's limits.)
    let why = fixed_round_trip("imported_ops.mlir", IMPORTED_OPS, 4, 3, None);
    assert!(why.contains("does not retarget") && why.contains("slice_backward"), "{why}");
}

/// A parameter the weights do not hold, or hold in another shape, is said
/// at the op that reads it; nothing is exported.
#[test]
fn missing_or_misshapen_weights_are_refused_where_they_are_read() {
    let file = "examples/mlp/digits_mlp.mlir";
    let source = example(file);
    let (mut entries, _) = weights(&source);
    let bias = entries.remove("fc2.bias").unwrap();
    let e = export_onnx(&source, file, &options(&entries, Preprocess::default())).err().unwrap().to_string();
    assert!(e.contains("'hl.get_param'") && e.contains("parameter @fc2.bias has no tensor among the weights"), "{e}");
    entries.insert("fc2.bias".into(), Entry { shape: vec![5, 2], ..bias });
    let e = export_onnx(&source, file, &options(&entries, Preprocess::default())).err().unwrap().to_string();
    assert!(e.contains("parameter @fc2.bias is [5, 2]") && e.contains("the model reads [10] f32"), "{e}");
}

/// A table's scale and standardization come first in the graph: the
/// exported model reads features as the file holds them.
#[test]
fn a_checkpoints_feature_scaling_is_the_graphs_first_step() {
    let file = "examples/mlp/digits_mlp.mlir";
    let source = rebatched_source(&example(file), file, 3).unwrap();
    let (entries, params) = weights(&source);
    let mean: Vec<f64> = (0..64).map(|i| i as f64 / 8.0).collect();
    let std: Vec<f64> = (0..64).map(|i| 1.0 + (i % 5) as f64).collect();
    let preprocess = Preprocess { scale: Some(4.0), standardize: Some((mean.clone(), std.clone())) };
    let exported = export_onnx(&source, file, &options(&entries, preprocess)).unwrap();
    let model = aicf_onnx::decode(&exported.encode().unwrap()).unwrap();
    let (text, back) = imported(&model, file, 3);
    let raw = &inputs(&source, 10)[0];
    let seen: Vec<f64> =
        raw.data.iter().enumerate().map(|(i, &x)| (((x - mean[i % 64]) / std[i % 64]) as f32 / 4.0) as f64).collect();
    let want = run(&source, &params, &[Array::new(raw.shape.clone(), DType::F32, seen).unwrap()]);
    let got = run(&text, &back, std::slice::from_ref(raw));
    assert_close("the standardized and scaled features", &got[0], &want[0], 1e-5);
}
