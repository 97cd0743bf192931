// hl-set-batch follows a constant spread to the batch's shape: a broadcast
// that makes the leading dimension itself (from a lower rank or a leading
// 1), or a splat constant, where an op that cannot take it beside a value
// of the new batch mixes the two (what ONNX's LeakyRelu, Where, Expand and
// ConstantOfShape of a Shape import to). An op that accepts both (a
// concatenation along the batch) keeps the constant as it is.
// RUN: aicf-opt %s --split-input-file --pass-pipeline='builtin.module(hl-set-batch{size=2})' | FileCheck %s
// (The refusals are in hl-set-batch-errors.mlir.)

// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<2x10xf32>, %{{.*}}: tensor<1x10xf32>)
// CHECK: %[[Z:.*]] = hl.constant dense<0.000000e+00> : tensor<f32>
// CHECK: hl.broadcast_to %[[Z]] : tensor<f32> to tensor<2x10xf32>
// CHECK: hl.compare
// CHECK-SAME: tensor<2x10xf32>, tensor<2x10xf32>
// CHECK: hl.constant dense<1.000000e+00> : tensor<2x10xf32>
// CHECK: hl.mul %{{.*}} : tensor<2x10xf32>, tensor<2x10xf32>
// CHECK: hl.broadcast_to %{{.*}} : tensor<1x10xf32> to tensor<2x10xf32>
// CHECK: hl.add %{{.*}} : tensor<2x10xf32>, tensor<2x10xf32>
// CHECK: hl.constant dense<3.000000e+00> : tensor<4x10xf32>
// CHECK: hl.concat %{{.*}} axis = 0 : tensor<2x10xf32>, tensor<4x10xf32>
// CHECK: return %{{.*}} : tensor<2x10xf32>, tensor<6x10xf32>
func.func @forward(%x: tensor<4x10xf32>, %cls: tensor<1x10xf32>) -> (tensor<4x10xf32>, tensor<8x10xf32>) {
  %z = hl.constant dense<0.0> : tensor<f32>
  %zb = hl.broadcast_to %z : tensor<f32> to tensor<4x10xf32>
  %p = hl.compare gt, %x, %zb : tensor<4x10xf32>, tensor<4x10xf32>
  %y = hl.select %p, %x, %zb : tensor<4x10xi1>, tensor<4x10xf32>, tensor<4x10xf32>
  %one = hl.constant dense<1.0> : tensor<4x10xf32>
  %r = hl.mul %y, %one : tensor<4x10xf32>, tensor<4x10xf32>
  %c = hl.broadcast_to %cls : tensor<1x10xf32> to tensor<4x10xf32>
  %s = hl.add %r, %c : tensor<4x10xf32>, tensor<4x10xf32>
  %three = hl.constant dense<3.0> : tensor<4x10xf32>
  %j = hl.concat %s, %three axis = 0 : tensor<4x10xf32>, tensor<4x10xf32>
  return %s, %j : tensor<4x10xf32>, tensor<8x10xf32>
}

// -----

// Further back: an RNN's zero initial state, a splat constant of the old
// batch, reaches the first op that mixes it with the batch through its
// product with the recurrent weight (which reads nothing else of the
// batch): the constant takes the new batch and the product its type again
// (the add was refused, the constant not named).
// RUN: aicf-opt %s --split-input-file --pass-pipeline='builtin.module(hl-set-batch{size=2})' | FileCheck %s --check-prefix=CHAIN
// CHAIN-LABEL: func.func @step(%{{.*}}: tensor<2x16xf32>)
// CHAIN: hl.constant dense<0.000000e+00> : tensor<2x32xf32>
// CHAIN: hl.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x32xf32>, tensor<32x32xf32>
// CHAIN: hl.add %{{.*}}, %{{.*}} : tensor<2x32xf32>, tensor<2x32xf32>
// CHAIN: return %{{.*}} : tensor<2x32xf32>
hl.param @wx : tensor<32x16xf32> owner "" init <normal>
hl.param @wh : tensor<32x32xf32> owner "" init <normal>
func.func @step(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  %Wx = hl.get_param @wx : tensor<32x16xf32>
  %Wh = hl.get_param @wh : tensor<32x32xf32>
  %h0 = hl.constant dense<0.0> : tensor<4x32xf32>
  %ax = hl.linear %x, %Wx : tensor<4x16xf32>, tensor<32x16xf32>
  %ah = hl.matmul %h0, %Wh transpose_rhs : tensor<4x32xf32>, tensor<32x32xf32>
  %s = hl.add %ax, %ah : tensor<4x32xf32>, tensor<4x32xf32>
  return %s : tensor<4x32xf32>
}

// -----

// The recurrent weight as wide as the old batch (hidden 4, batch 4) is a
// parameter, not the chain: the state still takes the new batch.
// CHAIN-LABEL: func.func @square(%{{.*}}: tensor<2x16xf32>)
// CHAIN: hl.constant dense<0.000000e+00> : tensor<2x4xf32>
// CHAIN: hl.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32>
// CHAIN: return %{{.*}} : tensor<2x4xf32>
hl.param @wx : tensor<4x16xf32> owner "" init <normal>
hl.param @wh : tensor<4x4xf32> owner "" init <normal>
func.func @square(%x: tensor<4x16xf32>) -> tensor<4x4xf32> {
  %Wx = hl.get_param @wx : tensor<4x16xf32>
  %Wh = hl.get_param @wh : tensor<4x4xf32>
  %h0 = hl.constant dense<0.0> : tensor<4x4xf32>
  %ax = hl.linear %x, %Wx : tensor<4x16xf32>, tensor<4x16xf32>
  %ah = hl.matmul %h0, %Wh transpose_rhs : tensor<4x4xf32>, tensor<4x4xf32>
  %s = hl.add %ax, %ah : tensor<4x4xf32>, tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}
