// hl-widen: the layer's weight and bias grow along their rows, the next
// linear layer's weight along its columns (through the activation), every
// op is retyped, and the next layer's bias bound becomes 1/sqrt(new fan-in).
// RUN: aicf-opt %s --hl-widen="layer=fc1 width=24" | FileCheck %s
// The rewrite composes: widening twice is widening once.
// RUN: aicf-opt %s --hl-widen="layer=fc1 width=12" --hl-widen="layer=fc1 width=24" | FileCheck %s

// CHECK: hl.param @fc1.weight : tensor<24x4xf32> owner "fc1" init <kaiming_uniform
// CHECK: hl.param @fc1.bias : tensor<24xf32> owner "fc1" init <uniform, low = -5.000000e-01, high = 5.000000e-01>
// CHECK: hl.param @fc2.weight : tensor<3x24xf32>
// CHECK: hl.param @fc2.bias : tensor<3xf32> owner "fc2" init <uniform, low = -0.2041241452319315{{[0-9]*}}, high = 0.2041241452319315{{[0-9]*}}>
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xf32>) -> tensor<2x3xf32>
// CHECK: %[[W:.*]] = hl.get_param @fc1.weight : tensor<24x4xf32>
// CHECK: %[[H:.*]] = hl.linear %arg0, %[[W]], %{{.*}} : tensor<2x4xf32>, tensor<24x4xf32>, tensor<24xf32>
// CHECK: %[[A:.*]] = hl.gelu %[[H]] : tensor<2x24xf32>
// CHECK: hl.get_param @fc2.weight : tensor<3x24xf32>
// CHECK: hl.linear %[[A]], %{{.*}}, %{{.*}} : tensor<2x24xf32>, tensor<3x24xf32>, tensor<3xf32>
// CHECK-LABEL: func.func @loss
// CHECK: hl.relu %{{.*}} : tensor<2x24xf32>
// CHECK: hl.cross_entropy

hl.param @fc1.weight : tensor<8x4xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc1.bias : tensor<8xf32> owner "fc1" init <uniform, low = -0.5, high = 0.5>
hl.param @fc2.weight : tensor<3x8xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc2.bias : tensor<3xf32> owner "fc2" init <uniform, low = -0.35355339059327373, high = 0.35355339059327373>

func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w1 = hl.get_param @fc1.weight : tensor<8x4xf32>
  %b1 = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>
  %a = hl.gelu %h : tensor<2x8xf32>
  %w2 = hl.get_param @fc2.weight : tensor<3x8xf32>
  %b2 = hl.get_param @fc2.bias : tensor<3xf32>
  %y = hl.linear %a, %w2, %b2 : tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>
  return %y : tensor<2x3xf32>
}

func.func @loss(%x: tensor<2x4xf32>, %labels: tensor<2xi32>) -> tensor<f32> {
  %w1 = hl.get_param @fc1.weight : tensor<8x4xf32>
  %b1 = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>
  %a = hl.relu %h : tensor<2x8xf32>
  %w2 = hl.get_param @fc2.weight : tensor<3x8xf32>
  %b2 = hl.get_param @fc2.bias : tensor<3xf32>
  %y = hl.linear %a, %w2, %b2 : tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>
  %l = hl.cross_entropy %y, %labels : tensor<2x3xf32>, tensor<2xi32>
  return %l : tensor<f32>
}
