// An nn.Sequential's checkpoint keys are its state_dict's (`0.weight`,
// which PyTorch's `load_state_dict` takes back), and a checkpoint trained
// before they were (its keys `p0.weight`: inputs/sequential-legacy.safetensors,
// one epoch of SGD written by the importer of 2026-12-06) still resumes and
// evaluates: the model is imported with the names it holds (it was
// "another model").
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../onnx/sequential.onnx --batch 32 --data %S/../../../data/digits.csv.gz --epochs 1 --optimizer sgd --lr 0.1 --gemm generated --out %t/run --checkpoint-dir %t/ck --no-runs-db --no-progress > /dev/null
// RUN: python3 -c "import json, struct, sys; b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; print(sorted(k for k in json.loads(b[8:8 + n]) if k != '__metadata__'))" %t/ck/last.safetensors | FileCheck %s --check-prefix=KEYS
// KEYS: ['0.bias', '0.weight', '2.bias', '2.weight', 'step']
// RUN: mkdir -p %t/legacy && cp %S/inputs/sequential-legacy.safetensors %t/legacy/last.safetensors
// RUN: aicf eval %S/../../onnx/sequential.onnx --data %S/../../../data/digits.csv.gz --checkpoint %t/legacy/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVAL
// EVAL-NOT: another model
// EVAL: on 359 held-out rows of {{.*}}digits.csv.gz (checkpoint {{.*}}last.safetensors, epoch 1)
// RUN: aicf train %S/../../onnx/sequential.onnx --data %S/../../../data/digits.csv.gz --epochs 2 --gemm generated --out %t/legacy-run --checkpoint-dir %t/legacy --resume --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=RESUME
// RESUME: resumed from {{.*}}last.safetensors at epoch 1 (step 45)
// RESUME: epoch   2/2
