// The digits MLP: 8x8 grey-level images (64 features) -> 128 -> ReLU -> 10
// classes, with PyTorch's nn.Linear initialisation (kaiming_uniform with
// a = sqrt(5) for weights, i.e. gain = sqrt(1/3) = 0.5773502691896257; U(-1/sqrt(fan_in), ..) for
// biases). `@loss` is the training objective for a batch of 32; it
// repeats the forward pass rather than calling `@forward`, the way the Rust
// layer API traces it (examples/mlp/model.rs builds exactly this module,
// which a test checks).
//
//   aicf-opt examples/mlp/digits_mlp.mlir --hl-print-param-table

hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <uniform, low = -0.125, high = 0.125>
hl.param @fc2.weight : tensor<10x128xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <uniform, low = -0.08838834764831843, high = 0.08838834764831843>

func.func @forward(%x: tensor<32x64xf32>) -> tensor<32x10xf32> {
  %w1 = hl.get_param @fc1.weight : tensor<128x64xf32>
  %b1 = hl.get_param @fc1.bias : tensor<128xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %a = hl.relu %h : tensor<32x128xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x128xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  %logits = hl.linear %a, %w2, %b2 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>
  return %logits : tensor<32x10xf32>
}

func.func @loss(%x: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %w1 = hl.get_param @fc1.weight : tensor<128x64xf32>
  %b1 = hl.get_param @fc1.bias : tensor<128xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %a = hl.relu %h : tensor<32x128xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x128xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  %logits = hl.linear %a, %w2, %b2 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>
  %loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}
