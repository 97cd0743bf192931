// hl-optimizer{data-parallel}: the train step takes the replica's share of
// the global batch (`replica_weight`, after the learning rate), and before
// anything reads them, the loss, every gradient (the last parameter's
// first, the order the backward pass makes them) and every state the model
// sets are summed over the replicas, weighted (`hl.all_reduce`). The
// update then reads the sums. A weight of another type is refused.
// RUN: split-file %s %t
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=sgd data-parallel=true" | FileCheck %s
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=sgd" | FileCheck %s --check-prefix=ALONE
// RUN: not aicf-opt %t/bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD
//
// With accumulate, the step is also split where its gradients are summed,
// the sums kept in accumulator states (slot "grad_sum"): @train_grad adds
// one micro-batch's loss, gradients and set states, scaled by its share
// (`hl.all_reduce {local}`: summed over nothing), to them (the step's
// first micro-batch replaces them); @train_apply sums them over the
// replicas and makes @train_step's update. The whole train pipeline takes
// the three functions.
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=sgd data-parallel=true accumulate=true" | FileCheck %s --check-prefix=ACC
// RUN: aicf-opt %t/model.mlir --aicf-train-pipeline="optimizer=sgd data-parallel=true accumulate=true" | FileCheck %s --check-prefix=ACCLL
//
// Under loss scaling, a replica of weight 0 (no rows of a short last batch)
// adds exact zeros: an overflow in its one row's scaled gradient (inf)
// times 0 was NaN in the sum, and every replica skipped the step.
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=sgd data-parallel=true loss-scale=1024" | FileCheck %s --check-prefix=SCALED
// SCALED-LABEL: func.func @train_step(
// SCALED: %[[IDLE:.*]] = hl.compare eq, %arg3, %{{.*}} : tensor<f32>, tensor<f32>
// SCALED: %[[L:.*]] = hl.select %[[IDLE]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<f32>, tensor<f32>
// SCALED: hl.all_reduce %[[L]], %arg3
// SCALED: %[[G:.*]] = hl.select %[[IDLE]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<f32>, tensor<8x4xf32>
// SCALED: hl.all_reduce %[[G]], %arg3

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: {hl.bind = "lr"}, %[[W:.*]]: tensor<f32> {hl.bind = "replica_weight"})
// CHECK: %[[MEAN:.*]] = hl.reduce_mean
// CHECK: %[[LOSS:.*]] = hl.cross_entropy
// CHECK: %[[DW:.*]] = hl.matmul
// CHECK: %[[DB:.*]] = hl.reduce_sum
// CHECK: %[[L:.*]] = hl.all_reduce %[[LOSS]], %[[W]] : tensor<f32>, tensor<f32>
// CHECK: %[[B:.*]] = hl.all_reduce %[[DB]], %[[W]] : tensor<8xf32>, tensor<f32>
// CHECK: %[[G:.*]] = hl.all_reduce %[[DW]], %[[W]] : tensor<8x4xf32>, tensor<f32>
// CHECK: %[[M:.*]] = hl.all_reduce %[[MEAN]], %[[W]] : tensor<8xf32>, tensor<f32>
// CHECK: hl.mul %[[G]], %arg2
// CHECK: hl.mul %[[B]], %arg2
// CHECK: return %[[L]], {{.*}}, %[[M]] :

// ALONE-LABEL: func.func @train_step(
// ALONE-SAME: {hl.bind = "lr"}) ->
// ALONE-NOT: hl.all_reduce
// ALONE: return

// ACC: hl.state @accumulated.loss : tensor<f32> slot "grad_sum" init <zeros>
// ACC: hl.state @accumulated.fc1.weight : tensor<8x4xf32> slot "grad_sum"
// ACC: hl.state @accumulated.fc1.bias : tensor<8xf32> slot "grad_sum"
// ACC: hl.state @accumulated.set.bn.running_mean : tensor<8xf32> slot "grad_sum"
// ACC-LABEL: func.func @train_step(
// ACC-NOT: {local}
// ACC-LABEL: func.func @train_grad(
// ACC-SAME: %[[W:arg[0-9]+]]: tensor<f32> {hl.bind = "replica_weight"}, %[[F:arg[0-9]+]]: tensor<f32> {hl.bind = "first_micro_batch"}) -> (tensor<f32> {hl.bind = "state @accumulated.loss"}, tensor<8x4xf32> {hl.bind = "state @accumulated.fc1.weight"}, tensor<8xf32> {hl.bind = "state @accumulated.fc1.bias"}, tensor<8xf32> {hl.bind = "state @accumulated.set.bn.running_mean"})
// ACC: %[[L:.*]] = hl.all_reduce %{{.*}}, %[[W]] {local} : tensor<f32>, tensor<f32>
// ACC: %[[G:.*]] = hl.all_reduce %{{.*}}, %[[W]] {local} : tensor<8x4xf32>, tensor<f32>
// ACC: %[[FIRST:.*]] = hl.compare ge, %[[F]]
// ACC: %[[SL:.*]] = hl.get_state @accumulated.loss
// ACC: %[[AL:.*]] = hl.add %[[SL]], %[[L]]
// ACC: %[[NL:.*]] = hl.select %[[FIRST]], %[[L]], %[[AL]]
// ACC: return %[[NL]],
// ACC-LABEL: func.func @train_apply(
// ACC-SAME: %arg0: tensor<f32> {hl.bind = "lr"}, %arg1: tensor<f32> {hl.bind = "replica_weight"})
// ACC-NOT: hl.matmul
// ACC: %[[SW:.*]] = hl.get_state @accumulated.fc1.weight
// ACC: %[[RW:.*]] = hl.all_reduce %[[SW]], %arg1 : tensor<8x4xf32>, tensor<f32>
// ACC: hl.mul %[[RW]], %arg0
// ACC: return

// ACCLL-LABEL: func.func @train_grad(
// ACCLL: ll.all_reduce {{.*}} {{{.*}}local{{.*}}}
// ACCLL-LABEL: func.func @train_apply(
// ACCLL: ll.all_reduce
// ACCLL-NOT: local

// BAD: 'hl.all_reduce' op weight must be a rank-0 tensor of the input's element type ('f32'), got 'tensor<2xf32>'

//--- model.mlir
hl.param @fc1.weight : tensor<8x4xf32> owner "fc1" init <zeros>
hl.param @fc1.bias : tensor<8xf32> owner "fc1" init <zeros>
hl.state @bn.running_mean : tensor<8xf32> slot "running_mean" init <zeros>
func.func @loss(%x: tensor<16x4xf32>, %y: tensor<16xi32>) -> tensor<f32> {
  %w = hl.get_param @fc1.weight : tensor<8x4xf32>
  %b = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w, %b : tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>
  %m = hl.reduce_mean %h axes = [0] : tensor<16x8xf32>
  hl.set_state @bn.running_mean, %m : tensor<8xf32>
  %l = hl.cross_entropy %h, %y : tensor<16x8xf32>, tensor<16xi32>
  return %l : tensor<f32>
}

//--- bad.mlir
func.func @f(%g: tensor<2xf32>, %w: tensor<2xf32>) -> tensor<2xf32> {
  %s = hl.all_reduce %g, %w : tensor<2xf32>, tensor<2xf32>
  return %s : tensor<2xf32>
}
