//! The Rust layer API: tracing, diagnostics as values, parameter ownership
//! and sharing, the trace cache, and one traced use of every op.

use aicf_compiler::{
    CompilerContext,
    nn::{
        self, Compare, Conv2dOptions, DType, GeluApproximation, Graph, Layout, Linear, Mode, Module, ModuleBuilder,
        MultiHeadAttention, NnError, Pool2dOptions, RMSNorm, ReLU, Reduction, Sequential, Tensor, TensorSpec, Traced,
    },
};
use aicf_runtime::init::{FanMode, Init};

fn f32(shape: &[usize]) -> TensorSpec {
    TensorSpec::f32(shape)
}

#[test]
fn a_shape_error_names_the_layer_path_and_both_shapes() {
    let model = Sequential::new().push(Linear::new("encoder.fc1", 64, 32)).push(ReLU);
    let err = nn::forward_module(&model, &f32(&[8, 63])).unwrap_err();
    let NnError::Op { layer: Some(layer), op, operands, .. } = &err else { panic!("unexpected error {err:?}") };
    assert_eq!(layer.path, "encoder.fc1");
    assert_eq!(op, "hl.linear");
    assert_eq!(operands[0], "tensor<8x63xf32>");
    assert_eq!(
        err.to_string(),
        "in `encoder.fc1` (Linear(64 -> 32)): 'hl.linear' op input 'tensor<8x63xf32>' has 63 features \
         but the weight 'tensor<32x64xf32>' expects 64"
    );
}

/// A width or an input dimension past MLIR's i64 names the layer or the
/// input (it was an "internal error" from IR that could not be parsed).
#[test]
fn a_dimension_past_i64_names_the_layer_or_input() {
    let wide = Sequential::new().push(Linear::new("fc", 4, usize::MAX));
    let err = nn::forward_module(&wide, &f32(&[2, 4])).unwrap_err().to_string();
    assert_eq!(
        err,
        "in `fc` (Linear(4 -> 18446744073709551615)): parameter `fc.weight` has a dimension of \
         18446744073709551615, past the 2^63 - 1 a dimension may be"
    );
    let narrow = Sequential::new().push(Linear::new("fc", 4, 3));
    let err = nn::forward_module(&narrow, &f32(&[usize::MAX, 4])).unwrap_err().to_string();
    assert!(err.contains("input #0 has a dimension of 18446744073709551615"), "{err}");
}

#[test]
fn an_error_inside_a_nested_layer_names_the_innermost_one() {
    let attn = MultiHeadAttention::new("blocks.3.attn", 32, 4, true).unwrap();
    let err = nn::forward_module(&attn, &f32(&[2, 5, 30])).unwrap_err();
    assert_eq!(err.layer().unwrap().path, "blocks.3.attn.q_proj", "{err}");

    let err = MultiHeadAttention::new("blocks.0.attn", 64, 5, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "in `blocks.0.attn` (MultiHeadAttention(64, heads 5)): dim 64 is not divisible into 5 heads"
    );
}

/// A model whose graph depends on Rust control flow and on the input shape.
struct Adaptive {
    depth: usize,
}

impl Module for Adaptive {
    fn forward(&self, x: &Tensor) -> nn::Result<Tensor> {
        let width = x.shape()[1];
        let mut h = x.clone();
        for i in 0..self.depth {
            h = Linear::new(format!("layers.{i}"), width, width).forward(&h)?.relu()?;
        }
        // A shape-dependent choice: wide inputs get normalised.
        if width > 16 { RMSNorm::new("norm", [width]).forward(&h) } else { Ok(h) }
    }
}

#[test]
fn rust_control_flow_decides_the_graph() {
    let narrow = nn::forward_module(&Adaptive { depth: 3 }, &f32(&[4, 8])).unwrap();
    assert_eq!(narrow.text.matches("hl.linear").count(), 3);
    assert!(!narrow.text.contains("hl.rms_norm"));
    let wide = nn::forward_module(&Adaptive { depth: 1 }, &f32(&[4, 32])).unwrap();
    assert_eq!(wide.text.matches("hl.linear").count(), 1);
    assert!(wide.text.contains("hl.rms_norm"));
    let names: Vec<&str> = wide.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["layers.0.weight", "layers.0.bias", "norm.weight"]);
}

#[test]
fn traced_modules_are_cached_by_input_shapes_and_dtypes() {
    let model = Adaptive { depth: 2 };
    let traced = Traced::new(|inputs: &[TensorSpec]| nn::forward_module(&model, &inputs[0]));
    let a = traced.get(&[f32(&[4, 8])]).unwrap();
    let b = traced.get(&[f32(&[4, 8])]).unwrap();
    assert!(std::rc::Rc::ptr_eq(&a, &b), "the second call must not trace again");
    assert_eq!(traced.traces(), 1);
    // A smaller last batch is a new key, traced once.
    let c = traced.get(&[f32(&[3, 8])]).unwrap();
    traced.get(&[f32(&[3, 8])]).unwrap();
    assert_eq!(traced.traces(), 2);
    assert!(c.text.contains("tensor<3x8xf32>"));
    // So is a new dtype; a failing trace is not cached.
    assert!(traced.get(&[TensorSpec::new([4, 8], DType::F16)]).is_ok());
    assert!(traced.get(&[f32(&[4, 9, 1])]).is_err());
    assert_eq!(traced.traces(), 3);
}

#[test]
fn a_layer_called_twice_shares_its_parameters() {
    let shared = Linear::new("tied", 8, 8);
    let mut b = ModuleBuilder::new();
    b.function("twice", Mode::Eval, &[f32(&[2, 8])], |xs| Ok(vec![shared.forward(&shared.forward(&xs[0])?)?])).unwrap();
    let m = b.finish().unwrap();
    assert_eq!(m.params.len(), 2);
    assert_eq!(m.text.matches("hl.get_param @tied.weight").count(), 2);

    // The same name with another shape is a mistake, reported as such.
    let mut b = ModuleBuilder::new();
    let err = b
        .function("clash", Mode::Eval, &[f32(&[2, 8])], |xs| {
            let h = Linear::new("fc", 8, 8).forward(&xs[0])?;
            Ok(vec![Linear::new("fc", 8, 4).forward(&h)?])
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("in `fc` (Linear(8 -> 4)): parameter `fc.weight` is declared again as tensor<4x8xf32>"),
        "{err}"
    );
    // The builder stays usable after a failed function.
    b.function("ok", Mode::Eval, &[f32(&[2, 8])], |xs| Ok(vec![xs[0].relu()?])).unwrap();
    assert!(b.finish().unwrap().text.contains("func.func @ok"));
}

#[test]
fn dropout_is_active_only_while_training_and_draws_distinct_streams() {
    let mut b = ModuleBuilder::new();
    let eval = b.function("eval", Mode::Eval, &[f32(&[4, 4])], |xs| Ok(vec![xs[0].dropout(0.5)?])).unwrap();
    let train =
        b.function("train", Mode::Train, &[f32(&[4, 4])], |xs| Ok(vec![xs[0].dropout(0.5)?.dropout(0.25)?])).unwrap();
    let m = b.finish().unwrap();
    assert!(!eval.takes_rng);
    assert!(train.takes_rng);
    assert!(m.text.contains("func.func @train(%arg0: tensor<4x4xf32>, %arg1: tensor<i64>, %arg2: tensor<i64>)"));
    assert!(m.text.contains("p = 5.000000e-01 stream = 0"), "{m}");
    assert!(m.text.contains("p = 2.500000e-01 stream = 1"), "{m}");
    let err = nn::forward_module(&nn::Dropout(1.0), &f32(&[2])).unwrap_err();
    assert!(err.to_string().contains("dropout probability 1 must be in [0, 1)"), "{err}");
}

#[test]
fn axes_may_be_negative_and_out_of_range_axes_are_errors() {
    let mut b = ModuleBuilder::new();
    let sig = b.function("f", Mode::Eval, &[f32(&[2, 3, 4])], |xs| Ok(vec![xs[0].sum(&[-1, 0], true)?])).unwrap();
    assert_eq!(sig.outputs[0].shape, [1, 3, 1]);
    let err = b.function("g", Mode::Eval, &[f32(&[2, 3])], |xs| Ok(vec![xs[0].softmax(2)?])).unwrap_err();
    assert_eq!(err.to_string(), "hl.softmax: axis 2 is out of range for tensor<2x3xf32> (rank 2)");
}

#[test]
fn tensors_of_two_graphs_do_not_mix() {
    let mut other = ModuleBuilder::new();
    let mut stray = None;
    other
        .function("a", Mode::Eval, &[f32(&[2])], |xs| {
            stray = Some(xs[0].clone());
            Ok(vec![xs[0].clone()])
        })
        .unwrap();
    let stray = stray.unwrap();
    let mut b = ModuleBuilder::new();
    let err = b.function("b", Mode::Eval, &[f32(&[2])], |xs| Ok(vec![xs[0].add(&stray)?])).unwrap_err();
    assert!(err.to_string().contains("of a different graph"), "{err}");

    // Nor do values of two functions of one graph, finished or abandoned:
    // each is a handle into its own function's body.
    let mut kept = Vec::new();
    b.function("c", Mode::Eval, &[f32(&[2])], |xs| {
        kept.push(xs[0].relu()?);
        Err(NnError::Invalid { layer: None, message: "abandoned on purpose".into() })
    })
    .unwrap_err();
    b.function("d", Mode::Eval, &[f32(&[2])], |xs| {
        kept.push(xs[0].clone());
        Ok(vec![xs[0].clone()])
    })
    .unwrap();
    for old in &kept {
        let err = b.function("e", Mode::Eval, &[f32(&[2])], |xs| Ok(vec![xs[0].add(old)?])).unwrap_err();
        assert!(err.to_string().contains("of another traced function"), "{err}");
    }
    // Outside any function a tensor can do nothing, and says so.
    assert!(kept[1].relu().unwrap_err().to_string().contains("outside a function being built"));
    assert!(b.finish().is_ok());
}

/// Traces one use of every functional op and checks that the module
/// verifies (again, in a fresh context) and holds each op.
#[test]
fn every_op_traces_through_the_functional_api() {
    let inputs = [
        f32(&[2, 3, 8, 8]),                  // image
        f32(&[2, 5, 16]),                    // sequence
        TensorSpec::new([2, 5], DType::I32), // tokens
        f32(&[3, 5]),                        // odd matrix
    ];
    let mut b = ModuleBuilder::new();
    let sig = b
        .function("all", Mode::Train, &inputs, |xs| {
            let (img, seq, tok, m) = (&xs[0], &xs[1], &xs[2], &xs[3]);
            let g: Graph = m.graph();
            let w = g.param("w", "", &f32(&[4, 5]), Init::XavierUniform { gain: 1.0 })?;
            let bias = g.param("b", "", &f32(&[4]), Init::Zeros)?;
            let ones = g.constant(&[1.0, 2.0, 3.0, 4.0, 5.0], &f32(&[5]))?;
            let ninf = g.constant(&[f64::NEG_INFINITY], &f32(&[]))?;
            let mut outs = Vec::new();
            // elementwise
            let e = m.add(&ones)?.sub(&ones)?.mul(&ones)?.div(&ones)?.pow(&m.scalar(2.0)?)?;
            let e = e.maximum(&ninf)?.minimum(&m.scalar(1e30)?)?.neg()?.abs()?.add_scalar(1.0)?.log()?.exp()?;
            let e = e.sqrt()?.rsqrt()?.tanh()?.sigmoid()?.relu()?.silu()?.gelu(GeluApproximation::Tanh)?;
            let e = e.gelu(GeluApproximation::None)?.erf()?.mul_scalar(0.5)?;
            let mask = e.compare(Compare::Gt, &m.scalar(0.0)?)?;
            let e = Tensor::select(&mask, &e, &m.scalar(0.0)?)?;
            outs.push(e.cast(DType::BF16)?);
            // contractions, reductions, norms
            let l = m.linear(&w, Some(&bias))?;
            let mm = m.matmul_t(&w, false, true)?;
            outs.push(l.add(&mm)?.sum(&[0], false)?);
            outs.push(m.mean(&[1], true)?);
            outs.push(m.max(&[0, 1], false)?);
            outs.push(m.argmax(-1, false)?);
            outs.push(m.softmax(1)?.log_softmax(0)?);
            outs.push(seq.layer_norm(None, None, 1, 1e-5)?);
            outs.push(seq.rms_norm(None, 2, 1e-6)?);
            // losses
            let labels = tok.narrow(1, 0, 3)?.narrow(0, 0, 2)?;
            outs.push(seq.narrow(1, 0, 3)?.cross_entropy(&labels, Reduction::Sum, Some(-1))?);
            outs.push(m.mse_loss(&m.neg()?, Reduction::Mean)?);
            // shape
            let r = seq.reshape(&[10, -1])?.permute(&[1, 0])?.transpose(0, 1)?;
            outs.push(r.broadcast_to(&[3, 10, 16])?);
            outs.push(Tensor::concat(&[m, m], 0)?.slice(&[0, 1], &[6, 5], &[2, 2])?);
            let table = g.param("emb", "", &f32(&[7, 16]), Init::Normal { mean: 0.0, std: 0.02 })?;
            outs.push(table.gather(tok, 0)?.flatten(1)?);
            // vision, attention, dropout
            let conv = Conv2dOptions { stride: [2, 2], padding: [1, 1], ..Conv2dOptions::default() };
            let k = g.param(
                "k",
                "",
                &f32(&[6, 3, 3, 3]),
                Init::KaimingNormal { gain: 2f64.sqrt(), mode: FanMode::FanOut },
            )?;
            let c = img.conv2d(&k, None, &conv)?;
            outs.push(c.max_pool2d(&Pool2dOptions::square(2))?);
            let nhwc = Pool2dOptions { layout: Layout::Nhwc, ..Pool2dOptions::square(2) };
            outs.push(img.permute(&[0, 2, 3, 1])?.avg_pool2d(&nhwc)?);
            outs.push(Tensor::attention(seq, seq, seq, true, Some(0.25))?.dropout(0.1)?);
            Ok(outs)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(sig.takes_rng);
    assert_eq!(sig.outputs[0], TensorSpec::new([3, 5], DType::BF16));
    assert_eq!(sig.outputs[4], TensorSpec::new([3], DType::I64));
    assert_eq!(sig.outputs[13], f32(&[2, 6, 2, 2]));
    assert_eq!(sig.outputs[14], f32(&[2, 4, 4, 3]));
    let m = b.finish().unwrap();
    let ctx = CompilerContext::new();
    m.parse(&ctx).unwrap_or_else(|e| panic!("{e}\n{m}"));
    for op in [
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "max",
        "min",
        "neg",
        "abs",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "tanh",
        "sigmoid",
        "relu",
        "silu",
        "gelu",
        "compare",
        "select",
        "cast",
        "constant",
        "linear",
        "matmul",
        "reduce_sum",
        "reduce_mean",
        "reduce_max",
        "argmax",
        "softmax",
        "log_softmax",
        "layer_norm",
        "rms_norm",
        "cross_entropy",
        "mse_loss",
        "reshape",
        "transpose",
        "broadcast_to",
        "concat",
        "slice",
        "gather",
        "conv2d",
        "max_pool2d",
        "avg_pool2d",
        "attention",
        "dropout",
        "get_param",
    ] {
        assert!(m.text.contains(&format!("hl.{op} ")), "hl.{op} missing from\n{m}");
    }
    assert!(m.text.contains("hl.constant dense<0xFF800000> : tensor<f32>"), "-inf as a bit pattern");
}

/// An ignore_index outside the labels' type is refused where it is given
/// (the generated kernel's constant did not parse: an internal error).
#[test]
fn an_ignore_index_outside_the_labels_type_is_refused() {
    let mut b = ModuleBuilder::new();
    let inputs = [f32(&[2, 3]), TensorSpec::new([2], DType::I32)];
    let e = b
        .function("ce", Mode::Train, &inputs, |xs| {
            Ok(vec![xs[0].cross_entropy(&xs[1], Reduction::Mean, Some(i64::MAX))?])
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("ignore_index 9223372036854775807 is outside the range of the labels' i32"), "{e}");
}

/// PyTorch's forms the layer API composes trace into verified `hl`:
/// `nn::Conv1d` (a height-1 convolution, its weight `[out, in / groups,
/// kernel]`), `torch.matmul`'s vector and broadcast forms, a linear layer
/// of one example, and the unreduced losses.
#[test]
fn pytorchs_composed_forms_trace_through_the_layer_api() {
    use aicf_compiler::nn::{Conv1d, Conv1dOptions};
    let inputs = [f32(&[2, 4, 10]), f32(&[3, 1, 5, 6]), f32(&[6]), TensorSpec::new([2, 5], DType::I32)];
    let mut b = ModuleBuilder::new();
    let sig = b
        .function("forms", Mode::Train, &inputs, |xs| {
            let conv = Conv1d::new("conv", 4, 6, 3).with_options(Conv1dOptions {
                stride: 2,
                padding: 1,
                groups: 2,
                ..Default::default()
            });
            let c = conv.forward(&xs[0])?;
            let m = xs[1].matmul(&xs[1].transpose(-1, -2)?.narrow(0, 0, 1)?.reshape(&[6, 5])?)?;
            let v = xs[1].matmul(&xs[2])?;
            let g = xs[2].graph();
            let w = g.param("w", "", &f32(&[3, 6]), Init::XavierUniform { gain: 1.0 })?;
            let one = xs[2].linear(&w, None)?;
            let logits = xs[1].narrow(0, 0, 2)?.reshape(&[2, 5, 6])?;
            let ce = logits.cross_entropy(&xs[3], Reduction::None, Some(-1))?;
            let se = one.mse_loss(&one.neg()?, Reduction::None)?;
            Ok(vec![c, m, v, one, ce, se])
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sig.outputs[0], f32(&[2, 6, 5]));
    assert_eq!(sig.outputs[1], f32(&[3, 1, 5, 5]));
    assert_eq!(sig.outputs[2], f32(&[3, 1, 5]));
    assert_eq!(sig.outputs[3], f32(&[3]));
    assert_eq!(sig.outputs[4], f32(&[2, 5]));
    assert_eq!(sig.outputs[5], f32(&[3]));
    let m = b.finish().unwrap();
    assert!(m.text.contains("tensor<6x2x3xf32>"), "Conv1d's weight [out, in / groups, kernel]\n{m}");
    m.parse(&CompilerContext::new()).unwrap_or_else(|e| panic!("{e}\n{m}"));
}

/// `randn_like` and `rand_like`: noise while training (`hl.random_like`,
/// on streams numbered with dropout's), the distribution's mean in
/// evaluation (no seed taken: the op of no spread); arguments out of their
/// range, and noise like an integer tensor, are refused by name.
#[test]
fn noise_is_drawn_while_training_and_is_its_mean_in_evaluation() {
    let mut b = ModuleBuilder::new();
    let eval = b
        .function("eval", Mode::Eval, &[f32(&[4, 4])], |xs| {
            Ok(vec![xs[0].randn_like(1.0, 2.0)?, xs[0].rand_like(-1.0, 3.0)?])
        })
        .unwrap();
    let train = b
        .function("train", Mode::Train, &[f32(&[4, 4])], |xs| {
            Ok(vec![xs[0].dropout(0.5)?.randn_like(0.0, 1.0)?, xs[0].rand_like(0.0, 1.0)?])
        })
        .unwrap();
    let m = b.finish().unwrap();
    assert!(!eval.takes_rng && train.takes_rng);
    let (eval_text, train_text) = m.text.split_once("func.func @train").unwrap();
    // Evaluation's noise has no spread (normal b = 0, uniform [1, 1]), on a
    // constant seed: its shape still follows the input's.
    assert!(eval_text.contains(r#"kind = "normal" a = 1.000000e+00 b = 0.000000e+00 stream = 0"#), "{m}");
    assert!(eval_text.contains(r#"kind = "uniform" a = 1.000000e+00 b = 1.000000e+00 stream = 0"#), "{m}");
    assert!(train_text.contains(r#"kind = "normal" a = 0.000000e+00 b = 1.000000e+00 stream = 1"#), "{m}");
    assert!(train_text.contains(r#"kind = "uniform" a = 0.000000e+00 b = 1.000000e+00 stream = 2"#), "{m}");
    let ctx = CompilerContext::new();
    let module = ctx.parse(&m.text, "noise").unwrap();
    let x = aicf_compiler::interp::Array::new([4, 4], DType::F32, vec![f64::NAN; 16]).unwrap();
    let out = aicf_compiler::interp::Interpreter::new(&module).run("eval", &[x]).unwrap();
    assert!(out.iter().all(|o| o.data.iter().all(|&v| v == 1.0)), "the means 1 and 1: {out:?}");
    let mut b = ModuleBuilder::new();
    for (what, body) in [
        (
            "randn_like: mean 0 and deviation -1 must be finite, std >= 0",
            Box::new(|x: &Tensor| x.randn_like(0.0, -1.0)) as Box<dyn Fn(&Tensor) -> nn::Result<Tensor>>,
        ),
        ("rand_like: the range [2, 1) must be finite and not reversed", Box::new(|x: &Tensor| x.rand_like(2.0, 1.0))),
        (
            "normal noise like tensor<2xi32>: the tensor must be a float",
            Box::new(|x: &Tensor| x.cast(DType::I32)?.randn_like(0.0, 1.0)),
        ),
    ] {
        let err = b.function("bad", Mode::Train, &[f32(&[2])], |xs| Ok(vec![body(&xs[0])?])).unwrap_err();
        assert!(err.to_string().contains(what), "{err}");
    }
}

/// A variational autoencoder written with the layer API (`randn_like` for
/// its reparameterisation) compiles and trains on its negative ELBO: the
/// trainer draws the noise's seed and offset per step, and the loss falls.
#[test]
fn a_variational_autoencoder_built_with_the_layer_api_trains() {
    use aicf_compiler::train::{Options, Trainer};
    let (enc, mu, logvar, dec) =
        (Linear::new("enc", 6, 16), Linear::new("mu", 16, 2), Linear::new("logvar", 16, 2), Linear::new("dec", 2, 6));
    let encode = |x: &Tensor| -> nn::Result<(Tensor, Tensor)> {
        let h = enc.forward(x)?.tanh()?;
        Ok((mu.forward(&h)?, logvar.forward(&h)?))
    };
    let mut b = ModuleBuilder::new();
    b.function("forward", Mode::Eval, &[f32(&[16, 6])], |xs| {
        let (m, lv) = encode(&xs[0])?;
        let z = m.add(&lv.randn_like(0.0, 1.0)?.mul(&lv.mul_scalar(0.5)?.exp()?)?)?;
        Ok(vec![dec.forward(&z)?])
    })
    .unwrap();
    b.function("loss", Mode::Train, &[f32(&[16, 6])], |xs| {
        let (m, lv) = encode(&xs[0])?;
        let z = m.add(&lv.randn_like(0.0, 1.0)?.mul(&lv.mul_scalar(0.5)?.exp()?)?)?;
        let rec = dec.forward(&z)?.sub(&xs[0])?;
        let rec = rec.mul(&rec)?.sum(&[1], false)?.mean(&[0], false)?;
        let kl = m.mul(&m)?.add(&lv.exp()?)?.sub(&lv)?.sum(&[1], false)?.mean(&[0], false)?;
        Ok(vec![rec.add(&kl.mul_scalar(0.5)?)?])
    })
    .unwrap();
    let m = b.finish().unwrap();
    assert!(m.text.contains("hl.random_like"), "{m}");
    let options = Options {
        optimizer: "adam".into(),
        device: aicf_runtime::Device::Cpu { threads: 2 },
        cache_dir: crate::tmp_root().join("nn-vae"),
        ..Options::default()
    };
    let mut t = Trainer::from_source(&m.text, "vae.mlir", options).unwrap();
    // Rows on a line in 6-D: two latent factors describe them.
    let x: Vec<f64> = (0..96).map(|i| ((i / 6) as f64 * 0.37 + (i % 6) as f64).sin()).collect();
    let x = aicf_runtime::Tensor::new([16, 6], aicf_runtime::artifact::DType::F32, x);
    let losses: Vec<f64> = (0..150).map(|_| t.step(&[&x], 0.01).unwrap().loss).collect();
    let (first, last) = (losses[..10].iter().sum::<f64>() / 10.0, losses[140..].iter().sum::<f64>() / 10.0);
    assert!(last < 0.7 * first, "the loss went from {first} to {last}");
    // At the same parameters, another step's offset draws other noise: the
    // loss differs.
    let i64 = aicf_runtime::artifact::DType::I64;
    let seed = aicf_runtime::Tensor::scalar(5.0, i64);
    let at = |t: &mut Trainer, offset: u64| {
        let offset = aicf_runtime::Tensor::scalar(offset as f64, i64);
        t.backend_mut().call("loss", &[&x, &seed, &offset]).unwrap()[0].values[0]
    };
    let (a, b) = (at(&mut t, 0), at(&mut t, 1 << 24));
    assert!(a != b && a == at(&mut t, 0), "{a} {b}");
}
