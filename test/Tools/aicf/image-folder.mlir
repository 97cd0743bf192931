// An image folder as data, as torchvision's ImageFolder reads one: a
// subfolder per class (or train/ and val/, each so). The digits written as
// 8x8 PNGs train the CNN as their table does (pixels / 255, the table's
// values / 16: the same 0 to 1), the classes are the folders' names
// (recorded: eval reads labels by them, predict writes them beside each
// image's path, export says how the graph takes images), images of another
// size or colour are converted and said to be, and a damaged image, an
// empty class or a flat folder is an error naming it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/digits --names --bmp 2
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/digits --epochs 8 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck 2>&1 | FileCheck %s --check-prefix=TRAIN
// TRAIN: data: 1797 images of 10 classes (digit-0 = 0, digit-1 = 1, digit-2 = 2, digit-3 = 3, digit-4 = 4, digit-5 = 5, ...), 8x8 gray ({{.*}}digits)
// TRAIN: training on 1438 examples (359 held out)
// TRAIN: final held-out accuracy {{9[0-9]}}.{{[0-9]+}}%
//
// The same images scored by eval: the run's held-out ones.
// RUN: aicf eval %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck --data %t/digits --out %t/e | FileCheck %s --check-prefix=EVAL
// EVAL: accuracy {{9[0-9]}}.{{[0-9]+}}% on 359 held-out rows
// A folder of some of the classes is scored by their names (digit-7 is
// class 7 though it is the first folder here); a class the run never saw
// is refused.
// RUN: mkdir -p %t/some && cp -r %t/digits/digit-7 %t/digits/digit-9 %t/some/
// RUN: aicf eval %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck --data %t/some --out %t/e | FileCheck %s --check-prefix=SOME
// SOME: accuracy {{9[0-9]}}.{{[0-9]+}}% on 359 rows
// RUN: mkdir -p %t/some/cat && cp %t/digits/digit-1/*.png %t/some/cat/
// RUN: not aicf eval %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck --data %t/some --out %t/e 2>&1 | FileCheck %s --check-prefix=UNSEEN
// UNSEEN: error: {{.*}}some: the folder 'cat' is not among the classes the checkpoint's run trained on: digit-0, digit-1,
//
// Predictions of a flat folder: each image's path, then its class's name.
// RUN: mkdir -p %t/new && cp %t/digits/digit-3/0003.bmp %t/new/a.bmp && cp %t/digits/digit-8/0028.png %t/new/b.png
// RUN: aicf predict %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck --data %t/new --out %t/p | FileCheck %s --check-prefix=PREDICT
// PREDICT: a.bmp,digit-3
// PREDICT-NEXT: b.png,digit-8
// Image files themselves, named as given.
// RUN: aicf predict %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck --data %t/new/b.png --out %t/p | FileCheck %s --check-prefix=FILE
// FILE: {{.*}}new/b.png,digit-8
// RUN: aicf predict %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck --data %t/new --out %t/p --values probabilities -o %t/p.npy 2>&1 | FileCheck %s --check-prefix=NPY
// NPY: note: {{.*}}p.npy's rows are the images in the order of their paths (a.bmp, b.png)
// RUN: aicf export %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck -o %t/m.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=EXPORT
// EXPORT: note: the input is images as the run read them: 8x8 gray images, channels first, pixels / 255 (0 to 1)
//
// A checkpoint of the table scores the folder of its numbered classes
// (folders named 0 to 9), its pixels read as 0 to 1 (not divided by the
// table's 16): the accuracy of the table's rows within 0.2% (the PNGs
// round v * 255 / 16 to 8 bits).
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/numbered
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --val-split 0 --no-runs-db --no-progress --out %t/trun --checkpoint-dir %t/tck > /dev/null 2>&1
// RUN: aicf eval %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/tck --data %S/../../../data/digits.csv.gz --out %t/e | sed 's/ on .*//' > %t/table-score
// RUN: aicf eval %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/tck --data %t/numbered --out %t/e 2>&1 | tee %t/folder-eval | sed 's/ on .*//' > %t/folder-score
// RUN: FileCheck %s --check-prefix=NUMBERED < %t/folder-eval
// NUMBERED-NOT: divided by
// NUMBERED: accuracy {{[0-9.]+}}% on 1797 rows
// RUN: python3 -c "import sys; a, b = [float(open(f).read().split()[-1].rstrip('%%')) for f in sys.argv[1:]]; print('close' if abs(a - b) < 0.2 else f'{a} vs {b}')" %t/table-score %t/folder-score | FileCheck %s --check-prefix=CLOSE
// CLOSE: close
//
// train/ and val/: the folder's own split (and Training/ and Testing/;
// folders of classes named otherwise are refused, not read as two
// classes). --standardize reads each channel by its mean and deviation, as
// torchvision's Normalize; --feature-scale is a table's. An RGB model reads RGB images
// (a flat MLP on 3 x 8 x 8, channels first), and 24x24 colour images are
// resized for, and read as gray by, the 8x8 gray CNN.
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/split --split --rgb --per-class 30
// RUN: sed 's/x64xf32/x192xf32/g' %S/../../../examples/mlp/digits_mlp.mlir > %t/rgb-mlp.mlir
// RUN: aicf train %t/rgb-mlp.mlir --data %t/split --epochs 1 --no-runs-db --no-progress --out %t/rgb 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: note: {{.*}}split: trains on train/ and holds out val/ (
// SPLIT: data: 300 images of 10 classes (0 = 0, 1 = 1, {{.*}}), 8x8 RGB
// RUN: mkdir -p %t/kaggle && cp -r %t/split/train %t/kaggle/Training && cp -r %t/split/val %t/kaggle/Testing && mkdir %t/kaggle/test && cp %t/new/b.png %t/kaggle/test/
// RUN: aicf train %t/rgb-mlp.mlir --data %t/kaggle --standardize --epochs 1 --no-runs-db --no-progress --out %t/rgb 2>&1 | FileCheck %s --check-prefix=KAGGLE
// KAGGLE: note: {{.*}}kaggle: test/ holds 1 image and no class folders: not read (`aicf predict --data {{.*}}test` predicts them)
// KAGGLE: note: {{.*}}kaggle: trains on Training/ and holds out Testing/
// KAGGLE: note: {{.*}}kaggle: standardized per channel, as torchvision's Normalize(mean, std): mean ({{[0-9.]+}}, {{[0-9.]+}}, 0.0000), std ({{[0-9.]+}}, {{[0-9.]+}}, 1.0000) of the training images
// RUN: mv %t/kaggle/Training %t/kaggle/seg_train && mv %t/kaggle/Testing %t/kaggle/seg_test && rm -r %t/kaggle/test
// RUN: not aicf train %t/rgb-mlp.mlir --data %t/kaggle --epochs 1 --no-runs-db --out %t/rgb 2>&1 | FileCheck %s --check-prefix=UNNAMED
// UNNAMED: error: {{.*}}kaggle: seg_test/, seg_train/ hold no images of their own, only folders (0, 1, 2, 3, ...): a split? {{.*}}; or give the training one alone, --data {{.*}}kaggle/seg_train
// RUN: not aicf train %t/rgb-mlp.mlir --data %t/split --feature-scale 2 --epochs 1 --no-runs-db --out %t/rgb 2>&1 | FileCheck %s --check-prefix=SCALE
// SCALE: error: --feature-scale divides a table's features; the images of {{.*}}split are read as pixels / 255 (0 to 1)
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/big --rgb --scale 3 --per-class 4
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/big --epochs 1 --no-runs-db --no-progress --out %t/big-run 2>&1 | FileCheck %s --check-prefix=RESIZED
// RESIZED: note: {{.*}}big: 40 images of 40 not 8x8 as the model takes them (e.g. 0/0000.png, 24x24): resized
// RESIZED: note: {{.*}}big: colour images (e.g. 0/0000.png) read as gray (luma): the model takes 1 channel
//
// Bad folders: a damaged image, an empty class, images without class
// folders, a model that takes no images.
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/bad --per-class 3
// RUN: head -c 40 %t/bad/4/0004.png > %t/cut.png && mv %t/cut.png %t/bad/4/0004.png
// RUN: echo x > %t/bad/7/0007.png && echo y > %t/bad/9/x.jpg
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/bad --epochs 1 --no-runs-db --out %t/bad-run 2>&1 | FileCheck %s --check-prefix=DAMAGED
// DAMAGED: error: {{.*}}bad/4/0004.png: not an image this reads ({{.*}}); and 2 more that do not read (7/0007.png, 9/x.jpg)
// A pipe named as an image is refused, not read forever.
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/pipe --per-class 2 && mkfifo %t/pipe/3/p.png
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/pipe --epochs 1 --no-runs-db --out %t/bad-run 2>&1 | FileCheck %s --check-prefix=PIPE
// PIPE: error: {{.*}}pipe/3/p.png: not a regular file (a pipe, socket or device)
// RUN: python3 %S/inputs/make_images.py %S/../../../data/digits.csv.gz %t/empty --per-class 3 && mkdir %t/empty/extra
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/empty --epochs 1 --no-runs-db --out %t/bad-run 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: {{.*}}empty: the class folder 'extra' holds no images
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %t/new --epochs 1 --no-runs-db --out %t/bad-run 2>&1 | FileCheck %s --check-prefix=FLAT
// FLAT: error: {{.*}}new: 2 images and no subfolders (a flat folder is read for predictions, `aicf predict`): an image folder holds a subfolder per class
// RUN: not aicf train %S/inputs/linear-regression.mlir.txt --data %t/digits --epochs 1 --no-runs-db --out %t/bad-run 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: {{.*}}digits: the model's input #0 is [{{[0-9]+}}, 2] f32; images feed an input of images
