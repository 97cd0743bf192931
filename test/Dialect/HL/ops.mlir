// Every hl op parses, verifies, prints and parses again, in the custom
// and in the generic form.
// RUN: aicf-opt %s | aicf-opt | FileCheck %s
// RUN: aicf-opt %s --mlir-print-op-generic | aicf-opt | FileCheck %s

// CHECK-LABEL: hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform, gain = 5.773500e-01>
hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform, gain = 0.57735>
// CHECK: hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <uniform, low = -1.250000e-01, high = 1.250000e-01>
hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <uniform, low = -0.125, high = 0.125>
// Defaults are not printed: kaiming's gain sqrt(2), mode fan_in.
// CHECK: hl.param @fc2.weight : tensor<10x128xf32> owner "fc2" init <kaiming_normal>
hl.param @fc2.weight : tensor<10x128xf32> owner "fc2" init <kaiming_normal, gain = 1.4142135623730951, mode = fan_in>
// CHECK: hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <zeros>
hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <zeros>
// CHECK: hl.param @emb.weight : tensor<32x16xbf16> owner "emb" init <normal, mean = 1.000000e-01, std = 2.000000e-02>
hl.param @emb.weight : tensor<32x16xbf16> owner "emb" init <normal, mean = 0.1, std = 0.02>
// CHECK: hl.param @proj.weight : tensor<16x32xf16> owner "proj" init <xavier_uniform, gain = 2.000000e+00>
hl.param @proj.weight : tensor<16x32xf16> owner "proj" init <xavier_uniform, gain = 2.0>
// CHECK: hl.param @head.weight : tensor<16x32xf64> owner "head" init <kaiming_uniform, mode = fan_out>
hl.param @head.weight : tensor<16x32xf64> owner "head" init <kaiming_uniform, mode = fan_out>
// A parameter of the model itself has no owner.
// CHECK: hl.param @scale : tensor<1xf32> owner "" init <ones>
hl.param @scale : tensor<1xf32> owner "" init <ones>
// CHECK: hl.param @other : tensor<4x4xf32> owner "" init <xavier_normal>
hl.param @other : tensor<4x4xf32> owner "" init <xavier_normal>

// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  // CHECK: %[[W1:.*]] = hl.get_param @fc1.weight : tensor<128x64xf32>
  %w1 = hl.get_param @fc1.weight : tensor<128x64xf32>
  // CHECK: %[[B1:.*]] = hl.get_param @fc1.bias : tensor<128xf32>
  %b1 = hl.get_param @fc1.bias : tensor<128xf32>
  // CHECK: %[[H:.*]] = hl.linear %{{.*}}, %[[W1]], %[[B1]] : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  // CHECK: %[[R:.*]] = hl.relu %[[H]] : tensor<32x128xf32>
  %r = hl.relu %h : tensor<32x128xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x128xf32>
  // CHECK: %[[L:.*]] = hl.linear %[[R]], %{{.*}} : tensor<32x128xf32>, tensor<10x128xf32>
  %l = hl.linear %r, %w2 : tensor<32x128xf32>, tensor<10x128xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  // CHECK: %[[LB:.*]] = hl.add %[[L]], %{{.*}} : tensor<32x10xf32>, tensor<10xf32>
  %lb = hl.add %l, %b2 : tensor<32x10xf32>, tensor<10xf32>
  // CHECK: hl.cross_entropy %[[LB]], %{{.*}} : tensor<32x10xf32>, tensor<32xi32>
  %loss = hl.cross_entropy %lb, %labels : tensor<32x10xf32>, tensor<32xi32>
  // CHECK: hl.cross_entropy %[[LB]], %{{.*}} reduction = sum : tensor<32x10xf32>, tensor<32xi32>
  %sum = hl.cross_entropy %lb, %labels reduction = sum : tensor<32x10xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @broadcast_and_matmul
func.func @broadcast_and_matmul(%a: tensor<4x1x3xf32>, %b: tensor<5x1xf32>, %m: tensor<2x8x3xf32>,
                                %n: tensor<2x3x6xf32>, %w: tensor<2x6x3xf32>) {
  // Shapes align from the right; a 1 stretches.
  // CHECK: hl.add %{{.*}}, %{{.*}} : tensor<4x1x3xf32>, tensor<5x1xf32>
  %0 = hl.add %a, %b : tensor<4x1x3xf32>, tensor<5x1xf32>
  // CHECK: hl.mul %{{.*}}, %{{.*}} : tensor<4x5x3xf32>, tensor<4x1x3xf32>
  %1 = hl.mul %0, %a : tensor<4x5x3xf32>, tensor<4x1x3xf32>
  // CHECK: hl.matmul %{{.*}}, %{{.*}} : tensor<2x8x3xf32>, tensor<2x3x6xf32>
  %2 = hl.matmul %m, %n : tensor<2x8x3xf32>, tensor<2x3x6xf32>
  // CHECK: hl.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x8x3xf32>, tensor<2x6x3xf32>
  %3 = hl.matmul %m, %w transpose_rhs : tensor<2x8x3xf32>, tensor<2x6x3xf32>
  // CHECK: hl.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<2x3x6xf32>, tensor<2x8x3xf32>
  %4 = hl.matmul %n, %m transpose_lhs transpose_rhs : tensor<2x3x6xf32>, tensor<2x8x3xf32>
  // CHECK: hl.constant dense<1.000000e+00> : tensor<4xf32>
  %5 = hl.constant dense<1.0> : tensor<4xf32>
  // CHECK: hl.constant dense<[1, 2]> : tensor<2xi32>
  %6 = hl.constant dense<[1, 2]> : tensor<2xi32>
  return
}
