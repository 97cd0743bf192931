// hl-widen and hl-deepen diagnostics: each names the op that stops the
// rewrite.
// RUN: aicf-opt %s -split-input-file --hl-widen="layer=fc1 width=16" -verify-diagnostics -o /dev/null
// RUN: not aicf-opt %s -split-input-file --hl-widen="layer=nope width=16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not aicf-opt %s -split-input-file --hl-widen="layer=fc1 width=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NARROW
// RUN: not aicf-opt %s -split-input-file --hl-deepen="after=fc1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NORELU
// A width past what a tensor holds is refused by the widening's plan,
// naming the parameter (the verifier's words were lost where a policy was
// checked).
// RUN: not aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-widen="layer=fc1 width=4611686018427387904" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE

// MISSING: hl-widen: no parameter @nope.weight (is 'nope' a linear layer of this model?)
// NARROW: hl-widen: width=2 is narrower than fc1's 8 units; widening only grows
// HUGE: error: hl-widen: width=4611686018427387904 makes @fc1.weight [4611686018427387904, 64], {{.*}} bytes as f32: more than the 1 TiB a tensor may hold
// A delay without a mask delayed nothing, silently.
// RUN: not aicf-opt %S/../../examples/mlp/digits_mlp.mlir --hl-widen="layer=fc1 width=256 mask_delay=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DELAY
// RUN: not aicf-opt %S/../../examples/char_lm/char_lm.mlir --hl-add-heads="attention=blocks.0.attn heads=1 mask_delay=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DELAY
// DELAY: error: {{hl-widen|hl-add-heads}}: mask_delay=5 delays a mask: give mask=N (the steps it ramps over) too
// NORELU: hl-deepen: fc1 is not followed by a relu here ('hl.tanh'), so an identity layer would not preserve the function; use residual=true

// The hidden units feed a residual add: widening would change its width.
hl.param @fc1.weight : tensor<8x8xf32> owner "fc1" init <kaiming_uniform, gain = 1.0>
hl.param @fc1.bias : tensor<8xf32> owner "fc1" init <zeros>
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = hl.get_param @fc1.weight : tensor<8x8xf32>
  %b = hl.get_param @fc1.bias : tensor<8xf32>
  %h = hl.linear %x, %w, %b : tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %a = hl.tanh %h : tensor<2x8xf32>
  // expected-error @below {{hl-widen: fc1's units reach 'hl.add' here; widening supports a linear layer followed by elementwise activations and linear layers}}
  %r = hl.add %a, %x : tensor<2x8xf32>, tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
