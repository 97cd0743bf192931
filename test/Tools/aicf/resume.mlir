// Checkpoints: four epochs straight and two + two resumed from the
// checkpoint end with byte-identical parameters and optimizer state. A
// corrupt checkpoint or one of another model is a clear error and leaves
// the file alone. The three runs share a GEMM registry of their own: with
// the machine's, a test running beside them could record another choice
// for a shape between the straight run and the resumed one.
// RUN: rm -rf %t && mkdir -p %t
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 3e-3 --epochs 4 --out %t/run --checkpoint-dir %t/straight > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 3e-3 --epochs 2 --out %t/run --checkpoint-dir %t/resumed > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 3e-3 --epochs 4 --out %t/run --checkpoint-dir %t/resumed --resume | FileCheck %s
// RUN: cmp %t/straight/last.safetensors %t/resumed/last.safetensors
// RUN: grep -c train_flops %t/resumed/last.safetensors
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/straight/last.safetensors --out %t/run | FileCheck %s --check-prefix=EVAL
// RUN: mkdir -p %t/bad && printf 'not a checkpoint' > %t/bad/last.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/run --checkpoint-dir %t/bad --resume 2>&1 | FileCheck %s --check-prefix=CORRUPT
// RUN: printf 'not a checkpoint' | cmp - %t/bad/last.safetensors
// RUN: sed 's/gain = 0.5773502691896257/gain = 1.0/' %S/../../../examples/mlp/digits_mlp.mlir > %t/other.mlir
// RUN: not aicf train %t/other.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/run --checkpoint-dir %t/straight --resume 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --epochs 1 --out %t/run --checkpoint-dir %t/sgd > /dev/null
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --epochs 2 --out %t/run --checkpoint-dir %t/sgd --resume 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// A checkpoint a program saved (a Trainer's records its step, but no
// epoch or data order: emulated by removing them) is refused once, whole,
// and left alone (each missing key was refused in turn).
// RUN: rm -rf %t/program && mkdir -p %t/program && cp %t/straight/last.safetensors %t/program/
// RUN: python3 -c "import json, struct, sys; p = sys.argv[1]; b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); m = h['__metadata__']; [m.pop(k, None) for k in ('epoch', 'data_rng_state', 'aicf.metadata.crc32')]; s = json.dumps(h).encode(); s += b' ' * (-len(s) % 8); open(p, 'wb').write(struct.pack('<Q', len(s)) + s + b[8 + n:])" %t/program/last.safetensors
// RUN: cp %t/program/last.safetensors %t/program.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 3e-3 --epochs 5 --out %t/run --checkpoint-dir %t/program --resume 2>&1 | FileCheck %s --check-prefix=PROGRAM
// PROGRAM: last.safetensors: no run's record in its metadata (epoch, data_rng_state): a checkpoint a program saved through the runtime or a Trainer has no place in a run to go on from
// RUN: cmp %t/program.safetensors %t/program/last.safetensors
// Under --override-resume the optimizer switches: SGD's checkpoint holds
// no Adam moments (it was refused after the compile, for want of them),
// so Adam starts afresh on its parameters, and says so; back to SGD, the
// Adam run's moments are not carried either.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --epochs 2 --out %t/run --checkpoint-dir %t/sgd --resume --override-resume 2>&1 | FileCheck %s --check-prefix=SWITCHED
// SWITCHED: note: {{.*}}last.safetensors: the checkpoint was trained with SGD, which keeps no optimizer state; this run's Adam starts afresh on its parameters (no optimizer state carried)
// SWITCHED: resumed from {{.*}}sgd/last.safetensors at epoch 1
// SWITCHED: epoch   2/2
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --epochs 3 --out %t/run --checkpoint-dir %t/sgd --resume --override-resume 2>&1 | FileCheck %s --check-prefix=BACK
// BACK: note: {{.*}}last.safetensors: the checkpoint holds Adam's state; this run's SGD starts afresh on its parameters (no optimizer state carried)
// BACK: epoch   3/3
// Another precision given goes on, said, naming both: the parameters and
// optimizer state are f32 in every precision (it was refused unless
// --override-resume, which also lets the rate, model and data differ).
// RUN: cp -r %t/sgd %t/sgd-bf16
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --precision bf16 --epochs 4 --out %t/run --checkpoint-dir %t/sgd-bf16 --resume 2>&1 | FileCheck %s --check-prefix=PRECISION
// PRECISION: note: {{.*}}last.safetensors: the checkpoint was trained with precision fp32; this run asks for bf16: going on in bf16 (the parameters and optimizer state are f32 in every precision and carry as they are; --precision fp32 resumes as it trained)
// PRECISION: epoch   4/4
// And into fp16, whose loss scale starts afresh.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --precision fp16 --epochs 5 --out %t/run --checkpoint-dir %t/sgd-bf16 --resume 2>&1 | FileCheck %s --check-prefix=TOFP16
// TOFP16: note: {{.*}}this run asks for fp16: going on in fp16 ({{.*}}; fp16's loss scale starts at 65536; --precision bf16 resumes as it trained)
// TOFP16: epoch   5/5 {{.*}} loss scale
// A resume without --precision goes on in the checkpoint's (as eval and
// sample run it; the default, fp32, was refused as another precision), and
// the run says it trains in it.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --precision bf16 --epochs 1 --out %t/run --checkpoint-dir %t/bf16 > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/run --checkpoint-dir %t/bf16 --resume 2>&1 | FileCheck %s --check-prefix=BF16
// BF16: resumed from {{.*}}bf16/last.safetensors at epoch 1
// BF16: training on {{.*}}, cpu, {{.*}}, bf16 mixed precision
// BF16: epoch   2/2
// A fork without a checkpoint directory says its epochs are saved nowhere.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --epochs 2 --out %t/fork --resume-from %t/sgd/last.safetensors 2>&1 | FileCheck %s --check-prefix=NOWHERE
// NOWHERE: note: --resume-from without --checkpoint-dir: the epochs trained from the checkpoint are saved nowhere (add --checkpoint-dir to keep them)
// Gradient accumulation's sums are a step's scratch, not checkpointed: a
// resume without --accumulate goes on with the checkpoint's micro-batches
// (it went on at one, with a note, while --precision was taken from the
// checkpoint); with another, it says that its steps then take other rows.
// (The straight and resumed runs above also agree on the training FLOPs
// each checkpoint records: a resumed run goes on counting.)
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --accumulate 2 --out %t/run --checkpoint-dir %t/acc > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/run --checkpoint-dir %t/acc --resume 2>&1 | FileCheck %s --check-prefix=ACCPLAIN
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --accumulate 1 --out %t/run --checkpoint-dir %t/acc --resume 2>&1 | FileCheck %s --check-prefix=ACCONE
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --accumulate 2 --out %t/run --checkpoint-dir %t/acc --resume | FileCheck %s --check-prefix=ACCAGAIN
// RUN: not grep -c accumulated %t/acc/last.safetensors
// The same data under another name is the same data (its bytes' hash):
// a resume takes it, and scoring scores what the run held out of it.
// RUN: cp %S/../../../data/digits.csv.gz %t/renamed.csv.gz
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/renamed.csv.gz --epochs 5 --out %t/run --checkpoint-dir %t/acc --resume | FileCheck %s --check-prefix=RENAMED
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/renamed.csv.gz --checkpoint %t/straight/last.safetensors --out %t/run | FileCheck %s --check-prefix=RENAMEDEVAL
// RENAMED: resumed from {{.*}}last.safetensors at epoch 4
// RENAMED: epoch   5/5
// RENAMEDEVAL: on 359 held-out rows of {{.*}}renamed.csv.gz

// CHECK: resumed from {{.*}}last.safetensors at epoch 2 (step 90)
// CHECK-NOT: epoch   2/4
// CHECK: epoch   3/4
// CHECK: epoch   4/4

// EVAL: accuracy {{(9[0-9]|100)\.[0-9][0-9]}}% on 359 held-out rows of {{.*}}digits.csv.gz (checkpoint {{.*}}last.safetensors, epoch 4)

// CORRUPT: aicf: error: {{.*}}last.safetensors: not a valid checkpoint: not a safetensors checkpoint (its first 8 bytes give a header of {{[0-9]+}} bytes, in a file of 16;
// OTHER: aicf: error: {{.*}}last.safetensors: the checkpoint is of another model (IR hash {{[0-9a-f]+}}, this model's is {{[0-9a-f]+}})
// ACCPLAIN-NOT: note: the checkpoint's run took global batches
// ACCPLAIN: resumed from {{.*}}last.safetensors at epoch 1 (step 23)
// ACCPLAIN: accumulating 2 micro-batches of 32
// ACCPLAIN: epoch   2/2
// ACCONE: note: the checkpoint's run took global batches of 64 rows a step, this one 32 (--batch, --accumulate,
// ACCONE: resumed from {{.*}}last.safetensors at epoch 2 (step 46)
// ACCONE: epoch   3/3
// ACCAGAIN: resumed from {{.*}}last.safetensors at epoch 3 (step 91)
// ACCAGAIN: accumulating 2 micro-batches of 32
// ACCAGAIN: epoch   4/4
// OPTIMIZER: aicf: error: {{.*}}last.safetensors: the checkpoint was trained with optimizer sgd; this run asks for adam

// A text's windows an epoch and held-out windows scored may change on
// resume, and are said (they changed without a word).
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 32 --eval-windows 16 --out %t/lm --checkpoint-dir %t/lmck > /dev/null
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 2 --windows-per-epoch 64 --eval-windows 32 --out %t/lm --checkpoint-dir %t/lmck --resume 2>&1 | FileCheck %s --check-prefix=WINDOWS
// WINDOWS: note: the checkpoint's run trained 32 windows an epoch, this one 64 (--windows-per-epoch, or its default
// WINDOWS: note: the checkpoint's run scored 16 held-out windows an epoch, this one 32 (--eval-windows)
// WINDOWS: epoch   2/2
// Without the flags, a resume goes on with the checkpoint's (the whole
// text's windows an epoch, and 256 scored, were taken instead).
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 3 --out %t/lm --checkpoint-dir %t/lmck --resume 2>&1 | FileCheck %s --check-prefix=WINDOWSKEPT
// WINDOWSKEPT-NOT: windows an epoch, this one
// WINDOWSKEPT: training on 64 windows (32 held-out windows scored)
// WINDOWSKEPT: epoch   3/3

// A rate is shown as the flag takes it (1e30 was written out in 31 digits).
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --lr 1e30 --epochs 2 --out %t/run --checkpoint-dir %t/sgd --resume 2>&1 | FileCheck %s --check-prefix=RATE
// RATE: the checkpoint was trained with lr {{[0-9.]+}}; this run asks for 1e30 (--lr {{[0-9.]+}} resumes as it trained
