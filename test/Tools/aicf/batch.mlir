// --batch on an hl model: train, eval and bench run the model retargeted
// to that many rows (hl-set-batch), written beside the run's files; its
// checkpoints are of that model, so a resume without --batch goes on at
// the checkpoint's (with its rate and seed), one with another --batch
// goes on at that one, and eval of the file at its own batch scores
// the checkpoint's model with a note that names the batch (eval --batch N,
// the model at N). Sampling runs
// one row at a time and refuses it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 16 --lr 0.002 --seed 3 --epochs 1 --out %t/run --checkpoint-dir %t/ck --no-runs-db --no-progress | FileCheck %s
// CHECK: --batch 16: {{.*}}digits_mlp.mlir at 16 rows per batch -> {{.*}}run{{/|\\}}digits_mlp.batch16.mlir
// CHECK: training on 1438 examples (359 held out), batch 16, 90 steps per epoch
// RUN: FileCheck %s --check-prefix=IR < %t/run/digits_mlp.batch16.mlir
// IR: tensor<16x64xf32>
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/run --checkpoint-dir %t/ck --resume --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=RESUMED
// RESUMED-NOT: error
// RESUMED: training on 1438 examples (359 held out), batch 16, 90 steps per epoch
// RESUMED: epoch   2/2
// RUN: cp -r %t/ck %t/ck8
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 8 --epochs 3 --out %t/run8 --checkpoint-dir %t/ck8 --resume --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=RESUMED8
// RESUMED8-NOT: grown version
// RESUMED8: note: {{.*}}last.safetensors: the checkpoint's model trained at 16 rows per batch; it goes on at 8
// RESUMED8: note: the checkpoint's run took global batches of 16 rows a step, this one 8 (--batch, --accumulate, --nproc)
// RESUMED8: training on 1438 examples (359 held out), batch 8, 180 steps per epoch
// RESUMED8: epoch   3/3
// A checkpoint a policy grew goes on at another batch too, and without
// --batch at its own (both were "another model": the grown IR is no
// retargeting of the file).
// RUN: printf 'prefetch = false\n[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "widen", layer = "fc1", width = 32, rule = "fresh", mask = 20, mask_delay = 3 }\n' > %t/mask.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 16 --epochs 1 --adapt %t/mask.toml --checkpoint-dir %t/gck --out %t/g1 --no-runs-db --no-progress > /dev/null
// RUN: cp -r %t/gck %t/gck16
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --adapt %t/mask.toml --checkpoint-dir %t/gck16 --resume --out %t/g16 --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=GROWN16
// GROWN16: grown version
// GROWN16: batch 16, 90 steps per epoch
// GROWN16: epoch   2/2
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --batch 32 --adapt %t/mask.toml --checkpoint-dir %t/gck --resume --out %t/g32 --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=GROWN32
// GROWN32: the checkpoint's model trained at 16 rows per batch; it goes on at 32
// GROWN32: grown version
// GROWN32: batch 32, 45 steps per epoch
// GROWN32: epoch   2/2
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/ck/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVAL
// EVAL: note: {{.*}}last.safetensors holds {{.*}}digits_mlp.mlir at 16 rows per batch: scoring the model it holds
// EVAL: accuracy {{.*}} on 359 held-out rows
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --batch 16 --data %S/../../../data/digits.csv.gz --checkpoint %t/ck/last.safetensors --out %t/eval16 2>&1 | FileCheck %s --check-prefix=EVAL16
// EVAL16-NOT: note:
// EVAL16: accuracy {{.*}} on 359 held-out rows
// At a batch of neither (it was scored at the checkpoint's 16, with a note
// that called the retargeted file the checkpoint's), the one asked for.
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --batch 4 --data %S/../../../data/digits.csv.gz --checkpoint %t/ck/last.safetensors --out %t/eval4 2>&1 | FileCheck %s --check-prefix=EVAL4
// EVAL4-NOT: note:
// EVAL4: compiled {{.*}}digits_mlp.batch4.mlir in
// EVAL4: accuracy {{.*}} on 359 held-out rows
// RUN: aicf bench %S/../../../examples/mlp/digits_mlp.mlir --batch 8 --steps 3 --out %t/bench | FileCheck %s --check-prefix=BENCH
// BENCH: digits_mlp.batch8.mlir: train step
// RUN: not aicf sample %S/../../../examples/mlp/digits_mlp.mlir --batch 4 --checkpoint %t/ck/last.safetensors 2>&1 | FileCheck %s --check-prefix=SAMPLE
// SAMPLE: aicf: error: --batch sets the rows per batch of a model that trains or is scored; `aicf sample` runs an hl model one row at a time
// A model whose batch an op fixes (a reshape that folds it) scores a
// last, smaller batch filled with repeats of its first example, whose
// predictions are not counted: every held-out row once.
// Trained, each epoch takes whole batches, the rest left out and said.
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/inputs/fixed-batch-mlp.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/fixed --checkpoint-dir %t/fixed-ck --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=FIXEDTRAIN
// FIXEDTRAIN: note: {{.*}}fixed-batch-mlp.mlir.txt: the model runs at a batch of 32 only (an op fixes it: 'hl.reshape' op cannot reshape 'tensor<30x64xf32>' (1920 elements) to 'tensor<2x1024xf32>' (2048 elements), at {{.*}}fixed-batch-mlp.mlir.txt:{{[0-9]+}}:{{[0-9]+}}); each epoch takes whole batches, leaving out 30 training examples (a table's: other rows each epoch) and 7 held-out ones
// FIXEDTRAIN: training on 1408 examples (352 held out), batch 32, 44 steps per epoch
// RUN: env AICF_CACHE_DIR=%t/cache aicf eval %S/inputs/fixed-batch-mlp.mlir.txt --data %S/../../../data/digits.csv.gz --checkpoint %t/fixed-ck/last.safetensors --out %t/fixed-eval 2>&1 | FileCheck %s --check-prefix=FILLED
// FILLED: note: {{.*}}fixed-batch-mlp.mlir.txt: the model runs at a batch of 32 only (an op fixes it): the last 7 held-out rows are scored in a batch filled with repeats, whose predictions are not counted
// FILLED: accuracy {{[0-9.]+}}% on 359 held-out rows
