// The example models are valid hl for aicf-opt: they parse, verify, print
// their parameter tables and survive canonicalize + cse. (That the Rust
// layer API builds the same IR is checked in compiler/tests/compiler/models.rs.)
//
// RUN: aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-print-param-table -o /dev/null 2>&1 | FileCheck %s --check-prefix=MLP
// RUN: aicf-opt %S/../../examples/cnn/digits_cnn.mlir --hl-print-param-table -o /dev/null 2>&1 | FileCheck %s --check-prefix=CNN
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-print-param-table -o /dev/null 2>&1 | FileCheck %s --check-prefix=LM
// RUN: aicf-opt %S/../../examples/char_lm/char_lm.mlir --pass-pipeline='builtin.module(func.func(canonicalize,cse))' | FileCheck %s --check-prefix=CANON

// MLP: total: 4 parameters, 9610 elements, 38440 bytes
// CNN: conv1.weight {{ *}}conv1 {{ *}}16x1x3x3
// CNN: total: 6 parameters, 6090 elements, 24360 bytes
// LM: blocks.1.attn.out_proj.weight {{ *}}blocks.1.attn.out_proj {{ *}}64x64
// LM: total: 37 parameters, 112512 elements, 450048 bytes

// The forward pass has no dropout; the loss has five, each its own stream.
// CANON-LABEL: func.func @forward(%{{.*}}: tensor<16x64xi32>) -> tensor<16x64x65xf32>
// CANON-NOT: hl.dropout
// CANON: hl.attention {{.*}} causal
// CANON-LABEL: func.func @loss(%{{.*}}: tensor<16x64xi32>, %{{.*}}: tensor<16x64xi32>, %{{.*}}: tensor<i64>, %{{.*}}: tensor<i64>) -> tensor<f32>
// CANON-COUNT-5: hl.dropout {{.*}} p = 1.000000e-01 stream = {{[0-4]}}
// CANON: hl.cross_entropy {{.*}} : tensor<16x64x65xf32>, tensor<16x64xi32>
