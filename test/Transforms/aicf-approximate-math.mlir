// aicf-approximate-math: f32 math ops become MLIR's inline polynomial
// approximations (the CPU backend runs it on its kernels for math.exp).
// RUN: aicf-opt %s --pass-pipeline='builtin.module(aicf-approximate-math)' | FileCheck %s
// RUN: aicf-opt %s --pass-pipeline='builtin.module(aicf-approximate-math{ops=math.exp,math.tanh})' \
// RUN:   | FileCheck %s --check-prefix=BOTH
// A name MLIR has no approximation of (a typo) is refused, by name.
// RUN: not aicf-opt %s --pass-pipeline='builtin.module(aicf-approximate-math{ops=math.expp})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// BAD: aicf-approximate-math: 'math.expp' is not an op this pass approximates
// So is math.rsqrt, whose approximation needs the x86vector dialect.
// RUN: not aicf-opt %s --pass-pipeline='builtin.module(aicf-approximate-math{ops=math.rsqrt})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RSQRT
// RSQRT: aicf-approximate-math: 'math.rsqrt' is not an op this pass approximates
// Values: the approximation against the expected exp and tanh.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(aicf-approximate-math{ops=math.exp,math.tanh})' \
// RUN:   | aicf-opt --canonicalize | FileCheck %s --check-prefix=FOLD

// By default only exp, scalar and vector; f64 is left to the library.
// CHECK-LABEL: func.func @exp_f32
// CHECK-NOT: math.exp
// CHECK: arith.bitcast
// CHECK-LABEL: func.func @exp_vector
// CHECK-NOT: math.exp
// CHECK: arith.bitcast {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-LABEL: func.func @exp_f64
// CHECK: math.exp {{.*}} : f64
// CHECK-LABEL: func.func @tanh_f32
// CHECK: math.tanh
// BOTH-LABEL: func.func @tanh_f32
// BOTH-NOT: math.tanh
// BOTH: return

func.func @exp_f32(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

func.func @exp_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.exp %x : vector<8xf32>
  return %y : vector<8xf32>
}

func.func @exp_f64(%x: f64) -> f64 {
  %y = math.exp %x : f64
  return %y : f64
}

func.func @tanh_f32(%x: f32) -> f32 {
  %y = math.tanh %x : f32
  return %y : f32
}

// Folded on constants, the approximations give e and tanh(1) as f32 rounds them.
// FOLD-LABEL: func.func @constants
// FOLD-DAG: arith.constant 2.71828175 : f32
// FOLD-DAG: arith.constant 0.761594176 : f32
func.func @constants() -> (f32, f32) {
  %one = arith.constant 1.0 : f32
  %e = math.exp %one : f32
  %t = math.tanh %one : f32
  return %e, %t : f32, f32
}
