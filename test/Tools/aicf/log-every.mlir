// --log-every N prints a line every N steps (the mean training loss since
// the last line, the rate, the speed) and records it in <out>/steps.jsonl,
// which plot.svg draws: a language model's run is often one long epoch,
// whose own line came only at its end. --eval-every N adds the held-out
// loss at those steps (nanoGPT's eval_interval); at an epoch's last step it
// is the epoch's own, evaluated once. Evaluating changes nothing the run
// trains: its checkpoint is a run's without the flags, bit for bit.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 64 --eval-windows 8 --no-progress --epochs 2 --gemm generated --log-every 3 --eval-every 4 --out %t/logged --checkpoint-dir %t/logged/ck --no-runs-db | FileCheck %s --check-prefix=LOGGED
// LOGGED: 4 steps per epoch
// LOGGED-NEXT: step      3 (epoch 1, 3/4)  train loss {{[0-9.]+}}  lr 3.000e-3  ({{[0-9.]+}} steps/s, {{[0-9]+k?}} tokens/s)
// LOGGED-NEXT: step      4 (epoch 1, 4/4)  train loss {{[0-9.]+}}  val loss [[VAL1:[0-9.]+]] nats/char  val accuracy [[ACC1:[0-9.]+%]]  lr 3.000e-3
// LOGGED-NEXT: epoch   1/2  train loss {{[0-9.]+}}  val loss [[VAL1]] nats/char  val accuracy [[ACC1]]
// LOGGED-NEXT: step      6 (epoch 2, 2/4)  train loss {{[0-9.]+}}  lr
// LOGGED-NEXT: step      8 (epoch 2, 4/4)  train loss {{[0-9.]+}}  val loss [[VAL2:[0-9.]+]] nats/char
// LOGGED-NEXT: epoch   2/2  train loss {{[0-9.]+}}  val loss [[VAL2]] nats/char
// RUN: FileCheck %s --check-prefix=STEPSFILE < %t/logged/steps.jsonl
// STEPSFILE: {"step":3,"epoch":1,"batch":3,"steps_per_epoch":4,"train_loss":{{[0-9.]+}},"steps":3,"val_loss":null,
// STEPSFILE-NEXT: {"step":4,"epoch":1,"batch":4,"steps_per_epoch":4,"train_loss":{{[0-9.]+}},"steps":1,"val_loss":{{[0-9.]+}},
// STEPSFILE-NEXT: {"step":6,
// STEPSFILE-NEXT: {"step":8,
// STEPSFILE-NOT: {"step"
// RUN: FileCheck %s --check-prefix=PLOTTED < %t/logged/plot.svg
// PLOTTED: train loss (logged steps)
// PLOTTED: held-out loss (evaluated steps)
// The same run without the flags ends on the same bits.
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 64 --eval-windows 8 --no-progress --epochs 2 --gemm generated --out %t/plain --checkpoint-dir %t/plain/ck --no-runs-db > /dev/null
// RUN: python3 %S/inputs/same_tensors.py %t/logged/ck/last.safetensors %t/plain/ck/last.safetensors | FileCheck %s --check-prefix=SAMEBITS
// SAMEBITS: 0 of {{[0-9]+}} tensors differ
// A bare resume logs as its run did (the checkpoint records the flags), and
// steps.jsonl goes on from the checkpoint's step: a resume from epoch 1's
// checkpoint drops the records after it and writes them again, once.
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 64 --eval-windows 8 --no-progress --epochs 1 --gemm generated --log-every 3 --eval-every 4 --out %t/parts --checkpoint-dir %t/parts/ck --no-runs-db > /dev/null
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --resume --out %t/parts --checkpoint-dir %t/parts/ck --no-runs-db | FileCheck %s --check-prefix=RESUMED
// RESUMED: resumed from
// RESUMED: step      6 (epoch 2, 2/4)  train loss
// RESUMED-NEXT: step      8 (epoch 2, 4/4)  train loss {{[0-9.]+}}  val loss
// RUN: FileCheck %s --check-prefix=STEPSFILE < %t/parts/steps.jsonl
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --resume-from %t/logged/ck/prev.safetensors --out %t/logged --checkpoint-dir %t/logged/ck --no-runs-db > /dev/null
// RUN: FileCheck %s --check-prefix=STEPSFILE < %t/logged/steps.jsonl
// A fresh run into that --out without the flags leaves no stale steps.jsonl.
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 64 --eval-windows 8 --no-progress --epochs 1 --out %t/logged --no-runs-db > /dev/null
// RUN: test ! -e %t/logged/steps.jsonl
// A table logs as well (the digits).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --log-every 1 --eval-every 2 --no-progress --out %t/table --no-runs-db | FileCheck %s --check-prefix=TABLE
// TABLE: step      1 (epoch 1, 1/{{[0-9]+}})  train loss {{[0-9.]+}}  lr
// TABLE: step      2 (epoch 1, 2/{{[0-9]+}})  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy {{[0-9.]+}}%  lr
// Zero is refused.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --log-every 0 --out %t/zero --no-runs-db 2>&1 | FileCheck %s --check-prefix=ZEROLOG
// ZEROLOG: aicf: error: --log-every 0: every 1 step or more
// Flags that would log nothing are said; a directory where steps.jsonl
// goes is refused by name where the run writes it, and left alone where it
// does not.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --log-every 1000 --eval-every 3 --val-split 0 --no-progress --out %t/quiet --no-runs-db | FileCheck %s --check-prefix=NOTHING
// NOTHING: note: --log-every 1000: this run ends at step {{[0-9]+}}, before any such step
// NOTHING: note: --eval-every 3: the run holds no examples out (--val-split 0), so its step lines have no held-out loss
// RUN: mkdir -p %t/taken/steps.jsonl
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-progress --out %t/taken --no-runs-db | FileCheck %s --check-prefix=UNTAKEN
// UNTAKEN: final held-out accuracy
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --log-every 5 --no-progress --out %t/taken --no-runs-db 2>&1 | FileCheck %s --check-prefix=TAKEN
// TAKEN: aicf: error: {{.*}}steps.jsonl: is not a file (a directory, or a link), where the run writes its logged steps
