// `--augment flip,crop=P`: each training image flipped and shifted at
// random each step (torchvision's RandomHorizontalFlip and RandomCrop with
// padding), held-out ones as they are. The draws are the seed's, step's and
// row's: a resumed run ends on the uninterrupted one's bits, and a resume
// that drops the augmentation is refused. Arrays of images augment too;
// a table, or a model whose input is no image, is refused.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/digits --per-class 40
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment flip,crop=1 --epochs 4 --runs-db %t/runs.sqlite --no-progress --out %t/whole --checkpoint-dir %t/whole/ck 2>&1 | FileCheck %s --check-prefix=TRAIN
// TRAIN: final held-out accuracy
// RUN: aicf runs show 1 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=RECORDED
// RECORDED: also: augment flip,crop=1
// Without augmentation the run differs (the same seed).
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --epochs 4 --no-runs-db --no-progress --out %t/plain --checkpoint-dir %t/plain/ck > /dev/null 2>&1
// RUN: python3 %S/inputs/same_tensors.py %t/whole/ck/last.safetensors %t/plain/ck/last.safetensors | FileCheck %s --check-prefix=DIFFERS
// DIFFERS: {{[1-9][0-9]*}} of {{[0-9]+}} tensors differ
// Two epochs, then a resume to four: the same bits.
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment flip,crop=1 --epochs 2 --no-runs-db --no-progress --out %t/parts --checkpoint-dir %t/parts/ck > /dev/null 2>&1
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --epochs 4 --no-runs-db --no-progress --out %t/parts --checkpoint-dir %t/parts/ck --resume 2>&1 | FileCheck %s --check-prefix=DROPPED
// DROPPED: error: {{.*}}last.safetensors: the checkpoint was trained with augment flip,crop=1; this run asks for none
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment flip,crop=1 --epochs 4 --no-runs-db --no-progress --out %t/parts --checkpoint-dir %t/parts/ck --resume > /dev/null 2>&1
// RUN: python3 %S/inputs/same_tensors.py %t/whole/ck/last.safetensors %t/parts/ck/last.safetensors | FileCheck %s --check-prefix=SAME
// SAME: 0 of {{[0-9]+}} tensors differ
//
// Arrays of [N, 1, 8, 8] images augment as the folder's do.
// RUN: zcat %S/../../../data/digits.csv.gz > %t/digits.csv
// RUN: python3 %S/inputs/csv-to-npy.py %t/digits.csv %t/x.npy 0 63 16 1,8,8
// RUN: python3 %S/inputs/csv-to-npy.py %t/digits.csv %t/y.npy 64 64 1 1
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/x.npy --data %t/y.npy --augment crop=1 --epochs 1 --no-runs-db --no-progress --out %t/arrays --checkpoint-dir %t/arrays/ck > /dev/null 2>&1
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/x.npy --data %t/y.npy --epochs 1 --no-runs-db --no-progress --out %t/arrays-plain --checkpoint-dir %t/arrays-plain/ck > /dev/null 2>&1
// RUN: python3 %S/inputs/same_tensors.py %t/arrays/ck/last.safetensors %t/arrays-plain/ck/last.safetensors | FileCheck %s --check-prefix=DIFFERS
// Held-out images are scored as they are: the run's last held-out loss is
// eval's of its checkpoint, which reads the images unaugmented.
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment flip,crop=2 --epochs 2 --no-runs-db --no-progress --out %t/held --checkpoint-dir %t/held/ck 2>&1 | grep "epoch   2/2" | sed 's/.*val loss \([0-9.]*\).*/\1/' > %t/held-run-loss
// RUN: aicf eval %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/held/ck --data %t/digits --out %t/e | grep accuracy | sed 's/.*loss \([0-9.]*\) nats.*/\1/' > %t/held-eval-loss
// RUN: FileCheck %s --check-prefix=LOSS < %t/held-run-loss
// LOSS: {{^[0-9]+\.[0-9]+$}}
// RUN: cmp %t/held-run-loss %t/held-eval-loss
// Standardized per channel, an image folder pads black standardized; arrays
// standardized per element are refused (a flip moves a pixel to another's
// statistics).
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment crop=1 --standardize --epochs 1 --no-runs-db --no-progress --out %t/std 2>&1 | FileCheck %s --check-prefix=TRAIN
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/x.npy --data %t/y.npy --augment crop=1 --standardize --epochs 1 --no-runs-db --out %t/std 2>&1 | FileCheck %s --check-prefix=PERPIXEL
// PERPIXEL: error: {{.*}}x.npy: --augment crop=1: --standardize reads arrays per element
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --augment flip --epochs 1 --no-runs-db --out %t/table 2>&1 | FileCheck %s --check-prefix=TABLE
// TABLE: error: {{.*}}digits.csv.gz: --augment flip: it flips and crops images: an image folder, or arrays of images
// RUN: python3 %S/inputs/csv-to-npy.py %t/digits.csv %t/flat.npy 0 63 16
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/flat.npy --data %t/y.npy --augment flip --epochs 1 --no-runs-db --out %t/flat 2>&1 | FileCheck %s --check-prefix=FLAT
// FLAT: error: {{.*}}flat.npy: --augment flip: the model's input #0 is [32, 64] f32, no image
// A crop of half the side or more is said.
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment crop=4 --epochs 1 --no-runs-db --no-progress --out %t/wide 2>&1 | FileCheck %s --check-prefix=WIDE
// WIDE: note: {{.*}}digits: --augment crop=4 on 8x8 images: a crop may be mostly padding
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --augment crop --epochs 1 --no-runs-db --out %t/bad 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: crop needs its padding, crop=P
