// An empty (or relative) HOME is no home: the registry and the kernel
// cache went under the current directory (./.local/share, ./.cache). The
// run says it is not recorded, and leaves nothing outside --out.
// RUN: rm -rf %t && mkdir -p %t/cwd
// RUN: cd %t/cwd && env -u AICF_RUNS_DB -u XDG_DATA_HOME HOME= AICF_CACHE_DIR= aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/run --no-progress 2>&1 | FileCheck %s
// CHECK: aicf: note: neither HOME nor XDG_DATA_HOME is set to an absolute path (the registry's default place is under them); the run is not recorded (give --runs-db FILE)
// CHECK: final held-out accuracy
// RUN: test -z "$(ls -A %t/cwd)"
