// A table's features that feed an integer input (ids for a gather) are read
// as the file holds them. They were divided by the largest, as float
// features are: ids up to 9 became fractions (refused at the first step, as
// a value the file did not hold), and ids 0 and 5 became 0 and 1, training
// embedding row 1 for id 5 without a word.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/inputs/ids-bag.mlir.txt --data %S/inputs/ids.csv --epochs 20 --lr 0.1 --optimizer adam --out %t/run --checkpoint-dir %t/ck --no-progress 2>&1 | FileCheck %s
// CHECK: data: 240 rows of 3 features (integers, read as they are) and a label ({{.*}}ids.csv)
// CHECK: final held-out accuracy {{(9[0-9]|100)\.[0-9]+}}%
// The same rows evaluated from the checkpoint read the same ids (the
// checkpoint directory stands for its last.safetensors).
// RUN: aicf eval %S/inputs/ids-bag.mlir.txt --checkpoint %t/ck --data %S/inputs/ids.csv 2>&1 | FileCheck %s --check-prefix=EVAL
// EVAL: accuracy {{(9[0-9]|100)\.[0-9]+}}%
// An id that is not a whole number is named at its line, and --standardize
// (mean 0, deviation 1) is refused for ids.
// RUN: not aicf train %S/inputs/ids-bag.mlir.txt --data %S/inputs/ids-fraction.csv --out %t/frac 2>&1 | FileCheck %s --check-prefix=FRACTION
// FRACTION: aicf: error: {{.*}}ids-fraction.csv:2: column 2 is 5.5, not a whole number the model's input #0 ([4, 3] i32) holds
// RUN: not aicf train %S/inputs/ids-bag.mlir.txt --data %S/inputs/ids.csv --standardize --out %t/std 2>&1 | FileCheck %s --check-prefix=STANDARDIZE
// STANDARDIZE: aicf: error: {{.*}}ids.csv: --standardize reads each feature at mean 0 and deviation 1, but the model's input #0 is [4, 3] i32, integers (ids) that are read as they are: leave --standardize out
// One training example: said in the singular (it was "the 1 training
// examples ... compiled for 1 rows").
// RUN: aicf train %S/inputs/ids-bag.mlir.txt --data %S/inputs/ids-two-rows.csv --val-split 0.5 --epochs 1 --out %t/one --no-progress 2>&1 | FileCheck %s --check-prefix=ONE
// ONE: note: the batch of 4 is larger than the 1 training example: each epoch is one step of it (the model compiled for 1 row)
// A comment line in a table is named as one.
// RUN: printf '1,2,3,0\n# ids and a label\n4,5,6,1\n' > %t/comment.csv
// RUN: not aicf train %S/inputs/ids-bag.mlir.txt --data %t/comment.csv --out %t/comment 2>&1 | FileCheck %s --check-prefix=COMMENT
// COMMENT: comment.csv:2: column 1 is '# ids and a label': invalid float literal (a comment line? AICF reads tables of numbers alone: remove it)
