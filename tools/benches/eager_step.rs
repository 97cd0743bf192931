//! Eager mode's dispatch cost (`cargo bench -p aicf-tools --bench
//! eager_step`): the SGD train steps of ../shared/bench/common_spec.txt's
//! MLP 64-128-128-10 (batch 32) and MLP 784-512-512-10 (batch 256) run op
//! by op with the tape, and one tiny op (the per-op overhead). Kernels are
//! warm (the first step compiles them; its time is printed first, with an
//! empty kernel cache when AICF_CACHE_DIR points at a fresh directory).

use aicf_compiler::eager::{self, Tensor, optim::Optim};
use criterion::{Criterion, criterion_group, criterion_main};

fn random(shape: &[usize], seed: u64, scale: f32) -> Tensor {
    let mut s = seed;
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
        })
        .collect();
    Tensor::from_vec(shape, v).expect("shape")
}

struct Mlp {
    params: Vec<Tensor>,
    x: Tensor,
    y: Tensor,
    opt: Optim,
}

impl Mlp {
    fn new(dims: &[usize], batch: usize) -> Mlp {
        let mut params = Vec::new();
        for (i, w) in dims.windows(2).enumerate() {
            let bound = 1.0 / (w[0] as f32).sqrt();
            params.push(random(&[w[1], w[0]], 2 * i as u64 + 1, bound).param());
            params.push(random(&[w[1]], 2 * i as u64 + 2, bound).param());
        }
        let x = random(&[batch, dims[0]], 99, 1.0);
        let labels: Vec<i32> = (0..batch).map(|i| (i % dims[dims.len() - 1]) as i32).collect();
        let y = Tensor::from_i32(&[batch], &labels).expect("labels");
        let opt = Optim::sgd(&params, 0.0, false, 0.0).expect("sgd");
        Mlp { params, x, y, opt }
    }

    fn step(&mut self) -> f64 {
        self.opt.zero_grad();
        let mut h = self.x.clone();
        let layers = self.params.len() / 2;
        for l in 0..layers {
            h = h.linear(&self.params[2 * l], Some(&self.params[2 * l + 1])).expect("linear");
            if l + 1 < layers {
                h = h.relu().expect("relu");
            }
        }
        let loss = h.cross_entropy(&self.y).expect("loss");
        loss.backward().expect("backward");
        self.opt.step(0.1).expect("step");
        loss.item().expect("scalar")
    }
}

fn bench(c: &mut Criterion) {
    let started = std::time::Instant::now();
    let mut small = Mlp::new(&[64, 128, 128, 10], 32);
    small.step();
    let s = eager::stats();
    println!(
        "first eager step of MLP 64: {:.2} s ({} kernels compiled in {:.2} s, {} loaded from the disk cache)",
        started.elapsed().as_secs_f64(),
        s.compiled,
        s.compile_seconds,
        s.loaded
    );
    c.bench_function("eager/mlp64_b32_sgd", |b| b.iter(|| small.step()));
    let mut big = Mlp::new(&[784, 512, 512, 10], 256);
    big.step();
    // AICF_EAGER_TRACE=<file>: one warm MLP 784 step's ops and kernels as
    // a trace-event file (Perfetto), to see where eager time goes.
    if let Some(path) = std::env::var_os("AICF_EAGER_TRACE") {
        big.step();
        eager::start_trace();
        big.step();
        let ops = match eager::finish_trace(std::path::Path::new(&path)) {
            Ok(ops) => ops,
            Err(e) => {
                eprintln!("AICF_EAGER_TRACE={}: {e}", std::path::Path::new(&path).display());
                std::process::exit(1);
            }
        };
        println!("MLP 784 eager step: {ops} ops traced to {}", std::path::Path::new(&path).display());
    }
    c.bench_function("eager/mlp784_b256_sgd", |b| b.iter(|| big.step()));
    let (a, one) = (random(&[1], 5, 1.0), random(&[1], 6, 1.0));
    a.add(&one).expect("add");
    c.bench_function("eager/op_overhead_add_1", |b| b.iter(|| a.add(&one).expect("add")));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
