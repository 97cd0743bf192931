// aicf export: a trained model as an ONNX file, its @forward with the
// checkpoint's parameters at a dynamic batch, reading features as the
// checkpoint's run read its table. Read back by `aicf predict` (the ONNX
// import) it predicts what the checkpoint predicts, at any batch; the
// onnxruntime check of the same export is `make onnx-export-check`.
// RUN: rm -rf %t && mkdir -p %t
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,300p > %t/digits.csv
// RUN: cut -d, -f1-64 %t/digits.csv > %t/features.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck > /dev/null
// RUN: aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck -o %t/mlp.onnx --out %t/x > %t/out.txt 2> %t/err.txt
// RUN: FileCheck %s --check-prefix=WROTE < %t/out.txt
// WROTE: mlp.onnx written: ONNX opset 18, 4 parameter tensors, {{[0-9]+}} nodes
// WROTE-NEXT: inputs: input [batch, 64] float
// WROTE-NEXT: outputs: output [batch, 10] float
// RUN: FileCheck %s --check-prefix=SCALED < %t/err.txt
// SCALED: note: the graph divides its input by 16 first, as the checkpoint's run read its data: it takes features at the scale the data file holds them
//
// The export's logits are the checkpoint's, for the 300 rows (a batch the
// model never had).
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv --values raw --out %t/p1 > %t/checkpoint.csv
// RUN: aicf predict %t/mlp.onnx --data %t/features.csv --batch 300 --values raw --out %t/p2 > %t/exported.csv
// RUN: python3 %S/inputs/close_csv.py %t/exported.csv %t/checkpoint.csv 1e-5 | FileCheck %s --check-prefix=SAME
// SAME: 300 rows agree
//
// Standardized features are standardized in the graph; --raw-features
// leaves them to the caller.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --standardize --no-runs-db --no-progress --out %t/run2 --checkpoint-dir %t/ck2 > /dev/null
// RUN: aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck2 -o %t/std.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=STD
// STD: note: the graph standardizes its input by the training rows' means and deviations first
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck2 --data %t/features.csv --values raw --out %t/p3 > %t/checkpoint2.csv
// RUN: aicf predict %t/std.onnx --data %t/features.csv --batch 300 --values raw --out %t/p4 > %t/exported2.csv
// RUN: python3 %S/inputs/close_csv.py %t/exported2.csv %t/checkpoint2.csv 1e-5 | FileCheck %s --check-prefix=SAME
// RUN: aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck2 -o %t/raw.onnx --raw-features --out %t/x 2>&1 | FileCheck %s --check-prefix=RAW
// RAW-NOT: standardizes
// RAW: raw.onnx written
//
// --batch fixes the batch; a language model exports its token ids.
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 32 --no-runs-db --no-progress --out %t/lm --checkpoint-dir %t/cklm > /dev/null
// RUN: aicf export %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/cklm -o %t/lm.onnx --out %t/x | FileCheck %s --check-prefix=LM
// LM: inputs: input [batch, 64] int32
// LM-NEXT: outputs: output [batch, 64, 65] float
// RUN: aicf export %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/cklm -o %t/lm1.onnx --batch 1 --out %t/x | FileCheck %s --check-prefix=ONE
// ONE: inputs: input [1, 64] int32
//
// An imported model keeps its inputs' and outputs' names; its own weights
// export without a checkpoint.
// RUN: aicf export %S/../../onnx/mlp.onnx --batch 8 -o %t/own.onnx --out %t/imp | FileCheck %s --check-prefix=NAMES
// NAMES: inputs: input0 [batch, 64] float
// NAMES-NEXT: outputs: output0 [batch, 10] float
// A bf16 run exports its f32 master weights, said; --precision is refused.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --precision bf16 --no-runs-db --no-progress --out %t/run3 --checkpoint-dir %t/ck3 > /dev/null
// RUN: aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck3 -o %t/bf16.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=BF16
// BF16: note: the checkpoint's run computed its products in bf16 (--precision); the graph computes in f32
// RUN: not aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck3 -o %t/p.onnx --precision bf16 --out %t/x 2>&1 | FileCheck %s --check-prefix=PRECISION
// PRECISION: error: --precision bf16: the export writes the model in f32
//
// Refused before anything is written: another extension, an input as the
// output, a model without weights, another model's checkpoint, a
// directory for -o, training options.
// RUN: not aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck -o %t/mlp.txt --out %t/x 2>&1 | FileCheck %s --check-prefix=EXT
// EXT: error: -o {{.*}}mlp.txt: an ONNX model is written to a .onnx file
// RUN: cp %t/mlp.onnx %t/keep.onnx
// RUN: not aicf export %t/keep.onnx -o %t/keep.onnx --batch 4 --out %t/x 2>&1 | FileCheck %s --check-prefix=INPUT
// INPUT: error: -o {{.*}}keep.onnx: is an input of this command
// RUN: not aicf export %S/../../../examples/nanogpt/nanogpt.mlir -o %t/gpt.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// NOWEIGHTS: no --checkpoint, and the model holds no weights of its own
// RUN: not aicf export %S/../../../examples/cnn/digits_cnn.mlir --checkpoint %t/ck -o %t/cnn.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: the checkpoint is of another model
// RUN: mkdir -p %t/dir.onnx
// RUN: not aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck -o %t/dir.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: is a directory, not a file
// RUN: not aicf export %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck -o %t/m.onnx --momentum 0.9 --out %t/x 2>&1 | FileCheck %s --check-prefix=TRAINING
// TRAINING: `aicf export` trains nothing
// RUN: not test -e %t/mlp.txt
// RUN: not test -e %t/cnn.onnx
