// `aicf cache info|clean`: the compile cache grew with every model and
// shape compiled, and nothing removed it (1.3 GB after a few sessions).
// Cleaning removes compiled kernels and eager ops, which a model compiles
// again; the GEMM registry's decisions stay unless asked.
// RUN: rm -rf %t && mkdir -p %t
// RUN: AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --out %t/a > /dev/null
// RUN: AICF_CACHE_DIR=%t/cache aicf cache info | FileCheck %s --check-prefix=INFO
// INFO: {{.*}}cache
// INFO-NEXT: kernels/: {{[1-9][0-9]*}} entries, {{[0-9.]+}} MB (compiled kernels)
// INFO-NEXT: eager/: 0 entries
// INFO-NEXT: gemm-registry.json: {{[0-9]+}} GEMM decisions of this machine
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean --older-than 1 | FileCheck %s --check-prefix=NOTOLD
// NOTOLD: removed 0 cache entries older than 1 day, 0.0 MB in {{.*}}cache
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean | FileCheck %s --check-prefix=CLEAN
// CLEAN: removed {{[1-9][0-9]*}} cache entries, {{[0-9.]+}} MB in {{.*}}cache
// RUN: AICF_CACHE_DIR=%t/cache aicf cache info | FileCheck %s --check-prefix=EMPTY
// EMPTY: kernels/: 0 entries
// EMPTY: gemm-registry.json: {{[0-9]+}} GEMM decisions
// A model compiles again after it, into another --out.
// RUN: AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --out %t/b | FileCheck %s --check-prefix=AGAIN
// AGAIN: final held-out accuracy
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean --gemm-registry | FileCheck %s --check-prefix=GEMMREG
// GEMMREG: removed {{.*}}gemm-registry.json (GEMM candidates are timed again)
// RUN: test ! -e %t/cache/gemm-registry.json
// No cache directory at all (HOME unset, no AICF_CACHE_DIR) is said.
// RUN: not env -u HOME -u AICF_CACHE_DIR aicf cache info 2>&1 | FileCheck %s --check-prefix=NOHOME
// NOHOME: aicf: error: no cache directory: HOME is unset or not absolute, and AICF_CACHE_DIR is not given
