// `aicf train --adapt`: the model changes while it trains. At step 50 fc1
// widens from 16 to 32 units (Net2Wider), at step 100 a residual block is
// inserted after it; each rewrite is checked on a probe batch (the loss
// unchanged), logged with its IR diff, and training goes on. The grown model
// is saved beside the checkpoint and a resumed run continues from it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 3e-3 --epochs 3 --out %t/run --checkpoint-dir %t/ckpt --adapt %S/inputs/grow-steps.toml | FileCheck %s
// RUN: FileCheck %s --check-prefix=LOG < %t/run/decisions.jsonl
// RUN: FileCheck %s --check-prefix=MODEL < %t/ckpt/model.mlir
// RUN: FileCheck %s --check-prefix=METRICS < %t/run/metrics.jsonl
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 3e-3 --epochs 4 --out %t/run --checkpoint-dir %t/ckpt --adapt %S/inputs/grow-steps.toml --resume | FileCheck %s --check-prefix=RESUME
// The grown checkpoint scored against the model the run started from: the
// model it holds is scored, and the note says so (it was "the checkpoint
// is of another model").
// RUN: aicf eval %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/ckpt/last.safetensors --out %t/eval 2>&1 | FileCheck %s --check-prefix=EVAL
// RUN: FileCheck %s --check-prefix=MODEL < %t/eval/checkpoint-model.mlir
// The run's latest model with its first version's checkpoint: a version of
// the same run, scored as the model the checkpoint holds (not refused as
// another model's).
// RUN: aicf eval %t/ckpt/model.mlir --data %S/../../../data/digits.csv.gz --checkpoint %t/ckpt/v0.safetensors --out %t/eval-v0 2>&1 | FileCheck %s --check-prefix=EVALV0
// EVALV0: note: {{.*}}v0.safetensors holds another version of {{.*}}model.mlir (a grown one, or an earlier one of its run): scoring the model it holds
// EVALV0: accuracy {{[0-9.]+}}% on 359 held-out rows
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/run --adapt %S/inputs/bad-policy.toml 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/run --adapt %t/missing.toml 2>&1 | FileCheck %s --check-prefix=MISSING

// CHECK: step 50 (epoch 2): widen fc1 to 32 (net2wider) on step 50 reached -> accepted [fc1.weight 16x64 -> 32x64, fc1.bias 16 -> 32, fc2.weight 10x16 -> 10x32], probe loss [[L1:[0-9.]+]] -> [[L1]]
// CHECK: step 100 (epoch 3): deepen after fc1 (residual, zero output) on step 100 reached -> accepted [+fc1_deep1.fc_in.weight 32x32, +fc1_deep1.fc_in.bias 32, +fc1_deep1.fc_out.weight 32x32, +fc1_deep1.fc_out.bias 32], probe loss [[L2:[0-9.]+]] -> [[L2]]
// CHECK: epoch   3/3
// CHECK: adaptive run: 2 decisions (log {{.*}}decisions.jsonl), final model 4522 parameters

// LOG: "step":50,{{.*}}"action":"widen fc1 to 32 (net2wider)",{{.*}}"params_before":1210,"params_after":2410,{{.*}}"exact":true,{{.*}}"outcome":"accepted"
// LOG: "step":100,{{.*}}"action":"deepen after fc1 (residual, zero output)",{{.*}}"outcome":"accepted"

// The observer's last gradient norms and update ratios, per layer, each epoch.
// METRICS: {"epoch":1,{{.*}}"grad_norm":{{[0-9.e-]+}},"layers":{"fc1":{"grad_norm":{{[0-9.e-]+}},"update_ratio":{{[0-9.e-]+}}},"fc2":{
// METRICS: {"epoch":3,{{.*}}"fc1_deep1.fc_in":{"grad_norm"

// MODEL: hl.param @fc1.weight : tensor<32x64xf32>
// MODEL: hl.param @fc1_deep1.fc_out.weight : tensor<32x32xf32>

// EVAL: note: {{.*}}last.safetensors holds another version of {{.*}}narrow_mlp.mlir (a grown one, or an earlier one of its run): scoring the model it holds, written to {{.*}}checkpoint-model.mlir
// EVAL: compiled {{.*}}checkpoint-model.mlir
// EVAL: accuracy {{[0-9.]+}}% on 359 held-out rows of {{.*}}digits.csv.gz (checkpoint {{.*}}last.safetensors, epoch 4)

// RESUME: resumed from {{.*}}last.safetensors at epoch 3 (step 135)
// RESUME: epoch   4/4

// BAD: policy rule 1: unknown trigger when = "sometimes" (epoch, steps, flops, plateau, val-plateau, instability)
// MISSING: missing.toml: No such file or directory
// Two rules at the same step: the step rules act once a step, the first
// whose rewrite changes the model, so the second acts only as a fallback
// (it never acted, silently): noted, naming both. A mask longer than 2^24
// steps (its counter is f32) is refused by its rule.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "widen", layer = "fc1", width = 32 }\n[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "deepen", after = "fc1" }\n' > %t/same-step.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/same --adapt %t/same-step.toml --no-progress 2>&1 | FileCheck %s --check-prefix=SAMESTEP
// SAMESTEP: note: policy rule 2 is set for step 10, as rule 1 is: it acts there only where rule 1's rewrite does not change the model (rejected, or at its cap); compose the two (action = { op = "compose", ops = [...] }) to apply both
// SAMESTEP: step 10 (epoch 1): widen fc1 to 32
// SAMESTEP-NOT: deepen
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "widen", layer = "fc1", width = 32, rule = "fresh", mask = 4, mask_delay = 2147483647 }\n' > %t/long-mask.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/long --adapt %t/long-mask.toml 2>&1 | FileCheck %s --check-prefix=LONGMASK
// LONGMASK: policy rule 1: action: mask = 4, mask_delay = 2147483647: together at most 16777216 steps
// In bf16 an exact widening is checked to about one bf16 rounding of the
// probe loss (the fp32 tolerance, 1e-5, rejected every one: 2e-4 here).
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --adapt %S/inputs/grow-steps.toml --precision bf16 --out %t/bf16 --no-progress 2>&1 | FileCheck %s --check-prefix=BF16GROW
// BF16GROW: step 50 (epoch 2): widen fc1 to 32 (net2wider) on step 50 reached -> accepted
// BF16GROW: adaptive run: 2 decisions {{.*}} final model 4522 parameters
// A step trigger fires once: a rule that rolled back at step 95 went back
// a second time when the replay reached step 95 again. A factor whose
// width passes 2^40 is refused by the tensor-size cap, naming it (it
// saturated to 2^64 - 1, which no pass option parsed); an add-block of a
// million blocks is refused when the policy is read (it hung, growing).
// RUN: printf 'prefetch = false\n[[rule]]\nwhen = "steps"\nat = 50\naction = { op = "widen", layer = "fc1", width = 32 }\n[[rule]]\nwhen = "steps"\nat = 95\naction = "rollback"\n' > %t-once.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/once --adapt %t-once.toml --no-progress | FileCheck %s --check-prefix=ONCE
// ONCE: step 95 (epoch 3): roll back on step 95 reached -> accepted
// ONCE-NOT: roll back on step 95
// ONCE: final held-out accuracy
// A rollback with nothing to go back to (before any epoch ended) says
// so once, rather than nothing.
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 5\naction = "rollback"\n' > %t-early.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/early --adapt %t-early.toml --no-progress | FileCheck %s --check-prefix=EARLY
// EARLY: step 5 (epoch 1): roll back on step 5 reached -> rejected{{.*}}: nothing to go back to: no epoch has ended yet, and no rewrite is being watched
// EARLY: final held-out accuracy
// A growth that repeats with no cap is noted when the run starts (a width
// doubled every step grew, unsaid, until memory refused a rewrite).
// RUN: printf '[[rule]]\nwhen = "steps"\nevery = 20\naction = { op = "widen", layer = "fc1", factor = 2.0 }\n' > %t-uncapped.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/uncapped --adapt %t-uncapped.toml --no-progress 2>&1 | FileCheck %s --check-prefix=UNCAPPED
// UNCAPPED: note: policy rule 1 widens fc1 by a factor with no max_width, and may fire again and again (no max_times): the model grows each time, until a rewrite needs more memory than the machine has (give its cap, or max_times)
// UNCAPPED: widen fc1 to 32
// (Beside a rule that grows the model, so that the run goes on to reject
// it: alone, it is refused before training.)
// RUN: printf 'prefetch = false\n[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "widen", layer = "fc1", factor = 1e300 }\n[[rule]]\nwhen = "steps"\nat = 40\naction = { op = "widen", layer = "fc1", width = 32 }\n' > %t-factor.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/factor --adapt %t-factor.toml --no-progress 2>&1 | FileCheck %s --check-prefix=FACTOR
// FACTOR: widen fc1 to 1099511627776 (net2wider) on step 10 reached -> rejected
// FACTOR: makes @fc1.weight [1099511627776, 64], {{.*}} more than the 1 TiB a tensor may hold
// A widen whose grown model the machine cannot hold is rejected before
// anything of it is allocated, counting the state, every batch size's
// arenas and the state carried over (each allocation was checked alone,
// and a widen to 20 million units was ended by the out-of-memory killer).
// Its parameters alone are more than the machine's memory, which the
// policy's check says before training (checkpoint-safety.mlir: refused
// there, where no other rule changes the model); here another rule grows
// first, so it is a note, and the rule is rejected where it fires.
// RUN: printf 'prefetch = false\n[[rule]]\nwhen = "steps"\nat = 5\naction = { op = "widen", layer = "fc1", width = 24, rule = "zero-out" }\n[[rule]]\nwhen = "steps"\nat = 10\naction = { op = "widen", layer = "fc1", width = 1000000000, rule = "zero-out" }\n' > %t-huge.toml
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/huge --adapt %t-huge.toml --no-progress 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: note: policy rule 2 {{.*}} cannot rewrite the model it starts from (the grown model's 75000000010 parameter values
// HUGE: widen fc1 to 24 (zero-out) on step 5 reached -> accepted
// HUGE: widen fc1 to 1000000000 (zero-out) on step 10 reached -> rejected
// HUGE-SAME: the grown model (225000000031 values of parameters and optimizer state, the arena of the largest function of 3 batch sizes, the state carried into it): {{[0-9.]+}} TiB of memory needed
// HUGE: final held-out accuracy
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 2\naction = { op = "add-block", count = 1000000 }\n' > %t-blocks.toml
// RUN: not aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/blocks --adapt %t-blocks.toml 2>&1 | FileCheck %s --check-prefix=BLOCKS
// BLOCKS: policy rule 1: action: count = 1000000: at most 64 blocks at once

// A tied output layer (it reads the embedding table through the final
// layer norm, as nanoGPT's and GPT-2's) widens with the stream by the mean
// rule, exactly: the table's new columns meet the norm's new channels,
// which are zero (it was refused: "tied weights cannot widen"). The
// duplicate rule would count copied channels twice: refused with why,
// before training where no other rule changes the model (it trained on,
// rejected at its step).
// RUN: printf 'verify_tolerance = 1e-4\n[[rule]]\nwhen = "steps"\nat = 2\naction = { op = "widen-residual", factor = 2.0 }\n' > %t/tied-mean.toml
// RUN: aicf train %S/inputs/tied-lm.mlir.txt --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 16 --eval-windows 4 --no-runs-db --no-progress --adapt %t/tied-mean.toml --out %t/tied-mean 2>&1 | FileCheck %s --check-prefix=TIEDMEAN
// TIEDMEAN: step 2 (epoch 1): widen the residual stream to 16 on step 2 reached -> accepted [wte.weight 65x8 -> 65x16, ln.weight 8 -> 16, ln.bias 8 -> 16], probe loss [[LOSS:[0-9.]+]] -> [[LOSS]]
// RUN: printf '[[rule]]\nwhen = "steps"\nat = 2\naction = { op = "widen-residual", factor = 2.0, rule = "duplicate" }\n' > %t/tied-dup.toml
// RUN: not aicf train %S/inputs/tied-lm.mlir.txt --data %S/../../../data/tinyshakespeare.txt --epochs 1 --windows-per-epoch 16 --eval-windows 4 --no-runs-db --no-progress --adapt %t/tied-dup.toml --out %t/tied-dup 2>&1 | FileCheck %s --check-prefix=TIEDDUP
// TIEDDUP: can never act on this model: hl-widen-residual: @wte.weight is also the output layer's weight (tied); a tied stream widens by rule=mean only
