// hl-optimizer: the optimizer state as hl.state slots tied to their
// parameters, and @train_step's update with its ABI tags.
// RUN: split-file %s %t
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=adamw weight-decay=0.01" --canonicalize | FileCheck %s --check-prefix=ADAMW
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=sgd momentum=0.9 nesterov=true clip-norm=1.0" --canonicalize | FileCheck %s --check-prefix=SGD
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=adamw weight-decay=0.01 decay-min-rank=2 eps=1e-6" --canonicalize | FileCheck %s --check-prefix=GROUPS
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=adamw weight-decay=0.01 decay-min-rank=-1" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not aicf-opt %t/model.mlir --hl-optimizer=kind=lion 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=sgd momentum=-1" 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=sgd momentum=nan" 2>&1 | FileCheck %s --check-prefix=NANMOMENTUM
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=sgd nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=adam beta2=1" 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=adamw weight-decay=-0.5" 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not aicf-opt %t/model.mlir --hl-optimizer="kind=adam clip-norm=-1" 2>&1 | FileCheck %s --check-prefix=CLIP
// MOMENTUM: hl-optimizer: momentum=-1 is not in [0, 1)
// NANMOMENTUM: hl-optimizer: momentum=NaN is not a finite number
// NESTEROV: hl-optimizer: nesterov=true needs a momentum above 0
// BETA: hl-optimizer: beta2=1 is not in [0, 1)
// DECAY: hl-optimizer: weight-decay=-0.5 is not at least 0
// CLIP: hl-optimizer: clip-norm=-1 is not above 0 (0 turns clipping off)
// RUN: not aicf-opt %t/taken.mlir --hl-optimizer 2>&1 | FileCheck %s --check-prefix=TAKEN

// Two slots per parameter, after the parameters, then the step count.
// ADAMW: hl.param @fc.weight : tensor<4x3xf32>
// ADAMW-NEXT: hl.param @fc.bias : tensor<4xf32>
// ADAMW-NEXT: hl.state @fc.weight.exp_avg : tensor<4x3xf32> of @fc.weight slot "exp_avg" init <zeros>
// ADAMW-NEXT: hl.state @fc.weight.exp_avg_sq : tensor<4x3xf32> of @fc.weight slot "exp_avg_sq" init <zeros>
// ADAMW-NEXT: hl.state @fc.bias.exp_avg : tensor<4xf32> of @fc.bias slot "exp_avg" init <zeros>
// ADAMW-NEXT: hl.state @fc.bias.exp_avg_sq : tensor<4xf32> of @fc.bias slot "exp_avg_sq" init <zeros>
// ADAMW-NEXT: hl.state @step : tensor<i64> slot "step" init <zeros>
// The gradient function hl-autodiff made on the way.
// ADAMW: func.func @loss_grad(
// The batch and the learning rate go in; the loss, the parameters and the
// state come out, each tagged with what it updates.
// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: %{{.*}}: tensor<2x3xf32> {hl.bind = "input"}, %{{.*}}: tensor<2xi32> {hl.bind = "input"}, %[[LR:.*]]: tensor<f32> {hl.bind = "lr"})
// ADAMW-SAME: -> (tensor<f32> {hl.bind = "loss"}, tensor<4x3xf32> {hl.bind = "param @fc.weight"}, tensor<4xf32> {hl.bind = "param @fc.bias"},
// ADAMW-SAME: tensor<4x3xf32> {hl.bind = "state @fc.weight.exp_avg"}, tensor<4x3xf32> {hl.bind = "state @fc.weight.exp_avg_sq"},
// ADAMW-SAME: tensor<4xf32> {hl.bind = "state @fc.bias.exp_avg"}, tensor<4xf32> {hl.bind = "state @fc.bias.exp_avg_sq"}, tensor<i64> {hl.bind = "state @step"})
// ADAMW: %[[STEP:.*]] = hl.get_state @step : tensor<i64>
// ADAMW: %[[T:.*]] = hl.add %[[STEP]], %{{.*}} : tensor<i64>, tensor<i64>
// Bias corrections 1 - beta^t, once, in f64.
// ADAMW: hl.pow %{{.*}}, %{{.*}} : tensor<f64>, tensor<f64>
// ADAMW: %[[W:.*]] = hl.get_param @fc.weight : tensor<4x3xf32>
// Decoupled decay: p (1 - lr wd).
// ADAMW: %[[DECAYED:.*]] = hl.mul %[[W]], %{{.*}} : tensor<4x3xf32>, tensor<f32>
// ADAMW: hl.get_state @fc.weight.exp_avg : tensor<4x3xf32>
// ADAMW: hl.get_state @fc.weight.exp_avg_sq : tensor<4x3xf32>
// ADAMW: hl.sqrt
// ADAMW: %[[NEW_W:.*]] = hl.sub %[[DECAYED]], %{{.*}} : tensor<4x3xf32>, tensor<4x3xf32>
// ADAMW: return %{{.*}}, %[[NEW_W]], {{.*}}, %[[T]] :

// SGD with Nesterov momentum keeps one slot per parameter; clipping scales
// every gradient by one coefficient min(1, max / (norm + 1e-6)).
// SGD: hl.state @fc.weight.momentum : tensor<4x3xf32> of @fc.weight slot "momentum" init <zeros>
// SGD-NEXT: hl.state @fc.bias.momentum : tensor<4xf32> of @fc.bias slot "momentum" init <zeros>
// SGD-NEXT: hl.state @step
// SGD-LABEL: func.func @train_step(
// SGD: %[[NORM:.*]] = hl.sqrt %{{.*}} : tensor<f32>
// SGD: %[[COEF:.*]] = hl.min %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>
// SGD: hl.mul %{{.*}}, %[[COEF]] : tensor<4x3xf32>, tensor<f32>
// SGD: hl.mul %{{.*}}, %[[COEF]] : tensor<4xf32>, tensor<f32>
// SGD: hl.get_state @fc.weight.momentum

// nanoGPT's groups (decay-min-rank=2): the weight is decayed, the bias
// (one dimension) is not; eps reaches the denominator.
// GROUPS-LABEL: func.func @train_step(
// GROUPS: %[[EPS:.*]] = hl.constant dense<9.99999997E-7> : tensor<f32>
// The update reads each parameter again, after the bias corrections.
// GROUPS: hl.sub %{{.*}}, %{{.*}} : tensor<f64>, tensor<f64>
// GROUPS: hl.sub %{{.*}}, %{{.*}} : tensor<f64>, tensor<f64>
// GROUPS-NEXT: %[[W:.*]] = hl.get_param @fc.weight : tensor<4x3xf32>
// GROUPS: %[[DECAYED:.*]] = hl.mul %[[W]], %{{.*}} : tensor<4x3xf32>, tensor<f32>
// GROUPS: hl.add %{{.*}}, %[[EPS]] : tensor<4x3xf32>, tensor<f32>
// GROUPS: hl.sub %[[DECAYED]], %{{.*}} : tensor<4x3xf32>, tensor<4x3xf32>
// GROUPS-NEXT: %[[B:.*]] = hl.get_param @fc.bias : tensor<4xf32>
// GROUPS-NOT: hl.mul %[[B]],
// GROUPS: hl.add %{{.*}}, %[[EPS]] : tensor<4xf32>, tensor<f32>
// GROUPS: hl.sub %[[B]], %{{.*}} : tensor<4xf32>, tensor<4xf32>
// RANK: error: hl-optimizer: decay-min-rank=-1 is not a rank (0 or more)
// KIND: error: hl-optimizer: unknown optimizer kind 'lion'; expected sgd, adam or adamw
// TAKEN: taken.mlir:1:1: error: hl-optimizer: cannot declare optimizer state @step: the symbol exists

//--- model.mlir
hl.param @fc.weight : tensor<4x3xf32> owner "fc" init <kaiming_uniform>
hl.param @fc.bias : tensor<4xf32> owner "fc" init <zeros>
func.func @loss(%x: tensor<2x3xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  %w = hl.get_param @fc.weight : tensor<4x3xf32>
  %b = hl.get_param @fc.bias : tensor<4xf32>
  %l = hl.linear %x, %w, %b : tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>
  %ce = hl.cross_entropy %l, %y : tensor<2x4xf32>, tensor<2xi32>
  return %ce : tensor<f32>
}

//--- taken.mlir
hl.param @step : tensor<4xf32> owner "" init <zeros>
func.func @loss() -> tensor<f32> {
  %w = hl.get_param @step : tensor<4xf32>
  %l = hl.reduce_sum %w axes = [0] : tensor<4xf32>
  return %l : tensor<f32>
}
