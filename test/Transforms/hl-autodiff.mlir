// hl-autodiff on the digits MLP: the VJP structure of cross-entropy, the
// two linear layers and the ReLU, after canonicalize removed the unused
// input gradient and the multiplication by d(loss) = 1.
// RUN: split-file %s %t
// RUN: aicf-opt %t/mlp.mlir --hl-autodiff --canonicalize | FileCheck %s
// RUN: aicf-opt %t/mlp.mlir --hl-autodiff=wrt-inputs=true --canonicalize | FileCheck %s --check-prefix=INPUTS
// RUN: not aicf-opt %t/nofn.mlir --hl-autodiff=function=train 2>&1 | FileCheck %s --check-prefix=NOFN
// RUN: not aicf-opt %t/vector.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=VECTOR
// RUN: not aicf-opt %t/norule.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=NORULE
// RUN: not aicf-opt %t/nograd.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=NOGRAD
// A rounding passes no gradient either (sin beside it does).
// RUN: not aicf-opt %t/rounded.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=ROUNDED
// RUN: aicf-opt %t/sine.mlir --hl-autodiff | FileCheck %s --check-prefix=SINE
// RUN: not aicf-opt %t/noparam.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=NOPARAM
// RUN: not aicf-opt %t/noparam.mlir --aicf-train-pipeline 2>&1 | FileCheck %s --check-prefix=NOPARAM
// RUN: aicf-opt %t/nohl.mlir --hl-autodiff=wrt-inputs | FileCheck %s --check-prefix=NOHL
// RUN: not aicf-opt %t/dynamic.mlir --hl-autodiff 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// RUN: not aicf-opt %t/bf16loss.mlir --hl-optimizer=accumulate 2>&1 | FileCheck %s --check-prefix=BF16LOSS
// RUN: not aicf-opt %t/bf16loss.mlir --hl-optimizer=data-parallel 2>&1 | FileCheck %s --check-prefix=BF16LOSS

// The forward is kept; the gradient function returns the loss, then one
// gradient per hl.param in declaration order.
// CHECK-LABEL: func.func @loss(
// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME: %[[X:.*]]: tensor<32x64xf32>, %[[Y:.*]]: tensor<32xi32>) -> (tensor<f32>, tensor<128x64xf32>, tensor<128xf32>, tensor<10x128xf32>, tensor<10xf32>)
// CHECK-DAG: %[[ZERO:.*]] = hl.constant dense<0.000000e+00> : tensor<f32>
// CHECK-DAG: %[[ONE:.*]] = hl.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[W1:.*]] = hl.get_param @fc1.weight
// CHECK: %[[H:.*]] = hl.linear %[[X]], %[[W1]]
// CHECK: %[[A:.*]] = hl.relu %[[H]]
// CHECK: %[[W2:.*]] = hl.get_param @fc2.weight
// CHECK: %[[LOGITS:.*]] = hl.linear %[[A]], %[[W2]]
// CHECK: %[[LOSS:.*]] = hl.cross_entropy %[[LOGITS]], %[[Y]]
// d logits = (softmax(logits) - onehot(labels)) * d loss / N, seeded with 1
// CHECK: %[[DL:.*]] = hl.cross_entropy_backward %[[LOGITS]], %[[Y]], %[[ONE]] : tensor<32x10xf32>, tensor<32xi32>, tensor<f32>
// Second layer: dA = dL W2, dW2 = dL^T A, db2 = column sums of dL.
// CHECK: %[[W2T:.*]] = hl.transpose %[[W2]] permutation = [1, 0]
// CHECK: %[[DA:.*]] = hl.linear %[[DL]], %[[W2T]]
// CHECK: %[[DW2:.*]] = hl.matmul %[[DL]], %[[A]] transpose_lhs
// CHECK: %[[DB2:.*]] = hl.reduce_sum %[[DL]] axes = [0]
// ReLU: the upstream gradient where the activation is positive (the same
// positions as a positive pre-activation, and the mask then reads only the
// ReLU result).
// CHECK: %[[POS:.*]] = hl.compare gt, %[[A]], %[[ZERO]]
// CHECK: %[[DH:.*]] = hl.select %[[POS]], %[[DA]], %[[ZERO]]
// CHECK: %[[DW1:.*]] = hl.matmul %[[DH]], %[[X]] transpose_lhs
// CHECK: %[[DB1:.*]] = hl.reduce_sum %[[DH]] axes = [0]
// CHECK: return %[[LOSS]], %[[DW1]], %[[DB1]], %[[DW2]], %[[DB2]]

// With wrt-inputs the input's gradient (dH W1) is returned last; the
// integer labels get none.
// INPUTS-LABEL: func.func @loss_grad
// INPUTS-SAME: -> (tensor<f32>, tensor<128x64xf32>, tensor<128xf32>, tensor<10x128xf32>, tensor<10xf32>, tensor<32x64xf32>)
// INPUTS: %[[W1T:.*]] = hl.transpose %{{.*}} permutation = [1, 0] : tensor<128x64xf32>
// INPUTS: %[[DX:.*]] = hl.linear %{{.*}}, %[[W1T]] : tensor<32x128xf32>, tensor<64x128xf32>
// INPUTS: return {{.*}}, %[[DX]] :

// NOFN: error: hl-autodiff: no function @train to differentiate
// VECTOR: vector.mlir:2:3: error: hl-autodiff: the loss must be a floating-point scalar, got tensor<4xf32>
// NORULE: norule.mlir:8:8: error: hl-autodiff: cannot differentiate through 'func.call' (to @square): inline it first
// A loss reached from the parameters only through an integer (argmax)
// trained at a loss of 0 with every gradient 0: refused at the return.
// NOGRAD: nograd.mlir:8:3: error: hl-autodiff: the loss depends on no parameter through differentiable ops
// ROUNDED: rounded.mlir:7:3: error: hl-autodiff: the loss depends on no parameter through differentiable ops
// SINE-LABEL: func.func @loss_grad
// SINE: hl.cos
// SINE-NOT: hl.round
// SINE: return
// A module without parameters compiled a train step that only counted
// steps.
// NOPARAM: noparam.mlir:{{[0-9]+}}:{{[0-9]+}}: error: {{hl-autodiff|hl-optimizer}}: the module declares no parameter (hl.param): there is nothing to differentiate
// The pass builds hl ops in a module that had none (the hl dialect was
// not loaded: "created with unregistered dialect").
// NOHL-LABEL: func.func @loss_grad
// NOHL: hl.constant dense<1.000000e+00>
// A dynamic batch gave "the loss depends on no parameter".
// DYNAMIC: dynamic.mlir:2:1: error: hl-autodiff: tensor<?x8xf32> has a dynamic shape: AICF differentiates static shapes
// Summing a 16-bit loss over micro-batches or replicas failed in lowering.
// BF16LOSS: bf16loss.mlir:2:1: error: hl-optimizer: the loss is tensor<bf16>: data-parallel steps and gradient accumulation sum f32 values

//--- mlp.mlir
hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform>
hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <zeros>
hl.param @fc2.weight : tensor<10x128xf32> owner "fc2" init <kaiming_uniform>
hl.param @fc2.bias : tensor<10xf32> owner "fc2" init <zeros>
func.func @loss(%x: tensor<32x64xf32>, %labels: tensor<32xi32>) -> tensor<f32> {
  %w1 = hl.get_param @fc1.weight : tensor<128x64xf32>
  %b1 = hl.get_param @fc1.bias : tensor<128xf32>
  %h = hl.linear %x, %w1, %b1 : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %a = hl.relu %h : tensor<32x128xf32>
  %w2 = hl.get_param @fc2.weight : tensor<10x128xf32>
  %b2 = hl.get_param @fc2.bias : tensor<10xf32>
  %logits = hl.linear %a, %w2, %b2 : tensor<32x128xf32>, tensor<10x128xf32>, tensor<10xf32>
  %loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>
  return %loss : tensor<f32>
}

//--- nofn.mlir
func.func @loss(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}

//--- vector.mlir
func.func @loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

//--- norule.mlir
hl.param @w : tensor<3xf32> owner "" init <zeros>
func.func @square(%v: tensor<3xf32>) -> tensor<3xf32> {
  %s = hl.mul %v, %v : tensor<3xf32>, tensor<3xf32>
  return %s : tensor<3xf32>
}
func.func @loss() -> tensor<f32> {
  %w = hl.get_param @w : tensor<3xf32>
  %y = func.call @square(%w) : (tensor<3xf32>) -> tensor<3xf32>
  %l = hl.reduce_sum %y axes = [0] : tensor<3xf32>
  return %l : tensor<f32>
}

//--- nograd.mlir
hl.param @w : tensor<3x4xf32> owner "" init <zeros>
func.func @loss(%x: tensor<3x4xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<3x4xf32>
  %y = hl.mul %w, %x : tensor<3x4xf32>, tensor<3x4xf32>
  %i = hl.argmax %y axis = 1 : tensor<3x4xf32>
  %f = hl.cast %i : tensor<3xi64> to tensor<3xf32>
  %l = hl.reduce_sum %f axes = [0] : tensor<3xf32>
  return %l : tensor<f32>
}

//--- rounded.mlir
hl.param @w : tensor<3x4xf32> owner "" init <zeros>
func.func @loss(%x: tensor<3x4xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<3x4xf32>
  %y = hl.mul %w, %x : tensor<3x4xf32>, tensor<3x4xf32>
  %r = hl.round %y : tensor<3x4xf32>
  %l = hl.reduce_sum %r axes = [0, 1] : tensor<3x4xf32>
  return %l : tensor<f32>
}

//--- sine.mlir
hl.param @w : tensor<3x4xf32> owner "" init <zeros>
func.func @loss(%x: tensor<3x4xf32>) -> tensor<f32> {
  %w = hl.get_param @w : tensor<3x4xf32>
  %y = hl.mul %w, %x : tensor<3x4xf32>, tensor<3x4xf32>
  %s = hl.sin %y : tensor<3x4xf32>
  %r = hl.round %y : tensor<3x4xf32>
  %a = hl.add %s, %r : tensor<3x4xf32>, tensor<3x4xf32>
  %l = hl.reduce_sum %a axes = [0, 1] : tensor<3x4xf32>
  return %l : tensor<f32>
}

//--- noparam.mlir
func.func @loss(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %l = hl.cross_entropy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  return %l : tensor<f32>
}

//--- nohl.mlir
func.func @loss(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}

//--- dynamic.mlir
hl.param @fc.w : tensor<8x8xf32> owner "fc" init <zeros>
func.func @loss(%x: tensor<?x8xf32>, %t: tensor<?x8xf32>) -> tensor<f32> {
  %w = hl.get_param @fc.w : tensor<8x8xf32>
  %h = hl.linear %x, %w : tensor<?x8xf32>, tensor<8x8xf32>
  %l = hl.mse_loss %h, %t : tensor<?x8xf32>, tensor<?x8xf32>
  return %l : tensor<f32>
}

//--- bf16loss.mlir
hl.param @w : tensor<3x4xf32> owner "" init <zeros>
func.func @loss(%x: tensor<3x4xbf16>) -> tensor<bf16> {
  %w = hl.get_param @w : tensor<3x4xf32>
  %c = hl.cast %w : tensor<3x4xf32> to tensor<3x4xbf16>
  %y = hl.mul %c, %x : tensor<3x4xbf16>, tensor<3x4xbf16>
  %l = hl.reduce_sum %y axes = [0, 1] : tensor<3x4xbf16>
  return %l : tensor<bf16>
}
