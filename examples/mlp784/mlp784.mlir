// The benchmark MLP of ../shared/bench/common_spec.txt (mlp784): 784 -> 512
// -> ReLU -> 512 -> ReLU -> 10, batch 256, mean softmax cross-entropy, with
// PyTorch's nn.Linear initialisation. The kernel-count test and the memory
// plan lit test compile its train step.
//
//   aicf-opt examples/mlp784/mlp784.mlir --aicf-train-pipeline

hl.param @fc1.weight : tensor<512x784xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc1.bias : tensor<512xf32> owner "fc1" init <uniform, low = -0.03571428571428571, high = 0.03571428571428571>
hl.param @fc2.weight : tensor<512x512xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc2.bias : tensor<512xf32> owner "fc2" init <uniform, low = -0.04419417382415922, high = 0.04419417382415922>
hl.param @fc3.weight : tensor<10x512xf32> owner "fc3" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc3.bias : tensor<10xf32> owner "fc3" init <uniform, low = -0.04419417382415922, high = 0.04419417382415922>
func.func @loss(%x: tensor<256x784xf32>, %labels: tensor<256xi32>) -> tensor<f32> {
  %w1 = hl.get_param @fc1.weight : tensor<512x784xf32>
  %b1 = hl.get_param @fc1.bias : tensor<512xf32>
  %h1 = hl.linear %x, %w1, %b1 : tensor<256x784xf32>, tensor<512x784xf32>, tensor<512xf32>
  %a1 = hl.relu %h1 : tensor<256x512xf32>
  %w2 = hl.get_param @fc2.weight : tensor<512x512xf32>
  %b2 = hl.get_param @fc2.bias : tensor<512xf32>
  %h2 = hl.linear %a1, %w2, %b2 : tensor<256x512xf32>, tensor<512x512xf32>, tensor<512xf32>
  %a2 = hl.relu %h2 : tensor<256x512xf32>
  %w3 = hl.get_param @fc3.weight : tensor<10x512xf32>
  %b3 = hl.get_param @fc3.bias : tensor<10xf32>
  %logits = hl.linear %a2, %w3, %b3 : tensor<256x512xf32>, tensor<10x512xf32>, tensor<10xf32>
  %loss = hl.cross_entropy %logits, %labels : tensor<256x10xf32>, tensor<256xi32>
  return %loss : tensor<f32>
}
