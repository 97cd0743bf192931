// ll-plan-memory: temporaries placed in one arena, with reuse, in-place
// elementwise kernels, a report, and a budget met by recomputation.
// RUN: aicf-opt %s -split-input-file --ll-plan-memory=report=true 2>&1 | FileCheck %s
// RUN: aicf-opt %s -split-input-file --ll-plan-memory | aicf-opt -split-input-file | FileCheck %s --check-prefix=IR
// RUN: aicf-opt %s -split-input-file --ll-plan-memory | FileCheck %s --check-prefix=DEAD
// RUN: aicf-opt %s -split-input-file --ll-plan-memory="budget=2048 report=true" 2>&1 | FileCheck %s --check-prefix=BUDGET

// A chain of three 1 KiB temporaries: %a dies when %c is written, so %c
// takes %a's place; %b becomes %b2 in place (the input dies there).
// CHECK: remark: ll-plan-memory: @chain: arena 2048 bytes, lower bound 2048 bytes (1.000x), naive sum 4096 bytes; 4 buffers, 1 in place, 0 recomputed
// IR-LABEL: func.func @chain
// IR-SAME: %[[ARENA:[^:]*]]: memref<2048xi8> {ll.bind = "arena"}
// IR-SAME: ll.memory = {arena_bytes = 2048 : i64, buffers = 4 : i64, in_place = 1 : i64, lower_bound_bytes = 2048 : i64, naive_bytes = 4096 : i64, recomputed = 0 : i64}
// IR: %[[A:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<2048xi8> to memref<16x16xf32>
// IR-NOT: memref.alloc
func.func @chain(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %a = memref.alloc() : memref<16x16xf32>
  ll.gemm %x, %w into %a : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  %b = memref.alloc() : memref<16x16xf32>
  ll.gemm %a, %w into %b : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  %b2 = memref.alloc() : memref<16x16xf32>
  ll.elementwise ins(%b : memref<16x16xf32>) outs(%b2 : memref<16x16xf32>) {
  ^bb0(%v: f32):
    %e = math.exp %v : f32
    ll.yield %e : f32
  }
  %c = memref.alloc() : memref<16x16xf32>
  ll.gemm %b2, %w into %c : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  ll.copy %c into %y : memref<16x16xf32>
  return
}

// -----

// An activation kept from the "forward" to the "backward" end: with a
// budget, the cheap elementwise kernel that made it runs again just
// before its last use instead.
// CHECK: remark: ll-plan-memory: @checkpoint: arena 3072 bytes, lower bound 3072 bytes (1.000x), naive sum 4096 bytes; 4 buffers, 0 in place, 0 recomputed
// BUDGET: remark: ll-plan-memory: @checkpoint: arena 2048 bytes, lower bound 2048 bytes (1.000x), naive sum 5120 bytes; 5 buffers, 0 in place, 1 recomputed
// BUDGET-COUNT-2: math.tanh
func.func @checkpoint(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %h = memref.alloc() : memref<16x16xf32>
  ll.elementwise ins(%x : memref<16x16xf32>) outs(%h : memref<16x16xf32>) {
  ^bb0(%v: f32):
    %t = math.tanh %v : f32
    ll.yield %t : f32
  }
  %a = memref.alloc() : memref<16x16xf32>
  ll.gemm %h, %w into %a : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  %b = memref.alloc() : memref<16x16xf32>
  ll.gemm %a, %w into %b : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  %c = memref.alloc() : memref<16x16xf32>
  ll.gemm %b, %w into %c : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  ll.gemm %c, %h residual(%c) into %y : memref<16x16xf32>, memref<16x16xf32> residual memref<16x16xf32> -> memref<16x16xf32>
  return
}

// -----

// A buffer nothing uses is dropped: it was given a view at offset 0 of an
// arena that did not count it (past the arena's end).
// DEAD-LABEL: func.func @dead
// DEAD-SAME: ll.memory = {arena_bytes = 1024 : i64, buffers = 1 : i64
// DEAD-NOT: memref<1024xf32>
// DEAD: return
func.func @dead(%x: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %unused = memref.alloc() : memref<1024xf32>
  %a = memref.alloc() : memref<16x16xf32>
  ll.copy %x into %a : memref<16x16xf32>
  ll.copy %a into %y : memref<16x16xf32>
  return
}
