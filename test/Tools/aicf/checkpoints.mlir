// Checkpoints hold the model they belong to (its IR), the run's record, the
// GEMM choices and an adaptive run's state, so that a resume on a fresh
// cache continues bit for bit, a run forks from any model version, and no
// diverged or interrupted run costs the last good checkpoint.
// RUN: rm -rf %t && mkdir -p %t

// An adaptive run: 4 epochs straight, against 2 epochs and a resume to 4 on
// a fresh cache (kernels from scratch; every GEMM pinned to the generated
// kernels, since a fresh registry's timing, on a loaded machine, could
// choose another candidate, whose sums differ in the last bits). The widening at
// step 50 is still watched when epoch 2 ends (step 90): the checkpoint
// carries the model it replaced, and the deepening at step 100 is replayed.
// RUN: env AICF_CACHE_DIR=%t/cache-a aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --gemm generated --out %t/a --checkpoint-dir %t/a-ckpt --adapt %S/inputs/grow-steps.toml > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache-a aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --gemm generated --out %t/b --checkpoint-dir %t/b-ckpt --adapt %S/inputs/grow-steps.toml > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache-c aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --gemm generated --out %t/b --checkpoint-dir %t/b-ckpt --adapt %S/inputs/grow-steps.toml --resume | FileCheck %s --check-prefix=ADAPT
// RUN: python3 %S/inputs/same-tensors.py %t/a-ckpt/last.safetensors %t/b-ckpt/last.safetensors | FileCheck %s --check-prefix=SAME
// RUN: FileCheck %s --check-prefix=LOG < %t/b/decisions.jsonl
// RUN: ls %t/b-ckpt | FileCheck %s --check-prefix=VERSIONS
// ADAPT: resumed from {{.*}}b-ckpt{{/|\\}}last.safetensors at epoch 2 (step 90)
// ADAPT-NOT: step 50
// ADAPT: step 100 (epoch 3): deepen after fc1 (residual, zero output) on step 100 reached -> accepted
// ADAPT: epoch   4/4
// ADAPT: adaptive run: 2 decisions
// SAME: same {{[0-9]+}} tensors
// LOG: "step":50,{{.*}}"outcome":"accepted"
// LOG-NEXT: "step":100,{{.*}}"outcome":"accepted"
// VERSIONS: last.safetensors
// VERSIONS: model-v0.mlir
// VERSIONS: model-v1.mlir
// VERSIONS: model-v2.mlir
// VERSIONS: model.mlir
// VERSIONS: v0.safetensors
// VERSIONS: v1.safetensors
// VERSIONS: v2.safetensors

// A fork from an earlier model version: v1 (fc1 widened) as it was at the
// end of epoch 2, trained on without the policy, into its own directory.
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/fork --checkpoint-dir %t/fork-ckpt --resume-from %t/b-ckpt/v1.safetensors | FileCheck %s --check-prefix=FORK
// RUN: FileCheck %s --check-prefix=FORKMODEL < %t/fork-ckpt/model.mlir
// FORK: resumed from {{.*}}v1.safetensors at epoch 2 (step 90)
// FORK: epoch   3/3
// FORKMODEL: hl.param @fc1.weight : tensor<32x64xf32>
// FORKMODEL-NOT: fc1_deep1

// Resumed from v1 in its own directory, the run replays the deepening:
// the model it grows into is the v2 already there, not a new number.
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --out %t/b --checkpoint-dir %t/b-ckpt --adapt %S/inputs/grow-steps.toml --resume-from %t/b-ckpt/v1.safetensors > /dev/null
// RUN: ls %t/b-ckpt | FileCheck %s --check-prefix=SAMEVERSIONS
// RUN: python3 %S/inputs/same-tensors.py %t/a-ckpt/last.safetensors %t/b-ckpt/last.safetensors | FileCheck %s --check-prefix=SAME
// SAMEVERSIONS: model-v2.mlir
// SAMEVERSIONS-NOT: model-v3.mlir
// A policy other than the one the run used is refused.
// RUN: sed 's/at = 100/at = 120/' %S/inputs/grow-steps.toml > %t/other-policy.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --out %t/b --checkpoint-dir %t/b-ckpt --adapt %t/other-policy.toml --resume 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: error: {{.*}}last.safetensors: the checkpoint's run grew by another policy (file hash {{[0-9a-f]+}}) than {{.*}}.toml (hash {{[0-9a-f]+}}): its decisions would replay differently
// Forced on (--override-resume), another policy (here of another rule
// count) starts afresh on the checkpoint's model, as a fork from a model
// version that tries another growth does (it was refused: the earlier
// policy's state did not fit it, so the suggested flag led nowhere).
// RUN: printf 'prefetch = false\n[[rule]]\nwhen = "steps"\nevery = 20\naction = { op = "widen", layer = "fc1", factor = 2.0, rule = "net2wider", split_noise = 0.1 }\n' > %t/one-rule.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --out %t/b2 --checkpoint-dir %t/b2-ckpt --adapt %t/one-rule.toml --resume-from %t/b-ckpt/v1.safetensors --override-resume --no-progress 2>&1 | FileCheck %s --check-prefix=RULES
// RULES: note: {{.*}}b-ckpt/v1.safetensors: its run grew by another policy: {{.*}}one-rule.toml starts afresh from the checkpoint's model (its rules act from step 90 on)
// RULES: step 100 (epoch 3): widen fc1 to 64 {{.*}} -> accepted
// RULES: epoch   5/5
// A policy that starts afresh is checked against the checkpoint's model,
// as a fresh run's is against its own (a misspelt layer trained on, said
// nothing), and a step rule the checkpoint has passed is said never to act.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "widen", layer = "fc1", factor = 2.0 }\n[[rule]]\nwhen = "steps"\nat = 120\naction = { op = "widen", layer = "fc9", factor = 2.0 }\n' > %t/misspelt.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --out %t/b3 --checkpoint-dir %t/b3-ckpt --adapt %t/misspelt.toml --resume-from %t/b-ckpt/v1.safetensors --override-resume --no-progress 2>&1 | FileCheck %s --check-prefix=AFRESH
// AFRESH: note: policy rule 1 fires at step 10, which the checkpoint's run has passed (step 90): it never acts
// AFRESH: error: {{.*}}misspelt.toml: policy rule 2 (action {{.*}}fc9{{.*}}) can never act on this model: the model has no layer fc9 (its layers: fc1, fc2)
// So is one given to the resume of a run that had none (no flag needed,
// nothing to go on with: it was not checked at all).
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/plain --checkpoint-dir %t/plain-ckpt --no-progress > /dev/null
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/plain --checkpoint-dir %t/plain-ckpt --adapt %t/misspelt.toml --resume --no-progress 2>&1 | FileCheck %s --check-prefix=AFRESHPLAIN
// AFRESHPLAIN: note: policy rule 1 fires at step 10, which the checkpoint's run has passed (step 45): it never acts
// AFRESHPLAIN: error: {{.*}}misspelt.toml: policy rule 2 {{.*}} can never act on this model: the model has no layer fc9

// A plain run resumed on a fresh cache ends where a straight one does
// (GEMMs pinned, as above).
// RUN: env AICF_CACHE_DIR=%t/cache-p aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --gemm generated --out %t/p --checkpoint-dir %t/p-straight > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache-p aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --gemm generated --out %t/q --checkpoint-dir %t/p-resumed > /dev/null
// RUN: env AICF_CACHE_DIR=%t/cache-q aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --gemm generated --out %t/q --checkpoint-dir %t/p-resumed --resume > /dev/null
// RUN: python3 %S/inputs/same-tensors.py %t/p-straight/last.safetensors %t/p-resumed/last.safetensors | FileCheck %s --check-prefix=SAME

// Asking for epochs the checkpoint has reached trains nothing and keeps
// the metrics.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/q --checkpoint-dir %t/p-resumed --resume | FileCheck %s --check-prefix=NOTHING
// RUN: FileCheck %s --check-prefix=KEPTMETRICS < %t/q/metrics.jsonl
// NOTHING: note: nothing to train: {{.*}}last.safetensors is at epoch 3, and this run asks for 2 epochs (raise --epochs to go on)
// NOTHING: final held-out accuracy {{[0-9.]+}}% after 3 epochs
// KEPTMETRICS: {"epoch":1,
// KEPTMETRICS: {"epoch":2,
// KEPTMETRICS: {"epoch":3,
// A run that spent its --flops-budget, resumed with the same budget,
// trains nothing (it trained one step more, and wrote a checkpoint, each
// time); the checkpoint stays as it was.
// The budget's end is said (the epochs counted to 6 of 100, then stopped).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 100 --flops-budget 3e8 --out %t/fb --checkpoint-dir %t/fb-ckpt --no-progress 2>&1 | FileCheck %s --check-prefix=ENDS
// ENDS: epoch   6/100
// ENDS-NEXT: note: --flops-budget 3.0000e8 spent ({{[0-9.]+}}e8 training FLOPs) during epoch 6 of 100: the run ends with it
// RUN: cp %t/fb-ckpt/last.safetensors %t/fb-before.safetensors
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 100 --flops-budget 3e8 --out %t/fb --checkpoint-dir %t/fb-ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=SPENT
// RUN: cmp %t/fb-ckpt/last.safetensors %t/fb-before.safetensors
// SPENT: note: nothing to train: {{.*}}last.safetensors has spent {{[0-9.]+}}e8 training FLOPs, and this run's --flops-budget is 3.0000e8 (raise it to go on)
// SPENT: final held-out accuracy {{[0-9.]+}}% after 6 epochs (233 steps

// A policy's state goes through a resume without --adapt: resumed with
// the policy again, its one rewrite (max_rewrites = 1) is counted and its
// decision kept (it started over from zero and widened again).
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --epochs 3 --adapt %S/inputs/grow-once.toml --out %t/once --checkpoint-dir %t/once-ckpt --no-progress > /dev/null
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --epochs 5 --out %t/once --checkpoint-dir %t/once-ckpt --resume --no-progress > /dev/null 2>&1
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --epochs 8 --adapt %S/inputs/grow-once.toml --out %t/once --checkpoint-dir %t/once-ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=ONCE
// ONCE-NOT: widen fc1
// ONCE: adaptive run: 1 decision{{s?}} (log
// ONCE-SAME: final model 2410 parameters

// The grown model the checkpoint holds, given to resume: named as such,
// with the run's first model to give instead.
// RUN: not aicf train %t/once-ckpt/model.mlir --data %S/../../../data/digits.csv.gz --optimizer adam --epochs 9 --adapt %S/inputs/grow-once.toml --out %t/once --checkpoint-dir %t/once-ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=GROWNGIVEN
// GROWNGIVEN: error: {{.*}}last.safetensors: {{.*}}model.mlir is the model this checkpoint holds (grown by its run's policy), not the one its run started from (IR hash {{[0-9a-f]+}}); resume with the run's first model, {{.*}}once-ckpt/model-v0.mlir (the checkpoint carries the growth)

// A comment added to the model between runs changes nothing: no note of a
// grown model.
// RUN: cp %S/../../../examples/mlp/digits_mlp.mlir %t/commented.mlir
// RUN: aicf train %t/commented.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/cm --checkpoint-dir %t/cm-ckpt --no-progress > /dev/null
// RUN: echo "// a comment" >> %t/commented.mlir
// RUN: aicf train %t/commented.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/cm --checkpoint-dir %t/cm-ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=COMMENTED
// COMMENTED-NOT: grown version
// COMMENTED: after 2 epochs

// The same checkpoint with an --out holding another run's metrics (a
// 1-epoch run's) reports no figures rather than that run's.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/other-out > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/other-out --resume-from %t/p-resumed/last.safetensors 2>&1 | FileCheck %s --check-prefix=STALE
// STALE: note: nothing to train: {{.*}}last.safetensors is at epoch 3
// STALE: note: {{.*}}other-out/metrics.jsonl ends at epoch 1, not at this checkpoint's epoch 3 (its run wrote them to another --out?): no figures to report
// STALE-NOT: after 1 epoch
// STALE: no epoch trained
// One holding another run's records past the checkpoint's epoch (a
// 5-epoch run of another batch, its epoch 3 at another step) says so (it
// said "ends at epoch 3, not at this checkpoint's epoch 3").
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --batch 64 --out %t/longer-out > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/longer-out --resume-from %t/p-resumed/last.safetensors 2>&1 | FileCheck %s --check-prefix=LONGER
// LONGER: note: {{.*}}longer-out/metrics.jsonl holds another run's records (its epoch 3 ends at step {{[0-9]+}}, this checkpoint's at step {{[0-9]+}}) {{.*}}: no figures to report

// A resume with another learning rate, seed or data is refused, naming both
// values, unless --override-resume says to go on. A learning rate that
// blows the model up stops the run in the step it happens, and the last
// good checkpoint stays as it was. A save killed halfway left a temporary
// file behind: the next save removes it.
// RUN: cp %t/p-resumed/last.safetensors %t/good.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --lr 1e-2 --out %t/q --checkpoint-dir %t/p-resumed --resume 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --seed 7 --out %t/q --checkpoint-dir %t/p-resumed --resume 2>&1 | FileCheck %s --check-prefix=SEED
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,1000p | gzip > %t/digits.csv.gz
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/digits.csv.gz --epochs 5 --out %t/q --checkpoint-dir %t/p-resumed --resume 2>&1 | FileCheck %s --check-prefix=DATA
// RUN: printf 'torn' > %t/p-resumed/last.partial999999999
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --lr 1e5 --override-resume --out %t/q --checkpoint-dir %t/p-resumed --resume 2>&1 | FileCheck %s --check-prefix=DIVERGED
// RUN: cmp %t/good.safetensors %t/p-resumed/last.safetensors
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --lr 1e-3 --override-resume --out %t/q --checkpoint-dir %t/p-resumed --resume | FileCheck %s --check-prefix=OVERRIDE
// RUN: ls %t/p-resumed | FileCheck %s --check-prefix=NOPARTIAL
// LR: error: {{.*}}last.safetensors: the checkpoint was trained with lr 0.003; this run asks for 0.01 (--lr 0.003 resumes as it trained; --override-resume goes on anyway)
// SEED: error: {{.*}}last.safetensors: the checkpoint was trained with seed 0; this run asks for 7
// DATA: error: {{.*}}last.safetensors: the checkpoint was trained with data digits.csv.gz ({{[0-9a-f]+}}); this run asks for digits.csv.gz ({{[0-9a-f]+}})
// DIVERGED: note: {{.*}}the checkpoint was trained with lr 0.003; this run asks for 100000; going on (--override-resume)
// DIVERGED: error: the loss became {{.*}} at epoch 4, step {{[0-9]+}} (lr 100000){{.*}}lower the learning rate; the last good checkpoint, {{.*}}last.safetensors (epoch 3), is kept
// OVERRIDE: resumed from {{.*}} at epoch 3
// OVERRIDE: epoch   4/4
// NOPARTIAL-NOT: partial

// The last step of an epoch blows the parameters up: its own loss was
// fine, the held-out loss shows it (NaN, or finite but 1e4 times the run's
// first loss), and the epoch's state is not saved over the good
// checkpoint. (40 rows: one training step per epoch.)
// RUN: gzip -dc %S/../../../data/digits.csv.gz | sed -n 1,40p > %t/forty.csv
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/forty.csv --epochs 1 --out %t/e --checkpoint-dir %t/e-ckpt > /dev/null
// RUN: cp %t/e-ckpt/last.safetensors %t/e-good.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/forty.csv --epochs 3 --lr 1e30 --override-resume --out %t/e --checkpoint-dir %t/e-ckpt --resume 2>&1 | FileCheck %s --check-prefix=EPOCHEND
// RUN: cmp %t/e-good.safetensors %t/e-ckpt/last.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/forty.csv --epochs 3 --lr 1e6 --override-resume --out %t/e --checkpoint-dir %t/e-ckpt --resume 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: cmp %t/e-good.safetensors %t/e-ckpt/last.safetensors
// HUGE: error: the held-out loss became {{[0-9.]+}}e{{[0-9]+}} at the end of epoch 2 (lr 1000000): training diverged{{.*}}(epoch 1), is kept
// EPOCHEND: error: the held-out loss became {{.*}} at the end of epoch 2 (lr 1e30): training diverged; lower the learning rate; the last good checkpoint, {{.*}}last.safetensors (epoch 1), is kept
// Resumed without its policy, a grown run goes on with the grown model the
// checkpoint holds, and says so (it trained it naming the file given).
// RUN: rm -rf %t/grown-copy && cp -r %t/b-ckpt %t/grown-copy
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --out %t/grown-on --checkpoint-dir %t/grown-copy --resume --no-progress 2>&1 | FileCheck %s --check-prefix=GROWNON
// GROWNON: note: {{.*}}grown-copy/last.safetensors: the checkpoint's run changed its model by a policy; without --adapt this run trains the model on as it is
// GROWNON: note: {{.*}}grown-copy/last.safetensors: the checkpoint holds a grown version of {{.*}}narrow_mlp.mlir ({{.*}}resumed-model.mlir); training goes on with it

// A fork of another model's checkpoint (--override-resume) trains that
// model and records it as its run's model: its own resume takes the
// model-v0.mlir it wrote (refused before as "not the one its run started
// from", its checkpoints recording the model named), and it is not called
// a grown version of the model named.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/other-src --checkpoint-dir %t/other-src-ckpt --no-runs-db --no-progress > /dev/null
// RUN: aicf train %S/../../../examples/cnn/digits_cnn.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --resume-from %t/other-src-ckpt/last.safetensors --override-resume --out %t/other --checkpoint-dir %t/other-ckpt --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=FORKOTHER
// FORKOTHER: the checkpoint is of another model {{.*}}; going on with the checkpoint's model, not {{.*}}digits_cnn.mlir (--override-resume)
// FORKOTHER-NOT: grown version
// RUN: aicf train %t/other-ckpt/model-v0.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/other-on --checkpoint-dir %t/other-ckpt --resume --no-runs-db --no-progress 2>&1 | FileCheck %s --check-prefix=FORKON
// FORKON: resumed from {{.*}}other-ckpt/last.safetensors at epoch 2

// A resume into another --out than the run's first: its metrics start at
// the resumed epoch, and a note says where the others are not.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/gap-first --checkpoint-dir %t/gap-ckpt --no-progress > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/gap-second --checkpoint-dir %t/gap-ckpt --resume --no-progress 2>&1 | FileCheck %s --check-prefix=GAP
// GAP: note: {{.*}}gap-second/metrics.jsonl holds no epoch of the 1 this checkpoint has trained (the rest were written to another --out, or the run stopped between saving its checkpoint and its metrics): its curve goes on from here with a gap
// GAP: after 2 epochs
