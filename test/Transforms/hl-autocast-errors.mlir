// hl-autocast refuses what it cannot retype whole, at the cause (the
// verifier rejected the pass's own output), and an f64 model's losses
// read their 16-bit operands in f64.
// RUN: split-file %s %t
// RUN: not aicf-opt %t/branches.mlir --hl-autocast=dtype=bf16 2>&1 | FileCheck %s --check-prefix=BRANCHES
// RUN: not aicf-opt %t/empty.mlir --hl-autocast=dtype=bf16 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: aicf-opt %t/f64.mlir --hl-autocast=dtype=bf16 | FileCheck %s --check-prefix=F64
// An op in both override lists is refused (f32 won, silently).
// RUN: not aicf-opt %S/../../examples/mlp/digits_mlp.mlir "--hl-autocast=dtype=bf16 fp32-ops=hl.linear,relu low-ops=linear" 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: hl-autocast: 'hl.linear' is in both fp32-ops and low-ops: name it in one

// BRANCHES: branches.mlir:2:1: error: hl-autocast: @loss has more than one block: it retypes straight-line functions (no branches)
// EMPTY: empty.mlir:4:8: error: hl-autocast: 'tensor.empty' is not an hl op
// F64: %[[P:.*]] = hl.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x8xbf16>
// F64: %[[PF:.*]] = hl.cast %[[P]] : tensor<4x8xbf16> to tensor<4x8xf64>
// F64: hl.mse_loss %[[PF]], %{{.*}} : tensor<4x8xf64>, tensor<4x8xf64>

//--- branches.mlir
hl.param @w : tensor<8x8xf32> owner "" init <zeros>
func.func @loss(%x: tensor<4x8xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<8x8xf32>
  %h = hl.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  cf.br ^bb1(%h : tensor<4x8xf32>)
^bb1(%a: tensor<4x8xf32>):
  %l = hl.reduce_sum %a axes = [0, 1] : tensor<4x8xf32>
  return %l : tensor<f32>
}

//--- empty.mlir
hl.param @w : tensor<8x8xf32> owner "" init <zeros>
func.func @loss(%x: tensor<4x8xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<8x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %h = hl.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %m = hl.mul %h, %e : tensor<4x8xf32>, tensor<4x8xf32>
  %l = hl.reduce_sum %m axes = [0, 1] : tensor<4x8xf32>
  return %l : tensor<f32>
}

//--- f64.mlir
hl.param @fc.w : tensor<8x8xf64> owner "fc" init <xavier_uniform>
func.func @loss(%x: tensor<4x8xf64>, %t: tensor<4x8xf64>) -> tensor<f64> {
  %w = hl.get_param @fc.w : tensor<8x8xf64>
  %h = hl.matmul %x, %w : tensor<4x8xf64>, tensor<8x8xf64>
  %l = hl.mse_loss %h, %t : tensor<4x8xf64>, tensor<4x8xf64>
  return %l : tensor<f64>
}
