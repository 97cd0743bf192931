// A loss whose mean over the batch is written with the batch as a number
// (a sum divided by 32) is said where it trains other batches:
// hl-set-batch retargets shapes, not numbers, so a smaller last batch, or
// the model at --batch 64, got a loss and gradients scaled by its size over
// 32, without a word.
// RUN: rm -rf %t && aicf train %S/inputs/mean-by-hand.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/a --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=TAIL
// TAIL: note: {{.*}}mean-by-hand.mlir.txt:29:11: @loss divides its sum over the batch by 32, a number written for a batch of 32; batches of 30 and 7 rows here get a loss (and in training gradients) scaled by their size over 32, as a learning rate would be: take the mean with hl.reduce_mean (or a loss op's reduction = mean), which follows the batch
// TAIL: final held-out accuracy
// RUN: aicf train %S/inputs/mean-by-hand.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --batch 64 --out %t/b --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=BATCH
// BATCH: warning: {{.*}}mean-by-hand.mlir.txt:29:11: @loss divides its sum over the batch by 32, a number written for a batch of 32; batches of 64 rows here
// BATCH: final held-out accuracy
// The example's mean (cross_entropy's reduction = mean) says nothing.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --batch 64 --out %t/c --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=NONE
// NONE-NOT: written for a batch
// NONE: final held-out accuracy
