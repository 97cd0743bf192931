//===- HLOps.td - hl dialect operations --------------------*- tablegen -*-===//
//
// The operations of `hl`: what MLPs, CNNs and transformer language models are
// written with. Every op states its shape rule in its description; the rule
// is checked by the op's type inference or verifier and reported on the op.
//
//===----------------------------------------------------------------------===//

#ifndef AICF_DIALECT_HL_HLOPS_TD
#define AICF_DIALECT_HL_HLOPS_TD

include "aicf/Dialect/HL/HLBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def HL_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def HL_IndexTensor : RankedTensorOf<[I32, I64]>;
def HL_NumericTensor : RankedTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def HL_BoolTensor : RankedTensorOf<[I1]>;
def HL_Tensor : RankedTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;
def HL_I64Scalar : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))";
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def HL_ParamOp : HL_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "declares a trainable parameter";
  let description = [{
    Declares a trainable tensor of the model as a module-level symbol. The
    symbol name is the parameter's full path (`blocks.0.attn.q_proj.weight`),
    `owner` is the path of the layer that owns it and must be a prefix of the
    name followed by a `.` (or empty for a parameter that belongs to the
    model itself), and `init` says how the runtime initialises it. Autodiff,
    the optimizer and model rewrites find the trainable state of a model by
    walking these ops.

    ```mlir
    hl.param @fc1.weight : tensor<128x64xf32> owner "fc1"
        init <kaiming_uniform, gain = 4.472136e-01>
    hl.param @fc1.bias : tensor<128xf32> owner "fc1"
        init <uniform, low = -1.250000e-01, high = 1.250000e-01>
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<HL_FloatTensor>:$type,
    StrAttr:$owner,
    HL_InitAttr:$init
  );
  let assemblyFormat = [{
    $sym_name `:` $type `owner` $owner `init` $init attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def HL_GetParamOp : HL_Op<"get_param",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads the current value of a parameter";
  let description = [{
    Yields the value of the parameter named by `name`, which must be an
    `hl.param` of the enclosing module with exactly the result's type.

    ```mlir
    %w = hl.get_param @fc1.weight : tensor<128x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}


def HL_StateOp : HL_Op<"state",
    [Symbol, HasParent<"::mlir::ModuleOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "declares a slot of optimizer state";
  let description = [{
    A tensor the optimizer keeps between steps, as a module-level symbol:
    `slot` names what it is (`momentum`, `exp_avg`, `exp_avg_sq`, `step`)
    and `param`, when given, the `hl.param` it belongs to, whose type it
    then has. `init` is its value before the first step. The train step
    reads it with `hl.get_state` and returns its next value; checkpoints and
    model rewrites carry it with its parameter.

    ```mlir
    hl.state @fc1.weight.exp_avg : tensor<128x64xf32> of @fc1.weight
        slot "exp_avg" init <zeros>
    hl.state @step : tensor<i64> slot "step" init <zeros>
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<HL_Tensor>:$type,
    OptionalAttr<FlatSymbolRefAttr>:$param,
    StrAttr:$slot,
    HL_InitAttr:$init
  );
  let assemblyFormat = [{
    $sym_name `:` $type (`of` $param^)? `slot` $slot `init` $init attr-dict
  }];
}

def HL_GetStateOp : HL_Op<"get_state",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads the current value of an optimizer state slot";
  let description = [{
    Yields the value of the `hl.state` named by `name`, which must have
    exactly the result's type.

    ```mlir
    %m = hl.get_state @fc1.weight.exp_avg : tensor<128x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def HL_ConstantOp : HL_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor whose value is known at compile time, dense or splat.

    ```mlir
    %zero = hl.constant dense<0.0> : tensor<4xf32>
    %eye = hl.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise: binary with broadcasting
//===----------------------------------------------------------------------===//

class HL_BroadcastBinaryOp<string mnemonic, list<Trait> traits = [],
                           Type operandType = HL_NumericTensor>
    : HL_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasFolder = 1;
}

def HL_AddOp : HL_BroadcastBinaryOp<"add", [Commutative]> {
  let summary = "elementwise addition with broadcasting";
  let description = [{
    `lhs + rhs` with NumPy broadcasting: shapes are aligned from the right,
    and each pair of dimensions must be equal or one of them 1. Both
    operands have the same element type; the result has the broadcast shape.
    Folds on constants, and `x + 0` to `x` when the result has `x`'s type
    (the sign of a zero result is not preserved).

    ```mlir
    %y = hl.add %x, %b : tensor<32x128xf32>, tensor<128xf32>
    ```
  }];
}

def HL_SubOp : HL_BroadcastBinaryOp<"sub"> {
  let summary = "elementwise subtraction with broadcasting";
  let description = [{
    `lhs - rhs` with NumPy broadcasting (see `hl.add`).

    ```mlir
    %d = hl.sub %x, %mean : tensor<32x128xf32>, tensor<32x1xf32>
    ```
  }];
}

def HL_MulOp : HL_BroadcastBinaryOp<"mul", [Commutative]> {
  let summary = "elementwise multiplication with broadcasting";
  let description = [{
    `lhs * rhs` with NumPy broadcasting (see `hl.add`). Folds on constants
    and when one side is a one of the other's type.

    ```mlir
    %y = hl.mul %x, %s : tensor<32x128xf32>, tensor<1x128xf32>
    ```
  }];
}

def HL_DivOp : HL_BroadcastBinaryOp<"div"> {
  let summary = "elementwise division with broadcasting";
  let description = [{
    `lhs / rhs` with NumPy broadcasting (see `hl.add`); integer division
    truncates toward zero.

    ```mlir
    %y = hl.div %x, %n : tensor<32x128xf32>, tensor<f32>
    ```
  }];
}

def HL_PowOp : HL_BroadcastBinaryOp<"pow", [], HL_FloatTensor> {
  let summary = "elementwise power with broadcasting";
  let description = [{
    `lhs ^ rhs` with NumPy broadcasting (see `hl.add`), on floats.

    ```mlir
    %sq = hl.pow %x, %two : tensor<32x128xf32>, tensor<f32>
    ```
  }];
}

def HL_MaxOp : HL_BroadcastBinaryOp<"max", [Commutative]> {
  let summary = "elementwise maximum with broadcasting";
  let description = [{
    `max(lhs, rhs)` with NumPy broadcasting (see `hl.add`). A NaN on either
    side gives NaN, as `torch.maximum`.

    ```mlir
    %y = hl.max %x, %floor : tensor<32x128xf32>, tensor<f32>
    ```
  }];
}

def HL_MinOp : HL_BroadcastBinaryOp<"min", [Commutative]> {
  let summary = "elementwise minimum with broadcasting";
  let description = [{
    `min(lhs, rhs)` with NumPy broadcasting (see `hl.add`), NaN-propagating.

    ```mlir
    %y = hl.min %x, %ceil : tensor<32x128xf32>, tensor<f32>
    ```
  }];
}

def HL_CompareOp : HL_Op<"compare", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting";
  let description = [{
    Compares `lhs` and `rhs` with NumPy broadcasting (see `hl.add`) and
    yields an `i1` tensor of the broadcast shape. Comparisons with NaN are
    false except `ne`. Not differentiable.

    ```mlir
    %pos = hl.compare gt, %x, %zero : tensor<32x128xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins
    HL_ComparePredicate:$predicate,
    HL_NumericTensor:$lhs,
    HL_NumericTensor:$rhs
  );
  let results = (outs HL_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def HL_SelectOp : HL_Op<"select", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise choice with broadcasting";
  let description = [{
    `cond ? on_true : on_false`, the three operands broadcast together
    (NumPy rules, see `hl.add`). The branches have the same element type.

    ```mlir
    %y = hl.select %mask, %x, %zero
        : tensor<32x128xi1>, tensor<32x128xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins
    HL_BoolTensor:$condition,
    HL_NumericTensor:$on_true,
    HL_NumericTensor:$on_false
  );
  let results = (outs HL_NumericTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict
    `:` type($condition) `,` type($on_true) `,` type($on_false)
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise: unary
//===----------------------------------------------------------------------===//

class HL_UnaryOp<string mnemonic, Type operandType = HL_FloatTensor,
                 list<Trait> traits = []>
    : HL_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def HL_NegOp : HL_UnaryOp<"neg", HL_NumericTensor> {
  let summary = "elementwise negation, -x";
  let description = [{
    ```mlir
    %y = hl.neg %x : tensor<4x5xf32>
    ```
  }];
}

def HL_AbsOp : HL_UnaryOp<"abs", HL_NumericTensor> {
  let summary = "elementwise absolute value, |x|";
  let description = [{
    The gradient at 0 is taken as 0 (sign(0) = 0), as in PyTorch.

    ```mlir
    %y = hl.abs %x : tensor<4x5xf32>
    ```
  }];
}

def HL_ExpOp : HL_UnaryOp<"exp"> {
  let summary = "elementwise natural exponential, e^x";
  let description = [{
    ```mlir
    %y = hl.exp %x : tensor<4x5xf32>
    ```
  }];
}

def HL_LogOp : HL_UnaryOp<"log"> {
  let summary = "elementwise natural logarithm";
  let description = [{
    `log(x)`; `-inf` at 0 and NaN below 0, as IEEE.

    ```mlir
    %y = hl.log %x : tensor<4x5xf32>
    ```
  }];
}

def HL_ErfOp : HL_UnaryOp<"erf"> {
  let summary = "elementwise Gauss error function";
  let description = [{
    `erf(x) = 2/sqrt(pi) * integral from 0 to x of e^(-t^2) dt`; what the
    exact `gelu` and its gradient are written with.

    ```mlir
    %y = hl.erf %x : tensor<4x5xf32>
    ```
  }];
}

def HL_SqrtOp : HL_UnaryOp<"sqrt"> {
  let summary = "elementwise square root";
  let description = [{
    ```mlir
    %y = hl.sqrt %x : tensor<4x5xf32>
    ```
  }];
}

def HL_RsqrtOp : HL_UnaryOp<"rsqrt"> {
  let summary = "elementwise reciprocal square root, 1 / sqrt(x)";
  let description = [{
    ```mlir
    %y = hl.rsqrt %var : tensor<32x1xf32>
    ```
  }];
}

def HL_TanhOp : HL_UnaryOp<"tanh"> {
  let summary = "elementwise hyperbolic tangent";
  let description = [{
    ```mlir
    %y = hl.tanh %x : tensor<4x5xf32>
    ```
  }];
}

def HL_SigmoidOp : HL_UnaryOp<"sigmoid"> {
  let summary = "elementwise logistic function, 1 / (1 + e^-x)";
  let description = [{
    ```mlir
    %y = hl.sigmoid %x : tensor<4x5xf32>
    ```
  }];
}

def HL_ReluOp : HL_UnaryOp<"relu"> {
  let summary = "rectified linear unit, max(x, 0)";
  let description = [{
    Elementwise `max(x, 0)` on a floating-point tensor; the gradient at 0 is
    taken as 0, as in PyTorch.

    ```mlir
    %h = hl.relu %x : tensor<32x128xf32>
    ```
  }];
}

def HL_SiluOp : HL_UnaryOp<"silu"> {
  let summary = "sigmoid linear unit, x * sigmoid(x)";
  let description = [{
    ```mlir
    %h = hl.silu %x : tensor<32x128xf32>
    ```
  }];
}

def HL_GeluOp : HL_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)` with the standard normal CDF computed exactly through `erf`
    (`approximate = none`, the default) or with the tanh approximation
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (`approximate = tanh`),
    as `torch.nn.functional.gelu`.

    ```mlir
    %h = hl.gelu %x : tensor<32x128xf32>
    %g = hl.gelu %x approximate = tanh : tensor<32x128xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    DefaultValuedAttr<HL_GeluApproximation, "::hl::GeluApproximation::None">:$approximate
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `=` $approximate^)? attr-dict `:` type($input)
  }];
  let hasFolder = 1;
}

def HL_CastOp : HL_Op<"cast", [Pure]> {
  let summary = "converts the element type";
  let description = [{
    Converts every element to the result's element type; the shape stays.
    Float to float rounds to nearest even, float to integer truncates toward
    zero, integer to float rounds to nearest. A cast to the same type folds
    away, a cast of a constant folds into a constant.

    ```mlir
    %h = hl.cast %x : tensor<32x128xf32> to tensor<32x128xbf16>
    %f = hl.cast %labels : tensor<32xi32> to tensor<32xf32>
    ```
  }];
  let arguments = (ins HL_Tensor:$input);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def HL_MatmulOp : HL_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "matrix product, optionally batched and transposed";
  let description = [{
    Multiplies the last two dimensions of `lhs` and `rhs`; leading
    dimensions are batch dimensions and must be equal. `transpose_lhs` and
    `transpose_rhs` swap the last two dimensions of an operand before the
    product. With `lhs: [B..., M, K]` and `rhs: [B..., K, N]` (after the
    transposes) the result is `[B..., M, N]`. Both operands have rank >= 2
    and the same element type.

    ```mlir
    %c = hl.matmul %a, %b : tensor<8x64xf32>, tensor<64x32xf32>
    %d = hl.matmul %a, %w transpose_rhs : tensor<8x64xf32>, tensor<32x64xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$lhs,
    HL_FloatTensor:$rhs,
    UnitAttr:$transpose_lhs,
    UnitAttr:$transpose_rhs
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def HL_LinearOp : HL_Op<"linear", [Pure, InferTypeOpAdaptor]> {
  let summary = "affine layer, x @ W^T + b";
  let description = [{
    PyTorch's `nn.Linear`: `input: [..., in]`, `weight: [out, in]` and an
    optional `bias: [out]` give `[..., out]`. All three have the same element
    type.

    ```mlir
    %y = hl.linear %x, %w, %b : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
    %z = hl.linear %x, %w : tensor<32x64xf32>, tensor<128x64xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    HL_FloatTensor:$weight,
    Optional<HL_FloatTensor>:$bias
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)?
  }];
}

def HL_GemmOp : HL_Op<"gemm",
    [Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "matrix product with a fused epilogue";
  let description = [{
    What `hl-fuse-gemm-epilogue` makes of a matmul or linear and the
    elementwise ops that follow it, to become one GEMM kernel:

    ```
    y = alpha * op(lhs) @ op(rhs)      (op: transpose_lhs / transpose_rhs)
    y = y + bias                        (bias [N], broadcast over rows)
    y = act(y)                          (none, relu, gelu, gelu_tanh, silu, tanh, sigmoid)
    y = mask > 0 ? y : 0                (mask: a ReLU's derivative in backward)
    y = y + residual
    ```

    With `sum_lhs` (rank-2 operands only) the op has a second result,
    `lhs_sum[m] = sum_k op(lhs)[m, k]`: for the weight gradient of a linear
    layer, `dW = dY^T X` (`transpose_lhs`), that is the column sums of `dY`,
    the bias gradient, read while the GEMM streams `dY` anyway.

    Shapes as `hl.matmul` (equal ranks >= 2, batch dimensions equal), or as
    `hl.linear` when `rhs` has rank 2 and `lhs` a higher rank (the leading
    dimensions of `lhs` are rows). `mask` and `residual` have the result's
    type.

    ```mlir
    %h = hl.gemm %x, %w bias(%b) transpose_rhs act = relu
        : tensor<32x64xf32>, tensor<128x64xf32> bias tensor<128xf32>
    %dx = hl.gemm %dy, %w mask(%h) : tensor<32x128xf32>, tensor<128x64xf32>
        mask tensor<32x64xf32>
    %dw, %db = hl.gemm %dy, %x transpose_lhs sum_lhs
        : tensor<32x128xf32>, tensor<32x64xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$lhs,
    HL_FloatTensor:$rhs,
    Optional<HL_FloatTensor>:$bias,
    Optional<HL_FloatTensor>:$mask,
    Optional<HL_FloatTensor>:$residual,
    UnitAttr:$transpose_lhs,
    UnitAttr:$transpose_rhs,
    DefaultValuedAttr<F64Attr, "1.0">:$alpha,
    DefaultValuedAttr<HL_Activation, "::hl::Activation::None">:$act,
    UnitAttr:$sum_lhs
  );
  let results = (outs HL_FloatTensor:$result, Optional<HL_FloatTensor>:$lhs_sum);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` `(` $bias^ `)`)? (`mask` `(` $mask^ `)`)?
    (`residual` `(` $residual^ `)`)? (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? (`alpha` `=` $alpha^)? (`act` `=` $act^)?
    (`sum_lhs` $sum_lhs^)? attr-dict `:` type($lhs) `,` type($rhs) (`bias` type($bias)^)?
    (`mask` type($mask)^)? (`residual` type($residual)^)?
  }];
}

def HL_FusedElementwiseOp : HL_Op<"fused_elementwise",
    [Pure, SingleBlockImplicitTerminator<"::hl::YieldOp">]> {
  let summary = "a group of elementwise ops fused into one scalar body";
  let description = [{
    What `hl-fuse-elementwise` makes of a chain of elementwise ops: `body`
    runs once per element of the results, taking one scalar per input (in
    order) and yielding one scalar per result. Inputs broadcast to the
    results' shape with NumPy's rule; all results share one shape. The body
    holds only side-effect-free scalar `arith` and `math` ops.

    ```mlir
    %y = hl.fused_elementwise ins(%x, %b : tensor<32x128xf32>, tensor<128xf32>)
        -> tensor<32x128xf32> {
    ^bb0(%xv: f32, %bv: f32):
      %s = arith.addf %xv, %bv : f32
      %z = arith.constant 0.0 : f32
      %r = arith.maximumf %s, %z : f32
      hl.yield %r : f32
    }
    ```
  }];
  let arguments = (ins Variadic<HL_Tensor>:$inputs);
  let results = (outs Variadic<HL_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `->` type($results) $body attr-dict
  }];
  let hasVerifier = 1;
}

def HL_MultiTensorApplyOp : HL_Op<"multi_tensor_apply",
    [Pure, SingleBlockImplicitTerminator<"::hl::YieldOp">]> {
  let summary = "one elementwise body applied to several groups of tensors";
  let description = [{
    What `hl-fuse-optimizer` makes of the per-parameter update kernels of a
    train step: one kernel that runs the same scalar body over several
    independent groups. With a body of `k` arguments yielding `m` scalars,
    the inputs are `G` groups of `k` tensors (group-major) and the results
    `G` groups of `m` tensors; group `g` is exactly an
    `hl.fused_elementwise` of inputs `[g*k, (g+1)*k)` and results
    `[g*m, (g+1)*m)`, so every group has its own shape and broadcasting.

    ```mlir
    %w1n, %w2n = hl.multi_tensor_apply
        ins(%gw1, %lr, %w1, %gw2, %lr, %w2 : tensor<128x64xf32>, tensor<f32>,
            tensor<128x64xf32>, tensor<10x128xf32>, tensor<f32>, tensor<10x128xf32>)
        -> tensor<128x64xf32>, tensor<10x128xf32> {
    ^bb0(%g: f32, %r: f32, %p: f32):
      %s = arith.mulf %g, %r : f32
      %n = arith.subf %p, %s : f32
      hl.yield %n : f32
    }
    ```
  }];
  let arguments = (ins Variadic<HL_Tensor>:$inputs);
  let results = (outs Variadic<HL_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `->` type($results) $body attr-dict
  }];
  let hasVerifier = 1;
}

def HL_YieldOp : HL_Op<"yield",
    [Pure, Terminator, ParentOneOf<["FusedElementwiseOp", "MultiTensorApplyOp"]>]> {
  let summary = "yields the scalars of a fused elementwise body";
  let description = [{
    Terminates an `hl.fused_elementwise` or `hl.multi_tensor_apply` body
    with one scalar per result (per group), of that result's element type.

    ```mlir
    hl.yield %r : f32
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class HL_ReduceOp<string mnemonic, Type operandType = HL_NumericTensor>
    : HL_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let arguments = (ins
    operandType:$input,
    DenseI64ArrayAttr:$axes,
    UnitAttr:$keepdim
  );
  let results = (outs operandType:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes (`keepdim` $keepdim^)? attr-dict `:` type($input)
  }];
}

def HL_ReduceSumOp : HL_ReduceOp<"reduce_sum"> {
  let summary = "sum over a list of axes";
  let description = [{
    Sums `input` over `axes`: distinct, ascending, each in `[0, rank)`, at
    least one. The reduced axes are dropped from the result, or kept with
    size 1 under `keepdim`.

    ```mlir
    %s = hl.reduce_sum %x axes = [0] : tensor<32x128xf32>
    %r = hl.reduce_sum %x axes = [1] keepdim : tensor<32x128xf32>
    ```
  }];
}

def HL_ReduceMeanOp : HL_ReduceOp<"reduce_mean", HL_FloatTensor> {
  let summary = "mean over a list of axes";
  let description = [{
    The mean of `input` over `axes`, with `hl.reduce_sum`'s rules for axes
    and `keepdim`.

    ```mlir
    %m = hl.reduce_mean %x axes = [1, 2] keepdim : tensor<8x4x4xf32>
    ```
  }];
}

def HL_ReduceMaxOp : HL_ReduceOp<"reduce_max"> {
  let summary = "maximum over a list of axes";
  let description = [{
    The maximum of `input` over `axes`, with `hl.reduce_sum`'s rules for
    axes and `keepdim`. The gradient flows to every position equal to the
    maximum, split evenly among ties.

    ```mlir
    %m = hl.reduce_max %x axes = [1] keepdim : tensor<32x10xf32>
    ```
  }];
}

def HL_ArgmaxOp : HL_Op<"argmax", [Pure, InferTypeOpAdaptor]> {
  let summary = "index of the maximum along one axis";
  let description = [{
    The `i64` index of the largest element along `axis` (the first one on
    ties), the axis dropped or kept with size 1 under `keepdim`. Not
    differentiable.

    ```mlir
    %pred = hl.argmax %logits axis = 1 : tensor<32x10xf32>
    ```
  }];
  let arguments = (ins HL_NumericTensor:$input, I64Attr:$axis, UnitAttr:$keepdim);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis (`keepdim` $keepdim^)? attr-dict `:` type($input)
  }];
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

class HL_SoftmaxLikeOp<string mnemonic>
    : HL_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins HL_FloatTensor:$input, I64Attr:$axis);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def HL_SoftmaxOp : HL_SoftmaxLikeOp<"softmax"> {
  let summary = "softmax along one axis";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along `axis` in `[0, rank)`.

    ```mlir
    %p = hl.softmax %scores axis = 3 : tensor<2x4x16x16xf32>
    ```
  }];
}

def HL_LogSoftmaxOp : HL_SoftmaxLikeOp<"log_softmax"> {
  let summary = "log of the softmax along one axis";
  let description = [{
    `x - max - log(sum(exp(x - max)))` along `axis` in `[0, rank)`,
    computed without forming the softmax.

    ```mlir
    %lp = hl.log_softmax %logits axis = 1 : tensor<32x10xf32>
    ```
  }];
}

def HL_LayerNormOp : HL_Op<"layer_norm",
    [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    PyTorch's `layer_norm`: normalises `input` over its last `dims`
    dimensions, `(x - mean) / sqrt(var + eps)` with the biased variance,
    then multiplies by `weight` and adds `bias` where given (a bias only
    with a weight, as `nn.LayerNorm`). `weight` and `bias` have the shape of
    those trailing dimensions and the input's element type.

    ```mlir
    %y = hl.layer_norm %x weight %g bias %b dims = 1 eps = 1.0e-05
        : tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    %z = hl.layer_norm %x dims = 2 eps = 1.0e-05 : tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    Optional<HL_FloatTensor>:$weight,
    Optional<HL_FloatTensor>:$bias,
    ConfinedAttr<I64Attr, [IntPositive]>:$dims,
    F64Attr:$eps
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? `dims` `=` $dims `eps` `=` $eps
    attr-dict `:` type($input) (`,` type($weight)^)? (`,` type($bias)^)?
  }];
}

def HL_RMSNormOp : HL_Op<"rms_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "root-mean-square normalisation over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2) + eps)` over the last `dims` dimensions, times
    `weight` where given (PyTorch's `rms_norm`). `weight` has the shape of
    those trailing dimensions.

    ```mlir
    %y = hl.rms_norm %x weight %g dims = 1 eps = 1.0e-06
        : tensor<8x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    Optional<HL_FloatTensor>:$weight,
    ConfinedAttr<I64Attr, [IntPositive]>:$dims,
    F64Attr:$eps
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? `dims` `=` $dims `eps` `=` $eps
    attr-dict `:` type($input) (`,` type($weight)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def HL_CrossEntropyOp : HL_Op<"cross_entropy", [Pure, InferTypeOpAdaptor]> {
  let summary = "softmax cross-entropy over integer class labels";
  let description = [{
    `logits: [..., C]` are unnormalised class scores, `labels: [...]` (the
    logits' shape without the class axis) hold class indices in `[0, C)`.
    The result is a scalar (rank-0 tensor of the logits' element type): the
    mean (default) or the sum over all positions of
    `logsumexp(logits[i]) - logits[i, labels[i]]`. Positions whose label
    equals `ignore_index` contribute nothing and are not counted in the
    mean.

    ```mlir
    %loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>
    %total = hl.cross_entropy %logits, %labels reduction = sum
        : tensor<32x10xf32>, tensor<32xi32>
    %lm = hl.cross_entropy %logits, %targets ignore_index = -1
        : tensor<4x64x65xf32>, tensor<4x64xi64>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$logits,
    HL_IndexTensor:$labels,
    DefaultValuedAttr<HL_Reduction, "::hl::Reduction::Mean">:$reduction,
    OptionalAttr<I64Attr>:$ignore_index
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`reduction` `=` $reduction^)?
    (`ignore_index` `=` $ignore_index^)? attr-dict
    `:` type($logits) `,` type($labels)
  }];
}

def HL_CrossEntropyBackwardOp : HL_Op<"cross_entropy_backward",
    [Pure, AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of cross_entropy with respect to its logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad_output`, divided by the
    number of counted positions under `mean`, and zero at positions whose
    label is `ignore_index`. `grad_output` is the gradient of the loss (a
    scalar of the logits' element type); shapes and attributes as
    `hl.cross_entropy`. What `hl-autodiff` emits for a cross-entropy.

    ```mlir
    %dl = hl.cross_entropy_backward %logits, %labels, %g
        : tensor<32x10xf32>, tensor<32xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$logits,
    HL_IndexTensor:$labels,
    HL_FloatTensor:$grad_output,
    DefaultValuedAttr<HL_Reduction, "::hl::Reduction::Mean">:$reduction,
    OptionalAttr<I64Attr>:$ignore_index
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad_output (`reduction` `=` $reduction^)?
    (`ignore_index` `=` $ignore_index^)? attr-dict
    `:` type($logits) `,` type($labels) `,` type($grad_output)
  }];
  let hasVerifier = 1;
}

def HL_SoftmaxCrossEntropyOp : HL_Op<"softmax_cross_entropy",
    [Pure, AllTypesMatch<["logits", "grad"]>]> {
  let summary = "cross-entropy and its gradient in one op (one kernel)";
  let description = [{
    `hl.cross_entropy` and `hl.cross_entropy_backward` of the same logits,
    labels and attributes, computed together: each row's softmax is formed
    once for both. What `hl-fuse-reductions` makes of the pair.

    ```mlir
    %loss, %dl = hl.softmax_cross_entropy %logits, %labels, %g
        : tensor<32x10xf32>, tensor<32xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$logits,
    HL_IndexTensor:$labels,
    HL_FloatTensor:$grad_output,
    DefaultValuedAttr<HL_Reduction, "::hl::Reduction::Mean">:$reduction,
    OptionalAttr<I64Attr>:$ignore_index
  );
  let results = (outs HL_FloatTensor:$loss, HL_FloatTensor:$grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad_output (`reduction` `=` $reduction^)?
    (`ignore_index` `=` $ignore_index^)? attr-dict
    `:` type($logits) `,` type($labels) `,` type($grad_output)
    `->` type($loss)
  }];
  let hasVerifier = 1;
}

def HL_MseLossOp : HL_Op<"mse_loss", [Pure, InferTypeOpAdaptor]> {
  let summary = "mean squared error";
  let description = [{
    `(input - target)^2` over all elements, reduced to a scalar by mean
    (default) or sum. Both operands have the same type.

    ```mlir
    %l = hl.mse_loss %pred, %target : tensor<32x1xf32>, tensor<32x1xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    HL_FloatTensor:$target,
    DefaultValuedAttr<HL_Reduction, "::hl::Reduction::Mean">:$reduction
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target (`reduction` `=` $reduction^)? attr-dict
    `:` type($input) `,` type($target)
  }];
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def HL_ReshapeOp : HL_Op<"reshape", [Pure]> {
  let summary = "the same elements in a new shape";
  let description = [{
    Reinterprets `input` in row-major order with the result's static shape;
    both hold the same number of elements of the same type. A reshape to the
    input's type folds away and a reshape of a reshape reads the original.

    ```mlir
    %flat = hl.reshape %img : tensor<32x1x8x8xf32> to tensor<32x64xf32>
    ```
  }];
  let arguments = (ins HL_Tensor:$input);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def HL_TransposeOp : HL_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permutes the dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`, as
    `torch.permute`. The identity permutation folds away and a transpose of
    a transpose composes into one.

    ```mlir
    %t = hl.transpose %x permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins HL_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input)
  }];
  let hasFolder = 1;
}

def HL_BroadcastToOp : HL_Op<"broadcast_to", [Pure]> {
  let summary = "broadcasts to a larger shape";
  let description = [{
    Stretches `input` to the result's shape by NumPy's rules: aligned from
    the right, each input dimension equal to the result's or 1. A broadcast
    to the input's own type folds away.

    ```mlir
    %b = hl.broadcast_to %bias : tensor<128xf32> to tensor<32x128xf32>
    ```
  }];
  let arguments = (ins HL_Tensor:$input);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def HL_ConcatOp : HL_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "joins tensors along one axis";
  let description = [{
    Concatenates one or more tensors of the same rank and element type along
    `axis`; every other dimension must agree.

    ```mlir
    %c = hl.concat %a, %b axis = 1 : tensor<4x3xf32>, tensor<4x5xf32>
    ```
  }];
  let arguments = (ins Variadic<HL_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = "$inputs `axis` `=` $axis attr-dict `:` type($inputs)";
}

def HL_SliceOp : HL_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "a strided window of a tensor";
  let description = [{
    Takes, in each dimension `d`, the indices `start[d], start[d] +
    strides[d], ...` below `limit[d]`, like `x[start:limit:stride]`; the
    result dimension is `ceil((limit - start) / stride)`. Requires
    `0 <= start <= limit <= size` and `stride >= 1`. A slice that takes
    everything folds away.

    ```mlir
    %s = hl.slice %x start = [0, 2] limit = [4, 10] strides = [1, 2]
        : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins
    HL_Tensor:$input,
    DenseI64ArrayAttr:$start,
    DenseI64ArrayAttr:$limit,
    DenseI64ArrayAttr:$strides
  );
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = [{
    $input `start` `=` $start `limit` `=` $limit `strides` `=` $strides
    attr-dict `:` type($input)
  }];
  let hasFolder = 1;
}

def HL_GatherOp : HL_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "selects slices along an axis by index (embedding lookup)";
  let description = [{
    `torch.index_select` generalised to an index tensor of any rank (NumPy's
    `take` along an axis): with `input: [A..., n, B...]` and
    `indices: [I...]`, the result is `[A..., I..., B...]`. An embedding
    lookup is a gather on axis 0 of the table. Indices outside `[0, n)` are
    an error at run time. Differentiable in `input` only.

    ```mlir
    %e = hl.gather %table[%tokens] axis = 0 : tensor<65x64xf32>, tensor<4x32xi32>
    ```
  }];
  let arguments = (ins HL_Tensor:$input, HL_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` `axis` `=` $axis attr-dict `:` type($input) `,`
    type($indices)
  }];
}

//===----------------------------------------------------------------------===//
// Vision
//===----------------------------------------------------------------------===//

def HL_Conv2dOp : HL_Op<"conv2d", [Pure, InferTypeOpAdaptor]> {
  let summary = "2-D convolution (cross-correlation), PyTorch's conv2d";
  let description = [{
    `input` is `[N, C, H, W]` (`layout = nchw`, the default) or `[N, H, W, C]`
    (`layout = nhwc`); `weight` is always `[O, C / groups, KH, KW]` and the
    optional `bias` `[O]`. `stride`, `padding` (zeros, both sides) and
    `dilation` are `[h, w]`; `C` and `O` must be divisible by `groups`. The
    output has the input's layout with
    `H' = (H + 2 ph - dh (KH - 1) - 1) / sh + 1` (and the same for W).

    ```mlir
    %y = hl.conv2d %x, %w, %b stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] groups = 1
        : tensor<32x1x8x8xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>
    %z = hl.conv2d %x, %w stride = [2, 2] padding = [0, 0] dilation = [1, 1]
        groups = 1 layout = nhwc : tensor<32x8x8x4xf32>, tensor<8x4x3x3xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    HL_FloatTensor:$weight,
    Optional<HL_FloatTensor>:$bias,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DenseI64ArrayAttr:$dilation,
    ConfinedAttr<I64Attr, [IntPositive]>:$groups,
    DefaultValuedAttr<HL_Layout, "::hl::Layout::NCHW">:$layout
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation `groups` `=` $groups (`layout` `=` $layout^)?
    attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?
  }];
}

class HL_Pool2dOp<string mnemonic> : HL_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let results = (outs HL_FloatTensor:$result);
}

def HL_MaxPool2dOp : HL_Pool2dOp<"max_pool2d"> {
  let summary = "2-D max pooling";
  let description = [{
    The maximum over each `kernel` window of every channel, windows moved by
    `stride`, with `padding` (of -inf) on both sides, which must be at most
    half the kernel. Output size as `hl.conv2d` with dilation 1; the layout
    attribute as there.

    ```mlir
    %p = hl.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0]
        : tensor<32x16x8x8xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    DenseI64ArrayAttr:$kernel,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DefaultValuedAttr<HL_Layout, "::hl::Layout::NCHW">:$layout
  );
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `stride` `=` $stride `padding` `=` $padding
    (`layout` `=` $layout^)? attr-dict `:` type($input)
  }];
}

def HL_AvgPool2dOp : HL_Pool2dOp<"avg_pool2d"> {
  let summary = "2-D average pooling";
  let description = [{
    The mean over each `kernel` window, rules as `hl.max_pool2d`. Padded
    zeros count in the divisor (PyTorch's default `count_include_pad`).

    ```mlir
    %p = hl.avg_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [0, 0]
        : tensor<32x16x8x8xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    DenseI64ArrayAttr:$kernel,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DefaultValuedAttr<HL_Layout, "::hl::Layout::NCHW">:$layout
  );
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `stride` `=` $stride `padding` `=` $padding
    (`layout` `=` $layout^)? attr-dict `:` type($input)
  }];
}

def HL_Conv2dBackwardInputOp : HL_Op<"conv2d_backward_input", [Pure]> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    Given `grad_output` (the gradient of a `hl.conv2d`'s result) and the
    convolution's `weight` and attributes, the gradient of its input: each
    output position's gradient, times the weight, summed into every input
    position the window read (a transposed convolution). The result type is
    the input's; the verifier checks that `hl.conv2d` of such an input with
    `weight` gives `grad_output`'s type. What `hl-autodiff` emits for conv2d.

    ```mlir
    %dx = hl.conv2d_backward_input %dy, %w stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] groups = 1
        : tensor<32x16x8x8xf32>, tensor<16x1x3x3xf32> -> tensor<32x1x8x8xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$grad_output,
    HL_FloatTensor:$weight,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DenseI64ArrayAttr:$dilation,
    ConfinedAttr<I64Attr, [IntPositive]>:$groups,
    DefaultValuedAttr<HL_Layout, "::hl::Layout::NCHW">:$layout
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $weight `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation `groups` `=` $groups (`layout` `=` $layout^)?
    attr-dict `:` type($grad_output) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def HL_Conv2dBackwardWeightOp : HL_Op<"conv2d_backward_weight", [Pure]> {
  let summary = "gradient of conv2d with respect to its weight";
  let description = [{
    Given `grad_output` and the convolution's `input` and attributes, the
    gradient of its weight: for each weight tap, the sum over the batch and
    the output positions of the gradient times the input value the tap read.
    The result type is the weight's; the verifier checks that `hl.conv2d` of
    `input` with such a weight gives `grad_output`'s type.

    ```mlir
    %dw = hl.conv2d_backward_weight %dy, %x stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] groups = 1
        : tensor<32x16x8x8xf32>, tensor<32x1x8x8xf32> -> tensor<16x1x3x3xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$grad_output,
    HL_FloatTensor:$input,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DenseI64ArrayAttr:$dilation,
    ConfinedAttr<I64Attr, [IntPositive]>:$groups,
    DefaultValuedAttr<HL_Layout, "::hl::Layout::NCHW">:$layout
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $input `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation `groups` `=` $groups (`layout` `=` $layout^)?
    attr-dict `:` type($grad_output) `,` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

class HL_Pool2dBackwardOp<string mnemonic>
    : HL_Op<mnemonic, [Pure, AllTypesMatch<["input", "result"]>]> {
  let arguments = (ins
    HL_FloatTensor:$grad_output,
    HL_FloatTensor:$input,
    DenseI64ArrayAttr:$kernel,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DefaultValuedAttr<HL_Layout, "::hl::Layout::NCHW">:$layout
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $input `kernel` `=` $kernel `stride` `=` $stride
    `padding` `=` $padding (`layout` `=` $layout^)? attr-dict
    `:` type($grad_output) `,` type($input)
  }];
  let hasVerifier = 1;
}

def HL_MaxPool2dBackwardOp : HL_Pool2dBackwardOp<"max_pool2d_backward"> {
  let summary = "gradient of max_pool2d with respect to its input";
  let description = [{
    Routes each window's gradient to the window's maximum in `input`, the
    first one in row-major order on ties (as PyTorch's indices do); windows
    that overlap add. The result has `input`'s type.

    ```mlir
    %dx = hl.max_pool2d_backward %dy, %x kernel = [2, 2] stride = [2, 2]
        padding = [0, 0] : tensor<32x16x4x4xf32>, tensor<32x16x8x8xf32>
    ```
  }];
}

def HL_AvgPool2dBackwardOp : HL_Pool2dBackwardOp<"avg_pool2d_backward"> {
  let summary = "gradient of avg_pool2d with respect to its input";
  let description = [{
    Spreads each window's gradient evenly over the window's kernel area
    (padded positions included in the divisor, as the forward counts them);
    windows that overlap add. `input` gives the shape only.

    ```mlir
    %dx = hl.avg_pool2d_backward %dy, %x kernel = [2, 2] stride = [2, 2]
        padding = [0, 0] : tensor<32x16x4x4xf32>, tensor<32x16x8x8xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def HL_AttentionOp : HL_Op<"attention", [Pure, InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(q k^T * scale [+ causal mask]) v` over the last two dimensions:
    `query: [B..., L, D]`, `key: [B..., S, D]`, `value: [B..., S, Dv]` give
    `[B..., L, Dv]`; leading dimensions must agree. `scale` defaults to
    `1 / sqrt(D)`. Under `causal`, query `i` sees keys `j <= i` (top-left
    aligned, as `is_causal` in PyTorch).

    ```mlir
    %o = hl.attention %q, %k, %v causal
        : tensor<4x4x64x16xf32>, tensor<4x4x64x16xf32>, tensor<4x4x64x16xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$query,
    HL_FloatTensor:$key,
    HL_FloatTensor:$value,
    UnitAttr:$causal,
    OptionalAttr<F64Attr>:$scale
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? (`scale` `=` $scale^)?
    attr-dict `:` type($query) `,` type($key) `,` type($value)
  }];
}

//===----------------------------------------------------------------------===//
// Backward kernels (emitted by hl-autodiff)
//===----------------------------------------------------------------------===//

def HL_SoftmaxBackwardOp : HL_Op<"softmax_backward",
    [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of softmax or log_softmax from its result";
  let description = [{
    From the forward `result` y along `axis` and its upstream gradient g:
    `y * (g - sum(g * y))` for softmax, `g - exp(y) * sum(g)` for
    log_softmax (`log`). One row reduction where the primitive form takes
    a product, a reduction and an update. What `hl-autodiff` emits for
    softmax, log_softmax and attention's probabilities.

    ```mlir
    %dx = hl.softmax_backward %y, %dy axis = 1 : tensor<32x10xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$result_value,
    HL_FloatTensor:$grad_output,
    I64Attr:$axis,
    UnitAttr:$log
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $result_value `,` $grad_output `axis` `=` $axis (`log` $log^)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

def HL_NormBackwardOp : HL_Op<"norm_backward",
    [Pure, AttrSizedResultSegments, AllTypesMatch<["grad_output", "input", "grad_input"]>]> {
  let summary = "gradient of layer_norm or rms_norm";
  let description = [{
    The gradients of a `hl.layer_norm` (or, with `rms`, `hl.rms_norm`) over
    the trailing `dims` dimensions, from its `input`, optional `weight` and
    the upstream gradient. With `xhat` the normalised input, `rstd` the
    reciprocal deviation and `dxhat = grad_output * weight`:
    `grad_input = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`
    (no `mean(dxhat)` term under `rms`); `grad_weight` (present when the
    weight is) `= sum over rows of grad_output * xhat`; `grad_bias`
    (requested with `bias`) `= sum over rows of grad_output`. The row
    statistics are recomputed, so nothing but the input is kept from the
    forward pass.

    ```mlir
    %dx, %dw, %db = hl.norm_backward %dy, %x weight(%w) dims = 1
        eps = 1.000000e-05 bias : tensor<64x128xf32> weight tensor<128xf32>
        -> tensor<64x128xf32> grad_weight tensor<128xf32> grad_bias tensor<128xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$grad_output,
    HL_FloatTensor:$input,
    Optional<HL_FloatTensor>:$weight,
    I64Attr:$dims,
    F64Attr:$eps,
    UnitAttr:$rms,
    UnitAttr:$bias
  );
  let results = (outs
    HL_FloatTensor:$grad_input,
    Optional<HL_FloatTensor>:$grad_weight,
    Optional<HL_FloatTensor>:$grad_bias
  );
  let assemblyFormat = [{
    $grad_output `,` $input (`weight` `(` $weight^ `)`)? `dims` `=` $dims
    `eps` `=` $eps (`rms` $rms^)? (`bias` $bias^)? attr-dict `:` type($input)
    (`weight` type($weight)^)? `->` type($grad_input)
    (`grad_weight` type($grad_weight)^)? (`grad_bias` type($grad_bias)^)?
  }];
  let hasVerifier = 1;
}

def HL_GatherBackwardOp : HL_Op<"gather_backward", [Pure]> {
  let summary = "gradient of gather: a scatter-add into zeros";
  let description = [{
    The adjoint of `hl.gather` on `axis`: a zero tensor of the result type
    (the gathered input's type) to which each slice of `grad_output` is
    added at the index it was taken from; repeated indices add up (an
    embedding's gradient). The verifier checks that gathering `indices`
    from the result type gives `grad_output`'s type.

    ```mlir
    %dt = hl.gather_backward %de[%tokens] axis = 0
        : tensor<4x32x64xf32>, tensor<4x32xi32> -> tensor<65x64xf32>
    ```
  }];
  let arguments = (ins HL_FloatTensor:$grad_output, HL_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `[` $indices `]` `axis` `=` $axis attr-dict
    `:` type($grad_output) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def HL_SliceBackwardOp : HL_Op<"slice_backward", [Pure]> {
  let summary = "gradient of slice: the window written into zeros";
  let description = [{
    The adjoint of `hl.slice` with the same `start`, `limit` and `strides`:
    a zero tensor of the result type (the sliced input's type) with
    `grad_output` at the positions the slice took.

    ```mlir
    %dx = hl.slice_backward %dy start = [0, 2] limit = [4, 10] strides = [1, 2]
        : tensor<4x4xf32> -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins
    HL_Tensor:$grad_output,
    DenseI64ArrayAttr:$start,
    DenseI64ArrayAttr:$limit,
    DenseI64ArrayAttr:$strides
  );
  let results = (outs HL_Tensor:$result);
  let assemblyFormat = [{
    $grad_output `start` `=` $start `limit` `=` $limit `strides` `=` $strides
    attr-dict `:` type($grad_output) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

def HL_DropoutOp : HL_Op<"dropout", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "inverted dropout with a counter-based random stream";
  let description = [{
    Zeroes each element with probability `p` and scales the others by
    `1 / (1 - p)`. The random numbers are a pure function of the step's
    `seed` and `offset` (runtime `i64` scalars, so that a replayed step
    draws the same mask) and of the op's static `stream`, which the tracer
    makes distinct per dropout in a step. Element `i` of the row-major
    flattened tensor uses word `i mod 4` of Philox4x32-10 with key
    `(lo32(seed), hi32(seed))` and counter
    `(lo32(c), hi32(c), lo32(stream), hi32(stream))`, `c = offset + i / 4`;
    it is kept when that word's top 24 bits divided by 2^24 are `>= p`.

    ```mlir
    %y = hl.dropout %x, %seed, %offset p = 1.000000e-01 stream = 0
        : tensor<32x128xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$input,
    HL_I64Scalar:$seed,
    HL_I64Scalar:$offset,
    F64Attr:$p,
    I64Attr:$stream
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $seed `,` $offset `p` `=` $p `stream` `=` $stream attr-dict
    `:` type($input)
  }];
  let hasVerifier = 1;
}

#endif // AICF_DIALECT_HL_HLOPS_TD
