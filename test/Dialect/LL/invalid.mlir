// One case per ll verifier rule, with the exact diagnostic.
// RUN: aicf-opt %s -split-input-file -verify-diagnostics

func.func @f(%a: memref<4x8xf32>, %b: memref<8x2xf16>, %c: memref<4x2xf32>) {
  // expected-error @+1 {{'ll.gemm' op operands and result hold different element types: 'memref<4x8xf32>', 'memref<8x2xf16>' and 'memref<4x2xf32>'}}
  ll.gemm %a, %b into %c : memref<4x8xf32>, memref<8x2xf16> -> memref<4x2xf32>
  return
}

// -----

// Only f16/bf16 operands may have a wider (f32) result.
func.func @f(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %c: memref<4x2xf16>) {
  // expected-error @+1 {{'ll.gemm' op operands and result hold different element types: 'memref<4x8xbf16>', 'memref<8x2xbf16>' and 'memref<4x2xf16>' (only f16 or bf16 operands may have an f32 result)}}
  ll.gemm %a, %b into %c : memref<4x8xbf16>, memref<8x2xbf16> -> memref<4x2xf16>
  return
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<7x2xf32>, %c: memref<4x2xf32>) {
  // expected-error @+1 {{'ll.gemm' op contracting dimensions differ: a has K = 8, b has K = 7}}
  ll.gemm %a, %b into %c : memref<4x8xf32>, memref<7x2xf32> -> memref<4x2xf32>
  return
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %c: memref<2x4xf32>) {
  // expected-error @+1 {{'ll.gemm' op result buffer 'memref<2x4xf32>' does not match the product shape [4, 2]}}
  ll.gemm %a, %b into %c : memref<4x8xf32>, memref<8x2xf32> -> memref<2x4xf32>
  return
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %bias: memref<4xf32>, %c: memref<4x2xf32>) {
  // expected-error @+1 {{'ll.gemm' op bias 'memref<4xf32>' must have N = 2 elements}}
  ll.gemm %a, %b bias(%bias) into %c : memref<4x8xf32>, memref<8x2xf32> bias memref<4xf32> -> memref<4x2xf32>
  return
}

// -----

func.func @f(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  // expected-error @+1 {{'ll.gemm' op result buffer must not alias an operand}}
  ll.gemm %a, %b into %a : memref<4x4xf32>, memref<4x4xf32> -> memref<4x4xf32>
  return
}

// -----

func.func @f(%a: memref<4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+1 {{'ll.gemm' op operands must be matrices (rank >= 2), got 'memref<4xf32>' and 'memref<4x4xf32>'}}
  ll.gemm %a, %b into %c : memref<4xf32>, memref<4x4xf32> -> memref<4x4xf32>
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{'ll.elementwise' op needs at least one output buffer}}
  "ll.elementwise"(%a) <{operandSegmentSizes = array<i32: 1, 0>}> ({
  ^bb0(%x: f32):
    ll.yield
  }) : (memref<4xf32>) -> ()
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o1: memref<4xf32>, %o2: memref<2x4xf32>) {
  // expected-error @+1 {{'ll.elementwise' op outputs must share one shape, got 'memref<4xf32>' and 'memref<2x4xf32>'}}
  ll.elementwise ins(%a : memref<4xf32>) outs(%o1, %o2 : memref<4xf32>, memref<2x4xf32>) {
  ^bb0(%x: f32):
    ll.yield %x, %x : f32, f32
  }
  return
}

// -----

func.func @f(%a: memref<3xf32>, %o: memref<2x4xf32>) {
  // expected-error @+1 {{'ll.elementwise' op input #0 of type 'memref<3xf32>' does not broadcast to the output shape of 'memref<2x4xf32>'}}
  ll.elementwise ins(%a : memref<3xf32>) outs(%o : memref<2x4xf32>) {
  ^bb0(%x: f32):
    ll.yield %x : f32
  }
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o: memref<4xf32>) {
  // expected-error @+1 {{'ll.elementwise' op body takes 2 scalars but the op has 1 inputs}}
  ll.elementwise ins(%a : memref<4xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    ll.yield %x : f32
  }
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o: memref<4xf32>) {
  // expected-error @+1 {{'ll.elementwise' op body argument #0 has type 'f16' but input #0 holds 'f32'}}
  ll.elementwise ins(%a : memref<4xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%x: f16):
    %y = arith.extf %x : f16 to f32
    ll.yield %y : f32
  }
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o: memref<4xf32>) {
  // expected-error @+1 {{'ll.elementwise' op body yields 2 values for 1 outputs}}
  ll.elementwise ins(%a : memref<4xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%x: f32):
    ll.yield %x, %x : f32, f32
  }
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o: memref<4xf16>) {
  // expected-error @+1 {{'ll.elementwise' op yielded value #0 has type 'f32' but output #0 holds 'f16'}}
  ll.elementwise ins(%a : memref<4xf32>) outs(%o : memref<4xf16>) {
  ^bb0(%x: f32):
    ll.yield %x : f32
  }
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o: memref<4xf32>, %m: memref<4xf32>) {
  ll.elementwise ins(%a : memref<4xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%x: f32):
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'memref.load' op is not allowed in an elementwise body: only side-effect-free scalar ops are}}
    %y = memref.load %m[%c0] : memref<4xf32>
    ll.yield %y : f32
  }
  return
}

// -----

func.func @f(%a: memref<4xf32>, %o: memref<4xf32>) {
  ll.elementwise ins(%a : memref<4xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%x: f32):
    // expected-error @+1 {{'arith.constant' op produces 'vector<4xf32>' in an elementwise body, which is scalar}}
    %v = arith.constant dense<0.0> : vector<4xf32>
    ll.yield %x : f32
  }
  return
}

// -----

func.func @f(%l: memref<8x4xf32>, %y: memref<7xi32>, %loss: memref<f32>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op labels 'memref<7xi32>' must have the shape of 'memref<8x4xf32>' without the class dimension}}
  ll.softmax_cross_entropy %l, %y into %loss : memref<8x4xf32>, memref<7xi32> -> memref<f32>
  return
}

// -----

func.func @f(%l: memref<8x4xf32>, %y: memref<8xi32>, %loss: memref<f16>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op loss buffer 'memref<f16>' must hold 'f32'}}
  ll.softmax_cross_entropy %l, %y into %loss : memref<8x4xf32>, memref<8xi32> -> memref<f16>
  return
}

// -----

func.func @f(%l: memref<8x4xbf16>, %y: memref<8xi32>, %loss: memref<f16>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op loss buffer 'memref<f16>' must hold 'bf16' or f32}}
  ll.softmax_cross_entropy %l, %y into %loss : memref<8x4xbf16>, memref<8xi32> -> memref<f16>
  return
}

// -----

func.func @f(%l: memref<8x4xbf16>, %y: memref<8xi32>, %g: memref<bf16>, %loss: memref<f32>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op grad_output 'memref<bf16>' must hold 'f32' (the loss's type)}}
  ll.softmax_cross_entropy %l, %y grad_output(%g) into %loss : memref<8x4xbf16>, memref<8xi32> grad_output memref<bf16> -> memref<f32>
  return
}

// -----

func.func @f(%l: memref<8x4xf32>, %y: memref<8xi32>, %loss: memref<f32>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op classes = 5 must be in [1, 4] (the logits' last dimension)}}
  ll.softmax_cross_entropy %l, %y into %loss classes = 5 : memref<8x4xf32>, memref<8xi32> -> memref<f32>
  return
}

// -----

func.func @f(%l: memref<8x4xf32>, %y: memref<8xi32>, %loss: memref<f32>, %g: memref<4x8xf32>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op gradient buffer 'memref<4x8xf32>' must have the logits' type 'memref<8x4xf32>'}}
  ll.softmax_cross_entropy %l, %y into %loss, %g : memref<8x4xf32>, memref<8xi32> -> memref<f32>, memref<4x8xf32>
  return
}

// -----

func.func @f(%l: memref<8x4xf32>, %y: memref<8xi32>, %loss: memref<f32>, %r: memref<8xf32>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op rows buffer 'memref<8xf32>' must hold 9 values of 'f32' (one per row and the count)}}
  ll.softmax_cross_entropy %l, %y into %loss rows(%r) : memref<8x4xf32>, memref<8xi32> -> memref<f32> rows memref<8xf32>
  return
}

// -----

func.func @f(%l: memref<?x4xf32>, %y: memref<?xi32>, %loss: memref<f32>, %r: memref<9xf32>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op rows buffer 'memref<9xf32>' needs static sizes (labels 'memref<?xi32>')}}
  ll.softmax_cross_entropy %l, %y into %loss rows(%r) : memref<?x4xf32>, memref<?xi32> -> memref<f32> rows memref<9xf32>
  return
}

// -----

func.func @f(%l: memref<8x4xf32>, %y: memref<8xi32>, %loss: memref<f32>, %r: memref<9xf64>) {
  // expected-error @+1 {{'ll.softmax_cross_entropy' op rows buffer 'memref<9xf64>' must hold 9 values of 'f32' (one per row and the count)}}
  ll.softmax_cross_entropy %l, %y into %loss rows(%r) : memref<8x4xf32>, memref<8xi32> -> memref<f32> rows memref<9xf64>
  return
}

// -----

func.func @f(%x: memref<8x4xf32>, %o: memref<4xf16>) {
  // expected-error @+1 {{'ll.reduce' op input 'memref<8x4xf32>' and result 'memref<4xf16>' hold different element types}}
  ll.reduce sum %x dims = [0] into %o : memref<8x4xf32> -> memref<4xf16>
  return
}

// -----

func.func @f(%x: memref<8x4xf32>, %o: memref<4xf32>) {
  // expected-error @+1 {{'ll.reduce' op dimension 2 is out of range for 'memref<8x4xf32>'}}
  ll.reduce sum %x dims = [2] into %o : memref<8x4xf32> -> memref<4xf32>
  return
}

// -----

func.func @f(%x: memref<8x4xf32>, %o: memref<4xf32>) {
  // expected-error @+1 {{'ll.reduce' op dimension 0 is listed twice}}
  ll.reduce sum %x dims = [0, 0] into %o : memref<8x4xf32> -> memref<4xf32>
  return
}

// -----

func.func @f(%x: memref<8x4xf32>, %o: memref<8xf32>) {
  // expected-error @+1 {{'ll.reduce' op result 'memref<8xf32>' does not have the reduced shape [4]}}
  ll.reduce mean %x dims = [0] into %o : memref<8x4xf32> -> memref<8xf32>
  return
}

// -----

func.func @f(%x: memref<8x4xf32>, %o: memref<4x8xf32>) {
  // expected-error @+1 {{'ll.copy' op failed to verify that all of {source, target} have same type}}
  "ll.copy"(%x, %o) : (memref<8x4xf32>, memref<4x8xf32>) -> ()
  return
}

// -----

func.func @f(%x: memref<8xi32>) {
  // expected-error @+1 {{'ll.fill' op operand #0 must be memref of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'memref<8xi32>'}}
  ll.fill %x, 0.0 : memref<8xi32>
  return
}

// -----

func.func @f(%x: f32) {
  // expected-error @+1 {{'ll.yield' op expects parent op to be one of 'll.elementwise, ll.multi_tensor_apply'}}
  ll.yield %x : f32
}

// -----

func.func @f(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %c: memref<4x2xf32>, %s: memref<8xf32>) {
  // expected-error @+1 {{'ll.gemm' op lhs_sum 'memref<8xf32>' must hold M = 4 elements of 'f32'}}
  ll.gemm %a, %b into %c lhs_sum(%s) : memref<4x8xf32>, memref<8x2xf32> -> memref<4x2xf32> lhs_sum memref<8xf32>
  return
}

// -----

func.func @f(%a: memref<2x4x8xf32>, %b: memref<3x8x2xf32>, %c: memref<2x4x2xf32>) {
  // expected-error @+1 {{'ll.gemm' op batch dimensions of 'memref<2x4x8xf32>' and 'memref<3x8x2xf32>' differ}}
  ll.gemm %a, %b into %c : memref<2x4x8xf32>, memref<3x8x2xf32> -> memref<2x4x2xf32>
  return
}

// -----

func.func @f(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  // expected-error @+1 {{'ll.softmax' op axis 2 is out of range for 'memref<4x8xf32>'}}
  ll.softmax %x into %y axis = 2 : memref<4x8xf32>
  return
}

// -----

func.func @f(%x: memref<4x8xf32>, %w: memref<4xf32>, %y: memref<4x8xf32>) {
  // expected-error @+1 {{'ll.norm' op weight 'memref<4xf32>' must have the normalised dimensions of 'memref<4x8xf32>'}}
  ll.norm %x weight(%w) into %y dims = 1 eps = 1.0e-5 : memref<4x8xf32> weight memref<4xf32>
  return
}

// -----

func.func @f(%q: memref<2x4x8xf32>, %k: memref<2x5x7xf32>, %o: memref<2x4x8xf32>) {
  // expected-error @+1 {{'ll.attention' op queries 'memref<2x4x8xf32>', keys 'memref<2x5x7xf32>' and values 'memref<2x5x7xf32>' do not form an attention}}
  ll.attention %q, %k, %k into %o scale = 1.0 : memref<2x4x8xf32>, memref<2x5x7xf32>, memref<2x5x7xf32> -> memref<2x4x8xf32>
  return
}

// -----

func.func @f(%x: memref<2x3xf32>, %y: memref<2x3xf32>) {
  // expected-error @+1 {{'ll.transpose' op result buffer 'memref<2x3xf32>' is not 'memref<2x3xf32>' permuted}}
  ll.transpose %x into %y permutation = [1, 0] : memref<2x3xf32> -> memref<2x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3xf32>) {
  // expected-error @+1 {{'ll.reshape' op cannot view 'memref<2x3xf32>' as 'memref<7xf32>'}}
  %v = ll.reshape %x : memref<2x3xf32> to memref<7xf32>
  return
}

// -----

func.func @f(%x: memref<3xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'ll.multi_tensor_apply' op group 1: input #0 of type 'memref<4xf32>' does not broadcast to the output shape of 'memref<3xf32>'}}
  ll.multi_tensor_apply ins(%x, %y : memref<3xf32>, memref<4xf32>) outs(%x, %x : memref<3xf32>, memref<3xf32>) {
  ^bb0(%a: f32):
    ll.yield %a : f32
  }
  return
}

// -----

func.func @f(%y: memref<8x10xf32>, %g: memref<8x10xf32>) {
  // expected-error @+1 {{'ll.softmax_backward' op axis 2 is out of range for 'memref<8x10xf32>'}}
  ll.softmax_backward %y, %g into %g axis = 2 : memref<8x10xf32>
  return
}

// -----

func.func @f(%g: memref<8x10xf32>, %x: memref<8x10xf32>, %w: memref<10xf32>, %dw: memref<10xf32>, %db: memref<10xf32>, %p: memref<30xf32>) {
  // expected-error @+1 {{'ll.norm_backward' op partials 'memref<30xf32>' must hold whole chunks of 20 values of 'f32'}}
  ll.norm_backward %g, %x weight(%w) into %g grad_weight(%dw) grad_bias(%db) partials(%p) dims = 1 eps = 1.0e-05
      : memref<8x10xf32> weight memref<10xf32> grad_weight memref<10xf32> grad_bias memref<10xf32> partials memref<30xf32>
  return
}

// -----

func.func @f(%g: memref<8x10xf32>, %x: memref<8x10xf32>, %w: memref<10xf32>, %dw: memref<10xf32>, %p: memref<?xf32>) {
  // expected-error @+1 {{'ll.norm_backward' op partials 'memref<?xf32>' needs static sizes (rows of 'memref<10xf32>')}}
  ll.norm_backward %g, %x weight(%w) into %g grad_weight(%dw) partials(%p) dims = 1 eps = 1.0e-05
      : memref<8x10xf32> weight memref<10xf32> grad_weight memref<10xf32> partials memref<?xf32>
  return
}

// -----

func.func @f(%g: memref<8x10xf32>, %x: memref<8x10xf32>, %p: memref<20xf32>) {
  // expected-error @+1 {{'ll.norm_backward' op partials without grad_weight or grad_bias}}
  ll.norm_backward %g, %x into %g partials(%p) dims = 1 eps = 1.0e-05 : memref<8x10xf32> partials memref<20xf32>
  return
}

// -----

func.func @f(%g: memref<8x10xf32>, %x: memref<8x10xf32>, %w: memref<8xf32>) {
  // expected-error @+1 {{'ll.norm_backward' op weight 'memref<8xf32>' must be 'memref<10xf32>'}}
  ll.norm_backward %g, %x weight(%w) into %g dims = 1 eps = 1.0e-05 : memref<8x10xf32> weight memref<8xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %y: memref<2x4x6x6xf32>) {
  // expected-error @+1 {{'ll.conv2d' op output 'memref<2x4x6x6xf32>' is not the convolution's shape [2, 4, 8, 8]}}
  ll.conv2d %x, %w into %y stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : memref<2x3x8x8xf32>, memref<4x3x3x3xf32> -> memref<2x4x6x6xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %r: memref<2x6x6x3x3x3xf32>) {
  // expected-error @+1 {{'ll.im2col' op windows 'memref<2x6x6x3x3x3xf32>' are not the image's windows [2, 8, 8, 3, 3, 3] of 'memref<2x3x8x8xf32>'}}
  ll.im2col %x into %r stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x3x8x8xf32> -> memref<2x6x6x3x3x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %r: memref<2x8x8x3x3x3xf32>) {
  // The rows' shape where the columns form is asked for.
  // expected-error @+1 {{'ll.im2col' op windows 'memref<2x8x8x3x3x3xf32>' are not the image's windows [3, 8, 8, 2, 3, 3] of 'memref<2x3x8x8xf32>'}}
  ll.im2col %x into %r stride = [1, 1] padding = [1, 1] dilation = [1, 1] {columns} : memref<2x3x8x8xf32> -> memref<2x8x8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %r: memref<2x8x8x3x3x3xf32>) {
  // expected-error @+1 {{'ll.im2col' op strides and dilations must be at least 1 and paddings at least 0}}
  ll.im2col %x into %r stride = [0, 1] padding = [1, 1] dilation = [1, 1] : memref<2x3x8x8xf32> -> memref<2x8x8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xbf16>, %r: memref<2x8x8x3x3x3xf32>) {
  // expected-error @+1 {{'ll.im2col' op the image and the windows hold different element types}}
  ll.im2col %x into %r stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x3x8x8xbf16> -> memref<2x8x8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %r: memref<2x8x8x3x?x3xf32>) {
  // expected-error @+1 {{'ll.im2col' op the image and the windows must have static shapes}}
  ll.im2col %x into %r stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x3x8x8xf32> -> memref<2x8x8x3x?x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %r: memref<2x8x8x3x3x3xf32>) {
  // expected-error @+1 {{'ll.im2col' op the window (dilation 4611686018427387904, kernel 3) or padding (1) is beyond 64-bit sizes}}
  ll.im2col %x into %r stride = [1, 1] padding = [1, 1] dilation = [4611686018427387904, 1] : memref<2x3x8x8xf32> -> memref<2x8x8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %r: memref<2x8x8x3x3xf32>) {
  // expected-error @+1 {{'ll.col2im' op the image must have rank 4 and the windows rank 6}}
  ll.col2im %r into %x stride = [1, 1] padding = [1, 1] dilation = [1, 1] : memref<2x8x8x3x3xf32> -> memref<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: memref<2x3x8x8xf32>, %w: memref<4x2x3x3xf32>, %y: memref<2x4x8x8xf32>) {
  // expected-error @+1 {{'ll.conv2d_backward_weight' op input 'memref<2x3x8x8xf32>' and weight 'memref<4x2x3x3xf32>' do not fit groups = 1}}
  ll.conv2d_backward_weight %y, %x into %w stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1
      : memref<2x4x8x8xf32>, memref<2x3x8x8xf32> -> memref<4x2x3x3xf32>
  return
}

// -----

func.func @f(%x: memref<2x4x8x8xf32>, %p: memref<2x4x3x3xf32>) {
  // expected-error @+1 {{'ll.pool2d' op pooled buffer 'memref<2x4x3x3xf32>' is not the pooling's shape [2, 4, 4, 4]}}
  ll.pool2d max %x into %p kernel = [2, 2] stride = [2, 2] padding = [0, 0] : memref<2x4x8x8xf32> -> memref<2x4x3x3xf32>
  return
}

// -----

func.func @f(%e: memref<4x8x16xf32>, %tok: memref<4x8xi32>, %t: memref<65x15xf32>) {
  // expected-error @+1 {{'ll.scatter_add' op gathered buffer 'memref<4x8x16xf32>' is not [4, 8, 15] of 'f32'}}
  ll.scatter_add %e[%tok] into %t axis = 0 : memref<4x8x16xf32>, memref<4x8xi32> -> memref<65x15xf32>
  return
}

// -----

func.func @f(%x: memref<8x16xf32>, %s: memref<8x8xf32>) {
  // expected-error @+1 {{'ll.slice' op window 'memref<8x8xf32>' does not fit in 'memref<8x16xf32>' in dimension 1}}
  ll.slice %x into %s start = [0, 2] strides = [1, 2] : memref<8x16xf32> -> memref<8x8xf32>
  return
}

// -----

func.func @f(%x: memref<8x16xf32>, %a: memref<8x3xf32>, %c: memref<8x20xf32>) {
  // expected-error @+1 {{'ll.concat' op inputs add up to 19 along axis 1, the result has 20}}
  ll.concat %x, %a into %c axis = 1 : memref<8x16xf32>, memref<8x3xf32> -> memref<8x20xf32>
  return
}

// -----

func.func @f(%x: memref<8x16xf32>, %i: memref<16xi64>) {
  // expected-error @+1 {{'ll.argmax' op result 'memref<16xi64>' is not 'memref<8x16xf32>' without axis 1}}
  ll.argmax %x into %i axis = 1 : memref<8x16xf32> -> memref<16xi64>
  return
}

// -----

func.func @f(%x: memref<8x16xf32>, %l: memref<f16>) {
  // expected-error @+1 {{'ll.mse_loss' op loss buffer must hold 'f32'}}
  ll.mse_loss %x, %x into %l : memref<8x16xf32> -> memref<f16>
  return
}

// -----

func.func @f(%x: memref<8x16xf32>, %s: memref<i64>) {
  // expected-error @+1 {{'ll.dropout' op p = 1.000000e+00 is not in [0, 1)}}
  ll.dropout %x, %s, %s into %x p = 1.0 stream = 0 : memref<8x16xf32>
  return
}

// -----

func.func @f(%q: memref<2x4x8xf32>, %k: memref<2x5x8xf32>, %v: memref<2x5x3xf32>, %o: memref<2x4x8xf32>) {
  // expected-error @+1 {{'ll.attention' op result buffer 'memref<2x4x8xf32>' is not the queries' shape with the values' width}}
  ll.attention %q, %k, %v into %o scale = 1.0 : memref<2x4x8xf32>, memref<2x5x8xf32>, memref<2x5x3xf32> -> memref<2x4x8xf32>
  return
}

// -----

func.func @f(%q: memref<2x16x8xf32>, %s: memref<48xf32>) {
  // expected-error @+1 {{'ll.attention_backward' op rows buffer 'memref<48xf32>' must hold two values per query row (64)}}
  ll.attention_backward %q, %q, %q, %q, %q into %q, %q, %q rows(%s) scale = 0.5 : memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32> -> memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32> rows memref<48xf32>
  return
}

// -----

func.func @f(%q: memref<2x16x8xf32>, %o: memref<2x16x4xf32>, %s: memref<64xf32>) {
  // expected-error @+1 {{'ll.attention_backward' op the result and its gradient must be the queries' shape with the values' width, got 'memref<2x16x4xf32>'}}
  ll.attention_backward %q, %q, %q, %o, %o into %q, %q, %q rows(%s) scale = 0.5 : memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x4xf32> -> memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32> rows memref<64xf32>
  return
}

// -----

func.func @f(%q: memref<2x16x8xf32>, %o: memref<2x16x8xf32>, %lse: memref<16xf32>) {
  // expected-error @+1 {{'ll.attention' op log-sum-exp buffer 'memref<16xf32>' must hold one value per query row (32)}}
  ll.attention %q, %q, %q into %o lse(%lse : memref<16xf32>) scale = 0.5 : memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32> -> memref<2x16x8xf32>
  return
}

// -----

func.func @f(%q: memref<2x16x8xf32>, %s: memref<64xf32>, %lse: memref<32xf32>) {
  // expected-error @+1 {{'ll.attention_backward' op rows buffer 'memref<64xf32>' must hold one value per query row (32) beside the forward's log-sum-exps}}
  ll.attention_backward %q, %q, %q, %q, %q into %q, %q, %q rows(%s) lse(%lse : memref<32xf32>) scale = 0.5 : memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32> -> memref<2x16x8xf32>, memref<2x16x8xf32>, memref<2x16x8xf32> rows memref<64xf32>
  return
}

// -----

func.func @f(%x: memref<512x4xf32>, %o: memref<4xf32>, %p: memref<6xf32>) {
  // expected-error @+1 {{'ll.reduce' op partials buffer 'memref<6xf32>' must hold S >= 2 slices of 4 values of 'f32'}}
  ll.reduce sum %x dims = [0] into %o partials(%p) : memref<512x4xf32> -> memref<4xf32> partials memref<6xf32>
  return
}

// -----

func.func @f(%x: memref<512x4xbf16>, %o: memref<4xbf16>, %p: memref<8xbf16>) {
  // expected-error @+1 {{'ll.reduce' op operand #2 must be}}
  ll.reduce sum %x dims = [0] into %o partials(%p) : memref<512x4xbf16> -> memref<4xbf16> partials memref<8xbf16>
  return
}

// -----

func.func @f(%x: memref<64xf32>, %o: memref<f32>) {
  // expected-error @+1 {{'ll.reduce' op partials buffer must not be the input}}
  ll.reduce sum %x dims = [0] into %o partials(%x) : memref<64xf32> -> memref<f32> partials memref<64xf32>
  return
}
