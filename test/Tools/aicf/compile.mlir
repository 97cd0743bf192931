// `aicf compile`: an artifact (manifest + kernels.so) or one stage's IR;
// bad input is an error naming the file.
// RUN: rm -rf %t && aicf compile %S/../../../examples/mlp/digits_mlp.mlir --optimizer sgd -o %t | FileCheck %s
// RUN: test -f %t/manifest.json && test -f %t/kernels.so
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/manifest.json
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit ll | FileCheck %s --check-prefix=LL
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit fused | FileCheck %s --check-prefix=FUSED
// A model whose @loss calls @forward: the fused stage inlines the call first,
// as the train step's compile does (it stopped at autodiff's "inline it
// first").
// RUN: aicf compile %S/inputs/ids-bag.mlir.txt --emit fused | FileCheck %s --check-prefix=FUSEDCALL
// FUSEDCALL: func.func @loss(
// FUSEDCALL-NOT: call @forward
// FUSEDCALL: func.func @train_step
// A variant for batch 7 (what a smaller last batch runs): the same
// parameters, every batch-carrying buffer 7 rows.
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --batch 7 --emit ll | FileCheck %s --check-prefix=BATCH
// A percentage budget is of the train step's arena and holds for every
// function: another one over it says so (it was named alone, unexplained).
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --memory-budget 50% -o %t.pct 2>&1 | FileCheck %s --check-prefix=PCT
// PCT: error: ll-plan-memory: @loss_grad needs an arena of {{[0-9]+}} bytes {{.*}} over the budget of {{[0-9]+}} bytes (a budget holds for every function of the module, not only @train_step)
// RUN: rm -rf %t.b7 && aicf compile %S/../../../examples/mlp/digits_mlp.mlir --batch 7 -o %t.b7 | FileCheck %s --check-prefix=BATCHLINE
// BATCHLINE: compiled {{.*}}digits_mlp.mlir for batch 7 -> {{.*}}b7 (4 functions
// A batch past what a pass option holds, and an artifact path that is a
// device, are refused naming them (the pipeline's "failed to add", and "File
// exists", named neither).
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --batch 9223372036854775808 2>&1 | FileCheck %s --check-prefix=HUGEBATCH
// HUGEBATCH: invalid value '9223372036854775808' for '--batch <BATCH>': 9223372036854775808 rows: at most 9223372036854775807
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVNULL
// DEVNULL: aicf: error: /dev/null: the artifact is a directory, and /dev/null is not a directory (a device, pipe or socket)
// A printed stage replaces IR, nothing else (it replaced a data file).
// RUN: mkdir -p %t.d && cp %S/../../../data/digits.csv.gz %t.d/data.csv.gz
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit ll -o %t.d/data.csv.gz 2>&1 | FileCheck %s --check-prefix=NOTIR
// NOTIR: aicf: error: {{.*}}data.csv.gz: the printed stage would overwrite this file, which holds no IR
// RUN: cmp %t.d/data.csv.gz %S/../../../data/digits.csv.gz
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit ll -o %t.d/ll.mlir && aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit fused -o %t.d/ll.mlir
// A printed stage goes through a link to the file it names (a rename
// replaced the link: `-o /dev/stdout` made it a regular file), and into a
// device or a pipe as it is (`-o /dev/null` was refused).
// RUN: ln -sf /proc/self/fd/1 %t.d/stdout
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit hl -o %t.d/stdout | FileCheck %s --check-prefix=THROUGHLINK
// RUN: test -L %t.d/stdout
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit hl -o /dev/null
// RUN: test -c /dev/null
// RUN: touch %t.d/real.mlir && ln -sf %t.d/real.mlir %t.d/link.mlir
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit hl -o %t.d/link.mlir
// RUN: test -L %t.d/link.mlir && FileCheck %s --check-prefix=THROUGHLINK < %t.d/real.mlir
// THROUGHLINK: func.func @forward
// `-` reads the module from standard input, as aicf-opt does: text or
// bytecode, its places named <stdin> (it was "-: No such file").
// RUN: aicf-opt %S/../../../examples/mlp/digits_mlp.mlir | aicf compile - --emit ll | FileCheck %s --check-prefix=LL
// RUN: aicf-opt --emit-bytecode %S/../../../examples/mlp/digits_mlp.mlir | aicf compile - --emit fused | FileCheck %s --check-prefix=FUSED
// RUN: rm -rf %t.stdin && mkdir %t.stdin && cd %t.stdin && aicf compile - < %S/../../../examples/mlp/digits_mlp.mlir | FileCheck %s --check-prefix=STDIN
// RUN: test -f %t.stdin/model.aicf/manifest.json
// STDIN: compiled <stdin> -> model.aicf (4 functions
// RUN: not aicf compile - --emit ll < %S/inputs/bad.mlir.txt 2>&1 | FileCheck %s --check-prefix=STDINBAD
// STDINBAD: <stdin>:{{[0-9]+}}:{{[0-9]+}}: error:
// For NVIDIA GPUs: PTX for both chips, assembled by ptxas, and each call's
// launch shape in the manifest.
// RUN: rm -rf %t.cuda && aicf compile %S/../../../examples/mlp/digits_mlp.mlir --optimizer sgd --target cuda -o %t.cuda | FileCheck %s --check-prefix=CUDA
// RUN: ls %t.cuda | FileCheck %s --check-prefix=PTXFILES
// RUN: FileCheck %s --check-prefix=PTXLIST < %t.cuda/manifest.json
// RUN: FileCheck %s --check-prefix=LAUNCH < %t.cuda/manifest.json
// --timing: each stage of the compile with its seconds.
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir -o %t.timed --timing | FileCheck %s --check-prefix=TIMING
// RUN: not aicf compile %S/inputs/bad.mlir.txt 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not aicf compile %S/inputs/missing.mlir 2>&1 | FileCheck %s --check-prefix=MISSING

// CHECK: compiled {{.*}}digits_mlp.mlir -> {{.*}} (4 functions, {{[0-9]+}} kernel calls, {{[0-9]+}} distinct kernels, {{[0-9]+}} compiled, x86_64 cpu {{.*}}) in {{[0-9.]+}} s

// TIMING: seconds   share  stage
// TIMING: parse and verify
// TIMING: train pipeline (autodiff .. ll-schedule)
// TIMING: kernel generation ({{[0-9]+}} kernels)
// TIMING: kernels: lower to the LLVM dialect
// TIMING: host compile (clang -O3) ({{[0-9]+}} of {{[0-9]+}} kernels
// TIMING: link kernels.so
// TIMING: 100.0%  total

// CUDA: ptxas accepts the PTX for sm_80 and sm_90
// CUDA: compiled {{.*}}digits_mlp.mlir -> {{.*}} (4 functions, {{[0-9]+}} kernel calls, {{[0-9]+}} distinct kernels, {{[0-9]+}} compiled, cuda sm_80 sm_90) in {{[0-9.]+}} s

// PTXFILES: manifest.json
// PTXFILES-DAG: ptx_{{[0-9a-f]+}}_sm_80.ptx
// PTXFILES-DAG: ptx_{{[0-9a-f]+}}_sm_90.ptx
// PTXLIST: "ptx": {
// PTXLIST-NEXT: "sm_80": [
// PTXLIST-NEXT: "ptx_{{[0-9a-f]+}}_sm_80.ptx"
// PTXLIST: "files": {
// PTXLIST-NEXT: "ptx_{{[0-9a-f]+}}_sm_{{80|90}}.ptx": "{{[0-9a-f]+}}"

// LAUNCH: "target": "cuda sm_80 sm_90",
// LAUNCH: "launch": {
// LAUNCH-NEXT: "grid": [
// LAUNCH: "block": [

// MANIFEST: "format": 2,
// MANIFEST: "name": "fc1.weight",
// MANIFEST: "init": "kaiming_uniform, gain = 0.57735026918962573"
// MANIFEST: "name": "train_step",
// MANIFEST: "symbol": "aicf_{{[0-9a-f]+}}",
// MANIFEST: "op": "ll.gemm",
// MANIFEST: "bytes": [
// MANIFEST: "cpu_features": [
// MANIFEST: "files": {
// MANIFEST-NEXT: "kernels.so": "{{[0-9a-f]+}}"
// MANIFEST: "checksum": "{{[0-9a-f]+}}"

// LL: func.func @train_step({{.*}}{ll.bind = "arena"})
// LL: ll.gemm
// LL: ll.softmax_cross_entropy

// FUSED: func.func @train_step
// FUSED: hl.gemm
// FUSED: hl.multi_tensor_apply

// BAD: aicf: error: {{.*}}bad.mlir.txt: the input is not valid IR:
// BAD: bad.mlir.txt:1:14: error: expected non-function type
// MISSING: aicf: error: {{.*}}missing.mlir: No such file or directory

// `aicf bench` runs (a smoke test of its output; timings are not asserted).
// RUN: aicf bench %S/../../../examples/mlp/digits_mlp.mlir --optimizer sgd --steps 2 --profile --out %t/bench | FileCheck %s --check-prefix=BENCH
// BENCH: digits_mlp.mlir: train step (sgd, lr 0.1) median {{[0-9.]+}} ms, min {{[0-9.]+}} ms over 2 steps
// BENCH: @train_step #{{[0-9]+}} ll.{{.*}} ms/step  stream {{[0-9]+}}
// BENCH: ll.gemm {{.*}} ms/step in {{[0-9]+}} calls ({{[0-9.]+}}% of the kernel time)
// Adam's and AdamW's default rate is 1e-3, not SGD's 0.1.
// RUN: aicf bench %S/../../../examples/mlp/digits_mlp.mlir --optimizer adamw --steps 1 --out %t/bench-adamw | FileCheck %s --check-prefix=BENCH-ADAMW
// BENCH-ADAMW: digits_mlp.mlir: train step (adamw, lr 0.001) median
// The warm-up's GEMM timing on a machine whose registry has not measured
// the shapes (minutes for a large model; the wall time was many times the
// steps', unsaid) is said; a second run finds them measured.
// RUN: rm -rf %t/fresh-registry
// RUN: env AICF_CACHE_DIR=%t/fresh-registry aicf bench %S/../../../examples/transformer/transformer_block.mlir --steps 1 --out %t/bench-gemm | FileCheck %s --check-prefix=BENCH-GEMM
// RUN: env AICF_CACHE_DIR=%t/fresh-registry aicf bench %S/../../../examples/transformer/transformer_block.mlir --steps 1 --out %t/bench-gemm | FileCheck %s --check-prefix=BENCH-MEASURED
// BENCH-GEMM: train step (adam, lr 0.001) median
// BENCH-GEMM-NEXT: (the 5 warm-up steps took {{[0-9.]+}} s, {{[0-9.]+}} s of it timing GEMM candidates for shapes this machine's GEMM registry had not measured: a second run finds them measured)
// BENCH-MEASURED: train step (adam, lr 0.001) median
// BENCH-MEASURED-NOT: timing GEMM candidates

// BATCH: func.func @forward(%{{.*}}: memref<7x64xf32> {ll.bind = "input"}, %{{.*}}: memref<7x10xf32> {ll.bind = "result 0"}, %{{.*}}: memref<128x64xf32> {ll.bind = "param @fc1.weight"}
// BATCH: func.func @train_step(%{{.*}}: memref<7x64xf32> {ll.bind = "input"}, %{{.*}}: memref<7xi32> {ll.bind = "input"}
// Without -o the artifact goes to the current directory, as a compiler's
// output does (it went beside the model, into the source tree).
// RUN: rm -rf %t/here && mkdir -p %t/here && cd %t/here && aicf compile %S/../../../examples/mlp/digits_mlp.mlir > /dev/null
// RUN: test -f %t/here/digits_mlp.aicf/manifest.json
// RUN: test ! -e %S/../../../examples/mlp/digits_mlp.aicf
