// convert-hl-to-ll diagnostics: located, and the pass fails.
// RUN: aicf-opt %s -split-input-file --convert-hl-to-ll -verify-diagnostics -o /dev/null

// hl is illegal after the pass: an op without a kernel is an error at its
// location, not left behind.
func.func @conv(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{convert-hl-to-ll: 'hl.conv2d' has no ll kernel yet, and hl must not remain after this pass}}
  %y = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>
  return %y : tensor<1x1x2x2xf32>
}

// -----

// Calls must be inlined first: a function body lowers op by op.
func.func private @g(tensor<2xf32>) -> tensor<2xf32>
func.func @call(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{convert-hl-to-ll: cannot lower 'func.call' inside a function (inline calls first)}}
  %y = func.call @g(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
