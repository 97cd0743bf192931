//===- HLComputeOps.td - hl matrix, fused, reduction, norm and loss ops -*- tablegen -*-===//
//
// Included by HLOps.td.
//===----------------------------------------------------------------------===//

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
    PyTorch's `nn.Linear`: `input: [..., rows, in]` (rank 2 or more: one
    example is `[1, in]`), `weight: [out, in]` and an optional `bias: [out]`
    give `[..., rows, out]`. All three have the same element type.

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
  // (`ins` left out where there are none: a fused chain of constants;
  // `ins( : )` did not parse back.)
  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)? `->` type($results) $body attr-dict
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
  // (`ins` left out where there are none: a fused chain of constants;
  // `ins( : )` did not parse back.)
  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)? `->` type($results) $body attr-dict
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

class HL_ReduceOp<string mnemonic, Type operandType = HL_FloatTensor>
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
    size 1 under `keepdim`. The reductions take float tensors (the kernels
    reduce floats; an integer tensor is cast first, `hl.cast`).

    ```mlir
    %s = hl.reduce_sum %x axes = [0] : tensor<32x128xf32>
    %r = hl.reduce_sum %x axes = [1] keepdim : tensor<32x128xf32>
    ```
  }];
}

def HL_ReduceMeanOp : HL_ReduceOp<"reduce_mean"> {
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
    HL_Epsilon:$eps
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
    HL_Epsilon:$eps
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

    16-bit logits may have an f32 loss and upstream gradient: the softmax is
    computed in f32 from the 16-bit values and the gradient rounded once to
    the logits' type, as a cast to f32 before the loss and back after it
    would (what `hl-fuse-reductions` makes of those casts under autocast).
    With `classes = N`, only the first N entries of each row are classes
    (labels lie in [0, N)); the rest are padding (a head padded by
    `hl-pad-contractions`), left out of the softmax, and their gradient is
    zero.

    ```mlir
    %loss, %dl = hl.softmax_cross_entropy %logits, %labels, %g
        : tensor<32x10xf32>, tensor<32xi32>, tensor<f32> -> tensor<f32>
    %l2, %d2 = hl.softmax_cross_entropy %padded, %labels, %g classes = 10
        : tensor<32x16xbf16>, tensor<32xi32>, tensor<f32> -> tensor<f32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$logits,
    HL_IndexTensor:$labels,
    HL_FloatTensor:$grad_output,
    DefaultValuedAttr<HL_Reduction, "::hl::Reduction::Mean">:$reduction,
    OptionalAttr<I64Attr>:$ignore_index,
    OptionalAttr<I64Attr>:$classes
  );
  let results = (outs HL_FloatTensor:$loss, HL_FloatTensor:$grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad_output (`reduction` `=` $reduction^)?
    (`ignore_index` `=` $ignore_index^)? (`classes` `=` $classes^)? attr-dict
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

