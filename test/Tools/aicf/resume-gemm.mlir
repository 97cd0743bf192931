// A resume replays the GEMM kernels its run trained with, so that it goes
// on bit for bit: a run given --gemm stays on that candidate without the
// flag (the resume timed the candidates, chose others and changed the
// bits), and a run of measured choices resumed at another --threads
// replays them (their keys held the thread count: none matched, and every
// GEMM was timed again). eval, predict and sample take --gemm too, the
// checkpoint's by default. The registry records --gemm and the device.
// RUN: rm -rf %t && mkdir -p %t
// RUN: AICF_CACHE_DIR=%t/cache0 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 32 --eval-windows 8 --no-progress --epochs 2 --gemm generated --out %t/whole --checkpoint-dir %t/whole/ck --no-runs-db | FileCheck %s --check-prefix=TOKENS
// A language model's speed is said in tokens a second too (a step's 16
// windows of 64).
// TOKENS: epoch   1/2  train loss {{.*}} steps/s, {{[0-9]+k?}} tokens/s)
// RUN: AICF_CACHE_DIR=%t/cache1 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 32 --eval-windows 8 --no-progress --epochs 1 --gemm generated --out %t/parts --checkpoint-dir %t/parts/ck --runs-db %t/runs.sqlite > /dev/null
// RUN: AICF_CACHE_DIR=%t/cache2 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --resume --out %t/parts --checkpoint-dir %t/parts/ck --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=PINNED
// PINNED-NOT: timing GEMM candidates
// PINNED: final held-out loss
// RUN: python3 %S/inputs/same_tensors.py %t/whole/ck/last.safetensors %t/parts/ck/last.safetensors | FileCheck %s --check-prefix=SAMEBITS
// SAMEBITS: 0 of {{[0-9]+}} tensors differ
// Another candidate given on resume is said not to continue bit for bit.
// RUN: cp -r %t/whole %t/other
// RUN: AICF_CACHE_DIR=%t/cache2 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 3 --resume --gemm library --out %t/other --checkpoint-dir %t/other/ck --no-runs-db 2>&1 | FileCheck %s --check-prefix=OTHERGEMM
// OTHERGEMM: note: {{.*}}last.safetensors: the checkpoint's run ran every GEMM with --gemm generated; this run uses --gemm library, so it does not continue bit for bit
// RUN: aicf runs show 1 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=RECORDED
// RECORDED: also: {{.*}}gemm generated; device cpu, {{[0-9]+}} thread
// Measured choices, resumed at one thread with a fresh GEMM registry: the
// checkpoint's choices are replayed, nothing is timed.
// RUN: AICF_CACHE_DIR=%t/cache3 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 32 --eval-windows 8 --no-progress --epochs 1 --threads 2 --out %t/measured --checkpoint-dir %t/measured/ck --no-runs-db > /dev/null
// RUN: AICF_CACHE_DIR=%t/cache4 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --resume --threads 1 --out %t/measured --checkpoint-dir %t/measured/ck --no-runs-db 2>&1 | FileCheck %s --check-prefix=REPLAYED
// REPLAYED-NOT: timing GEMM candidates
// REPLAYED: final held-out loss
// eval and sample of a --gemm run run its candidate (on a fresh cache
// nothing is timed, so no GEMM decision is written: a measured choice
// writes one); another is refused by name.
// RUN: AICF_CACHE_DIR=%t/cache5 aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/whole/ck --eval-windows 8 --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVALPINNED
// EVALPINNED: loss
// RUN: test ! -e %t/cache5/gemm-registry.json
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/whole/ck --gemm cublaslt --tokens 4 --out %t/sample 2>&1 | FileCheck %s --check-prefix=BADGEMM
// BADGEMM: aicf: error: --gemm cublaslt: not a GEMM candidate of this device
// --save-every N saves inside the epoch too: a run killed (SIGKILL) after
// such a save resumes inside its epoch and ends on the uninterrupted run's
// bits (a kill lost the whole epoch, a language model's text, before).
// RUN: AICF_CACHE_DIR=%t/cache6 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 640 --eval-windows 8 --no-progress --epochs 2 --gemm generated --out %t/straight --checkpoint-dir %t/straight/ck --no-runs-db > /dev/null
// RUN: python3 %S/inputs/kill_inside_epoch.py %t/killed/ck/last.safetensors -- aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 640 --eval-windows 8 --no-progress --epochs 2 --gemm generated --save-every 5 --out %t/killed --checkpoint-dir %t/killed/ck --no-runs-db | FileCheck %s --check-prefix=KILLED
// KILLED: killed inside epoch {{[12]}} at step {{[0-9]*[05]}}
// RUN: AICF_CACHE_DIR=%t/cache6 aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --resume --out %t/killed --checkpoint-dir %t/killed/ck --no-runs-db | FileCheck %s --check-prefix=INSIDE
// INSIDE: resumed from {{.*}}last.safetensors inside epoch {{[12]}}, after its batch {{[0-9]*[05]}} (step {{[0-9]*[05]}})
// RUN: python3 %S/inputs/same_tensors.py %t/straight/ck/last.safetensors %t/killed/ck/last.safetensors | FileCheck %s --check-prefix=SAMEAFTERKILL
// SAMEAFTERKILL: 0 of {{[0-9]+}} tensors differ
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --save-every 5 --out %t/nodir --no-runs-db 2>&1 | FileCheck %s --check-prefix=NODIR
// NODIR: aicf: error: --save-every 5 saves into --checkpoint-dir, and none is given
// A bare resume goes on saving as often (the checkpoint records
// --save-every): the flag is for runs that are killed, whose next step is
// a bare resume.
// RUN: python3 -c "import json, struct, sys; b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; print('save_every', json.loads(b[8:8 + n])['__metadata__'].get('save_every'))" %t/killed/ck/last.safetensors | FileCheck %s --check-prefix=KEPTEVERY
// KEPTEVERY: save_every 5
