// hl-autocast keeps every function's signature: a call whose operand became
// bf16 passes it cast back to the callee's f32 argument.
// RUN: aicf-opt %s --hl-autocast="dtype=bf16" | FileCheck %s

func.func @half(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = hl.constant dense<5.000000e-01> : tensor<f32>
  %y = hl.mul %x, %c : tensor<4x8xf32>, tensor<f32>
  return %y : tensor<4x8xf32>
}

func.func @f(%x: tensor<4x8xf32>, %m: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %p = hl.matmul %x, %m : tensor<4x8xf32>, tensor<8x8xf32>
  %y = func.call @half(%p) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @half(%{{.*}}: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: hl.mul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<f32>
// CHECK-LABEL: func.func @f
// CHECK: %[[P:.*]] = hl.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x8xbf16>
// CHECK: %[[PF:.*]] = hl.cast %[[P]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: %[[Y:.*]] = call @half(%[[PF]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: return %[[Y]] : tensor<4x8xf32>
