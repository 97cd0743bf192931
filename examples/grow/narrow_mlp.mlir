// The digits MLP of examples/mlp at a sixteenth of its width: 64 features
// -> 16 -> ReLU -> 10 classes, PyTorch's nn.Linear initialisation. It is
// where examples/grow starts: `aicf train --adapt examples/grow/policy.toml`
// widens fc1 on each loss plateau (16 -> 32 -> 64 -> 128), carrying the
// trained parameters and Adam's state into each wider model. The final
// architecture, for training from scratch, is the same rewrite run ahead:
//
//   aicf-opt examples/grow/narrow_mlp.mlir --hl-widen="layer=fc1 width=128"

hl.param @fc1.weight : tensor<16x64xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc1.bias : tensor<16xf32> owner "fc1" init <uniform, low = -0.125, high = 0.125>
hl.param @fc2.weight : tensor<10x16xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <uniform, low = -0.25, high = 0.25>

func.func @forward(%x: tensor<32x64xf32>) -> tensor<32x10xf32> {
  %w1 = hl.get_param @fc1.weight : tensor<16x64xf32>
  %b1 = hl.get_param @fc1.bias : tensor<16xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<16x64xf32>, tensor<16xf32>
  %a = hl.relu %h : tensor<32x16xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x16xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  %logits = hl.linear %a, %w2, %b2 : tensor<32x16xf32>, tensor<10x16xf32>, tensor<10xf32>
  return %logits : tensor<32x10xf32>
}

func.func @loss(%x: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %w1 = hl.get_param @fc1.weight : tensor<16x64xf32>
  %b1 = hl.get_param @fc1.bias : tensor<16xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<16x64xf32>, tensor<16xf32>
  %a = hl.relu %h : tensor<32x16xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x16xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  %logits = hl.linear %a, %w2, %b2 : tensor<32x16xf32>, tensor<10x16xf32>, tensor<10xf32>
  %loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}
