// aicf eval and sample run a checkpoint as its run trained it: with its
// optimizer's state (an SGD checkpoint failed to load into the Adam step
// eval compiled, and --optimizer is refused there), and in its precision
// (scored in fp32, an fp16 checkpoint's figures differed from its run's on
// the same rows); a --precision given runs in that one, with a note. The
// training data is recognised by content: decompressed, or compressed
// again, or saved again with other bytes for the same rows, eval scores
// what the run held out (it scored every row, the trained ones included).
// RUN: rm -rf %t && mkdir -p %t
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,400p > %t/digits.csv
// RUN: gzip -c %t/digits.csv > %t/digits.csv.gz
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv.gz --epochs 1 --optimizer sgd --momentum 0.9 --lr 0.05 --precision fp16 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ckpt | FileCheck %s --check-prefix=SCALE
// RUN: grep -c '"loss_scale":' %t/run/metrics.jsonl
// An fp16 run's epoch line and metrics show its loss scale (it was seen
// only in the checkpoint's tensors).
// SCALE: epoch   1/1  train loss {{.*}} steps/s)  loss scale {{[0-9]+}}
// RUN: python3 -c "import json; r=[json.loads(l) for l in open('%t/run/metrics.jsonl')][-1]; print('RUN %%.2f%%%% %%.4f' %% (100*r['val_accuracy'], r['val_loss']))" > %t/figures.txt
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv.gz --checkpoint %t/ckpt/last.safetensors --out %t/eval >> %t/figures.txt
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/ckpt/last.safetensors --out %t/eval >> %t/figures.txt
// Saved again with Windows line endings (other bytes, the same rows), it
// is the same data by its values (every row was scored, the trained ones
// included, unsaid).
// RUN: sed 's/$//' %t/digits.csv > %t/crlf.csv
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/crlf.csv --checkpoint %t/ckpt/last.safetensors --out %t/eval >> %t/figures.txt 2>&1
// RUN: FileCheck %s --check-prefix=AGREE < %t/figures.txt
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/ckpt/last.safetensors --precision fp32 --out %t/eval 2>&1 | FileCheck %s --check-prefix=FP32
// The file of that name with a row added is other data, scored whole,
// and said so (the user expected the held-out figure, without a word).
// RUN: mkdir -p %t/edited && cp %t/digits.csv %t/edited/digits.csv && sed -n 1p %t/digits.csv >> %t/edited/digits.csv
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/edited/digits.csv --checkpoint %t/ckpt/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EDITED
// EDITED: note: {{.*}}edited/digits.csv: named as the data the checkpoint's run trained on, but its rows differ: scored as other data, all of it (the rows it trained on, if it holds them, too); the held-out figures need the data as it trained
// EDITED: accuracy {{[0-9.]+}}% on 401 rows
// Another file whose name only begins alike (a test split) is not said.
// RUN: cp %t/edited/digits.csv %t/edited/digits.test.csv
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/edited/digits.test.csv --checkpoint %t/ckpt/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=TESTSPLIT
// TESTSPLIT-NOT: named as the data
// TESTSPLIT: accuracy {{[0-9.]+}}% on 401 rows
// RUN: head -c 20000 %S/../../../data/tinyshakespeare.txt > %t/small.txt
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/small.txt --epochs 1 --windows-per-epoch 32 --optimizer sgd --momentum 0.9 --lr 0.1 --no-runs-db --no-progress --out %t/lm --checkpoint-dir %t/lm-ckpt > /dev/null
// RUN: aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/lm-ckpt/last.safetensors --tokens 5 --prompt "To be" --out %t/lm-sample 2>/dev/null | FileCheck %s --check-prefix=SAMPLE

// AGREE: RUN [[ACC:[0-9.]+%]] [[LOSS:[0-9.]+]]
// AGREE: accuracy [[ACC]] on 80 held-out rows of {{.*}}digits.csv.gz {{.*}}; loss [[LOSS]] nats
// AGREE: accuracy [[ACC]] on 80 held-out rows of {{.*}}digits.csv {{.*}}; loss [[LOSS]] nats
// AGREE: note: {{.*}}crlf.csv: the same rows as the data the checkpoint's run trained on (another file of them): scored as that data
// AGREE: accuracy [[ACC]] on 80 held-out rows of {{.*}}crlf.csv {{.*}}; loss [[LOSS]] nats
// FP32: note: {{.*}}last.safetensors trained in fp16; this runs it in fp32: its run's own figures came from fp16
// FP32: accuracy {{[0-9.]+}}% on 80 held-out rows
// SAMPLE: To be{{.....}}
