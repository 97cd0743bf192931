// `aicf train` feeds whatever @loss takes: the CNN from a CSV table
// (rows reshaped to [1, 8, 8] images), the char LM from text (character
// vocabulary, random windows, dropout's seed and offset from the loop),
// the transformer block from the same text (bytes, one-hot inputs); a
// budgeted memory plan; a profile in the trace-event format. Data that
// does not fit the model, and a device that is not there, are errors
// before anything is compiled.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/cnn | FileCheck %s --check-prefix=CNN
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --windows-per-epoch 48 --eval-windows 32 --out %t/lm --checkpoint-dir %t/lm-ckpt --profile %t/lm-trace.json --profile-steps 2 | tee %t/lm.log | FileCheck %s --check-prefix=LM
// RUN: FileCheck %s --check-prefix=TRACE < %t/lm-trace.json
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/lm-ckpt/last.safetensors --out %t/lm 2>&1 | FileCheck %s --check-prefix=LMEVAL
// The run's held-out figures sampled 32 windows: --eval-windows 32 scores
// those, reproducing them.
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/lm-ckpt/last.safetensors --eval-windows 32 --out %t/lm > %t/lm-sampled.txt
// RUN: grep "epoch   2/2" %t/lm.log | cat - %t/lm-sampled.txt | FileCheck %s --check-prefix=LMSAMPLED
// RUN: aicf train %S/../../../examples/transformer/transformer_block.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 16 --eval-windows 8 --out %t/block | FileCheck %s --check-prefix=BLOCK
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 32 --eval-windows 16 --memory-budget 60% --out %t/budget | FileCheck %s --check-prefix=BUDGET
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir --memory-budget 60% --emit ll | FileCheck %s --check-prefix=PLAN
// A budget between the CNN train step's lower bound (318,656 bytes) and
// the arena largest-first placement left (351,296: fragmentation, which no
// recomputation lowers) is met by another placement order. The step with
// its convolutions as products needs 627,776 bytes (their window rows):
// under this budget it is planned with direct convolutions.
// RUN: aicf compile %S/../../../examples/cnn/digits_cnn.mlir --memory-budget 320000 --emit ll | FileCheck %s --check-prefix=PLACED
// A percentage is of the plan without a budget (627,776 bytes, its
// convolutions as products): 60% is 376,665 bytes, which the direct
// convolutions' plan meets (it was taken as 60% of that smaller plan).
// RUN: aicf compile %S/../../../examples/cnn/digits_cnn.mlir --memory-budget 60% --emit ll | FileCheck %s --check-prefix=PERCENT
// PERCENT: ll.memory = {arena_bytes = 318656 : i64
// RUN: aicf compile %S/../../../examples/cnn/digits_cnn.mlir --memory-budget 60% -o %t/cnn60.aicf | FileCheck %s --check-prefix=DIRECTNOTE
// The FLOPs a step counts are the model's: a plan's recomputations add
// kernel calls, not FLOPs (a --flops-budget bought fewer steps under a
// memory budget).
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir -o %t/lm.aicf > /dev/null
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir --memory-budget 60% -o %t/lm60.aicf > /dev/null
// RUN: python3 -c "import json; f=lambda d: [x for x in json.load(open(d+'/manifest.json'))['functions'] if x['name']=='train_step'][0]; a,b=f('%t/lm.aicf'),f('%t/lm60.aicf'); s=lambda x: sum(c.get('flops',0) for c in x['calls']); print('FLOPS', s(a)==s(b), len(b['calls'])>len(a['calls']))" | FileCheck %s --check-prefix=FLOPS
// FLOPS: FLOPS True True
// DIRECTNOTE: note: the convolutions' window rows (their products' scratch) do not fit --memory-budget: they run as direct kernels
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/digits.csv.gz --out %t/bad 2>&1 | FileCheck %s --check-prefix=TABLE
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/tinyshakespeare.txt --out %t/bad 2>&1 | FileCheck %s --check-prefix=TEXT
// RUN: test ! -e %t/bad
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --memory-budget 0% --out %t/bad 2>&1 | FileCheck %s --check-prefix=ZERO
// (A negative one is the budget's value, not an unknown option.)
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --memory-budget -5% --out %t/bad 2>&1 | FileCheck %s --check-prefix=NEGBUDGET
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --memory-budget=-5 --out %t/bad 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --memory-budget 1.5G --out %t/bad 2>&1 | FileCheck %s --check-prefix=FRACTIONAL
// NEGATIVE: '-5': not a number of bytes (a whole number of bytes, with K, M or G (1024-based), or a percentage such as 60%)
// FRACTIONAL: '1.5G': unknown unit '.5G' (a whole number of bytes, with K, M or G (1024-based), or a percentage such as 60%)
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --device tpu --out %t/bad 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --device cuda:3 --out %t/bad 2>&1 | FileCheck %s --check-prefix=CUDA
// Data parallel on the GPU where none is visible: an error, not cudarc's
// panic (each rank's device came from the driver's count).
// RUN: not env CUDA_VISIBLE_DEVICES= aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --data-parallel --device cuda --out %t/bad-dp 2>&1 | FileCheck %s --check-prefix=DPCUDA
// DPCUDA-NOT: panicked
// DPCUDA: aicf: error: {{.*}}cuda{{.*}}

// CNN: data: 1797 rows of 64 features and a label
// CNN: training on 1438 examples (359 held out), batch 32, 45 steps per epoch
// CNN: epoch   2/2  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy {{[0-9.]+}}%
// CNN: final held-out accuracy

// LM: data: 1115394 tokens of {{.*}}tinyshakespeare.txt (65 distinct characters), 892315 for training, 223079 held out; windows of 64
// LM: training on 48 windows (32 held-out windows scored), batch 16, 3 steps per epoch
// LM: epoch   1/2  train loss {{[0-9.]+}}  val loss {{[0-9.]+}} nats/char  val accuracy {{[0-9.]+}}%
// LM: epoch   2/2
// LM: final held-out loss {{[0-9.]+}} nats/char
// LM: profile: {{.*}}lm-trace.json (open in https://ui.perfetto.dev or chrome://tracing)

// TRACE: {"displayTimeUnit":"ms","traceEvents":[{"args":{"name":"cpu, {{[0-9]+}} threads"},"name":"process_name","ph":"M","pid":0,"tid":0}
// TRACE-SAME: {"args":{"call":0,"function":"train_step","hl":"{{.*}}char_lm.mlir:{{[0-9]+}}:{{[0-9]+}}{{.*}}","kernel":"aicf_{{[0-9a-f]+}}"},"cat":"kernel","dur":{{[0-9.e-]+}},"name":"ll.{{[a-z_]+}}","ph":"X","pid":0,"tid":0,"ts":{{[0-9.e]+}}}

// LMEVAL: note: every one of the 3485 held-out windows is scored; the run's held-out figures sampled 32 of them (its --eval-windows): --eval-windows 32 scores those
// LMEVAL: accuracy {{[0-9.]+}}% on 3485 held-out windows of {{.*}}tinyshakespeare.txt (checkpoint {{.*}}last.safetensors, epoch 2); loss {{[0-9.]+}} nats/char
// LMEVAL-SAME: ({{[0-9]+\.[0-9]+}} bits/char, perplexity {{[0-9]+\.[0-9]+}})
// LMSAMPLED: epoch   2/2  train loss {{[0-9.]+}}  val loss [[LOSS:[0-9.]+]] nats/char  val accuracy [[ACC:[0-9.]+]]%
// LMSAMPLED: accuracy [[ACC]]% on 32 held-out windows of {{.*}}loss [[LOSS]] nats/char

// BLOCK: data: 1115394 tokens of {{.*}}tinyshakespeare.txt (65 byte values of 256)
// BLOCK: training on 16 windows (8 held-out windows scored), batch 8, 2 steps per epoch
// BLOCK: epoch   1/1  train loss {{[0-9.]+}}  val loss {{[0-9.]+}} nats/byte

// BUDGET: epoch   1/1  train loss {{[0-9.]+}}

// PLACED: func.func @train_step
// PLACED-SAME: ll.memory = {arena_bytes = 318656 : i64, buffers = {{[0-9]+}} : i64, in_place = {{[0-9]+}} : i64, lower_bound_bytes = 318656 : i64
// PLAN: func.func @train_step
// PLAN-SAME: ll.memory = {{.*}}recomputed = {{[1-9][0-9]*}}

// TABLE: aicf: error: {{.*}}digits.csv.gz: a CSV table (features, then a label per row) feeds a model of one input and one label of [batch] (or [batch, 1]); this model's @loss takes Data [16, 64] i32, Target [16, 64] i32: a language model (token ids in, the next ids as targets) trains on a text file: --data data/tinyshakespeare.txt
// TEXT: aicf: error: {{.*}}tinyshakespeare.txt: text feeds token ids [batch, context] or one-hot vectors [batch, context, vocabulary]; the model's input #0 is [32, 1, 8, 8] f32
// ZERO: error: invalid value '0%' for '--memory-budget <MEMORY_BUDGET>': '0%': a percentage in (0, 100]
// NEGBUDGET: error: invalid value '-5%' for '--memory-budget <MEMORY_BUDGET>': '-5%': a percentage in (0, 100]
// DEVICE: error: invalid value 'tpu' for '--device <DEVICE>': 'tpu' is not a device (cpu, cuda or cuda:N)
// CUDA: aicf: error: device cuda:3: {{.*}}
