//! What eager mode needs of a GPU: device memory that a tensor owns, and
//! one op's compiled function launched on buffers the caller chooses.
//!
//! A compiled session ([`super::CudaSession`]) binds fixed buffers to each
//! function and replays CUDA graphs. Eager mode cannot: every op runs on
//! the buffers of the tensors it is given. So an [`EagerStream`] (one per
//! GPU and thread) orders everything: each op's launches, the clearing of
//! its outputs, copies, and the stream-ordered allocator's allocations and
//! frees (`cuMemAllocAsync`/`cuMemFreeAsync`, which reuse freed blocks
//! as PyTorch's caching allocator does). Launches return at once; a
//! download waits for the stream, as `tensor.cpu()` does in PyTorch, and
//! reports a failed kernel there.

use super::{CudaModule, available, cuda_err, launch_kernel};
use crate::artifact::{Buffer, Role};
use crate::error::{Result, RuntimeError};
use cudarc::driver::{CudaContext, CudaStream, result, sys};
use std::sync::Arc;

/// One GPU's stream for eager ops, in program order.
pub struct EagerStream {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    ordinal: usize,
}

impl EagerStream {
    /// A stream on GPU `ordinal`; an error says why no GPU can be used.
    pub fn open(ordinal: usize) -> Result<Arc<EagerStream>> {
        let device = format!("cuda:{ordinal}");
        available().map_err(|message| RuntimeError::Device { device: device.clone(), message })?;
        let ctx = CudaContext::new(ordinal).map_err(cuda_err(format!("opening GPU {ordinal}")))?;
        let stream = ctx.new_stream().map_err(cuda_err("creating the eager stream"))?;
        // The default pool returns freed blocks to the system at every
        // synchronisation (its release threshold is 0); eager mode
        // synchronises on every read back, so keep them for reuse, as
        // PyTorch's caching allocator does.
        ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let mut keep = u64::MAX;
        // SAFETY: the device's default pool, and a u64 attribute value.
        unsafe {
            sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device())
                .result()
                .map_err(cuda_err("reading the device's memory pool"))?;
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut keep as *mut u64 as *mut std::ffi::c_void,
            )
            .result()
            .map_err(cuda_err("setting the memory pool's release threshold"))?;
        }
        Ok(Arc::new(EagerStream { ctx, stream, ordinal }))
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn device_name(&self) -> String {
        self.ctx.name().unwrap_or_default()
    }

    /// `bytes` of device memory, cleared (in stream order).
    pub fn zeroed(self: &Arc<Self>, bytes: usize) -> Result<DeviceMemory> {
        self.ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        let s = self.stream.cu_stream();
        // SAFETY: a fresh stream-ordered allocation of at least one byte,
        // cleared on the same stream before anything else can use it.
        let ptr = unsafe { result::malloc_async(s, bytes.max(1)) }
            .map_err(cuda_err(format!("allocating {bytes} bytes on cuda:{}", self.ordinal)))?;
        let memory = DeviceMemory { ptr, bytes, stream: self.clone() };
        unsafe { result::memset_d8_async(ptr, 0, bytes.max(1), s) }.map_err(cuda_err("clearing device memory"))?;
        Ok(memory)
    }

    /// `host`'s bytes in new device memory.
    pub fn upload(self: &Arc<Self>, host: &[u8]) -> Result<DeviceMemory> {
        let memory = self.zeroed(host.len())?;
        memory.write(host)?;
        Ok(memory)
    }

    /// Waits for every op so far; a kernel that failed reports here.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        self.stream.synchronize().map_err(cuda_err(format!("running eager ops on cuda:{}", self.ordinal)))
    }
}

/// Device memory owned by one eager tensor (or a kernel's arena), freed
/// in stream order when dropped.
pub struct DeviceMemory {
    ptr: cudarc::driver::sys::CUdeviceptr,
    bytes: usize,
    stream: Arc<EagerStream>,
}

impl std::fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceMemory({} bytes on cuda:{})", self.bytes, self.stream.ordinal)
    }
}

impl DeviceMemory {
    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    pub fn stream(&self) -> &Arc<EagerStream> {
        &self.stream
    }

    fn check(&self, len: usize, what: &str) -> Result<()> {
        if len != self.bytes {
            return Err(RuntimeError::Arguments {
                function: what.into(),
                message: format!("{len} bytes for device memory of {}", self.bytes),
            });
        }
        Ok(())
    }

    /// Replaces the contents with `host` (exactly as many bytes); returns
    /// once the bytes are on the device.
    pub fn write(&self, host: &[u8]) -> Result<()> {
        self.check(host.len(), "copying to the device")?;
        self.stream.ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        if !host.is_empty() {
            // SAFETY: `host.len()` bytes fit; the wait below keeps `host`
            // alive until the copy has read it.
            unsafe { result::memcpy_htod_async(self.ptr, host, self.stream.stream.cu_stream()) }
                .map_err(cuda_err("copying to the device"))?;
        }
        self.stream.synchronize()
    }

    /// The contents, after every op so far on the stream.
    pub fn read(&self, host: &mut [u8]) -> Result<()> {
        self.check(host.len(), "copying from the device")?;
        self.stream.ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        if !host.is_empty() {
            // SAFETY: as in write.
            unsafe { result::memcpy_dtoh_async(host, self.ptr, self.stream.stream.cu_stream()) }
                .map_err(cuda_err("copying from the device"))?;
        }
        self.stream.synchronize()
    }

    /// A copy on the same device (in stream order).
    pub fn try_clone(&self) -> Result<DeviceMemory> {
        let copy = self.stream.zeroed(self.bytes)?;
        if self.bytes > 0 {
            // SAFETY: both hold `bytes` bytes, ordered on one stream.
            unsafe { result::memcpy_dtod_async(copy.ptr, self.ptr, self.bytes, self.stream.stream.cu_stream()) }
                .map_err(cuda_err("copying on the device"))?;
        }
        Ok(copy)
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        let _ = self.stream.ctx.bind_to_thread();
        // SAFETY: allocated on this stream by malloc_async, freed once,
        // after every op already queued on the stream that may use it.
        let _ = unsafe { result::free_async(self.ptr, self.stream.stream.cu_stream()) };
    }
}

impl CudaModule {
    /// Launches `function`'s kernels in program order on `stream`, on
    /// `args` (one per argument of the function in signature order:
    /// inputs, outputs, arena), with the module loaded on the stream's GPU.
    /// A function that reads a symbol or sums over replicas is refused.
    ///
    /// Integer operands that index (labels, token ids) are checked first,
    /// as the CPU and a compiled session check them: their values are
    /// read back (waiting for the stream), so a bad index is an error
    /// naming it, never a read or write outside a buffer.
    pub fn launch_on(&self, stream: &EagerStream, function: &str, args: &[&DeviceMemory]) -> Result<()> {
        let f = self.function(function)?;
        let fail = |message: String| RuntimeError::Arguments { function: function.into(), message };
        if self.ordinal != stream.ordinal {
            return Err(fail(format!(
                "the module is loaded on cuda:{}, the launch is on cuda:{}",
                self.ordinal, stream.ordinal
            )));
        }
        if args.len() != f.args.len() {
            return Err(fail(format!("{} buffers for {} arguments", args.len(), f.args.len())));
        }
        for (a, m) in f.args.iter().zip(args) {
            if let Role::Symbol(s) = a.role() {
                return Err(fail(format!("an eager launch has no symbol @{s}")));
            }
            if m.bytes < a.bytes() {
                return Err(fail(format!("argument {} needs {} bytes, its buffer has {}", a.bind, a.bytes(), m.bytes)));
            }
            if m.stream.ordinal != stream.ordinal {
                return Err(fail(format!(
                    "argument {} is on cuda:{}, the launch on cuda:{}",
                    a.bind, m.stream.ordinal, stream.ordinal
                )));
            }
        }
        for (k, c) in f.calls.iter().enumerate() {
            for check in &c.index_checks {
                let Some(Buffer::Arg { index }) = c.buffers.get(check.operand).copied() else { continue };
                if f.args.get(index).map(|a| a.role()) != Some(Role::Input) {
                    continue;
                }
                let width = check.dtype.bytes();
                let memory = args[index];
                let mut bytes = vec![0u8; memory.bytes];
                memory.read(&mut bytes)?;
                let count = check.count.min(bytes.len() / width.max(1));
                if let Err(message) = crate::host::check_index_bytes(check, &bytes[..count * width]) {
                    return Err(RuntimeError::Kernel { function: function.into(), call: k, op: c.op.clone(), message });
                }
            }
        }
        let arena = f.args.iter().position(|a| a.role() == Role::Arena);
        let kernels = self.kernels.get(function).ok_or_else(|| RuntimeError::NoFunction(function.into()))?;
        stream.ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        for (k, c) in f.calls.iter().enumerate() {
            let err = |message: String| RuntimeError::Kernel {
                function: function.into(),
                call: k,
                op: c.op.clone(),
                message,
            };
            if c.collective.is_some() {
                return Err(err("an eager op has no collective".into()));
            }
            let mut params = vec![c.work];
            for b in &c.buffers {
                params.push(match *b {
                    Buffer::Arg { index } => {
                        args.get(index).map(|m| m.ptr).ok_or_else(|| err(format!("no argument {index}")))?
                    }
                    Buffer::Arena { offset } => {
                        let a = arena.ok_or_else(|| err("an arena offset in a function without an arena".into()))?;
                        args[a].ptr + offset
                    }
                    Buffer::Constant { index } => {
                        self.constants.get(index).map(|d| d.ptr).ok_or_else(|| err(format!("no constant {index}")))?
                    }
                });
            }
            let launch = c.launch.ok_or_else(|| err("no launch shape".into()))?;
            let kernel = *kernels.get(k).ok_or_else(|| err("no kernel".into()))?;
            launch_kernel(kernel, launch, &params, &stream.stream).map_err(|e| err(e.to_string()))?;
        }
        Ok(())
    }
}
