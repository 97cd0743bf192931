//===- HLCoreOps.td - hl parameters, constants, elementwise ops -*- tablegen -*-===//
//
// Included by HLOps.td.
//===----------------------------------------------------------------------===//

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

    A masked growth's counter (slot `mask`) also carries `ramp`, the steps
    its new units take to reach full weight, and `delay`, the steps before
    they start (`hl-widen`'s `mask` and `mask_delay`).
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<HL_Tensor>:$type,
    OptionalAttr<FlatSymbolRefAttr>:$param,
    StrAttr:$slot,
    HL_InitAttr:$init,
    OptionalAttr<I64Attr>:$ramp,
    OptionalAttr<I64Attr>:$delay
  );
  let assemblyFormat = [{
    $sym_name `:` $type (`of` $param^)? `slot` $slot `init` $init attr-dict
  }];
  let hasVerifier = 1;
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

def HL_SetStateOp : HL_Op<"set_state",
    [MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the next value of a state the model keeps itself";
  let description = [{
    Gives the `hl.state` named by `name` (one the model declared, without
    a parameter: a batch norm's running statistics) its value after a
    training step. `hl-optimizer` turns it into a result of `@train_step`
    bound to the state, so the runtime stores it with the optimizer's
    state; evaluating a function by itself (`@loss`, `@loss_grad`) does not
    write it, and `convert-hl-to-ll` drops it there. It takes no gradient.
    At most one per state in a function.

    ```mlir
    hl.set_state @bn1.running_mean, %next : tensor<16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, HL_Tensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def HL_AllReduceOp : HL_Op<"all_reduce",
    [AllTypesMatch<["input", "result"]>, MemoryEffects<[MemWrite]>]> {
  let summary = "the weighted sum of a tensor over the replicas of a data-parallel run";
  let description = [{
    Every replica (process, GPU) of a data-parallel run computes the same
    program on its own shard of the batch; `hl.all_reduce` gives each of
    them `sum over replicas r of weight_r * input_r`, element-wise, in one
    fixed order, so every replica gets the same bits. `weight` is a rank-0
    tensor of the input's element type: the replica's share of the global
    batch, which makes the sum of per-replica mean losses and gradients the
    mean over the global batch (a short last batch included).
    `hl-optimizer{data-parallel}` puts one on the loss and on every
    gradient before the update. A run of one process computes
    `weight * input`. It is not differentiable (it is placed after
    autodiff), and it has an effect: it is never removed, merged or moved
    across another collective, so every replica issues the same
    collectives in the same order.

    With `local`, the value is this replica's own weighted contribution,
    `weight * input`, summed over nothing: one micro-batch's share of an
    accumulated gradient (`hl-optimizer{accumulate}`'s `@train_grad`),
    scaled exactly as a replica scales its values before the sum.

    ```mlir
    %g = hl.all_reduce %grad, %share : tensor<128x64xf32>, tensor<f32>
    %m = hl.all_reduce %grad, %share {local} : tensor<128x64xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins HL_FloatTensor:$input, HL_FloatTensor:$weight, UnitAttr:$local);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
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
  let hasVerifier = 1;
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
    `lhs / rhs` with NumPy broadcasting (see `hl.add`). Integer division
    truncates toward zero where it folds (both operands constant, as an
    import's shape arithmetic); a computed one is not lowered to a kernel
    (`convert-hl-to-ll` says so: cast to a float type first).

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

def HL_SinOp : HL_UnaryOp<"sin"> {
  let summary = "elementwise sine (radians)";
  let description = [{
    Positional encodings and rotary embeddings computed in a model (an
    ONNX export's `Sin`). The gradient is `g cos(x)`.

    ```mlir
    %y = hl.sin %x : tensor<4x5xf32>
    ```
  }];
}

def HL_AtanOp : HL_UnaryOp<"atan"> {
  let summary = "elementwise arctangent (radians, in (-pi/2, pi/2))";
  let description = [{
    Angles from ratios: `torch.atan`, and `torch.atan2` as an ONNX export
    writes it (an Atan of y / x, its quadrant by Where). The gradient is
    `g / (1 + x^2)`.

    ```mlir
    %y = hl.atan %x : tensor<4x5xf32>
    ```
  }];
}

def HL_CosOp : HL_UnaryOp<"cos"> {
  let summary = "elementwise cosine (radians)";
  let description = [{
    The gradient is `-g sin(x)`.

    ```mlir
    %y = hl.cos %x : tensor<4x5xf32>
    ```
  }];
}

def HL_FloorOp : HL_UnaryOp<"floor"> {
  let summary = "elementwise floor, the largest integer not above x";
  let description = [{
    Piecewise constant: no gradient flows through it (PyTorch's is 0).

    ```mlir
    %y = hl.floor %x : tensor<4x5xf32>
    ```
  }];
}

def HL_CeilOp : HL_UnaryOp<"ceil"> {
  let summary = "elementwise ceiling, the smallest integer not below x";
  let description = [{
    Piecewise constant: no gradient flows through it.

    ```mlir
    %y = hl.ceil %x : tensor<4x5xf32>
    ```
  }];
}

def HL_RoundOp : HL_UnaryOp<"round"> {
  let summary = "elementwise rounding to the nearest integer, ties to even";
  let description = [{
    As `torch.round` and ONNX's `Round` (2.5 -> 2, 3.5 -> 4). Piecewise
    constant: no gradient flows through it.

    ```mlir
    %y = hl.round %x : tensor<4x5xf32>
    ```
  }];
}

def HL_StopGradientOp : HL_Op<"stop_gradient", [Pure, SameOperandsAndResultType]> {
  let summary = "identity whose value carries no gradient (PyTorch's detach)";
  let description = [{
    The input, unchanged; differentiation passes no gradient through it.
    A straight-through estimator is `x + stop_gradient(round(x) - x)`: the
    value of `round(x)`, the gradient of `x` (an ONNX export writes it
    without its `detach`: the importer recognises it). No folder: it must
    survive until `hl-autodiff`; `hl-fuse-elementwise` lowers it as the
    identity.

    ```mlir
    %y = hl.stop_gradient %x : tensor<4x5xf32>
    ```
  }];
  let arguments = (ins HL_FloatTensor:$input);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
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

