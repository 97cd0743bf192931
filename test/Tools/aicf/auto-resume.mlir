// --auto-resume: one command for a job's first launch and its restarts (a
// Slurm requeue, a preempted machine). It resumes where --checkpoint-dir
// holds a checkpoint and starts afresh where it holds none, saying which;
// a directory whose last.safetensors is gone resumes from the latest it
// holds (a fresh run would have written over it). Under --nproc the
// launcher decides once, for every rank.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --auto-resume --checkpoint-dir %t/ck --out %t/out --no-runs-db --no-progress | FileCheck %s --check-prefix=FIRST
// FIRST: note: --auto-resume: {{.*}}ck holds no checkpoint yet: the run starts afresh
// FIRST: epoch   1/1
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --auto-resume --checkpoint-dir %t/ck --out %t/out --no-runs-db --no-progress | FileCheck %s --check-prefix=AGAIN
// AGAIN-NOT: note: --auto-resume
// AGAIN: resumed from {{.*}}ck/last.safetensors at epoch 1
// AGAIN: epoch   2/2
// The same command once the run is done trains nothing, and says so.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --auto-resume --checkpoint-dir %t/ck --out %t/out --no-runs-db --no-progress | FileCheck %s --check-prefix=DONE
// DONE: nothing to train
// RUN: mv %t/ck/last.safetensors %t/last.safetensors
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --auto-resume --checkpoint-dir %t/ck --out %t/out --no-runs-db --no-progress | FileCheck %s --check-prefix=GONE
// GONE: note: --auto-resume: {{.*}}last.safetensors is not there; {{.*}}.safetensors holds epoch 2: the run goes on from it
// GONE: epoch   3/3
// Under --nproc: one note, from the launcher; the ranks resume together.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --auto-resume --nproc 2 --checkpoint-dir %t/dp --out %t/dpout --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=DPFIRST
// DPFIRST: note: --auto-resume: {{.*}}dp holds no checkpoint yet: the run starts afresh
// DPFIRST-NOT: note: --auto-resume
// DPFIRST: epoch   1/1
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --auto-resume --nproc 2 --checkpoint-dir %t/dp --out %t/dpout --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=DPAGAIN
// DPAGAIN: resumed from {{.*}}dp/last.safetensors at epoch 1
// DPAGAIN: epoch   2/2
// It needs a checkpoint directory, and is no --resume beside one.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --auto-resume --out %t/x 2>&1 | FileCheck %s --check-prefix=NODIR
// NODIR: --checkpoint-dir
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --auto-resume --resume --checkpoint-dir %t/ck --out %t/x 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: cannot be used with
// A checkpoint directory that is a file is the run's error alone (no note
// that it starts afresh).
// RUN: touch %t/afile
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --auto-resume --checkpoint-dir %t/afile --out %t/y --no-runs-db 2>&1 | FileCheck %s --check-prefix=AFILE
// AFILE-NOT: note: --auto-resume
// AFILE: is a file (--checkpoint-dir)
// `runs compare` tells a data-parallel run from one process's by its
// replicas (its batch row alone read as a larger batch).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --nproc 2 --out %t/r1 --runs-db %t/runs.sqlite --no-progress > /dev/null 2>&1
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/r2 --runs-db %t/runs.sqlite --no-progress > /dev/null
// RUN: aicf runs compare 1 2 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=REPLICAS
// REPLICAS: batch 64 32
// REPLICAS: replicas 2 1
// A checkpoint resumed with its model file edited since is of another
// model; the error names the run's own first model beside it.
// RUN: cp %S/../../../examples/mlp/digits_mlp.mlir %t/edited.mlir
// RUN: aicf train %t/edited.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --checkpoint-dir %t/ed/ck --out %t/ed --no-runs-db --no-progress > /dev/null
// RUN: sed -i 's/low = -0.125, high = 0.125/low = -0.12, high = 0.12/' %t/edited.mlir
// RUN: not aicf train %t/edited.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --auto-resume --checkpoint-dir %t/ed/ck --out %t/ed --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=EDITED
// EDITED: the checkpoint is of another model (IR hash {{[0-9a-f]+}}, this model's is {{[0-9a-f]+}}); {{.*}}ed/ck/model-v0.mlir is the model its run started from: give that
