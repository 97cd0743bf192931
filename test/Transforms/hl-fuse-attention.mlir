// hl-fuse-attention: attention written out as matmul, scale, causal mask,
// softmax and matmul becomes one hl.attention.
// RUN: aicf-opt %s -split-input-file --hl-fuse-attention | FileCheck %s

// nanoGPT's form (as PyTorch's ONNX export writes it): the keys transposed
// for the product, a constant factor, masked_fill(~tril, -inf).
// CHECK-LABEL: func.func @nanogpt
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<2x4x8xf32>)
func.func @nanogpt(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK-NOT: hl.transpose
  // CHECK: %[[O:.*]] = hl.attention %[[Q]], %[[K]], %[[V]] causal scale = 0.3535533{{[0-9]*}} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  // CHECK-NOT: hl.softmax
  // CHECK-NOT: hl.matmul
  // CHECK: return %[[O]]
  %kt = hl.transpose %k permutation = [0, 2, 1] : tensor<2x4x8xf32>
  %s = hl.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>
  %c = hl.constant dense<0.353553385> : tensor<f32>
  %scaled = hl.mul %s, %c : tensor<2x4x4xf32>, tensor<f32>
  %upper = hl.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %mask = hl.broadcast_to %upper : tensor<4x4xi1> to tensor<2x4x4xi1>
  %ninf = hl.constant dense<0xFF800000> : tensor<f32>
  %masked = hl.select %mask, %ninf, %scaled : tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>
  %p = hl.softmax %masked axis = 2 : tensor<2x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// An additive mask of finfo.min above the diagonal (Hugging Face's form),
// the keys read transposed by the product, an unfolded divisor (sqrt(4)).
// CHECK-LABEL: func.func @additive
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x4x8xf32>, %[[K:.*]]: tensor<2x3x4x8xf32>, %[[V:.*]]: tensor<2x3x4x16xf32>)
func.func @additive(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x4x8xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  // CHECK: hl.attention %[[Q]], %[[K]], %[[V]] causal scale = 5.000000e-01 : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x16xf32>
  // CHECK-NOT: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>
  %four = hl.constant dense<4.0> : tensor<f32>
  %d = hl.sqrt %four : tensor<f32>
  %scaled = hl.div %s, %d : tensor<2x3x4x4xf32>, tensor<f32>
  %m = hl.constant dense<[[[[0.0, -3.40282347e+38, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %masked = hl.add %scaled, %m : tensor<2x3x4x4xf32>, tensor<1x1x4x4xf32>
  %p = hl.softmax %masked axis = 3 : tensor<2x3x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// One copy of the mask per sequence, [batch, 1, l, s] (Hugging Face's
// transformers 5 materialise it so): causal in every slice, fused.
// CHECK-LABEL: func.func @per_sequence_mask
func.func @per_sequence_mask(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x4x8xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  // CHECK: hl.attention {{.*}} causal scale = 1.000000e+00
  // CHECK-NOT: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>
  %m = hl.constant dense<[[[[0.0, -3.40282347e+38, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.40282347e+38, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %masked = hl.add %s, %m : tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>
  %p = hl.softmax %masked axis = 3 : tensor<2x3x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// A sequence whose mask hides nothing (padding differs per row): the ops
// stay.
// CHECK-LABEL: func.func @mask_differs_per_sequence
func.func @mask_differs_per_sequence(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x4x8xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  // CHECK-NOT: hl.attention
  // CHECK: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>
  %m = hl.constant dense<[[[[0.0, -3.40282347e+38, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %masked = hl.add %s, %m : tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>
  %p = hl.softmax %masked axis = 3 : tensor<2x3x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// The dynamo exporter's SDPA: the keys transposed with batch and heads
// merged (reshape, transpose of the last two, reshape back), sqrt(scale)
// on each side: fused, the three ops gone.
// CHECK-LABEL: func.func @dynamo_keys
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x4x8xf32>, %[[K:.*]]: tensor<2x3x4x8xf32>, %[[V:.*]]: tensor<2x3x4x8xf32>)
func.func @dynamo_keys(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x4x8xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  // CHECK: hl.attention %[[Q]], %[[K]], %[[V]] causal scale = 2.500000e-01
  // CHECK-NOT: hl.reshape
  %m1 = hl.reshape %k : tensor<2x3x4x8xf32> to tensor<6x4x8xf32>
  %t = hl.transpose %m1 permutation = [0, 2, 1] : tensor<6x4x8xf32>
  %kt = hl.reshape %t : tensor<6x8x4xf32> to tensor<2x3x8x4xf32>
  %half = hl.constant dense<5.000000e-01> : tensor<1xf32>
  %qs = hl.mul %q, %half : tensor<2x3x4x8xf32>, tensor<1xf32>
  %half2 = hl.constant dense<5.000000e-01> : tensor<1xf32>
  %ks = hl.mul %kt, %half2 : tensor<2x3x8x4xf32>, tensor<1xf32>
  %s = hl.matmul %qs, %ks : tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>
  %mask = hl.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %masked = hl.add %s, %mask : tensor<2x3x4x4xf32>, tensor<4x4xf32>
  %p = hl.softmax %masked axis = 3 : tensor<2x3x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// select(tril, scores, -inf) with no scale: scale 1; keys [.., D, S] made
// by a transpose from [B, S, H, D] compose into one transpose.
// CHECK-LABEL: func.func @tril_no_scale
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x4x8xf32>, %[[K:.*]]: tensor<2x4x3x8xf32>, %[[V:.*]]: tensor<2x3x4x8xf32>)
func.func @tril_no_scale(%q: tensor<2x3x4x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  // CHECK: %[[KT:.*]] = hl.transpose %[[K]] permutation = [0, 2, 1, 3] : tensor<2x4x3x8xf32>
  // CHECK-NEXT: hl.attention %[[Q]], %[[KT]], %[[V]] causal scale = 1.000000e+00
  %kt = hl.transpose %k permutation = [0, 2, 3, 1] : tensor<2x4x3x8xf32>
  %s = hl.matmul %q, %kt : tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>
  %tril = hl.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = hl.constant dense<0xFF800000> : tensor<2x3x4x4xf32>
  %masked = hl.select %tril, %s, %ninf : tensor<4x4xi1>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %p = hl.softmax %masked axis = 3 : tensor<2x3x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// Not causal (a band): the ops stay.
// CHECK-LABEL: func.func @band_mask
func.func @band_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK-NOT: hl.attention
  // CHECK: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %upper = hl.constant dense<[[false, true, true, true], [true, false, true, true], [true, true, false, true], [true, true, true, false]]> : tensor<4x4xi1>
  %ninf = hl.constant dense<0xFF800000> : tensor<f32>
  %masked = hl.select %upper, %ninf, %s : tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>
  %p = hl.softmax %masked axis = 2 : tensor<2x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The probabilities are also returned: the ops stay.
// CHECK-LABEL: func.func @probabilities_used
func.func @probabilities_used(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  // CHECK-NOT: hl.attention
  // CHECK: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %p = hl.softmax %s axis = 2 : tensor<2x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  return %o, %p : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// A scale that is not a constant, and a softmax over another axis: the
// ops stay.
// CHECK-LABEL: func.func @not_attention
func.func @not_attention(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %t: tensor<f32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK-NOT: hl.attention
  // CHECK: hl.softmax
  // CHECK: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %scaled = hl.mul %s, %t : tensor<2x4x4xf32>, tensor<f32>
  %p = hl.softmax %scaled axis = 2 : tensor<2x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  %s2 = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %p2 = hl.softmax %s2 axis = 1 : tensor<2x4x4xf32>
  %o2 = hl.matmul %p2, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  return %o, %o2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// An fp16 export's attention: 16-bit scale and -inf.
// CHECK-LABEL: func.func @half
func.func @half(%q: tensor<2x4x8xf16>, %k: tensor<2x4x8xf16>, %v: tensor<2x4x8xf16>) -> tensor<2x4x8xf16> {
  // CHECK: hl.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale = 2.500000e-01 : tensor<2x4x8xf16>
  // CHECK-NOT: hl.softmax
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf16>, tensor<2x4x8xf16>
  %c = hl.constant dense<0.25> : tensor<f16>
  %scaled = hl.mul %s, %c : tensor<2x4x4xf16>, tensor<f16>
  %upper = hl.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %ninf = hl.constant dense<0xFC00> : tensor<f16>
  %masked = hl.select %upper, %ninf, %scaled : tensor<4x4xi1>, tensor<f16>, tensor<2x4x4xf16>
  %p = hl.softmax %masked axis = 2 : tensor<2x4x4xf16>
  %o = hl.matmul %p, %v : tensor<2x4x4xf16>, tensor<2x4x8xf16>
  return %o : tensor<2x4x8xf16>
}

// -----

// The values read transposed by the product (`transpose_rhs`): transposed
// back for the attention.
// CHECK-LABEL: func.func @values_transposed
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x8xf32>, %[[VT:.*]]: tensor<2x6x4xf32>)
func.func @values_transposed(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %vt: tensor<2x6x4xf32>) -> tensor<2x4x6xf32> {
  // CHECK: %[[V:.*]] = hl.transpose %[[VT]] permutation = [0, 2, 1] : tensor<2x6x4xf32>
  // CHECK-NEXT: hl.attention %[[Q]], %[[K]], %[[V]] scale = 1.000000e+00 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x6xf32>
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %p = hl.softmax %s axis = 2 : tensor<2x4x4xf32>
  %o = hl.matmul %p, %vt transpose_rhs : tensor<2x4x4xf32>, tensor<2x6x4xf32>
  return %o : tensor<2x4x6xf32>
}

// -----

// A finite "minus infinity" (finfo.min) scaled after the mask: still a
// mask at 1/8 (-4.3e37), not at 1e-38 (-3.4: nothing masked).
// CHECK-LABEL: func.func @finite_mask_then_scale
func.func @finite_mask_then_scale(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: hl.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale = 1.250000e-01
  // CHECK: hl.softmax
  // CHECK-NOT: hl.attention
  %m = hl.constant dense<[[0.0, -3.40282347e+38, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %masked = hl.add %s, %m : tensor<2x4x4xf32>, tensor<4x4xf32>
  %eighth = hl.constant dense<0.125> : tensor<f32>
  %scaled = hl.mul %masked, %eighth : tensor<2x4x4xf32>, tensor<f32>
  %p = hl.softmax %scaled axis = 2 : tensor<2x4x4xf32>
  %o = hl.matmul %p, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  %s2 = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %masked2 = hl.add %s2, %m : tensor<2x4x4xf32>, tensor<4x4xf32>
  %big = hl.constant dense<1.0e38> : tensor<f32>
  %scaled2 = hl.div %masked2, %big : tensor<2x4x4xf32>, tensor<f32>
  %p2 = hl.softmax %scaled2 axis = 2 : tensor<2x4x4xf32>
  %o2 = hl.matmul %p2, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  return %o, %o2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// PyTorch's exported SDPA with a boolean mask: its guard zeroing NaN
// probabilities (rows a mask hides wholly, which a causal one has none of)
// is read through.
// CHECK-LABEL: func.func @sdpa_bool_mask_guard
func.func @sdpa_bool_mask_guard(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: hl.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale = 1.000000e+00
  // CHECK-NOT: hl.compare
  // CHECK-NOT: hl.select
  %s = hl.matmul %q, %k transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %m = hl.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %masked = hl.add %s, %m : tensor<2x4x4xf32>, tensor<4x4xf32>
  %p = hl.softmax %masked axis = 2 : tensor<2x4x4xf32>
  %nan = hl.compare ne, %p, %p : tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %zero = hl.constant dense<0.0> : tensor<1xf32>
  %zeros = hl.broadcast_to %zero : tensor<1xf32> to tensor<2x4x4xf32>
  %guarded = hl.select %nan, %zeros, %p : tensor<2x4x4xi1>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %o = hl.matmul %guarded, %v : tensor<2x4x4xf32>, tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
