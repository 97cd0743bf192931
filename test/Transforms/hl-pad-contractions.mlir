// hl-pad-contractions pads N and K of large 16-bit contractions to a
// multiple (Inductor's pad_mm): zeros in, the original window out.
// RUN: aicf-opt %s --hl-pad-contractions | FileCheck %s
// RUN: aicf-opt %s --hl-pad-contractions="multiple=8 min-macs=0" | FileCheck %s --check-prefix=ALL
// RUN: not aicf-opt %s --hl-pad-contractions="multiple=0" 2>&1 | FileCheck %s --check-prefix=ERR

// A language model's head: the vocabulary (N) pads from 50257 to 50264,
// the bias with it; K = 768 is already a multiple.
// CHECK-LABEL: func.func @head
// CHECK: %[[W:.*]] = hl.slice_backward %arg1 start = [0, 0] limit = [50257, 768] strides = [1, 1] : tensor<50257x768xbf16> -> tensor<50264x768xbf16>
// CHECK: %[[B:.*]] = hl.slice_backward %arg2 start = [0] limit = [50257] strides = [1] : tensor<50257xbf16> -> tensor<50264xbf16>
// CHECK: %[[Y:.*]] = hl.linear %arg0, %[[W]], %[[B]] : tensor<4096x768xbf16>, tensor<50264x768xbf16>, tensor<50264xbf16>
// CHECK: %[[S:.*]] = hl.slice %[[Y]] start = [0, 0] limit = [4096, 50257] strides = [1, 1] : tensor<4096x50264xbf16>
// CHECK: return %[[S]]
func.func @head(%x: tensor<4096x768xbf16>, %w: tensor<50257x768xbf16>, %b: tensor<50257xbf16>) -> tensor<4096x50257xbf16> {
  %y = hl.linear %x, %w, %b : tensor<4096x768xbf16>, tensor<50257x768xbf16>, tensor<50257xbf16>
  return %y : tensor<4096x50257xbf16>
}

// A batched product with the right operand transposed: K (770) pads in both
// operands, N (60) in the right one.
// CHECK-LABEL: func.func @batched
// CHECK: %[[A:.*]] = hl.slice_backward %arg0 {{.*}} : tensor<8x4096x770xbf16> -> tensor<8x4096x776xbf16>
// CHECK: %[[B:.*]] = hl.slice_backward %arg1 {{.*}} : tensor<8x60x770xbf16> -> tensor<8x64x776xbf16>
// CHECK: %[[Y:.*]] = hl.matmul %[[A]], %[[B]] transpose_rhs : tensor<8x4096x776xbf16>, tensor<8x64x776xbf16>
// CHECK: hl.slice %[[Y]] start = [0, 0, 0] limit = [8, 4096, 60] strides = [1, 1, 1] : tensor<8x4096x64xbf16>
func.func @batched(%a: tensor<8x4096x770xbf16>, %b: tensor<8x60x770xbf16>) -> tensor<8x4096x60xbf16> {
  %y = hl.matmul %a, %b transpose_rhs : tensor<8x4096x770xbf16>, tensor<8x60x770xbf16>
  return %y : tensor<8x4096x60xbf16>
}

// Below min-macs (16 x 10 x 64), f32, or already aligned: unchanged by default.
// CHECK-LABEL: func.func @small
// CHECK-NEXT: hl.linear %arg0, %arg1 : tensor<16x64xbf16>, tensor<10x64xbf16>
// ALL-LABEL: func.func @small
// ALL: hl.slice_backward %arg1 {{.*}} -> tensor<16x64xbf16>
// ALL: hl.linear %arg0, %{{.*}} : tensor<16x64xbf16>, tensor<16x64xbf16>
// ALL: hl.slice %{{.*}} limit = [16, 10]
func.func @small(%x: tensor<16x64xbf16>, %w: tensor<10x64xbf16>) -> tensor<16x10xbf16> {
  %y = hl.linear %x, %w : tensor<16x64xbf16>, tensor<10x64xbf16>
  return %y : tensor<16x10xbf16>
}

// CHECK-LABEL: func.func @fp32
// CHECK-NEXT: hl.linear %arg0, %arg1 : tensor<4096x768xf32>, tensor<50257x768xf32>
// ALL-LABEL: func.func @fp32
// ALL-NEXT: hl.linear %arg0, %arg1 : tensor<4096x768xf32>, tensor<50257x768xf32>
func.func @fp32(%x: tensor<4096x768xf32>, %w: tensor<50257x768xf32>) -> tensor<4096x50257xf32> {
  %y = hl.linear %x, %w : tensor<4096x768xf32>, tensor<50257x768xf32>
  return %y : tensor<4096x50257xf32>
}

// ERR: error: hl-pad-contractions: multiple=0 min-macs=134217728: expected multiple in 1..=4096, min-macs >= 0
