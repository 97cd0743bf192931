//! Training as a library: model signatures, data that feeds any model's
//! inputs (tables reshaped to images, text windows as ids or one-hot,
//! arrays from safetensors and .npy), mismatches refused before anything is
//! compiled, a budgeted memory plan that trains like the unbudgeted one,
//! and the epoch loop's metrics, plot, profile trace and checkpoints.

use aicf_compiler::pipeline::MemoryBudget;
use aicf_compiler::train::{
    Options, Trainer,
    data::{DataOptions, Dataset, Role, Signature, Split},
    run::{self, Quiet, RunOptions},
};
use aicf_runtime::{Device, Tensor, artifact::DType};
use std::path::{Path, PathBuf};

fn example(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(path)
}

fn signature(path: &str) -> Signature {
    let source = std::fs::read_to_string(example(path)).unwrap();
    Signature::of_source(&source, path).unwrap()
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = crate::tmp_root().join(format!("train-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn digits() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/digits.csv.gz")
}

fn roles(sig: &Signature) -> Vec<(Role, Vec<usize>, DType)> {
    sig.inputs.iter().map(|i| (i.role, i.shape.clone(), i.dtype)).collect()
}

/// Every model the repository ships (examples, the lit tests' inputs) reads
/// each parameter it declares in `@loss`; a parameter `@loss` never reads
/// (it kept its initial values silently) is named, and so is one that
/// `@forward` reads all the same (predictions then use untrained values).
#[test]
fn parameters_loss_never_reads_are_named() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut models = Vec::new();
    for dir in ["examples", "test/Tools/aicf/inputs"] {
        let mut todo = vec![root.join(dir)];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()) {
                if e.is_dir() {
                    todo.push(e);
                } else if e.extension().is_some_and(|x| x == "mlir") {
                    models.push(e);
                }
            }
        }
    }
    let mut checked = 0;
    for m in &models {
        let source = std::fs::read_to_string(m).unwrap();
        // (Inputs that are no model to train: lowered IR, no @loss, bad IR.)
        let Ok(sig) = Signature::of_source(&source, &m.display().to_string()) else { continue };
        assert!(sig.untrained.is_empty(), "{}: {:?}", m.display(), sig.untrained);
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} models read");

    let mlp = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    let extra = mlp.replacen(
        "hl.param @fc2.bias",
        "hl.param @extra.w : tensor<4x4xf32> owner \"extra\" init <zeros>\nhl.param @fc2.bias",
        1,
    );
    let (head, loss) = mlp.split_at(mlp.find("func.func @loss").unwrap());
    let loss = loss.replace("  %b2 = hl.get_param @fc2.bias : tensor<10xf32>\n", "").replace(
        "%logits = hl.linear %a, %w2, %b2 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>",
        "%logits = hl.linear %a, %w2 : tensor<32x128xf32>, tensor<10x128xf32>",
    );
    let no_bias = format!("{head}{loss}");
    let sig = Signature::of_source(&extra, "extra.mlir").unwrap();
    assert_eq!(sig.untrained, [("extra.w".to_string(), false)]);
    assert_eq!(
        sig.untrained_notes("extra.mlir"),
        ["extra.mlir: no function reads @extra.w: it never trains (leave out its hl.param, or read it in @loss)"]
    );
    let sig = Signature::of_source(&no_bias, "no-bias.mlir").unwrap();
    assert_eq!(sig.untrained, [("fc2.bias".to_string(), true)]);
    let notes = sig.untrained_notes("no-bias.mlir");
    assert!(
        notes.len() == 1
            && notes[0].starts_with(
                "no-bias.mlir: @forward reads @fc2.bias, which @loss never reads: it keeps its initial values"
            ),
        "{notes:?}"
    );
    // `aicf train` says so before training.
    let dir = scratch("untrained");
    std::fs::write(dir.join("no-bias.mlir"), &no_bias).unwrap();
    let mut report = Notes(Vec::new());
    let run = RunOptions { epochs: 1, out: dir.join("run"), ..RunOptions::default() };
    run::fit(&dir.join("no-bias.mlir"), &Options::default(), &[digits()], &run, &mut report).unwrap();
    assert!(report.0.iter().any(|n| n.contains("@forward reads @fc2.bias, which @loss never reads")), "{:?}", report.0);
}

/// A report that keeps the notes.
struct Notes(Vec<String>);

impl run::Report for Notes {
    fn note(&mut self, message: &str) {
        self.0.push(message.to_string());
    }
}

#[test]
fn signatures_of_the_example_models() {
    let mlp = signature("mlp/digits_mlp.mlir");
    assert_eq!(roles(&mlp), [(Role::Data, vec![32, 64], DType::F32), (Role::Target, vec![32], DType::I32)]);
    assert_eq!((mlp.batch(), mlp.classes(), mlp.classifies(), mlp.takes_rng()), (32, Some(10), true, false));

    let cnn = signature("cnn/digits_cnn.mlir");
    assert_eq!(roles(&cnn)[0], (Role::Data, vec![32, 1, 8, 8], DType::F32));

    let lm = signature("char_lm/char_lm.mlir");
    assert_eq!(
        roles(&lm),
        [
            (Role::Data, vec![16, 64], DType::I32),
            (Role::Target, vec![16, 64], DType::I32),
            (Role::Seed, vec![], DType::I64),
            (Role::Offset, vec![], DType::I64),
        ]
    );
    assert_eq!((lm.classes(), lm.classifies(), lm.takes_rng()), (Some(65), true, true));

    let block = signature("transformer/transformer_block.mlir");
    assert_eq!(roles(&block), [(Role::Data, vec![8, 128, 256], DType::F32), (Role::Target, vec![8, 128], DType::I32)]);
    assert_eq!(block.classes(), Some(256));
}

#[test]
fn a_table_feeds_the_cnn_reshaped_to_images() {
    let sig = signature("cnn/digits_cnn.mlir");
    let data = Dataset::load(&[digits()], &sig, &DataOptions::default()).unwrap();
    assert_eq!((data.train_len(), data.held_len()), (1438, 359));
    let b = data.batch(Split::Train, &[0, 1, 2]);
    assert_eq!((b[0].shape.as_slice(), b[0].dtype), (&[3, 1, 8, 8][..], DType::F32));
    assert_eq!((b[1].shape.as_slice(), b[1].dtype), (&[3][..], DType::I32));
    // Features scaled into [0, 1] by the training split's largest value.
    assert!(b[0].values.iter().all(|v| (0.0..=1.0).contains(v)));
    assert_eq!(data.metadata["feature_scale"], "16");
    // The epoch order is a seeded permutation of the training rows.
    let (mut a, mut b2) = (7u64, 7u64);
    let order = data.epoch_order(&mut a);
    assert_eq!(order, data.epoch_order(&mut b2));
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1438).collect::<Vec<_>>());
}

#[test]
fn text_feeds_token_ids_and_one_hot_windows() {
    let dir = scratch("text");
    let path = dir.join("tiny.txt");
    let text = "to be, or not to be: that is the question.\n".repeat(40);
    std::fs::write(&path, &text).unwrap();
    let options = DataOptions { val_split: 0.1, windows_per_epoch: Some(48), eval_windows: 4, ..Default::default() };
    assert_eq!(text.len(), 1720);

    // The char LM: a character vocabulary, ids, next-character targets.
    let lm = signature("char_lm/char_lm.mlir");
    let data = Dataset::load(std::slice::from_ref(&path), &lm, &options).unwrap();
    assert_eq!(data.loss_unit(), "nats/char");
    let mut chars: Vec<char> = text.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    assert_eq!(data.metadata["vocabulary"], chars.iter().collect::<String>());
    // 17 characters for 65 classes: trains, and says most are never a target.
    assert_eq!(
        data.notes,
        [format!(
            "{}: the text has 17 distinct characters; the model predicts 65 classes, so 48 of them are never a target",
            path.display()
        )]
    );
    // A vocabulary given (a checkpoint's) is counted as the vocabulary, not
    // as the text's characters (it said "the text has 62 distinct
    // characters" of a text of 3).
    let mut given: Vec<char> = chars.clone();
    given.extend(['~', '|', '{']);
    given.sort_unstable();
    let with_vocab = DataOptions { vocabulary: Some(given.iter().collect()), ..options.clone() };
    let scored = Dataset::load(std::slice::from_ref(&path), &lm, &with_vocab).unwrap();
    assert!(
        scored.notes[0].ends_with(
            "the vocabulary given (a checkpoint's) has 20 characters; the model predicts 65 classes, so 45 of them \
             are never a target"
        ),
        "{:?}",
        scored.notes
    );
    // 172 held-out characters: two windows of 64 and their next characters.
    assert_eq!((data.train_len(), data.held_len()), (48, 2));
    let b = data.batch(Split::Train, &[3, 10]);
    assert_eq!((b[0].shape.as_slice(), b[1].shape.as_slice()), (&[2, 64][..], &[2, 64][..]));
    let id = |c: char| chars.binary_search(&c).unwrap() as f64;
    let expected: Vec<f64> = text.chars().skip(3).take(65).map(id).collect();
    assert_eq!(b[0].values[..64], expected[..64]);
    assert_eq!(b[1].values[..64], expected[1..65], "targets are the next characters");
    // Every held-out window is scored: the 2 make one smaller batch.
    assert_eq!(data.held_out(16), vec![vec![0, 1]], "2 held-out windows in a batch of 2");

    // Fewer evaluation windows than the held-out text holds: they are
    // spread over all of it, not the first ones in a row. 40% held out:
    // 688 characters, 10 whole windows of 64; 4 evaluated start at
    // windows 0, 2, 5 and 7.
    let spread = DataOptions { val_split: 0.4, eval_windows: 4, ..options.clone() };
    let data = Dataset::load(std::slice::from_ref(&path), &lm, &spread).unwrap();
    assert_eq!(data.held_len(), 4);
    let split = text.len() - 688;
    let b = data.batch(Split::HeldOut, &[0, 1, 2, 3]);
    for (i, window) in [0, 2, 5, 7].into_iter().enumerate() {
        let start = split + window * 64;
        let expected: Vec<f64> = text.chars().skip(start).take(64).map(id).collect();
        assert_eq!(b[0].values[i * 64..(i + 1) * 64], expected[..], "held-out window {i} starts at {start}");
    }

    // The transformer block: 256 classes, so bytes, one-hot.
    let block = signature("transformer/transformer_block.mlir");
    let data = Dataset::load(std::slice::from_ref(&path), &block, &options).unwrap();
    assert_eq!(data.loss_unit(), "nats/byte");
    let b = data.batch(Split::Train, &[0]);
    assert_eq!(b[0].shape, [1, 128, 256]);
    for (position, byte) in text.bytes().take(128).enumerate() {
        let row = &b[0].values[position * 256..(position + 1) * 256];
        assert_eq!(row.iter().sum::<f64>(), 1.0);
        assert_eq!(row[byte as usize], 1.0);
    }
    assert_eq!(b[1].values[..4], [b'o', b' ', b'b', b'e'].map(f64::from));
}

#[test]
fn arrays_from_safetensors_and_npy_feed_any_signature() {
    let dir = scratch("arrays");
    let sig = signature("cnn/digits_cnn.mlir");
    let rows = 40;
    let x: Vec<f32> = (0..rows * 64).map(|i| (i % 17) as f32 / 16.0).collect();
    let y: Vec<i64> = (0..rows).map(|i| (i % 10) as i64).collect();
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let yb: Vec<u8> = y.iter().flat_map(|v| v.to_le_bytes()).collect();
    let views = [
        ("input0", safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, 1, 8, 8], &xb).unwrap()),
        ("input1", safetensors::tensor::TensorView::new(safetensors::Dtype::I64, vec![rows], &yb).unwrap()),
    ];
    let st = dir.join("digits.safetensors");
    std::fs::write(&st, safetensors::serialize(views, &None).unwrap()).unwrap();
    let options = DataOptions { val_split: 0.25, ..Default::default() };
    let data = Dataset::load(std::slice::from_ref(&st), &sig, &options).unwrap();
    assert_eq!((data.train_len(), data.held_len()), (30, 10));
    let all = data.batch(Split::Train, &(0..30).collect::<Vec<_>>());
    assert_eq!(all[0].shape, [30, 1, 8, 8]);
    assert_eq!(all[1].dtype, DType::I32, "labels take the model's type");
    // A tensor beside the named inputs is refused by name, as an extra
    // `.npy` file is (it was read as nothing).
    let views = [
        ("input0", safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, 1, 8, 8], &xb).unwrap()),
        ("input1", safetensors::tensor::TensorView::new(safetensors::Dtype::I64, vec![rows], &yb).unwrap()),
        ("input2", safetensors::tensor::TensorView::new(safetensors::Dtype::I64, vec![rows], &yb).unwrap()),
    ];
    let three = dir.join("three.safetensors");
    std::fs::write(&three, safetensors::serialize(views, &None).unwrap()).unwrap();
    let e = Dataset::load(std::slice::from_ref(&three), &sig, &options).err().unwrap().to_string();
    assert!(e.contains("3 tensors for the model's 2 inputs") && e.contains("'input2' would be read by none"), "{e}");

    // Unnamed tensors go to the inputs their shapes fit, whatever order the
    // file stores them in (safetensors' writer puts the i64 labels first).
    let views = [
        ("x", safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, 1, 8, 8], &xb).unwrap()),
        ("y", safetensors::tensor::TensorView::new(safetensors::Dtype::I64, vec![rows], &yb).unwrap()),
    ];
    let unnamed = dir.join("unnamed.safetensors");
    std::fs::write(&unnamed, safetensors::serialize(views, &None).unwrap()).unwrap();
    let data = Dataset::load(std::slice::from_ref(&unnamed), &sig, &options).unwrap();
    assert_eq!(data.batch(Split::Train, &(0..30).collect::<Vec<_>>()), all);
    // Where shapes cannot tell them apart (a regression on its own
    // inputs' shape), unnamed tensors are refused, asking for names.
    let regression = "
        hl.param @fc1.weight : tensor<4x4xf32> owner \"fc1\" init <kaiming_uniform, gain = 0.5>
        hl.param @fc1.bias : tensor<4xf32> owner \"fc1\" init <uniform, low = -0.125, high = 0.125>
        func.func @forward(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
          %w = hl.get_param @fc1.weight : tensor<4x4xf32>
          %b = hl.get_param @fc1.bias : tensor<4xf32>
          %h = hl.linear %x, %w, %b : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>
          return %h : tensor<8x4xf32>
        }
        func.func @loss(%x: tensor<8x4xf32>, %t: tensor<8x4xf32>) -> tensor<f32> {
          %w = hl.get_param @fc1.weight : tensor<4x4xf32>
          %b = hl.get_param @fc1.bias : tensor<4xf32>
          %h = hl.linear %x, %w, %b : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>
          %l = hl.mse_loss %h, %t : tensor<8x4xf32>, tensor<8x4xf32>
          return %l : tensor<f32>
        }";
    let same = Signature::of_source(regression, "regression").unwrap();
    let fb: Vec<u8> = (0..rows * 4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let views = [
        ("x", safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, 4], &fb).unwrap()),
        ("target", safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, 4], &fb).unwrap()),
    ];
    let ambiguous = dir.join("ambiguous.safetensors");
    std::fs::write(&ambiguous, safetensors::serialize(views, &None).unwrap()).unwrap();
    let e = Dataset::load(std::slice::from_ref(&ambiguous), &same, &options).err().unwrap().to_string();
    assert!(e.contains("which is which is not known: name them input0, input1"), "{e}");

    // The same arrays as one .npy file per input.
    let npy = |name: &str, shape: &[u64], values: &dyn Fn(&mut dyn FnMut(f64))| -> PathBuf {
        let path = dir.join(name);
        let mut bytes = Vec::new();
        {
            use npyz::WriterBuilder;
            let mut w =
                npyz::WriteOptions::<f64>::new().default_dtype().shape(shape).writer(&mut bytes).begin_nd().unwrap();
            values(&mut |v| w.push(&v).unwrap());
            w.finish().unwrap();
        }
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let px = npy("x.npy", &[rows as u64, 1, 8, 8], &|push| x.iter().for_each(|&v| push(v as f64)));
    let py = npy("y.npy", &[rows as u64], &|push| y.iter().for_each(|&v| push(v as f64)));
    let from_npy = Dataset::load(&[px.clone(), py.clone()], &sig, &options).unwrap();
    assert_eq!(from_npy.batch(Split::Train, &(0..30).collect::<Vec<_>>()), all);

    // An array of the wrong shape names the input and both shapes.
    let wrong = npy("x64.npy", &[rows as u64, 64], &|push| x.iter().for_each(|&v| push(v as f64)));
    let e = Dataset::load(&[wrong, py.clone()], &sig, &options).err().unwrap().to_string();
    assert!(e.contains("input #0 of the model is [32, 1, 8, 8] f32") && e.contains("[40, 64]"), "{e}");
    assert!(e.contains("reshape it first, x.reshape(-1, 1, 8, 8)"), "{e}");

    // Narrower element types read as the same values (float16 images,
    // uint16 or int8 labels were refused; a safetensors file of them read).
    fn typed<T: npyz::Serialize + npyz::AutoSerialize>(path: &Path, shape: &[u64], values: Vec<T>) -> PathBuf {
        use npyz::WriterBuilder;
        let mut bytes = Vec::new();
        let mut w = npyz::WriteOptions::<T>::new().default_dtype().shape(shape).writer(&mut bytes).begin_nd().unwrap();
        values.iter().for_each(|v| w.push(v).unwrap());
        w.finish().unwrap();
        std::fs::write(path, bytes).unwrap();
        path.to_path_buf()
    }
    let shape = [rows as u64, 1, 8, 8];
    let half = typed(&dir.join("x-f16.npy"), &shape, x.iter().map(|&v| npyz::half::f16::from_f64(v as f64)).collect());
    for labels in [
        typed(&dir.join("y-u16.npy"), &[rows as u64], y.iter().map(|&v| v as u16).collect()),
        typed(&dir.join("y-i8.npy"), &[rows as u64], y.iter().map(|&v| v as i8).collect()),
        typed(&dir.join("y-u64.npy"), &[rows as u64], y.iter().map(|&v| v as u64).collect()),
    ] {
        let narrow = Dataset::load(&[half.clone(), labels], &sig, &options).unwrap();
        assert_eq!(narrow.batch(Split::Train, &(0..30).collect::<Vec<_>>()), all);
    }

    // 8-bit images train as their 0 to 255: said (PyTorch's ToTensor
    // gives 0 to 1); a float array of the same values is not.
    let bytes = typed(&dir.join("x-u8.npy"), &shape, x.iter().map(|&v| (v * 240.0) as u8).collect());
    let starting = DataOptions { starting: true, ..options.clone() };
    let read = Dataset::load(&[bytes.clone(), py.clone()], &sig, &starting).unwrap();
    assert!(
        read.notes.iter().any(|n| n.contains("x-u8.npy: 8-bit values, read as they are (0 to 255)")),
        "{:?}",
        read.notes
    );
    // Not for a resume, an evaluation or a prediction: the checkpoint's run
    // read them so.
    let again = Dataset::load(&[bytes, py.clone()], &sig, &options).unwrap();
    assert!(again.notes.iter().all(|n| !n.contains("8-bit")), "{:?}", again.notes);
    assert!(from_npy.notes.iter().all(|n| !n.contains("8-bit")), "{:?}", from_npy.notes);

    // Channels in the other order than the model's, either way: the
    // transpose is said (PyTorch's NCHW images for a channels-last model
    // were told to reshape, which scrambles each image).
    // A linear classifier of a batch of 4 images of `dims` (`8x8x3`).
    let images = |dims: &str| {
        format!(
            "hl.param @fc.weight : tensor<192x10xf32> owner \"fc\" init <kaiming_uniform, gain = 0.5>
            func.func @loss(%x: tensor<4x{dims}xf32>, %y: tensor<4xi32>) -> tensor<f32> {{
              %f = hl.reshape %x : tensor<4x{dims}xf32> to tensor<4x192xf32>
              %w = hl.get_param @fc.weight : tensor<192x10xf32>
              %h = hl.matmul %f, %w : tensor<4x192xf32>, tensor<192x10xf32>
              %l = hl.cross_entropy %h, %y : tensor<4x10xf32>, tensor<4xi32>
              return %l : tensor<f32>
            }}"
        )
    };
    let last = Signature::of_source(&images("8x8x3"), "nhwc").unwrap();
    let first = npy("nchw.npy", &[rows as u64, 3, 8, 8], &|push| (0..rows * 192).for_each(|i| push((i % 7) as f64)));
    let e = Dataset::load(&[first, py.clone()], &last, &options).err().unwrap().to_string();
    assert!(
        e.contains("its channels are first (NCHW): the model takes them last (NHWC), x.transpose(0, 2, 3, 1)"),
        "{e}"
    );
    let channels_first = Signature::of_source(&images("3x8x8"), "nchw").unwrap();
    let hwc = npy("nhwc.npy", &[rows as u64, 8, 8, 3], &|push| (0..rows * 192).for_each(|i| push((i % 7) as f64)));
    let e = Dataset::load(&[hwc, py.clone()], &channels_first, &options).err().unwrap().to_string();
    assert!(
        e.contains("its channels are last (NHWC): the model takes them first (NCHW), x.transpose(0, 3, 1, 2)"),
        "{e}"
    );

    // Integers the model's i32 input cannot hold are refused by place
    // (token ids of 2^40 were saturated to 2^31 - 1 without a word; ONNX's
    // int64 inputs are imported as i32).
    let lm = signature("char_lm/char_lm.mlir");
    let ids = npy("ids.npy", &[rows as u64, 64], &|push| {
        (0..rows * 64).for_each(|i| push(if i == 70 { (1u64 << 40) as f64 + 3.0 } else { (i % 60) as f64 }))
    });
    let next = npy("next.npy", &[rows as u64, 64], &|push| (0..rows * 64).for_each(|i| push((i % 60) as f64)));
    let e = Dataset::load(&[ids, next], &lm, &options).err().unwrap().to_string();
    assert!(
        e.contains("example 1, element 6 (counting from 0) is 1099511627779, outside what input #0 (I32) holds"),
        "{e}"
    );
}

/// The digits MLP's arrays in `dir`: `x.npy` (`rows` x 64 features `x`)
/// and `y.npy` (labels cycling 0..10).
fn digits_arrays(dir: &Path, rows: usize, x: &[f64]) -> [PathBuf; 2] {
    let y: Vec<f64> = (0..rows).map(|i| (i % 10) as f64).collect();
    [write_npy(&dir.join("x.npy"), &[rows as u64, 64], x), write_npy(&dir.join("y.npy"), &[rows as u64], &y)]
}

/// Arrays named as an imported model's inputs (`attention_mask.npy`) feed
/// those inputs in whatever order they are given (three arrays of one
/// shape fed each other's inputs without a word: a Hugging Face model
/// trained on its mask as token ids); one named for another's place,
/// beside an unnamed array, is refused by name.
#[test]
fn arrays_named_as_the_models_inputs_feed_those_inputs() {
    use aicf_compiler::import::onnx::{self, ImportOptions};
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../test/onnx/hf_gpt2_mask_dynamo.onnx");
    let imported = onnx::import(&fixture, &ImportOptions { batch: Some(4), ..Default::default() }).unwrap();
    assert!(imported.module.text.contains("hl.name = \"attention_mask\""), "{}", imported.module.text);
    let sig = Signature::of_source(&imported.module.text, "hf").unwrap();
    let names: Vec<Option<&str>> = sig.fed().iter().map(|i| i.name.as_deref()).collect();
    assert_eq!(names[..2], [Some("input_ids"), Some("attention_mask")], "{names:?}");
    let dir = std::env::temp_dir().join(format!("aicf-named-arrays-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rows, seq) = (8usize, sig.fed()[0].shape[1]);
    let ids: Vec<f64> = (0..rows * seq).map(|i| ((i * 7) % 50) as f64).collect();
    let mask: Vec<f64> = (0..rows * seq).map(|i| if i % seq < seq - 2 { 1.0 } else { 0.0 }).collect();
    let shape = [rows as u64, seq as u64];
    let ids_file = write_npy(&dir.join("input_ids.npy"), &shape, &ids);
    let mask_file = write_npy(&dir.join("attention_mask.npy"), &shape, &mask);
    let target_shape: Vec<u64> = sig.fed()[2..]
        .first()
        .map_or(vec![], |t| std::iter::once(rows as u64).chain(t.shape[1..].iter().map(|&d| d as u64)).collect());
    let targets =
        write_npy(&dir.join("next.npy"), &target_shape, &vec![1.0; target_shape.iter().product::<u64>() as usize]);
    let options = DataOptions { val_split: 0.0, ..DataOptions::default() };
    let data = Dataset::load(&[mask_file.clone(), ids_file.clone(), targets.clone()], &sig, &options).unwrap();
    assert!(
        data.notes
            .iter()
            .any(|n| n.contains("attention_mask.npy -> attention_mask") && n.contains("input_ids.npy -> input_ids")),
        "{:?}",
        data.notes
    );
    // (Rows in the split's order: the ids are those above 1, the mask's 0
    // and 1 with its last two places 0.)
    let fed = data.batch(Split::Train, &[0, 1]);
    assert!(fed[0].values.iter().any(|&v| v > 1.0), "the ids feed input_ids: {:?}", fed[0].values);
    assert!(fed[1].values.chunks(seq).all(|r| r[..seq - 2].iter().all(|&v| v == 1.0) && r[seq - 2..] == [0.0, 0.0]));
    // In the model's order: no note.
    let plain = Dataset::load(&[ids_file.clone(), mask_file.clone(), targets.clone()], &sig, &options).unwrap();
    assert!(!plain.notes.iter().any(|n| n.contains("named as the model's inputs")), "{:?}", plain.notes);
    // Predictions read the data inputs alone, named and in order (the
    // stand-in target was taken for the last file's input and refused).
    let predicting = DataOptions { predicting: true, ..options.clone() };
    Dataset::load(&[ids_file.clone(), mask_file.clone()], &sig, &predicting).unwrap();
    Dataset::load(&[mask_file.clone(), ids_file.clone()], &sig, &predicting).unwrap();
    // A safetensors file's tensors named as the inputs, the target by
    // another name: each goes to its input (three of one shape were
    // "which is which is not known").
    let tensors = [
        ("attention_mask", &mask, &shape[..]),
        ("input_ids", &ids, &shape[..]),
        ("next", &vec![1.0; target_shape.iter().product::<u64>() as usize], &target_shape[..]),
    ];
    let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|(n, v, s)| {
            (
                n.to_string(),
                v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
                s.iter().map(|&d| d as usize).collect(),
            )
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(n, b, s)| {
            (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::I32, s.clone(), b).unwrap())
        })
        .collect();
    let st = dir.join("named.safetensors");
    safetensors::tensor::serialize_to_file(views, &None, &st).unwrap();
    let from_st = Dataset::load(std::slice::from_ref(&st), &sig, &options).unwrap();
    let fed = from_st.batch(Split::Train, &[0, 1]);
    assert!(fed[0].values.iter().any(|&v| v > 1.0), "the ids feed input_ids: {:?}", fed[0].values);
    assert!(fed[1].values.iter().all(|&v| v == 0.0 || v == 1.0), "the mask feeds attention_mask");
    // The mask named for input_ids' place, where an unnamed array stands.
    let other = write_npy(&dir.join("ids_renamed.npy"), &shape, &ids);
    let e = Dataset::load(&[mask_file, other, targets], &sig, &options).err().unwrap().to_string();
    assert!(
        e.contains("attention_mask.npy is named as the model's input 'attention_mask' (#1) and is given #0"),
        "{e}"
    );
    // Two arrays of one name (from two folders): said as such.
    std::fs::create_dir_all(dir.join("other")).unwrap();
    let again = write_npy(&dir.join("other").join("input_ids.npy"), &shape, &ids);
    let e = Dataset::load(&[ids_file, again, dir.join("next.npy")], &sig, &options).err().unwrap().to_string();
    assert!(e.contains("are each named as the model's input 'input_ids'"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `values` as an f64 `.npy` array of `shape` at `path`.
fn write_npy(path: &Path, shape: &[u64], values: &[f64]) -> PathBuf {
    let mut bytes = Vec::new();
    {
        use npyz::WriterBuilder;
        let mut w =
            npyz::WriteOptions::<f64>::new().default_dtype().shape(shape).writer(&mut bytes).begin_nd().unwrap();
        values.iter().for_each(|v| w.push(v).unwrap());
        w.finish().unwrap();
    }
    std::fs::write(path, bytes).unwrap();
    path.to_path_buf()
}

/// A checkpoint trained on a table's scaled features scores arrays of the
/// same data by that scale (the features, not the labels); a table's
/// features are scaled by their largest magnitude however small (a floor of
/// 1e-12 left features of 1e-300 zero in f32), and all-zero ones are refused.
#[test]
fn feature_scales_apply_to_arrays_and_tiny_tables() {
    let dir = scratch("scales");
    let sig = signature("mlp/digits_mlp.mlir");
    let rows = 20;
    let x: Vec<f64> = (0..rows * 64).map(|i| (i % 17) as f64).collect();
    let arrays = digits_arrays(&dir, rows, &x);
    let ids: Vec<usize> = (0..rows).collect();
    let plain = Dataset::load(&arrays, &sig, &DataOptions { val_split: 0.0, ..Default::default() }).unwrap();
    let scaled =
        Dataset::load(&arrays, &sig, &DataOptions { val_split: 0.0, feature_scale: Some(16.0), ..Default::default() })
            .unwrap();
    let (p, s) = (plain.batch(Split::Train, &ids), scaled.batch(Split::Train, &ids));
    assert_eq!(plain.metadata.get("feature_scale").map(String::as_str), Some("1"));
    for (a, b) in p[0].values.iter().zip(&s[0].values) {
        assert_eq!(*a / 16.0, *b, "features divided by the checkpoint's scale");
    }
    assert_eq!(p[1].values, s[1].values, "labels are not scaled");

    // A table whose features are all about 1e-300.
    let mut csv = String::new();
    for r in 0..rows {
        let cells: Vec<String> = (0..64).map(|c| format!("{:e}", ((r + c) % 17) as f64 * 1e-300)).collect();
        csv.push_str(&format!("{},{}\n", cells.join(","), r % 10));
    }
    let tiny = dir.join("tiny.csv");
    std::fs::write(&tiny, &csv).unwrap();
    let data = Dataset::load(std::slice::from_ref(&tiny), &sig, &DataOptions::default()).unwrap();
    let train: Vec<usize> = (0..data.train_len()).collect();
    let features = &data.batch(Split::Train, &train)[0].values;
    let largest = features.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(largest > 0.5 && largest <= 1.0, "the largest training feature is scaled to 1, got {largest}");

    let zeros: String = (0..rows).map(|r| format!("{}{}\n", "0,".repeat(64), r % 10)).collect();
    let zero = dir.join("zero.csv");
    std::fs::write(&zero, zeros).unwrap();
    let e = Dataset::load(std::slice::from_ref(&zero), &sig, &DataOptions::default()).err().unwrap().to_string();
    assert!(e.contains("zero.csv") && e.contains("every feature of the training rows is 0"), "{e}");
}

/// Arrays are checked where they are read, each fault placed by example and
/// element: a label of a multi-dimensional target (its flat index was called
/// the example: "example 159" of 100), a token id beyond the table it
/// indexes (the gather kernel named a position in a shuffled batch at the
/// first step), and features far from unit scale (digits times 1e30 trained
/// to a loss of 1e29 without a word).
#[test]
fn arrays_are_checked_where_they_are_read() {
    let dir = scratch("array-checks");
    let lm = signature("char_lm/char_lm.mlir");
    assert_eq!(lm.inputs[0].indexes, Some(65), "the token ids index the embedding's 65 rows");
    assert_eq!(lm.inputs[1].indexes, None);
    // Through a call (`@loss` calling `@forward`, which the pipeline
    // inlines) too.
    let called = r#"
hl.param @emb.weight : tensor<10x4xf32> owner "emb" init <normal>
func.func @forward(%t: tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  %e = hl.get_param @emb.weight : tensor<10x4xf32>
  %x = hl.gather %e[%t] axis = 0 : tensor<10x4xf32>, tensor<2x3xi32>
  return %x : tensor<2x3x4xf32>
}
func.func @loss(%t: tensor<2x3xi32>, %y: tensor<2x3xi32>) -> tensor<f32> {
  %x = func.call @forward(%t) : (tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %l = hl.cross_entropy %x, %y : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %l : tensor<f32>
}
"#;
    let sig = Signature::of_source(called, "called.mlir").unwrap();
    assert_eq!((sig.inputs[0].indexes, sig.inputs[1].indexes), (Some(10), None));
    // Ids that only choose, as a select's condition, between other indices
    // index nothing themselves (a mask of padding choosing positions).
    let masked = r#"
hl.param @pos.weight : tensor<5x4xf32> owner "pos" init <normal>
func.func @forward(%t: tensor<2x3xi32>, %p: tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  %e = hl.get_param @pos.weight : tensor<5x4xf32>
  %z = hl.constant dense<0> : tensor<2x3xi32>
  %m = hl.compare eq, %t, %z : tensor<2x3xi32>, tensor<2x3xi32>
  %i = hl.select %m, %z, %p : tensor<2x3xi1>, tensor<2x3xi32>, tensor<2x3xi32>
  %x = hl.gather %e[%i] axis = 0 : tensor<5x4xf32>, tensor<2x3xi32>
  return %x : tensor<2x3x4xf32>
}
func.func @loss(%t: tensor<2x3xi32>, %p: tensor<2x3xi32>, %y: tensor<2x3xi32>) -> tensor<f32> {
  %x = func.call @forward(%t, %p) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %l = hl.cross_entropy %x, %y : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %l : tensor<f32>
}
"#;
    let sig = Signature::of_source(masked, "masked.mlir").unwrap();
    assert_eq!((sig.inputs[0].indexes, sig.inputs[1].indexes), (None, Some(5)));
    let (rows, context) = (20u64, 64u64);
    let ids: Vec<f64> = (0..rows * context).map(|i| (i % 65) as f64).collect();
    let npy = |name: &str, values: &[f64]| write_npy(&dir.join(name), &[rows, context], values);
    let (x, y) = (npy("ids.npy", &ids), npy("next.npy", &ids));
    Dataset::load(&[x.clone(), y.clone()], &lm, &DataOptions::default()).unwrap();
    let mut bad = ids.clone();
    bad[9 * 64 + 15] = 99.0;
    let e = Dataset::load(&[x.clone(), npy("bad-next.npy", &bad)], &lm, &DataOptions::default()).err().unwrap();
    assert!(
        e.to_string().contains("bad-next.npy: example 9, element 15 (counting from 0): the label 99 is not a class"),
        "{e}"
    );
    bad[9 * 64 + 15] = 70.0;
    let e = Dataset::load(&[npy("bad-ids.npy", &bad), y.clone()], &lm, &DataOptions::default()).err().unwrap();
    assert!(
        e.to_string().contains(
            "bad-ids.npy: example 9, element 15 (counting from 0) is 70: input #0 indexes a table of 65 rows"
        ),
        "{e}"
    );

    let sig = signature("mlp/digits_mlp.mlir");
    let x: Vec<f64> = (0..40 * 64).map(|i| (i % 17) as f64).collect();
    let [_, labels] = digits_arrays(&dir, 40, &x);
    let huge: Vec<f64> = x.iter().map(|v| v * 1e30).collect();
    let data = Dataset::load(
        &[write_npy(&dir.join("huge.npy"), &[40, 64], &huge), labels.clone()],
        &sig,
        &DataOptions::default(),
    )
    .unwrap();
    assert!(
        data.notes
            .iter()
            .any(|n| n.contains("huge.npy: input #0's values are at a scale of 1.6e31") && n.contains("--standardize")),
        "{:?}",
        data.notes
    );
    // The digits' own 0..16 are no such case, nor standardized values.
    let [plain, _] = digits_arrays(&dir, 40, &x);
    assert_eq!(
        Dataset::load(&[plain, labels.clone()], &sig, &DataOptions::default()).unwrap().notes,
        Vec::<String>::new()
    );
    let standardized = DataOptions { standardize: true, ..Default::default() };
    let data = Dataset::load(&[dir.join("huge.npy"), labels], &sig, &standardized).unwrap();
    assert_eq!(data.notes, Vec::<String>::new());
    // Labels of 3 of the model's 10 classes: the others are never a target.
    let three: Vec<f64> = (0..40).map(|i| (i % 3) as f64).collect();
    let three = write_npy(&dir.join("three.npy"), &[40], &three);
    let [plain, _] = digits_arrays(&dir, 40, &x);
    let data = Dataset::load(&[plain, three], &sig, &DataOptions::default()).unwrap();
    assert_eq!(
        data.missing_classes("three.npy", &sig).as_deref(),
        Some(
            "three.npy: the training rows hold 3 labels of the model's 10 classes (0, 1, 2); the others are never a target"
        )
    );
    // (Said by a training run, not by every load: scoring a file of some
    // classes is no such case.)
    assert_eq!(data.notes, Vec::<String>::new());
}

/// Arrays whose shape differs from the input's only by axes of 1 (labels
/// saved as `[N, 1]`, as PyTorch code often keeps them, for a model's `[B]`
/// labels) are read in their order; another shape is still refused.
#[test]
fn arrays_with_axes_of_one_feed_inputs_without_them() {
    let dir = scratch("data-axes-of-one");
    let sig = signature("mlp/digits_mlp.mlir");
    let x: Vec<f64> = (0..40 * 64).map(|i| (i % 17) as f64).collect();
    let y: Vec<f64> = (0..40).map(|i| (i % 10) as f64).collect();
    let [plain, flat] = digits_arrays(&dir, 40, &x);
    let column = write_npy(&dir.join("y-column.npy"), &[40, 1], &y);
    let a = Dataset::load(&[plain.clone(), flat], &sig, &DataOptions::default()).unwrap();
    let b = Dataset::load(&[plain.clone(), column], &sig, &DataOptions::default()).unwrap();
    let ids: Vec<usize> = (0..8).collect();
    let (fa, fb) = (a.batch(Split::Train, &ids), b.batch(Split::Train, &ids));
    assert_eq!(fa[1].shape, fb[1].shape);
    assert_eq!(fa[1].values, fb[1].values);
    let doubled: Vec<f64> = y.iter().flat_map(|&v| [v, v]).collect();
    let pairs = write_npy(&dir.join("y-pairs.npy"), &[40, 2], &doubled);
    let Err(e) = Dataset::load(&[plain, pairs], &sig, &DataOptions::default()) else { panic!("[40, 2] labels read") };
    let e = e.to_string();
    assert!(e.contains("(40 examples of []); the array is [40, 2]"), "{e}");
}

/// What the data holds that would make training learn little is said
/// before it trains, where it is: a feature on another scale than the rest
/// (arrays train as they are; a table's features share one scale, so the
/// others shrink to nothing), by feature; a NaN by example and element; a
/// row count that differs between arrays, naming both files.
#[test]
fn data_on_other_scales_and_mismatched_arrays_are_named() {
    let dir = scratch("data-notes");
    let sig = signature("mlp/digits_mlp.mlir");
    let rows = 40;
    let npy = |name: &str, shape: &[u64], values: &[f64]| write_npy(&dir.join(name), shape, values);
    let x: Vec<f64> = (0..rows * 64).map(|i| if i % 64 == 3 { 1e30 } else { (i % 17) as f64 }).collect();
    let y: Vec<f64> = (0..rows).map(|i| (i % 10) as f64).collect();
    let py = npy("y.npy", &[rows as u64], &y);
    let data =
        Dataset::load(&[npy("x.npy", &[rows as u64, 64], &x), py.clone()], &sig, &DataOptions::default()).unwrap();
    let note = data.notes.first().expect("a feature of 1e30 among features of at most 16 is named").clone();
    assert!(note.contains("feature 3 (counting from 0) of input #0 reaches 1.0000e30"), "{note}");
    assert!(note.contains("arrays train as they are"), "{note}");

    // A table: the fourth column up to 100 times the others'.
    let csv: String = (0..rows)
        .map(|r| {
            let cells: Vec<String> =
                (0..64).map(|c| if c == 3 { (r * 40) as f64 } else { ((r + c) % 17) as f64 }.to_string()).collect();
            format!("{},{}\n", cells.join(","), r % 10)
        })
        .collect();
    let table = dir.join("t.csv");
    std::fs::write(&table, csv).unwrap();
    let note = Dataset::load(std::slice::from_ref(&table), &sig, &DataOptions::default()).unwrap().notes.remove(0);
    assert!(note.contains("feature 3 (counting from 0) of input #0 reaches 1.5600e3"), "{note}");
    assert!(note.contains("a table's features are divided by one shared scale"), "{note}");
    // The digits themselves are on one scale.
    let digits = Dataset::load(&[digits()], &sig, &DataOptions::default()).unwrap();
    assert_eq!((digits.outlier, digits.notes), (None, vec![]));
    // Standardized, a 1e30 typed for 1.30 is still named, by its value in
    // the file (standardized it is a few deviations out).
    let mut typo = x.clone();
    typo.iter_mut().filter(|v| **v == 1e30).for_each(|v| *v = 1.0);
    typo[7 * 64 + 5] = 1e30;
    let standardized = DataOptions { standardize: true, ..Default::default() };
    let data = Dataset::load(&[npy("typo.npy", &[rows as u64, 64], &typo), py.clone()], &sig, &standardized).unwrap();
    let outlier = data.outlier.expect("the typo is named");
    assert!(outlier.contains("element 5 of example 7") && outlier.contains("1e30"), "{outlier}");

    // A NaN is placed by example and element.
    let mut nan = vec![1.0; rows * 64];
    nan[12 * 64 + 9] = f64::NAN;
    let e = Dataset::load(&[npy("nan.npy", &[rows as u64, 64], &nan), py.clone()], &sig, &DataOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nan.npy: example 12, element 9 (counting from 0) is NaN"), "{e}");

    // One array short of the other's rows: both named, each with its count.
    let short = npy("short.npy", &[rows as u64 - 10, 64], &vec![1.0; (rows - 10) * 64]);
    let e = Dataset::load(&[short, py], &sig, &DataOptions::default()).err().unwrap().to_string();
    assert!(e.contains("short.npy has 30 examples") && e.contains("y.npy has 40"), "{e}");
}

/// `standardize`: an array's features read at mean 0 and deviation 1 over
/// the training rows (a constant feature left at deviation 1), the
/// statistics in the metadata, and data loaded with those statistics read
/// by them rather than its own.
#[test]
fn standardized_arrays_read_by_the_training_rows_statistics() {
    let dir = scratch("standardize");
    let sig = signature("mlp/digits_mlp.mlir");
    let rows = 40;
    // Feature f of row r: f * 100 + r (feature 0 constant: 7).
    let x: Vec<f64> =
        (0..rows * 64).map(|i| if i % 64 == 0 { 7.0 } else { ((i % 64) * 100 + i / 64) as f64 }).collect();
    let arrays = digits_arrays(&dir, rows, &x);
    let options = DataOptions { standardize: true, ..Default::default() };
    let data = Dataset::load(&arrays, &sig, &options).unwrap();
    let train: Vec<usize> = (0..data.train_len()).collect();
    let features = data.batch(Split::Train, &train)[0].values.clone();
    for f in [0, 1, 63] {
        let column: Vec<f64> = features.chunks(64).map(|r| r[f] as f64).collect();
        let mean = column.iter().sum::<f64>() / column.len() as f64;
        let var = column.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / column.len() as f64;
        assert!(mean.abs() < 1e-5, "feature {f}: mean {mean}");
        let want = if f == 0 { 0.0 } else { 1.0 };
        assert!((var - want).abs() < 1e-4, "feature {f}: variance {var}, want {want}");
    }
    let stats = data.metadata.get("feature_standardize").expect("the statistics are kept").clone();
    // Other data (every value + 1000) read with them: shifted by
    // 1000 / deviation, not standardized again.
    let shifted: Vec<f64> = x.iter().map(|v| v + 1000.0).collect();
    let other = [write_npy(&dir.join("x2.npy"), &[rows as u64, 64], &shifted), arrays[1].clone()];
    let given = DataOptions { feature_stats: Some(stats), ..Default::default() };
    let read = Dataset::load(&other, &sig, &given).unwrap();
    let mean: f64 = read.batch(Split::Train, &(0..read.train_len()).collect::<Vec<_>>())[0]
        .values
        .chunks(64)
        .map(|r| r[1] as f64)
        .sum::<f64>()
        / read.train_len() as f64;
    assert!(mean > 10.0, "feature 1 of shifted data read by the first data's statistics: mean {mean}");
}

#[test]
fn data_that_does_not_fit_is_one_error_naming_the_input() {
    let dir = scratch("mismatch");
    let lm = signature("char_lm/char_lm.mlir");
    let mlp = signature("mlp/digits_mlp.mlir");
    let options = DataOptions::default();
    let err = |paths: &[PathBuf], sig: &Signature| Dataset::load(paths, sig, &options).err().unwrap().to_string();

    let e = err(&[digits()], &lm);
    assert!(e.contains("a CSV table") && e.contains("Data [16, 64] i32"), "{e}");

    let text = dir.join("t.txt");
    std::fs::write(&text, "hello world\n".repeat(100)).unwrap();
    let e = err(std::slice::from_ref(&text), &mlp);
    assert!(e.contains("text feeds token ids [batch, context]") && e.contains("[32, 64] f32"), "{e}");

    let wide = dir.join("wide.csv");
    std::fs::write(&wide, "1,2,3,4\n5,6,7,8\n").unwrap();
    let e = err(std::slice::from_ref(&wide), &mlp);
    assert!(e.contains("rows have 3 features and a label") && e.contains("[32, 64] f32"), "{e}");

    let nan = dir.join("nan.csv");
    let row = |v: &str| format!("{}{v},1\n", "0,".repeat(63));
    std::fs::write(&nan, format!("{}{}", row("0"), row("nan"))).unwrap();
    let e = err(std::slice::from_ref(&nan), &mlp);
    assert!(e.contains("nan.csv:2: column 64 is NaN, not a finite number"), "{e}");

    let label = dir.join("label.csv");
    std::fs::write(&label, format!("{}{}", row("0"), format!("{}0,12\n", "0,".repeat(63)))).unwrap();
    let e = err(std::slice::from_ref(&label), &mlp);
    assert!(e.contains("label.csv:2: the label 12 is not a class of the model's 10 (0 to 9)"), "{e}");

    let many = dir.join("many.txt");
    std::fs::write(&many, (0..100u32).filter_map(char::from_u32).map(|c| c.to_string()).collect::<String>()).unwrap();
    let e = err(std::slice::from_ref(&many), &lm);
    assert!(e.contains("100 distinct characters; the model predicts 65 classes: 35 more than it predicts"), "{e}");
    // The rarest are named, and a carriage return as the line endings.
    let crlf = dir.join("crlf.txt");
    let text: String = (0..65u32).map(|i| char::from_u32(33 + i).unwrap().to_string().repeat(2)).collect();
    std::fs::write(&crlf, format!("{text}\r\n")).unwrap();
    let e = err(std::slice::from_ref(&crlf), &lm);
    assert!(
        e.contains("67 distinct characters; the model predicts 65 classes: 2 more than it predicts; the rarest: "),
        "{e}"
    );
    assert!(e.contains("'\\n' (1x), '\\r' (1x); '\\r' is Windows (CRLF) line endings"), "{e}");

    let e = err(&[dir.join("absent.csv")], &mlp);
    assert!(e.contains("absent.csv") && e.contains("No such file"), "{e}");
    let e = err(&[dir.join("data.bin")], &mlp);
    assert!(e.contains("not a data file AICF reads"), "{e}");
}

/// The losses of `steps` train steps of the char LM (dropout's seed and
/// offset fixed per step) compiled with `budget`, and the arena of its
/// train step. Every GEMM runs the generated kernel: the registry's
/// choices depend on the machine's load (two trainers beside other tests,
/// on an empty registry, chose differently between near ties, or one
/// re-measured a drifted choice), and another candidate sums in another
/// order.
fn char_lm_losses(budget: Option<MemoryBudget>, dir: &Path, steps: usize) -> (Vec<f64>, u64) {
    let options = Options {
        memory_budget: budget,
        device: Device::Cpu { threads: 2 },
        cache_dir: dir.to_path_buf(),
        gemm: Some("generated".into()),
        ..Options::default()
    };
    let mut t = Trainer::from_file(&example("char_lm/char_lm.mlir"), options).unwrap();
    let arena = t.backend().function("train_step").unwrap().arena_bytes;
    let mut losses = Vec::new();
    for s in 0..steps {
        let tokens: Vec<f64> = (0..16 * 64).map(|i| ((i * 7 + s * 13) % 65) as f64).collect();
        let targets: Vec<f64> = (0..16 * 64).map(|i| ((i * 7 + s * 13 + 1) % 65) as f64).collect();
        let inputs = [
            Tensor::new([16, 64], DType::I32, tokens),
            Tensor::new([16, 64], DType::I32, targets),
            Tensor::scalar(5.0, DType::I64),
            Tensor::scalar((s << 24) as f64, DType::I64),
        ];
        losses.push(t.step(&inputs.iter().collect::<Vec<_>>(), 3e-3).unwrap().loss);
    }
    (losses, arena)
}

/// A budgeted plan recomputes activations instead of keeping them: its
/// arena is smaller and it trains to the same losses, step for step.
#[test]
fn a_budgeted_plan_trains_like_the_unbudgeted_one() {
    let (free, arena) = char_lm_losses(None, &scratch("budget-none"), 6);
    let (budgeted, small) = char_lm_losses(Some(MemoryBudget::Fraction(0.6)), &scratch("budget-60"), 6);
    assert!(small <= arena * 6 / 10 + 64, "the budgeted arena {small} is over 60% of {arena}");
    assert_eq!(free, budgeted, "recomputing gives the same numbers");
    assert!(free.last() < free.first(), "the LM trains: {free:?}");
    // A budget below what any recomputation reaches is a located error.
    let options = Options { memory_budget: Some(MemoryBudget::Bytes(64)), ..Options::default() };
    let e =
        Trainer::from_file(&example("char_lm/char_lm.mlir"), Options { cache_dir: scratch("budget-tiny"), ..options })
            .err()
            .unwrap()
            .to_string();
    assert!(e.contains("ll-plan-memory") && e.contains("64"), "{e}");
}

/// The trace-event format's complete events: name, phase "X", start and
/// duration in microseconds, process and thread ids.
fn check_trace(path: &Path) -> usize {
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().expect("a traceEvents array");
    let mut kernels = 0;
    for e in events {
        assert!(e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        match e["ph"].as_str() {
            Some("X") => {
                assert!(e["ts"].as_f64().is_some_and(|t| t >= 0.0), "{e}");
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
                assert!(e["args"]["kernel"].as_str().is_some_and(|k| k.starts_with("aicf_")), "{e}");
                assert!(e["args"]["hl"].as_str().is_some_and(|h| h.contains("digits_cnn.mlir:")), "{e}");
                kernels += 1;
            }
            Some("M") => assert!(e["args"]["name"].is_string(), "{e}"),
            other => panic!("an event of phase {other:?}: {e}"),
        }
    }
    kernels
}

/// The loop end to end on the CNN: metrics per epoch, the plot, a profile
/// of three steps in the trace-event format, a checkpoint, and a resume
/// that ends where a straight run does.
#[test]
fn fit_writes_metrics_plot_profile_and_resumes() {
    let dir = scratch("fit");
    // One GEMM candidate throughout (see `char_lm_losses`): a run's bits do
    // not depend on the registry's choices under the machine's load.
    let options = Options { device: Device::Cpu { threads: 2 }, gemm: Some("generated".into()), ..Options::default() };
    let run = |epochs: usize, ckpt: &str, resume: bool, profile: Option<PathBuf>| RunOptions {
        epochs,
        lr: 3e-3,
        out: dir.join(format!("run-{ckpt}")),
        checkpoint_dir: Some(dir.join(ckpt)),
        resume,
        profile,
        profile_steps: 3,
        ..RunOptions::default()
    };
    let model = example("cnn/digits_cnn.mlir");
    let trace = dir.join("trace.json");
    let straight =
        run::fit(&model, &options, &[digits()], &run(3, "straight", false, Some(trace.clone())), &mut Quiet).unwrap();
    assert_eq!(straight.records.len(), 3);
    assert_eq!(straight.steps, 3 * 45);
    assert!(straight.records[2].val_accuracy > 0.8, "{:?}", straight.records[2]);
    assert_eq!(straight.trace.as_deref(), Some(trace.as_path()));
    let kernels_per_step = straight_kernels(&dir);
    assert_eq!(check_trace(&trace), 3 * kernels_per_step, "three steps' kernel calls");
    let metrics = std::fs::read_to_string(&straight.metrics).unwrap();
    assert_eq!(metrics.lines().count(), 3);
    assert!(std::fs::read_to_string(&straight.plot).unwrap().contains("held-out accuracy"));

    run::fit(&model, &options, &[digits()], &run(2, "resumed", false, None), &mut Quiet).unwrap();
    let resumed = run::fit(&model, &options, &[digits()], &run(3, "resumed", true, None), &mut Quiet).unwrap();
    assert_eq!(resumed.records.len(), 3, "the resumed run keeps the records it continues");
    // The same tensors, bit for bit, and the same record of the run. Not
    // the GEMM choices the checkpoint carries (nor the metadata's checksum
    // over them): they hold the machine's registry decisions of the
    // run's ISA and threads, which tests running beside this one add to
    // while it runs (on an empty registry the two files differed there).
    let read = |ckpt: &str| {
        let (tensors, mut metadata) = aicf_runtime::checkpoint::load(&dir.join(ckpt).join("last.safetensors")).unwrap();
        metadata.retain(|k, _| k != "aicf.gemm" && k != aicf_runtime::checkpoint::METADATA_CHECKSUM);
        let tensors: Vec<(String, Vec<u8>)> = tensors.into_values().map(|e| (e.name, e.bytes)).collect();
        (tensors, metadata)
    };
    assert_eq!(read("straight"), read("resumed"), "a resumed run ends where a straight one does");

    // A resume with another learning rate is refused before compiling.
    let mut other = run(4, "resumed", true, None);
    other.lr = 1e-3;
    let e = run::fit(&model, &options, &[digits()], &other, &mut Quiet).err().unwrap().to_string();
    assert!(e.contains("trained with lr 0.003; this run asks for 0.001"), "{e}");
}

/// What a run printed of its adaptive decisions.
#[derive(Default)]
struct Decisions(Vec<String>);
impl run::Report for Decisions {
    fn decision(&mut self, summary: &str) {
        self.0.push(summary.to_string());
    }
}

/// A growth the probe check rejects is reported like an accepted one (the
/// run goes on with the model it had; before, only the decision log showed
/// it), and the metrics give the rate the grown model trained at.
#[test]
fn fit_reports_a_rejected_growth_and_the_applied_rate() {
    let dir = scratch("rejected");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "max_loss_increase = 0.001\n\
         [[rule]]\n\
         when = \"steps\"\n\
         at = 20\n\
         action = { op = \"widen\", layer = \"fc1\", width = 32, rule = \"net2wider\", noise = 20.0 }\n\
         [[rule]]\n\
         when = \"steps\"\n\
         at = 30\n\
         lr_factor = 0.5\n\
         action = { op = \"widen\", layer = \"fc1\", width = 24, rule = \"zero-out\" }\n",
    )
    .unwrap();
    let options = Options { device: Device::Cpu { threads: 1 }, ..Options::default() };
    let run = RunOptions { epochs: 1, lr: 3e-3, out: dir.join("run"), adapt: Some(policy), ..RunOptions::default() };
    let mut report = Decisions::default();
    let summary = run::fit(&example("grow/narrow_mlp.mlir"), &options, &[digits()], &run, &mut report).unwrap();
    assert_eq!(report.0.len(), 2, "{:?}", report.0);
    assert!(
        report.0[0].contains("widen fc1 to 32 (net2wider) on step 20 reached -> rejected")
            && report.0[0].contains("the probe loss rose by"),
        "{:?}",
        report.0
    );
    assert!(report.0[1].contains("widen fc1 to 24 (zero-out) on step 30 reached -> accepted"), "{:?}", report.0);
    let record = &summary.records[0];
    assert_eq!((record.lr, record.lr_applied), (3e-3, Some(1.5e-3)), "{record:?}");
}

/// Kernel calls of the CNN's train step at its own batch of 32.
fn straight_kernels(dir: &Path) -> usize {
    for entry in std::fs::read_dir(dir.join("run-straight")).unwrap() {
        let Ok(text) = std::fs::read_to_string(entry.unwrap().path().join("manifest.json")) else { continue };
        let manifest: aicf_runtime::artifact::Manifest = serde_json::from_str(&text).unwrap();
        let step = manifest.functions.iter().find(|f| f.name == "train_step").unwrap();
        if step.args[0].shape[0] == 32 {
            return step.calls.len();
        }
    }
    panic!("no artifact of the CNN at batch 32")
}

/// A cached artifact whose kernel library was cut short (a process killed
/// while writing it, a full disk) or whose manifest was edited is compiled
/// again, never loaded; an intact one is reused.
#[test]
fn a_damaged_cache_entry_is_compiled_again() {
    let cache = scratch("damaged-cache");
    let options = || Options { device: Device::Cpu { threads: 1 }, cache_dir: cache.clone(), ..Options::default() };
    let model = example("mlp/digits_mlp.mlir");
    let first = Trainer::from_file(&model, options()).unwrap();
    let dir = first.compiled()[0].dir.clone();
    assert!(first.compiled()[0].seconds.is_some(), "a cold cache compiles");
    drop(first);
    let again = Trainer::from_file(&model, options()).unwrap();
    assert!(again.compiled()[0].seconds.is_none(), "an intact entry is reused");
    drop(again);

    let so = dir.join("kernels.so");
    let bytes = std::fs::read(&so).unwrap();
    std::fs::write(&so, &bytes[..bytes.len() / 2]).unwrap();
    let mut repaired = Trainer::from_file(&model, options()).unwrap();
    assert!(repaired.compiled()[0].seconds.is_some(), "a truncated library is compiled again");
    let x = Tensor::new([32, 64], DType::F32, vec![0.5; 32 * 64]);
    let y = Tensor::new([32], DType::I32, vec![3.0; 32]);
    assert!(repaired.step(&[&x, &y], 1e-2).unwrap().loss.is_finite());
    drop(repaired);

    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replacen("\"arena_bytes\": ", "\"arena_bytes\": 1", 1)).unwrap();
    let edited = Trainer::from_file(&model, options()).unwrap();
    assert!(edited.compiled()[0].seconds.is_some(), "an edited manifest is compiled again");
}

/// What a manifest sealed again after an edit (its checksum is no
/// signature) or a kernel file that is no file cannot do: a library GEMM's
/// sizes past its operands, kernels.so dropped from the hashed files (a
/// truncated one then stopped the process with SIGBUS), kernels.so linked
/// to /dev/zero (hashing it never ended), a directory without a manifest:
/// each is an error that names it.
#[test]
fn an_artifact_resealed_after_an_edit_or_with_a_device_for_a_kernel_file_is_refused() {
    use aicf_compiler::codegen::KernelCache;
    use aicf_compiler::pipeline::{Target, TrainOptions, compile_source};
    use aicf_runtime::artifact::Manifest;
    let dir = scratch("resealed-artifact");
    let target = Target::Cpu(KernelCache::new(dir.join("kernels")));
    let source = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    compile_source(&source, "m", &TrainOptions::default(), None, &target, &dir.join("good")).unwrap();
    let open = |d: &Path| aicf_runtime::open(d, &Device::Cpu { threads: 1 }, 0).err().map(|e| e.to_string());
    assert_eq!(open(&dir.join("good")), None);
    let edited = |name: &str, edit: &dyn Fn(&mut Manifest)| -> PathBuf {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["kernels.so", "manifest.json"] {
            std::fs::copy(dir.join("good").join(f), to.join(f)).unwrap();
        }
        let text = std::fs::read_to_string(to.join("manifest.json")).unwrap();
        let mut m: Manifest = serde_json::from_str(&text).unwrap();
        edit(&mut m);
        m.checksum = m.compute_checksum();
        std::fs::write(to.join("manifest.json"), serde_json::to_string(&m).unwrap()).unwrap();
        to
    };
    let gemm = edited("gemm", &|m| {
        let g = m.functions.iter_mut().flat_map(|f| f.calls.iter_mut()).find_map(|c| c.library.as_mut()).unwrap();
        g.m *= 64;
    });
    let e = open(&gemm).unwrap();
    assert!(e.contains("its library GEMM A (operand") && e.contains("past its"), "{e}");
    let unhashed = edited("unhashed", &|m| {
        m.files.remove("kernels.so");
    });
    let e = open(&unhashed).unwrap();
    assert!(e.contains("kernels.so: not among the files the manifest checks"), "{e}");
    let device = edited("device", &|_| {});
    std::fs::remove_file(device.join("kernels.so")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", device.join("kernels.so")).unwrap();
    let e = open(&device).unwrap();
    assert!(e.contains("kernels.so: not a regular file"), "{e}");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = open(&empty).unwrap();
    assert!(e.contains("a directory without manifest.json: not a compiled artifact"), "{e}");
}

/// The kernel cache checks each object against the hash written after it:
/// truncated objects are compiled again, and the artifact built from them
/// runs.
#[test]
fn damaged_kernel_cache_objects_are_compiled_again() {
    use aicf_compiler::codegen::KernelCache;
    use aicf_compiler::pipeline::{Target, TrainOptions, compile_source};
    let dir = scratch("damaged-kernels");
    let target = Target::Cpu(KernelCache::new(dir.join("kernels")));
    let source = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    let compile = |out: &str| compile_source(&source, "m", &TrainOptions::default(), None, &target, &dir.join(out));
    let cold = compile("a").unwrap();
    assert_eq!(cold.compiled_kernels, cold.kernels);
    assert_eq!(compile("b").unwrap().compiled_kernels, 0, "an intact cache compiles nothing");
    let mut damaged = 0;
    for entry in std::fs::read_dir(dir.join("kernels")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "o") {
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0);
    let repaired = compile("c").unwrap();
    assert_eq!(repaired.compiled_kernels, repaired.kernels, "every damaged object is compiled again");
    let mut session = aicf_runtime::open(&dir.join("c"), &Device::Cpu { threads: 1 }, 0).unwrap();
    let x = Tensor::new([32, 64], DType::F32, vec![0.25; 32 * 64]);
    let out = session.call("forward", &[&x]).unwrap();
    assert!(out[0].values.iter().all(|v| v.is_finite()));
}

/// A checkpoint whose step count no run reaches (a damaged or crafted
/// file) is refused with its path, and the trainer's state is untouched.
#[test]
fn a_checkpoint_with_an_impossible_step_count_is_refused() {
    let dir = scratch("step-count");
    let options = Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    let mut t = Trainer::from_file(&example("mlp/digits_mlp.mlir"), options).unwrap();
    let good = dir.join("good.safetensors");
    t.save_checkpoint(&good, &Default::default()).unwrap();
    let (entries, mut meta) = aicf_runtime::checkpoint::load(&good).unwrap();
    meta.insert("step".into(), u64::MAX.to_string());
    let bad = dir.join("bad.safetensors");
    aicf_runtime::checkpoint::save(&bad, &entries.into_values().collect::<Vec<_>>(), &meta).unwrap();
    let before = t.state();
    let e = t.load_checkpoint(&bad).err().unwrap().to_string();
    assert!(e.contains("bad.safetensors") && e.contains("is not a step count"), "{e}");
    assert_eq!(t.state(), before);
    assert_eq!(t.steps(), 0);
}

/// A checkpoint without one of its tensors names what it lacks: a
/// parameter as another model's, the optimizer's state as another
/// optimizer's (a missing bias was said to be "saved with another
/// optimizer?"). Evaluation's load needs no optimizer state: a checkpoint
/// stripped to its weights loads them, where a train step's resume refuses it.
#[test]
fn a_checkpoint_missing_a_tensor_names_what_it_is() {
    let dir = scratch("missing-tensor");
    let options = Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    let mut t = Trainer::from_file(&example("mlp/digits_mlp.mlir"), options).unwrap();
    let (x, y) = random_batch(32, 3);
    t.step(&[&x, &y], 0.01).unwrap();
    let good = dir.join("good.safetensors");
    t.save_checkpoint(&good, &Default::default()).unwrap();
    let no_bias = checkpoint_keeping(&good, &dir.join("no-bias.safetensors"), &|n| n != "fc2.bias");
    let weights = checkpoint_keeping(&good, &dir.join("weights.safetensors"), &|n| !n.contains(".exp_avg"));
    let e = t.load_checkpoint(&no_bias).err().unwrap().to_string();
    assert!(e.contains("it has no parameter fc2.bias (a checkpoint of another model?)"), "{e}");
    let e = t.load_checkpoint(&weights).err().unwrap().to_string();
    assert!(e.contains("it has no optimizer state") && e.contains("(saved with another optimizer?)"), "{e}");
    let options = Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    let mut fresh = Trainer::from_file(&example("mlp/digits_mlp.mlir"), options).unwrap();
    fresh.load_checkpoint_of(&weights, true, false).unwrap();
    assert_eq!(fresh.state()["fc2.bias"], t.state()["fc2.bias"]);
    assert_eq!(fresh.state()["fc1.weight"], t.state()["fc1.weight"]);
    let e = fresh.load_checkpoint_of(&no_bias, true, false).err().unwrap().to_string();
    assert!(e.contains("it has no parameter fc2.bias"), "{e}");
    // A model's own state (a batch norm's running statistics) is no
    // optimizer's: evaluation needs it, and says so.
    let bn = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../test/Tools/aicf/inputs/cnn-bn.mlir.txt");
    let bn_options = || Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    let t = Trainer::from_file(&bn, bn_options()).unwrap();
    let good = dir.join("bn.safetensors");
    t.save_checkpoint(&good, &Default::default()).unwrap();
    let no_stats = checkpoint_keeping(&good, &dir.join("bn-no-stats.safetensors"), &|n| n != "bn1.running_mean");
    let mut fresh = Trainer::from_file(&bn, bn_options()).unwrap();
    let e = fresh.load_checkpoint_of(&no_stats, true, false).err().unwrap().to_string();
    assert!(e.contains("it has no model state bn1.running_mean"), "{e}");
}

/// A model is identified by its canonical IR: a comment, a renamed value or
/// another layout changes neither its hash nor which checkpoints fit it,
/// and finds its cached artifact; a changed shape does.
#[test]
fn the_model_hash_ignores_comments_and_value_names() {
    use aicf_compiler::pipeline::model_hash;
    let source = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    let edited = format!("// a note on the model\n\n{}", source.replace("%h", "%hidden").replace("%a ", "%act "));
    let edited = edited.replace("%a :", "%act :").replace("%a,", "%act,");
    assert_eq!(model_hash(&source, "a.mlir").unwrap(), model_hash(&edited, "b.mlir").unwrap());
    let wider = source.replace("128", "96");
    assert_ne!(model_hash(&source, "a").unwrap(), model_hash(&wider, "a").unwrap());

    let dir = scratch("canonical-hash");
    let options = || Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    let t = Trainer::from_source(&source, "a.mlir", options()).unwrap();
    let checkpoint = dir.join("a.safetensors");
    t.save_checkpoint(&checkpoint, &Default::default()).unwrap();
    let mut commented = Trainer::from_source(&edited, "b.mlir", options()).unwrap();
    assert!(commented.compiled()[0].seconds.is_none(), "the cached artifact is found");
    commented.load_checkpoint(&checkpoint).unwrap();
    assert_eq!(commented.state(), t.state());
}

/// A fixed pseudo-random batch of the digits MLP's shape (`rows` rows):
/// examples/train_api's.
fn random_batch(rows: usize, seed: u64) -> (Tensor, Tensor) {
    crate::trainer::train_api::batch(rows, seed)
}

/// A copy of the checkpoint `from` at `to` with only the tensors `keep`
/// takes, its metadata as it was.
fn checkpoint_keeping(from: &Path, to: &Path, keep: &dyn Fn(&str) -> bool) -> PathBuf {
    let (entries, meta) = aicf_runtime::checkpoint::load(from).unwrap();
    let kept: Vec<_> = entries.into_values().filter(|e| keep(&e.name)).collect();
    aicf_runtime::checkpoint::save(to, &kept, &meta).unwrap();
    to.to_path_buf()
}

/// Adam's first update, against the formula in f64 on the compiled step's
/// own moments: the bias corrections `1 - beta^t` are exact to f32, not
/// computed from 0.999 rounded to f32 (which made every early update
/// 6.4e-6 too small, relative).
#[test]
fn adam_bias_corrections_are_exact() {
    let dir = scratch("adam-bias");
    let options = Options { device: Device::Cpu { threads: 1 }, cache_dir: dir, ..Options::default() };
    let mut t = Trainer::from_file(&example("mlp/digits_mlp.mlir"), options).unwrap();
    let before = t.state();
    let (x, y) = random_batch(32, 1);
    let lr = 0.1;
    t.step(&[&x, &y], lr).unwrap();
    let after = t.state();
    let (p0, p1) = (&before["fc1.weight"].values, &after["fc1.weight"].values);
    let (m, v) = (&after["fc1.weight.exp_avg"].values, &after["fc1.weight.exp_avg_sq"].values);
    let mut checked = 0;
    for i in 0..p0.len() {
        // Elements with a gradient well above eps (1e-8) and a parameter
        // small enough that its f32 rounding stays below 1e-7 of the step.
        if m[i].abs() < 1e-3 || p0[i].abs() > 0.5 {
            continue;
        }
        let (m_hat, v_hat) = (m[i] / (1.0 - 0.9), v[i] / (1.0 - 0.999));
        let expected = lr * m_hat / (v_hat.sqrt() + 1e-8);
        let got = p0[i] - p1[i];
        assert!((got - expected).abs() <= 1e-6 * expected.abs(), "element {i}: update {got}, expected {expected}");
        checked += 1;
    }
    assert!(checked > 100, "only {checked} elements checked");
}

/// The cross-entropy of 1024 rows against its value in f64 from the same
/// logits: the rows' losses are summed in f64, not in one f32 accumulator
/// (which drifted to 5e-7 relative on these batches; the f64 sum stays
/// near 3e-8).
#[test]
fn the_cross_entropy_sum_is_accurate_over_many_rows() {
    let dir = scratch("ce-sum");
    let options = Options { device: Device::Cpu { threads: 1 }, cache_dir: dir, ..Options::default() };
    let mut t = Trainer::from_file(&example("mlp/digits_mlp.mlir"), options).unwrap();
    t.add_batch(1024).unwrap();
    let mut worst: f64 = 0.0;
    for seed in 0..4 {
        let (x, y) = random_batch(1024, 10 + seed);
        let loss = t.loss(&[&x, &y]).unwrap();
        let logits = t.predict(&[&x]).unwrap().remove(0);
        let mut exact = 0.0;
        for (row, &label) in logits.values.chunks(10).zip(&y.values) {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            exact += lse - row[label as usize];
        }
        exact /= 1024.0;
        worst = worst.max((loss - exact).abs() / exact);
    }
    assert!(worst < 1.5e-7, "relative error {worst:e}");
}

/// Training FLOPs come from the compiled train step: every matrix product,
/// convolution (forward and both gradients) and attention, 2 per
/// multiply-add, counted by hand here from the models' shapes.
#[test]
fn training_flops_count_convolutions_and_skip_unneeded_gradients() {
    use aicf_compiler::train::adapt::step_flops;
    let dir = scratch("flops");
    let options = || Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    // MLP 64 -> 128 -> 10, batch 32: both layers forward and their weight
    // gradients, and the input gradient of fc2 only (the data needs none).
    let mlp = Trainer::from_file(&example("mlp/digits_mlp.mlir"), options()).unwrap();
    let (fc1, fc2) = (64 * 128, 128 * 10);
    assert_eq!(step_flops(&mlp, 32), (2 * 32 * (2 * fc1 + 3 * fc2)) as f64);
    assert_eq!(step_flops(&mlp, 16), (2 * 16 * (2 * fc1 + 3 * fc2)) as f64, "scaled to a smaller batch");
    // CNN: conv1 (16 x 8 x 8 outputs of 1 x 3 x 3) forward and weight
    // gradient; conv2 (32 x 4 x 4 outputs of 16 x 3 x 3) forward and both
    // gradients; fc 128 -> 10 forward and both gradients.
    let cnn = Trainer::from_file(&example("cnn/digits_cnn.mlir"), options()).unwrap();
    let conv1 = 2 * 32 * (16 * 8 * 8) * 9;
    let conv2 = 2 * 32 * (32 * 4 * 4) * (16 * 9);
    let fc = 2 * 32 * 128 * 10;
    assert_eq!(step_flops(&cnn, 32), (2 * conv1 + 3 * conv2 + 3 * fc) as f64);
}

#[test]
fn the_cosine_schedule_warms_up_linearly_then_decays_to_its_floor() {
    use aicf_compiler::train::run::LrSchedule;
    let s = LrSchedule::Cosine { warmup_steps: 10, min_factor: 0.1 };
    assert_eq!(s.at(1.0, 0, 110), 0.1);
    assert_eq!(s.at(1.0, 9, 110), 1.0);
    assert!((s.at(1.0, 10, 110) - 1.0).abs() < 1e-12, "the decay starts at the full rate");
    assert!((s.at(1.0, 60, 110) - 0.55).abs() < 1e-12, "halfway: the mean of lr and its floor");
    assert!((s.at(1.0, 110, 110) - 0.1).abs() < 1e-12 && (s.at(1.0, 500, 110) - 0.1).abs() < 1e-12);
    let rates: Vec<f64> = (10..110).map(|t| s.at(1.0, t, 110)).collect();
    assert!(rates.windows(2).all(|w| w[1] <= w[0]), "monotone after the warm-up");
    assert_eq!(LrSchedule::Constant.at(3e-3, 77, 100), 3e-3);
}

/// A cosine schedule under a FLOPs budget decays to its floor where the
/// budget ends, not at the end of the run's (many) epochs; a warm-up as
/// long as the run is said.
#[test]
fn a_schedule_under_a_flops_budget_decays_where_the_budget_ends() {
    use aicf_compiler::train::adapt::step_flops;
    use aicf_compiler::train::run::{LrSchedule, Report};
    struct Notes(Vec<String>);
    impl Report for Notes {
        fn note(&mut self, message: &str) {
            self.0.push(message.to_string());
        }
    }
    let dir = scratch("budget-schedule");
    let options = Options { device: Device::Cpu { threads: 2 }, cache_dir: dir.join("cache"), ..Options::default() };
    let model = example("mlp/digits_mlp.mlir");
    let per_step = step_flops(&Trainer::from_file(&model, options.clone()).unwrap(), 32);
    let cosine = LrSchedule::Cosine { warmup_steps: 5, min_factor: 0.1 };
    let run = RunOptions {
        epochs: 1000,
        lr: 3e-3,
        lr_schedule: cosine,
        flops_budget: Some(100.0 * per_step),
        out: dir.join("budget"),
        ..RunOptions::default()
    };
    let mut notes = Notes(Vec::new());
    let s = run::fit(&model, &options, &[digits()], &run, &mut notes).unwrap();
    // 100 full batches' FLOPs: a few more steps where an epoch's last
    // batch is short.
    assert!((100..=103).contains(&s.steps), "{} steps", s.steps);
    let last = s.records.last().unwrap();
    assert!(last.lr < 3e-4 * 1.01, "the last step's rate {} is not near the floor 3e-4", last.lr);
    // The one note: the budget's end of the run.
    assert!(
        notes.0.len() == 1
            && notes.0[0].contains("spent")
            && notes.0[0].contains("of 1000: the run ends with it after its batch "),
        "{:?}",
        notes.0
    );
    // Warmed up over the whole budget: said, and the rate never gets there.
    let long = RunOptions {
        lr_schedule: LrSchedule::Cosine { warmup_steps: 150, min_factor: 0.1 },
        out: dir.join("long"),
        ..run.clone()
    };
    let s = run::fit(&model, &options, &[digits()], &long, &mut notes).unwrap();
    assert!(s.records.iter().all(|r| r.lr < 3e-3), "{:?}", s.records.iter().map(|r| r.lr).collect::<Vec<_>>());
    assert!(
        notes
            .0
            .iter()
            .any(|n| n
                .contains("the warm-up (150 steps) is longer than the run (100 steps): the rate never reaches --lr")),
        "{:?}",
        notes.0
    );
    // A warm-up exactly as long reaches the rate at the last step (it was
    // said never to).
    let exact = RunOptions {
        lr_schedule: LrSchedule::Cosine { warmup_steps: 100, min_factor: 0.1 },
        out: dir.join("exact"),
        ..run.clone()
    };
    run::fit(&model, &options, &[digits()], &exact, &mut notes).unwrap();
    assert!(
        notes.0.iter().any(|n| n.contains(
            "the warm-up (100 steps) is as long as the run: the rate reaches --lr 0.003 at the last step, and no \
             decay follows"
        )),
        "{:?}",
        notes.0
    );
}

#[test]
fn the_wsd_schedule_holds_its_rate_then_decays_linearly_over_the_runs_end() {
    use aicf_compiler::train::run::LrSchedule;
    // 100 steps: warm-up 10, the last 20 (steps 80..99) decay to 0.1.
    let s = LrSchedule::Wsd { warmup_steps: 10, decay_fraction: 0.2, decay_steps: None, min_factor: 0.1 };
    assert_eq!(s.at(1.0, 0, 100), 0.1);
    assert_eq!(s.at(1.0, 9, 100), 1.0);
    assert_eq!(s.at(1.0, 10, 100), 1.0);
    assert_eq!(s.at(1.0, 79, 100), 1.0, "stable until the decay");
    assert!((s.at(1.0, 80, 100) - (1.0 - 0.9 / 20.0)).abs() < 1e-12, "the decay's first step");
    assert!((s.at(1.0, 89, 100) - 0.55).abs() < 1e-12, "halfway: the mean of lr and its floor");
    assert!((s.at(1.0, 99, 100) - 0.1).abs() < 1e-12, "the floor at the last step");
    assert!((s.at(1.0, 150, 100) - 0.1).abs() < 1e-12);
    // The rate before the decay does not depend on the run's length.
    assert_eq!(s.at(3e-3, 500, 1000), s.at(3e-3, 500, 5000));
    let rates: Vec<f64> = (10..100).map(|t| s.at(1.0, t, 100)).collect();
    assert!(rates.windows(2).all(|w| w[1] <= w[0]), "monotone after the warm-up");
    // A decay given in steps: the same 20 steps whatever the run's length.
    let steps = LrSchedule::Wsd { warmup_steps: 10, decay_fraction: 0.2, decay_steps: Some(20), min_factor: 0.1 };
    assert_eq!(steps.at(1.0, 89, 100), s.at(1.0, 89, 100));
    assert_eq!(steps.at(1.0, 979, 1000), 1.0);
    assert!((steps.at(1.0, 989, 1000) - 0.55).abs() < 1e-12);
    // A decay longer than the run decays over the whole run, from the full rate.
    let long = LrSchedule::Wsd { warmup_steps: 0, decay_fraction: 0.2, decay_steps: Some(500), min_factor: 0.0 };
    assert!((long.at(1.0, 0, 100) - 0.99).abs() < 1e-12 && (long.at(1.0, 99, 100)).abs() < 1e-12);
}

/// The run registry's fingerprint: what a model is made of, and a graph
/// hash that names do not change (the same layers under other names hash
/// alike; another width does not).
#[test]
fn fingerprints_see_structure_not_names() {
    use aicf_compiler::train::registry::fingerprint;
    let mlp = include_str!("../../../examples/mlp/digits_mlp.mlir");
    let f = fingerprint(mlp, "mlp", 1e6).unwrap();
    assert_eq!((f.kind.as_str(), f.depth, f.widths.clone(), f.params), ("mlp", 2, vec![128, 10], 9610));
    assert_eq!(f.ops.get("hl.linear"), Some(&2));
    assert_eq!(f.structure, "mlp 128");
    let renamed = mlp.replace("fc1", "encoder").replace("fc2", "head");
    assert_ne!(renamed, mlp);
    assert_eq!(fingerprint(&renamed, "renamed", 1e6).unwrap().graph_hash, f.graph_hash);
    let narrow = include_str!("../../../examples/grow/narrow_mlp.mlir");
    assert_ne!(fingerprint(narrow, "narrow", 1e6).unwrap().graph_hash, f.graph_hash);
    let cnn = include_str!("../../../examples/cnn/digits_cnn.mlir");
    assert_eq!(fingerprint(cnn, "cnn", 1e6).unwrap().kind, "cnn");
    let lm = include_str!("../../../examples/char_lm/char_lm.mlir");
    let lm = fingerprint(lm, "lm", 1e6).unwrap();
    assert_eq!((lm.kind.as_str(), lm.structure.as_str()), ("transformer", "lm 2x64"));
}

/// A classifier whose loss ignores a label (`ignore_index = -1`, as
/// PyTorch's): data may hold that label besides the classes, and the
/// held-out accuracy counts only the other rows; a label that is neither
/// is still refused, naming both. (The loader refused every -1.)
#[test]
fn data_may_hold_the_label_the_loss_ignores() {
    let dir = scratch("ignore-index");
    let source = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    let ignoring =
        source.replace("hl.cross_entropy %logits, %labels :", "hl.cross_entropy %logits, %labels ignore_index = -1 :");
    assert_ne!(source, ignoring);
    let model = dir.join("ignoring.mlir");
    std::fs::write(&model, &ignoring).unwrap();
    let sig = Signature::of_source(&ignoring, "ignoring.mlir").unwrap();
    assert_eq!(sig.ignore_index, Some(-1));
    // Class c lights features 6c..6c+6; every fourth row is unlabelled
    // (-1) and lights none of them.
    let rows = 640;
    let label = |r: usize| if r % 4 == 3 { -1.0 } else { (r % 10) as f64 };
    let mut csv = String::new();
    for r in 0..rows {
        let l = label(r);
        let cells: Vec<String> = (0..64)
            .map(|c| if l >= 0.0 && c / 6 == l as usize { "4".into() } else { format!("{}", (r * 7 + c) % 2) })
            .collect();
        csv.push_str(&format!("{},{l}\n", cells.join(",")));
    }
    let data = dir.join("partly-labelled.csv");
    std::fs::write(&data, &csv).unwrap();
    let options = Options { device: Device::Cpu { threads: 2 }, ..Options::default() };
    let run = RunOptions { epochs: 12, lr: 1e-2, out: dir.join("run"), ..RunOptions::default() };
    let result = run::fit(&model, &options, std::slice::from_ref(&data), &run, &mut Quiet).unwrap();
    let last = result.records.last().unwrap();
    // Counting the unlabelled quarter as misses would cap it at 0.75.
    assert!(last.val_accuracy > 0.9, "{last:?}");
    assert!(last.val_loss.is_finite(), "{last:?}");

    let bad = dir.join("eleven.csv");
    std::fs::write(&bad, csv.replacen(",-1\n", ",11\n", 1)).unwrap();
    let e = Dataset::load(std::slice::from_ref(&bad), &sig, &DataOptions::default()).err().unwrap().to_string();
    assert!(e.contains("the label 11 is not a class of the model's 10 (0 to 9, nor its ignore_index -1)"), "{e}");
    // Every label ignored: nothing to train on, said before compiling.
    let none = dir.join("unlabelled.csv");
    let unlabelled: String = csv.lines().map(|l| format!("{},-1\n", l.rsplit_once(',').unwrap().0)).collect();
    std::fs::write(&none, unlabelled).unwrap();
    let e = Dataset::load(std::slice::from_ref(&none), &sig, &DataOptions::default()).err().unwrap().to_string();
    assert!(e.contains("unlabelled.csv: every label is -1, the loss's ignore_index: nothing to train on"), "{e}");
}

/// Convolutions run as products over their window rows, which take scratch
/// memory: where a memory budget cannot be met with them, the step is
/// planned again with direct kernels (no scratch), which meet it, and its
/// first steps give the losses of the products' step without a budget.
#[test]
fn a_memory_budget_the_window_rows_pass_plans_direct_convolutions() {
    use aicf_compiler::codegen::KernelCache;
    use aicf_compiler::pipeline::{Target, TrainOptions, compile_source};
    let dir = scratch("conv-budget");
    let target = Target::Cpu(KernelCache::new(dir.join("kernels")));
    let source = std::fs::read_to_string(example("cnn/digits_cnn.mlir")).unwrap();
    // The products' step needs 565,248 arena bytes in @loss_grad, the direct
    // kernels' 311,296.
    let budget = TrainOptions { memory_budget: Some(MemoryBudget::Bytes(400 << 10)), ..TrainOptions::default() };
    let fallback = "train pipeline, direct convolutions (the budget)";
    let free = compile_source(&source, "cnn", &TrainOptions::default(), None, &target, &dir.join("free")).unwrap();
    assert!(!free.timings.stages.iter().any(|s| s.name == fallback));
    let kinds = |c: &aicf_compiler::pipeline::Compiled| -> Vec<String> {
        c.manifest.functions.iter().flat_map(|f| &f.calls).map(|call| call.op.clone()).collect()
    };
    assert!(kinds(&free).iter().any(|k| k == "ll.im2col"), "{:?}", kinds(&free));
    let planned = compile_source(&source, "cnn", &budget, None, &target, &dir.join("budget")).unwrap();
    assert!(planned.timings.stages.iter().any(|s| s.name == fallback), "{}", planned.timings.report());
    assert!(!kinds(&planned).iter().any(|k| k == "ll.im2col"), "{:?}", kinds(&planned));
    for f in &planned.manifest.functions {
        assert!(f.arena_bytes <= 400 << 10, "{}: arena {} bytes", f.name, f.arena_bytes);
    }
    // Without convolutions to fall back from, the budget's error stands.
    let mlp = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    let tight = TrainOptions { memory_budget: Some(MemoryBudget::Bytes(1024)), ..TrainOptions::default() };
    let e = compile_source(&mlp, "mlp", &tight, None, &target, &dir.join("mlp")).err().unwrap().to_string();
    assert!(e.contains("over the budget"), "{e}");
}

/// A variant at another batch size joins a session only when its train
/// step was compiled with the model's settings: one compiled with another
/// optimizer (or precision) was taken, and its steps trained otherwise.
#[test]
fn a_variant_compiled_with_other_settings_is_refused() {
    use aicf_compiler::codegen::KernelCache;
    use aicf_compiler::pipeline::{Target, TrainOptions, compile_source};
    let dir = scratch("variant-settings");
    let target = Target::Cpu(KernelCache::new(dir.join("kernels")));
    let source = std::fs::read_to_string(example("mlp/digits_mlp.mlir")).unwrap();
    let compile = |options: &TrainOptions, batch: Option<usize>, out: &str| {
        compile_source(&source, "m", options, batch, &target, &dir.join(out)).unwrap();
        dir.join(out)
    };
    let adam = TrainOptions::default();
    // (AdamW's slots are Adam's: the symbol tables agree.)
    let adamw = TrainOptions { optimizer: "adamw".into(), weight_decay: 0.5, ..TrainOptions::default() };
    let first = compile(&adam, None, "first");
    let same = compile(&adam, Some(7), "same");
    let other = compile(&adamw, Some(7), "other");
    let mut session = aicf_runtime::open(&first, &Device::Cpu { threads: 1 }, 0).unwrap();
    let e = session.add_variant(&other).unwrap_err().to_string();
    assert!(e.contains("the variant's train step was compiled with other settings"), "{e}");
    session.add_variant(&same).unwrap();
    // A GPU artifact opened on the CPU says so (it was the loader's "cannot
    // open shared object file", its path twice).
    let gpu = dir.join("gpu");
    let cuda = Target::Cuda(aicf_compiler::codegen::GpuOptions::default());
    compile_source(&source, "m", &adam, None, &cuda, &gpu).unwrap();
    let e = aicf_runtime::open(&gpu, &Device::Cpu { threads: 1 }, 0).err().unwrap().to_string();
    assert!(e.contains("(a GPU artifact): open it on Device::Cuda"), "{e}");
}

/// How a score reads `@forward`'s output: logits, or the probabilities of
/// a softmax at its end where `@loss` takes the cross-entropy of the
/// logits before it; a cross-entropy of the softmaxed output itself (an
/// imported classifier's Softmax output) trains on it as logits, and so
/// it is read.
#[test]
fn a_softmax_output_is_read_as_probabilities_only_where_the_loss_takes_logits() {
    use aicf_compiler::train::data::Scores;
    let model = |ending: &str, loss: &str| {
        format!(
            "hl.param @fc.w : tensor<3x4xf32> owner \"fc\" init <zeros>\n\
             func.func @logits(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {{\n\
               %w = hl.get_param @fc.w : tensor<3x4xf32>\n\
               %y = hl.linear %x, %w : tensor<2x4xf32>, tensor<3x4xf32>\n\
               return %y : tensor<2x3xf32>\n\
             }}\n\
             func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {{\n\
               %y = func.call @logits(%x) : (tensor<2x4xf32>) -> tensor<2x3xf32>\n\
               {ending}\n\
             }}\n\
             func.func @loss(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {{\n\
               {loss}\n\
               %l = hl.cross_entropy %z, %t : tensor<2x3xf32>, tensor<2xi32>\n\
               return %l : tensor<f32>\n\
             }}\n"
        )
    };
    let softmax = "%p = hl.softmax %y axis = 1 : tensor<2x3xf32>\n return %p : tensor<2x3xf32>";
    let log_softmax = "%p = hl.log_softmax %y axis = 1 : tensor<2x3xf32>\n return %p : tensor<2x3xf32>";
    let plain = "return %y : tensor<2x3xf32>";
    let of_logits = "%z = func.call @logits(%x) : (tensor<2x4xf32>) -> tensor<2x3xf32>";
    let of_forward = "%z = func.call @forward(%x) : (tensor<2x4xf32>) -> tensor<2x3xf32>";
    let of_softmax = "%y = func.call @logits(%x) : (tensor<2x4xf32>) -> tensor<2x3xf32>\n \
                      %z = hl.softmax %y axis = 1 : tensor<2x3xf32>";
    for (ending, loss, want) in [
        (softmax, of_logits, Scores::Probabilities),
        (log_softmax, of_logits, Scores::LogProbabilities),
        (plain, of_logits, Scores::Logits),
        (softmax, of_forward, Scores::Logits),
        (softmax, of_softmax, Scores::Logits),
    ] {
        let sig = Signature::of_source(&model(ending, loss), "scores.mlir").unwrap();
        assert_eq!(sig.scores, want, "{ending} / {loss}");
    }
}

/// A run a FLOPs budget ends mid-epoch, resumed with a larger budget,
/// trains the rest of that epoch and ends on the bits of a run given the
/// larger budget from the start (it went on with the next epoch: the rest
/// never trained, and 12 of 13 tensors differed).
#[test]
fn a_run_a_flops_budget_ended_mid_epoch_resumes_inside_it() {
    let dir = scratch("budget-within");
    let options = Options { device: Device::Cpu { threads: 2 }, gemm: Some("generated".into()), ..Options::default() };
    let run = |budget: f64, ckpt: &str, resume: bool| RunOptions {
        epochs: 5,
        lr: 3e-3,
        out: dir.join(format!("run-{ckpt}")),
        checkpoint_dir: Some(dir.join(ckpt)),
        resume,
        flops_budget: Some(budget),
        ..RunOptions::default()
    };
    let model = example("mlp/digits_mlp.mlir");
    // 45 steps an epoch of about 1.29e6 FLOPs each: 6e7 ends in epoch 2.
    let cut = run::fit(&model, &options, &[digits()], &run(6e7, "cut", false), &mut Quiet).unwrap();
    assert!(cut.steps % 45 != 0, "the budget ends the run mid-epoch ({} steps)", cut.steps);
    let (_, meta) = aicf_runtime::checkpoint::load(&dir.join("cut").join("last.safetensors")).unwrap();
    assert_eq!(meta["epoch_rows_done"], (cut.steps % 45 * 32).to_string());
    let resumed = run::fit(&model, &options, &[digits()], &run(1.2e8, "cut", true), &mut Quiet).unwrap();
    let straight = run::fit(&model, &options, &[digits()], &run(1.2e8, "straight", false), &mut Quiet).unwrap();
    assert_eq!(resumed.steps, straight.steps);
    let epochs = |s: &run::Summary| s.records.iter().map(|r| (r.epoch, r.step, r.train_loss)).collect::<Vec<_>>();
    assert_eq!(epochs(&resumed), epochs(&straight), "the same epochs, the cut one's loss over all its rows");
    let read = |ckpt: &str| {
        let (tensors, _) = aicf_runtime::checkpoint::load(&dir.join(ckpt).join("last.safetensors")).unwrap();
        tensors.into_values().map(|e| (e.name, e.bytes)).collect::<Vec<_>>()
    };
    assert_eq!(read("cut"), read("straight"), "the resumed run ends on the straight run's tensors");
    // Another global batch that does not divide the rows trained is refused
    // (its batch index would skip other rows).
    run::fit(&model, &options, &[digits()], &run(6e7, "cut2", false), &mut Quiet).unwrap();
    let other = Options { accumulate: 3, ..options.clone() };
    let e = run::fit(&model, &other, &[digits()], &run(1.2e8, "cut2", true), &mut Quiet).err().unwrap().to_string();
    assert!(e.contains("which this run's global batch of 96 rows does not divide"), "{e}");
}

/// The digits MLP at a batch of `batch` with its hidden layer centred on
/// its mean over `axes` (a batch norm without its scale): over the batch
/// alone (`[0]`) it is over one value per feature at a batch of 1; over
/// the one feature of a 1-wide layer (`[1]`) at any batch.
fn centred_mlp(batch: usize, width: usize, axes: &str) -> String {
    let kept = if axes == "[0]" { format!("1x{width}") } else { format!("{batch}x1") };
    let body = |x: &str| {
        format!(
            "  %w1 = hl.get_param @fc1.weight : tensor<{width}x64xf32>\n  %b1 = hl.get_param @fc1.bias : \
             tensor<{width}xf32>\n  %h = hl.linear {x}, %w1, %b1 : tensor<{batch}x64xf32>, tensor<{width}x64xf32>, \
             tensor<{width}xf32>\n  %m = hl.reduce_mean %h axes = {axes} keepdim : tensor<{batch}x{width}xf32>\n  \
             %c = hl.sub %h, %m : tensor<{batch}x{width}xf32>, tensor<{kept}xf32>\n  %a = hl.relu %c : \
             tensor<{batch}x{width}xf32>\n  %w2 = hl.get_param @fc2.weight : tensor<10x{width}xf32>\n  %b2 = \
             hl.get_param @fc2.bias : tensor<10xf32>\n  %logits = hl.linear %a, %w2, %b2 : \
             tensor<{batch}x{width}xf32>, tensor<10x{width}xf32>, tensor<10xf32>\n"
        )
    };
    format!(
        "hl.param @fc1.weight : tensor<{width}x64xf32> owner \"fc1\" init <kaiming_uniform, gain = 0.5773502691896257>\n\
         hl.param @fc1.bias : tensor<{width}xf32> owner \"fc1\" init <zeros>\n\
         hl.param @fc2.weight : tensor<10x{width}xf32> owner \"fc2\" init <kaiming_uniform, gain = 0.5773502691896257>\n\
         hl.param @fc2.bias : tensor<10xf32> owner \"fc2\" init <zeros>\n\
         func.func @forward(%x: tensor<{batch}x64xf32>) -> tensor<{batch}x10xf32> {{\n{}  return %logits : \
         tensor<{batch}x10xf32>\n}}\n\
         func.func @loss(%x: tensor<{batch}x64xf32>, %labels: tensor<{batch}xi32>) -> tensor<f32> {{\n{}  %loss = \
         hl.cross_entropy %logits, %labels : tensor<{batch}x10xf32>, tensor<{batch}xi32>\n  return %loss : \
         tensor<f32>\n}}\n",
        body("%x"),
        body("%x")
    )
}

/// A model centring a value on its mean over the batch alone (a batch norm
/// over 1x1 maps, or over features) trains no batch of one row, as PyTorch
/// refuses it: the step is refused naming the op, and `aicf train` leaves
/// a last batch of one row out of each epoch, said. Before, a batch of one
/// trained to a constant (every centred value 0) and imported batch norms'
/// running variances fell to 0 (a held-out loss of 2e8). A centring over
/// one value that does not take in the batch (a 1-wide layer's own mean,
/// a layer norm of one feature) trains, as PyTorch trains it.
#[test]
fn a_batch_of_one_row_is_refused_where_the_loss_centres_over_the_batch() {
    let dir = scratch("centred");
    let options = Options { device: Device::Cpu { threads: 1 }, cache_dir: dir.clone(), ..Options::default() };
    let source = centred_mlp(4, 16, "[0]");
    let mut t = Trainer::from_source(&source, "centred.mlir", options.clone()).unwrap();
    assert_eq!(t.min_train_rows(), 2);
    let (x, y) = random_batch(4, 1);
    t.step(&[&x, &y], 0.01).unwrap();
    let (x1, y1) = random_batch(1, 2);
    let e = t.step(&[&x1, &y1], 0.01).unwrap_err().to_string();
    assert!(
        e.contains("centred.mlir:")
            && e.contains("its mean over axes [0], which at a batch of 1 row is over one value each")
            && e.contains("train with batches of 2 rows or more"),
        "{e}"
    );
    // Predicting one row is not training: it runs.
    assert_eq!(t.predict(&[&x1]).unwrap()[0].shape, vec![1, 10]);

    // 1438 training rows of digits at a batch of 3 leave one: each epoch
    // takes 479 whole batches.
    let model = dir.join("centred3.mlir");
    std::fs::write(&model, centred_mlp(3, 16, "[0]")).unwrap();
    let run = RunOptions { epochs: 1, lr: 0.01, out: dir.join("run3"), ..RunOptions::default() };
    let mut notes = Notes(Vec::new());
    let summary = run::fit(&model, &options, &[digits()], &run, &mut notes).unwrap();
    assert_eq!(summary.steps, 479);
    assert!(
        notes
            .0
            .iter()
            .any(|n| n.contains("a batch of fewer than 2 rows cannot train")
                && n.contains("leaving out 1 training example")),
        "{:?}",
        notes.0
    );
    // Accumulating 2 micro-batches of 3: the last global batch's 4 rows end
    // in a micro-batch of 1, so the 4 are left out.
    let accumulating = Options { accumulate: 2, ..options.clone() };
    let run_acc = RunOptions { epochs: 1, lr: 0.01, out: dir.join("run-acc"), ..RunOptions::default() };
    let mut notes = Notes(Vec::new());
    let summary = run::fit(&model, &accumulating, &[digits()], &run_acc, &mut notes).unwrap();
    assert_eq!(summary.steps, 1438 / 6);
    assert!(notes.0.iter().any(|n| n.contains("leaving out 4 training examples")), "{:?}", notes.0);
    // At a batch of 1 the run is refused before it trains.
    let model1 = dir.join("centred1.mlir");
    std::fs::write(&model1, centred_mlp(1, 16, "[0]")).unwrap();
    let run1 = RunOptions { epochs: 1, lr: 0.01, out: dir.join("run1"), ..RunOptions::default() };
    let e = run::fit(&model1, &options, &[digits()], &run1, &mut Quiet).err().unwrap().to_string();
    assert!(e.contains("at a batch of 1 row is over one value each"), "{e}");

    // A 1-wide layer centred on its own mean trains (to its bias alone).
    let model_one = dir.join("one-wide.mlir");
    std::fs::write(&model_one, centred_mlp(8, 1, "[1]")).unwrap();
    let run_one = RunOptions { epochs: 1, lr: 0.01, out: dir.join("run-one"), ..RunOptions::default() };
    let mut notes = Notes(Vec::new());
    run::fit(&model_one, &options, &[digits()], &run_one, &mut notes).unwrap();
    assert!(!notes.0.iter().any(|n| n.contains("normalizes over the batch")), "{:?}", notes.0);
}

/// Rows of 64 random features and a random label: nothing to learn, so
/// the held-out loss rises once the model fits its training rows.
fn noise_table(dir: &Path, rows: usize) -> PathBuf {
    let path = dir.join("noise.csv");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut text = String::new();
    for _ in 0..rows {
        for _ in 0..64 {
            text.push_str(&format!("{:.3},", (next() % 1000) as f64 / 1000.0));
        }
        text.push_str(&format!("{}\n", next() % 10));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// `best.safetensors` holds the epoch of the lowest held-out loss, and
/// `--early-stop N` ends the run N epochs after it; a resume of the
/// stopped run trains nothing more, one with a larger patience goes on,
/// and the best epoch's checkpoint scores its recorded held-out loss.
#[test]
fn the_best_epoch_is_kept_and_early_stopping_ends_the_run_after_its_patience() {
    let dir = scratch("early-stop");
    let data = noise_table(&dir, 400);
    let options = Options { device: Device::Cpu { threads: 2 }, gemm: Some("generated".into()), ..Options::default() };
    let run = |patience: usize, resume: bool| RunOptions {
        epochs: 40,
        lr: 1e-2,
        out: dir.join("run"),
        checkpoint_dir: Some(dir.join("ck")),
        resume,
        early_stop: Some(patience),
        ..RunOptions::default()
    };
    let model = example("mlp/digits_mlp.mlir");
    let first = run::fit(&model, &options, std::slice::from_ref(&data), &run(2, false), &mut Quiet).unwrap();
    let records = &first.records;
    let (loss, at) = first.best.unwrap();
    let lowest = records.iter().map(|r| r.val_loss).fold(f64::INFINITY, f64::min);
    assert_eq!(loss, lowest);
    assert_eq!(records.iter().find(|r| r.val_loss == lowest).unwrap().epoch, at);
    assert!(first.stopped_early && records.len() < 40, "{} epochs", records.len());
    assert_eq!(records.last().unwrap().epoch, at + 2, "two epochs without a better loss end it");
    let best = dir.join("ck").join(run::BEST);
    let (_, meta) = aicf_runtime::checkpoint::load(&best).unwrap();
    assert_eq!(meta["epoch"], at.to_string());
    assert_eq!(meta["best_val_loss"], loss.to_string());
    // The best checkpoint scores what its epoch recorded.
    let scored = aicf_compiler::train::eval::evaluate_checkpoint(
        &model,
        &options,
        std::slice::from_ref(&data),
        Some(&best),
        &dir.join("eval"),
        None,
        false,
        &mut Quiet,
    )
    .unwrap();
    assert!((scored.loss - loss).abs() <= 1e-6 * loss, "{} vs {loss}", scored.loss);
    assert_eq!(scored.epoch.as_deref(), Some(at.to_string().as_str()));
    assert_eq!(run::best_checkpoint(&dir.join("ck"), (loss, at)), Some(best.clone()));
    // A fork into another directory carries the best it did not write
    // there: no file of its own claims it.
    // (With a patience of 5 it trains three more epochs, none better.)
    let fork = RunOptions {
        resume: false,
        resume_from: Some(dir.join("ck").join("last.safetensors")),
        checkpoint_dir: Some(dir.join("fork")),
        out: dir.join("run-fork"),
        ..run(5, false)
    };
    let mut notes = Notes(Vec::new());
    let forked = run::fit(&model, &options, std::slice::from_ref(&data), &fork, &mut notes).unwrap();
    assert!(forked.stopped_early && forked.steps > first.steps);
    assert_eq!(forked.best, Some((loss, at)));
    assert_eq!(run::best_checkpoint(&dir.join("fork"), (loss, at)), None);
    // Its note names no file, and the run, holding no record of the best
    // epoch, is judged by its own last (it was called the best epoch's).
    let stop = notes.0.iter().find(|n| n.starts_with("--early-stop 5")).unwrap();
    assert!(!stop.contains("its checkpoint"), "{stop}");
    let judged = notes.0.iter().find(|n| n.contains("worse than guessing")).unwrap();
    assert!(judged.starts_with("the final held-out loss"), "{judged}");
    // Resumed with the same patience: spent, nothing trains.
    let again = run::fit(&model, &options, std::slice::from_ref(&data), &run(2, true), &mut Quiet).unwrap();
    assert_eq!(again.steps, first.steps);
    assert!(again.stopped_early);
    // A larger patience goes on from there.
    let longer = run::fit(&model, &options, std::slice::from_ref(&data), &run(5, true), &mut Quiet).unwrap();
    assert!(longer.steps > first.steps);
    let (_, at_longer) = longer.best.unwrap();
    assert!(longer.records.last().unwrap().epoch == at_longer + 5 || longer.records.len() == 40);
    let e = run::fit(&model, &options, std::slice::from_ref(&data), &run(0, false), &mut Quiet).err().unwrap();
    assert!(e.to_string().contains("--early-stop 0"), "{e}");
    // A run that holds nothing out cannot stop early.
    let none = RunOptions {
        data: DataOptions { val_split: 0.0, ..DataOptions::default() },
        checkpoint_dir: None,
        out: dir.join("run-none"),
        ..run(2, false)
    };
    let e = run::fit(&model, &options, &[data], &none, &mut Quiet).err().unwrap().to_string();
    assert!(e.contains("--early-stop watches the held-out loss"), "{e}");
}
