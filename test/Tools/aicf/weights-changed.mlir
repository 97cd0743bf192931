// An imported model's weights file that changed after the import is said
// where the model runs, compiled or found compiled: an artifact cached
// before the change ran the old weights, without a word.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf import %S/../../onnx/mlp.onnx --batch 4 -o %t/m.mlir > /dev/null
// RUN: aicf predict %t/m.mlir --data %S/../../../data/digits.csv.gz --out %t/run -o %t/p.csv 2>&1 | FileCheck %s --check-prefix=FIRST
// FIRST: written to
// RUN: truncate -s -4 %t/m.weights.safetensors && printf 'abcd' >> %t/m.weights.safetensors
// RUN: not aicf predict %t/m.mlir --data %S/../../../data/digits.csv.gz --out %t/run -o %t/p2.csv 2>&1 | FileCheck %s
// RUN: not aicf train %t/m.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/run --no-runs-db --no-progress 2>&1 | FileCheck %s
// CHECK: error: {{.*}}m.weights.safetensors: the weights of {{.*}}m.mlir changed since the model was written (hash {{[0-9a-f]+}}, the model names {{[0-9a-f]+}}); import the model again
// RUN: test ! -e %t/p2.csv
