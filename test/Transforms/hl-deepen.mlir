// hl-deepen: a new layer after fc1's activation. Identity mode inserts
// relu(linear(a)) after a chain that ends in a relu; residual mode inserts
// a + fc_out(relu(fc_in(a))) after any activation. Every later use of `a`
// reads the new value; the new parameters follow fc1's.
// RUN: aicf-opt %s --hl-deepen="after=fc1" | FileCheck %s --check-prefix=ID
// RUN: aicf-opt %s --hl-deepen="after=fc1 name=blk residual=true" | FileCheck %s --check-prefix=RES

// ID: hl.param @fc1.bias
// ID-NEXT: hl.param @fc1_deep.weight : tensor<8x8xf32> owner "fc1_deep" init <kaiming_uniform
// ID-NEXT: hl.param @fc1_deep.bias : tensor<8xf32> owner "fc1_deep" init <uniform, low = -0.3535533905932737{{[0-9]*}}, high = 0.3535533905932737{{[0-9]*}}>
// ID-NEXT: hl.param @fc2.weight
// ID-LABEL: func.func @forward
// ID: %[[A:.*]] = hl.relu %{{.*}} : tensor<2x8xf32>
// ID-NEXT: %[[W:.*]] = hl.get_param @fc1_deep.weight : tensor<8x8xf32>
// ID-NEXT: %[[B:.*]] = hl.get_param @fc1_deep.bias : tensor<8xf32>
// ID-NEXT: %[[D:.*]] = hl.linear %[[A]], %[[W]], %[[B]] : tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>
// ID-NEXT: %[[A2:.*]] = hl.relu %[[D]] : tensor<2x8xf32>
// ID: hl.linear %[[A2]], %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>
// ID-LABEL: func.func @loss
// ID: hl.get_param @fc1_deep.weight

// RES: hl.param @blk.fc_in.weight : tensor<8x8xf32> owner "blk.fc_in"
// RES: hl.param @blk.fc_out.bias : tensor<8xf32> owner "blk.fc_out"
// RES-LABEL: func.func @forward
// RES: %[[A:.*]] = hl.relu %{{.*}} : tensor<2x8xf32>
// RES: %[[H:.*]] = hl.linear %[[A]], %{{.*}}, %{{.*}}
// RES-NEXT: %[[R:.*]] = hl.relu %[[H]]
// RES: %[[D:.*]] = hl.linear %[[R]], %{{.*}}, %{{.*}}
// RES-NEXT: %[[S:.*]] = hl.add %[[A]], %[[D]] : tensor<2x8xf32>, tensor<2x8xf32>
// RES: hl.linear %[[S]]

hl.param @fc1.weight : tensor<8x4xf32> owner "fc1" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc1.bias : tensor<8xf32> owner "fc1" init <uniform, low = -0.5, high = 0.5>
hl.param @fc2.weight : tensor<3x8xf32> owner "fc2" init <kaiming_uniform, gain = 0.5773502691896257>
hl.param @fc2.bias : tensor<3xf32> owner "fc2" init <uniform, low = -0.35355339059327373, high = 0.35355339059327373>

func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w1 = hl.get_param @fc1.weight : tensor<8x4xf32>
  %b1 = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>
  %a = hl.relu %h : tensor<2x8xf32>
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
