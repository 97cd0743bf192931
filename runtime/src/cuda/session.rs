//! The CUDA backend's session: one model's parameters and optimizer state
//! on the device, and the modules that run on them (the model as first
//! compiled, and variants of it compiled for other input shapes). Per
//! (module, function): an arena (the compiler's memory plan), fixed input
//! and output buffers, the kernels' parameters, two staging slots for
//! inputs, the schedule's events and, from the second call on, a CUDA
//! Graph of the whole function that later calls replay.

use super::{CudaModule, DeviceBuffer, LIBRARY, PinnedBuffer, cublas, cuda_err, launch_kernel, nccl};
use crate::artifact::{Buffer, Call, CollectiveOp, DType, GpuGemm, LibraryGemm, Manifest, Role};
use crate::backend::{Backend, TraceEvent, check_variant, no_module_for, trace_clock_us};
use crate::error::{Result, RuntimeError};
use crate::host::{Bytes, Tensor, check_input_indices, initial_symbols, input_mismatch, read_values, write_values};
use crate::registry::Registry;
use cudarc::driver::{CudaEvent, CudaGraph, CudaStream, DriverError, result, sys};
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

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
    queue: VecDeque<usize>,
    /// The slot the next `stage` writes.
    next: usize,
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
    /// While profiling: per call, the events around its launch.
    timing: Vec<(CudaEvent, CudaEvent)>,
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

/// A (module, function) pair: which compiled module of the session.
type Key = (usize, String);

/// Parameters and optimizer state on the GPU, and calls of the modules'
/// functions on them.
pub struct CudaSession {
    modules: Vec<CudaModule>,
    symbols: HashMap<String, DeviceBuffer>,
    bound: HashMap<Key, Bound>,
    /// Per function: the modules whose staged inputs wait for a launch,
    /// and those inputs, oldest first.
    staged: HashMap<String, VecDeque<(usize, Vec<Tensor>)>>,
    /// Replay a captured CUDA Graph from the second call on (default on;
    /// off while profiling).
    pub graphs: bool,
    /// Run calls on the schedule's streams, ordered by its events (default
    /// on); off, every call runs on stream 0 in program order.
    pub streams: bool,
    /// Host-to-device copies of staged inputs, beside the computation.
    copies: Arc<CudaStream>,
    /// Which GEMM runs calls that have a cuBLASLt candidate; set before a
    /// function's first call.
    pub gemm: GemmPolicy,
    /// Let f32 GEMMs run in TF32 on the tensor cores through cuBLASLt
    /// (PyTorch's `torch.backends.cuda.matmul.allow_tf32`): inputs rounded
    /// to 10 mantissa bits, products summed in f32. Off by default, as in
    /// PyTorch; `AICF_ALLOW_TF32=1` turns it on. Set before a function's
    /// first call. The generated f32 kernels stay full fp32, so with it on
    /// the registry compares them with cuBLASLt's TF32.
    pub allow_tf32: bool,
    /// cuBLASLt's handle and a workspace per stream (stream 0's first,
    /// then each side stream's), made when a GEMM first needs them (or why
    /// they cannot be). cuBLASLt's kernels keep counters in the workspace:
    /// two GEMMs running at once on one workspace can wait on each other
    /// forever (seen on an H100), so no two streams share one.
    lt: Option<std::result::Result<(cublas::Handle, Vec<DeviceBuffer>), String>>,
    registry: Option<Registry>,
    /// While profiling: the event every kernel's time is measured from,
    /// with the host clock when it was recorded, and the calls so far.
    profile: Option<(CudaEvent, f64, Vec<TraceEvent>)>,
    /// The NCCL communicator of a data-parallel run, and each collective
    /// call's pre-multiplied sum.
    nccl: Option<NcclGroup>,
}

/// This GPU's place in a data-parallel run's NCCL communicator.
struct NcclGroup {
    comm: nccl::Comm,
    /// `ncclRedOpCreatePreMulSum` of each collective call (by module,
    /// function and call), reading the call's weight buffer.
    ops: HashMap<(usize, String, usize), std::ffi::c_int>,
}

impl Drop for NcclGroup {
    fn drop(&mut self) {
        if let Ok(lib) = nccl::nccl() {
            // SAFETY: the ops and the communicator were made by this NCCL
            // and nothing uses them after this.
            unsafe {
                for &op in self.ops.values() {
                    (lib.red_op_destroy)(op, self.comm);
                }
                (lib.comm_destroy)(self.comm);
            }
        }
    }
}

impl CudaSession {
    /// Parameters initialised as the CPU session does (the same numbers
    /// for the same seed), then copied to the device.
    pub fn new(module: CudaModule, seed: u64) -> Result<Self> {
        let host = initial_symbols(&module.manifest.symbols, seed, module.weights.as_deref())?;
        let mut symbols = HashMap::new();
        for (name, bytes) in host {
            let d = DeviceBuffer::zeroed(&module.ctx, bytes.len())?;
            d.upload(bytes.as_bytes())?;
            symbols.insert(name, d);
        }
        let copies = module.ctx.new_stream().map_err(cuda_err("creating the copy stream"))?;
        Ok(CudaSession {
            modules: vec![module],
            symbols,
            bound: HashMap::new(),
            staged: HashMap::new(),
            graphs: !env_off("AICF_CUDA_GRAPHS"),
            streams: !env_off("AICF_CUDA_STREAMS"),
            copies,
            gemm: GemmPolicy::Measure,
            allow_tf32: allow_tf32_env()?,
            lt: None,
            registry: None,
            profile: None,
            nccl: None,
        })
    }

    /// Joins the NCCL communicator of the run `comm` is a replica of (any
    /// size, one included): rank 0 makes its id and sends it to the
    /// others over `comm`. From then on the collectives of every call
    /// (`ll.all_reduce`) are NCCL all-reduces on their stream, each
    /// replica's buffers scaled by its weight (a pre-multiplied sum).
    pub fn join_nccl(&mut self, comm: &dyn crate::collective::Communicator) -> Result<()> {
        let device = self.modules.first().map(|m| format!("cuda:{}", m.ordinal)).unwrap_or_default();
        let fail = |message: String| RuntimeError::Device { device: device.clone(), message };
        let lib = nccl::nccl().map_err(fail)?;
        let mut id = nccl::UniqueId { internal: [0; 128] };
        if comm.rank() == 0 {
            // SAFETY: writes the 128 bytes of `id`.
            lib.check(unsafe { (lib.get_unique_id)(&mut id) }, "ncclGetUniqueId").map_err(fail)?;
        }
        let mut bytes = id.internal.to_vec();
        comm.broadcast(&mut bytes, 0, "the NCCL id").map_err(RuntimeError::from)?;
        id.internal = bytes.try_into().map_err(|_| fail("rank 0's NCCL id is not 128 bytes".into()))?;
        self.modules[0].ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        let mut handle: nccl::Comm = std::ptr::null_mut();
        // SAFETY: every rank passes the same id, its own rank and the size.
        let code = unsafe { (lib.comm_init_rank)(&mut handle, comm.size() as _, id, comm.rank() as _) };
        lib.check(code, &format!("ncclCommInitRank (rank {} of {})", comm.rank(), comm.size())).map_err(fail)?;
        self.nccl = Some(NcclGroup { comm: handle, ops: HashMap::new() });
        // Functions bound before made no NCCL operations: they bind again.
        self.bound.clear();
        Ok(())
    }

    /// The module the session was created with.
    pub fn module(&self) -> &CudaModule {
        &self.modules[0]
    }

    /// Adds `module`, the same model compiled for other input shapes.
    pub fn add_module(&mut self, module: CudaModule) -> Result<()> {
        check_variant(&self.modules[0].manifest, &module.manifest)?;
        self.modules.push(module);
        Ok(())
    }

    /// The module compiled for these inputs of `function`.
    fn module_for(&self, function: &str, inputs: &[&Tensor]) -> Result<usize> {
        let mut first_problem = None;
        for (i, m) in self.modules.iter().enumerate() {
            let Ok(f) = m.function(function) else { continue };
            match input_mismatch(f, inputs) {
                None => return Ok(i),
                Some(problem) => {
                    first_problem.get_or_insert(problem);
                }
            }
        }
        self.modules[0].function(function)?;
        let manifests: Vec<&Manifest> = self.modules.iter().map(|m| &m.manifest).collect();
        Err(no_module_for(function, &manifests, first_problem))
    }

    fn bind(&mut self, m: usize, function: &str) -> Result<()> {
        let key = (m, function.to_string());
        if self.bound.contains_key(&key) {
            return Ok(());
        }
        let module = &self.modules[m];
        let f = module.function(function)?.clone();
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
                    let d = DeviceBuffer::zeroed(&module.ctx, a.bytes())?;
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
                    Buffer::Constant { index } => module.constants[index].ptr,
                });
            }
            params.push(p);
        }
        let event = || module.ctx.new_event(None).map_err(cuda_err("creating an event"));
        let ids = f
            .calls
            .iter()
            .flat_map(|c| c.waits.iter().copied().chain(c.event))
            .map(|e| e as usize + 1)
            .max()
            .unwrap_or(0);
        let events = (0..ids).map(|_| event()).collect::<Result<Vec<_>>>()?;
        let fork = if module.side.is_empty() { None } else { Some(event()?) };
        let joins = module.side.iter().map(|_| event()).collect::<Result<Vec<_>>>()?;
        let used = (1..=module.side.len()).filter(|&s| f.calls.iter().any(|c| c.stream as usize == s)).collect();
        let inputs: Vec<usize> = f.args.iter().filter(|a| a.role() == Role::Input).map(|a| a.bytes()).collect();
        let slot = || -> Result<Slot> {
            Ok(Slot {
                host: inputs.iter().map(|&b| PinnedBuffer::new(&module.ctx, b)).collect::<Result<_>>()?,
                device: inputs.iter().map(|&b| DeviceBuffer::zeroed(&module.ctx, b)).collect::<Result<_>>()?,
                copied: event()?,
                taken: event()?,
            })
        };
        let staging = Staging { slots: [slot()?, slot()?], queue: Default::default(), next: 0 };
        // Timing events record when they pass (the schedule's do not).
        let timing_event =
            || module.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err("creating an event"));
        let timing = (0..f.calls.len()).map(|_| Ok((timing_event()?, timing_event()?))).collect::<Result<Vec<_>>>()?;
        let mut library = Vec::new();
        for (k, c) in f.calls.iter().enumerate() {
            library.push(self.choose_gemm(m, function, k, c, &params[k])?);
        }
        // Each collective's pre-multiplied sum, reading its weight buffer
        // (fixed by the plan) when it runs.
        if let Some(group) = &mut self.nccl {
            for (k, c) in f.calls.iter().enumerate() {
                let Some(coll) = c.collective.as_ref().filter(|c| c.op == CollectiveOp::AllReduceSum) else { continue };
                let fail = |message: String| RuntimeError::Kernel {
                    function: function.into(),
                    call: k,
                    op: c.op.clone(),
                    message,
                };
                if coll.dtypes.iter().any(|&d| d != DType::F32) {
                    return Err(fail(format!("an NCCL all-reduce of {:?} (f32 buffers only)", coll.dtypes)));
                }
                let lib = nccl::nccl().map_err(fail)?;
                let weight = *params[k].last().ok_or_else(|| fail("a collective without its weight".into()))?;
                let mut op: std::ffi::c_int = 0;
                // SAFETY: `weight` is the device address of the call's f32
                // weight buffer, alive as long as this binding.
                let code = unsafe {
                    (lib.red_op_create_pre_mul_sum)(
                        &mut op,
                        weight as *mut std::ffi::c_void,
                        nccl::FLOAT32,
                        nccl::SCALAR_DEVICE,
                        group.comm,
                    )
                };
                lib.check(code, "ncclRedOpCreatePreMulSum").map_err(fail)?;
                group.ops.insert((m, function.to_string(), k), op);
            }
        }
        if library.iter().any(Option::is_some) {
            let streams = 1 + self.modules[m].side.len();
            if let Some(Ok((_, workspaces))) = &mut self.lt {
                while workspaces.len() < streams {
                    workspaces.push(DeviceBuffer::zeroed(&self.modules[m].ctx, cublas::WORKSPACE_BYTES)?);
                }
            }
        }
        self.bound.insert(
            key,
            Bound {
                args,
                params,
                graph: None,
                calls: 0,
                events,
                fork,
                joins,
                used,
                staging,
                running: false,
                library,
                timing,
            },
        );
        Ok(())
    }

    /// Launches call `k` of `function` of module `m` on `stream`: its
    /// kernel, or the cuBLASLt GEMM the registry chose for it.
    /// `lane` is the stream's index (0: stream 0, s: side stream s), which
    /// picks its cuBLASLt workspace.
    fn launch_one(&self, m: usize, function: &str, k: usize, stream: &CudaStream, lane: usize) -> Result<()> {
        let c = &self.modules[m].function(function)?.calls[k];
        let err =
            |message: String| RuntimeError::Kernel { function: function.into(), call: k, op: c.op.clone(), message };
        // A collective: NCCL's grouped all-reduces of its buffers on this
        // stream; alone (no NCCL), a sum over this replica at weight 1
        // (`stage` refuses another weight).
        if let Some(coll) = &c.collective {
            // A micro-batch's share: each buffer times the weight, by the
            // built-in kernel, on this stream.
            if coll.op == CollectiveOp::Scale {
                let scale =
                    self.modules[m].scale.ok_or_else(|| err("the built-in scale kernel is not loaded".into()))?;
                if coll.dtypes.iter().any(|&d| d != DType::F32) {
                    return Err(err(format!("a micro-batch's share of {:?} buffers (f32 only)", coll.dtypes)));
                }
                let params = &self.bound[&(m, function.to_string())].params[k];
                let weight = *params.last().ok_or_else(|| err("a collective without its weight".into()))?;
                for (i, bytes) in c.bytes.iter().take(coll.dtypes.len()).enumerate() {
                    let n = bytes / 4;
                    let blocks = u32::try_from(n.div_ceil(256).max(1))
                        .map_err(|_| err(format!("{n} values are more than one launch scales")))?;
                    let launch = crate::artifact::Launch { grid: [blocks, 1, 1], block: [256, 1, 1], shared_bytes: 0 };
                    launch_kernel(scale, launch, &[n, params[1 + i], weight], stream)
                        .map_err(|e| err(format!("scaling by the weight: {e}")))?;
                }
                return Ok(());
            }
            let Some(group) = &self.nccl else { return Ok(()) };
            let lib = nccl::nccl().map_err(err)?;
            let params = &self.bound[&(m, function.to_string())].params[k];
            let op = *group
                .ops
                .get(&(m, function.to_string(), k))
                .ok_or_else(|| err("no NCCL operation for this collective".into()))?;
            // SAFETY: each buffer holds `bytes / 4` f32 values on this
            // device; NCCL reads and writes them in place on `stream`.
            unsafe {
                lib.check((lib.group_start)(), "ncclGroupStart").map_err(err)?;
                for (i, bytes) in c.bytes.iter().take(coll.dtypes.len()).enumerate() {
                    let ptr = params[1 + i] as *mut std::ffi::c_void;
                    let code = (lib.all_reduce)(
                        ptr,
                        ptr,
                        (*bytes / 4) as usize,
                        nccl::FLOAT32,
                        op,
                        group.comm,
                        stream.cu_stream() as *mut std::ffi::c_void,
                    );
                    if code != 0 {
                        let _ = (lib.group_end)();
                        return Err(err(format!("ncclAllReduce: {}", lib.error(code))));
                    }
                }
                lib.check((lib.group_end)(), "ncclGroupEnd").map_err(err)?;
            }
            return Ok(());
        }
        let bound = &self.bound[&(m, function.to_string())];
        let params = &bound.params[k];
        if let (Some(plan), Some(g), Some(Ok((handle, workspaces)))) = (&bound.library[k], &c.library, &self.lt) {
            let at = |p: usize| params[1 + p];
            let workspace =
                workspaces.get(lane).ok_or_else(|| err(format!("no cuBLASLt workspace for stream {lane}")))?;
            // SAFETY: the call's buffers hold the GEMM's matrices by the
            // compiler's plan; the workspace is this stream's alone.
            return unsafe { plan.run(handle, at(g.a), at(g.b), at(g.out), workspace.ptr, stream.cu_stream()) }
                .map_err(err);
        }
        let launch = c.launch.ok_or_else(|| err("no launch shape".into()))?;
        launch_kernel(self.modules[m].kernels[function][k], launch, params, stream).map_err(|e| err(e.to_string()))
    }

    /// How many calls of `function` cuBLASLt runs (after its first call),
    /// in the module the session was created with.
    pub fn library_calls(&self, function: &str) -> usize {
        self.bound.get(&(0, function.to_string())).map_or(0, |b| b.library.iter().filter(|p| p.is_some()).count())
    }

    /// Whether a GEMM on `gpu`'s operands runs in TF32 ([`Self::allow_tf32`]).
    fn tf32_for(&self, gpu: &GpuGemm) -> bool {
        self.allow_tf32 && gpu.operands == DType::F32
    }

    /// cuBLASLt's handle and workspace, made on first use.
    fn lt(&mut self) -> std::result::Result<&cublas::Handle, String> {
        if self.lt.is_none() {
            let ctx = self.modules[0].ctx.clone();
            let made = cublas::Handle::new().and_then(|h| {
                let w = DeviceBuffer::zeroed(&ctx, cublas::WORKSPACE_BYTES).map_err(|e| e.to_string())?;
                Ok((h, vec![w]))
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
    fn choose_gemm(
        &mut self,
        m: usize,
        function: &str,
        k: usize,
        c: &Call,
        params: &[u64],
    ) -> Result<Option<cublas::Plan>> {
        let (Some(g), policy) = (&c.library, self.gemm) else { return Ok(None) };
        let Some(gpu) = &g.gpu else { return Ok(None) };
        if policy == GemmPolicy::Generated {
            return Ok(None);
        }
        let tf32 = self.tf32_for(gpu);
        let Ok(handle) = self.lt() else { return Ok(None) };
        let at = |p: usize| params[1 + p];
        let bias = gpu.bias.map(|(p, _)| at(p));
        // A shape cuBLASLt has no algorithm for stays generated.
        let Ok(plan) = cublas::Plan::new(handle, g, gpu, bias, [at(g.a), at(g.b), at(g.out)], tf32) else {
            return Ok(None);
        };
        if policy == GemmPolicy::Library {
            return Ok(Some(plan));
        }
        let mut key = Registry::gpu_key(g, gpu, &self.modules[m].device_name());
        if tf32 {
            key.push_str(" tf32");
        }
        let registry = self.registry.get_or_insert_with(Registry::open);
        if let Some(choice) = registry.get_named(&key) {
            return Ok((choice == LIBRARY).then_some(plan));
        }
        let log = logging();
        if log {
            eprintln!("@{function} #{k} measuring the GEMM candidates of {key}");
        }
        let (generated, library) = self.measure_gemm(m, function, k, c, g, gpu)?;
        if log {
            eprintln!("@{function} #{k} generated {generated:.3} ms, cuBLASLt {library:.3} ms");
        }
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
        m: usize,
        function: &str,
        k: usize,
        c: &Call,
        g: &LibraryGemm,
        gpu: &GpuGemm,
    ) -> Result<(f64, f64)> {
        let _timing = crate::registry::MeasuringTimer::start(true);
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
        let module = &self.modules[m];
        let scratch =
            (0..c.buffers.len()).map(|p| DeviceBuffer::zeroed(&module.ctx, size(p))).collect::<Result<Vec<_>>>()?;
        let mut params = vec![c.work];
        params.extend(scratch.iter().map(|b| b.ptr));
        let stream = module.stream.clone();
        let err = |message: String| RuntimeError::Kernel {
            function: function.into(),
            call: k,
            op: c.op.clone(),
            message: format!("measuring the GEMM candidates: {message}"),
        };
        let launch = c.launch.ok_or_else(|| err("no launch shape".into()))?;
        let kernel = module.kernels[function][k];
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
        let at = |p: usize| scratch[p].ptr;
        let bias = gpu.bias.map(|(p, _)| at(p));
        let tf32 = self.tf32_for(gpu);
        let handle = self.lt().map_err(err)?;
        let plan = cublas::Plan::new(handle, g, gpu, bias, [at(g.a), at(g.b), at(g.out)], tf32).map_err(err)?;
        let Some(Ok((handle, workspaces))) = &self.lt else { return Err(err("cuBLASLt not set up".into())) };
        let workspace = &workspaces[0];
        // SAFETY: the scratch buffers hold the GEMM's sizes; the workspace
        // is the session's; both outlive the synchronised timing.
        let library =
            time(&|| unsafe { plan.run(handle, at(g.a), at(g.b), at(g.out), workspace.ptr, stream.cu_stream()) })?;
        Ok((generated, library))
    }

    /// Launches every kernel of `function` of module `m`: on the schedule's
    /// streams (with `streams`), which start after stream 0's work so far,
    /// wait for the events the schedule names, and rejoin stream 0 at the
    /// end (so a graph captured on stream 0 holds them all); else on stream
    /// 0. With `check`, waits for each kernel and names the one that failed.
    /// While profiling, each launch is timed by a pair of events.
    fn launch_all(&self, m: usize, function: &str, check: bool) -> Result<()> {
        let module = &self.modules[m];
        let f = module.function(function)?;
        let bound = &self.bound[&(m, function.to_string())];
        let main = &module.stream;
        let used = &bound.used;
        let multi = self.streams && !used.is_empty();
        let timed = self.profile.is_some();
        let event_err = |k: usize, c: &Call| {
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
                module.side[s - 1].wait(fork).map_err(cuda_err(format!("@{function}: forking the streams")))?;
            }
        }
        for (k, c) in f.calls.iter().enumerate() {
            let lane = if multi { c.stream as usize } else { 0 };
            let stream = if lane > 0 { &module.side[lane - 1] } else { main };
            if multi {
                for &w in &c.waits {
                    stream.wait(&bound.events[w as usize]).map_err(event_err(k, c))?;
                }
            }
            if timed {
                bound.timing[k].0.record(stream).map_err(event_err(k, c))?;
            }
            self.launch_one(m, function, k, stream, lane)?;
            if timed {
                bound.timing[k].1.record(stream).map_err(event_err(k, c))?;
            }
            if multi && let Some(e) = c.event {
                bound.events[e as usize].record(stream).map_err(event_err(k, c))?;
            }
            if check {
                wait_checked(stream, function, k, c)?;
            }
        }
        if multi {
            for &s in used {
                let join = &bound.joins[s - 1];
                join.record(&module.side[s - 1]).map_err(cuda_err(format!("@{function}: joining the streams")))?;
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
        let m = self.module_for(function, inputs)?;
        let stream = self.modules[m].stream.clone();
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let calls = self.modules[m].function(function)?.calls.clone();
        let mut out = Vec::new();
        for (k, c) in calls.iter().enumerate() {
            let start = stream.record_event(flags).map_err(cuda_err("recording an event"))?;
            self.launch_one(m, function, k, &stream, 0)?;
            let end = stream.record_event(flags).map_err(cuda_err("recording an event"))?;
            end.synchronize().map_err(cuda_err(format!("@{function} kernel #{k}")))?;
            out.push((c.op.clone(), start.elapsed_ms(&end).map_err(cuda_err("reading the events"))? as f64));
        }
        Ok(out)
    }

    /// Calls `function` with its inputs in signature order; returns its
    /// outputs in signature order. The inputs go through
    /// [`CudaSession::stage`] (pinned memory, an asynchronous copy);
    /// [`CudaSession::call_each`] overlaps that copy with the previous call.
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
    /// [`CudaSession::launch`] of `function` (by the module compiled for
    /// their shapes): they are written to pinned host memory and copied on
    /// the copy stream, beside whatever runs. Two calls' inputs can be
    /// staged at once.
    pub fn stage(&mut self, function: &str, inputs: &[&Tensor]) -> Result<()> {
        let bad = |message: String| RuntimeError::Arguments { function: function.into(), message };
        let m = self.module_for(function, inputs)?;
        let f = self.modules[m].function(function)?.clone();
        crate::host::check_integer_inputs(&f, inputs).map_err(bad)?;
        check_input_indices(&f, inputs).map_err(bad)?;
        self.bind(m, function)?;
        let copies = self.copies.clone();
        let bound =
            self.bound.get_mut(&(m, function.to_string())).ok_or_else(|| RuntimeError::NoFunction(function.into()))?;
        let staging = &mut bound.staging;
        if staging.queue.len() == staging.slots.len() {
            return Err(bad("two calls' inputs are already staged; launch one first".into()));
        }
        // A data-parallel step alone sums over itself at weight 1: another
        // weight needs its group (NCCL).
        let sums = f.calls.iter().any(|c| c.collective.as_ref().is_some_and(|c| c.op == CollectiveOp::AllReduceSum));
        if self.nccl.is_none() && sums {
            let weight = f.args.iter().filter(|a| a.role() == Role::Input).position(|a| a.bind == "replica_weight");
            if let Some(w) = weight.and_then(|i| inputs.get(i)).and_then(|t| t.values.first())
                && *w != 1.0
            {
                return Err(bad(format!(
                    "replica_weight {w}: a data-parallel step on CUDA weighs its gradients only in an NCCL group \
                     (CudaSession::join_nccl)"
                )));
            }
        }
        let s = staging.next;
        let slot = &mut staging.slots[s];
        let copy_err = |what: &str| cuda_err(format!("@{function}: {what}"));
        // The slot's last copy has left its pinned memory, and stream 0 has
        // taken its device buffers, before either is written again.
        trace(|| format!("@{function}: staging inputs, waiting for the slot's last copy"));
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
        self.staged
            .entry(function.to_string())
            .or_default()
            .push_back((m, inputs.iter().map(|t| (*t).clone()).collect()));
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
        if self.running(function).is_some() {
            return Err(bad("the last call is still running (call finish first)".into()));
        }
        let Some((m, _)) = self.staged.get_mut(function).and_then(|q| q.pop_front()) else {
            self.modules[0].function(function)?;
            return Err(bad("no inputs staged (call stage first)".into()));
        };
        let key = (m, function.to_string());
        let module = &self.modules[m];
        let f = module.function(function)?;
        let bound = self.bound.get_mut(&key).ok_or_else(|| bad("no inputs staged (call stage first)".into()))?;
        let Some(s) = bound.staging.queue.pop_front() else {
            return Err(bad("no inputs staged (call stage first)".into()));
        };
        let main = module.stream.clone();
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
        let bound = &self.bound[&key];
        // A profiled call launches kernel by kernel, each between events.
        let replay = self.graphs && self.profile.is_none();
        trace(|| {
            format!(
                "@{function}: launch (call {}, {})",
                bound.calls,
                if bound.graph.is_some() && replay {
                    "replay"
                } else if replay && bound.calls >= 1 {
                    "capture"
                } else {
                    "kernel by kernel"
                }
            )
        });
        if let (Some(graph), true) = (&bound.graph, replay) {
            graph.launch().map_err(cuda_err(format!("@{function}: replaying its CUDA Graph")))?;
        } else if replay && bound.calls >= 1 {
            // Capture the function's launches once, then replay them.
            main.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(cuda_err(format!("@{function}: starting a graph capture")))?;
            let launched = self.launch_all(m, function, false);
            let graph = main.end_capture(sys::CUgraphInstantiate_flags(0));
            launched?;
            let graph = graph.map_err(cuda_err(format!("@{function}: ending the graph capture")))?;
            if let Some(g) = &graph {
                g.launch().map_err(cuda_err(format!("@{function}: launching its CUDA Graph")))?;
            }
            if let Some(b) = self.bound.get_mut(&key) {
                b.graph = graph;
            }
        } else {
            // The first call checks each kernel as it runs: an error names it.
            self.launch_all(m, function, bound.calls == 0)?;
        }
        if let Some(b) = self.bound.get_mut(&key) {
            b.running = true;
        }
        Ok(())
    }

    /// [`Backend::call_staging_next`]: inputs the previous call staged are
    /// used when they are these; `next` is copied while this call runs.
    pub fn call_staging_next(
        &mut self,
        function: &str,
        inputs: &[&Tensor],
        next: Option<&[&Tensor]>,
    ) -> Result<Vec<Tensor>> {
        let queued = self.staged.get(function).and_then(|q| q.front());
        let ready = queued.is_some_and(|(_, s)| s.len() == inputs.len() && s.iter().zip(inputs).all(|(a, b)| a == *b));
        if !ready {
            self.drop_staged(function);
            self.stage(function, inputs)?;
        }
        self.launch(function)?;
        // A batch that cannot be staged now (a shape no module has yet) is
        // staged, or refused, by the call that runs it.
        if let Some(next) = next
            && self.module_for(function, next).is_ok()
            && self.stage(function, next).is_err()
        {
            self.drop_staged(function);
        }
        self.finish(function)
    }

    /// Forgets the inputs staged for `function` and not launched (their
    /// slots are written again only after their copies finish).
    fn drop_staged(&mut self, function: &str) {
        let Some(queue) = self.staged.get_mut(function) else { return };
        for (m, _) in queue.drain(..) {
            if let Some(b) = self.bound.get_mut(&(m, function.to_string())) {
                b.staging.queue.clear();
            }
        }
    }

    /// The module whose call of `function` was launched and not finished.
    fn running(&self, function: &str) -> Option<usize> {
        self.bound.iter().find(|((_, f), b)| f == function && b.running).map(|((m, _), _)| *m)
    }

    /// Waits for the call of `function` that [`CudaSession::launch`]
    /// started; returns its outputs in signature order.
    pub fn finish(&mut self, function: &str) -> Result<Vec<Tensor>> {
        self.modules[0].function(function)?;
        // A function never launched has no running call: that is the same
        // mistake as finishing twice.
        let Some(m) = self.running(function) else {
            return Err(RuntimeError::Arguments {
                function: function.into(),
                message: "no call running (call launch first)".into(),
            });
        };
        let module = &self.modules[m];
        let f = module.function(function)?;
        trace(|| format!("@{function}: finish, waiting for the device"));
        let result = wait_stream(&module.stream);
        trace(|| format!("@{function}: finished ({result:?})"));
        let key = (m, function.to_string());
        let calls = self.bound.get(&key).map_or(0, |b| b.calls);
        let Some(bound) = self.bound.get_mut(&key) else { return Err(RuntimeError::NoFunction(function.into())) };
        bound.running = false;
        match result {
            Ok(true) => {}
            Ok(false) => {
                return Err(RuntimeError::Driver {
                    what: format!("@{function}: call {calls}"),
                    message: format!(
                        "still running after {:.0} s (set AICF_KERNEL_TIMEOUT to wait longer; AICF_KERNEL_LOG=1 \
                         AICF_CUDA_GRAPHS=0 AICF_CUDA_STREAMS=0 narrow down which kernel hangs)",
                        kernel_timeout().as_secs_f64()
                    ),
                });
            }
            Err(e) => return Err(cuda_err(format!("@{function}: running on the device"))(e)),
        }
        bound.calls += 1;
        let mut outputs = Vec::new();
        for (a, d) in f.args.iter().zip(&bound.args) {
            if let (Role::Output, Some(d)) = (a.role(), d) {
                let mut host = Bytes::zeroed(a.bytes());
                d.download(host.as_bytes_mut())?;
                outputs.push(Tensor::new(a.shape.clone(), a.dtype, read_values(host.as_bytes(), a.dtype)));
            }
        }
        if let Some((base, base_us, trace)) = &mut self.profile {
            for (k, c) in f.calls.iter().enumerate() {
                let (start, end) = &bound.timing[k];
                let at = base.elapsed_ms(start).map_err(cuda_err("reading the profile's events"))? as f64;
                let took = start.elapsed_ms(end).map_err(cuda_err("reading the profile's events"))? as f64;
                trace.push(TraceEvent {
                    function: function.into(),
                    call: k,
                    kernel: c.symbol.clone(),
                    op: c.op.clone(),
                    origin: c.origin.clone(),
                    stream: if self.streams { c.stream } else { 0 },
                    start_us: *base_us + at * 1e3,
                    duration_us: took * 1e3,
                });
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
        let m = self.module_for(function, inputs)?;
        let stream = self.modules[m].stream.clone();
        let start =
            stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err("recording an event"))?;
        for _ in 0..steps {
            match &self.bound[&(m, function.to_string())].graph {
                Some(g) => g.launch().map_err(cuda_err("replaying"))?,
                None => self.launch_all(m, function, false)?,
            }
        }
        let end =
            stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda_err("recording an event"))?;
        end.synchronize().map_err(cuda_err("waiting for the steps"))?;
        let ms = start.elapsed_ms(&end).map_err(cuda_err("reading the events"))?;
        Ok(ms as f64 / steps.max(1) as f64)
    }

    /// Waits for everything queued on the session's streams.
    fn synchronize(&self) -> Result<()> {
        for m in &self.modules {
            m.stream.synchronize().map_err(cuda_err("waiting for the device"))?;
        }
        Ok(())
    }
}

impl Backend for CudaSession {
    fn device(&self) -> String {
        let m = &self.modules[0];
        format!("cuda {} ({})", m.device_name(), m.chip)
    }

    fn manifest(&self) -> &Manifest {
        &self.modules[0].manifest
    }

    fn add_variant(&mut self, dir: &Path) -> Result<()> {
        let ordinal = self.modules[0].ordinal;
        let module = CudaModule::load(dir, ordinal)?;
        self.add_module(module)
    }

    fn compiled_for(&self, function: &str, inputs: &[&Tensor]) -> bool {
        self.modules.iter().any(|m| m.function(function).is_ok_and(|f| input_mismatch(f, inputs).is_none()))
    }

    fn call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        CudaSession::call(self, function, inputs)
    }

    fn call_each(&mut self, function: &str, batches: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>> {
        CudaSession::call_each(self, function, batches)
    }

    fn call_staging_next(
        &mut self,
        function: &str,
        inputs: &[&Tensor],
        next: Option<&[&Tensor]>,
    ) -> Result<Vec<Tensor>> {
        CudaSession::call_staging_next(self, function, inputs, next)
    }

    fn set_communicator(&mut self, comm: std::sync::Arc<dyn crate::collective::Communicator>) -> Result<()> {
        if comm.size() > 1 { self.join_nccl(comm.as_ref()) } else { Ok(()) }
    }

    fn symbol_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let d = self.symbols.get(name)?;
        self.synchronize().ok()?;
        let mut host = vec![0u8; d.bytes];
        d.download(&mut host).ok()?;
        Some(host)
    }

    fn set_symbol_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let err = |m: String| RuntimeError::Arguments { function: format!("set {name}"), message: m };
        let d = self.symbols.get(name).ok_or_else(|| err("no such symbol".into()))?;
        if d.bytes != bytes.len() {
            return Err(err(format!("{} bytes, the symbol holds {}", bytes.len(), d.bytes)));
        }
        // Nothing may still be reading the old value.
        self.synchronize()?;
        d.upload(bytes)
    }

    fn set_profiling(&mut self, on: bool) {
        self.profile = None;
        if on {
            let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            if let Ok(base) = self.modules[0].stream.record_event(flags) {
                self.profile = Some((base, trace_clock_us(), Vec::new()));
            }
        }
    }

    fn take_trace(&mut self) -> Vec<TraceEvent> {
        self.profile.as_mut().map(|(_, _, t)| std::mem::take(t)).unwrap_or_default()
    }

    fn gemm_choices(&self) -> std::collections::BTreeMap<String, String> {
        self.registry.as_ref().map(Registry::choices).unwrap_or_default()
    }

    fn pin_gemm_choices(&mut self, choices: &std::collections::BTreeMap<String, String>) {
        self.registry.get_or_insert_with(Registry::open).pin(choices);
        // The choice is made when a function is bound: bind again.
        self.bound.clear();
        self.staged.clear();
    }

    fn force_gemm(&mut self, candidate: Option<&str>) -> Result<()> {
        self.gemm = match candidate {
            None => GemmPolicy::Measure,
            Some("generated") => GemmPolicy::Generated,
            Some(LIBRARY) => GemmPolicy::Library,
            Some(other) => {
                return Err(RuntimeError::Arguments {
                    function: "force_gemm".into(),
                    message: format!("'{other}' is not a CUDA GEMM candidate (generated, {LIBRARY})"),
                });
            }
        };
        // The choice is made when a function is bound: bind again.
        self.bound.clear();
        self.staged.clear();
        Ok(())
    }

    fn set_allow_tf32(&mut self, on: bool) {
        if self.allow_tf32 != on {
            self.allow_tf32 = on;
            // The GEMMs' plans are made when a function is bound.
            self.bound.clear();
            self.staged.clear();
        }
    }
}

/// How long the runtime waits for the device (one kernel of a checked
/// call, or a whole call) before it reports a hang: `AICF_KERNEL_TIMEOUT`
/// seconds (default 300).
fn kernel_timeout() -> std::time::Duration {
    static TIMEOUT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        let secs = std::env::var("AICF_KERNEL_TIMEOUT").ok().and_then(|v| v.parse::<f64>().ok());
        std::time::Duration::from_secs_f64(secs.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(300.0))
    })
}

/// Whether `AICF_KERNEL_LOG` is set (read once: the launch and finish of
/// every step ask).
fn logging() -> bool {
    static LOG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOG.get_or_init(|| std::env::var_os("AICF_KERNEL_LOG").is_some())
}

/// Waits for everything queued on `stream` so far, polling an event
/// rather than blocking in the driver: `Ok(false)` when it is still
/// running after [`kernel_timeout`], so a hung kernel is an error, not a
/// silent hang of the whole program. It yields for the first 2 ms (a short
/// step is seen finished at once, as the driver's own spin would), then
/// polls every 200 us (at most that much later than the driver would
/// return: 1% of a 20 ms step).
fn wait_stream(stream: &CudaStream) -> std::result::Result<bool, DriverError> {
    let done = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?;
    let (start, limit) = (std::time::Instant::now(), kernel_timeout());
    while !done.try_is_complete()? {
        let waited = start.elapsed();
        if waited > limit {
            return Ok(false);
        }
        if waited < std::time::Duration::from_millis(2) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    Ok(true)
}

/// Waits for the kernel of call `k` just launched on `stream` (a checked
/// call): a fault names the kernel, and so does a kernel still running
/// after [`kernel_timeout`] (a deadlock or a runaway loop), never a silent
/// hang. With `AICF_KERNEL_LOG` set, each kernel's op, origin and time go
/// to stderr as it finishes.
fn wait_checked(stream: &CudaStream, function: &str, k: usize, c: &Call) -> Result<()> {
    let failed = |message: String| RuntimeError::Kernel {
        function: function.into(),
        call: k,
        op: c.op.clone(),
        message: match &c.origin {
            Some(origin) => format!("{message} (from {origin})"),
            None => message,
        },
    };
    let start = std::time::Instant::now();
    if !wait_stream(stream).map_err(|e| failed(format!("failed on the device: {e}")))? {
        return Err(failed(format!(
            "still running after {:.0} s (set AICF_KERNEL_TIMEOUT to wait longer): the kernel hangs or is far too slow",
            kernel_timeout().as_secs_f64()
        )));
    }
    if logging() {
        eprintln!(
            "@{function} #{k} {} {} ({}): {:.3} ms",
            c.op,
            c.symbol,
            c.origin.as_deref().unwrap_or("?"),
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// Whether the environment variable `name` is set to `0` (a debugging
/// switch: `AICF_CUDA_GRAPHS=0` launches kernel by kernel on every call,
/// `AICF_CUDA_STREAMS=0` runs every kernel on stream 0).
/// `AICF_ALLOW_TF32`: 1/true on, 0/false or unset off; anything else is
/// an error rather than silently fp32.
fn allow_tf32_env() -> Result<bool> {
    match std::env::var("AICF_ALLOW_TF32").as_deref().map(str::trim) {
        Err(_) | Ok("" | "0" | "false") => Ok(false),
        Ok("1" | "true") => Ok(true),
        Ok(other) => Err(RuntimeError::Arguments {
            function: "CudaSession::new".into(),
            message: format!("AICF_ALLOW_TF32={other}: expected 1, true, 0 or false"),
        }),
    }
}

fn env_off(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim() == "0")
}

/// With `AICF_KERNEL_LOG` set: what the session does, to stderr.
fn trace(what: impl FnOnce() -> String) {
    if logging() {
        eprintln!("{}", what());
    }
}
