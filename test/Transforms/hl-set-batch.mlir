// hl-set-batch: the same model at another batch size (how a smaller last
// batch is compiled). Parameters are untouched; every type that carried the
// batch follows.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-set-batch{size=7})' | FileCheck %s
// The bundled digits CNN, whose flatten (a reshape that states its result type)
// follows as well.
// RUN: aicf-opt %S/../../examples/cnn/digits_cnn.mlir --pass-pipeline='builtin.module(hl-set-batch{size=5})' \
// RUN:   | FileCheck %s --check-prefix=CNN
// The batch is given explicitly, or found from @forward's first argument.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-set-batch{size=7 from=32})' | FileCheck %s
// After padding (bf16 products padded to aligned N, then sliced back), the
// slice that takes the whole batch takes the whole new batch: it stated the
// old one, a verifier error.
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-autocast="dtype=bf16" \
// RUN:   '--hl-pad-contractions=min-macs=1' --hl-set-batch=size=4 | FileCheck %s --check-prefix=PADDED
// PADDED: hl.slice %{{.*}} start = [0, 0, 0] limit = [4, 64, 65] strides = [1, 1, 1] : tensor<4x64x72xbf16>
// Batch 32 to 32 changes nothing.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-set-batch{size=32})' | FileCheck %s --check-prefix=SAME

// CHECK: hl.param @fc1.weight : tensor<16x8xf32>
// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<7x8xf32>) -> tensor<7x4xf32>
// CHECK: hl.linear %{{.*}} : tensor<7x8xf32>, tensor<16x8xf32>, tensor<16xf32>
// CHECK: hl.relu %{{.*}} : tensor<7x16xf32>
// CHECK: return %{{.*}} : tensor<7x4xf32>
// CHECK-LABEL: func.func @loss(%{{.*}}: tensor<7x8xf32>, %{{.*}}: tensor<7xi32>) -> tensor<f32>
// CHECK: hl.cross_entropy %{{.*}} : tensor<7x4xf32>, tensor<7xi32>
hl.param @fc1.weight : tensor<16x8xf32> owner "fc1" init <zeros>
hl.param @fc1.bias : tensor<16xf32> owner "fc1" init <zeros>
hl.param @fc2.weight : tensor<4x16xf32> owner "fc2" init <zeros>
func.func @forward(%x: tensor<32x8xf32>) -> tensor<32x4xf32> {
  %w1 = hl.get_param @fc1.weight : tensor<16x8xf32>
  %b1 = hl.get_param @fc1.bias : tensor<16xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  %a = hl.relu %h : tensor<32x16xf32>
  %w2 = hl.get_param @fc2.weight : tensor<4x16xf32>
  %y = hl.linear %a, %w2 : tensor<32x16xf32>, tensor<4x16xf32>
  return %y : tensor<32x4xf32>
}
func.func @loss(%x: tensor<32x8xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %y = func.call @forward(%x) : (tensor<32x8xf32>) -> tensor<32x4xf32>
  %l = hl.cross_entropy %y, %labels : tensor<32x4xf32>, tensor<32xi32>
  return %l : tensor<f32>
}

// CNN: func.func @forward(%{{.*}}: tensor<5x1x8x8xf32>) -> tensor<5x10xf32>
// CNN: hl.reshape %{{.*}} : tensor<5x32x2x2xf32> to tensor<5x128xf32>
// CNN: func.func @loss(%{{.*}}: tensor<5x1x8x8xf32>, %{{.*}}: tensor<5xi32>)

// SAME: func.func @forward(%{{.*}}: tensor<32x8xf32>) -> tensor<32x4xf32>
