// `aicf train` on the digits MLP: compiles the train step for the CPU,
// trains with Adam, reports held-out accuracy, writes metrics and a plot.
// Bad input is a clear error naming the file.
// RUN: rm -rf %t
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --lr 3e-3 --epochs 3 --out %t | FileCheck %s
// RUN: FileCheck %s --check-prefix=METRICS < %t/metrics.jsonl
// RUN: FileCheck %s --check-prefix=PLOT < %t/plot.svg
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/inputs/four_features.csv --out %t 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/inputs/missing.csv --out %t 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 1e30 --epochs 1 --out %t 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --val-split 0 --epochs 1 --out %t | FileCheck %s --check-prefix=NOVAL
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --val-split 1 --out %t 2>&1 | FileCheck %s --check-prefix=SPLIT
// A GEMM registry of its own, empty: the run says how much of its training
// time went to timing GEMM candidates (once per shape and machine).
// RUN: env AICF_CACHE_DIR=%t/fresh-cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/fresh | FileCheck %s --check-prefix=FRESH
// FRESH: final held-out accuracy {{[0-9.]+}}% after 1 epoch (45 steps, training {{[0-9.]+}} s, {{[0-9.]+}} s of it timing GEMM candidates for this machine's GEMM registry)

// The last batches (1438 = 44 x 32 + 30 training rows, 359 = 11 x 32 + 7
// held out) run variants compiled once for their sizes.
// CHECK: compiled {{.*}}digits_mlp.mlir for batch 30 in
// CHECK: compiled {{.*}}digits_mlp.mlir for batch 7 in
// CHECK: data: 1797 rows of 64 features and a label ({{.*}}digits.csv.gz)
// CHECK: training on 1438 examples (359 held out), batch 32, 45 steps per epoch, cpu, {{[0-9]+}} threads
// CHECK: epoch   1/3  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy {{[0-9.]+}}%
// CHECK: epoch   3/3
// CHECK: final held-out accuracy {{[0-9.]+}}% after 3 epochs (135 steps

// METRICS: {"epoch":1,"step":45,"train_loss":{{[0-9.]+}},"val_loss":{{[0-9.]+}},"val_accuracy":{{[0-9.]+}},"unit":"nats","seconds":{{[0-9.e-]+}},"steps_per_second":{{[0-9.e-]+}},"params":9610,"train_flops":{{[0-9.e]+}},"lr":0.003}
// METRICS: {"epoch":3,

// PLOT: <svg
// PLOT-DAG: loss (nats)
// PLOT-DAG: held-out accuracy
// PLOT-DAG: {{^}}train loss
// PLOT-DAG: {{^}}held-out loss
// PLOT: </svg>

// SHAPE: aicf: error: {{.*}}four_features.csv: rows have 4 features and a label; the model's input #0 is [32, 64] f32, which takes 64 features per row
// MISSING: aicf: error: {{.*}}missing.csv: No such file or directory
// NAN: aicf: error: the loss became {{.*}} at epoch 1, step {{[0-9]+}} (lr 1e30); lower the learning rate

// NOVAL: training on 1797 examples (0 held out)
// NOVAL: final held-out figures n/a (no held-out examples: --val-split 0) after 1 epoch (
// SPLIT: aicf: error: --val-split 1 is not in [0, 1)

// A model whose parameters are f16 trains with Adam: the update and its
// slots are f32 (in f16, eps 1e-8 is 0 and a parameter without gradient
// became 0/0 = NaN on the first step).
// RUN: sed 's/xf32>/xf16>/g; s/tensor<f32>/tensor<f16>/g' %S/../../../examples/mlp/digits_mlp.mlir > %t/mlp16.mlir
// RUN: aicf train %t/mlp16.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --lr 3e-3 --epochs 3 --out %t/mlp16 | FileCheck %s --check-prefix=F16
// F16: epoch   3/3  train loss 0.{{[0-9]+}}  val loss 0.{{[0-9]+}}  val accuracy {{[89][0-9]\.[0-9]+}}%
// An @loss that calls @forward trains: the call is inlined before autodiff
// (it was "cannot differentiate through 'func.call'", with no way to
// inline from aicf train).
// RUN: aicf train %S/inputs/loss-calls-forward.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 2 --no-runs-db --no-progress --out %t/calls | FileCheck %s --check-prefix=CALLS
// CALLS: epoch   2/2  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy {{[0-9.]+}}%
// A model without @forward trains on its @loss, and a note says no
// accuracy comes (its run reported a held-out loss alone, unsaid).
// RUN: aicf train %S/inputs/no-forward.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --no-progress --out %t/noforward 2>&1 | FileCheck %s --check-prefix=NOFORWARD
// NOFORWARD: note: {{.*}}no-forward.mlir.txt has no @forward: the held-out figure is @loss's loss alone
// NOFORWARD: final held-out loss
// A byte that is not UTF-8 (a Latin-1 comment) is named by its line.
// RUN: python3 -c "import sys; open(sys.argv[2], 'wb').write(b'// header\n// caf\xe9\n' + open(sys.argv[1], 'rb').read())" %S/../../../examples/mlp/digits_mlp.mlir %t/latin1.mlir
// RUN: not aicf train %t/latin1.mlir --data %S/../../../data/digits.csv.gz --no-runs-db --out %t/latin1 2>&1 | FileCheck %s --check-prefix=LATIN1
// LATIN1: aicf: error: {{.*}}latin1.mlir: not a model: the file is not UTF-8 text, as an hl module is, from line 2 (byte 16;
// A classifier whose @loss normalizes by the batch's statistics (a batch
// norm) reports the held-out loss of @forward's logits, the running
// statistics', as PyTorch validates in eval mode: the figure `aicf eval`
// gives (it was @loss's, by the held-out batch's own statistics, beside an
// accuracy by the running ones).
// RUN: aicf train %S/inputs/cnn-bn.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 2 --no-runs-db --no-progress --out %t/bn --checkpoint-dir %t/bn-ckpt > %t/bn.txt
// RUN: aicf eval %S/inputs/cnn-bn.mlir.txt --data %S/../../../data/digits.csv.gz --checkpoint %t/bn-ckpt/last.safetensors --out %t/bn-eval >> %t/bn.txt 2>&1
// RUN: FileCheck %s --check-prefix=BN < %t/bn.txt
// BN: epoch   2/2  train loss {{[0-9.]+}}  val loss [[LOSS:[0-9.]+]]  val accuracy [[ACC:[0-9.]+]]%
// BN: accuracy [[ACC]]% on 359 held-out rows {{.*}}; loss [[LOSS]] nats
// The same with @forward private: the inliner would erase it once no call
// is left, and eval would find no @forward; it stays.
// RUN: sed 's/^func.func @forward/func.func private @forward/' %S/inputs/loss-calls-forward.mlir.txt > %t/private-forward.mlir
// RUN: aicf train %t/private-forward.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --no-progress --out %t/private --checkpoint-dir %t/private-ckpt | FileCheck %s --check-prefix=PRIVATE
// PRIVATE: val accuracy
// RUN: aicf eval %t/private-forward.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/private-ckpt/last.safetensors --out %t/private-eval | FileCheck %s --check-prefix=PRIVATEEVAL
// PRIVATEEVAL: accuracy {{[0-9.]+}}% on 359 held-out rows
// AdamW decays by PyTorch's default, 0.01, where --weight-decay is not
// given (it was 0: `--optimizer adamw` alone trained as Adam); 0 turns it
// off; Adam's and SGD's default stays 0. The checkpoint records it, and a
// bare resume keeps it.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adamw --epochs 1 --no-progress --out %t/adamw --checkpoint-dir %t/adamw-ck --runs-db %t/adamw.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adamw --weight-decay 0 --epochs 1 --no-progress --out %t/adamw0 --runs-db %t/adamw.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-progress --out %t/adam --runs-db %t/adamw.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --resume --no-progress --out %t/adamw --checkpoint-dir %t/adamw-ck --runs-db %t/adamw.sqlite > /dev/null
// RUN: aicf runs compare 1 2 3 --runs-db %t/adamw.sqlite | FileCheck %s --check-prefix=ADAMWDECAY
// ADAMWDECAY: optimizer {{ *}}adamw 0.003 {{ *}}adamw 0.003 {{ *}}adam 0.003
// ADAMWDECAY: weight decay {{ *}}0.01 {{ *}}0 {{ *}}0
// ADAMWDECAY: epochs {{ *}}2 {{ *}}1 {{ *}}1
// --lr 0 trains nothing, as PyTorch's lr=0 (a check of a pipeline, a
// batch norm's statistics): the parameters stay (it was refused): epoch
// 1's checkpoint and epoch 2's hold the same values.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 0 --optimizer sgd --epochs 2 --no-runs-db --no-progress --out %t/lr0 --checkpoint-dir %t/lr0-ck | FileCheck %s --check-prefix=LRZERO
// LRZERO: note: --lr 0: the parameters stay as they are
// LRZERO: epoch   2/2
// LRZERO-NOT: above a uniform guess
// LRZERO: final held-out accuracy
// RUN: python3 %S/inputs/same_tensors.py %t/lr0-ck/prev.safetensors %t/lr0-ck/last.safetensors step | FileCheck %s --check-prefix=LRZEROSAME
// LRZEROSAME: 0 of {{[0-9]+}} tensors differ
