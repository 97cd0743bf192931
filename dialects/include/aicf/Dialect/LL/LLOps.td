//===- LLOps.td - ll dialect: buffers, one op per kernel ---*- tablegen -*-===//
//
// `ll` is AICF's kernel-level dialect. Operands are memrefs (buffers that
// the memory planner places in one arena); every op is exactly one kernel
// launch. Each op declares which buffers it reads and which it writes, so
// lifetime analysis and scheduling need no per-op knowledge.
//
// Kernels: gemm (with epilogue), elementwise and multi_tensor_apply
// (scalar bodies), softmax_cross_entropy, softmax and norm (each with its
// backward), reduce, attention, conv2d (+ both backward), pool2d (+
// backward), gather and scatter_add, slice, concat, argmax, mse_loss,
// dropout, transpose, copy and fill; reshape is a view, not a kernel.
//
//===----------------------------------------------------------------------===//

#ifndef AICF_DIALECT_LL_LLOPS_TD
#define AICF_DIALECT_LL_LLOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def LL_Dialect : Dialect {
  let name = "ll";
  let summary = "AICF's kernel-level dialect: one op is one kernel launch";
  let description = [{
    `ll` operates on buffers (memrefs). Each op is one kernel: a GEMM with
    its fused epilogue, a fused elementwise region, a row reduction, a copy
    or a fill. Ops name the buffers they read (`ins`) and write (`into` /
    `outs`), which is all the memory planner and the scheduler need.
  }];
  let cppNamespace = "::ll";
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

class LL_Op<string mnemonic, list<Trait> traits = []>
    : Op<LL_Dialect, mnemonic, traits>;

def LL_FloatBuffer : MemRefOf<[F16, BF16, F32, F64]>;
def LL_IndexBuffer : MemRefOf<[I32, I64]>;
def LL_Buffer : MemRefOf<[F16, BF16, F32, F64, I1, I32, I64]>;
def LL_Matrix : MemRefRankOf<[F16, BF16, F32, F64], [2]>;
def LL_Vector : MemRefRankOf<[F16, BF16, F32, F64], [1]>;
def LL_I64Scalar : MemRefRankOf<[I64], [0]> {
  let builderCall = "::mlir::MemRefType::get({}, $_builder.getI64Type())";
}

def LL_Activation : I32EnumAttr<"Activation", "GEMM epilogue activation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"Gelu", 2, "gelu">,
    I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">,
    I32EnumAttrCase<"Silu", 4, "silu">,
    I32EnumAttrCase<"Tanh", 5, "tanh">,
    I32EnumAttrCase<"Sigmoid", 6, "sigmoid">]> {
  let cppNamespace = "::ll";
}

def LL_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Mean", 1, "mean">,
    I32EnumAttrCase<"Max", 2, "max">]> {
  let cppNamespace = "::ll";
}

def LL_LossReduction : I32EnumAttr<"LossReduction", "loss reduction over the batch", [
    I32EnumAttrCase<"Mean", 0, "mean">,
    I32EnumAttrCase<"Sum", 1, "sum">]> {
  let cppNamespace = "::ll";
}

//===----------------------------------------------------------------------===//
// GEMM with epilogue
//===----------------------------------------------------------------------===//

def LL_GemmOp : LL_Op<"gemm", [AttrSizedOperandSegments]> {
  let summary = "matrix product with a fused epilogue";
  let description = [{
    One GEMM kernel, the buffer form of `hl.gemm`:

    ```
    y = alpha * op(a) @ op(b)      (op: transpose_a / transpose_b)
    y = y + bias                    (bias [N], broadcast over rows)
    y = act(y)                      (none, relu, gelu, gelu_tanh, silu, tanh, sigmoid)
    y = mask > 0 ? y : 0            (a ReLU's derivative in backward)
    y = y + residual
    out = y   (or out += y with accumulate)
    lhs_sum[m] = sum_k op(a)[m, k]  (optional second output, rank-2 only)
    ```

    Operands are batched matrices of equal rank with equal batch
    dimensions, or, when `b` has rank 2 and `a` a higher rank, the linear
    form: every leading dimension of `a` is a row. `a`, `b` and `out`
    share one element type, except that f16 or bf16 operands may have an f32
    `out` (mixed precision; f16/bf16 products accumulate in f32 either way).
    `mask` and `residual` have the type of `out`. `out` must not be `a` or
    `b`.

    ```mlir
    ll.gemm %x, %w bias(%b) into %y transpose_b act = relu
        : memref<32x64xf32>, memref<128x64xf32> bias memref<128xf32> -> memref<32x128xf32>
    ll.gemm %dy, %x into %dw lhs_sum(%db) transpose_a
        : memref<32x128xf32>, memref<32x64xf32> -> memref<128x64xf32> lhs_sum memref<128xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "left operand", [MemRead]>:$a,
    Arg<LL_FloatBuffer, "right operand", [MemRead]>:$b,
    Arg<Optional<LL_Vector>, "bias over columns", [MemRead]>:$bias,
    Arg<Optional<LL_FloatBuffer>, "ReLU-derivative mask", [MemRead]>:$mask,
    Arg<Optional<LL_FloatBuffer>, "residual added last", [MemRead]>:$residual,
    Arg<LL_FloatBuffer, "result", [MemRead, MemWrite]>:$out,
    Arg<Optional<LL_Vector>, "sums of op(a) over K", [MemWrite]>:$lhs_sum,
    UnitAttr:$transpose_a,
    UnitAttr:$transpose_b,
    UnitAttr:$accumulate,
    DefaultValuedAttr<F64Attr, "1.0">:$alpha,
    DefaultValuedAttr<LL_Activation, "::ll::Activation::None">:$act
  );
  let assemblyFormat = [{
    $a `,` $b (`bias` `(` $bias^ `)`)? (`mask` `(` $mask^ `)`)?
    (`residual` `(` $residual^ `)`)? `into` $out
    (`lhs_sum` `(` $lhs_sum^ `)`)?
    (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)?
    (`accumulate` $accumulate^)? (`alpha` `=` $alpha^)? (`act` `=` $act^)?
    attr-dict `:` type($a) `,` type($b) (`bias` type($bias)^)?
    (`mask` type($mask)^)? (`residual` type($residual)^)? `->` type($out)
    (`lhs_sum` type($lhs_sum)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused elementwise region
//===----------------------------------------------------------------------===//

def LL_ElementwiseOp : LL_Op<"elementwise",
    [AttrSizedOperandSegments, SingleBlock]> {
  let summary = "a fused elementwise kernel described by a scalar region";
  let description = [{
    Evaluates `body` once per element of the outputs. The block takes one
    scalar per input, in order, and yields one scalar per output. Inputs are
    broadcast to the outputs' shape with NumPy's rule (aligned from the
    right, a dimension of 1 stretches); all outputs have the same shape. The
    body holds only side-effect-free scalar ops (`arith`, `math`).

    ```mlir
    ll.elementwise ins(%x, %b : memref<32x128xf32>, memref<128xf32>)
                   outs(%y : memref<32x128xf32>) {
    ^bb0(%xv: f32, %bv: f32):
      %s = arith.addf %xv, %bv : f32
      %z = arith.constant 0.0 : f32
      %r = arith.maximumf %s, %z : f32
      ll.yield %r : f32
    }
    ```
  }];
  let arguments = (ins
    Arg<Variadic<LL_Buffer>, "inputs", [MemRead]>:$inputs,
    Arg<Variadic<LL_Buffer>, "outputs", [MemWrite]>:$outputs
  );
  let regions = (region SizedRegion<1>:$body);
  // `ins(...)` only where there are inputs: a fill kernel (a constant
  // written to its buffer) has none, and `ins( : )` would not parse back.
  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)` $body attr-dict
  }];
  let hasVerifier = 1;
}

def LL_MultiTensorApplyOp : LL_Op<"multi_tensor_apply",
    [AttrSizedOperandSegments, SingleBlock]> {
  let summary = "one elementwise body over several groups of buffers";
  let description = [{
    The buffer form of `hl.multi_tensor_apply`: one kernel launch runs the
    body over `G` groups. With a body of `k` arguments yielding `m`
    scalars, the inputs are `G` groups of `k` buffers and the outputs `G`
    groups of `m`; group `g` behaves as an `ll.elementwise` of its slices.
    An output may be one of its group's inputs of the same shape (the
    parameter update in place).

    ```mlir
    ll.multi_tensor_apply ins(%g1, %lr, %p1, %g2, %lr, %p2 : ...) outs(%p1, %p2 : ...) {
    ^bb0(%g: f32, %r: f32, %p: f32):
      %s = arith.mulf %g, %r : f32
      %n = arith.subf %p, %s : f32
      ll.yield %n : f32
    }
    ```
  }];
  let arguments = (ins
    Arg<Variadic<LL_Buffer>, "inputs", [MemRead]>:$inputs,
    Arg<Variadic<LL_Buffer>, "outputs", [MemWrite]>:$outputs
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)`
    `outs` `(` $outputs `:` type($outputs) `)` $body attr-dict
  }];
  let hasVerifier = 1;
}

def LL_YieldOp : LL_Op<"yield",
    [Pure, Terminator, ParentOneOf<["ElementwiseOp", "MultiTensorApplyOp"]>]> {
  let summary = "yields the scalars of an elementwise body";
  let description = [{
    Terminates an `ll.elementwise` body with one value per output buffer,
    each of that buffer's element type.

    ```mlir
    ll.yield %r : f32
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Row reductions
//===----------------------------------------------------------------------===//

def LL_SoftmaxCrossEntropyOp : LL_Op<"softmax_cross_entropy",
    [AttrSizedOperandSegments]> {
  let summary = "softmax cross-entropy loss and, optionally, its gradient";
  let description = [{
    One row-reduction kernel over `logits: [..., C]` (classes last) and
    integer `labels: [...]`. Writes the scalar loss (mean or sum over rows
    of `logsumexp(logits[i]) - logits[i, labels[i]]`, rows whose label is
    `ignore_index` left out) to `loss`, and, when `grad` is given,
    `d loss / d logits` (`softmax(logits) - onehot(labels)`, divided by the
    counted rows for `mean`) times the upstream gradient (`grad_output`, a
    rank-0 buffer, or the constant `grad_scale`) to `grad`: the forward loss
    and the start of the backward pass are one op.

    16-bit logits may have an f32 loss (and upstream gradient); the
    gradient keeps the logits' type. With `classes = N`, only the first N
    entries of each row are classes (labels lie in [0, N)); the rest are
    padding, left out of the softmax, with a zero gradient.

    With `rows(%r)`, a scratch buffer of one value per row and one more,
    the rows run in parallel (a kernel that counts the labelled rows into
    the last slot, a row-parallel kernel that writes each row's loss and
    gradient, and one that sums the rows' losses in a fixed order); without
    it, one work item takes every row.

    ```mlir
    ll.softmax_cross_entropy %logits, %labels into %loss, %dlogits rows(%r)
        : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32>
          rows memref<33xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "logits", [MemRead]>:$logits,
    Arg<LL_IndexBuffer, "labels", [MemRead]>:$labels,
    Arg<Optional<MemRefRankOf<[F16, BF16, F32, F64], [0]>>, "upstream gradient", [MemRead]>:$grad_output,
    Arg<MemRefRankOf<[F16, BF16, F32, F64], [0]>, "loss", [MemWrite]>:$loss,
    Arg<Optional<LL_FloatBuffer>, "gradient w.r.t. logits", [MemWrite]>:$grad,
    Arg<Optional<MemRefRankOf<[F32, F64], [1]>>, "per-row losses and the labelled count (scratch)", [MemRead, MemWrite]>:$row_losses,
    DefaultValuedAttr<LL_LossReduction, "::ll::LossReduction::Mean">:$reduction,
    OptionalAttr<I64Attr>:$ignore_index,
    DefaultValuedAttr<F64Attr, "1.0">:$grad_scale,
    OptionalAttr<I64Attr>:$classes
  );
  let assemblyFormat = [{
    $logits `,` $labels (`grad_output` `(` $grad_output^ `)`)? `into` $loss (`,` $grad^)?
    (`rows` `(` $row_losses^ `)`)?
    (`reduction` `=` $reduction^)? (`ignore_index` `=` $ignore_index^)?
    (`grad_scale` `=` $grad_scale^)? (`classes` `=` $classes^)? attr-dict
    `:` type($logits) `,` type($labels) (`grad_output` type($grad_output)^)?
    `->` type($loss) (`,` type($grad)^)? (`rows` type($row_losses)^)?
  }];
  let hasVerifier = 1;
}

def LL_SoftmaxOp : LL_Op<"softmax", [AllTypesMatch<["input", "out"]>]> {
  let summary = "softmax or log-softmax along one dimension";
  let description = [{
    One row-reduction kernel: `out = softmax(input)` along `axis`
    (max-subtracted), or its logarithm with `log`.

    ```mlir
    ll.softmax %s into %p axis = 3 : memref<8x4x128x128xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    I64Attr:$axis,
    UnitAttr:$log
  );
  let assemblyFormat = [{
    $input `into` $out `axis` `=` $axis (`log` $log^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def LL_NormOp : LL_Op<"norm", [AttrSizedOperandSegments, AllTypesMatch<["input", "out"]>]> {
  let summary = "layer norm or RMS norm over the trailing dimensions";
  let description = [{
    One row-reduction kernel: each row (the trailing `dims` dimensions) is
    normalised, `(x - mean) / sqrt(var + eps)` (layer norm) or
    `x / sqrt(mean(x^2) + eps)` (with `rms`), then scaled by `weight` and
    shifted by `bias` when given (shape of the trailing dimensions).

    ```mlir
    ll.norm %x weight(%g) bias(%b) into %y dims = 1 eps = 1.0e-05
        : memref<1024x256xf32> weight memref<256xf32> bias memref<256xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    Arg<Optional<LL_FloatBuffer>, "scale", [MemRead]>:$weight,
    Arg<Optional<LL_FloatBuffer>, "shift", [MemRead]>:$bias,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    I64Attr:$dims,
    F64Attr:$eps,
    UnitAttr:$rms
  );
  let assemblyFormat = [{
    $input (`weight` `(` $weight^ `)`)? (`bias` `(` $bias^ `)`)? `into` $out
    `dims` `=` $dims `eps` `=` $eps (`rms` $rms^)? attr-dict `:` type($input)
    (`weight` type($weight)^)? (`bias` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def LL_AttentionOp : LL_Op<"attention"> {
  let summary = "scaled dot-product attention in one kernel";
  let description = [{
    `out = softmax(q k^T * scale (+ causal mask)) v` over `[..., L, D]`
    queries, `[..., S, D]` keys and `[..., S, Dv]` values into
    `[..., L, Dv]`, without materialising the `[L, S]` scores in memory (a
    FlashAttention-style kernel). With `lse`, one f32 per query row (R
    in all, the rows of every leading dimension), the kernel also writes
    each row's log-sum-exp of the scaled scores (natural log) there: what
    an `ll.attention_backward` of the same attention reads instead of
    recomputing it (`hl-convert-to-ll` pairs them).

    ```mlir
    ll.attention %q, %k, %v into %o causal scale = 1.250000e-01
        : memref<8x4x128x64xf32>, memref<8x4x128x64xf32>, memref<8x4x128x64xf32>
        -> memref<8x4x128x64xf32>
    ll.attention %q, %k, %v into %o lse(%lse : memref<4096xf32>) causal
        scale = 1.250000e-01 : memref<8x4x128x64xbf16>, memref<8x4x128x64xbf16>,
        memref<8x4x128x64xbf16> -> memref<8x4x128x64xbf16>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "queries", [MemRead]>:$q,
    Arg<LL_FloatBuffer, "keys", [MemRead]>:$k,
    Arg<LL_FloatBuffer, "values", [MemRead]>:$v,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "each query row's log-sum-exp", [MemWrite]>:$lse,
    UnitAttr:$causal,
    F64Attr:$scale
  );
  let assemblyFormat = [{
    $q `,` $k `,` $v `into` $out (`lse` `(` $lse^ `:` type($lse) `)`)?
    (`causal` $causal^)? `scale` `=` $scale attr-dict
    `:` type($q) `,` type($k) `,` type($v) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_AttentionBackwardOp : LL_Op<"attention_backward",
    [AllTypesMatch<["out", "grad_output"]>]> {
  let summary = "gradients of scaled dot-product attention, recomputing the probabilities";
  let description = [{
    The gradients `grad_q`, `grad_k`, `grad_v` of `ll.attention(q, k, v)`
    (same `causal` and `scale`) from its result `out` and upstream gradient
    `grad_output`, without materialising the `[L, S]` probabilities:
    FlashAttention-2's backward. `stats` is scratch of two f32 values per
    query row (the rows of every leading dimension, R in all): each row's
    log-sum-exp of the scaled scores in `[0, R)`, and
    `rowsum(grad_output * out)` in `[R, 2R)`; the kernels that follow
    recompute each probability from them. With `lse` (the forward
    `ll.attention`'s, R values) the log-sum-exps are read from it rather
    than recomputed, and `stats` holds only the R row sums.

    ```mlir
    ll.attention_backward %q, %k, %v, %o, %do into %dq, %dk, %dv
        rows(%stats) causal scale = 2.500000e-01
        : memref<4x64x16xf32>, memref<4x64x16xf32>, memref<4x64x16xf32>,
          memref<4x64x16xf32>
        -> memref<4x64x16xf32>, memref<4x64x16xf32>, memref<4x64x16xf32>
           rows memref<512xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "queries", [MemRead]>:$q,
    Arg<LL_FloatBuffer, "keys", [MemRead]>:$k,
    Arg<LL_FloatBuffer, "values", [MemRead]>:$v,
    Arg<LL_FloatBuffer, "the forward's result", [MemRead]>:$out,
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_FloatBuffer, "gradient w.r.t. q", [MemWrite]>:$grad_q,
    Arg<LL_FloatBuffer, "gradient w.r.t. k", [MemWrite]>:$grad_k,
    Arg<LL_FloatBuffer, "gradient w.r.t. v", [MemWrite]>:$grad_v,
    Arg<MemRefRankOf<[F32], [1]>, "per-row statistics (scratch)", [MemRead, MemWrite]>:$stats,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "the forward's log-sum-exps", [MemRead]>:$lse,
    UnitAttr:$causal,
    F64Attr:$scale
  );
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $grad_output `into` $grad_q `,` $grad_k `,`
    $grad_v `rows` `(` $stats `)` (`lse` `(` $lse^ `:` type($lse) `)`)?
    (`causal` $causal^)? `scale` `=` $scale
    attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($out) `->`
    type($grad_q) `,` type($grad_k) `,` type($grad_v) `rows` type($stats)
  }];
  let hasVerifier = 1;
}

def LL_TransposeOp : LL_Op<"transpose"> {
  let summary = "permutes the dimensions of a buffer into another";
  let description = [{
    `out[i_p0, ..., i_pn] = input[i_0, ..., i_n]` for `permutation` p: the
    out buffer's dimension `d` is the input's dimension `permutation[d]`.

    ```mlir
    ll.transpose %x into %y permutation = [0, 2, 1, 3]
        : memref<8x128x4x64xf32> -> memref<8x4x128x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_Buffer, "input", [MemRead]>:$input,
    Arg<LL_Buffer, "result", [MemWrite]>:$out,
    DenseI64ArrayAttr:$permutation
  );
  let assemblyFormat = [{
    $input `into` $out `permutation` `=` $permutation attr-dict
    `:` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_ReshapeOp : LL_Op<"reshape", [Pure]> {
  let summary = "views a contiguous buffer with another shape (no kernel)";
  let description = [{
    The same memory with another shape of the same element count and type;
    no data moves and no kernel runs. The memory planner treats the result
    as an alias of the source.

    ```mlir
    %y = ll.reshape %x : memref<8x128x256xf32> to memref<1024x256xf32>
    ```
  }];
  let arguments = (ins LL_Buffer:$source);
  let results = (outs LL_Buffer:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

def LL_ReduceOp : LL_Op<"reduce"> {
  let summary = "reduces a buffer over a set of dimensions";
  let description = [{
    `out = combine over dims of input`: the output has the input's shape
    with the reduced dimensions removed, or kept as 1 (the same rank).
    Bias gradients are column sums (`dims = [0]` of a `[N, C]` gradient).

    With a `partials` scratch buffer of S x (outputs) values (S >= 2; the
    compute type, f64 for f64 input, else f32), a reduction of the whole
    input or over leading dimensions may run split: S slices of the reduced
    rows combined into the scratch in parallel, then the slices' results
    combined in slice order (the GPU's form; the same bits on every run).
    A target with no split form ignores the buffer.

    ```mlir
    ll.reduce sum %dy dims = [0] into %db : memref<32x128xf32> -> memref<128xf32>
    ll.reduce sum %dy dims = [0] into %db partials(%p)
        : memref<4096x128xf32> -> memref<128xf32> partials memref<2048xf32>
    ```
  }];
  let arguments = (ins
    LL_ReduceKind:$kind,
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    DenseI64ArrayAttr:$dims,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    Arg<Optional<MemRefRankOf<[F32, F64], [1]>>, "each slice's results (scratch)", [MemRead, MemWrite]>:$partials
  );
  let assemblyFormat = [{
    $kind $input `dims` `=` $dims `into` $out (`partials` `(` $partials^ `)`)? attr-dict
    `:` type($input) `->` type($out) (`partials` type($partials)^)?
  }];
  let hasVerifier = 1;
}

def LL_SoftmaxBackwardOp : LL_Op<"softmax_backward",
    [AllTypesMatch<["result", "grad_output", "out"]>]> {
  let summary = "gradient of softmax or log-softmax in one kernel";
  let description = [{
    One row-reduction kernel from the forward `result` y and its upstream
    gradient g along `axis`: `out = y * (g - sum(g * y))` for softmax, and
    `out = g - exp(y) * sum(g)` for log-softmax (`log`). `out` may be `g`.

    ```mlir
    ll.softmax_backward %p, %dp into %ds axis = 3 : memref<8x4x128x128xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "forward result", [MemRead]>:$result,
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_FloatBuffer, "gradient w.r.t. the input", [MemWrite]>:$out,
    I64Attr:$axis,
    UnitAttr:$log
  );
  let assemblyFormat = [{
    $result `,` $grad_output `into` $out `axis` `=` $axis (`log` $log^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def LL_NormBackwardOp : LL_Op<"norm_backward",
    [AttrSizedOperandSegments, AllTypesMatch<["grad_output", "input", "grad_input"]>]> {
  let summary = "gradient of layer norm or RMS norm in one kernel";
  let description = [{
    With `xhat` the normalised rows of `input` (the trailing `dims`
    dimensions; see `ll.norm`), `rstd` their reciprocal deviation and
    `dxhat = grad_output * weight`:
    `grad_input = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`
    (without the `mean(dxhat)` term under `rms`), and, when given,
    `grad_weight = sum over rows of grad_output * xhat` and
    `grad_bias = sum over rows of grad_output`. The statistics are
    recomputed from `input`, never stored by the forward kernel.

    With `partials(%p)`, a scratch buffer of `chunks x parts x n` values
    (`parts` the sums asked for, `n` a row's length), the CPU splits the
    rows into that many fixed chunks that run in parallel, each summing
    its rows' terms of `grad_weight` and `grad_bias` into its slice, and a
    second kernel adds the chunks' sums in chunk order (the same bits for
    any thread count). The GPU adds the terms atomically and ignores it.

    ```mlir
    ll.norm_backward %dy, %x weight(%g) into %dx grad_weight(%dg) grad_bias(%db)
        dims = 1 eps = 1.0e-05 : memref<1024x256xf32> weight memref<256xf32>
        grad_weight memref<256xf32> grad_bias memref<256xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_FloatBuffer, "forward input", [MemRead]>:$input,
    Arg<Optional<LL_FloatBuffer>, "scale", [MemRead]>:$weight,
    Arg<LL_FloatBuffer, "gradient w.r.t. the input", [MemWrite]>:$grad_input,
    Arg<Optional<LL_FloatBuffer>, "gradient w.r.t. the scale", [MemWrite]>:$grad_weight,
    Arg<Optional<LL_FloatBuffer>, "gradient w.r.t. the shift", [MemWrite]>:$grad_bias,
    Arg<Optional<MemRefRankOf<[F32, F64], [1]>>, "per-chunk sums of grad_weight and grad_bias (scratch)", [MemRead, MemWrite]>:$partials,
    I64Attr:$dims,
    F64Attr:$eps,
    UnitAttr:$rms
  );
  let assemblyFormat = [{
    $grad_output `,` $input (`weight` `(` $weight^ `)`)? `into` $grad_input
    (`grad_weight` `(` $grad_weight^ `)`)? (`grad_bias` `(` $grad_bias^ `)`)?
    (`partials` `(` $partials^ `)`)?
    `dims` `=` $dims `eps` `=` $eps (`rms` $rms^)? attr-dict `:` type($input)
    (`weight` type($weight)^)? (`grad_weight` type($grad_weight)^)?
    (`grad_bias` type($grad_bias)^)? (`partials` type($partials)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Vision
//===----------------------------------------------------------------------===//

def LL_Layout : I32EnumAttr<"Layout", "image layout", [
    I32EnumAttrCase<"NCHW", 0, "nchw">,
    I32EnumAttrCase<"NHWC", 1, "nhwc">]> {
  let cppNamespace = "::ll";
}

def LL_PoolKind : I32EnumAttr<"PoolKind", "pooling combiner", [
    I32EnumAttrCase<"Max", 0, "max">,
    I32EnumAttrCase<"Avg", 1, "avg">]> {
  let cppNamespace = "::ll";
}

defvar LL_ConvAttrs = (ins
  DenseI64ArrayAttr:$stride,
  DenseI64ArrayAttr:$padding,
  DenseI64ArrayAttr:$dilation,
  ConfinedAttr<I64Attr, [IntPositive]>:$groups,
  DefaultValuedAttr<LL_Layout, "::ll::Layout::NCHW">:$layout
);

def LL_Conv2dOp : LL_Op<"conv2d"> {
  let summary = "2-D convolution with an optional bias, one kernel";
  let description = [{
    The buffer form of `hl.conv2d` (same attributes and shape rule):
    `input` `[N, C, H, W]` (or NHWC), `weight` `[O, C / groups, KH, KW]`,
    `bias` `[O]`.

    ```mlir
    ll.conv2d %x, %w bias(%b) into %y stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] groups = 1 : memref<32x1x8x8xf32>,
        memref<16x1x3x3xf32> bias memref<16xf32> -> memref<32x16x8x8xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "weight", [MemRead]>:$weight,
    Arg<Optional<LL_Vector>, "bias", [MemRead]>:$bias,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out), LL_ConvAttrs);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `)`)? `into` $out
    `stride` `=` $stride `padding` `=` $padding `dilation` `=` $dilation
    `groups` `=` $groups (`layout` `=` $layout^)? attr-dict
    `:` type($input) `,` type($weight) (`bias` type($bias)^)? `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_Conv2dBackwardInputOp : LL_Op<"conv2d_backward_input"> {
  let summary = "gradient of conv2d with respect to its input (transposed convolution)";
  let description = [{
    ```mlir
    ll.conv2d_backward_input %dy, %w into %dx stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] groups = 1
        : memref<32x16x8x8xf32>, memref<16x1x3x3xf32> -> memref<32x1x8x8xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_FloatBuffer, "weight", [MemRead]>:$weight,
    Arg<LL_FloatBuffer, "gradient w.r.t. the input", [MemWrite]>:$out), LL_ConvAttrs);
  let assemblyFormat = [{
    $grad_output `,` $weight `into` $out
    `stride` `=` $stride `padding` `=` $padding `dilation` `=` $dilation
    `groups` `=` $groups (`layout` `=` $layout^)? attr-dict
    `:` type($grad_output) `,` type($weight) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_Conv2dBackwardWeightOp : LL_Op<"conv2d_backward_weight"> {
  let summary = "gradient of conv2d with respect to its weight";
  let description = [{
    ```mlir
    ll.conv2d_backward_weight %dy, %x into %dw stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] groups = 1
        : memref<32x16x8x8xf32>, memref<32x1x8x8xf32> -> memref<16x1x3x3xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_FloatBuffer, "forward input", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "gradient w.r.t. the weight", [MemWrite]>:$out), LL_ConvAttrs);
  let assemblyFormat = [{
    $grad_output `,` $input `into` $out
    `stride` `=` $stride `padding` `=` $padding `dilation` `=` $dilation
    `groups` `=` $groups (`layout` `=` $layout^)? attr-dict
    `:` type($grad_output) `,` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

defvar LL_WindowAttrs = (ins
  DenseI64ArrayAttr:$stride,
  DenseI64ArrayAttr:$padding,
  DenseI64ArrayAttr:$dilation,
  DefaultValuedAttr<LL_Layout, "::ll::Layout::NCHW">:$layout,
  UnitAttr:$columns
);

def LL_Im2colOp : LL_Op<"im2col"> {
  let summary = "every convolution window of an image as one row";
  let description = [{
    `out[n, oh, ow, c, a, b] = input[n, c, oh * s - p + a * d, ow * s - p +
    b * d]` (0 where that lies in the padding), for an `input` `[N, C, H,
    W]` (or NHWC) and `out` `[N, OH, OW, C, KH, KW]`: the windows a
    `KH x KW` convolution reads, one row of `C x KH x KW` per output
    position, so that the convolution is one matrix product with its weight
    viewed as `[O, C x KH x KW]` (`convert-hl-to-ll{conv-as-gemm}`).

    With `columns`, `out` is `[C, KH, KW, N, OH, OW]` instead: one column
    per output position, `out[c, a, b, n, oh, ow]` the same element
    (Caffe's order, over the whole batch). An NCHW image's rows of `OW`
    then copy as runs, and the product `W [O, C x KH x KW] @ out` is
    `[O, N, OH x OW]`, one block transpose from NCHW.

    ```mlir
    ll.im2col %x into %cols stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] : memref<32x1x8x8xf32> -> memref<32x8x8x1x3x3xf32>
    ll.im2col %x into %cols stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] {columns} : memref<32x1x8x8xf32> -> memref<1x3x3x32x8x8xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<LL_FloatBuffer, "image", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "windows", [MemWrite]>:$out), LL_WindowAttrs);
  let assemblyFormat = [{
    $input `into` $out
    `stride` `=` $stride `padding` `=` $padding `dilation` `=` $dilation
    (`layout` `=` $layout^)? attr-dict `:` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_Col2imOp : LL_Op<"col2im"> {
  let summary = "sums window rows back into an image (the adjoint of im2col)";
  let description = [{
    `out[n, c, h, w]` is the sum of `input[n, oh, ow, c, a, b]` over every
    window position and tap that `ll.im2col` reads `(h, w)` from: the input
    gradient of a convolution from the gradient of its window rows. The
    rows may be f32 over an f16/bf16 image (summed in f32, rounded once).
    With `columns`, `input` is `[C, KH, KW, N, OH, OW]` (`ll.im2col`'s
    columns form).

    ```mlir
    ll.col2im %dcols into %dx stride = [1, 1] padding = [1, 1]
        dilation = [1, 1] : memref<32x8x8x1x3x3xf32> -> memref<32x1x8x8xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<LL_FloatBuffer, "windows", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "image", [MemWrite]>:$out), LL_WindowAttrs);
  let assemblyFormat = [{
    $input `into` $out
    `stride` `=` $stride `padding` `=` $padding `dilation` `=` $dilation
    (`layout` `=` $layout^)? attr-dict `:` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_Pool2dOp : LL_Op<"pool2d"> {
  let summary = "2-D max or average pooling";
  let description = [{
    The buffer form of `hl.max_pool2d` / `hl.avg_pool2d`.

    ```mlir
    ll.pool2d max %x into %y kernel = [2, 2] stride = [2, 2] padding = [0, 0]
        : memref<32x16x8x8xf32> -> memref<32x16x4x4xf32>
    ```
  }];
  let arguments = (ins
    LL_PoolKind:$kind,
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    DenseI64ArrayAttr:$kernel,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DefaultValuedAttr<LL_Layout, "::ll::Layout::NCHW">:$layout
  );
  let assemblyFormat = [{
    $kind $input `into` $out `kernel` `=` $kernel `stride` `=` $stride
    `padding` `=` $padding (`layout` `=` $layout^)? attr-dict
    `:` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_Pool2dBackwardOp : LL_Op<"pool2d_backward",
    [AllTypesMatch<["input", "out"]>]> {
  let summary = "gradient of 2-D max or average pooling";
  let description = [{
    Max: each window's gradient goes to the window's first maximum in
    `input`; avg: spread over the kernel area. Overlapping windows add.

    ```mlir
    ll.pool2d_backward max %dy, %x into %dx kernel = [2, 2] stride = [2, 2]
        padding = [0, 0] : memref<32x16x4x4xf32>, memref<32x16x8x8xf32>
    ```
  }];
  let arguments = (ins
    LL_PoolKind:$kind,
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_FloatBuffer, "forward input", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "gradient w.r.t. the input", [MemWrite]>:$out,
    DenseI64ArrayAttr:$kernel,
    DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding,
    DefaultValuedAttr<LL_Layout, "::ll::Layout::NCHW">:$layout
  );
  let assemblyFormat = [{
    $kind $grad_output `,` $input `into` $out `kernel` `=` $kernel
    `stride` `=` $stride `padding` `=` $padding (`layout` `=` $layout^)?
    attr-dict `:` type($grad_output) `,` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

def LL_GatherOp : LL_Op<"gather"> {
  let summary = "selects slices along an axis by index (embedding lookup)";
  let description = [{
    `input [A..., n, B...]`, `indices [I...]` -> `out [A..., I..., B...]`,
    as `hl.gather`. An index outside `[0, n)` stops the step with an error.

    ```mlir
    ll.gather %table[%tokens] into %e axis = 0
        : memref<65x64xf32>, memref<16x64xi32> -> memref<16x64x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_Buffer, "input", [MemRead]>:$input,
    Arg<LL_IndexBuffer, "indices", [MemRead]>:$indices,
    Arg<LL_Buffer, "result", [MemWrite]>:$out,
    I64Attr:$axis
  );
  let assemblyFormat = [{
    $input `[` $indices `]` `into` $out `axis` `=` $axis attr-dict
    `:` type($input) `,` type($indices) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_ScatterAddOp : LL_Op<"scatter_add"> {
  let summary = "gradient of gather: zero, then add each slice at its index";
  let description = [{
    The adjoint of `ll.gather` with the same `axis`: `out` (the gathered
    input's type) is zeroed, then each slice of `grad_output` is added at
    the position its index names; repeated indices add up.

    ```mlir
    ll.scatter_add %de[%tokens] into %dtable axis = 0
        : memref<16x64x64xf32>, memref<16x64xi32> -> memref<65x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "upstream gradient", [MemRead]>:$grad_output,
    Arg<LL_IndexBuffer, "indices", [MemRead]>:$indices,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    I64Attr:$axis
  );
  let assemblyFormat = [{
    $grad_output `[` $indices `]` `into` $out `axis` `=` $axis attr-dict
    `:` type($grad_output) `,` type($indices) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_SliceOp : LL_Op<"slice"> {
  let summary = "copies a strided window of a buffer";
  let description = [{
    `out[i] = input[start + i * strides]` per dimension (`hl.slice`; the
    limit is implied by `out`'s shape). With `backward`, the adjoint: `out`
    has the sliced buffer's shape, is zeroed, and `input` (the window's
    gradient) is written at those positions.

    ```mlir
    ll.slice %x into %y start = [0, 2] strides = [1, 2]
        : memref<8x16xf32> -> memref<8x7xf32>
    ll.slice %dy into %dx start = [0, 2] strides = [1, 2] backward
        : memref<8x7xf32> -> memref<8x16xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_Buffer, "input", [MemRead]>:$input,
    Arg<LL_Buffer, "result", [MemWrite]>:$out,
    DenseI64ArrayAttr:$start,
    DenseI64ArrayAttr:$strides,
    UnitAttr:$backward
  );
  let assemblyFormat = [{
    $input `into` $out `start` `=` $start `strides` `=` $strides
    (`backward` $backward^)? attr-dict `:` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_ConcatOp : LL_Op<"concat"> {
  let summary = "joins buffers along one axis";
  let description = [{
    ```mlir
    ll.concat %a, %b into %c axis = 1
        : memref<4x3xf32>, memref<4x5xf32> -> memref<4x8xf32>
    ```
  }];
  let arguments = (ins
    Arg<Variadic<LL_Buffer>, "inputs", [MemRead]>:$inputs,
    Arg<LL_Buffer, "result", [MemWrite]>:$out,
    I64Attr:$axis
  );
  let assemblyFormat = [{
    $inputs `into` $out `axis` `=` $axis attr-dict `:` type($inputs) `->` type($out)
  }];
  let hasVerifier = 1;
}

def LL_ArgmaxOp : LL_Op<"argmax"> {
  let summary = "index of the maximum along one axis";
  let description = [{
    `out` is `input`'s shape with `axis` removed or kept as 1; the first
    maximum wins ties.

    ```mlir
    ll.argmax %logits into %pred axis = 1 : memref<32x10xf32> -> memref<32xi64>
    ```
  }];
  let arguments = (ins
    Arg<LL_Buffer, "input", [MemRead]>:$input,
    Arg<MemRefOf<[I64]>, "result", [MemWrite]>:$out,
    I64Attr:$axis
  );
  let assemblyFormat = [{
    $input `into` $out `axis` `=` $axis attr-dict `:` type($input) `->` type($out)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses and randomness
//===----------------------------------------------------------------------===//

def LL_MseLossOp : LL_Op<"mse_loss", [AllTypesMatch<["input", "target"]>]> {
  let summary = "mean squared error into a scalar";
  let description = [{
    ```mlir
    ll.mse_loss %pred, %target into %loss : memref<32x1xf32> -> memref<f32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    Arg<LL_FloatBuffer, "target", [MemRead]>:$target,
    Arg<MemRefRankOf<[F16, BF16, F32, F64], [0]>, "loss", [MemWrite]>:$loss,
    DefaultValuedAttr<LL_LossReduction, "::ll::LossReduction::Mean">:$reduction
  );
  let assemblyFormat = [{
    $input `,` $target `into` $loss (`reduction` `=` $reduction^)? attr-dict
    `:` type($input) `->` type($loss)
  }];
  let hasVerifier = 1;
}

def LL_DropoutOp : LL_Op<"dropout", [AllTypesMatch<["input", "out"]>]> {
  let summary = "inverted dropout from a counter-based random stream";
  let description = [{
    `hl.dropout` on buffers: the mask is Philox4x32-10 of the rank-0 `seed`
    and `offset` buffers and the static `stream` (the exact rule is in
    `hl.dropout`'s description), so a replayed step draws the same mask and
    the backward kernel, the same op on the gradient, the same zeros.

    ```mlir
    ll.dropout %x, %seed, %offset into %y p = 1.000000e-01 stream = 0
        : memref<32x128xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    Arg<LL_I64Scalar, "seed", [MemRead]>:$seed,
    Arg<LL_I64Scalar, "offset", [MemRead]>:$offset,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    F64Attr:$p,
    I64Attr:$stream
  );
  let assemblyFormat = [{
    $input `,` $seed `,` $offset `into` $out `p` `=` $p `stream` `=` $stream
    attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def LL_RandomOp : LL_Op<"random"> {
  let summary = "normal or uniform random numbers from a counter-based stream";
  let description = [{
    `hl.random_like` on buffers: `out` is filled from Philox4x32-10 of the
    rank-0 `seed` and `offset` buffers and the static `stream` (the exact
    rule is in `hl.random_like`'s description), so a replayed step draws
    the same numbers.

    ```mlir
    ll.random %seed, %offset into %y kind = "normal" a = 0.000000e+00
        b = 1.000000e+00 stream = 1 : memref<32x16xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_I64Scalar, "seed", [MemRead]>:$seed,
    Arg<LL_I64Scalar, "offset", [MemRead]>:$offset,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out,
    StrAttr:$kind,
    F64Attr:$a,
    F64Attr:$b,
    I64Attr:$stream
  );
  let assemblyFormat = [{
    $seed `,` $offset `into` $out `kind` `=` $kind `a` `=` $a `b` `=` $b
    `stream` `=` $stream attr-dict `:` type($out)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def LL_CopyOp : LL_Op<"copy", [AllTypesMatch<["source", "target"]>]> {
  let summary = "copies one buffer into another of the same type";
  let description = [{
    ```mlir
    ll.copy %src into %dst : memref<128xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_Buffer, "source", [MemRead]>:$source,
    Arg<LL_Buffer, "destination", [MemWrite]>:$target
  );
  let assemblyFormat = "$source `into` $target attr-dict `:` type($source)";
}

def LL_AllReduceOp : LL_Op<"all_reduce"> {
  let summary = "sums a bucket of buffers, weighted, over the replicas, in place";
  let description = [{
    One collective of a data-parallel train step: each buffer of the bucket
    is replaced by `sum over replicas r of weight_r * buffer_r` (the CPU
    runtime's MPI communicator, NCCL's pre-multiplied sum on a GPU; a
    single process scales the buffers by its weight). `weight` is a rank-0
    f32 buffer, the replica's share of the global batch.
    `ll-bucket-collectives` merges the one-buffer collectives that
    `convert-hl-to-ll` makes into buckets of about `bucket-bytes`, each
    placed right after the kernel that writes its last buffer, so the
    reduction of one bucket overlaps the kernels that compute the next. It
    is not a kernel: the runtime starts it where it stands and waits for it
    before the first later call that touches one of its buffers (on a GPU,
    on a stream of its own).

    ```mlir
    ll.all_reduce %dw2, %db2 weight %share : (memref<128x64xf32>, memref<64xf32>), memref<f32>
    ```

    With `local` (from `hl.all_reduce {local}`), the buffers are only
    scaled by the weight, on every run, in a group or alone: a
    micro-batch's share of an accumulated gradient.
  }];
  let arguments = (ins
    Arg<Variadic<LL_FloatBuffer>, "the bucket's buffers", [MemRead, MemWrite]>:$buffers,
    Arg<MemRefRankOf<[F32], [0]>, "the replica's weight", [MemRead]>:$weight,
    UnitAttr:$local
  );
  let assemblyFormat = "$buffers `weight` $weight attr-dict `:` `(` type($buffers) `)` `,` type($weight)";
}

def LL_FillOp : LL_Op<"fill"> {
  let summary = "sets every element of a floating-point buffer to one value";
  let description = [{
    ```mlir
    ll.fill %grad, 0.000000e+00 : memref<128x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_FloatBuffer, "destination", [MemWrite]>:$target,
    F64Attr:$value
  );
  let assemblyFormat = "$target `,` $value attr-dict `:` type($target)";
}

#endif // AICF_DIALECT_LL_LLOPS_TD
