//! Eager mode: each op family's gradient (the op's compiled vector-Jacobian
//! product) against central finite differences of the eager forward, the
//! tape's bookkeeping (accumulation, shared inputs, no_grad, detach,
//! zero_grad), and the digits MLP trained eagerly for an epoch against the
//! compiled train step from the same initial parameters.
//!
//! The tests that take a device run twice (`on_devices!`): on the CPU, and
//! on GPU 0 (`cuda::`, ignored here: `#[ignore]` with the reason; the GPU
//! session runs them, benches/gpu/eager.sh), each against the compiled
//! run on its own device. (The GPU machine has no clang for the CPU's
//! kernels; the GPU bundle checks the compiled CUDA runs against the CPU's.)

use crate::optimizer::digits;
use aicf_compiler::eager::{self, Device, Tensor, optim::Optim};
use aicf_compiler::nn::{Conv2dOptions, Pool2dOptions};
use aicf_compiler::train::{Options, Trainer};
use aicf_runtime::{Tensor as Host, artifact::DType};

/// Rows `[32 step, 32 step + 32)` of the digits: images `[32, 64]` (or
/// `[32, 1, 8, 8]`) and labels.
fn digits_batch(rows: &[([f64; 64], usize)], step: usize, image: bool) -> (Host, Host) {
    let take = &rows[step * 32..step * 32 + 32];
    let x: Vec<f64> = take.iter().flat_map(|r| r.0).collect();
    let y: Vec<f64> = take.iter().map(|r| r.1 as f64).collect();
    let shape: Vec<usize> = if image { vec![32, 1, 8, 8] } else { vec![32, 64] };
    (Host::new(shape, DType::F32, x), Host::new([32], DType::I32, y))
}

/// The digits MLP's loss (fc1, ReLU, fc2, cross-entropy) on a batch.
fn mlp_loss(p: &[Tensor], x: &Tensor, y: &Tensor) -> Tensor {
    x.linear(&p[0], Some(&p[1]))
        .and_then(|h| h.relu())
        .and_then(|h| h.linear(&p[2], Some(&p[3])))
        .and_then(|z| z.cross_entropy(y))
        .unwrap()
}

/// Each test body named, run on the CPU (`cpu::name`) and on GPU 0
/// (`cuda::name`, ignored where no GPU is).
macro_rules! on_devices {
    ($($name:ident),* $(,)?) => {
        mod cpu {
            $( #[test] fn $name() { super::$name(&aicf_compiler::eager::Device::Cpu { threads: 0 }); } )*
        }
        mod cuda {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU: the GPU session runs it (benches/gpu/eager.sh)"]
                fn $name() { super::$name(&aicf_compiler::eager::Device::Cuda { ordinal: 0 }); }
            )*
        }
    };
}

on_devices!(
    elementwise_reductions_and_shapes_have_the_gradients_of_finite_differences,
    contractions_normalisation_and_losses_have_the_gradients_of_finite_differences,
    convolution_and_pooling_have_the_gradients_of_finite_differences,
    the_tape_accumulates_shares_and_respects_no_grad_detach_and_zero_grad,
    the_digits_mlp_trained_eagerly_for_an_epoch_matches_the_compiled_run,
    the_digits_cnn_trained_eagerly_for_an_epoch_matches_the_compiled_run,
    training_moves_between_eager_and_compiled_with_its_optimizer_state,
    the_layer_api_runs_eagerly_from_the_compiled_models_initial_values,
    the_cnn_and_the_char_transformer_run_eagerly,
    model_state_trains_eagerly_as_compiled,
    clipping_by_global_norm_matches_the_compiled_clip_norm,
    a_character_rnn_over_lines_of_any_length_trains_eagerly,
    bad_input_is_an_error_naming_the_op,
    a_scalar_that_changes_every_step_runs_one_kernel,
    adam_counts_steps_per_parameter,
    composed_ops_have_pytorchs_values_and_the_gradients_of_finite_differences,
    nan_zero_and_integer_corners_are_pytorchs,
);

/// How close an eager run on `dev` must end to the compiled CPU run, as a
/// share of the largest magnitude: 1e-4 on the CPU; 1e-3 on a GPU, whose
/// kernels sum in another order and contract multiply-adds (the CPU's
/// eager and compiled kernels are the same code).
fn tolerance(dev: &Device) -> f64 {
    if dev.is_cuda() { 1e-3 } else { 1e-4 }
}

/// `got` equals `want` within `tol` of `want`'s largest magnitude.
fn assert_close_to(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
    let diff = got.iter().zip(want).fold(0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(diff <= tol * scale, "{what}: eager and compiled differ by {diff:e} (largest value {scale})");
}

/// `got` equals `want` within 1e-4 of `want`'s largest magnitude.
fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_close_to(what, got, want, 1e-4)
}

/// `host` as an eager tensor on `dev`.
fn on(dev: &Device, host: Host) -> Tensor {
    Tensor::from_host(host).unwrap().to(dev).unwrap()
}

/// A leaf parameter of `shape` on the CPU with values in [-1, 1) from a seeded LCG.
fn param(shape: &[usize], seed: u64) -> Tensor {
    param_on(shape, seed, &Device::Cpu { threads: 0 })
}

/// [`param`] on `dev`.
fn param_on(shape: &[usize], seed: u64, dev: &Device) -> Tensor {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let n: usize = shape.iter().product();
    let values = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_vec(shape, values).unwrap().to(dev).unwrap().param()
}

/// Eager gradients of `loss(params)` against central differences, at up
/// to 8 entries of every parameter.
fn check(name: &str, params: &[Tensor], loss: impl Fn(&[Tensor]) -> eager::Result<Tensor>) {
    let l = loss(params).unwrap_or_else(|e| panic!("{name}: {e}"));
    l.backward().unwrap_or_else(|e| panic!("{name}: backward: {e}"));
    let h = 1e-2f64;
    for (k, p) in params.iter().enumerate() {
        let g = p.grad().unwrap().unwrap_or_else(|| panic!("{name}: parameter {k} has no gradient"));
        let base = p.host().unwrap();
        let dev = p.device();
        assert_eq!(g.shape, base.shape, "{name}: gradient {k}'s shape");
        let n = base.values.len();
        for i in (0..n).step_by((n / 8).max(1)) {
            let at = |delta: f64| {
                let mut moved = base.clone();
                moved.values[i] += delta;
                let inputs: Vec<Tensor> = params
                    .iter()
                    .enumerate()
                    .map(|(j, q)| if j == k { on(&dev, moved.clone()) } else { q.detach() })
                    .collect();
                eager::no_grad(|| loss(&inputs).unwrap().item().unwrap())
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            let got = g.values[i];
            assert!(
                (got - fd).abs() <= 2e-2 * fd.abs().max(0.05),
                "{name}: d/d param {k}[{i}] is {got}, finite differences give {fd}"
            );
        }
    }
}

fn elementwise_reductions_and_shapes_have_the_gradients_of_finite_differences(dev: &Device) {
    let param = |shape: &[usize], seed| param_on(shape, seed, dev);
    let (a, b, c) = (param(&[3, 4], 1), param(&[4], 2), param(&[3, 1], 3));
    check("broadcast arithmetic", &[a.clone(), b.clone(), c.clone()], |p| {
        let d = p[0].mul(&p[1])?.add(&p[2])?.sub(&p[1])?;
        let e = d.div(&p[2].exp()?)?.maximum(&p[0])?;
        e.sum(&[0, 1], false)
    });
    check("activations", &[param(&[2, 5], 4)], |p| {
        let x = &p[0];
        let y = x.tanh()?.add(&x.sigmoid()?)?.add(&x.relu()?)?.add(&x.gelu()?)?;
        let z = y.add(&x.exp()?.log()?)?.add(&x.exp()?.sqrt()?)?.mul_scalar(0.5)?.add_scalar(1.0)?;
        z.neg()?.mean(&[0, 1], false)
    });
    check("reductions and shapes", &[param(&[2, 3, 4], 5)], |p| {
        let x = p[0].reshape(&[6, 4])?.permute(&[-1, 0])?.narrow(1, 1, 4)?;
        let s = x.sum(&[1], true)?.mul(&x.mean(&[0], true)?)?;
        s.mul(&s)?.sum(&[0, 1], false)
    });
    check("softmax", &[param(&[3, 5], 6)], |p| {
        let w = Tensor::from_vec(&[5], vec![0.5, -1.0, 2.0, 0.25, 1.5])?.to(dev)?;
        p[0].softmax(1)?.mul(&w)?.add(&p[0].log_softmax(1)?.mul_scalar(0.1)?)?.sum(&[0, 1], false)
    });
    // The functional API's further ops, as the layer API has them.
    check("abs, pow, minimum, silu, erf, rsqrt", &[param(&[2, 5], 30), param(&[2, 5], 31)], |p| {
        let (x, y) = (&p[0], &p[1]);
        let a = x.abs()?.add(&x.exp()?.pow(&y.tanh()?)?)?.add(&x.minimum(y)?)?;
        let b = a.add(&x.silu()?)?.add(&y.erf()?)?.add(&x.exp()?.rsqrt()?)?;
        b.sum(&[0, 1], false)
    });
    // Sine and cosine (rotary tables computed in a model); a rounding
    // passes no gradient, and the rest of the path still does.
    check("sin, cos, atan, round", &[param(&[2, 5], 36), param(&[2, 5], 37)], |p| {
        let (x, y) = (&p[0], &p[1]);
        let a = x.mul_scalar(3.0)?.sin()?.mul(&y.cos()?)?.add(&y.mul_scalar(2.0)?.cos()?)?;
        let a = a.add(&x.mul_scalar(2.5)?.atan()?.mul(y)?)?;
        a.add(&x.mul_scalar(4.0)?.round()?.mul(x)?)?.sum(&[0, 1], false)
    });
    let r = Tensor::from_vec(&[5], vec![2.5, 3.5, -0.5, -1.7, 0.2]).unwrap().to(dev).unwrap();
    assert_eq!(r.round().unwrap().values().unwrap(), vec![2.0, 4.0, -0.0, -2.0, 0.0]);
    assert_eq!(r.floor().unwrap().values().unwrap(), vec![2.0, 3.0, -1.0, -2.0, 0.0]);
    assert_eq!(r.ceil().unwrap().values().unwrap(), vec![3.0, 4.0, -0.0, -1.0, 1.0]);
    let s = r.sin().unwrap().values().unwrap();
    let want = [2.5f32, 3.5, -0.5, -1.7, 0.2].map(f32::sin);
    assert!(s.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{s:?}");
    let s = r.atan().unwrap().values().unwrap();
    let want = [2.5f32, 3.5, -0.5, -1.7, 0.2].map(f32::atan);
    assert!(s.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{s:?}");
    check("transpose, flatten, broadcast_to, concat, max", &[param(&[2, 3, 4], 32), param(&[3, 1], 33)], |p| {
        let t = p[0].transpose(0, -1)?.flatten(1)?;
        let b = p[1].broadcast_to(&[3, 4])?.transpose(0, 1)?;
        let c = Tensor::concat(&[&t, &b], 1)?;
        c.mul(&c)?.sum(&[0, 1], false)?.add(&c.max(&[1], false)?.sum(&[0], false)?)
    });
    check("rms norm", &[param(&[3, 8], 34), param(&[8], 35)], |p| {
        let y = p[0].rms_norm(Some(&p[1]), 1, 1e-6)?.add(&p[0].rms_norm(None, 1, 1e-6)?)?;
        y.mul(&y)?.sum(&[0, 1], false)
    });
    // argmax (no gradient) and the constructors.
    let x = Tensor::from_vec(&[2, 3], vec![0.5, 2.0, -1.0, 3.0, 3.5, 1.0]).unwrap().to(dev).unwrap();
    let i = x.argmax(1, false).unwrap();
    assert_eq!((i.shape(), i.values().unwrap()), (vec![2], vec![1.0, 1.0]));
    assert!(!i.requires_grad());
    let ones = Tensor::ones(&[2, 3]).unwrap().to(dev).unwrap();
    assert_eq!(x.mul(&ones).unwrap().values().unwrap(), x.values().unwrap());
    assert_eq!(Tensor::zeros(&[3]).unwrap().values().unwrap(), vec![0.0; 3]);
    assert_eq!(Tensor::full(&[2], 1.5).unwrap().values().unwrap(), vec![1.5, 1.5]);
    // arange, and randn/rand under a seed.
    assert_eq!(Tensor::arange(0.0, 1.0, 0.25).unwrap().values().unwrap(), vec![0.0, 0.25, 0.5, 0.75]);
    assert_eq!(Tensor::arange(3.0, 0.0, -1.5).unwrap().values().unwrap(), vec![3.0, 1.5]);
    assert_eq!(Tensor::arange(1.0, 0.0, 1.0).unwrap().shape(), vec![0]);
    assert!(Tensor::arange(0.0, 1.0, 0.0).unwrap_err().to_string().contains("the step not 0"));
    assert!(Tensor::arange(0.0, f64::NAN, 1.0).unwrap_err().to_string().contains("must be finite"));
    eager::manual_seed(7);
    let (r1, u1) =
        (Tensor::randn(&[64, 64]).unwrap().values().unwrap(), Tensor::rand(&[1000]).unwrap().values().unwrap());
    eager::manual_seed(7);
    assert_eq!(Tensor::randn(&[64, 64]).unwrap().values().unwrap(), r1, "the same seed draws the same values");
    assert_ne!(Tensor::randn(&[64, 64]).unwrap().values().unwrap(), r1, "a second draw differs");
    let mean = r1.iter().map(|&v| f64::from(v)).sum::<f64>() / r1.len() as f64;
    let var = r1.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / r1.len() as f64;
    assert!(mean.abs() < 0.05 && (var - 1.0).abs() < 0.08, "randn's mean {mean} and variance {var}");
    assert!(u1.iter().all(|&u| (0.0..1.0).contains(&u)), "rand in [0, 1)");
    assert!(Tensor::randn(&[usize::MAX, 4]).unwrap_err().to_string().contains("randn:"));
    let e = Tensor::full(&[usize::MAX, 4], 1.0).unwrap_err().to_string();
    assert!(e.contains("full:"), "{e}");
    assert!(Tensor::concat(&[], 0).unwrap_err().to_string().contains("concat of no tensors"));
    assert!(x.flatten(2).unwrap_err().to_string().contains("flatten(2) of a tensor of rank 2: no axis 2"));
}

fn contractions_normalisation_and_losses_have_the_gradients_of_finite_differences(dev: &Device) {
    let param = |shape: &[usize], seed| param_on(shape, seed, dev);
    check("matmul", &[param(&[2, 3, 4], 7), param(&[2, 4, 5], 8)], |p| p[0].matmul(&p[1])?.sum(&[0, 1, 2], false));
    // torch.matmul's forms: vectors, a batch against one matrix, batch
    // axes that broadcast (the gradient of a broadcast operand sums its
    // copies).
    let w = Tensor::from_vec(&[2, 3, 2, 5], (0..60).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect()).unwrap();
    let w = w.to(dev).unwrap();
    check(
        "matmul of vectors and broadcast batches",
        &[param(&[4], 40), param(&[4, 5], 41), param(&[3, 2, 4], 42)],
        |p| {
            let dot = p[0].matmul(&p[0])?; // []
            let row = p[0].matmul(&p[1])?; // [5]
            let col = p[1].transpose(0, 1)?.matmul(&p[0])?; // [5]
            let rows = p[2].matmul(&p[1])?; // [3, 2, 5]: one GEMM over 6 rows
            let batch = p[2].matmul(&p[2].transpose(-1, -2)?.narrow(0, 0, 1)?)?; // [3, 2, 2]
            let wide = batch.matmul(&p[1].broadcast_to(&[2, 1, 4, 5])?.narrow(2, 0, 2)?)?; // [2, 3, 2, 5]
            let mixed = p[2].matmul(&p[0])?; // [3, 2]
            let all = rows.mul(&wide)?.mul(&w)?.sum(&[0, 1, 2, 3], false)?;
            let v = row.add(&col)?.sum(&[0], false)?.add(&dot)?;
            all.add(&v)?.add(&mixed.mul(&mixed)?.sum(&[0, 1], false)?)
        },
    );
    let (v, m, b) = (param(&[4], 43), param(&[4, 5], 44), param(&[2, 3, 4], 45));
    let values = |t: eager::Result<Tensor>| t.unwrap().host().unwrap().values;
    let as_rows = values(v.reshape(&[1, 4]).and_then(|r| r.matmul(&m)));
    assert_eq!(values(v.matmul(&m)), as_rows);
    assert_eq!(v.matmul(&m).unwrap().shape(), vec![5]);
    let folded = values(b.reshape(&[6, 4]).and_then(|r| r.matmul(&m)));
    assert_eq!(values(b.matmul(&m)), folded);
    assert_eq!(b.matmul(&m).unwrap().shape(), vec![2, 3, 5]);
    let spread = values(m.broadcast_to(&[2, 4, 5]).and_then(|mm| b.matmul(&mm)));
    assert_close("a matrix broadcast over the batch", &values(b.matmul(&m)), &spread);
    assert_eq!(v.matmul(&v).unwrap().shape(), Vec::<usize>::new());
    let e = b.matmul(&param(&[3, 5, 2], 46)).unwrap_err().to_string();
    assert!(e.contains("contracting dimensions differ (4 and 5)"), "{e}");
    let e = b.matmul(&param(&[4, 4, 2], 47)).unwrap_err().to_string();
    assert!(e.contains("batch dimensions do not broadcast (2 and 4"), "{e}");
    let e = Tensor::full(&[], 2.0).unwrap().to(dev).unwrap().matmul(&m).unwrap_err().to_string();
    assert!(e.contains("matmul of a scalar"), "{e}");
    // Losses by reduction, and labels left out.
    let logits = param(&[4, 3], 48);
    let labels3 = Tensor::from_i32(&[4], &[2, 0, -100, 1]).unwrap().to(dev).unwrap();
    let each = logits.cross_entropy_with(&labels3, eager::Reduction::None, Some(-100)).unwrap();
    assert_eq!(each.shape(), vec![4]);
    let lsm = logits.log_softmax(1).unwrap().values().unwrap();
    let want: Vec<f64> = [2usize, 0, usize::MAX, 1]
        .iter()
        .enumerate()
        .map(|(r, &c)| if c == usize::MAX { 0.0 } else { -f64::from(lsm[r * 3 + c]) })
        .collect();
    assert_close("cross-entropy per row", &each.host().unwrap().values, &want);
    let sum = logits.cross_entropy_with(&labels3, eager::Reduction::Sum, Some(-100)).unwrap().item().unwrap();
    let mean = logits.cross_entropy_with(&labels3, eager::Reduction::Mean, Some(-100)).unwrap().item().unwrap();
    let total: f64 = want.iter().sum();
    assert!((sum - total).abs() < 1e-4 * total.abs().max(1.0), "sum {sum} against {total}");
    assert!((mean - total / 3.0).abs() < 1e-4 * total.abs().max(1.0), "mean {mean} over the 3 counted rows");
    // Label smoothing (PyTorch's): (1 - e) nll + e mean_c(-log p), the
    // mean over the counted rows.
    let e = 0.1;
    let smoothed =
        logits.cross_entropy_smoothed(&labels3, eager::Reduction::Mean, Some(-100), e).unwrap().item().unwrap();
    let uniform: Vec<f64> = (0..4).map(|r| -(0..3).map(|c| f64::from(lsm[r * 3 + c])).sum::<f64>() / 3.0).collect();
    let want_smoothed = [0usize, 1, 3].iter().map(|&r| (1.0 - e) * want[r] + e * uniform[r]).sum::<f64>() / 3.0;
    assert!((smoothed - want_smoothed).abs() < 1e-5, "label smoothing {smoothed} against {want_smoothed}");
    assert!(logits.cross_entropy_smoothed(&labels3, eager::Reduction::Mean, Some(-100), 1.5).is_err());
    // In f64 to f64's digits (its uniform term was counted in f32: 1e-8
    // off, a finite-difference check at eps 1e-6 read 2-6% errors).
    let wide: Vec<f64> = (0..12).map(|k| (k as f64 * 0.7361).sin() * 2.0 + 1e-9 * k as f64).collect();
    let logits64 = Tensor::from_host(Host::new([4, 3], DType::F64, wide.clone())).unwrap().to(dev).unwrap();
    let smoothed64 =
        logits64.cross_entropy_smoothed(&labels3, eager::Reduction::Mean, Some(-100), e).unwrap().item().unwrap();
    let lsm64 = |r: usize, c: usize| {
        let row = &wide[r * 3..r * 3 + 3];
        let top = row.iter().cloned().fold(f64::MIN, f64::max);
        row[c] - top - row.iter().map(|v| (v - top).exp()).sum::<f64>().ln()
    };
    let want64 = [(0usize, 2usize), (1, 0), (3, 1)]
        .iter()
        .map(|&(r, c)| (1.0 - e) * -lsm64(r, c) + e * -(0..3).map(|k| lsm64(r, k)).sum::<f64>() / 3.0)
        .sum::<f64>()
        / 3.0;
    assert!((smoothed64 - want64).abs() < 1e-12, "f64 label smoothing {smoothed64} against {want64}");
    // A value past f32's range is refused, not stored as an infinity.
    let far = Tensor::from_host(Host::new([2], DType::F32, vec![1e40, 1.0])).unwrap_err().to_string();
    assert!(far.contains("value 0 is 1e40, beyond F32's range"), "{far}");
    // Sum and none agree with the mean's parts; a label past the classes is
    // refused at every reduction (the reduced ones by the kernel's check).
    let summed = logits.cross_entropy_smoothed(&labels3, eager::Reduction::Sum, Some(-100), e).unwrap().item().unwrap();
    assert!((summed - 3.0 * want_smoothed).abs() < 1e-5, "sum {summed} against {}", 3.0 * want_smoothed);
    let each = logits.cross_entropy_smoothed(&labels3, eager::Reduction::None, Some(-100), e).unwrap();
    assert!((each.sum(&[0], false).unwrap().item().unwrap() - summed).abs() < 1e-5);
    let past = Tensor::from_i32(&[4], &[2, 0, 3, 1]).unwrap().to(dev).unwrap();
    for reduction in [eager::Reduction::Mean, eager::Reduction::None] {
        for smoothing in [0.0, 0.1] {
            let e = logits.cross_entropy_smoothed(&past, reduction, None, smoothing).unwrap_err().to_string();
            assert!(e.contains("label 3 at position 2 is outside [0, 3)"), "{reduction:?} {smoothing}: {e}");
        }
    }
    check("label-smoothed cross-entropy", &[param(&[2, 3, 4], 51)], |p| {
        let labels = Tensor::from_i32(&[2, 3], &[3, 0, 1, -1, 2, 3])?.to(dev)?;
        p[0].cross_entropy_smoothed(&labels, eager::Reduction::Mean, Some(-1), 0.2)
    });
    check("cross-entropy and mse per position", &[param(&[2, 3, 4], 49), param(&[2, 3], 50)], |p| {
        let labels = Tensor::from_i32(&[2, 3], &[3, 0, 1, -1, 2, 3])?.to(dev)?;
        let ce = p[0].cross_entropy_with(&labels, eager::Reduction::None, Some(-1))?;
        let se = p[1].mse_loss_with(&Tensor::full(&[2, 3], 0.25)?.to(dev)?, eager::Reduction::None)?;
        ce.mul(&se)?.sum(&[0, 1], false)
    });
    let bad = Tensor::from_i32(&[4], &[2, 0, 3, 1]).unwrap().to(dev).unwrap();
    for reduction in [eager::Reduction::None, eager::Reduction::Sum] {
        let e = logits.cross_entropy_with(&bad, reduction, None).unwrap_err().to_string();
        assert!(e.contains("label 3 at position 2 is outside [0, 3)"), "{reduction:?}: {e}");
    }
    let labels = Tensor::from_i32(&[4], &[1, 0, 2, 1]).unwrap().to(dev).unwrap();
    check("linear + cross-entropy", &[param(&[4, 6], 9), param(&[3, 6], 10), param(&[3], 11)], |p| {
        p[0].linear(&p[1], Some(&p[2]))?.cross_entropy(&labels)
    });
    let target = Tensor::from_vec(&[4, 3], (0..12).map(|i| i as f32 / 12.0).collect()).unwrap().to(dev).unwrap();
    check("linear (no bias) + mse", &[param(&[4, 6], 12), param(&[3, 6], 13)], |p| {
        p[0].linear(&p[1], None)?.mse_loss(&target)
    });
    check("layer norm", &[param(&[3, 8], 14), param(&[8], 15), param(&[8], 16)], |p| {
        let y = p[0].layer_norm(&p[1], &p[2], 1, 1e-5)?;
        y.mul(&y)?.sum(&[0, 1], false)
    });
    let ids = Tensor::from_i32(&[2, 3], &[0, 4, 2, 4, 1, 0]).unwrap().to(dev).unwrap();
    check("embedding", &[param(&[5, 4], 17)], |p| {
        let e = p[0].gather(&ids, 0)?;
        e.mul(&e)?.sum(&[0, 1, 2], false)
    });
}

fn convolution_and_pooling_have_the_gradients_of_finite_differences(dev: &Device) {
    let param = |shape: &[usize], seed| param_on(shape, seed, dev);
    // conv1d (a height-1 conv2d): values against the definition, and
    // gradients against finite differences.
    let o1 = aicf_compiler::nn::Conv1dOptions { stride: 2, padding: 1, dilation: 2, groups: 2 };
    let (x, w, b) = (param(&[2, 4, 9], 21), param(&[6, 2, 3], 22), param(&[6], 23));
    let y = x.conv1d(&w, Some(&b), &o1).unwrap();
    let (xv, wv, bv) = (x.host().unwrap().values, w.host().unwrap().values, b.host().unwrap().values);
    let out_len = (9 + 2 - 2 * 2 - 1) / 2 + 1;
    assert_eq!(y.shape(), vec![2, 6, out_len]);
    let mut want = Vec::new();
    for n in 0..2 {
        for o in 0..6 {
            for l in 0..out_len {
                let mut acc = bv[o];
                for c in 0..2 {
                    for k in 0..3 {
                        let at = (l * 2 + k * 2) as i64 - 1;
                        if (0..9).contains(&at) {
                            acc += xv[(n * 4 + (o / 3) * 2 + c) * 9 + at as usize] * wv[(o * 2 + c) * 3 + k];
                        }
                    }
                }
                want.push(acc);
            }
        }
    }
    assert_close("conv1d", &y.host().unwrap().values, &want);
    check("conv1d", &[x.detach().param(), w.detach().param(), b.detach().param()], |p| {
        let y = p[0].conv1d(&p[1], Some(&p[2]), &o1)?;
        y.mul(&y)?.sum(&[0, 1, 2], false)
    });
    let e = x.conv1d(&param(&[6, 2, 3, 1], 24), None, &o1).unwrap_err().to_string();
    assert!(e.contains("conv1d takes an input [batch, channels, length] and a weight"), "{e}");
    let o = Conv2dOptions { stride: [2, 1], padding: [1, 1], dilation: [1, 1], groups: 2, ..Default::default() };
    check("conv2d + pools", &[param(&[2, 4, 6, 6], 18), param(&[6, 2, 3, 3], 19), param(&[6], 20)], |p| {
        let y = p[0].conv2d(&p[1], Some(&p[2]), &o)?;
        let m = y.max_pool2d(&Pool2dOptions::square(2))?;
        let a = y.avg_pool2d(&Pool2dOptions::square(3))?;
        m.sum(&[0, 1, 2, 3], false)?.add(&a.mul(&a)?.sum(&[0, 1, 2, 3], false)?)
    });
}

fn the_tape_accumulates_shares_and_respects_no_grad_detach_and_zero_grad(dev: &Device) {
    let w = param_on(&[3], 21, dev);
    // w used twice: d/dw (w*w + 3w) summed = 2w + 3.
    let l = w.mul(&w).unwrap().add(&w.mul_scalar(3.0).unwrap()).unwrap().sum(&[0], false).unwrap();
    l.backward().unwrap();
    let want: Vec<f64> = w.values().unwrap().iter().map(|&v| 2.0 * v as f64 + 3.0).collect();
    let got = w.grad().unwrap().unwrap().values;
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-5), "{got:?} vs {want:?}");
    // A second backward through the same ops is refused, as PyTorch
    // refuses it (it added the gradients again, silently), the gradient
    // left as the first made it; one kept by backward_retain_graph goes
    // through again and accumulates, zero_grad clears.
    let e = l.backward().unwrap_err().to_string();
    assert!(e.contains("an earlier backward() went through") && e.contains("backward_retain_graph()"), "{e}");
    assert!((w.grad().unwrap().unwrap().values[0] - want[0]).abs() < 1e-5);
    w.zero_grad();
    let l = w.mul(&w).unwrap().add(&w.mul_scalar(3.0).unwrap()).unwrap().sum(&[0], false).unwrap();
    l.backward_retain_graph().unwrap();
    l.backward().unwrap();
    assert!((w.grad().unwrap().unwrap().values[0] - 2.0 * want[0]).abs() < 1e-5);
    // A backward that fails midway (an input written in place since the
    // forward read it) leaves every leaf's gradient as it was, and is not
    // spent: it added the parts it reached, and again on each retry.
    let (a, c) = (param_on(&[3], 24, dev), Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap().to(dev).unwrap());
    let m = a.mul(&a).unwrap().sum(&[0], false).unwrap().add(&w.mul(&c).unwrap().sum(&[0], false).unwrap()).unwrap();
    w.zero_grad();
    c.set_values(vec![0.0; 3]).unwrap();
    for _ in 0..2 {
        let e = m.backward().unwrap_err().to_string();
        assert!(e.contains("written in place"), "{e}");
        assert!(a.grad().unwrap().is_none() && w.grad().unwrap().is_none());
    }
    let l = w.mul(&w).unwrap().add(&w.mul_scalar(3.0).unwrap()).unwrap().sum(&[0], false).unwrap();
    l.backward_retain_graph().unwrap();
    l.backward().unwrap();
    // Another loss sharing those ops is refused too.
    let e = l.mul_scalar(2.0).unwrap().backward().unwrap_err().to_string();
    assert!(e.contains("an earlier backward() went through"), "{e}");
    w.zero_grad();
    assert!(w.grad().unwrap().is_none());
    // Nothing is recorded under no_grad, and a detached tensor has no history.
    let y = eager::no_grad(|| w.mul(&w).and_then(|v| v.sum(&[0], false)).unwrap());
    assert!(!y.requires_grad());
    assert!(y.backward().unwrap_err().to_string().contains("does not require a gradient"));
    // Values that do not fill their shape are refused where they enter.
    let short = Host::new([2, 2], DType::F32, vec![1.0]);
    assert!(Tensor::from_host(short).unwrap_err().to_string().contains("1 values for shape [2, 2]"));
    let d = w.detach();
    assert!(!d.requires_grad() && d.values().unwrap() == w.values().unwrap());
    // Ops run where their inputs are, all on one device.
    let v = w.mul(&w).unwrap();
    assert_eq!(v.device().to_string(), dev.to_string());
    if dev.is_cuda() {
        let e = w.add(&param(&[3], 22)).unwrap_err().to_string();
        assert!(e.contains("cuda:0 and cpu"), "{e}");
    }
    // Only a scalar has a backward; a wrong shape is the op's own error.
    let v = w.mul(&w).unwrap();
    assert!(v.backward().unwrap_err().to_string().contains("a loss is a scalar"));
    let e = w.matmul(&w.reshape(&[1, 3]).unwrap()).unwrap_err().to_string();
    assert!(e.starts_with("matmul:") && e.contains("contracting dimensions differ (3 and 1)"), "{e}");
    // Ops that fold to their input still give their values (their output
    // buffers, taken from a pool of old ones, are written whole).
    let same = w.reshape(&[3]).unwrap().mul_scalar(1.0).unwrap().add_scalar(0.0).unwrap().narrow(0, 0, 3).unwrap();
    assert_eq!(same.values().unwrap(), w.values().unwrap());
    // A label or index outside its range is an error naming it, before
    // any kernel reads with it.
    let logits = param_on(&[2, 3], 23, dev);
    let bad = Tensor::from_i32(&[2], &[1, 3]).unwrap().to(dev).unwrap();
    let e = logits.cross_entropy(&bad).unwrap_err().to_string();
    assert!(e.contains("3 at position 1 is outside [0, 3)"), "{e}");
    let ids = Tensor::from_i32(&[2], &[0, -1]).unwrap().to(dev).unwrap();
    let e = logits.gather(&ids, 0).unwrap_err().to_string();
    assert!(e.contains("-1 at position 1 is outside [0, 2)"), "{e}");
}

/// One epoch of the digits MLP (45 SGD steps with momentum of 32 rows),
/// eagerly and as the compiled train step, from the same parameters: the
/// same parameters at the end, to 1e-4 of their largest magnitude.
fn the_digits_mlp_trained_eagerly_for_an_epoch_matches_the_compiled_run(dev: &Device) {
    let (model, options) = compiled_reference("mlp/digits_mlp.mlir", "sgd", 3, "eager-mlp", dev);
    let mut compiled = Trainer::from_file(&model, options).unwrap();
    let start = compiled.state();
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let params: Vec<Tensor> = names.iter().map(|n| on(dev, start[*n].clone()).param()).collect();
    let mut opt = Optim::sgd(&params, 0.9, false, 0.0).unwrap();
    let rows = digits();
    let lr = 0.05;
    for step in 0..45 {
        let (xh, yh) = digits_batch(&rows, step, false);
        compiled.step(&[&xh, &yh], lr).unwrap();
        let (xe, ye) = (on(dev, xh), on(dev, yh));
        opt.zero_grad();
        let loss = mlp_loss(&params, &xe, &ye);
        loss.backward().unwrap();
        opt.step(lr).unwrap();
    }
    let end = compiled.state();
    for (n, p) in names.iter().zip(&params) {
        assert_close_to(n, &p.host().unwrap().values, &end[*n].values, tolerance(dev));
    }
    let s = eager::stats();
    assert!(s.calls >= 45 * 8, "{s:?}");
}

/// The digits CNN (examples/cnn) trained eagerly for an epoch with Adam
/// ends on the compiled run's parameters.
fn the_digits_cnn_trained_eagerly_for_an_epoch_matches_the_compiled_run(dev: &Device) {
    let (model, options) = compiled_reference("cnn/digits_cnn.mlir", "adam", 5, "eager-cnn", dev);
    let mut compiled = Trainer::from_file(&model, options).unwrap();
    let start = compiled.state();
    let names = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc.weight", "fc.bias"];
    let p: Vec<Tensor> = names.iter().map(|n| on(dev, start[*n].clone()).param()).collect();
    // None: a layer-API model's parameters before its first forward, said.
    let none = Optim::adam(&[], 0.0).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(none.contains("none were given") && none.contains("made by its first forward"), "{none}");
    let mut opt = Optim::adam(&p, 0.0).unwrap();
    let rows = digits();
    let lr = 3e-3;
    let conv = Conv2dOptions { padding: [1, 1], ..Default::default() };
    for step in 0..45 {
        let (xh, yh) = digits_batch(&rows, step, true);
        compiled.step(&[&xh, &yh], lr).unwrap();
        let (xe, ye) = (on(dev, xh), on(dev, yh));
        opt.zero_grad();
        let pool = Pool2dOptions::square(2);
        let loss = xe
            .conv2d(&p[0], Some(&p[1]), &conv)
            .and_then(|h| h.relu())
            .and_then(|h| h.max_pool2d(&pool))
            .and_then(|h| h.conv2d(&p[2], Some(&p[3]), &conv))
            .and_then(|h| h.relu())
            .and_then(|h| h.max_pool2d(&pool))
            .and_then(|h| h.reshape(&[32, 128]))
            .and_then(|h| h.linear(&p[4], Some(&p[5])))
            .and_then(|z| z.cross_entropy(&ye))
            .unwrap();
        loss.backward().unwrap();
        opt.step(lr).unwrap();
    }
    let end = compiled.state();
    for (n, t) in names.iter().zip(&p) {
        assert_close_to(n, &t.host().unwrap().values, &end[*n].values, tolerance(dev));
    }
}

#[path = "../../../examples/eager_rnn/model.rs"]
mod rnn;

/// The dynamic example (examples/eager_rnn): lines of different lengths,
/// each its own tape, and the loss falls.
fn a_character_rnn_over_lines_of_any_length_trains_eagerly(dev: &Device) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt")).unwrap();
    let losses = rnn::train(&text, 60, 40, 1e-2, dev).unwrap();
    let lengths: std::collections::BTreeSet<usize> = losses.iter().map(|x| x.1).collect();
    assert!(lengths.len() >= 8, "lengths {lengths:?}");
    let mean = |s: &[(f64, usize)]| s.iter().map(|x| x.0).sum::<f64>() / s.len() as f64;
    let (first, last) = (mean(&losses[..15]), mean(&losses[45..]));
    assert!(last < first - 0.5, "the loss went from {first:.3} to {last:.3}");
}

/// A trace of eager execution: every op (forward and backward) on one
/// track, the kernels each ran on another, as trace-event JSON.
#[test]
fn an_eager_trace_shows_each_op_and_its_kernels() {
    let (x, w) = (param(&[4, 8], 30), param(&[3, 8], 31));
    let labels = Tensor::from_i32(&[4], &[0, 1, 2, 1]).unwrap();
    eager::start_trace();
    let loss = x.linear(&w, None).and_then(|y| y.relu()).and_then(|y| y.cross_entropy(&labels)).unwrap();
    loss.backward().unwrap();
    let path = crate::tmp_root().join("eager-trace.json");
    let ops = eager::finish_trace(&path).unwrap();
    assert_eq!(ops, 6, "3 ops forward, 3 backward");
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let on = |tid: u64| events.iter().filter(|e| e["ph"] == "X" && e["tid"] == tid).count();
    assert_eq!(on(0), 6);
    assert!(on(1) >= 6, "every op runs at least one kernel: {}", on(1));
    assert!(events.iter().any(|e| e["name"].as_str().is_some_and(|n| n.starts_with("vjp linear"))));
    assert!(eager::finish_trace(&path).is_err(), "no trace is running");
    // A file that holds no trace (a checkpoint) is not written over; a
    // trace is (the second run's replaces the first's).
    let kept = crate::tmp_root().join("eager-trace-not-a-trace.safetensors");
    std::fs::write(&kept, b"not a trace").unwrap();
    eager::start_trace();
    x.relu().unwrap();
    let e = eager::finish_trace(&kept).unwrap_err().to_string();
    assert!(e.contains("would overwrite this file, which holds no trace"), "{e}");
    assert_eq!(std::fs::read(&kept).unwrap(), b"not a trace");
    eager::start_trace();
    x.relu().unwrap();
    assert_eq!(eager::finish_trace(&path).unwrap(), 1);
}

/// A scale that changes every step (a schedule, an annealed weight) runs
/// the kernels of its first step: the value is an operand of `mul_scalar`
/// and `add_scalar`, not a constant compiled into a kernel per value.
fn a_scalar_that_changes_every_step_runs_one_kernel(dev: &Device) {
    let x = on(dev, Host::new([4], DType::F32, vec![1.0, -2.0, 3.0, 0.5])).param();
    let mut built = None;
    for v in [0.5, 0.25, 3.0, -1.5, 1e-3] {
        x.zero_grad();
        let y = x.mul_scalar(v).unwrap().add_scalar(2.0 * v).unwrap();
        y.sum(&[0], false).unwrap().backward().unwrap();
        let want: Vec<f64> = [1.0, -2.0, 3.0, 0.5].iter().map(|x| x * v + 2.0 * v).collect();
        assert_close_to("x v + 2 v", &y.host().unwrap().values, &want, 1e-6);
        assert_close_to("its gradient", &x.grad().unwrap().unwrap().values, &[v; 4], 1e-6);
        let s = eager::stats();
        let now = s.compiled + s.loaded;
        assert_eq!(*built.get_or_insert(now), now, "v = {v} built another kernel");
    }
    // An integer tensor times a fraction is promoted to f32 (PyTorch's
    // rule; it was refused), and a whole number it cannot hold is an error
    // naming the op.
    let i = on(dev, Host::new([2], DType::I32, vec![1.0, 2.0]));
    assert_eq!(i.mul_scalar(2.5).unwrap().host().unwrap().values, vec![2.5, 5.0]);
    let e = i.mul_scalar(1e12).unwrap_err().to_string();
    assert!(e.starts_with("mul_scalar:") && e.contains("the scalar 1000000000000 as a I32 tensor"), "{e}");
    assert_eq!(i.add_scalar(3.0).unwrap().host().unwrap().values, vec![4.0, 5.0]);
}

/// Adam counts steps per parameter, as PyTorch's `state['step']`: a
/// parameter without a gradient at a step is neither updated nor counted,
/// so the first update of one used from the third step on moves it by lr
/// (step 1's bias corrections), not by the 0.64 lr of step 3's. The counts
/// go through `state` and `load_state`; the compiled step, one count for
/// all, refuses them by name.
fn adam_counts_steps_per_parameter(dev: &Device) {
    for kernels in [false, true] {
        let a = on(dev, Host::new([2], DType::F32, vec![1.0, -1.0])).param();
        let b = on(dev, Host::new([2], DType::F32, vec![0.5, 2.0])).param();
        let mut opt = Optim::adam(&[a.clone(), b.clone()], 0.0).unwrap();
        opt.use_kernels(kernels);
        let step = |opt: &mut Optim, a: &Tensor, b: &Tensor, with_b: bool| {
            opt.zero_grad();
            let mut l = a.mul(a).unwrap();
            if with_b {
                l = l.add(&b.mul_scalar(3.0).unwrap()).unwrap();
            }
            l.sum(&[0], false).unwrap().backward().unwrap();
            opt.step(0.1).unwrap();
        };
        for k in 0..3 {
            step(&mut opt, &a, &b, k == 2);
        }
        assert_close_to("b after its first update", &b.host().unwrap().values, &[0.4, 1.9], 1e-5);
        let names = ["a", "b"];
        let state = opt.state(&names).unwrap();
        assert_eq!((state["step"].values.clone(), state["b.step"].values.clone()), (vec![3.0], vec![1.0]));
        assert!(!state.contains_key("a.step"), "a has had every update");
        // A fresh optimizer from the state takes the next step as this one.
        let a2 = on(dev, Host::new([2], DType::F32, vec![0.0; 2])).param();
        let b2 = on(dev, Host::new([2], DType::F32, vec![0.0; 2])).param();
        let mut opt2 = Optim::adam(&[a2.clone(), b2.clone()], 0.0).unwrap();
        opt2.use_kernels(kernels);
        opt2.load_state(&names, &state).unwrap();
        step(&mut opt, &a, &b, true);
        step(&mut opt2, &a2, &b2, true);
        for (x, y) in [(&a, &a2), (&b, &b2)] {
            assert_eq!(x.host().unwrap().values, y.host().unwrap().values, "kernels {kernels}");
        }
        assert_eq!(opt2.state(&names).unwrap()["b.step"].values, vec![2.0]);
        // A name that would make another's step entry is refused.
        let e = opt.state(&["w", "w.step"]).unwrap_err().to_string();
        assert!(e.contains("'w.step' twice"), "{e}");
    }
}

/// The digits MLP with Adam: 20 steps eager then 25 compiled, and 20
/// compiled then 25 eager, each carrying the parameters and the
/// optimizer's state across, end where 45 compiled steps do.
fn training_moves_between_eager_and_compiled_with_its_optimizer_state(dev: &Device) {
    let (model, options) = compiled_reference("mlp/digits_mlp.mlir", "adam", 7, "eager-switch", dev);
    let rows = digits();
    let batch = |step: usize| digits_batch(&rows, step, false);
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let lr = 3e-3;
    let compiled_steps = |t: &mut Trainer, range: std::ops::Range<usize>| {
        for s in range {
            let (x, y) = batch(s);
            t.step(&[&x, &y], lr).unwrap();
        }
    };
    let eager_steps = |p: &[Tensor], opt: &mut Optim, range: std::ops::Range<usize>| {
        for s in range {
            let (x, y) = batch(s);
            let (x, y) = (on(dev, x), on(dev, y));
            opt.zero_grad();
            let loss = mlp_loss(p, &x, &y);
            loss.backward().unwrap();
            opt.step(lr).unwrap();
        }
    };
    let mut reference = Trainer::from_file(&model, options.clone()).unwrap();
    let start = reference.state();
    compiled_steps(&mut reference, 0..45);
    let want = reference.state();
    let check = |what: &str, got: &std::collections::BTreeMap<String, Host>| {
        for n in names {
            assert_close_to(&format!("{what}: {n}"), &got[n].values, &want[n].values, tolerance(dev));
        }
    };
    // Eager, then compiled.
    let p: Vec<Tensor> = names.iter().map(|n| on(dev, start[*n].clone()).param()).collect();
    let mut opt = Optim::adam(&p, 0.0).unwrap();
    eager_steps(&p, &mut opt, 0..20);
    let mut t = Trainer::from_file(&model, options.clone()).unwrap();
    // A parameter that missed updates has its own count, which the compiled
    // step (one count for all) refuses by name.
    let mut missed = opt.state(&names).unwrap();
    missed.insert("fc1.bias.step".into(), Host::new([], DType::I64, vec![3.0]));
    let e = t.set_state(&missed).unwrap_err().to_string();
    assert!(e.contains("fc1.bias has had fewer updates"), "{e}");
    t.set_state(&opt.state(&names).unwrap()).unwrap();
    compiled_steps(&mut t, 20..45);
    check("eager then compiled", &t.state());
    // Compiled, then eager.
    let mut t = Trainer::from_file(&model, options).unwrap();
    compiled_steps(&mut t, 0..20);
    let p: Vec<Tensor> = names.iter().map(|n| on(dev, start[*n].clone()).param()).collect();
    let mut opt = Optim::adam(&p, 0.0).unwrap();
    opt.load_state(&names, &t.state()).unwrap();
    eager_steps(&p, &mut opt, 20..45);
    check("compiled then eager", &opt.state(&names).unwrap());
    // A state that does not fit is an error naming what is missing.
    let mut partial = t.state();
    partial.remove("fc1.bias.exp_avg");
    assert!(opt.load_state(&names, &partial).unwrap_err().to_string().contains("fc1.bias.exp_avg"));
}

/// The same model code in both modes: the layer API's digits MLP
/// (examples/mlp/model.rs) called on an eager graph's tensors creates its
/// parameters with the compiled runtime's initial values (same seed), runs
/// op by op, and trained for an epoch ends on the compiled run's
/// parameters.
fn the_layer_api_runs_eagerly_from_the_compiled_models_initial_values(dev: &Device) {
    use aicf_compiler::nn::{self, Module};
    let seed = 11;
    let (model, options) = compiled_reference("mlp/digits_mlp.mlir", "sgd", seed, "eager-layers", dev);
    let mut compiled = Trainer::from_file(&model, options).unwrap();
    let start = compiled.state();
    let net = crate::models::mlp::model();
    let g = nn::Graph::eager_on(nn::Mode::Train, seed, *dev);
    let rows = digits();
    let lr = 0.05;
    let mut opt: Option<Optim> = None;
    for step in 0..45 {
        let (xh, yh) = digits_batch(&rows, step, false);
        compiled.step(&[&xh, &yh], lr).unwrap();
        let x = g.input(&Tensor::from_host(xh).unwrap()).unwrap();
        let y = g.input(&Tensor::from_host(yh).unwrap()).unwrap();
        if let Some(o) = &opt {
            o.zero_grad();
        }
        let loss = net.forward(&x).and_then(|z| z.cross_entropy(&y, nn::Reduction::Mean, None)).unwrap();
        if step == 0 {
            // The parameters exist once the model has run; they start where
            // the compiled model's runtime starts them.
            for (name, p) in g.eager_params() {
                assert_eq!(p.host().unwrap().values, start[&name].values, "{name}'s initial values");
                assert_eq!(p.device().to_string(), dev.to_string());
            }
            let params: Vec<Tensor> = g.eager_params().into_iter().map(|(_, p)| p).collect();
            opt = Some(Optim::sgd(&params, 0.9, false, 0.0).unwrap());
        }
        loss.eager().unwrap().backward().unwrap();
        opt.as_mut().unwrap().step(lr).unwrap();
    }
    let end = compiled.state();
    let params = g.eager_params();
    assert_eq!(
        params.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    );
    for (n, p) in params {
        assert_close_to(&n, &p.host().unwrap().values, &end[&n].values, tolerance(dev));
    }
    // A wrong shape is the op's own error, naming the layer.
    let bad = g.input(&Tensor::from_vec(&[2, 63], vec![0.0; 126]).unwrap()).unwrap();
    let e = net.forward(&bad).unwrap_err().to_string();
    assert!(e.contains("fc1"), "{e}");
}

/// The repo's CNN and character transformer (layer API, with attention,
/// layer norms, embeddings and dropout) run eagerly: a training step gives
/// every parameter a gradient, and the transformer's sequence length can
/// change from call to call.
fn the_cnn_and_the_char_transformer_run_eagerly(dev: &Device) {
    use aicf_compiler::nn::{self, Module};
    let g = nn::Graph::eager_on(nn::Mode::Train, 3, *dev);
    let cnn = crate::models::cnn::model();
    let x =
        g.input(&Tensor::from_vec(&[4, 1, 8, 8], (0..256).map(|i| (i % 17) as f32 / 17.0).collect()).unwrap()).unwrap();
    let y = g.input(&Tensor::from_i32(&[4], &[1, 2, 3, 4]).unwrap()).unwrap();
    let loss = cnn.forward(&x).and_then(|z| z.cross_entropy(&y, nn::Reduction::Mean, None)).unwrap();
    loss.eager().unwrap().backward().unwrap();
    assert_eq!(g.eager_params().len(), 6);
    assert!(g.eager_params().iter().all(|(_, p)| p.grad().unwrap().is_some()));

    let lm = crate::models::char_lm::CharLM::new(crate::models::char_lm::Config {
        vocab: 20,
        context: 16,
        dim: 16,
        heads: 2,
        layers: 1,
        dropout: 0.1,
        batch: 2,
    })
    .unwrap();
    let g = nn::Graph::eager_on(nn::Mode::Train, 3, *dev);
    for seq in [16, 9] {
        let ids: Vec<i32> = (0..2 * seq as i32).map(|i| i % 20).collect();
        let tokens = g.input(&Tensor::from_i32(&[2, seq], &ids).unwrap()).unwrap();
        let next: Vec<i32> = ids.iter().map(|i| (i + 1) % 20).collect();
        let targets = g.input(&Tensor::from_i32(&[2, seq], &next).unwrap()).unwrap();
        let logits = lm.forward(&tokens).unwrap();
        assert_eq!(logits.shape(), [2, seq, 20]);
        let loss = logits.cross_entropy(&targets, nn::Reduction::Mean, None).unwrap();
        let l = loss.eager().unwrap();
        assert!(l.item().unwrap().is_finite());
        l.backward().unwrap();
    }
    assert!(g.eager_params().iter().all(|(_, p)| p.grad().unwrap().is_some()), "every parameter has a gradient");
}

/// The compiled run an eager test on `dev` is checked against:
/// `examples/<example>` on the same device, with options for one CPU
/// worker and the generated GEMMs (bits that do not depend on a timed
/// choice); SGD runs with momentum 0.9.
fn compiled_reference(
    example: &str,
    optimizer: &str,
    seed: u64,
    tag: &str,
    dev: &Device,
) -> (std::path::PathBuf, Options) {
    let model = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples")).join(example);
    let options = Options {
        optimizer: optimizer.into(),
        momentum: if optimizer == "sgd" { 0.9 } else { 0.0 },
        device: if dev.is_cuda() { dev.clone() } else { Device::Cpu { threads: 1 } },
        seed,
        cache_dir: crate::tmp_root().join(if dev.is_cuda() { format!("{tag}-cuda") } else { tag.into() }),
        gemm: Some("generated".into()),
        ..Options::default()
    };
    (model, options)
}

/// A batch norm over features written with the layer API's model state
/// (`Graph::state` / `set_state`): the batch statistics normalise while
/// training, and the running statistics (PyTorch's momentum 0.1, unbiased
/// variance) are the model's state.
struct BatchNorm1d {
    path: String,
    features: usize,
}

impl aicf_compiler::nn::Module for BatchNorm1d {
    fn forward(&self, x: &aicf_compiler::nn::Tensor) -> aicf_compiler::nn::Result<aicf_compiler::nn::Tensor> {
        use aicf_runtime::init::Init;
        let g = x.graph();
        let spec = aicf_compiler::nn::TensorSpec::f32([self.features]);
        let name = |n: &str| format!("{}.{n}", self.path);
        let w = g.param(&name("weight"), &self.path, &spec, Init::Ones)?;
        let b = g.param(&name("bias"), &self.path, &spec, Init::Zeros)?;
        let running_mean = g.state(&name("running_mean"), "running_mean", &spec, Init::Zeros)?;
        let running_var = g.state(&name("running_var"), "running_var", &spec, Init::Ones)?;
        let (mean, var) = if g.is_training() {
            let rows = x.shape()[0] as f64;
            let mean = x.mean(&[0], false)?;
            let centred = x.sub(&mean)?;
            let var = centred.mul(&centred)?.mean(&[0], false)?;
            let next_mean = running_mean.mul_scalar(0.9)?.add(&mean.mul_scalar(0.1)?)?;
            let next_var = running_var.mul_scalar(0.9)?.add(&var.mul_scalar(0.1 * rows / (rows - 1.0))?)?;
            g.set_state(&name("running_mean"), &next_mean)?;
            g.set_state(&name("running_var"), &next_var)?;
            (mean, var)
        } else {
            (running_mean, running_var)
        };
        x.sub(&mean)?.mul(&var.add_scalar(1e-5)?.rsqrt()?)?.mul(&w)?.add(&b)
    }
}

/// A model with state (a batch norm's running statistics) trains eagerly as
/// compiled: the same layer code traced (the running statistics updated by
/// the compiled step through `hl.set_state`) and run eagerly (updated at
/// once in the forward pass, as PyTorch's buffers are) ends an epoch on the
/// same parameters and running statistics; evaluation leaves them alone;
/// and they move with the parameters from eager mode to compiled.
fn model_state_trains_eagerly_as_compiled(dev: &Device) {
    use aicf_compiler::nn::{self, Linear, Module, ReLU, Sequential, TensorSpec};
    let model = || {
        Sequential::new()
            .push(Linear::new("fc1", 64, 32))
            .push(BatchNorm1d { path: "bn".into(), features: 32 })
            .push(ReLU)
            .push(Linear::new("fc2", 32, 10))
    };
    let traced = nn::classifier_module(
        &model(),
        &TensorSpec::f32([32, 64]),
        &TensorSpec::new([32], aicf_compiler::nn::DType::I32),
    )
    .unwrap();
    let seed = 5;
    let (_, options) = compiled_reference("mlp/digits_mlp.mlir", "sgd", seed, "eager-state", dev);
    let mut compiled = Trainer::from_source(&traced.text, "bn_mlp", options.clone()).unwrap();
    let net = model();
    let g = nn::Graph::eager_on(nn::Mode::Train, seed, *dev);
    let rows = digits();
    let lr = 0.05;
    let mut opt: Option<Optim> = None;
    for step in 0..45 {
        let (xh, yh) = digits_batch(&rows, step, false);
        // Scaled as the pixels' 0-16 range would make a batch norm's job easy.
        let xh = Host::new(xh.shape.clone(), DType::F32, xh.values.iter().map(|v| v / 16.0).collect());
        compiled.step(&[&xh, &yh], lr).unwrap();
        let x = g.input(&Tensor::from_host(xh).unwrap()).unwrap();
        let y = g.input(&Tensor::from_host(yh).unwrap()).unwrap();
        if let Some(o) = &opt {
            o.zero_grad();
        }
        let loss = net.forward(&x).and_then(|z| z.cross_entropy(&y, nn::Reduction::Mean, None)).unwrap();
        if step == 0 {
            let params: Vec<Tensor> = g.eager_params().into_iter().map(|(_, p)| p).collect();
            opt = Some(Optim::sgd(&params, 0.9, false, 0.0).unwrap());
        }
        loss.eager().unwrap().backward().unwrap();
        opt.as_mut().unwrap().step(lr).unwrap();
    }
    let end = compiled.state();
    let states = g.eager_states();
    assert_eq!(states.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["bn.running_mean", "bn.running_var"]);
    for (n, t) in g.eager_params().into_iter().chain(states) {
        assert_close_to(&n, &t.host().unwrap().values, &end[&n].values, tolerance(dev));
    }
    // Evaluation reads the running statistics and writes nothing.
    let eval = nn::Graph::eager_on(nn::Mode::Eval, seed, *dev);
    let (xh, _) = digits_batch(&rows, 46, false);
    let x = eval.input(&Tensor::from_host(xh.clone()).unwrap()).unwrap();
    net.forward(&x).unwrap();
    let before: Vec<Vec<f64>> = eval.eager_states().iter().map(|(_, t)| t.host().unwrap().values).collect();
    net.forward(&x).unwrap();
    let after: Vec<Vec<f64>> = eval.eager_states().iter().map(|(_, t)| t.host().unwrap().values).collect();
    assert_eq!(before, after, "evaluation changed the running statistics");
    // Eager to compiled: parameters, momentum and running statistics.
    let names: Vec<String> = g.eager_params().into_iter().map(|(n, _)| n).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut state = opt.unwrap().state(&refs).unwrap();
    for (n, t) in g.eager_states() {
        state.insert(n, t.host().unwrap());
    }
    let mut moved = Trainer::from_source(&traced.text, "bn_mlp", options).unwrap();
    moved.set_state(&state).unwrap();
    let now = moved.state();
    for (n, t) in &state {
        assert_eq!(now[n].values, t.values, "{n} moved to the compiled trainer");
    }
    // And compiled to eager: a graph's state set from a compiled run's.
    let fresh = nn::Graph::eager_on(nn::Mode::Train, seed, *dev);
    fresh
        .set_eager_state("bn.running_mean", &[32], end["bn.running_mean"].values.iter().map(|&v| v as f32).collect())
        .unwrap();
    assert!(fresh.set_eager_state("bn.running_mean", &[31], vec![0.0; 31]).unwrap_err().to_string().contains("[32]"));
    // A state set before the model first uses it does not move the
    // parameters' random streams: they start as a graph's without it.
    let plain = nn::Graph::eager_on(nn::Mode::Train, seed, *dev);
    for graph in [&plain, &fresh] {
        net.forward(&graph.input(&Tensor::from_host(xh.clone()).unwrap()).unwrap()).unwrap();
    }
    assert_eq!(fresh.eager_states().len(), 2, "the set state is the model's, once");
    for ((n, a), (_, b)) in plain.eager_params().into_iter().zip(fresh.eager_params()) {
        assert_eq!(a.host().unwrap().values, b.host().unwrap().values, "{n} starts as without the set state");
    }
}

/// `AICF_EAGER_GEMM` runs every eager GEMM by one candidate (as `aicf
/// train --gemm`): a product is the same by any of them within rounding,
/// and a name that is no candidate is an error naming the variable. (In a
/// child process of this test binary: the variable is read by every
/// thread's dispatcher.)
#[test]
fn eager_gemms_run_by_the_candidate_the_environment_names() {
    if let Ok(name) = std::env::var("AICF_TEST_EAGER_GEMM_CHILD") {
        let a = param(&[8, 16], 1);
        let b = param(&[16, 4], 2);
        match a.matmul(&b) {
            Ok(c) => println!("product {name} {:?}", c.values().unwrap()),
            Err(e) => println!("error {name}: {e}"),
        }
        return;
    }
    let run = |gemm: &str| -> String {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "eager::eager_gemms_run_by_the_candidate_the_environment_names", "--nocapture"])
            .env("AICF_TEST_EAGER_GEMM_CHILD", gemm)
            .env("AICF_EAGER_GEMM", gemm)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let values = |text: &str, name: &str| -> Vec<f64> {
        let line =
            text.lines().find(|l| l.starts_with(&format!("product {name} "))).unwrap_or_else(|| panic!("{text}"));
        let list = line.split_once('[').unwrap().1.trim_end_matches(']');
        list.split(", ").map(|v| v.parse().unwrap()).collect()
    };
    let generated = values(&run("generated"), "generated");
    assert_eq!(generated.len(), 32);
    assert_close("openblas against generated", &values(&run("openblas"), "openblas"), &generated);
    let text = run("bogus");
    assert!(text.contains("error bogus: AICF_EAGER_GEMM=\"bogus\" is not one of generated, library"), "{text}");
}

/// Clipping by global norm (`Optim::clip_grad_norm`, before `step`) ends an
/// epoch of the digits MLP with AdamW and weight decay where the compiled
/// step with `clip_norm` does: the threshold clips some steps and not
/// others.
fn clipping_by_global_norm_matches_the_compiled_clip_norm(dev: &Device) {
    let (model, mut options) = compiled_reference("mlp/digits_mlp.mlir", "adamw", 9, "eager-clip", dev);
    options.clip_norm = Some(0.6);
    options.weight_decay = 0.01;
    let mut compiled = Trainer::from_file(&model, options).unwrap();
    let start = compiled.state();
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let p: Vec<Tensor> = names.iter().map(|n| on(dev, start[*n].clone()).param()).collect();
    let mut opt = Optim::adamw(&p, 0.01).unwrap();
    let rows = digits();
    let lr = 3e-3;
    let mut norms = Vec::new();
    for step in 0..45 {
        let (xh, yh) = digits_batch(&rows, step, false);
        compiled.step(&[&xh, &yh], lr).unwrap();
        opt.zero_grad();
        mlp_loss(&p, &on(dev, xh), &on(dev, yh)).backward().unwrap();
        norms.push(opt.clip_grad_norm(0.6).unwrap());
        opt.step(lr).unwrap();
    }
    let clipped = norms.iter().filter(|&&n| n > 0.6).count();
    assert!(clipped >= 10 && clipped <= 40, "some steps clip, some do not: {norms:?}");
    let end = compiled.state();
    for (n, t) in names.iter().zip(&p) {
        assert_close_to(n, &t.host().unwrap().values, &end[*n].values, tolerance(dev));
    }
    assert!(opt.clip_grad_norm(-1.0).unwrap_err().to_string().contains("negative or NaN"));
    assert!(opt.clip_grad_norm(f64::NAN).unwrap_err().to_string().contains("negative or NaN"));
    // An infinite bound clips nothing; a NaN gradient makes every gradient
    // NaN (PyTorch's clip_grad_norm_ does both).
    let g = |t: &Tensor| t.grad().unwrap().unwrap().values;
    let before: Vec<Vec<f64>> = p.iter().map(g).collect();
    let norm = opt.clip_grad_norm(f64::INFINITY).unwrap();
    assert!(norm.is_finite() && norm > 0.0);
    assert_eq!(p.iter().map(g).collect::<Vec<_>>(), before, "an infinite bound changed a gradient");
    let w = Tensor::from_vec(&[2], vec![1.0, 2.0]).unwrap().to(dev).unwrap().param();
    w.mul_scalar(f64::NAN).unwrap().sum(&[0], false).unwrap().backward().unwrap();
    let nan_opt = Optim::sgd(&[w.clone(), p[0].clone()], 0.0, false, 0.0).unwrap();
    assert!(nan_opt.clip_grad_norm(1.0).unwrap().is_nan());
    assert!(g(&p[0]).iter().all(|v| v.is_nan()), "a NaN norm left a gradient as it was");
    let twice = Optim::sgd(&[p[0].clone(), p[1].clone(), p[0].clone()], 0.0, false, 0.0).err().unwrap();
    assert!(twice.to_string().contains("parameters 0 and 2 are the same values"), "{twice}");
    let none = Optim::adam(&[], 0.0).err().unwrap();
    assert!(none.to_string().contains("at least one parameter"), "{none}");
    let empty = Tensor::from_vec(&[0, 3], vec![]).unwrap();
    let e = empty.exp().unwrap_err().to_string();
    assert!(e.contains("operand #0 has shape [0, 3], with no elements"), "{e}");
    let before = p[0].values().unwrap();
    assert!(opt.step(f64::NAN).unwrap_err().to_string().contains("learning rate NaN"));
    assert_eq!(p[0].values().unwrap(), before, "a refused step changes nothing");
}

/// The optimizers' update as the compiled kernel a GPU runs (traced from
/// the same formulas) against the host loop, on the CPU: SGD with
/// momentum, Nesterov and weight decay, Adam with L2 decay, AdamW; 6 steps
/// of the digits MLP each, the same parameters and slots at the end.
#[test]
fn the_optimizers_update_kernels_match_their_host_loops() {
    let rows = digits();
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let shapes: [&[usize]; 4] = [&[32, 64], &[32], &[10, 32], &[10]];
    let kinds = [
        aicf_compiler::passes::Optimizer::Sgd { momentum: 0.9, nesterov: true, weight_decay: 1e-3 },
        aicf_compiler::passes::Optimizer::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 1e-3 },
        aicf_compiler::passes::Optimizer::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 1e-2 },
    ];
    for kind in kinds {
        let run = |kernels: bool| {
            let p: Vec<Tensor> = shapes.iter().enumerate().map(|(i, s)| param(s, 40 + i as u64)).collect();
            let mut opt = Optim::new(kind.clone(), &p).unwrap();
            opt.use_kernels(kernels);
            for step in 0..6 {
                let (x, y) = digits_batch(&rows, step, false);
                let x = Host::new(x.shape.clone(), DType::F32, x.values.iter().map(|v| v / 16.0).collect());
                opt.zero_grad();
                mlp_loss(&p, &Tensor::from_host(x).unwrap(), &Tensor::from_host(y).unwrap()).backward().unwrap();
                opt.step(0.01).unwrap();
            }
            opt.state(&names).unwrap()
        };
        let (host, kernel) = (run(false), run(true));
        assert_eq!(host.keys().collect::<Vec<_>>(), kernel.keys().collect::<Vec<_>>());
        for (name, want) in &host {
            assert_close_to(&format!("{kind:?} {name}"), &kernel[name].values, &want.values, 1e-6);
        }
    }
}

/// Moving a tensor to a GPU: where none is, a clear error that says why;
/// where one is, the values come back as they went.
#[test]
fn tensors_move_to_a_gpu_or_say_why_they_cannot() {
    let t = Tensor::from_vec(&[2, 3], vec![1.0, -2.0, 3.5, 0.0, 1e-3, 7.0]).unwrap();
    let gpu = Device::Cuda { ordinal: 0 };
    match aicf_runtime::cuda::available() {
        Err(why) => {
            let e = t.to(&gpu).unwrap_err().to_string();
            assert!(e.contains(&why), "{e}");
            let g = aicf_compiler::nn::Graph::eager_on(aicf_compiler::nn::Mode::Train, 0, gpu);
            assert!(g.input(&t).unwrap_err().to_string().contains(&why));
        }
        Ok(()) => {
            let d = t.to(&gpu).unwrap();
            assert_eq!(d.device().to_string(), "cuda:0");
            assert_eq!(d.values().unwrap(), t.values().unwrap());
            assert_eq!(d.to(&Device::Cpu { threads: 0 }).unwrap().values().unwrap(), t.values().unwrap());
        }
    }
}

/// Every kernel the eager op families run (forward, vector-Jacobian
/// products, the optimizers' update kernels) compiles for a GPU without
/// one (`eager::prepare`), and `ptxas` accepts the PTX for sm_80 and
/// sm_90: what a GPU run of these tests loads.
#[test]
fn every_eager_kernel_compiles_to_ptx_that_ptxas_accepts() {
    let cpu = Device::Cpu { threads: 0 };
    elementwise_reductions_and_shapes_have_the_gradients_of_finite_differences(&cpu);
    contractions_normalisation_and_losses_have_the_gradients_of_finite_differences(&cpu);
    convolution_and_pooling_have_the_gradients_of_finite_differences(&cpu);
    composed_ops_have_pytorchs_values_and_the_gradients_of_finite_differences(&cpu);
    nan_zero_and_integer_corners_are_pytorchs(&cpu);
    let p: Vec<Tensor> =
        [[10usize, 64].as_slice(), &[10]].iter().enumerate().map(|(i, s)| param(s, i as u64)).collect();
    for kind in ["sgd", "adam"] {
        let mut opt = if kind == "sgd" { Optim::sgd(&p, 0.9, false, 0.0) } else { Optim::adam(&p, 0.0) }.unwrap();
        opt.use_kernels(true);
        let (x, y) = digits_batch(&digits(), 0, false);
        let loss = Tensor::from_host(x).unwrap().linear(&p[0], Some(&p[1])).unwrap();
        loss.cross_entropy(&Tensor::from_host(y).unwrap()).unwrap().backward().unwrap();
        opt.step(0.01).unwrap();
    }
    let dirs = eager::prepare(&Device::Cuda { ordinal: 0 }).unwrap();
    assert!(dirs.len() >= 40, "{} kernels", dirs.len());
    // ptxas is part of the set-up (`make setup`); without it this fails
    // saying so, as the GPU code generation tests do.
    for dir in &dirs {
        for chip in ["sm_80", "sm_90"] {
            for ptx in aicf_compiler::codegen::ptx_files(dir, chip).unwrap() {
                aicf_compiler::codegen::validate_ptx(&ptx, chip).unwrap_or_else(|e| panic!("{}: {e}", ptx.display()));
            }
        }
    }
}

/// Bad operands, options and states are errors naming the op (or the
/// call) and what is wrong: never a panic, and never a result. Indices
/// and labels are checked as the kernel reads them, on the device.
fn bad_input_is_an_error_naming_the_op(dev: &Device) {
    use aicf_compiler::passes::Optimizer;
    let t = |s: &[usize]| Tensor::from_vec(s, vec![0.5; s.iter().product()]).unwrap().to(dev).unwrap();
    let ids = |v: &[i32]| Tensor::from_i32(&[v.len()], v).unwrap().to(dev).unwrap();
    let conv = |o: Conv2dOptions| t(&[1, 1, 4, 4]).conv2d(&t(&[1, 1, 2, 2]), None, &o);
    let pool = |kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]| {
        t(&[1, 1, 4, 4]).max_pool2d(&Pool2dOptions { kernel, stride, padding, layout: Default::default() })
    };
    let unit = |r: eager::Result<()>| r.map(|_| t(&[1]));
    // An Adam optimizer over a [2, 3] parameter whose state has `key`
    // replaced by `value`, loaded.
    let load = |key: &str, value: Host| {
        let p = t(&[2, 3]).param();
        let mut o = Optim::adam(&[p.clone()], 0.0)?;
        let mut state = o.state(&["w"])?;
        state.insert(key.into(), value);
        o.load_state(&["w"], &state).map(|_| p)
    };
    type Case<'a> = (&'a str, Box<dyn Fn() -> eager::Result<Tensor> + 'a>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "values short of the shape",
            Box::new(|| Tensor::from_vec(&[2, 3], vec![1.0; 5])),
            "5 values for shape [2, 3]",
        ),
        ("a shape past 64 bits", Box::new(|| Tensor::from_vec(&[usize::MAX, 2], vec![1.0; 2])), "2 values for shape"),
        (
            "no broadcast",
            Box::new(|| t(&[2, 3]).add(&t(&[3, 2]))),
            "add: 'hl.add' op operands are not broadcast-compatible",
        ),
        ("contraction", Box::new(|| t(&[2, 3]).matmul(&t(&[2, 3]))), "contracting dimensions differ"),
        ("reduced axis", Box::new(|| t(&[2, 3]).sum(&[5], false)), "axis 5 is out of range"),
        ("axis twice", Box::new(|| t(&[2, 3]).sum(&[0, 0], false)), "axes [0, 0] name axis 0 twice"),
        (
            "axis twice, once from the end",
            Box::new(|| t(&[2, 3]).sum(&[1, -1], false)),
            "axes [1, -1] name axis 1 twice",
        ),
        ("softmax axis", Box::new(|| t(&[2, 3]).softmax(i64::MIN)), "is out of range for tensor<2x3xf32>"),
        ("reshape's count", Box::new(|| t(&[2, 3]).reshape(&[4])), "(6 elements) to 'tensor<4xf32>'"),
        ("reshape past 64 bits", Box::new(|| t(&[2, 3]).reshape(&[i64::MAX, 4])), "cannot reshape tensor<2x3xf32>"),
        ("reshape's hole past 64 bits", Box::new(|| t(&[2, 3]).reshape(&[i64::MAX, 2, -1])), "cannot reshape"),
        ("permutation", Box::new(|| t(&[2, 3]).permute(&[0, 0])), "is not a permutation"),
        ("narrow past the end", Box::new(|| t(&[2, 3]).narrow(1, 2, 5)), "window 2:7 in dimension 1 is outside"),
        ("narrow from past 64 bits", Box::new(|| t(&[2, 3]).narrow(1, usize::MAX, 5)), "window 9223372036854775807:"),
        ("narrow to nothing", Box::new(|| t(&[2, 3]).narrow(1, 0, 0)), "no empty tensors"),
        (
            "label past the classes",
            Box::new(|| t(&[2, 3]).cross_entropy(&ids(&[0, 7]))),
            "label 7 at position 1 is outside [0, 3)",
        ),
        ("negative label", Box::new(|| t(&[2, 3]).cross_entropy(&ids(&[0, -1]))), "label -1 at position 1"),
        ("float labels", Box::new(|| t(&[2, 3]).cross_entropy(&t(&[2]))), "operand #1 must be ranked tensor of 32-bit"),
        ("labels' shape", Box::new(|| t(&[2, 3]).cross_entropy(&ids(&[0, 1, 2]))), "must have the shape of the logits"),
        (
            "index past the table",
            Box::new(|| t(&[4, 3]).gather(&ids(&[0, 9]), 0)),
            "index 9 at position 1 is outside [0, 4)",
        ),
        ("negative index", Box::new(|| t(&[4, 3]).gather(&ids(&[0, -3]), 0)), "index -3 at position 1"),
        ("gather's axis", Box::new(|| t(&[4, 3]).gather(&ids(&[0, 1]), 7)), "axis 7 is out of range"),
        (
            "layer norm's dims",
            Box::new(|| t(&[2, 3]).layer_norm(&t(&[3]), &t(&[3]), 5, 1e-5)),
            "normalises the last 5 dimensions",
        ),
        ("layer norm's eps", Box::new(|| t(&[2, 3]).layer_norm(&t(&[3]), &t(&[3]), 1, f64::NAN)), "'eps' failed"),
        (
            "layer norm's weight",
            Box::new(|| t(&[2, 3]).layer_norm(&t(&[4]), &t(&[3]), 1, 1e-5)),
            "weight must be 'tensor<3xf32>'",
        ),
        (
            "stride 0",
            Box::new(|| conv(Conv2dOptions { stride: [0, 1], ..Default::default() })),
            "stride must be [h, w] with entries >= 1",
        ),
        (
            "padding past 64 bits",
            Box::new(|| conv(Conv2dOptions { padding: [usize::MAX, 1], ..Default::default() })),
            "beyond 64-bit sizes",
        ),
        ("dilation 0", Box::new(|| conv(Conv2dOptions { dilation: [0, 1], ..Default::default() })), "dilation must be"),
        (
            "groups 0",
            Box::new(|| conv(Conv2dOptions { groups: 0, ..Default::default() })),
            "groups = 0 must be at least 1",
        ),
        (
            "groups past 64 bits",
            Box::new(|| conv(Conv2dOptions { groups: usize::MAX, ..Default::default() })),
            "groups = 9223372036854775807",
        ),
        (
            "kernel past the input",
            Box::new(|| t(&[1, 1, 4, 4]).conv2d(&t(&[1, 1, 5, 5]), None, &Conv2dOptions::default())),
            "does not fit the padded input",
        ),
        (
            "conv's channels",
            Box::new(|| t(&[1, 2, 4, 4]).conv2d(&t(&[1, 1, 2, 2]), None, &Conv2dOptions::default())),
            "has 2 channels",
        ),
        ("pool kernel 0", Box::new(|| pool([0, 0], [1, 1], [0, 0])), "kernel must be [h, w] with entries >= 1"),
        ("pool padding", Box::new(|| pool([2, 2], [2, 2], [5, 5])), "must be at most half the kernel"),
        (
            "pool padding past 64 bits",
            Box::new(|| pool([2, 2], [2, 2], [usize::MAX, 0])),
            "padding [9223372036854775807, 0]",
        ),
        ("mse's shapes", Box::new(|| t(&[2, 3]).mse_loss(&t(&[3, 2]))), "must have the same type"),
        ("linear's features", Box::new(|| t(&[2, 3]).linear(&t(&[4, 2]), None)), "has 3 features"),
        ("int and float matmul", Box::new(|| ids(&[1, 2]).matmul(&t(&[2]))), "different element types"),
        ("exp of ints", Box::new(|| ids(&[1, 2]).exp()), "must be ranked tensor of 16-bit float"),
        ("no elements", Box::new(|| Tensor::from_vec(&[0, 3], vec![]).and_then(|z| z.relu())), "with no elements"),
        ("item of two", Box::new(|| t(&[2]).item().map(|_| t(&[1]))), "item() of a tensor of shape [2]"),
        (
            "backward of a vector",
            Box::new(|| {
                let p = t(&[2]).param();
                unit(p.mul(&p)?.backward())
            }),
            "a loss is a scalar",
        ),
        ("backward without a tape", Box::new(|| unit(ids(&[1]).backward())), "does not require a gradient"),
        ("momentum", Box::new(|| Optim::sgd(&[t(&[2]).param()], -1.0, false, 0.0).map(|_| t(&[1]))), "momentum=-1"),
        (
            "betas",
            Box::new(|| {
                Optim::new(Optimizer::Adam { beta1: 1.5, beta2: 0.9, eps: 1e-8, weight_decay: 0.0 }, &[t(&[2]).param()])
                    .map(|_| t(&[1]))
            }),
            "beta1=1.5",
        ),
        ("a tensor as a parameter", Box::new(|| Optim::adam(&[t(&[2])], 0.0).map(|_| t(&[1]))), "is not a parameter"),
        (
            "learning rate",
            Box::new(|| {
                let p = t(&[2]).param();
                let mut o = Optim::adam(&[p.clone()], 0.0)?;
                unit(o.step(f64::NAN))
            }),
            "the learning rate NaN",
        ),
        (
            "clip norm",
            Box::new(|| {
                let p = t(&[2]).param();
                let o = Optim::adam(&[p.clone()], 0.0)?;
                o.clip_grad_norm(-1.0).map(|_| p)
            }),
            "max_norm -1 is negative or NaN",
        ),
        (
            "state of another shape",
            Box::new(|| load("w", Host::new([3, 2], DType::F32, vec![1.0; 6]))),
            "'w' is [3, 2] with 6 values, the parameter is [2, 3]",
        ),
        (
            "slot of another shape",
            Box::new(|| load("w.exp_avg", Host::new([6], DType::F32, vec![0.0; 6]))),
            "'w.exp_avg' is [6]",
        ),
        (
            "state holding NaN",
            Box::new(|| load("w.exp_avg_sq", Host::new([2, 3], DType::F32, vec![f64::NAN; 6]))),
            "'w.exp_avg_sq' holds NaN at index 0",
        ),
        (
            "step past 2^53",
            Box::new(|| load("step", Host::new([], DType::I64, vec![1e30]))),
            "'step' is 1000000000000000000000000000000, not a step count",
        ),
        ("step of half", Box::new(|| load("step", Host::new([], DType::I64, vec![0.5]))), "not a step count"),
    ];
    for (what, case, expected) in cases {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(case));
        match result {
            Ok(Err(e)) => assert!(e.to_string().contains(expected), "{what}: the error\n  {e}\nnames no '{expected}'"),
            Ok(Ok(v)) => panic!("{what}: accepted, a {:?} tensor", v.shape()),
            Err(_) => panic!("{what}: panicked"),
        }
    }
    // Loaded at the last step it counts, the next step is refused, not
    // wrapped around.
    let p = t(&[2]).param();
    let mut o = Optim::adam(&[p.clone()], 0.0).unwrap();
    let mut state = o.state(&["w"]).unwrap();
    state.insert("step".into(), Host::new([], DType::I64, vec![(1u64 << 53) as f64]));
    o.load_state(&["w"], &state).unwrap();
    p.sum(&[0], false).unwrap().backward().unwrap();
    let e = o.step(0.1).unwrap_err().to_string();
    assert!(e.contains("has taken 9007199254740992 steps already"), "{e}");
}

/// Misuse a Rust program can make of the eager API is an error naming the
/// place, never an abort or a wrong gradient (the fourth session's sweep).
#[test]
fn eager_misuse_is_an_error_not_an_abort_or_a_wrong_gradient() {
    // A chain of 20,000 ops dropped on a thread of 256 KiB of stack: each
    // tensor's drop dropped its inputs recursively and overflowed (an
    // abort; 30,000 ops on a spawned thread's default 2 MiB).
    let chain = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| -> eager::Result<f64> {
            let p = Tensor::from_vec(&[2], vec![1.0, 2.0])?.param();
            let mut h = p.clone();
            for _ in 0..20_000 {
                h = h.add_scalar(1.0)?;
            }
            let loss = h.sum(&[0], false)?;
            let value = loss.item()?;
            drop((h, loss));
            Ok(value)
        })
        .unwrap()
        .join()
        .expect("the chain is built and dropped without overflowing the stack");
    assert_eq!(chain.unwrap(), 3.0 + 40_000.0);

    // A parameter written between the forward pass and backward(): its
    // gradient would be taken at the new values (PyTorch refuses too).
    let p = Tensor::from_vec(&[1], vec![3.0]).unwrap().param();
    let mut opt = Optim::sgd(std::slice::from_ref(&p), 0.0, false, 0.0).unwrap();
    let first = p.mul(&p).unwrap().sum(&[0], false).unwrap();
    let second = p.mul(&p).unwrap().sum(&[0], false).unwrap();
    first.backward().unwrap();
    opt.step(1.0).unwrap();
    opt.zero_grad();
    let e = second.backward().unwrap_err().to_string();
    assert!(e.contains("written in place after the forward pass"), "{e}");
    let again = p.mul(&p).unwrap().sum(&[0], false).unwrap();
    again.backward().unwrap();
    assert_eq!(p.grad().unwrap().unwrap().values, vec![-6.0], "a fresh forward pass differentiates at -3");

    // State entries that would collide.
    let (a, b) =
        (Tensor::from_vec(&[1], vec![1.0]).unwrap().param(), Tensor::from_vec(&[1], vec![2.0]).unwrap().param());
    let momentum = Optim::sgd(&[a.clone(), b.clone()], 0.9, false, 0.0).unwrap();
    for names in [["w", "w"], ["w", "w.momentum"], ["step", "v"]] {
        let e = momentum.state(&names).unwrap_err().to_string();
        assert!(e.contains("twice"), "{names:?}: {e}");
    }

    // A recording switched off stays switched off only inside no_grad,
    // even when the closure panics.
    let _ = std::panic::catch_unwind(|| eager::no_grad(|| panic!("inside no_grad")));
    assert!(a.mul(&a).unwrap().requires_grad(), "no_grad left recording off after a panic");

    // A rate infinite in f32, integers that are not whole, a reduction over
    // no axes.
    let mut sgd = Optim::sgd(std::slice::from_ref(&a), 0.0, false, 0.0).unwrap();
    a.mul(&a).unwrap().sum(&[0], false).unwrap().backward().unwrap();
    let e = sgd.step(1e300).unwrap_err().to_string();
    assert!(e.contains("infinite in f32"), "{e}");
    let e = Tensor::from_host(Host::new([2], DType::I32, vec![1.5, 2.0])).unwrap_err().to_string();
    assert!(e.contains("value 0 is 1.5"), "{e}");
    let e = Tensor::from_host(Host::new([1], DType::I32, vec![3e10])).unwrap_err().to_string();
    assert!(e.contains("3000000000"), "{e}");
    let e = a.sum(&[], false).unwrap_err().to_string();
    assert!(e.contains("over no axes"), "{e}");
    let ints = Tensor::from_host(Host::new([2], DType::I32, vec![1.0, 2.0])).unwrap();
    let e = ints.sum(&[0], false).unwrap_err().to_string();
    assert!(e.contains("reductions are of float tensors (cast it first)"), "{e}");
    let counted = ints.cast(aicf_compiler::nn::DType::F32).unwrap().sum(&[0], false).unwrap();
    assert_eq!(counted.item().unwrap(), 3.0);

    // (Fifth session of 2026-12-05.) An f64 result of a tensor that needs a
    // gradient: its gradient was dropped silently (p + cast(cast(p)) got
    // 1, not 2). Detached, or under no_grad, it runs.
    let p = Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap().param();
    let e = p.cast(aicf_compiler::nn::DType::F64).unwrap_err().to_string();
    assert!(e.starts_with("cast: its f64 result would carry no gradient"), "{e}");
    let wide = eager::no_grad(|| p.cast(aicf_compiler::nn::DType::F64)).unwrap();
    assert_eq!(wide.host().unwrap().values, vec![1.0, 2.0, 3.0]);
    assert!(p.detach().cast(aicf_compiler::nn::DType::F64).is_ok());
    // A linear layer on one example without its row dimension is
    // `F.linear`'s [in] -> [out] (it was refused; once it failed inside a
    // later pass); a width that does not fit is refused naming the shapes.
    let w = Tensor::from_vec(&[4, 3], vec![0.5; 12]).unwrap().param();
    assert_eq!(p.linear(&w, None).unwrap().shape(), vec![4]);
    let e = p.linear(&Tensor::from_vec(&[4, 5], vec![0.5; 20]).unwrap(), None).unwrap_err().to_string();
    assert!(e.contains("has 3 features but the weight"), "{e}");
    // An error names the op, not its kernel-cache key.
    assert!(e.starts_with("linear-nobias: "), "{e}");
}

/// The ops composed of others (`clamp`, `where_`, `logsumexp`, `var`, ...):
/// their values against the definitions computed here, their gradients
/// against finite differences.
fn composed_ops_have_pytorchs_values_and_the_gradients_of_finite_differences(dev: &Device) {
    use aicf_compiler::nn::Compare;
    let param = |shape: &[usize], seed| param_on(shape, seed, dev);
    let x = Tensor::from_vec(&[2, 3], vec![-2.0, -0.5, 0.0, 0.5, 1.0, 30.0]).unwrap().to(dev).unwrap();
    let xs = [-2.0f64, -0.5, 0.0, 0.5, 1.0, 30.0];
    let each = |t: eager::Result<Tensor>| t.unwrap().host().unwrap().values;
    let want = |f: &dyn Fn(f64) -> f64| xs.iter().map(|&v| f(v)).collect::<Vec<_>>();
    assert_close("clamp", &each(x.clamp(Some(-1.0), Some(0.5))), &want(&|v| v.clamp(-1.0, 0.5)));
    assert_close("clamp min", &each(x.clamp(Some(0.0), None)), &want(&|v| v.max(0.0)));
    assert_close("square", &each(x.square()), &want(&|v| v * v));
    assert_close("leaky_relu", &each(x.leaky_relu(0.1)), &want(&|v| if v > 0.0 { v } else { 0.1 * v }));
    assert_close("elu", &each(x.elu(1.0)), &want(&|v| if v > 0.0 { v } else { v.exp() - 1.0 }));
    assert_close("softplus", &each(x.softplus()), &want(&|v| v.max(0.0) + (-v.abs()).exp().ln_1p()));
    let t = (2.0 / std::f64::consts::PI).sqrt();
    let gelu_tanh = |v: f64| 0.5 * v * (1.0 + (t * (v + 0.044715 * v * v * v)).tanh());
    assert_close("gelu_tanh", &each(x.gelu_tanh()), &want(&gelu_tanh));
    let lse = |row: &[f64]| {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
    };
    assert_close("logsumexp", &each(x.logsumexp(&[1], false)), &[lse(&xs[..3]), lse(&xs[3..])]);
    assert_eq!(x.logsumexp(&[-1], true).unwrap().shape(), vec![2, 1]);
    let ninf = Tensor::full(&[1, 2], f32::NEG_INFINITY).unwrap().to(dev).unwrap();
    assert_eq!(each(ninf.logsumexp(&[1], false)), vec![f64::NEG_INFINITY]);
    let var = |row: &[f64], c: f64| {
        let m = row.iter().sum::<f64>() / row.len() as f64;
        row.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (row.len() as f64 - c)
    };
    assert_close("var", &each(x.var(&[1], 1, false)), &[var(&xs[..3], 1.0), var(&xs[3..], 1.0)]);
    assert_close("std", &each(x.std(&[0, 1], 0, false)), &[var(&xs, 0.0).sqrt()]);
    assert!(x.var(&[0], 2, false).unwrap_err().to_string().contains("the divisor 2 - 2 is not above 0"));
    assert_close("min", &each(x.min(&[1], false)), &[-2.0, 0.5]);
    assert_eq!(each(x.argmin(1, false)), vec![0.0, 0.0]);
    let hit = x.compare(Compare::Gt, &Tensor::full(&[], 0.25).unwrap().to(dev).unwrap()).unwrap();
    assert!(!hit.requires_grad());
    let picked = Tensor::where_(&hit, &x, &x.neg().unwrap()).unwrap();
    assert_close("where", &each(Ok(picked)), &want(&|v| if v > 0.25 { v } else { -v }));
    // Shapes: unsqueeze, squeeze, stack, split.
    assert_eq!(x.unsqueeze(0).unwrap().shape(), vec![1, 2, 3]);
    assert_eq!(x.unsqueeze(-1).unwrap().shape(), vec![2, 3, 1]);
    assert_eq!(x.unsqueeze(0).unwrap().squeeze(0).unwrap().shape(), vec![2, 3]);
    assert_eq!(x.squeeze(1).unwrap().shape(), vec![2, 3], "an axis of 3 stays");
    let st = Tensor::stack(&[&x, &x.neg().unwrap()], 1).unwrap();
    assert_eq!(st.shape(), vec![2, 2, 3]);
    assert_eq!(each(Ok(st))[..6], [-2.0, -0.5, 0.0, 2.0, 0.5, -0.0]);
    let parts = x.split(&[1, 2], 1).unwrap();
    assert_eq!((parts[0].shape(), parts[1].shape()), (vec![2, 1], vec![2, 2]));
    assert!(x.split(&[1, 1], 1).unwrap_err().to_string().contains("add up to 2, axis 1 of [2, 3] has 3"));
    assert!(Tensor::stack(&[&x, &parts[1]], 0).unwrap_err().to_string().contains("tensor 1 has the shape [2, 2]"));
    assert!(x.unsqueeze(4).unwrap_err().to_string().contains("no place 4"));
    // PyTorch's corners: a min above the max gives the max; softplus's
    // gradient at 0 is sigmoid(0) and its far tail is not rounded to 0; a
    // scalar squeezes to itself; dropout of p = 1 is zeros; argmin of the
    // least i32 (which has no i32 negation).
    assert_eq!(each(x.clamp(Some(1.0), Some(0.0))), vec![0.0; 6]);
    let z = on_dev_f32(dev, &[3], &[0.0, -30.0, 40.0]).param();
    let sp = z.softplus().unwrap();
    let v = sp.host().unwrap().values;
    assert!(
        (v[0] - 2f64.ln()).abs() < 1e-6 && (v[1] - (-30f64).exp()).abs() < 1e-18 && (v[2] - 40.0).abs() < 1e-5,
        "{v:?}"
    );
    sp.sum(&[0], false).unwrap().backward().unwrap();
    let g = z.grad().unwrap().unwrap().values;
    assert!((g[0] - 0.5).abs() < 1e-6 && g[1].abs() < 1e-12 && (g[2] - 1.0).abs() < 1e-6, "softplus' gradient {g:?}");
    let scalar = Tensor::full(&[], 2.0).unwrap().to(dev).unwrap();
    assert_eq!(scalar.squeeze(0).unwrap().shape(), Vec::<usize>::new());
    assert_eq!(each(x.dropout(1.0, true)), vec![0.0; 6]);
    let least = on_dev_i32(dev, &[3], &[5, i32::MIN, 7]);
    assert_eq!(least.argmin(0, false).unwrap().values().unwrap(), vec![1.0]);
    assert!(x.var(&[], 1, false).unwrap_err().to_string().contains("var over no axes"));
    // Dropout: zeros and scaled survivors in training, the input otherwise.
    eager::manual_seed(3);
    let ones = Tensor::ones(&[1000]).unwrap().to(dev).unwrap();
    let d = each(ones.dropout(0.25, true));
    let kept = d.iter().filter(|&&v| v != 0.0).count();
    assert!(d.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6), "survivors scaled by 1/(1-p)");
    assert!((700..800).contains(&kept), "{kept} of 1000 kept at p = 0.25");
    assert_eq!(each(ones.dropout(0.25, false)), vec![1.0; 1000]);
    // Gradients.
    check("clamp, leaky_relu, elu, softplus, gelu_tanh", &[param(&[3, 4], 60)], |p| {
        let x = p[0].mul_scalar(2.0)?;
        let y = x.clamp(Some(-0.7), Some(0.9))?.add(&x.leaky_relu(0.2)?)?.add(&x.elu(0.5)?)?;
        y.add(&x.softplus()?)?.add(&x.gelu_tanh()?)?.add(&x.square()?)?.sum(&[0, 1], false)
    });
    check("logsumexp, var, std, min", &[param(&[3, 4], 61)], |p| {
        let a = p[0].logsumexp(&[1], false)?.sum(&[0], false)?;
        let b = p[0].var(&[0], 1, false)?.sum(&[0], false)?.add(&p[0].std(&[1], 0, true)?.sum(&[0, 1], false)?)?;
        a.add(&b)?.add(&p[0].min(&[0], false)?.sum(&[0], false)?)
    });
    check("where, stack, split", &[param(&[2, 3], 62), param(&[2, 3], 63)], |p| {
        let c = p[0].compare(Compare::Lt, &p[1])?;
        let w = Tensor::where_(&c, &p[0], &p[1].mul_scalar(3.0)?)?;
        let s = Tensor::stack(&[&w, &p[0]], 0)?;
        let parts = s.split(&[1, 2], 2)?;
        parts[0].sum(&[0, 1, 2], false)?.add(&parts[1].square()?.sum(&[0, 1, 2], false)?)
    });
}

/// Where PyTorch defines a corner (a NaN, a 0, an integer tensor), the
/// eager ops give its answer.
fn nan_zero_and_integer_corners_are_pytorchs(dev: &Device) {
    use aicf_compiler::nn::Pool2dOptions;
    let on_dev = |t: Tensor| t.to(dev).unwrap();
    // argmax of integers, and a NaN as the largest value (max says NaN too).
    let ints = on_dev(Tensor::from_i32(&[2, 2], &[1, 5, 3, 4]).unwrap());
    assert_eq!(ints.argmax(1, false).unwrap().values().unwrap(), vec![1.0, 1.0]);
    let row = on_dev(Tensor::from_vec(&[1, 5], vec![1.0, f32::NAN, 5.0, f32::NAN, 2.0]).unwrap());
    assert_eq!(row.argmax(1, false).unwrap().values().unwrap(), vec![1.0], "the first NaN");
    assert!(row.max(&[1], false).unwrap().values().unwrap()[0].is_nan());
    // max pooling's gradient goes to a window's NaN, as its value is NaN.
    let img = on_dev(Tensor::from_vec(&[1, 1, 2, 2], vec![1.0, f32::NAN, 2.0, 0.0]).unwrap()).param();
    let pooled = img.max_pool2d(&Pool2dOptions::square(2)).unwrap();
    assert!(pooled.values().unwrap()[0].is_nan());
    pooled.sum(&[0, 1, 2, 3], false).unwrap().backward().unwrap();
    assert_eq!(img.grad().unwrap().unwrap().values, vec![0.0, 1.0, 0.0, 0.0]);
    // pow's gradients at 0: d/da where b = 0, d/db where a = 0 and b >= 0.
    let a = on_dev(Tensor::from_vec(&[3], vec![0.0, 0.0, 2.0]).unwrap()).param();
    let b = on_dev(Tensor::from_vec(&[3], vec![0.0, 2.0, 0.0]).unwrap()).param();
    a.pow(&b).unwrap().sum(&[0], false).unwrap().backward().unwrap();
    assert_eq!(a.grad().unwrap().unwrap().values, vec![0.0, 0.0, 0.0]);
    let db = b.grad().unwrap().unwrap().values;
    assert_eq!(db[..2], [0.0, 0.0]);
    assert!((db[2] - 2f64.ln()).abs() < 1e-6, "{db:?}");
    // An integer parameter has no gradient: backward says so.
    let ids = on_dev(Tensor::from_i32(&[2], &[1, 2]).unwrap()).param();
    let e = ids.cast(aicf_compiler::nn::DType::F32).unwrap().sum(&[0], false).unwrap().backward().unwrap_err();
    assert!(e.to_string().contains("a parameter (param()) of integers"), "{e}");
    // An integer tensor times a fraction is a float tensor, times a whole
    // number an integer one.
    let counts = on_dev(Tensor::from_i32(&[2], &[3, 4]).unwrap());
    let scaled = counts.mul_scalar(2.5).unwrap();
    assert_eq!(
        (scaled.spec().unwrap().dtype, scaled.values().unwrap()),
        (aicf_compiler::nn::DType::F32, vec![7.5, 10.0])
    );
    assert_eq!(counts.mul_scalar(2.0).unwrap().spec().unwrap().dtype, aicf_compiler::nn::DType::I32);
    // linear of one example, and the sum of a scalar.
    let w = on_dev(Tensor::from_vec(&[2, 3], vec![1.0, 0.0, -1.0, 0.5, 0.5, 0.5]).unwrap());
    let v = on_dev(Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap());
    let y = v.linear(&w, None).unwrap();
    assert_eq!((y.shape(), y.values().unwrap()), (vec![2], vec![-2.0, 3.0]));
    let s = on_dev(Tensor::full(&[], 4.0).unwrap()).param();
    let total = s.sum(&[], false).unwrap();
    assert_eq!(total.item().unwrap(), 4.0);
    total.backward().unwrap();
    assert_eq!(s.grad().unwrap().unwrap().values, vec![1.0]);
    // clip_grad_norm(0) zeroes the gradients (PyTorch's).
    let p = on_dev(Tensor::from_vec(&[2], vec![1.0, 2.0]).unwrap()).param();
    p.square().unwrap().sum(&[0], false).unwrap().backward().unwrap();
    let opt = Optim::sgd(&[p.clone()], 0.0, false, 0.0).unwrap();
    assert!((opt.clip_grad_norm(0.0).unwrap() - 20f64.sqrt()).abs() < 1e-5);
    assert_eq!(p.grad().unwrap().unwrap().values, vec![0.0, 0.0]);
    assert!(opt.clip_grad_norm(-1.0).is_err());
}

/// The compiled step's Nesterov SGD (`Options::nesterov`, `aicf train
/// --nesterov`) is the eager optimizer's (which matches `torch.optim.SGD`):
/// the same parameters after steps with weight decay.
#[test]
fn nesterov_sgd_compiled_matches_eager() {
    let dev = Device::Cpu { threads: 0 };
    let (model, options) = compiled_reference("mlp/digits_mlp.mlir", "sgd", 4, "eager-nesterov", &dev);
    let options = Options { nesterov: true, weight_decay: 1e-3, ..options };
    let mut compiled = Trainer::from_file(&model, options).unwrap();
    let start = compiled.state();
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let params: Vec<Tensor> = names.iter().map(|n| on(&dev, start[*n].clone()).param()).collect();
    let mut opt = Optim::sgd(&params, 0.9, true, 1e-3).unwrap();
    let rows = digits();
    for step in 0..12 {
        let (xh, yh) = digits_batch(&rows, step, false);
        compiled.step(&[&xh, &yh], 0.05).unwrap();
        opt.zero_grad();
        mlp_loss(&params, &on(&dev, xh), &on(&dev, yh)).backward().unwrap();
        opt.step(0.05).unwrap();
    }
    let end = compiled.state();
    for (n, p) in names.iter().zip(&params) {
        assert_close_to(n, &p.host().unwrap().values, &end[*n].values, 1e-4);
    }
    // Without Nesterov the same steps end elsewhere (the option reached
    // the compiled step).
    let (model, options) = compiled_reference("mlp/digits_mlp.mlir", "sgd", 4, "eager-nesterov", &dev);
    let mut plain = Trainer::from_file(&model, Options { weight_decay: 1e-3, ..options }).unwrap();
    for step in 0..12 {
        let (xh, yh) = digits_batch(&rows, step, false);
        plain.step(&[&xh, &yh], 0.05).unwrap();
    }
    let (a, b) = (&plain.state()["fc2.weight"].values, &end["fc2.weight"].values);
    let diff = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(diff > 1e-4, "Nesterov changed nothing ({diff:e})");
}

/// `einsum` against loops over its letters, and its gradients against
/// finite differences: batched products, a sum over an operand's own
/// letter, an implicit output with `...`, three operands, uppercase
/// letters, and a product that sums over nothing (a broadcast product).
#[test]
fn einsum_matches_loops_and_finite_differences() {
    let values = |t: &Tensor| t.host().unwrap().values;
    // a[b, i, j], b[b, j, k], c[k, l]
    let (a, b, c) = (param(&[2, 3, 4], 40), param(&[2, 4, 5], 41), param(&[5, 3], 42));
    let (av, bv, cv) = (values(&a), values(&b), values(&c));
    let at = |v: &[f64], dims: &[usize], idx: &[usize]| {
        let mut o = 0;
        for (d, i) in dims.iter().zip(idx) {
            o = o * d + i;
        }
        v[o]
    };
    // Three operands: bij,bjk,kl->bil.
    let y = Tensor::einsum("bij,bjk,kl->bil", &[&a, &b, &c]).unwrap();
    assert_eq!(y.shape(), vec![2, 3, 3]);
    let mut want = Vec::new();
    for n in 0..2 {
        for i in 0..3 {
            for l in 0..3 {
                let mut sum = 0.0;
                for j in 0..4 {
                    for k in 0..5 {
                        sum += at(&av, &[2, 3, 4], &[n, i, j])
                            * at(&bv, &[2, 4, 5], &[n, j, k])
                            * at(&cv, &[5, 3], &[k, l]);
                    }
                }
                want.push(sum);
            }
        }
    }
    assert_close_to("bij,bjk,kl->bil", &values(&y), &want, 1e-5);
    // Implicit output with an ellipsis (batched matmul), uppercase letters.
    let y = Tensor::einsum("...IJ,...JK", &[&a, &b]).unwrap();
    let z = Tensor::einsum("bij,bjk->bik", &[&a, &b]).unwrap();
    assert_eq!(y.shape(), vec![2, 3, 5]);
    assert_close_to("...IJ,...JK", &values(&y), &values(&z), 1e-6);
    // A letter summed in one operand alone (ij->i), and nothing summed
    // (bij,ij->bij: a broadcast product).
    let rows = Tensor::einsum("bij->bi", &[&a]).unwrap();
    assert_close_to("bij->bi", &values(&rows), &values(&a.sum(&[2], false).unwrap()), 1e-6);
    let w = param(&[3, 4], 43);
    let scaled = Tensor::einsum("bij,ij->bij", &[&a, &w]).unwrap();
    let wv = values(&w);
    let want: Vec<f64> = av.iter().enumerate().map(|(k, x)| x * wv[k % 12]).collect();
    assert_close_to("bij,ij->bij", &values(&scaled), &want, 1e-6);
    // Gradients through each form.
    check("einsum", &[a.clone(), b.clone(), c.clone(), w.clone()], |p| {
        let y = Tensor::einsum("bij,bjk,kl->bil", &[&p[0], &p[1], &p[2]])?;
        let s = Tensor::einsum("bij,ij->bij", &[&p[0], &p[3]])?;
        let t = Tensor::einsum("bil,bij->lj", &[&y, &s])?;
        t.mul(&t)?.sum(&[0, 1], false)
    });
    // Mistakes are errors naming the equation.
    let e = Tensor::einsum("ii->i", &[&w]).unwrap_err().to_string();
    assert!(e.contains("einsum 'ii->i'") && e.contains("repeats 'i'"), "{e}");
    let e = Tensor::einsum("bij,bjk->bik", &[&a, &c]).unwrap_err().to_string();
    assert!(e.contains("has rank 2"), "{e}");
}

/// The compiled step's AdamW with nanoGPT's parameter groups (no weight
/// decay on biases: `Options::decay_1d` false, `aicf train --no-decay-1d`)
/// and another eps (`Options::eps`, `--adam-eps`) is two eager optimizers,
/// one per group (as PyTorch's groups are): the same parameters after
/// steps.
#[test]
fn adamw_parameter_groups_and_eps_compiled_match_eager() {
    use aicf_compiler::passes::Optimizer;
    let dev = Device::Cpu { threads: 0 };
    let (model, options) = compiled_reference("mlp/digits_mlp.mlir", "adamw", 4, "eager-groups", &dev);
    let (wd, eps) = (0.5, 1e-3);
    let options = Options { weight_decay: wd, eps, decay_1d: false, ..options };
    let mut compiled = Trainer::from_file(&model, options.clone()).unwrap();
    let start = compiled.state();
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let params: Vec<Tensor> = names.iter().map(|n| on(&dev, start[*n].clone()).param()).collect();
    let adamw = |weight_decay| Optimizer::AdamW { beta1: 0.9, beta2: 0.999, eps, weight_decay };
    let mut matrices = Optim::new(adamw(wd), &[params[0].clone(), params[2].clone()]).unwrap();
    let mut vectors = Optim::new(adamw(0.0), &[params[1].clone(), params[3].clone()]).unwrap();
    let rows = digits();
    for step in 0..8 {
        let (xh, yh) = digits_batch(&rows, step, false);
        compiled.step(&[&xh, &yh], 0.01).unwrap();
        matrices.zero_grad();
        vectors.zero_grad();
        mlp_loss(&params, &on(&dev, xh), &on(&dev, yh)).backward().unwrap();
        matrices.step(0.01).unwrap();
        vectors.step(0.01).unwrap();
    }
    let end = compiled.state();
    for (n, p) in names.iter().zip(&params) {
        assert_close_to(n, &p.host().unwrap().values, &end[*n].values, 1e-4);
    }
    // With every parameter decayed the biases end elsewhere (the groups
    // reached the compiled step).
    let mut every = Trainer::from_file(&model, Options { decay_1d: true, ..options.clone() }).unwrap();
    for step in 0..8 {
        let (xh, yh) = digits_batch(&rows, step, false);
        every.step(&[&xh, &yh], 0.01).unwrap();
    }
    let (a, b) = (&every.state()["fc1.bias"].values, &end["fc1.bias"].values);
    let diff = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(diff > 1e-5, "the groups changed nothing ({diff:e})");
    // Settings that mean nothing are refused, naming the setting.
    for (bad, want) in [
        (Options { decay_1d: false, weight_decay: 0.0, ..options.clone() }, "without a weight decay"),
        (Options { optimizer: "sgd".into(), momentum: 0.9, ..options.clone() }, "SGD has none"),
        (Options { eps: 0.0, ..options.clone() }, "not a positive number"),
    ] {
        let e = Trainer::from_file(&model, bad).err().expect("refused").to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// An f32 tensor of `shape` holding `values`, on `dev`.
fn on_dev_f32(dev: &Device, shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_vec(shape, values.to_vec()).unwrap().to(dev).unwrap()
}

/// An i32 tensor of `shape` holding `values`, on `dev`.
fn on_dev_i32(dev: &Device, shape: &[usize], values: &[i32]) -> Tensor {
    Tensor::from_i32(shape, values).unwrap().to(dev).unwrap()
}

/// The layer API's noise runs eagerly: `randn_like` and `rand_like` of a
/// training graph draw afresh on each call (normal of the asked mean and
/// deviation, uniform within its range); an evaluation graph's are the
/// means.
#[test]
fn the_layer_apis_noise_runs_eagerly() {
    use aicf_compiler::nn;
    let dev = Device::Cpu { threads: 2 };
    let g = nn::Graph::eager_on(nn::Mode::Train, 5, dev);
    let x = g.input(&Tensor::zeros(&[8192]).unwrap()).unwrap();
    let values = |t: nn::Tensor| t.eager().unwrap().values().unwrap().iter().map(|&v| v as f64).collect::<Vec<_>>();
    let (a, b) = (values(x.randn_like(1.0, 2.0).unwrap()), values(x.randn_like(1.0, 2.0).unwrap()));
    assert_ne!(a, b, "two calls, two draws");
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    let std = (a.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / a.len() as f64).sqrt();
    assert!((mean - 1.0).abs() < 0.07 && (std - 2.0).abs() < 0.05, "mean {mean}, deviation {std}");
    let u = values(x.rand_like(-1.0, 3.0).unwrap());
    assert!(u.iter().all(|v| (-1.0..3.0).contains(v)));
    let g = nn::Graph::eager_on(nn::Mode::Eval, 5, dev);
    let x = g.input(&Tensor::zeros(&[16]).unwrap()).unwrap();
    assert_eq!(values(x.randn_like(1.0, 2.0).unwrap()), vec![1.0; 16]);
    assert_eq!(values(x.rand_like(-1.0, 3.0).unwrap()), vec![1.0; 16]);
}

/// Operands of two dtypes promote as PyTorch's do (it was an error: cast
/// first): a float over an integer over a boolean, the wider of a kind, a
/// rank-0 tensor raising the kind but not the width; the float operand's
/// gradient goes through the cast.
#[test]
fn operands_of_two_dtypes_promote_as_pytorchs() {
    let dev = Device::Cpu { threads: 2 };
    let on = |dtype: DType, shape: &[usize], v: &[f64]| {
        Tensor::from_host(Host::new(shape.to_vec(), dtype, v.to_vec())).unwrap().to(&dev).unwrap()
    };
    let i = on(DType::I32, &[3], &[1.0, 2.0, 3.0]);
    let f = on(DType::F32, &[3], &[0.5, 0.25, -1.0]).param();
    let y = i.add(&f).unwrap();
    assert_eq!((y.host().unwrap().dtype, y.host().unwrap().values), (DType::F32, vec![1.5, 2.25, 2.0]));
    y.sum(&[0], false).unwrap().backward().unwrap();
    assert_eq!(f.grad().unwrap().unwrap().values, vec![1.0; 3]);
    // Wider of a kind; a boolean under an integer; comparisons too.
    let l = on(DType::I64, &[3], &[5.0, 6.0, 7.0]);
    assert_eq!(i.mul(&l).unwrap().host().unwrap().dtype, DType::I64);
    // Integers divide truly, as torch.div: 1 / 5 is 0.2, not 0 (it was
    // refused: hl has no integer division).
    let q = i.div(&l).unwrap().host().unwrap();
    assert_eq!(q.dtype, DType::F32);
    assert!((q.values[0] - 0.2).abs() < 1e-6, "{:?}", q.values);
    let d = on(DType::F64, &[3], &[1.0, 1.0, 1.0]);
    let plain = on(DType::F32, &[3], &[0.5, 0.25, -1.0]);
    assert_eq!(plain.sub(&d).unwrap().host().unwrap().dtype, DType::F64);
    // (A parameter's f32 promoted to f64 would carry no gradient: the cast
    // says so.)
    let e = f.sub(&d).unwrap_err().to_string();
    assert!(e.contains("its f64 result would carry no gradient"), "{e}");
    let b = i.compare(aicf_compiler::nn::Compare::Gt, &on(DType::I32, &[3], &[2.0, 2.0, 2.0])).unwrap();
    assert_eq!(b.add(&i).unwrap().host().unwrap(), Host::new(vec![3], DType::I32, vec![1.0, 2.0, 4.0]));
    assert_eq!(i.compare(aicf_compiler::nn::Compare::Lt, &f).unwrap().host().unwrap().values, vec![0.0, 0.0, 0.0]);
    // A scalar of a wider float keeps the tensor's f32; of a float over an
    // integer tensor, raises it to that float.
    let s64 = on(DType::F64, &[], &[2.0]);
    assert_eq!(f.mul(&s64).unwrap().host().unwrap().dtype, DType::F32);
    assert_eq!(i.mul(&s64).unwrap().host().unwrap().dtype, DType::F64);
}
