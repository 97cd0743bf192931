// Every ll op parses, verifies, prints and parses again, in the custom
// and in the generic form.
// RUN: aicf-opt %s | aicf-opt | FileCheck %s
// RUN: aicf-opt %s --mlir-print-op-generic | aicf-opt | FileCheck %s

// CHECK-LABEL: func.func @mlp_step
func.func @mlp_step(%x: memref<32x64xf32>, %w1: memref<128x64xf32>, %b1: memref<128xf32>,
                    %h: memref<32x128xf32>, %w2: memref<10x128xf32>, %logits: memref<32x10xf32>,
                    %labels: memref<32xi32>, %loss: memref<f32>, %dlogits: memref<32x10xf32>,
                    %dw2: memref<10x128xf32>, %db2: memref<10xf32>, %dh: memref<32x128xf32>) {
  // CHECK: ll.gemm %{{.*}}, %{{.*}} bias(%{{.*}}) into %{{.*}} transpose_b act = relu : memref<32x64xf32>, memref<128x64xf32>, memref<128xf32> -> memref<32x128xf32>
  ll.gemm %x, %w1 bias(%b1) into %h transpose_b act = relu
      : memref<32x64xf32>, memref<128x64xf32>, memref<128xf32> -> memref<32x128xf32>
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_b : memref<32x128xf32>, memref<10x128xf32> -> memref<32x10xf32>
  ll.gemm %h, %w2 into %logits transpose_b : memref<32x128xf32>, memref<10x128xf32> -> memref<32x10xf32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32>
  ll.softmax_cross_entropy %logits, %labels into %loss, %dlogits
      : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32>
  // CHECK: ll.softmax_cross_entropy %{{.*}}, %{{.*}} into %{{.*}} reduction = sum : memref<32x10xf32>, memref<32xi32> -> memref<f32>
  ll.softmax_cross_entropy %logits, %labels into %loss reduction = sum
      : memref<32x10xf32>, memref<32xi32> -> memref<f32>
  // CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_a accumulate alpha = 5.000000e-01 : memref<32x10xf32>, memref<32x128xf32> -> memref<10x128xf32>
  ll.gemm %dlogits, %h into %dw2 transpose_a accumulate alpha = 0.5
      : memref<32x10xf32>, memref<32x128xf32> -> memref<10x128xf32>
  // CHECK: ll.reduce sum %{{.*}} dims = [0] into %{{.*}} : memref<32x10xf32> -> memref<10xf32>
  ll.reduce sum %dlogits dims = [0] into %db2 : memref<32x10xf32> -> memref<10xf32>
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
