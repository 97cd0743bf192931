// A model written by hand states its network twice: @forward (predict,
// sample, the held-out accuracy) and @loss (what trains). One edited
// without the other is said, at both places, before anything runs (an
// activation changed in @loss alone made `predict` score the ReLU network
// while the GELU one trained, without a word).
// RUN: aicf compile %S/inputs/forward-differs-activation.mlir.txt --emit hl 2>&1 >/dev/null | FileCheck %s --check-prefix=ACT
// ACT: warning: @forward does not compute what @loss trains: @forward has hl.relu at {{.*}}forward-differs-activation.mlir.txt:12:8 where @loss has hl.gelu at {{.*}}forward-differs-activation.mlir.txt:23:8; `aicf predict`, `aicf sample` and the held-out accuracy run @forward
// A layer added to @loss alone: the parameters read differently.
// RUN: rm -rf %t && aicf train %S/inputs/forward-differs-layer.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --out %t --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=LAYER
// LAYER: warning: @forward does not compute what @loss trains: @forward has hl.get_param @fc1.weight at {{.*}}:11:9 where @loss has hl.get_param @mid.weight at {{.*}}:26:9
// LAYER: final held-out accuracy
// What @forward leaves out by design says nothing: dropout (off at
// inference), a batch norm's running statistics for the batch's, a @loss
// that calls @forward, the reshaped logits of a language model, and the
// examples.
// RUN: aicf compile %S/../../../examples/grow_lm/small2x-dropout.mlir --emit hl 2>&1 >/dev/null | FileCheck %s --check-prefix=NONE --allow-empty
// RUN: aicf compile %S/inputs/cnn-bn.mlir.txt --emit hl 2>&1 >/dev/null | FileCheck %s --check-prefix=NONE --allow-empty
// RUN: aicf compile %S/inputs/ids-bag.mlir.txt --emit hl 2>&1 >/dev/null | FileCheck %s --check-prefix=NONE --allow-empty
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir --emit hl 2>&1 >/dev/null | FileCheck %s --check-prefix=NONE --allow-empty
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit hl 2>&1 >/dev/null | FileCheck %s --check-prefix=NONE --allow-empty
// NONE-NOT: warning
