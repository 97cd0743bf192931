// convert-hl-to-ll: tensors become buffers, each hl op or fused group one
// ll kernel; parameters are bound by symbol and updated in place.
// RUN: aicf-opt %s -split-input-file --convert-hl-to-ll | FileCheck %s
// RUN: aicf-opt %s -split-input-file --convert-hl-to-ll | aicf-opt -split-input-file | FileCheck %s
// RUN: aicf-opt %s -split-input-file --convert-hl-to-ll=conv-as-gemm=false | FileCheck %s --check-prefix=DIRECT
// Run alone on an Adam train step, the pass loads the dialects it builds
// (math for the bias corrections).
// RUN: aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-optimizer=kind=adam --convert-hl-to-ll | FileCheck %s --check-prefix=ADAM
// ADAM: func.func @train_step
// ADAM: math.powf

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


// -----

// Vision: each pooling and its backward is one kernel; an ungrouped
// convolution and its gradients are matrix products over the image's
// windows: in NCHW the columns [C*KH*KW, N*OH*OW] (ll.im2col {columns}),
// the weight viewed as [O, C*KH*KW], the product's [O, N, P] planes
// transposed into NCHW and the bias added after; the output gradient's
// [O, N*P] made once for both gradients.
// CHECK-LABEL: func.func @vision
// CHECK-NOT: hl.
// CHECK: ll.im2col %arg0 into %[[COLS:.*]] stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<2x1x8x8xf32> -> memref<1x3x3x2x8x8xf32>
// CHECK: %[[C:.*]] = ll.reshape %[[COLS]] : memref<1x3x3x2x8x8xf32> to memref<9x128xf32>
// CHECK: %[[W:.*]] = ll.reshape %arg1 : memref<4x1x3x3xf32> to memref<4x9xf32>
// CHECK: ll.gemm %[[W]], %[[C]] into %{{.*}} : memref<4x9xf32>, memref<9x128xf32> -> memref<4x128xf32>
// CHECK: ll.transpose %{{.*}} into %[[PLANES:.*]] permutation = [1, 0, 2] : memref<4x2x64xf32> -> memref<2x4x64xf32>
// CHECK: %[[B:.*]] = ll.reshape %arg2 : memref<4xf32> to memref<4x1xf32>
// CHECK: ll.elementwise ins(%[[PLANES]], %[[B]] : memref<2x4x64xf32>, memref<4x1xf32>)
// CHECK: arith.addf
// CHECK: ll.pool2d max %{{.*}} into %{{.*}} kernel = [2, 2] stride = [2, 2] padding = [0, 0] : memref<2x4x8x8xf32> -> memref<2x4x4x4xf32>
// CHECK: ll.pool2d_backward max %{{.*}}, %{{.*}} into %{{.*}} kernel = [2, 2] stride = [2, 2] padding = [0, 0]
// CHECK: ll.transpose %{{.*}} into %{{.*}} permutation = [1, 0, 2] : memref<2x4x64xf32> -> memref<4x2x64xf32>
// CHECK: %[[DY:.*]] = ll.reshape %{{.*}} : memref<4x2x64xf32> to memref<4x128xf32>
// CHECK: ll.gemm %{{.*}}, %[[DY]] into %{{.*}} transpose_a : memref<4x9xf32>, memref<4x128xf32> -> memref<9x128xf32>
// CHECK: ll.col2im %{{.*}} into %arg6 stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<1x3x3x2x8x8xf32> -> memref<2x1x8x8xf32>
// CHECK-NOT: ll.transpose
// CHECK: ll.im2col %arg0
// CHECK: ll.gemm %[[DY]], %{{.*}} into %{{.*}} transpose_b : memref<4x128xf32>, memref<9x128xf32> -> memref<4x9xf32>
// CHECK: ll.pool2d avg %{{.*}} into %{{.*}} kernel = [3, 3] stride = [1, 1] padding = [1, 1] layout = nhwc
// Direct kernels (conv-as-gemm=false, a GPU's default): one each.
// DIRECT-LABEL: func.func @vision
// DIRECT: ll.conv2d %{{.*}}, %{{.*}} bias(%{{.*}}) into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : memref<2x1x8x8xf32>, memref<4x1x3x3xf32> bias memref<4xf32> -> memref<2x4x8x8xf32>
// DIRECT: ll.pool2d max
// DIRECT: ll.pool2d_backward max
// DIRECT: ll.conv2d_backward_input %{{.*}}, %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : memref<2x4x8x8xf32>, memref<4x1x3x3xf32> -> memref<2x1x8x8xf32>
// DIRECT: ll.conv2d_backward_weight %{{.*}}, %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : memref<2x4x8x8xf32>, memref<2x1x8x8xf32> -> memref<4x1x3x3xf32>
// DIRECT-NOT: ll.im2col
func.func @vision(%x: tensor<2x1x8x8xf32>, %w: tensor<4x1x3x3xf32>, %b: tensor<4xf32>, %xn: tensor<2x8x8x3xf32>)
    -> (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>, tensor<2x8x8x3xf32>) {
  %y = hl.conv2d %x, %w, %b stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>
  %p = hl.max_pool2d %y kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<2x4x8x8xf32>
  %dy = hl.max_pool2d_backward %p, %y kernel = [2, 2] stride = [2, 2] padding = [0, 0]
      : tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>
  %dx = hl.conv2d_backward_input %dy, %w stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<2x1x8x8xf32>
  %dw = hl.conv2d_backward_weight %dy, %x stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32> -> tensor<4x1x3x3xf32>
  %a = hl.avg_pool2d %xn kernel = [3, 3] stride = [1, 1] padding = [1, 1] layout = nhwc : tensor<2x8x8x3xf32>
  return %p, %dy, %dx, %dw, %a : tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>, tensor<2x8x8x3xf32>
}

// -----

// Sequence models: embedding lookup and its scatter-add gradient, norm and
// softmax backward as one kernel each, slices, concat, dropout, noise,
// losses.
// CHECK-LABEL: func.func @sequence
// CHECK-NOT: hl.
// CHECK: ll.gather %{{.*}}[%{{.*}}] into %{{.*}} axis = 0 : memref<65x8xf32>, memref<2x4xi32> -> memref<2x4x8xf32>
// CHECK: ll.scatter_add %{{.*}}[%{{.*}}] into %{{.*}} axis = 0 : memref<2x4x8xf32>, memref<2x4xi32> -> memref<65x8xf32>
// CHECK: ll.norm_backward %{{.*}}, %{{.*}} weight(%{{.*}}) into %{{.*}} grad_weight(%{{.*}}) grad_bias(%{{.*}}) dims = 1 eps = 1.000000e-05 : memref<2x4x8xf32> weight memref<8xf32> grad_weight memref<8xf32> grad_bias memref<8xf32>
// CHECK: ll.softmax_backward %{{.*}}, %{{.*}} into %{{.*}} axis = 2 : memref<2x4x8xf32>
// CHECK: ll.slice %{{.*}} into %{{.*}} start = [0, 1, 0] strides = [1, 2, 1] : memref<2x4x8xf32> -> memref<2x2x8xf32>
// CHECK: ll.slice %{{.*}} into %{{.*}} start = [0, 1, 0] strides = [1, 2, 1] backward : memref<2x2x8xf32> -> memref<2x4x8xf32>
// CHECK: ll.concat %{{.*}}, %{{.*}} into %{{.*}} axis = 1 : memref<2x2x8xf32>, memref<2x4x8xf32> -> memref<2x6x8xf32>
// CHECK: ll.dropout %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} p = 1.000000e-01 stream = 2 : memref<2x4x8xf32>
// CHECK: ll.random %{{.*}}, %{{.*}} into %{{.*}} kind = "normal" a = 0.000000e+00 b = 5.000000e-01 stream = 3 : memref<2x4x8xf32>
// CHECK: ll.mse_loss %{{.*}}, %{{.*}} into %{{.*}} : memref<2x4x8xf32> -> memref<f32>
// CHECK: ll.argmax %{{.*}} into %{{.*}} axis = 2 : memref<2x4x8xf32> -> memref<2x4xi64>
func.func @sequence(%t: tensor<65x8xf32>, %tok: tensor<2x4xi32>, %w: tensor<8xf32>, %seed: tensor<i64>, %off: tensor<i64>)
    -> (tensor<65x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>,
        tensor<2x4x8xf32>, tensor<f32>, tensor<2x4xi64>) {
  %e = hl.gather %t[%tok] axis = 0 : tensor<65x8xf32>, tensor<2x4xi32>
  %dt = hl.gather_backward %e[%tok] axis = 0 : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<65x8xf32>
  %dx, %dw, %db = hl.norm_backward %e, %e weight(%w) dims = 1 eps = 1.0e-5 bias : tensor<2x4x8xf32> weight tensor<8xf32>
      -> tensor<2x4x8xf32> grad_weight tensor<8xf32> grad_bias tensor<8xf32>
  %ds = hl.softmax_backward %e, %dx axis = 2 : tensor<2x4x8xf32>
  %s = hl.slice %ds start = [0, 1, 0] limit = [2, 4, 8] strides = [1, 2, 1] : tensor<2x4x8xf32>
  %ss = hl.slice_backward %s start = [0, 1, 0] limit = [2, 4, 8] strides = [1, 2, 1] : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
  %c = hl.concat %s, %ss axis = 1 : tensor<2x2x8xf32>, tensor<2x4x8xf32>
  %d = hl.dropout %e, %seed, %off p = 0.1 stream = 2 : tensor<2x4x8xf32>
  %n = hl.random_like %e, %seed, %off kind = "normal" a = 0.0 b = 0.5 stream = 3 : tensor<2x4x8xf32>
  %l = hl.mse_loss %d, %n : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %i = hl.argmax %d axis = 2 : tensor<2x4x8xf32>
  return %dt, %dx, %dw, %db, %ds, %c, %d, %l, %i : tensor<65x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>,
      tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x4x8xf32>, tensor<f32>, tensor<2x4xi64>
}

// -----

// Constants returned into state symbols of different shapes: each fill
// writes its own symbol (every result's buffer is made before any is
// redirected, so a new buffer never takes a destroyed one's address and
// its redirect).
// CHECK-LABEL: func.func @reset
// CHECK-NOT: ll.copy
// CHECK: outs(%arg2 : memref<f32>)
// CHECK: outs(%arg3 : memref<128xf32>)
// CHECK: outs(%arg4 : memref<8x4xf32>)
// CHECK: outs(%arg5 : memref<10xf32>)
hl.state @a : tensor<f32> slot "x" init <zeros>
hl.state @b : tensor<128xf32> slot "x" init <zeros>
hl.state @c : tensor<8x4xf32> slot "x" init <zeros>
hl.state @d : tensor<10xf32> slot "x" init <zeros>
func.func @reset(%x: tensor<128xf32> {hl.bind = "input"}) -> (tensor<128xf32> {hl.bind = "result 0"}, tensor<f32> {hl.bind = "state @a"}, tensor<128xf32> {hl.bind = "state @b"}, tensor<8x4xf32> {hl.bind = "state @c"}, tensor<10xf32> {hl.bind = "state @d"}) {
  %y = hl.relu %x : tensor<128xf32>
  %z0 = hl.constant dense<0.0> : tensor<f32>
  %z1 = hl.constant dense<0.0> : tensor<128xf32>
  %z2 = hl.constant dense<0.0> : tensor<8x4xf32>
  %z3 = hl.constant dense<0.0> : tensor<10xf32>
  return %y, %z0, %z1, %z2, %z3 : tensor<128xf32>, tensor<f32>, tensor<128xf32>, tensor<8x4xf32>, tensor<10xf32>
}

// -----

// A state's value at entry returned while the function writes the state:
// copied out before any kernel writes it.
// CHECK-LABEL: func.func @swap
// CHECK-NEXT: ll.copy %arg2 into %arg1 : memref<8xf32>
// CHECK-NEXT: ll.elementwise ins(%arg0 : memref<8xf32>) outs(%arg2 : memref<8xf32>)
hl.state @s : tensor<8xf32> slot "x" init <zeros>
func.func @swap(%x: tensor<8xf32> {hl.bind = "input"}) -> (tensor<8xf32> {hl.bind = "result 0"}, tensor<8xf32> {hl.bind = "state @s"}) {
  %old = hl.get_state @s : tensor<8xf32>
  %new = hl.relu %x : tensor<8xf32>
  return %old, %new : tensor<8xf32>, tensor<8xf32>
}

// -----

// An attention and its backward: the forward's kernel keeps each query
// row's log-sum-exp (2 x 5 rows) for the backward, whose scratch then
// holds only D. An attention with a backward of another mask keeps none.
// CHECK-LABEL: func.func @attention_pair
// CHECK: %[[LSE:.*]] = memref.alloc() : memref<10xf32>
// CHECK: ll.attention %arg0, %arg1, %arg2 into %{{.*}} lse(%[[LSE]] : memref<10xf32>) causal
// CHECK: %[[D:.*]] = memref.alloc() : memref<10xf32>
// CHECK: ll.attention_backward {{.*}} rows(%[[D]]) lse(%[[LSE]] : memref<10xf32>) causal
// CHECK: ll.attention %arg0, %arg1, %arg2 into %{{.*}} scale
// CHECK: memref.alloc() : memref<20xf32>
// CHECK: ll.attention_backward {{.*}} rows(%{{.*}}) causal
func.func @attention_pair(%q: tensor<2x5x4xf32> {hl.bind = "input"}, %k: tensor<2x7x4xf32> {hl.bind = "input"}, %v: tensor<2x7x3xf32> {hl.bind = "input"}, %g: tensor<2x5x3xf32> {hl.bind = "input"}) -> (tensor<2x5x4xf32> {hl.bind = "result 0"}, tensor<2x5x4xf32> {hl.bind = "result 1"}) {
  %o = hl.attention %q, %k, %v causal : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>
  %d:3 = hl.attention_backward %q, %k, %v, %o, %g causal : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>, tensor<2x5x3xf32>
  %p = hl.attention %q, %k, %v : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>
  %e:3 = hl.attention_backward %q, %k, %v, %p, %g causal : tensor<2x5x4xf32>, tensor<2x7x4xf32>, tensor<2x7x3xf32>, tensor<2x5x3xf32>
  return %d#0, %e#0 : tensor<2x5x4xf32>, tensor<2x5x4xf32>
}

// -----

// Reductions large enough to split (on a target with a split form) get a
// `partials` scratch: 16384 x 384 over its rows into 43 slices of 384
// (12 blocks of 32 columns, about 512 blocks in all), a sum of 6.3 M
// values into 256 slices. A small one, and a max of everything, get none.
// CHECK-LABEL: func.func @split_reductions
// CHECK: %[[P:.*]] = memref.alloc() : memref<16512xf32>
// CHECK: ll.reduce sum %arg0 dims = [0] into %{{.*}} partials(%[[P]]) : memref<16384x384xf32> -> memref<384xf32> partials memref<16512xf32>
// CHECK: %[[Q:.*]] = memref.alloc() : memref<256xf32>
// CHECK: ll.reduce mean %arg1 dims = [0, 1, 2, 3] into %{{.*}} partials(%[[Q]]) : memref<8x12x1024x64xbf16> -> memref<bf16> partials memref<256xf32>
// CHECK: ll.reduce sum %arg2 dims = [0] into %{{.*}} : memref<255x384xf32> -> memref<384xf32>
// CHECK-NOT: partials
// CHECK: ll.reduce max %arg1 dims = [0, 1, 2, 3] into %{{.*}} : memref<8x12x1024x64xbf16> -> memref<bf16>
func.func @split_reductions(%x: tensor<16384x384xf32> {hl.bind = "input"}, %y: tensor<8x12x1024x64xbf16> {hl.bind = "input"}, %z: tensor<255x384xf32> {hl.bind = "input"}) -> (tensor<384xf32> {hl.bind = "result 0"}, tensor<bf16> {hl.bind = "result 1"}, tensor<384xf32> {hl.bind = "result 2"}, tensor<bf16> {hl.bind = "result 3"}) {
  %a = hl.reduce_sum %x axes = [0] : tensor<16384x384xf32>
  %b = hl.reduce_mean %y axes = [0, 1, 2, 3] : tensor<8x12x1024x64xbf16>
  %c = hl.reduce_sum %z axes = [0] : tensor<255x384xf32>
  %d = hl.reduce_max %y axes = [0, 1, 2, 3] : tensor<8x12x1024x64xbf16>
  return %a, %b, %c, %d : tensor<384xf32>, tensor<bf16>, tensor<384xf32>, tensor<bf16>
}
