// ll-schedule: streams for independent kernels, events where they join.
// RUN: aicf-opt %s --ll-schedule | FileCheck %s
// RUN: aicf-opt %s --ll-schedule=max-streams=1 | FileCheck %s --check-prefix=ONE
// Scheduling again replaces the schedule whole (events and waits of the
// first one were left behind).
// RUN: aicf-opt %s --ll-schedule --ll-schedule=max-streams=1 | FileCheck %s --check-prefix=ONE

// The weight gradient and the input gradient read the same dY and are
// independent: two streams; the sum continues the second stream and waits
// for the first one's GEMM through its event.
// CHECK-LABEL: func.func @backward
// CHECK-SAME: ll.schedule = {events = 2 : i64, streams = 2 : i64}
// CHECK: ll.softmax_cross_entropy {{.*}} {ll.event = 0 : i64, ll.stream = 0 : i64}
// CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_a {ll.event = 1 : i64, ll.stream = 0 : i64}
// CHECK: ll.gemm %{{.*}}, %{{.*}} into %{{.*}} transpose_a alpha = 2.000000e+00 {ll.stream = 1 : i64, ll.wait = array<i64: 0>}
// CHECK: ll.elementwise
// CHECK: } {ll.stream = 1 : i64, ll.wait = array<i64: 1>}
// ONE: ll.schedule = {events = 0 : i64, streams = 1 : i64}
// ONE-NOT: ll.wait
// ONE-NOT: ll.event
func.func @backward(%logits: memref<8x4xf32>, %labels: memref<8xi32>, %loss: memref<f32>, %h: memref<8x16xf32>,
                    %w: memref<4x16xf32>, %out: memref<4x16xf32>) {
  %g = memref.alloc() : memref<8x4xf32>
  ll.softmax_cross_entropy %logits, %labels into %loss, %g : memref<8x4xf32>, memref<8xi32> -> memref<f32>, memref<8x4xf32>
  %dw = memref.alloc() : memref<4x16xf32>
  ll.gemm %g, %h into %dw transpose_a : memref<8x4xf32>, memref<8x16xf32> -> memref<4x16xf32>
  %dx = memref.alloc() : memref<4x16xf32>
  ll.gemm %g, %h into %dx transpose_a alpha = 2.0 : memref<8x4xf32>, memref<8x16xf32> -> memref<4x16xf32>
  ll.elementwise ins(%dw, %dx : memref<4x16xf32>, memref<4x16xf32>) outs(%out : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    ll.yield %s : f32
  }
  return
}

// Collectives (a data-parallel step's all-reduces) go on one stream of
// their own, beyond max-streams, in program order; each waits for the
// kernel that wrote its gradient, and the consumer waits for both.
// CHECK-LABEL: func.func @reduced
// CHECK: ll.gemm {{.*}} {ll.event = 0 : i64, ll.stream = 0 : i64}
// CHECK: ll.all_reduce {{.*}} {ll.event = [[R1:[0-9]+]] : i64, ll.stream = [[COMM:[0-9]+]] : i64, ll.wait = array<i64: 0>}
// CHECK: ll.gemm {{.*}} {ll.event = [[G2:[0-9]+]] : i64, ll.stream = {{[02]}} : i64}
// CHECK: ll.all_reduce {{.*}} {ll.event = [[R2:[0-9]+]] : i64, ll.stream = [[COMM]] : i64, ll.wait = array<i64: [[G2]]>}
// CHECK: } {ll.stream = {{[02]}} : i64, ll.wait = array<i64: {{.*}}[[R1]], [[R2]]>}
// ONE-LABEL: func.func @reduced
// ONE-SAME: ll.schedule = {events = 4 : i64, streams = 2 : i64}
// ONE: ll.all_reduce {{.*}} ll.stream = 1 : i64
// ONE: ll.gemm {{.*}} ll.stream = 0 : i64
// ONE: ll.all_reduce {{.*}} ll.stream = 1 : i64
func.func @reduced(%w: memref<f32>, %g: memref<8x4xf32>, %h: memref<8x16xf32>, %out: memref<4x16xf32>) {
  %dw = memref.alloc() : memref<4x16xf32>
  ll.gemm %g, %h into %dw transpose_a : memref<8x4xf32>, memref<8x16xf32> -> memref<4x16xf32>
  ll.all_reduce %dw weight %w : (memref<4x16xf32>), memref<f32>
  %dx = memref.alloc() : memref<4x16xf32>
  ll.gemm %g, %h into %dx transpose_a alpha = 2.0 : memref<8x4xf32>, memref<8x16xf32> -> memref<4x16xf32>
  ll.all_reduce %dx weight %w : (memref<4x16xf32>), memref<f32>
  ll.elementwise ins(%dw, %dx : memref<4x16xf32>, memref<4x16xf32>) outs(%out : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    ll.yield %s : f32
  }
  return
}
