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

// -----

// fp16's loss scaling: the loss is scaled by the state the backward reads
// as its upstream gradient, before the backward. The fused op goes right
// after the scale's read, before that use.
// CHECK-LABEL: func.func @scaled_loss
func.func @scaled_loss(%logits: tensor<8x5xf32>, %y: tensor<8xi32>, %s: tensor<f32>) -> (tensor<f32>, tensor<8x5xf32>) {
  // CHECK-NEXT: %[[G:.*]] = hl.exp
  // CHECK-NEXT: %[[LOSS:.*]], %[[GRAD:.*]] = hl.softmax_cross_entropy %{{.*}}, %{{.*}}, %[[G]] : tensor<8x5xf32>, tensor<8xi32>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: %[[SCALED:.*]] = hl.mul %[[LOSS]], %[[G]]
  // CHECK-NEXT: return %[[SCALED]], %[[GRAD]]
  %l = hl.cross_entropy %logits, %y : tensor<8x5xf32>, tensor<8xi32>
  %g = hl.exp %s : tensor<f32>
  %scaled = hl.mul %l, %g : tensor<f32>, tensor<f32>
  %d = hl.cross_entropy_backward %logits, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<f32>
  return %scaled, %d : tensor<f32>, tensor<8x5xf32>
}

// -----

// Autocast's casts around the fused op (bf16 logits widened to f32, the
// gradient narrowed back) fold into it: it reads the bf16 logits, keeps
// the f32 loss and writes the bf16 gradient.
// CHECK-LABEL: func.func @casts
// CHECK-SAME: (%[[L:.*]]: tensor<8x5xbf16>, %[[Y:.*]]: tensor<8xi32>, %[[G:.*]]: tensor<f32>)
func.func @casts(%logits: tensor<8x5xbf16>, %y: tensor<8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x5xbf16>) {
  // CHECK-NEXT: %[[LOSS:.*]], %[[GRAD:.*]] = hl.softmax_cross_entropy %[[L]], %[[Y]], %[[G]] : tensor<8x5xbf16>, tensor<8xi32>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: return %[[LOSS]], %[[GRAD]]
  %c = hl.cast %logits : tensor<8x5xbf16> to tensor<8x5xf32>
  %l = hl.cross_entropy %c, %y : tensor<8x5xf32>, tensor<8xi32>
  %d = hl.cross_entropy_backward %c, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<f32>
  %e = hl.cast %d : tensor<8x5xf32> to tensor<8x5xbf16>
  return %l, %e : tensor<f32>, tensor<8x5xbf16>
}

// -----

// A padded head (hl-pad-contractions): the logits a prefix of wider rows,
// the gradient zero-padded back. One op reads the padded rows, with
// `classes` naming the real ones.
// CHECK-LABEL: func.func @padded_head
// CHECK-SAME: (%[[P:.*]]: tensor<2x4x16xf16>, %[[Y:.*]]: tensor<2x4xi64>, %[[G:.*]]: tensor<f32>)
func.func @padded_head(%padded: tensor<2x4x16xf16>, %y: tensor<2x4xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x4x16xf16>) {
  // CHECK-NEXT: %[[LOSS:.*]], %[[GRAD:.*]] = hl.softmax_cross_entropy %[[P]], %[[Y]], %[[G]] ignore_index = -1 classes = 10 : tensor<2x4x16xf16>, tensor<2x4xi64>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: return %[[LOSS]], %[[GRAD]]
  %s = hl.slice %padded start = [0, 0, 0] limit = [2, 4, 10] strides = [1, 1, 1] : tensor<2x4x16xf16>
  %c = hl.cast %s : tensor<2x4x10xf16> to tensor<2x4x10xf32>
  %l = hl.cross_entropy %c, %y ignore_index = -1 : tensor<2x4x10xf32>, tensor<2x4xi64>
  %d = hl.cross_entropy_backward %c, %y, %g ignore_index = -1 : tensor<2x4x10xf32>, tensor<2x4xi64>, tensor<f32>
  %e = hl.cast %d : tensor<2x4x10xf32> to tensor<2x4x10xf16>
  %p = hl.slice_backward %e start = [0, 0, 0] limit = [2, 4, 10] strides = [1, 1, 1] : tensor<2x4x10xf16> -> tensor<2x4x16xf16>
  return %l, %p : tensor<f32>, tensor<2x4x16xf16>
}

// -----

// A padded head computed flat (an importer's 3-D matmul as 2-D) and
// reshaped back between the slice and the loss: the padded rows are
// reshaped instead (a view), and the gradient back.
// CHECK-LABEL: func.func @reshaped_padded_head
// CHECK-SAME: (%[[P:.*]]: tensor<8x16xbf16>, %[[Y:.*]]: tensor<2x4xi32>, %[[G:.*]]: tensor<f32>)
func.func @reshaped_padded_head(%padded: tensor<8x16xbf16>, %y: tensor<2x4xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>) {
  // CHECK-NEXT: %[[R:.*]] = hl.reshape %[[P]] : tensor<8x16xbf16> to tensor<2x4x16xbf16>
  // CHECK-NEXT: %[[LOSS:.*]], %[[GRAD:.*]] = hl.softmax_cross_entropy %[[R]], %[[Y]], %[[G]] classes = 10 : tensor<2x4x16xbf16>, tensor<2x4xi32>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: %[[BACK:.*]] = hl.reshape %[[GRAD]] : tensor<2x4x16xbf16> to tensor<8x16xbf16>
  // CHECK-NEXT: return %[[LOSS]], %[[BACK]]
  %s = hl.slice %padded start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<8x16xbf16>
  %r = hl.reshape %s : tensor<8x10xbf16> to tensor<2x4x10xbf16>
  %c = hl.cast %r : tensor<2x4x10xbf16> to tensor<2x4x10xf32>
  %l = hl.cross_entropy %c, %y : tensor<2x4x10xf32>, tensor<2x4xi32>
  %d = hl.cross_entropy_backward %c, %y, %g : tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<f32>
  %e = hl.cast %d : tensor<2x4x10xf32> to tensor<2x4x10xbf16>
  %b = hl.reshape %e : tensor<2x4x10xbf16> to tensor<8x10xbf16>
  %p = hl.slice_backward %b start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<8x10xbf16> -> tensor<8x16xbf16>
  return %l, %p : tensor<f32>, tensor<8x16xbf16>
}

// -----

// The sliced logits are also returned: the slice stays, the casts fold.
// CHECK-LABEL: func.func @slice_used_elsewhere
func.func @slice_used_elsewhere(%padded: tensor<8x16xbf16>, %y: tensor<8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>, tensor<8x10xbf16>) {
  // CHECK: %[[S:.*]] = hl.slice
  // CHECK-NEXT: %{{.*}}, %[[GRAD:.*]] = hl.softmax_cross_entropy %[[S]], %{{.*}}, %{{.*}} : tensor<8x10xbf16>, tensor<8xi32>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: hl.slice_backward %[[GRAD]]
  // CHECK-NOT: hl.cast
  %s = hl.slice %padded start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<8x16xbf16>
  %c = hl.cast %s : tensor<8x10xbf16> to tensor<8x10xf32>
  %l = hl.cross_entropy %c, %y : tensor<8x10xf32>, tensor<8xi32>
  %d = hl.cross_entropy_backward %c, %y, %g : tensor<8x10xf32>, tensor<8xi32>, tensor<f32>
  %e = hl.cast %d : tensor<8x10xf32> to tensor<8x10xbf16>
  %p = hl.slice_backward %e start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<8x10xbf16> -> tensor<8x16xbf16>
  return %l, %p, %s : tensor<f32>, tensor<8x16xbf16>, tensor<8x10xbf16>
}

// -----

// The f32 gradient is read elsewhere too: nothing folds into the op.
// CHECK-LABEL: func.func @f32_gradient_used
func.func @f32_gradient_used(%logits: tensor<8x5xbf16>, %y: tensor<8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x5xbf16>, tensor<8x5xf32>) {
  // CHECK: hl.cast
  // CHECK-NEXT: hl.softmax_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x5xf32>
  // CHECK-NEXT: hl.cast
  %c = hl.cast %logits : tensor<8x5xbf16> to tensor<8x5xf32>
  %l = hl.cross_entropy %c, %y : tensor<8x5xf32>, tensor<8xi32>
  %d = hl.cross_entropy_backward %c, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<f32>
  %e = hl.cast %d : tensor<8x5xf32> to tensor<8x5xbf16>
  return %l, %e, %d : tensor<f32>, tensor<8x5xbf16>, tensor<8x5xf32>
}

// -----

// A slice that drops rows as well (or starts past 0) is not a padded
// head: the op reads the sliced values.
// CHECK-LABEL: func.func @not_a_prefix
func.func @not_a_prefix(%padded: tensor<9x16xbf16>, %y: tensor<8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<9x16xbf16>) {
  // CHECK: hl.slice
  // CHECK-NEXT: hl.softmax_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x10xbf16>
  // CHECK-NOT: classes
  %s = hl.slice %padded start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<9x16xbf16>
  %c = hl.cast %s : tensor<8x10xbf16> to tensor<8x10xf32>
  %l = hl.cross_entropy %c, %y : tensor<8x10xf32>, tensor<8xi32>
  %d = hl.cross_entropy_backward %c, %y, %g : tensor<8x10xf32>, tensor<8xi32>, tensor<f32>
  %e = hl.cast %d : tensor<8x10xf32> to tensor<8x10xbf16>
  %p = hl.slice_backward %e start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<8x10xbf16> -> tensor<9x16xbf16>
  return %l, %p : tensor<f32>, tensor<9x16xbf16>
}

// -----

// An evaluation's loss (no backward) of a padded bf16 head: it reads the
// padded rows itself, with an upstream gradient of one and its gradient
// unused (convert-hl-to-ll computes the loss alone).
// CHECK-LABEL: func.func @eval_padded
// CHECK-SAME: (%[[P:.*]]: tensor<8x16xbf16>, %[[Y:.*]]: tensor<8xi32>)
func.func @eval_padded(%p: tensor<8x16xbf16>, %y: tensor<8xi32>) -> tensor<f32> {
  // CHECK-NOT: hl.slice
  // CHECK-NOT: hl.cast
  // CHECK: %[[ONE:.*]] = hl.constant dense<1.000000e+00> : tensor<f32>
  // CHECK-NEXT: %[[LOSS:.*]], %{{.*}} = hl.softmax_cross_entropy %[[P]], %[[Y]], %[[ONE]] classes = 10 : tensor<8x16xbf16>, tensor<8xi32>, tensor<f32> -> tensor<f32>
  // CHECK-NEXT: return %[[LOSS]]
  %s = hl.slice %p start = [0, 0] limit = [8, 10] strides = [1, 1] : tensor<8x16xbf16>
  %c = hl.cast %s : tensor<8x10xbf16> to tensor<8x10xf32>
  %l = hl.cross_entropy %c, %y : tensor<8x10xf32>, tensor<8xi32>
  return %l : tensor<f32>
}

// -----

// f32 logits as they are: the loss alone already; nothing to fold.
// CHECK-LABEL: func.func @eval_f32
func.func @eval_f32(%p: tensor<8x10xf32>, %y: tensor<8xi32>) -> tensor<f32> {
  // CHECK: hl.cross_entropy
  // CHECK-NOT: hl.softmax_cross_entropy
  %l = hl.cross_entropy %p, %y : tensor<8x10xf32>, tensor<8xi32>
  return %l : tensor<f32>
}
