// The named pipeline on the benchmark MLP 784-512-512-10: the SGD train step
// is 11 kernels, the Adam one 12, and the planned arena is the lower bound.
// RUN: aicf-opt %S/../../examples/mlp784/mlp784.mlir "--aicf-train-pipeline=optimizer=sgd report=true" 2>&1 | FileCheck %s --check-prefix=SGD
// Adam by default, as hl-optimizer's kind and `aicf train`; numbers a
// pass would refuse are refused before any pass runs, naming the
// pipeline's option.
// RUN: aicf-opt %S/../../examples/mlp784/mlp784.mlir --aicf-train-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: hl-optimizer{{.*}}kind=adam
// RUN: not aicf-opt %S/../../examples/mlp784/mlp784.mlir --aicf-train-pipeline=max-streams=0 --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: error: aicf-train-pipeline: max-streams=0: expected at least 1
// EARLY-NOT: (hl-
// RUN: not aicf-opt %S/../../examples/mlp784/mlp784.mlir "--aicf-train-pipeline=budget=100 budget-fraction=0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: aicf-train-pipeline: budget-fraction=0.5: expected 0 beside budget (a budget in bytes or as a fraction, not both)
// RUN: aicf-opt %S/../../examples/mlp784/mlp784.mlir "--aicf-train-pipeline=optimizer=adam report=true" 2>&1 | FileCheck %s --check-prefix=ADAM
// The betas and global-norm clipping reach hl-optimizer (nanoGPT's AdamW).
// RUN: aicf-opt %S/../../examples/mlp784/mlp784.mlir "--aicf-train-pipeline=optimizer=adamw beta1=0.8 beta2=0.95 clip-norm=0.5" | FileCheck %s --check-prefix=CLIP
// So do Adam's eps and nanoGPT's parameter groups (hl-optimizer.mlir
// checks which parameters decay).
// RUN: aicf-opt %S/../../examples/mlp784/mlp784.mlir "--aicf-train-pipeline=optimizer=adamw weight-decay=0.1 eps=1e-6 decay-min-rank=2" | FileCheck %s --check-prefix=GROUPS
// GROUPS-LABEL: func.func @train_step
// GROUPS: arith.constant 9.99999997E-7 : f32

// CLIP-LABEL: func.func @train_step
// The clipping factor min(1, 0.5 / (||g|| + 1e-6)) from the squared norms' sum.
// CLIP: ll.elementwise
// CLIP-DAG: arith.constant 5.000000e-01 : f32
// CLIP: math.sqrt
// CLIP: arith.divf
// CLIP: arith.minimumf
// The bias corrections 1 - beta^t.
// CLIP: arith.constant 8.000000e-01 : f64
// CLIP: arith.constant 0.94999999999999996 : f64
// CLIP: ll.multi_tensor_apply

// SGD: remark: ll-plan-memory: @train_step: arena 3203136 bytes, lower bound 3203136 bytes (1.000x), naive sum 4797568 bytes; 13 buffers, 0 in place, 0 recomputed
// SGD-LABEL: func.func @train_step
// SGD-SAME: {ll.bind = "arena"}
// SGD-COUNT-3: ll.gemm {{.*}} transpose_b
// SGD: ll.softmax_cross_entropy
// SGD: ll.gemm {{.*}} lhs_sum({{.*}}) transpose_a
// SGD: ll.gemm {{.*}} mask(
// SGD: ll.gemm {{.*}} lhs_sum({{.*}}) transpose_a
// SGD: ll.gemm {{.*}} mask(
// SGD: ll.gemm {{.*}} lhs_sum({{.*}}) transpose_a
// SGD: ll.elementwise
// SGD: ll.multi_tensor_apply
// SGD: ll.yield
// SGD-NEXT: } {ll.stream = {{[0-9]+}} : i64
// SGD-NEXT: return

// ADAM: remark: ll-plan-memory: @train_step: arena 3203136 bytes, lower bound 3203136 bytes (1.000x)
// ADAM-LABEL: func.func @train_step
// ADAM-COUNT-8: ll.gemm
// ADAM: ll.elementwise
// ADAM: ll.elementwise
// ADAM: ll.multi_tensor_apply
// ADAM: ll.yield
// ADAM-NEXT: } {ll.stream = {{[0-9]+}} : i64
// ADAM-NEXT: return
