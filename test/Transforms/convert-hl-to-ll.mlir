// convert-hl-to-ll: tensors become buffers, each hl op or fused group one
// ll kernel; parameters are bound by symbol and updated in place.
// RUN: aicf-opt %s -split-input-file --convert-hl-to-ll | FileCheck %s
// RUN: aicf-opt %s -split-input-file --convert-hl-to-ll | aicf-opt -split-input-file | FileCheck %s

hl.param @w : tensor<8x4xf32> owner "" init <zeros>
hl.param @b : tensor<8xf32> owner "" init <zeros>

// The signature is the binding table: inputs, outputs, then symbols.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: memref<2x4xf32> {ll.bind = "input"}, %[[LR:.*]]: memref<f32> {ll.bind = "lr"}, %[[LOSS:.*]]: memref<f32> {ll.bind = "loss"}, %[[W:.*]]: memref<8x4xf32> {ll.bind = "param @w"}, %[[B:.*]]: memref<8xf32> {ll.bind = "param @b"})
// CHECK-NOT: hl.
// CHECK: %[[Y:.*]] = memref.alloc() : memref<2x8xf32>
// CHECK: ll.gemm %[[X]], %[[W]] bias(%[[B]]) into %[[Y]] transpose_b act = relu
// The loss kernel writes the output argument directly.
// CHECK: ll.reduce sum %[[Y]] dims = [0, 1] into %[[LOSS]]
// The update writes the parameter in place: the GEMM reading the old value
// came before it.
// CHECK: ll.elementwise ins(%[[W]], %[[LR]] : memref<8x4xf32>, memref<f32>) outs(%[[W]] : memref<8x4xf32>)
// CHECK: ll.yield
// CHECK: return
func.func @train_step(%x: tensor<2x4xf32> {hl.bind = "input"}, %lr: tensor<f32> {hl.bind = "lr"})
    -> (tensor<f32> {hl.bind = "loss"}, tensor<8x4xf32> {hl.bind = "param @w"}) {
  %w = hl.get_param @w : tensor<8x4xf32>
  %b = hl.get_param @b : tensor<8xf32>
  %y = hl.gemm %x, %w bias(%b) transpose_rhs act = relu : tensor<2x4xf32>, tensor<8x4xf32> bias tensor<8xf32>
  %l = hl.reduce_sum %y axes = [0, 1] : tensor<2x8xf32>
  %n = hl.mul %w, %lr : tensor<8x4xf32>, tensor<f32>
  return %l, %n : tensor<f32>, tensor<8x4xf32>
}

// -----

// A view is no kernel; a broadcast is an elementwise copy; a result read
// again later is computed into a temporary and copied out at the end when
// its own output cannot be written early.
// CHECK-LABEL: func.func @views
// CHECK-SAME: %[[OUT:[^:]*]]: memref<6xf32> {ll.bind = "result 0"}
// CHECK: %[[V:.*]] = ll.reshape %{{.*}} : memref<2x3xf32> to memref<6xf32>
// CHECK: ll.elementwise ins(%[[V]] : memref<6xf32>) outs(%{{.*}} : memref<4x6xf32>)
// CHECK: ll.softmax %{{.*}} into %{{.*}} axis = 1 log : memref<4x6xf32>
// CHECK: ll.copy %[[V]] into %[[OUT]] : memref<6xf32>
func.func @views(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<4x6xf32>) {
  %r = hl.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %b = hl.broadcast_to %r : tensor<6xf32> to tensor<4x6xf32>
  %s = hl.log_softmax %b axis = 1 : tensor<4x6xf32>
  return %r, %s : tensor<6xf32>, tensor<4x6xf32>
}

