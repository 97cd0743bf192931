//! The four example models build from Rust and from their `.mlir` files,
//! and the two paths give the same IR.

use aicf_compiler::{CompilerContext, nn::HlModule};

#[path = "../../../examples/char_lm/model.rs"]
pub(crate) mod char_lm;
#[path = "../../../examples/cnn/model.rs"]
pub(crate) mod cnn;
#[path = "../../../examples/mlp/model.rs"]
pub(crate) mod mlp;
#[path = "../../../examples/transformer/model.rs"]
pub(crate) mod transformer;

/// Parses both, prints both from the same context: SSA names, comments and
/// float spellings are normalised by the round trip, nothing else is.
fn assert_same_ir(traced: &HlModule, file: &str, source: &str) {
    let ctx = CompilerContext::new();
    let written = ctx.parse(source, file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let built = traced.parse(&ctx).unwrap_or_else(|e| panic!("traced module of {file}: {e}"));
    let (written, built) = (written.as_operation().to_string(), built.as_operation().to_string());
    if written != built {
        let first = written.lines().zip(built.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{file} and the Rust model differ at line {}:\n  .mlir: {}\n  Rust:  {}",
            first + 1,
            written.lines().nth(first).unwrap_or("<end>"),
            built.lines().nth(first).unwrap_or("<end>")
        );
    }
}

#[test]
fn mlp_from_rust_equals_mlp_from_mlir() {
    let traced = mlp::build(mlp::BATCH).expect("the MLP traces");
    assert_same_ir(&traced, "digits_mlp.mlir", include_str!("../../../examples/mlp/digits_mlp.mlir"));
    let names: Vec<&str> = traced.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
}

#[test]
fn cnn_from_rust_equals_cnn_from_mlir() {
    let traced = cnn::build(cnn::BATCH).expect("the CNN traces");
    assert_same_ir(&traced, "digits_cnn.mlir", include_str!("../../../examples/cnn/digits_cnn.mlir"));
    let sizes: usize = traced.params.iter().map(|p| p.spec.num_elements()).sum();
    // conv1 16*1*9+16, conv2 32*16*9+32, fc 10*128+10
    assert_eq!(sizes, 160 + 4640 + 1290);
    assert_eq!(traced.function("forward").unwrap().outputs[0].shape, [32, 10]);
}

#[test]
fn char_lm_from_rust_equals_char_lm_from_mlir() {
    let traced = char_lm::build(char_lm::CONFIG).expect("the LM traces");
    assert_same_ir(&traced, "char_lm.mlir", include_str!("../../../examples/char_lm/char_lm.mlir"));
    assert_eq!(traced.params.len(), 2 + 2 * 16 + 2 + 1);
    let lm_head = traced.params.iter().find(|p| p.name == "lm_head.weight").unwrap();
    assert_eq!((lm_head.owner.as_str(), lm_head.spec.shape.as_slice()), ("lm_head", &[65, 64][..]));
    // Dropout only while training: @loss takes the step's seed and offset.
    assert!(!traced.function("forward").unwrap().takes_rng);
    assert!(traced.function("loss").unwrap().takes_rng);
    assert_eq!(traced.text.matches("hl.dropout").count(), 5, "embeddings + 2 per block, all in @loss");
}

#[test]
fn nanogpt_from_rust_equals_nanogpt_from_mlir() {
    let traced = char_lm::build(char_lm::NANOGPT).expect("nanoGPT traces");
    assert_same_ir(&traced, "nanogpt.mlir", include_str!("../../../examples/nanogpt/nanogpt.mlir"));
    // An untied head and a bias on every projection, as the PyTorch
    // baseline (benches/gpu/nanogpt.py) has: the same count there.
    let sizes: usize = traced.params.iter().map(|p| p.spec.num_elements()).sum();
    assert_eq!(sizes, 10_795_776);
    assert_eq!(traced.function("forward").unwrap().outputs[0].shape, [64, 256, 65]);
}

#[test]
fn transformer_from_rust_equals_transformer_from_mlir() {
    let traced = transformer::build(transformer::BATCH).expect("the transformer block traces");
    assert_same_ir(
        &traced,
        "transformer_block.mlir",
        include_str!("../../../examples/transformer/transformer_block.mlir"),
    );
    assert_eq!(traced.function("forward").unwrap().outputs[0].shape, [8, 128, 256]);
    assert!(!traced.function("loss").unwrap().takes_rng);
}
