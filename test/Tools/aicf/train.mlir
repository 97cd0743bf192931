// `aicf train` on the digits MLP: compiles the train step for the CPU,
// trains with Adam, reports held-out accuracy, writes metrics and a plot.
// Bad input is a clear error naming the file.
// RUN: rm -rf %t
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --lr 3e-3 --epochs 3 --out %t | FileCheck %s
// RUN: FileCheck %s --check-prefix=METRICS < %t/metrics.jsonl
// RUN: grep -c '<polyline' %t/plot.svg | FileCheck %s --check-prefix=PLOT
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/inputs/four_features.csv --out %t 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/inputs/missing.csv --out %t 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 1e30 --epochs 1 --out %t 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --val-split 0 --epochs 1 --out %t | FileCheck %s --check-prefix=NOVAL
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --val-split 1 --out %t 2>&1 | FileCheck %s --check-prefix=SPLIT

// The last batches (1438 = 44 x 32 + 30 training rows, 359 = 11 x 32 + 7
// held out) run variants compiled once for their sizes.
// CHECK: compiled {{.*}}digits_mlp.mlir for batch 30 in
// CHECK: compiled {{.*}}digits_mlp.mlir for batch 7 in
// CHECK: training on 1438 rows (359 held out), batch 32, 45 steps per epoch
// CHECK: epoch   1/3  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy {{[0-9.]+}}%
// CHECK: epoch   3/3
// CHECK: final held-out accuracy {{[0-9.]+}}% after 3 epochs (135 steps

// METRICS: {"epoch":1,"params":9610,"seconds":{{.*}},"step":45,"train_flops":{{.*}},"train_loss":{{.*}},"val_accuracy":{{.*}},"val_loss":{{.*}}}
// METRICS: {"epoch":3,

// PLOT: 2

// SHAPE: aicf: error: {{.*}}four_features.csv: rows have 4 features, the model takes [32, 64]
// MISSING: aicf: error: {{.*}}missing.csv: No such file or directory
// NAN: aicf: error: the loss became {{.*}} at epoch 1, step {{[0-9]+}} (lr 1000000000000000000000000000000); lower the learning rate

// NOVAL: training on 1797 rows (0 held out)
// NOVAL: final held-out accuracy n/a (no held-out rows) after 1 epochs
// SPLIT: aicf: error: --val-split 1 is not in [0, 1)
