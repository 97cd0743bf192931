// One case per hl verifier, type-inference and attribute-parser rule, with
// the exact diagnostic.
// RUN: aicf-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'hl.param' op owner "fc2" is not a prefix of the parameter path "fc1.weight" (expected "fc2.<name>")}}
hl.param @fc1.weight : tensor<4x4xf32> owner "fc2" init <zeros>

// -----

// The owner must end at a path separator, not in the middle of a name.
// expected-error @+1 {{'hl.param' op owner "fc" is not a prefix of the parameter path "fc1.weight"}}
hl.param @fc1.weight : tensor<4x4xf32> owner "fc" init <zeros>

// -----

// expected-error @+1 {{'hl.param' op initializer 'kaiming_uniform' needs a parameter of rank >= 2 to compute its fans, but @fc1.bias is 'tensor<4xf32>'}}
hl.param @fc1.bias : tensor<4xf32> owner "fc1" init <kaiming_uniform>

// -----

// expected-error @+1 {{'hl.param' op parameter @p must have a static shape, got 'tensor<?x4xf32>'}}
hl.param @p : tensor<?x4xf32> owner "" init <zeros>

// -----

// A layer of width 0 (the digits MLP's hidden width set to 0): refused
// here, not compiled into kernels that write outside their buffers.
// expected-error @+1 {{'hl.param' op parameter @fc1.weight has a zero-size dimension ('tensor<0x64xf32>'); a parameter holds at least one value}}
hl.param @fc1.weight : tensor<0x64xf32> owner "fc1" init <zeros>

// -----

// An initializer's numbers beyond what the element type holds (a mean of
// 1e39 made every f32 value infinite, and the loss NaN at the first step
// with nothing naming the initializer); f16's range is 65504.
// expected-error @+1 {{'hl.param' op initializer mean = 1e+39 of @fc.w is beyond what its element type 'f32' holds (at most 3.40282347e+38 in magnitude)}}
hl.param @fc.w : tensor<10x64xf32> owner "fc" init <normal, mean = 1.0e39, std = 1.0>

// -----

// expected-error @+1 {{'hl.param' op initializer low = -70000 of @fc.w is beyond what its element type 'f16' holds (at most 65504 in magnitude)}}
hl.param @fc.w : tensor<10x64xf16> owner "fc" init <uniform, low = -70000.0, high = 1.0>

// -----

// expected-error @+1 {{'hl.param' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
hl.param @p : tensor<4xi32> owner "" init <zeros>

// -----

func.func @f() {
  // expected-error @+1 {{'hl.param' op expects parent op 'builtin.module'}}
  hl.param @p : tensor<4xf32> owner "" init <zeros>
  return
}

// -----

// expected-error @+1 {{unknown initializer 'he_uniform'; expected zeros, ones, normal, uniform, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal or data}}
hl.param @p : tensor<4x4xf32> owner "" init <he_uniform>

// -----

// expected-error @+1 {{'std' is not an argument of the 'uniform' initializer}}
hl.param @p : tensor<4x4xf32> owner "" init <uniform, std = 1.0>

// -----

// expected-error @+1 {{'gain' is given twice}}
hl.param @p : tensor<4x4xf32> owner "" init <xavier_normal, gain = 1.0, gain = 2.0>

// -----

// expected-error @+1 {{expected fan_in or fan_out, got 'fan_avg'}}
hl.param @p : tensor<4x4xf32> owner "" init <kaiming_normal, mode = fan_avg>

// -----

// expected-error @+1 {{initializer std must be > 0, got 0}}
hl.param @p : tensor<4x4xf32> owner "" init <normal, std = 0.0>

// -----

// An infinite std passed the verifier and failed when the weights were drawn.
// expected-error @+1 {{initializer arguments must be finite}}
hl.param @p : tensor<4x4xf32> owner "" init <normal, std = 0x7FF0000000000000>

// -----

// expected-error @+1 {{initializer arguments must be finite}}
hl.param @p : tensor<4x4xf32> owner "" init <kaiming_normal, gain = 0x7FF0000000000000>

// -----

// expected-error @+1 {{initializer bounds must satisfy low <= high, got low = 1, high = -1}}
hl.param @p : tensor<4x4xf32> owner "" init <uniform, low = 1.0, high = -1.0>

// -----

// expected-error @+1 {{initializer gain must be > 0, got -1}}
hl.param @p : tensor<4x4xf32> owner "" init <xavier_uniform, gain = -1.0>

// -----

func.func @f() {
  // expected-error @+1 {{'hl.get_param' op '@missing' does not name an hl.param}}
  %0 = hl.get_param @missing : tensor<4xf32>
  return
}

// -----

func.func @g() {
  return
}
func.func @f() {
  // expected-error @+1 {{'hl.get_param' op '@g' does not name an hl.param}}
  %0 = hl.get_param @g : tensor<4xf32>
  return
}

// -----

hl.state @bn.running_mean : tensor<4xf32> slot "running_mean" init <zeros>
func.func @f() {
  // expected-error @+1 {{'hl.get_param' op '@bn.running_mean' names an hl.state, not an hl.param: read it with hl.get_state}}
  %0 = hl.get_param @bn.running_mean : tensor<4xf32>
  return
}

// -----

hl.param @w : tensor<4x8xf32> owner "" init <zeros>
func.func @f() {
  // expected-error @+1 {{'hl.get_param' op result type 'tensor<8x4xf32>' does not match the type 'tensor<4x8xf32>' of parameter @w}}
  %0 = hl.get_param @w : tensor<8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<3x4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'hl.add' op operands are not broadcast-compatible: 'tensor<3x4xf32>' and 'tensor<5xf32>' (result dimension 1: 4 vs 5)}}
  %0 = hl.add %a, %b : tensor<3x4xf32>, tensor<5xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'hl.mul' op operands have different element types: 'tensor<4xf32>' and 'tensor<4xf16>'}}
  %0 = hl.mul %a, %b : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @f(%a: tensor<4xi32>) {
  // expected-error @+1 {{'hl.relu' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = hl.relu %a : tensor<4xi32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{'hl.matmul' op operands must have rank >= 2, got 'tensor<4xf32>' and 'tensor<4x4xf32>'}}
  %0 = hl.matmul %a, %b : tensor<4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{'hl.matmul' op operands must have the same rank, got 'tensor<2x4x4xf32>' and 'tensor<4x4xf32>'}}
  %0 = hl.matmul %a, %b : tensor<2x4x4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x4xf32>, %b: tensor<4x4xbf16>) {
  // expected-error @+1 {{'hl.matmul' op operands have different element types: 'tensor<4x4xf32>' and 'tensor<4x4xbf16>'}}
  %0 = hl.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x4x4xf32>, %b: tensor<3x4x4xf32>) {
  // expected-error @+1 {{'hl.matmul' op batch dimension 0 differs: 'tensor<2x4x4xf32>' and 'tensor<3x4x4xf32>'}}
  %0 = hl.matmul %a, %b : tensor<2x4x4xf32>, tensor<3x4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<8x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.matmul' op contracting dimensions differ: lhs 'tensor<8x3xf32>' has K = 3 but rhs 'tensor<4x5xf32>' has K = 4}}
  %0 = hl.matmul %a, %b : tensor<8x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<8x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.matmul' op contracting dimensions differ: lhs 'tensor<8x3xf32>' has K = 3 but rhs 'tensor<4x5xf32>' (transposed) has K = 5}}
  %0 = hl.matmul %a, %b transpose_rhs : tensor<8x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'hl.linear' op input must have rank >= 2 (rows of features, [..., rows, in]; one example is [1, in]), got 'tensor<f32>'}}
  %0 = hl.linear %x, %w : tensor<f32>, tensor<4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'hl.linear' op input must have rank >= 2 (rows of features, [..., rows, in]; one example is [1, in]), got 'tensor<4xf32>'}}
  %0 = hl.linear %x, %w : tensor<4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'hl.linear' op weight must have rank 2 ([out, in]), got 'tensor<4xf32>'}}
  %0 = hl.linear %x, %w : tensor<8x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x4xf32>, %w: tensor<16x4xf16>) {
  // expected-error @+1 {{'hl.linear' op input and weight have different element types: 'tensor<8x4xf32>' and 'tensor<16x4xf16>'}}
  %0 = hl.linear %x, %w : tensor<8x4xf32>, tensor<16x4xf16>
  return
}

// -----

func.func @f(%x: tensor<8x63xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'hl.linear' op input 'tensor<8x63xf32>' has 63 features but the weight 'tensor<32x64xf32>' expects 64}}
  %0 = hl.linear %x, %w : tensor<8x63xf32>, tensor<32x64xf32>
  return
}

// -----

func.func @f(%x: tensor<8x64xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'hl.linear' op bias must be 'tensor<32xf32>', got 'tensor<64xf32>'}}
  %0 = hl.linear %x, %w, %b : tensor<8x64xf32>, tensor<32x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%l: tensor<8x4x2xf32>, %y: tensor<8xi32>) {
  // expected-error @+1 {{'hl.cross_entropy' op labels 'tensor<8xi32>' must have the shape of the logits 'tensor<8x4x2xf32>' without the class axis ([8, 4])}}
  %0 = hl.cross_entropy %l, %y : tensor<8x4x2xf32>, tensor<8xi32>
  return
}

// -----

func.func @f(%l: tensor<f32>, %y: tensor<i32>) {
  // expected-error @+1 {{'hl.cross_entropy' op logits must have a class axis ([..., classes]), got 'tensor<f32>'}}
  %0 = hl.cross_entropy %l, %y : tensor<f32>, tensor<i32>
  return
}

// -----

func.func @f(%l: tensor<8x4xf32>, %y: tensor<8x1xi32>) {
  // expected-error @+1 {{'hl.cross_entropy' op labels 'tensor<8x1xi32>' must have the shape of the logits 'tensor<8x4xf32>' without the class axis ([8])}}
  %0 = hl.cross_entropy %l, %y : tensor<8x4xf32>, tensor<8x1xi32>
  return
}

// -----

func.func @f(%l: tensor<8x4xf32>, %y: tensor<7xi64>) {
  // expected-error @+1 {{'hl.cross_entropy' op labels 'tensor<7xi64>' must have the shape of the logits 'tensor<8x4xf32>' without the class axis ([8])}}
  %0 = hl.cross_entropy %l, %y : tensor<8x4xf32>, tensor<7xi64>
  return
}

// -----

func.func @f(%l: tensor<8x4xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'hl.cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<8xf32>'}}
  %0 = hl.cross_entropy %l, %y : tensor<8x4xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%l: tensor<8x16xbf16>, %y: tensor<8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'hl.softmax_cross_entropy' op classes = 17 must be in [1, 16] (the logits' last dimension, 'tensor<8x16xbf16>')}}
  %0:2 = hl.softmax_cross_entropy %l, %y, %g classes = 17 : tensor<8x16xbf16>, tensor<8xi32>, tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<8x16xbf16>, %y: tensor<8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'hl.softmax_cross_entropy' op classes = 0 must be in [1, 16]}}
  %0:2 = hl.softmax_cross_entropy %l, %y, %g classes = 0 : tensor<8x16xbf16>, tensor<8xi32>, tensor<f32> -> tensor<f32>
  return
}

// -----

// 16-bit logits take an f32 loss (or their own type); nothing else.
func.func @f(%l: tensor<8x16xbf16>, %y: tensor<8xi32>, %g: tensor<f64>) {
  // expected-error @+1 {{'hl.softmax_cross_entropy' op grad_output must be the loss's type 'tensor<bf16>' (or tensor<f32>), got 'tensor<f64>'}}
  %0:2 = hl.softmax_cross_entropy %l, %y, %g : tensor<8x16xbf16>, tensor<8xi32>, tensor<f64> -> tensor<f64>
  return
}

// -----

func.func @f(%l: tensor<8x16xf32>, %y: tensor<8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'hl.softmax_cross_entropy' op loss must be 'tensor<f32>', got 'tensor<bf16>'}}
  %0:2 = hl.softmax_cross_entropy %l, %y, %g : tensor<8x16xf32>, tensor<8xi32>, tensor<f32> -> tensor<bf16>
  return
}

// -----

// Type inference also checks ops written in the generic form, whose result
// type is spelled out.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+2 {{'hl.matmul' op inferred type(s) 'tensor<4x2xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  // expected-error @+1 {{'hl.matmul' op failed to infer returned types}}
  %0 = "hl.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'hl.select' op branches have different element types: 'tensor<4xf32>' and 'tensor<4xf16>'}}
  %0 = hl.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @f(%c: tensor<3xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'hl.select' op operands are not broadcast-compatible: 'tensor<3xi1>' and 'tensor<4xf32>' and 'tensor<4xf32>' (result dimension 0: 3 vs 4)}}
  %0 = hl.select %c, %a, %a : tensor<3xi1>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'hl.select' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = hl.select %c, %a, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'predicate' [eq, ne, lt, le, gt, ge]}}
  %0 = hl.compare less, %a, %a : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4xi32>) {
  // expected-error @+1 {{'hl.exp' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = hl.exp %a : tensor<4xi32>
  return
}

// -----

func.func @f(%i: tensor<4xi32>) {
  // expected-error @+1 {{'hl.pow' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = "hl.pow"(%i, %i) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.cast' op changes the shape from 'tensor<4x5xf32>' to 'tensor<20xf16>'; only the element type may change}}
  %0 = hl.cast %a : tensor<4x5xf32> to tensor<20xf16>
  return
}

// -----

// The reductions take floats (the kernels reduce floats; an integer sum
// failed inside convert-hl-to-ll).
func.func @f(%a: tensor<4x3xi32>) {
  // expected-error @+1 {{'hl.reduce_sum' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4x3xi32>'}}
  %0 = hl.reduce_sum %a axes = [1] : tensor<4x3xi32>
  return
}

// -----

func.func @f(%a: tensor<4x3xi64>) {
  // expected-error @+1 {{'hl.reduce_max' op operand #0 must be ranked tensor}}
  %0 = hl.reduce_max %a axes = [0] : tensor<4x3xi64>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.reduce_sum' op needs at least one axis to reduce}}
  %0 = hl.reduce_sum %a axes = [] : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.reduce_mean' op axis 2 is out of range for 'tensor<4x5xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.reduce_mean %a axes = [2] : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5x6xf32>) {
  // expected-error @+1 {{'hl.reduce_max' op axes [2, 0] must be distinct and ascending}}
  %0 = hl.reduce_max %a axes = [2, 0] : tensor<4x5x6xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.argmax' op axis -1 is out of range for 'tensor<4x5xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.argmax %a axis = -1 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.softmax' op axis 2 is out of range for 'tensor<4x5xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.softmax %a axis = 2 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.log_softmax' op axis 3 is out of range for 'tensor<4x5xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.log_softmax %a axis = 3 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.layer_norm' op normalises the last 3 dimensions but the input 'tensor<4x5xf32>' has rank 2}}
  %0 = hl.layer_norm %a dims = 3 eps = 1.0e-05 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.layer_norm' op attribute 'dims' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = hl.layer_norm %a dims = 0 eps = 1.0e-05 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'hl.layer_norm' op weight must be 'tensor<5xf32>' (the normalised dimensions of 'tensor<4x5xf32>'), got 'tensor<4xf32>'}}
  %0 = hl.layer_norm %a weight %g dims = 1 eps = 1.0e-05 : tensor<4x5xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>, %g: tensor<5xf32>, %b: tensor<5xf16>) {
  // expected-error @+1 {{'hl.layer_norm' op bias must be 'tensor<5xf32>' (the normalised dimensions of 'tensor<4x5xf32>'), got 'tensor<5xf16>'}}
  %0 = hl.layer_norm %a weight %g bias %b dims = 1 eps = 1.0e-05 : tensor<4x5xf32>, tensor<5xf32>, tensor<5xf16>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>, %g: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.rms_norm' op weight must be 'tensor<5xf32>' (the normalised dimensions of 'tensor<4x5xf32>'), got 'tensor<4x5xf32>'}}
  %0 = hl.rms_norm %a weight %g dims = 1 eps = 1.0e-05 : tensor<4x5xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>, %b: tensor<4x6xf32>) {
  // expected-error @+1 {{'hl.mse_loss' op input 'tensor<4x5xf32>' and target 'tensor<4x6xf32>' must have the same type}}
  %0 = hl.mse_loss %a, %b : tensor<4x5xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.reshape' op cannot reshape 'tensor<4x5xf32>' (20 elements) to 'tensor<3x7xf32>' (21 elements)}}
  %0 = hl.reshape %a : tensor<4x5xf32> to tensor<3x7xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.reshape' op changes the element type from 'f32' to 'f16'}}
  %0 = hl.reshape %a : tensor<4x5xf32> to tensor<20xf16>
  return
}

// -----

func.func @f(%a: tensor<?x5xf32>) {
  // expected-error @+1 {{'hl.reshape' op needs static shapes, got 'tensor<?x5xf32>' to 'tensor<20xf32>'}}
  %0 = hl.reshape %a : tensor<?x5xf32> to tensor<20xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5x6xf32>) {
  // expected-error @+1 {{'hl.transpose' op permutation [0, 0, 1] is not a permutation of the 3 dimensions of 'tensor<4x5x6xf32>'}}
  %0 = hl.transpose %a permutation = [0, 0, 1] : tensor<4x5x6xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5x6xf32>) {
  // expected-error @+1 {{'hl.transpose' op permutation [1, 0] is not a permutation of the 3 dimensions of 'tensor<4x5x6xf32>'}}
  %0 = hl.transpose %a permutation = [1, 0] : tensor<4x5x6xf32>
  return
}

// -----

func.func @f(%a: tensor<3x5xf32>) {
  // expected-error @+1 {{'hl.broadcast_to' op cannot broadcast 'tensor<3x5xf32>' to 'tensor<2x4x5xf32>' (aligned from the right, each input dimension must equal the result's or be 1)}}
  %0 = hl.broadcast_to %a : tensor<3x5xf32> to tensor<2x4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<5xf32>) {
  // expected-error @+1 {{'hl.broadcast_to' op changes the element type from 'f32' to 'f64'}}
  %0 = hl.broadcast_to %a : tensor<5xf32> to tensor<2x5xf64>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'hl.concat' op inputs differ in dimension 0 (not the concatenation axis 1): 'tensor<4x5xf32>' and 'tensor<3x5xf32>'}}
  %0 = hl.concat %a, %b axis = 1 : tensor<4x5xf32>, tensor<3x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>, %b: tensor<4x5xf16>) {
  // expected-error @+1 {{'hl.concat' op inputs must have the same rank and element type, got 'tensor<4x5xf32>' and 'tensor<4x5xf16>'}}
  %0 = hl.concat %a, %b axis = 1 : tensor<4x5xf32>, tensor<4x5xf16>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.concat' op axis 2 is out of range for 'tensor<4x5xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.concat %a axis = 2 : tensor<4x5xf32>
  return
}

// -----

func.func @f() {
  // Inference reports why, then the generic verifier that it failed.
  // expected-error @+2 {{'hl.concat' op needs at least one input}}
  // expected-error @+1 {{'hl.concat' op failed to infer returned types}}
  %0 = "hl.concat"() {axis = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.slice' op start, limit and strides need one entry per dimension of 'tensor<4x5xf32>' (2), got 1, 2 and 2}}
  %0 = hl.slice %a start = [0] limit = [4, 5] strides = [1, 1] : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.slice' op stride 0 in dimension 1 must be >= 1}}
  %0 = hl.slice %a start = [0, 0] limit = [4, 5] strides = [1, 0] : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.slice' op window 2:6 in dimension 1 is outside 'tensor<4x5xf32>' (need 0 <= start <= limit <= 5)}}
  %0 = hl.slice %a start = [0, 2] limit = [4, 6] strides = [1, 1] : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.slice' op window 3:1 in dimension 0 is outside 'tensor<4x5xf32>' (need 0 <= start <= limit <= 4)}}
  %0 = hl.slice %a start = [3, 0] limit = [1, 5] strides = [1, 1] : tensor<4x5xf32>
  return
}

// -----

func.func @f(%t: tensor<65x8xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{'hl.gather' op axis 2 is out of range for 'tensor<65x8xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.gather %t[%i] axis = 2 : tensor<65x8xf32>, tensor<4xi32>
  return
}

// -----

func.func @f(%t: tensor<65x8xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{'hl.gather' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = hl.gather %t[%i] axis = 0 : tensor<65x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x9xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op input and weight must have rank 4, got 'tensor<2x3x9xf32>' and 'tensor<8x3x3x3xf32>'}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x3x9xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf16>) {
  // expected-error @+1 {{'hl.conv2d' op input and weight have different element types: 'tensor<2x3x9x9xf32>' and 'tensor<8x3x3x3xf16>'}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf16>
  return
}

// -----

func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op groups = 0 must be at least 1}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 0 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op stride must be [h, w] with entries >= 1, got [0, 1]}}
  %0 = hl.conv2d %x, %w stride = [0, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op padding must be [h, w] with entries >= 0, got [1]}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [1] dilation = [1, 1] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op dilation must be [h, w] with entries >= 1, got [1, 0]}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 0] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x9x9xf32>, %w: tensor<9x2x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op output channels 9 are not divisible by groups = 2}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 2 : tensor<2x4x9x9xf32>, tensor<9x2x3x3xf32>
  return
}

// -----

// Channels are read from the layout: here the last dimension.
func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op input 'tensor<2x3x9x9xf32>' has 9 channels but the weight 'tensor<8x3x3x3xf32>' with groups = 1 expects 3}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 layout = nhwc : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op bias must be 'tensor<8xf32>', got 'tensor<3xf32>'}}
  %0 = hl.conv2d %x, %w, %b stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4x4xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d' op the window (5, kernel 3 at dilation 2) does not fit the padded input 'tensor<2x3x4x4xf32>' (size 4 + 2 * 0)}}
  %0 = hl.conv2d %x, %w stride = [1, 1] padding = [0, 0] dilation = [2, 2] groups = 1 : tensor<2x3x4x4xf32>, tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{'hl.conv2d' op attribute 'groups' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = "hl.conv2d"(%x, %x) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 0>} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x2x1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'hl.max_pool2d' op input must have rank 4, got 'tensor<2x3x4xf32>'}}
  %0 = hl.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0] : tensor<2x3x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{'hl.max_pool2d' op kernel must be [h, w] with entries >= 1, got [2, 0]}}
  %0 = hl.max_pool2d %x kernel = [2, 0] stride = [2, 2] padding = [0, 0] : tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{'hl.avg_pool2d' op padding [2, 0] must be at most half the kernel [3, 3]}}
  %0 = hl.avg_pool2d %x kernel = [3, 3] stride = [1, 1] padding = [2, 0] : tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{'hl.avg_pool2d' op the window (5) does not fit the padded input 'tensor<2x3x4x4xf32>' (size 4 + 2 * 0)}}
  %0 = hl.avg_pool2d %x kernel = [5, 5] stride = [1, 1] padding = [0, 0] : tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%q: tensor<16xf32>) {
  // expected-error @+1 {{'hl.attention' op query, key and value must have the same rank >= 2, got 'tensor<16xf32>', 'tensor<16xf32>' and 'tensor<16xf32>'}}
  %0 = hl.attention %q, %q, %q : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>, %k: tensor<3x16x8xf32>) {
  // expected-error @+1 {{'hl.attention' op batch dimension 0 differs: 'tensor<2x16x8xf32>', 'tensor<3x16x8xf32>' and 'tensor<3x16x8xf32>'}}
  %0 = hl.attention %q, %k, %k : tensor<2x16x8xf32>, tensor<3x16x8xf32>, tensor<3x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>, %k: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'hl.attention' op query 'tensor<2x16x8xf32>' and key 'tensor<2x16x4xf32>' must have the same head dimension}}
  %0 = hl.attention %q, %k, %k : tensor<2x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>, %v: tensor<2x12x8xf32>) {
  // expected-error @+1 {{'hl.attention' op key 'tensor<2x16x8xf32>' and value 'tensor<2x12x8xf32>' must have the same sequence length}}
  %0 = hl.attention %q, %q, %v : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x12x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>, %v: tensor<2x16x8xf16>) {
  // expected-error @+1 {{'hl.attention' op query, key and value have different element types: 'tensor<2x16x8xf32>', 'tensor<2x16x8xf32>' and 'tensor<2x16x8xf16>'}}
  %0 = hl.attention %q, %q, %v : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf16>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'hl.attention' op scale must be positive and finite in f32}}
  %0 = hl.attention %q, %q, %q scale = 0.0 : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'hl.attention' op scale must be positive and finite in f32}}
  %0 = hl.attention %q, %q, %q scale = 1.0e+300 : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'hl.dropout' op drop probability p = 1.000000e+00 must be in [0, 1)}}
  %0 = hl.dropout %x, %s, %s p = 1.0 stream = 0 : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'hl.dropout' op stream -1 must be >= 0}}
  %0 = hl.dropout %x, %s, %s p = 0.5 stream = -1 : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i32>) {
  // expected-error @+1 {{'hl.dropout' op operand #1 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0 = "hl.dropout"(%x, %s, %s) {p = 0.5 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<i32>, tensor<i32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'hl.random_like' op kind "gamma" is neither "normal" nor "uniform"}}
  %0 = hl.random_like %x, %s, %s kind = "gamma" a = 0.0 b = 1.0 stream = 0 : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'hl.random_like' op the standard deviation b = -1.000000e+00 is negative}}
  %0 = hl.random_like %x, %s, %s kind = "normal" a = 0.0 b = -1.0 stream = 0 : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'hl.random_like' op the uniform range [2.000000e+00, 1.000000e+00) is empty}}
  %0 = hl.random_like %x, %s, %s kind = "uniform" a = 2.0 b = 1.0 stream = 0 : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>, %s: tensor<i64>) {
  // expected-error @+1 {{'hl.random_like' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = "hl.random_like"(%x, %s, %s) {kind = "normal", a = 0.0 : f64, b = 1.0 : f64, stream = 0 : i64} : (tensor<4xi32>, tensor<i64>, tensor<i64>) -> tensor<4xi32>
  return
}

// -----

hl.param @w : tensor<3xf32> owner "" init <zeros>
// expected-error @+1 {{'hl.state' op slot type 'tensor<4xf32>' differs from the type 'tensor<3xf32>' of its parameter @w}}
hl.state @w.m : tensor<4xf32> of @w slot "momentum" init <zeros>

// -----

// expected-error @+1 {{'hl.state' op '@nothing' does not name an hl.param}}
hl.state @m : tensor<4xf32> of @nothing slot "momentum" init <zeros>

// -----

hl.state @step : tensor<i64> slot "step" init <zeros>
func.func @f() {
  // expected-error @+1 {{'hl.get_state' op result type 'tensor<i32>' does not match the type 'tensor<i64>' of state @step}}
  %0 = hl.get_state @step : tensor<i32>
  return
}

// -----

hl.param @w : tensor<3xf32> owner "" init <zeros>
func.func @f() {
  // expected-error @+1 {{'hl.get_state' op '@w' names an hl.param, not an hl.state: read it with hl.get_param}}
  %0 = hl.get_state @w : tensor<3xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x5x5xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'hl.conv2d_backward_input' op grad_output 'tensor<2x8x5x5xf32>' is not the type hl.conv2d of an input of the result's type produces from these operands ('tensor<2x8x7x7xf32>')}}
  %0 = hl.conv2d_backward_input %dy, %w stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x8x5x5xf32>, tensor<8x3x3x3xf32> -> tensor<2x3x9x9xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x5x5xf32>, %w: tensor<8x3x3x3xf32>) {
  // The forward's shape rules hold for the backward ops too.
  // expected-error @+1 {{'hl.conv2d_backward_input' op input 'tensor<2x4x9x9xf32>' has 4 channels but the weight 'tensor<8x3x3x3xf32>' with groups = 1 expects 3}}
  %0 = hl.conv2d_backward_input %dy, %w stride = [2, 2] padding = [1, 1] dilation = [1, 1] groups = 1 : tensor<2x8x5x5xf32>, tensor<8x3x3x3xf32> -> tensor<2x4x9x9xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x5x5xf32>, %x: tensor<2x3x9x9xf32>) {
  // expected-error @+1 {{'hl.conv2d_backward_weight' op grad_output 'tensor<2x8x5x5xf32>' is not the type hl.conv2d with a weight of the result's type produces from these operands ('tensor<2x8x4x4xf32>')}}
  %0 = hl.conv2d_backward_weight %dy, %x stride = [2, 2] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<2x8x5x5xf32>, tensor<2x3x9x9xf32> -> tensor<8x3x3x3xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x2x2xf32>, %x: tensor<2x8x5x5xf32>) {
  // expected-error @+1 {{'hl.max_pool2d_backward' op grad_output 'tensor<2x8x2x2xf32>' is not the type hl.max_pool2d of the input produces from these operands ('tensor<2x8x3x3xf32>')}}
  %0 = hl.max_pool2d_backward %dy, %x kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<2x8x2x2xf32>, tensor<2x8x5x5xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x3x3xf32>, %x: tensor<2x8x5x5xf32>) {
  // expected-error @+1 {{'hl.avg_pool2d_backward' op padding [2, 2] must be at most half the kernel [2, 2]}}
  %0 = hl.avg_pool2d_backward %dy, %x kernel = [2, 2] stride = [2, 2] padding = [2, 2] : tensor<2x8x3x3xf32>, tensor<2x8x5x5xf32>
  return
}

// -----

func.func @f(%x: tensor<4x5xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{'hl.layer_norm' op a bias needs a weight (pass ones for an unscaled layer norm)}}
  // expected-error @+1 {{'hl.layer_norm' op failed to infer returned types}}
  %0 = "hl.layer_norm"(%x, %b) {dims = 1 : i64, eps = 1.0e-5 : f64, operandSegmentSizes = array<i32: 1, 0, 1>} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error @+1 {{'hl.gemm' op transpose_lhs needs operands of equal rank, got 'tensor<2x8x16xf32>' and 'tensor<32x16xf32>'}}
  %0 = hl.gemm %x, %w transpose_lhs transpose_rhs : tensor<2x8x16xf32>, tensor<32x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %w: tensor<32x15xf32>) {
  // expected-error @+1 {{'hl.gemm' op operands 'tensor<2x8x16xf32>' and 'tensor<32x15xf32>' (transposed) do not contract}}
  %0 = hl.gemm %x, %w transpose_rhs : tensor<2x8x16xf32>, tensor<32x15xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<9x6xf32>) {
  // The matmul form has matmul's rules.
  // expected-error @+1 {{'hl.gemm' op contracting dimensions differ: lhs 'tensor<4x8xf32>' has K = 8 but rhs 'tensor<9x6xf32>' has K = 9}}
  %0 = hl.gemm %a, %b : tensor<4x8xf32>, tensor<9x6xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'hl.gemm' op bias must be 'tensor<6xf32>', got 'tensor<4xf32>'}}
  %0 = hl.gemm %a, %b bias(%c) : tensor<4x8xf32>, tensor<8x6xf32> bias tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %m: tensor<4x6xf16>) {
  // expected-error @+1 {{'hl.gemm' op mask must have the result's type 'tensor<4x6xf32>', got 'tensor<4x6xf16>'}}
  %0 = hl.gemm %a, %b mask(%m) : tensor<4x8xf32>, tensor<8x6xf32> mask tensor<4x6xf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %r: tensor<6xf32>) {
  // expected-error @+1 {{'hl.gemm' op residual must have the result's type 'tensor<4x6xf32>', got 'tensor<6xf32>'}}
  %0 = hl.gemm %a, %b residual(%r) : tensor<4x8xf32>, tensor<8x6xf32> residual tensor<6xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<2x8x6xf32>) {
  // expected-error @+2 {{'hl.gemm' op sum_lhs needs rank-2 operands, got 'tensor<2x4x8xf32>' and 'tensor<2x8x6xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = "hl.gemm"(%a, %b) {operandSegmentSizes = array<i32: 1, 1, 0, 0, 0>, sum_lhs} : (tensor<2x4x8xf32>, tensor<2x8x6xf32>) -> (tensor<2x4x6xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<3xf32>, %y: tensor<3xf32>) {
  // expected-error @+1 {{'hl.multi_tensor_apply' op has 3 inputs, not a positive multiple of the body's 2 arguments}}
  %0 = hl.multi_tensor_apply ins(%x, %y, %x : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: f32, %b: f32):
    hl.yield %a : f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'hl.multi_tensor_apply' op has 1 results for 2 groups of 1}}
  %0 = hl.multi_tensor_apply ins(%x, %y : tensor<3xf32>, tensor<4xf32>) -> tensor<3xf32> {
  ^bb0(%a: f32):
    hl.yield %a : f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'hl.multi_tensor_apply' op group 1: input #0 of type 'tensor<4xf32>' does not broadcast to the result shape of 'tensor<5xf32>'}}
  %0:2 = hl.multi_tensor_apply ins(%x, %y : tensor<3xf32>, tensor<4xf32>) -> tensor<3xf32>, tensor<5xf32> {
  ^bb0(%a: f32):
    hl.yield %a : f32
  }
  return
}

// -----

func.func @f(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op input #0 of type 'tensor<4x3xf32>' does not broadcast to the result shape of 'tensor<3xf32>'}}
  %0 = hl.fused_elementwise ins(%x : tensor<4x3xf32>) -> tensor<3xf32> {
  ^bb0(%a: f32):
    hl.yield %a : f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op body argument #0 has type 'f64' but input #0 holds 'f32'}}
  %0 = hl.fused_elementwise ins(%x : tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: f64):
    %t = arith.truncf %a : f64 to f32
    hl.yield %t : f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op body takes 0 scalars but the op has 1 inputs}}
  %0 = hl.fused_elementwise ins(%x : tensor<3xf32>) -> tensor<3xf32> {
    %c = arith.constant 1.0 : f32
    hl.yield %c : f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op yielded scalar #0 has type 'i1' but result #0 holds 'f32'}}
  %0 = hl.fused_elementwise ins(%x : tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: f32):
    %b = arith.cmpf ogt, %a, %a : f32
    hl.yield %b : i1
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op body yields 2 scalars for 1 results}}
  %0 = hl.fused_elementwise ins(%x : tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: f32):
    hl.yield %a, %a : f32, f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  %0 = hl.fused_elementwise ins(%x : tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: f32):
    // expected-error @+1 {{'hl.exp' op is not a side-effect-free scalar op; a fused elementwise body holds only those}}
    %t = hl.exp %x : tensor<3xf32>
    hl.yield %a : f32
  }
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op needs at least one result}}
  "hl.fused_elementwise"(%x) ({
  ^bb0(%a: f32):
    hl.yield
  }) : (tensor<3xf32>) -> ()
  return
}

// -----

func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'hl.fused_elementwise' op results must share one shape, got 'tensor<3xf32>' and 'tensor<1x3xf32>'}}
  %0:2 = hl.fused_elementwise ins(%x : tensor<3xf32>) -> tensor<3xf32>, tensor<1x3xf32> {
  ^bb0(%a: f32):
    hl.yield %a, %a : f32, f32
  }
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'hl.yield' op expects parent op to be one of 'hl.fused_elementwise, hl.multi_tensor_apply'}}
  hl.yield
}

// -----

func.func @f(%l: tensor<8x5xf32>, %y: tensor<7xi32>, %g: tensor<f32>) {
  // The forward's shape rule holds for the backward.
  // expected-error @+1 {{'hl.cross_entropy_backward' op labels 'tensor<7xi32>' must have the shape of the logits 'tensor<8x5xf32>' without the class axis ([8])}}
  %0 = hl.cross_entropy_backward %l, %y, %g : tensor<8x5xf32>, tensor<7xi32>, tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<8x5xf32>, %y: tensor<8xi32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'hl.cross_entropy_backward' op grad_output must be the loss's type 'tensor<f32>', got 'tensor<1xf32>'}}
  %0 = hl.cross_entropy_backward %l, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<1xf32>
  return
}

// -----

func.func @f(%l: tensor<8x5xf32>, %y: tensor<8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'hl.softmax_cross_entropy' op loss must be 'tensor<f32>', got 'tensor<1xf32>'}}
  %0:2 = hl.softmax_cross_entropy %l, %y, %g : tensor<8x5xf32>, tensor<8xi32>, tensor<f32> -> tensor<1xf32>
  return
}

// -----

func.func @f(%y: tensor<4x5xf32>, %g: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.softmax_backward' op axis 2 is out of range for 'tensor<4x5xf32>' (expected 0 <= axis < 2)}}
  %0 = hl.softmax_backward %y, %g axis = 2 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%g: tensor<4x5xf32>, %x: tensor<4x5xf32>, %w: tensor<5xf32>) {
  // expected-error @+1 {{'hl.norm_backward' op has a weight gradient exactly when it has a weight}}
  %0 = hl.norm_backward %g, %x weight(%w) dims = 1 eps = 1.0e-5 : tensor<4x5xf32> weight tensor<5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%g: tensor<4x5xf32>, %x: tensor<4x5xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'hl.norm_backward' op weight 'tensor<4xf32>' must be 'tensor<5xf32>'}}
  %0:2 = hl.norm_backward %g, %x weight(%w) dims = 1 eps = 1.0e-5 : tensor<4x5xf32> weight tensor<4xf32> -> tensor<4x5xf32> grad_weight tensor<4xf32>
  return
}

// -----

func.func @f(%de: tensor<4x32x64xf32>, %tok: tensor<4x32xi32>) {
  // expected-error @+1 {{'hl.gather_backward' op grad_output 'tensor<4x32x64xf32>' is not the type hl.gather from the result's type produces from these operands ('tensor<4x32x60xf32>')}}
  %0 = hl.gather_backward %de[%tok] axis = 0 : tensor<4x32x64xf32>, tensor<4x32xi32> -> tensor<65x60xf32>
  return
}

// -----

func.func @f(%dy: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.slice_backward' op grad_output 'tensor<4x5xf32>' is not the type hl.slice of the result's type produces from these operands ('tensor<4x4xf32>')}}
  %0 = hl.slice_backward %dy start = [0, 2] limit = [4, 10] strides = [1, 2] : tensor<4x5xf32> -> tensor<8x16xf32>
  return
}

// -----

// A normalisation's epsilon is a number of at least 0, finite in f32: NaN,
// an infinity or a negative one would make every output NaN, and one past
// f32's range infinite where the kernels add it.
func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.layer_norm' op attribute 'eps' failed to satisfy constraint: 64-bit float attribute a number of at least 0, finite in f32}}
  %0 = hl.layer_norm %a dims = 1 eps = 0x7FF8000000000000 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.rms_norm' op attribute 'eps' failed to satisfy constraint: 64-bit float attribute a number of at least 0, finite in f32}}
  %0 = hl.rms_norm %a dims = 1 eps = -1.0e-06 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%dy: tensor<4x5xf32>, %x: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.norm_backward' op attribute 'eps' failed to satisfy constraint: 64-bit float attribute a number of at least 0, finite in f32}}
  %0 = hl.norm_backward %dy, %x dims = 1 eps = 0x7FF0000000000000 : tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.layer_norm' op attribute 'eps' failed to satisfy constraint: 64-bit float attribute a number of at least 0, finite in f32}}
  %0 = hl.layer_norm %a dims = 1 eps = 1.0e+300 : tensor<4x5xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>, %o: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'hl.attention_backward' op out 'tensor<2x16x4xf32>' is not the attention's result type 'tensor<2x16x8xf32>'}}
  %0:3 = hl.attention_backward %q, %q, %q, %o, %o : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x16x8xf32>, %k: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'hl.attention_backward' op query 'tensor<2x16x8xf32>' and key 'tensor<2x16x4xf32>' must have the same head dimension}}
  %0:3 = hl.attention_backward %q, %k, %k, %q, %q : tensor<2x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x8xf32>
  return
}

// -----

func.func @f(%a: tensor<6917529027641081856x2xf32>) {
  // expected-error @+1 {{'hl.concat' op the concatenated size of dimension 0 (6917529027641081856 + 6917529027641081856) is beyond 64-bit sizes}}
  %0 = hl.concat %a, %a axis = 0 : tensor<6917529027641081856x2xf32>, tensor<6917529027641081856x2xf32>
  return
}

// -----

// An attribute an op does not define is refused, with the nearest one it
// does: MLIR keeps it as a discardable attribute, so a misspelt optional
// attribute ran the op with its default.
func.func @f(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'hl.cross_entropy' op has no attribute 'ignore_idx'; did you mean 'ignore_index'? (it takes: ignore_index, reduction; a name with a dialect prefix, `dialect.name`, is kept as is)}}
  %0 = hl.cross_entropy %x, %t {ignore_idx = -1} : tensor<4x8xf32>, tensor<4xi32>
  return %0 : tensor<f32>
}

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'hl.relu' op has no attribute 'inplace' (it takes none)}}
  %0 = hl.relu %x {inplace = true} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A far-off name gets the list without a guess.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'hl.matmul' op has no attribute 'precision' (it takes:}}
  %0 = hl.matmul %a, %b {precision = "highest"} : tensor<4x8xf32>, tensor<8x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// A symbol every printer writes back: `@""` printed as no symbol that parses.
// expected-error @+1 {{'hl.param' op a parameter needs a name}}
hl.param @"" : tensor<4x4xf32> owner "" init <zeros>

// -----

// An integer state starts at zeros or ones: a draw of floats has no integer
// meaning (it compiled).
// expected-error @+1 {{'hl.state' op initializer 'normal' of @count draws floats; an integer 'tensor<4xi32>' starts at zeros or ones}}
hl.state @count : tensor<4xi32> slot "count" init <normal, std = 3.0>

// -----

// expected-error @+1 {{'hl.state' op ramp = -5 of @fc1.mask is a count of steps: at least 0}}
hl.state @fc1.mask : tensor<i64> slot "mask" init <zeros> {ramp = -5 : i64}

// -----

// At most one set_state per state in a function (the optimizer refused the
// second after autodiff had run).
hl.state @s : tensor<4xf32> slot "running" init <zeros>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{set first here}}
  hl.set_state @s, %x : tensor<4xf32>
  %y = hl.relu %x : tensor<4xf32>
  // expected-error @+1 {{'hl.set_state' op sets state @s a second time in one function (at most one hl.set_state per state)}}
  hl.set_state @s, %y : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A blob's values were lost by convert-hl-to-ll (or refused as an
// internal error): refused where it is written.
func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{'hl.constant' op takes its values inline (dense<...>); a dense_resource blob is not supported}}
  %c = hl.constant dense_resource<blob1> : tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// alpha finite in f32, as hl.attention's scale.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'hl.gemm' op alpha = INF must be finite in f32}}
  %0 = hl.gemm %a, %b alpha = 0x7FF0000000000000 : tensor<4x8xf32>, tensor<8x3xf32>
  return %0 : tensor<4x3xf32>
}
