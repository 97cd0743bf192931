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
// Its fall in the first epoch, where a run finds its scale, is said too
// (it was said only against an earlier epoch's line): inputs 100x larger
// overflow fp16's gradients until the scale comes down from 65536.
// RUN: python3 -c "import sys, struct; rows = [[float(c) for c in l.split(',')] for l in open(sys.argv[1]) if l.strip()]; head = lambda d, s: (lambda h: b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h)(((\"{'descr': '%%s', 'fortran_order': False, 'shape': %%s, }\" %% (d, s)).ljust(117) + '\n').encode()); open(sys.argv[2], 'wb').write(head('<f4', '(%%d, 64)' %% len(rows)) + b''.join(struct.pack('<64f', *[100 * v for v in r[:64]]) for r in rows)); open(sys.argv[3], 'wb').write(head('|i1', '(%%d,)' %% len(rows)) + bytes(int(r[64]) for r in rows))" %t/digits.csv %t/x100.npy %t/y.npy
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/x100.npy --data %t/y.npy --epochs 1 --precision fp16 --no-runs-db --no-progress --out %t/fall --checkpoint-dir %t/fall-ckpt 2>&1 | FileCheck %s --check-prefix=FALL
// FALL: epoch   1/1 {{.*}} loss scale {{[0-9]+}} (from 65536: at least {{[0-9]+}} steps overflowed and were skipped)
// RUN: grep -c '"loss_scale_start":65536' %t/fall/metrics.jsonl
// Inputs past fp16's largest value (16 x 5000 = 80000) overflow the first
// forward pass: the data, not the learning rate (the message said to
// lower it).
// RUN: python3 -c "import sys, struct; rows = [[float(c) for c in l.split(',')] for l in open(sys.argv[1]) if l.strip()]; head = lambda d, s: (lambda h: b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h)(((\"{'descr': '%%s', 'fortran_order': False, 'shape': %%s, }\" %% (d, s)).ljust(117) + '\n').encode()); open(sys.argv[2], 'wb').write(head('<f4', '(%%d, 64)' %% len(rows)) + b''.join(struct.pack('<64f', *[5000 * v for v in r[:64]]) for r in rows)); open(sys.argv[3], 'wb').write(head('|i1', '(%%d,)' %% len(rows)) + bytes(int(r[64]) for r in rows))" %t/digits.csv %t/x5000.npy %t/y.npy
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/x5000.npy --data %t/y.npy --epochs 1 --precision fp16 --no-runs-db --no-progress --out %t/over 2>&1 | FileCheck %s --check-prefix=OVER
// OVER: error: the loss is {{NaN|inf}} at the first step, before any update: the forward pass overflowed fp16 (largest 65504) on the initial model and this data, not by the learning rate
// OVER-NOT: lower the learning rate
// eval and predict run an fp16 checkpoint in fp16: an overflow there
// says so, and how to run it in f32's range (it blamed the weights or
// the data).
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/x5000.npy --data %t/y.npy --checkpoint %t/fall-ckpt/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVALOVER
// EVALOVER: error: {{.*}}gives a logit of {{.*}} (it runs in fp16, whose values overflow past 65504: --precision fp32 or bf16 runs it in f32's range)
// RUN: not aicf predict %S/../../../examples/mlp/digits_mlp.mlir --data %t/x5000.npy --checkpoint %t/fall-ckpt/last.safetensors -o %t/over.csv 2>&1 | FileCheck %s --check-prefix=PREDOVER
// PREDOVER: error: {{.*}}the model's output is NaN: {{.*}} (it runs in fp16, whose values overflow past 65504
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/x5000.npy --data %t/y.npy --checkpoint %t/fall-ckpt/last.safetensors --precision fp32 --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVALF32
// EVALF32: accuracy
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
