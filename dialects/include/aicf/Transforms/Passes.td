//===- Passes.td - AICF passes ----------------------------*- tablegen -*-===//
//
// Every AICF pass is declared here: argument, summary, description with
// before/after IR, typed options. The generated C++ base class parses the
// options; `runOnOperation` hands the operation and the options to the pass
// body, which is written in Rust (compiler/src/passes/). One source of truth
// for names, help and options; the logic stays in Rust. The exception is
// `aicf-approximate-math`, whose body is MLIR's own patterns (C++).
//
//===----------------------------------------------------------------------===//

#ifndef AICF_TRANSFORMS_PASSES_TD
#define AICF_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AICFApproximateMath : Pass<"aicf-approximate-math", "::mlir::ModuleOp"> {
  let summary = "Replace f32 math functions by MLIR's polynomial approximations";
  let description = [{
    Rewrites each f32 op named in `ops` (scalar or vector) into MLIR's
    polynomial approximation of it (`populateMathPolynomialApproximationPatterns`):
    arithmetic, bit operations and selects, with no library call. The CPU
    backend runs it on its kernels for `math.exp` before lowering them to
    LLVM: a loop whose body calls the vector library's `exp` spills its
    registers around every call, while the inline polynomial vectorises
    with the rest of the body. Error: a few ulp (MLIR's tests), inside the
    tolerance of every comparison against the interpreter.

    Input:

    ```mlir
    %y = math.exp %x : f32
    ```

    Output: a range reduction (`x = k ln 2 + r`), a degree-6 polynomial in
    `r`, and `2^k` built in the exponent bits, with the overflow, underflow
    and NaN cases selected.
  }];
  let options = [
    ListOption<"ops", "ops", "std::string",
               "The math ops to approximate, by name (math.exp, math.log, math.tanh, ...; not math.rsqrt; default: math.exp)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def HLAutodiff : Pass<"hl-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of an hl loss function";
  let dependentDialects = ["::hl::HLDialect", "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect"];
  let description = [{
    Adds `@<function>_grad`, which takes the arguments of `@<function>` (a
    function returning one floating-point scalar, the loss) and returns the
    loss followed by its gradient with respect to every `hl.param` of the
    module, in declaration order, and, with `wrt-inputs`, with respect to
    every floating-point argument.

    The forward ops are cloned into the new function and the gradient is
    built behind them in reverse order, one rule per op kind (a
    vector-Jacobian product written in `hl` ops): gradients of broadcast
    operands are summed back to the operand's shape, a value used several
    times sums the gradients of its uses, and integer values (labels,
    indices, masks) have none. The result is ordinary `hl` that the later
    passes optimise like any other. An op on the path from the parameters to
    the loss that has no rule is an error on that op.

    Before:
    ```mlir
    hl.param @w : tensor<4x3xf32> owner "" init <zeros>
    func.func @loss(%x: tensor<2x3xf32>) -> tensor<f32> {
      %w = hl.get_param @w : tensor<4x3xf32>
      %y = hl.linear %x, %w : tensor<2x3xf32>, tensor<4x3xf32>
      %l = hl.reduce_sum %y axes = [0, 1] : tensor<2x4xf32>
      return %l : tensor<f32>
    }
    ```
    After (`@loss` unchanged):
    ```mlir
    func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32>, tensor<4x3xf32>) {
      ... forward ...
      %one = hl.constant dense<1.0> : tensor<f32>
      %g = hl.broadcast_to ... : tensor<1x1xf32> to tensor<2x4xf32>
      %dw = hl.matmul %g, %x transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32>
      return %l, %dw : tensor<f32>, tensor<4x3xf32>
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The function to differentiate">,
    Option<"wrtInputs", "wrt-inputs", "bool", /*default=*/"false",
           "Also return the gradient of every floating-point argument">,
    Option<"fusedAttentionBackward", "fused-attention-backward", "bool", /*default=*/"false",
           "Attention's gradient as one hl.attention_backward where its "
           "heads are f16/bf16 of multiples of 16 up to 128, the GPU's "
           "tensor-core kernels (else GEMMs over the materialised "
           "probabilities)">,
    Option<"fusedAttentionAnyHeads", "fused-attention-any-heads", "bool", /*default=*/"false",
           "With fused-attention-backward, every attention's gradient is "
           "one hl.attention_backward, whatever its heads (the CPU's "
           "blocked kernel takes them all)">,
  ];
}

def HLFuseElementwise : Pass<"hl-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Fuse chains of elementwise ops into hl.fused_elementwise";
  let dependentDialects = ["::hl::HLDialect", "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
  let description = [{
    Groups elementwise `hl` ops (arithmetic, activations, compare, select,
    cast) into one `hl.fused_elementwise` per group, whose body is their
    scalar form in `arith` and `math`: one kernel instead of one per op.
    An op joins its operand's producer when that producer is elementwise,
    has this op as its only use, and has this op's shape. Splat constants
    become scalar constants of the body.

    The cost rule: an intermediate used by another op is materialised (the
    group would otherwise be computed twice), and so is one that a consumer
    broadcasts (fusing would recompute it for every element of the larger
    result).

    Before:
    ```mlir
    %s = hl.mul %g, %lr : tensor<128x64xf32>, tensor<f32>
    %p = hl.sub %w, %s : tensor<128x64xf32>, tensor<128x64xf32>
    ```
    After:
    ```mlir
    %p = hl.fused_elementwise ins(%g, %lr, %w : tensor<128x64xf32>, tensor<f32>,
                                  tensor<128x64xf32>) -> tensor<128x64xf32> {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %0 = arith.mulf %a, %b : f32
      %1 = arith.subf %c, %0 : f32
      hl.yield %1 : f32
    }
    ```
  }];
}

def HLFuseGemmEpilogue : Pass<"hl-fuse-gemm-epilogue", "::mlir::ModuleOp"> {
  let summary = "Fuse matmul/linear with the elementwise ops after them into hl.gemm";
  let dependentDialects = ["::hl::HLDialect", "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
  let description = [{
    Rewrites every `hl.linear` and `hl.matmul` as `hl.gemm`, then absorbs
    into each GEMM's epilogue the op that is the only use of its result,
    repeatedly, in epilogue order: a multiplication by a constant scalar
    (`alpha`), the addition of a `[N]` vector (`bias`), an activation
    (`relu`, `gelu`, `silu`, `tanh`, `sigmoid`), a ReLU derivative mask
    `select(compare gt(h, 0), y, 0)` (`mask`, the backward pass's form),
    and the addition of a tensor of the result's type (`residual`).

    The cost rule: a GEMM whose result is used more than once is not fused
    into any of its uses, since the others still need the plain product and
    the GEMM would be computed twice.

    Before:
    ```mlir
    %y = hl.linear %x, %w, %b : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
    %h = hl.relu %y : tensor<32x128xf32>
    ```
    After:
    ```mlir
    %h = hl.gemm %x, %w bias(%b) transpose_rhs act = relu
        : tensor<32x64xf32>, tensor<128x64xf32> bias tensor<128xf32>
    ```
  }];
}

def HLFuseReductions : Pass<"hl-fuse-reductions", "::mlir::ModuleOp"> {
  let summary = "Fuse row reductions that read the same rows into one op";
  let dependentDialects = ["::hl::HLDialect", "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
  let description = [{
    A cross-entropy and the cross-entropy backward of the same logits,
    labels and attributes become one `hl.softmax_cross_entropy` (loss and
    gradient from one softmax per row: one kernel instead of two passes
    over the logits). The fused op goes right after the later of the
    forward and the definition of the backward's upstream gradient, so the
    pair is left alone when the loss is used before that place (fusing
    would need the loss earlier than it can be computed). Then the fused
    op absorbs autocast's casts around it (16-bit logits read directly,
    the loss and upstream gradient kept f32) and a padded head's slice and
    zero-padding (`classes = N`). A cross-entropy with no backward (an
    evaluation's `@loss`) of 16-bit logits cast to f32, sliced from a
    padded head or not, becomes the same op reading the 16-bit rows, with
    an upstream gradient of one and its gradient unused: the loss alone.

    Before:
    ```mlir
    %l = hl.cross_entropy %logits, %y : tensor<32x10xf32>, tensor<32xi32>
    %d = hl.cross_entropy_backward %logits, %y, %one
        : tensor<32x10xf32>, tensor<32xi32>, tensor<f32>
    ```
    After:
    ```mlir
    %l, %d = hl.softmax_cross_entropy %logits, %y, %one
        : tensor<32x10xf32>, tensor<32xi32>, tensor<f32> -> tensor<f32>
    ```
  }];
}

def HLFuseAttention : Pass<"hl-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Fuse attention written out as matmul, scale, causal mask, softmax and matmul into hl.attention";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Attention as an ONNX export of a PyTorch GPT (or a hand-written model)
    holds it, `softmax(q k^T * scale [masked]) v` as its ops, becomes one
    `hl.attention`: the fused kernel, which never materialises the scores,
    and one `hl.attention_backward` where the train pipeline fuses
    attention's gradient. The scale is any chain of positive constant
    factors and divisors on the scores; the mask, optional, is a causal
    constant: `select(mask, -inf, s)` with `mask[i][j] = j > i`,
    `select(tril, s, -inf)`, or `s + M` with `M` 0 on and below the
    diagonal and -inf (or at most -1e30, as scaled after it) above. The
    guard PyTorch's exported SDPA puts on the probabilities,
    `select(p != p, 0, p)`, is read through (no row of a causal mask is
    hidden wholly). Taken only where the whole chain is read once
    (probabilities returned or dropped out stay as they are) and the
    softmax is over the last axis.

    Before:
    ```mlir
    %s = hl.matmul %q, %kt : tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>
    %c = hl.mul %s, %scale : tensor<2x4x16x16xf32>, tensor<f32>
    %m = hl.select %upper, %ninf, %c : tensor<16x16xi1>, tensor<f32>, tensor<2x4x16x16xf32>
    %p = hl.softmax %m axis = 3 : tensor<2x4x16x16xf32>
    %o = hl.matmul %p, %v : tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>
    ```
    After (`%k` the keys `[.., S, D]`, through the transpose that made
    `%kt` where there is one):
    ```mlir
    %o = hl.attention %q, %k, %v causal scale = 0.35355339059327373
        : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
    ```
  }];
}

def HLFuseOptimizer : Pass<"hl-fuse-optimizer", "::mlir::ModuleOp"> {
  let summary = "Fuse the per-parameter updates of a train step into one multi-tensor kernel";
  let dependentDialects = ["::hl::HLDialect", "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
  let description = [{
    After `hl-fuse-elementwise`, each parameter's update (SGD, or Adam's
    two moments and the parameter, as one multi-output op) is an
    `hl.fused_elementwise` whose results only the function's `return` uses.
    Those with the same body (same scalar ops, attributes and wiring; the
    shapes may differ) become one `hl.multi_tensor_apply` at the place of
    the last of them: one kernel launch for all parameters instead of one
    per tensor. Updates with different bodies (another optimizer setting per
    group) form one op per body; a body used once is left alone.

    Before:
    ```mlir
    %w = hl.fused_elementwise ins(%gw, %lr, %pw : ...) -> tensor<128x64xf32> {...}
    %b = hl.fused_elementwise ins(%gb, %lr, %pb : ...) -> tensor<128xf32> {...}
    return %loss, %w, %b : ...
    ```
    After:
    ```mlir
    %w, %b = hl.multi_tensor_apply ins(%gw, %lr, %pw, %gb, %lr, %pb : ...)
        -> tensor<128x64xf32>, tensor<128xf32> {...}
    return %loss, %w, %b : ...
    ```
  }];
}

def HLOptimizer : Pass<"hl-optimizer", "::mlir::ModuleOp"> {
  let summary = "Append the optimizer update: a complete train step";
  let dependentDialects = ["::hl::HLDialect", "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect"];
  let description = [{
    Adds `@train_step`: the gradient of `@<function>` (from
    `@<function>_grad`, which `hl-autodiff` is run to create when missing),
    optional clipping of all gradients by their global L2 norm, and one
    update per parameter with PyTorch's semantics:

    - `sgd`: `g += wd p`; with momentum `b = m b + g` and
      `g = nesterov ? g + m b : b`; `p -= lr g`.
    - `adam`: `g += wd p`; `m = b1 m + (1-b1) g`; `v = b2 v + (1-b2) g^2`;
      `p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)`, `t` the step
      count after this step.
    - `adamw`: as adam without the `g += wd p`, after `p *= 1 - lr wd`.
    - clipping (`clip-norm` > 0): `g *= min(1, max / (||g||_2 + 1e-6))`
      over all gradients together.

    `weight-decay` defaults to 0 for every kind (PyTorch's AdamW defaults to
    0.01: pass it explicitly). With `decay-min-rank=2`, parameters of fewer
    than two dimensions (biases, norm weights) take none: the parameter
    groups nanoGPT's `configure_optimizers` and Hugging Face's `Trainer`
    make.

    With `data-parallel`, the step takes one more input, the replica's share
    of the global batch (`hl.bind = "replica_weight"`: its rows over the
    rows of all replicas, rank 0, f32), and before anything reads the
    gradients (loss-scale checks, clipping, the update) the loss, every
    gradient and every `hl.set_state` value is multiplied by it and summed
    over the replicas with `hl.all_reduce`: each replica then holds the
    gradient of the mean loss over the global batch, as one process
    training on all of it would, and makes the same update.

    With `accumulate`, two more functions split the step where its
    gradients are summed, for gradient accumulation over micro-batches,
    with an accumulator state per summed value (`hl.state
    @accumulated.<name> ... slot "grad_sum"`: the loss, each gradient, each
    set state): `@train_grad(inputs..., replica_weight, first_micro_batch)`
    adds one micro-batch's values times its weight (`hl.all_reduce
    {local}`) to the accumulators (`"state @accumulated.<name>"` results;
    with `first_micro_batch` above 0.5 they replace them), and
    `@train_apply(lr, replica_weight)` sums the accumulators over the
    replicas (with `data-parallel`) and makes `@train_step`'s update from
    them. N micro-batches of B rows then train as a step of N x B rows, and
    as N replicas of B rows do (the same additions in the same order: the
    same bits).

    The optimizer state is declared in the IR as `hl.state` symbols tied to
    their parameter (`@fc1.weight.exp_avg ... of @fc1.weight slot
    "exp_avg"`), plus the step count `@step`.

    The train-step ABI: arguments are `@<function>`'s arguments (the
    batch, `hl.bind = "input"`) and the learning rate (`hl.bind = "lr"`, a
    runtime value: a schedule never recompiles). Parameters and state are
    read by symbol. Results are the loss (`"loss"`), the updated parameters
    in declaration order (`"param @name"`) and the updated state in
    declaration order (`"state @name"`); the runtime writes each back to the
    symbol it names.

    ```mlir
    func.func @train_step(%x: tensor<32x64xf32>, %y: tensor<32xi32>,
                          %lr: tensor<f32> {hl.bind = "lr"})
        -> (tensor<f32> {hl.bind = "loss"},
            tensor<128x64xf32> {hl.bind = "param @fc1.weight"}, ...,
            tensor<i64> {hl.bind = "state @step"})
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The loss function to train">,
    Option<"kind", "kind", "std::string", /*default=*/"\"adam\"",
           "sgd, adam or adamw">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "L2 penalty (sgd, adam) or decoupled decay (adamw)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam's first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam's second-moment decay">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam's denominator term">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0.0",
           "Clip all gradients to this global L2 norm (0: off)">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "Dynamic loss scaling from this scale (0: off; fp16 takes 65536): "
           "a step with a non-finite gradient changes nothing and halves it">,
    Option<"scaleGrowthInterval", "scale-growth-interval", "int64_t", /*default=*/"2000",
           "Finite steps in a row after which the loss scale doubles">,
    Option<"dataParallel", "data-parallel", "bool", /*default=*/"false",
           "Average the loss and gradients over the replicas of a "
           "data-parallel run before the update (hl.all_reduce)">,
    Option<"accumulate", "accumulate", "bool", /*default=*/"false",
           "Also emit @train_grad and @train_apply, the step split where "
           "its gradients are summed, for gradient accumulation">,
    Option<"fusedAttentionBackward", "fused-attention-backward", "bool", /*default=*/"false",
           "Attention's gradient as one hl.attention_backward (as hl-autodiff's)">,
    Option<"fusedAttentionAnyHeads", "fused-attention-any-heads", "bool", /*default=*/"false",
           "With fused-attention-backward, for every attention (as hl-autodiff's)">,
    Option<"decayMinRank", "decay-min-rank", "int64_t", /*default=*/"0",
           "Parameters of fewer dimensions take no weight decay (2: biases "
           "and norm weights take none, as nanoGPT's parameter groups)">,
  ];
}

def HLAutocast : Pass<"hl-autocast", "::mlir::ModuleOp"> {
  let summary = "Mixed precision: contractions in bf16/f16, accuracy guards in f32";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Rewrites every function for mixed-precision training, before autodiff
    (so the backward pass inherits each op's precision), by a policy table
    in the spirit of `torch.autocast`:

    - contractions (`matmul`, `linear`, `gemm`, `conv2d`, `attention`) take
      their float operands in `dtype`; their kernels accumulate in f32;
    - `exp`, `log`, `pow`, `rsqrt`, `softmax`, `log_softmax`, the norms,
      `reduce_sum`, `reduce_mean` and every loss take 16-bit operands in f32;
    - mixed-type elementwise ops widen to their widest float operand (a
      scalar or splat constant follows the others);
    - everything else computes in its input's type.

    Parameters and optimizer state stay f32 (master weights): contractions
    read `hl.cast` of a parameter, and its gradient returns through the cast
    in f32. Function signatures do not change. `fp32-ops` and `low-ops`
    override the table per op, `fp32-layers` keeps every op reading a
    parameter under the given prefixes in f32.

    Input (`dtype=bf16`):

    ```mlir
    %w = hl.get_param @fc.weight : tensor<10x64xf32>
    %y = hl.linear %x, %w : tensor<32x64xf32>, tensor<10x64xf32>
    ```

    Output:

    ```mlir
    %w = hl.get_param @fc.weight : tensor<10x64xf32>
    %0 = hl.cast %x : tensor<32x64xf32> to tensor<32x64xbf16>
    %1 = hl.cast %w : tensor<10x64xf32> to tensor<10x64xbf16>
    %y = hl.linear %0, %1 : tensor<32x64xbf16>, tensor<10x64xbf16>
    ```
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "The low type: bf16, f16 (f32: no change)">,
    Option<"fp32Ops", "fp32-ops", "std::string", /*default=*/"\"\"",
           "Ops kept in f32 (comma-separated, e.g. matmul,hl.gelu)">,
    Option<"lowOps", "low-ops", "std::string", /*default=*/"\"\"",
           "Ops computed in the low type besides the contractions">,
    Option<"fp32Layers", "fp32-layers", "std::string", /*default=*/"\"\"",
           "Parameter prefixes whose ops stay in f32 (comma-separated)">,
  ];
}

def HLPadContractions : Pass<"hl-pad-contractions", "::mlir::ModuleOp"> {
  let summary = "Pads large 16-bit contractions to aligned dimensions";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Tensor-core GEMMs move 16-byte vectors; a bf16 row whose length is not a
    multiple of 8 (GPT-2's vocabulary of 50,257) leaves only kernels several
    times slower. Like Inductor's `pad_mm`, this pass pads N and K of every
    16-bit `hl.linear` and `hl.matmul` of at least `min-macs` multiply-adds
    up to a multiple of `multiple` with zeros (`hl.slice_backward`) and
    slices the result back (`hl.slice`): every result element is the same
    sum. Autodiff, which runs after it, pads the gradients the same way, so
    the backward GEMMs read aligned rows too. Part of the train pipeline
    after `hl-autocast` (bf16 and fp16).

    Input (`multiple=8`):

    ```mlir
    %y = hl.linear %x, %w : tensor<4096x768xbf16>, tensor<50257x768xbf16>
    ```

    Output:

    ```mlir
    %0 = hl.slice_backward %w start = [0, 0] limit = [50257, 768] strides = [1, 1]
        : tensor<50257x768xbf16> -> tensor<50264x768xbf16>
    %1 = hl.linear %x, %0 : tensor<4096x768xbf16>, tensor<50264x768xbf16>
    %y = hl.slice %1 start = [0, 0] limit = [4096, 50257] strides = [1, 1]
        : tensor<4096x50264xbf16>
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"8",
           "Pad N and K up to a multiple of this many elements">,
    Option<"minMacs", "min-macs", "int64_t", /*default=*/"134217728",
           "Leave contractions of fewer multiply-adds as they are">,
  ];
}

def HLSetBatch : Pass<"hl-set-batch", "::mlir::ModuleOp"> {
  let summary = "Retarget a model to another batch size";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Gives the model a new batch size: every function argument whose leading
    dimension is the model's batch gets `size` instead, every op then infers
    its result types again from its operands, in order, and each function's
    type follows its arguments and returned values. Parameters, state and
    the ops themselves are unchanged, so the same checkpoint (and a live
    session's state) fits the model at either batch size. This is how a
    smaller last batch is compiled: once per shape, cached by it.

    The model's batch is `from` when given, otherwise the leading dimension
    of the first argument of `@forward` (or, without `@forward`, of the
    first function that has arguments).

    An op whose shape is fixed by an attribute (a reshape to `[32, 64]`
    rather than `[-1, 64]`) cannot follow; it is an error at that op.

    Input (`size=7`):

    ```mlir
    func.func @forward(%x: tensor<32x64xf32>) -> tensor<32x10xf32>
    ```

    Output:

    ```mlir
    func.func @forward(%x: tensor<7x64xf32>) -> tensor<7x10xf32>
    ```
  }];
  let options = [
    Option<"size", "size", "int64_t", /*default=*/"0", "The new batch size (required, > 0)">,
    Option<"from", "from", "int64_t", /*default=*/"0",
           "The batch size to replace (0: the leading dimension of @forward's first argument)">,
  ];
}

def HLAddHeads : Pass<"hl-add-heads", "::mlir::ModuleOp"> {
  let summary = "Add heads to a multi-head attention (zero-output new heads)";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Gives the multi-head attention at `attention` (the layer API's layout:
    `<path>.q_proj`, `k_proj`, `v_proj`, `out_proj` linears, the q/k/v
    outputs split by `hl.reshape` into `[batch, seq, heads, head_dim]` and
    merged back after `hl.attention`) `heads` heads in all, of the same
    size: the q/k/v projections grow by whole heads along their output
    rows, the output projection along its input columns, the split and
    merge reshapes follow, and every other op infers its types again.

    Function preservation: exact with the values carried by AICF's rule
    (`aicf_compiler::adapt`, `Operator::Heads`): the new heads' q/k/v
    weights come from the initialiser and the output projection's new
    columns start at zero, so the new heads add nothing until trained.
    With `mask=K` (MSG), the merged heads are multiplied by a per-channel
    mask of a counter state (`@<attention>.mask`) before the output
    projection reads them, so new heads with any output weights (AICF's
    `fresh` heads) leave the function unchanged while their mask is 0.

    Input (`attention=attn heads=3`, head_dim 4):

    ```mlir
    %q = hl.linear %x, %wq, %bq : tensor<2x6x8xf32>, tensor<8x8xf32>, tensor<8xf32>
    %qh = hl.reshape %q : tensor<2x6x8xf32> to tensor<2x6x2x4xf32>
    ```

    Output:

    ```mlir
    %q = hl.linear %x, %wq, %bq : tensor<2x6x8xf32>, tensor<12x8xf32>, tensor<12xf32>
    %qh = hl.reshape %q : tensor<2x6x12xf32> to tensor<2x6x3x4xf32>
    ```
  }];
  let options = [
    Option<"attention", "attention", "std::string", /*default=*/"\"\"", "The attention layer's path">,
    Option<"heads", "heads", "int64_t", /*default=*/"0", "Its new number of heads (more than now)">,
    Option<"mask", "mask", "int64_t", /*default=*/"0",
           "Masked entry (MSG): the new heads' channels ramp in over this many steps (0: no mask)">,
    Option<"mask_delay", "mask_delay", "int64_t", /*default=*/"0", "Steps a new head's mask stays 0 before the ramp">,
  ];
}

def HLWidenResidual : Pass<"hl-widen-residual", "::mlir::ModuleOp"> {
  let summary = "Widen a pre-norm residual network's stream (embeddings, norms, every projection)";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Gives the residual stream `width` channels. The stream starts at the
    embedding lookups (`hl.gather` of a parameter table) and runs through
    adds and dropout; the embedding tables' columns, the output rows and
    biases of every linear layer added into it, every layer norm's weight
    and bias, and the input columns of every linear layer that reads it (or
    a layer norm of it) grow; with `rule=mean` (the default) each layer
    norm's `eps` is scaled by `old / width`. A post-norm add, a reduction
    or any other op on the stream is an error at that op; so are tied
    weights.

    Function preservation: exact in evaluation with the values carried by
    AICF's rule (`aicf_compiler::adapt`, `Operator::WidenResidual`): new
    producer units are the mean of the old ones (the stream's mean is kept
    and its variance scaled by `old / width`), the layer norms' old weights
    are scaled by `sqrt(old / width)` so their outputs are unchanged on the
    old channels and zero on the new, and raw-stream readers get zero new
    columns. With `rule=duplicate` (`width` a multiple of the old width),
    each new channel copies old channel `j mod old` in every producer and
    layer norm, so the stream's mean and variance, and the norms' `eps`,
    are unchanged; readers split each old column among its copies (with
    noise that sums to zero over them, which breaks the copies' symmetry).
    A dropout on the stream draws new masks for the wider tensor.

    Input (`width=128`):

    ```mlir
    hl.param @tok_emb.weight : tensor<65x64xf32> ...
    %n = hl.layer_norm %x weight %w bias %b dims = 1 eps = 1.0e-05 : ...
    ```

    Output:

    ```mlir
    hl.param @tok_emb.weight : tensor<65x128xf32> ...
    %n = hl.layer_norm %x weight %w bias %b dims = 1 eps = 5.0e-06 : ...
    ```
  }];
  let options = [
    Option<"width", "width", "int64_t", /*default=*/"0", "The stream's new width (more than now)">,
    Option<"rule", "rule", "std::string", /*default=*/"\"mean\"",
           "mean (new channels the mean of the old, norms rescaled) or duplicate (copies of the old channels; width a multiple of the old)">,
  ];
}

def HLInsertBlock : Pass<"hl-insert-block", "::mlir::ModuleOp"> {
  let summary = "Insert a residual block into a stack of blocks (depth growth, stacking)";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Blocks are the parameters `<prefix>.<i>.*`, `i = 0..n`; block `i`'s ops
    are those that depend on its parameters and on no parameter declared
    after them, with one input and one output of the stream's type. The
    pass clones block `from`'s ops into position `at` of the stream (between
    blocks `at-1` and `at`; `at=-1`: after the last; `from=-1`: the block
    before `at`), reading new parameters `<prefix>.<at>.*` declared like
    block `from`'s (new dropout streams for its dropouts), and renames the
    blocks from `at` on one up.

    Function preservation: with the block's output projections (the linear
    layers its residual adds add) zero, the new block is the identity:
    AICF's `zero` rule (`Operator::AddBlock`). The `copy` rule (stacking)
    copies block `from`'s values and is not function-preserving. With
    `mask=K` (MSG), every branch the new block adds is multiplied by
    `clamp((c - mask_delay) / K, 0, 1)`, where `c` is a counter state
    (`hl.state @<prefix>.<at>.mask slot "mask"`) the train step increments:
    exact for any values of the new block, which gets zero gradients while
    its mask is 0.

    Input (`prefix=blocks at=-1`): a model with `@blocks.0.*`, `@blocks.1.*`.
    Output: `@blocks.2.*` declared like `@blocks.1.*`, its ops after block 1.
  }];
  let options = [
    Option<"prefix", "prefix", "std::string", /*default=*/"\"blocks\"", "The blocks' parameter prefix">,
    Option<"at", "at", "int64_t", /*default=*/"-1", "The new block's position (-1: after the last)">,
    Option<"from", "from", "int64_t", /*default=*/"-1", "The block it is built like (-1: the one before it)">,
    Option<"mask", "mask", "int64_t", /*default=*/"0",
           "Masked entry (MSG): the new block's branches ramp in over this many steps (0: no mask)">,
    Option<"mask_delay", "mask_delay", "int64_t", /*default=*/"0", "Steps the mask stays 0 before the ramp">,
  ];
}

def HLWiden : Pass<"hl-widen", "::mlir::ModuleOp"> {
  let summary = "Widen a linear layer's hidden units (Net2WiderNet, zero-out growth)";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Gives linear layer `layer` `width` output units. Its weight (`[H, in]`)
    and bias grow along their first axis; every `hl.linear` that reads its
    units, through elementwise activations (relu, gelu, tanh, sigmoid, silu,
    ...), grows its weight along the second axis, and gets PyTorch's bias
    bound for the new fan-in when it had the old one. Every op then infers
    its types again. A layer whose units reach anything else (an add, a
    norm, the function's result) is an error at that op.

    Function preservation: the pass rewrites the architecture; parameter
    values live in the runtime. With the values carried by AICF's widening
    rules (`aicf_compiler::adapt`), the function is preserved exactly:
    `net2wider` copies units and splits their outgoing weights among the
    copies; `zero-out` (GradMax-style) gives the new units fresh incoming
    weights and zero outgoing weights. Trained from its initialisers (as
    `aicf-opt` output alone), the model is a new, wider one. With
    `mask=K` (MSG), the layer's units are multiplied by a per-unit mask
    `clamp((c - mask_delay) / K, 0, 1)` of a counter state
    (`@<layer>.mask`, slot `mask`) the train step advances: new units with
    any outgoing weights then leave the function unchanged.

    Input (`layer=fc1 width=256`):

    ```mlir
    hl.param @fc1.weight : tensor<128x64xf32> ...
    hl.param @fc2.weight : tensor<10x128xf32> ...
    ```

    Output:

    ```mlir
    hl.param @fc1.weight : tensor<256x64xf32> ...
    hl.param @fc2.weight : tensor<10x256xf32> ...
    ```
  }];
  let options = [
    Option<"layer", "layer", "std::string", /*default=*/"\"\"", "The linear layer to widen (its parameters' owner)">,
    Option<"width", "width", "int64_t", /*default=*/"0", "Its new number of output units (>= the current)">,
    Option<"mask", "mask", "int64_t", /*default=*/"0",
           "Masked entry (MSG): the units ramp in over this many steps, by a per-unit counter (0: no mask)">,
    Option<"mask_delay", "mask_delay", "int64_t", /*default=*/"0", "Steps a new unit's mask stays 0 before the ramp">,
  ];
}

def HLDeepen : Pass<"hl-deepen", "::mlir::ModuleOp"> {
  let summary = "Insert a layer after a linear layer's activation (Net2DeeperNet, zero-init residual)";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Inserts a new `width x width` linear layer `name` after linear layer
    `after` and its activations: `relu(linear(a))` where the activation
    chain ends in `a = relu(...)`, or, with `residual=true`,
    `a + fc_out(relu(fc_in(a)))` after any activation (parameters
    `name.fc_in.*` and `name.fc_out.*`). Every other use of `a` reads the new
    value. The new parameters are declared after `after`'s, with PyTorch's
    `nn.Linear` initialisers.

    Function preservation: exact with the values carried by AICF's deepening
    rules (`aicf_compiler::adapt`): the identity layer gets weight I and
    bias 0 (relu(I a) = a for a >= 0, which is why a relu must end the
    chain); the residual block's output projection starts at zero. Trained
    from its initialisers alone, the model is a new, deeper one.

    Input (`after=fc1 name=fc1_deep`):

    ```mlir
    %h = hl.linear %x, %w1, %b1 : ...
    %a = hl.relu %h : tensor<32x128xf32>
    %logits = hl.linear %a, %w2, %b2 : ...
    ```

    Output:

    ```mlir
    %a = hl.relu %h : tensor<32x128xf32>
    %w = hl.get_param @fc1_deep.weight : tensor<128x128xf32>
    %b = hl.get_param @fc1_deep.bias : tensor<128xf32>
    %d = hl.linear %a, %w, %b : ...
    %a2 = hl.relu %d : tensor<32x128xf32>
    %logits = hl.linear %a2, %w2, %b2 : ...
    ```
  }];
  let options = [
    Option<"after", "after", "std::string", /*default=*/"\"\"", "The linear layer to insert after">,
    Option<"name", "name", "std::string", /*default=*/"\"\"", "The new layer's name (default: <after>_deep)">,
    Option<"residual", "residual", "bool", /*default=*/"false",
           "Insert a residual block with a zero output projection instead of an identity layer">,
  ];
}

def HLPrintParamTable : Pass<"hl-print-param-table", "::mlir::ModuleOp"> {
  let summary = "Print the trainable parameters of an hl module";
  let dependentDialects = ["::hl::HLDialect"];
  let description = [{
    Prints one line per `hl.param` of the module to standard error: its
    path, owning layer, shape, element type, element count, bytes and
    initializer, followed by a total line. The IR is not changed. The table
    is what a checkpoint of the model holds (before optimizer state), so it
    is the quickest way to check a model's size and naming.

    With `require-params`, a module that declares no parameter is an error
    (reported on the module), which catches a model file that lost its
    declarations.

    Input:

    ```mlir
    hl.param @fc1.weight : tensor<128x64xf32> owner "fc1" init <kaiming_uniform>
    hl.param @fc1.bias : tensor<128xf32> owner "fc1" init <zeros>
    ```

    Output (standard error):

    ```
    parameter   owner  shape   dtype  elements  bytes  init
    fc1.weight  fc1    128x64  f32    8192      32768  kaiming_uniform
    fc1.bias    fc1    128     f32    128       512    zeros
    total: 2 parameters, 8320 elements, 33280 bytes
    ```
  }];
  let options = [
    Option<"groupByOwner", "group-by-owner", "bool", /*default=*/"false",
           "Print a subtotal line after the parameters of each owning layer">,
    Option<"requireParams", "require-params", "bool", /*default=*/"false",
           "Fail when the module declares no parameter">,
  ];
}

def ConvertHLToLL : Pass<"convert-hl-to-ll", "::mlir::ModuleOp"> {
  let summary = "Lower hl functions to ll: tensors become buffers, one op one kernel";
  let description = [{
    Rewrites every function of the module from `hl` tensors to `ll`
    buffers. Every remaining `hl` op or fused group becomes one `ll` op
    (one kernel launch), but for a convolution as a product (below):
    `hl.gemm`/`matmul`/`linear` -> `ll.gemm` (with
    its epilogue and `lhs_sum`), `hl.fused_elementwise` and any single
    elementwise op -> `ll.elementwise`, `hl.multi_tensor_apply` ->
    `ll.multi_tensor_apply`, cross-entropy forms ->
    `ll.softmax_cross_entropy`, `softmax`/`log_softmax` -> `ll.softmax`,
    `layer_norm`/`rms_norm` -> `ll.norm`, reductions -> `ll.reduce`,
    `attention` -> `ll.attention`, `transpose` -> `ll.transpose`,
    `broadcast_to` -> `ll.elementwise`, an ungrouped `conv2d` and its
    gradients -> `ll.im2col` / `ll.col2im` around an `ll.gemm` (with
    `conv-as-gemm`, the default; the transposes NCHW needs beside), other
    convolutions -> `ll.conv2d*`; `reshape` becomes the view
    `ll.reshape` (no kernel); splat constants become scalars of the bodies
    that read them. `hl` is illegal afterwards: an op without a lowering
    is a located error, never left behind. The module keeps its `hl.param`
    and `hl.state` declarations (the state table with shapes and
    initializers, which the runtime reads).

    The function signature becomes the runtime's binding table: the
    original arguments (`ll.bind = "input"` / `"lr"`), one output buffer per
    result that is not a parameter or state (`"loss"`, `"result N"`), then
    one buffer per parameter and state slot the function reads or writes
    (`"param @name"`, `"state @name"`, declaration order); the function
    returns nothing. A new parameter or state value is written into that
    symbol's buffer by the kernel computing it when that is safe (nothing
    reads the old value later, or the kernel is elementwise and reads it at
    the same index), else copied there at the end. Temporaries are
    `memref.alloc`s that `ll-plan-memory` places in one arena.

    Before:
    ```mlir
    func.func @f(%x: tensor<32x64xf32> {hl.bind = "input"}) -> (tensor<32x128xf32>) {
      %w = hl.get_param @w : tensor<128x64xf32>
      %y = hl.gemm %x, %w transpose_rhs act = relu : tensor<32x64xf32>, tensor<128x64xf32>
      return %y : tensor<32x128xf32>
    }
    ```
    After:
    ```mlir
    func.func @f(%x: memref<32x64xf32> {ll.bind = "input"},
                 %out: memref<32x128xf32> {ll.bind = "result 0"},
                 %w: memref<128x64xf32> {ll.bind = "param @w"}) {
      ll.gemm %x, %w into %out transpose_b act = relu
          : memref<32x64xf32>, memref<128x64xf32> -> memref<32x128xf32>
      return
    }
    ```
  }];
  let options = [
    Option<"convAsGemm", "conv-as-gemm", "bool", /*default=*/"true",
           "An ungrouped conv2d and both its gradients as matrix products "
           "over the image's windows (ll.im2col / ll.col2im, ll.gemm, "
           "ll.transpose for NCHW) where the windows take at most 1 GiB; "
           "else one direct ll.conv2d kernel">
  ];
  let dependentDialects = ["::ll::LLDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::math::MathDialect"];
}

def LLPlanMemory : Pass<"ll-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Place every temporary buffer in one arena (lifetimes, reuse, in place)";
  let description = [{
    For each function: the lifetime of every `memref.alloc` (with its
    `ll.reshape` views) is the span from the first to the last kernel that
    touches it, in program order. An elementwise kernel writes its output
    into an input of the same type that dies there (in place). Buffers
    then get offsets in one arena, largest first, each at the lowest
    64-byte-aligned offset that overlaps no buffer alive at the same time.
    The function gains a last argument `%arena: memref<Nxi8>`
    (`ll.bind = "arena"`) and every alloc becomes a `memref.view` into it.
    Parameters, optimizer state, inputs and outputs live outside the arena.

    The plan is recorded on the function as `ll.memory = {arena_bytes,
    lower_bound_bytes, naive_bytes, buffers, in_place, recomputed}`: the
    arena size, the most bytes simultaneously alive (no placement can do
    better), and the sum of all temporaries (no reuse). With `report`, a
    remark on the function says the same in words.

    With `budget` > 0 (bytes) or `budget-fraction` > 0 (of the largest
    arena the module's functions take without one: the train step's peak)
    and an arena over budget, the planner
    recomputes cheap values (elementwise kernels, norms, softmax,
    transposes) just before a later use instead of keeping them alive
    across the gap (activation checkpointing), greedily taking the
    recomputation that lowers the peak most, until the arena fits or no
    recomputation helps; then it fails with an error that names the
    buffers alive at the peak.

    ```mlir
    %t = memref.alloc() : memref<32x128xf32>
    ```
    becomes
    ```mlir
    %c0 = arith.constant 0 : index
    %t = memref.view %arena[%c0][] : memref<16384xi8> to memref<32x128xf32>
    ```
  }];
  let options = [
    Option<"budget", "budget", "int64_t", "0",
           "Arena budget in bytes (0: no budget); met by recomputation">,
    Option<"budgetFraction", "budget-fraction", "double", "0.0",
           "Arena budget as a fraction of the largest arena the module's "
           "functions take without a budget (0: none); met by recomputation">,
    Option<"report", "report", "bool", "false",
           "Emit a remark per function with the arena size, lower bound and naive sum">
  ];
  let dependentDialects = ["::ll::LLDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LLBucketCollectives : Pass<"ll-bucket-collectives", "::mlir::ModuleOp"> {
  let summary = "Merge a train step's all-reduces into buckets placed where their data is ready";
  let description = [{
    `convert-hl-to-ll` makes one `ll.all_reduce` per reduced value, where
    `hl-optimizer{data-parallel}` put it: after the whole backward pass.
    Per function:
    1. Each `ll.all_reduce` is moved up to just after the last op before it
       that touches one of its buffers (the kernel that computes the
       gradient), so no reduction waits for the rest of the backward pass.
    2. In program order, consecutive reductions are merged into buckets of
       at least `bucket-bytes` (the last bucket may be smaller; 0: one
       bucket per buffer), as PyTorch DDP's 25 MiB buckets: one collective
       call per bucket, placed after the last of its buffers is ready.

    The runtime starts each bucket where it stands and lets the kernels
    after it run while it is reduced; the first kernel that touches one of
    its buffers (the optimizer update) waits for it.

    Before:
    ```mlir
    ll.gemm ... %dw2 ...
    ll.gemm ... %dw1 ...
    ll.all_reduce %dw2 : memref<10x128xf32>
    ll.all_reduce %dw1 : memref<128x64xf32>
    ```
    After (`bucket-bytes=0`):
    ```mlir
    ll.gemm ... %dw2 ...
    ll.all_reduce %dw2 : memref<10x128xf32>
    ll.gemm ... %dw1 ...
    ll.all_reduce %dw1 : memref<128x64xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "The least bytes of gradients one collective call reduces "
           "(PyTorch DDP's 25 MiB; 0: one call per buffer)">
  ];
}

def LLSchedule : Pass<"ll-schedule", "::mlir::ModuleOp"> {
  let summary = "Assign kernels to streams and place the events that order them";
  let description = [{
    Builds the dependence graph of each function's kernels from the bytes
    they read and write (arena ranges after `ll-plan-memory`, whole
    buffers otherwise): read-after-write, write-after-read and
    write-after-write. Program order is kept (it is a topological order
    of that graph; the CPU backend runs it as is). Each kernel goes on the
    stream of a predecessor whose stream it can continue, else on the next
    free stream (at most `max-streams`), else on the least busy one. Where
    a kernel depends on a kernel of another stream, the producer records an
    event and the consumer waits on it; waits implied by an earlier wait on
    the same stream are dropped.

    Every kernel gets `ll.stream = s`; producers get `ll.event = e`;
    consumers get `ll.wait = array<i64: e...>`; the function gets
    `ll.schedule = {streams, events}`.
  }];
  let options = [
    Option<"maxStreams", "max-streams", "int64_t", "4",
           "The most streams to use">
  ];
}

#endif // AICF_TRANSFORMS_PASSES_TD
