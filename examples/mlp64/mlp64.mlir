// The small benchmark MLP of ../shared/bench/common_spec.txt (mlp64): 64 ->
// 128 -> ReLU -> 128 -> ReLU -> 10, batch 32, mean softmax cross-entropy,
// with PyTorch's nn.Linear initialisation.
//
//   aicf bench examples/mlp64/mlp64.mlir --optimizer sgd

hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <uniform, low = -0.125, high = 0.125>
hl.param @fc2.weight : tensor<128x128xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc2.bias : tensor<128xf32> owner "fc2" init <uniform, low = -0.08838834764831845, high = 0.08838834764831845>
hl.param @fc3.weight : tensor<10x128xf32> owner "fc3" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc3.bias : tensor<10xf32> owner "fc3" init <uniform, low = -0.08838834764831845, high = 0.08838834764831845>
func.func @loss(%x: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %w1 = hl.get_param @fc1.weight : tensor<128x64xf32>
  %b1 = hl.get_param @fc1.bias : tensor<128xf32>
  %h1 = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %a1 = hl.relu %h1 : tensor<32x128xf32>
  %w2 = hl.get_param @fc2.weight : tensor<128x128xf32>
  %b2 = hl.get_param @fc2.bias : tensor<128xf32>
  %h2 = hl.linear %a1, %w2, %b2 : tensor<32x128xf32>, tensor<128x128xf32>, tensor<128xf32>
  %a2 = hl.relu %h2 : tensor<32x128xf32>
  %w3 = hl.get_param @fc3.weight : tensor<10x128xf32>
  %b3 = hl.get_param @fc3.bias : tensor<10xf32>
  %logits = hl.linear %a2, %w3, %b3 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>
  %loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}
