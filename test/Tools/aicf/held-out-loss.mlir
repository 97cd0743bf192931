// The held-out loss is the model's own @loss, as its training loss is, and
// `aicf eval` gives the run's figure. A loss with dropout is scored with the
// dropout off (`@__aicf_loss_eval`): an L1 loss was scored as the squared error of
// @forward's output, beside an L1 training loss and unlabelled. A
// classifier whose @loss sums its cross-entropy is no mean cross-entropy:
// its loss is in no unit, not compared with a uniform guess's ln(classes)
// (it was said to predict worse than guessing at 100% accuracy), and eval
// scores its @loss (it gave the per-example cross-entropy, 1/32 of the
// run's figure).
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; random.seed(5); rows = [(random.uniform(-1, 1), random.uniform(-1, 1)) for _ in range(320)]; open('%t/table.csv', 'w').write('\n'.join(f'{a:.4f},{b:.4f},{a * b + 0.5 * a:.4f}' for a, b in rows) + '\n')"
// RUN: aicf train %S/inputs/l1-dropout.mlir.txt --data %t/table.csv --epochs 20 --lr 0.01 --optimizer adam --no-runs-db --out %t/l1 --checkpoint-dir %t/ckl1 --no-progress > %t/l1.txt
// RUN: aicf eval %S/inputs/l1-dropout.mlir.txt --data %t/table.csv --checkpoint %t/ckl1 --out %t/eval > %t/l1-eval.txt
// RUN: cat %t/l1.txt %t/l1-eval.txt | FileCheck %s --check-prefix=L1
// L1: epoch  20/20  train loss {{[0-9.]+}}  val loss [[HELD:0\.[0-9]+]]  (
// L1: final held-out loss [[HELD]] after 20 epochs
// L1: loss [[HELD]] (the model's @loss) on 64 held-out rows of {{.*}}table.csv
// The form that scores it is @loss without its dropout (the run's @loss
// keeps it), and its own: a model's function of that name is left alone.
// RUN: aicf compile %S/inputs/l1-dropout.mlir.txt --emit ll | FileCheck %s --check-prefix=EVALFN
// EVALFN: func.func @loss(
// EVALFN: ll.dropout
// EVALFN: func.func @__aicf_loss_eval(
// EVALFN-NOT: ll.dropout
// EVALFN: return
// RUN: grep -c '"unit":""' %t/l1/metrics.jsonl | FileCheck %s --check-prefix=UNIT
// UNIT: 20
// RUN: aicf train %S/inputs/ids-bag-sum.mlir.txt --data %S/inputs/ids.csv --epochs 5 --lr 0.1 --optimizer adam --no-runs-db --out %t/sum --checkpoint-dir %t/cksum --no-progress > %t/sum.txt 2>&1
// RUN: aicf eval %S/inputs/ids-bag-sum.mlir.txt --data %S/inputs/ids.csv --checkpoint %t/cksum --out %t/eval > %t/sum-eval.txt
// RUN: cat %t/sum.txt %t/sum-eval.txt | FileCheck %s --check-prefix=SUM
// SUM: epoch   5/5  train loss {{[0-9.]+}}  val loss [[SUMHELD:[0-9]+\.[0-9]+]]  val accuracy
// SUM-NOT: guess
// SUM: accuracy {{.*}}; loss [[SUMHELD]] (the model's @loss)
