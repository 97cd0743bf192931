// A growth policy's `restart_schedule = true`: the run's learning-rate
// schedule (here a 10-step warm-up, then a cosine decay to 0.1 x 3e-3) starts
// again at the growth, over the steps left, as if the grown model's training
// were a run of its own. 45 steps an epoch, 135 in all, fc1 widened at step
// 45. Epoch 1 ends at the plain schedule's rate (2.536e-3, as lr-schedule.mlir);
// epoch 2's last step is step 44 of a 90-step schedule (1.965e-3, against
// 1.106e-3 without the restart) and epoch 3 ends near the floor (3.010e-4).
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --lr-schedule cosine --warmup-steps 10 --out %t/run --no-progress --adapt %S/inputs/grow-restart.toml | FileCheck %s
// RUN: FileCheck %s --check-prefix=METRICS < %t/run/metrics.jsonl

// CHECK: step 45 (epoch 1): widen fc1 to 32 (zero-out) on step 45 reached -> accepted
// CHECK: adaptive run: 1 decision (

// METRICS: {"epoch":1,{{.*}}"lr":0.00253639{{[0-9]*}},"lr_applied":0.00253639
// METRICS: {"epoch":2,{{.*}}"lr":0.00196515{{[0-9]*}},"lr_applied":0.00196515
// METRICS: {"epoch":3,{{.*}}"lr":0.00030104{{[0-9]*}},"lr_applied":0.00030104
