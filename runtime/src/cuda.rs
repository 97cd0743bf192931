//! The CUDA backend: runs an artifact compiled with `aicf compile --target
//! cuda` (manifest.json, kernels.sm_80.ptx, kernels.sm_90.ptx).
//!
//! The driver (libcuda) is loaded at run time through cudarc, so this crate
//! builds and its CPU paths run where no CUDA exists; [`available`] says
//! whether a GPU can be used, and why not.
//!
//! A [`CudaSession`] holds the parameters and optimizer state on the
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

use crate::artifact::{Buffer, Call, DType, Function, GpuGemm, LibraryGemm, Manifest, Role};
use crate::cpu::{Bytes, Result, RuntimeError, read_values, write_values};
use crate::cublas;
use crate::registry::Registry;
use crate::session::{Tensor, initial_symbols, input_mismatch};
use cudarc::driver::{CudaContext, CudaEvent, CudaGraph, CudaStream, DriverError, result, sys};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
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

fn cuda_err(what: impl std::fmt::Display) -> impl Fn(DriverError) -> RuntimeError {
    let what = what.to_string();
    move |e| RuntimeError::Arguments { function: "cuda".into(), message: format!("{what}: {e}") }
}

/// Device memory, freed on drop.
struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    fn zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        // SAFETY: a fresh allocation of at least one byte, then cleared.
        let ptr =
            unsafe { result::malloc_sync(bytes.max(1)) }.map_err(cuda_err(format!("allocating {bytes} bytes")))?;
        unsafe { result::memset_d8_sync(ptr, 0, bytes.max(1)) }.map_err(cuda_err("clearing device memory"))?;
        Ok(DeviceBuffer { ptr, bytes, ctx: ctx.clone() })
    }
    fn fits(&self, len: usize) -> Result<()> {
        if len > self.bytes.max(1) {
            return Err(RuntimeError::Arguments {
                function: "cuda".into(),
                message: format!("{len} bytes do not fit a device buffer of {}", self.bytes),
            });
        }
        Ok(())
    }
    fn upload(&self, host: &[u8]) -> Result<()> {
        self.fits(host.len())?;
        // SAFETY: `host.len()` bytes fit the allocation.
        unsafe { result::memcpy_htod_sync(self.ptr, host) }.map_err(cuda_err("copying to the device"))
    }
    fn download(&self, host: &mut [u8]) -> Result<()> {
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
struct PinnedBuffer {
    ptr: *mut u8,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl PinnedBuffer {
    fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
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
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `bytes` initialised bytes at `ptr`, owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
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

/// Inputs of one call staged on the device: per input of the function,
/// pinned host memory and a device buffer, the event after their copies
/// (on the copy stream) and the event after stream 0 took them into the
/// function's input buffers (so the slot may be written again).
struct Slot {
    host: Vec<PinnedBuffer>,
    device: Vec<DeviceBuffer>,
    copied: CudaEvent,
    taken: CudaEvent,
}

/// A function's two staging slots: while a call computes on one batch, the
/// next batch is copied into the other.
struct Staging {
    slots: [Slot; 2],
    /// Slots staged and not yet taken by a call, oldest first.
    queue: std::collections::VecDeque<usize>,
    /// The slot the next `stage` writes.
    next: usize,
}

/// A loaded GPU artifact: its manifest, the PTX module for this device's
/// chip, each call's kernel and the constants on the device.
pub struct CudaModule {
    manifest: Manifest,
    ctx: Arc<CudaContext>,
    /// Stream 0: uploads, downloads, graph capture, and every call when
    /// the schedule has one stream.
    stream: Arc<CudaStream>,
    /// Streams 1.. of the schedule (`ll-schedule`), as many as the
    /// functions use.
    side: Vec<Arc<CudaStream>>,
    module: sys::CUmodule,
    /// Per function, per call.
    kernels: HashMap<String, Vec<sys::CUfunction>>,
    constants: Vec<DeviceBuffer>,
    /// Which PTX was loaded.
    pub chip: String,
}

impl CudaModule {
    /// Loads `dir` onto GPU `ordinal`: the sm_90 PTX on compute capability
    /// 9 and above, else the sm_80 one (the driver JIT-compiles it).
    pub fn load(dir: &Path, ordinal: usize) -> Result<Self> {
        let load_err = |path: &Path, message: String| RuntimeError::Load { path: path.to_path_buf(), message };
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|e| load_err(&path, e.to_string()))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| load_err(&path, e.to_string()))?;
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
        let ptx_path = dir.join(format!("kernels.{chip}.ptx"));
        let ptx = std::fs::read(&ptx_path).map_err(|e| load_err(&ptx_path, e.to_string()))?;
        let ptx = CString::new(ptx).map_err(|_| load_err(&ptx_path, "a NUL byte in the PTX".into()))?;
        ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        // SAFETY: a NUL-terminated PTX image.
        let module = unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
            .map_err(|e| load_err(&ptx_path, format!("the driver rejects the PTX: {e}")))?;
        let mut kernels = HashMap::new();
        for f in &manifest.functions {
            let mut resolved = Vec::new();
            for (k, c) in f.calls.iter().enumerate() {
                let Some(launch) = c.launch else {
                    return Err(load_err(&path, format!("@{} call #{k} has no launch shape", f.name)));
                };
                let name =
                    CString::new(c.symbol.clone()).map_err(|_| load_err(&path, "a kernel name with a NUL".into()))?;
                // SAFETY: the module is loaded and alive for this CudaModule.
                let func = unsafe { result::module::get_function(module, name) }
                    .map_err(|e| load_err(&ptx_path, format!("no kernel {} (for @{}): {e}", c.symbol, f.name)))?;
                // Dynamic shared memory over the default 48 KiB must be
                // asked for per kernel (the big tensor-core GEMM tiles).
                if launch.shared_bytes > 48 * 1024 {
                    let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
                    // SAFETY: `func` was just resolved in the loaded module.
                    unsafe { result::function::set_function_attribute(func, attribute, launch.shared_bytes as i32) }
                        .map_err(|e| {
                            load_err(
                                &ptx_path,
                                format!("{} needs {} bytes of shared memory: {e}", c.symbol, launch.shared_bytes),
                            )
                        })?;
                }
                resolved.push(func);
            }
            kernels.insert(f.name.clone(), resolved);
        }
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
        Ok(CudaModule { manifest, ctx, stream, side, module, kernels, constants, chip: chip.into() })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
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
        let _ = unsafe { result::module::unload(self.module) };
    }
}

/// What a function's calls need on the device between calls.
struct Bound {
    /// Per argument: its buffer (inputs, outputs, arena); symbols live in
    /// the session's table.
    args: Vec<Option<DeviceBuffer>>,
    /// Per call: the kernel's parameter values (work, then pointers).
    params: Vec<Vec<u64>>,
    graph: Option<CudaGraph>,
    calls: u64,
    /// The schedule's events, by id; then, per side stream, the event it
    /// starts after (stream 0's work so far) and the one stream 0 joins.
    events: Vec<CudaEvent>,
    fork: Option<CudaEvent>,
    joins: Vec<CudaEvent>,
    /// The side streams (1..) the function's calls use.
    used: Vec<usize>,
    staging: Staging,
    /// A call launched and not yet finished.
    running: bool,
    /// Per call: the cuBLASLt plan that runs it instead of its kernel (a
    /// GEMM the registry gave to the library).
    library: Vec<Option<cublas::Plan>>,
}

/// Which GEMM runs a GEMM call that cuBLASLt could also run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPolicy {
    /// The faster on this device, measured once per shape and remembered
    /// in the registry's cache (the default).
    Measure,
    /// Always the generated kernel.
    Generated,
    /// Always cuBLASLt where it is present.
    Library,
}

/// Parameters and optimizer state on the GPU, and calls of the module's
/// functions on them.
pub struct CudaSession {
    module: CudaModule,
    symbols: HashMap<String, DeviceBuffer>,
    bound: HashMap<String, Bound>,
    /// Replay a captured CUDA Graph from the second call on (default on).
    pub graphs: bool,
    /// Run calls on the schedule's streams, ordered by its events (default
    /// on); off, every call runs on stream 0 in program order.
    pub streams: bool,
    /// Host-to-device copies of staged inputs, beside the computation.
    copies: Arc<CudaStream>,
    /// Which GEMM runs calls that have a cuBLASLt candidate; set before a
    /// function's first call.
    pub gemm: GemmPolicy,
    /// cuBLASLt's handle and workspace, made when a GEMM first needs them
    /// (or why they cannot be).
    lt: Option<std::result::Result<(cublas::Handle, DeviceBuffer), String>>,
    registry: Option<Registry>,
}

impl CudaSession {
    /// Parameters initialised as [`crate::session::Session::new`] does
    /// (the same numbers for the same seed), then copied to the device.
    pub fn new(module: CudaModule, seed: u64) -> Result<Self> {
        let host = initial_symbols(&module.manifest.symbols, seed)?;
        let mut symbols = HashMap::new();
        for (name, bytes) in host {
            let d = DeviceBuffer::zeroed(&module.ctx, bytes.len())?;
            d.upload(bytes.as_bytes())?;
            symbols.insert(name, d);
        }
        let copies = module.ctx.new_stream().map_err(cuda_err("creating the copy stream"))?;
        Ok(CudaSession {
            module,
            symbols,
            bound: HashMap::new(),
            graphs: true,
            streams: true,
            copies,
            gemm: GemmPolicy::Measure,
            lt: None,
            registry: None,
        })
    }

    pub fn module(&self) -> &CudaModule {
        &self.module
    }

    /// The current value of a parameter or state symbol.
    pub fn symbol(&self, name: &str) -> Option<Tensor> {
        let s = self.module.manifest.symbols.iter().find(|s| s.name == name)?;
        let d = self.symbols.get(name)?;
        let mut host = Bytes::zeroed(d.bytes);
        self.module.stream.synchronize().ok()?;
        d.download(host.as_bytes_mut()).ok()?;
        Some(Tensor::new(s.shape.clone(), s.dtype, read_values(host.as_bytes(), s.dtype)))
    }

    /// Every symbol, by name (for checkpoints and comparisons).
    pub fn symbols(&self) -> BTreeMap<String, Tensor> {
        self.module.manifest.symbols.iter().filter_map(|s| Some((s.name.clone(), self.symbol(&s.name)?))).collect()
    }

    fn bind(&mut self, function: &str) -> Result<()> {
        if self.bound.contains_key(function) {
            return Ok(());
        }
        let f = self.module.function(function)?.clone();
        let mut args = Vec::new();
        let mut pointers = Vec::new();
        for a in &f.args {
            match a.role() {
                Role::Symbol(s) => {
                    let d = self.symbols.get(&s).ok_or_else(|| RuntimeError::Arguments {
                        function: function.into(),
                        message: format!("no buffer for symbol @{s}"),
                    })?;
                    pointers.push(d.ptr);
                    args.push(None);
                }
                _ => {
                    let d = DeviceBuffer::zeroed(&self.module.ctx, a.bytes())?;
                    pointers.push(d.ptr);
                    args.push(Some(d));
                }
            }
        }
        let arena = f.args.iter().position(|a| a.role() == Role::Arena);
        let mut params = Vec::new();
        for (k, c) in f.calls.iter().enumerate() {
            let mut p = vec![c.work];
            for b in &c.buffers {
                p.push(match *b {
                    Buffer::Arg { index } => pointers[index],
                    Buffer::Arena { offset } => {
                        let a = arena.ok_or_else(|| RuntimeError::Kernel {
                            function: function.into(),
                            call: k,
                            op: c.op.clone(),
                            message: "an arena offset in a function without an arena".into(),
                        })?;
                        pointers[a] + offset
                    }
                    Buffer::Constant { index } => self.module.constants[index].ptr,
                });
            }
            params.push(p);
        }
        let event = || self.module.ctx.new_event(None).map_err(cuda_err("creating an event"));
        let ids = f
            .calls
            .iter()
            .flat_map(|c| c.waits.iter().copied().chain(c.event))
            .map(|e| e as usize + 1)
            .max()
            .unwrap_or(0);
        let events = (0..ids).map(|_| event()).collect::<Result<Vec<_>>>()?;
        let fork = if self.module.side.is_empty() { None } else { Some(event()?) };
        let joins = self.module.side.iter().map(|_| event()).collect::<Result<Vec<_>>>()?;
        let used = (1..=self.module.side.len()).filter(|&s| f.calls.iter().any(|c| c.stream as usize == s)).collect();
        let inputs: Vec<usize> = f.args.iter().filter(|a| a.role() == Role::Input).map(|a| a.bytes()).collect();
        let slot = || -> Result<Slot> {
            Ok(Slot {
                host: inputs.iter().map(|&b| PinnedBuffer::new(&self.module.ctx, b)).collect::<Result<_>>()?,
                device: inputs.iter().map(|&b| DeviceBuffer::zeroed(&self.module.ctx, b)).collect::<Result<_>>()?,
                copied: event()?,
                taken: event()?,
            })
        };
        let staging = Staging { slots: [slot()?, slot()?], queue: Default::default(), next: 0 };
        let mut library = Vec::new();
        for (k, c) in f.calls.iter().enumerate() {
            library.push(self.choose_gemm(function, k, c, &params[k])?);
        }
        self.bound.insert(
            function.into(),
            Bound { args, params, graph: None, calls: 0, events, fork, joins, used, staging, running: false, library },
        );
        Ok(())
    }

    /// Launches call `k` of `function` on `stream`: its kernel, or the
    /// cuBLASLt GEMM the registry chose for it.
    fn launch_one(&self, function: &str, k: usize, stream: &CudaStream) -> Result<()> {
        let c = &self.module.function(function)?.calls[k];
        let err =
            |message: String| RuntimeError::Kernel { function: function.into(), call: k, op: c.op.clone(), message };
        let bound = &self.bound[function];
        let params = &bound.params[k];
        if let (Some(plan), Some(g), Some(Ok((handle, workspace)))) = (&bound.library[k], &c.library, &self.lt) {
            let at = |p: usize| params[1 + p];
            // SAFETY: the call's buffers hold the GEMM's matrices by the
            // compiler's plan; the workspace is the session's.
            return unsafe { plan.run(handle, at(g.a), at(g.b), at(g.out), workspace.ptr, stream.cu_stream()) }
                .map_err(err);
        }
        let launch = c.launch.ok_or_else(|| err("no launch shape".into()))?;
        launch_kernel(self.module.kernels[function][k], launch, params, stream).map_err(|e| err(e.to_string()))
    }

    /// How many calls of `function` cuBLASLt runs (after its first call).
    pub fn library_calls(&self, function: &str) -> usize {
        self.bound.get(function).map_or(0, |b| b.library.iter().filter(|p| p.is_some()).count())
    }

    /// cuBLASLt's handle and workspace, made on first use.
    fn lt(&mut self) -> std::result::Result<&cublas::Handle, String> {
        if self.lt.is_none() {
            let made = cublas::Handle::new().and_then(|h| {
                let w = DeviceBuffer::zeroed(&self.module.ctx, cublas::WORKSPACE_BYTES).map_err(|e| e.to_string())?;
                Ok((h, w))
            });
            self.lt = Some(made);
        }
        match &self.lt {
            Some(Ok((h, _))) => Ok(h),
            Some(Err(why)) => Err(why.clone()),
            None => Err("cuBLASLt not set up".into()),
        }
    }

    /// The cuBLASLt plan that runs call `k` (buffers at `params`, as the
    /// kernel takes them), if the call has a cuBLASLt candidate and the
    /// policy or the registry picks it. Measuring runs both candidates on
    /// scratch buffers of the call's sizes, never on the session's.
    fn choose_gemm(&mut self, function: &str, k: usize, c: &Call, params: &[u64]) -> Result<Option<cublas::Plan>> {
        let (Some(g), policy) = (&c.library, self.gemm) else { return Ok(None) };
        let Some(gpu) = &g.gpu else { return Ok(None) };
        if policy == GemmPolicy::Generated {
            return Ok(None);
        }
        let Ok(handle) = self.lt() else { return Ok(None) };
        let at = |p: usize| params[1 + p];
        let bias = gpu.bias.map(|(p, _)| at(p));
        // A shape cuBLASLt has no algorithm for stays generated.
        let Ok(plan) = cublas::Plan::new(handle, g, gpu, bias, [at(g.a), at(g.b), at(g.out)]) else {
            return Ok(None);
        };
        if policy == GemmPolicy::Library {
            return Ok(Some(plan));
        }
        let key = Registry::gpu_key(g, gpu, &self.module.device_name());
        let registry = self.registry.get_or_insert_with(Registry::open);
        if let Some(choice) = registry.get_named(&key) {
            return Ok((choice == LIBRARY).then_some(plan));
        }
        let (generated, library) = self.measure_gemm(function, k, c, g, gpu)?;
        let pick = if library < generated { LIBRARY } else { "generated" };
        if let Some(r) = &self.registry {
            r.set_named(key, pick, &[("generated", generated), (LIBRARY, library)]);
        }
        Ok((pick == LIBRARY).then_some(plan))
    }

    /// Milliseconds per run of call `k`'s kernel and of cuBLASLt on the same
    /// GEMM, on scratch buffers (mean of 5 after 2 warm-ups each).
    fn measure_gemm(
        &mut self,
        function: &str,
        k: usize,
        c: &Call,
        g: &LibraryGemm,
        gpu: &GpuGemm,
    ) -> Result<(f64, f64)> {
        let size = |p: usize| -> usize {
            let elements = if p == g.a {
                g.a_batch * g.batch.saturating_sub(1) + g.m * g.k
            } else if p == g.b {
                g.b_batch * g.batch.saturating_sub(1) + g.k * g.n
            } else if p == g.out {
                g.batch * g.m * g.n
            } else {
                g.n
            };
            let t = if p == g.a || p == g.b {
                gpu.operands
            } else if p == g.out {
                gpu.output
            } else {
                gpu.bias.map_or(DType::F32, |(_, t)| t)
            };
            elements * t.bytes()
        };
        let scratch = (0..c.buffers.len())
            .map(|p| DeviceBuffer::zeroed(&self.module.ctx, size(p)))
            .collect::<Result<Vec<_>>>()?;
        let mut params = vec![c.work];
        params.extend(scratch.iter().map(|b| b.ptr));
        let stream = self.module.stream.clone();
        let err = |message: String| RuntimeError::Kernel {
            function: function.into(),
            call: k,
            op: c.op.clone(),
            message: format!("measuring the GEMM candidates: {message}"),
        };
        let launch = c.launch.ok_or_else(|| err("no launch shape".into()))?;
        let kernel = self.module.kernels[function][k];
        let time = |run: &dyn Fn() -> std::result::Result<(), String>| -> Result<f64> {
            for _ in 0..2 {
                run().map_err(err)?;
            }
            let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = stream.record_event(flags).map_err(|e| err(e.to_string()))?;
            for _ in 0..5 {
                run().map_err(err)?;
            }
            let end = stream.record_event(flags).map_err(|e| err(e.to_string()))?;
            end.synchronize().map_err(|e| err(e.to_string()))?;
            Ok(start.elapsed_ms(&end).map_err(|e| err(e.to_string()))? as f64 / 5.0)
        };
        let generated = time(&|| launch_kernel(kernel, launch, &params, &stream).map_err(|e| e.to_string()))?;
        let handle = self.lt().map_err(err)?;
        let at = |p: usize| scratch[p].ptr;
        let bias = gpu.bias.map(|(p, _)| at(p));
        let plan = cublas::Plan::new(handle, g, gpu, bias, [at(g.a), at(g.b), at(g.out)]).map_err(err)?;
        let Some(Ok((handle, workspace))) = &self.lt else { return Err(err("cuBLASLt not set up".into())) };
        // SAFETY: the scratch buffers hold the GEMM's sizes; the workspace
        // is the session's; both outlive the synchronised timing.
        let library =
            time(&|| unsafe { plan.run(handle, at(g.a), at(g.b), at(g.out), workspace.ptr, stream.cu_stream()) })?;
        Ok((generated, library))
    }

    /// Launches every kernel of `function`: on the schedule's streams
    /// (with `streams`), which start after stream 0's work so far, wait for
    /// the events the schedule names, and rejoin stream 0 at the end (so a
    /// graph captured on stream 0 holds them all); else on stream 0. With
    /// `check`, waits for each kernel and names the one that failed.
    fn launch_all(&self, function: &str, check: bool) -> Result<()> {
        let f = self.module.function(function)?;
        let bound = &self.bound[function];
        let main = &self.module.stream;
        let used = &bound.used;
        let multi = self.streams && !used.is_empty();
        let event_err = |k: usize, c: &crate::artifact::Call| {
            let (function, op) = (function.to_string(), c.op.clone());
            move |e: DriverError| RuntimeError::Kernel {
                function,
                call: k,
                op,
                message: format!("ordering the streams: {e}"),
            }
        };
        if multi && let Some(fork) = &bound.fork {
            fork.record(main).map_err(cuda_err(format!("@{function}: forking the streams")))?;
            for &s in used {
                self.module.side[s - 1].wait(fork).map_err(cuda_err(format!("@{function}: forking the streams")))?;
            }
        }
        for (k, c) in f.calls.iter().enumerate() {
            let stream = if multi && c.stream > 0 { &self.module.side[c.stream as usize - 1] } else { main };
            if multi {
                for &w in &c.waits {
                    stream.wait(&bound.events[w as usize]).map_err(event_err(k, c))?;
                }
            }
            self.launch_one(function, k, stream)?;
            if multi && let Some(e) = c.event {
                bound.events[e as usize].record(stream).map_err(event_err(k, c))?;
            }
            if check {
                stream.synchronize().map_err(|e| RuntimeError::Kernel {
                    function: function.into(),
                    call: k,
                    op: c.op.clone(),
                    message: format!("failed on the device: {e}"),
                })?;
            }
        }
        if multi {
            for &s in used {
                let join = &bound.joins[s - 1];
                join.record(&self.module.side[s - 1]).map_err(cuda_err(format!("@{function}: joining the streams")))?;
                main.wait(join).map_err(cuda_err(format!("@{function}: joining the streams")))?;
            }
        }
        Ok(())
    }

    /// Per kernel of `function`, in program order: its `ll` op and its time
    /// in milliseconds, each launch timed alone with CUDA events (after a
    /// call on `inputs`, so the buffers hold real values).
    pub fn profile(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<(String, f64)>> {
        self.call(function, inputs)?;
        let stream = self.module.stream.clone();
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let calls = self.module.function(function)?.calls.clone();
        let mut out = Vec::new();
        for (k, c) in calls.iter().enumerate() {
            let start = stream.record_event(flags).map_err(cuda_err("recording an event"))?;
            self.launch_one(function, k, &stream)?;
            let end = stream.record_event(flags).map_err(cuda_err("recording an event"))?;
            end.synchronize().map_err(cuda_err(format!("@{function} kernel #{k}")))?;
            out.push((c.op.clone(), start.elapsed_ms(&end).map_err(cuda_err("reading the events"))? as f64));
        }
        Ok(out)
    }

    /// Calls `function` with its inputs in signature order; returns its
    /// outputs in signature order (as [`crate::session::Session::call`]).
    /// The inputs go through [`CudaSession::stage`] (pinned memory, an
    /// asynchronous copy); [`CudaSession::call_each`] overlaps that copy
    /// with the previous call.
    pub fn call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.stage(function, inputs)?;
        self.launch(function)?;
        self.finish(function)
    }

    /// Calls `function` on each batch of inputs in turn, copying batch i + 1
    /// to the device while call i computes; returns each call's outputs.
    /// This is the training loop's form: the copies of a batch cost no time
    /// on the device's critical path.
    pub fn call_each(&mut self, function: &str, batches: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>> {
        fn refs(b: &[Tensor]) -> Vec<&Tensor> {
            b.iter().collect()
        }
        let mut outputs = Vec::with_capacity(batches.len());
        if let Some(first) = batches.first() {
            self.stage(function, &refs(first))?;
        }
        for i in 0..batches.len() {
            self.launch(function)?;
            if let Some(next) = batches.get(i + 1) {
                self.stage(function, &refs(next))?;
            }
            outputs.push(self.finish(function)?);
        }
        Ok(outputs)
    }

    /// Checks `inputs` and starts copying them to the device for a later
    /// [`CudaSession::launch`] of `function`: they are written to pinned
    /// host memory and copied on the copy stream, beside whatever runs. Two
    /// calls' inputs can be staged at once.
    pub fn stage(&mut self, function: &str, inputs: &[&Tensor]) -> Result<()> {
        let bad = |message: String| RuntimeError::Arguments { function: function.into(), message };
        let f = self.module.function(function)?.clone();
        if let Some(problem) = input_mismatch(&f, inputs) {
            return Err(bad(problem));
        }
        // Integer inputs used as indices are checked on the host: a bad
        // label is an error here, not a wild read on the device.
        for c in &f.calls {
            for check in &c.index_checks {
                let Buffer::Arg { index } = c.buffers[check.operand] else { continue };
                let position = f.args[..index].iter().filter(|a| a.role() == Role::Input).count();
                if f.args[index].role() != Role::Input {
                    continue;
                }
                if let Some((i, v)) = inputs[position]
                    .values
                    .iter()
                    .enumerate()
                    .find(|(_, v)| (**v < 0.0 || **v >= check.bound as f64) && Some(**v as i64) != check.allowed)
                {
                    return Err(bad(format!("{} {v} at position {i} is outside [0, {})", check.what, check.bound)));
                }
            }
        }
        self.bind(function)?;
        let copies = self.copies.clone();
        let bound = self.bound.get_mut(function).ok_or_else(|| RuntimeError::NoFunction(function.into()))?;
        let staging = &mut bound.staging;
        if staging.queue.len() == staging.slots.len() {
            return Err(bad("two calls' inputs are already staged; launch one first".into()));
        }
        let s = staging.next;
        let slot = &mut staging.slots[s];
        let copy_err = |what: &str| cuda_err(format!("@{function}: {what}"));
        // The slot's last copy has left its pinned memory, and stream 0 has
        // taken its device buffers, before either is written again.
        slot.copied.synchronize().map_err(copy_err("waiting for the last input copy"))?;
        copies.wait(&slot.taken).map_err(copy_err("ordering the input copy"))?;
        let dtypes = f.args.iter().filter(|a| a.role() == Role::Input).map(|a| a.dtype);
        for (((t, dtype), host), device) in inputs.iter().zip(dtypes).zip(&mut slot.host).zip(&slot.device) {
            write_values(host.as_bytes_mut(), dtype, &t.values);
            let bytes = host.as_bytes();
            device.fits(bytes.len())?;
            // SAFETY: `bytes` fit the device buffer; the pinned memory stays
            // untouched until `copied` (recorded next) has passed.
            unsafe { result::memcpy_htod_async(device.ptr, bytes, copies.cu_stream()) }
                .map_err(copy_err("copying inputs to the device"))?;
        }
        slot.copied.record(&copies).map_err(copy_err("recording the input copy"))?;
        staging.queue.push_back(s);
        staging.next = (s + 1) % staging.slots.len();
        Ok(())
    }

    /// Starts `function` on the oldest staged inputs (see
    /// [`CudaSession::stage`]) without waiting for it: stream 0 waits for
    /// their copy, takes them into the function's input buffers, then runs
    /// the kernels (the first call one by one, checking each; then a CUDA
    /// Graph captured once and replayed). [`CudaSession::finish`] waits and
    /// returns the outputs.
    pub fn launch(&mut self, function: &str) -> Result<()> {
        let bad = |message: String| RuntimeError::Arguments { function: function.into(), message };
        let f = self.module.function(function)?;
        let bound = self.bound.get_mut(function).ok_or_else(|| bad("no inputs staged (call stage first)".into()))?;
        if bound.running {
            return Err(bad("the last call is still running (call finish first)".into()));
        }
        let Some(s) = bound.staging.queue.pop_front() else {
            return Err(bad("no inputs staged (call stage first)".into()));
        };
        let main = self.module.stream.clone();
        let slot = &bound.staging.slots[s];
        let copy_err = |what: &str| cuda_err(format!("@{function}: {what}"));
        main.wait(&slot.copied).map_err(copy_err("waiting for the input copy"))?;
        let args = f.args.iter().zip(&bound.args).filter(|(a, _)| a.role() == Role::Input);
        for ((a, d), staged) in args.zip(&slot.device) {
            if let Some(d) = d {
                // SAFETY: both buffers hold the input's `a.bytes()` bytes.
                unsafe { result::memcpy_dtod_async(d.ptr, staged.ptr, a.bytes(), main.cu_stream()) }
                    .map_err(copy_err("taking the staged inputs"))?;
            }
        }
        slot.taken.record(&main).map_err(copy_err("recording the taken inputs"))?;
        let bound = &self.bound[function];
        if let Some(graph) = &bound.graph {
            graph.launch().map_err(cuda_err(format!("@{function}: replaying its CUDA Graph")))?;
        } else if self.graphs && bound.calls >= 1 {
            // Capture the function's launches once, then replay them.
            main.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(cuda_err(format!("@{function}: starting a graph capture")))?;
            let launched = self.launch_all(function, false);
            let graph = main.end_capture(sys::CUgraphInstantiate_flags(0));
            launched?;
            let graph = graph.map_err(cuda_err(format!("@{function}: ending the graph capture")))?;
            if let Some(g) = &graph {
                g.launch().map_err(cuda_err(format!("@{function}: launching its CUDA Graph")))?;
            }
            if let Some(b) = self.bound.get_mut(function) {
                b.graph = graph;
            }
        } else {
            // The first call checks each kernel as it runs: an error names it.
            self.launch_all(function, bound.calls == 0)?;
        }
        if let Some(b) = self.bound.get_mut(function) {
            b.running = true;
        }
        Ok(())
    }

    /// Waits for the call of `function` that [`CudaSession::launch`]
    /// started; returns its outputs in signature order.
    pub fn finish(&mut self, function: &str) -> Result<Vec<Tensor>> {
        let f = self.module.function(function)?;
        let result = self.module.stream.synchronize();
        // A function never launched has no bound state yet: that is the
        // same mistake as finishing twice.
        let bound = self.bound.get_mut(function).filter(|b| b.running);
        let Some(bound) = bound else {
            return Err(RuntimeError::Arguments {
                function: function.into(),
                message: "no call running (call launch first)".into(),
            });
        };
        bound.running = false;
        result.map_err(cuda_err(format!("@{function}: running on the device")))?;
        bound.calls += 1;
        let mut outputs = Vec::new();
        for (a, d) in f.args.iter().zip(&bound.args) {
            if let (Role::Output, Some(d)) = (a.role(), d) {
                let mut host = Bytes::zeroed(a.bytes());
                d.download(host.as_bytes_mut())?;
                outputs.push(Tensor::new(a.shape.clone(), a.dtype, read_values(host.as_bytes(), a.dtype)));
            }
        }
        Ok(outputs)
    }

    /// Runs `function` `steps` times on the inputs already on the device
    /// (graph replay when enabled, no copies); returns the mean time per
    /// call in milliseconds, measured with CUDA events.
    pub fn time(&mut self, function: &str, inputs: &[&Tensor], steps: usize) -> Result<f64> {
        self.call(function, inputs)?;
        self.call(function, inputs)?;
        let stream = self.module.stream.clone();
        let start =
            stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err("recording an event"))?;
        for _ in 0..steps {
            match &self.bound[function].graph {
                Some(g) => g.launch().map_err(cuda_err("replaying"))?,
                None => self.launch_all(function, false)?,
            }
        }
        let end =
            stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err("recording an event"))?;
        end.synchronize().map_err(cuda_err("waiting for the steps"))?;
        let ms = start.elapsed_ms(&end).map_err(cuda_err("reading the events"))?;
        Ok(ms as f64 / steps.max(1) as f64)
    }
}

/// Whether libcublasLt can be loaded here (without it, GEMMs run the
/// generated kernels).
pub fn cublaslt_present() -> bool {
    cublas::present()
}

/// The registry's name for the cuBLASLt candidate.
const LIBRARY: &str = "cublaslt";

/// Launches `kernel` with `launch`'s shape on `stream`, its parameters
/// `params` (work, then buffer addresses).
fn launch_kernel(
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

/// One check of the GPU test bundle (`make gpu-bundle`): an artifact
/// compiled for CUDA, calls with their inputs, and what the CPU path (the
/// reference interpreter for single kernels, the CPU backend for train
/// steps) returned for them, to a stated tolerance.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BundleCase {
    pub name: String,
    pub function: String,
    pub seed: u64,
    /// Relative tolerance: |gpu - cpu| <= tol (1 + |cpu|).
    pub tol: f64,
    pub calls: Vec<BundleCall>,
    /// Symbols after the last call (train steps), by name.
    pub symbols: BTreeMap<String, Tensor>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BundleCall {
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
}

/// A GEMM check of the GPU test bundle (`gemm.json` beside an artifact of
/// one `ll.gemm`, function `f(a, b[, bias]) -> out`): inputs too big to
/// ship are made on the GPU machine, and the reference is computed there,
/// on the host. Inputs are multiples of 1/8 in [-1, 1], exact in f16 and
/// bf16, so products are exact and an f32 result is exact up to the order
/// of the sums; a 16-bit result is the exact value rounded once.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GemmCheck {
    pub batch: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// `a` stored k x m, `b` stored n x k.
    pub ta: bool,
    pub tb: bool,
    pub dtype: DType,
    pub out: DType,
    pub bias: bool,
    pub relu: bool,
    /// Relative tolerance, as in [`compare`].
    pub tol: f64,
}

impl GemmCheck {
    fn value(i: usize, salt: usize) -> f64 {
        ((i * 7919 + salt * 104_729) % 17) as f64 / 8.0 - 1.0
    }

    /// The inputs: `a`, `b` and (with `bias`) the bias, each batch's
    /// matrices stored as the transposes say.
    pub fn inputs(&self) -> Vec<Tensor> {
        let (b, m, k, n) = (self.batch, self.m, self.k, self.n);
        let make = |shape: Vec<usize>, dtype: DType, salt: usize| {
            let len: usize = shape.iter().product();
            Tensor::new(shape, dtype, (0..len).map(|i| Self::value(i, salt)).collect())
        };
        let lead = |r: usize, c: usize| if b > 1 { vec![b, r, c] } else { vec![r, c] };
        let a = make(if self.ta { lead(k, m) } else { lead(m, k) }, self.dtype, 1);
        let bm = make(if self.tb { lead(n, k) } else { lead(k, n) }, self.dtype, 2);
        let mut inputs = vec![a, bm];
        if self.bias {
            inputs.push(make(vec![n], self.out, 3));
        }
        inputs
    }

    /// The result on the host: `relu(op(a) op(b) + bias)` per batch, in f64.
    pub fn reference(&self, inputs: &[Tensor]) -> Tensor {
        let (b, m, k, n) = (self.batch, self.m, self.k, self.n);
        let (a, bm) = (&inputs[0].values, &inputs[1].values);
        let mut out = vec![0.0; b * m * n];
        for z in 0..b {
            let (a, bm) = (&a[z * m * k..], &bm[z * k * n..]);
            for i in 0..m {
                for j in 0..n {
                    let mut y: f64 = (0..k)
                        .map(|p| {
                            let x = if self.ta { a[p * m + i] } else { a[i * k + p] };
                            let w = if self.tb { bm[j * k + p] } else { bm[p * n + j] };
                            x * w
                        })
                        .sum();
                    if self.bias {
                        y += inputs[2].values[j];
                    }
                    if self.relu {
                        y = y.max(0.0);
                    }
                    out[(z * m + i) * n + j] = y;
                }
            }
        }
        Tensor::new(if b > 1 { vec![b, m, n] } else { vec![m, n] }, self.out, out)
    }
}

/// Compares `got` with `want` element by element; the first difference
/// beyond `tol` (relative, NaN only where NaN is expected) as an error.
pub fn compare(what: &str, got: &Tensor, want: &Tensor, tol: f64) -> std::result::Result<f64, String> {
    if got.shape != want.shape {
        return Err(format!("{what}: shape {:?}, expected {:?}", got.shape, want.shape));
    }
    let mut worst: f64 = 0.0;
    for (i, (g, w)) in got.values.iter().zip(&want.values).enumerate() {
        if w.is_nan() != g.is_nan() || (w.is_infinite() && g != w) {
            return Err(format!("{what}[{i}]: GPU {g}, CPU {w}"));
        }
        if w.is_finite() {
            let err = (g - w).abs() / (1.0 + w.abs());
            if err > tol {
                return Err(format!("{what}[{i}]: GPU {g}, CPU {w} (relative difference {err:.2e} > {tol:.0e})"));
            }
            worst = worst.max(err);
        }
    }
    Ok(worst)
}
