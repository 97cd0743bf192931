//! cuBLASLt as the GPU GEMM's library candidate: a GEMM call whose manifest
//! entry carries a [`GpuGemm`] (its whole epilogue is one cuBLASLt has:
//! bias, ReLU or tanh-GELU, accumulate, alpha) can run as one
//! `cublasLtMatmul` instead of the generated kernel. The session's registry
//! measures both once per device and shape and remembers the faster.
//!
//! cuBLASLt is column-major and AICF's matrices are row-major, so the
//! product is computed transposed: out^T (n x m) = op(B)^T op(A)^T, where a
//! row-major matrix's memory read column-major is its transpose. The bias,
//! one value per output column, is then one per row of out^T, which is
//! what cuBLASLt's bias epilogue adds.
//!
//! libcublasLt is loaded at run time, like the driver: without it the
//! generated kernels run and nothing else changes.

use crate::artifact::{DType, GpuGemm, LibraryGemm};
use cudarc::cublaslt::{result as lt, sys};
use std::ffi::c_void;

/// Workspace handed to every cuBLASLt call (its heuristics prefer some).
pub(crate) const WORKSPACE_BYTES: usize = 32 << 20;

/// Whether libcublasLt can be loaded here.
pub(crate) fn present() -> bool {
    // SAFETY: only probes whether the library can be opened.
    unsafe { sys::is_culib_present() }
}

fn err(what: &str) -> impl Fn(lt::CublasError) -> String + '_ {
    move |e| format!("cuBLASLt {what}: {e}")
}

/// A cuBLASLt handle (one per session).
pub(crate) struct Handle(sys::cublasLtHandle_t);

impl Handle {
    pub(crate) fn new() -> Result<Self, String> {
        if !present() {
            return Err("no libcublasLt on this machine".into());
        }
        lt::create_handle().map(Handle).map_err(err("creating a handle"))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by create_handle, destroyed once.
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

/// The largest power of two (up to 256) dividing a device address.
fn alignment(address: u64) -> u32 {
    1 << address.trailing_zeros().min(8)
}

fn data_type(t: DType) -> Result<sys::cudaDataType, String> {
    Ok(match t {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        other => return Err(format!("cuBLASLt GEMM on {other:?} elements")),
    })
}

/// One GEMM prepared for cuBLASLt: its descriptors and the algorithm the
/// heuristic chose for them, for fixed buffers (the bias pointer is part of
/// the descriptor).
pub(crate) struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    /// cuBLASLt's A (AICF's B), B (AICF's A) and C = D (the output).
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
    alpha: f32,
    beta: f32,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each created once by this plan, destroyed once.
        unsafe {
            let _ = lt::destroy_matmul_desc(self.desc);
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
        }
    }
}

/// Sets attribute `attr` of a matrix layout to `value`.
///
/// # Safety
/// `layout` is live; `T` is the attribute's type.
unsafe fn set_layout<T>(
    layout: sys::cublasLtMatrixLayout_t,
    attr: sys::cublasLtMatrixLayoutAttribute_t,
    value: &T,
) -> Result<(), String> {
    // SAFETY: `value` is a live `T` of the given size.
    unsafe { lt::set_matrix_layout_attribute(layout, attr, value as *const T as *const c_void, size_of::<T>()) }
        .map_err(err("setting a layout attribute"))
}

/// Sets attribute `attr` of a matmul descriptor to `value`.
///
/// # Safety
/// `desc` is live; `T` is the attribute's type.
unsafe fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> Result<(), String> {
    // SAFETY: `value` is a live `T` of the given size.
    unsafe { lt::set_matmul_desc_attribute(desc, attr, value as *const T as *const c_void, size_of::<T>()) }
        .map_err(err("setting a matmul attribute"))
}

/// A column-major layout of `rows x cols` (leading dimension `ld`), with
/// `batch` matrices `stride` elements apart.
fn layout(
    t: DType,
    rows: usize,
    cols: usize,
    ld: usize,
    batch: usize,
    stride: usize,
) -> Result<sys::cublasLtMatrixLayout_t, String> {
    let l = lt::create_matrix_layout(data_type(t)?, rows as u64, cols as u64, ld as i64)
        .map_err(err("creating a layout"))?;
    if batch > 1 {
        use sys::cublasLtMatrixLayoutAttribute_t as A;
        // SAFETY: `l` was just created; the attributes are i32 and i64.
        let set = unsafe {
            set_layout(l, A::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &(batch as i32))
                .and_then(|_| set_layout(l, A::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &(stride as i64)))
        };
        if let Err(e) = set {
            // SAFETY: created above, not yet owned by a plan.
            let _ = unsafe { lt::destroy_matrix_layout(l) };
            return Err(e);
        }
    }
    Ok(l)
}

impl Plan {
    /// Prepares `g` (with its GPU part `gpu`) for `handle`; `bias` is the
    /// bias buffer's device address when the GEMM has one, `addresses` those
    /// of A, B and the output (only their alignment counts: the algorithm
    /// must allow it). With `tf32`, an f32 GEMM multiplies on the tensor
    /// cores in TF32 (inputs rounded to 10 mantissa bits, sums in f32:
    /// PyTorch's `allow_tf32`); other types ignore it.
    pub(crate) fn new(
        handle: &Handle,
        g: &LibraryGemm,
        gpu: &GpuGemm,
        bias: Option<u64>,
        addresses: [u64; 3],
        tf32: bool,
    ) -> Result<Self, String> {
        use sys::cublasLtEpilogue_t as E;
        use sys::cublasLtMatmulDescAttributes_t as D;
        let (m, n, k) = (g.m, g.n, g.k);
        // op(B) stored k x n (not transposed: row stride n) reads column-major
        // as B^T (n x k, ld n); stored n x k (transposed) as k x n, ld k.
        let b_plain = g.b_strides[1] == 1;
        let a_plain = g.a_strides[1] == 1;
        let mut layouts = Vec::new();
        let made = (|| -> Result<(), String> {
            let (r, c) = if b_plain { (n, k) } else { (k, n) };
            layouts.push(layout(gpu.operands, r, c, r, g.batch, g.b_batch)?);
            let (r, c) = if a_plain { (k, m) } else { (m, k) };
            layouts.push(layout(gpu.operands, r, c, r, g.batch, g.a_batch)?);
            layouts.push(layout(gpu.output, n, m, n, g.batch, m * n)?);
            Ok(())
        })();
        let destroy = |layouts: &[sys::cublasLtMatrixLayout_t]| {
            for &l in layouts {
                // SAFETY: created above, not yet owned by a plan.
                let _ = unsafe { lt::destroy_matrix_layout(l) };
            }
        };
        if let Err(e) = made {
            destroy(&layouts);
            return Err(e);
        }
        let compute = if tf32 && gpu.operands == DType::F32 {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let desc = match lt::create_matmul_desc(compute, sys::cudaDataType::CUDA_R_32F) {
            Ok(d) => d,
            Err(e) => {
                destroy(&layouts);
                return Err(err("creating a matmul descriptor")(e));
            }
        };
        let mut plan = Plan {
            desc,
            layouts: [layouts[0], layouts[1], layouts[2]],
            // SAFETY: a plain C struct of integers, set below before any use.
            algo: unsafe { std::mem::zeroed() },
            alpha: g.alpha as f32,
            beta: if gpu.accumulate { 1.0 } else { 0.0 },
        };
        // cublasOperation_t: 0 = N, 1 = T
        let (op_a, op_b): (i32, i32) = (if b_plain { 0 } else { 1 }, if a_plain { 0 } else { 1 });
        let epilogue = match (gpu.act, bias.is_some()) {
            (0, false) => E::CUBLASLT_EPILOGUE_DEFAULT,
            (0, true) => E::CUBLASLT_EPILOGUE_BIAS,
            (1, false) => E::CUBLASLT_EPILOGUE_RELU,
            (1, true) => E::CUBLASLT_EPILOGUE_RELU_BIAS,
            (3, false) => E::CUBLASLT_EPILOGUE_GELU,
            (3, true) => E::CUBLASLT_EPILOGUE_GELU_BIAS,
            (act, _) => return Err(format!("cuBLASLt has no epilogue for activation {act}")),
        };
        // SAFETY: `plan.desc` is live; each value has its attribute's type.
        unsafe {
            set_desc(plan.desc, D::CUBLASLT_MATMUL_DESC_TRANSA, &op_a)?;
            set_desc(plan.desc, D::CUBLASLT_MATMUL_DESC_TRANSB, &op_b)?;
            set_desc(plan.desc, D::CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue)?;
            if let (Some(ptr), Some((_, t))) = (bias, gpu.bias) {
                let ptr = ptr as *const c_void;
                set_desc(plan.desc, D::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr)?;
                set_desc(plan.desc, D::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &data_type(t)?)?;
            }
        }
        let pref = lt::create_matmul_pref().map_err(err("creating a preference"))?;
        // SAFETY: `pref` is live until destroyed below; the layouts and the
        // descriptor are the plan's.
        let found = unsafe {
            use sys::cublasLtMatmulPreferenceAttributes_t as P;
            let size = WORKSPACE_BYTES as u64;
            let set_pref =
                |attr: P, value: *const c_void, bytes: usize| lt::set_matmul_pref_attribute(pref, attr, value, bytes);
            // The arena places buffers 64 bytes apart, not cuBLASLt's
            // assumed 256: each matrix's own alignment.
            let [a, b, out] = addresses.map(alignment);
            let mut set =
                set_pref(P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &size as *const u64 as *const c_void, 8);
            for (attr, align) in [
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, b),
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, a),
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, out),
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out),
            ] {
                set = set.and_then(|_| set_pref(attr, &align as *const u32 as *const c_void, 4));
            }
            let found = set.and_then(|_| {
                lt::get_matmul_algo_heuristic(
                    handle.0,
                    plan.desc,
                    plan.layouts[0],
                    plan.layouts[1],
                    plan.layouts[2],
                    plan.layouts[2],
                    pref,
                )
            });
            let _ = lt::destroy_matmul_pref(pref);
            found
        };
        plan.algo = found.map_err(err("finding an algorithm"))?.algo;
        Ok(plan)
    }

    /// Enqueues the GEMM on `stream`: A, B and the output at the given
    /// device addresses (the output is also C, read when accumulating).
    ///
    /// # Safety
    /// The addresses hold the plan's matrices; `workspace` holds
    /// [`WORKSPACE_BYTES`]; all stay valid until the stream has run it.
    pub(crate) unsafe fn run(
        &self,
        handle: &Handle,
        a: u64,
        b: u64,
        out: u64,
        workspace: u64,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<(), String> {
        // SAFETY: as the caller promises; alpha and beta live on this frame
        // and are read before the call returns (host pointer mode).
        unsafe {
            lt::matmul(
                handle.0,
                self.desc,
                &self.alpha as *const f32 as *const c_void,
                &self.beta as *const f32 as *const c_void,
                b as *const c_void,
                self.layouts[0],
                a as *const c_void,
                self.layouts[1],
                out as *const c_void,
                self.layouts[2],
                out as *mut c_void,
                self.layouts[2],
                &self.algo,
                workspace as *mut c_void,
                WORKSPACE_BYTES,
                stream as sys::cudaStream_t,
            )
        }
        .map_err(err("running a GEMM"))
    }
}
