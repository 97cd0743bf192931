//! A small CNN for the 8x8 digits: two 3x3 conv + ReLU + 2x2 max-pool
//! stages (1 -> 16 -> 32 channels, 8x8 -> 4x4 -> 2x2), then a linear
//! classifier over the 128 features. Same IR as `digits_cnn.mlir` (tested).

use aicf_compiler::nn::{
    self, Conv2d, Conv2dOptions, DType, Flatten, HlModule, Linear, MaxPool2d, Pool2dOptions, ReLU, Sequential,
    TensorSpec,
};

pub const BATCH: usize = 32;

pub fn model() -> Sequential {
    let same = Conv2dOptions { padding: [1, 1], ..Conv2dOptions::default() };
    Sequential::new()
        .push(Conv2d::new("conv1", 1, 16, 3).with_options(same))
        .push(ReLU)
        .push(MaxPool2d(Pool2dOptions::square(2)))
        .push(Conv2d::new("conv2", 16, 32, 3).with_options(same))
        .push(ReLU)
        .push(MaxPool2d(Pool2dOptions::square(2)))
        .push(Flatten(1))
        .push(Linear::new("fc", 32 * 2 * 2, 10))
}

/// `@forward(x: [batch, 1, 8, 8]) -> logits` and `@loss(x, labels: [batch] i32)`.
pub fn build(batch: usize) -> nn::Result<HlModule> {
    nn::classifier_module(&model(), &TensorSpec::f32([batch, 1, 8, 8]), &TensorSpec::new([batch], DType::I32))
}
