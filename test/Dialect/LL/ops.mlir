// Every ll op parses, verifies, prints and parses again, in the custom
// and in the generic form.
// RUN: aicf-opt %s | aicf-opt | FileCheck %s
// RUN: aicf-opt %s --mlir-print-op-generic | aicf-opt | FileCheck %s

// Mixed precision: bf16 operands, f32 result.
// CHECK-LABEL: func.func @mixed_precision
func.func @mixed_precision(%x: memref<32x64xbf16>, %w: memref<128x64xbf16>, %y: memref<32x128xf32>) {
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_b : memref<32x64xbf16>, memref<128x64xbf16> -> memref<32x128xf32>
  ll.gemm %x, %w into %y transpose_b : memref<32x64xbf16>, memref<128x64xbf16> -> memref<32x128xf32>
  return
}

// CHECK-LABEL: func.func @mlp_step
func.func @mlp_step(%x: memref<32x64xf32>, %w1: memref<128x64xf32>, %b1: memref<128xf32>,
                    %h: memref<32x128xf32>, %w2: memref<10x128xf32>, %logits: memref<32x10xf32>,
                    %labels: memref<32xi32>, %loss: memref<f32>, %dlogits: memref<32x10xf32>,
                    %dw2: memref<10x128xf32>, %db2: memref<10xf32>, %dh: memref<32x128xf32>) {
  // CHECK: ll.gemm %{{.*}}, %{{.*}} bias(%{{.*}}) into %{{.*}} transpose_b act = relu : memref<32x64xf32>, memref<128x64xf32> bias memref<128xf32> -> memref<32x128xf32>
  ll.gemm %x, %w1 bias(%b1) into %h transpose_b act = relu
      : memref<32x64xf32>, memref<128x64xf32> bias memref<128xf32> -> memref<32x128xf32>
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_b : memref<32x128xf32>, memref<10x128xf32> -> memref<32x10xf32>
  ll.gemm %h, %w2 into %logits transpose_b : memref<32x128xf32>, memref<10x128xf32> -> memref<32x10xf32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32>
  ll.softmax_cross_entropy %logits, %labels into %loss, %dlogits
      : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} into %{{.*}} reduction = sum : memref<32x10xf32>, memref<32xi32> -> memref<f32>
  ll.softmax_cross_entropy %logits, %labels into %loss reduction = sum
      : memref<32x10xf32>, memref<32xi32> -> memref<f32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} rows(%{{.*}}) : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32> rows memref<33xf32>
  %rows = memref.alloc() : memref<33xf32>
  ll.softmax_cross_entropy %logits, %labels into %loss, %dlogits rows(%rows)
      : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32> rows memref<33xf32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} rows(%{{.*}}) classes = 10 : memref<32x16xbf16>, memref<32xi32> -> memref<f32>, memref<32x16xbf16> rows memref<33xf32>
  %padded = memref.alloc() : memref<32x16xbf16>
  ll.softmax_cross_entropy %padded, %labels into %loss, %padded rows(%rows) classes = 10
      : memref<32x16xbf16>, memref<32xi32> -> memref<f32>, memref<32x16xbf16> rows memref<33xf32>
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_a accumulate alpha = 5.000000e-01 : memref<32x10xf32>, memref<32x128xf32> -> memref<10x128xf32>
  ll.gemm %dlogits, %h into %dw2 transpose_a accumulate alpha = 0.5
      : memref<32x10xf32>, memref<32x128xf32> -> memref<10x128xf32>
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} lhs_sum(%{{.*}}) transpose_a : memref<32x10xf32>, memref<32x128xf32> -> memref<10x128xf32> lhs_sum memref<10xf32>
  ll.gemm %dlogits, %h into %dw2 lhs_sum(%db2) transpose_a
      : memref<32x10xf32>, memref<32x128xf32> -> memref<10x128xf32> lhs_sum memref<10xf32>
  // CHECK: ll.gemm %{{.*}}, %{{.*}} mask(%{{.*}}) into %{{.*}} : memref<32x10xf32>, memref<10x128xf32> mask memref<32x128xf32> -> memref<32x128xf32>
  ll.gemm %dlogits, %w2 mask(%h) into %dh : memref<32x10xf32>, memref<10x128xf32> mask memref<32x128xf32> -> memref<32x128xf32>
  // CHECK: ll.reduce sum %{{.*}} dims = [0] into %{{.*}} : memref<32x10xf32> -> memref<10xf32>
  ll.reduce sum %dlogits dims = [0] into %db2 : memref<32x10xf32> -> memref<10xf32>
  // CHECK: ll.reduce sum %{{.*}} dims = [0] into %{{.*}} partials(%{{.*}}) : memref<32x10xf32> -> memref<10xf32> partials memref<40xf32>
  %parts = memref.alloc() : memref<40xf32>
  ll.reduce sum %dlogits dims = [0] into %db2 partials(%parts) : memref<32x10xf32> -> memref<10xf32> partials memref<40xf32>
  // CHECK: ll.reduce max %{{.*}} dims = [0, 1] into %{{.*}} : memref<32x10xf32> -> memref<f32>
  ll.reduce max %dlogits dims = [0, 1] into %loss : memref<32x10xf32> -> memref<f32>
  ll.gemm %dlogits, %w2 into %dh : memref<32x10xf32>, memref<10x128xf32> -> memref<32x128xf32>
  // The ReLU mask of the backward pass as one fused elementwise kernel.
  // CHECK: ll.elementwise ins(%{{.*}}, %{{.*}} : memref<32x128xf32>, memref<32x128xf32>) outs(%{{.*}} : memref<32x128xf32>) {
  // CHECK-NEXT: ^bb0(%[[G:.*]]: f32, %[[A:.*]]: f32):
  // CHECK: arith.cmpf ogt, %[[A]]
  // CHECK: arith.select
  // CHECK: ll.yield %{{.*}} : f32
  ll.elementwise ins(%dh, %h : memref<32x128xf32>, memref<32x128xf32>) outs(%dh : memref<32x128xf32>) {
  ^bb0(%g: f32, %a: f32):
    %zero = arith.constant 0.0 : f32
    %pos = arith.cmpf ogt, %a, %zero : f32
    %r = arith.select %pos, %g, %zero : f32
    ll.yield %r : f32
  }
  // CHECK: ll.fill %{{.*}}, 0.000000e+00 : memref<10x128xf32>
  ll.fill %dw2, 0.0 : memref<10x128xf32>
  // CHECK: ll.copy %{{.*}} into %{{.*}} : memref<32x10xf32>
  ll.copy %dlogits into %logits : memref<32x10xf32>
  return
}

// Broadcast inputs and several outputs in one kernel.
// CHECK-LABEL: func.func @elementwise_multi
func.func @elementwise_multi(%a: memref<4x8xf32>, %b: memref<8xf32>, %s: memref<1x1xf32>,
                             %o1: memref<4x8xf32>, %o2: memref<4x8xf32>) {
  // CHECK: ll.elementwise ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<4x8xf32>, memref<8xf32>, memref<1x1xf32>) outs(%{{.*}}, %{{.*}} : memref<4x8xf32>, memref<4x8xf32>)
  ll.elementwise ins(%a, %b, %s : memref<4x8xf32>, memref<8xf32>, memref<1x1xf32>)
                 outs(%o1, %o2 : memref<4x8xf32>, memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %sum = arith.addf %x, %y : f32
    %e = math.exp %sum : f32
    %m = arith.mulf %e, %z : f32
    ll.yield %sum, %m : f32, f32
  }
  return
}

// The row-reduction family, attention, data movement and views.
// CHECK-LABEL: func.func @transformer_kernels
func.func @transformer_kernels(%x: memref<8x128x256xf32>, %g: memref<256xf32>, %b: memref<256xf32>,
                               %h: memref<8x128x256xf32>, %q: memref<8x4x128x64xf32>, %o: memref<8x4x128x64xf32>,
                               %s: memref<8x4x128x128xf32>, %t: memref<8x128x4x64xf32>, %w: memref<768x256xf32>,
                               %qkv: memref<8x128x768xf32>, %m: memref<8x4x128x1xf32>, %logits: memref<8x128x256xf32>,
                               %labels: memref<8x128xi64>, %loss: memref<f32>, %one: memref<f32>) {
  // CHECK: ll.norm %{{.*}} weight(%{{.*}}) bias(%{{.*}}) into %{{.*}} dims = 1 eps = 1.000000e-05 : memref<8x128x256xf32> weight memref<256xf32> bias memref<256xf32>
  ll.norm %x weight(%g) bias(%b) into %h dims = 1 eps = 1.0e-5 : memref<8x128x256xf32> weight memref<256xf32> bias memref<256xf32>
  // CHECK: ll.norm %{{.*}} weight(%{{.*}}) into %{{.*}} dims = 1 eps = 9.9999999999999995E-7 rms : memref<8x128x256xf32> weight memref<256xf32>
  ll.norm %x weight(%g) into %h dims = 1 eps = 1.0e-6 rms : memref<8x128x256xf32> weight memref<256xf32>
  // The linear form: leading dimensions of a are rows.
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_b : memref<8x128x256xf32>, memref<768x256xf32> -> memref<8x128x768xf32>
  ll.gemm %h, %w into %qkv transpose_b : memref<8x128x256xf32>, memref<768x256xf32> -> memref<8x128x768xf32>
  // Batched: equal batch dimensions.
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_b alpha = 1.250000e-01 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x128xf32>
  ll.gemm %q, %o into %s transpose_b alpha = 0.125 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x128xf32>
  // CHECK: ll.softmax %{{.*}} into %{{.*}} axis = 3 : memref<8x4x128x128xf32>
  ll.softmax %s into %s axis = 3 : memref<8x4x128x128xf32>
  // CHECK: ll.softmax %{{.*}} into %{{.*}} axis = 3 log : memref<8x4x128x128xf32>
  ll.softmax %s into %s axis = 3 log : memref<8x4x128x128xf32>
  // CHECK: ll.reduce max %{{.*}} dims = [3] into %{{.*}} : memref<8x4x128x128xf32> -> memref<8x4x128x1xf32>
  ll.reduce max %s dims = [3] into %m : memref<8x4x128x128xf32> -> memref<8x4x128x1xf32>
  // CHECK: ll.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} causal scale = 1.250000e-01 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>
  ll.attention %q, %q, %q into %o causal scale = 0.125 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>
  // CHECK: ll.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}}, %{{.*}} rows(%{{.*}}) causal scale = 1.250000e-01 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> rows memref<8192xf32>
  %stats = memref.alloc() : memref<8192xf32>
  ll.attention_backward %q, %q, %q, %o, %o into %o, %o, %o rows(%stats) causal scale = 0.125 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> rows memref<8192xf32>
  // The forward keeping each row's log-sum-exp, and the backward reading them.
  // CHECK: ll.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} lse(%{{.*}} : memref<4096xf32>) causal scale = 1.250000e-01 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>
  %lse = memref.alloc() : memref<4096xf32>
  ll.attention %q, %q, %q into %o lse(%lse : memref<4096xf32>) causal scale = 0.125 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>
  // CHECK: ll.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}}, %{{.*}} rows(%{{.*}}) lse(%{{.*}} : memref<4096xf32>) causal scale = 1.250000e-01 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> rows memref<4096xf32>
  %delta = memref.alloc() : memref<4096xf32>
  ll.attention_backward %q, %q, %q, %o, %o into %o, %o, %o rows(%delta) lse(%lse : memref<4096xf32>) causal scale = 0.125 : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> -> memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32> rows memref<4096xf32>
  // CHECK: ll.transpose %{{.*}} into %{{.*}} permutation = [0, 2, 1, 3] : memref<8x128x4x64xf32> -> memref<8x4x128x64xf32>
  ll.transpose %t into %q permutation = [0, 2, 1, 3] : memref<8x128x4x64xf32> -> memref<8x4x128x64xf32>
  // CHECK: ll.reshape %{{.*}} : memref<8x128x256xf32> to memref<1024x256xf32>
  %flat = ll.reshape %x : memref<8x128x256xf32> to memref<1024x256xf32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} grad_output(%{{.*}}) into %{{.*}}, %{{.*}} ignore_index = -1 : memref<8x128x256xf32>, memref<8x128xi64> grad_output memref<f32> -> memref<f32>, memref<8x128x256xf32>
  ll.softmax_cross_entropy %logits, %labels grad_output(%one) into %loss, %logits ignore_index = -1
      : memref<8x128x256xf32>, memref<8x128xi64> grad_output memref<f32> -> memref<f32>, memref<8x128x256xf32>
  return
}

// One multi-tensor SGD update over two parameters, in place.
// CHECK-LABEL: func.func @multi_tensor
func.func @multi_tensor(%g1: memref<4x3xf32>, %p1: memref<4x3xf32>, %g2: memref<3xf32>, %p2: memref<3xf32>, %lr: memref<f32>) {
  // CHECK: ll.multi_tensor_apply ins(%{{.*}} : memref<4x3xf32>, memref<f32>, memref<4x3xf32>, memref<3xf32>, memref<f32>, memref<3xf32>) outs(%{{.*}}, %{{.*}} : memref<4x3xf32>, memref<3xf32>)
  ll.multi_tensor_apply ins(%g1, %lr, %p1, %g2, %lr, %p2 : memref<4x3xf32>, memref<f32>, memref<4x3xf32>, memref<3xf32>, memref<f32>, memref<3xf32>)
                        outs(%p1, %p2 : memref<4x3xf32>, memref<3xf32>) {
  ^bb0(%g: f32, %r: f32, %p: f32):
    %s = arith.mulf %g, %r : f32
    %n = arith.subf %p, %s : f32
    ll.yield %n : f32
  }
  return
}

// CHECK-LABEL: func.func @backward_row_kernels
func.func @backward_row_kernels(%y: memref<8x10xf32>, %g: memref<8x10xf32>, %dx: memref<8x10xf32>,
                                %w: memref<10xf32>, %dw: memref<10xf32>, %db: memref<10xf32>) {
  // CHECK: ll.softmax_backward %{{.*}}, %{{.*}} into %{{.*}} axis = 1 log : memref<8x10xf32>
  ll.softmax_backward %y, %g into %dx axis = 1 log : memref<8x10xf32>
  // CHECK: ll.norm_backward %{{.*}}, %{{.*}} weight(%{{.*}}) into %{{.*}} grad_weight(%{{.*}}) grad_bias(%{{.*}}) dims = 1 eps = 1.000000e-05 : memref<8x10xf32> weight memref<10xf32> grad_weight memref<10xf32> grad_bias memref<10xf32>
  ll.norm_backward %g, %y weight(%w) into %dx grad_weight(%dw) grad_bias(%db) dims = 1 eps = 1.0e-05
      : memref<8x10xf32> weight memref<10xf32> grad_weight memref<10xf32> grad_bias memref<10xf32>
  // CHECK: ll.norm_backward %{{.*}}, %{{.*}} into %{{.*}} dims = 2 eps = 1.000000e-05 rms : memref<8x10xf32>
  ll.norm_backward %g, %y into %dx dims = 2 eps = 1.0e-05 rms : memref<8x10xf32>
  // CHECK: ll.norm_backward %{{.*}}, %{{.*}} weight(%{{.*}}) into %{{.*}} grad_weight(%{{.*}}) partials(%{{.*}}) dims = 1 eps = 1.000000e-05 : memref<8x10xf32> weight memref<10xf32> grad_weight memref<10xf32> partials memref<40xf32>
  %p = memref.alloc() : memref<40xf32>
  ll.norm_backward %g, %y weight(%w) into %dx grad_weight(%dw) partials(%p) dims = 1 eps = 1.0e-05
      : memref<8x10xf32> weight memref<10xf32> grad_weight memref<10xf32> partials memref<40xf32>
  return
}

// CHECK-LABEL: func.func @vision
func.func @vision(%x: memref<2x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %b: memref<4xf32>,
                  %y: memref<2x4x8x8xf32>, %p: memref<2x4x4x4xf32>, %xn: memref<2x8x8x4xf32>,
                  %wn: memref<6x2x3x3xf32>, %yn: memref<2x3x3x6xf32>) {
  // CHECK: ll.conv2d %{{.*}}, %{{.*}} bias(%{{.*}}) into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : memref<2x3x8x8xf32>, memref<4x3x3x3xf32> bias memref<4xf32> -> memref<2x4x8x8xf32>
  ll.conv2d %x, %w bias(%b) into %y stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : memref<2x3x8x8xf32>, memref<4x3x3x3xf32> bias memref<4xf32> -> memref<2x4x8x8xf32>
  // CHECK: ll.conv2d %{{.*}}, %{{.*}} into %{{.*}} stride = [2, 2] padding = [0, 0] dilation = [1, 1] groups = 2 layout = nhwc : memref<2x8x8x4xf32>, memref<6x2x3x3xf32> -> memref<2x3x3x6xf32>
  ll.conv2d %xn, %wn into %yn stride = [2, 2] padding = [0, 0] dilation = [1, 1] groups = 2 layout = nhwc
      : memref<2x8x8x4xf32>, memref<6x2x3x3xf32> -> memref<2x3x3x6xf32>
  // CHECK: ll.conv2d_backward_input %{{.*}}, %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : memref<2x4x8x8xf32>, memref<4x3x3x3xf32> -> memref<2x3x8x8xf32>
  ll.conv2d_backward_input %y, %w into %x stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : memref<2x4x8x8xf32>, memref<4x3x3x3xf32> -> memref<2x3x8x8xf32>
  // CHECK: ll.conv2d_backward_weight %{{.*}}, %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 : memref<2x4x8x8xf32>, memref<2x3x8x8xf32> -> memref<4x3x3x3xf32>
  ll.conv2d_backward_weight %y, %x into %w stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : memref<2x4x8x8xf32>, memref<2x3x8x8xf32> -> memref<4x3x3x3xf32>
  // CHECK: ll.pool2d max %{{.*}} into %{{.*}} kernel = [2, 2] stride = [2, 2] padding = [0, 0] : memref<2x4x8x8xf32> -> memref<2x4x4x4xf32>
  ll.pool2d max %y into %p kernel = [2, 2] stride = [2, 2] padding = [0, 0] : memref<2x4x8x8xf32> -> memref<2x4x4x4xf32>
  // CHECK: ll.pool2d_backward avg %{{.*}}, %{{.*}} into %{{.*}} kernel = [2, 2] stride = [2, 2] padding = [0, 0] : memref<2x4x4x4xf32>, memref<2x4x8x8xf32>
  ll.pool2d_backward avg %p, %y into %y kernel = [2, 2] stride = [2, 2] padding = [0, 0]
      : memref<2x4x4x4xf32>, memref<2x4x8x8xf32>
  return
}

// A convolution's window rows and their sum back into the image; a bf16
// image's gradient rows may be f32.
// CHECK-LABEL: func.func @windows
func.func @windows(%x: memref<2x3x8x8xf32>, %r: memref<2x8x8x3x3x3xf32>, %xn: memref<2x9x8x4xbf16>,
                   %rn: memref<2x3x5x4x3x2xf32>) {
  // CHECK: ll.im2col %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x3x8x8xf32> -> memref<2x8x8x3x3x3xf32>
  ll.im2col %x into %r stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x3x8x8xf32> -> memref<2x8x8x3x3x3xf32>
  // CHECK: ll.col2im %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x8x8x3x3x3xf32> -> memref<2x3x8x8xf32>
  ll.col2im %r into %x stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x8x8x3x3x3xf32> -> memref<2x3x8x8xf32>
  // CHECK: ll.col2im %{{.*}} into %{{.*}} stride = [2, 2] padding = [0, 1] dilation = [2, 1] layout = nhwc : memref<2x3x5x4x3x2xf32> -> memref<2x9x8x4xbf16>
  ll.col2im %rn into %xn stride = [2, 2] padding = [0, 1] dilation = [2, 1] layout = nhwc
      : memref<2x3x5x4x3x2xf32> -> memref<2x9x8x4xbf16>
  return
}

// The columns form: windows [C, KH, KW, N, OH, OW].
// CHECK-LABEL: func.func @window_columns
func.func @window_columns(%x: memref<2x3x8x8xf32>, %c: memref<3x3x3x2x8x8xf32>, %xb: memref<2x3x9x8xbf16>,
                          %cb: memref<3x3x2x2x3x5xf32>) {
  // CHECK: ll.im2col %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<2x3x8x8xf32> -> memref<3x3x3x2x8x8xf32>
  ll.im2col %x into %c stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<2x3x8x8xf32> -> memref<3x3x3x2x8x8xf32>
  // CHECK: ll.col2im %{{.*}} into %{{.*}} stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<3x3x3x2x8x8xf32> -> memref<2x3x8x8xf32>
  ll.col2im %c into %x stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<3x3x3x2x8x8xf32> -> memref<2x3x8x8xf32>
  // CHECK: ll.col2im %{{.*}} into %{{.*}} stride = [2, 2] padding = [0, 1] dilation = [2, 1] {columns} : memref<3x3x2x2x3x5xf32> -> memref<2x3x9x8xbf16>
  ll.col2im %cb into %xb stride = [2, 2] padding = [0, 1] dilation = [2, 1] {columns}
      : memref<3x3x2x2x3x5xf32> -> memref<2x3x9x8xbf16>
  return
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%t: memref<65x16xf32>, %tok: memref<4x8xi32>, %e: memref<4x8x16xf32>,
                    %x: memref<8x16xf32>, %s: memref<8x7xf32>, %a: memref<8x3xf32>,
                    %c: memref<8x19xf32>, %i: memref<8xi64>) {
  // CHECK: ll.gather %{{.*}}[%{{.*}}] into %{{.*}} axis = 0 : memref<65x16xf32>, memref<4x8xi32> -> memref<4x8x16xf32>
  ll.gather %t[%tok] into %e axis = 0 : memref<65x16xf32>, memref<4x8xi32> -> memref<4x8x16xf32>
  // CHECK: ll.scatter_add %{{.*}}[%{{.*}}] into %{{.*}} axis = 0 : memref<4x8x16xf32>, memref<4x8xi32> -> memref<65x16xf32>
  ll.scatter_add %e[%tok] into %t axis = 0 : memref<4x8x16xf32>, memref<4x8xi32> -> memref<65x16xf32>
  // CHECK: ll.slice %{{.*}} into %{{.*}} start = [0, 2] strides = [1, 2] : memref<8x16xf32> -> memref<8x7xf32>
  ll.slice %x into %s start = [0, 2] strides = [1, 2] : memref<8x16xf32> -> memref<8x7xf32>
  // CHECK: ll.slice %{{.*}} into %{{.*}} start = [0, 2] strides = [1, 2] backward : memref<8x7xf32> -> memref<8x16xf32>
  ll.slice %s into %x start = [0, 2] strides = [1, 2] backward : memref<8x7xf32> -> memref<8x16xf32>
  // CHECK: ll.concat %{{.*}}, %{{.*}} into %{{.*}} axis = 1 : memref<8x16xf32>, memref<8x3xf32> -> memref<8x19xf32>
  ll.concat %x, %a into %c axis = 1 : memref<8x16xf32>, memref<8x3xf32> -> memref<8x19xf32>
  // CHECK: ll.argmax %{{.*}} into %{{.*}} axis = 1 : memref<8x16xf32> -> memref<8xi64>
  ll.argmax %x into %i axis = 1 : memref<8x16xf32> -> memref<8xi64>
  return
}

// CHECK-LABEL: func.func @losses_and_randomness
func.func @losses_and_randomness(%x: memref<8x16xf32>, %t: memref<8x16xf32>, %l: memref<f32>,
                                 %seed: memref<i64>, %offset: memref<i64>) {
  // CHECK: ll.mse_loss %{{.*}}, %{{.*}} into %{{.*}} reduction = sum : memref<8x16xf32> -> memref<f32>
  ll.mse_loss %x, %t into %l reduction = sum : memref<8x16xf32> -> memref<f32>
  // CHECK: ll.dropout %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} p = 1.000000e-01 stream = 3 : memref<8x16xf32>
  ll.dropout %x, %seed, %offset into %t p = 0.1 stream = 3 : memref<8x16xf32>
  // CHECK: ll.random %{{.*}}, %{{.*}} into %{{.*}} kind = "normal" a = 5.000000e-01 b = 2.000000e+00 stream = 4 : memref<8x16xf32>
  ll.random %seed, %offset into %t kind = "normal" a = 0.5 b = 2.0 stream = 4 : memref<8x16xf32>
  return
}

// A data-parallel step's collective: a bucket of buffers summed over the
// replicas, each scaled by the replica's weight.
// CHECK-LABEL: func.func @collectives
func.func @collectives(%dw: memref<8x16xf32>, %db: memref<16xf32>, %w: memref<f32>) {
  // CHECK: ll.all_reduce %{{.*}}, %{{.*}} weight %{{.*}} : (memref<8x16xf32>, memref<16xf32>), memref<f32>
  ll.all_reduce %dw, %db weight %w : (memref<8x16xf32>, memref<16xf32>), memref<f32>
  return
}
