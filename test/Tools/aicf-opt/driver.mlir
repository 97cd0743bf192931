// The mlir-opt flags users rely on work, and AICF's passes are registered
// next to upstream's.
// RUN: aicf-opt --help | FileCheck %s --check-prefix=HELP
// Passes are listed alphabetically, upstream's and AICF's together.
// HELP: OVERVIEW: AICF optimizer driver
// HELP: --canonicalize
// HELP: --convert-gpu-to-nvvm
// HELP: --hl-print-param-table
// HELP-SAME: Print the trainable parameters of an hl module
// HELP-NEXT: --group-by-owner
// HELP-SAME: Print a subtotal line after the parameters of each owning layer
// HELP-NEXT: --require-params

// IR printing instrumentation sees the AICF pass by its name and argument.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(hl-print-param-table,canonicalize)' \
// RUN:   --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT
// PRINT: // -----// IR Dump After HLPrintParamTable (hl-print-param-table) //----- //
// PRINT: hl.param @fc.weight
// PRINT: // -----// IR Dump After Canonicalizer (canonicalize) //----- //

// Canonicalization and CSE already apply to hl: the ops are Pure.
// RUN: aicf-opt %s --pass-pipeline='builtin.module(func.func(cse,canonicalize))' | FileCheck %s --check-prefix=CSE
// CSE-LABEL: func.func @twice
// CSE: %[[W:.*]] = hl.get_param @fc.weight
// CSE-NEXT: %[[Y:.*]] = hl.linear %{{.*}}, %[[W]]
// CSE-NEXT: %[[S:.*]] = hl.add %[[Y]], %[[Y]]
// CSE-NEXT: return %[[S]]

hl.param @fc.weight : tensor<4x8xf32> owner "fc" init <xavier_uniform>

func.func @twice(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w0 = hl.get_param @fc.weight : tensor<4x8xf32>
  %y0 = hl.linear %x, %w0 : tensor<2x8xf32>, tensor<4x8xf32>
  %w1 = hl.get_param @fc.weight : tensor<4x8xf32>
  %y1 = hl.linear %x, %w1 : tensor<2x8xf32>, tensor<4x8xf32>
  %unused = hl.relu %y1 : tensor<2x4xf32>
  %s = hl.add %y0, %y1 : tensor<2x4xf32>, tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}
