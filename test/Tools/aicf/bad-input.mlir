// Bad input to the CLI is one clear error that names the place, found
// before anything is compiled where it can be: numbers out of range, data
// with NaN cells or labels the model has no class for, too few rows, paths
// that cannot be written, models with empty tensors.
// RUN: rm -rf %t && mkdir -p %t
// A model with no parameters, and a held-out fraction that leaves no row to
// train on (it was reported as features that are all 0).
// RUN: not aicf train %S/inputs/no-params.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/noparams 2>&1 | FileCheck %s --check-prefix=NOPARAMS
// NOPARAMS: no-params.mlir.txt:{{[0-9]+}}:{{[0-9]+}}: error: hl-optimizer: the module declares no parameter (hl.param): there is nothing to differentiate, and training would change nothing
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --val-split 0.9999 --out %t/norows 2>&1 | FileCheck %s --check-prefix=NOROWS
// NOROWS: aicf: error: {{.*}}digits.csv.gz: holding out 1797 of its 1797 rows (--val-split 0.9999) leaves none to train on
// --loss is an ONNX model's (an hl model's @loss is its own; it was ignored).
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --loss mse --out %t/loss 2>&1 | FileCheck %s --check-prefix=LOSSHL
// LOSSHL: aicf: error: --loss mse chooses the loss of an ONNX model being imported; {{.*}}digits_mlp.mlir's @loss is its own
// --loss none (an import for inference) is refused where the command
// trains, before the import writes anything.
// RUN: not aicf train %S/../../onnx/mlp.onnx --loss none --data %S/../../../data/digits.csv.gz --out %t/noloss 2>&1 | FileCheck %s --check-prefix=LOSSNONE
// RUN: not aicf bench %S/../../onnx/mlp.onnx --loss none --batch 4 --out %t/noloss 2>&1 | FileCheck %s --check-prefix=LOSSNONE
// RUN: test ! -e %t/noloss
// LOSSNONE: aicf: error: --loss none imports {{.*}}mlp.onnx without a @loss (for inference alone); training needs cross_entropy, mse or graph
// A negative number reaches its option's own check (clap took it for an
// option and suggested `-- -1`, which made it a positional argument).
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --flops-budget -1 --out %t/run 2>&1 | FileCheck %s --check-prefix=NEGBUDGET
// NEGBUDGET: aicf: error: the FLOPs budget -1 is not a finite positive number
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs -1 --out %t/run 2>&1 | FileCheck %s --check-prefix=NEGEPOCHS
// NEGEPOCHS: invalid value '-1' for '--epochs <EPOCHS>'
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr -1 --out %t/run 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr nan --out %t/run 2>&1 | FileCheck %s --check-prefix=LRNAN
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --momentum -5 --out %t/run 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --momentum nan --out %t/run 2>&1 | FileCheck %s --check-prefix=MOMENTUMNAN
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --weight-decay -1 --out %t/run 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 0 --out %t/bench 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --allow-tf32 --steps 1 --out %t/bench 2>&1 | FileCheck %s --check-prefix=TF32
// Lowered ll IR is no model to train: said, not read as a model of i1 inputs.
// RUN: aicf-opt %S/../../../examples/mlp/digits_mlp.mlir --convert-hl-to-ll -o %t/lowered.mlir
// RUN: not aicf train %t/lowered.mlir --data %S/../../../data/digits.csv.gz --out %t/lowered 2>&1 | FileCheck %s --check-prefix=LOWERED
// LOWERED: aicf: error: {{.*}}lowered.mlir: @forward takes buffers (memref): this is lowered ll IR; give the hl model (tensors) to train
// An unknown GEMM candidate is named by its flag, before anything compiles.
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --gemm bogus --steps 1 --out %t/bench 2>&1 | FileCheck %s --check-prefix=GEMMNAME
// GEMMNAME-NOT: compiled
// GEMMNAME: aicf: error: --gemm bogus: not a GEMM candidate of this device (generated, library,
// A fused attention backward asked for in fp32 for a GPU does not apply
// there: said, not ignored. The CPU fuses every head, silently.
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir --attention-backward fused --target cuda --emit hl 2>&1 | FileCheck %s --check-prefix=FUSEDF32
// FUSEDF32: note: --attention-backward fused takes 16-bit attention heads on a GPU (--precision bf16 or fp16, head sizes multiples of 16 up to 128); in fp32 attention's gradient stays GEMMs there
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir --attention-backward fused --emit hl 2>&1 | FileCheck %s --check-prefix=FUSEDCPU --allow-empty
// FUSEDCPU-NOT: note:
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --lr -1 --steps 1 --out %t/bench 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --accumulate 0 --out %t/run 2>&1 | FileCheck %s --check-prefix=ACCZERO
// RUN: env AICF_CLANG=%t/no-clang not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --out %t/noclang 2>&1 | FileCheck %s --check-prefix=NOCLANG
// A kernel cache that cannot be made names the variable that chose it.
// RUN: touch %t/cache-file
// RUN: env AICF_CACHE_DIR=%t/cache-file/x not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/badcache 2>&1 | FileCheck %s --check-prefix=BADCACHE
// BADCACHE: cache-file/x/kernels: Not a directory (os error 20) (the kernel cache, chosen by AICF_CACHE_DIR; point it at a writable directory)
// Settings that f32 turns into others are refused by name, in bench as in
// train: a rate that is 0 there (the timed steps trained nothing), a beta
// or momentum that is 1 there (refused inside the optimizer pass with the
// rounded value).
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --lr 1e-50 --steps 1 --out %t/bench 2>&1 | FileCheck %s --check-prefix=BENCHTINYLR
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --betas 0.9999999999,0.5 --steps 1 --out %t/bench 2>&1 | FileCheck %s --check-prefix=BETAONE
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --momentum 0.99999999999 --out %t/run 2>&1 | FileCheck %s --check-prefix=MOMENTUMONE
// BENCHTINYLR: aicf: error: the learning rate 1e-50 is 0 in f32, the precision the step computes in
// BETAONE: aicf: error: the beta 0.9999999999 is 1 in f32, the precision the step computes in (at most 0.99999994)
// MOMENTUMONE: aicf: error: the momentum 0.99999999999 is 1 in f32, the precision the step computes in (at most 0.99999994)
// A forced GEMM candidate that cannot take the model's operands (a bf16
// one in fp32) runs them as `library`, and bench says so.
// RUN: aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 1 --gemm mkl-bf16 --out %t/benchgemm 2>&1 | FileCheck %s --check-prefix=GEMMFALLBACK
// GEMMFALLBACK: note: --gemm mkl-bf16 ran none of this model's GEMMs here (it cannot take their operands, or is not available on this machine): they ran as `library`
// A weight decay that is infinite in f32 is refused; a run that diverges
// because its (SGD or AdamW) decay times its rate is above 2 is told to
// lower the decay, not the rate.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --weight-decay 1e300 --epochs 1 --no-runs-db --no-progress --out %t/run 2>&1 | FileCheck %s --check-prefix=DECAYINF
// DECAYINF: aicf: error: the weight decay 1e300 is infinite in f32, the precision the step computes in
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --lr 0.1 --weight-decay 30 --epochs 1 --no-runs-db --no-progress --out %t/decay 2>&1 | FileCheck %s --check-prefix=DECAYGROWS
// DECAYGROWS: training diverged; the weight decay 30 times the learning rate 0.1 is 3, above 2: each update multiplies the weights by 1 - 3 = -2, so they grow in size and alternate in sign; lower the weight decay
// A model holding a gradient of its own is refused, at every precision,
// at the gradient's place (at fp32 it was trained on as @loss's gradient,
// a constant loss of 7; at bf16 refused by hl-autocast).
// RUN: not aicf train %S/inputs/own-gradient.mlir.txt --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --no-progress --out %t/own 2>&1 | FileCheck %s --check-prefix=OWNGRAD
// RUN: not aicf compile %S/inputs/own-gradient.mlir.txt --precision bf16 -o %t/own.aicf 2>&1 | FileCheck %s --check-prefix=OWNGRAD
// A tensor past 1 TiB is the model's error at its place (the pipeline's
// first pass said it in its own name, hl-fuse-attention, of a model with no
// attention).
// RUN: not aicf compile %S/inputs/huge-batch.mlir.txt -o %t/huge 2>&1 | FileCheck %s --check-prefix=HUGEARG
// HUGEARG: aicf: error: {{.*}}huge-batch.mlir.txt: not a model to compile as it is:
// HUGEARG-NEXT: huge-batch.mlir.txt:9:1: error: argument #0: tensor<9223372036854775807x8xf32> is larger than the 1 TiB a tensor may hold
// A model of one output trained by a cross-entropy is a regression
// imported with the default loss: said so.
// RUN: not aicf train %S/inputs/one-output-ce.mlir.txt --data %S/../../../data/digits.csv.gz --out %t/oneout 2>&1 | FileCheck %s --check-prefix=ONEOUT
// ONEOUT: the label 1 is not a class of the model's 1 (0 to 0): a cross-entropy over one output is 0 whatever the label; a regression needs a squared error (an ONNX model: import it with --loss mse), a classifier an output per class
// A model of two targets per row is fed arrays, not a table: said.
// RUN: not aicf train %S/inputs/two-targets.mlir.txt --data %S/../../../data/digits.csv.gz --out %t/two 2>&1 | FileCheck %s --check-prefix=TWOTARGETS
// TWOTARGETS: this model's @loss takes Data [16, 64] f32, Target [16, 2] f32: give one .npy array per input instead (--data x.npy --data y.npy, in @loss's order; numpy.save writes them)
// --nesterov is SGD's, with a momentum (as PyTorch's SGD has it).
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --nesterov --out %t/nesterov 2>&1 | FileCheck %s --check-prefix=NESTEROV
// NESTEROV: aicf: error: --nesterov needs a momentum: --momentum 0.9, say (PyTorch's SGD refuses it without one)
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --nesterov --out %t/nesterov 2>&1 | FileCheck %s --check-prefix=NESTEROVADAM
// NESTEROVADAM: aicf: error: --nesterov is SGD's: --optimizer sgd --momentum 0.9 --nesterov, say (the default optimizer is adam)
// A checkpoint trained without Nesterov does not resume with it.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --momentum 0.9 --epochs 1 --no-runs-db --out %t/plainsgd --checkpoint-dir %t/plainsgd-ck --no-progress > /dev/null
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --momentum 0.9 --nesterov --epochs 2 --no-runs-db --out %t/plainsgd --checkpoint-dir %t/plainsgd-ck --resume --no-progress 2>&1 | FileCheck %s --check-prefix=NESTEROVRESUME
// NESTEROVRESUME: the checkpoint was trained with nesterov false; this run asks for true (leaving out --nesterov resumes as it trained; --override-resume goes on anyway)
// nanoGPT's parameter groups (--no-decay-1d) need a weight decay, and
// Adam's eps is Adam's; a run with them resumes with them (a checkpoint
// from before they were recorded trained with PyTorch's defaults).
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --no-decay-1d --out %t/groups 2>&1 | FileCheck %s --check-prefix=GROUPS
// GROUPS: aicf: error: --no-decay-1d: weight decay kept off biases and norm weights changes nothing without a weight decay: give one too (0.1, as nanoGPT) (--weight-decay)
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --adam-eps 1e-6 --out %t/groups 2>&1 | FileCheck %s --check-prefix=EPSSGD
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer sgd --adam-eps 1e-8 --out %t/groups 2>&1 | FileCheck %s --check-prefix=EPSSGDDEFAULT
// EPSSGDDEFAULT: aicf: error: --adam-eps 1e-8 is Adam's and AdamW's; SGD has none
// EPSSGD: aicf: error: --adam-eps 1e-6 is Adam's and AdamW's; SGD has none
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --adam-eps 0 --out %t/groups 2>&1 | FileCheck %s --check-prefix=EPSZERO
// EPSZERO: aicf: error: --adam-eps: Adam's eps 0 is not a positive number
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adamw --weight-decay 0.1 --no-decay-1d --adam-eps 1e-6 --epochs 1 --no-runs-db --out %t/groups --checkpoint-dir %t/groups-ck --no-progress > /dev/null
// Given against the checkpoint's, each is refused, all at once.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --adam-eps 1e-7 --weight-decay 0.2 --epochs 2 --no-runs-db --out %t/groups --checkpoint-dir %t/groups-ck --resume --no-progress 2>&1 | FileCheck %s --check-prefix=EPSRESUME
// EPSRESUME: the checkpoint was trained with weight_decay 0.1; this run asks for 0.2 (--weight-decay 0.1 resumes as it trained; --override-resume goes on anyway)
// EPSRESUME-NEXT: the checkpoint was trained with eps 1e-6; this run asks for 1e-7 (--adam-eps 1e-6 resumes as it trained; --override-resume goes on anyway)
// Left out, they are the checkpoint's (the optimizer, its rate, decay,
// groups and eps each had to be given again).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --no-runs-db --out %t/groups --checkpoint-dir %t/groups-ck --resume --no-progress | FileCheck %s --check-prefix=GROUPSRESUMED
// GROUPSRESUMED: epoch   2/2
// A switch cannot be given as off: groups asked of a checkpoint that
// trained without them are refused.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adamw --weight-decay 0.1 --epochs 1 --no-runs-db --out %t/groups2 --checkpoint-dir %t/groups2-ck --no-progress > /dev/null
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --no-decay-1d --epochs 2 --no-runs-db --out %t/groups2 --checkpoint-dir %t/groups2-ck --resume --no-progress 2>&1 | FileCheck %s --check-prefix=GROUPSRESUME
// GROUPSRESUME: the checkpoint was trained with weight decay on every parameter; this run asks for no weight decay on biases and norm weights (--no-decay-1d) (leaving out --no-decay-1d resumes as it trained; --override-resume goes on anyway)
// An op that @loss reaches through a call is named where it is written,
// the call in a note (the call alone was named).
// RUN: not aicf compile %S/inputs/math-in-forward.mlir.txt -o %t/math 2>&1 | FileCheck %s --check-prefix=CALLEE
// CALLEE: math-in-forward.mlir.txt:13:9: error: hl-optimizer: no gradient rule for 'math.tanh'
// CALLEE-NEXT: math-in-forward.mlir.txt:25:8: note: called from here
// RUN: not aicf compile %S/inputs/own-gradient.mlir.txt --emit fused 2>&1 | FileCheck %s --check-prefix=OWNGRAD
// RUN: not aicf train %S/inputs/own-gradient.mlir.txt --batch 16 --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --no-progress --out %t/own16 2>&1 | FileCheck %s --check-prefix=OWNGRAD
// OWNGRAD: aicf: error: {{.*}}own-gradient.mlir.txt: not a model to compile as it is:
// OWNGRAD-NEXT: {{.*}}own-gradient.mlir.txt:9:1: error: the model is differentiated already (@loss_grad): training differentiates @loss itself and appends the optimizer; give the model without it (remove or rename it)
// A model as MLIR bytecode (aicf-opt --emit-bytecode) trains as its text
// does, and its errors name the places the bytecode kept (it was "not
// UTF-8 text").
// RUN: aicf-opt %S/../../../examples/mlp/digits_mlp.mlir --emit-bytecode -o %t/mlp.mlirbc
// RUN: aicf train %t/mlp.mlirbc --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --no-progress --out %t/bytecode 2>&1 | FileCheck %s --check-prefix=BYTECODE
// BYTECODE: final held-out accuracy
// RUN: aicf-opt %S/inputs/own-gradient.mlir.txt --emit-bytecode -o %t/own.mlirbc
// RUN: not aicf compile %t/own.mlirbc -o %t/own-bc.aicf 2>&1 | FileCheck %s --check-prefix=OWNBYTECODE
// OWNBYTECODE: aicf: error: {{.*}}own.mlirbc: not a model to compile as it is:
// OWNBYTECODE-NEXT: {{.*}}own-gradient.mlir.txt:9:1: error: the model is differentiated already (@loss_grad)
// A data parameter whose values no file names is the model's mistake, at
// the parameter (it read "not supported yet", unlocated).
// RUN: not aicf compile %S/inputs/data-no-weights.mlir.txt -o %t/noweights.aicf 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// NOWEIGHTS: aicf: error: {{.*}}data-no-weights.mlir.txt: not a model to compile as it is:
// NOWEIGHTS-NEXT: {{.*}}data-no-weights.mlir.txt:2:1: error: parameter @fc.w is `init <data>` but the module has no `hl.weights` attribute naming the file that holds it
// A run whose final held-out loss is above a uniform guess's, ln(classes),
// ends as it did, and says so (an LM at 24 times ln 65 ended as a normal
// result); a run that learnt says nothing of it.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 5 --gemm generated --epochs 2 --no-runs-db --no-progress --out %t/guess 2>&1 | FileCheck %s --check-prefix=GUESS
// GUESS: note: the final held-out loss {{[0-9.]+}} nats is above a uniform guess's over the model's 10 classes (ln 10 = 2.3026): the model predicts the held-out data worse than guessing; training did not converge; lower the learning rate
// Activations past the machine's memory name their largest tensor and the
// op that writes it, with what shrinks them (the error named no op).
// RUN: not aicf train %S/inputs/big-activation.mlir.txt --data %S/inputs/rows-of-8.npy --no-runs-db --out %t/bigact 2>&1 | FileCheck %s --check-prefix=BIGACT
// BIGACT: aicf: error: the arena of @{{[a-z_]+}}, the largest of 3 functions' (the largest tensor in them, 238.4 GiB, is read or written by 'll.reduce' of {{.*}}big-activation.mlir.txt:6:10; a smaller --batch or a --memory-budget shrinks activations): {{.*}} of memory needed; this machine has
// Dropout's seed and offset written as @loss's first arguments are named
// at the op, with where they go (they were taken for data: "1 arrays for
// the model's 3 inputs").
// RUN: not aicf train %S/inputs/dropout-seed-first.mlir.txt --data %S/inputs/vae-x.npy --no-runs-db --out %t/seedfirst 2>&1 | FileCheck %s --check-prefix=SEEDFIRST
// SEEDFIRST: aicf: error: {{.*}}dropout-seed-first.mlir.txt:5:8: 'hl.dropout' reads its seed and offset from @loss's arguments #0 and #1; the training loop passes them as @loss's last two arguments
// The advice fits the cause: a warm-up as long as the run, or a run of
// one step, trains longer (it said to lower the rate, whatever the cause).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule cosine --warmup-steps 100000 --no-runs-db --no-progress --out %t/warm 2>&1 | FileCheck %s --check-prefix=WARMGUESS
// WARMGUESS: worse than guessing; training did not converge; the warm-up (100000 steps) covers the whole run (45 steps), so the rate was below --lr until its end: shorten --warmup-steps or train longer
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --flops-budget 1 --no-runs-db --no-progress --out %t/short 2>&1 | FileCheck %s --check-prefix=SHORTGUESS
// SHORTGUESS: worse than guessing; training did not converge; it took only 1 step: train longer (more epochs, rows or windows), and if that does not help, lower the learning rate
// Arrays far from unit scale (16-bit pixels) that then train worse than a
// guess are told to be scaled, as the note before training said (the
// advice was to lower the rate); uint16 pixels and int8 labels read.
// RUN: gzip -dc %S/../../../data/digits.csv.gz | python3 -c "import sys, struct; rows = [[float(c) for c in l.split(',')] for l in sys.stdin if l.strip()]; head = lambda d, s: (lambda h: b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h)(((\"{'descr': '%%s', 'fortran_order': False, 'shape': %%s, }\" %% (d, s)).ljust(117) + '\n').encode()); open(sys.argv[1], 'wb').write(head('<u2', '(%%d, 64)' %% len(rows)) + b''.join(struct.pack('<64H', *[int(v * 4000) for v in r[:64]]) for r in rows)); open(sys.argv[2], 'wb').write(head('|i1', '(%%d,)' %% len(rows)) + bytes(int(r[64]) for r in rows))" %t/pixels-u16.npy %t/labels-i8.npy
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/pixels-u16.npy --data %t/labels-i8.npy --epochs 2 --no-runs-db --no-progress --out %t/unscaled 2>&1 | FileCheck %s --check-prefix=UNSCALED
// UNSCALED: note: {{.*}}pixels-u16.npy: input #0's values are at a scale of
// UNSCALED: worse than guessing; training did not converge; the inputs are far from a scale of 1 (the note before training says which and how to scale them): scale them before lowering the learning rate
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --no-progress --out %t/learnt 2>&1 | FileCheck %s --check-prefix=LEARNT
// LEARNT-NOT: uniform guess
// LEARNT: final held-out accuracy
// LEARNT-NOT: uniform guess
// Flags that would change nothing are refused: the collectives' settings
// without --data-parallel, --timing with --emit.
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --bucket-size 1K --steps 1 --out %t/bench 2>&1 | FileCheck %s --check-prefix=BUCKETALONE
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --collective-timeout 5 --out %t/run 2>&1 | FileCheck %s --check-prefix=TIMEOUTALONE
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --timing --emit fused 2>&1 | FileCheck %s --check-prefix=TIMINGEMIT
// BUCKETALONE: aicf: error: --bucket-size sets a data-parallel run's all-reduces: `aicf bench` without --data-parallel has none
// TIMEOUTALONE: aicf: error: --collective-timeout sets a data-parallel run's all-reduces: `aicf train` without --data-parallel has none
// bench times one process: --nproc is said to be mpirun's there (clap
// read it as an unknown flag and tipped to pass it as a value).
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --nproc 2 2>&1 | FileCheck %s --check-prefix=BENCHNPROC
// BENCHNPROC: aicf: error: --nproc 2: bench times one process's step; {{.*}}mpirun -n 2 aicf bench MODEL --data-parallel
// TIMINGEMIT: aicf: error: --timing times the compile to an artifact; with --emit nothing is compiled to time
// A trace that cannot be written (procfs takes no new file, even from root)
// is found before the benchmark runs, by its flag; a printed stage's
// missing directories are made.
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 1 --trace /proc/aicf-trace.json --out %t/bench 2>&1 | FileCheck %s --check-prefix=TRACEUNWRITABLE
// TRACEUNWRITABLE: aicf: error: --trace /proc/aicf-trace.json: cannot be written:
// TRACEUNWRITABLE-NOT: median
// RUN: rm -f %t/trace.fifo && mkfifo %t/trace.fifo
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 1 --trace %t/trace.fifo --out %t/bench 2>&1 | FileCheck %s --check-prefix=TRACEFIFO
// TRACEFIFO: aicf: error: --trace {{.*}}trace.fifo: not a regular file (a device, pipe or socket): an output is written to a file, and is not replaced
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit hl -o %t/emitted/new/dir/out.mlir
// RUN: FileCheck %s --check-prefix=EMITNEWDIR < %t/emitted/new/dir/out.mlir
// EMITNEWDIR: func.func @forward
// A FIFO given as eval's --data is refused before anything reads it (it
// is read more than once; a single writer left eval waiting).
// RUN: rm -f %t/fifo.csv && mkfifo %t/fifo.csv
// RUN: touch %t/unread.safetensors
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/fifo.csv --checkpoint %t/unread.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=FIFODATA
// FIFODATA: aicf: error: --data {{.*}}fifo.csv: not a regular file (a device, pipe or socket); it is read from a file
// RUN: test ! -e %t/run && test ! -e %t/bench
//
// LR: aicf: error: the learning rate -1 is not a finite number of at least 0
// LRNAN: aicf: error: the learning rate NaN is not a finite number of at least 0
// MOMENTUM: aicf: error: the momentum -5 is not in [0, 1)
// MOMENTUMNAN: aicf: error: the momentum NaN is not in [0, 1)
// DECAY: aicf: error: the weight decay -1 is not a number of at least 0
// TF32: error: --allow-tf32 is for CUDA devices: on the CPU f32 GEMMs compute in f32
// STEPS: aicf: error: --steps must be at least 1
// ACCZERO: '0': micro-batches per step are a whole number from 1 to 65536
// A machine without the clang the CPU backend compiles its kernels with
// (a GPU machine, say): the machine's to fix, not an internal error.
// NOCLANG-NOT: internal compiler error
// NOCLANG: aicf: error: AICF_CLANG={{.*}}no-clang: no such program; the CPU backend compiles its kernels with it
// NOCLANG-NOT: internal compiler error

// Data: a NaN cell, a label past the model's classes (in training and in
// scoring), each refused before compiling. Fewer rows than one batch train
// on variants compiled for their sizes.
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,100p > %t/digits.csv
// RUN: sed '7s/^[0-9.]*,/nan,/' %t/digits.csv > %t/nan.csv
// RUN: sed '5s/,[0-9]*$/,42/' %t/digits.csv > %t/label.csv
// RUN: sed -n 1,20p %t/digits.csv > %t/short.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/nan.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/label.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=LABEL
// RUN: test ! -e %t/run
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/short.csv --epochs 2 --out %t/short | FileCheck %s --check-prefix=SHORT
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/short.csv --epochs 2 --accumulate 2 --out %t/short-acc | FileCheck %s --check-prefix=SHORTACC
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/run --checkpoint-dir %t/ckpt > /dev/null
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/label.csv --checkpoint %t/ckpt/last.safetensors --out %t/run 2>&1 | FileCheck %s --check-prefix=LABEL
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/nan.csv --checkpoint %t/ckpt/last.safetensors --out %t/run 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: aicf: error: {{.*}}nan.csv:7: column 1 is NaN, not a finite number
// LABEL: aicf: error: {{.*}}label.csv:5: the label 42 is not a class of the model's 10 (0 to 9)
// LABEL-NOT: subtract
// Labels counted from 1 (R's, MATLAB's) are told to count from 0.
// RUN: awk -F, -v OFS=, '{$65 = $65 + 1; print}' %t/digits.csv > %t/from-one.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/from-one.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=FROMONE
// FROMONE: the label 10 is not a class of the model's 10 (0 to 9): the labels run from 1 to 10; classes count from 0 here, so subtract 1 from each label
// Other data is read as the run read its table, divided by its scale:
// said (arrays already scaled were divided again, unsaid).
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/short.csv --checkpoint %t/ckpt/last.safetensors --out %t/run 2>&1 | FileCheck %s --check-prefix=SCALED
// SCALED: note: {{.*}}short.csv: the features are divided by 16, the scale the checkpoint's run read its table with
// SCALED: accuracy {{.*}} on 20 rows of
// A cell that is not a number is named by its column; a first row of
// names is a header (below); a row of empty
// cells is refused (it was dropped without a word); gzip data under a name
// without .gz is named as such (it read as "invalid utf-8").
// RUN: (printf 'f%%s,' $(seq 1 64); echo label; cat %t/digits.csv) > %t/header.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/header.csv --epochs 1 --no-runs-db --out %t/run 2>&1 | FileCheck %s --check-prefix=HEADER
// RUN: sed '3s/^[0-9.]*,/x,/' %t/digits.csv > %t/word.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/word.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=WORD
// RUN: (sed -n 1,10p %t/digits.csv; echo ',,,'; sed -n 11,40p %t/digits.csv) > %t/commas.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/commas.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=COMMAS
// RUN: cp %S/../../../data/digits.csv.gz %t/zipped.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/zipped.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=ZIPPED
// A header of names, none a number, is read as one and said (it was
// refused): the rows after it train as the table without it would.
// HEADER: note: {{.*}}header.csv: its first row (f1, f2, f3, f4, f5, f6, ... (65 names)) is read as the column names, not a row of data
// HEADER: training on {{[0-9]+}} examples
// A first row of names and numbers is refused, with the hint.
// RUN: (printf 'f%%s,' $(seq 1 63); printf '7,label\n'; cat %t/digits.csv) > %t/half-header.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/half-header.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=HALFHEADER
// HALFHEADER: aicf: error: {{.*}}half-header.csv:1: column 1 is 'f1': invalid float literal (a header row? AICF reads tables of numbers alone, without one)
// pandas' column names are numbers (`DataFrame(a).to_csv(index=False)`
// writes 0, 1, ..., 64 first): they were read as a row of data.
// RUN: (seq -s, 0 64; cat %t/digits.csv) > %t/numbered.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/numbered.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=NUMBERED
// NUMBERED: aicf: error: {{.*}}numbered.csv:1: the first row is 0, 1, 2, ..., 64: the column names pandas writes (a header row); AICF reads tables of numbers alone: write it with to_csv(header=False, index=False), or remove the row
// RUN: (printf ','; seq -s, 0 64; awk '{print NR-1 "," $0}' %t/digits.csv) > %t/indexed.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/indexed.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=INDEXED
// INDEXED: aicf: error: {{.*}}indexed.csv:1: the first row is an empty cell, then 0, 1, 2, ..., 64: the column names pandas writes (a header row, and an index column)
// WORD: aicf: error: {{.*}}word.csv:3: column 1 is 'x': invalid float literal
// A column of categories, and a regression's targets given to a
// classifier, say what to do (neither did).
// RUN: awk -F, -v OFS=, '{$5 = "green"; print}' %t/digits.csv > %t/category.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/category.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=CATEGORY
// CATEGORY: aicf: error: {{.*}}category.csv:1: column 5 is 'green': invalid float literal (words among the numbers? AICF reads tables of numbers alone: a column of categories is encoded as numbers
// RUN: awk -F, -v OFS=, '{$65 = $65 + 0.5; print}' %t/digits.csv > %t/targets.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/targets.csv --out %t/run 2>&1 | FileCheck %s --check-prefix=FLOATLABEL
// FLOATLABEL: aicf: error: {{.*}}targets.csv:1: the label 0.5 is not a class index; the model is a classifier {{.*}}`aicf propose --data FILE --task regression` writes one
// WORD-NOT: header
// COMMAS: aicf: error: {{.*}}commas.csv:11: column 1 is empty
// ZIPPED: aicf: error: {{.*}}zipped.csv: gzip-compressed data under a name without .gz
// SHORT: training on 16 examples (4 held out), batch 16, 1 step per epoch
// SHORTACC: training on 16 examples (4 held out), batch 16, 1 step per epoch, {{.*}}accumulating 2 micro-batches of 32
// SHORTACC: epoch   2/2
// SHORT: epoch   2/2  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy

// Paths that cannot be written are named, before training.
// RUN: printf 'x' > %t/file
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --out %t/run2 --checkpoint-dir %t/file/ckpt 2>&1 | FileCheck %s --check-prefixes=BLOCKED,CKPTFLAG
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --out %t/file/run 2>&1 | FileCheck %s --check-prefixes=BLOCKED,OUTFLAG
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --out %t/run2 --profile %t/file/trace.json 2>&1 | FileCheck %s --check-prefix=BLOCKED
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir -o %t/file/artifact 2>&1 | FileCheck %s --check-prefix=NOTDIR
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit hl -o %t/file/x.mlir 2>&1 | FileCheck %s --check-prefix=BLOCKED
// RUN: not aicf import %S/../../onnx/mlp.onnx --batch 4 -o %t/file/x.mlir 2>&1 | FileCheck %s --check-prefix=BLOCKED
// RUN: test ! -e %t/run2
// BLOCKED: aicf: error: {{.*}}file{{.*}}: cannot create the directory: {{.*}}file is a file
// CKPTFLAG-SAME: (--checkpoint-dir)
// OUTFLAG-SAME: (--out)
// BLOCKED-NOT: compiled
// NOTDIR: aicf: error: {{.*}}file/artifact: the artifact is a directory, and {{.*}}file is a file

// --emit with -o writes the IR to the file.
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit ll -o %t/model.ll.mlir
// RUN: FileCheck %s --check-prefix=EMITTED < %t/model.ll.mlir
// EMITTED: func.func @train_step

// A model with an empty hidden layer, or no classes, is refused where the
// empty tensor is declared: nothing is compiled that would run on it.
// RUN: sed 's/128/0/g' %S/../../../examples/mlp/digits_mlp.mlir > %t/empty.mlir
// RUN: not aicf train %t/empty.mlir --data %t/digits.csv --out %t/run3 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not aicf bench %t/empty.mlir --steps 1 --out %t/run3 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: empty.mlir:11:1: error: 'hl.param' op parameter @fc1.weight has a zero-size dimension ('tensor<0x64xf32>'); a parameter holds at least one value

// An empty model file is named as one by compile (it used to say "no
// function @loss" at :0:0) and by train.
// RUN: : > %t/nothing.mlir
// RUN: not aicf compile %t/nothing.mlir -o %t/nothing.aicf 2>&1 | FileCheck %s --check-prefix=NOTHING
// RUN: not aicf train %t/nothing.mlir --data %t/digits.csv --out %t/run4 2>&1 | FileCheck %s --check-prefix=NOTHINGTRAIN
// NOTHING: nothing.mlir: the file is empty; a model is an hl module with func.func @loss (and @forward)
// NOTHINGTRAIN: nothing.mlir: the model has no @loss to train

// A run that holds nothing out says "n/a" for its held-out figures (not
// NaN); a policy that waits for a held-out plateau is refused there, since
// it could never act.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --val-split 0 --epochs 1 --out %t/noheld | FileCheck %s --check-prefix=NOHELD
// RUN: printf '[[rule]]\nwhen = "val-plateau"\nwindow = 2\nthreshold = 0.01\naction = { op = "widen", layer = "fc1", factor = 2.0 }\n' > %t/val-plateau.toml
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --val-split 0 --epochs 1 --adapt %t/val-plateau.toml --out %t/noheld2 2>&1 | FileCheck %s --check-prefix=NOHELDPOLICY
// NOHELD: training on 100 examples (0 held out)
// NOHELD-NOT: NaN
// NOHELD: epoch   1/1  train loss {{[0-9.]+}}  val loss n/a  (
// NOHELD-NOT: NaN
// NOHELD: final held-out figures n/a (no held-out examples: --val-split 0)
// NOHELDPOLICY: val-plateau.toml: policy rule 1 triggers on a held-out plateau (val-plateau), but the run holds no examples out (--val-split); use the training-loss plateau (plateau) or hold some out

// A device is no data file (/dev/zero would be read forever); a policy's
// unknown trigger is named as such; no epoch to run writes no figures; a
// global batch larger than the data says what a step takes.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data /dev/zero --out %t/dev 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: aicf: error: /dev/zero: not a regular file (a device, pipe or socket); it is read from a file
// Nor is a FIFO a policy, a model or a checkpoint (read twice: a pipe's
// second read was empty, a policy without rules; one with no writer hung),
// nor a device a checkpoint (it panicked on a size of 0).
// RUN: rm -f %t/fifo && mkfifo %t/fifo
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --adapt %t/fifo --out %t/fifo-run 2>&1 | FileCheck %s --check-prefix=FIFOPOLICY
// FIFOPOLICY: aicf: error: --adapt {{.*}}fifo: not a regular file (a device, pipe or socket); it is read from a file
// Nor a registry or a profile (the run waited for a reader, past a
// SIGTERM), nor an import's output.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --profile %t/fifo --out %t/fifo-run 2>&1 | FileCheck %s --check-prefix=FIFOPROFILE
// FIFOPROFILE: aicf: error: --profile {{.*}}fifo: not a regular file (a device, pipe or socket): an output is written to a file, and is not replaced
// A device takes a trace as it is.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --profile /dev/null --out %t/devnull-run --no-runs-db --no-progress | FileCheck %s --check-prefix=DEVNULL
// DEVNULL: final held-out accuracy
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --runs-db %t/fifo --out %t/fifo-run 2>&1 | FileCheck %s --check-prefix=FIFODB
// FIFODB: aicf: error: --runs-db {{.*}}fifo: not a regular file
// RUN: not aicf runs list --runs-db %t/fifo 2>&1 | FileCheck %s --check-prefix=FIFODB
// RUN: not aicf import %S/../../onnx/mlp.onnx -o %t/fifo 2>&1 | FileCheck %s --check-prefix=FIFOIMPORT
// FIFOIMPORT: aicf: error: -o {{.*}}fifo: not a regular file
// A checkpoint directory whose last.safetensors is a FIFO is named as such
// (it was "a directory that holds no last.safetensors").
// RUN: rm -rf %t/fifo-ck && mkdir -p %t/fifo-ck && mkfifo %t/fifo-ck/last.safetensors
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/fifo-ck --out %t/fifo-run 2>&1 | FileCheck %s --check-prefix=FIFOLAST
// FIFOLAST: aicf: error: --checkpoint {{.*}}fifo-ck: its last.safetensors is not a regular file (a directory, device, pipe, or a link to one or to nothing)
// A file where the kernel cache's directory goes is named as such (it
// was "File exists").
// RUN: rm -rf %t/kc && mkdir -p %t/kc && touch %t/kc/kernels
// RUN: not env AICF_CACHE_DIR=%t/kc aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/kc-run --no-runs-db 2>&1 | FileCheck %s --check-prefix=CACHEFILE
// CACHEFILE: aicf: error: {{.*}}kc/kernels: a file where the kernel cache's directory goes: move it (the kernel cache, chosen by AICF_CACHE_DIR; point it at a writable directory)
// RUN: not aicf compile %t/fifo 2>&1 | FileCheck %s --check-prefix=FIFOMODEL
// FIFOMODEL: aicf: error: the model {{.*}}fifo: not a regular file (a device, pipe or socket); it is read from a file
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint /dev/zero --out %t/s 2>&1 | FileCheck %s --check-prefix=DEVCKPT
// DEVCKPT: aicf: error: --checkpoint /dev/zero: not a regular file (a device, pipe or socket); it is read from a file
// RUN: printf '[[rule]]\nwhen = "sometimes"\nwindow = 3\naction = "rollback"\n' > %t/trigger.toml
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --adapt %t/trigger.toml --out %t/trig 2>&1 | FileCheck %s --check-prefix=TRIGGER
// TRIGGER: trigger.toml: policy rule 1: unknown trigger when = "sometimes" (epoch, steps, flops, plateau, val-plateau, instability)
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 0 --out %t/zero | FileCheck %s --check-prefix=ZEROEPOCHS
// ZEROEPOCHS-NOT: final held-out
// ZEROEPOCHS: no epoch trained, so no held-out figures: {{.*}}metrics.jsonl holds no epoch, and no plot is drawn
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --accumulate 10 --out %t/accum 2>&1 | FileCheck %s --check-prefix=ACCUM
// ACCUM: note: the global batch of 320 is larger than the 80 training examples: every step takes all of them (only 3 of its 10 micro-batches of 32 hold examples, the others none; --accumulate 3 would do the same)
// ACCUM: training on 80 examples (20 held out), batch 80, 1 step per epoch, {{.*}}, accumulating 10 micro-batches of 32
// ACCUM: final held-out accuracy {{.*}} after 1 epoch (1 step, training
// The suggestion only where it asks fewer micro-batches than given (it
// suggested the very --accumulate 3).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --accumulate 3 --out %t/accum3 2>&1 | FileCheck %s --check-prefix=ACCUM3
// ACCUM3: note: the global batch of 96 is larger than the 80 training examples: every step takes all of them (3 micro-batches of 32 hold examples)
// ACCUM3-NOT: would do the same
// A held-out end too short for one whole window is refused (--eval-windows
// 0 asks for no held-out score); fewer windows than a batch are scored by a
// variant of their size.
// RUN: head -c 300 %S/../../../data/tinyshakespeare.txt > %t/short.txt
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/short.txt --epochs 1 --out %t/short 2>&1 | FileCheck %s --check-prefix=NOWINDOW
// NOWINDOW: aicf: error: 300 tokens of {{.*}}short.txt {{.*}}: the held-out part holds no whole window: a larger held-out fraction (--val-split) or a longer text (--val-split 0 holds none out; --eval-windows 0 scores none)
// Counts past any run are refused where they are given, not overflowed.
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 18446744073709551615 --out %t/b 2>&1 | FileCheck %s --check-prefix=BENCHSTEPS
// BENCHSTEPS: aicf: error: --steps 18446744073709551615: at most 10000000
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 18446744073709551615 --out %t/e 2>&1 | FileCheck %s --check-prefix=EPOCHS
// EPOCHS: aicf: error: 18446744073709551615 epochs: at most 1000000000
// RUN: printf '[[rule]]\nwhen = "plateau"\nwindow = 9223372036854775807\nthreshold = 0.1\naction = "rollback"\n' > %t/window.toml
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --adapt %t/window.toml --out %t/e 2>&1 | FileCheck %s --check-prefix=WINDOW
// WINDOW: window.toml: policy rule 1: window = 9223372036854775807: at most 1000000000
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 10\naction = { fork = [ { op = "widen", layer = "fc1", width = 160 } ], steps = 9223372036854775807 }\n' > %t/fork.toml
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --adapt %t/fork.toml --out %t/e 2>&1 | FileCheck %s --check-prefix=FORK
// FORK: fork.toml: policy rule 1: a fork of steps = 9223372036854775807: each candidate trains at most 100000 steps
// An optimizer or schedule setting the chosen one does not take is an
// error, not ignored.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --momentum 0.9 --out %t/e 2>&1 | FileCheck %s --check-prefix=ADAMMOMENTUM
// ADAMMOMENTUM: aicf: error: --momentum 0.9 is SGD's; Adam's and AdamW's moments are set by --betas
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --optimizer sgd --betas 0.5,0.5 -o %t/c.aicf 2>&1 | FileCheck %s --check-prefix=SGDBETAS
// SGDBETAS: aicf: error: --betas are Adam's and AdamW's; SGD's is --momentum
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --min-lr-factor 0.5 --out %t/e 2>&1 | FileCheck %s --check-prefix=MINLR
// MINLR: aicf: error: --min-lr-factor is the cosine and wsd schedules': add --lr-schedule cosine or wsd
// (A negative norm: 0 is none, as Hugging Face's max_grad_norm=0.)
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --clip-norm -1 -o %t/c.aicf 2>&1 | FileCheck %s --check-prefix=COMPILECLIP
// COMPILECLIP: aicf: error: the gradient clipping norm -1 is not a positive number
// A policy that cannot act in the run says so before training.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 1000\naction = { op = "widen", layer = "fc1", width = 160 }\n' > %t/late.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --adapt %t/late.toml --out %t/late 2>&1 | FileCheck %s --check-prefix=LATE
// LATE: note: policy rule 1 fires at step 1000, after this run's last step (6): it never acts
// RUN: printf '[[rule]]\nwhen = "epoch"\nevery = 50\naction = { op = "widen", layer = "fc1", width = 160 }\n[[rule]]\nwhen = "flops"\nflops = 1e12\naction = { op = "widen", layer = "fc1", width = 256 }\n' > %t/late2.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --flops-budget 1e9 --adapt %t/late2.toml --out %t/late2 2>&1 | FileCheck %s --check-prefix=LATE2
// LATE2: note: policy rule 1 fires every 50 epochs, more than this run's 2: it never acts
// LATE2: note: policy rule 2 fires at 1.000e12 training FLOPs, past this run's --flops-budget 1.000e9: it never acts
// RUN: printf 'age_bias_correction = true\n[[rule]]\nwhen = "steps"\nat = 3\naction = { op = "widen", layer = "fc1", width = 160 }\n' > %t/ages.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --optimizer sgd --adapt %t/ages.toml --out %t/ages 2>&1 | FileCheck %s --check-prefix=SGDAGES
// SGDAGES: note: the policy's age_bias_correction serves Adam's bias corrections; sgd has none, so it does nothing in this run
// RUN: touch %t/empty.toml
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --adapt %t/empty.toml --out %t/emptypolicy 2>&1 | FileCheck %s --check-prefix=EMPTYPOLICY
// EMPTYPOLICY: note: the policy has no rules: the run trains as without --adapt
// A gzip file of two members (two files joined with `cat`, as bgzip writes
// them) is read whole, as zcat reads it (only the first member was read:
// 60 of the 100 rows, silently); bytes after the last member that are no
// gzip data are an error naming the file.
// RUN: head -60 %t/digits.csv | gzip -c > %t/first.gz && tail -n +61 %t/digits.csv | gzip -c > %t/second.gz
// RUN: cat %t/first.gz %t/second.gz > %t/joined.csv.gz
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/joined.csv.gz --epochs 1 --out %t/joined | FileCheck %s --check-prefix=MEMBERS
// RUN: cp %t/first.gz %t/trailing.csv.gz && printf 'garbage!garbage' >> %t/trailing.csv.gz
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/trailing.csv.gz --epochs 1 --out %t/trailing 2>&1 | FileCheck %s --check-prefix=TRAILING
// MEMBERS: data: 100 rows of 64 features and a label
// TRAILING: aicf: error: {{.*}}trailing.csv.gz: not whole gzip data:
// A huge --windows-per-epoch is refused by its flag (the epoch's order was
// allocated whole: a capacity-overflow panic, or an abort on 80 TB); a
// --nproc past this machine's processes too (1000 swamped 2 cores); a
// profile the run is too short for is said, not a file silently missing.
// RUN: head -c 20000 %S/../../../data/tinyshakespeare.txt > %t/wpe.txt
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/wpe.txt --epochs 1 --windows-per-epoch 10000000000000 --out %t/wpe 2>&1 | FileCheck %s --check-prefix=WPE
// WPE: aicf: error: --windows-per-epoch 10000000000000: at most 134217728 (an epoch's order is held in memory; train more epochs instead)
// RUN: : > %t/empty.txt
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/empty.txt --epochs 1 --out %t/empty-text 2>&1 | FileCheck %s --check-prefix=EMPTYTEXT
// EMPTYTEXT: aicf: error: {{.*}}empty.txt: the file is empty: a text to train on or score holds at least one window of tokens
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/wpe.txt --epochs 1 --out %t/nproc --nproc 100000 2>&1 | FileCheck %s --check-prefix=NPROC
// NPROC: aicf: error: --nproc 100000: at most {{[0-9]+}} on this machine (16 per core)
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/wpe.txt --epochs 1 --windows-per-epoch 16 --eval-windows 16 --out %t/short-prof --profile %t/short-prof.json --no-progress 2>&1 | FileCheck %s --check-prefix=SHORTPROF
// RUN: not test -e %t/short-prof.json
// SHORTPROF: note: {{.*}}short-prof.json: not written: the run's 1 steps all went to the profile's warm-up (2 steps), none was profiled
// A trace under a regular file names the file (it said "File exists").
// RUN: touch %t/plain-file
// RUN: not aicf bench %S/../../../examples/mlp/digits_mlp.mlir --steps 2 --trace %t/plain-file/t.json --out %t/bench-trace 2>&1 | FileCheck %s --check-prefix=TRACEFILE
// TRACEFILE: aicf: error: --trace {{.*}}plain-file/t.json: {{.*}}plain-file is a file, not a directory to write it in
// Data a model would learn little from is said before training, and where
// a cell cannot be read the message says what the row looks like.
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } { $4 = NR * 0.6 } 1' > %t/scales.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/scales.csv --epochs 1 --no-runs-db --out %t/scales 2>&1 | FileCheck %s --check-prefix=SCALES
// SCALES: note: {{.*}}scales.csv: feature 3 (counting from 0) of input #0 reaches 1.0782e3, 6.7e1 times the median feature's largest magnitude (1.6000e1): training with --standardize reads each feature at mean 0 and deviation 1, as otherwise a table's features are divided by one shared scale, so the others are all but lost
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } { $NF = $NF * 1e10 + NR } 1' > %t/huge-targets.csv
// RUN: aicf propose --data %t/huge-targets.csv --structure "mlp 16" -o %t/huge-targets.mlir --runs-db %t/none.sqlite > /dev/null
// RUN: aicf train %t/huge-targets.mlir --data %t/huge-targets.csv --epochs 1 --no-runs-db --out %t/huge-targets 2>&1 | FileCheck %s --check-prefix=TARGETS
// TARGETS: note: {{.*}}huge-targets.csv: the targets (input #1) have mean {{.*}} and standard deviation {{.*}}e10; a squared error at that scale overflows, stalls or reads as perfect in f32: --standardize-targets reads them at mean 0 and deviation 1
// Targets around 5000 (a price, a count) are said too (they trained to a
// squared error of 9e5 in 30 epochs, unsaid); targets at about 1 are not.
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } { $NF = 5000 + $NF } 1' > %t/offset-targets.csv
// RUN: aicf train %t/huge-targets.mlir --data %t/offset-targets.csv --epochs 1 --no-runs-db --out %t/offset-targets 2>&1 | FileCheck %s --check-prefix=OFFSET
// OFFSET: note: {{.*}}offset-targets.csv: the targets (input #1) have mean 5.0045e3 and standard deviation
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } { $NF = $NF / 9 } 1' > %t/unit-targets.csv
// RUN: aicf train %t/huge-targets.mlir --data %t/unit-targets.csv --epochs 1 --no-runs-db --out %t/unit-targets 2>&1 | FileCheck %s --check-prefix=UNIT
// UNIT-NOT: the targets (input
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } NR == 51 { $NF = -1 } 1' > %t/one-bad-label.csv
// RUN: aicf propose --data %t/one-bad-label.csv --structure "mlp 16" -o %t/one-bad-label.mlir --runs-db %t/none.sqlite 2>&1 | FileCheck %s --check-prefix=BADLABEL
// BADLABEL: note: {{.*}}one-bad-label.csv:51: the target -1 is no class index (a whole number from 0 to 65535); 1 of the 1797 rows' targets is not, so the table reads as a regression problem; if its last column holds classes, fix those rows
// RUN: not aicf propose --data %t/one-bad-label.csv --task classification --structure "mlp 16" -o %t/one-bad-label.mlir --runs-db %t/none.sqlite 2>&1 | FileCheck %s --check-prefix=BADLABELTASK
// BADLABELTASK: aicf: error: {{.*}}one-bad-label.csv: reads as a regression problem, not classification: {{.*}}one-bad-label.csv:51: the target -1 is no class index
// Whole-number targets that are no class indices (here -1 and 1) read as a
// regression, said, as classes numbered otherwise are as likely.
// RUN: printf '1,2,1\n3,4,-1\n5,6,1\n7,8,-1\n1,1,1\n2,2,-1\n' > %t/signs.csv
// RUN: aicf propose --data %t/signs.csv --structure "mlp 16" -o %t/signs.mlir --runs-db %t/none.sqlite 2>&1 | FileCheck %s --check-prefix=SIGNS
// SIGNS: note: {{.*}}signs.csv:2: the target -1 is no class index (a whole number from 0 to 65535); 3 of the 6 rows' targets are not, so the table reads as a regression problem although every target is a whole number; if they are classes, number them from 0
// (A first line of ';' or tabs is read so: table-columns.mlir.)
// RUN: printf '1|2|3\n' > %t/pipes.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/pipes.csv --no-runs-db --out %t/semi 2>&1 | FileCheck %s --check-prefix=SEMI
// SEMI: aicf: error: {{.*}}pipes.csv:1: column 1 is '1|2|3': invalid float literal (AICF reads comma-separated values, and this cell holds ';', a tab or '|': another separator?)
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } { $NF = "dog" } 1' > %t/named-labels.csv
// Labels by name are classes (named-labels.mlir): one name is one class,
// said with the classes the model has that no row is.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/named-labels.csv --epochs 1 --no-runs-db --no-progress --out %t/named 2>&1 | FileCheck %s --check-prefix=NAMED
// NAMED: note: {{.*}}named-labels.csv: its labels are names, read as classes in sorted order: 0 = 'dog'
// NAMED: note: {{.*}}named-labels.csv: the training rows hold 1 label of the model's 10 classes (0)
// RUN: gzip -dc %S/../../../data/digits.csv.gz | awk -F, 'BEGIN { OFS = "," } NR == 5 { $NF = "dog" } 1' > %t/named-label.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/named-label.csv --no-runs-db --out %t/named 2>&1 | FileCheck %s --check-prefix=NAMED5
// NAMED5: aicf: error: {{.*}}named-label.csv:5: column 65 is 'dog': invalid float literal (the last column is the label or target: class indices 0, 1, ... or numbers; map names to numbers first)
// A line ends at a lone carriage return too, as the CSV reader reads it:
// such a table trains (its width is checked line by line).
// RUN: gzip -dc %S/../../../data/digits.csv.gz | tr '\n' '\r' > %t/cr.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/cr.csv --epochs 1 --no-runs-db --out %t/cr 2>&1 | FileCheck %s --check-prefix=CR
// CR: data: 1797 rows of 64 features and a label
// RUN: printf '\033[31mred,1\n' > %t/escape.csv
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/escape.csv --no-runs-db --out %t/esc 2>&1 | FileCheck %s --check-prefix=ESCAPE
// ESCAPE: aicf: error: {{.*}}escape.csv:1: column 1 is '\u{1b}[31mred': invalid float literal
// RUN: head -c 80 %S/../../../data/tinyshakespeare.txt > %t/eighty.txt
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/eighty.txt --no-runs-db --out %t/eighty 2>&1 | FileCheck %s --check-prefix=EIGHTY
// EIGHTY: aicf: error: {{.*}}eighty.txt: 64 training tokens, fewer than one window of 65 (the context and the next token); --val-split 0.2 holds out 16 of its 80 tokens
// A row far wider than the model's is refused before the rest is parsed
// (one gzip row of 500 million cells grew past 24 GB before the check).
// RUN: python3 -c "import gzip; gzip.open('%t/wide.csv.gz', 'wb').write(b'1,' * 300000 + b'1\n')"
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/wide.csv.gz --no-runs-db --out %t/wide 2>&1 | FileCheck %s --check-prefix=WIDE
// WIDE: aicf: error: {{.*}}wide.csv.gz:1: rows have 300000 features and a label; the model's input #0 is [32, 64] f32, which takes 64 features per row
// A gzip cut off within a row that wide is said to be cut off (the cells
// read before the cut are not the row's width).
// RUN: python3 -c "import gzip; rows = ''.join(','.join(['0'] * 64) + ',1\n' for _ in range(50)); d = gzip.compress((rows + ','.join(['1'] * 2000000) + '\n').encode()); open('%t/cut.csv.gz', 'wb').write(d[:len(d) // 2])"
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/cut.csv.gz --no-runs-db --out %t/wide 2>&1 | FileCheck %s --check-prefix=WIDECUT
// WIDECUT: aicf: error: {{.*}}cut.csv.gz: not whole gzip data: incomplete deflate stream
// Options that would do nothing in the run are refused, not ignored.
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --override-resume --no-runs-db --out %t/noop 2>&1 | FileCheck %s --check-prefix=NOOPRESUME
// NOOPRESUME: aicf: error: --override-resume goes with --resume or --resume-from
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --profile-steps 3 --no-runs-db --out %t/noop 2>&1 | FileCheck %s --check-prefix=NOOPPROFILE
// NOOPPROFILE: aicf: error: --profile-steps is --profile's: add --profile FILE
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --windows-per-epoch 3 --no-runs-db --out %t/noop 2>&1 | FileCheck %s --check-prefix=NOOPWINDOWS
// NOOPWINDOWS: aicf: error: --windows-per-epoch draws a text's windows; {{.*}}digits.csv is no text (a table's epoch is its rows)
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --eval-windows 4 --no-runs-db --out %t/noop 2>&1 | FileCheck %s --check-prefix=NOOPEVALWINDOWS
// NOOPEVALWINDOWS: aicf: error: --eval-windows samples a text's held-out windows; {{.*}}digits.csv is no text (a table's held-out rows are scored every one)
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --no-shape-padding --emit hl 2>&1 | FileCheck %s --check-prefix=NOPADFP32
// NOPADFP32: note: --no-shape-padding leaves 16-bit contractions unpadded (--precision bf16 or fp16); in fp32 only a model written in bf16 or f16 has any
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir --attention-backward gemm --conv direct --emit hl 2>&1 | FileCheck %s --check-prefix=NOSUCHOPS
// RUN: aicf compile %S/../../../examples/char_lm/char_lm.mlir --attention-backward gemm --emit hl 2>&1 | FileCheck %s --check-prefix=HASATTENTION
// NOSUCHOPS: note: --attention-backward does nothing here: the model has no attention
// NOSUCHOPS: note: --conv does nothing here: the model has no convolution
// HASATTENTION-NOT: does nothing here

// A directory where the checkpoint goes: said as it is, with and without
// --resume (the two messages sent the user to each other).
// RUN: mkdir -p %t/dirckpt/last.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --no-runs-db --checkpoint-dir %t/dirckpt --resume --out %t/dirckpt-run 2>&1 | FileCheck %s --check-prefix=CKPTDIR
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --no-runs-db --checkpoint-dir %t/dirckpt --out %t/dirckpt-run 2>&1 | FileCheck %s --check-prefix=CKPTDIR
// CKPTDIR: aicf: error: {{.*}}dirckpt/last.safetensors: is not a file (a directory?), where the checkpoint directory's checkpoint goes: move it away, or give another --checkpoint-dir
// A compiled artifact given as the model: said as such (it was "Is a
// directory"), and any other directory too.
// RUN: aicf compile %S/../../../examples/mlp/digits_mlp.mlir -o %t/m.aicf > /dev/null
// RUN: not aicf train %t/m.aicf --data %S/../../../data/digits.csv.gz --out %t/art 2>&1 | FileCheck %s --check-prefix=ARTIFACT
// ARTIFACT: aicf: error: {{.*}}m.aicf: a compiled artifact (what `aicf compile` writes), not a model: give the .mlir or .onnx model it was compiled from
// RUN: not aicf bench %t --out %t/art 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: aicf: error: {{.*}}: a directory, not a model file
// A dynamic shape is said as one (it read as "[] i1"), and two modules in
// one file as two (it was "no @loss to train").
// RUN: not aicf train %S/inputs/dynamic.mlir.txt --data %S/../../../data/digits.csv.gz --no-runs-db --out %t/dyn 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// DYNAMIC: aicf: error: {{.*}}dynamic.mlir.txt: @forward's input #0 is tensor<?x64xf32>: a dynamic or unranked shape; AICF compiles static shapes
// RUN: not aicf train %S/inputs/two-modules.mlir.txt --data %S/../../../data/digits.csv.gz --no-runs-db --out %t/two 2>&1 | FileCheck %s --check-prefix=TWOMODULES
// TWOMODULES: two-modules.mlir.txt:{{[0-9]+}}:1: error: the file holds 2 modules; a model is one module
// Output into a closed pipe (it panicked with a backtrace): a run goes on
// with its output dropped, to its end and its checkpoints (a Ctrl-C that
// ends a `| tee` must not end the run before it saves); a short command
// ends quietly, as any Unix tool, on SIGPIPE.
// (Each runs with its stdout a pipe whose reading end is already closed:
// a `| head` that ends before the output comes, every time.)
// (Both stdout and stderr, as `2>&1 | head` has them; the budget's note
// is one more line after the epochs.)
// RUN: python3 -c "import os, subprocess, sys; r, w = os.pipe(); os.close(r); p = subprocess.run(sys.argv[1:], stdout=w, stderr=w); print('status', p.returncode)" aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 30 --flops-budget 1.2e8 --no-runs-db --no-progress --out %t/pipe | FileCheck %s --check-prefix=PIPE
// PIPE: status 0
// RUN: grep -c '"epoch":3' %t/pipe/metrics.jsonl
// RUN: python3 -c "import os, subprocess, sys; r, w = os.pipe(); os.close(r); p = subprocess.run(sys.argv[1:], stdout=w); print('status', p.returncode)" aicf compile %S/../../../examples/mlp/digits_mlp.mlir --emit ll | FileCheck %s --check-prefix=PIPE2
// PIPE2: status -13
// bench feeds a boolean input booleans (the runtime now checks integer
// inputs' values: it fed values in [-1, 1)).
// RUN: aicf bench %S/inputs/masked.mlir.txt --steps 3 --out %t/masked | FileCheck %s --check-prefix=MASKED
// MASKED: masked.mlir.txt: train step (adam, lr 0.001) median
