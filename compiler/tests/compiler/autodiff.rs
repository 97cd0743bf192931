//! `hl-autodiff` against central finite differences: for each
//! differentiable op, the gradient IR run by the interpreter in f64 matches
//! (f(p + h) - f(p - h)) / 2h on odd shapes, broadcast cases included.

use aicf_compiler::{
    CompilerContext,
    interp::{Array, Interpreter},
    nn::DType,
    run_pipeline,
};

/// A deterministic pseudo-random value in [lo, hi).
fn draw(state: &mut u64, lo: f64, hi: f64) -> f64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    lo + (hi - lo) * ((*state >> 11) as f64 / (1u64 << 53) as f64)
}

fn mlir_shape(shape: &[usize]) -> String {
    let mut s = String::from("tensor<");
    for d in shape {
        s += &format!("{d}x");
    }
    s + "f64>"
}

/// Builds `@loss = sum(out * cotangent)` over the params `(name, shape)` and `body`
/// (which defines `%out` of `out_shape` from `%name`s), differentiates it
/// and compares every parameter's gradient with central differences.
/// `labels` are extra integer arguments `(shape, values)`.
fn check(params: &[(&str, &[usize])], body: &str, out_shape: &[usize], labels: Option<(&[usize], Vec<f64>)>) {
    check_range(params, body, out_shape, labels, (-1.0, 1.0));
}

fn check_range(
    params: &[(&str, &[usize])],
    body: &str,
    out_shape: &[usize],
    labels: Option<(&[usize], Vec<f64>)>,
    range: (f64, f64),
) {
    let mut text = String::new();
    for (name, shape) in params {
        text += &format!("hl.param @{name} : {} owner \"\" init <zeros>\n", mlir_shape(shape));
    }
    text += &format!("hl.param @cotangent : {} owner \"\" init <zeros>\n", mlir_shape(out_shape));
    let label_arg = labels.as_ref().map(|(shape, _)| {
        let dims: String = shape.iter().map(|d| format!("{d}x")).collect();
        format!("%labels: tensor<{dims}i32>")
    });
    text += &format!("func.func @loss({}) -> tensor<f64> {{\n", label_arg.unwrap_or_default());
    for (name, shape) in params {
        text += &format!("  %{name} = hl.get_param @{name} : {}\n", mlir_shape(shape));
    }
    text += body;
    let all: Vec<String> = (0..out_shape.len()).map(|d| d.to_string()).collect();
    text += &format!(
        "\n  %cotangent = hl.get_param @cotangent : {t}\n  %weighted = hl.mul %out, %cotangent : {t}, {t}\n",
        t = mlir_shape(out_shape)
    );
    if out_shape.is_empty() {
        text += "  return %weighted : tensor<f64>\n}\n";
    } else {
        text += &format!(
            "  %l = hl.reduce_sum %weighted axes = [{}] : {}\n  return %l : tensor<f64>\n}}\n",
            all.join(", "),
            mlir_shape(out_shape)
        );
    }

    let ctx = CompilerContext::new();
    let mut module = ctx.parse(&text, "grad.mlir").unwrap_or_else(|e| panic!("{e}\n{text}"));
    run_pipeline(&ctx, &mut module, "builtin.module(hl-autodiff)").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut interp = Interpreter::new(&module);
    let mut state = 0x5eed;
    let mut values: Vec<(String, Array)> = Vec::new();
    for (name, shape) in
        params.iter().map(|(n, s)| (n.to_string(), s.to_vec())).chain([("cotangent".to_string(), out_shape.to_vec())])
    {
        let n: usize = shape.iter().product();
        let (lo, hi) = if name == "cotangent" { (-1.0, 1.0) } else { range };
        let data = (0..n).map(|_| draw(&mut state, lo, hi)).collect();
        let a = Array::new(shape, DType::F64, data).unwrap();
        interp.set_param(&name, a.clone());
        values.push((name, a));
    }
    let args: Vec<Array> = labels.iter().map(|(shape, v)| Array::new(*shape, DType::I32, v.clone()).unwrap()).collect();
    let out = interp.run("loss_grad", &args).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let loss = interp.run("loss", &args).unwrap()[0].item().unwrap();
    assert_eq!(out[0].item().unwrap(), loss, "the gradient function returns the loss first");

    let h = 1e-6;
    for (k, (name, value)) in values.iter().enumerate() {
        let grad = &out[k + 1];
        assert_eq!(grad.shape, value.shape, "gradient of {name}");
        for i in 0..value.len() {
            let mut plus = value.clone();
            plus.data[i] += h;
            interp.set_param(name, plus);
            let f_plus = interp.run("loss", &args).unwrap()[0].item().unwrap();
            let mut minus = value.clone();
            minus.data[i] -= h;
            interp.set_param(name, minus);
            let f_minus = interp.run("loss", &args).unwrap()[0].item().unwrap();
            interp.set_param(name, value.clone());
            let numeric = (f_plus - f_minus) / (2.0 * h);
            let analytic = grad.data[i];
            let err = (analytic - numeric).abs() / analytic.abs().max(numeric.abs()).max(1e-2);
            assert!(
                err < 1e-6,
                "d loss / d {name}[{i}]: autodiff {analytic}, finite differences {numeric} (rel. error {err:e})\n{text}"
            );
        }
    }
}

#[test]
fn elementwise_binary_with_broadcasting() {
    let t35 = "tensor<3x5xf64>";
    let t5 = "tensor<5xf64>";
    for op in ["add", "sub", "mul"] {
        check(&[("a", &[3, 5]), ("b", &[5])], &format!("  %out = hl.{op} %a, %b : {t35}, {t5}"), &[3, 5], None);
    }
    // 7x1x9 against 4x9 broadcasts both ways to 7x4x9.
    check(
        &[("a", &[7, 1, 9]), ("b", &[4, 9])],
        "  %out = hl.mul %a, %b : tensor<7x1x9xf64>, tensor<4x9xf64>",
        &[7, 4, 9],
        None,
    );
    // Division by values kept away from zero.
    check_range(
        &[("a", &[3, 5]), ("b", &[3, 1])],
        "  %out = hl.div %a, %b : tensor<3x5xf64>, tensor<3x1xf64>",
        &[3, 5],
        None,
        (0.5, 2.0),
    );
    // A value used twice sums both uses' gradients.
    check(&[("a", &[3, 5])], &format!("  %out = hl.mul %a, %a : {t35}, {t35}"), &[3, 5], None);
}

#[test]
fn elementwise_unary() {
    let t = "tensor<3x5xf64>";
    for op in ["neg", "exp", "tanh", "sigmoid", "relu", "silu"] {
        check(&[("a", &[3, 5])], &format!("  %out = hl.{op} %a : {t}"), &[3, 5], None);
    }
    for op in ["log", "sqrt", "rsqrt"] {
        check_range(&[("a", &[3, 5])], &format!("  %out = hl.{op} %a : {t}"), &[3, 5], None, (0.5, 2.0));
    }
}

#[test]
fn contractions() {
    check(
        &[("x", &[3, 5]), ("w", &[4, 5]), ("b", &[4])],
        "  %out = hl.linear %x, %w, %b : tensor<3x5xf64>, tensor<4x5xf64>, tensor<4xf64>",
        &[3, 4],
        None,
    );
    check(
        &[("x", &[2, 3, 5]), ("w", &[4, 5])],
        "  %out = hl.linear %x, %w : tensor<2x3x5xf64>, tensor<4x5xf64>",
        &[2, 3, 4],
        None,
    );
    for (flags, a, b) in [
        ("", [2, 3, 5], [2, 5, 4]),
        ("transpose_lhs", [2, 5, 3], [2, 5, 4]),
        ("transpose_rhs", [2, 3, 5], [2, 4, 5]),
        ("transpose_lhs transpose_rhs", [2, 5, 3], [2, 4, 5]),
    ] {
        check(
            &[("a", &a), ("b", &b)],
            &format!("  %out = hl.matmul %a, %b {flags} : {}, {}", mlir_shape(&a), mlir_shape(&b)),
            &[2, 3, 4],
            None,
        );
    }
}

#[test]
fn reductions_and_shapes() {
    let t = "tensor<3x4x5xf64>";
    check(&[("a", &[3, 4, 5])], &format!("  %out = hl.reduce_sum %a axes = [0, 2] : {t}"), &[4], None);
    check(&[("a", &[3, 4, 5])], &format!("  %out = hl.reduce_mean %a axes = [1] keepdim : {t}"), &[3, 1, 5], None);
    check(&[("a", &[3, 4, 5])], &format!("  %out = hl.reshape %a : {t} to tensor<12x5xf64>"), &[12, 5], None);
    check(&[("a", &[3, 4, 5])], &format!("  %out = hl.transpose %a permutation = [2, 0, 1] : {t}"), &[5, 3, 4], None);
    check(&[("a", &[4, 1])], "  %out = hl.broadcast_to %a : tensor<4x1xf64> to tensor<3x4x5xf64>", &[3, 4, 5], None);
    // A float cast passes the gradient back through the inverse cast.
    check(&[("a", &[3, 5])], "  %out = hl.cast %a : tensor<3x5xf64> to tensor<3x5xf64>", &[3, 5], None);
}

#[test]
fn softmax_family_and_losses() {
    let t = "tensor<3x5xf64>";
    check(&[("a", &[3, 5])], &format!("  %out = hl.softmax %a axis = 1 : {t}"), &[3, 5], None);
    check(&[("a", &[3, 5])], &format!("  %out = hl.log_softmax %a axis = 0 : {t}"), &[3, 5], None);
    let labels = || Some((&[3usize][..], vec![4.0, 0.0, 2.0]));
    check(&[("a", &[3, 5])], &format!("  %out = hl.cross_entropy %a, %labels : {t}, tensor<3xi32>"), &[], labels());
    check(
        &[("a", &[3, 5])],
        &format!("  %out = hl.cross_entropy %a, %labels reduction = sum : {t}, tensor<3xi32>"),
        &[],
        labels(),
    );
    // An ignored position contributes nothing and is not counted.
    check(
        &[("a", &[3, 5])],
        &format!("  %out = hl.cross_entropy %a, %labels ignore_index = 0 : {t}, tensor<3xi32>"),
        &[],
        labels(),
    );
    // Logits [2, 3, 5] with labels [2, 3] (a language model's shape).
    check(
        &[("a", &[2, 3, 5])],
        "  %out = hl.cross_entropy %a, %labels : tensor<2x3x5xf64>, tensor<2x3xi32>",
        &[],
        Some((&[2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 0.0])),
    );
    check(&[("a", &[3, 5]), ("b", &[3, 5])], &format!("  %out = hl.mse_loss %a, %b : {t}, {t}"), &[], None);
}

#[test]
fn an_op_without_a_rule_is_an_error_on_that_op() {
    // Calls are not inlined by hl-autodiff: inline first. (Any call is
    // refused, also one whose arguments hold no parameter: its callee may
    // read parameters itself, whose gradients would silently be zero.)
    let src = r#"
hl.param @w : tensor<3xf64> owner "" init <zeros>
func.func @square(%v: tensor<3xf64>) -> tensor<3xf64> {
  %s = hl.mul %v, %v : tensor<3xf64>, tensor<3xf64>
  return %s : tensor<3xf64>
}
func.func @loss() -> tensor<f64> {
  %w = hl.get_param @w : tensor<3xf64>
  %y = func.call @square(%w) : (tensor<3xf64>) -> tensor<3xf64>
  %l = hl.reduce_sum %y axes = [0] : tensor<3xf64>
  return %l : tensor<f64>
}"#;
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(src, "nograd.mlir").unwrap();
    let err = run_pipeline(&ctx, &mut module, "builtin.module(hl-autodiff)").unwrap_err().to_string();
    assert!(
        err.contains("nograd.mlir:9:8: error: hl-autodiff: cannot differentiate through 'func.call' (to @square)"),
        "{err}"
    );
    // After inlining, the same loss differentiates.
    run_pipeline(&ctx, &mut module, "builtin.module(inline,hl-autodiff)").unwrap();
}

#[test]
fn convolution_and_pooling() {
    // Stride, padding, dilation, groups and bias together.
    check(
        &[("x", &[2, 4, 5, 6]), ("w", &[6, 2, 3, 2]), ("b", &[6])],
        "  %out = hl.conv2d %x, %w, %b stride = [2, 1] padding = [1, 0] dilation = [1, 2] groups = 2 : tensor<2x4x5x6xf64>, tensor<6x2x3x2xf64>, tensor<6xf64>",
        &[2, 6, 3, 4],
        None,
    );
    check(
        &[("x", &[1, 5, 5, 3]), ("w", &[2, 3, 3, 3])],
        "  %out = hl.conv2d %x, %w stride = [1, 1] padding = [1, 1] dilation = [1, 1] groups = 1 layout = nhwc : tensor<1x5x5x3xf64>, tensor<2x3x3x3xf64>",
        &[1, 5, 5, 2],
        None,
    );
    check(
        &[("x", &[2, 3, 5, 4])],
        "  %out = hl.max_pool2d %x kernel = [2, 2] stride = [2, 1] padding = [1, 0] : tensor<2x3x5x4xf64>",
        &[2, 3, 3, 3],
        None,
    );
    check(
        &[("x", &[2, 3, 5, 4])],
        "  %out = hl.avg_pool2d %x kernel = [3, 2] stride = [1, 2] padding = [1, 1] : tensor<2x3x5x4xf64>",
        &[2, 3, 5, 3],
        None,
    );
}

#[test]
fn more_elementwise_rules() {
    let t = "tensor<3x5xf64>";
    check_range(
        &[("a", &[3, 5]), ("b", &[5])],
        &format!("  %out = hl.pow %a, %b : {t}, tensor<5xf64>"),
        &[3, 5],
        None,
        (0.5, 2.0),
    );
    check(&[("a", &[3, 5]), ("b", &[3, 1])], &format!("  %out = hl.max %a, %b : {t}, tensor<3x1xf64>"), &[3, 5], None);
    check(&[("a", &[3, 5]), ("b", &[5])], &format!("  %out = hl.min %a, %b : {t}, tensor<5xf64>"), &[3, 5], None);
    check(&[("a", &[3, 5])], &format!("  %out = hl.abs %a : {t}"), &[3, 5], None);
    check(&[("a", &[3, 5])], &format!("  %out = hl.gelu %a approximate = tanh : {t}"), &[3, 5], None);
    check(&[("a", &[3, 5])], &format!("  %out = hl.gelu %a : {t}"), &[3, 5], None);
    check(&[("a", &[3, 5])], &format!("  %out = hl.erf %a : {t}"), &[3, 5], None);
    check(
        &[("a", &[3, 5]), ("b", &[5])],
        &format!(
            "  %z = hl.constant dense<0.0> : tensor<f64>\n  %m = hl.compare gt, %a, %z : {t}, tensor<f64>\n  %out = hl.select %m, %a, %b : tensor<3x5xi1>, {t}, tensor<5xf64>"
        ),
        &[3, 5],
        None,
    );
}

#[test]
fn reduce_max_concat_slice_and_gather() {
    check(
        &[("a", &[4, 7, 5])],
        "  %out = hl.slice %a start = [1, 0, 2] limit = [4, 7, 5] strides = [2, 3, 1] : tensor<4x7x5xf64>",
        &[2, 3, 3],
        None,
    );
    check(&[("a", &[3, 4, 5])], "  %out = hl.reduce_max %a axes = [1] : tensor<3x4x5xf64>", &[3, 5], None);
    check(
        &[("a", &[3, 2]), ("b", &[3, 4])],
        "  %out = hl.concat %a, %b, %a axis = 1 : tensor<3x2xf64>, tensor<3x4xf64>, tensor<3x2xf64>",
        &[3, 8],
        None,
    );
    // An embedding lookup with a repeated index (its rows' gradients add).
    check(
        &[("t", &[5, 3])],
        "  %out = hl.gather %t[%labels] axis = 0 : tensor<5x3xf64>, tensor<2x2xi32>",
        &[2, 2, 3],
        Some((&[2, 2], vec![4.0, 1.0, 4.0, 0.0])),
    );
    check(
        &[("t", &[2, 5, 3])],
        "  %out = hl.gather %t[%labels] axis = 1 : tensor<2x5x3xf64>, tensor<3xi32>",
        &[2, 3, 3],
        Some((&[3], vec![2.0, 2.0, 0.0])),
    );
}

#[test]
fn normalisation_attention_and_dropout() {
    let t = "tensor<2x3x4xf64>";
    check(
        &[("x", &[2, 3, 4]), ("w", &[4]), ("b", &[4])],
        &format!(
            "  %out = hl.layer_norm %x weight %w bias %b dims = 1 eps = 1.0e-05 : {t}, tensor<4xf64>, tensor<4xf64>"
        ),
        &[2, 3, 4],
        None,
    );
    check(&[("x", &[2, 3, 4])], &format!("  %out = hl.layer_norm %x dims = 2 eps = 1.0e-05 : {t}"), &[2, 3, 4], None);
    check(
        &[("x", &[2, 3, 4]), ("w", &[4])],
        &format!("  %out = hl.rms_norm %x weight %w dims = 1 eps = 1.0e-06 : {t}, tensor<4xf64>"),
        &[2, 3, 4],
        None,
    );
    let (q, kv) = ("tensor<2x3x4xf64>", "tensor<2x5x4xf64>");
    check(
        &[("q", &[2, 3, 4]), ("k", &[2, 5, 4]), ("v", &[2, 5, 4])],
        &format!("  %out = hl.attention %q, %k, %v : {q}, {kv}, {kv}"),
        &[2, 3, 4],
        None,
    );
    check(
        &[("q", &[2, 4, 3]), ("k", &[2, 4, 3]), ("v", &[2, 4, 3])],
        "  %out = hl.attention %q, %k, %v causal scale = 0.7 : tensor<2x4x3xf64>, tensor<2x4x3xf64>, tensor<2x4x3xf64>",
        &[2, 4, 3],
        None,
    );
    check(
        &[("x", &[3, 5])],
        "  %s = hl.constant dense<7> : tensor<i64>\n  %o = hl.constant dense<0> : tensor<i64>\n  %out = hl.dropout %x, %s, %o p = 3.000000e-01 stream = 2 : tensor<3x5xf64>",
        &[3, 5],
        None,
    );
}

/// `hl.attention_backward` (the fused gradient, probabilities recomputed)
/// in the interpreter against finite differences of the forward: causal,
/// scaled, and keys longer than the queries with a value head apart.
#[test]
fn fused_attention_backward_matches_finite_differences() {
    for (attrs, (l, s, d, dv)) in [(" causal", (5, 5, 4, 3)), (" scale = 0.7", (3, 6, 4, 5)), (" causal", (4, 7, 3, 3))]
    {
        let (tq, tk, tv, to) = (
            format!("tensor<2x{l}x{d}xf64>"),
            format!("tensor<2x{s}x{d}xf64>"),
            format!("tensor<2x{s}x{dv}xf64>"),
            format!("tensor<2x{l}x{dv}xf64>"),
        );
        let args = format!("%q: {tq}, %k: {tk}, %v: {tv}, %g: {to}");
        let attention = format!("%o = hl.attention %q, %k, %v{attrs} : {tq}, {tk}, {tv}");
        let text = format!(
            "func.func @loss({args}) -> tensor<f64> {{\n  {attention}\n  %w = hl.mul %o, %g : {to}, {to}\n  \
             %l = hl.reduce_sum %w axes = [0, 1, 2] : {to}\n  return %l : tensor<f64>\n}}\n\
             func.func @grad({args}) -> ({tq}, {tk}, {tv}) {{\n  {attention}\n  \
             %d:3 = hl.attention_backward %q, %k, %v, %o, %g{attrs} : {tq}, {tk}, {tv}, {to}\n  \
             return %d#0, %d#1, %d#2 : {tq}, {tk}, {tv}\n}}\n"
        );
        let ctx = CompilerContext::new();
        let module = ctx.parse(&text, "attention_backward.mlir").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let interp = Interpreter::new(&module);
        let mut state = 0x5eed;
        let mut inputs: Vec<Array> = [[2, l, d], [2, s, d], [2, s, dv], [2, l, dv]]
            .iter()
            .map(|shape| {
                let n = shape.iter().product();
                Array::new(shape, DType::F64, (0..n).map(|_| draw(&mut state, -1.0, 1.0)).collect()).unwrap()
            })
            .collect();
        let grads = interp.run("grad", &inputs).unwrap();
        let h = 1e-6;
        for (which, grad) in grads.iter().enumerate() {
            assert_eq!(grad.shape, inputs[which].shape);
            for i in 0..grad.len() {
                let keep = inputs[which].data[i];
                inputs[which].data[i] = keep + h;
                let f_plus = interp.run("loss", &inputs).unwrap()[0].item().unwrap();
                inputs[which].data[i] = keep - h;
                let f_minus = interp.run("loss", &inputs).unwrap()[0].item().unwrap();
                inputs[which].data[i] = keep;
                let numeric = (f_plus - f_minus) / (2.0 * h);
                let err = (grad.data[i] - numeric).abs() / grad.data[i].abs().max(numeric.abs()).max(1e-2);
                assert!(err < 1e-6, "{attrs}: operand {which}[{i}]: {} against {numeric}", grad.data[i]);
            }
        }
    }
}
