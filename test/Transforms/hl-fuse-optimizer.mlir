// hl-fuse-optimizer: the train step's per-parameter update kernels with one
// body become one hl.multi_tensor_apply.
// RUN: aicf-opt %s -split-input-file --hl-fuse-optimizer | FileCheck %s
// RUN: aicf-opt %s -split-input-file --hl-fuse-optimizer | aicf-opt -split-input-file | FileCheck %s

// Two SGD updates of different shapes: one op, inputs group-major; the
// third op has another body and stays; the fourth feeds another op inside
// the step, so it is not an update.
// CHECK-LABEL: func.func @sgd
func.func @sgd(%g1: tensor<4x3xf32>, %p1: tensor<4x3xf32>, %g2: tensor<3xf32>, %p2: tensor<3xf32>, %lr: tensor<f32>)
    -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  // CHECK: %[[O:.*]] = hl.fused_elementwise ins(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<f32>)
  // CHECK: %[[N:.*]] = hl.neg %[[O]]
  // CHECK: %[[U:.*]] = hl.fused_elementwise ins(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<3xf32>)
  // CHECK: %[[M:.*]]:2 = hl.multi_tensor_apply ins(%arg0, %arg4, %arg1, %arg2, %arg4, %arg3 : tensor<4x3xf32>, tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>) -> tensor<4x3xf32>, tensor<3xf32> {
  // CHECK-NEXT: ^bb0(%[[G:.*]]: f32, %[[R:.*]]: f32, %[[P:.*]]: f32):
  // CHECK-NEXT: %[[S:.*]] = arith.mulf %[[G]], %[[R]] : f32
  // CHECK-NEXT: %[[D:.*]] = arith.subf %[[P]], %[[S]] : f32
  // CHECK-NEXT: hl.yield %[[D]] : f32
  // CHECK: return %[[M]]#0, %[[M]]#1, %[[U]], %[[N]]
  %a = hl.fused_elementwise ins(%g1, %lr, %p1 : tensor<4x3xf32>, tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
  ^bb0(%g: f32, %r: f32, %p: f32):
    %s = arith.mulf %g, %r : f32
    %d = arith.subf %p, %s : f32
    hl.yield %d : f32
  }
  %o = hl.fused_elementwise ins(%g2, %lr : tensor<3xf32>, tensor<f32>) -> tensor<3xf32> {
  ^bb0(%g: f32, %r: f32):
    %s = arith.mulf %g, %r : f32
    hl.yield %s : f32
  }
  %n = hl.neg %o : tensor<3xf32>
  %u = hl.fused_elementwise ins(%g2, %p2 : tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%g: f32, %p: f32):
    %d = arith.addf %p, %g : f32
    hl.yield %d : f32
  }
  %b = hl.fused_elementwise ins(%g2, %lr, %p2 : tensor<3xf32>, tensor<f32>, tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%g: f32, %r: f32, %p: f32):
    %s = arith.mulf %g, %r : f32
    %d = arith.subf %p, %s : f32
    hl.yield %d : f32
  }
  return %a, %b, %u, %n : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// The MLP 784-512-512-10 with Adam after the whole fusion pipeline: the
// three GEMMs of the forward pass, softmax-cross-entropy, three weight
// gradients with their bias gradients, two masked input gradients, the step
// scalars, and one multi-tensor update of six parameters and twelve moments.
// RUN: aicf-opt %S/../../examples/mlp784/mlp784.mlir --hl-optimizer=kind=adam --canonicalize --cse --hl-fuse-gemm-epilogue --hl-fuse-reductions --hl-fuse-elementwise --hl-fuse-optimizer | FileCheck %s --check-prefix=ADAM
// ADAM-LABEL: func.func @train_step
// ADAM-COUNT-8: hl.gemm
// ADAM: hl.multi_tensor_apply
// ADAM-SAME: -> tensor<512x784xf32>, tensor<512x784xf32>, tensor<512x784xf32>, tensor<512xf32>
// ADAM-NOT: hl.fused_elementwise ins(%{{.*}} : tensor<512
// ADAM: return
func.func @placeholder() {
  return
}
