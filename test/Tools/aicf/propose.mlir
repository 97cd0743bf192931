// `aicf propose`: a model for a data set from the run registry's past runs.
// Two structures trained on iris and on wine at a budget of 40 epochs of
// the default MLP; breast cancer, which no run saw, gets the structure
// that did best on its nearest past problems, built for its 30 features
// and 2 classes, and a growth policy; both train as they are written.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 16" -o %t/iris16.mlir | FileCheck %s --check-prefix=ASKED
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 128-128" -o %t/iris128.mlir > /dev/null
// RUN: aicf propose --data %S/../../../data/problems/wine.csv.gz --structure "mlp 16" -o %t/wine16.mlir > /dev/null
// RUN: aicf propose --data %S/../../../data/problems/wine.csv.gz --structure "mlp 128-128" -o %t/wine128.mlir > /dev/null
// RUN: aicf train %t/iris16.mlir --data %S/../../../data/problems/iris.csv.gz --epochs 1000 --flops-budget 2.6e7 --runs-db %t/runs.sqlite --out %t/r1 --gemm generated --threads 2 > /dev/null
// RUN: aicf train %t/iris128.mlir --data %S/../../../data/problems/iris.csv.gz --epochs 1000 --flops-budget 2.6e7 --runs-db %t/runs.sqlite --out %t/r2 --gemm generated --threads 2 > /dev/null
// RUN: aicf train %t/wine16.mlir --data %S/../../../data/problems/wine.csv.gz --epochs 1000 --flops-budget 6.4e7 --runs-db %t/runs.sqlite --out %t/r3 --gemm generated --threads 2 > /dev/null
// RUN: aicf train %t/wine128.mlir --data %S/../../../data/problems/wine.csv.gz --epochs 1000 --flops-budget 6.4e7 --runs-db %t/runs.sqlite --out %t/r4 --gemm generated --threads 2 > /dev/null
// RUN: aicf propose --data %S/../../../data/problems/breast_cancer.csv.gz --budget 2.8e8 --runs-db %t/runs.sqlite -o %t/bc.mlir --policy %t/bc.toml --json %t/bc.json | FileCheck %s --check-prefix=PROPOSE
// RUN: FileCheck %s --check-prefix=MODEL < %t/bc.mlir
// RUN: aicf-opt %t/bc.mlir | FileCheck %s --check-prefix=VERIFIED
// RUN: FileCheck %s --check-prefix=POLICY < %t/bc.toml
// RUN: aicf train %t/bc.mlir --data %S/../../../data/problems/breast_cancer.csv.gz --epochs 2 --adapt %t/bc.toml --runs-db %t/runs.sqlite --out %t/r5 | FileCheck %s --check-prefix=TRAIN
// RUN: aicf propose --data %S/../../../data/problems/sine_w1.csv.gz --structure "mlp 32-32" -o %t/sine.mlir > /dev/null
// RUN: aicf train %t/sine.mlir --data %S/../../../data/problems/sine_w1.csv.gz --epochs 2 --runs-db %t/runs.sqlite --out %t/r6 | FileCheck %s --check-prefix=REGRESSION
// RUN: aicf propose --data %S/../../../data/problems/markov_o1.txt --structure "lm 1x32" -o %t/lm.mlir | FileCheck %s --check-prefix=LM
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --runs-db %t/none.sqlite -o %t/none.mlir 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not aicf propose --data %t/missing.csv -o %t/x.mlir --structure "mlp 8" 2>&1 | FileCheck %s --check-prefix=MISSING
// A model or policy file no proposal wrote is not replaced without
// --force (a hand-edited one was, without a word); an earlier proposal's is.
// RUN: printf '// my edits\n' > %t/mine.mlir && printf '# mine\n' > %t/mine.toml
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/mine.mlir 2>&1 | FileCheck %s --check-prefix=HANDMODEL
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/iris16.mlir --policy %t/mine.toml 2>&1 | FileCheck %s --check-prefix=HANDPOLICY
// RUN: FileCheck %s --check-prefix=KEPT < %t/mine.toml
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/mine.mlir --force > /dev/null
// RUN: FileCheck %s --check-prefix=REPLACED < %t/mine.mlir
// A proposal edited since, its first line kept, is refused too; one as
// written is replaced.
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/edited.mlir > /dev/null
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 16" -o %t/edited.mlir > /dev/null
// RUN: printf '// MY EDIT\n' >> %t/edited.mlir
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/edited.mlir 2>&1 | FileCheck %s --check-prefix=EDITED
// EDITED: aicf: error: -o {{.*}}edited.mlir: the file is there, and is no earlier proposal as it wrote it (another file, or one edited since)
// HANDMODEL: aicf: error: -o {{.*}}mine.mlir: the file is there, and is no earlier proposal as it wrote it (another file, or one edited since); give another file, or --force to replace it
// HANDPOLICY: aicf: error: --policy {{.*}}mine.toml: the file is there, and is no earlier proposal as it wrote it
// KEPT: # mine
// REPLACED: // mlp 8 for {{.*}}iris.csv.gz, proposed by aicf propose:
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "cnn 3" -o %t/x.mlir 2>&1 | FileCheck %s --check-prefix=STRUCTURE
// RUN: not aicf propose --data %S/../../../data/problems/markov_o1.txt --structure "mlp 64" -o %t/x.mlir 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --budget 0 -o %t/x.mlir --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --budget 100 -o %t/x.mlir --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --task text -o %t/x.mlir --structure "lm 1x32" 2>&1 | FileCheck %s --check-prefix=TASK
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %S/../../../data/problems/iris.csv.gz 2>&1 | FileCheck %s --check-prefix=OVERWRITE
// RUN: not aicf propose --data %s --structure "mlp 8" -o %t/x.mlir 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t 2>&1 | FileCheck %s --check-prefix=OUTDIR
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --budget 1e300 --runs-db %t/runs.sqlite -o %t/beyond.mlir | FileCheck %s --check-prefix=BEYOND
// The proposer's FLOPs per example are those the train step counts (the
// first layer's input, the data, has no gradient): mlp 128 on the digits'
// 64 features and 10 classes is 4*64*128 + 6*128*10 = 40448, and one epoch
// over its 1438 training rows 5.816e7.
// RUN: aicf propose --data %S/../../../data/digits.csv.gz --structure "mlp 128" -o %t/d128.mlir --json %t/d128.json > /dev/null
// RUN: FileCheck %s --check-prefix=FPE < %t/d128.json
// RUN: aicf train %t/d128.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --no-runs-db --out %t/d128 | FileCheck %s --check-prefix=FPETRAIN
// FPE: "default_flops_per_example": 40448.0
// FPETRAIN: training FLOPs 5.816e7

// ASKED: mlp 16, as asked (--structure); the registry was not read
// ASKED: wrote {{.*}}iris16.mlir (mlp 16, 131 parameters)

// PROPOSE: problem breast_cancer: classification, 569 rows, 2 outputs
// PROPOSE: budget 2.800e8 FLOPs: {{[0-9.]+}} epochs of the default mlp 128
// PROPOSE: nearest of the registry's 2 past table problems:
// PROPOSE-DAG: {{^}}  wine {{ *}}distance {{[0-9.]+}}, weight {{[0-9.]+}}: 2 structures in runs #3-4; best mlp
// PROPOSE-DAG: {{^}}  iris {{ *}}distance {{[0-9.]+}}, weight {{[0-9.]+}}: 2 structures in runs #1-2; best mlp
// PROPOSE: predicted regret (log of the loss over each neighbour's best; 0: the best):
// PROPOSE: proposal: [[S:mlp [0-9-]+]], the best predicted
// PROPOSE: growth policy: no neighbour grew a model; the policy only rolls back instabilities
// PROPOSE: wrote {{.*}}bc.mlir ([[S]], {{[0-9]+}} parameters)
// PROPOSE: wrote {{.*}}bc.toml (aicf train --adapt)

// MODEL: // mlp {{[0-9-]+}} for {{.*}}breast_cancer.csv.gz, proposed by aicf propose:
// MODEL: hl.param @fc1.weight : tensor<{{[0-9]+}}x30xf32>
// MODEL: func.func @loss(%arg0: tensor<32x30xf32>, %arg1: tensor<32xi32>) -> tensor<f32>

// VERIFIED: hl.param @fc1.weight

// POLICY: when = "instability"

// TRAIN: training on 455 examples (114 held out)
// TRAIN: final held-out accuracy {{[0-9.]+}}% after 2 epochs

// REGRESSION: epoch   2/2  train loss {{[0-9.]+}}  val loss {{[0-9.]+}}  (
// REGRESSION: final held-out loss {{[0-9.]+}} after 2 epochs

// LM: wrote {{.*}}lm.mlir (lm 1x32, {{[0-9]+}} parameters)

// EMPTY: none.sqlite: no run registry yet; proposing the default
// EMPTY: no past table problem in the registry has runs of two structures or more trained as they are (0 problems seen; runs a policy grew are scored beside those, not as a structure of their own): the default mlp 128
// EMPTY: wrote {{.*}}none.mlir (mlp 128, 1027 parameters)

// MISSING: aicf: error: {{.*}}missing.csv: No such file or directory
// STRUCTURE: aicf: error: structure 'cnn 3': not an mlp or an lm
// KIND: aicf: error: mlp 64 does not model a text problem
// ZERO: aicf: error: --budget 0: a budget is a finite positive number of FLOPs
// SMALL: aicf: error: a budget of 1.000e2 FLOPs is less than ten training steps of every structure ranked here ({{.*}}; the smallest, {{.*}}, takes {{[0-9.e]+}} for ten): give a larger --budget: no structure of the proposer's space takes ten steps within it
// TASK: aicf: error: {{.*}}iris.csv.gz: reads as a classification problem, not text
// OVERWRITE: aicf: error: {{.*}}iris.csv.gz: the model would overwrite the data
// FORMAT: aicf: error: {{.*}}propose.mlir: propose reads a CSV table (.csv, .csv.gz) or a text (.txt)
// OUTDIR: aicf: error: {{.*}}: the model is written to a file, and this is a directory
// BEYOND: no past table problem in the registry has runs of two structures or more trained as they are that reached the budget ({{[0-9]+}} problems seen, 2 of them tried two or more but their runs stopped short of it; runs a policy grew are scored beside those, not as a structure of their own): the default mlp 128
// A short text: the proposal's batch fits its held-out windows (600
// characters leave 3 of 32), so the model it writes trains; a text with no
// held-out window at all is refused before anything is written.
// RUN: head -c 600 %S/../../../data/tinyshakespeare.txt > %t/short.txt
// RUN: aicf propose --data %t/short.txt --runs-db %t/none.sqlite -o %t/short.mlir > /dev/null
// RUN: FileCheck %s --check-prefix=SHORTMODEL < %t/short.mlir
// RUN: aicf train %t/short.mlir --data %t/short.txt --epochs 1 --out %t/short-run --no-progress | FileCheck %s --check-prefix=SHORTTRAIN
// RUN: head -c 100 %S/../../../data/tinyshakespeare.txt > %t/tiny.txt
// RUN: not aicf propose --data %t/tiny.txt --runs-db %t/none.sqlite -o %t/tiny.mlir 2>&1 | FileCheck %s --check-prefix=TINY
// RUN: not test -e %t/tiny.mlir
// SHORTMODEL: tensor<3x32xi32>
// SHORTTRAIN: final held-out loss
// TINY: aicf: error: {{.*}}tiny.txt: 100 tokens: the held-out fifth (20) holds no whole window of the 32 tokens a proposed language model reads, so no run could score it (at least 165 tokens)
// A structure asked for that no machine of this kind holds: the model is
// written, with a note of the memory its training needs; training it is
// refused before allocating, naming tensors and values (it called the 25
// tensors "parameters").
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 65536-65536-65536-65536-65536-65536" --runs-db %t/none.sqlite -o %t/huge.mlir 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not aicf train %t/huge.mlir --data %S/../../../data/problems/iris.csv.gz --epochs 1 --out %t/huge-run --no-progress 2>&1 | FileCheck %s --check-prefix=HUGETRAIN
// HUGE: wrote {{.*}}huge.mlir (mlp 65536-65536-65536-65536-65536-65536, {{[0-9]+}} parameters)
// HUGE: note: training it needs at least {{[0-9.]+}} GiB (parameters, gradients and Adam's state in f32); this machine has {{[0-9.]+}} GiB available
// HUGETRAIN: aicf: error: the parameters and optimizer state ({{[0-9]+}} tensors, {{[0-9]+}} values): {{[0-9.]+}} GiB of memory needed
// A search one command at a time (`--next`): iris's own runs (mlp 16 and
// mlp 128-128) mark what was tried, so the next is the best-ranked of the
// rest (the explanation says how the better of the two fitted, which
// orders the rest); once that is trained too, nothing is left to propose.
// RUN: aicf propose --next --data %S/../../../data/problems/iris.csv.gz --runs-db %t/runs.sqlite -o %t/next.mlir | FileCheck %s --check-prefix=NEXT
// RUN: aicf train %t/next.mlir --data %S/../../../data/problems/iris.csv.gz --epochs 2 --runs-db %t/runs.sqlite --out %t/r7 --no-progress > /dev/null
// RUN: not aicf propose --next --data %S/../../../data/problems/iris.csv.gz --runs-db %t/runs.sqlite -o %t/next2.mlir 2>&1 | FileCheck %s --check-prefix=NEXTDONE
// RUN: not test -e %t/next2.mlir
// RUN: not aicf propose --next --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/x.mlir 2>&1 | FileCheck %s --check-prefix=NEXTASKED
// NEXT-DAG: mlp 16 left out: already trained on this data (runs #1)
// NEXT-DAG: mlp 128-128 left out: already trained on this data (runs #2)
// NEXT: the best trained on this data so far, {{mlp 16|mlp 128-128}} (1 run): held-out loss {{[0-9.]+}} against training loss {{[0-9.]+}} at its best epoch, so structures of {{at most|more than}} its {{[0-9]+}} parameters first
// NEXT: proposal: mlp 128, the best predicted not yet trained on this data
// NEXT: wrote {{.*}}next.mlir (mlp 128, 1027 parameters)
// NEXTDONE: aicf: error: --next: every candidate the registry ranks for iris has been trained on it already (mlp 128, mlp 128-128, mlp 16)
// NEXTASKED: aicf: error: --next: a --structure proposal reads no past runs, so it has no search to go on with
// A search's runs are this data's by content: the same table under
// another name is done as well, while other rows under the name `iris`
// are another problem (it used to count as searched to the end).
// RUN: cp %S/../../../data/problems/iris.csv.gz %t/flowers.csv.gz
// RUN: not aicf propose --next --data %t/flowers.csv.gz --runs-db %t/runs.sqlite -o %t/next3.mlir 2>&1 | FileCheck %s --check-prefix=NEXTCOPY
// RUN: mkdir -p %t/other && python3 -c "import gzip; rows = gzip.open('%S/../../../data/problems/iris.csv.gz', 'rt').read().split(); open('%t/other/iris.csv', 'w').write('\n'.join(r.rsplit(',', 1)[0] + ',' + str(i %% 3) for i, r in enumerate(rows)) + '\n')"
// RUN: aicf propose --next --data %t/other/iris.csv --runs-db %t/runs.sqlite -o %t/next4.mlir | FileCheck %s --check-prefix=NEXTOTHER
// NEXTCOPY: aicf: error: --next: every candidate the registry ranks for flowers has been trained on it already
// NEXTOTHER-NOT: already trained on this data
// NEXTOTHER: wrote {{.*}}next4.mlir
// A run of a plain proposal under the rollback-only policy `propose`
// writes beside it tried that structure itself (it counted as the structure
// grown, so `--next` proposed the same structure again).
// RUN: aicf propose --data %S/../../../data/problems/wine.csv.gz --runs-db %t/plain.sqlite -o %t/wine.mlir --policy %t/wine.toml | FileCheck %s --check-prefix=PLAIN
// RUN: aicf train %t/wine.mlir --adapt %t/wine.toml --data %S/../../../data/problems/wine.csv.gz --epochs 2 --runs-db %t/plain.sqlite --out %t/wine-run --no-progress > /dev/null
// RUN: not aicf propose --next --data %S/../../../data/problems/wine.csv.gz --runs-db %t/plain.sqlite -o %t/wine-next.mlir 2>&1 | FileCheck %s --check-prefix=PLAINNEXT
// PLAIN: wrote {{.*}}wine.mlir (mlp 128,
// PLAINNEXT: aicf: error: --next: every candidate the registry ranks for wine has been trained on it already (mlp 128)
// Every output's directory is made (as train's --out is) or checked
// before anything is written (a model was left behind by a policy that
// could not be), and no output may be a file SQLite keeps beside the
// registry.
// RUN: touch %t/afile
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --runs-db %t/runs.sqlite -o %t/partial.mlir --json %t/afile/nodir/p.json 2>&1 | FileCheck %s --check-prefix=NODIR
// RUN: not test -e %t/partial.mlir
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/made/iris.mlir > /dev/null
// RUN: test -f %t/made/iris.mlir
// A proposal that writes no policy says so of an earlier proposal's beside
// the model (it stayed, unmentioned, ready to be given to --adapt).
// RUN: head -1 %t/wine.toml > %t/made/iris.toml
// RUN: aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" -o %t/made/iris.mlir 2>&1 | FileCheck %s --check-prefix=STALE
// STALE: note: {{.*}}made/iris.toml is an earlier proposal's growth policy; this proposal does not grow, and wrote none (delete it, or it may be given to aicf train --adapt with this model by mistake)
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp 8" --runs-db %t/runs.sqlite -o %t/runs.sqlite-wal 2>&1 | FileCheck %s --check-prefix=WAL
// RUN: not aicf propose --data %S/../../../data/problems/iris.csv.gz --structure "mlp" -o %t/x.mlir 2>&1 | FileCheck %s --check-prefix=BARE
// RUN: aicf propose --data %S/../../../data/problems/sine_w1.csv.gz --runs-db %t/none.sqlite -o %t/sine2.mlir 2>&1 | FileCheck %s --check-prefix=SINE
// NODIR: aicf: error: {{.*}}nodir/p.json: the JSON goes in {{.*}}afile/nodir, which cannot be made
// WAL: aicf: error: {{.*}}runs.sqlite-wal: the model would overwrite the run registry (or a file SQLite keeps beside it)
// BARE: aicf: error: structure 'mlp': an mlp names its hidden widths, or 'linear' for none
// SINE: problem sine_w1: regression, {{[0-9]+}} rows, 1 output; targets' standard deviation {{[0-9.]+}}; a least-squares probe
