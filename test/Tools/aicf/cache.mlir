// `aicf cache info|clean`: the compile cache grew with every model and
// shape compiled, and nothing removed it (1.3 GB after a few sessions).
// Cleaning removes compiled kernels and eager ops, which a model compiles
// again; the GEMM registry's decisions stay unless asked.
// RUN: rm -rf %t && mkdir -p %t
// RUN: AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --out %t/a > /dev/null
// RUN: AICF_CACHE_DIR=%t/cache aicf cache info | FileCheck %s --check-prefix=INFO
// INFO: {{.*}}cache
// INFO-NEXT: kernels/: {{[1-9][0-9]*}} entries, {{[0-9.]+}} {{[KMG]}}iB (compiled kernels)
// INFO-NEXT: eager/: 0 entries
// INFO-NEXT: gemm-registry.json: {{[0-9]+}} GEMM decisions of this machine
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean --older-than 1 | FileCheck %s --check-prefix=NOTOLD
// NOTOLD: removed 0 cache entries older than 1 day, 0.0 KiB in {{.*}}cache
// What was written in the last 5 minutes stays (a compile at work may
// hold it: one failed when its files went); older entries go.
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean | FileCheck %s --check-prefix=YOUNG
// YOUNG: removed 0 cache entries (all but those of the last 5 minutes, which a compile may hold), 0.0 KiB in {{.*}}cache
// RUN: find %t/cache/kernels -mindepth 1 -maxdepth 1 -exec touch -d '1 hour ago' {} +
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean | FileCheck %s --check-prefix=CLEAN
// CLEAN: removed {{[1-9][0-9]*}} cache entries (all but those of the last 5 minutes, which a compile may hold), {{[0-9.]+}} {{[KMG]}}iB in {{.*}}cache
// RUN: AICF_CACHE_DIR=%t/cache aicf cache info | FileCheck %s --check-prefix=EMPTY
// EMPTY: kernels/: 0 entries
// EMPTY: gemm-registry.json: {{[0-9]+}} GEMM decisions
// A model compiles again after it, into another --out.
// RUN: AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --out %t/b | FileCheck %s --check-prefix=AGAIN
// AGAIN: final held-out accuracy
// RUN: AICF_CACHE_DIR=%t/cache aicf cache clean --gemm-registry | FileCheck %s --check-prefix=GEMMREG
// GEMMREG: removed {{.*}}gemm-registry.json (GEMM candidates are timed again)
// RUN: test ! -e %t/cache/gemm-registry.json
// A cache that is a file is said (it read as an empty cache).
// RUN: touch %t/afile
// RUN: not env AICF_CACHE_DIR=%t/afile aicf cache info 2>&1 | FileCheck %s --check-prefix=AFILE
// AFILE: aicf: error: {{.*}}afile: the cache is not a directory
// No cache directory at all (HOME unset, no AICF_CACHE_DIR) is said.
// RUN: not env -u HOME -u AICF_CACHE_DIR aicf cache info 2>&1 | FileCheck %s --check-prefix=NOHOME
// NOHOME: aicf: error: no cache directory: HOME is unset or not absolute, and AICF_CACHE_DIR is not given
