// hl-fuse-elementwise: chains of elementwise ops become one
// hl.fused_elementwise with a scalar arith/math body.
// RUN: aicf-opt %s -split-input-file --hl-fuse-elementwise | FileCheck %s
// The fused form parses back and verifies.
// RUN: aicf-opt %s -split-input-file --hl-fuse-elementwise | aicf-opt -split-input-file | FileCheck %s
// A chain of 150 ops becomes three kernels of at most 64 ops (64, 64 and
// 22; one huge kernel's host compile grew faster than its size).
// RUN: python3 -c "p = chr(37); v = lambda i: p + ('x' if i < 0 else 'h' + str(i)); print('func.func @f(' + v(-1) + ': tensor<4xf32>) -> tensor<4xf32> {'); [print('  ' + v(i) + ' = hl.tanh ' + v(i - 1) + ' : tensor<4xf32>') for i in range(150)]; print('  return ' + v(149) + ' : tensor<4xf32>'); print('}')" > %t.chain.mlir
// RUN: aicf-opt %t.chain.mlir --hl-fuse-elementwise | FileCheck %s --check-prefix=CHAIN
// CHAIN-COUNT-3: hl.fused_elementwise
// CHAIN-NOT: hl.fused_elementwise
// CHAIN: return

// An SGD update p - lr * g: one kernel; the bias broadcast stays an input.
// CHECK-LABEL: func.func @sgd_update
// CHECK-SAME: (%[[G:.*]]: tensor<4x3xf32>, %[[LR:.*]]: tensor<f32>, %[[P:.*]]: tensor<4x3xf32>)
func.func @sgd_update(%g: tensor<4x3xf32>, %lr: tensor<f32>, %p: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // CHECK-NEXT: %[[F:.*]] = hl.fused_elementwise ins(%[[G]], %[[LR]], %[[P]] : tensor<4x3xf32>, tensor<f32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32):
  // CHECK-NEXT:   %[[M:.*]] = arith.mulf %[[A]], %[[B]] : f32
  // CHECK-NEXT:   %[[S:.*]] = arith.subf %[[C]], %[[M]] : f32
  // CHECK-NEXT:   hl.yield %[[S]] : f32
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[F]]
  %s = hl.mul %g, %lr : tensor<4x3xf32>, tensor<f32>
  %u = hl.sub %p, %s : tensor<4x3xf32>, tensor<4x3xf32>
  return %u : tensor<4x3xf32>
}

// -----

// Splat constants become scalar constants of the body; compare, cast and
// select have scalar forms (the softmax-minus-one-hot of cross-entropy's
// gradient).
// CHECK-LABEL: func.func @one_hot_delta
func.func @one_hot_delta(%labels: tensor<8x1xi32>, %iota: tensor<5xi32>, %p: tensor<8x5xf32>) -> tensor<8x5xf32> {
  // CHECK: hl.fused_elementwise ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x1xi32>, tensor<5xi32>, tensor<8x5xf32>) -> tensor<8x5xf32>
  // CHECK: arith.cmpi eq
  // CHECK: arith.uitofp %{{.*}} : i1 to f32
  // CHECK: arith.subf
  // CHECK: %[[K:.*]] = arith.constant 1.250000e-01 : f32
  // CHECK: arith.mulf %{{.*}}, %[[K]] : f32
  // CHECK-NOT: hl.constant
  %hot = hl.compare eq, %labels, %iota : tensor<8x1xi32>, tensor<5xi32>
  %f = hl.cast %hot : tensor<8x5xi1> to tensor<8x5xf32>
  %d = hl.sub %p, %f : tensor<8x5xf32>, tensor<8x5xf32>
  %k = hl.constant dense<0.125> : tensor<f32>
  %s = hl.mul %d, %k : tensor<8x5xf32>, tensor<f32>
  return %s : tensor<8x5xf32>
}

// -----

// Activations in their scalar forms: gelu through erf, sigmoid through exp.
// CHECK-LABEL: func.func @activations
func.func @activations(%x: tensor<6xf32>) -> tensor<6xf32> {
  // CHECK: hl.fused_elementwise
  // CHECK: math.erf
  // CHECK: math.exp
  // CHECK: arith.divf
  // CHECK-NOT: hl.gelu
  // CHECK-NOT: hl.sigmoid
  %g = hl.gelu %x : tensor<6xf32>
  %s = hl.sigmoid %g : tensor<6xf32>
  return %s : tensor<6xf32>
}

// -----

// Multi-output fusion: %e has two users; both chains and %e become one
// kernel with two results (%e computed once and, used nowhere else, never
// stored). The cost rule: %small ([3]) would be recomputed for every row of
// the [4, 3] result, so it is not fused into the add that broadcasts it.
// CHECK-LABEL: func.func @cost_rule
func.func @cost_rule(%x: tensor<4x3xf32>, %v: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  // CHECK: %[[SMALL:.*]] = hl.fused_elementwise ins(%{{.*}} : tensor<3xf32>) -> tensor<3xf32>
  // CHECK: math.tanh
  // CHECK: math.sqrt
  // CHECK: %[[F:.*]]:2 = hl.fused_elementwise ins(%{{.*}}, %[[SMALL]] : tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK-COUNT-1: math.exp
  // CHECK: hl.yield %{{.*}}, %{{.*}} : f32, f32
  // CHECK: return %[[F]]#0, %[[F]]#1
  %e = hl.exp %x : tensor<4x3xf32>
  %t = hl.tanh %v : tensor<3xf32>
  %small = hl.sqrt %t : tensor<3xf32>
  %a = hl.add %e, %small : tensor<4x3xf32>, tensor<3xf32>
  %a2 = hl.neg %a : tensor<4x3xf32>
  %b = hl.log %e : tensor<4x3xf32>
  %b2 = hl.abs %b : tensor<4x3xf32>
  return %a2, %b2 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Adam's moments are results of the step and inputs of the update: one
// kernel yields both moments and the new parameter.
// CHECK-LABEL: func.func @adam_like
func.func @adam_like(%m: tensor<5xf32>, %g: tensor<5xf32>, %p: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  // CHECK: %[[F:.*]]:3 = hl.fused_elementwise ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
  // CHECK: return %[[F]]#2, %[[F]]#0, %[[F]]#1
  %m2 = hl.add %m, %g : tensor<5xf32>, tensor<5xf32>
  %g2 = hl.mul %g, %g : tensor<5xf32>, tensor<5xf32>
  %v2 = hl.sqrt %g2 : tensor<5xf32>
  %d = hl.div %m2, %v2 : tensor<5xf32>, tensor<5xf32>
  %p2 = hl.sub %p, %d : tensor<5xf32>, tensor<5xf32>
  return %p2, %m2, %v2 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}

// -----

// Not merged: %t is used by a matmul that stands before the consumer, so
// a fused op at the consumer's place would come too late for it.
// CHECK-LABEL: func.func @use_in_between
func.func @use_in_between(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: %[[T:.*]] = hl.tanh
  // CHECK: %[[M:.*]] = hl.matmul %[[T]], %[[T]]
  // CHECK: hl.fused_elementwise ins(%[[T]], %[[M]]
  %t = hl.tanh %x : tensor<4x4xf32>
  %mm = hl.matmul %t, %t : tensor<4x4xf32>, tensor<4x4xf32>
  %s = hl.mul %t, %t : tensor<4x4xf32>, tensor<4x4xf32>
  %r = hl.add %mm, %s : tensor<4x4xf32>, tensor<4x4xf32>
  %n = hl.neg %r : tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}

// -----

// A chain nothing reads is dead: it goes, instead of becoming a fused op
// without results.
// CHECK-LABEL: func.func @dead_chain
// CHECK-NOT: hl.exp
// CHECK-NOT: hl.fused_elementwise
// CHECK: hl.tanh
func.func @dead_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = hl.exp %x : tensor<4xf32>
  %b = hl.relu %a : tensor<4xf32>
  %c = hl.tanh %x : tensor<4xf32>
  return %c : tensor<4xf32>
}
