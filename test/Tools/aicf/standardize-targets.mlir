// --standardize-targets: a regression's targets far from 1 (prices of
// 1e5) read at mean 0 and deviation 1 by the training rows' statistics;
// the checkpoint keeps them, so predict and export give values in the
// file's units, eval says the error in them too, and a resume reads the
// targets as its run did. A classifier's labels are refused.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; r = random.Random(3); print('rooms,age,price'); [print(f'{a:.3f},{b:.3f},{120000 + 40000 * a - 15000 * b + r.gauss(0, 2000):.1f}') for a, b in [(r.uniform(0, 3), r.uniform(0, 2)) for _ in range(600)]]" > %t/prices.csv
// RUN: aicf propose --data %t/prices.csv --task regression -o %t/m.mlir --runs-db %t/runs.sqlite > /dev/null 2>&1
// RUN: aicf train %t/m.mlir --data %t/prices.csv --standardize --standardize-targets --epochs 30 --runs-db %t/runs.sqlite --no-progress --out %t/run --checkpoint-dir %t/ck 2>&1 | FileCheck %s --check-prefix=TRAIN
// The registry records it (the proposer leaves such runs out: their losses are of the standardized targets).
// RUN: aicf runs show 1 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=RECORDED
// RECORDED: also: {{.*}}targets standardized
// TRAIN: note: {{.*}}prices.csv: the targets are standardized (mean 1.{{[0-9]+}}e5, deviation {{[0-9.]+}}e4): losses are of the standardized targets
// TRAIN: final held-out loss 0.0
//
// Predictions are prices: their mean is the targets' (within 2%).
// RUN: cut -d, -f1-2 %t/prices.csv > %t/features.csv
// RUN: aicf predict %t/m.mlir --checkpoint %t/ck --data %t/features.csv --out %t/p > %t/predicted.csv
// RUN: python3 -c "import sys; p = [float(l) for l in open(sys.argv[1])]; t = [float(l.split(',')[2]) for l in list(open(sys.argv[2]))[1:]]; m, n = sum(p) / len(p), sum(t) / len(t); print('means agree' if abs(m - n) < 0.02 * n else f'means differ: {m} {n}')" %t/predicted.csv %t/prices.csv | FileCheck %s --check-prefix=MEANS
// MEANS: means agree
// RUN: aicf eval %t/m.mlir --checkpoint %t/ck --data %t/prices.csv --out %t/e | FileCheck %s --check-prefix=EVAL
// EVAL: of the standardized targets; as a mean squared error, RMSE {{[0-9.]+}}e3 in the file's units
//
// The export reads them back too: its outputs, re-imported, are predict's.
// RUN: aicf export %t/m.mlir --checkpoint %t/ck -o %t/m.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=EXPORT
// EXPORT: note: the checkpoint's run standardized its targets: the graph's output is read back in the data's units
// RUN: aicf predict %t/m.onnx --loss mse --data %t/features.csv --batch 600 --out %t/p2 > %t/exported.csv
// RUN: python3 %S/inputs/close_csv.py %t/exported.csv %t/predicted.csv 1e-5 | FileCheck %s --check-prefix=SAME
// SAME: 600 rows agree
//
// A resume reads the targets by the checkpoint's statistics (said once, at the start).
// RUN: aicf train %t/m.mlir --data %t/prices.csv --epochs 31 --runs-db %t/runs.sqlite --no-progress --out %t/run --checkpoint-dir %t/ck --resume 2>&1 | FileCheck %s --check-prefix=RESUME
// RESUME-NOT: the targets are standardized
// RESUME: final held-out loss 0.0
//
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --standardize-targets --epochs 1 --no-runs-db --no-progress --out %t/c 2>&1 | FileCheck %s --check-prefix=CLASSES
// CLASSES: error: {{.*}}digits.csv.gz: --standardize-targets standardizes a regression's targets; this model's @loss takes class labels
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --standardize-targets --epochs 1 --no-runs-db --no-progress --out %t/t 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT: error: {{.*}}tinyshakespeare.txt: --standardize-targets standardizes a table's regression targets (a CSV's last column)
