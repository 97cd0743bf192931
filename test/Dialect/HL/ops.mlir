// Every hl op parses, verifies, prints and parses again, in the custom
// and in the generic form.
// RUN: aicf-opt %s | aicf-opt | FileCheck %s
// RUN: aicf-opt %s --mlir-print-op-generic | aicf-opt | FileCheck %s

// CHECK-LABEL: hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform, gain = 5.773500e-01>
hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform, gain = 0.57735>
// CHECK: hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <uniform, low = -1.250000e-01, high = 1.250000e-01>
hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <uniform, low = -0.125, high = 0.125>
// Defaults are not printed: kaiming's gain sqrt(2), mode fan_in.
// CHECK: hl.param @fc2.weight : tensor<10x128xf32> owner "fc2" init <kaiming_normal>
hl.param @fc2.weight : tensor<10x128xf32> owner "fc2" init <kaiming_normal, gain = 1.4142135623730951, mode = fan_in>
// CHECK: hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <zeros>
hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <zeros>
// CHECK: hl.param @emb.weight : tensor<32x16xbf16> owner "emb" init <normal, mean = 1.000000e-01, std = 2.000000e-02>
hl.param @emb.weight : tensor<32x16xbf16> owner "emb" init <normal, mean = 0.1, std = 0.02>
// CHECK: hl.param @proj.weight : tensor<16x32xf16> owner "proj" init <xavier_uniform, gain = 2.000000e+00>
hl.param @proj.weight : tensor<16x32xf16> owner "proj" init <xavier_uniform, gain = 2.0>
// CHECK: hl.param @head.weight : tensor<16x32xf64> owner "head" init <kaiming_uniform, mode = fan_out>
hl.param @head.weight : tensor<16x32xf64> owner "head" init <kaiming_uniform, mode = fan_out>
// A parameter of the model itself has no owner.
// CHECK: hl.param @scale : tensor<1xf32> owner "" init <ones>
hl.param @scale : tensor<1xf32> owner "" init <ones>
// CHECK: hl.param @other : tensor<4x4xf32> owner "" init <xavier_normal>
hl.param @other : tensor<4x4xf32> owner "" init <xavier_normal>

// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  // CHECK: %[[W1:.*]] = hl.get_param @fc1.weight : tensor<128x64xf32>
  %w1 = hl.get_param @fc1.weight : tensor<128x64xf32>
  // CHECK: %[[B1:.*]] = hl.get_param @fc1.bias : tensor<128xf32>
  %b1 = hl.get_param @fc1.bias : tensor<128xf32>
  // CHECK: %[[H:.*]] = hl.linear %{{.*}}, %[[W1]], %[[B1]] : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  // A discardable attribute with a dialect prefix is kept.
  // CHECK: %[[R:.*]] = hl.relu %[[H]] {my.note = "kept"} : tensor<32x128xf32>
  %r = hl.relu %h {my.note = "kept"} : tensor<32x128xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x128xf32>
  // CHECK: %[[L:.*]] = hl.linear %[[R]], %{{.*}} : tensor<32x128xf32>, tensor<10x128xf32>
  %l = hl.linear %r, %w2 : tensor<32x128xf32>, tensor<10x128xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  // CHECK: %[[LB:.*]] = hl.add %[[L]], %{{.*}} : tensor<32x10xf32>, tensor<10xf32>
  %lb = hl.add %l, %b2 : tensor<32x10xf32>, tensor<10xf32>
  // CHECK: hl.cross_entropy %[[LB]], %{{.*}} : tensor<32x10xf32>, tensor<32xi32>
  %loss = hl.cross_entropy %lb, %labels : tensor<32x10xf32>, tensor<32xi32>
  // CHECK: hl.cross_entropy %[[LB]], %{{.*}} reduction = sum : tensor<32x10xf32>, tensor<32xi32>
  %sum = hl.cross_entropy %lb, %labels reduction = sum : tensor<32x10xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @broadcast_and_matmul
func.func @broadcast_and_matmul(%a: tensor<4x1x3xf32>, %b: tensor<5x1xf32>, %m: tensor<2x8x3xf32>,
                                %n: tensor<2x3x6xf32>, %w: tensor<2x6x3xf32>) {
  // Shapes align from the right; a 1 stretches.
  // CHECK: hl.add %{{.*}}, %{{.*}} : tensor<4x1x3xf32>, tensor<5x1xf32>
  %0 = hl.add %a, %b : tensor<4x1x3xf32>, tensor<5x1xf32>
  // CHECK: hl.mul %{{.*}}, %{{.*}} : tensor<4x5x3xf32>, tensor<4x1x3xf32>
  %1 = hl.mul %0, %a : tensor<4x5x3xf32>, tensor<4x1x3xf32>
  // CHECK: hl.matmul %{{.*}}, %{{.*}} : tensor<2x8x3xf32>, tensor<2x3x6xf32>
  %2 = hl.matmul %m, %n : tensor<2x8x3xf32>, tensor<2x3x6xf32>
  // CHECK: hl.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<2x8x3xf32>, tensor<2x6x3xf32>
  %3 = hl.matmul %m, %w transpose_rhs : tensor<2x8x3xf32>, tensor<2x6x3xf32>
  // CHECK: hl.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<2x3x6xf32>, tensor<2x8x3xf32>
  %4 = hl.matmul %n, %m transpose_lhs transpose_rhs : tensor<2x3x6xf32>, tensor<2x8x3xf32>
  // CHECK: hl.constant dense<1.000000e+00> : tensor<4xf32>
  %5 = hl.constant dense<1.0> : tensor<4xf32>
  // CHECK: hl.constant dense<[1, 2]> : tensor<2xi32>
  %6 = hl.constant dense<[1, 2]> : tensor<2xi32>
  return
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<4x5xf32>, %r: tensor<5xf32>, %i: tensor<4x5xi32>, %c: tensor<4x1xi1>) {
  // CHECK: hl.sub %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<5xf32>
  %0 = hl.sub %x, %r : tensor<4x5xf32>, tensor<5xf32>
  // CHECK: hl.div %{{.*}}, %{{.*}} : tensor<5xf32>, tensor<4x5xf32>
  %1 = hl.div %r, %x : tensor<5xf32>, tensor<4x5xf32>
  // CHECK: hl.pow %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<5xf32>
  %2 = hl.pow %x, %r : tensor<4x5xf32>, tensor<5xf32>
  // CHECK: hl.max %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<5xf32>
  %3 = hl.max %x, %r : tensor<4x5xf32>, tensor<5xf32>
  // CHECK: hl.min %{{.*}}, %{{.*}} : tensor<4x5xi32>, tensor<4x5xi32>
  %4 = hl.min %i, %i : tensor<4x5xi32>, tensor<4x5xi32>
  // CHECK: %[[CMP:.*]] = hl.compare lt, %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<5xf32>
  %5 = hl.compare lt, %x, %r : tensor<4x5xf32>, tensor<5xf32>
  // CHECK: hl.compare ge, %{{.*}}, %{{.*}} : tensor<4x5xi32>, tensor<4x5xi32>
  %6 = hl.compare ge, %i, %i : tensor<4x5xi32>, tensor<4x5xi32>
  // CHECK: hl.select %[[CMP]], %{{.*}}, %{{.*}} : tensor<4x5xi1>, tensor<4x5xf32>, tensor<5xf32>
  %7 = hl.select %5, %x, %r : tensor<4x5xi1>, tensor<4x5xf32>, tensor<5xf32>
  // The condition broadcasts as well.
  // CHECK: hl.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x1xi1>, tensor<5xf32>, tensor<5xf32>
  %8 = hl.select %c, %r, %r : tensor<4x1xi1>, tensor<5xf32>, tensor<5xf32>
  // CHECK: hl.neg %{{.*}} : tensor<4x5xi32>
  %9 = hl.neg %i : tensor<4x5xi32>
  // CHECK: hl.abs %{{.*}} : tensor<4x5xf32>
  %10 = hl.abs %x : tensor<4x5xf32>
  // CHECK: hl.exp %{{.*}} : tensor<4x5xf32>
  %11 = hl.exp %x : tensor<4x5xf32>
  // CHECK: hl.log %{{.*}} : tensor<4x5xf32>
  %12 = hl.log %x : tensor<4x5xf32>
  // CHECK: hl.erf %{{.*}} : tensor<4x5xf32>
  %erf = hl.erf %x : tensor<4x5xf32>
  // CHECK: hl.sin %{{.*}} : tensor<4x5xf32>
  %sin = hl.sin %x : tensor<4x5xf32>
  // CHECK: hl.cos %{{.*}} : tensor<4x5xf32>
  %cos = hl.cos %x : tensor<4x5xf32>
  // CHECK: hl.atan %{{.*}} : tensor<4x5xf32>
  %atan = hl.atan %x : tensor<4x5xf32>
  // CHECK: hl.floor %{{.*}} : tensor<4x5xf32>
  %floor = hl.floor %x : tensor<4x5xf32>
  // CHECK: hl.ceil %{{.*}} : tensor<4x5xf32>
  %ceil = hl.ceil %x : tensor<4x5xf32>
  // CHECK: hl.round %{{.*}} : tensor<4x5xf32>
  %round = hl.round %x : tensor<4x5xf32>
  // CHECK: hl.stop_gradient %{{.*}} : tensor<4x5xf32>
  %stopped = hl.stop_gradient %x : tensor<4x5xf32>
  // CHECK: hl.sqrt %{{.*}} : tensor<4x5xf32>
  %13 = hl.sqrt %x : tensor<4x5xf32>
  // CHECK: hl.rsqrt %{{.*}} : tensor<4x5xf32>
  %14 = hl.rsqrt %x : tensor<4x5xf32>
  // CHECK: hl.tanh %{{.*}} : tensor<4x5xf32>
  %15 = hl.tanh %x : tensor<4x5xf32>
  // CHECK: hl.sigmoid %{{.*}} : tensor<4x5xf32>
  %16 = hl.sigmoid %x : tensor<4x5xf32>
  // CHECK: hl.silu %{{.*}} : tensor<4x5xf32>
  %17 = hl.silu %x : tensor<4x5xf32>
  // The default (exact, erf) form prints no attribute.
  // CHECK: hl.gelu %{{.*}} : tensor<4x5xf32>
  %18 = hl.gelu %x approximate = none : tensor<4x5xf32>
  // CHECK: hl.gelu %{{.*}} approximate = tanh : tensor<4x5xf32>
  %19 = hl.gelu %x approximate = tanh : tensor<4x5xf32>
  // CHECK: hl.cast %{{.*}} : tensor<4x5xf32> to tensor<4x5xbf16>
  %20 = hl.cast %x : tensor<4x5xf32> to tensor<4x5xbf16>
  // CHECK: hl.cast %{{.*}} : tensor<4x5xi32> to tensor<4x5xf16>
  %21 = hl.cast %i : tensor<4x5xi32> to tensor<4x5xf16>
  // CHECK: hl.cast %{{.*}} : tensor<4x1xi1> to tensor<4x1xi64>
  %22 = hl.cast %c : tensor<4x1xi1> to tensor<4x1xi64>
  return
}

// CHECK-LABEL: func.func @reductions_and_norms
func.func @reductions_and_norms(%x: tensor<8x4x6xf32>, %g: tensor<6xf32>, %g2: tensor<4x6xf32>,
                                %b2: tensor<4x6xf32>) {
  // CHECK: hl.reduce_sum %{{.*}} axes = [0, 2] : tensor<8x4x6xf32>
  %0 = hl.reduce_sum %x axes = [0, 2] : tensor<8x4x6xf32>
  // CHECK: hl.reduce_mean %{{.*}} axes = [2] keepdim : tensor<8x4x6xf32>
  %1 = hl.reduce_mean %x axes = [2] keepdim : tensor<8x4x6xf32>
  // CHECK: hl.reduce_max %{{.*}} axes = [1] : tensor<8x4x6xf32>
  %2 = hl.reduce_max %x axes = [1] : tensor<8x4x6xf32>
  // CHECK: hl.argmax %{{.*}} axis = 2 : tensor<8x4x6xf32>
  %3 = hl.argmax %x axis = 2 : tensor<8x4x6xf32>
  // CHECK: hl.argmax %{{.*}} axis = 0 keepdim : tensor<8x4x6xf32>
  %4 = hl.argmax %x axis = 0 keepdim : tensor<8x4x6xf32>
  // CHECK: hl.softmax %{{.*}} axis = 2 : tensor<8x4x6xf32>
  %5 = hl.softmax %x axis = 2 : tensor<8x4x6xf32>
  // CHECK: hl.log_softmax %{{.*}} axis = 1 : tensor<8x4x6xf32>
  %6 = hl.log_softmax %x axis = 1 : tensor<8x4x6xf32>
  // CHECK: hl.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} dims = 2 eps = 1.000000e-05 : tensor<8x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
  %7 = hl.layer_norm %x weight %g2 bias %b2 dims = 2 eps = 1.0e-05 : tensor<8x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
  // CHECK: hl.layer_norm %{{.*}} weight %{{.*}} dims = 1 eps = 1.000000e-05 : tensor<8x4x6xf32>, tensor<6xf32>
  %8 = hl.layer_norm %x weight %g dims = 1 eps = 1.0e-05 : tensor<8x4x6xf32>, tensor<6xf32>
  // CHECK: hl.layer_norm %{{.*}} dims = 1 eps = 1.000000e-05 : tensor<8x4x6xf32>
  %9 = hl.layer_norm %x dims = 1 eps = 1.0e-05 : tensor<8x4x6xf32>
  // CHECK: hl.rms_norm %{{.*}} weight %{{.*}} dims = 1 eps = 9.9999999999999995E-7 : tensor<8x4x6xf32>, tensor<6xf32>
  %10 = hl.rms_norm %x weight %g dims = 1 eps = 1.0e-06 : tensor<8x4x6xf32>, tensor<6xf32>
  // CHECK: hl.rms_norm %{{.*}} dims = 3 eps = 1.000000e-05 : tensor<8x4x6xf32>
  %11 = hl.rms_norm %x dims = 3 eps = 1.0e-05 : tensor<8x4x6xf32>
  return
}

// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<4x16x65xf32>, %targets: tensor<4x16xi64>, %p: tensor<3x7xf64>) -> tensor<f32> {
  // Any leading shape; the labels drop the class axis.
  // CHECK: hl.cross_entropy %{{.*}}, %{{.*}} ignore_index = -1 : tensor<4x16x65xf32>, tensor<4x16xi64>
  %0 = hl.cross_entropy %logits, %targets ignore_index = -1 : tensor<4x16x65xf32>, tensor<4x16xi64>
  // CHECK: hl.cross_entropy %{{.*}}, %{{.*}} reduction = sum ignore_index = 0 : tensor<4x16x65xf32>, tensor<4x16xi64>
  %1 = hl.cross_entropy %logits, %targets reduction = sum ignore_index = 0 : tensor<4x16x65xf32>, tensor<4x16xi64>
  // CHECK: hl.mse_loss %{{.*}}, %{{.*}} : tensor<3x7xf64>, tensor<3x7xf64>
  %2 = hl.mse_loss %p, %p : tensor<3x7xf64>, tensor<3x7xf64>
  // CHECK: hl.mse_loss %{{.*}}, %{{.*}} reduction = sum : tensor<3x7xf64>, tensor<3x7xf64>
  %3 = hl.mse_loss %p, %p reduction = sum : tensor<3x7xf64>, tensor<3x7xf64>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %table: tensor<65x8xf32>,
                  %tok: tensor<4x16xi32>, %b: tensor<4xf32>) {
  // CHECK: hl.reshape %{{.*}} : tensor<2x3x4xf32> to tensor<6x4xf32>
  %0 = hl.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  // CHECK: hl.transpose %{{.*}} permutation = [2, 0, 1] : tensor<2x3x4xf32>
  %1 = hl.transpose %x permutation = [2, 0, 1] : tensor<2x3x4xf32>
  // CHECK: hl.broadcast_to %{{.*}} : tensor<4xf32> to tensor<2x3x4xf32>
  %2 = hl.broadcast_to %b : tensor<4xf32> to tensor<2x3x4xf32>
  // CHECK: hl.concat %{{.*}}, %{{.*}} axis = 1 : tensor<2x3x4xf32>, tensor<2x5x4xf32>
  %3 = hl.concat %x, %y axis = 1 : tensor<2x3x4xf32>, tensor<2x5x4xf32>
  // CHECK: hl.slice %{{.*}} start = [0, 1, 0] limit = [2, 3, 4] strides = [1, 1, 3] : tensor<2x3x4xf32>
  %4 = hl.slice %x start = [0, 1, 0] limit = [2, 3, 4] strides = [1, 1, 3] : tensor<2x3x4xf32>
  // CHECK: hl.gather %{{.*}}[%{{.*}}] axis = 0 : tensor<65x8xf32>, tensor<4x16xi32>
  %5 = hl.gather %table[%tok] axis = 0 : tensor<65x8xf32>, tensor<4x16xi32>
  // Result types are inferred: [2, 8, 4], [2, 2, 2], [4, 16, 8].
  // CHECK: hl.reduce_sum %{{.*}} axes = [1] : tensor<2x8x4xf32>
  %6 = hl.reduce_sum %3 axes = [1] : tensor<2x8x4xf32>
  // CHECK: hl.relu %{{.*}} : tensor<2x2x2xf32>
  %7 = hl.relu %4 : tensor<2x2x2xf32>
  // CHECK: hl.relu %{{.*}} : tensor<4x16x8xf32>
  %8 = hl.relu %5 : tensor<4x16x8xf32>
  // A stride near 2^63 takes one element (the size's sum overflowed to a
  // negative dimension).
  // CHECK: hl.relu %{{.*}} : tensor<2x1x4xf32>
  %9 = hl.slice %x start = [0, 1, 0] limit = [2, 3, 4] strides = [1, 9223372036854775806, 1] : tensor<2x3x4xf32>
  %10 = hl.relu %9 : tensor<2x1x4xf32>
  return
}

// CHECK-LABEL: func.func @vision_and_attention
func.func @vision_and_attention(%img: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>, %bias: tensor<8xf32>,
                                %nhwc: tensor<2x9x9x4xf32>, %gw: tensor<6x2x3x3xf32>,
                                %q: tensor<2x4x16x8xf32>, %kv: tensor<2x4x12x8xf32>,
                                %seed: tensor<i64>, %offset: tensor<i64>) {
  // CHECK: %[[C:.*]] = hl.conv2d %{{.*}}, %{{.*}}, %{{.*}} stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>
  %0 = hl.conv2d %img, %w, %bias stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>
  // (9 + 2 - 3) / 2 + 1 = 5
  // CHECK: hl.max_pool2d %[[C]] kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<2x8x5x5xf32>
  %1 = hl.max_pool2d %0 kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<2x8x5x5xf32>
  // Grouped, dilated, channels-last: C = 4 = 2 groups x 2, 9 - 2 * 2 = 5.
  // CHECK: %[[G:.*]] = hl.conv2d %{{.*}}, %{{.*}} stride = [1, 1] padding = [0, 0] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x9x9x4xf32>, tensor<6x2x3x3xf32>
  %2 = hl.conv2d %nhwc, %gw stride = [1, 1] padding = [0, 0] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x9x9x4xf32>, tensor<6x2x3x3xf32>
  // CHECK: hl.avg_pool2d %[[G]] kernel = [3, 3] stride = [1, 2] padding = [0, 1] layout = nhwc : tensor<2x5x5x6xf32>
  %3 = hl.avg_pool2d %2 kernel = [3, 3] stride = [1, 2] padding = [0, 1] layout = nhwc : tensor<2x5x5x6xf32>
  // The backward ops of conv2d and pooling (what hl-autodiff emits).
  // CHECK: hl.conv2d_backward_input %[[C]], %{{.*}} stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x8x5x5xf32>, tensor<8x3x3x3xf32> -> tensor<2x3x9x9xf32>
  %dx = hl.conv2d_backward_input %0, %w stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x8x5x5xf32>, tensor<8x3x3x3xf32> -> tensor<2x3x9x9xf32>
  // CHECK: hl.conv2d_backward_weight %[[G]], %{{.*}} stride = [1, 1] padding = [0, 0] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x5x5x6xf32>, tensor<2x9x9x4xf32> -> tensor<6x2x3x3xf32>
  %dw = hl.conv2d_backward_weight %2, %nhwc stride = [1, 1] padding = [0, 0] dilation = [2, 2] groups = 2 layout = nhwc : tensor<2x5x5x6xf32>, tensor<2x9x9x4xf32> -> tensor<6x2x3x3xf32>
  // CHECK: hl.max_pool2d_backward %{{.*}}, %[[C]] kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<2x8x3x3xf32>, tensor<2x8x5x5xf32>
  %dp = hl.max_pool2d_backward %1, %0 kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<2x8x3x3xf32>, tensor<2x8x5x5xf32>
  // CHECK: hl.avg_pool2d_backward %{{.*}}, %[[G]] kernel = [3, 3] stride = [1, 2] padding = [0, 1] layout = nhwc : tensor<2x3x3x6xf32>, tensor<2x5x5x6xf32>
  %da = hl.avg_pool2d_backward %3, %2 kernel = [3, 3] stride = [1, 2] padding = [0, 1] layout = nhwc : tensor<2x3x3x6xf32>, tensor<2x5x5x6xf32>
  // CHECK: hl.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x4x16x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x12x8xf32>
  %4 = hl.attention %q, %kv, %kv causal : tensor<2x4x16x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x12x8xf32>
  // CHECK: hl.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 : tensor<2x4x16x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x12x8xf32>
  %5 = hl.attention %q, %kv, %kv scale = 0.25 : tensor<2x4x16x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x12x8xf32>
  // CHECK: hl.dropout %{{.*}}, %{{.*}}, %{{.*}} p = 1.000000e-01 stream = 3 : tensor<2x4x16x8xf32>
  %6 = hl.dropout %4, %seed, %offset p = 0.1 stream = 3 : tensor<2x4x16x8xf32>
  // CHECK: hl.random_like %{{.*}}, %{{.*}}, %{{.*}} kind = "normal" a = 0.000000e+00 b = 1.000000e+00 stream = 4 : tensor<2x4x16x8xf32>
  %n = hl.random_like %4, %seed, %offset kind = "normal" a = 0.0 b = 1.0 stream = 4 : tensor<2x4x16x8xf32>
  // CHECK: hl.random_like %{{.*}}, %{{.*}}, %{{.*}} kind = "uniform" a = -1.000000e+00 b = 1.000000e+00 stream = 5 : tensor<2x4x16x8xf32>
  %u = hl.random_like %4, %seed, %offset kind = "uniform" a = -1.0 b = 1.0 stream = 5 : tensor<2x4x16x8xf32>
  // CHECK: hl.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x4x16x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x16x8xf32>
  %7:3 = hl.attention_backward %q, %kv, %kv, %4, %6 causal : tensor<2x4x16x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x12x8xf32>, tensor<2x4x16x8xf32>
  return
}

// Optimizer state: slots tied to a parameter, or free (the step count).
// CHECK-LABEL: hl.param @opt.w : tensor<3xf32> owner "opt" init <zeros>
hl.param @opt.w : tensor<3xf32> owner "opt" init <zeros>
// CHECK: hl.state @opt.w.exp_avg : tensor<3xf32> of @opt.w slot "exp_avg" init <zeros>
hl.state @opt.w.exp_avg : tensor<3xf32> of @opt.w slot "exp_avg" init <zeros>
// CHECK: hl.state @step : tensor<i64> slot "step" init <zeros>
hl.state @step : tensor<i64> slot "step" init <zeros>
// A masked growth's counter carries its ramp and delay.
// CHECK: hl.state @fc1.mask : tensor<f32> slot "mask" init <zeros> {delay = 2 : i64, ramp = 4 : i64}
hl.state @fc1.mask : tensor<f32> slot "mask" init <zeros> {delay = 2 : i64, ramp = 4 : i64}
// CHECK-LABEL: func.func @read_state
func.func @read_state() -> (tensor<3xf32>, tensor<i64>) {
  // CHECK: hl.get_state @opt.w.exp_avg : tensor<3xf32>
  %m = hl.get_state @opt.w.exp_avg : tensor<3xf32>
  // CHECK: hl.get_state @step : tensor<i64>
  %s = hl.get_state @step : tensor<i64>
  return %m, %s : tensor<3xf32>, tensor<i64>
}

// CHECK-LABEL: func.func @gemm_forms
func.func @gemm_forms(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %r: tensor<2x8x32xf32>,
                      %a: tensor<3x4x5xf32>, %c: tensor<3x5x6xf32>, %m: tensor<3x4x6xf32>,
                      %y: tensor<16x32xf32>, %z: tensor<16x16xf32>) {
  // The linear form: rows are all leading dimensions of lhs.
  // CHECK: hl.gemm %{{.*}}, %{{.*}} bias(%{{.*}}) residual(%{{.*}}) transpose_rhs alpha = 5.000000e-01 act = gelu_tanh : tensor<2x8x16xf32>, tensor<32x16xf32> bias tensor<32xf32> residual tensor<2x8x32xf32>
  %0 = hl.gemm %x, %w bias(%b) residual(%r) transpose_rhs alpha = 0.5 act = gelu_tanh : tensor<2x8x16xf32>, tensor<32x16xf32> bias tensor<32xf32> residual tensor<2x8x32xf32>
  // The batched matmul form with a mask.
  // CHECK: hl.gemm %{{.*}}, %{{.*}} mask(%{{.*}}) act = silu : tensor<3x4x5xf32>, tensor<3x5x6xf32> mask tensor<3x4x6xf32>
  %1 = hl.gemm %a, %c mask(%m) act = silu : tensor<3x4x5xf32>, tensor<3x5x6xf32> mask tensor<3x4x6xf32>
  // The weight gradient with the bias gradient as its side result.
  // CHECK: hl.gemm %{{.*}}, %{{.*}} transpose_lhs sum_lhs : tensor<16x32xf32>, tensor<16x16xf32>
  %dw, %db = hl.gemm %y, %z transpose_lhs sum_lhs : tensor<16x32xf32>, tensor<16x16xf32>
  return
}

// Two groups through one SGD body: shapes differ, the scalar is shared.
// CHECK-LABEL: func.func @multi_tensor_apply
func.func @multi_tensor_apply(%g1: tensor<4x3xf32>, %p1: tensor<4x3xf32>, %g2: tensor<5xf32>, %p2: tensor<5xf32>,
                              %lr: tensor<f32>) -> (tensor<4x3xf32>, tensor<5xf32>) {
  // CHECK: hl.multi_tensor_apply ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<f32>, tensor<4x3xf32>, tensor<5xf32>, tensor<f32>, tensor<5xf32>) -> tensor<4x3xf32>, tensor<5xf32>
  // CHECK: hl.yield
  %a, %b = hl.multi_tensor_apply ins(%g1, %lr, %p1, %g2, %lr, %p2 : tensor<4x3xf32>, tensor<f32>, tensor<4x3xf32>,
                                     tensor<5xf32>, tensor<f32>, tensor<5xf32>) -> tensor<4x3xf32>, tensor<5xf32> {
  ^bb0(%g: f32, %r: f32, %p: f32):
    %s = arith.mulf %g, %r : f32
    %n = arith.subf %p, %s : f32
    hl.yield %n : f32
  }
  return %a, %b : tensor<4x3xf32>, tensor<5xf32>
}

// CHECK-LABEL: func.func @cross_entropy_forms
func.func @cross_entropy_forms(%l: tensor<4x16x65xf32>, %t: tensor<4x16xi64>, %g: tensor<f32>) {
  // CHECK: hl.cross_entropy_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = sum ignore_index = -1 : tensor<4x16x65xf32>, tensor<4x16xi64>, tensor<f32>
  %0 = hl.cross_entropy_backward %l, %t, %g reduction = sum ignore_index = -1 : tensor<4x16x65xf32>, tensor<4x16xi64>, tensor<f32>
  // CHECK: hl.softmax_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x16x65xf32>, tensor<4x16xi64>, tensor<f32> -> tensor<f32>
  %1:2 = hl.softmax_cross_entropy %l, %t, %g : tensor<4x16x65xf32>, tensor<4x16xi64>, tensor<f32> -> tensor<f32>
  return
}

// A padded bf16 head's loss: f32 loss, 65 classes of rows of 72.
// CHECK-LABEL: func.func @padded_cross_entropy
func.func @padded_cross_entropy(%l: tensor<4x16x72xbf16>, %t: tensor<4x16xi64>, %g: tensor<f32>) {
  // CHECK: hl.softmax_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} ignore_index = -1 classes = 65 : tensor<4x16x72xbf16>, tensor<4x16xi64>, tensor<f32> -> tensor<f32>
  %1:2 = hl.softmax_cross_entropy %l, %t, %g ignore_index = -1 classes = 65 : tensor<4x16x72xbf16>, tensor<4x16xi64>, tensor<f32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @backward_kernels
func.func @backward_kernels(%dy: tensor<4x4xf32>, %de: tensor<4x32x64xf32>, %tok: tensor<4x32xi32>,
                            %x: tensor<64x128xf32>, %g: tensor<64x128xf32>, %w: tensor<128xf32>) {
  // CHECK: hl.slice_backward %{{.*}} start = [0, 2] limit = [4, 10] strides = [1, 2] : tensor<4x4xf32> -> tensor<8x16xf32>
  %0 = hl.slice_backward %dy start = [0, 2] limit = [4, 10] strides = [1, 2] : tensor<4x4xf32> -> tensor<8x16xf32>
  // CHECK: hl.gather_backward %{{.*}}[%{{.*}}] axis = 0 : tensor<4x32x64xf32>, tensor<4x32xi32> -> tensor<65x64xf32>
  %1 = hl.gather_backward %de[%tok] axis = 0 : tensor<4x32x64xf32>, tensor<4x32xi32> -> tensor<65x64xf32>
  // CHECK: hl.norm_backward %{{.*}}, %{{.*}} weight(%{{.*}}) dims = 1 eps = 1.000000e-05 bias : tensor<64x128xf32> weight tensor<128xf32> -> tensor<64x128xf32> grad_weight tensor<128xf32> grad_bias tensor<128xf32>
  %2:3 = hl.norm_backward %g, %x weight(%w) dims = 1 eps = 1.0e-5 bias : tensor<64x128xf32> weight tensor<128xf32>
      -> tensor<64x128xf32> grad_weight tensor<128xf32> grad_bias tensor<128xf32>
  // CHECK: hl.norm_backward %{{.*}}, %{{.*}} dims = 1 eps = 1.000000e-05 rms : tensor<64x128xf32> -> tensor<64x128xf32>
  %3 = hl.norm_backward %g, %x dims = 1 eps = 1.0e-5 rms : tensor<64x128xf32> -> tensor<64x128xf32>
  // CHECK: hl.softmax_backward %{{.*}}, %{{.*}} axis = 1 log : tensor<64x128xf32>
  %4 = hl.softmax_backward %x, %g axis = 1 log : tensor<64x128xf32>
  return
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%g: tensor<8x16xf32>, %w: tensor<f32>) -> tensor<8x16xf32> {
  // CHECK: hl.all_reduce %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<f32>
  %s = hl.all_reduce %g, %w : tensor<8x16xf32>, tensor<f32>
  return %s : tensor<8x16xf32>
}

// A fused chain of constants has no inputs: `ins` is left out (printed as
// `ins( : )`, it did not parse back). With inputs, as before.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK: hl.fused_elementwise -> tensor<4xf32> {
  %0 = hl.fused_elementwise -> tensor<4xf32> {
    %c = arith.constant 1.0 : f32
    hl.yield %c : f32
  }
  // CHECK: hl.fused_elementwise ins(%{{.*}} : tensor<4xf32>) -> tensor<4xf32> {
  %1 = hl.fused_elementwise ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%v: f32):
    %e = math.exp %v : f32
    hl.yield %e : f32
  }
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
