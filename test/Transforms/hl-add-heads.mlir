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
