// aicf predict: a model's predictions for every row of a data set, in its
// order, from a checkpoint (or an imported model's own weights): a
// classifier's classes (its default), probabilities or raw logits; a
// regression's outputs; as CSV on stdout, or a .npy/.csv file. A table is
// read with or without its label column (features alone), arrays with or
// without the targets, and the features as the checkpoint's run read them.
// RUN: rm -rf %t && mkdir -p %t
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,600p > %t/digits.csv
// RUN: cut -d, -f1-64 %t/digits.csv > %t/features.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 3 --optimizer adam --lr 3e-3 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck > /dev/null
//
// The classes of the table with its labels and of its features alone are
// the same, one per row in the file's order; their accuracy against the
// file's labels is `aicf eval`'s on another copy of the data (which scores
// every row of it: the rows in another order are not the data it trained
// on).
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/digits.csv --out %t/p > %t/with-labels.txt 2> %t/stderr.txt
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv --out %t/p > %t/features-only.txt
// RUN: cmp %t/with-labels.txt %t/features-only.txt
// RUN: wc -l < %t/with-labels.txt | FileCheck %s --check-prefix=ROWS
// ROWS: 600
// A table's features are read as the run read its table, unremarked.
// RUN: not grep -q "divided by" %t/stderr.txt
// RUN: tac %t/digits.csv > %t/other.csv && aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/other.csv --checkpoint %t/ck --out %t/e > %t/agree.txt
// RUN: python3 -c "import sys; p=[int(l) for l in open(sys.argv[1])]; y=[int(float(l.rsplit(',', 1)[1])) for l in open(sys.argv[2])]; print('accuracy {:.2f}'.format(100 * sum(a == b for a, b in zip(p, y)) / len(y)))" %t/with-labels.txt %t/digits.csv >> %t/agree.txt
// RUN: FileCheck %s --check-prefix=AGREE < %t/agree.txt
// AGREE: accuracy [[ACC:[0-9]+\.[0-9]+]]% on 600 rows of {{.*}}other.csv
// AGREE: accuracy [[ACC]]
//
// Probabilities: a row per example of 10, each summing to 1, whose largest
// is the class.
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv --values probabilities -o %t/p.csv --out %t/p | FileCheck %s --check-prefix=PROBS
// PROBS: probabilities of 600 rows (float32, [600, 10]) written to {{.*}}p.csv
// RUN: python3 -c "import sys; rows=[[float(v) for v in l.split(',')] for l in open(sys.argv[1])]; cls=[int(l) for l in open(sys.argv[2])]; print(len(rows), {len(r) for r in rows}, max(abs(sum(r) - 1) for r in rows) < 1e-5, all(r.index(max(r)) == c for r, c in zip(rows, cls)))" %t/p.csv %t/with-labels.txt | FileCheck %s --check-prefix=SUMS
// SUMS: 600 {10} True True
//
// A .npy file numpy reads: the classes as int64 [600], the logits float32.
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv -o %t/classes.npy --out %t/p | FileCheck %s --check-prefix=NPY
// NPY: class of 600 rows (int64, [600]) written to {{.*}}classes.npy
// RUN: python3 -c "import sys, ast; b=open(sys.argv[1], 'rb').read(); n=int.from_bytes(b[8:10], 'little'); h=ast.literal_eval(b[10:10 + n].decode()); v=[int.from_bytes(b[10 + n + 8 * i:18 + n + 8 * i], 'little', signed=True) for i in range(600)]; print(b[:6], h['descr'], h['shape'], v == [int(l) for l in open(sys.argv[2])])" %t/classes.npy %t/with-labels.txt | FileCheck %s --check-prefix=HEADER
// HEADER: b'\x93NUMPY' <i8 (600,) True
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv --values raw -o %t/logits.npy --out %t/p | FileCheck %s --check-prefix=LOGITS
// LOGITS: raw of 600 rows (float32, [600, 10]) written to {{.*}}logits.npy
//
// The predictions of a model as arrays, and back as arrays: the features
// .npy (the targets left out) predict the same classes.
// RUN: python3 -c "import sys, struct; rows=[[float(v) for v in l.split(',')] for l in open(sys.argv[1])]; h=\"{'descr': '<f4', 'fortran_order': False, 'shape': (600, 64), }\"; h=h + ' ' * (117 - len(h)) + '\n'; open(sys.argv[2], 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + b''.join(struct.pack('<64f', *r) for r in rows))" %t/features.csv %t/x.npy
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/x.npy --out %t/p > %t/from-array.txt 2> %t/array-stderr.txt
// RUN: cmp %t/with-labels.txt %t/from-array.txt
// Arrays may come scaled already, and are divided by the run's scale: said.
// RUN: FileCheck %s --check-prefix=SCALED < %t/array-stderr.txt
// SCALED: note: {{.*}}x.npy: the features are divided by 16, the scale the checkpoint's run read its table with
//
// A regression's outputs, one per row; it has no classes.
// RUN: python3 -c "import random; random.seed(3); rows = [(random.uniform(-1, 1), random.uniform(-1, 1)) for _ in range(200)]; open('%t/table.csv', 'w').write('\n'.join(f'{a:.4f},{b:.4f},{2 * a - b + 0.5:.4f}' for a, b in rows) + '\n')"
// RUN: aicf train %S/inputs/linear-regression.mlir.txt --data %t/table.csv --epochs 40 --lr 0.05 --optimizer adam --no-runs-db --no-progress --out %t/reg --checkpoint-dir %t/reg-ck > /dev/null
// RUN: printf '0.5,0.25\n-1,1\n0,0\n' > %t/three.csv
// RUN: aicf predict %S/inputs/linear-regression.mlir.txt --checkpoint %t/reg-ck --data %t/three.csv --out %t/rp 2>/dev/null > %t/reg.txt
// RUN: python3 -c "import sys; p=[float(l) for l in open(sys.argv[1])]; print(len(p), max(abs(a - b) for a, b in zip(p, [1.25, -2.5, 0.5])) < 0.05)" %t/reg.txt | FileCheck %s --check-prefix=REG
// REG: 3 True
// RUN: not aicf predict %S/inputs/linear-regression.mlir.txt --checkpoint %t/reg-ck --data %t/three.csv --values class --out %t/rp 2>&1 | FileCheck %s --check-prefix=NOCLASS
// NOCLASS: error: --values class: the model is not a classifier {{.*}}(--values raw)
//
// An imported ONNX model predicts with its own weights (no checkpoint), at
// any number of rows (7 at a batch of 4).
// RUN: sed -n 1,7p %t/features.csv > %t/seven.csv
// RUN: aicf predict %S/../../onnx/mlp.onnx --batch 4 --data %t/seven.csv --values raw -o %t/onnx.csv --out %t/onnx 2>/dev/null | FileCheck %s --check-prefix=ONNX
// ONNX: raw of 7 rows (float32, [7, 10]) written to {{.*}}onnx.csv
//
// A model whose ops fix its batch (32) predicts any number of rows: the
// last ones in a batch filled with repeats, whose outputs are dropped (7
// rows alone, the same classes as among 600).
// RUN: aicf train %S/inputs/fixed-batch-mlp.mlir.txt --data %t/digits.csv --epochs 1 --no-runs-db --no-progress --out %t/fixed --checkpoint-dir %t/fixed-ck > /dev/null
// RUN: aicf predict %S/inputs/fixed-batch-mlp.mlir.txt --checkpoint %t/fixed-ck --data %t/seven.csv --out %t/fp 2>/dev/null > %t/fixed-seven.txt
// RUN: aicf predict %S/inputs/fixed-batch-mlp.mlir.txt --checkpoint %t/fixed-ck --data %t/features.csv --out %t/fp 2>/dev/null | head -7 | cmp - %t/fixed-seven.txt
//
// Mistakes, each said before anything compiles or is written.
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --data %t/features.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// NOWEIGHTS: error: {{.*}}digits_mlp.mlir: no --checkpoint, and the model holds no weights of its own (an imported model's): its parameters would be their random initial values
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %S/../../../data/tinyshakespeare.txt --out %t/p 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT: error: {{.*}}tinyshakespeare.txt: a text; predictions are of rows {{.*}}`aicf sample`
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv -o %t/p.txt --out %t/p 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: error: -o {{.*}}p.txt: predictions are written as .npy (an array, numpy.load reads it) or .csv (a row per example)
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv -o %t/features.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=INPUT
// INPUT: error: -o {{.*}}features.csv: is an input of this command; give another file
// RUN: cut -d, -f1-10 %t/digits.csv > %t/narrow.csv
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/narrow.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=WIDTH
// WIDTH: error: {{.*}}narrow.csv: rows have 10 columns; the model's input #0 is [32, 64] f32, which takes 64 features per row (a table to predict from holds them, and may hold a label after them, which is not read)
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/features.csv --optimizer sgd --out %t/p 2>&1 | FileCheck %s --check-prefix=TRAINING
// TRAINING: error: --optimizer is training's: `aicf predict` trains nothing
