// ONNX models through the CLI: `aicf import` writes the hl module and its
// weights beside it; `aicf train` imports an .onnx itself (--batch binds
// its symbolic batch dimension, --loss chooses @loss) and fine-tunes the
// exported CNN on the digits; a symbolic batch without --batch, a file that
// is not ONNX and an unknown loss are clear errors.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf import %S/../../onnx/gpt.onnx -o %t/gpt.mlir --batch 4 | FileCheck %s --check-prefix=IMPORT
// --freeze keeps named initializers constant (a TorchScript export's
// buffers, which it does not mark); a name that matches none is refused,
// and an hl model has no initializers to name.
// RUN: aicf import %S/../../onnx/gpt.onnx -o %t/gpt-frozen.mlir --batch 4 --freeze 'pos.weight,blocks.0.ln1*' 2>&1 | FileCheck %s --check-prefix=FREEZE
// FREEZE: note: --freeze keeps 'pos.weight' (512 values), 'blocks.0.ln1.weight' (32 values), 'blocks.0.ln1.bias' (32 values) constant, not trained
// FREEZE: 27 parameters (29633 values)
// RUN: not aicf import %S/../../onnx/gpt.onnx -o %t/gpt-typo.mlir --batch 4 --freeze pos.weights 2>&1 | FileCheck %s --check-prefix=FREEZETYPO
// FREEZETYPO: aicf: error: {{.*}}gpt.onnx: --freeze pos.weights: no initializer of that name (its float initializers include
// RUN: not aicf compile %S/../../../examples/mlp/digits_mlp.mlir --freeze fc1.weight -o %t/hlfreeze 2>&1 | FileCheck %s --check-prefix=FREEZEHL
// FREEZEHL: aicf: error: --freeze names an ONNX model's initializers; {{.*}}digits_mlp.mlir is an hl model, whose hl.params all train
// A batch norm the dynamo exporter's optimizer folded into its convolution
// in training mode is named: the file is not the model PyTorch trains.
// RUN: aicf import %S/../../onnx/bn_folded_dynamo.onnx -o %t/bn.mlir 2>&1 | FileCheck %s --check-prefix=BNFOLD
// BNFOLD: note: the exporter's optimizer folded 1 batch norm into the layer before it (its FuseBatchNorm rewrites): 'bn'; it trains as part of that layer's weights, and it was exported in training mode, where PyTorch normalizes by the batch's statistics, which the folded graph does not do at all: this is not the model PyTorch trains; export with torch.onnx.export(..., dynamo=True, optimize=False) to keep it as PyTorch trains it
// RUN: FileCheck %s --check-prefix=IR < %t/gpt.mlir
// RUN: test -f %t/gpt.weights.safetensors
// RUN: aicf train %S/../../onnx/cnn.onnx --batch 32 --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/run | FileCheck %s --check-prefix=TRAIN
// RUN: aicf train %S/../../onnx/resnet_digits.onnx --batch 32 --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/resnet | FileCheck %s --check-prefix=RESNET
// RUN: aicf train %S/../../onnx/mlp.onnx --batch 32 --data %S/../../../data/digits.csv.gz --epochs 1 --adapt %S/inputs/onnx-widen.toml --out %t/grow | FileCheck %s --check-prefix=GROW
// RUN: FileCheck %s --check-prefix=DECISION < %t/grow/decisions.jsonl
// RUN: aicf import %S/../../onnx/gpt.onnx -o %t/x.mlir 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: FileCheck %s --check-prefix=BATCHMODEL < %t/x.mlir
// Hugging Face's GPT-2 (transformers 5: its mask code, Conv1D layers of
// flattened rows with [in, out] weights, the head tied to wte) imports as
// the model it is (the head reads wte, a note says so) and grows as the
// exported GPT does, exactly: the probe loss the same, or within 1e-6 of
// it. On a Zen 4 (2026-12-04) it moves by one f32 ulp (3.7405407 to
// 3.7405410, with --gemm generated too) where the Xeons gave it to the
// bit: the kernels are built for the host CPU, and its vector width can
// order a sum differently once a dim is widened.
// RUN: aicf train %S/../../onnx/hf_gpt2.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 80 --eval-windows 8 --no-runs-db --no-progress --adapt %S/inputs/hf-gpt2-grow.toml --out %t/hf-grow 2>&1 | FileCheck %s --check-prefix=HFGROW
// RUN: FileCheck %s --check-prefix=HFDECISION < %t/hf-grow/decisions.jsonl
// HFGROW: note: 'onnx::MatMul_{{[0-9]+}}' is the exact transpose of 'm.transformer.wte.weight' (an output layer tied to an embedding
// HFGROW: 28 parameters
// HFGROW: step 10 (epoch 1): widen the residual stream to 64; grow m.transformer.h.0.attn to 6 heads; grow m.transformer.h.1.attn to 6 heads; widen m.transformer.h.0.mlp.c_fc to 256 (zero-out); widen m.transformer.h.1.mlp.c_fc to 256 (zero-out); add a block to m.transformer.h after the last (zero) on step 10 reached -> accepted
// HFDECISION: "m.transformer.wte.weight 65x32 -> 65x64"
// HFDECISION-SAME: "relative_change":{{0\.0|[0-9.]+e-([7-9]|[1-9][0-9])}},
// HFDECISION-SAME: "outcome":"accepted"
// The exported GPT grows as a native one: its linear layers (MatMul of a
// pre-transposed onnx::MatMul_N weight and an Add of the bias) and GELUs
// (written out) import as hl.linear and hl.gelu, named as PyTorch's
// modules, so the growth operators find the stream, the MLPs and the blocks
// (every rewrite was rejected: no layer found), and its heads grow in the
// one fused q/k/v projection.
// RUN: aicf train %S/../../onnx/gpt.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 80 --eval-windows 8 --no-runs-db --no-progress --adapt %S/inputs/onnx-gpt-grow.toml --out %t/gpt-grow --checkpoint-dir %t/gpt-grow-ck | FileCheck %s --check-prefix=GPTGROW
// RUN: FileCheck %s --check-prefix=GPTDECISION < %t/gpt-grow/decisions.jsonl
// GPTGROW: step 10 (epoch 1): widen the residual stream to 64; grow blocks.0 to 6 heads; grow blocks.1 to 6 heads; widen blocks.0.fc to 256 (zero-out); widen blocks.1.fc to 256 (zero-out); add a block to blocks after the last (zero) on step 10 reached -> accepted
// GPTGROW: adaptive run: 1 decision
// (The composition's change per parameter, once: stream 32 -> 64, then
// heads 4 -> 6 of the fused q/k/v projection.)
// GPTDECISION: "blocks.0.qkv.weight 96x32 -> 144x64"
// GPTDECISION-NOT: "blocks.0.qkv.weight 96x64
// GPTDECISION-SAME: "+blocks.2.fc.weight 256x64"
// GPTDECISION-SAME: "relative_change":{{0\.0|[0-9.]+e-([7-9]|[1-9][0-9])}},
// GPTDECISION-SAME: "exact":true
// GPTDECISION-SAME: "outcome":"accepted"
// RUN: not aicf import %S/onnx.mlir -o %t/y.mlir 2>&1 | FileCheck %s --check-prefix=JUNK
// RUN: not aicf import %S/../../onnx/mlp.onnx --loss hinge 2>&1 | FileCheck %s --check-prefix=LOSS
// The GPT imported at a batch of 4 runs at any batch: an epoch of 101
// windows takes a last batch of 1 (its attention's reshapes hold the batch
// whole in one axis; at 1, an op broadcast the old batch's values over it,
// and each epoch left the last window out, said).
// RUN: aicf train %S/../../onnx/gpt.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --epochs 2 --windows-per-epoch 101 --eval-windows 10 --no-runs-db --out %t/fixed --checkpoint-dir %t/fixed-ck --no-progress 2>&1 | FileCheck %s --check-prefix=FIXEDBATCH
// Scoring compiles its last batch at its own size: 10 windows in batches
// of 4, the last of 2 (the slice that fixed the batch takes the whole
// batch, and hl-set-batch moves it; scored before in a batch filled with
// repeats). Its loss is the one of batches of 2 throughout.
// RUN: (aicf eval %S/../../onnx/gpt.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/fixed-ck/last.safetensors --eval-windows 10 --out %t/fixed-eval && aicf eval %S/../../onnx/gpt.onnx --batch 2 --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/fixed-ck/last.safetensors --eval-windows 10 --out %t/fixed-eval2) 2>&1 | FileCheck %s --check-prefix=FIXEDEVAL
// The same network imported with another --loss is named as such (it was
// "another model", unexplained).
// RUN: not aicf eval %S/../../onnx/gpt.onnx --batch 4 --loss mse --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/fixed-ck/last.safetensors --eval-windows 10 --out %t/other-loss 2>&1 | FileCheck %s --check-prefix=OTHERLOSS
// OTHERLOSS: the checkpoint is of another model (its run started from IR hash {{[0-9a-f]+}}, {{.*}}gpt.mlir's is {{[0-9a-f]+}}); its run trained it with cross_entropy where this is mse (an ONNX model: give the --loss it was trained with)
// The same model in a renamed copy of the file (its weights file is named
// after it) is the model of that checkpoint: scored and resumed (both
// failed: "another version" looking for gpt.weights.safetensors, "the
// checkpoint is of another model").
// RUN: cp %S/../../onnx/gpt.onnx %t/renamed.onnx
// RUN: aicf eval %t/renamed.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/fixed-ck/last.safetensors --eval-windows 10 --out %t/renamed-eval 2>&1 | FileCheck %s --check-prefix=RENAMED
// RUN: aicf train %t/renamed.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --epochs 3 --windows-per-epoch 101 --eval-windows 10 --no-runs-db --out %t/renamed-run --checkpoint-dir %t/fixed-ck --resume --no-progress 2>&1 | FileCheck %s --check-prefix=RENAMEDRESUME
// Without --batch, an ONNX model of an open batch is scored and resumed at
// the batch its checkpoint's run imported it at (both said "give --batch").
// RUN: aicf eval %S/../../onnx/gpt.onnx --data %S/../../../data/tinyshakespeare.txt --checkpoint %t/fixed-ck/last.safetensors --eval-windows 10 --out %t/nobatch-eval 2>&1 | FileCheck %s --check-prefix=NOBATCH
// RUN: aicf train %S/../../onnx/gpt.onnx --data %S/../../../data/tinyshakespeare.txt --epochs 4 --windows-per-epoch 101 --eval-windows 10 --no-runs-db --out %t/nobatch-run --checkpoint-dir %t/fixed-ck --resume --no-progress 2>&1 | FileCheck %s --check-prefix=NOBATCHRESUME
// NOBATCH: accuracy {{[0-9.]+}}% on 10 held-out windows
// NOBATCHRESUME: resumed from {{.*}}last.safetensors at epoch 3
// NOBATCHRESUME: batch 4, 26 steps per epoch
// RENAMED-NOT: another version
// RENAMED: accuracy {{[0-9.]+}}% on 10 held-out windows
// RENAMEDRESUME: resumed from {{.*}}last.safetensors at epoch 2
// RENAMEDRESUME: final held-out loss
// FIXEDEVAL-NOT: filled with repeats
// FIXEDEVAL: compiled {{.*}}gpt.mlir for batch 2
// FIXEDEVAL: accuracy [[EVALACC:[0-9.]+]]% on 10 held-out windows {{.*}} loss [[EVALLOSS:[0-9.]+]] nats/char
// FIXEDEVAL: accuracy [[EVALACC]]% on 10 held-out windows {{.*}} loss [[EVALLOSS]] nats/char
// FIXEDBATCH-NOT: runs at a batch
// FIXEDBATCH: training on 101 windows (10 held-out windows scored), batch 4, 26 steps per epoch
// FIXEDBATCH: final held-out loss

// IMPORT: imported {{.*}}gpt.onnx (opset 17) -> {{.*}}gpt.mlir in {{[0-9.]+}} s: inputs input0: tensor<4x16xi32>, 30 parameters (30209 values) in {{.*}}gpt.weights.safetensors

// IR: module attributes {hl.weights = {file = "gpt.weights.safetensors", hash = "{{[0-9a-f]+}}"}}
// IR: hl.param @tok.weight : tensor<65x32xf32> owner "tok" init <data>
// IR: func.func @forward(%arg0: tensor<4x16xi32> {hl.name = "input0"}) -> tensor<4x16x65xf32>
// IR: hl.gather
// IR: hl.layer_norm
// IR: hl.softmax
// IR: func.func @loss(%arg0: tensor<4x16xi32> {hl.name = "input0"}, %arg1: tensor<4x16xi32>) -> tensor<f32>
// IR: hl.cross_entropy

// TRAIN: imported {{.*}}cnn.onnx (opset 17) -> {{.*}}cnn.mlir
// TRAIN: training on 1438 examples (359 held out), batch 32
// TRAIN: epoch   3/3
// TRAIN: final held-out accuracy {{[0-9.]+}}% after 3 epochs

// A ResNet-18 with batch norms (batch statistics in the step, running
// statistics in the train step's state and in evaluation) fine-tunes on
// the digits.
// RESNET: imported {{.*}}resnet_digits.onnx (opset 17) -> {{.*}}resnet_digits.mlir
// RESNET: epoch   2/2  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  val accuracy {{[0-9.]+}}%

// The imported model grows like a native one: its grown parameters leave
// the weights file and take PyTorch's default initializers for new units.
// GROW: adaptive run: 1 decision (
// DECISION: "action":"widen fc1 to 64 (zero-out)","diff":["fc1.weight 32x64 -> 64x64","fc1.bias 32 -> 64","fc2.weight 10x32 -> 10x64"]
// DECISION-SAME: "exact":true
// DECISION-SAME: "outcome":"accepted"

// A symbolic batch without --batch imports at 64 rows, as eval, predict and
// train run it (import refused it).
// BATCH: note: {{.*}}gpt.onnx: its batch dimension is symbolic: imported at 64 rows a batch
// BATCHMODEL: func.func @forward(%arg0: tensor<64x
// JUNK: aicf: error: {{.*}}onnx.mlir: not an ONNX model
// LOSS: error: invalid value 'hinge' for '--loss <LOSS>': unknown loss 'hinge': expected cross_entropy, mse, graph (the graph's own scalar output), graph:OUTPUT, auto or none

// A loss needs a floating-point output: an integer or boolean one is named.
// RUN: not aicf import %S/../../onnx/node/test_add_int8/model.onnx --batch 2 --loss mse -o %t-int.mlir 2>&1 | FileCheck %s --check-prefix=INTOUT
// INTOUT: aicf: error: {{.*}}model.onnx: --loss mse needs a floating-point first output; 'sum' is tensor<3x4x5xi32> (--loss none imports it to run forward only)
// --batch on a model without a symbolic dimension is said to be unused.
// RUN: aicf import %S/../../onnx/node/test_add_int8/model.onnx --batch 2 --loss none -o %t-static.mlir 2>&1 | FileCheck %s --check-prefix=UNUSED
// UNUSED: note: --batch 2 is unused: {{.*}}model.onnx's inputs have no symbolic dimension (they keep their sizes)
// Exported at a static batch of 1 (PyTorch's `torch.randn(1, ...)`, no
// dynamic axis), --batch binds its inputs' leading 1 (it trained and ran
// one row at a time, --batch unused).
// RUN: aicf import %S/../../onnx/node/test_maxpool_2d_default/model.onnx --batch 4 --loss none -o %t-one.mlir 2>&1 | FileCheck %s --check-prefix=BATCHONE
// BATCHONE: note: {{.*}}model.onnx was exported at a static batch of 1: its inputs' first dimension is read as the batch, at --batch 4 (export with a dynamic batch axis to say so: its first dimension symbolic; from PyTorch, dynamic_axes={'x': {0: 'batch'}})
// BATCHONE: inputs x: tensor<4x3x32x32xf32>
// An imported model grown by a policy, resumed into a fresh run directory
// and scored from its checkpoint: its weights file (named relative to the
// model's file) goes beside each copy of the model written elsewhere (it
// failed with "No such file" for a file the user never had). A resume
// without the policy says that the growth ends there (it said nothing).
// RUN: aicf import %S/../../onnx/mlp.onnx -o %t/imported/mlp.mlir --batch 32 > /dev/null
// RUN: aicf train %t/imported/mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --adapt %S/inputs/onnx-widen.toml --out %t/imported-run --checkpoint-dir %t/imported-ck > /dev/null
// RUN: aicf train %t/imported/mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --adapt %S/inputs/onnx-widen.toml --out %t/imported-fresh --checkpoint-dir %t/imported-ck --resume | FileCheck %s --check-prefix=IMPORTRESUME
// RUN: aicf eval %t/imported/mlp.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/imported-ck/last.safetensors --out %t/imported-eval | FileCheck %s --check-prefix=IMPORTEVAL
// RUN: aicf train %t/imported/mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/imported-fresh --checkpoint-dir %t/imported-ck --resume 2>&1 | FileCheck %s --check-prefix=NOPOLICY
// IMPORTRESUME: resumed from {{.*}}last.safetensors at epoch 1
// IMPORTRESUME: final held-out accuracy
// IMPORTEVAL: accuracy {{[0-9.]+}}% on 359 held-out rows
// NOPOLICY: note: {{.*}}last.safetensors: the checkpoint's run changed its model by a policy; without --adapt this run trains the model on as it is, with no policy (give --adapt and that policy to go on growing it)
// NOPOLICY: final held-out accuracy
// A model that computes its own loss (nanoGPT's `forward(idx, targets)`
// returning the logits and the loss) trains on a text as it is: @loss is
// the graph's loss output, the targets its other input; @forward, which
// scores the accuracy and samples, takes the ids alone.
// RUN: aicf train %S/../../onnx/lm_loss.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 40 --eval-windows 8 --no-runs-db --no-progress --out %t/lm-loss --checkpoint-dir %t/lm-loss-ck 2>&1 | FileCheck %s --check-prefix=GRAPHLOSS
// GRAPHLOSS: note: @loss is the graph's own loss, its output '{{[0-9]+}}' (its one scalar output): it takes the inputs @forward takes, then the targets 'target0' (a table's last column, a text's next tokens, or --data files: given to `aicf train`, `eval` or `predict` of the .onnx, one per input in the graph's order; to the written module, in @loss's); @forward takes 'input0' and returns '{{.*}}'
// GRAPHLOSS: imported {{.*}}lm_loss.onnx (opset 17) -> {{.*}}: inputs input0: tensor<4x6xi32>, target0: tensor<4x6xi32>
// GRAPHLOSS: final held-out accuracy
// GRAPHLOSS: final held-out loss {{[0-9.]+}} nats/char
// RUN: aicf sample %S/../../onnx/lm_loss.onnx --batch 4 --checkpoint %t/lm-loss-ck --prompt ROMEO --tokens 20 --seed 1 2>/dev/null | FileCheck %s --check-prefix=GRAPHSAMPLE
// GRAPHSAMPLE: ROMEO
// --loss graph names the output where the graph has no one scalar output.
// RUN: not aicf import %S/../../onnx/mlp.onnx --batch 2 --loss graph -o %t/mlp-graph.mlir 2>&1 | FileCheck %s --check-prefix=NOGRAPHLOSS
// NOGRAPHLOSS: aicf: error: {{.*}}mlp.onnx: --loss graph trains the graph's own loss, its one scalar float output, and it has none (its outputs: 'output0' [?, 10]); name the output with --loss graph:NAME, or train the first output with --loss cross_entropy or mse
// RUN: not aicf import %S/../../onnx/mlp.onnx --batch 2 --loss graph:logits -o %t/mlp-graph.mlir 2>&1 | FileCheck %s --check-prefix=GRAPHNAME
// GRAPHNAME: aicf: error: {{.*}}mlp.onnx: --loss graph:logits: the graph has no output 'logits' (its outputs: 'output0' [?, 10])
// RUN: not aicf import %S/../../onnx/mlp.onnx --batch 2 --loss graph:output0 -o %t/mlp-graph.mlir 2>&1 | FileCheck %s --check-prefix=NOTSCALAR
// NOTSCALAR: aicf: error: {{.*}}mlp.onnx: tracing @loss: {{.*}}the graph's loss 'output0' is tensor<2x10xf32>: a loss is one floating-point value (reduce it in the model, or import with --loss cross_entropy or mse on the first output)
// The target first (`forward(clean, noisy)`): one --data file per input,
// in the graph's order, each feeds its own input (they were taken in
// @loss's order, noisy then clean, and trained the model backwards). One
// SGD step on the one batch: PyTorch's losses, 1.3735 then 1.2792.
// RUN: aicf train %S/../../onnx/denoise.onnx --batch 8 --data %S/inputs/denoise-clean.npy --data %S/inputs/denoise-noisy.npy --optimizer sgd --lr 0.1 --epochs 2 --val-split 0 --no-runs-db --no-progress --out %t/denoise 2>&1 | FileCheck %s --check-prefix=DATAORDER
// (The fixture names its inputs input0 and target0 by their places: clean
// is input0.)
// DATAORDER: then the targets 'input0' {{.*}}; @forward takes 'target0' and returns
// DATAORDER: note: the --data files are taken in the graph's input order ('input0', 'target0'): 'target0' <- {{.*}}denoise-noisy.npy, 'input0' <- {{.*}}denoise-clean.npy
// DATAORDER: epoch   1/2  train loss 1.3735
// DATAORDER: epoch   2/2  train loss 1.2792
// Too many files for the inputs: all of them named (the first alone was).
// RUN: not aicf train %S/../../onnx/denoise.onnx --batch 8 --data %S/inputs/denoise-clean.npy --data %S/inputs/denoise-noisy.npy --data %S/inputs/denoise-noisy.npy --epochs 1 --no-runs-db --no-progress --out %t/denoise3 2>&1 | FileCheck %s --check-prefix=THREEFILES
// THREEFILES: aicf: error: {{.*}}denoise-clean.npy, {{.*}}denoise-noisy.npy, {{.*}}denoise-noisy.npy: 3 arrays for the model's 2 inputs
// Hugging Face's labels are the ids (the model shifts them itself); the
// imported @loss takes the next tokens: targets given equal to the ids
// are refused, naming both files (the model would learn to repeat its
// input).
// RUN: not aicf train %S/../../onnx/hf_gpt2_labels.onnx --batch 4 --data %S/inputs/hf-ids.npy --data %S/inputs/hf-labels-as-ids.npy --epochs 1 --no-runs-db --no-progress --out %t/hf-ids 2>&1 | FileCheck %s --check-prefix=HFIDS
// HFIDS: note: the graph shifts its target 'target0' itself
// HFIDS: aicf: error: {{.*}}hf-labels-as-ids.npy: the targets are the input ids of {{.*}}hf-ids.npy (Hugging Face's labels, which the model shifts itself): the imported @loss takes the next tokens
// A model that takes a mask beside its ids under another name than
// Hugging Face's `attention_mask` (which is filled: onnx-attention-mask.mlir):
// a text feeds two inputs, and the refusal says what to do.
// RUN: not aicf train %S/../../onnx/masked_lm.onnx --batch 4 --data %S/../../../data/tinyshakespeare.txt --epochs 1 --no-runs-db --no-progress --out %t/masked 2>&1 | FileCheck %s --check-prefix=MASKTEXT
// MASKTEXT: aicf: error: {{.*}}tinyshakespeare.txt: text feeds a model of two inputs (tokens, next tokens); this model's @loss feeds 3 (ids, another sequence and the targets: an ONNX model's input named attention_mask, as Hugging Face's, is filled with ones; export a model with an unnamed mask without it, a text's windows being whole, or give the three as --data arrays)
