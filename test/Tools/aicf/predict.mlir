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
// RUN: not grep -q "index column" %t/stderr.txt
// A label that is not read is not parsed (labels by name were refused as
// numbers); a first column counting the rows, where the label would be,
// is said (pandas' index: every feature one column off, unsaid).
// RUN: awk -F, -v OFS=, '{$65 = "class" $65; print}' %t/digits.csv > %t/named.csv
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/named.csv --out %t/p > %t/named.txt
// RUN: cmp %t/with-labels.txt %t/named.txt
// RUN: cut -d, -f1-64 %t/digits.csv | awk '{print NR-1 "," $0}' > %t/indexed.csv
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/indexed.csv --out %t/p 2>&1 >/dev/null | FileCheck %s --check-prefix=INDEXCOL
// A @forward of two results: the first by default (a classifier's
// classes), another with --result, written raw (its rows of 128
// activations); one it does not return is refused.
// RUN: aicf train %S/inputs/two-results.mlir.txt --data %t/digits.csv --epochs 1 --no-runs-db --no-progress --out %t/two --checkpoint-dir %t/two-ck > /dev/null
// RUN: aicf predict %S/inputs/two-results.mlir.txt --checkpoint %t/two-ck --data %t/features.csv --out %t/tp -o %t/first.npy 2>&1 | FileCheck %s --check-prefix=FIRST
// FIRST: note: {{.*}}@forward returns 2 results; result 0 is predicted (--result picks another)
// FIRST: class of 600 rows (int64, [600]) written to
// RUN: aicf predict %S/inputs/two-results.mlir.txt --checkpoint %t/two-ck --data %t/features.csv --out %t/tp --result 1 -o %t/hidden.npy 2>&1 | FileCheck %s --check-prefix=SECOND
// SECOND: raw of 600 rows (float32, [600, 128]) written to
// RUN: not aicf predict %S/inputs/two-results.mlir.txt --checkpoint %t/two-ck --data %t/features.csv --out %t/tp --result 2 2>&1 | FileCheck %s --check-prefix=THIRD
// THIRD: aicf: error: --result 2: @forward returns 2 results (0 to 1)
// eval says it divides other data by the table's scale once the data
// reads, not before an error in it.
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/indexed.csv --out %t/e 2>&1 | FileCheck %s --check-prefix=EVALBAD
// EVALBAD-NOT: divided by
// EVALBAD: error:
// INDEXCOL: note: {{.*}}indexed.csv: column 1 counts the rows (0, 1, 2, ...): an index column? It is read as the first feature, and the last column as a label (not read); write the table with to_csv(index=False)
// RUN: tac %t/digits.csv > %t/other.csv && aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/other.csv --checkpoint %t/ck --out %t/e > %t/agree.txt
// RUN: python3 -c "import sys; p=[int(l) for l in open(sys.argv[1])]; y=[int(float(l.rsplit(',', 1)[1])) for l in open(sys.argv[2])]; print('accuracy {:.2f}'.format(100 * sum(a == b for a, b in zip(p, y)) / len(y)))" %t/with-labels.txt %t/digits.csv >> %t/agree.txt
// RUN: FileCheck %s --check-prefix=AGREE < %t/agree.txt
// AGREE: accuracy [[ACC:[0-9]+\.[0-9]+]]% on 600 rows of {{.*}}other.csv
// AGREE: accuracy [[ACC]]
//
// A checkpoint that records no feature scale (one a program saved with the
// runtime's or a Trainer's save_checkpoint, emulated by removing the run's
// record from the metadata): predict and eval both read the table as the
// file holds it, and say so (eval divided it by its own largest, predict
// did not: the two disagreed by that factor, unsaid).
// RUN: rm -rf %t/noscale && cp -r %t/ck %t/noscale
// RUN: python3 -c "import json, struct, sys; p = sys.argv[1]; b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); m = h['__metadata__']; [m.pop(k) for k in ('feature_scale', 'input_magnitude', 'data', 'aicf.metadata.crc32')]; s = json.dumps(h).encode(); s += b' ' * (-len(s) % 8); open(p, 'wb').write(struct.pack('<Q', len(s)) + s + b[8 + n:])" %t/noscale/last.safetensors
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/noscale --data %t/digits.csv --out %t/p > %t/noscale.txt 2> %t/noscale-err.txt
// RUN: FileCheck %s --check-prefix=NOSCALE < %t/noscale-err.txt
// NOSCALE: note: {{.*}}noscale/last.safetensors records no feature_scale (a checkpoint of `aicf train` records the number its table's features were divided by): {{.*}}digits.csv's features are read as the file holds them
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/noscale --out %t/e > %t/noscale-agree.txt 2>&1
// RUN: python3 -c "import sys; p=[int(l) for l in open(sys.argv[1])]; y=[int(float(l.rsplit(',', 1)[1])) for l in open(sys.argv[2])]; print('accuracy {:.2f}'.format(100 * sum(a == b for a, b in zip(p, y)) / len(y)))" %t/noscale.txt %t/digits.csv >> %t/noscale-agree.txt
// RUN: FileCheck %s --check-prefix=NOSCALE-AGREE < %t/noscale-agree.txt
// NOSCALE-AGREE: note: {{.*}}records no feature_scale
// NOSCALE-AGREE: accuracy [[NACC:[0-9]+\.[0-9]+]]% on 600 rows of {{.*}}digits.csv
// NOSCALE-AGREE: accuracy [[NACC]]
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
// The features as a .npy array (the targets left out) predict the same
// classes; they are divided by the run's table's scale as that table was,
// unremarked, and arrays divided already (their largest 1, the table's
// 16) are said to be divided again.
// RUN: python3 %S/inputs/csv-to-npy.py %t/features.csv %t/x.npy 0 63
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/x.npy --out %t/p > %t/from-array.txt 2> %t/array-stderr.txt
// RUN: cmp %t/with-labels.txt %t/from-array.txt
// RUN: not grep -q "largest feature" %t/array-stderr.txt
// RUN: python3 %S/inputs/csv-to-npy.py %t/features.csv %t/scaled.npy 0 63 16
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/scaled.npy --out %t/p 2>&1 >/dev/null | FileCheck %s --check-prefix=SCALED
// SCALED: note: {{.*}}scaled.npy: the largest feature is 1, and the checkpoint's run read its table divided by 16 (its largest): these are divided by 16 too; if they are divided already, give them as that table held them
// SCALED-NOT: note
// The other way, a table of pixels as they are given to a run that trained
// on arrays of them divided by 16 (fed as they are, unsaid): the scale the
// run read its data at is recorded and compared, by predict and eval.
// RUN: python3 %S/inputs/csv-to-npy.py %t/digits.csv %t/labels.npy 64 64
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scaled.npy --data %t/labels.npy --epochs 1 --no-runs-db --no-progress --out %t/arr --checkpoint-dir %t/arr-ck > /dev/null
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/arr-ck --data %t/features.csv --out %t/p 2>&1 >/dev/null | FileCheck %s --check-prefix=LARGER
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/arr-ck --data %t/digits.csv --out %t/e 2>&1 | FileCheck %s --check-prefix=LARGER
// LARGER: note: {{.*}}.csv: the model reads these features 16x larger than those its run trained on (at a scale of 16, 99% of their magnitudes up to that, against 1): if they are the same kind of data, give them as the run's data held them (scaled alike, the same columns in the same order), or the model's outputs on them mean little
//
// An imported model starts from its own weights, which may expect a
// table's values as the file holds them: a run's division by the largest
// magnitude is said, --feature-scale 1 reads them as they are, and a resume
// keeps the scale its checkpoint records (another one is refused).
// RUN: aicf train %S/../../onnx/mlp.onnx --batch 32 --data %t/digits.csv --epochs 1 --no-runs-db --no-progress --out %t/fs 2>&1 | FileCheck %s --check-prefix=OWNSCALE
// OWNSCALE: note: {{.*}}digits.csv: the table's features are divided by their largest magnitude, 16, as a run reads a table; the model starts from its own weights
// RUN: aicf train %S/../../onnx/mlp.onnx --batch 32 --data %t/digits.csv --epochs 1 --feature-scale 1 --no-runs-db --no-progress --out %t/fs1 --checkpoint-dir %t/fs1-ck 2>&1 | FileCheck %s --check-prefix=RAWSCALE
// RAWSCALE-NOT: divided by their largest
// RAWSCALE: final held-out accuracy
// RUN: not aicf train %S/../../onnx/mlp.onnx --batch 32 --data %t/digits.csv --epochs 2 --feature-scale 16 --resume --no-runs-db --no-progress --out %t/fs1 --checkpoint-dir %t/fs1-ck 2>&1 | FileCheck %s --check-prefix=FSRESUME
// FSRESUME: aicf: error: --feature-scale 16: {{.*}}last.safetensors trained on its table's features divided by 1; another scale would change what every feature means to the model
// An ONNX model trained with --loss mse is predicted and scored from its
// checkpoint without --loss again (it was refused as another model's:
// imported with the default cross-entropy).
// RUN: python3 %S/inputs/csv-to-npy.py %t/digits.csv %t/y10.npy 0 9 16
// RUN: aicf train %S/../../onnx/mlp.onnx --loss mse --batch 32 --data %t/scaled.npy --data %t/y10.npy --epochs 1 --no-runs-db --no-progress --out %t/mse --checkpoint-dir %t/mse-ck > /dev/null
// RUN: aicf predict %S/../../onnx/mlp.onnx --checkpoint %t/mse-ck --data %t/scaled.npy -o %t/mse.npy --out %t/mse-p 2>&1 | FileCheck %s --check-prefix=MSEPRED
// MSEPRED: raw of {{[0-9]+}} rows (float32, [{{[0-9]+}}, 10]) written to {{.*}}mse.npy
// RUN: aicf eval %S/../../onnx/mlp.onnx --checkpoint %t/mse-ck --data %t/scaled.npy --data %t/y10.npy --out %t/mse-e 2>&1 | FileCheck %s --check-prefix=MSEEVAL
// MSEEVAL: loss {{[0-9.]+}} (the model's @loss) on {{[0-9]+}} held-out rows
// A @forward that ends in a softmax gives its probabilities as they are
// (a softmax of them was taken again: 0.18 where 0.70), and `aicf eval`
// scores their cross-entropy (it read them as logits: 1.69 nats for 0.48).
// RUN: aicf train %S/inputs/softmax-output.mlir.txt --data %t/digits.csv --epochs 2 --no-runs-db --no-progress --out %t/sm --checkpoint-dir %t/sm-ck > /dev/null
// RUN: aicf predict %S/inputs/softmax-output.mlir.txt --checkpoint %t/sm-ck --data %t/features.csv --values probabilities --out %t/p > %t/sm-probabilities.csv 2>/dev/null
// RUN: aicf predict %S/inputs/softmax-output.mlir.txt --checkpoint %t/sm-ck --data %t/features.csv --values raw --out %t/p > %t/sm-raw.csv 2>/dev/null
// RUN: cmp %t/sm-probabilities.csv %t/sm-raw.csv
// RUN: aicf eval %S/inputs/softmax-output.mlir.txt --data %t/other.csv --checkpoint %t/sm-ck --out %t/e 2>/dev/null > %t/sm-agree.txt
// RUN: python3 -c "import sys, math; p=[[float(v) for v in l.split(',')] for l in open(sys.argv[1])]; y=[int(float(l.rsplit(',', 1)[1])) for l in open(sys.argv[2])]; print('nll {:.4f}'.format(sum(-math.log(r[c]) for r, c in zip(p, y)) / len(y)))" %t/sm-probabilities.csv %t/digits.csv >> %t/sm-agree.txt
// RUN: FileCheck %s --check-prefix=SOFTMAX < %t/sm-agree.txt
// SOFTMAX: accuracy {{.*}} on 600 rows of {{.*}}; loss [[NLL:[0-9.]+]] nats
// SOFTMAX: nll [[NLL]]
//
// A model whose targets are not one label per row (two regression
// targets) predicts from a table of the features alone; a label column
// after them is refused.
// RUN: python3 %S/inputs/csv-to-npy.py %t/digits.csv %t/targets.npy 63 64
// RUN: aicf train %S/inputs/two-targets.mlir.txt --data %t/x.npy --data %t/targets.npy --epochs 1 --no-runs-db --no-progress --out %t/tt --checkpoint-dir %t/tt-ck > /dev/null
// RUN: aicf predict %S/inputs/two-targets.mlir.txt --checkpoint %t/tt-ck --data %t/features.csv --out %t/p 2>/dev/null > %t/two.csv
// RUN: python3 -c "import sys; rows=[l.split(',') for l in open(sys.argv[1])]; print(len(rows), {len(r) for r in rows})" %t/two.csv | FileCheck %s --check-prefix=TWO
// TWO: 600 {2}
// RUN: not aicf predict %S/inputs/two-targets.mlir.txt --checkpoint %t/tt-ck --data %t/digits.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=TWOLABEL
// TWOLABEL: error: {{.*}}digits.csv: rows have 65 columns; the model's input #0 is [16, 64] f32, which takes 64 features per row (a table to predict from holds them alone: the model's targets are not one label per row)
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
// It is scored with its own weights too (eval took a checkpoint only):
// on every row, its accuracy that of the classes predict gives.
// RUN: aicf predict %S/../../onnx/mlp.onnx --batch 4 --data %t/digits.csv --out %t/onnx 2>/dev/null > %t/onnx-classes.txt
// RUN: aicf eval %S/../../onnx/mlp.onnx --batch 4 --data %t/digits.csv --out %t/onnx 2>/dev/null > %t/onnx-eval.txt
// RUN: python3 -c "import re, sys; labels = [int(float(l.rsplit(',', 1)[1])) for l in open(sys.argv[1]) if l.strip()]; classes = [int(l) for l in open(sys.argv[2])]; e = open(sys.argv[3]).read(); a = float(re.search(r'accuracy ([0-9.]+)%%', e).group(1)); print(len(classes), abs(a - 100 * sum(x == y for x, y in zip(labels, classes)) / len(labels)) < 0.01, 'on 600 rows' in e, 'own weights' in e)" %t/digits.csv %t/onnx-classes.txt %t/onnx-eval.txt | FileCheck %s --check-prefix=ONNXEVAL
// ONNXEVAL: 600 True True True
// Without --batch (its batch dimension is symbolic), both run it at 64
// rows a batch, said (both refused it): the same classes.
// RUN: aicf predict %S/../../onnx/mlp.onnx --data %t/digits.csv --out %t/onnx64 2>%t/onnx64-note.txt > %t/onnx64-classes.txt
// RUN: cmp %t/onnx-classes.txt %t/onnx64-classes.txt
// RUN: FileCheck %s --check-prefix=RUNBATCH < %t/onnx64-note.txt
// RUNBATCH: note: {{.*}}mlp.onnx: its batch dimension is symbolic: run at 64 rows a batch
// RUN: aicf eval %S/../../onnx/mlp.onnx --data %t/digits.csv --out %t/onnx64 2>&1 | FileCheck %s --check-prefix=EVAL64
// EVAL64: note: {{.*}}run at 64 rows a batch
// EVAL64: accuracy {{.*}} on 600 rows
// A model with no weights of its own is refused, as by predict.
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=EVALNOWEIGHTS
// EVALNOWEIGHTS: error: {{.*}}digits_mlp.mlir: no --checkpoint, and the model holds no weights of its own
//
// A model whose ops fix its batch (32) predicts any number of rows: the
// last ones in a batch filled with repeats, whose outputs are dropped (7
// rows alone, the same classes as among 600).
// RUN: aicf train %S/inputs/fixed-batch-mlp.mlir.txt --data %t/digits.csv --epochs 1 --no-runs-db --no-progress --out %t/fixed --checkpoint-dir %t/fixed-ck > /dev/null
// RUN: aicf predict %S/inputs/fixed-batch-mlp.mlir.txt --checkpoint %t/fixed-ck --data %t/seven.csv --out %t/fp 2>/dev/null > %t/fixed-seven.txt
// RUN: aicf predict %S/inputs/fixed-batch-mlp.mlir.txt --checkpoint %t/fixed-ck --data %t/features.csv --out %t/fp 2>/dev/null | head -7 | cmp - %t/fixed-seven.txt
//
// Mistakes, each said before anything compiles or is written.
// RUN: not aicf predict %S/inputs/no-params.mlir.txt --data %t/features.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=NOPARAMS
// NOPARAMS: error: {{.*}}no-params.mlir.txt: the model declares no parameters (hl.param)
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/nope --data %t/features.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=NOCHECKPOINT
// NOCHECKPOINT: error: --checkpoint {{.*}}nope: no such file or directory
// Weights saved by other means (no record of their model) are said to be.
// RUN: python3 -c "import sys, json, struct; h=json.dumps({'fc1.weight': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}).encode(); open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(4))" %t/plain.safetensors
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/plain.safetensors --data %t/features.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=NORECORD
// NORECORD: error: {{.*}}plain.safetensors: holds no record of its model (no aicf.ir_hash in its metadata): not a checkpoint AICF wrote
// A row of another width is named by its line, in columns.
// RUN: (sed -n 1,3p %t/features.csv; echo 1,2,3) > %t/ragged.csv
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/ragged.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=RAGGED
// RAGGED: error: {{.*}}ragged.csv:4: 3 columns, earlier rows have 64
// An id outside the table a gather reads is named by its line and column
// (it was the kernel's error, naming a position in a batch).
// RUN: aicf train %S/inputs/ids-bag.mlir.txt --data %S/inputs/ids.csv --epochs 1 --no-runs-db --no-progress --out %t/ids --checkpoint-dir %t/ids-ck > /dev/null
// RUN: printf '1,2,3\n4,10,5\n' > %t/ids-out.csv
// RUN: not aicf predict %S/inputs/ids-bag.mlir.txt --checkpoint %t/ids-ck --data %t/ids-out.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=IDS
// IDS: error: {{.*}}ids-out.csv:2: column 2 is 10: the model's input #0 indexes a table of 10 rows (ids 0 to 9)
// The directory of -o is made.
// RUN: aicf predict %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/ck --data %t/seven.csv -o %t/new/dir/seven.csv --out %t/p > /dev/null
// RUN: wc -l < %t/new/dir/seven.csv | FileCheck %s --check-prefix=SEVEN
// SEVEN: 7
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
