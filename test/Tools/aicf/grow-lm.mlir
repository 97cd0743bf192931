// `aicf train --adapt` on a transformer: the 2-block, 64-wide char LM grows
// at step 3 into 4 blocks of width 128 (residual stream, heads, MLPs, two
// stacked blocks, the MLP units and blocks masked in), the probe loss does
// not move, and the grown model (with its mask counters and ages) is the
// checkpoint's, trains on, and resumes from the checkpoint.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/grow_lm/small2x.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 48 --eval-windows 16 --epochs 3 --lr 6e-3 --out %t/run --checkpoint-dir %t/ckpt --adapt %S/inputs/grow-lm.toml | FileCheck %s
// RUN: FileCheck %s --check-prefix=MODEL < %t/ckpt/model.mlir
// RUN: aicf train %S/../../../examples/grow_lm/small2x.mlir --data %S/../../../data/tinyshakespeare.txt --windows-per-epoch 48 --eval-windows 16 --epochs 4 --lr 6e-3 --out %t/run --checkpoint-dir %t/ckpt --adapt %S/inputs/grow-lm.toml --resume | FileCheck %s --check-prefix=RESUME

// CHECK: step 3 (epoch 1): widen the residual stream to 128; grow blocks.0.attn to 4 heads; grow blocks.1.attn to 4 heads; widen blocks.0.mlp.fc to 512 (fresh, masked over 4 steps); widen blocks.1.mlp.fc to 512 (fresh, masked over 4 steps); add a block to blocks after the last (copy, masked over 4 steps); add a block to blocks after the last (copy, masked over 4 steps) on step 3 reached -> accepted [tok_emb.weight 65x64 -> 65x128, {{.*}} more changes in the decision log], probe loss [[L:[0-9.]+]] -> [[L]]
// CHECK: epoch   3/3
// CHECK: final model 818176 parameters

// RESUME: resumed from {{.*}}last.safetensors at epoch 3 (step 9)
// RESUME: epoch   4/4
// RESUME: final model 818176 parameters

// MODEL: hl.param @tok_emb.weight : tensor<65x128xf32>
// MODEL: hl.state @tok_emb.weight.age : tensor<65x128xf32> of @tok_emb.weight slot "age" init <zeros>
// MODEL: hl.state @blocks.0.mlp.fc.mask : tensor<512xf32> slot "mask" init <zeros> {delay = 0 : i64, ramp = 4 : i64}
// MODEL: hl.state @blocks.3.mask : tensor<f32> slot "mask" init <zeros> {delay = 2 : i64, ramp = 4 : i64}
// MODEL-LABEL: func.func @loss
// MODEL: hl.min {{.*}} {hl.mask = "blocks.0.mlp.fc.mask"}
