// ll-plan-memory diagnostics.
// RUN: aicf-opt %s -split-input-file --ll-plan-memory=budget=1000 -verify-diagnostics -o /dev/null

// Nothing to recompute: the budget cannot be met, and the error says what
// is alive at the peak.
// expected-error @below {{ll-plan-memory: @chain needs an arena of 2048 bytes (lower bound 2048) after 0 recomputations, over the budget of 1000 bytes; no recomputation lowers it further (the values alive at the peak are all needed there; a smaller batch shrinks those of activations: `aicf train --batch N` (the pass hl-set-batch), with `--accumulate` to keep the global batch). Alive at the peak (kernel #1, 'll.gemm'), the largest first: memref<16x16xf32> (1024 bytes), memref<16x16xf32> (1024 bytes)}}
func.func @chain(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %a = memref.alloc() : memref<16x16xf32>
  ll.gemm %x, %w into %a : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  %b = memref.alloc() : memref<16x16xf32>
  ll.gemm %a, %w into %b : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  ll.copy %b into %y : memref<16x16xf32>
  return
}

// -----

// An output that takes its dying input's place in memory: the peak (the
// second GEMM) lies past the input's own last use, and the list still names
// the shared buffer.
// expected-error @below {{Alive at the peak (kernel #2, 'll.gemm'), the largest first: memref<32x128xf32> (16384 bytes)}}
func.func @in_place(%x: memref<32x64xf32>, %w: memref<128x64xf32>, %v: memref<10x128xf32>, %y: memref<32x10xf32>) {
  %a = memref.alloc() : memref<32x128xf32>
  ll.gemm %x, %w into %a transpose_b : memref<32x64xf32>, memref<128x64xf32> -> memref<32x128xf32>
  %b = memref.alloc() : memref<32x128xf32>
  ll.elementwise ins(%a : memref<32x128xf32>) outs(%b : memref<32x128xf32>) {
  ^bb0(%e: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %e, %zero : f32
    ll.yield %r : f32
  }
  ll.gemm %b, %v into %y transpose_b : memref<32x128xf32>, memref<10x128xf32> -> memref<32x10xf32>
  return
}

// -----

// Many values alive at the peak: the largest twelve, the rest counted (a
// ResNet's list was about 80 values long).
// expected-error @below {{Alive at the peak (kernel #14, 'll.all_reduce'), the largest first: memref<14x4xf32> (224 bytes), memref<13x4xf32> (208 bytes), memref<12x4xf32> (192 bytes), memref<11x4xf32> (176 bytes), memref<10x4xf32> (160 bytes), memref<9x4xf32> (144 bytes), memref<8x4xf32> (128 bytes), memref<7x4xf32> (112 bytes), memref<6x4xf32> (96 bytes), memref<5x4xf32> (80 bytes), memref<4x4xf32> (64 bytes), memref<3x4xf32> (48 bytes), and 2 more (48 bytes)}}
func.func @many(%w: memref<f32>) {
  %a0 = memref.alloc() : memref<1x4xf32>
  ll.fill %a0, 1.0 : memref<1x4xf32>
  %a1 = memref.alloc() : memref<2x4xf32>
  ll.fill %a1, 1.0 : memref<2x4xf32>
  %a2 = memref.alloc() : memref<3x4xf32>
  ll.fill %a2, 1.0 : memref<3x4xf32>
  %a3 = memref.alloc() : memref<4x4xf32>
  ll.fill %a3, 1.0 : memref<4x4xf32>
  %a4 = memref.alloc() : memref<5x4xf32>
  ll.fill %a4, 1.0 : memref<5x4xf32>
  %a5 = memref.alloc() : memref<6x4xf32>
  ll.fill %a5, 1.0 : memref<6x4xf32>
  %a6 = memref.alloc() : memref<7x4xf32>
  ll.fill %a6, 1.0 : memref<7x4xf32>
  %a7 = memref.alloc() : memref<8x4xf32>
  ll.fill %a7, 1.0 : memref<8x4xf32>
  %a8 = memref.alloc() : memref<9x4xf32>
  ll.fill %a8, 1.0 : memref<9x4xf32>
  %a9 = memref.alloc() : memref<10x4xf32>
  ll.fill %a9, 1.0 : memref<10x4xf32>
  %a10 = memref.alloc() : memref<11x4xf32>
  ll.fill %a10, 1.0 : memref<11x4xf32>
  %a11 = memref.alloc() : memref<12x4xf32>
  ll.fill %a11, 1.0 : memref<12x4xf32>
  %a12 = memref.alloc() : memref<13x4xf32>
  ll.fill %a12, 1.0 : memref<13x4xf32>
  %a13 = memref.alloc() : memref<14x4xf32>
  ll.fill %a13, 1.0 : memref<14x4xf32>
  ll.all_reduce %a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7, %a8, %a9, %a10, %a11, %a12, %a13 weight %w : (memref<1x4xf32>, memref<2x4xf32>, memref<3x4xf32>, memref<4x4xf32>, memref<5x4xf32>, memref<6x4xf32>, memref<7x4xf32>, memref<8x4xf32>, memref<9x4xf32>, memref<10x4xf32>, memref<11x4xf32>, memref<12x4xf32>, memref<13x4xf32>, memref<14x4xf32>), memref<f32>
  return
}

// -----

func.func @not_lowered(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{ll-plan-memory: 'hl.exp' is not lowered; run convert-hl-to-ll first}}
  %y = hl.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @huge(%x: memref<16xf32>) {
  // expected-error @+1 {{ll-plan-memory: memref<1099511627776x16xf32> is larger than the 1 TiB a tensor may hold}}
  %a = memref.alloc() : memref<1099511627776x16xf32>
  ll.copy %x into %x : memref<16xf32>
  return
}

// -----

// Hand-written ll with a loop, a branch or a buffer of dynamic size is
// refused at it: the planner knows straight-line kernels (these were
// planned as if their buffers did not exist: an arena of 0 bytes).
func.func @loop(%x: memref<4xf32>, %y: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  // expected-error @+1 {{ll-plan-memory: 'scf.for' holds a region: ll passes plan straight-line functions of kernels (no loops or branches)}}
  scf.for %i = %c0 to %c3 step %c1 {
    %t = memref.alloc() : memref<4xf32>
    ll.copy %x into %t : memref<4xf32>
  }
  return
}

// -----

func.func @branch(%x: memref<4xf32>) {
  // expected-error @+1 {{ll-plan-memory: a function of more than one block: ll passes plan straight-line functions of kernels (no branches)}}
  cf.br ^bb1
^bb1:
  %t = memref.alloc() : memref<4xf32>
  ll.copy %x into %t : memref<4xf32>
  return
}

// -----

func.func @dynamic(%x: memref<4xf32>, %n: index) {
  // expected-error @+1 {{ll-plan-memory: a buffer of dynamic size (memref<?xf32>): ll passes plan buffers of static shape}}
  %t = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

// Planned twice, or after the schedule: refused (a second arena of 0
// bytes; buffers of kernels on two streams in one place).
func.func @twice(%x: memref<16xf32>, %y: memref<16xf32>) attributes {ll.memory = {arena_bytes = 0 : i64}} {
  // expected-error @-1 {{ll-plan-memory: @twice is planned already (ll.memory): plan memory once}}
  ll.copy %x into %y : memref<16xf32>
  return
}

// -----

func.func @scheduled(%x: memref<16xf32>, %y: memref<16xf32>) {
  // expected-error @+1 {{ll-plan-memory: @scheduled is scheduled already (ll.stream): plan memory before ll-schedule, as the pipeline does}}
  ll.copy %x into %y {ll.stream = 1 : i64} : memref<16xf32>
  return
}

// -----

// A dealloc of a temporary (or any op outside ll that touches one) is
// refused at it: it became `memref.dealloc` of an arena view.
func.func @dealloc(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %a = memref.alloc() : memref<16x16xf32>
  ll.gemm %x, %w into %a : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  ll.copy %a into %y : memref<16x16xf32>
  // expected-error @+1 {{ll-plan-memory: 'memref.dealloc' uses a temporary buffer: the memory plan gives every temporary its lifetime}}
  memref.dealloc %a : memref<16x16xf32>
  return
}

// -----

// A view of the arena is row-major memory in the default space: a memory
// space or a strided layout failed inside the pass ("internal error
// building memref.view").
func.func @memory_space(%x: memref<16xf32>) {
  // expected-error @+1 {{ll-plan-memory: a buffer of type memref<16xf32, 1>: ll passes plan row-major buffers in the default memory space}}
  %a = memref.alloc() : memref<16xf32, 1>
  ll.copy %x into %x : memref<16xf32>
  return
}

// -----

func.func @strided(%x: memref<16xf32>) {
  // expected-error @+1 {{ll-plan-memory: a buffer of type memref<16xf32, strided<[2]>>: ll passes plan row-major buffers}}
  %a = memref.alloc() : memref<16xf32, strided<[2]>>
  ll.copy %x into %x : memref<16xf32>
  return
}

// -----

func.func @bytes(%x: memref<16xf32>) {
  // expected-error @+1 {{of the kernels' element types (f16, bf16, f32, f64, i1, i32, i64)}}
  %a = memref.alloc() : memref<16xi8>
  ll.copy %x into %x : memref<16xf32>
  return
}
