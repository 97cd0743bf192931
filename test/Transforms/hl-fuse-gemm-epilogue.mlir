// hl-fuse-gemm-epilogue: matmul/linear plus the elementwise ops after them
// become one hl.gemm; the cost rule keeps a GEMM with several uses apart.
// RUN: aicf-opt %s -split-input-file --hl-fuse-gemm-epilogue | FileCheck %s

// CHECK-LABEL: func.func @forward_epilogue
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[B:.*]]: tensor<32xf32>, %[[R:.*]]: tensor<8x32xf32>)
func.func @forward_epilogue(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %r: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // linear + gelu + residual add: one GEMM.
  // CHECK-NEXT: %[[Y:.*]] = hl.gemm %[[X]], %[[W]] bias(%[[B]]) residual(%[[R]]) transpose_rhs act = gelu : tensor<8x16xf32>, tensor<32x16xf32> bias tensor<32xf32> residual tensor<8x32xf32>
  // CHECK-NEXT: return %[[Y]]
  %y = hl.linear %x, %w, %b : tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>
  %g = hl.gelu %y : tensor<8x32xf32>
  %s = hl.add %r, %g : tensor<8x32xf32>, tensor<8x32xf32>
  return %s : tensor<8x32xf32>
}

// -----

// A scale by a constant becomes alpha, then a bias vector is added.
// CHECK-LABEL: func.func @scale_then_bias
func.func @scale_then_bias(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<6xf32>) -> tensor<4x6xf32> {
  // CHECK: %[[Y:.*]] = hl.gemm %{{.*}}, %{{.*}} bias(%{{.*}}) alpha = 1.250000e-01 act = sigmoid : tensor<4x8xf32>, tensor<8x6xf32> bias tensor<6xf32>
  // CHECK-NOT: hl.mul
  // CHECK-NOT: hl.add
  %m = hl.matmul %a, %b : tensor<4x8xf32>, tensor<8x6xf32>
  %k = hl.constant dense<0.125> : tensor<f32>
  %s = hl.mul %m, %k : tensor<4x6xf32>, tensor<f32>
  %y = hl.add %s, %c : tensor<4x6xf32>, tensor<6xf32>
  %z = hl.sigmoid %y : tensor<4x6xf32>
  return %z : tensor<4x6xf32>
}

// -----

// A second row vector after a bias stays an add (it replaced the bias:
// `linear(x, W, b) + p` computed x W^T + p, b lost).
// CHECK-LABEL: func.func @bias_then_vector
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<6x8xf32>, %[[B:.*]]: tensor<6xf32>, %[[P:.*]]: tensor<6xf32>)
func.func @bias_then_vector(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>, %b: tensor<6xf32>, %p: tensor<6xf32>) -> tensor<4x6xf32> {
  // CHECK: %[[Y:.*]] = hl.gemm %[[X]], %[[W]] bias(%[[B]]) transpose_rhs : tensor<4x8xf32>, tensor<6x8xf32> bias tensor<6xf32>
  // CHECK-NEXT: %[[S:.*]] = hl.add %[[Y]], %[[P]]
  // CHECK-NEXT: %[[R:.*]] = hl.relu %[[S]]
  // CHECK-NEXT: return %[[R]]
  %y = hl.linear %x, %w, %b : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>
  %s = hl.add %y, %p : tensor<4x6xf32>, tensor<6xf32>
  %r = hl.relu %s : tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}

// -----

// The backward form: the ReLU's derivative mask in the epilogue of the
// GEMM producing the upstream gradient, and W^T folded into a flag.
// CHECK-LABEL: func.func @backward_mask
// CHECK-SAME: (%[[G:.*]]: tensor<8x10xf32>, %[[W:.*]]: tensor<10x32xf32>, %[[A:.*]]: tensor<8x32xf32>)
func.func @backward_mask(%g: tensor<8x10xf32>, %w: tensor<10x32xf32>, %a: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // (The transpose and compare left without uses are canonicalize's to erase.)
  // CHECK: %[[D:.*]] = hl.gemm %[[G]], %[[W]] mask(%[[A]]) : tensor<8x10xf32>, tensor<10x32xf32> mask tensor<8x32xf32>
  // CHECK-NEXT: return %[[D]]
  %wt = hl.transpose %w permutation = [1, 0] : tensor<10x32xf32>
  %d = hl.linear %g, %wt : tensor<8x10xf32>, tensor<32x10xf32>
  %zero = hl.constant dense<0.0> : tensor<f32>
  %pos = hl.compare gt, %a, %zero : tensor<8x32xf32>, tensor<f32>
  %m = hl.select %pos, %d, %zero : tensor<8x32xi1>, tensor<8x32xf32>, tensor<f32>
  return %m : tensor<8x32xf32>
}

// -----

// The cost rule: %y is used twice, so neither use is fused (the other
// would need the plain product and the GEMM would run twice).
// CHECK-LABEL: func.func @two_uses
func.func @two_uses(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  // CHECK: %[[Y:.*]] = hl.gemm %{{.*}}, %{{.*}} transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32>
  // CHECK-NEXT: %[[R:.*]] = hl.relu %[[Y]]
  // CHECK-NEXT: %[[T:.*]] = hl.tanh %[[Y]]
  %y = hl.linear %x, %w : tensor<8x16xf32>, tensor<32x16xf32>
  %r = hl.relu %y : tensor<8x32xf32>
  %t = hl.tanh %y : tensor<8x32xf32>
  return %r, %t : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Epilogue order is respected: a bias added after an activation is not a
// bias (it stays an add), and a second activation is not absorbed.
// CHECK-LABEL: func.func @order
func.func @order(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  // CHECK: %[[Y:.*]] = hl.gemm %{{.*}}, %{{.*}} act = relu : tensor<8x16xf32>, tensor<16x32xf32>
  // CHECK-NEXT: %[[S:.*]] = hl.add %[[Y]], %{{.*}} : tensor<8x32xf32>, tensor<32xf32>
  // CHECK-NEXT: hl.tanh %[[S]]
  %y = hl.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32>
  %r = hl.relu %y : tensor<8x32xf32>
  %s = hl.add %r, %b : tensor<8x32xf32>, tensor<32xf32>
  %t = hl.tanh %s : tensor<8x32xf32>
  return %t : tensor<8x32xf32>
}

// -----

// The bias gradient (column sums of dY) becomes the side result of the
// weight-gradient GEMM; a row sum of a plain lhs likewise.
// CHECK-LABEL: func.func @bias_gradient
func.func @bias_gradient(%dy: tensor<32x10xf32>, %x: tensor<32x64xf32>, %w: tensor<64x8xf32>)
    -> (tensor<10x64xf32>, tensor<10xf32>, tensor<32x8xf32>, tensor<32xf32>) {
  // CHECK: %[[DW:.*]], %[[DB:.*]] = hl.gemm %{{.*}}, %{{.*}} transpose_lhs sum_lhs : tensor<32x10xf32>, tensor<32x64xf32>
  // CHECK: %[[Y:.*]], %[[R:.*]] = hl.gemm %{{.*}}, %{{.*}} sum_lhs : tensor<32x64xf32>, tensor<64x8xf32>
  // CHECK-NOT: hl.reduce_sum
  // CHECK: return %[[DW]], %[[DB]], %[[Y]], %[[R]]
  %dw = hl.matmul %dy, %x transpose_lhs : tensor<32x10xf32>, tensor<32x64xf32>
  %db = hl.reduce_sum %dy axes = [0] : tensor<32x10xf32>
  %y = hl.matmul %x, %w : tensor<32x64xf32>, tensor<64x8xf32>
  %r = hl.reduce_sum %x axes = [1] : tensor<32x64xf32>
  return %dw, %db, %y, %r : tensor<10x64xf32>, tensor<10xf32>, tensor<32x8xf32>, tensor<32xf32>
}

// -----

// Not fused: the sum over the wrong axis, and a sum used before the GEMM
// that would have to produce it.
// CHECK-LABEL: func.func @sum_not_fused
func.func @sum_not_fused(%dy: tensor<32x10xf32>, %x: tensor<32x64xf32>) -> (tensor<10x64xf32>, tensor<32xf32>, tensor<10xf32>) {
  // CHECK: hl.reduce_sum %{{.*}} axes = [1]
  // CHECK: %[[S:.*]] = hl.reduce_sum %{{.*}} axes = [0]
  // CHECK: hl.neg %[[S]]
  // CHECK: hl.gemm %{{.*}}, %{{.*}} transpose_lhs :
  %r = hl.reduce_sum %dy axes = [1] : tensor<32x10xf32>
  %s = hl.reduce_sum %dy axes = [0] : tensor<32x10xf32>
  %n = hl.neg %s : tensor<10xf32>
  %dw = hl.matmul %dy, %x transpose_lhs : tensor<32x10xf32>, tensor<32x64xf32>
  return %dw, %r, %n : tensor<10x64xf32>, tensor<32xf32>, tensor<10xf32>
}

// -----

// The digits MLP's SGD train step: five GEMMs, every epilogue fused
// (forward ReLU and bias, backward ReLU mask), W^T folded into flags.
// RUN: aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-optimizer=kind=sgd --canonicalize --cse --hl-fuse-gemm-epilogue --canonicalize | FileCheck %s --check-prefix=MLP
// MLP-LABEL: func.func @train_step
// MLP: %[[A:.*]] = hl.gemm %arg0, %{{.*}} bias(%{{.*}}) transpose_rhs act = relu
// MLP: %[[L:.*]] = hl.gemm %[[A]], %{{.*}} bias(%{{.*}}) transpose_rhs
// MLP: hl.gemm %{{.*}}, %[[A]] transpose_lhs sum_lhs
// MLP: %[[DA:.*]] = hl.gemm %{{.*}}, %{{.*}} mask(%[[A]])
// MLP: hl.gemm %[[DA]], %arg0 transpose_lhs sum_lhs
// MLP-NOT: hl.gemm
// MLP-NOT: hl.reduce_sum
// MLP-NOT: hl.linear
// MLP-NOT: hl.relu
// MLP-NOT: hl.transpose
// MLP: return
func.func @placeholder() {
  return
}

// -----

// A transpose that swaps nothing is no transpose flag (it read as one,
// computing a^T b where canonicalize had not folded it first); a gemm
// that already returns its lhs's sums keeps its epilogue (re-fusing
// freed it while its second result was in use).
// CHECK-LABEL: func.func @identity_transpose_and_sums
// CHECK-SAME: (%[[A:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4x4xf32>
func.func @identity_transpose_and_sums(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x8xf32>, %d: tensor<4x6xf32>) -> (tensor<4x4xf32>, tensor<8x6xf32>, tensor<8xf32>) {
  // CHECK: %[[T:.*]] = hl.transpose %[[A]] permutation = [0, 1]
  // CHECK-NEXT: hl.gemm %[[T]], %[[B]] : tensor<4x4xf32>, tensor<4x4xf32>
  %t = hl.transpose %a permutation = [0, 1] : tensor<4x4xf32>
  %y = hl.matmul %t, %b : tensor<4x4xf32>, tensor<4x4xf32>
  // CHECK-NEXT: %[[G:.*]], %[[S:.*]] = hl.gemm %{{.*}}, %{{.*}} transpose_lhs sum_lhs
  // CHECK-NEXT: hl.relu %[[G]]
  // CHECK: return {{.*}}, %[[S]]
  %g:2 = hl.gemm %c, %d transpose_lhs sum_lhs : tensor<4x8xf32>, tensor<4x6xf32>
  %r = hl.relu %g#0 : tensor<8x6xf32>
  return %y, %r, %g#1 : tensor<4x4xf32>, tensor<8x6xf32>, tensor<8xf32>
}
