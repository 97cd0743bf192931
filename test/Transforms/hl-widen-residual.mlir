// hl-widen-residual on the char LM: the residual stream 64 -> 128. The
// embeddings' columns, every layer norm, the output rows of the projections
// added into the stream and the input columns of every projection reading a
// norm grow; the norms' eps is scaled by 64/128; the attention's inner width
// and the MLP's hidden width stay. The result still compiles to a train step.
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-widen-residual="width=128" | FileCheck %s
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-widen-residual="width=128" --aicf-train-pipeline -o /dev/null
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-widen-residual="width=64" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAME
// RUN: not aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-widen-residual="width=128" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOEMB
// RUN: aicf-opt %s -split-input-file --hl-widen-residual="width=16" -verify-diagnostics -o /dev/null
// rule=duplicate copies the channels: the stream's statistics, and so every
// norm's eps, stay; the width must be a multiple of the old one.
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-widen-residual="width=128 rule=duplicate" | FileCheck %s --check-prefix=DUP
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-widen-residual="width=96 rule=duplicate" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MULTIPLE
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-widen-residual="width=128 rule=copy" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RULE

// CHECK: hl.param @tok_emb.weight : tensor<65x128xf32>
// CHECK: hl.param @pos_emb.weight : tensor<64x128xf32>
// CHECK: hl.param @blocks.0.ln1.weight : tensor<128xf32>
// CHECK: hl.param @blocks.0.attn.q_proj.weight : tensor<64x128xf32>
// CHECK: hl.param @blocks.0.attn.q_proj.bias : tensor<64xf32> {{.*}} high = 0.088388
// CHECK: hl.param @blocks.0.attn.out_proj.weight : tensor<128x64xf32>
// CHECK: hl.param @blocks.0.attn.out_proj.bias : tensor<128xf32>
// CHECK: hl.param @blocks.0.mlp.fc.weight : tensor<256x128xf32>
// CHECK: hl.param @blocks.0.mlp.proj.weight : tensor<128x256xf32>
// CHECK: hl.param @ln_f.bias : tensor<128xf32>
// CHECK: hl.param @lm_head.weight : tensor<65x128xf32>
// CHECK-LABEL: func.func @forward
// CHECK: hl.layer_norm {{.*}} eps = 5.000000e-06 : tensor<16x64x128xf32>
// CHECK: hl.reshape %{{.*}} : tensor<16x64x64xf32> to tensor<16x64x4x16xf32>

// DUP: hl.param @tok_emb.weight : tensor<65x128xf32>
// DUP: hl.param @lm_head.weight : tensor<65x128xf32>
// DUP-LABEL: func.func @forward
// DUP: hl.layer_norm {{.*}} eps = 1.000000e-05 : tensor<16x64x128xf32>
// DUP-NOT: eps = 5.000000e-06
// MULTIPLE: hl-widen-residual: rule=duplicate copies every channel the same number of times, so width=96 must be a multiple of the stream's 64 channels
// RULE: hl-widen-residual: rule=copy: expected mean or duplicate

// SAME: hl-widen-residual: width=64 does not grow the residual stream's 64 channels
// NOEMB: hl-widen-residual: no embedding lookup (an hl.gather of a parameter table) starts a residual stream in this model

// A layer norm's output added back into the stream (post-norm) cannot widen exactly.
hl.param @emb.weight : tensor<5x8xf32> owner "emb" init <normal>
hl.param @ln.weight : tensor<8xf32> owner "ln" init <ones>
func.func @forward(%t: tensor<2x3xi32>) -> tensor<2x3x8xf32> {
  %e = hl.get_param @emb.weight : tensor<5x8xf32>
  %x = hl.gather %e[%t] axis = 0 : tensor<5x8xf32>, tensor<2x3xi32>
  %w = hl.get_param @ln.weight : tensor<8xf32>
  // expected-error @below {{hl-widen-residual: a layer norm's output is added into the residual stream here (post-norm); only pre-norm residual networks can widen exactly}}
  %n = hl.layer_norm %x weight %w dims = 1 eps = 1.0e-05 : tensor<2x3x8xf32>, tensor<8xf32>
  %y = hl.add %x, %n : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// The stream reaching the function's result: its width would change it.
hl.param @emb.weight : tensor<5x8xf32> owner "emb" init <normal>
func.func @forward(%t: tensor<2x3xi32>) -> tensor<2x3x8xf32> {
  %e = hl.get_param @emb.weight : tensor<5x8xf32>
  %x = hl.gather %e[%t] axis = 0 : tensor<5x8xf32>, tensor<2x3xi32>
  // expected-error @below {{hl-widen-residual: the residual stream reaches 'func.return' here; it may reach adds, dropout, layer norms over its last axis and linear layers}}
  return %x : tensor<2x3x8xf32>
}
