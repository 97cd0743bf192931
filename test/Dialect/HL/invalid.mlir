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

// expected-error @+1 {{'hl.param' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
hl.param @p : tensor<4xi32> owner "" init <zeros>

// -----

func.func @f() {
  // expected-error @+1 {{'hl.param' op expects parent op 'builtin.module'}}
  hl.param @p : tensor<4xf32> owner "" init <zeros>
  return
}

// -----

// expected-error @+1 {{unknown initializer 'he_uniform'; expected zeros, ones, normal, uniform, xavier_uniform, xavier_normal, kaiming_uniform or kaiming_normal}}
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

// expected-error @+1 {{initializer bounds must satisfy low < high, got low = 1, high = -1}}
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
  // expected-error @+1 {{'hl.matmul' op contracting dimensions differ: 'tensor<8x3xf32>' has K = 3 but 'tensor<4x5xf32>' has K = 4}}
  %0 = hl.matmul %a, %b : tensor<8x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @f(%a: tensor<8x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'hl.matmul' op contracting dimensions differ: 'tensor<8x3xf32>' has K = 3 but 'tensor<4x5xf32>' (transposed) has K = 5}}
  %0 = hl.matmul %a, %b transpose_rhs : tensor<8x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'hl.linear' op input must have rank >= 1, got 'tensor<f32>'}}
  %0 = hl.linear %x, %w : tensor<f32>, tensor<4x4xf32>
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

// Type inference also checks ops written in the generic form, whose result
// type is spelled out.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+2 {{'hl.matmul' op inferred type(s) 'tensor<4x2xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  // expected-error @+1 {{'hl.matmul' op failed to infer returned types}}
  %0 = "hl.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x4xf32>
  return
}
