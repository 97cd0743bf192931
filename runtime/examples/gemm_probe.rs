//! Interleaved timing of the runtime's AVX-512 GEMM against the `gemm`
//! crate on one shape, warm, `T` threads (default 2): `cargo run --release
//! -p aicf-runtime --example gemm_probe -- M N K TA TB [ITERS]` (TA, TB: 1
//! where the operand is stored transposed; `KERNEL=avx2` times the AVX2
//! kernel instead of the AVX-512 one). The two run in turn, call by
//! call, so a slow spell of the machine slows both: the ratio of their
//! medians is the figure to read, the GFLOP/s only of that minute.
use aicf_runtime::artifact::LibraryGemm;
use aicf_runtime::cpu::packed_gemm::{self, Kernel, Packed};
use aicf_runtime::cpu::team::Team;

fn main() {
    let a: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let kernel = if std::env::var("KERNEL").as_deref() == Ok("avx2") { Kernel::Avx2F32 } else { Kernel::Avx512F32 };
    if a.len() < 5 || !kernel.available() {
        eprintln!(
            "usage: [KERNEL=avx2] gemm_probe M N K TA TB [ITERS] (numbers; on a CPU with the kernel's instructions)"
        );
        std::process::exit(2);
    }
    let (m, n, k, ta, tb) = (a[0], a[1], a[2], a[3] != 0, a[4] != 0);
    let iters = a.get(5).copied().unwrap_or(200);
    let threads: usize = std::env::var("T").ok().and_then(|t| t.parse().ok()).unwrap_or(2);
    // The runtime's team for its kernel; a rayon pool for the `gemm` crate,
    // threaded as it threads itself.
    let team = Team::new(threads, || {}).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let mut packed = Packed::default();
    let g = LibraryGemm::contiguous(1, (m, n, k), ta, tb);
    let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.25 - 0.75).collect();
    let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.25 - 0.5).collect();
    let mut out = vec![0f32; m * n];
    let mut out2 = vec![0f32; m * n];
    let [ar, ac] = g.a_strides.map(|s| s as isize);
    let [br, bc] = g.b_strides.map(|s| s as isize);
    let mut t_own = vec![];
    let mut t_lib = vec![];
    for _ in 0..iters {
        let t = std::time::Instant::now();
        unsafe {
            packed_gemm::gemm(
                &team,
                team.threads(),
                &mut packed,
                &g,
                kernel,
                av.as_ptr() as *const u8,
                bv.as_ptr() as *const u8,
                out.as_mut_ptr(),
                None,
            )
        };
        t_own.push(t.elapsed().as_secs_f64());
        let t = std::time::Instant::now();
        pool.install(|| unsafe {
            gemm::gemm(
                m,
                n,
                k,
                out2.as_mut_ptr(),
                1,
                n as isize,
                false,
                av.as_ptr(),
                ac,
                ar,
                bv.as_ptr(),
                bc,
                br,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::Rayon(threads),
            )
        });
        t_lib.push(t.elapsed().as_secs_f64());
    }
    let diff = out.iter().zip(&out2).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    let fl = 2.0 * (m * n * k) as f64;
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (fl / v[0] / 1e9, fl / v[v.len() / 2] / 1e9)
    };
    let (o0, o1) = stat(&mut t_own);
    let (l0, l1) = stat(&mut t_lib);
    println!(
        "{m}x{n}x{k} ta{} tb{}: own best {o0:.0} med {o1:.0} GF/s | gemm crate best {l0:.0} med {l1:.0} | ratio med {:.2} | maxdiff {diff:.1e}",
        ta as u8,
        tb as u8,
        o1 / l1
    );
}
