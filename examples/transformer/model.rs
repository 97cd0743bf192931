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

/// `@forward(x) -> logits` and `@loss(x, targets)`.
pub fn build(batch: usize) -> Result<HlModule> {
    let model = Sequential::new()
        .push(TransformerBlock::new("block", DIM, HEADS, 4, true)?.with_gelu(GeluApproximation::Tanh))
        .push(Linear::new("head", DIM, DIM));
    let x = TensorSpec::new([batch, SEQ, DIM], DType::F32);
    let targets = TensorSpec::new([batch, SEQ], DType::I32);
    nn::classifier_module(&model, &x, &targets)
}
