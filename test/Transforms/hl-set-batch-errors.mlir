// hl-set-batch diagnostics.
// RUN: aicf-opt %s -split-input-file --pass-pipeline='builtin.module(hl-set-batch{size=7})' -verify-diagnostics -o /dev/null
// RUN: not aicf-opt %s -split-input-file --pass-pipeline='builtin.module(hl-set-batch)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOSIZE

// NOSIZE: hl-set-batch: no size: give the new batch size, size=N (a positive integer)

// A reshape that splits the batch across axes (neither the outermost nor
// the innermost factor of one) cannot follow: the error is at the reshape.
func.func @forward(%x: tensor<32x4xf32>) -> tensor<2x64xf32> {
  // expected-error @below {{'hl.reshape' op cannot reshape 'tensor<7x4xf32>' (28 elements) to 'tensor<2x64xf32>' (128 elements)}}
  %r = hl.reshape %x : tensor<32x4xf32> to tensor<2x64xf32>
  return %r : tensor<2x64xf32>
}

// -----

// Such a split, then a reshape that brings back a batch of the old size:
// the split is the error (the cross-entropy two ops on, which could not
// infer its types, was named).
func.func @loss(%x: tensor<32x4x16xf32>, %l: tensor<32xi32>) -> tensor<f32> {
  // expected-error @below {{'hl.reshape' op cannot reshape 'tensor<7x4x16xf32>' (448 elements) to 'tensor<16x128xf32>' (2048 elements)}}
  %r = hl.reshape %x : tensor<32x4x16xf32> to tensor<16x128xf32>
  %b = hl.reshape %r : tensor<16x128xf32> to tensor<32x64xf32>
  %loss = hl.cross_entropy %b, %l : tensor<32x64xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}

// -----

// Nothing carries a batch.
// expected-error @below {{hl-set-batch: no function argument has a leading dimension to take as the batch; give from=N}}
module {
  func.func @forward() -> tensor<f32> {
    %c = hl.constant dense<1.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// A constant of the old batch's shape that is not one value throughout (a
// splat, which follows the batch: hl-set-batch-constants.mlir) cannot be
// retargeted: the op mixing it with the new batch is the error.
func.func @step(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %c = hl.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  // expected-error @below {{'hl.add' op operands are not broadcast-compatible: 'tensor<7x2xf32>' and 'tensor<4x2xf32>' (result dimension 0: 7 vs 4)}}
  // expected-error @below {{hl-set-batch: 'hl.add' cannot take batch size 7}}
  %y = hl.add %x, %c : tensor<4x2xf32>, tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A broadcast of a value that has the batch's dimension already (not made
// by the broadcast) keeps its shape: the op mixing it is the error.
func.func @rows(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %r = hl.constant dense<[[1.0], [2.0], [3.0], [4.0]]> : tensor<4x1xf32>
  %b = hl.broadcast_to %r : tensor<4x1xf32> to tensor<4x2xf32>
  // expected-error @below {{'hl.add' op operands are not broadcast-compatible: 'tensor<7x2xf32>' and 'tensor<4x2xf32>' (result dimension 0: 7 vs 4)}}
  // expected-error @below {{hl-set-batch: 'hl.add' cannot take batch size 7}}
  %y = hl.add %x, %b : tensor<4x2xf32>, tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A splat an earlier op has used at the old batch is not retyped behind it
// (that op's result would keep the old shape, or a sum of it change).
func.func @used(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<f32>) {
  %c = hl.constant dense<2.0> : tensor<4x2xf32>
  %s = hl.reduce_sum %c axes = [0, 1] : tensor<4x2xf32>
  // expected-error @below {{'hl.add' op operands are not broadcast-compatible: 'tensor<7x2xf32>' and 'tensor<4x2xf32>' (result dimension 0: 7 vs 4)}}
  // expected-error @below {{hl-set-batch: 'hl.add' cannot take batch size 7}}
  %y = hl.add %x, %c : tensor<4x2xf32>, tensor<4x2xf32>
  return %y, %s : tensor<4x2xf32>, tensor<f32>
}

// -----

// Functions the pass cannot retype whole are refused at the cause (the
// verifier rejected the pass's own output: "type mismatch for bb argument").
// expected-error @below {{hl-set-batch: @branches has more than one block: it retypes straight-line functions (no branches)}}
func.func @branches(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  cf.br ^bb1(%x : tensor<4x8xf32>)
^bb1(%a: tensor<4x8xf32>):
  return %a : tensor<4x8xf32>
}

// -----

func.func @loop(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{hl-set-batch: 'scf.for' is not an hl op: it retypes functions of hl ops (and calls)}}
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%a = %x) -> tensor<4x8xf32> {
    %b = hl.relu %a : tensor<4x8xf32>
    scf.yield %b : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @empty(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{hl-set-batch: 'tensor.empty' is not an hl op}}
  %e = tensor.empty() : tensor<4x8xf32>
  %y = hl.add %x, %e : tensor<4x8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// expected-error @below {{hl-set-batch: argument #0 of @dynamic is tensor<?x4xf32>, of dynamic shape: it retypes static shapes}}
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %x : tensor<?x4xf32>
}

// -----

// A batch that makes a tensor past 1 TiB is named as such (the verifier
// said only "more than 2^63 elements").
// expected-error @below {{hl-set-batch: size=7: argument #0: tensor<7x68719476736xf32> is larger than the 1 TiB a tensor may hold}}
func.func @huge(%x: tensor<4x68719476736xf32>) -> tensor<4x68719476736xf32> {
  return %x : tensor<4x68719476736xf32>
}

// -----

// Attention's `[T B, E]` back to `[T, B, E]` where the sequence is as long
// as the batch: which axis holds the batch is not known, and the reshape
// is the error (its leading axis, T, was taken for the batch: a wrong type
// that verified).
func.func @forward(%x: tensor<32x32x8xf32>) -> tensor<32x32x8xf32> {
  %t = hl.transpose %x permutation = [1, 0, 2] : tensor<32x32x8xf32>
  %flat = hl.reshape %t : tensor<32x32x8xf32> to tensor<1024x8xf32>
  // expected-error @below {{'hl.reshape' op cannot reshape 'tensor<224x8xf32>' (1792 elements) to 'tensor<32x32x8xf32>' (8192 elements)}}
  %back = hl.reshape %flat : tensor<1024x8xf32> to tensor<32x32x8xf32>
  return %back : tensor<32x32x8xf32>
}
