// A Hugging Face causal LM exported as a tokenizer's output is passed
// (`input_ids`, `attention_mask`, `labels`: tools/onnx/export_loss_models.py's
// HfGpt2Mask, dynamo) trains on a text: the import marks the mask to be
// filled with ones (a text's windows are whole), said in a note, and
// `train`, `eval` and `sample` fill it. Before, a text was refused for its
// three inputs.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../onnx/hf_gpt2_mask_dynamo.onnx --data %S/../../../data/tinyshakespeare.txt --epochs 2 --windows-per-epoch 40 --eval-windows 16 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck 2>&1 | FileCheck %s
// CHECK: note: a text does not give this input: the trainer fills 'attention_mask' with ones (a text's windows are whole, one segment), and `sample` does too; arrays given with --data feed it as given
// CHECK: epoch   2/2  train loss {{[0-9.]+}}  val loss [[HELD:[0-9.]+]] nats/char
// The model learned the next characters: below a uniform guess's ln 65 =
// 4.17 nats, and not near 0 (the mask put where the labels go would make
// them all ones, an easy 0).
// RUN: python3 -c "import json; m = [json.loads(l) for l in open('%t/run/metrics.jsonl')]; v = m[-1]['val_loss']; assert 2.0 < v < 4.0, v; print('learned')" | FileCheck %s --check-prefix=LEARNED
// LEARNED: learned
// RUN: aicf eval %S/../../onnx/hf_gpt2_mask_dynamo.onnx --data %S/../../../data/tinyshakespeare.txt --eval-windows 16 --checkpoint %t/ck/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVAL
// EVAL: accuracy {{[0-9.]+}}% on 16 held-out windows of {{.*}}tinyshakespeare.txt {{.*}}; loss {{[0-9.]+}} nats/char
// RUN: aicf sample %S/../../onnx/hf_gpt2_mask_dynamo.onnx --checkpoint %t/ck/last.safetensors --prompt "ROMEO:" --tokens 8 --out %t/sample 2>/dev/null | FileCheck %s --check-prefix=SAMPLE
// SAMPLE: ROMEO:
// Labels padded with -100 (PyTorch's ignore_index, Hugging Face's padding):
// refused with the way out, then left out of the cross-entropy with
// --ignore-index -100, which the checkpoint's model keeps for a resume and
// an eval without the flag.
// RUN: python3 -c "import struct,sys; d=bytearray(open(sys.argv[1],'rb').read()); h=10+struct.unpack('<H',d[8:10])[0]; d[h:h+32]=struct.pack('<4q',-100,-100,-100,-100); open(sys.argv[2],'wb').write(d)" %S/inputs/hf-labels-as-ids.npy %t/padded.npy
// RUN: not aicf train %S/../../onnx/hf_gpt2.onnx --batch 4 --data %S/inputs/hf-ids.npy --data %t/padded.npy --epochs 1 --no-runs-db --no-progress --out %t/pad 2>&1 | FileCheck %s --check-prefix=PADDED
// PADDED: the label -100 is not a class of the model's 65 (0 to 64): -100 is PyTorch's ignore_index (Hugging Face's padding of labels); an ONNX model's cross-entropy leaves it out with --ignore-index -100
// RUN: aicf train %S/../../onnx/hf_gpt2.onnx --batch 4 --ignore-index -100 --data %S/inputs/hf-ids.npy --data %t/padded.npy --epochs 1 --no-runs-db --no-progress --out %t/ig --checkpoint-dir %t/ig/ck | FileCheck %s --check-prefix=IGNORED
// IGNORED: epoch   1/1  train loss
// RUN: aicf train %S/../../onnx/hf_gpt2.onnx --data %S/inputs/hf-ids.npy --data %t/padded.npy --epochs 2 --resume --no-runs-db --no-progress --out %t/ig --checkpoint-dir %t/ig/ck | FileCheck %s --check-prefix=IGRESUMED
// IGRESUMED: resumed from
// IGRESUMED: epoch   2/2  train loss
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --ignore-index -100 --data %S/../../../data/digits.csv.gz --out %t/ighl --no-runs-db 2>&1 | FileCheck %s --check-prefix=IGHL
// IGHL: aicf: error: --ignore-index -100 sets the cross-entropy of an ONNX model being imported
// A batch whose every label is the ignore_index (here rows 1 to 7 are
// padding alone) has a NaN mean (as PyTorch's): said as such, not as a learning rate to lower. Another
// --ignore-index than the checkpoint's is said, and the checkpoint's kept.
// RUN: python3 -c "import struct,sys; d=bytearray(open(sys.argv[1],'rb').read()); h=10+struct.unpack('<H',d[8:10])[0]; n=(len(d)-h)//8; d[h+128:]=struct.pack('<%%dq' %% (n-16), *([-100]*(n-16))); open(sys.argv[2],'wb').write(d)" %S/inputs/hf-labels-as-ids.npy %t/all-padding.npy
// RUN: not aicf train %S/../../onnx/hf_gpt2.onnx --batch 4 --ignore-index -100 --data %S/inputs/hf-ids.npy --data %t/all-padding.npy --epochs 1 --val-split 0 --no-runs-db --no-progress --out %t/allpad 2>&1 | FileCheck %s --check-prefix=ALLPAD
// ALLPAD: every label of its batch is the loss's ignore_index (-100), and a mean over no labels is NaN (as PyTorch's)
// RUN: aicf eval %S/../../onnx/hf_gpt2.onnx --ignore-index 5 --data %S/inputs/hf-ids.npy --data %t/padded.npy --checkpoint %t/ig/ck --out %t/igeval 2>&1 | FileCheck %s --check-prefix=IGOTHER
// IGOTHER: note: --ignore-index 5: {{.*}}last.safetensors's model was trained with --ignore-index -100; it goes on with that
// IGOTHER: loss
// The registry's problem descriptor reads every target of a sequence's
// examples (it read the first example's elements as each example's label:
// a first row of padding recorded a label entropy of 0).
// RUN: python3 -c "import struct,sys; d=bytearray(open(sys.argv[1],'rb').read()); h=10+struct.unpack('<H',d[8:10])[0]; d[h:h+128]=struct.pack('<16q',*([-100]*16)); open(sys.argv[2],'wb').write(d)" %S/inputs/hf-labels-as-ids.npy %t/first-row-padding.npy
// RUN: aicf train %S/../../onnx/hf_gpt2.onnx --batch 4 --ignore-index -100 --data %S/inputs/hf-ids.npy --data %t/first-row-padding.npy --epochs 1 --runs-db %t/runs.sqlite --no-progress --out %t/firstpad > /dev/null
// RUN: aicf runs show 1 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=ENTROPY
// ENTROPY: label entropy {{[1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9]}}
