// hl-set-batch follows a constant spread to the batch's shape: a broadcast
// that makes the leading dimension itself, or a splat constant, mixed with a
// value that carries the batch (what ONNX's LeakyRelu, Where, Expand and
// ConstantOfShape of a Shape import to). A constant that is not a splat, or a
// broadcast of a value that has the dimension already, keeps its shape, and
// an op mixing it with the new batch is an error there.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-set-batch{size=2})' | FileCheck %s
// (The refusals are in hl-set-batch-errors.mlir.)

// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<2x10xf32>) -> tensor<2x10xf32>
// CHECK: %[[Z:.*]] = hl.constant dense<0.000000e+00> : tensor<f32>
// CHECK: hl.broadcast_to %[[Z]] : tensor<f32> to tensor<2x10xf32>
// CHECK: hl.compare
// CHECK-SAME: tensor<2x10xf32>, tensor<2x10xf32>
// CHECK: hl.constant dense<1.000000e+00> : tensor<2x10xf32>
// CHECK: hl.mul %{{.*}} : tensor<2x10xf32>, tensor<2x10xf32>
func.func @forward(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %z = hl.constant dense<0.0> : tensor<f32>
  %zb = hl.broadcast_to %z : tensor<f32> to tensor<4x10xf32>
  %p = hl.compare gt, %x, %zb : tensor<4x10xf32>, tensor<4x10xf32>
  %y = hl.select %p, %x, %zb : tensor<4x10xi1>, tensor<4x10xf32>, tensor<4x10xf32>
  %one = hl.constant dense<1.0> : tensor<4x10xf32>
  %r = hl.mul %y, %one : tensor<4x10xf32>, tensor<4x10xf32>
  return %r : tensor<4x10xf32>
}
