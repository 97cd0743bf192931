// hl-autocast: mixed precision by a policy table. Contractions take bf16
// (or f16) operands, the losses, softmax, norms and large sums take f32,
// mixed elementwise ops widen, everything else keeps its input's type;
// parameters stay f32 (cast per use), signatures do not change.
// RUN: aicf-opt %s --hl-autocast="dtype=bf16" | FileCheck %s
// f16, and the overrides: linear kept in f32 by name, or the layers under
// "head" kept in f32.
// RUN: aicf-opt %s --hl-autocast="dtype=f16" | FileCheck %s --check-prefix=F16
// RUN: aicf-opt %s --hl-autocast="dtype=bf16 fp32-ops=linear" | FileCheck %s --check-prefix=NOLINEAR
// RUN: aicf-opt %s --hl-autocast="dtype=bf16 fp32-layers=head" | FileCheck %s --check-prefix=HEAD
// dtype=f32 changes nothing; an unknown dtype is an error.
// RUN: aicf-opt %s --hl-autocast="dtype=f32" | FileCheck %s --check-prefix=SAME
// RUN: not aicf-opt %s --hl-autocast="dtype=f8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// Autocast twice: to the same type changes nothing more; to the other
// 16-bit type is refused (bf16 then f16 rounded every value twice).
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf-opt %s --hl-autocast="dtype=bf16" -o %t/once.mlir
// RUN: aicf-opt %s --hl-autocast="dtype=bf16" --hl-autocast="dtype=bf16" -o %t/twice.mlir
// RUN: diff %t/once.mlir %t/twice.mlir
// RUN: not aicf-opt %s --hl-autocast="dtype=bf16" --hl-autocast="dtype=f16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// The whole train pipeline in bf16: the backward GEMMs are bf16 too, the
// update is f32.
// RUN: aicf-opt %s --inline --aicf-train-pipeline="optimizer=adam precision=bf16" | FileCheck %s --check-prefix=TRAIN
// fp16's dynamic loss scaling: two states, the scaled loss differentiated,
// the gradients unscaled and checked, the update kept only where finite.
// RUN: aicf-opt %s --inline --hl-autocast="dtype=f16" --hl-optimizer="kind=sgd loss-scale=65536" | FileCheck %s --check-prefix=SCALE

hl.param @body.weight : tensor<16x8xf32> owner "body" init <kaiming_uniform, gain = 1.0>
hl.param @norm.weight : tensor<16xf32> owner "norm" init <ones>
hl.param @head.weight : tensor<4x16xf32> owner "head" init <kaiming_uniform, gain = 1.0>
hl.param @head.bias : tensor<4xf32> owner "head" init <zeros>

func.func @forward(%x: tensor<32x8xf32>) -> tensor<32x4xf32> {
  %w = hl.get_param @body.weight : tensor<16x8xf32>
  %h = hl.linear %x, %w : tensor<32x8xf32>, tensor<16x8xf32>
  %a = hl.gelu %h : tensor<32x16xf32>
  %half = hl.constant dense<5.000000e-01> : tensor<f32>
  %s = hl.mul %a, %half : tensor<32x16xf32>, tensor<f32>
  %n = hl.get_param @norm.weight : tensor<16xf32>
  %ln = hl.layer_norm %s weight %n dims = 1 eps = 1.0e-05 : tensor<32x16xf32>, tensor<16xf32>
  %r = hl.add %ln, %a : tensor<32x16xf32>, tensor<32x16xf32>
  %hw = hl.get_param @head.weight : tensor<4x16xf32>
  %hb = hl.get_param @head.bias : tensor<4xf32>
  %y = hl.linear %r, %hw, %hb : tensor<32x16xf32>, tensor<4x16xf32>, tensor<4xf32>
  return %y : tensor<32x4xf32>
}

func.func @loss(%x: tensor<32x8xf32>, %t: tensor<32xi32>) -> tensor<f32> {
  %y = func.call @forward(%x) : (tensor<32x8xf32>) -> tensor<32x4xf32>
  %l = hl.cross_entropy %y, %t : tensor<32x4xf32>, tensor<32xi32>
  return %l : tensor<f32>
}

// CHECK: hl.param @body.weight : tensor<16x8xf32>
// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<32x8xf32>) -> tensor<32x4xf32>
// CHECK: %[[W:.*]] = hl.get_param @body.weight : tensor<16x8xf32>
// CHECK: %[[X:.*]] = hl.cast %{{.*}} : tensor<32x8xf32> to tensor<32x8xbf16>
// CHECK: %[[WB:.*]] = hl.cast %[[W]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[H:.*]] = hl.linear %[[X]], %[[WB]] : tensor<32x8xbf16>, tensor<16x8xbf16>
// The activation keeps bf16; the scalar constant follows the tensor.
// CHECK: %[[A:.*]] = hl.gelu %[[H]] : tensor<32x16xbf16>
// CHECK: %[[HALF:.*]] = hl.cast %{{.*}} : tensor<f32> to tensor<bf16>
// CHECK: %[[S:.*]] = hl.mul %[[A]], %[[HALF]] : tensor<32x16xbf16>, tensor<bf16>
// The norm computes in f32; the residual add widens to f32.
// CHECK: %[[SF:.*]] = hl.cast %[[S]] : tensor<32x16xbf16> to tensor<32x16xf32>
// CHECK: %[[LN:.*]] = hl.layer_norm %[[SF]] weight %{{.*}} : tensor<32x16xf32>, tensor<16xf32>
// CHECK: %[[AF:.*]] = hl.cast %[[A]] : tensor<32x16xbf16> to tensor<32x16xf32>
// CHECK: hl.add %[[LN]], %[[AF]] : tensor<32x16xf32>, tensor<32x16xf32>
// CHECK: hl.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x16xbf16>, tensor<4x16xbf16>, tensor<4xbf16>
// The result is cast back to the signature's f32.
// CHECK: %[[Y:.*]] = hl.cast %{{.*}} : tensor<32x4xbf16> to tensor<32x4xf32>
// CHECK: return %[[Y]] : tensor<32x4xf32>
// CHECK-LABEL: func.func @loss
// CHECK: hl.cross_entropy %{{.*}}, %{{.*}} : tensor<32x4xf32>, tensor<32xi32>

// F16: hl.linear %{{.*}}, %{{.*}} : tensor<32x8xf16>, tensor<16x8xf16>
// F16: hl.layer_norm %{{.*}} weight %{{.*}} : tensor<32x16xf32>, tensor<16xf32>

// NOLINEAR-LABEL: func.func @forward
// NOLINEAR-NOT: bf16
// NOLINEAR: return

// HEAD-LABEL: func.func @forward
// HEAD: hl.linear %{{.*}}, %{{.*}} : tensor<32x8xbf16>, tensor<16x8xbf16>
// HEAD: hl.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<4x16xf32>, tensor<4xf32>

// SAME-NOT: hl.cast

// BAD: hl-autocast: dtype=f8: expected bf16, f16 or f32
// TWICE: hl-autocast: the module casts to BF16 already (an earlier hl-autocast, or the model's own casts): casting it to F16 would round those values twice

// TRAIN-LABEL: func.func @train_step
// TRAIN-SAME: memref<16x8xf32> {ll.bind = "param @body.weight"}
// TRAIN: ll.gemm {{.*}}bf16

// SCALE: hl.state @loss_scale : tensor<f32> slot "loss_scale" init <uniform, low = 6.553600e+04, high = 6.553600e+04>
// SCALE: hl.state @loss_scale.good_steps : tensor<f32> slot "good_steps" init <zeros>
// SCALE-NOT: func.func @loss_scaled(
// SCALE-LABEL: func.func @loss_scaled_grad
// SCALE-LABEL: func.func @train_step
// The scaled loss's gradient, then the unscaling by 1 / @loss_scale.
// SCALE: hl.get_state @loss_scale : tensor<f32>
// SCALE: %[[S:.*]] = hl.get_state @loss_scale : tensor<f32>
// SCALE: hl.div %{{.*}}, %[[S]]
// SCALE: %[[OK:.*]] = hl.compare eq
// SCALE: hl.select %[[OK]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<16x8xf32>, tensor<16x8xf32>
