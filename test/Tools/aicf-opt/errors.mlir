// aicf-opt reports bad input as located MLIR diagnostics and exits non-zero
// (`not` inverts the exit code); it never panics or aborts.
// RUN: split-file %s %t
// RUN: not aicf-opt %t/syntax.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: syntax.mlir:3:16: error: use of value '%x' expects different type than prior uses: 'tensor<3xf32>' vs 'tensor<4xf32>'
// SYNTAX: syntax.mlir:1:14: note: prior use here

// RUN: not aicf-opt %t/unknown-op.mlir 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown-op.mlir:2:8: error: custom op 'hl.softmaxx' is unknown

// RUN: not aicf-opt %t/shape.mlir 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: shape.mlir:2:8: error: 'hl.linear' op input 'tensor<8x63xf32>' has 63 features but the weight 'tensor<32x64xf32>' expects 64

// RUN: not aicf-opt %t/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cannot open input file '{{.*}}does-not-exist.mlir': No such file or directory

// RUN: not aicf-opt %t/ok.mlir --no-such-pass 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: Unknown command line argument '--no-such-pass'

// An unknown option beginning with `h` is not LLVM's `-h` (help) grouped
// with more letters: a misspelt hl pass printed the help and exited 0.
// RUN: not aicf-opt %t/ok.mlir '--hl-widn=layer=fc1 width=256' 2>&1 | FileCheck %s --check-prefix=HFLAG
// RUN: not aicf-opt %t/ok.mlir --hx 2>&1 | FileCheck %s --check-prefix=HFLAG2
// HFLAG: error: unknown option '--hl-widn=layer=fc1 width=256' (no registered option, pass or pipeline of that name; --help lists them)
// HFLAG-NOT: OVERVIEW
// HFLAG2: error: unknown option '--hx'
// Options, passes and LLVM's own flags that do begin with `h` still run.
// RUN: aicf-opt %t/ok.mlir --hl-print-param-table --hot-cold-split -o /dev/null
// RUN: aicf-opt --help | FileCheck %s --check-prefix=HELP
// HELP: OVERVIEW: AICF optimizer driver

// RUN: not aicf-opt %t/ok.mlir --pass-pipeline='builtin.module(hl-no-such-pass)' 2>&1 | FileCheck %s --check-prefix=PIPE
// PIPE: 'hl-no-such-pass' does not refer to a registered pass or pass pipeline

// A function declared without a body is refused by the hl passes (it
// crashed them); a call in @loss is refused by autodiff (its callee's
// gradients would have been silently zero), and inlined it differentiates.
// RUN: not aicf-opt %t/declared.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=DECLARED
// DECLARED: declared.mlir:8:1: error: hl-autodiff: @external is declared without a body: AICF compiles whole models (define it, or remove the declaration)
// RUN: not aicf-opt %t/call.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=CALL
// CALL: call.mlir:8:8: error: hl-autodiff: cannot differentiate through 'func.call' (to @forward): inline it first (aicf-opt --inline), or write @loss without calls
// RUN: aicf-opt %t/call.mlir --inline --hl-autodiff | FileCheck %s --check-prefix=INLINED
// INLINED: func.func @loss_grad
// INLINED: hl.cross_entropy_backward

//--- syntax.mlir
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = hl.relu %x : tensor<4xf32>
  %1 = hl.relu %x : tensor<3xf32>
  return %0 : tensor<4xf32>
}
//--- unknown-op.mlir
func.func @f(%x: tensor<4xf32>) {
  %0 = hl.softmaxx %x : tensor<4xf32>
  return
}
//--- shape.mlir
func.func @f(%x: tensor<8x63xf32>, %w: tensor<32x64xf32>) {
  %0 = hl.linear %x, %w : tensor<8x63xf32>, tensor<32x64xf32>
  return
}
//--- ok.mlir
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = hl.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
//--- declared.mlir
hl.param @fc.w : tensor<8x8xf32> owner "fc" init <zeros>
func.func @loss(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<8x8xf32>
  %h = hl.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %l = hl.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi32>
  return %l : tensor<f32>
}
func.func private @external(tensor<4x8xf32>) -> tensor<f32>
//--- call.mlir
hl.param @fc.w : tensor<8x8xf32> owner "fc" init <zeros>
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = hl.get_param @fc.w : tensor<8x8xf32>
  %h = hl.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  return %h : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %h = func.call @forward(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = hl.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi32>
  return %l : tensor<f32>
}
