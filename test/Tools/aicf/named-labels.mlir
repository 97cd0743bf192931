// Labels by name (iris' species, yes/no, pandas' True/False): a
// classifier's run reads them as classes in sorted order (scikit-learn's
// LabelEncoder), says so and records them; predict writes the names, eval
// and a resume read labels by them (a name the run never saw is refused),
// and an export carries them in the ONNX model's metadata. A regression's
// targets stay numbers.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; r = random.Random(2); names = ['setosa', 'versicolor', 'virginica']; print('x,y,species'); [print(f'{x:.4f},{y:.4f},{names[(x > 0) + (y > 0)]}') for x, y in [(r.uniform(-1, 1), r.uniform(-1, 1)) for _ in range(300)]]" > %t/iris.csv
// RUN: aicf propose --data %t/iris.csv -o %t/m.mlir --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=PROPOSE
// PROPOSE: its labels are names, 3 classes in sorted order ('setosa', 'versicolor', 'virginica')
// RUN: aicf train %t/m.mlir --data %t/iris.csv --epochs 20 --standardize --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck 2>&1 | FileCheck %s --check-prefix=TRAIN
// TRAIN: note: {{.*}}iris.csv: its labels are names, read as classes in sorted order: 0 = 'setosa', 1 = 'versicolor', 2 = 'virginica'
// TRAIN: final held-out accuracy {{(9[0-9]|100)}}.{{[0-9]+}}%
//
// Predictions are the names; a .npy holds indices, said.
// RUN: cut -d, -f1-2 %t/iris.csv > %t/features.csv
// RUN: aicf predict %t/m.mlir --checkpoint %t/ck --data %t/features.csv --out %t/p > %t/classes.csv
// RUN: sort -u %t/classes.csv | FileCheck %s --check-prefix=NAMES
// NAMES: setosa
// NAMES-NEXT: versicolor
// NAMES-NEXT: virginica
// RUN: aicf predict %t/m.mlir --checkpoint %t/ck --data %t/features.csv --out %t/p -o %t/classes.npy 2>&1 | FileCheck %s --check-prefix=NPY
// NPY: note: {{.*}}classes.npy holds the classes' indices; their names, in order: 'setosa', 'versicolor', 'virginica'
//
// Eval scores the named labels; a name the run never saw is refused.
// RUN: aicf eval %t/m.mlir --checkpoint %t/ck --data %t/iris.csv --out %t/e | FileCheck %s --check-prefix=EVAL
// EVAL: accuracy {{(9[0-9]|100)}}.{{[0-9]+}}% on 60 held-out rows
// RUN: sed 's/virginica$/Virginica/' %t/iris.csv > %t/other.csv
// RUN: not aicf eval %t/m.mlir --checkpoint %t/ck --data %t/other.csv --out %t/e 2>&1 | FileCheck %s --check-prefix=UNSEEN
// UNSEEN: error: {{.*}}other.csv:{{[0-9]+}}: the label 'Virginica' is not among the classes the checkpoint's run trained on ('setosa', 'versicolor', 'virginica')
// A resume reads them as the run did.
// RUN: aicf train %t/m.mlir --data %t/iris.csv --epochs 21 --standardize --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck --resume 2>&1 | FileCheck %s --check-prefix=RESUME
// RESUME-NOT: its labels are names
// RESUME: final held-out accuracy
// The export names them.
// RUN: aicf export %t/m.mlir --checkpoint %t/ck -o %t/m.onnx --out %t/x 2>&1 | FileCheck %s --check-prefix=EXPORT
// EXPORT: note: the output's classes are named (the model's metadata class_names, output index i is name i): ["setosa","versicolor","virginica"]
//
// A regression's targets are numbers: a name there is refused as before.
// RUN: python3 -c "print('x,y,t'); [print(f'{i / 10},{i / 7},{i / 3}') for i in range(50)]" > %t/clean.csv
// RUN: aicf propose --data %t/clean.csv -o %t/r.mlir --runs-db %t/runs.sqlite --task regression > /dev/null 2>&1
// RUN: cp %t/clean.csv %t/reg.csv && echo "1,2,high" >> %t/reg.csv
// RUN: not aicf train %t/r.mlir --data %t/reg.csv --epochs 1 --no-runs-db --no-progress --out %t/reg 2>&1 | FileCheck %s --check-prefix=REG
// REG: error: {{.*}}reg.csv:52: column 3 ('t') is 'high'
//
// A class index reads as its name where the checkpoint's are names (a
// .npy of predicted classes holds them); NA in the first row is a missing
// value, not a class; more names than the model has classes names the
// label.
// RUN: sed -e 's/setosa$/0/' -e 's/versicolor$/1/' -e 's/virginica$/2/' %t/iris.csv > %t/indices.csv
// RUN: aicf eval %t/m.mlir --checkpoint %t/ck --data %t/indices.csv --out %t/e | FileCheck %s --check-prefix=EVAL
// RUN: awk -F, -v OFS=, 'NR == 2 {$3 = "NA"} {print}' %t/iris.csv > %t/na.csv
// RUN: not aicf train %t/m.mlir --data %t/na.csv --epochs 1 --no-runs-db --no-progress --out %t/na 2>&1 | FileCheck %s --check-prefix=NA
// NA: error: {{.*}}na.csv:2: column 3 ('species') is 'NA': invalid float literal (a missing value?
// RUN: awk -F, -v OFS=, 'NR == 7 {$3 = "ant"} {print}' %t/iris.csv > %t/four.csv
// RUN: not aicf train %t/m.mlir --data %t/four.csv --epochs 1 --no-runs-db --no-progress --out %t/four 2>&1 | FileCheck %s --check-prefix=FOUR
// FOUR: error: {{.*}}four.csv:{{[0-9]+}}: the label '{{[a-z]+}}' is class 3 of the 4 names the file holds, and the model has 3 classes
