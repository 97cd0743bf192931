//! The transformer-block workload of `../shared/bench/common_spec.txt`: a
//! pre-LN block (d = 256, 4 heads, causal, MLP 4x) on `x: [8, 128, 256]`,
//! then a linear head to 256 classes and the mean cross-entropy over all
//! 1024 tokens, with the tanh GELU of the spec. (The block projects q, k and
//! v with three linears where the baselines use one fused `[256, 768]`
//! weight: the same FLOPs.)

use aicf_compiler::nn::{
    self, DType, GeluApproximation, HlModule, Linear, Result, Sequential, TensorSpec, TransformerBlock,
};

pub const BATCH: usize = 8;
pub const SEQ: usize = 128;
pub const DIM: usize = 256;
pub const HEADS: usize = 4;

/// A stack of the benchmark's blocks at any size (the compile-time
/// benchmark runs GPT-2 small's width: `dim` 768, 12 heads).
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub batch: usize,
    pub seq: usize,
    pub dim: usize,
    pub heads: usize,
    pub blocks: usize,
}

/// `@forward(x) -> logits` and `@loss(x, targets)`.
pub fn build(batch: usize) -> Result<HlModule> {
    build_with(Config { batch, seq: SEQ, dim: DIM, heads: HEADS, blocks: 1 })
}

/// `config.blocks` blocks (named `block`, then `block1`, `block2`, ...)
/// and the head.
pub fn build_with(config: Config) -> Result<HlModule> {
    let Config { batch, seq, dim, heads, blocks } = config;
    let mut model = Sequential::new();
    for i in 0..blocks {
        let name = if i == 0 { "block".to_string() } else { format!("block{i}") };
        model = model.push(TransformerBlock::new(name, dim, heads, 4, true)?.with_gelu(GeluApproximation::Tanh));
    }
    let model = model.push(Linear::new("head", dim, dim));
    let x = TensorSpec::new([batch, seq, dim], DType::F32);
    let targets = TensorSpec::new([batch, seq], DType::I32);
    nn::classifier_module(&model, &x, &targets)
}
