//! The reference interpreter against hand-worked values, one family of ops
//! at a time, and on a whole traced model.

use aicf_compiler::{
    CompilerContext,
    interp::{Array, Interpreter},
    nn::DType,
};

use crate::models::char_lm;

fn f64a(shape: &[usize], data: &[f64]) -> Array {
    Array::new(shape, DType::F64, data.to_vec()).unwrap()
}

/// Runs `@f` of `source` (an hl module) on `args`.
fn run(source: &str, params: &[(&str, Array)], args: &[Array]) -> Result<Vec<Array>, String> {
    let ctx = CompilerContext::new();
    let module = ctx.parse(source, "interp.mlir").map_err(|e| e.to_string())?;
    let mut interp = Interpreter::new(&module);
    for (name, value) in params {
        interp.set_param(name, value.clone());
    }
    interp.run("f", args).map_err(|e| e.to_string())
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

#[test]
fn linear_softmax_and_cross_entropy() {
    let src = r#"
      hl.param @w : tensor<3x2xf64> owner "" init <zeros>
      func.func @f(%x: tensor<1x2xf64>, %y: tensor<1xi32>) -> (tensor<1x3xf64>, tensor<1x3xf64>, tensor<f64>) {
        %w = hl.get_param @w : tensor<3x2xf64>
        %b = hl.constant dense<[0.5, 0.0, 0.0]> : tensor<3xf64>
        %l = hl.linear %x, %w, %b : tensor<1x2xf64>, tensor<3x2xf64>, tensor<3xf64>
        %s = hl.softmax %l axis = 1 : tensor<1x3xf64>
        %ce = hl.cross_entropy %l, %y : tensor<1x3xf64>, tensor<1xi32>
        return %l, %s, %ce : tensor<1x3xf64>, tensor<1x3xf64>, tensor<f64>
      }"#;
    let w = f64a(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let out =
        run(src, &[("w", w)], &[f64a(&[1, 2], &[1.0, 2.0]), Array::new([1], DType::I32, vec![2.0]).unwrap()]).unwrap();
    assert_eq!(out[0].data, [1.5, 2.0, 3.0]);
    let z: f64 = [1.5f64, 2.0, 3.0].iter().map(|v| v.exp()).sum();
    close(&out[1].data, &[1.5f64.exp() / z, 2f64.exp() / z, 3f64.exp() / z], 1e-15);
    close(&out[2].data, &[z.ln() - 3.0], 1e-15);
}

#[test]
fn broadcasting_compare_select_and_reductions() {
    let src = r#"
      func.func @f(%a: tensor<2x3xf64>, %r: tensor<3xf64>) -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<3xf64>, tensor<2x1xf64>, tensor<2xi64>) {
        %s = hl.add %a, %r : tensor<2x3xf64>, tensor<3xf64>
        %c = hl.compare gt, %a, %r : tensor<2x3xf64>, tensor<3xf64>
        %z = hl.constant dense<0.0> : tensor<f64>
        %sel = hl.select %c, %a, %z : tensor<2x3xi1>, tensor<2x3xf64>, tensor<f64>
        %sum = hl.reduce_sum %a axes = [0] : tensor<2x3xf64>
        %mx = hl.reduce_max %a axes = [1] keepdim : tensor<2x3xf64>
        %am = hl.argmax %a axis = 1 : tensor<2x3xf64>
        return %s, %sel, %sum, %mx, %am : tensor<2x3xf64>, tensor<2x3xf64>, tensor<3xf64>, tensor<2x1xf64>, tensor<2xi64>
      }"#;
    let a = f64a(&[2, 3], &[1.0, 5.0, 2.0, 7.0, 0.0, 7.0]);
    let out = run(src, &[], &[a, f64a(&[3], &[2.0, 2.0, 2.0])]).unwrap();
    assert_eq!(out[0].data, [3.0, 7.0, 4.0, 9.0, 2.0, 9.0]);
    assert_eq!(out[1].data, [0.0, 5.0, 0.0, 7.0, 0.0, 7.0]);
    assert_eq!(out[2].data, [8.0, 5.0, 9.0]);
    assert_eq!((out[3].shape.as_slice(), out[3].data.as_slice()), (&[2, 1][..], &[5.0, 7.0][..]));
    assert_eq!(out[4].data, [1.0, 0.0], "the first maximum wins a tie");
}

#[test]
fn shape_ops_move_the_right_elements() {
    let src = r#"
      func.func @f(%a: tensor<2x3xf64>, %t: tensor<4x2xf64>, %i: tensor<3xi32>) -> (tensor<3x2xf64>, tensor<2x2xf64>, tensor<4x3xf64>, tensor<3x2xf64>, tensor<2x2x3xf64>) {
        %tr = hl.transpose %a permutation = [1, 0] : tensor<2x3xf64>
        %sl = hl.slice %a start = [0, 0] limit = [2, 3] strides = [1, 2] : tensor<2x3xf64>
        %cc = hl.concat %a, %a axis = 0 : tensor<2x3xf64>, tensor<2x3xf64>
        %g = hl.gather %t[%i] axis = 0 : tensor<4x2xf64>, tensor<3xi32>
        %b = hl.broadcast_to %a : tensor<2x3xf64> to tensor<2x2x3xf64>
        return %tr, %sl, %cc, %g, %b : tensor<3x2xf64>, tensor<2x2xf64>, tensor<4x3xf64>, tensor<3x2xf64>, tensor<2x2x3xf64>
      }"#;
    let a = f64a(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let t = f64a(&[4, 2], &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0]);
    let i = Array::new([3], DType::I32, vec![3.0, 0.0, 3.0]).unwrap();
    let out = run(src, &[], &[a, t, i]).unwrap();
    assert_eq!(out[0].data, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(out[1].data, [1.0, 3.0, 4.0, 6.0]);
    assert_eq!(out[2].data[6..], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(out[3].data, [30.0, 31.0, 0.0, 1.0, 30.0, 31.0]);
    assert_eq!(out[4].data[6..], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn convolution_and_pooling_by_hand() {
    let src = r#"
      func.func @f(%x: tensor<1x1x3x3xf64>, %k: tensor<1x1x2x2xf64>) -> (tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>) {
        %c = hl.conv2d %x, %k stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 : tensor<1x1x3x3xf64>, tensor<1x1x2x2xf64>
        %m = hl.max_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<1x1x3x3xf64>
        %a = hl.avg_pool2d %x kernel = [2, 2] stride = [2, 2] padding = [1, 1] : tensor<1x1x3x3xf64>
        %n = hl.conv2d %x, %k stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 layout = nhwc : tensor<1x1x3x3xf64>, tensor<1x1x2x2xf64>
        return %c, %m, %a, %n : tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>
      }"#;
    // x = 1..9 row-major; kernel [[1, 0], [0, 2]].
    let x = f64a(&[1, 1, 3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    let k = f64a(&[1, 1, 2, 2], &[1.0, 0.0, 0.0, 2.0]);
    let err = run(src, &[], &[x.clone(), k.clone()]).unwrap_err();
    // The NHWC conv reads [1, 1, 3, 3] as N=1, H=1, W=3, C=3: one input channel expected, three given.
    assert!(err.contains("channels"), "{err}");
    let src = src.replace(
        "\n        %n = hl.conv2d %x, %k stride = [1, 1] padding = [0, 0] dilation = [1, 1] groups = 1 layout = nhwc : tensor<1x1x3x3xf64>, tensor<1x1x2x2xf64>",
        "\n        %n = hl.constant dense<0.0> : tensor<1x1x2x2xf64>",
    );
    let out = run(&src, &[], &[x, k]).unwrap();
    assert_eq!(out[0].data, [1.0 + 10.0, 2.0 + 12.0, 4.0 + 16.0, 5.0 + 18.0]);
    // Windows over the padded 5x5 with stride 2: {1}, {2,3}, {4,7}, {5,6,8,9}.
    assert_eq!(out[1].data, [1.0, 3.0, 7.0, 9.0]);
    // Padded zeros count in the divisor (4).
    assert_eq!(out[2].data, [0.25, 1.25, 2.75, 7.0]);
}

#[test]
fn causal_attention_layer_norm_and_dropout() {
    let src = r#"
      func.func @f(%q: tensor<1x3x2xf64>, %v: tensor<1x3x2xf64>, %seed: tensor<i64>, %off: tensor<i64>) -> (tensor<1x3x2xf64>, tensor<1x3x2xf64>, tensor<1x3x2xf64>) {
        %o = hl.attention %q, %q, %v causal : tensor<1x3x2xf64>, tensor<1x3x2xf64>, tensor<1x3x2xf64>
        %n = hl.layer_norm %v dims = 1 eps = 0.0 : tensor<1x3x2xf64>
        %d = hl.dropout %v, %seed, %off p = 5.000000e-01 stream = 7 : tensor<1x3x2xf64>
        return %o, %n, %d : tensor<1x3x2xf64>, tensor<1x3x2xf64>, tensor<1x3x2xf64>
      }"#;
    let q = f64a(&[1, 3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let v = f64a(&[1, 3, 2], &[1.0, 3.0, 5.0, 7.0, 2.0, 4.0]);
    let seed = Array::scalar(42.0, DType::I64);
    let out = run(src, &[], &[q, v.clone(), seed, Array::scalar(0.0, DType::I64)]).unwrap();
    // The first query sees only the first key.
    assert_eq!(out[0].data[..2], [1.0, 3.0]);
    // Second query: scores q1.k0 = 0, q1.k1 = 1, scaled by 1/sqrt(2).
    let (w0, w1) = (1.0f64, (1.0 / 2f64.sqrt()).exp());
    close(&out[0].data[2..4], &[(w0 * 1.0 + w1 * 5.0) / (w0 + w1), (w0 * 3.0 + w1 * 7.0) / (w0 + w1)], 1e-15);
    assert_eq!(out[1].data, [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0]);
    // Kept elements are doubled, dropped ones zero; which ones is fixed by
    // (seed, offset, stream).
    for (d, x) in out[2].data.iter().zip(&v.data) {
        assert!(*d == 0.0 || *d == 2.0 * x, "{d} from {x}");
    }
}

#[test]
fn dropout_drops_a_fraction_p_reproducibly() {
    let src = r#"
      func.func @f(%x: tensor<10000xf32>, %seed: tensor<i64>, %off: tensor<i64>) -> tensor<10000xf32> {
        %d = hl.dropout %x, %seed, %off p = 2.500000e-01 stream = 0 : tensor<10000xf32>
        return %d : tensor<10000xf32>
      }"#;
    let x = Array::new([10000], DType::F32, vec![1.0; 10000]).unwrap();
    let go = |seed: f64, off: f64| {
        run(src, &[], &[x.clone(), Array::scalar(seed, DType::I64), Array::scalar(off, DType::I64)]).unwrap().remove(0)
    };
    let a = go(1.0, 0.0);
    let dropped = a.data.iter().filter(|&&v| v == 0.0).count();
    assert!((2300..2700).contains(&dropped), "{dropped} of 10000 dropped at p = 0.25");
    assert!(a.data.iter().all(|&v| v == 0.0 || v == (1.0f32 / 0.75) as f64));
    assert_eq!(go(1.0, 0.0), a, "same seed and offset, same mask");
    assert_ne!(go(1.0, 2500.0).data, a.data, "a later offset draws new numbers");
    assert_ne!(go(2.0, 0.0).data, a.data);
}

/// `hl.random_like`'s numbers have the moments they promise, lie in the
/// uniform's range, and are a function of seed, offset and stream alone.
#[test]
fn random_like_draws_normal_and_uniform_numbers_reproducibly() {
    let src = r#"
      func.func @f(%x: tensor<20000xf32>, %seed: tensor<i64>, %off: tensor<i64>) -> (tensor<20000xf32>, tensor<20000xf32>, tensor<20000xf32>) {
        %n = hl.random_like %x, %seed, %off kind = "normal" a = 1.500000e+00 b = 2.000000e+00 stream = 0 : tensor<20000xf32>
        %u = hl.random_like %x, %seed, %off kind = "uniform" a = -2.000000e+00 b = 6.000000e+00 stream = 1 : tensor<20000xf32>
        %m = hl.random_like %x, %seed, %off kind = "normal" a = 1.500000e+00 b = 2.000000e+00 stream = 2 : tensor<20000xf32>
        return %n, %u, %m : tensor<20000xf32>, tensor<20000xf32>, tensor<20000xf32>
      }"#;
    // The like's values are not read: NaN in, numbers out.
    let x = Array::new([20000], DType::F32, vec![f64::NAN; 20000]).unwrap();
    let go = |seed: f64, off: f64| {
        run(src, &[], &[x.clone(), Array::scalar(seed, DType::I64), Array::scalar(off, DType::I64)]).unwrap()
    };
    let moments = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let skew = v.iter().map(|x| (x - mean).powi(3)).sum::<f64>() / n / var.powf(1.5);
        (mean, var.sqrt(), skew)
    };
    let a = go(7.0, 0.0);
    // Standard errors at n = 20000: mean 0.014 (of 2), deviation 0.01.
    let (mean, std, skew) = moments(&a[0].data);
    assert!((mean - 1.5).abs() < 0.06 && (std - 2.0).abs() < 0.05 && skew.abs() < 0.1, "{mean} {std} {skew}");
    // A normal's mass within one deviation: 68.3%.
    let within = a[0].data.iter().filter(|v| (*v - 1.5).abs() < 2.0).count() as f64 / 20000.0;
    assert!((within - 0.683).abs() < 0.015, "{within} within one deviation");
    let u = &a[1].data;
    assert!(u.iter().all(|v| (-2.0..6.0).contains(v)), "uniform outside [-2, 6)");
    let (mean, std, _) = moments(u);
    assert!((mean - 2.0).abs() < 0.08 && (std - 8.0 / 12f64.sqrt()).abs() < 0.05, "{mean} {std}");
    assert_ne!(a[0].data, a[2].data, "streams 0 and 2 draw apart");
    assert_eq!(go(7.0, 0.0), a, "same seed and offset, same numbers");
    assert_ne!(go(7.0, 5000.0)[0].data, a[0].data, "a later offset draws new numbers");
    assert_ne!(go(8.0, 0.0)[0].data, a[0].data);
    // A 16-bit uniform takes the type's bits: in [0, 1) it never rounds to
    // 1 (a sweep's Gumbel noise, -log(-log u), went infinite in bf16).
    for (t, bits) in [("bf16", 8), ("f16", 11)] {
        let src = format!(
            "func.func @f(%x: tensor<20000x{t}>, %seed: tensor<i64>, %off: tensor<i64>) -> tensor<20000x{t}> {{\n  %u = hl.random_like %x, %seed, %off kind = \"uniform\" a = 0.000000e+00 b = 1.000000e+00 stream = 1 : tensor<20000x{t}>\n  return %u : tensor<20000x{t}>\n}}"
        );
        let dtype = if t == "bf16" { DType::BF16 } else { DType::F16 };
        let x = Array::new([20000], dtype, vec![0.0; 20000]).unwrap();
        let u = run(&src, &[], &[x, Array::scalar(7.0, DType::I64), Array::scalar(0.0, DType::I64)]).unwrap().remove(0);
        let top = u.data.iter().cloned().fold(0.0, f64::max);
        assert!(top < 1.0 && top >= 1.0 - 4.0 / (1u64 << bits) as f64, "{t}: the largest draw {top}");
    }
    // Block b's four numbers are the initializers' normals of block b.
    let mut init = vec![0f32; 8];
    aicf_runtime::init::Init::Normal { mean: 1.5, std: 2.0 }.fill(&[8], 7, 0, &mut init).unwrap();
    let first: Vec<f32> = a[0].data[..8].iter().map(|&v| v as f32).collect();
    assert_eq!(first, init);
}

#[test]
fn errors_name_the_op_and_its_location() {
    let src = r#"
      hl.param @w : tensor<4x2xf64> owner "" init <zeros>
      func.func @f(%i: tensor<2xi32>) -> tensor<2x2xf64> {
        %w = hl.get_param @w : tensor<4x2xf64>
        %g = hl.gather %w[%i] axis = 0 : tensor<4x2xf64>, tensor<2xi32>
        return %g : tensor<2x2xf64>
      }"#;
    let idx = Array::new([2], DType::I32, vec![1.0, 4.0]).unwrap();
    let err = run(src, &[], std::slice::from_ref(&idx)).unwrap_err();
    assert_eq!(err, "interp.mlir:4:14: 'hl.get_param': parameter @w has no value bound");
    let err = run(src, &[("w", Array::zeros([4, 2], DType::F64))], &[idx]).unwrap_err();
    assert_eq!(err, "interp.mlir:5:14: 'hl.gather': index 4 is outside [0, 4) on axis 0");
    let err = run(src, &[], &[Array::zeros([3], DType::I32)]).unwrap_err();
    assert!(err.contains("argument 0 must be [2] I32, got [3] I32"), "{err}");
}

/// The whole char LM, traced from Rust, runs in the interpreter: every op
/// it uses is implemented and the logits are a distribution's worth.
#[test]
fn runs_the_traced_char_lm() {
    let config = char_lm::Config { batch: 2, context: 8, ..char_lm::CONFIG };
    let module = char_lm::build(config).unwrap();
    let ctx = CompilerContext::new();
    let parsed = module.parse(&ctx).unwrap();
    let mut interp = Interpreter::new(&parsed);
    for (i, p) in module.params.iter().enumerate() {
        let mut buf = vec![0f32; p.spec.num_elements()];
        p.init.fill(&p.spec.shape, 1234, i as u64, &mut buf).unwrap();
        interp.set_param(
            &p.name,
            Array::new(p.spec.shape.clone(), DType::F32, buf.iter().map(|&v| v as f64).collect()).unwrap(),
        );
    }
    let tokens = Array::new([2, 8], DType::I32, (0..16).map(|i| (i * 7 % 65) as f64).collect()).unwrap();
    let logits = interp.run("forward", std::slice::from_ref(&tokens)).unwrap().remove(0);
    assert_eq!(logits.shape, [2, 8, 65]);
    assert!(logits.data.iter().all(|v| v.is_finite()));
    let loss = interp
        .run("loss", &[tokens.clone(), tokens, Array::scalar(7.0, DType::I64), Array::scalar(0.0, DType::I64)])
        .unwrap()
        .remove(0);
    // Near ln(65) = 4.17 for an untrained model, give or take its init.
    assert!(loss.item().unwrap() > 2.0 && loss.item().unwrap() < 10.0, "loss {}", loss.item().unwrap());
}
