//! The CUDA backend: runs an artifact compiled with `aicf compile --target
//! cuda` (manifest.json and the PTX modules it lists for sm_80 and sm_90).
//!
//! The driver (libcuda) is loaded at run time through cudarc, so this crate
//! builds and its CPU paths run where no CUDA exists; [`available`] says
//! whether a GPU can be used, and why not.
//!
//! A [`CudaSession`] ([`session`]) holds the parameters and optimizer state on the
//! device, one arena per function (the compiler's memory plan: every
//! intermediate at its planned offset), and fixed device buffers for each
//! function's inputs and outputs. The first call of a function launches its
//! kernels one by one (checking each launch); later calls replay a CUDA
//! Graph of the whole function, captured on the second call, since every
//! pointer and launch shape is fixed by the plan: compile once, train many.
//!
//! Inputs reach the device through two staging slots per function (pinned
//! host memory and a device buffer each), copied on a stream of their own:
//! [`CudaSession::call_each`] copies batch i + 1 while call i computes, and
//! a call's stream waits only for its own batch's copy.

mod bundle;
mod cublas;
pub mod eager;
pub mod nccl;
mod session;

pub use bundle::{BundleCall, BundleCase, GemmCheck, TrainRun, compare};
pub use session::{CudaSession, GemmPolicy};

use crate::artifact::{Function, Manifest};
use crate::error::{Result, RuntimeError};
use crate::host::{Bytes, write_values};
use cudarc::driver::{CudaContext, CudaStream, DriverError, result, sys};
use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::path::Path;
use std::sync::Arc;

/// Whether a CUDA GPU can be used here: `Err` says why not (no driver
/// library, no device).
pub fn available() -> std::result::Result<(), String> {
    // SAFETY: only probes whether libcuda can be opened.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) on this machine".into());
    }
    result::init().map_err(|e| format!("cuInit failed: {e}"))?;
    match result::device::get_count() {
        Ok(0) => Err("the CUDA driver sees no GPU".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("cuDeviceGetCount failed: {e}")),
    }
}

/// How many GPUs the driver sees; `Err` where [`available`] says none can
/// run (without the driver library cudarc's call would panic).
pub fn device_count() -> std::result::Result<usize, String> {
    available()?;
    result::device::get_count().map(|n| n.max(0) as usize).map_err(|e| format!("cuDeviceGetCount failed: {e}"))
}

pub(crate) fn cuda_err(what: impl std::fmt::Display) -> impl Fn(DriverError) -> RuntimeError {
    let what = what.to_string();
    move |e| RuntimeError::Driver { what: what.clone(), message: e.to_string() }
}

/// Device memory, freed on drop.
pub(crate) struct DeviceBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    pub(crate) fn zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        // SAFETY: a fresh allocation of at least one byte, then cleared.
        let ptr =
            unsafe { result::malloc_sync(bytes.max(1)) }.map_err(cuda_err(format!("allocating {bytes} bytes")))?;
        unsafe { result::memset_d8_sync(ptr, 0, bytes.max(1)) }.map_err(cuda_err("clearing device memory"))?;
        // cuMemsetD8 on device memory may return before it is done, ordered
        // only on the legacy stream: the session's streams are non-blocking,
        // so wait here, before any of their kernels can read the buffer.
        ctx.synchronize().map_err(cuda_err("clearing device memory"))?;
        Ok(DeviceBuffer { ptr, bytes, ctx: ctx.clone() })
    }
    pub(crate) fn fits(&self, len: usize) -> Result<()> {
        if len > self.bytes.max(1) {
            return Err(RuntimeError::Arguments {
                function: "cuda".into(),
                message: format!("{len} bytes do not fit a device buffer of {}", self.bytes),
            });
        }
        Ok(())
    }
    pub(crate) fn upload(&self, host: &[u8]) -> Result<()> {
        self.fits(host.len())?;
        // SAFETY: `host.len()` bytes fit the allocation.
        unsafe { result::memcpy_htod_sync(self.ptr, host) }.map_err(cuda_err("copying to the device"))?;
        // From pageable memory cuMemcpyHtoD returns once the bytes are
        // staged, before the DMA has landed, and orders only the legacy
        // stream after it; the session's streams are non-blocking. Without
        // this wait a kernel could read the old bytes: on an H100 shared
        // with another process, a growth's probe read half-carried
        // parameters (loss 1.91 -> 5.9, the rewrite rejected) in 2 runs of 3.
        self.ctx.synchronize().map_err(cuda_err("copying to the device"))
    }
    pub(crate) fn download(&self, host: &mut [u8]) -> Result<()> {
        self.fits(host.len())?;
        // SAFETY: as in upload.
        unsafe { result::memcpy_dtoh_sync(host, self.ptr) }.map_err(cuda_err("copying from the device"))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_sync, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Page-locked host memory (`cuMemHostAlloc`), freed on drop: a copy from
/// it to the device is truly asynchronous, so it can overlap kernels (a
/// copy from pageable memory is staged by the driver and may not).
pub(crate) struct PinnedBuffer {
    ptr: *mut u8,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl PinnedBuffer {
    pub(crate) fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        // SAFETY: a fresh allocation of at least one byte, cleared below
        // before any read.
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }
            .map_err(cuda_err(format!("allocating {bytes} bytes of pinned host memory")))?;
        let ptr = ptr as *mut u8;
        // SAFETY: `ptr` holds at least `bytes.max(1)` writable bytes.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes.max(1)) };
        Ok(PinnedBuffer { ptr, bytes, ctx: ctx.clone() })
    }
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `bytes` initialised bytes at `ptr`, owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in as_bytes, borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_host, freed once.
        let _ = unsafe { result::free_host(self.ptr as *mut c_void) };
    }
}

/// A loaded GPU artifact: its manifest, the PTX module for this device's
/// chip, each call's kernel and the constants on the device.
pub struct CudaModule {
    pub(crate) manifest: Manifest,
    /// The artifact's weights file (values of `init <data>` parameters).
    pub(crate) weights: Option<std::path::PathBuf>,
    pub(crate) ctx: Arc<CudaContext>,
    /// Stream 0: uploads, downloads, graph capture, and every call when
    /// the schedule has one stream.
    pub(crate) stream: Arc<CudaStream>,
    /// Streams 1.. of the schedule (`ll-schedule`), as many as the
    /// functions use.
    pub(crate) side: Vec<Arc<CudaStream>>,
    /// The chip's PTX modules.
    modules: Vec<sys::CUmodule>,
    /// Per function, per call.
    pub(crate) kernels: HashMap<String, Vec<sys::CUfunction>>,
    /// [`SCALE_PTX`]'s kernel, where a function has a local collective
    /// (`CollectiveOp::Scale`).
    pub(crate) scale: Option<sys::CUfunction>,
    pub(crate) constants: Vec<DeviceBuffer>,
    /// Which PTX was loaded.
    pub chip: String,
    /// The GPU's number.
    pub(crate) ordinal: usize,
}

impl CudaModule {
    /// Loads `dir` onto GPU `ordinal`: the sm_90 PTX on compute capability
    /// 9 and above, else the sm_80 one (the driver JIT-compiles it).
    pub fn load(dir: &Path, ordinal: usize) -> Result<Self> {
        let load_err = |path: &Path, message: String| RuntimeError::Load { path: path.to_path_buf(), message };
        let path = dir.join("manifest.json");
        let manifest = crate::artifact::load_manifest(dir)?;
        if !manifest.target.starts_with("cuda") {
            return Err(load_err(
                &path,
                format!("compiled for '{}', not CUDA (aicf compile --target cuda)", manifest.target),
            ));
        }
        if let Err(why) = available() {
            return Err(load_err(dir, why));
        }
        let ctx = CudaContext::new(ordinal).map_err(cuda_err(format!("opening GPU {ordinal}")))?;
        let (major, _) = ctx.compute_capability().map_err(cuda_err("reading the compute capability"))?;
        // The sm_90 PTX is built for sm_90a (wgmma), which only sm_90
        // devices run; any other takes the sm_80 PTX, which the driver
        // compiles for newer chips.
        let chip = if major == 9 { "sm_90" } else { "sm_80" };
        ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        // Every PTX module of the chip; a kernel is in one of them.
        let mut modules: Vec<(sys::CUmodule, std::path::PathBuf)> = Vec::new();
        let unload = |modules: &[(sys::CUmodule, std::path::PathBuf)]| {
            for (m, _) in modules {
                // SAFETY: loaded above, no kernel of it launched yet.
                let _ = unsafe { result::module::unload(*m) };
            }
        };
        for file in manifest.ptx_files(chip) {
            let ptx_path = dir.join(&file);
            let loaded = std::fs::read(&ptx_path)
                .map_err(|e| load_err(&ptx_path, e.to_string()))
                .and_then(|ptx| CString::new(ptx).map_err(|_| load_err(&ptx_path, "a NUL byte in the PTX".into())))
                .and_then(|ptx| {
                    // SAFETY: a NUL-terminated PTX image.
                    unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
                        .map_err(|e| load_err(&ptx_path, format!("the driver rejects the PTX: {e}")))
                });
            match loaded {
                Ok(m) => modules.push((m, ptx_path)),
                Err(e) => {
                    unload(&modules);
                    return Err(e);
                }
            }
        }
        let resolved = Self::resolve(&manifest, &path, &modules);
        let kernels = match resolved {
            Ok(k) => k,
            Err(e) => {
                unload(&modules);
                return Err(e);
            }
        };
        // The built-in kernel of a micro-batch's share of its gradients.
        let local = manifest
            .functions
            .iter()
            .flat_map(|f| &f.calls)
            .any(|c| c.collective.as_ref().is_some_and(|c| c.op == crate::artifact::CollectiveOp::Scale));
        let mut scale = None;
        if local {
            let ptx = CString::new(SCALE_PTX).map_err(|_| load_err(dir, "a NUL byte in the scale PTX".into()))?;
            let name = CString::new(SCALE_ENTRY).map_err(|_| load_err(dir, "a NUL in a kernel name".into()))?;
            // SAFETY: a NUL-terminated PTX image, then its entry's name in
            // the module just loaded.
            let loaded = unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }.and_then(|m| {
                modules.push((m, dir.join("<built-in scale kernel>")));
                unsafe { result::module::get_function(m, name) }
            });
            match loaded {
                Ok(f) => scale = Some(f),
                Err(e) => {
                    unload(&modules);
                    return Err(load_err(dir, format!("the driver rejects the built-in scale kernel: {e}")));
                }
            }
        }
        let modules: Vec<sys::CUmodule> = modules.into_iter().map(|(m, _)| m).collect();
        let mut constants = Vec::new();
        for c in &manifest.constants {
            let mut host = Bytes::zeroed(c.values.len() * c.dtype.bytes());
            write_values(host.as_bytes_mut(), c.dtype, &c.values);
            let d = DeviceBuffer::zeroed(&ctx, host.len())?;
            d.upload(host.as_bytes())?;
            constants.push(d);
        }
        let stream = ctx.new_stream().map_err(cuda_err("creating a stream"))?;
        let streams =
            manifest.functions.iter().flat_map(|f| &f.calls).map(|c| c.stream as usize + 1).max().unwrap_or(1);
        let side = (1..streams)
            .map(|_| ctx.new_stream().map_err(cuda_err("creating a stream")))
            .collect::<Result<Vec<_>>>()?;
        let weights = manifest.weights.as_ref().map(|w| dir.join(w));
        Ok(CudaModule {
            manifest,
            weights,
            ctx,
            stream,
            side,
            modules,
            kernels,
            scale,
            constants,
            chip: chip.into(),
            ordinal,
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Each call's kernel, from the module that holds it, with the dynamic
    /// shared memory its launch needs.
    fn resolve(
        manifest: &Manifest,
        path: &Path,
        modules: &[(sys::CUmodule, std::path::PathBuf)],
    ) -> Result<HashMap<String, Vec<sys::CUfunction>>> {
        let load_err = |path: &Path, message: String| RuntimeError::Load { path: path.to_path_buf(), message };
        let mut kernels = HashMap::new();
        for f in &manifest.functions {
            let mut resolved = Vec::new();
            for (k, c) in f.calls.iter().enumerate() {
                if c.collective.is_some() {
                    // Not a kernel: the session's communicator runs it.
                    resolved.push(std::ptr::null_mut());
                    continue;
                }
                let Some(launch) = c.launch else {
                    return Err(load_err(path, format!("@{} call #{k} has no launch shape", f.name)));
                };
                let name =
                    CString::new(c.symbol.clone()).map_err(|_| load_err(path, "a kernel name with a NUL".into()))?;
                // SAFETY: the modules are loaded and alive for this CudaModule.
                let found = modules
                    .iter()
                    .find_map(|(m, p)| unsafe { result::module::get_function(*m, name.clone()) }.ok().map(|f| (f, p)));
                let Some((func, ptx_path)) = found else {
                    return Err(load_err(path, format!("no PTX module holds kernel {} (for @{})", c.symbol, f.name)));
                };
                // Dynamic shared memory over the default 48 KiB must be
                // asked for per kernel (the big tensor-core GEMM tiles).
                if launch.shared_bytes > 48 * 1024 {
                    let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
                    // SAFETY: `func` was just resolved in a loaded module.
                    unsafe { result::function::set_function_attribute(func, attribute, launch.shared_bytes as i32) }
                        .map_err(|e| {
                            load_err(
                                ptx_path,
                                format!("{} needs {} bytes of shared memory: {e}", c.symbol, launch.shared_bytes),
                            )
                        })?;
                }
                resolved.push(func);
            }
            kernels.insert(f.name.clone(), resolved);
        }
        Ok(kernels)
    }

    pub fn function(&self, name: &str) -> Result<&Function> {
        self.manifest.functions.iter().find(|f| f.name == name).ok_or_else(|| RuntimeError::NoFunction(name.into()))
    }

    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn device_name(&self) -> String {
        self.ctx.name().unwrap_or_default()
    }
}

impl Drop for CudaModule {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: loaded once in `load`; no kernel of it runs any more
        // (sessions synchronise before they drop).
        for m in &self.modules {
            let _ = unsafe { result::module::unload(*m) };
        }
    }
}

/// Whether libcublasLt can be loaded here (without it, GEMMs run the
/// generated kernels).
pub fn cublaslt_present() -> bool {
    cublas::present()
}

/// The registry's name for the cuBLASLt candidate.
pub(crate) const LIBRARY: &str = "cublaslt";

/// Launches `kernel` with `launch`'s shape on `stream`, its parameters
/// `params` (work, then buffer addresses).
/// The entry of [`SCALE_PTX`].
pub const SCALE_ENTRY: &str = "aicf_scale_f32";

/// `buf[i] = buf[i] * weight[0]` for `i < n`, f32, rounded to nearest as
/// the CPU's multiply: a micro-batch's share of its gradients
/// (`ll.all_reduce {local}`, `CollectiveOp::Scale`). Parameters `(n, buf,
/// weight)`; 256 threads a block, one element each. Written for sm_70 and
/// up (the driver compiles it for the device).
pub const SCALE_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64

.visible .entry aicf_scale_f32(
    .param .u64 p_n,
    .param .u64 p_buf,
    .param .u64 p_weight
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<9>;
    .reg .f32 %f<4>;

    ld.param.u64 %rd1, [p_n];
    ld.param.u64 %rd2, [p_buf];
    ld.param.u64 %rd3, [p_weight];
    cvta.to.global.u64 %rd4, %rd2;
    cvta.to.global.u64 %rd5, %rd3;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd6, %r1, %r2;
    cvt.u64.u32 %rd7, %r3;
    add.u64 %rd6, %rd6, %rd7;
    setp.ge.u64 %p1, %rd6, %rd1;
    @%p1 bra DONE;
    ld.global.f32 %f1, [%rd5];
    shl.b64 %rd8, %rd6, 2;
    add.u64 %rd8, %rd4, %rd8;
    ld.global.f32 %f2, [%rd8];
    mul.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd8], %f3;
DONE:
    ret;
}
"#;

pub(crate) fn launch_kernel(
    kernel: sys::CUfunction,
    launch: crate::artifact::Launch,
    params: &[u64],
    stream: &CudaStream,
) -> std::result::Result<(), DriverError> {
    let mut values: Vec<u64> = params.to_vec();
    let mut ptrs: Vec<*mut c_void> = values.iter_mut().map(|v| v as *mut u64 as *mut c_void).collect();
    // SAFETY: the parameters are (i64 work, pointers) as every generated
    // entry takes, each pointer inside its buffer by the compiler's plan.
    unsafe {
        result::launch_kernel(
            kernel,
            (launch.grid[0], launch.grid[1], launch.grid[2]),
            (launch.block[0], launch.block[1], launch.block[2]),
            launch.shared_bytes,
            stream.cu_stream(),
            &mut ptrs,
        )
    }
}

/// Milliseconds per device-to-device copy of `bytes` on GPU 0 (the mean
/// of `reps` after a warm-up): the bandwidth reference for kernels.
pub fn time_copy(bytes: usize, reps: usize) -> Result<f64> {
    let ctx = CudaContext::new(0).map_err(cuda_err("opening GPU 0"))?;
    let stream = ctx.new_stream().map_err(cuda_err("creating a stream"))?;
    let (src, dst) = (DeviceBuffer::zeroed(&ctx, bytes)?, DeviceBuffer::zeroed(&ctx, bytes)?);
    let copy = || {
        // SAFETY: both buffers hold `bytes` bytes.
        unsafe { result::memcpy_dtod_async(dst.ptr, src.ptr, bytes, stream.cu_stream()) }.map_err(cuda_err("copying"))
    };
    copy()?;
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.record_event(flags).map_err(cuda_err("recording an event"))?;
    for _ in 0..reps {
        copy()?;
    }
    let end = stream.record_event(flags).map_err(cuda_err("recording an event"))?;
    end.synchronize().map_err(cuda_err("waiting for the copies"))?;
    Ok(start.elapsed_ms(&end).map_err(cuda_err("reading the events"))? as f64 / reps.max(1) as f64)
}
