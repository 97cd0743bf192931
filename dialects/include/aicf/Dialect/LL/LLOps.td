//===- LLOps.td - ll dialect: buffers, one op per kernel ---*- tablegen -*-===//
//
// `ll` is AICF's kernel-level dialect. Operands are memrefs (buffers that
// the memory planner places in one arena); every op is exactly one kernel
// launch. Each op declares which buffers it reads and which it writes, so
// lifetime analysis and scheduling need no per-op knowledge.
//
// This first slice holds the kernels of an MLP train step; later work adds
// convolution, attention, normalisation and the optimizer update.
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

def LL_Activation : I32EnumAttr<"Activation", "GEMM epilogue activation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Relu", 1, "relu">]> {
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

def LL_GemmOp : LL_Op<"gemm"> {
  let summary = "matrix product with a fused bias and activation epilogue";
  let description = [{
    One GEMM kernel: `out = act(alpha * op(a) @ op(b) + bias)`, where
    `op(x)` transposes `x` when `transpose_a` / `transpose_b` is set, `bias`
    (optional, `[N]`) is broadcast over the rows, and `act` is applied last.
    With `accumulate`, the product is added to the current contents of `out`
    before the bias (`out += ...`), which is how gradients of a parameter used
    twice are summed without a temporary. `out` must not alias `a` or `b`.

    ```mlir
    ll.gemm %x, %w bias(%b) into %y transpose_b act = relu
        : memref<32x64xf32>, memref<128x64xf32>, memref<128xf32> -> memref<32x128xf32>
    ll.gemm %dy, %x into %dw transpose_a
        : memref<32x128xf32>, memref<32x64xf32> -> memref<128x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_Matrix, "left operand", [MemRead]>:$a,
    Arg<LL_Matrix, "right operand", [MemRead]>:$b,
    Arg<Optional<LL_Vector>, "bias over columns", [MemRead]>:$bias,
    Arg<LL_Matrix, "result", [MemRead, MemWrite]>:$out,
    UnitAttr:$transpose_a,
    UnitAttr:$transpose_b,
    UnitAttr:$accumulate,
    DefaultValuedAttr<F64Attr, "1.0">:$alpha,
    DefaultValuedAttr<LL_Activation, "::ll::Activation::None">:$act
  );
  let assemblyFormat = [{
    $a `,` $b (`bias` `(` $bias^ `)`)? `into` $out
    (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)?
    (`accumulate` $accumulate^)? (`alpha` `=` $alpha^)? (`act` `=` $act^)?
    attr-dict `:` type($a) `,` type($b) (`,` type($bias)^)? `->` type($out)
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
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)`
    `outs` `(` $outputs `:` type($outputs) `)` $body attr-dict
  }];
  let hasVerifier = 1;
}

def LL_YieldOp : LL_Op<"yield",
    [Pure, Terminator, HasParent<"ElementwiseOp">]> {
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

def LL_SoftmaxCrossEntropyOp : LL_Op<"softmax_cross_entropy"> {
  let summary = "softmax cross-entropy loss and, optionally, its gradient";
  let description = [{
    One row-reduction kernel over `logits: [N, C]` and integer `labels: [N]`.
    Writes the scalar loss (mean or sum over rows of
    `logsumexp(logits[i]) - logits[i, labels[i]]`) to `loss`, and, when `grad`
    is given, `d loss / d logits` (`softmax(logits) - onehot(labels)`, divided
    by `N` for `mean`) to `grad`, so the forward loss and the start of the
    backward pass are one kernel.

    ```mlir
    ll.softmax_cross_entropy %logits, %labels into %loss, %dlogits
        : memref<32x10xf32>, memref<32xi32> -> memref<f32>, memref<32x10xf32>
    ```
  }];
  let arguments = (ins
    Arg<LL_Matrix, "logits", [MemRead]>:$logits,
    Arg<MemRefRankOf<[I32, I64], [1]>, "labels", [MemRead]>:$labels,
    Arg<MemRefRankOf<[F16, BF16, F32, F64], [0]>, "loss", [MemWrite]>:$loss,
    Arg<Optional<LL_Matrix>, "gradient w.r.t. logits", [MemWrite]>:$grad,
    DefaultValuedAttr<LL_LossReduction, "::ll::LossReduction::Mean">:$reduction
  );
  let assemblyFormat = [{
    $logits `,` $labels `into` $loss (`,` $grad^)?
    (`reduction` `=` $reduction^)? attr-dict
    `:` type($logits) `,` type($labels) `->` type($loss) (`,` type($grad)^)?
  }];
  let hasVerifier = 1;
}

def LL_ReduceOp : LL_Op<"reduce"> {
  let summary = "reduces a buffer over a set of dimensions";
  let description = [{
    `out = combine over dims of input`: the output has the input's shape
    with the reduced dimensions removed. Bias gradients are column sums
    (`dims = [0]` of a `[N, C]` gradient).

    ```mlir
    ll.reduce sum %dy dims = [0] into %db : memref<32x128xf32> -> memref<128xf32>
    ```
  }];
  let arguments = (ins
    LL_ReduceKind:$kind,
    Arg<LL_FloatBuffer, "input", [MemRead]>:$input,
    DenseI64ArrayAttr:$dims,
    Arg<LL_FloatBuffer, "result", [MemWrite]>:$out
  );
  let assemblyFormat = [{
    $kind $input `dims` `=` $dims `into` $out attr-dict
    `:` type($input) `->` type($out)
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
