// A symbol's visibility is no misspelt attribute: MLIR's symbol passes set
// it on any symbol, hl.param and hl.state included, and the ops take it.
// RUN: aicf-opt %s --symbol-privatize | FileCheck %s
// CHECK: hl.param @w : tensor<4xf32> owner "" init <zeros> {sym_visibility = "private"}
// CHECK: hl.state @step : tensor<i64> slot "step" init <zeros> {sym_visibility = "private"}
hl.param @w : tensor<4xf32> owner "" init <zeros>
hl.state @step : tensor<i64> slot "step" init <zeros>
