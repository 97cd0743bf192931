// hl-optimizer with a state the model updates itself (a batch norm's
// running mean): @train_step returns the value `hl.set_state` gives it,
// bound to the state; @loss and @loss_grad evaluated by themselves write
// nothing (their hl.set_state is dropped). The verifier refuses a write to
// an unknown state, to a parameter's optimizer state, or of another type.
// RUN: split-file %s %t
// RUN: aicf-opt %t/model.mlir --hl-optimizer=kind=sgd | FileCheck %s
// RUN: not aicf-opt %t/unknown.mlir 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not aicf-opt %t/param.mlir 2>&1 | FileCheck %s --check-prefix=PARAM
// RUN: not aicf-opt %t/type.mlir 2>&1 | FileCheck %s --check-prefix=TYPE

// CHECK: hl.state @bn.running_mean : tensor<4xf32> slot "running_mean" init <zeros>
// CHECK-LABEL: func.func @loss(
// CHECK-NOT: hl.set_state
// CHECK: return
// CHECK-LABEL: func.func @loss_grad(
// CHECK-NOT: hl.set_state
// CHECK: return
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: {hl.bind = "state @step"}, tensor<4xf32> {hl.bind = "state @bn.running_mean"})
// CHECK: %[[MEAN:.*]] = hl.reduce_mean %arg0 axes = [0]
// CHECK: %[[NEXT:.*]] = hl.add
// CHECK-NOT: hl.set_state
// CHECK: return {{.*}}, %[[NEXT]] :

// UNKNOWN: 'hl.set_state' op '@nothing' does not name an hl.state
// PARAM: 'hl.set_state' op state @w.momentum belongs to a parameter; the optimizer updates it
// TYPE: 'hl.set_state' op value type 'tensor<3xf32>' does not match the type 'tensor<4xf32>' of state @bn.running_mean

//--- model.mlir
hl.param @w : tensor<4xf32> owner "" init <ones>
hl.state @bn.running_mean : tensor<4xf32> slot "running_mean" init <zeros>
func.func @loss(%x: tensor<8x4xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<4xf32>
  %m = hl.reduce_mean %x axes = [0] : tensor<8x4xf32>
  %old = hl.get_state @bn.running_mean : tensor<4xf32>
  %next = hl.add %old, %m : tensor<4xf32>, tensor<4xf32>
  hl.set_state @bn.running_mean, %next : tensor<4xf32>
  %y = hl.mul %x, %w : tensor<8x4xf32>, tensor<4xf32>
  %l = hl.reduce_sum %y axes = [0, 1] : tensor<8x4xf32>
  return %l : tensor<f32>
}

//--- unknown.mlir
func.func @f(%x: tensor<4xf32>) {
  hl.set_state @nothing, %x : tensor<4xf32>
  return
}

//--- param.mlir
hl.param @w : tensor<4xf32> owner "" init <ones>
hl.state @w.momentum : tensor<4xf32> of @w slot "momentum" init <zeros>
func.func @f(%x: tensor<4xf32>) {
  hl.set_state @w.momentum, %x : tensor<4xf32>
  return
}

//--- type.mlir
hl.state @bn.running_mean : tensor<4xf32> slot "running_mean" init <zeros>
func.func @f(%x: tensor<3xf32>) {
  hl.set_state @bn.running_mean, %x : tensor<3xf32>
  return
}
