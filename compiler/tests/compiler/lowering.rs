//! The train step from `hl` to planned, scheduled `ll`: kernel counts of the
//! benchmark MLP, its memory plan against the lower bound, the transformer
//! block lowered completely and planned under a budget, and the CNN and the
//! char LM lowered completely.

use aicf_compiler::{CompileError, CompilerContext, run_pipeline};

const MLP784: &str = include_str!("../../../examples/mlp784/mlp784.mlir");

/// The text of function `@name` in printed IR.
fn function<'t>(ir: &'t str, name: &str) -> &'t str {
    let start = ir.find(&format!("func.func @{name}(")).unwrap_or_else(|| panic!("no @{name} in:\n{ir}"));
    let rest = &ir[start..];
    let end = rest.find("\n  }\n").map_or(rest.len(), |e| e + 4);
    &rest[..end]
}

/// Kernel launches of a printed ll function: its ll ops, without views and
/// body terminators.
fn kernels(func: &str) -> Vec<String> {
    func.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("ll.") && !l.starts_with("ll.yield") && !l.starts_with("ll.reshape"))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

/// `key = N` from a printed `ll.memory` or `ll.schedule` attribute.
fn number(func: &str, key: &str) -> u64 {
    let at = func.find(&format!("{key} = ")).unwrap_or_else(|| panic!("no {key} in {func}"));
    func[at + key.len() + 3..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

fn compile(source: &str, name: &str, pipeline: &str) -> Result<String, CompileError> {
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name).unwrap();
    run_pipeline(&ctx, &mut module, pipeline)?;
    Ok(module.as_operation().to_string())
}

#[test]
fn mlp784_train_step_kernel_counts() {
    let unfused =
        compile(MLP784, "mlp784.mlir", "builtin.module(hl-optimizer{kind=sgd},canonicalize,cse,convert-hl-to-ll)")
            .unwrap();
    let unfused = kernels(function(&unfused, "train_step")).len();
    for (optimizer, budget) in [("sgd", 12), ("adam", 13)] {
        let ir =
            compile(MLP784, "mlp784.mlir", &format!("builtin.module(aicf-train-pipeline{{optimizer={optimizer}}})"))
                .unwrap();
        let step = function(&ir, "train_step");
        let k = kernels(step);
        println!("MLP 784-512-512-10 {optimizer}: {} kernels fused, {unfused} unfused (SGD): {k:?}", k.len());
        assert!(k.len() <= budget, "{optimizer}: {} kernels, more than {budget}: {k:?}", k.len());
        assert_eq!(k.iter().filter(|n| *n == "ll.gemm").count(), 8, "3 forward, 3 dW (+db), 2 dX GEMMs");
        assert_eq!(k.iter().filter(|n| *n == "ll.multi_tensor_apply").count(), 1, "one update for all parameters");
        assert!(!k.contains(&"ll.reduce".to_string()), "bias gradients ride on the dW GEMMs");
        // The plan: within 1.1x of the lower bound, and far below no reuse.
        let (arena, lower, naive) =
            (number(step, "arena_bytes"), number(step, "lower_bound_bytes"), number(step, "naive_bytes"));
        println!("  arena {arena} B, lower bound {lower} B, naive {naive} B");
        assert!(arena as f64 <= 1.1 * lower as f64, "arena {arena} vs lower bound {lower}");
        assert!(arena < naive);
        assert!(number(step, "streams") >= 2, "dW and dX GEMMs of one layer are independent");
    }
    assert!(unfused > 30, "unfused: one kernel per hl op, got {unfused}");
}

#[test]
fn transformer_block_lowers_and_meets_a_budget_by_recomputation() {
    let module = crate::models::transformer::build(crate::models::transformer::BATCH).unwrap();
    let source = module.to_string();
    let ir = compile(&source, "transformer", "builtin.module(aicf-train-pipeline{optimizer=adam})").unwrap();
    // Every function body is hl-free (the hl.param table stays at module level).
    assert_no_hl(&ir);
    let step = function(&ir, "train_step");
    let peak = number(step, "arena_bytes");
    assert!(kernels(step).contains(&"ll.attention".to_string()));
    assert!(peak as f64 <= 1.1 * number(step, "lower_bound_bytes") as f64);

    // Half the unconstrained peak is out of reach: the planner says why.
    let half = compile(
        &source,
        "transformer",
        &format!("builtin.module(aicf-train-pipeline{{optimizer=adam budget={}}})", peak / 2),
    );
    let err = half.expect_err("half the peak is below what the backward pass needs at once").to_string();
    assert!(err.contains("no recomputation lowers it further") && err.contains("Alive at the peak"), "{err}");
    println!("budget {} B (half of {peak} B): {err}", peak / 2);

    // 60% is met by recomputing forward values.
    let budget = peak * 6 / 10;
    let ir = compile(
        &source,
        "transformer",
        &format!("builtin.module(aicf-train-pipeline{{optimizer=adam budget={budget}}})"),
    )
    .unwrap();
    let step = function(&ir, "train_step");
    let (arena, recomputed) = (number(step, "arena_bytes"), number(step, "recomputed"));
    println!("budget {budget} B: arena {arena} B after {recomputed} recomputed kernels (unconstrained {peak} B)");
    assert!(arena <= budget && recomputed > 0);
}

#[test]
fn a_deeper_char_lm_in_bf16_meets_a_budget_its_search_once_gave_up_on() {
    // Four blocks in bf16 at 45% of the unconstrained peak: the search
    // that placed every candidate each round (and took 54 s on eight
    // blocks) stopped over the budget here, at 5013504 bytes of the
    // 4843872; the one that places the candidates lowering the bound most
    // reaches it. Every recomputation runs the same kernel on the same
    // inputs, so the losses do not change (the char LM's budget test in
    // `train`).
    let config = crate::models::char_lm::Config { layers: 4, dropout: 0.0, ..crate::models::char_lm::CONFIG };
    let source = crate::models::char_lm::build(config).unwrap().text;
    let pipeline =
        |budget: &str| format!("builtin.module(aicf-train-pipeline{{optimizer=adam precision=bf16{budget}}})");
    let ir = compile(&source, "char_lm", &pipeline("")).unwrap();
    let peak = number(function(&ir, "train_step"), "arena_bytes");
    let ir = compile(&source, "char_lm", &pipeline(" budget-fraction=0.45")).unwrap();
    assert_no_hl(&ir);
    for name in ["train_step", "loss_grad"] {
        let f = function(&ir, name);
        let (arena, recomputed) = (number(f, "arena_bytes"), number(f, "recomputed"));
        println!("@{name}: arena {arena} B after {recomputed} recomputed kernels (unconstrained train step {peak} B)");
        assert!(arena as f64 <= 0.45 * peak as f64 + 1.0 && recomputed > 0, "@{name}: arena {arena} of {peak}");
    }
}

#[test]
fn a_budget_several_steps_reach_the_bound_of_is_met() {
    // The same four blocks at 30%: the search placed 30 candidates a
    // round, and after 502 recomputations no one of them lowered the
    // train step's arena (3622784 bytes of the 3229248) where several steps
    // reach its bound. The search on the bound alone takes a step off the
    // bound where it cannot lower it, and reaches the budget.
    let config = crate::models::char_lm::Config { layers: 4, dropout: 0.0, ..crate::models::char_lm::CONFIG };
    let source = crate::models::char_lm::build(config).unwrap().text;
    let pipeline =
        |budget: &str| format!("builtin.module(aicf-train-pipeline{{optimizer=adam precision=bf16{budget}}})");
    let peak = number(function(&compile(&source, "char_lm", &pipeline("")).unwrap(), "train_step"), "arena_bytes");
    let ir = compile(&source, "char_lm", &pipeline(" budget-fraction=0.3")).unwrap();
    for name in ["train_step", "loss_grad"] {
        let f = function(&ir, name);
        let (arena, recomputed) = (number(f, "arena_bytes"), number(f, "recomputed"));
        println!("@{name}: arena {arena} B after {recomputed} recomputed kernels (unconstrained train step {peak} B)");
        assert!(arena as f64 <= 0.3 * peak as f64 + 1.0 && recomputed > 0, "@{name}: arena {arena} of {peak}");
    }
}

/// Every function body of printed IR is free of hl ops.
fn assert_no_hl(ir: &str) {
    for line in ir.lines().filter(|l| l.starts_with("    ")) {
        assert!(!line.trim_start().starts_with("hl.") && !line.contains(" = hl."), "left in hl: {line}");
    }
}

#[test]
fn cnn_and_char_lm_train_steps_lower_completely() {
    let cnn = include_str!("../../../examples/cnn/digits_cnn.mlir");
    let lm = include_str!("../../../examples/char_lm/char_lm.mlir");
    // Convolutions as products over their window rows (the default), or
    // as one direct kernel each.
    for (name, source, expected, options) in [
        (
            "digits_cnn",
            cnn,
            &["ll.im2col", "ll.col2im", "ll.gemm", "ll.transpose", "ll.pool2d", "ll.pool2d_backward"][..],
            "",
        ),
        (
            "digits_cnn",
            cnn,
            &["ll.conv2d", "ll.conv2d_backward_input", "ll.conv2d_backward_weight", "ll.pool2d", "ll.pool2d_backward"]
                [..],
            " conv-as-gemm=false",
        ),
        (
            "char_lm",
            lm,
            &["ll.gather", "ll.scatter_add", "ll.norm_backward", "ll.softmax_backward", "ll.dropout"][..],
            "",
        ),
    ] {
        let ir =
            compile(source, name, &format!("builtin.module(aicf-train-pipeline{{optimizer=adam{options}}})")).unwrap();
        assert_no_hl(&ir);
        let step = function(&ir, "train_step");
        let k = kernels(step);
        for kind in expected {
            assert!(k.iter().any(|n| n == kind), "{name}{options}: no {kind} in {k:?}");
        }
        if name == "digits_cnn" && options.is_empty() {
            assert!(!k.iter().any(|n| n.starts_with("ll.conv2d")), "digits_cnn: a direct convolution left: {k:?}");
        }
        // The backward of layer norm, softmax and embedding is one kernel
        // each: no reduction kernel is left for them.
        if name == "char_lm" {
            let reduces = k.iter().filter(|n| *n == "ll.reduce").count();
            assert!(reduces <= 1, "char_lm: {reduces} reduce kernels: {k:?}");
        }
        let (arena, lower) = (number(step, "arena_bytes"), number(step, "lower_bound_bytes"));
        println!("{name} train step (Adam): {} kernels, arena {arena} B, lower bound {lower} B", k.len());
        assert!(arena as f64 <= 1.25 * lower as f64, "{name}: arena {arena} vs lower bound {lower}");
    }
    // Attention's gradient: in f32 (above) GEMMs over the materialised
    // probabilities, a softmax and its backward; in bf16 (heads of 16: the
    // GPU's tensor-core form) one fused kernel, unless turned off (the
    // CPU's choice).
    for (fused, want, not) in [
        (true, "ll.attention_backward", "ll.softmax_backward"),
        (false, "ll.softmax_backward", "ll.attention_backward"),
    ] {
        let pipeline = format!(
            "builtin.module(aicf-train-pipeline{{optimizer=adam precision=bf16 fused-attention-backward={fused}}})"
        );
        let k = kernels(function(&compile(lm, "char_lm", &pipeline).unwrap(), "train_step"));
        assert!(k.iter().any(|n| n == want) && !k.iter().any(|n| n == not), "fused={fused}: {k:?}");
    }
}

/// A hand-unrolled RNN of `t` steps over one embedded sequence `[8, t, 16]`:
/// each step slices its column, so the sequence's gradient is a sum of `t`
/// zero-padded full-size terms.
fn unrolled_rnn(t: usize) -> String {
    let mut s = format!(
        "hl.param @emb.weight : tensor<65x16xf32> owner \"emb\" init <normal>\n\
         hl.param @rnn.wx : tensor<32x16xf32> owner \"rnn\" init <xavier_uniform>\n\
         hl.param @rnn.wh : tensor<32x32xf32> owner \"rnn\" init <xavier_uniform>\n\
         hl.param @head.weight : tensor<65x32xf32> owner \"head\" init <xavier_uniform>\n\
         func.func @loss(%tok: tensor<8x{t}xi32>, %y: tensor<8xi32>) -> tensor<f32> {{\n\
         %E = hl.get_param @emb.weight : tensor<65x16xf32>\n\
         %e = hl.gather %E[%tok] axis = 0 : tensor<65x16xf32>, tensor<8x{t}xi32>\n\
         %Wx = hl.get_param @rnn.wx : tensor<32x16xf32>\n\
         %Wh = hl.get_param @rnn.wh : tensor<32x32xf32>\n\
         %h0 = hl.constant dense<0.0> : tensor<8x32xf32>\n"
    );
    for i in 0..t {
        s += &format!(
            "%xs{i} = hl.slice %e start = [0, {i}, 0] limit = [8, {}, 16] strides = [1, 1, 1] : tensor<8x{t}x16xf32>\n\
             %x{i} = hl.reshape %xs{i} : tensor<8x1x16xf32> to tensor<8x16xf32>\n\
             %ax{i} = hl.linear %x{i}, %Wx : tensor<8x16xf32>, tensor<32x16xf32>\n\
             %ah{i} = hl.matmul %h{i}, %Wh transpose_rhs : tensor<8x32xf32>, tensor<32x32xf32>\n\
             %s{i} = hl.add %ax{i}, %ah{i} : tensor<8x32xf32>, tensor<8x32xf32>\n\
             %h{} = hl.tanh %s{i} : tensor<8x32xf32>\n",
            i + 1,
            i + 1
        );
    }
    s + &format!(
        "%H = hl.get_param @head.weight : tensor<65x32xf32>\n\
         %logits = hl.linear %h{t}, %H : tensor<8x32xf32>, tensor<65x32xf32>\n\
         %l = hl.cross_entropy %logits, %y : tensor<8x65xf32>, tensor<8xi32>\n\
         return %l : tensor<f32>\n}}\n"
    )
}

/// The gradient of a tensor sliced at every step of an unrolled loop is a
/// sum of `T` full-size terms: fused whole, all `T` stayed alive until the
/// one kernel ran, and the step's memory grew with `T^2` (15x for 4x the
/// steps); summed in kernels of a few terms it grows with `T`.
#[test]
fn an_unrolled_loops_gradient_sum_keeps_memory_linear_in_its_length() {
    let arena = |t: usize| {
        let ir = compile(&unrolled_rnn(t), "rnn.mlir", "builtin.module(aicf-train-pipeline{optimizer=adam})")
            .unwrap_or_else(|e| panic!("T = {t}: {e}"));
        number(function(&ir, "train_step"), "arena_bytes")
    };
    let (short, long) = (arena(16), arena(64));
    println!("unrolled RNN arena: T = 16 {short} B, T = 64 {long} B ({:.2}x)", long as f64 / short as f64);
    assert!(
        long < 5 * short,
        "4x the steps took {:.1}x the memory ({short} B -> {long} B)",
        long as f64 / short as f64
    );
}
