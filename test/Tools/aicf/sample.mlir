// `aicf sample`: text from a char LM trained by `aicf train` on a text.
// The checkpoint's vocabulary decodes the draws; the same seed gives the
// same text; --top-k 1 is greedy, so any seed gives that text; the prompt
// is kept, and the tokens drawn follow it (7 + 40 characters, a newline).
// RUN: rm -rf %t && mkdir -p %t
// Training's held-out score counts every held-out window, the last few in
// a smaller batch (62 windows in batches of 16), as `aicf eval` scores
// them: the two agree.
// RUN: head -c 20000 %S/../../../data/tinyshakespeare.txt > %t/small.txt
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %t/small.txt --epochs 1 --windows-per-epoch 32 --eval-windows 1000 --out %t/held --checkpoint-dir %t/held-ckpt --no-progress > %t/held.txt 2>&1
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/small.txt --checkpoint %t/held-ckpt/last.safetensors --out %t/held-eval >> %t/held.txt 2>&1
// A text gzipped (.txt.gz, "not a data file" before) reads as the same
// text, the one the checkpoint trained on.
// RUN: gzip -c %t/small.txt > %t/small.txt.gz
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/small.txt.gz --checkpoint %t/held-ckpt/last.safetensors --out %t/held-eval >> %t/held.txt 2>&1
// RUN: FileCheck %s --check-prefix=HELD < %t/held.txt
// HELD: (62 held-out windows scored), batch 16
// HELD: val loss [[LOSS:[0-9.]+]] nats/char  val accuracy [[ACC:[0-9.]+]]%
// HELD: accuracy [[ACC]]% on 62 held-out windows of {{.*}}small.txt {{.*}}loss [[LOSS]] nats/char
// HELD: accuracy [[ACC]]% on 62 held-out windows of {{.*}}small.txt.gz {{.*}}loss [[LOSS]] nats/char
// A text the checkpoint did not train on is scored whole: 3000 characters,
// 46 windows of 64.
// RUN: head -c 5000 %S/../../../data/tinyshakespeare.txt | tail -c 3000 > %t/other.txt
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/other.txt --checkpoint %t/held-ckpt/last.safetensors --out %t/held-eval | FileCheck %s --check-prefix=WHOLE
// On a terminal, scoring shows its progress in batches (a whole text can
// take minutes); piped, as above, it prints none.
// RUN: script -qc "aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/other.txt --checkpoint %t/held-ckpt/last.safetensors --out %t/held-eval" /dev/null | tr '\r' '\n' | FileCheck %s --check-prefix=EVALBAR
// RUN: aicf eval %S/../../../examples/char_lm/char_lm.mlir --data %t/other.txt --checkpoint %t/held-ckpt/last.safetensors --out %t/held-eval 2>&1 | FileCheck %s --check-prefix=EVALNOBAR
// EVALBAR: {{[0-9]+}}/{{[0-9]+}} batches
// EVALBAR: accuracy
// EVALNOBAR-NOT: batches
// WHOLE: accuracy {{[0-9.]+}}% on 46 windows of {{.*}}other.txt
// The same for a table: the training file's held-out rows (the run's own
// split, so its last held-out figures), and all rows of another file.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/table --checkpoint-dir %t/table-ckpt --no-progress > %t/table.txt 2>&1
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/table-ckpt/last.safetensors --out %t/table-eval >> %t/table.txt 2>&1
// RUN: FileCheck %s --check-prefix=TRAINED < %t/table.txt
// TRAINED: epoch   2/2 {{.*}} val loss [[TLOSS:[0-9.]+]]  val accuracy [[TACC:[0-9.]+]]%
// TRAINED: accuracy [[TACC]]% on 359 held-out rows of {{.*}}digits.csv.gz {{.*}}; loss [[TLOSS]] nats
// RUN: gzip -dc %S/../../../data/digits.csv.gz > %t/all.csv && head -300 %t/all.csv > %t/some.csv
// RUN: aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/some.csv --checkpoint %t/table-ckpt/last.safetensors --out %t/table-eval | FileCheck %s --check-prefix=ROWS
// ROWS: accuracy {{[0-9.]+}}% on 300 rows of {{.*}}some.csv
// RUN: aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 64 --eval-windows 16 --out %t/run --checkpoint-dir %t/ckpt --no-progress > /dev/null
// RUN: aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --prompt "ROMEO: " --tokens 40 --seed 3 --out %t/s > %t/a.txt
// RUN: aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --prompt "ROMEO: " --tokens 40 --seed 3 --out %t/s > %t/b.txt
// RUN: cmp %t/a.txt %t/b.txt
// RUN: FileCheck %s --check-prefix=PROMPT < %t/a.txt
// RUN: wc -m < %t/a.txt | FileCheck %s --check-prefix=LENGTH
// RUN: aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --prompt "ROMEO: " --tokens 40 --top-k 1 --seed 1 --out %t/s > %t/g1.txt
// RUN: aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --prompt "ROMEO: " --tokens 40 --top-k 1 --seed 2 --out %t/s > %t/g2.txt
// RUN: cmp %t/g1.txt %t/g2.txt
// A temperature of 0 is greedy, as --top-k 1.
// RUN: aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --prompt "ROMEO: " --tokens 40 --temperature 0 --seed 5 --out %t/s > %t/g0.txt
// RUN: cmp %t/g1.txt %t/g0.txt
// A byte-level model with one-hot inputs (the transformer block): its
// bytes go out as drawn, UTF-8 or not (a sequence that was none went out
// as U+FFFD, and the bytes were lost): the prompt's 4, 20 drawn and the
// newline. (At a temperature of 100 the draws are near uniform over the
// 256 bytes, so they hold bytes that make no UTF-8.)
// RUN: aicf train %S/../../../examples/transformer/transformer_block.mlir --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 16 --eval-windows 16 --out %t/bytes --checkpoint-dir %t/bytes-ckpt --no-progress > /dev/null
// RUN: aicf sample %S/../../../examples/transformer/transformer_block.mlir --checkpoint %t/bytes-ckpt/last.safetensors --prompt "KING" --tokens 20 --temperature 100 --out %t/s > %t/c.txt
// RUN: FileCheck %s --check-prefix=BYTES < %t/c.txt
// RUN: wc -c < %t/c.txt | FileCheck %s --check-prefix=BYTECOUNT
// BYTECOUNT: {{^ *}}25{{$}}
// Refused, each with the place named: a character outside the vocabulary,
// a negative temperature, no tokens, top-k 0, a checkpoint of a model trained
// on a table.
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --prompt "café" --out %t/s 2>&1 | FileCheck %s --check-prefix=VOCAB
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --temperature=-1 --out %t/s 2>&1 | FileCheck %s --check-prefix=TEMPERATURE
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --tokens 0 --out %t/s 2>&1 | FileCheck %s --check-prefix=TOKENS
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --top-k 0 --out %t/s 2>&1 | FileCheck %s --check-prefix=TOPK
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,100p > %t/digits.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 1 --out %t/mlp --checkpoint-dir %t/mlp-ckpt > /dev/null
// RUN: not aicf sample %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/mlp-ckpt/last.safetensors --out %t/s 2>&1 | FileCheck %s --check-prefix=TABLE
// Another model's checkpoint is refused by sample, eval and a resume,
// whichever the direction (the table's checkpoint was sampled as the
// model it held; a text's, resumed on a table, set the text's
// --eval-windows and was refused for that), and the fork's directory the
// failed resume made is not left behind. A checkpoint cut short is said
// as truncated (it read as one without a vocabulary).
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/mlp-ckpt/last.safetensors --out %t/s-other 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: test ! -e %t/s-other/checkpoint-model.mlir
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/ckpt/last.safetensors --out %t/s-other 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --epochs 2 --resume-from %t/ckpt/last.safetensors --checkpoint-dir %t/fork --out %t/fork-run 2>&1 | FileCheck %s --check-prefix=RESUMEOTHER
// RUN: test ! -e %t/fork
// RUN: head -c 3000 %t/mlp-ckpt/last.safetensors > %t/cut.safetensors
// RUN: not aicf sample %S/../../../examples/mlp/digits_mlp.mlir --checkpoint %t/cut.safetensors --out %t/s 2>&1 | FileCheck %s --check-prefix=CUT
// OTHER: aicf: error: {{.*}}last.safetensors: the checkpoint is of another model (its run started from IR hash {{[0-9a-f]+}}, {{.*}}'s is {{[0-9a-f]+}}): give the model its run trained
// RESUMEOTHER-NOT: eval-windows
// RESUMEOTHER: aicf: error: {{.*}}ckpt/last.safetensors: the checkpoint is of another model (IR hash
// CUT: aicf: error: {{.*}}cut.safetensors: not a valid checkpoint: truncated: its header takes {{[0-9]+}} bytes, and the file holds 3000
// Options that only shape training are refused, not ignored, by sample
// and eval.
// RUN: not aicf sample %S/../../../examples/char_lm/char_lm.mlir --checkpoint %t/ckpt/last.safetensors --optimizer sgd --weight-decay 5 --out %t/s 2>&1 | FileCheck %s --check-prefix=TRAINING
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/mlp-ckpt/last.safetensors --accumulate 4 --out %t/s 2>&1 | FileCheck %s --check-prefix=EVALTRAINING
// TRAINING: aicf: error: --optimizer, --weight-decay are training's: `aicf sample` trains nothing, so they would change nothing here
// EVALTRAINING: aicf: error: --accumulate is training's: `aicf eval` trains nothing, so it would change nothing here
// RUN: not aicf eval %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv --checkpoint %t/mlp-ckpt/last.safetensors --memory-budget 50% --out %t/s 2>&1 | FileCheck %s --check-prefix=EVALBUDGET
// EVALBUDGET: aicf: error: --memory-budget is training's: `aicf eval` trains nothing, so it would change nothing here
// RUN: aicf eval --help | FileCheck %s --check-prefix=EVALHELP
// EVALHELP-NOT: --optimizer
// EVALHELP-NOT: --memory-budget
// EVALHELP: --checkpoint

// PROMPT: {{^}}ROMEO:
// BYTES: {{^}}KING
// LENGTH: {{^}}48{{$}}
// VOCAB: aicf: error: the prompt's character 3 (counting from 0) ('é') is not in the model's vocabulary of 65 characters
// TEMPERATURE: aicf: error: the temperature -1 is not a finite number of at least 0 (0: the most likely token each time)
// TOKENS: aicf: error: --tokens 0: nothing to sample
// TOPK: aicf: error: --top-k 0 leaves no token to draw: at least 1
// TABLE: mlp-ckpt/last.safetensors: no text vocabulary in its metadata: sampling needs a language model trained on a text by `aicf train`

// An imported (ONNX) LM trained at a batch of 4 samples at one row: the
// import folds the batch into its reshapes, so the ONNX model is imported
// again at one row (after its import at 4 rows is found to be the
// checkpoint's model) and takes the checkpoint's parameters by name. Greedy
// (--top-k 1): the same text with --batch given or not.
// RUN: aicf train %S/../../onnx/gpt.onnx --batch 4 --data %t/small.txt --epochs 1 --windows-per-epoch 64 --out %t/onnx --checkpoint-dir %t/onnx-ckpt --no-runs-db --no-progress > /dev/null 2>&1
// RUN: aicf sample %S/../../onnx/gpt.onnx --batch 4 --checkpoint %t/onnx-ckpt/last.safetensors --tokens 30 --top-k 1 --prompt "ROMEO:" --out %t/onnx-sample 2>/dev/null > %t/onnx-a.txt
// RUN: aicf sample %S/../../onnx/gpt.onnx --checkpoint %t/onnx-ckpt/last.safetensors --tokens 30 --top-k 1 --prompt "ROMEO:" --out %t/onnx-sample2 2>/dev/null > %t/onnx-b.txt
// Its stdout is the text alone (the imports' lines go to stderr).
// RUN: cmp %t/onnx-a.txt %t/onnx-b.txt
// RUN: FileCheck %s --check-prefix=ONNXSAMPLE < %t/onnx-a.txt
// ONNXSAMPLE: {{^}}ROMEO:{{.+}}
// ONNXSAMPLE-NOT: imported
// The import at 4 rows as `hl` (the checkpoint's model.mlir), whose ops fix
// the batch, samples at its batch, the context in every row: the same
// text. (It was refused: "does not run at a batch of 1 rows".)
// RUN: aicf sample %t/onnx-ckpt/model.mlir --checkpoint %t/onnx-ckpt/last.safetensors --tokens 30 --top-k 1 --prompt "ROMEO:" --out %t/onnx-sample3 2>/dev/null > %t/onnx-c.txt
// RUN: cmp %t/onnx-a.txt %t/onnx-c.txt
