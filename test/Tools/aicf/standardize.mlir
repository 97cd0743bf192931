// --standardize: each feature read as (x - mean) / deviation over the
// training rows. The digits with one column of 0-1078 among pixels of
// 0-16: divided by one shared scale (the default) the pixels shrink to
// nothing and the run is told so; standardized it trains as the digits do.
// The statistics go into the checkpoint: eval scores the held-out rows as
// the run did, and a resume without the flag ends on a straight run's bytes
// (the same GEMM registry for all, as resume.mlir). A resume that adds the
// flag to a run trained without it, and a text, are refused.
// RUN: rm -rf %t && mkdir -p %t
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } { $4 = NR * 0.6 } 1' > %t/scales.csv
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scales.csv --epochs 3 --no-runs-db --out %t/plain --checkpoint-dir %t/plain-ckpt 2>&1 | FileCheck %s --check-prefix=PLAIN
// PLAIN: note: {{.*}}scales.csv: feature 3 (counting from 0) of input #0 reaches 1.0782e3, {{.*}}: training with --standardize reads each feature at mean 0 and deviation 1
// PLAIN: final held-out accuracy {{[1-7][0-9]\.[0-9]+}}%
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scales.csv --epochs 3 --no-runs-db --out %t/std --checkpoint-dir %t/std-ckpt --standardize 2>&1 | FileCheck %s --check-prefix=STD
// STD-NOT: note:
// STD: data: 1797 rows of 64 features (standardized) and a label
// STD: final held-out accuracy 9{{[0-9]\.[0-9]+}}%
// RUN: env AICF_CACHE_DIR=%t/cache aicf eval %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/std-ckpt/last.safetensors --data %t/scales.csv --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVAL
// EVAL: accuracy 9{{[0-9]\.[0-9]+}}% on 359 held-out rows
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scales.csv --epochs 5 --no-runs-db --out %t/straight --checkpoint-dir %t/straight-ckpt --standardize > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scales.csv --epochs 5 --no-runs-db --out %t/std --checkpoint-dir %t/std-ckpt --resume > /dev/null
// RUN: cmp %t/straight-ckpt/last.safetensors %t/std-ckpt/last.safetensors
// RUN: not env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scales.csv --epochs 5 --no-runs-db --out %t/plain --checkpoint-dir %t/plain-ckpt --resume --standardize 2>&1 | FileCheck %s --check-prefix=ADDED
// ADDED: aicf: error: --standardize: {{.*}}plain-ckpt/last.safetensors trained on features read without it
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --standardize --no-runs-db --out %t/text 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT: aicf: error: {{.*}}tinyshakespeare.txt: --standardize standardizes the features of tables and arrays, not a text
