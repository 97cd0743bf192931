//! The CPU GEMM candidates one by one, warm, on the shapes of the compared
//! workloads (MLP 784's and the transformer block's forward and backward
//! products, with the layouts the compiler gives them):
//! `cargo bench -p aicf-runtime --bench gemm`. Each reports its time;
//! the GFLOP/s are `2 m n k batch / time`. The runtime's own kernels
//! (`packed_gemm`: AVX-512 f32 and bf16, AVX2 f32) run where the CPU has
//! the instructions; matrixmultiply and OpenBLAS (where it is installed),
//! one thread each (the runtime splits their products over its pool), MKL
//! likewise where it is installed, and
//! the `gemm` crate everywhere. `GEMM_THREADS=1` compares the kernels
//! alone. The registry
//! times the same candidates from a cold cache inside a step; this bench
//! is for working on one kernel.

use aicf_runtime::artifact::LibraryGemm;
use aicf_runtime::cpu::packed_gemm::{self, Kernel, Packed};
use aicf_runtime::cpu::team::Team;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// (name, batch, m, n, k, A transposed, B transposed)
const SHAPES: [(&str, usize, usize, usize, usize, bool, bool); 8] = [
    ("mlp784 fc1 forward", 1, 256, 512, 784, false, true),
    ("mlp784 fc1 weight gradient", 1, 512, 784, 256, true, false),
    ("transformer qkv forward", 1, 1024, 768, 256, false, true),
    ("transformer fc1 forward", 1, 1024, 1024, 256, false, true),
    ("transformer fc2 input gradient, wide", 1, 1024, 1024, 256, false, false),
    ("transformer fc2 input gradient", 1, 1024, 256, 1024, false, false),
    ("transformer fc2 weight gradient", 1, 1024, 256, 1024, true, false),
    ("attention scores, 32 heads", 32, 128, 128, 64, false, true),
];

fn gemms(c: &mut Criterion) {
    let threads = std::env::var("GEMM_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2);
    // The runtime's team for its own kernels; a rayon pool for the `gemm`
    // crate threaded as it threads itself.
    let team = Team::new(threads, || {}).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let mut packed = Packed::default();
    for (name, batch, m, n, k, ta, tb) in SHAPES {
        let g = LibraryGemm::contiguous(batch, (m, n, k), ta, tb);
        let a: Vec<f32> = (0..batch * m * k).map(|i| (i % 7) as f32 * 0.25 - 0.75).collect();
        let b: Vec<f32> = (0..batch * k * n).map(|i| (i % 5) as f32 * 0.25 - 0.5).collect();
        let a16: Vec<half::bf16> = a.iter().map(|&v| half::bf16::from_f32(v)).collect();
        let b16: Vec<half::bf16> = b.iter().map(|&v| half::bf16::from_f32(v)).collect();
        let mut out = vec![0f32; batch * m * n];
        let mut group = c.benchmark_group(format!("{name} {batch}x{m}x{n}x{k}"));
        group.throughput(Throughput::Elements((2 * batch * m * n * k) as u64));
        group.sample_size(30);
        let own = [
            ("avx512 f32", Kernel::Avx512F32, a.as_ptr() as *const u8, b.as_ptr() as *const u8),
            ("avx2 f32", Kernel::Avx2F32, a.as_ptr() as *const u8, b.as_ptr() as *const u8),
            ("bf16-dot", Kernel::Avx512Bf16, a16.as_ptr() as *const u8, b16.as_ptr() as *const u8),
        ];
        for (label, kernel, pa, pb) in own.into_iter().filter(|o| o.1.available()) {
            group.bench_function(label, |bench| {
                bench.iter(|| unsafe {
                    packed_gemm::gemm(&team, team.threads(), &mut packed, &g, kernel, pa, pb, out.as_mut_ptr(), None)
                })
            });
        }
        let [ar, ac] = g.a_strides.map(|s| s as isize);
        let [br, bc] = g.b_strides.map(|s| s as isize);
        group.bench_function("matrixmultiply f32, one thread", |bench| {
            bench.iter(|| {
                for t in 0..batch {
                    unsafe {
                        matrixmultiply::sgemm(
                            m,
                            k,
                            n,
                            1.0,
                            a.as_ptr().add(t * m * k),
                            ar,
                            ac,
                            b.as_ptr().add(t * k * n),
                            br,
                            bc,
                            0.0,
                            out.as_mut_ptr().add(t * m * n),
                            n as isize,
                            1,
                        )
                    }
                }
            })
        });
        use aicf_runtime::cpu::blas::{Cblas, mkl, openblas};
        let libraries = [("openblas f32, one thread", openblas()), ("mkl f32, one thread", mkl())];
        for (label, blas) in libraries.into_iter().filter_map(|(l, b)| Some((l, b?))) {
            if !Cblas::fits(m, n, k, g.a_strides, g.b_strides) {
                continue;
            }
            group.bench_function(label, |bench| {
                bench.iter(|| {
                    for t in 0..batch {
                        unsafe {
                            blas.sgemm(
                                (m, n, k),
                                1.0,
                                (a.as_ptr().add(t * m * k), g.a_strides),
                                (b.as_ptr().add(t * k * n), g.b_strides),
                                (out.as_mut_ptr().add(t * m * n), n),
                            )
                        }
                    }
                })
            });
        }
        group.bench_function("gemm crate f32", |bench| {
            bench.iter(|| {
                pool.install(|| {
                    for t in 0..batch {
                        unsafe {
                            gemm::gemm(
                                m,
                                n,
                                k,
                                out.as_mut_ptr().add(t * m * n),
                                1,
                                n as isize,
                                false,
                                a.as_ptr().add(t * m * k),
                                ac,
                                ar,
                                b.as_ptr().add(t * k * n),
                                bc,
                                br,
                                0.0,
                                1.0,
                                false,
                                false,
                                false,
                                gemm::Parallelism::Rayon(threads),
                            )
                        }
                    }
                })
            })
        });
        group.finish();
    }
}

criterion_group!(benches, gemms);
criterion_main!(benches);
