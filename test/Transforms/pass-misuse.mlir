// Passes run on what they cannot handle, in the wrong order or twice: each
// is refused where it is, never a silent zero gradient, a skipped function
// or a second definition.
// RUN: split-file %s %t
// RUN: aicf-opt %t/rules.mlir -split-input-file --hl-autodiff -verify-diagnostics -o /dev/null
// RUN: not aicf-opt %t/mse.mlir --hl-autodiff --hl-set-batch=size=16 2>&1 | FileCheck %s --check-prefix=SETBATCH
// RUN: not aicf-opt %t/mse.mlir --hl-autodiff --hl-widen="layer=fc width=8" 2>&1 | FileCheck %s --check-prefix=WIDEN
// RUN: not aicf-opt %t/mse.mlir --convert-hl-to-ll --convert-hl-to-ll 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not aicf-opt %t/mse.mlir --convert-hl-to-ll --hl-autodiff 2>&1 | FileCheck %s --check-prefix=LOWERED
// RUN: not aicf-opt %t/nested.mlir --convert-hl-to-ll 2>&1 | FileCheck %s --check-prefix=NESTED
// RUN: not aicf-opt %t/nested.mlir --hl-print-param-table 2>&1 | FileCheck %s --check-prefix=NESTED
// RUN: aicf-opt %t/nested.mlir --pass-pipeline='builtin.module(builtin.module(hl-print-param-table))' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ANCHORED
// RUN: not aicf-opt %t/arena.mlir --ll-plan-memory 2>&1 | FileCheck %s --check-prefix=ARENA
// RUN: aicf-opt %t/global.mlir --convert-hl-to-ll | FileCheck %s --check-prefix=GLOBAL
// RUN: not aicf-opt %t/traingrad.mlir --hl-optimizer="kind=sgd accumulate=true" 2>&1 | FileCheck %s --check-prefix=ACCUM
// RUN: aicf-opt %t/mse.mlir --hl-autodiff --aicf-train-pipeline -o /dev/null
// RUN: aicf-opt %t/owngrad.mlir --hl-set-batch=size=16 --aicf-train-pipeline -o /dev/null
// RUN: aicf-opt %t/bf16.mlir --hl-pad-contractions --hl-pad-contractions --hl-autocast=dtype=bf16 -o /dev/null
// RUN: aicf-opt %t/bf16.mlir --aicf-train-pipeline | FileCheck %s --check-prefix=PAD
// RUN: aicf-opt %t/bf16.mlir --aicf-train-pipeline=shape-padding=false | FileCheck %s --check-prefix=NOPAD
// RUN: not aicf-opt %t/mse.mlir --aicf-train-pipeline=precision=fp8 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: not aicf-opt %t/mse.mlir --aicf-train-pipeline=optimizer=lion 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not aicf-opt %t/mse.mlir --hl-optimizer="kind=sgd clip-norm=inf" 2>&1 | FileCheck %s --check-prefix=INF
// RUN: not aicf-opt %t/mse.mlir --hl-widen="layer=fc width=8 mask=16777216 mask_delay=1" 2>&1 | FileCheck %s --check-prefix=MASK
// A forward rewrite after fusion is refused (hl-autocast retyped a fused
// op's inputs, not its body: the verifier's complaint). hl-optimizer after
// fusion and canonicalization, which hoists a fused body's constants into
// the function, copies @loss_grad's body reading its own copies of them
// (it read @loss_grad's values: invalid IR, lowered to a wrong kernel).
// RUN: not aicf-opt %t/fusable.mlir --hl-fuse-elementwise --hl-autocast=dtype=bf16 2>&1 | FileCheck %s --check-prefix=FUSED
// RUN: aicf-opt %t/mse2.mlir --hl-autodiff --hl-fuse-elementwise --canonicalize --hl-optimizer=kind=sgd | FileCheck %s --check-prefix=CAPTURED
// RUN: aicf-opt %t/mse2.mlir --hl-autodiff --hl-fuse-elementwise --canonicalize --hl-optimizer=kind=sgd --convert-hl-to-ll -o /dev/null

// FUSED: fusable.mlir:[[#]]:[[#]]: error: hl-autocast: the module is fused already ('hl.fused_elementwise' in @loss): hl-autocast rewrites a model's forward, before hl-fuse-elementwise
// CAPTURED-LABEL: func.func @train_step(
// CAPTURED: %[[C:.*]] = arith.constant
// CAPTURED: hl.fused_elementwise
// CAPTURED: arith.mulf {{.*}}%[[C]]
// SETBATCH: mse.mlir:[[#]]:1: error: hl-set-batch: the module is differentiated already (@loss_grad): hl-set-batch rewrites a model's forward, before hl-autodiff and hl-optimizer
// WIDEN: error: hl-widen: the module is differentiated already (@loss_grad)
// TWICE: mse.mlir:[[#]]:[[#]]: error: convert-hl-to-ll: the module is lowered to ll already ('ll.gemm' in @loss)
// LOWERED: error: hl-autodiff: the module is lowered to ll already ('ll.gemm' in @loss)
// NESTED: nested.mlir:2:1: error: {{.*}}: a nested module @inner: AICF's passes run on the functions of one module
// ANCHORED: total: 1 parameters
// ARENA: arena.mlir:1:1: error: ll-plan-memory: @planned has an argument bound "arena" already
// GLOBAL: memref.global "private" constant @__aicf_constant_7 : memref<2xf32> = dense<[7.000000e+00, 8.000000e+00]>
// GLOBAL: memref.global "private" constant @__aicf_constant_8 : memref<3xf32>
// ACCUM: traingrad.mlir:8:1: error: hl-optimizer: @train_grad already exists
// PAD-LABEL: func.func @train_step
// PAD: ll.gemm {{.*}}memref<1000x1008xbf16>
// NOPAD-LABEL: func.func @train_step
// NOPAD-NOT: 1008
// PRECISION: error: aicf-train-pipeline: precision=fp8: expected fp32, bf16 or fp16
// PRECISION-NOT: see current operation
// OPTIMIZER: error: aicf-train-pipeline: optimizer=lion: expected sgd, adam or adamw
// INF: error: hl-optimizer: clip-norm=inf is not a finite number
// MASK: error: hl-widen: mask=16777216 and mask_delay=1: together at most 16777216 steps

//--- rules.mlir
// An op of several results has no gradient rule: its operand's gradient
// was a zero, silently.
hl.param @p.w : tensor<4x8xf32> owner "p" init <zeros>
func.func @loss(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %w = hl.get_param @p.w : tensor<4x8xf32>
  %wx = hl.add %w, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %one = hl.constant dense<1.0> : tensor<f32>
  // expected-error @below {{hl-autodiff: no gradient rule for 'hl.softmax_cross_entropy' (an op of 2 results) yet}}
  %l, %g = hl.softmax_cross_entropy %wx, %y, %one : tensor<4x8xf32>, tensor<4xi32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An op of another dialect on the gradient's path: its term was dropped.
hl.param @p.w : tensor<2x4xf32> owner "p" init <zeros>
func.func @loss(%x: tensor<2x4xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  %w = hl.get_param @p.w : tensor<2x4xf32>
  %h = hl.add %w, %x : tensor<2x4xf32>, tensor<2x4xf32>
  %ce = hl.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32>
  %c0 = arith.constant 0 : index
  // expected-error @below {{hl-autodiff: no gradient rule for 'tensor.extract' (AICF differentiates hl ops; write this step with hl ops)}}
  %e = tensor.extract %h[%c0, %c0] : tensor<2x4xf32>
  %t = tensor.from_elements %e : tensor<f32>
  %l = hl.add %ce, %t : tensor<f32>, tensor<f32>
  return %l : tensor<f32>
}

// -----

// Control flow: the first block has no return.
hl.param @p.w : tensor<2x4xf32> owner "p" init <zeros>
// expected-error @below {{hl-autodiff: @loss has more than one block (control flow): AICF differentiates straight-line functions}}
func.func @loss(%x: tensor<2x4xf32>, %y: tensor<2xi32>, %c: i1) -> tensor<f32> {
  %w = hl.get_param @p.w : tensor<2x4xf32>
  %h = hl.add %w, %x : tensor<2x4xf32>, tensor<2x4xf32>
  cf.cond_br %c, ^a, ^b
^a:
  %l = hl.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32>
  return %l : tensor<f32>
^b:
  %m = hl.cross_entropy %x, %y : tensor<2x4xf32>, tensor<2xi32>
  return %m : tensor<f32>
}

// -----

// Recursion: the inliner the other call's message suggests cannot help.
hl.param @p.w : tensor<2x4xf32> owner "p" init <zeros>
func.func @loss(%x: tensor<2x4xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  %w = hl.get_param @p.w : tensor<2x4xf32>
  %h = hl.add %w, %x : tensor<2x4xf32>, tensor<2x4xf32>
  // expected-error @below {{hl-autodiff: @loss calls itself: AICF differentiates functions without recursion}}
  %l = func.call @loss(%h, %y) : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- mse.mlir
hl.param @fc.w : tensor<4x8xf32> owner "fc" init <xavier_uniform>
func.func @loss(%x: tensor<32x8xf32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<4x8xf32>
  %h = hl.linear %x, %w : tensor<32x8xf32>, tensor<4x8xf32>
  %l = hl.mse_loss %h, %h : tensor<32x4xf32>, tensor<32x4xf32>
  return %l : tensor<f32>
}

//--- fusable.mlir
hl.param @fc.w : tensor<4x8xf32> owner "fc" init <xavier_uniform>
func.func @loss(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<4x8xf32>
  %h = hl.linear %x, %w : tensor<2x8xf32>, tensor<4x8xf32>
  %c = hl.constant dense<0.5> : tensor<f32>
  %s = hl.mul %h, %c : tensor<2x4xf32>, tensor<f32>
  %t = hl.tanh %s : tensor<2x4xf32>
  %l = hl.cross_entropy %t, %y : tensor<2x4xf32>, tensor<2xi32>
  return %l : tensor<f32>
}

//--- mse2.mlir
hl.param @fc.w : tensor<4x8xf32> owner "fc" init <xavier_uniform>
func.func @loss(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<4x8xf32>
  %h = hl.linear %x, %w : tensor<2x8xf32>, tensor<4x8xf32>
  %l = hl.mse_loss %h, %y : tensor<2x4xf32>, tensor<2x4xf32>
  return %l : tensor<f32>
}

//--- traingrad.mlir
hl.param @fc.w : tensor<4x8xf32> owner "fc" init <xavier_uniform>
func.func @loss(%x: tensor<32x8xf32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<4x8xf32>
  %h = hl.linear %x, %w : tensor<32x8xf32>, tensor<4x8xf32>
  %l = hl.mse_loss %h, %h : tensor<32x4xf32>, tensor<32x4xf32>
  return %l : tensor<f32>
}
func.func @train_grad() {
  return
}

//--- owngrad.mlir
// Functions of the model's own named @f and @f_grad are no gradient (not
// @f's inputs, one scalar loss and gradients): the forward rewrites take
// the module.
hl.param @fc.weight : tensor<4x8xf32> owner "fc" init <xavier_uniform>
func.func @loss(%x: tensor<32x8xf32>) -> tensor<f32> {
  %w = hl.get_param @fc.weight : tensor<4x8xf32>
  %h = hl.linear %x, %w : tensor<32x8xf32>, tensor<4x8xf32>
  %l = hl.mse_loss %h, %h : tensor<32x4xf32>, tensor<32x4xf32>
  return %l : tensor<f32>
}
func.func @clip(%h: tensor<32x4xf32>) -> tensor<32x4xf32> {
  %r = hl.tanh %h : tensor<32x4xf32>
  return %r : tensor<32x4xf32>
}
func.func @clip_grad(%h: tensor<32x4xf32>) -> tensor<32x4xf32> {
  %r = hl.relu %h : tensor<32x4xf32>
  return %r : tensor<32x4xf32>
}

//--- nested.mlir
module {
module @inner {
  hl.param @fc.w : tensor<4x8xf32> owner "fc" init <zeros>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
    %w = hl.get_param @fc.w : tensor<4x8xf32>
    %h = hl.linear %x, %w : tensor<2x8xf32>, tensor<4x8xf32>
    return %h : tensor<2x4xf32>
  }
}
}

//--- arena.mlir
func.func @planned(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %ar: memref<64xi8> {ll.bind = "arena"}) {
  %a = memref.alloc() : memref<16x16xf32>
  ll.gemm %x, %w into %a : memref<16x16xf32>, memref<16x16xf32> -> memref<16x16xf32>
  ll.copy %a into %x : memref<16x16xf32>
  return
}

//--- global.mlir
memref.global "private" constant @__aicf_constant_7 : memref<2xf32> = dense<[7.0, 8.0]>
func.func @forward(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = hl.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = hl.mul %x, %c : tensor<3xf32>, tensor<3xf32>
  return %y : tensor<3xf32>
}

//--- bf16.mlir
// A model written in bf16, trained at fp32: its contraction of 1003 is
// padded to 1008 as under --precision bf16.
hl.param @fc.w : tensor<1001x1003xbf16> owner "fc" init <kaiming_uniform>
func.func @loss(%x: tensor<1000x1003xbf16>, %y: tensor<1000xi32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<1001x1003xbf16>
  %h = hl.linear %x, %w : tensor<1000x1003xbf16>, tensor<1001x1003xbf16>
  %c = hl.cast %h : tensor<1000x1001xbf16> to tensor<1000x1001xf32>
  %l = hl.cross_entropy %c, %y : tensor<1000x1001xf32>, tensor<1000xi32>
  return %l : tensor<f32>
}
