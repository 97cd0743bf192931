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
// With accumulate, the step is also split where its gradients are summed:
// @train_grad scales one micro-batch's loss, gradients and set states by
// its share (`hl.all_reduce {local}`: summed over nothing) and returns
// them; @train_apply takes the sums and makes @train_step's update.
// RUN: aicf-opt %t/model.mlir --hl-optimizer="kind=sgd data-parallel=true accumulate=true" | FileCheck %s --check-prefix=ACC

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

// ACC-LABEL: func.func @train_step(
// ACC-NOT: {local}
// ACC-LABEL: func.func @train_grad(
// ACC-SAME: %[[W:arg[0-9]+]]: tensor<f32> {hl.bind = "replica_weight"}) -> (tensor<f32> {hl.bind = "loss"}, tensor<8x4xf32> {hl.bind = "result grad @fc1.weight"}, tensor<8xf32> {hl.bind = "result grad @fc1.bias"}, tensor<8xf32> {hl.bind = "result set @bn.running_mean"})
// ACC: %[[L:.*]] = hl.all_reduce %{{.*}}, %[[W]] {local} : tensor<f32>, tensor<f32>
// ACC: %[[B:.*]] = hl.all_reduce %{{.*}}, %[[W]] {local} : tensor<8xf32>, tensor<f32>
// ACC: %[[G:.*]] = hl.all_reduce %{{.*}}, %[[W]] {local} : tensor<8x4xf32>, tensor<f32>
// ACC: %[[M:.*]] = hl.all_reduce %{{.*}}, %[[W]] {local} : tensor<8xf32>, tensor<f32>
// ACC: return %[[L]], %[[G]], %[[B]], %[[M]] :
// ACC-LABEL: func.func @train_apply(
// ACC-SAME: %arg0: tensor<f32> {hl.bind = "input loss"}, %arg1: tensor<8x4xf32> {hl.bind = "input grad @fc1.weight"}, %arg2: tensor<8xf32> {hl.bind = "input grad @fc1.bias"}, %arg3: tensor<8xf32> {hl.bind = "input set @bn.running_mean"}, %arg4: tensor<f32> {hl.bind = "lr"})
// ACC-NOT: hl.all_reduce
// ACC-NOT: hl.matmul
// ACC: hl.mul %arg1, %arg4
// ACC: return %arg0, {{.*}}, %arg3 :

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
