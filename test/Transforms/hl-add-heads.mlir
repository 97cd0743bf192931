// hl-add-heads on the char LM's first block: 4 heads of 16 become 6. The
// q/k/v projections grow by two heads' rows, the output projection by their
// columns, the head split and merge reshapes follow; the second block is
// untouched, and the result still compiles to a train step.
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-add-heads="attention=blocks.0.attn heads=6" | FileCheck %s
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-add-heads="attention=blocks.0.attn heads=6" --aicf-train-pipeline -o /dev/null
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-add-heads="attention=blocks.0.attn heads=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FEWER
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-add-heads="attention=blocks.0.mlp heads=6" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTATTN

// CHECK: hl.param @blocks.0.attn.q_proj.weight : tensor<96x64xf32>
// CHECK: hl.param @blocks.0.attn.v_proj.bias : tensor<96xf32>
// CHECK: hl.param @blocks.0.attn.out_proj.weight : tensor<64x96xf32>
// CHECK: hl.param @blocks.1.attn.q_proj.weight : tensor<64x64xf32>
// CHECK: hl.param @blocks.1.attn.out_proj.weight : tensor<64x64xf32>
// CHECK-LABEL: func.func @forward
// CHECK: hl.reshape %{{.*}} : tensor<16x64x96xf32> to tensor<16x64x6x16xf32>
// CHECK: hl.attention
// CHECK: hl.reshape %{{.*}} : tensor<16x64x6x16xf32> to tensor<16x64x96xf32>
// CHECK: hl.linear %{{.*}} : tensor<16x64x96xf32>, tensor<64x96xf32>, tensor<64xf32>
// CHECK: hl.reshape %{{.*}} : tensor<16x64x64xf32> to tensor<16x64x4x16xf32>

// FEWER: hl-add-heads: heads=4 does not add to blocks.0.attn's 4 heads
// NOTATTN: hl-add-heads: no parameter @blocks.0.mlp.q_proj.weight

// One fused q/k/v projection (nanoGPT's c_attn as PyTorch exports it:
// sliced into thirds): each third grows by a head's rows, the slices move
// to the new thirds, the output projection (it reads the merged heads)
// grows by the head's columns. A mask is refused (it ramps separate
// projections).
// RUN: aicf-opt %s --hl-add-heads="attention=attn heads=3" | FileCheck %s --check-prefix=FUSED
// RUN: aicf-opt %s --hl-add-heads="attention=attn heads=3" --aicf-train-pipeline -o /dev/null
// RUN: not aicf-opt %s --hl-add-heads="attention=attn heads=3 mask=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUSEDMASK
// FUSED: hl.param @attn.c_attn.weight : tensor<18x4xf32>
// FUSED: hl.param @attn.c_attn.bias : tensor<18xf32>
// FUSED: hl.param @attn.c_proj.weight : tensor<4x6xf32>
// FUSED: hl.slice %{{.*}} start = [0, 0, 0] limit = [2, 3, 6]
// FUSED: hl.slice %{{.*}} start = [0, 0, 6] limit = [2, 3, 12]
// FUSED: hl.slice %{{.*}} start = [0, 0, 12] limit = [2, 3, 18]
// FUSED: hl.reshape %{{.*}} : tensor<2x3x6xf32> to tensor<2x3x3x2xf32>
// FUSED: hl.attention {{.*}} : tensor<2x3x3x2xf32>
// FUSED: hl.linear %{{.*}} : tensor<2x3x6xf32>, tensor<4x6xf32>, tensor<4xf32>
// FUSEDMASK: hl-add-heads: a masked head growth ramps each projection's new heads; attn's q, k and v are one fused projection (attn.c_attn): grow it without a mask
hl.param @attn.c_attn.weight : tensor<12x4xf32> owner "attn.c_attn" init <normal>
hl.param @attn.c_attn.bias : tensor<12xf32> owner "attn.c_attn" init <zeros>
hl.param @attn.c_proj.weight : tensor<4x4xf32> owner "attn.c_proj" init <normal>
hl.param @attn.c_proj.bias : tensor<4xf32> owner "attn.c_proj" init <zeros>
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %w = hl.get_param @attn.c_attn.weight : tensor<12x4xf32>
  %b = hl.get_param @attn.c_attn.bias : tensor<12xf32>
  %qkv = hl.linear %x, %w, %b : tensor<2x3x4xf32>, tensor<12x4xf32>, tensor<12xf32>
  %q = hl.slice %qkv start = [0, 0, 0] limit = [2, 3, 4] strides = [1, 1, 1] : tensor<2x3x12xf32>
  %k = hl.slice %qkv start = [0, 0, 4] limit = [2, 3, 8] strides = [1, 1, 1] : tensor<2x3x12xf32>
  %v = hl.slice %qkv start = [0, 0, 8] limit = [2, 3, 12] strides = [1, 1, 1] : tensor<2x3x12xf32>
  %qh = hl.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kh = hl.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vh = hl.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = hl.transpose %qh permutation = [0, 2, 1, 3] : tensor<2x3x2x2xf32>
  %kt = hl.transpose %kh permutation = [0, 2, 1, 3] : tensor<2x3x2x2xf32>
  %vt = hl.transpose %vh permutation = [0, 2, 1, 3] : tensor<2x3x2x2xf32>
  %o = hl.attention %qt, %kt, %vt causal : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %ot = hl.transpose %o permutation = [0, 2, 1, 3] : tensor<2x2x3x2xf32>
  %m = hl.reshape %ot : tensor<2x3x2x2xf32> to tensor<2x3x4xf32>
  %pw = hl.get_param @attn.c_proj.weight : tensor<4x4xf32>
  %pb = hl.get_param @attn.c_proj.bias : tensor<4xf32>
  %y = hl.linear %m, %pw, %pb : tensor<2x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>
  return %y : tensor<2x3x4xf32>
}
func.func @loss(%x: tensor<2x3x4xf32>, %t: tensor<2x3x4xf32>) -> tensor<f32> {
  %w = hl.get_param @attn.c_attn.weight : tensor<12x4xf32>
  %b = hl.get_param @attn.c_attn.bias : tensor<12xf32>
  %qkv = hl.linear %x, %w, %b : tensor<2x3x4xf32>, tensor<12x4xf32>, tensor<12xf32>
  %q = hl.slice %qkv start = [0, 0, 0] limit = [2, 3, 4] strides = [1, 1, 1] : tensor<2x3x12xf32>
  %k = hl.slice %qkv start = [0, 0, 4] limit = [2, 3, 8] strides = [1, 1, 1] : tensor<2x3x12xf32>
  %v = hl.slice %qkv start = [0, 0, 8] limit = [2, 3, 12] strides = [1, 1, 1] : tensor<2x3x12xf32>
  %qh = hl.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kh = hl.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vh = hl.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = hl.transpose %qh permutation = [0, 2, 1, 3] : tensor<2x3x2x2xf32>
  %kt = hl.transpose %kh permutation = [0, 2, 1, 3] : tensor<2x3x2x2xf32>
  %vt = hl.transpose %vh permutation = [0, 2, 1, 3] : tensor<2x3x2x2xf32>
  %o = hl.attention %qt, %kt, %vt causal : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %ot = hl.transpose %o permutation = [0, 2, 1, 3] : tensor<2x2x3x2xf32>
  %m = hl.reshape %ot : tensor<2x3x2x2xf32> to tensor<2x3x4xf32>
  %pw = hl.get_param @attn.c_proj.weight : tensor<4x4xf32>
  %pb = hl.get_param @attn.c_proj.bias : tensor<4xf32>
  %y = hl.linear %m, %pw, %pb : tensor<2x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>
  %l = hl.mse_loss %y, %t : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %l : tensor<f32>
}
