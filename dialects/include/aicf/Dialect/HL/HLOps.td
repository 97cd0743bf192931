//===- HLOps.td - hl dialect operations --------------------*- tablegen -*-===//
//
// The first slice of `hl`: what an MLP's forward pass and loss need.
// Every op states its shape rule in its description; the rule is checked by
// the op's type inference or verifier and reported on the op.
//
//===----------------------------------------------------------------------===//

#ifndef AICF_DIALECT_HL_HLOPS_TD
#define AICF_DIALECT_HL_HLOPS_TD

include "aicf/Dialect/HL/HLBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def HL_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def HL_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def HL_IndexTensor : RankedTensorOf<[I32, I64]>;
def HL_Tensor : RankedTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;

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
// Elementwise
//===----------------------------------------------------------------------===//

class HL_BroadcastBinaryOp<string mnemonic, list<Trait> traits = []>
    : HL_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let arguments = (ins HL_FloatTensor:$lhs, HL_FloatTensor:$rhs);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def HL_AddOp : HL_BroadcastBinaryOp<"add", [Commutative]> {
  let summary = "elementwise addition with broadcasting";
  let description = [{
    `lhs + rhs` with NumPy broadcasting: shapes are aligned from the right,
    and each pair of dimensions must be equal or one of them 1. Both
    operands have the same element type; the result has the broadcast shape.

    ```mlir
    %y = hl.add %x, %b : tensor<32x128xf32>, tensor<128xf32>
    ```
  }];
}

def HL_MulOp : HL_BroadcastBinaryOp<"mul", [Commutative]> {
  let summary = "elementwise multiplication with broadcasting";
  let description = [{
    `lhs * rhs` with NumPy broadcasting (see `hl.add`).

    ```mlir
    %y = hl.mul %x, %s : tensor<32x128xf32>, tensor<1x128xf32>
    ```
  }];
}

def HL_ReluOp : HL_Op<"relu", [Pure, SameOperandsAndResultType]> {
  let summary = "rectified linear unit, max(x, 0)";
  let description = [{
    Elementwise `max(x, 0)` on a floating-point tensor.

    ```mlir
    %h = hl.relu %x : tensor<32x128xf32>
    ```
  }];
  let arguments = (ins HL_FloatTensor:$input);
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
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

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def HL_CrossEntropyOp : HL_Op<"cross_entropy", [Pure, InferTypeOpAdaptor]> {
  let summary = "softmax cross-entropy over integer class labels";
  let description = [{
    `logits: [N, C]` are unnormalised class scores, `labels: [N]` hold class
    indices in `[0, C)`. The result is a scalar (rank-0 tensor of the logits'
    element type): the mean (default) or the sum over the batch of
    `logsumexp(logits[i]) - logits[i, labels[i]]`.

    ```mlir
    %loss = hl.cross_entropy %logits, %labels : tensor<32x10xf32>, tensor<32xi32>
    %total = hl.cross_entropy %logits, %labels reduction = sum
        : tensor<32x10xf32>, tensor<32xi32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$logits,
    HL_IndexTensor:$labels,
    DefaultValuedAttr<HL_Reduction, "::hl::Reduction::Mean">:$reduction
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`reduction` `=` $reduction^)? attr-dict
    `:` type($logits) `,` type($labels)
  }];
}

#endif // AICF_DIALECT_HL_HLOPS_TD
