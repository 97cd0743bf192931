// A small CNN for the 8x8 digits (1 channel): conv 3x3 (1 -> 16, padding 1)
// + ReLU + 2x2 max-pool, conv 3x3 (16 -> 32, padding 1) + ReLU + 2x2
// max-pool, flatten (32 x 2 x 2 = 128) and a linear classifier to 10 classes.
// PyTorch's default initialisation: kaiming_uniform with a = sqrt(5)
// (gain sqrt(1/3)) for weights, U(-1/sqrt(fan_in), ..) for biases.
// `@forward` gives the logits of a batch of 32, `@loss` the mean
// cross-entropy against integer labels.
//
// The Rust layer API builds exactly this module (examples/cnn/model.rs;
// `cargo run -p aicf-compiler --example models -- cnn`), which a test checks.
//
//   aicf-opt examples/cnn/digits_cnn.mlir --hl-print-param-table

hl.param @conv1.weight : tensor<16x1x3x3xf32> owner "conv1" init <kaiming_uniform, gain = 0.57735026918962573>
hl.param @conv1.bias : tensor<16xf32> owner "conv1" init <uniform, low = -0.33333333333333331, high = 0.33333333333333331>
hl.param @conv2.weight : tensor<32x16x3x3xf32> owner "conv2" init <kaiming_uniform, gain = 0.57735026918962573>
hl.param @conv2.bias : tensor<32xf32> owner "conv2" init <uniform, low = -0.083333333333333329, high = 0.083333333333333329>
hl.param @fc.weight : tensor<10x128xf32> owner "fc" init <kaiming_uniform, gain = 0.57735026918962573>
hl.param @fc.bias : tensor<10xf32> owner "fc" init <uniform, low = -0.088388347648318433, high = 0.088388347648318433>

func.func @forward(%arg0: tensor<32x1x8x8xf32>) -> tensor<32x10xf32> {
  %0 = hl.get_param @conv1.weight : tensor<16x1x3x3xf32>
  %1 = hl.get_param @conv1.bias : tensor<16xf32>
  %2 = hl.conv2d %arg0, %0, %1 stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<32x1x8x8xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>
  %3 = hl.relu %2 : tensor<32x16x8x8xf32>
  %4 = hl.max_pool2d %3 kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<32x16x8x8xf32>
  %5 = hl.get_param @conv2.weight : tensor<32x16x3x3xf32>
  %6 = hl.get_param @conv2.bias : tensor<32xf32>
  %7 = hl.conv2d %4, %5, %6 stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<32x16x4x4xf32>, tensor<32x16x3x3xf32>, tensor<32xf32>
  %8 = hl.relu %7 : tensor<32x32x4x4xf32>
  %9 = hl.max_pool2d %8 kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<32x32x4x4xf32>
  %10 = hl.reshape %9 : tensor<32x32x2x2xf32> to tensor<32x128xf32>
  %11 = hl.get_param @fc.weight : tensor<10x128xf32>
  %12 = hl.get_param @fc.bias : tensor<10xf32>
  %13 = hl.linear %10, %11, %12 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>
  return %13 : tensor<32x10xf32>
}

func.func @loss(%arg0: tensor<32x1x8x8xf32>, %arg1: tensor<32xi32>) -> tensor<f32> {
  %0 = hl.get_param @conv1.weight : tensor<16x1x3x3xf32>
  %1 = hl.get_param @conv1.bias : tensor<16xf32>
  %2 = hl.conv2d %arg0, %0, %1 stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<32x1x8x8xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>
  %3 = hl.relu %2 : tensor<32x16x8x8xf32>
  %4 = hl.max_pool2d %3 kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<32x16x8x8xf32>
  %5 = hl.get_param @conv2.weight : tensor<32x16x3x3xf32>
  %6 = hl.get_param @conv2.bias : tensor<32xf32>
  %7 = hl.conv2d %4, %5, %6 stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<32x16x4x4xf32>, tensor<32x16x3x3xf32>, tensor<32xf32>
  %8 = hl.relu %7 : tensor<32x32x4x4xf32>
  %9 = hl.max_pool2d %8 kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<32x32x4x4xf32>
  %10 = hl.reshape %9 : tensor<32x32x2x2xf32> to tensor<32x128xf32>
  %11 = hl.get_param @fc.weight : tensor<10x128xf32>
  %12 = hl.get_param @fc.bias : tensor<10xf32>
  %13 = hl.linear %10, %11, %12 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>
  %14 = hl.cross_entropy %13, %arg1 : tensor<32x10xf32>, tensor<32xi32>
  return %14 : tensor<f32>
}
