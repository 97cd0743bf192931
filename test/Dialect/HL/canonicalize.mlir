// Folders and canonicalizations of hl ops.
// RUN: aicf-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @fold_constants
func.func @fold_constants() -> (tensor<2xf32>, tensor<2xf32>, tensor<3xi32>, tensor<2xbf16>, tensor<2x2xf32>) {
  %a = hl.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = hl.constant dense<0.5> : tensor<2xf32>
  // [1, 2] * 0.5 + 0.5 = [1, 1.5]
  %m = hl.mul %a, %b : tensor<2xf32>, tensor<2xf32>
  %s = hl.add %m, %b : tensor<2xf32>, tensor<2xf32>
  // exp(0) splat folds to a splat.
  %z = hl.constant dense<0.0> : tensor<2xf32>
  %e = hl.exp %z : tensor<2xf32>
  // Integer arithmetic folds too.
  %i = hl.constant dense<[7, -7, 9]> : tensor<3xi32>
  %two = hl.constant dense<2> : tensor<3xi32>
  %q = hl.div %i, %two : tensor<3xi32>, tensor<3xi32>
  // f32 -> bf16 rounds to nearest even.
  %c = hl.cast %a : tensor<2xf32> to tensor<2xbf16>
  %r4 = hl.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %rs = hl.reshape %r4 : tensor<4xf32> to tensor<2x2xf32>
  // CHECK-DAG: %[[S:.*]] = hl.constant dense<[1.000000e+00, 1.500000e+00]> : tensor<2xf32>
  // CHECK-DAG: %[[E:.*]] = hl.constant dense<1.000000e+00> : tensor<2xf32>
  // CHECK-DAG: %[[Q:.*]] = hl.constant dense<[3, -3, 4]> : tensor<3xi32>
  // CHECK-DAG: %[[C:.*]] = hl.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xbf16>
  // CHECK-DAG: %[[R:.*]] = hl.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  // CHECK-NOT: hl.mul
  // CHECK-NOT: hl.add
  // CHECK: return %[[S]], %[[E]], %[[Q]], %[[C]], %[[R]]
  return %s, %e, %q, %c, %rs : tensor<2xf32>, tensor<2xf32>, tensor<3xi32>, tensor<2xbf16>, tensor<2x2xf32>
}

// -----

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>
func.func @identities(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %one = hl.constant dense<1.0> : tensor<3xf32>
  %zero = hl.constant dense<0.0> : tensor<f32>
  %0 = hl.mul %x, %one : tensor<4x3xf32>, tensor<3xf32>
  %1 = hl.mul %one, %0 : tensor<3xf32>, tensor<4x3xf32>
  %2 = hl.add %zero, %1 : tensor<f32>, tensor<4x3xf32>
  %3 = hl.add %2, %zero : tensor<4x3xf32>, tensor<f32>
  %4 = hl.sub %3, %zero : tensor<4x3xf32>, tensor<f32>
  %5 = hl.div %4, %one : tensor<4x3xf32>, tensor<3xf32>
  %6 = hl.max %5, %5 : tensor<4x3xf32>, tensor<4x3xf32>
  %7 = hl.neg %6 : tensor<4x3xf32>
  %8 = hl.neg %7 : tensor<4x3xf32>
  %9 = hl.broadcast_to %8 : tensor<4x3xf32> to tensor<4x3xf32>
  %10 = hl.reshape %9 : tensor<4x3xf32> to tensor<4x3xf32>
  %11 = hl.transpose %10 permutation = [0, 1] : tensor<4x3xf32>
  %12 = hl.slice %11 start = [0, 0] limit = [4, 3] strides = [1, 1] : tensor<4x3xf32>
  %13 = hl.cast %12 : tensor<4x3xf32> to tensor<4x3xf32>
  // CHECK-NOT: hl.
  // CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
  return %0, %3, %5, %6, %8, %13 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// An identity that would change the result's shape (the constant
// broadcasts x up) is not one: the op stays.
// CHECK-LABEL: func.func @broadcasting_identity_stays
func.func @broadcasting_identity_stays(%x: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %zero = hl.constant dense<0.0> : tensor<2x3xf32>
  %one = hl.constant dense<1.0> : tensor<2x1xf32>
  // CHECK: hl.add %{{.*}}, %{{.*}} : tensor<3xf32>, tensor<2x3xf32>
  %0 = hl.add %x, %zero : tensor<3xf32>, tensor<2x3xf32>
  // CHECK: hl.mul %{{.*}}, %{{.*}} : tensor<3xf32>, tensor<2x1xf32>
  %1 = hl.mul %x, %one : tensor<3xf32>, tensor<2x1xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x3x2xf32>) {
  // [1, 2, 0] then [2, 0, 1] is the identity: both go away.
  %0 = hl.transpose %x permutation = [1, 2, 0] : tensor<2x3x4xf32>
  %1 = hl.transpose %0 permutation = [2, 0, 1] : tensor<3x4x2xf32>
  // [1, 0, 2] then [2, 1, 0] composes to one transpose [2, 0, 1]... of x:
  // result[i] = x[inner[outer[i]]] = x[[2, 0, 1]] -> 4x2x3; here 4x3x2 below.
  %2 = hl.transpose %x permutation = [1, 0, 2] : tensor<2x3x4xf32>
  %3 = hl.transpose %2 permutation = [2, 0, 1] : tensor<3x2x4xf32>
  // CHECK: %[[T:.*]] = hl.transpose %[[X]] permutation = [2, 1, 0] : tensor<2x3x4xf32>
  // CHECK-NOT: hl.transpose
  // CHECK: return %[[X]], %[[T]]
  return %1, %3 : tensor<2x3x4xf32>, tensor<4x3x2xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>
func.func @reshape_of_reshape(%x: tensor<2x3x4xf32>) -> (tensor<4x6xf32>, tensor<2x3x4xf32>) {
  %0 = hl.reshape %x : tensor<2x3x4xf32> to tensor<24xf32>
  %1 = hl.reshape %0 : tensor<24xf32> to tensor<4x6xf32>
  // A chain back to the input's shape disappears.
  %2 = hl.reshape %1 : tensor<4x6xf32> to tensor<2x3x4xf32>
  // CHECK: %[[R:.*]] = hl.reshape %[[X]] : tensor<2x3x4xf32> to tensor<4x6xf32>
  // CHECK-NOT: hl.reshape
  // CHECK: return %[[R]], %[[X]]
  return %1, %2 : tensor<4x6xf32>, tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @splat_shape_ops
func.func @splat_shape_ops() -> (tensor<4x3xf32>, tensor<3x2xf32>, tensor<1x2xf32>) {
  %c = hl.constant dense<2.0> : tensor<3xf32>
  %b = hl.broadcast_to %c : tensor<3xf32> to tensor<4x3xf32>
  %m = hl.constant dense<3.0> : tensor<2x3xf32>
  %t = hl.transpose %m permutation = [1, 0] : tensor<2x3xf32>
  %s = hl.slice %m start = [1, 0] limit = [2, 3] strides = [1, 2] : tensor<2x3xf32>
  // CHECK-DAG: %[[B:.*]] = hl.constant dense<2.000000e+00> : tensor<4x3xf32>
  // CHECK-DAG: %[[T:.*]] = hl.constant dense<3.000000e+00> : tensor<3x2xf32>
  // CHECK-DAG: %[[S:.*]] = hl.constant dense<3.000000e+00> : tensor<1x2xf32>
  // CHECK: return %[[B]], %[[T]], %[[S]]
  return %b, %t, %s : tensor<4x3xf32>, tensor<3x2xf32>, tensor<1x2xf32>
}

// -----

// The smallest integer divided by -1 overflows: not folded (upstream's
// divsi declines it too; in 64 bits the folder's own division trapped).
// CHECK-LABEL: func.func @no_overflowing_division
func.func @no_overflowing_division() -> (tensor<1xi32>, tensor<1xi64>) {
  %a = hl.constant dense<-2147483648> : tensor<1xi32>
  %m = hl.constant dense<-1> : tensor<1xi32>
  // CHECK: hl.div {{.*}} : tensor<1xi32>, tensor<1xi32>
  %q = hl.div %a, %m : tensor<1xi32>, tensor<1xi32>
  %b = hl.constant dense<-9223372036854775808> : tensor<1xi64>
  %n = hl.constant dense<-1> : tensor<1xi64>
  // CHECK: hl.div {{.*}} : tensor<1xi64>, tensor<1xi64>
  %r = hl.div %b, %n : tensor<1xi64>, tensor<1xi64>
  return %q, %r : tensor<1xi32>, tensor<1xi64>
}

// -----

// Sine, cosine, arctangent and the roundings fold; rounding takes ties
// to even.
// CHECK-LABEL: func.func @fold_trigonometry_and_rounding
func.func @fold_trigonometry_and_rounding() -> (tensor<2xf32>, tensor<2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) {
  %a = hl.constant dense<[0.0, 1.5707963705062866]> : tensor<2xf32>
  %s = hl.sin %a : tensor<2xf32>
  %c = hl.cos %a : tensor<2xf32>
  %one = hl.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %t = hl.atan %one : tensor<2xf32>
  %r = hl.constant dense<[2.5, 3.5, -0.5, -1.7]> : tensor<4xf32>
  %f = hl.floor %r : tensor<4xf32>
  %u = hl.ceil %r : tensor<4xf32>
  %n = hl.round %r : tensor<4xf32>
  // CHECK-DAG: hl.constant dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf32>
  // CHECK-DAG: hl.constant dense<[1.000000e+00, -4.37113883E-8]> : tensor<2xf32>
  // CHECK-DAG: hl.constant dense<[2.000000e+00, 3.000000e+00, -1.000000e+00, -2.000000e+00]> : tensor<4xf32>
  // CHECK-DAG: hl.constant dense<[3.000000e+00, 4.000000e+00, -0.000000e+00, -1.000000e+00]> : tensor<4xf32>
  // CHECK-DAG: hl.constant dense<[2.000000e+00, 4.000000e+00, -0.000000e+00, -2.000000e+00]> : tensor<4xf32>
  // CHECK-DAG: hl.constant dense<[0.785398185, -0.785398185]> : tensor<2xf32>
  // CHECK-NOT: hl.sin
  // CHECK-NOT: hl.atan
  // CHECK-NOT: hl.round
  return %s, %c, %f, %u, %n, %t : tensor<2xf32>, tensor<2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
}
