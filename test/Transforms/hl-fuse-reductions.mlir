// hl-fuse-reductions: a cross-entropy and its backward over the same rows
// become one hl.softmax_cross_entropy.
// RUN: aicf-opt %s -split-input-file --hl-fuse-reductions | FileCheck %s

// CHECK-LABEL: func.func @pair
// CHECK-SAME: (%[[L:.*]]: tensor<8x5xf32>, %[[Y:.*]]: tensor<8xi64>, %[[G:.*]]: tensor<f32>)
func.func @pair(%logits: tensor<8x5xf32>, %y: tensor<8xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x5xf32>) {
  // CHECK-NEXT: %[[LOSS:.*]], %[[GRAD:.*]] = hl.softmax_cross_entropy %[[L]], %[[Y]], %[[G]] ignore_index = 0 : tensor<8x5xf32>, tensor<8xi64>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: return %[[LOSS]], %[[GRAD]]
  %l = hl.cross_entropy %logits, %y ignore_index = 0 : tensor<8x5xf32>, tensor<8xi64>
  %d = hl.cross_entropy_backward %logits, %y, %g ignore_index = 0 : tensor<8x5xf32>, tensor<8xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<8x5xf32>
}

// -----

// Different attributes are different losses: no fusion.
// CHECK-LABEL: func.func @different_reduction
func.func @different_reduction(%logits: tensor<8x5xf32>, %y: tensor<8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x5xf32>) {
  // CHECK: hl.cross_entropy %{{.*}}, %{{.*}} reduction = sum
  // CHECK: hl.cross_entropy_backward
  // CHECK-NOT: hl.softmax_cross_entropy
  %l = hl.cross_entropy %logits, %y reduction = sum : tensor<8x5xf32>, tensor<8xi32>
  %d = hl.cross_entropy_backward %logits, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<8x5xf32>
}

// -----

// The loss is used before the backward's place (here to scale its own
// upstream gradient): the fused op could not be computed there, so the
// pair stays apart.
// CHECK-LABEL: func.func @loss_used_early
func.func @loss_used_early(%logits: tensor<8x5xf32>, %y: tensor<8xi32>) -> tensor<8x5xf32> {
  // CHECK: hl.cross_entropy
  // CHECK: hl.cross_entropy_backward
  // CHECK-NOT: hl.softmax_cross_entropy
  %l = hl.cross_entropy %logits, %y : tensor<8x5xf32>, tensor<8xi32>
  %g = hl.mul %l, %l : tensor<f32>, tensor<f32>
  %d = hl.cross_entropy_backward %logits, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<f32>
  return %d : tensor<8x5xf32>
}
