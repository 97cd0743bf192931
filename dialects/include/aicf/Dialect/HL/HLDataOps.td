//===- HLDataOps.td - hl data movement, image, attention, backward ops -*- tablegen -*-===//
//
// Included by HLOps.td.
//===----------------------------------------------------------------------===//

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

def HL_AttentionBackwardOp : HL_Op<"attention_backward",
    [Pure, InferTypeOpAdaptor, AllTypesMatch<["out", "grad_output"]>]> {
  let summary = "gradients of scaled dot-product attention";
  let description = [{
    The gradients of `out = hl.attention(query, key, value)` (same
    `causal` and `scale`) from its upstream gradient `grad_output`, with
    the probabilities recomputed, never materialised (FlashAttention-2's
    backward): with `P = softmax(S)`, `S = q k^T * scale` (+ causal mask)
    and `D = rowsum(grad_output * out)`: `grad_value = P^T grad_output`,
    `dS = P * (grad_output value^T - D)`, `grad_query = dS key * scale`,
    `grad_key = dS^T query * scale`. The results take the operands' types.

    ```mlir
    %dq, %dk, %dv = hl.attention_backward %q, %k, %v, %o, %do causal
        : tensor<4x64x16xf32>, tensor<4x64x16xf32>, tensor<4x64x16xf32>, tensor<4x64x16xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$query,
    HL_FloatTensor:$key,
    HL_FloatTensor:$value,
    HL_FloatTensor:$out,
    HL_FloatTensor:$grad_output,
    UnitAttr:$causal,
    OptionalAttr<F64Attr>:$scale
  );
  let results = (outs
    HL_FloatTensor:$grad_query,
    HL_FloatTensor:$grad_key,
    HL_FloatTensor:$grad_value
  );
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $grad_output (`causal` $causal^)?
    (`scale` `=` $scale^)? attr-dict `:` type($query) `,` type($key) `,`
    type($value) `,` type($out)
  }];
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
    HL_Epsilon:$eps,
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
    makes distinct per dropout in a step; in hand-written IR, two dropouts
    of one stream and shape draw the same mask (variational dropout's one
    mask for every time step is written so). The seed and offset are
    `@loss`'s last two arguments, which the training loop passes. Element
    `i` of the row-major
    flattened tensor uses word `i mod 4` of Philox4x32-10 with key
    `(lo32(seed), hi32(seed))` and counter
    `(lo32(c), hi32(c), lo32(stream), hi32(stream) xor (g >> 24))`,
    `g = i / 4`, `c = offset + (g mod 2^24)` (a step advances `offset` by
    2^24: a tensor of more than 2^26 elements does not draw the next
    step's words); it is kept when that word's top 24 bits divided by 2^24
    are `>= p`.

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

def HL_RandomLikeOp : HL_Op<"random_like", [Pure, AllTypesMatch<["like", "result"]>]> {
  let summary = "normal or uniform random numbers from a counter-based stream";
  let description = [{
    A tensor of `like`'s type (its values are not read) of independent
    random numbers: `kind = "normal"`, mean `a` and standard deviation `b`
    (`torch.randn_like`, ONNX `RandomNormalLike`); `kind = "uniform"`, in
    `[a, b)` (`torch.rand_like`, `RandomUniformLike`). They are a pure
    function of the step's `seed` and `offset` and the op's static
    `stream`, as `hl.dropout`'s mask is: element `i` of the row-major
    flattened tensor takes the block of Philox4x32-10 that `hl.dropout`'s
    element `i` does (key and counter as its) and, with `j = i mod 4`,
    - uniform: `a + (b - a) u`, `u` word `j`'s top `k` bits over 2^k, `k`
      the result type's significand (24 for f32 and f64, 11 for f16, 8
      for bf16: a 16-bit draw in [0, 1) stays below 1);
    - normal: Box-Muller on the pair `p = j / 2`: `r = sqrt(-2 ln u1)`,
      `u1` the top 24 bits of word `2p` plus one over 2^24 (in (0, 1]),
      `t = 2 pi u2`, `u2` word `2p + 1`'s as uniform's; `a + b r cos t`
      for even `j`, `a + b r sin t` for odd.
    It has no gradient.

    ```mlir
    %eps = hl.random_like %mu, %seed, %offset kind = "normal"
        a = 0.000000e+00 b = 1.000000e+00 stream = 1 : tensor<32x16xf32>
    ```
  }];
  let arguments = (ins
    HL_FloatTensor:$like,
    HL_I64Scalar:$seed,
    HL_I64Scalar:$offset,
    StrAttr:$kind,
    F64Attr:$a,
    F64Attr:$b,
    I64Attr:$stream
  );
  let results = (outs HL_FloatTensor:$result);
  let assemblyFormat = [{
    $like `,` $seed `,` $offset `kind` `=` $kind `a` `=` $a `b` `=` $b
    `stream` `=` $stream attr-dict `:` type($like)
  }];
  let hasVerifier = 1;
}
