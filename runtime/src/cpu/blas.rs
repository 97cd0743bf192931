//! CBLAS's `cblas_sgemm` from libraries opened at run time, as GEMM
//! candidates: OpenBLAS (Debian's `libopenblas0-pthread`) and Intel's MKL
//! (`libmkl_rt`, the PyPI wheel `mkl`), both of which `tools/setup.sh`
//! installs; where a library is missing its candidate is simply not
//! measured, and the runtime links nothing new.
//!
//! OpenBLAS picks its kernels by CPU model when it loads; the Debian
//! build's table predates recent Xeons and falls back to its oldest
//! (SSE3) kernels there, 4x slower than its AVX-512 ones. So, unless the
//! user chose (`OPENBLAS_CORETYPE`), the core type is set from the CPU's
//! features before the library is opened: SkylakeX with AVX-512, Haswell
//! with AVX2 and FMA.
//!
//! MKL is the library PyTorch's CPU build multiplies with. On a 2-core
//! Intel Xeon (Emerald Rapids) its sgemm ran the transformer block's
//! products at 170-280 GFLOP/s where the `gemm` crate reached 160-230 and
//! the runtime's own AVX-512 kernel 140-220 (2 threads, interleaved;
//! oneDNN 2.6's `dnnl_sgemm` and BLIS 0.9 from Debian, measured beside
//! them, were slower than either). It is opened with its sequential
//! threading layer (the runtime splits a GEMM over its own pool, as for
//! OpenBLAS) and in conditional numerical reproducibility's `AUTO` mode,
//! so that a product's bits do not depend on where its operands lie (a
//! resumed run allocates its arena anew). Where to find `libmkl_rt`:
//! `AICF_MKL` (a path; empty turns the candidate off), else the project's
//! `.venv/lib` (where `tools/setup.sh` installs it), else the loader's
//! search path.
//!
//! MKL also multiplies bf16 operands as they are, into an f32 product
//! (`cblas_gemm_bf16bf16f32`): on a CPU with AMX (Sapphire Rapids and
//! later Xeons) on its tile units, on one with AVX-512 BF16 on
//! `vdpbf16ps`. That is the `mkl-bf16` candidate of a bf16 GEMM (a 2-core
//! Xeon VM exposing AMX: 700-1000 GFLOP/s on one thread for the
//! transformer block's and MLP 784's products, 4-6x its sgemm). The
//! runtime writes no AMX code of its own: MKL's kernels are Intel's, tuned
//! per CPU, and requesting the tiles' state from the kernel
//! (`arch_prctl`) is done inside MKL.

use libloading::Library;
use std::sync::OnceLock;

type Sgemm =
    unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const f32, i32, *const f32, i32, f32, *mut f32, i32);
type SetThreads = unsafe extern "C" fn(i32);
/// `cblas_gemm_bf16bf16f32` (mkl_cblas.h): bf16 operands (`MKL_BF16`, a
/// u16 of bf16 bits), an f32 product, otherwise `cblas_sgemm`'s arguments.
type GemmBf16 =
    unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const u16, i32, *const u16, i32, f32, *mut f32, i32);

/// An opened CBLAS library and its GEMM (and MKL's bf16 GEMM where the
/// library has one).
pub struct Cblas {
    sgemm: Sgemm,
    gemm_bf16: Option<GemmBf16>,
    _library: Library,
}

const ROW_MAJOR: i32 = 101;
const NO_TRANS: i32 = 111;
const TRANS: i32 = 112;

/// Sets `OPENBLAS_CORETYPE` from the CPU's features where the user has
/// not. Call it before other threads start (`aicf`'s `main` does); the
/// runtime calls it again just before it opens OpenBLAS.
pub fn prepare_openblas_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The runtime calls OpenBLAS single-threaded on each of its own
        // threads (see `openblas`); told so before it loads, OpenBLAS starts
        // no thread pool of its own (under a ulimit -v of 700 MB its pool's
        // shutdown hung the process at exit).
        if std::env::var_os("OPENBLAS_NUM_THREADS").is_none() {
            // SAFETY: as OPENBLAS_CORETYPE's below.
            unsafe { std::env::set_var("OPENBLAS_NUM_THREADS", "1") };
        }
        if std::env::var_os("OPENBLAS_CORETYPE").is_some() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let core = if has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
                "SkylakeX"
            } else if has!("avx2") && has!("fma") {
                "Haswell"
            } else {
                return;
            };
            // SAFETY: the variable is set once, before OpenBLAS (its only
            // reader) is loaded; `aicf` sets it at the start of `main`,
            // before any other thread exists. An embedding program that
            // reads the environment from other threads while its first
            // GEMM is measured should set OPENBLAS_CORETYPE itself.
            unsafe { std::env::set_var("OPENBLAS_CORETYPE", core) };
        }
    });
}

/// The process's address-space limit (`ulimit -v`, the soft one), in
/// bytes, where one is set.
fn address_space_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..].split_whitespace().next()?.parse().ok()
}

/// Below this address-space limit the BLAS libraries are not candidates,
/// as they fail in ways no caller can catch: each thread that calls
/// OpenBLAS takes a 128 MiB work buffer, and where the allocation fails
/// OpenBLAS retries forever (a run under `ulimit -v 500000` hung in its
/// first GEMM); MKL maps its computational library at its first call and
/// where it cannot, exits the process ("Cannot load libmkl_core.so.3",
/// status 2, under the same limit). The runtime's own GEMMs remain.
const BLAS_ADDRESS_SPACE: u64 = 4 << 30;

/// Whether a `ulimit -v` too low for the BLAS libraries is in force.
pub(crate) fn address_space_too_small() -> bool {
    // Read once: the registry asks on every GEMM key.
    static SMALL: OnceLock<bool> = OnceLock::new();
    *SMALL.get_or_init(|| address_space_limit().is_some_and(|l| l < BLAS_ADDRESS_SPACE))
}

/// OpenBLAS, opened on first use; `None` where it is not installed, or
/// where the process may map too little memory ([`BLAS_ADDRESS_SPACE`]).
pub fn openblas() -> Option<&'static Cblas> {
    static OPENED: OnceLock<Option<Cblas>> = OnceLock::new();
    OPENED
        .get_or_init(|| {
            if address_space_too_small() {
                return None;
            }
            prepare_openblas_env();
            // SAFETY: opening a shared library runs its initialisers;
            // OpenBLAS's set up its kernel table and thread pool.
            let library = unsafe { Library::new("libopenblas.so.0") }.ok()?;
            // SAFETY: the symbols have these C signatures (cblas.h).
            let (sgemm, set_threads) = unsafe {
                (
                    *library.get::<Sgemm>(b"cblas_sgemm\0").ok()?,
                    *library.get::<SetThreads>(b"openblas_set_num_threads\0").ok()?,
                )
            };
            // Single-threaded (see `sgemm`), set once before any call.
            // SAFETY: a plain setter, called before the library is shared.
            unsafe { set_threads(1) };
            Some(Cblas { sgemm, gemm_bf16: None, _library: library })
        })
        .as_ref()
}

/// MKL's threading layer that runs on the calling thread
/// (`MKL_THREADING_SEQUENTIAL`, mkl_service.h).
const MKL_THREADING_SEQUENTIAL: i32 = 1;
/// Conditional numerical reproducibility, the CPU's own code path
/// (`MKL_CBWR_AUTO`, mkl_types.h).
const MKL_CBWR_AUTO: i32 = 2;

/// Where MKL's runtime library may be, in the order tried: `AICF_MKL`
/// alone where it is set (empty: nowhere), else the project's `.venv`
/// (`tools/setup.sh`), else the loader's search path.
fn mkl_paths() -> Vec<std::ffi::OsString> {
    if let Some(path) = std::env::var_os("AICF_MKL") {
        return if path.is_empty() { vec![] } else { vec![path] };
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/lib/");
    let names = ["libmkl_rt.so.3", "libmkl_rt.so.2"];
    names.iter().map(|n| format!("{venv}{n}").into()).chain(names.iter().map(|n| (*n).into())).collect()
}

/// MKL, opened on first use with its sequential threading layer and
/// reproducible results; `None` where it is not installed (or not
/// usable: a library without these entry points, or a process that may map
/// too little memory, [`BLAS_ADDRESS_SPACE`]). A library that
/// `AICF_MKL` names and that cannot serve is said once on stderr.
pub fn mkl() -> Option<&'static Cblas> {
    static OPENED: OnceLock<Option<Cblas>> = OnceLock::new();
    OPENED
        .get_or_init(|| {
            let named = std::env::var_os("AICF_MKL").filter(|p| !p.is_empty());
            if address_space_too_small() {
                if let Some(path) = named {
                    eprintln!(
                        "note: AICF_MKL={}: the address-space limit (ulimit -v) is under {} GiB, too little for MKL \
                         to map its libraries; the mkl GEMM candidates are off",
                        path.to_string_lossy(),
                        BLAS_ADDRESS_SPACE >> 30
                    );
                }
                return None;
            }
            let mut why = String::from("no such library");
            for path in mkl_paths() {
                match open_mkl(&path) {
                    Ok(mkl) => return Some(mkl),
                    Err(e) => why = e,
                }
            }
            if let Some(path) = named {
                eprintln!("note: AICF_MKL={}: {why}; the mkl GEMM candidate is off", path.to_string_lossy());
            }
            None
        })
        .as_ref()
}

/// Opens MKL's runtime library at `path` and sets it up (see [`mkl`]).
fn open_mkl(path: &std::ffi::OsStr) -> Result<Cblas, String> {
    // SAFETY: opening a shared library runs its initialisers; MKL's
    // start no threads.
    let library = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: the symbols have these C signatures (mkl_cblas.h,
    // mkl_service.h).
    unsafe {
        let symbol =
            |name: &[u8]| library.get::<unsafe extern "C" fn(i32) -> i32>(name).map(|f| *f).map_err(|e| e.to_string());
        let (layer, cbwr) = (symbol(b"MKL_Set_Threading_Layer\0")?, symbol(b"MKL_CBWR_Set\0")?);
        let sgemm = *library.get::<Sgemm>(b"cblas_sgemm\0").map_err(|e| e.to_string())?;
        // Since MKL 2020; an older library serves sgemm alone.
        let gemm_bf16 = library.get::<GemmBf16>(b"cblas_gemm_bf16bf16f32\0").ok().map(|f| *f);
        // Both before the first computation, as MKL requires: the layer
        // call returns the layer now in force, the CNR call
        // MKL_CBWR_SUCCESS (0) or an error code.
        if layer(MKL_THREADING_SEQUENTIAL) != MKL_THREADING_SEQUENTIAL {
            return Err("MKL refused its sequential threading layer".into());
        }
        if cbwr(MKL_CBWR_AUTO) != 0 {
            return Err("MKL refused conditional numerical reproducibility (MKL_CBWR_AUTO)".into());
        }
        Ok(Cblas { sgemm, gemm_bf16, _library: library })
    }
}

/// Whether OpenBLAS can be opened here.
pub fn available() -> bool {
    openblas().is_some()
}

/// How a matrix with element strides `[row, col]` is passed to CBLAS
/// (row-major): untransposed with leading dimension `row` when its columns
/// are contiguous, transposed with `col` when its rows are; `None` for
/// other layouts.
fn operand(strides: [usize; 2], rows: usize, cols: usize) -> Option<(i32, i32)> {
    let [r, c] = strides;
    let fits = |ld: usize, min: usize| i32::try_from(ld).ok().filter(|_| ld >= min.max(1));
    if c == 1 || cols == 1 {
        fits(r.max(cols), cols).map(|ld| (NO_TRANS, ld))
    } else if r == 1 || rows == 1 {
        fits(c.max(rows), rows).map(|ld| (TRANS, ld))
    } else {
        None
    }
}

impl Cblas {
    /// Whether `cblas_sgemm` can compute C (m x n, row-major) = alpha A B
    /// for operands with these strides.
    pub fn fits(m: usize, n: usize, k: usize, a: [usize; 2], b: [usize; 2]) -> bool {
        let small = |v: usize| i32::try_from(v).is_ok();
        small(m) && small(n) && small(k) && operand(a, m, k).is_some() && operand(b, k, n).is_some()
    }

    /// Whether the library multiplies bf16 operands ([`Cblas::gemm_bf16`]).
    pub fn has_bf16(&self) -> bool {
        self.gemm_bf16.is_some()
    }

    /// C (f32) = alpha A B for bf16 A and B (raw bf16 bits) on the calling
    /// thread, as [`Cblas::sgemm`]; does nothing where the library has no
    /// bf16 GEMM ([`Cblas::has_bf16`]).
    ///
    /// # Safety
    /// As for [`Cblas::sgemm`], with A and B of 2-byte elements.
    pub unsafe fn gemm_bf16(
        &self,
        mnk: (usize, usize, usize),
        alpha: f32,
        a: (*const u16, [usize; 2]),
        b: (*const u16, [usize; 2]),
        c: (*mut f32, usize),
    ) {
        if let Some(gemm) = self.gemm_bf16 {
            // SAFETY: the caller's contract.
            unsafe { row_major(gemm, mnk, alpha, a, b, c) }
        }
    }

    /// C = alpha A B on the calling thread, C's rows `ldc` elements apart.
    /// The libraries run single-threaded: the runtime splits a GEMM over its
    /// own pool, so no second set of threads (OpenBLAS's spin for a while
    /// after each call) competes with the pool for the cores.
    ///
    /// # Safety
    /// `a`, `b` and `c` hold the matrices their sizes and strides describe,
    /// and [`Cblas::fits`] holds for them.
    pub unsafe fn sgemm(
        &self,
        mnk: (usize, usize, usize),
        alpha: f32,
        a: (*const f32, [usize; 2]),
        b: (*const f32, [usize; 2]),
        c: (*mut f32, usize),
    ) {
        // SAFETY: the caller's contract.
        unsafe { row_major(self.sgemm, mnk, alpha, a, b, c) }
    }
}

/// A CBLAS GEMM of operands of element type `E` into an f32 C, called
/// row-major with each operand's layout ([`operand`]) and beta 0; nothing
/// for layouts CBLAS cannot take.
///
/// # Safety
/// As for [`Cblas::sgemm`].
#[allow(clippy::type_complexity)]
unsafe fn row_major<E>(
    gemm: unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const E, i32, *const E, i32, f32, *mut f32, i32),
    (m, n, k): (usize, usize, usize),
    alpha: f32,
    a: (*const E, [usize; 2]),
    b: (*const E, [usize; 2]),
    (c, ldc): (*mut f32, usize),
) {
    let (Some((ta, lda)), Some((tb, ldb))) = (operand(a.1, m, k), operand(b.1, k, n)) else { return };
    // SAFETY: the caller's contract; the sizes fit in i32 (`fits`).
    unsafe {
        gemm(ROW_MAJOR, ta, tb, m as i32, n as i32, k as i32, alpha, a.0, lda, b.0, ldb, 0.0, c, ldc.max(1) as i32)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_map_to_cblas_layouts() {
        // A 3x4 row-major: not transposed, lda 4; its transpose in memory
        // (4x3 stored, read with strides [1, 3]): transposed, lda 3.
        assert_eq!(operand([4, 1], 3, 4), Some((NO_TRANS, 4)));
        assert_eq!(operand([1, 3], 3, 4), Some((TRANS, 3)));
        // A view with neither stride 1 has no CBLAS form.
        assert_eq!(operand([8, 2], 3, 4), None);
        assert!(!Cblas::fits(3, 4, 5, [5, 1], [8, 2]));
    }

    /// MKL's product does not depend on where its operands lie (a resumed
    /// run's arena is allocated anew): the same values at other offsets
    /// from a cache line give the same bits, and the product is right.
    #[test]
    #[cfg_attr(not(target_arch = "x86_64"), ignore = "MKL is installed on x86-64 only")]
    fn mkl_products_do_not_depend_on_alignment() {
        let mkl = mkl().expect("MKL cannot be opened (tools/setup.sh installs the mkl wheel into .venv)");
        let (m, n, k) = (67, 45, 301);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 9.0).collect();
        let product = |shift: usize| {
            let (mut sa, mut sb) = (vec![0f32; shift], vec![0f32; shift]);
            sa.extend(&a);
            sb.extend(&b);
            let mut c = vec![0f32; shift + m * n];
            // SAFETY: the buffers hold the matrices the sizes describe.
            unsafe {
                mkl.sgemm(
                    (m, n, k),
                    1.0,
                    (sa[shift..].as_ptr(), [k, 1]),
                    (sb[shift..].as_ptr(), [n, 1]),
                    (c[shift..].as_mut_ptr(), n),
                )
            };
            c.split_off(shift)
        };
        let first = product(0);
        for r in [0, m / 2, m - 1] {
            for col in [0, n - 1] {
                let want: f64 = (0..k).map(|i| a[r * k + i] as f64 * b[i * n + col] as f64).sum();
                assert!((first[r * n + col] as f64 - want).abs() < 1e-3 * want.abs().max(1.0), "C[{r},{col}]");
            }
        }
        for shift in 1..16 {
            assert_eq!(product(shift), first, "operands shifted by {shift} floats");
        }
    }

    /// MKL's bf16 GEMM (AMX where the CPU has it): the product of the bf16
    /// values in f32 sums, a transposed B read through its strides, and the
    /// same bits wherever the operands lie.
    #[test]
    #[cfg_attr(not(target_arch = "x86_64"), ignore = "MKL is installed on x86-64 only")]
    fn mkl_bf16_products_are_right_and_do_not_depend_on_alignment() {
        let mkl = mkl().expect("MKL cannot be opened (tools/setup.sh installs the mkl wheel into .venv)");
        assert!(mkl.has_bf16(), "this MKL has no cblas_gemm_bf16bf16f32");
        let (m, n, k) = (67, 45, 301);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 9.0).collect();
        let bits = |v: &[f32]| v.iter().map(|x| half::bf16::from_f32(*x).to_bits()).collect::<Vec<u16>>();
        let (a16, b16) = (bits(&a), bits(&b));
        let value = |v: &[u16], i: usize| half::bf16::from_bits(v[i]).to_f64();
        // B transposed in memory (n x k stored), read with strides [1, k].
        let bt: Vec<u16> = (0..n * k).map(|i| b16[(i % k) * n + i / k]).collect();
        let product = |shift: usize, transposed: bool| {
            let (mut sa, mut sb) = (vec![0u16; shift], vec![0u16; shift]);
            sa.extend(&a16);
            sb.extend(if transposed { &bt } else { &b16 });
            let b_strides = if transposed { [1, k] } else { [n, 1] };
            let mut c = vec![0f32; shift + m * n];
            // SAFETY: the buffers hold the matrices the sizes describe.
            unsafe {
                mkl.gemm_bf16(
                    (m, n, k),
                    1.0,
                    (sa[shift..].as_ptr(), [k, 1]),
                    (sb[shift..].as_ptr(), b_strides),
                    (c[shift..].as_mut_ptr(), n),
                )
            };
            c.split_off(shift)
        };
        let first = product(0, false);
        let transposed = product(0, true);
        for r in 0..m {
            for col in 0..n {
                // The bf16 values' products are exact in f32; only the sums round.
                let terms = (0..k).map(|i| value(&a16, r * k + i) * value(&b16, i * n + col));
                let (want, size) = terms.fold((0.0, 0.0), |(s, t): (f64, f64), x| (s + x, t + x.abs()));
                for (got, how) in [(first[r * n + col], "B as it is"), (transposed[r * n + col], "B transposed")] {
                    assert!(
                        (got as f64 - want).abs() <= 1e-5 * size.max(1.0),
                        "C[{r},{col}] with {how}: {got} against {want}"
                    );
                }
            }
        }
        for shift in 1..16 {
            assert_eq!(product(shift, false), first, "operands shifted by {shift} elements");
        }
    }
}
