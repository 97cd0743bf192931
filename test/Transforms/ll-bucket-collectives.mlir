// ll-bucket-collectives: each all-reduce moves up to just after the kernel
// that writes its buffer, then reductions merge into buckets of at least
// bucket-bytes (0: one per buffer), each placed after its last buffer is
// written. A reduced value read before a later reduction closes the bucket
// (a member is never carried past a reader of its buffer).
// RUN: aicf-opt %s --split-input-file --ll-bucket-collectives="bucket-bytes=0" | FileCheck %s --check-prefix=EACH
// RUN: aicf-opt %s --split-input-file --ll-bucket-collectives="bucket-bytes=160" | FileCheck %s --check-prefix=TWO
// RUN: aicf-opt %s --split-input-file --ll-bucket-collectives | FileCheck %s --check-prefix=ONE
// RUN: not aicf-opt %s --split-input-file --ll-bucket-collectives="bucket-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// After ll-schedule the merged reductions lost their streams, waits and
// events (later ops waited on events nothing recorded): refused.
// RUN: not aicf-opt %s --split-input-file --ll-schedule=max-streams=4 --ll-bucket-collectives 2>&1 | FileCheck %s --check-prefix=SCHEDULED
// SCHEDULED: error: ll-bucket-collectives: @grads is scheduled already (ll.stream): bucket collectives before ll-schedule, as the pipeline does

// EACH-LABEL: func.func @grads(
// EACH: ll.fill %[[A:.*]], 1.0
// EACH-NEXT: ll.all_reduce %[[A]] weight %arg0 :
// EACH: ll.fill %[[B:.*]], 2.0
// EACH-NEXT: ll.all_reduce %[[B]] weight %arg0 :
// EACH: ll.fill %[[C:.*]], 3.0
// EACH-NEXT: ll.all_reduce %[[C]] weight %arg0 :
// EACH-NEXT: ll.copy

// TWO-LABEL: func.func @grads(
// TWO: ll.fill %[[A:.*]], 1.0
// TWO: ll.fill %[[B:.*]], 2.0
// TWO-NEXT: ll.all_reduce %[[A]], %[[B]] weight %arg0 : (memref<8x4xf32>, memref<8xf32>), memref<f32>
// TWO: ll.fill %[[C:.*]], 3.0
// TWO-NEXT: ll.all_reduce %[[C]] weight %arg0 : (memref<4xf32>), memref<f32>

// ONE-LABEL: func.func @grads(
// ONE-NOT: ll.all_reduce
// ONE: ll.fill %[[C:.*]], 3.0
// ONE-NEXT: ll.all_reduce %{{.*}}, %{{.*}}, %[[C]] weight %arg0 : (memref<8x4xf32>, memref<8xf32>, memref<4xf32>), memref<f32>
// ONE-NOT: ll.all_reduce

// ONE-LABEL: func.func @read_between(
// ONE: ll.fill %[[A:.*]], 1.0
// ONE-NEXT: ll.all_reduce %[[A]] weight %arg0 : (memref<8x4xf32>), memref<f32>
// ONE-NEXT: ll.copy %[[A]] into %arg1
// ONE: ll.fill %[[B:.*]], 2.0
// ONE-NEXT: ll.all_reduce %[[B]] weight %arg0 : (memref<8xf32>), memref<f32>

// BAD: ll-bucket-collectives: bucket-bytes must be at least 0, got -1

func.func @grads(%w: memref<f32>, %out: memref<8x4xf32>) {
  %a = memref.alloc() : memref<8x4xf32>
  ll.fill %a, 1.0 : memref<8x4xf32>
  %b = memref.alloc() : memref<8xf32>
  ll.fill %b, 2.0 : memref<8xf32>
  %c = memref.alloc() : memref<4xf32>
  ll.fill %c, 3.0 : memref<4xf32>
  ll.all_reduce %a weight %w : (memref<8x4xf32>), memref<f32>
  ll.all_reduce %b weight %w : (memref<8xf32>), memref<f32>
  ll.all_reduce %c weight %w : (memref<4xf32>), memref<f32>
  ll.copy %a into %out : memref<8x4xf32>
  return
}

// -----

func.func @read_between(%w: memref<f32>, %out: memref<8x4xf32>) {
  %a = memref.alloc() : memref<8x4xf32>
  ll.fill %a, 1.0 : memref<8x4xf32>
  ll.all_reduce %a weight %w : (memref<8x4xf32>), memref<f32>
  ll.copy %a into %out : memref<8x4xf32>
  %b = memref.alloc() : memref<8xf32>
  ll.fill %b, 2.0 : memref<8xf32>
  ll.all_reduce %b weight %w : (memref<8xf32>), memref<f32>
  return
}
