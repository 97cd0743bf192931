//! The digits MLP: 8x8 grey-level images (64 features) -> 128 -> ReLU -> 10
//! classes. Same IR as `digits_mlp.mlir` (tested).

use aicf_compiler::nn::{self, DType, HlModule, Linear, ReLU, Sequential, TensorSpec};

pub const BATCH: usize = 32;

pub fn model() -> Sequential {
    Sequential::new().push(Linear::new("fc1", 64, 128)).push(ReLU).push(Linear::new("fc2", 128, 10))
}

/// `@forward(x: [batch, 64]) -> logits` and `@loss(x, labels: [batch] i32)`.
pub fn build(batch: usize) -> nn::Result<HlModule> {
    nn::classifier_module(&model(), &TensorSpec::f32([batch, 64]), &TensorSpec::new([batch], DType::I32))
}
