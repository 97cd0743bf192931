// convert-hl-to-ll diagnostics: located, and the pass fails.
// RUN: aicf-opt %s -split-input-file --allow-unregistered-dialect --convert-hl-to-ll -verify-diagnostics -o /dev/null

// Buffers have static shapes: a dynamic dimension is an error where the
// value is defined.
func.func @dynamic(%a: tensor<4x4xf32>, %n: tensor<?x4xf32>) -> tensor<4x4xf32> {
  // expected-error @-1 {{convert-hl-to-ll: argument #1: tensor<?x4xf32> has a dynamic shape; buffers need static shapes (compile once per input shape)}}
  %y = hl.relu %a : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// A zero-size dimension (a batch or width of 0) is refused where it is
// defined: no kernel runs on an empty buffer.
func.func @empty(%a: tensor<0x4xf32>) -> tensor<0x4xf32> {
  // expected-error @-1 {{convert-hl-to-ll: argument #0: tensor<0x4xf32> has a zero-size dimension; AICF compiles no empty tensors (a batch, width or length of 0)}}
  %y = hl.relu %a : tensor<0x4xf32>
  return %y : tensor<0x4xf32>
}

// -----

// A tensor past 1 TiB (or past what 64 bits count) is refused before any
// byte count of the plan could overflow.
func.func @huge(%a: tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32> {
  // expected-error @-1 {{convert-hl-to-ll: argument #0: tensor<4611686018427387904x4xf32> is larger than the 1 TiB a tensor may hold}}
  %y = hl.relu %a : tensor<4611686018427387904x4xf32>
  return %y : tensor<4611686018427387904x4xf32>
}

// -----

func.func @empty_result(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{convert-hl-to-ll: tensor<4x0xf32> has a zero-size dimension; AICF compiles no empty tensors (a batch, width or length of 0)}}
  %e = hl.slice %a start = [0, 0] limit = [4, 0] strides = [1, 1] : tensor<4x4xf32>
  %y = hl.relu %a : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @dynamic_result(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{convert-hl-to-ll: tensor<?x4xf32> has a dynamic shape; buffers need static shapes (compile once per input shape)}}
  %c = tensor.cast %a : tensor<4x4xf32> to tensor<?x4xf32>
  %y = hl.relu %a : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// Calls must be inlined first: a function body lowers op by op.
func.func private @g(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
func.func @call(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{convert-hl-to-ll: cannot lower a call inside a function: inline calls first (--inline)}}
  %y = func.call @g(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// An op of another dialect is named as such (the message told to inline
// calls, where there was none).
func.func @other(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{convert-hl-to-ll: cannot lower 'foo.bar': no ll kernel takes it (not an hl op, nor a func one)}}
  %y = "foo.bar"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// A function declared without a body is refused (the passes have no body
// to walk).
// expected-error @+1 {{convert-hl-to-ll: @h is declared without a body: AICF compiles whole models (define it, or remove the declaration)}}
func.func private @h(tensor<2xf32>) -> tensor<2xf32>
