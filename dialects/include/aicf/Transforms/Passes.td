//===- Passes.td - AICF passes ----------------------------*- tablegen -*-===//
//
// Every AICF pass is declared here: argument, summary, description with
// before/after IR, typed options. The generated C++ base class parses the
// options; `runOnOperation` hands the operation and the options to the pass
// body, which is written in Rust (compiler/src/passes/). One source of truth
// for names, help and options; the logic stays in Rust.
//
//===----------------------------------------------------------------------===//

#ifndef AICF_TRANSFORMS_PASSES_TD
#define AICF_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def HLPrintParamTable : Pass<"hl-print-param-table", "::mlir::ModuleOp"> {
  let summary = "Print the trainable parameters of an hl module";
  let description = [{
    Prints one line per `hl.param` of the module to standard error: its
    path, owning layer, shape, element type, element count, bytes and
    initializer, followed by a total line. The IR is not changed. The table
    is what a checkpoint of the model holds (before optimizer state), so it
    is the quickest way to check a model's size and naming.

    With `require-params`, a module that declares no parameter is an error
    (reported on the module), which catches a model file that lost its
    declarations.

    Input:

    ```mlir
    hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform>
    hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <zeros>
    ```

    Output (standard error):

    ```
    parameter   owner  shape   dtype  elements  bytes  init
    fc1.weight  fc1    128x64  f32    8192      32768  kaiming_uniform
    fc1.bias    fc1    128     f32    128       512    zeros
    total: 2 parameters, 8320 elements, 33280 bytes
    ```
  }];
  let options = [
    Option<"groupByOwner", "group-by-owner", "bool", /*default=*/"false",
           "Print a subtotal line after the parameters of each owning layer">,
    Option<"requireParams", "require-params", "bool", /*default=*/"false",
           "Fail when the module declares no parameter">,
  ];
}

#endif // AICF_TRANSFORMS_PASSES_TD
