//! OpenBLAS's `cblas_sgemm` as a GEMM candidate, opened at run time
//! (Debian's `libopenblas0-pthread`, which `tools/setup.sh` installs; where
//! the library is missing the candidate is simply not measured, and the
//! runtime links nothing new).
//!
//! OpenBLAS picks its kernels by CPU model when it loads; the Debian
//! build's table predates recent Xeons and falls back to its oldest
//! (SSE3) kernels there, 4x slower than its AVX-512 ones. So, unless the
//! user chose (`OPENBLAS_CORETYPE`), the core type is set from the CPU's
//! features before the library is opened: SkylakeX with AVX-512, Haswell
//! with AVX2 and FMA.

use libloading::Library;
use std::sync::OnceLock;

type Sgemm =
    unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const f32, i32, *const f32, i32, f32, *mut f32, i32);
type SetThreads = unsafe extern "C" fn(i32);

/// The opened library and its GEMM.
pub struct OpenBlas {
    sgemm: Sgemm,
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

/// OpenBLAS, opened on first use; `None` where it is not installed.
pub fn openblas() -> Option<&'static OpenBlas> {
    static OPENED: OnceLock<Option<OpenBlas>> = OnceLock::new();
    OPENED
        .get_or_init(|| {
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
            Some(OpenBlas { sgemm, _library: library })
        })
        .as_ref()
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

impl OpenBlas {
    /// Whether `cblas_sgemm` can compute C (m x n, row-major) = alpha A B
    /// for operands with these strides.
    pub fn fits(m: usize, n: usize, k: usize, a: [usize; 2], b: [usize; 2]) -> bool {
        let small = |v: usize| i32::try_from(v).is_ok();
        small(m) && small(n) && small(k) && operand(a, m, k).is_some() && operand(b, k, n).is_some()
    }

    /// C = alpha A B on the calling thread, C's rows `ldc` elements apart.
    /// OpenBLAS runs single-threaded: the runtime splits a GEMM over its
    /// own pool, so no second set of threads (OpenBLAS's spin for a while
    /// after each call) competes with the pool for the cores.
    ///
    /// # Safety
    /// `a`, `b` and `c` hold the matrices their sizes and strides describe,
    /// and [`OpenBlas::fits`] holds for them.
    pub unsafe fn sgemm(
        &self,
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        a: (*const f32, [usize; 2]),
        b: (*const f32, [usize; 2]),
        (c, ldc): (*mut f32, usize),
    ) {
        let (Some((ta, lda)), Some((tb, ldb))) = (operand(a.1, m, k), operand(b.1, k, n)) else { return };
        // SAFETY: the caller's contract; the sizes fit in i32 (`fits`).
        unsafe {
            (self.sgemm)(
                ROW_MAJOR,
                ta,
                tb,
                m as i32,
                n as i32,
                k as i32,
                alpha,
                a.0,
                lda,
                b.0,
                ldb,
                0.0,
                c,
                ldc.max(1) as i32,
            )
        };
    }
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
        assert!(!OpenBlas::fits(3, 4, 5, [5, 1], [8, 2]));
    }
}
