// `aicf train --lr-schedule cosine`: a linear warm-up, then a cosine decay
// to --min-lr-factor times --lr at the run's last step (45 steps an epoch,
// 135 in all, warm-up 10: the epochs end at 2.536e-3, 1.106e-3 and 3.004e-4,
// just above 0.1 x 3e-3). The schedule is part of the checkpoint's record:
// resuming with another one is refused, and without the flags a resume
// takes it. `--lr-schedule wsd` (warm-up,
// stable, decay) holds the rate until its last --decay-steps (45: epoch 3),
// then decays linearly to the floor at the last step.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --lr-schedule cosine --warmup-steps 10 --out %t/run --checkpoint-dir %t/ckpt --no-progress
// RUN: FileCheck %s < %t/run/metrics.jsonl
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --lr-schedule wsd --out %t/run --checkpoint-dir %t/ckpt --resume 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: cp -r %t/ckpt %t/ckpt-kept
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --out %t/kept --checkpoint-dir %t/ckpt-kept --resume --no-progress 2>&1 | FileCheck %s --check-prefix=KEPT
// KEPT-NOT: error
// KEPT: note: the cosine schedule spanned 3 epochs in the checkpoint's run and spans 4 in this one
// KEPT: epoch   4/4
// More epochs on resume stretch the cosine: said, since its decayed rate
// rises again.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --lr-schedule cosine --warmup-steps 10 --out %t/run --checkpoint-dir %t/ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=STRETCH
// STRETCH: note: the cosine schedule spanned 3 epochs in the checkpoint's run and spans 4 in this one: the rate follows the new length from the checkpoint's step on (a decayed rate rises again)
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule cosine --min-lr-factor 2 --out %t/bad 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --lr-schedule wsd --warmup-steps 10 --decay-steps 45 --out %t/wsd --no-progress > /dev/null
// RUN: FileCheck %s --check-prefix=WSD < %t/wsd/metrics.jsonl
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule wsd --decay-steps 0 --out %t/bad 2>&1 | FileCheck %s --check-prefix=WSD-BAD
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule wsd --decay-fraction 1.5 --out %t/bad 2>&1 | FileCheck %s --check-prefix=WSD-FRACTION
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule cosine --decay-steps 10 --out %t/bad 2>&1 | FileCheck %s --check-prefix=WSD-ONLY
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule wsd --decay-steps 10 --decay-fraction 0.3 --out %t/bad 2>&1 | FileCheck %s --check-prefix=WSD-BOTH
// A warm-up without a schedule that has one is refused, as is a decay.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --warmup-steps 10 --out %t/bad 2>&1 | FileCheck %s --check-prefix=WARMUP-ONLY
// A cosine run under a FLOPs budget (about 40 steps of 45 an epoch, of a
// run of 1000 epochs) decays to the floor where the budget ends.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1000 --flops-budget 5e7 --lr-schedule cosine --out %t/budget --no-progress > /dev/null
// RUN: FileCheck %s --check-prefix=BUDGET < %t/budget/metrics.jsonl
// Resumed without its budget, the schedule's length changes: said.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --flops-budget 1.1e8 --lr-schedule cosine --out %t/budget2 --checkpoint-dir %t/budget2-ckpt --no-progress > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --lr-schedule cosine --out %t/budget2 --checkpoint-dir %t/budget2-ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=UNBUDGETED
// UNBUDGETED: note: the cosine schedule was sized to --flops-budget 1.1e8 in the checkpoint's run and to --epochs 4 in this one

// CHECK: {"epoch":1,{{.*}}"lr":0.00253639
// CHECK: {"epoch":2,{{.*}}"lr":0.00110607
// CHECK: {"epoch":3,{{.*}}"lr":0.00030042

// OTHER: the checkpoint was trained with lr_schedule cosine, warm-up 10 steps, down to 0.1 x lr; this run asks for wsd, warm-up 0 steps, the last 0.2 of the run down to 0.1 x lr (--override-resume goes on anyway)
// BAD: the cosine schedule's minimum factor 2 is not in [0, 1]

// WSD: {"epoch":1,{{.*}}"lr":0.003}
// WSD: {"epoch":2,{{.*}}"lr":0.003}
// WSD: {"epoch":3,{{.*}}"lr":{{0\.0003|0\.000299999}}
// WSD-BAD: the wsd schedule's decay takes at least 1 step
// WSD-FRACTION: the wsd schedule's decay fraction 1.5 is not in (0, 1]
// WSD-ONLY: --decay-steps and --decay-fraction are the wsd schedule's: add --lr-schedule wsd
// WSD-BOTH: the argument '--decay-steps <DECAY_STEPS>' cannot be used with '--decay-fraction <DECAY_FRACTION>'
// WARMUP-ONLY: --warmup-steps is the cosine and wsd schedules': add --lr-schedule cosine or wsd
// BUDGET: {"epoch":1,{{.*}}"lr":0.0003{{[0-9]*}}
// BUDGET-NOT: "epoch":2
