// Runs do not write over other runs' checkpoints, scoring reads a text
// with the vocabulary it trained with, and damaged or unusable inputs are
// refused with the place named: a checkpoint holding a NaN, a CSV value
// beyond f32, a text with fewer held-out windows than one batch, more
// threads than the machine can use.
// RUN: rm -rf %t && mkdir -p %t
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,200p > %t/digits.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --out %t/run --checkpoint-dir %t/ckpt > /dev/null
// RUN: sha256sum %t/ckpt/last.safetensors > %t/sum
// A fresh run into the directory (another model, or the same) is refused
// and leaves the checkpoint as it was; --resume continues it.
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits.csv --epochs 1 --out %t/run --checkpoint-dir %t/ckpt 2>&1 | FileCheck %s --check-prefix=FRESH
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/run --checkpoint-dir %t/ckpt 2>&1 | FileCheck %s --check-prefix=FRESH
// RUN: sha256sum -c %t/sum
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/run --checkpoint-dir %t/ckpt --resume | FileCheck %s --check-prefix=RESUMED
// FRESH: aicf: error: {{.*}}ckpt: holds an earlier run's checkpoint (epoch 2): --resume continues it; a fresh run needs another --checkpoint-dir (or this one emptied)
// RESUMED: resumed from {{.*}}last.safetensors at epoch 2
// RESUMED: epoch   3/3

// The checkpoint a save replaces stays as prev.safetensors: where the last
// one is damaged on disk, the error names the one before, and a resume from
// it into the directory goes on.
// RUN: cp -r %t/ckpt %t/damaged && rm %t/damaged/last.safetensors
// RUN: python3 %S/inputs/nan-checkpoint.py %t/ckpt/last.safetensors %t/damaged/last.safetensors --keep-checksum
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 4 --out %t/rund --checkpoint-dir %t/damaged --resume 2>&1 | FileCheck %s --check-prefix=DAMAGED
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/damaged/last.safetensors --out %t/rund 2>&1 | FileCheck %s --check-prefix=DAMAGED
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/rund --checkpoint-dir %t/damaged --resume-from %t/damaged/prev.safetensors | FileCheck %s --check-prefix=FROMPREV
// The damaged file the resume replaced is not kept as the spare: the
// good one before stays until this run's own checkpoint is saved twice.
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/damaged/prev.safetensors --out %t/rund > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 4 --out %t/rund --checkpoint-dir %t/damaged --resume > /dev/null
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/damaged/prev.safetensors --out %t/rund | FileCheck %s --check-prefix=PREV3
// PREV3: (checkpoint {{.*}}prev.safetensors, epoch 3)
// DAMAGED: aicf: error: {{.*}}damaged/last.safetensors: not a valid checkpoint: fc1.weight: its bytes do not match their checksum
// DAMAGED-NEXT: note: {{.*}}damaged/prev.safetensors holds epoch 2, the checkpoint saved before this one (give it to --resume-from, or to --checkpoint)
// FROMPREV: resumed from {{.*}}damaged/prev.safetensors at epoch 2
// FROMPREV: epoch   3/3

// A damaged metrics file is said by its line and kept beside, and the run
// goes on with the records that read (it was called another --out's, and
// rewritten without the lines).
// RUN: cp -r %t/ckpt %t/ck5 && cp -r %t/run %t/run5 && sed -i '2s/.*/{"epoch": 2, "tra/' %t/run5/metrics.jsonl
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 4 --out %t/run5 --checkpoint-dir %t/ck5 --resume 2>&1 | FileCheck %s --check-prefix=METRICS
// RUN: grep -c '"tra$' %t/run5/metrics.jsonl.damaged
// RUN: sed -i '3s/.*/{"epoch": 3, "xyz/' %t/run5/metrics.jsonl
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 5 --out %t/run5 --checkpoint-dir %t/ck5 --resume > /dev/null 2>&1
// RUN: grep -c '"tra$' %t/run5/metrics.jsonl.damaged
// RUN: grep -c '"xyz$' %t/run5/metrics.jsonl.damaged.1
// METRICS: note: {{.*}}run5/metrics.jsonl line 2 is not an epoch record ({{.*}}): the file is damaged; kept as {{.*}}run5/metrics.jsonl.damaged, and the run goes on with the 2 records that read
// METRICS-NOT: another --out
// METRICS: epoch   4/4

// A last.safetensors that is a symbolic link: the saves replace the file
// it names, and prev and v0 are links to real files (they were linked to
// the link, and every checkpoint became a link to itself).
// RUN: mkdir -p %t/elsewhere %t/linked && ln -s ../elsewhere/ckpt.safetensors %t/linked/last.safetensors
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --out %t/runl --checkpoint-dir %t/linked > /dev/null
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/linked/prev.safetensors --out %t/runl | FileCheck %s --check-prefix=LINKEDPREV
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/linked/v0.safetensors --out %t/runl | FileCheck %s --check-prefix=LINKEDLAST
// RUN: test -L %t/linked/last.safetensors && test -f %t/elsewhere/ckpt.safetensors
// LINKEDPREV: (checkpoint {{.*}}prev.safetensors, epoch 1)
// LINKEDLAST: (checkpoint {{.*}}v0.safetensors, epoch 2)

// A resume from prev into the run's own --out keeps the records of the
// epochs before it (they were rewritten with the new epochs only).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/rp --checkpoint-dir %t/rpck > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 4 --out %t/rp --checkpoint-dir %t/rpck --resume-from %t/rpck/prev.safetensors > /dev/null
// RUN: python3 -c "import json; print('EPOCHS', [json.loads(l)['epoch'] for l in open('%t/rp/metrics.jsonl')])" | FileCheck %s --check-prefix=KEPTRECORDS
// KEPTRECORDS: EPOCHS [1, 2, 3, 4]

// A plot that cannot be written is found before training (it ended the
// run after its first epoch had trained, before that epoch's checkpoint).
// RUN: mkdir -p %t/blocked/plot.svg %t/dangling && ln -s ../nowhere/plot.svg %t/dangling/plot.svg
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --out %t/dangling --checkpoint-dir %t/danglingck 2>&1 | FileCheck %s --check-prefix=DANGLING
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --out %t/blocked --checkpoint-dir %t/blockedck 2>&1 | FileCheck %s --check-prefix=PLOTDIR
// PLOTDIR-NOT: epoch   1/2
// PLOTDIR: aicf: error: {{.*}}/plot.svg: is not a file (a directory, or a link to one or to nothing), where the run writes its own
// A link there, to nothing or to a file, would be written through (a
// metrics.jsonl linked to a checkpoint replaced the checkpoint).
// DANGLING-NOT: epoch   1/2
// DANGLING: aicf: error: {{.*}}/plot.svg: is a symbolic link (to ../nowhere/plot.svg): the run writes its plot.svg here, and would write through it; remove it, or give another --out

// A run resumed from a checkpoint elsewhere (a fork) does not write into a
// directory holding another run's checkpoints, nor does a fresh run where
// only a model version's checkpoint is left; outputs that would overwrite
// a checkpoint are refused (the checkpoints stay as they were).
// RUN: sha256sum %t/ckpt/last.safetensors > %t/sum3
// RUN: mkdir -p %t/other && cp %t/ckpt/last.safetensors %t/other/start.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 4 --out %t/run --resume-from %t/other/start.safetensors --checkpoint-dir %t/ckpt 2>&1 | FileCheck %s --check-prefix=FORK
// FORK: aicf: error: {{.*}}ckpt: holds an earlier run's checkpoint (epoch 3): a run resumed from {{.*}}start.safetensors writes its checkpoints into another --checkpoint-dir (a new or empty one); --resume continues it
// RUN: mkdir -p %t/versions && cp %t/ckpt/last.safetensors %t/versions/v0.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/run --checkpoint-dir %t/versions 2>&1 | FileCheck %s --check-prefix=VERSION
// VERSION: aicf: error: {{.*}}versions: holds an earlier run's checkpoint (epoch 3), v0.safetensors: --resume continues it
// RUN: not aicf propose --data %t/digits.csv --structure "mlp 16" -o %t/ckpt/last.safetensors 2>&1 | FileCheck %s --check-prefix=OVERWRITE
// OVERWRITE: aicf: error: {{.*}}last.safetensors: the model would overwrite a weights file (a checkpoint or a model's weights); give another output
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/run8 --profile %t/ckpt/last.safetensors 2>&1 | FileCheck %s --check-prefix=PROFILE
// PROFILE: aicf: error: {{.*}}last.safetensors: the profile would overwrite this file, which holds no trace
// RUN: not aicf propose --data %t/digits.csv --structure "mlp 16" -o %t/same.mlir --json %t/same.mlir 2>&1 | FileCheck %s --check-prefix=SAME
// SAME: aicf: error: {{.*}}same.mlir: the JSON and the model would be written to the same file
// RUN: cp %S/../../../examples/mlp/digits_mlp.mlir %t/mine.mlir
// RUN: not aicf bench %t/mine.mlir --steps 2 --trace %t/mine.mlir --out %t/bench 2>&1 | FileCheck %s --check-prefix=TRACE
// TRACE: aicf: error: {{.*}}mine.mlir: the trace would overwrite this file, which holds no trace; give a new file (or remove this one)
// RUN: mkdir -p %t/imported && echo '// notes' > %t/imported/cnn.mlir
// RUN: not aicf compile %S/../../onnx/cnn.onnx --batch 4 -o %t/imported/cnn.aicf 2>&1 | FileCheck %s --check-prefix=IMPORT
// IMPORT: aicf: error: {{.*}}cnn.mlir: importing {{.*}}cnn.onnx writes its model here, and this file is not an earlier import of it
// RUN: FileCheck %s --check-prefix=NOTES < %t/imported/cnn.mlir
// NOTES: // notes
// A policy's directory of pre-rewrite checkpoints is one run's too.
// RUN: printf 'checkpoint_dir = "%t/rewrites"\n[[rule]]\nwhen = "steps"\nat = 2\naction = { op = "widen", layer = "fc1", width = 160 }\n' > %t/rewrites.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/rewrites.toml --out %t/rw1 > /dev/null
// RUN: sha256sum %t/rewrites/before-rewrite-1.safetensors > %t/sum4
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/rewrites.toml --seed 7 --out %t/rw2 2>&1 | FileCheck %s --check-prefix=REWRITES
// REWRITES: aicf: error: {{.*}}rewrites: the policy's checkpoint_dir holds another run's pre-rewrite checkpoints (before-rewrite-1.safetensors)
// RUN: sha256sum -c %t/sum4
// A snapshot before a later rewrite holds its (grown) model and the run's
// record: eval scores it as that model on the held-out rows (it was
// refused by the starting model's hash, and scored every row as "epoch
// ?"), and a resume from it says what it is (it said "no epoch").
// RUN: printf 'checkpoint_dir = "%t/rewrites2"\n[[rule]]\nwhen = "steps"\nat = 2\naction = { op = "widen", layer = "fc1", width = 160 }\n[[rule]]\nwhen = "steps"\nat = 4\naction = { op = "widen", layer = "fc1", width = 192 }\n' > %t/rewrites2.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/rewrites2.toml --no-runs-db --out %t/rw3 > /dev/null
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/rewrites2/before-rewrite-2.safetensors --data %t/digits.csv 2>&1 | FileCheck %s --check-prefix=SNAPEVAL
// SNAPEVAL: accuracy {{.*}} on {{[0-9]+}} held-out rows of {{.*}}digits.csv (checkpoint {{.*}}before-rewrite-2.safetensors, epoch none: the model before rewrite 2 at step 4)
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --no-runs-db --out %t/rw4 --resume-from %t/rewrites2/before-rewrite-2.safetensors 2>&1 | FileCheck %s --check-prefix=SNAPRESUME
// SNAPRESUME: aicf: error: {{.*}}before-rewrite-2.safetensors: the model before rewrite 2 (the policy's checkpoint_dir), a snapshot of its parameters and optimizer state with no place in the run
// After a rollback, the checkpoint directory's model.mlir is the model
// rolled back to (it named the grown one).
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 2\naction = { op = "widen", layer = "fc1", width = 160 }\n[[rule]]\nwhen = "steps"\nat = 3\naction = "rollback"\n' > %t/rollback.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --adapt %t/rollback.toml --checkpoint-dir %t/rb --out %t/rbrun > /dev/null
// RUN: FileCheck %s --check-prefix=ROLLEDBACK < %t/rb/model.mlir
// ROLLEDBACK: hl.param @fc1.weight : tensor<128x64xf32>
// RUN: sha256sum -c %t/sum3
// RUN: printf '[[rule]]\nwhen = "plateau"\nwindow = 5\nthreshold = 0.01\naction = { op = "widen", layer = "fc1", factor = 0.0 }\n' > %t/factor0.toml
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/factor0.toml --out %t/run9 2>&1 | FileCheck %s --check-prefix=FACTOR
// FACTOR: aicf: error: {{.*}}factor0.toml{{.*}}action: factor = 0: a widening multiplies the width by a finite number above 1

// A checkpoint holding a NaN (written with its checksum, as a tool that
// edits tensors would) is refused where it is read, by resume and by
// eval, and named; one whose bytes changed under its checksum too.
// RUN: python3 %S/inputs/nan-checkpoint.py %t/ckpt/last.safetensors %t/nan.safetensors
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/nan.safetensors --out %t/run 2>&1 | FileCheck %s --check-prefix=NANCKPT
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 4 --out %t/run --resume-from %t/nan.safetensors 2>&1 | FileCheck %s --check-prefix=NANCKPT
// NANCKPT: aicf: error: {{.*}}nan.safetensors: not a valid checkpoint: fc1.weight holds a NaN or an infinity (element 0)
// RUN: python3 %S/inputs/nan-checkpoint.py %t/ckpt/last.safetensors %t/flipped.safetensors --keep-checksum
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/flipped.safetensors --out %t/run 2>&1 | FileCheck %s --check-prefix=FLIPPED
// FLIPPED: aicf: error: {{.*}}flipped.safetensors: not a valid checkpoint: fc1.weight: its bytes do not match their checksum (the file is damaged)

// A value beyond f32 in a table.
// RUN: sed '3s/^[0-9.]*,/1e300,/' %t/digits.csv > %t/huge.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/huge.csv --out %t/run2 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: aicf: error: {{.*}}huge.csv:3: column 1 is 1e300, beyond the largest f32
// A value within f32 but a million times beyond the rest is named before
// training (it may make training diverge, or scale the other features to
// nothing), and a divergence it causes names it rather than the rate.
// RUN: sed '3s/^[0-9.]*,/1e30,/' %t/digits.csv > %t/outlier.csv
// RUN: (aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/outlier.csv --epochs 2 --out %t/run2b --no-progress || true) 2>&1 | FileCheck %s --check-prefix=OUTLIER
// OUTLIER: note: {{.*}}outlier.csv: element 0 of example 2 (counting from 0) of input #0 is 1e30, {{.*}} times the 99th percentile of the input's magnitudes: training may diverge on it, or learn little else; check the data

// More threads than 16 per core.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --threads 100000 --out %t/run2 2>&1 | FileCheck %s --check-prefix=THREADS
// THREADS: aicf: error: {{.*}}100000 threads on {{[0-9]+}} core(s): at most {{[0-9]+}} (16 per core; 0 is one per core)
// RUN: test ! -e %t/run2

// Text: scoring reads the text with the checkpoint's vocabulary (a
// character it never saw is named); fewer held-out windows than one batch
// are scored in a smaller batch, in training as by eval.
// RUN: head -c 20000 %S/../../../data/tinyshakespeare.txt > %t/text.txt
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/text.txt --epochs 1 --windows-per-epoch 32 --out %t/lm --checkpoint-dir %t/lm-ckpt > /dev/null
// RUN: printf '$' > %t/other.txt && tail -c +2 %t/text.txt >> %t/other.txt
// RUN: not aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/other.txt --checkpoint %t/lm-ckpt/last.safetensors --out %t/lm 2>&1 | FileCheck %s --check-prefix=VOCAB
// VOCAB: aicf: error: {{.*}}other.txt: 1 character is not in the checkpoint's vocabulary of {{[0-9]+}} characters, the first '$' on line 1 (byte 0): '$' (1) (times each occurs)
// Every character it lacks is named, with its count (the first alone was:
// fixed one run at a time), and Windows line endings are said.
// RUN: printf 'Caf\xc3\xa9 \xe2\x82\xac\xe2\x82\xac\n' > %t/others.txt && cat %t/text.txt >> %t/others.txt
// RUN: not aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/others.txt --checkpoint %t/lm-ckpt/last.safetensors --out %t/lm 2>&1 | FileCheck %s --check-prefix=VOCABS
// VOCABS: aicf: error: {{.*}}others.txt: 2 characters are not in the checkpoint's vocabulary of {{[0-9]+}} characters, the first 'é' on line 1 (byte 3): '€' (2), 'é' (1) (times each occurs)
// RUN: sed 's/$/\r/' %t/text.txt > %t/crlf.txt
// RUN: not aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/crlf.txt --checkpoint %t/lm-ckpt/last.safetensors --out %t/lm 2>&1 | FileCheck %s --check-prefix=VOCABCRLF
// VOCABCRLF: the first '\r' on line 1 {{.*}} (Windows line endings: convert them to '\n', as the run's text had them)
// Training on it says the '\r' is a character the model learns.
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/crlf.txt --epochs 1 --windows-per-epoch 8 --no-runs-db --out %t/crlf-run 2>&1 | FileCheck %s --check-prefix=CRLFTRAIN
// CRLFTRAIN: note: {{.*}}crlf.txt: Windows line endings ('\r\n'): '\r' is read as a character of its own
// Training on from the checkpoint reads another text with its vocabulary
// too (the text's own would have moved every id after '$' by one).
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/other.txt --resume-from %t/lm-ckpt/last.safetensors --checkpoint-dir %t/lm-fork --override-resume --epochs 2 --windows-per-epoch 32 --out %t/lm-fork-run 2>&1 | FileCheck %s --check-prefix=VOCAB
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/text.txt --checkpoint %t/lm-ckpt/last.safetensors --out %t/lm | FileCheck %s --check-prefix=SCORED
// SCORED: accuracy {{[0-9.]+}}% on 62 held-out windows of {{.*}}text.txt
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/text.txt --eval-windows 1 --epochs 1 --out %t/lm2 2>&1 | FileCheck %s --check-prefix=WINDOWS
// WINDOWS: compiled {{.*}}char_lm.mlir for batch 1
// WINDOWS: final held-out loss

// Outputs that would destroy an input, and numbers that mean nothing.
// A profile onto a file the run writes itself (it replaced the final
// checkpoint, or the metrics the run then named):
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --profile %t/prof-run/metrics.jsonl --out %t/prof-run 2>&1 | FileCheck %s --check-prefix=PROFOWN
// PROFOWN: aicf: error: {{.*}}metrics.jsonl: the profile would overwrite a file of the run directory (--out) that this run writes; give another file
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --profile %t/prof-ck/last.safetensors --checkpoint-dir %t/prof-ck --out %t/prof-run2 2>&1 | FileCheck %s --check-prefix=PROFCK
// PROFCK: aicf: error: {{.*}}last.safetensors: the profile would overwrite the checkpoint directory's files, which this run writes; give another file
// RUN: cp %S/../../../examples/mlp/digits_mlp.mlir %t/model.mlir
// RUN: not aicf compile %t/model.mlir --emit ll -o %t/model.mlir 2>&1 | FileCheck %s --check-prefix=SELF
// RUN: FileCheck %s --check-prefix=INTACT < %t/model.mlir
// SELF: aicf: error: {{.*}}model.mlir: -o names the model being compiled; give another output
// INTACT: hl.param @fc1.weight
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --lr 1e-50 --out %t/run3 2>&1 | FileCheck %s --check-prefix=TINYLR
// TINYLR: aicf: error: the learning rate 1e-50 is 0 in f32
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --flops-budget nan --out %t/run3 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: aicf: error: the FLOPs budget NaN is not a finite positive number

// @forward and @loss of other batch sizes: named before training.
// RUN: sed '16,24s/tensor<32x/tensor<16x/g' %S/../../../examples/mlp/digits_mlp.mlir > %t/batchdiff.mlir
// RUN: not aicf train %t/batchdiff.mlir --data %t/digits.csv --out %t/run4 2>&1 | FileCheck %s --check-prefix=BATCHDIFF
// BATCHDIFF: aicf: error: {{.*}}batchdiff.mlir: @forward's input #0 is [16, 64] f32, @loss's is [32, 64] f32: both take the same data

// A loss that is not finite at the first step comes from the model or the
// data (nothing has been updated yet); a directory is no checkpoint.
// RUN: sed 's/%a = hl.relu %h : tensor<32x128xf32>/%z = hl.constant dense<0x7FC00000> : tensor<128xf32>\n  %r = hl.relu %h : tensor<32x128xf32>\n  %a = hl.mul %r, %z : tensor<32x128xf32>, tensor<128xf32>/' %S/../../../examples/mlp/digits_mlp.mlir > %t/nanmodel.mlir
// RUN: not aicf train %t/nanmodel.mlir --data %t/digits.csv --out %t/run5 2>&1 | FileCheck %s --check-prefix=FIRST
// FIRST: aicf: error: the loss is NaN at the first step, before any update: the model (its constants or initial values) or the data gives it, not the learning rate
// (A checkpoint directory stands for its last.safetensors: one without it.)
// RUN: mkdir -p %t/nockpt
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/nockpt --out %t/run 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: aicf: error: --checkpoint {{.*}}nockpt: a directory that holds no last.safetensors: give a checkpoint file (its v0.safetensors, ...) or the --checkpoint-dir of a run
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --out %t/run6 --checkpoint-dir %t/none --resume 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: test ! -e %t/none
// NONE: aicf: error: {{.*}}none{{/|\\}}last.safetensors: no checkpoint to resume from (train without --resume to start one)

// @forward giving NaN (its @loss clean): the held-out accuracy is refused.
// RUN: sed '16,24s/%a = hl.relu %h : tensor<32x128xf32>/%z = hl.constant dense<0x7FC00000> : tensor<128xf32>\n  %r = hl.relu %h : tensor<32x128xf32>\n  %a = hl.mul %r, %z : tensor<32x128xf32>, tensor<128xf32>/' %S/../../../examples/mlp/digits_mlp.mlir > %t/nanforward.mlir
// RUN: not aicf train %t/nanforward.mlir --data %t/digits.csv --epochs 1 --out %t/run7 2>&1 | FileCheck %s --check-prefix=FORWARD
// FORWARD: aicf: error: @forward gives logits that are not finite on held-out data at the end of epoch 1

// Integer division (by 0 it has no value in a kernel) is refused at its op.
// RUN: sed 's/%loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>/%z = hl.constant dense<0> : tensor<i32>\n  %q = hl.div %labels, %z : tensor<32xi32>, tensor<i32>\n  %loss = hl.cross_entropy %logits, %q : tensor<32x10xf32>, tensor<32xi32>/' %S/../../../examples/mlp/digits_mlp.mlir > %t/idiv.mlir
// RUN: not aicf compile %t/idiv.mlir -o %t/idiv.aicf 2>&1 | FileCheck %s --check-prefix=IDIV
// IDIV: idiv.mlir:{{[0-9]+}}:{{[0-9]+}}: error: convert-hl-to-ll: hl.div of I32 integers is not supported (a division by 0 has no value): cast to a float type

// A growth rule naming a layer the model does not have is refused before
// training, with the model's layers, where no rule of the policy adds
// layers (it would otherwise never act, silently); with one that does, it
// is noted (it may act on a layer that rule makes).
// RUN: printf '[[rule]]\nwhen = "steps"\nevery = 5\naction = { op = "widen", layer = "nope", factor = 2.0, max_width = 128 }\n' > %t/nolayer.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/nolayer.toml --out %t/run8 2>&1 | FileCheck %s --check-prefix=NOLAYER
// NOLAYER: error: {{.*}}nolayer.toml: policy rule 1 (action { op = "widen", factor = 2.0, layer = "nope", max_width = 128, rule = "net2wider" }) can never act on this model: the model has no layer nope (its layers: fc1, fc2) (no rule of the policy adds layers for it to act on later; fix the rule, or drop it)
// RUN: printf '[[rule]]\nwhen = "steps"\nevery = 5\naction = { op = "widen", layer = "nope", width = 32 }\n[[rule]]\nwhen = "steps"\nat = 6\naction = { op = "deepen", after = "fc1" }\n' > %t/nolayer-deepen.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/nolayer-deepen.toml --out %t/run8n 2>&1 | FileCheck %s --check-prefix=NOLAYERNOTE
// NOLAYERNOTE: note: policy rule 1 (action { op = "widen", layer = "nope", rule = "net2wider", width = 32 }) cannot grow the model it starts from (the model has no layer nope (its layers: fc1, fc2)): it acts only on what an earlier growth makes
// NOLAYERNOTE: final held-out
// A plateau window longer than half the run is said never to act, as a
// step past its last is.
// RUN: printf '[[rule]]\nwhen = "plateau"\nwindow = 1000\nthreshold = 0.01\naction = { op = "widen", layer = "fc1", factor = 2.0 }\n' > %t/long-plateau.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/long-plateau.toml --out %t/run8w 2>&1 | FileCheck %s --check-prefix=LONGPLATEAU
// LONGPLATEAU: note: policy rule 1 fires on a plateau over 1000 steps, which compares 2000 steps' losses; this run trains {{[0-9]+}}: it never acts
// Likewise a held-out plateau over more epochs than the run has, FLOPs the
// run does not reach at its model's cost, a fork's trial longer than the
// run, and a re-warm-up longer than the run (all went by unsaid).
// RUN: printf 'rewarmup_steps = 1000000\n[[rule]]\nwhen = "val-plateau"\nwindow = 1000\nthreshold = 5.0\naction = { op = "widen", layer = "fc1", width = 32 }\n[[rule]]\nwhen = "flops"\nflops = 1e30\naction = { op = "widen", layer = "fc1", width = 48 }\n[[rule]]\nwhen = "steps"\nat = 3\naction = { fork = [ { op = "widen", layer = "fc1", width = 24 }, { op = "widen", layer = "fc1", width = 28 } ], steps = 50 }\n' > %t/never.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/never.toml --no-runs-db --out %t/run8n 2>&1 | FileCheck %s --check-prefix=NEVER
// NEVER-DAG: note: policy rule 1 fires on a held-out plateau over 1000 epochs, which compares 2000 epochs' held-out losses; this run trains 1: it never acts
// NEVER-DAG: note: policy rule 2 fires at 1.000e30 training FLOPs; this run spends about {{.*}} a step: it acts only if a growth makes the steps costlier
// NEVER-DAG: note: policy rule 3 forks with a trial of 50 steps a candidate, more than this whole run's 5: each candidate trains that long where the rule fires
// NEVER-DAG: note: the policy's rewarmup_steps (1000000) is longer than this run (5 steps)
// NEVER-DAG: note: policy rule 1 takes a plateau as an improvement below threshold = 5 of the loss (0.01: 1%), which a positive loss never makes at 1 or more: it fires at every window
// A pattern that matches no layer says so, with the layers (it said "no
// such layer, or at its cap").
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "blocks.*.fc", factor = 2.0 }\n' > %t/nomatch.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/nomatch.toml --out %t/run8m 2>&1 | FileCheck %s --check-prefix=NOMATCH
// NOMATCH: can never act on this model: no layer of the model matches blocks.*.fc (its layers: fc1, fc2)
// A composition, or a pattern's layers, rewrite the model in turn before
// training: one that undoes itself, or a layer of the pattern that cannot
// widen, is refused there (it was found only when its rule fired).
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "compose", ops = [ { op = "widen", layer = "fc1", width = 32 }, { op = "widen", layer = "fc1", width = 24 } ] }\n' > %t/undoes.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/undoes.toml --out %t/run8u 2>&1 | FileCheck %s --check-prefix=UNDOES
// UNDOES: error: {{.*}}undoes.toml: policy rule 1 {{.*}} can never act on this model: hl-widen: width=24 is narrower than fc1's 32 units; widening only grows
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 3\naction = { op = "widen", layer = "blocks.*.mlp.proj", factor = 2.0 }\n' > %t/star.toml
// RUN: not aicf train %S/../../../examples/grow_lm/small2x.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 96 --eval-windows 16 --epochs 1 --adapt %t/star.toml --no-runs-db --out %t/run8s 2>&1 | FileCheck %s --check-prefix=STAR
// STAR: error: {{.*}}star.toml: policy rule 1 {{.*}} can never act on this model: hl-widen: blocks.0.mlp.proj's units reach 'hl.add' here
// A width whose parameters alone are more than this machine's memory is
// refused before training (it trained to its rule's step and was
// rejected there).
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "fc1", width = 400000000 }\n' > %t/huge-width.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/huge-width.toml --no-runs-db --out %t/run8h 2>&1 | FileCheck %s --check-prefix=HUGEWIDTH
// HUGEWIDTH: error: {{.*}}huge-width.toml: policy rule 1 {{.*}} can never act on this model: {{.*}}the grown model's 30000000010 parameter values and the state carried into them, at least{{.*}}
// HUGEWIDTH-NOT: epoch
// A cap on the run's rewrites under rules that may act more often is
// noted up front (it stopped them without a word).
// RUN: printf 'max_rewrites = 1\n[[rule]]\nwhen = "steps"\nevery = 30\nmax_times = 4\naction = { op = "widen", layer = "fc1", factor = 1.5, max_width = 64 }\n' > %t/capped.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/capped.toml --no-runs-db --out %t/run8c 2>&1 | FileCheck %s --check-prefix=CAPPED
// CAPPED: note: max_rewrites = 1: after 1 rewrite no rule changes the model again (its rules may act 4 times)
// A FLOPs trigger fires once, as a step's does: no note under a cap of 1.
// RUN: printf 'max_rewrites = 1\n[[rule]]\nwhen = "flops"\nflops = 1e9\naction = { op = "widen", layer = "fc1", width = 32 }\n' > %t/flops-once.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/flops-once.toml --no-runs-db --out %t/run8f 2>&1 | FileCheck %s --check-prefix=FLOPSONCE
// FLOPSONCE-NOT: max_rewrites
// FLOPSONCE: final held-out
// A width not above the layer's is named for what it is (the note said
// "no such layer, or at its cap"); the output layer, which no widening can
// take, is noted before training (it was found only when its rule fired).
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "fc1", width = 8 }\n' > %t/narrower.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/narrower.toml --out %t/run8b 2>&1 | FileCheck %s --check-prefix=NARROWER
// NARROWER: error: {{.*}}policy rule 1 (action {{.*}}) can never act on this model: width = 8 is not above fc1's 16 units
// Alone in its policy, nothing else changes the model, so it is refused
// (it trained on with every decision rejected); beside a rule that grows
// the model, noted.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "fc2", width = 32 }\n' > %t/output.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/output.toml --out %t/run8o 2>&1 | FileCheck %s --check-prefix=OUTPUTALONE
// OUTPUTALONE: error: {{.*}}output.toml: policy rule 1 (action { op = "widen", layer = "fc2", rule = "net2wider", width = 32 }) can never act on this model: hl-widen: fc2's units reach 'func.return' here; {{.*}} (no other rule of the policy changes the model; fix the rule, or drop it)
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "fc2", width = 32 }\n[[rule]]\nwhen = "steps"\nat = 7\naction = { op = "widen", layer = "fc1", width = 32 }\n' > %t/output2.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/output2.toml --out %t/run8o2 2>&1 | FileCheck %s --check-prefix=OUTPUT
// OUTPUT: note: policy rule 1 (action { op = "widen", layer = "fc2", rule = "net2wider", width = 32 }) cannot rewrite the model it starts from (hl-widen: fc2's units reach 'func.return' here; {{.*}}): its decision will be rejected unless an earlier growth changes that
// OUTPUT: widen fc2 to 32 (net2wider) on step 5 reached -> rejected
// A deepening after a layer the model lacks, and a block added to a model
// of no blocks, are refused before training too (each was found only when
// its rule fired); a mask on net2wider's widening is refused by its rule.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "deepen", after = "nope" }\n[[rule]]\nwhen = "steps"\nat = 6\naction = { op = "add-block" }\n' > %t/cannot.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/cannot.toml --out %t/run8c 2>&1 | FileCheck %s --check-prefix=CANNOT
// CANNOT: error: {{.*}}policy rule 1 (action {{.*}}) can never act on this model: the model has no layer nope (its layers: fc1, fc2) (no rule {{.*}}); policy rule 2 (action {{.*}}) can never act on this model: the model has no blocks blocks.0, blocks.1, ...
// A composition with one operator that finds nothing is refused as a
// rule of that operator alone is, where no rule adds layers (it was noted,
// and the rest applied: a misspelt layer dropped), naming the operator.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "compose", ops = [{ op = "widen", layer = "nope", width = 32 }, { op = "widen", layer = "fc1", width = 32 }] }\n' > %t/compose-never.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 2 --adapt %t/compose-never.toml --out %t/run8q --no-progress 2>&1 | FileCheck %s --check-prefix=COMPOSENEVER
// COMPOSENEVER: error: {{.*}}compose-never.toml: policy rule 1's operator 1 of 2 of its composition (action { op = "widen", layer = "nope", rule = "net2wider", width = 32 }) can never act on this model: the model has no layer nope (its layers: fc1, fc2)
// Where a rule adds layers, it goes on without it, and a fork skips such
// a candidate: each noted, the run not refused.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "compose", ops = [{ op = "widen", layer = "nope", width = 32 }, { op = "widen", layer = "fc1", width = 32 }] }\n[[rule]]\nwhen = "steps"\nat = 50\naction = { fork = [{ op = "widen", layer = "fc1", width = 64 }, { op = "widen", layer = "fc2", width = 32 }], steps = 4 }\n[[rule]]\nwhen = "steps"\nat = 70\naction = { op = "deepen", after = "fc1" }\n' > %t/partial.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 2 --adapt %t/partial.toml --out %t/run8p --no-progress 2>&1 | FileCheck %s --check-prefix=PARTIAL
// PARTIAL: note: policy rule 1's operator 1 of 2 of its composition (action { op = "widen", layer = "nope", rule = "net2wider", width = 32 }) cannot grow the model it starts from (the model has no layer nope (its layers: fc1, fc2)): the composition goes on without it
// PARTIAL: note: policy rule 2's fork candidate { op = "widen", layer = "fc2", rule = "net2wider", width = 32 } cannot grow the model it starts from (hl-widen: fc2's units reach 'func.return' here{{.*}}): the fork skips it while that holds
// PARTIAL: step 5 (epoch 1): widen fc1 to 32
// PARTIAL: final held-out
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "fc1", width = 32, mask = 4 }\n' > %t/masked-net2wider.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/masked-net2wider.toml --out %t/run8d 2>&1 | FileCheck %s --check-prefix=MASKN2W
// MASKN2W: policy rule 1: action: a mask needs rule = "zero-out" or "fresh"

// Option values named for what is wrong with them, before anything runs.
// RUN: not aicf propose --data %t/digits.csv --structure "mlp -5" -o %t/p.mlir 2>&1 | FileCheck %s --check-prefix=WIDTH
// WIDTH: aicf: error: structure 'mlp -5': a width is missing (or negative)
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 1 --trace %t --out %t/bench 2>&1 | FileCheck %s --check-prefix=TRACEDIR
// TRACEDIR: aicf: error: --trace {{.*}}: is a directory, not a file
// RUN: test ! -e %t/bench

// A rollback rule on a step trigger goes back to the last epoch's end (it
// did nothing: only an instability rule kept that state).
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 7\naction = "rollback"\n' > %t/rollback-steps.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --adapt %t/rollback-steps.toml --out %t/rbsteps --no-progress | FileCheck %s --check-prefix=ROLLSTEP
// ROLLSTEP: step 7 (epoch 2): roll back on step 7 reached -> accepted{{.*}}back to the state of step 5 (end of epoch 1)
// Resumed from an earlier checkpoint of its own directory (a model version
// before a later growth), a run replays the epochs after it
// (checkpoints.mlir); one that would end before the directory's latest
// checkpoint is refused, and last.safetensors is left as it was (it was
// rewritten to epoch 3 of 4).
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --out %t/rewind-run --checkpoint-dir %t/rewind --adapt %S/inputs/grow-steps.toml --no-progress > /dev/null
// RUN: cp %t/rewind/last.safetensors %t/rewind-last.safetensors
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/rewind-again --checkpoint-dir %t/rewind --adapt %S/inputs/grow-steps.toml --resume-from %t/rewind/v1.safetensors --no-progress 2>&1 | FileCheck %s --check-prefix=REWIND
// RUN: cmp %t/rewind/last.safetensors %t/rewind-last.safetensors
// REWIND: aicf: error: {{.*}}rewind: holds this run's later checkpoint last.safetensors (epoch 4): replayed from {{.*}}v1.safetensors to epoch 3, the run would leave an earlier one in its place; give --epochs 4 or more, --resume to continue the latest, or another --checkpoint-dir (a fork)
// A replay in place writes no checkpoint before the directory's latest
// epoch (one killed midway left an earlier last.safetensors): stopped
// early here by a FLOPs budget, it says so and leaves the latest as it was.
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --out %t/rewind-budget --checkpoint-dir %t/rewind --adapt %S/inputs/grow-steps.toml --resume-from %t/rewind/v1.safetensors --flops-budget 3e7 --no-progress 2>&1 | FileCheck %s --check-prefix=REPLAYSTOP
// RUN: cmp %t/rewind/last.safetensors %t/rewind-last.safetensors
// REPLAYSTOP-NOT: has nothing to grow
// REPLAYSTOP: note: the replay stopped at epoch 3 before {{.*}}rewind's latest checkpoint (epoch 4), which stays: no checkpoint written
// A replay in place that would train otherwise than its run did (another
// global batch, a setting overridden) is refused before it trains: it
// replaced the good epoch-3 last.safetensors with another epoch 3.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/replaybatch-run --checkpoint-dir %t/replaybatch --no-progress > /dev/null
// RUN: cp %t/replaybatch/last.safetensors %t/replaybatch-last.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/replaybatch-again --checkpoint-dir %t/replaybatch --resume-from %t/replaybatch/prev.safetensors --accumulate 2 --no-progress 2>&1 | FileCheck %s --check-prefix=REPLAYBATCH
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/replaybatch-again --checkpoint-dir %t/replaybatch --resume-from %t/replaybatch/prev.safetensors --override-resume --lr 0.01 --no-progress 2>&1 | FileCheck %s --check-prefix=REPLAYLR
// RUN: cmp %t/replaybatch/last.safetensors %t/replaybatch-last.safetensors
// REPLAYBATCH: aicf: error: {{.*}}replaybatch: resumed from {{.*}}prev.safetensors (epoch 2), an earlier checkpoint of this directory, with the global batch (32 rows a step, now 64: --accumulate, --nproc) changed: the run would replace the directory's later checkpoint last.safetensors (epoch 3) with one trained otherwise; give another --checkpoint-dir to fork from epoch 2 (or --resume to go on from the latest)
// REPLAYLR: aicf: error: {{.*}}with lr (--override-resume) changed: the run would replace

// eval and sample of a checkpoint holding another version of the model (a
// grown one) write that version to --out/checkpoint-model.mlir; where that
// file is MODEL itself (the path an earlier note named), they refuse and
// leave it as it was.
// RUN: mkdir -p %t/over && cp %S/../../../examples/grow/narrow_mlp.mlir %t/over/checkpoint-model.mlir
// RUN: not aicf eval %t/over/checkpoint-model.mlir --data %t/digits.csv --checkpoint %t/rewind/last.safetensors --out %t/over 2>&1 | FileCheck %s --check-prefix=OVERMODEL
// RUN: cmp %t/over/checkpoint-model.mlir %S/../../../examples/grow/narrow_mlp.mlir
// OVERMODEL: aicf: error: {{.*}}over/checkpoint-model.mlir: is MODEL, the model file given; scoring the other model the checkpoint holds would write that model here, over it: give another --out
// --eval-windows samples a text's windows: on a table it is refused, not
// ignored.
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/ckpt/last.safetensors --eval-windows 5 --out %t/run 2>&1 | FileCheck %s --check-prefix=WINDOWSTABLE
// WINDOWSTABLE: aicf: error: --eval-windows 5 samples a text's held-out windows; {{.*}}digits.csv is a table, whose examples are scored every one
// A metrics file or plot that cannot be written (here past `ulimit -f`, as
// on a full disk under --out) is said, and the run goes on to its end: it
// stopped there, over its plot. The earlier plot stays whole.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/fullout --no-runs-db > /dev/null
// RUN: (ulimit -f 8; aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --out %t/fullout --no-runs-db --no-progress 2>&1) | FileCheck %s --check-prefix=PLOTFULL
// PLOTFULL: epoch 1/3
// PLOTFULL-NEXT: note: {{.*}}fullout/plot.svg: File too large (os error 27); training goes on, and each epoch writes the metrics and plot again
// PLOTFULL-NEXT: epoch 2/3
// PLOTFULL: epoch 3/3
// PLOTFULL-NEXT: note: the run's metrics and plot in {{.*}}fullout are not all written ({{.*}}plot.svg: File too large (os error 27))
// PLOTFULL-NEXT: final held-out accuracy
// RUN: python3 -c "import sys; t = open(sys.argv[1]).read(); print(t.rstrip().endswith('</svg>'), open(sys.argv[2]).read().count('epoch'))" %t/fullout/plot.svg %t/fullout/metrics.jsonl | FileCheck %s --check-prefix=PLOTKEPT
// PLOTKEPT: True 3
