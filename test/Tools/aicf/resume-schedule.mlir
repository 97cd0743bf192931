// A resume finishes the checkpoint's run, and a decaying schedule follows
// the data across a change of batch.
// - A bare --resume (no --epochs) ends at the checkpoint's run's length:
//   it ended at the default's 10 epochs (a cosine recomputed over 10), and
//   a checkpoint at epoch 19 of 20 trained nothing.
// - A fork at another global batch goes on from the checkpoint's place in
//   its epochs, in this run's batches: its rate at epoch 3 is a fresh run's
//   at that batch (it counted the checkpoint's steps of 32 rows against a
//   length in steps of 64, and spent the rest of its run at the floor).
// RUN: rm -rf %t && mkdir -p %t
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 32 --lr 0.01 --lr-schedule cosine --epochs 4 --out %t/run --checkpoint-dir %t/ck --no-runs-db --no-progress > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --resume-from %t/ck/prev.safetensors --out %t/bare --checkpoint-dir %t/bare-ck --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=BARE
// BARE: resumed from {{.*}}prev.safetensors at epoch 3 (step 135)
// BARE-NOT: schedule spanned
// BARE: epoch   4/4
// BARE-NOT: epoch   5/
// BARE: final held-out accuracy {{.*}} after 4 epochs
// RUN: FileCheck %s --check-prefix=SAME < %t/bare/metrics.jsonl
// RUN: FileCheck %s --check-prefix=SAME < %t/run/metrics.jsonl
// SAME: "epoch":4,"step":180,{{.*}}"lr":0.0010006853717962393}
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 32 --lr 0.01 --lr-schedule cosine --epochs 2 --out %t/two --checkpoint-dir %t/two-ck --no-runs-db --no-progress > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 64 --lr 0.01 --lr-schedule cosine --epochs 4 --out %t/fresh64 --no-runs-db --no-progress > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --batch 64 --epochs 4 --resume-from %t/two-ck/last.safetensors --out %t/fork --checkpoint-dir %t/fork-ck --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=FORK
// FORK: note: the cosine schedule spanned 2 epochs in the checkpoint's run and spans 4 in this one
// FORK: note: the checkpoint's run took global batches of 32 rows a step, this one 64 {{.*}} a --lr-schedule goes on from the checkpoint's place in its epochs (counted in this run's batches, as its warm-up is)
// FORK: resumed from {{.*}}last.safetensors at epoch 2 (step 90)
// FORK: epoch   3/4
// RUN: FileCheck %s --check-prefix=LR3 < %t/fresh64/metrics.jsonl
// RUN: FileCheck %s --check-prefix=LR3 < %t/fork/metrics.jsonl
// LR3: "epoch":3,{{.*}}"lr":0.0024285108555160573}
// A resume of the fork goes on where it stands (its place is recorded).
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --resume-from %t/fork-ck/prev.safetensors --out %t/fork2 --checkpoint-dir %t/fork2-ck --no-runs-db --no-progress > /dev/null
// RUN: FileCheck %s --check-prefix=LR4 < %t/fresh64/metrics.jsonl
// RUN: FileCheck %s --check-prefix=LR4 < %t/fork2/metrics.jsonl
// LR4: "epoch":4,{{.*}}"lr":0.0010026233993522169}
// --clip-norm 0 is no clipping (as Hugging Face's max_grad_norm=0): a
// checkpoint's clipping is turned off on resume with --override-resume (0
// was refused as not positive, and leaving the flag out inherits it).
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --clip-norm 1 --out %t/clip --checkpoint-dir %t/clip-ck --no-runs-db --no-progress > /dev/null
// RUN: not env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --clip-norm 0 --out %t/clip --checkpoint-dir %t/clip-ck --resume --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=CLIPOFF
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --clip-norm 0 --override-resume --out %t/clip --checkpoint-dir %t/clip-ck --resume --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=CLIPOVERRIDE
// CLIPOFF: error: {{.*}}last.safetensors: the checkpoint was trained with clip_norm 1; this run asks for none
// CLIPOVERRIDE: this run asks for none; going on (--override-resume)
// CLIPOVERRIDE: epoch   2/2
// (So it is for every command that builds a train step.)
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --clip-norm 0 -o %t/clip0 | FileCheck %s --check-prefix=CLIPCOMPILE
// CLIPCOMPILE: compiled {{.*}}digits_mlp.mlir -> {{.*}}clip0
