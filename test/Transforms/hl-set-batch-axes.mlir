// hl-set-batch where the batch is not the leading axis, as imported
// recurrent and attention layers hold it ([T, B, ...]): a reshape that keeps
// the batch whole in one axis (axes of 1 added or dropped, the axes around
// it split or merged, or the batch merged whole as an axis' outermost
// factor), a slice that takes the old batch whole in any axis, and a spread
// of zeros (an RNN's initial state) read by a product and later by the
// cell's update take the new batch; each fixed the batch (PyTorch's
// nn.LSTM, nn.GRU, nn.MultiheadAttention).
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-set-batch{size=5})' | FileCheck %s

// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<5x3x8xf32>) -> tensor<5x4xf32>
// CHECK: hl.transpose %{{.*}} : tensor<5x3x8xf32>
// CHECK: hl.broadcast_to %{{.*}} : tensor<f32> to tensor<5x4xf32>
// CHECK: hl.linear %{{.*}} : tensor<3x5x8xf32>, tensor<4x8xf32>
// CHECK: hl.slice %{{.*}} start = [0, 0, 0] limit = [1, 5, 4] strides = [1, 1, 1] : tensor<3x5x4xf32>
// CHECK: hl.reshape %{{.*}} : tensor<1x5x4xf32> to tensor<5x4xf32>
// CHECK: hl.linear %{{.*}} : tensor<5x4xf32>, tensor<4x4xf32>
// CHECK: hl.add %{{.*}} : tensor<5x4xf32>, tensor<5x4xf32>
// CHECK: hl.mul %{{.*}} : tensor<5x4xf32>, tensor<5x4xf32>
// CHECK: hl.reshape %{{.*}} : tensor<5x4xf32> to tensor<1x1x5x4xf32>
// CHECK: hl.reshape %{{.*}} : tensor<1x1x5x4xf32> to tensor<5x4xf32>
// CHECK: return %{{.*}} : tensor<5x4xf32>
hl.param @rnn.w : tensor<4x8xf32> owner "rnn" init <zeros>
hl.param @rnn.r : tensor<4x4xf32> owner "rnn" init <zeros>
func.func @forward(%x: tensor<32x3x8xf32>) -> tensor<32x4xf32> {
  %t = hl.transpose %x permutation = [1, 0, 2] : tensor<32x3x8xf32>
  %z = hl.constant dense<0.0> : tensor<f32>
  %h0 = hl.broadcast_to %z : tensor<f32> to tensor<32x4xf32>
  %w = hl.get_param @rnn.w : tensor<4x8xf32>
  %r = hl.get_param @rnn.r : tensor<4x4xf32>
  %xw = hl.linear %t, %w : tensor<3x32x8xf32>, tensor<4x8xf32>
  %s = hl.slice %xw start = [0, 0, 0] limit = [1, 32, 4] strides = [1, 1, 1] : tensor<3x32x4xf32>
  %x0 = hl.reshape %s : tensor<1x32x4xf32> to tensor<32x4xf32>
  %hr = hl.linear %h0, %r : tensor<32x4xf32>, tensor<4x4xf32>
  %pre = hl.add %x0, %hr : tensor<32x4xf32>, tensor<32x4xf32>
  %c = hl.mul %pre, %h0 : tensor<32x4xf32>, tensor<32x4xf32>
  %y = hl.reshape %c : tensor<32x4xf32> to tensor<1x1x32x4xf32>
  %o = hl.reshape %y : tensor<1x1x32x4xf32> to tensor<32x4xf32>
  return %o : tensor<32x4xf32>
}

// Attention as PyTorch's MultiheadAttention reshapes it: [T, B, 3 E] split
// into [T, B, 3, E]; [T, B, E] into [T, B H, E / H] (the batch the
// outermost factor of a merged axis), and back.
// CHECK-LABEL: func.func @heads(%{{.*}}: tensor<5x6x24xf32>) -> tensor<6x5x8xf32>
// CHECK: hl.reshape %{{.*}} : tensor<6x5x24xf32> to tensor<6x5x3x8xf32>
// CHECK: hl.reshape %{{.*}} : tensor<6x5x8xf32> to tensor<6x10x4xf32>
// CHECK: hl.reshape %{{.*}} : tensor<6x10x4xf32> to tensor<6x5x8xf32>
func.func @heads(%in: tensor<32x6x24xf32>) -> tensor<6x32x8xf32> {
  %x = hl.transpose %in permutation = [1, 0, 2] : tensor<32x6x24xf32>
  %qkv = hl.reshape %x : tensor<6x32x24xf32> to tensor<6x32x3x8xf32>
  %q = hl.slice %qkv start = [0, 0, 0, 0] limit = [6, 32, 1, 8] strides = [1, 1, 1, 1] : tensor<6x32x3x8xf32>
  %q3 = hl.reshape %q : tensor<6x32x1x8xf32> to tensor<6x32x8xf32>
  %h = hl.reshape %q3 : tensor<6x32x8xf32> to tensor<6x64x4xf32>
  %back = hl.reshape %h : tensor<6x64x4xf32> to tensor<6x32x8xf32>
  return %back : tensor<6x32x8xf32>
}

// A time-major [T, B, 2 H] whose sequence is as long as the batch: the
// slice of its last axis keeps every step (its axis-0 window, 0 to the old
// batch, is the sequence's, not the batch's: it kept 5 steps).
// CHECK-LABEL: func.func @time_major(%{{.*}}: tensor<5x32x8xf32>) -> tensor<5x4xf32>
// CHECK: hl.slice %{{.*}} start = [0, 0, 0] limit = [32, 5, 4] strides = [1, 1, 1] : tensor<32x5x8xf32>
func.func @time_major(%x: tensor<32x32x8xf32>) -> tensor<32x4xf32> {
  %t = hl.transpose %x permutation = [1, 0, 2] : tensor<32x32x8xf32>
  %h = hl.slice %t start = [0, 0, 0] limit = [32, 32, 4] strides = [1, 1, 1] : tensor<32x32x8xf32>
  %m = hl.reduce_mean %h axes = [0] : tensor<32x32x4xf32>
  return %m : tensor<32x4xf32>
}
