// hl-insert-block on the char LM: a block at position 1 built like block 0.
// Its parameters are declared like block 0's as blocks.1.*, the old block 1
// becomes blocks.2, the new ops run between them (new dropout streams), and
// the result still compiles to a train step.
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-insert-block="at=1 from=0" | FileCheck %s
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-insert-block --aicf-train-pipeline -o /dev/null
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-insert-block="at=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-insert-block="prefix=layers" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOBLOCKS
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-insert-block="from=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FROM

// CHECK: hl.param @blocks.0.mlp.proj.bias
// CHECK-NEXT: hl.param @blocks.1.ln1.weight : tensor<64xf32> owner "blocks.1.ln1" init <ones>
// CHECK: hl.param @blocks.1.mlp.proj.bias
// CHECK-NEXT: hl.param @blocks.2.ln1.weight
// CHECK: hl.param @blocks.2.mlp.proj.bias
// CHECK-NEXT: hl.param @ln_f.weight
// CHECK-LABEL: func.func @forward
// CHECK: hl.get_param @blocks.0.ln1.weight
// CHECK: hl.get_param @blocks.0.mlp.proj.bias
// CHECK: %[[B0:.*]] = hl.add %{{.*}}, %{{.*}} : tensor<16x64x64xf32>, tensor<16x64x64xf32>
// CHECK-NEXT: hl.get_param @blocks.1.ln1.weight
// CHECK-NEXT: hl.get_param @blocks.1.ln1.bias
// CHECK-NEXT: hl.layer_norm %[[B0]]
// CHECK: hl.get_param @blocks.2.ln1.weight
// CHECK: hl.get_param @ln_f.weight
// CHECK-LABEL: func.func @loss
// CHECK: hl.dropout {{.*}} stream = 5
// CHECK: hl.dropout {{.*}} stream = 6

// RANGE: hl-insert-block: at=5 must be at most 2 (the model has 2 blocks)
// FROM: hl-insert-block: from=5 must be below 2 (the model has 2 blocks, counted from 0)
// NOBLOCKS: hl-insert-block: no parameters named layers.<i>.* (prefix=layers)
