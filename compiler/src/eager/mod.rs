//! Eager mode: tensors that hold their values, ops that run at once, and a
//! tape autograd (`loss.backward()`, `.grad()`), for debugging and for
//! models whose structure changes from batch to batch.
//!
//! Every op goes through one dispatch point, [`op_call`]: it traces the op
//! alone into an `hl` function with the layer API (so the op's own type
//! inference checks the operands), compiles that function through the same
//! pipeline and code generation as a compiled model (an inference
//! artifact: fusion, `convert-hl-to-ll`, kernels), and runs it. Kernels are
//! kept per (op, attributes, operand shapes and dtypes, device): in memory
//! for the process, and on disk as artifacts named by the hash of their IR
//! and target (and the CPU kernels themselves in the content-addressed
//! kernel cache), so a second process starts warm. There is no second,
//! hand-written kernel set.
//!
//! A tensor's values live on a device: host memory, or a GPU's memory
//! (`tensor.to(&Device::Cuda { ordinal: 0 })`). An op runs where its
//! inputs are (all on one device): on the CPU through the kernels'
//! shared library, on a GPU as the op's PTX launched on one stream per GPU
//! in program order, each output in memory of the stream-ordered
//! allocator. Reading values back (`host()`, `item()`) waits for the
//! stream.
//!
//! A result of an op on a tensor that requires a gradient remembers the op
//! and its inputs. `backward()` walks that record from the loss in reverse
//! topological order; each op's vector-Jacobian product is the op's own
//! `hl-autodiff` rule, compiled the same way (the op's function
//! `sum(op(x) * g)` differentiated with respect to its inputs), so eager and compiled
//! gradients come from one source. Only what ran is recorded: `if`, loops
//! and shapes that change between steps need nothing special.

mod composed;
pub mod optim;

pub use crate::nn::Reduction;
use crate::nn::{self, Conv2dOptions, DType, Mode, ModuleBuilder, Pool2dOptions, TensorSpec};
pub use aicf_runtime::backend::Device;
use aicf_runtime::{
    Tensor as Host,
    artifact::{DType as HostDType, Role},
    cpu::CpuModule,
    cuda::{
        CudaModule,
        eager::{DeviceMemory, EagerStream},
    },
    host::{Bytes, read_values, write_values},
};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EagerError {
    /// An op refused its operands (its own diagnostic, naming the types).
    /// `op` is the op's kernel key (its name, attributes and operand
    /// types); the message shows its name.
    #[error("{}: {message}", op_name(op))]
    Op { op: String, message: String },
    /// Compiling or running an op's kernel failed.
    #[error("{}: {message}", op_name(op))]
    Kernel { op: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = EagerError> = std::result::Result<T, E>;

/// An op's name in its kernel key (`hl.conv2d [("stride", ...)] tensor<...>`):
/// what an error shows (the cache's key is no help to a reader; the
/// diagnostic after it names the types).
fn op_name(key: &str) -> &str {
    key.split(' ').next().unwrap_or(key)
}

/// How one op is traced: a key naming it with its attributes, and the
/// layer-API call that builds it.
struct OpDef {
    key: String,
    build: Build,
}

/// Traces an op on its (traced) operands.
pub(crate) type Build = Box<dyn Fn(&[nn::Tensor]) -> nn::Result<nn::Tensor>>;

/// Runs the op that `build` traces (named `key` with its attributes) on
/// `inputs`: the entry of the layer API's eager graphs.
pub(crate) fn call(key: String, build: Build, inputs: &[&Tensor]) -> Result<Tensor> {
    op_call(&Rc::new(OpDef { key, build }), inputs)
}

/// A node of the tape: the op that made a tensor, and its inputs.
struct Node {
    op: Rc<OpDef>,
    inputs: Vec<Tensor>,
    /// Each input's storage version when the op ran: backward reads the
    /// inputs' values then, so one changed since (an optimizer step,
    /// `set_values`) is refused rather than differentiated at its new value.
    versions: Vec<u64>,
    /// Whether a `backward()` went through this node without keeping the
    /// graph (`backward_retain_graph`): a second one through it is refused,
    /// as PyTorch refuses one through ops that saved tensors ("backward
    /// through the graph a second time"); it added the gradients again.
    used: std::cell::Cell<bool>,
}

/// A tape is dropped node by node from a work list, not by recursion: each
/// tensor's drop dropping its inputs' overflowed the stack on a chain of a
/// million ops (30,000 on a spawned thread's 2 MiB), aborting the process.
impl Drop for Node {
    fn drop(&mut self) {
        let mut pending: Vec<Tensor> = std::mem::take(&mut self.inputs);
        while let Some(t) = pending.pop() {
            // The last handle to an input: take its node's inputs before it
            // goes, so its own drop has none left to recurse into.
            if let Ok(mut inner) = Rc::try_unwrap(t.0)
                && let Some(node) = inner.node.as_mut()
            {
                pending.append(&mut node.inputs);
            }
        }
    }
}

/// Where a tensor's elements are, in the kernels' own layout (row-major;
/// 64-byte aligned on the host).
pub(crate) enum Storage {
    Host(HostBuf),
    Cuda(DeviceMemory),
}

/// Host memory of a tensor, given back to this thread's pool when the
/// tensor goes: the next kernel output of its size takes it instead of
/// fresh memory. It is not cleared: every kernel writes its outputs whole
/// (as every kernel of a compiled step does into the arena it reuses
/// without clearing; the eager tests pass with outputs filled with NaN).
/// Clearing fresh memory took 3% of the MLP 784 eager step.
pub(crate) struct HostBuf(Bytes);

/// Buffers smaller than this are not pooled.
const POOL_MIN_BYTES: usize = 4096;
/// The pool holds at most this much memory, and 8 buffers of one size.
const POOL_MAX_BYTES: usize = 64 << 20;

thread_local! {
    /// Pooled host buffers by size, and their total size.
    static POOL: RefCell<(usize, HashMap<usize, Vec<Bytes>>)> = RefCell::new((0, HashMap::new()));
}

impl HostBuf {
    fn new(b: Bytes) -> HostBuf {
        HostBuf(b)
    }

    /// `len` bytes for a kernel's output: a pooled buffer (old contents)
    /// or fresh cleared memory.
    fn for_output(len: usize, what: &str) -> Result<HostBuf> {
        if len >= POOL_MIN_BYTES {
            let reused = POOL.try_with(|p| {
                let mut p = p.try_borrow_mut().ok()?;
                let b = p.1.get_mut(&len)?.pop()?;
                p.0 -= len;
                Some(b)
            });
            if let Ok(Some(b)) = reused {
                return Ok(HostBuf(b));
            }
        }
        Ok(HostBuf(Bytes::try_zeroed(len, what).map_err(invalid)?))
    }
}

impl std::ops::Deref for HostBuf {
    type Target = Bytes;
    fn deref(&self) -> &Bytes {
        &self.0
    }
}

impl std::ops::DerefMut for HostBuf {
    fn deref_mut(&mut self) -> &mut Bytes {
        &mut self.0
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        let len = self.0.len();
        if len < POOL_MIN_BYTES {
            return;
        }
        let b = std::mem::take(&mut self.0);
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                let (total, sizes) = &mut *p;
                let same = sizes.entry(len).or_default();
                if same.len() < 8 && *total + len <= POOL_MAX_BYTES {
                    same.push(b);
                    *total += len;
                }
            }
        });
    }
}

impl Storage {
    fn device(&self) -> Device {
        match self {
            Storage::Host(_) => Device::Cpu { threads: 0 },
            Storage::Cuda(m) => Device::Cuda { ordinal: m.stream().ordinal() },
        }
    }

    /// `host`'s bytes on `device`.
    fn from_bytes(device: &Device, host: Bytes) -> Result<Storage> {
        Ok(match device {
            Device::Cpu { .. } => Storage::Host(HostBuf::new(host)),
            Device::Cuda { ordinal } => Storage::Cuda(stream(*ordinal)?.upload(host.as_bytes()).map_err(invalid)?),
        })
    }

    /// The bytes, copied to the host (after every op on their stream).
    fn to_bytes(&self) -> Result<Bytes> {
        match self {
            Storage::Host(b) => Ok(Bytes::clone(b)),
            Storage::Cuda(m) => {
                let mut b = Bytes::try_zeroed(m.len(), "a tensor copied from the device").map_err(invalid)?;
                m.read(b.as_bytes_mut()).map_err(invalid)?;
                Ok(b)
            }
        }
    }

    fn try_clone(&self) -> Result<Storage> {
        Ok(match self {
            Storage::Host(b) => Storage::Host(HostBuf::new(Bytes::clone(b))),
            Storage::Cuda(m) => Storage::Cuda(m.try_clone().map_err(invalid)?),
        })
    }
}

fn invalid(e: impl std::fmt::Display) -> EagerError {
    EagerError::Invalid(e.to_string())
}

struct Inner {
    shape: Vec<usize>,
    dtype: HostDType,
    /// The elements, shared with the tensors `detach()` and `param()` made
    /// of this one (as PyTorch's `detach` shares storage).
    data: Rc<RefCell<Storage>>,
    /// How many times the storage was written in place (shared with it).
    version: Rc<std::cell::Cell<u64>>,
    requires_grad: bool,
    /// The accumulated gradient: a leaf without history, f32 of the same
    /// shape, on the same device (an optimizer reads it without a copy).
    grad: RefCell<Option<Tensor>>,
    node: Option<Node>,
}

/// An eager tensor: its values on a device as the kernels read and write
/// them, and where it came from. Cloning shares it (as a PyTorch tensor
/// handle does).
#[derive(Clone)]
pub struct Tensor(Rc<Inner>);

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = &self.0;
        let device = i.data.borrow().device();
        let grad = if i.requires_grad { ", requires_grad" } else { "" };
        write!(f, "Tensor({:?} {:?} on {device}{grad})", i.shape, i.dtype)
    }
}

/// The f32 elements of `b`.
pub(crate) fn f32s(b: &Bytes) -> &[f32] {
    // SAFETY: Bytes is 64-byte aligned and holds `len` initialised bytes.
    unsafe { std::slice::from_raw_parts(b.as_bytes().as_ptr() as *const f32, b.len() / 4) }
}

pub(crate) fn f32s_mut(b: &mut Bytes) -> &mut [f32] {
    let n = b.len() / 4;
    // SAFETY: as f32s, and the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(b.as_bytes_mut().as_mut_ptr() as *mut f32, n) }
}

fn bytes_of(host: &Host) -> Result<Bytes> {
    let mut b = Bytes::try_zeroed(host.values.len() * host.dtype.bytes(), "a tensor's values").map_err(invalid)?;
    write_values(b.as_bytes_mut(), host.dtype, &host.values);
    Ok(b)
}

thread_local! {
    static RUNTIME: RefCell<Runtime> = RefCell::new(Runtime::new());
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    /// While recording (`start_trace`): the clock's start and the events.
    static TRACE: RefCell<Option<(std::time::Instant, Vec<aicf_runtime::TraceEvent>)>> = const { RefCell::new(None) };
}

/// The eager stream of GPU `ordinal` (opened on first use, one per GPU and
/// thread).
fn stream(ordinal: usize) -> Result<Arc<EagerStream>> {
    RUNTIME.with(|r| r.borrow_mut().stream(ordinal))
}

/// Starts recording every op (and the kernels it runs) of this thread.
pub fn start_trace() {
    TRACE.with(|t| *t.borrow_mut() = Some((std::time::Instant::now(), Vec::new())));
}

/// Stops recording and writes the ops and kernels so far as a trace-event
/// JSON file (Perfetto, chrome://tracing): ops on the track "stream 0",
/// their kernels on "stream 1" (a GPU op's time is measured from its
/// launch to the end of its kernels: tracing waits for each). Returns how
/// many ops were recorded.
pub fn finish_trace(path: &std::path::Path) -> Result<usize> {
    let Some((_, events)) = TRACE.with(|t| t.borrow_mut().take()) else {
        return Err(EagerError::Invalid("finish_trace without start_trace".into()));
    };
    let ops = events.iter().filter(|e| e.stream == 0).count();
    crate::train::report::write_trace(path, "eager", &events).map_err(|e| EagerError::Invalid(e.to_string()))?;
    Ok(ops)
}

/// Records one op's call (and its kernels) while a trace is on.
fn record(function: &str, key: &str, began: f64, took: f64, kernels: Vec<aicf_runtime::TraceEvent>) {
    TRACE.with(|t| {
        if let Some((_, events)) = t.borrow_mut().as_mut() {
            let index = events.len();
            events.push(aicf_runtime::TraceEvent {
                function: function.into(),
                call: index,
                kernel: String::new(),
                op: key.into(),
                origin: None,
                stream: 0,
                start_us: began,
                duration_us: took,
            });
            let first = kernels.first().map(|k| k.start_us).unwrap_or(0.0);
            for k in kernels {
                events.push(aicf_runtime::TraceEvent { stream: 1, start_us: began + (k.start_us - first), ..k });
            }
        }
    });
}

fn trace_start() -> Option<std::time::Instant> {
    TRACE.with(|t| t.borrow().as_ref().map(|(start, _)| *start))
}

/// Runs `function` of a kernel on `inputs` (the tensors' own buffers, then
/// `extra`), returning its results' buffers on the kernel's device;
/// records the call and its kernels while a trace is on.
fn run(
    kernel: &mut Kernel,
    function: &str,
    inputs: &[&Tensor],
    extra: Vec<Storage>,
    key: &str,
) -> Result<Vec<Storage>> {
    match kernel {
        Kernel::Cpu { module, arena } => {
            let extra = extra
                .into_iter()
                .map(|s| match s {
                    Storage::Host(b) => Ok(b),
                    Storage::Cuda(_) => {
                        Err(EagerError::Kernel { op: key.into(), message: "a GPU buffer for a CPU kernel".into() })
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(run_cpu(module, arena, function, inputs, extra, key)?.into_iter().map(Storage::Host).collect())
        }
        Kernel::Cuda { module, arena, stream } => run_cuda(module, arena, stream, function, inputs, extra, key),
    }
}

fn run_cpu(
    module: &mut CpuModule,
    arena: &mut Bytes,
    function: &str,
    inputs: &[&Tensor],
    extra: Vec<HostBuf>,
    key: &str,
) -> Result<Vec<HostBuf>> {
    let fail = |m: String| EagerError::Kernel { op: key.to_string(), message: m };
    let f = module.function(function).map_err(|e| fail(e.to_string()))?.clone();
    let mut outs = Vec::new();
    for a in f.args.iter().filter(|a| a.role() == Role::Output) {
        outs.push(HostBuf::for_output(a.bytes(), key)?);
    }
    // A buffer passed twice (x * x, or a tensor and its detached copy) is
    // borrowed once and copied for its other uses; kernels never write
    // their inputs.
    let mut copies: Vec<HostBuf> = Vec::new();
    let mut is_copy = Vec::with_capacity(inputs.len() + extra.len());
    for (k, t) in inputs.iter().enumerate() {
        let dup = inputs[..k].iter().any(|u| Rc::ptr_eq(&u.0.data, &t.0.data));
        if dup {
            match &*t.0.data.borrow() {
                Storage::Host(b) => copies.push(HostBuf::new(Bytes::clone(b))),
                Storage::Cuda(_) => return Err(fail("a GPU tensor given to a CPU kernel".into())),
            }
        }
        is_copy.push(dup);
    }
    is_copy.extend(extra.iter().map(|_| true));
    copies.extend(extra);
    let mut guards: Vec<std::cell::RefMut<Storage>> =
        inputs.iter().zip(&is_copy).filter(|(_, c)| !**c).map(|(t, _)| t.0.data.borrow_mut()).collect();
    let mut host: Vec<&mut Bytes> = Vec::with_capacity(guards.len());
    for g in guards.iter_mut() {
        match &mut **g {
            Storage::Host(b) => host.push(&mut **b),
            Storage::Cuda(_) => return Err(fail("a GPU tensor given to a CPU kernel".into())),
        }
    }
    let (mut g_it, mut c_it, mut o_it) = (host.into_iter(), copies.iter_mut(), outs.iter_mut());
    let mut next_input = 0;
    let mut arena = Some(arena);
    let mut args: Vec<&mut Bytes> = Vec::with_capacity(f.args.len());
    for a in &f.args {
        let slot: Option<&mut Bytes> = match a.role() {
            Role::Input => {
                let copy = is_copy.get(next_input).copied().unwrap_or(true);
                next_input += 1;
                if copy { c_it.next().map(|c| &mut **c) } else { g_it.next() }
            }
            Role::Output => o_it.next().map(|o| &mut **o),
            Role::Arena => arena.take(),
            Role::Symbol(s) => return Err(fail(format!("an eager op reads no symbol, this one reads @{s}"))),
        };
        args.push(slot.ok_or_else(|| fail(format!("no buffer for argument {}", a.bind)))?);
    }
    let Some(start) = trace_start() else {
        module.run(function, &mut args).map_err(|e| fail(e.to_string()))?;
        drop(args);
        drop(guards);
        return Ok(outs);
    };
    let began = start.elapsed().as_secs_f64() * 1e6;
    module.set_profiling(true);
    let result = module.run(function, &mut args).map_err(|e| fail(e.to_string()));
    let took = start.elapsed().as_secs_f64() * 1e6 - began;
    let kernels = module.take_trace();
    module.set_profiling(false);
    record(function, key, began, took, kernels);
    result?;
    drop(args);
    drop(guards);
    Ok(outs)
}

fn run_cuda(
    module: &CudaModule,
    arena: &DeviceMemory,
    stream: &Arc<EagerStream>,
    function: &str,
    inputs: &[&Tensor],
    extra: Vec<Storage>,
    key: &str,
) -> Result<Vec<Storage>> {
    let fail = |m: String| EagerError::Kernel { op: key.to_string(), message: m };
    let f = module.function(function).map_err(|e| fail(e.to_string()))?;
    let mut outs = Vec::new();
    for a in f.args.iter().filter(|a| a.role() == Role::Output) {
        outs.push(stream.zeroed(a.bytes()).map_err(|e| fail(e.to_string()))?);
    }
    let guards: Vec<std::cell::Ref<Storage>> = inputs.iter().map(|t| t.0.data.borrow()).collect();
    let mut given: Vec<&DeviceMemory> = Vec::with_capacity(inputs.len() + extra.len());
    for s in guards.iter().map(|g| &**g).chain(&extra) {
        match s {
            Storage::Cuda(m) => given.push(m),
            Storage::Host(_) => return Err(fail("a CPU tensor given to a GPU kernel".into())),
        }
    }
    let (mut inputs_it, mut outs_it) = (given.into_iter(), outs.iter());
    let mut args: Vec<&DeviceMemory> = Vec::with_capacity(f.args.len());
    for a in &f.args {
        let slot = match a.role() {
            Role::Input => inputs_it.next(),
            Role::Output => outs_it.next(),
            Role::Arena => Some(arena),
            Role::Symbol(s) => return Err(fail(format!("an eager op reads no symbol, this one reads @{s}"))),
        };
        args.push(slot.ok_or_else(|| fail(format!("no buffer for argument {}", a.bind)))?);
    }
    let start = trace_start();
    let began = start.map(|s| s.elapsed().as_secs_f64() * 1e6);
    module.launch_on(stream, function, &args).map_err(|e| fail(e.to_string()))?;
    if let (Some(start), Some(began)) = (start, began) {
        stream.synchronize().map_err(|e| fail(e.to_string()))?;
        record(function, key, began, start.elapsed().as_secs_f64() * 1e6 - began, Vec::new());
    }
    drop(args);
    drop(guards);
    Ok(outs.into_iter().map(Storage::Cuda).collect())
}

/// Counters of the dispatcher: how many ops ran, and how many kernels were
/// compiled (and how long that took) or loaded from the disk cache.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    pub calls: u64,
    pub compiled: u64,
    pub loaded: u64,
    pub compile_seconds: f64,
}

/// A compiled op: its module and the arena its function runs in.
enum Kernel {
    Cpu { module: CpuModule, arena: Bytes },
    Cuda { module: CudaModule, arena: DeviceMemory, stream: Arc<EagerStream> },
}

impl Kernel {
    fn function(&self, name: &str) -> aicf_runtime::Result<&aicf_runtime::artifact::Function> {
        match self {
            Kernel::Cpu { module, .. } => module.function(name),
            Kernel::Cuda { module, .. } => module.function(name),
        }
    }
}

struct Runtime {
    dir: PathBuf,
    kernels: HashMap<String, Kernel>,
    stats: Stats,
    /// The workers every op's CPU kernels run on ([`eager_threads`]: one
    /// per core unless `AICF_EAGER_THREADS` says), started on first use.
    pool: Option<aicf_runtime::cpu::Pool>,
    /// Each GPU's eager stream, opened on first use.
    streams: HashMap<usize, Arc<EagerStream>>,
    /// The source of every kernel this thread ran, with its key: what
    /// [`prepare`] compiles for another device.
    sources: std::collections::BTreeMap<String, String>,
}

impl Drop for Runtime {
    /// Waits for each GPU's queued ops before the kernels' modules unload.
    fn drop(&mut self) {
        for s in self.streams.values() {
            let _ = s.synchronize();
        }
    }
}

impl Runtime {
    fn new() -> Self {
        let dir = aicf_runtime::registry::cache_dir()
            .map(|d| d.join("eager"))
            .unwrap_or_else(|| std::env::temp_dir().join("aicf-eager"));
        Runtime {
            dir,
            kernels: HashMap::new(),
            stats: Stats::default(),
            pool: None,
            streams: HashMap::new(),
            sources: Default::default(),
        }
    }

    fn stream(&mut self, ordinal: usize) -> Result<Arc<EagerStream>> {
        if let Some(s) = self.streams.get(&ordinal) {
            return Ok(s.clone());
        }
        let s = EagerStream::open(ordinal).map_err(invalid)?;
        self.streams.insert(ordinal, s.clone());
        Ok(s)
    }

    /// The artifact of `source` (an `hl` module) for `device` on disk,
    /// compiled unless it is there already; `key` names it in errors.
    fn artifact(&mut self, key: &str, source: &str, device: &Device) -> Result<PathBuf> {
        let fail = |message: String| EagerError::Kernel { op: key.to_string(), message };
        let target_text = match device {
            Device::Cpu { .. } => format!("-march={}", crate::codegen::target::cpu::march()),
            Device::Cuda { .. } => format!("cuda {:?}", crate::codegen::GpuOptions::default()),
        };
        let hash = aicf_runtime::artifact::ir_hash(&format!(
            "{source}\n{}\n{target_text}",
            crate::train::trainer::compiler_identity(),
        ));
        let dir = self.dir.join(format!("op-{hash}"));
        // A damaged artifact, or one compiled for CPU features this host
        // lacks, is compiled again (under the directory's lock, looked for
        // again once it is held: another thread may have just compiled it).
        let ready = || {
            aicf_runtime::artifact::load_manifest(&dir).is_ok_and(|m| match device {
                Device::Cpu { .. } => {
                    m.files.contains_key("kernels.so") && aicf_runtime::cpu::missing_cpu_feature(&m).is_none()
                }
                Device::Cuda { .. } => {
                    m.target.starts_with("cuda")
                        && ["sm_80", "sm_90"].iter().all(|c| m.ptx_files(c).iter().all(|f| dir.join(f).is_file()))
                }
            })
        };
        let found = ready();
        let _lock = if found { None } else { crate::codegen::lock_artifact(&dir) };
        if found || ready() {
            self.stats.loaded += 1;
        } else {
            let started = std::time::Instant::now();
            std::fs::create_dir_all(&self.dir).map_err(|e| {
                fail(format!(
                    "{}: {e} (eager mode's kernels, under AICF_CACHE_DIR or ~/.cache/aicf; point AICF_CACHE_DIR \
                     at a writable directory)",
                    self.dir.display()
                ))
            })?;
            let target = match device {
                Device::Cpu { .. } => crate::pipeline::Target::Cpu(crate::codegen::KernelCache::new(
                    crate::codegen::KernelCache::default_dir(&self.dir),
                )),
                Device::Cuda { .. } => crate::pipeline::Target::Cuda(crate::codegen::GpuOptions::default()),
            };
            crate::pipeline::compile_inference(source, key, &target, &dir).map_err(|e| match e {
                // An op its operands do not fit (an integer division, an
                // empty slice): the pass's own words, as an op's error, not
                // the whole pipeline and the op's one-line module.
                crate::error::CompileError::PassFailed { diagnostics, .. } if !diagnostics.is_empty() => {
                    let words: Vec<&str> = diagnostics.iter().map(|d| d.message.as_str()).collect();
                    EagerError::Op { op: key.to_string(), message: words.join("; ") }
                }
                other => fail(other.to_string()),
            })?;
            self.stats.compiled += 1;
            self.stats.compile_seconds += started.elapsed().as_secs_f64();
        }
        Ok(dir)
    }

    /// The kernel of `source` (an `hl` module whose function is
    /// `function`) for `device`, compiled or found on disk; `key` names it
    /// in memory (with its device).
    fn kernel(&mut self, key: &str, source: &str, function: &str, device: &Device) -> Result<&mut Kernel> {
        if !self.kernels.contains_key(key) {
            let fail = |message: String| EagerError::Kernel { op: key.to_string(), message };
            // Opened before compiling: no GPU, no compile.
            if let Device::Cuda { ordinal } = device {
                self.stream(*ordinal)?;
            }
            let dir = self.artifact(key, source, device)?;
            self.sources.entry(source.to_string()).or_insert_with(|| key.to_string());
            let kernel = match device {
                Device::Cpu { .. } => {
                    if self.pool.is_none() {
                        self.pool = Some(aicf_runtime::cpu::pool(eager_threads()).map_err(|e| fail(e.to_string()))?);
                    }
                    let pool = self.pool.clone().ok_or_else(|| fail("no worker pool".into()))?;
                    let mut module = CpuModule::load_with_pool(&dir, pool).map_err(|e| fail(e.to_string()))?;
                    // AICF_EAGER_GEMM=<candidate>: every GEMM by one candidate, as
                    // `aicf train --gemm` (runs whose bits do not depend on the
                    // registry's timings).
                    if let Ok(name) = std::env::var("AICF_EAGER_GEMM") {
                        use aicf_runtime::registry::Choice;
                        let choice = Choice::from_name(&name).ok_or_else(|| {
                            let names: Vec<&str> = Choice::ALL.iter().map(|c| c.name()).collect();
                            EagerError::Invalid(format!("AICF_EAGER_GEMM={name:?} is not one of {}", names.join(", ")))
                        })?;
                        module.force_gemm(Some(choice));
                    }
                    let arena_bytes = module.function(function).map_err(|e| fail(e.to_string()))?.arena_bytes as usize;
                    let arena = Bytes::try_zeroed(arena_bytes, key).map_err(|e| fail(e.to_string()))?;
                    Kernel::Cpu { module, arena }
                }
                Device::Cuda { ordinal } => {
                    let stream = self.stream(*ordinal)?;
                    let module = CudaModule::load(&dir, *ordinal).map_err(|e| fail(e.to_string()))?;
                    let arena_bytes = module.function(function).map_err(|e| fail(e.to_string()))?.arena_bytes as usize;
                    let arena = stream.zeroed(arena_bytes).map_err(|e| fail(e.to_string()))?;
                    Kernel::Cuda { module, arena, stream }
                }
            };
            self.kernels.insert(key.to_string(), kernel);
        }
        self.kernels.get_mut(key).ok_or_else(|| EagerError::Invalid(format!("kernel {key} vanished")))
    }
}

/// Compiles every kernel this thread's ops have run so far for `device`
/// into the disk cache (where it is not there yet), without running
/// anything: a machine without a GPU prepares a GPU's kernels, so a run
/// there starts warm (with the same cache directory). Returns the
/// artifacts' folders.
pub fn prepare(device: &Device) -> Result<Vec<PathBuf>> {
    RUNTIME.with(|r| {
        let mut r = r.borrow_mut();
        let sources: Vec<(String, String)> = r.sources.iter().map(|(s, k)| (s.clone(), k.clone())).collect();
        sources.iter().map(|(source, key)| r.artifact(key, source, device)).collect()
    })
}

/// The dispatcher's counters so far (this thread).
pub fn stats() -> Stats {
    RUNTIME.with(|r| r.borrow().stats)
}

thread_local! {
    /// The generator of `randn`/`rand`: Philox under a seed, one stream per
    /// tensor drawn.
    static GENERATOR: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Seeds this thread's generator (`torch.manual_seed`): the tensors
/// `Tensor::randn`/`rand` draw after it are a function of the seed and their
/// order. Without it the seed is 0.
pub fn manual_seed(seed: u64) {
    GENERATOR.with(|g| g.set((seed, 0)));
}

/// Runs `f` without recording a tape (`torch.no_grad()`).
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    /// Restores recording however `f` ends (a panic caught further up left
    /// it off for the thread).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _restore = Restore(GRAD_ENABLED.with(|g| g.replace(false)));
    f()
}

fn grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

fn host_dtype(d: DType) -> Result<HostDType> {
    Ok(match d {
        DType::F32 => HostDType::F32,
        DType::I32 => HostDType::I32,
        DType::I64 => HostDType::I64,
        DType::I1 => HostDType::I1,
        DType::F64 => HostDType::F64,
        other => return Err(EagerError::Invalid(format!("eager tensors of {other:?} are not supported yet"))),
    })
}

fn nn_dtype(d: HostDType) -> Result<DType> {
    Ok(match d {
        HostDType::F32 => DType::F32,
        HostDType::I32 => DType::I32,
        HostDType::I64 => DType::I64,
        HostDType::I1 => DType::I1,
        HostDType::F64 => DType::F64,
        other => return Err(EagerError::Invalid(format!("eager tensors of {other:?} are not supported yet"))),
    })
}

/// Traces `body` as `func.func @name(inputs) -> (results)` alone in a module.
fn trace(
    name: &str,
    inputs: &[TensorSpec],
    body: impl FnOnce(&[nn::Tensor]) -> nn::Result<Vec<nn::Tensor>>,
) -> nn::Result<nn::HlModule> {
    let mut b = ModuleBuilder::new();
    b.function(name, Mode::Eval, inputs, body)?;
    b.finish()
}
/// The device all of `inputs` are on, or an error naming the op and the
/// devices.
fn common_device(op: &str, inputs: &[&Tensor]) -> Result<Device> {
    let first = inputs.first().map(|t| t.device()).unwrap_or_default();
    if let Some(other) = inputs.iter().map(|t| t.device()).find(|d| !same_device(d, &first)) {
        return Err(EagerError::Op {
            op: op.into(),
            message: format!("its inputs are on {first} and {other}: move them to one device with .to()"),
        });
    }
    Ok(first)
}

fn same_device(a: &Device, b: &Device) -> bool {
    match (a, b) {
        (Device::Cpu { .. }, Device::Cpu { .. }) => true,
        (Device::Cuda { ordinal: x }, Device::Cuda { ordinal: y }) => x == y,
        _ => false,
    }
}

/// The in-memory name of kernel `key` on `device`.
fn device_key(key: String, device: &Device) -> String {
    match device {
        Device::Cpu { .. } => key,
        Device::Cuda { ordinal } => format!("{key} @cuda:{ordinal}"),
    }
}

/// Runs the function `build` traces (named `key` with its attributes, on
/// `inputs`' types) through its compiled kernel on the inputs' device;
/// returns each result's shape, dtype and values. Nothing is recorded.
fn dispatch(
    key: &str,
    build: &dyn Fn(&[nn::Tensor]) -> nn::Result<Vec<nn::Tensor>>,
    inputs: &[&Tensor],
) -> Result<Vec<(Vec<usize>, HostDType, Storage)>> {
    let device = common_device(key, inputs)?;
    if let Some((i, t)) = inputs.iter().enumerate().find(|(_, t)| t.0.shape.contains(&0)) {
        return Err(EagerError::Op {
            op: key.into(),
            message: format!(
                "operand #{i} has shape {:?}, with no elements: AICF compiles no empty tensors (a dimension of 0)",
                t.0.shape
            ),
        });
    }
    let specs: Vec<TensorSpec> = inputs.iter().map(|t| t.spec()).collect::<Result<_>>()?;
    let full =
        device_key(format!("{key} {}", specs.iter().map(TensorSpec::mlir_type).collect::<Vec<_>>().join(" ")), &device);
    RUNTIME.with(|r| {
        let mut r = r.borrow_mut();
        r.stats.calls += 1;
        let source = if r.kernels.contains_key(&full) {
            String::new()
        } else {
            trace("op", &specs, build).map_err(|e| EagerError::Op { op: key.into(), message: e.to_string() })?.text
        };
        let kernel = r.kernel(&full, &source, "op", &device)?;
        let results: Vec<(Vec<usize>, HostDType)> = kernel
            .function("op")
            .map_err(|e| EagerError::Kernel { op: full.clone(), message: e.to_string() })?
            .args
            .iter()
            .filter(|a| a.role() == Role::Output)
            .map(|a| (a.shape.clone(), a.dtype))
            .collect();
        let out = run(kernel, "op", inputs, Vec::new(), &full)?;
        if out.len() != results.len() {
            return Err(EagerError::Kernel { op: full, message: "a result without its buffer".into() });
        }
        Ok(results.into_iter().zip(out).map(|((shape, dtype), data)| (shape, dtype, data)).collect())
    })
}

/// Runs `def` on `inputs` through its compiled kernel.
fn op_call(def: &Rc<OpDef>, inputs: &[&Tensor]) -> Result<Tensor> {
    let build = |xs: &[nn::Tensor]| Ok(vec![(def.build)(xs)?]);
    let (shape, dtype, data) = dispatch(&def.key, &build, inputs)?
        .pop()
        .ok_or_else(|| EagerError::Kernel { op: def.key.clone(), message: "no result".into() })?;
    let needs = grad_enabled() && inputs.iter().any(|t| t.requires_grad());
    // The tape's gradients are f32: an f64 result of a tensor that needs a
    // gradient would cut it off silently (its loss's gradient missed that
    // path). Integer and boolean results carry none, as in PyTorch.
    if needs && dtype == HostDType::F64 {
        return Err(EagerError::Op {
            op: def.key.clone(),
            message: "its f64 result would carry no gradient (gradients flow through f32 tensors): compute it in \
                      f32, or detach the input (or run it under no_grad) where no gradient is wanted"
                .into(),
        });
    }
    let record = needs && dtype == HostDType::F32;
    let node = record.then(|| Node {
        op: def.clone(),
        inputs: inputs.iter().map(|t| (*t).clone()).collect(),
        versions: inputs.iter().map(|t| t.0.version.get()).collect(),
        used: std::cell::Cell::new(false),
    });
    Ok(Tensor(Rc::new(Inner {
        shape,
        dtype,
        data: Rc::new(RefCell::new(data)),
        version: Rc::default(),
        requires_grad: record,
        grad: RefCell::new(None),
        node,
    })))
}

/// Runs a function of several results that `build` traces (`key` naming it
/// with its attributes) on `inputs`, as leaves without history: what an
/// optimizer's fused update runs.
pub(crate) fn call_many(
    key: &str,
    build: &dyn Fn(&[nn::Tensor]) -> nn::Result<Vec<nn::Tensor>>,
    inputs: &[&Tensor],
) -> Result<Vec<Tensor>> {
    Ok(dispatch(key, build, inputs)?
        .into_iter()
        .map(|(shape, dtype, data)| Tensor::leaf(shape, dtype, data, false))
        .collect())
}

/// The gradients of `node`'s inputs that take one (float inputs that
/// require a gradient) for the output's gradient `g`: the op's
/// `hl-autodiff` rule, compiled and run as a kernel that returns only
/// those (so the op's forward is recomputed only where its rule reads it).
fn vjp(node: &Node, g: Storage, g_shape: &[usize]) -> Result<Vec<Option<Storage>>> {
    if let Some((k, t)) = node.inputs.iter().enumerate().find(|(k, t)| t.0.version.get() != node.versions[*k]) {
        return Err(EagerError::Invalid(format!(
            "backward: input #{k} of {} ({t:?}) was written in place after the forward pass read it (an optimizer \
             step or set_values between the forward pass and backward()); its gradient would be taken at the new \
             values: run the forward pass again after changing it",
            node.op.key
        )));
    }
    let inputs: Vec<&Tensor> = node.inputs.iter().collect();
    let device = common_device(&node.op.key, &inputs)?;
    let mut specs: Vec<TensorSpec> = node.inputs.iter().map(|t| t.spec()).collect::<Result<_>>()?;
    let wanted: Vec<bool> =
        node.inputs.iter().zip(&specs).map(|(t, s)| t.requires_grad() && s.dtype.is_float()).collect();
    let gspec = TensorSpec::new(g_shape.to_vec(), DType::F32);
    let key = device_key(
        format!(
            "vjp {} {} {wanted:?}",
            node.op.key,
            specs.iter().chain([&gspec]).map(TensorSpec::mlir_type).collect::<Vec<_>>().join(" ")
        ),
        &device,
    );
    specs.push(gspec);
    let grads = RUNTIME.with(|r| -> Result<Vec<Storage>> {
        let mut r = r.borrow_mut();
        r.stats.calls += 1;
        let source =
            if r.kernels.contains_key(&key) { String::new() } else { vjp_source(node, &specs, &wanted, &key)? };
        let kernel = r.kernel(&key, &source, "vjp_grad", &device)?;
        run(kernel, "vjp_grad", &inputs, vec![g], &key)
    })?;
    let mut it = grads.into_iter();
    Ok(wanted.iter().map(|&w| if w { it.next() } else { None }).collect())
}

/// The `hl` module of an op's vector-Jacobian product: `sum(op(x) * g)`
/// differentiated with respect to its inputs, returning only the `wanted`
/// inputs' gradients, cleaned of what they do not need.
fn vjp_source(node: &Node, specs: &[TensorSpec], wanted: &[bool], key: &str) -> Result<String> {
    let fail = |message: String| EagerError::Op { op: key.to_string(), message };
    let n = wanted.len();
    let traced = trace("vjp", specs, |xs| {
        let y = (node.op.build)(&xs[..n])?;
        let prod = y.mul(&xs[n])?;
        let axes: Vec<i64> = (0..prod.rank() as i64).collect();
        Ok(vec![if axes.is_empty() { prod } else { prod.sum(&axes, false)? }])
    })
    .map_err(|e| fail(e.to_string()))?;
    let ctx = crate::CompilerContext::new();
    let mut module = ctx.parse(&traced.text, key).map_err(|e| fail(e.to_string()))?;
    // The source is compiled for each device alike: attention's gradient
    // as GEMMs, the CPU's faster form (the fused form is the train step's
    // on the GPU).
    crate::run_pipeline(
        &ctx,
        &mut module,
        "builtin.module(hl-autodiff{function=vjp wrt-inputs=true fused-attention-backward=false})",
    )
    .map_err(|e| fail(e.to_string()))?;
    // @vjp_grad returns the loss, then a gradient per float argument (the
    // inputs', then g's): keep the wanted inputs' only.
    let raw = module.as_operation().to_raw();
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(raw, 0)) };
    let func = crate::ir::ops_of(body)
        .into_iter()
        .find(|&op| crate::ir::string_attr(op, "sym_name").as_deref() == Some("vjp_grad"))
        .ok_or_else(|| fail("hl-autodiff made no @vjp_grad".into()))?;
    let block = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(func, 0)) };
    let ret = crate::ir::ops_of(block)
        .into_iter()
        .rev()
        .find(|&op| crate::ir::op_name(op) == "func.return")
        .ok_or_else(|| fail("@vjp_grad has no return".into()))?;
    let returned = crate::ir::operands(ret);
    let floats: Vec<usize> = (0..n).filter(|&i| specs[i].dtype.is_float()).collect();
    let keep: Vec<mlir_sys::MlirValue> =
        floats.iter().enumerate().filter(|&(_, &i)| wanted[i]).map(|(k, _)| returned[1 + k]).collect();
    unsafe { mlir_sys::mlirOperationSetOperands(ret, keep.len() as isize, keep.as_ptr()) };
    crate::passes::retype_function(func, block);
    // The op's own function is not run: only @vjp_grad is compiled.
    if let Some(forward) =
        crate::ir::ops_of(body).into_iter().find(|&op| crate::ir::string_attr(op, "sym_name").as_deref() == Some("vjp"))
    {
        unsafe { mlir_sys::mlirOperationDestroy(forward) };
    }
    crate::run_pipeline(&ctx, &mut module, "builtin.module(symbol-dce,canonicalize,cse)")
        .map_err(|e| fail(e.to_string()))?;
    Ok(crate::pipeline::canonical_text(&module))
}

/// `acc += g` in f32, as the compiled step's adds: in place on the host,
/// by the `add` op's kernel on a GPU.
fn accumulate(acc: &mut Storage, g: Storage, shape: &[usize]) -> Result<()> {
    if let (Storage::Host(a), Storage::Host(b)) = (&mut *acc, &g) {
        for (x, y) in f32s_mut(a).iter_mut().zip(f32s(b)) {
            *x += *y;
        }
        return Ok(());
    }
    let old = std::mem::replace(acc, Storage::Host(HostBuf::new(Bytes::default())));
    let a = Tensor::leaf(shape.to_vec(), HostDType::F32, old, false);
    let b = Tensor::leaf(shape.to_vec(), HostDType::F32, g, false);
    let sum = no_grad(|| a.add(&b))?;
    drop((a, b));
    *acc = sum.into_storage()?;
    Ok(())
}

impl Tensor {
    fn leaf(shape: Vec<usize>, dtype: HostDType, data: Storage, requires_grad: bool) -> Tensor {
        Tensor(Rc::new(Inner {
            shape,
            dtype,
            data: Rc::new(RefCell::new(data)),
            version: Rc::default(),
            requires_grad,
            grad: RefCell::new(None),
            node: None,
        }))
    }

    /// This tensor's storage, taken when no other tensor shares it, else
    /// copied.
    fn into_storage(self) -> Result<Storage> {
        match Rc::try_unwrap(self.0) {
            Ok(inner) => match Rc::try_unwrap(inner.data) {
                Ok(cell) => Ok(cell.into_inner()),
                Err(shared) => shared.borrow().try_clone(),
            },
            Err(shared) => shared.data.borrow().try_clone(),
        }
    }

    fn with_values(shape: &[usize], dtype: HostDType, values: Vec<f64>) -> Result<Tensor> {
        Tensor::from_host(Host::new(shape, dtype, values))
    }

    /// An f32 tensor of `shape` holding `values` (row-major).
    pub fn from_vec(shape: &[usize], values: Vec<f32>) -> Result<Tensor> {
        Tensor::with_values(shape, HostDType::F32, values.iter().map(|&v| v as f64).collect())
    }

    /// An f32 tensor of `shape` with every value `value` (`torch.full`).
    pub fn full(shape: &[usize], value: f32) -> Result<Tensor> {
        let n = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| EagerError::Invalid(format!("full: the shape {shape:?} holds more values than memory")))?;
        let mut values = Vec::new();
        values.try_reserve_exact(n).map_err(|_| {
            EagerError::Invalid(format!("full: {n} values for the shape {shape:?} do not fit in memory"))
        })?;
        values.resize(n, f64::from(value));
        Tensor::with_values(shape, HostDType::F32, values)
    }

    /// `torch.arange(start, end, step)`: the f32 values `start`,
    /// `start + step`, ... before `end` (`.cast(DType::I32)` for indices).
    pub fn arange(start: f64, end: f64, step: f64) -> Result<Tensor> {
        if !(start.is_finite() && end.is_finite() && step.is_finite()) || step == 0.0 {
            return Err(EagerError::Invalid(format!(
                "arange({start}, {end}, {step}): the bounds and the step must be finite and the step not 0"
            )));
        }
        let count = ((end - start) / step).ceil().max(0.0);
        if count > (1u64 << 40) as f64 {
            return Err(EagerError::Invalid(format!(
                "arange({start}, {end}, {step}): {count} values do not fit in memory"
            )));
        }
        let mut values = Vec::new();
        values.try_reserve_exact(count as usize).map_err(|_| {
            EagerError::Invalid(format!("arange({start}, {end}, {step}): {count} values do not fit in memory"))
        })?;
        values.extend((0..count as u64).map(|i| f64::from((start + i as f64 * step) as f32)));
        Tensor::with_values(&[count as usize], HostDType::F32, values)
    }

    /// `torch.randn`: f32 values drawn from the standard normal
    /// distribution by this thread's generator (see [`manual_seed`]).
    pub fn randn(shape: &[usize]) -> Result<Tensor> {
        Tensor::random(shape, "randn", aicf_runtime::init::Init::Normal { mean: 0.0, std: 1.0 })
    }

    /// `torch.rand`: f32 values drawn uniformly from [0, 1) by this
    /// thread's generator (see [`manual_seed`]).
    pub fn rand(shape: &[usize]) -> Result<Tensor> {
        Tensor::random(shape, "rand", aicf_runtime::init::Init::Uniform { low: 0.0, high: 1.0 })
    }

    fn random(shape: &[usize], what: &str, init: aicf_runtime::init::Init) -> Result<Tensor> {
        let n = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| EagerError::Invalid(format!("{what}: the shape {shape:?} holds more values than memory")))?;
        let mut values: Vec<f32> = Vec::new();
        values.try_reserve_exact(n).map_err(|_| {
            EagerError::Invalid(format!("{what}: {n} values for the shape {shape:?} do not fit in memory"))
        })?;
        values.resize(n, 0.0);
        let (seed, stream) = GENERATOR.with(|g| {
            let (seed, stream) = g.get();
            g.set((seed, stream + 1));
            (seed, stream)
        });
        init.fill(shape, seed, stream, &mut values).map_err(|e| EagerError::Invalid(format!("{what}: {e}")))?;
        Tensor::from_vec(shape, values)
    }

    /// `torch.zeros`: an f32 tensor of zeros.
    pub fn zeros(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 0.0)
    }

    /// `torch.ones`: an f32 tensor of ones.
    pub fn ones(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 1.0)
    }

    /// An i32 tensor (labels, token ids).
    pub fn from_i32(shape: &[usize], values: &[i32]) -> Result<Tensor> {
        Tensor::with_values(shape, HostDType::I32, values.iter().map(|&v| v as f64).collect())
    }

    /// A host tensor as an eager one (in host memory); its values must
    /// fill its shape.
    pub fn from_host(host: Host) -> Result<Tensor> {
        if !host.filled() {
            return Err(EagerError::Invalid(format!("{} values for shape {:?}", host.values.len(), host.shape)));
        }
        host_dtype(nn_dtype(host.dtype)?)?;
        check_integers(host.dtype, &host.values)?;
        check_float_range(host.dtype, &host.values)?;
        let data = bytes_of(&host)?;
        Ok(Tensor::leaf(host.shape, host.dtype, Storage::Host(HostBuf::new(data)), false))
    }

    /// Where the values are (`cpu` or `cuda:N`).
    pub fn device(&self) -> Device {
        self.0.data.borrow().device()
    }

    /// The values on `device`: this tensor when they are there already,
    /// else a copy there, a leaf without history (move parameters before
    /// they take part in ops: `t.to(&device)?.param()`).
    pub fn to(&self, device: &Device) -> Result<Tensor> {
        if same_device(&self.device(), device) {
            return Ok(self.clone());
        }
        let data = match (&*self.0.data.borrow(), device) {
            // Uploaded from the host buffer itself, not a copy of it.
            (Storage::Host(b), Device::Cuda { ordinal }) => {
                Storage::Cuda(stream(*ordinal)?.upload(b.as_bytes()).map_err(invalid)?)
            }
            (other, _) => Storage::from_bytes(device, other.to_bytes()?)?,
        };
        Ok(Tensor::leaf(self.0.shape.clone(), self.0.dtype, data, false))
    }

    /// Whether gradients flow to this tensor (a parameter, or a result
    /// computed from one while the tape records).
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad
    }

    /// A leaf on the same values (shared, as PyTorch's
    /// `detach().requires_grad_()`) that requires a gradient: a parameter.
    pub fn param(&self) -> Tensor {
        self.share(true)
    }

    /// A leaf on the same values (shared, as PyTorch's `detach`) without
    /// history.
    pub fn detach(&self) -> Tensor {
        self.share(false)
    }

    fn share(&self, requires_grad: bool) -> Tensor {
        Tensor(Rc::new(Inner {
            shape: self.0.shape.clone(),
            dtype: self.0.dtype,
            data: self.0.data.clone(),
            version: self.0.version.clone(),
            requires_grad,
            grad: RefCell::new(None),
            node: None,
        }))
    }

    pub fn shape(&self) -> Vec<usize> {
        self.0.shape.clone()
    }

    pub fn spec(&self) -> Result<TensorSpec> {
        Ok(TensorSpec::new(self.0.shape.clone(), nn_dtype(self.0.dtype)?))
    }

    /// The values, copied to the host (after every op so far on a GPU).
    pub fn host(&self) -> Result<Host> {
        let values = match &*self.0.data.borrow() {
            Storage::Host(b) => read_values(b.as_bytes(), self.0.dtype),
            other => read_values(other.to_bytes()?.as_bytes(), self.0.dtype),
        };
        Ok(Host::new(self.0.shape.clone(), self.0.dtype, values))
    }

    /// The values as f32 (a copy on the host).
    pub fn values(&self) -> Result<Vec<f32>> {
        Ok(self.host()?.values.iter().map(|&v| v as f32).collect())
    }

    /// The single value of a one-element tensor.
    pub fn item(&self) -> Result<f64> {
        match self.host()?.values.as_slice() {
            [x] => Ok(*x),
            _ => Err(EagerError::Invalid(format!("item() of a tensor of shape {:?}", self.0.shape))),
        }
    }

    /// The accumulated gradient of a leaf after `backward()` (a copy on
    /// the host), or `None` when it has none.
    pub fn grad(&self) -> Result<Option<Host>> {
        self.0.grad.borrow().as_ref().map(Tensor::host).transpose()
    }

    /// The gradient as a tensor on this tensor's device, without history
    /// (sharing the gradient's values).
    pub(crate) fn grad_tensor(&self) -> Option<Tensor> {
        self.0.grad.borrow().clone()
    }

    /// Runs `f` on the f32 values and the gradient of this parameter in
    /// host memory (an optimizer's update, in place); false when it has no
    /// gradient or is not in host memory.
    pub(crate) fn update(&self, f: impl FnOnce(&mut [f32], &[f32])) -> bool {
        let g = self.0.grad.borrow();
        let Some(g) = g.as_ref() else { return false };
        let g = g.0.data.borrow();
        let mut data = self.0.data.borrow_mut();
        self.bump();
        match (&*g, &mut *data, self.0.dtype) {
            (Storage::Host(g), Storage::Host(values), HostDType::F32) => {
                f(f32s_mut(values), f32s(g));
                true
            }
            _ => false,
        }
    }

    /// Replaces the values with `new`'s (same shape, dtype and device),
    /// keeping this tensor's identity: an optimizer's update.
    pub(crate) fn assign(&self, new: Tensor) -> Result<()> {
        if new.0.shape != self.0.shape || new.0.dtype != self.0.dtype || !same_device(&new.device(), &self.device()) {
            return Err(EagerError::Invalid(format!("assigning {new:?} to {self:?}")));
        }
        let storage = new.into_storage()?;
        *self.0.data.borrow_mut() = storage;
        self.bump();
        Ok(())
    }

    /// Marks the storage written in place (see `Node::versions`).
    fn bump(&self) {
        self.0.version.set(self.0.version.get() + 1);
    }

    pub fn zero_grad(&self) {
        *self.0.grad.borrow_mut() = None;
    }

    /// Replaces the values (an optimizer's update), keeping the identity.
    pub fn set_values(&self, values: Vec<f64>) -> Result<()> {
        let n: usize = self.0.shape.iter().product();
        if values.len() != n {
            return Err(EagerError::Invalid(format!("{} values for shape {:?}", values.len(), self.0.shape)));
        }
        check_integers(self.0.dtype, &values)?;
        self.bump();
        let mut data = self.0.data.borrow_mut();
        match &mut *data {
            Storage::Host(b) => write_values(b.as_bytes_mut(), self.0.dtype, &values),
            Storage::Cuda(m) => {
                let mut b = Bytes::try_zeroed(m.len(), "a tensor's values").map_err(invalid)?;
                write_values(b.as_bytes_mut(), self.0.dtype, &values);
                m.write(b.as_bytes()).map_err(invalid)?;
            }
        }
        Ok(())
    }

    /// Fills every leaf's `.grad()` with d(self)/d(leaf), accumulating into
    /// what is there; `self` must be a scalar. The graph is gone through
    /// once: a second `backward()` through any of its ops (of this loss, or
    /// of another that shares them) is an error, unless the earlier one was
    /// [`Tensor::backward_retain_graph`]. (PyTorch refuses it where an op
    /// saved tensors for its backward, which most do; this refuses it
    /// always.)
    pub fn backward(&self) -> Result<()> {
        self.backward_with(false)
    }

    /// [`Tensor::backward`] keeping the graph for another backward through
    /// it (PyTorch's `retain_graph=True`): the next one adds its gradients
    /// to the leaves' again.
    pub fn backward_retain_graph(&self) -> Result<()> {
        self.backward_with(true)
    }

    fn backward_with(&self, retain_graph: bool) -> Result<()> {
        let shape = self.shape();
        if !shape.is_empty() && shape.iter().product::<usize>() != 1 {
            return Err(EagerError::Invalid(format!("backward() of a tensor of shape {shape:?}: a loss is a scalar")));
        }
        if !self.requires_grad() {
            return Err(EagerError::Invalid("backward() of a tensor that does not require a gradient".into()));
        }
        // Reverse topological order: a tensor after everything that uses it.
        let mut order: Vec<Tensor> = Vec::new();
        let mut seen: std::collections::HashSet<*const Inner> = Default::default();
        let mut stack: Vec<(Tensor, bool)> = vec![(self.clone(), false)];
        while let Some((t, expanded)) = stack.pop() {
            if expanded {
                order.push(t);
                continue;
            }
            if !seen.insert(Rc::as_ptr(&t.0)) {
                continue;
            }
            stack.push((t.clone(), true));
            if let Some(node) = &t.0.node {
                for x in &node.inputs {
                    if x.requires_grad() && !seen.contains(&Rc::as_ptr(&x.0)) {
                        stack.push((x.clone(), false));
                    }
                }
            }
        }
        // An integer leaf made a parameter has no gradient to take
        // (PyTorch refuses `requires_grad` on it): said, not left `None`.
        if let Some(t) = order.iter().find(|t| {
            t.0.node.is_none()
                && !matches!(t.0.dtype, HostDType::F32 | HostDType::F64 | HostDType::F16 | HostDType::BF16)
        }) {
            return Err(EagerError::Invalid(format!(
                "backward(): {t:?} is a parameter (param()) of integers, which have no gradient: make it a float \
                 tensor, or leave it an input (only float tensors can require a gradient)"
            )));
        }
        if order.iter().any(|t| t.0.node.as_ref().is_some_and(|n| n.used.get())) {
            return Err(EagerError::Invalid(
                "backward() through ops an earlier backward() went through (of this loss, or of another sharing \
                 them): their gradients would be added to the leaves' again; make the earlier one \
                 backward_retain_graph() (PyTorch's retain_graph=True) to go through them twice"
                    .into(),
            ));
        }
        let mut grads: HashMap<*const Inner, Storage> = HashMap::new();
        let one = bytes_of(&Host::new(shape, HostDType::F32, vec![1.0]))?;
        grads.insert(Rc::as_ptr(&self.0), Storage::from_bytes(&self.device(), one)?);
        // The leaves' gradients, written once every op's went through: a
        // backward that fails midway (an input written in place, a
        // kernel's error) leaves the leaves' `.grad` as it was, so that it
        // may be tried again without adding any part twice.
        let mut leaves: Vec<(&Tensor, Storage)> = Vec::new();
        for t in order.iter().rev() {
            let Some(g) = grads.remove(&Rc::as_ptr(&t.0)) else { continue };
            match &t.0.node {
                None => leaves.push((t, g)),
                Some(node) => {
                    for (x, dx) in node.inputs.iter().zip(vjp(node, g, &t.0.shape)?) {
                        let Some(dx) = dx else { continue };
                        if !x.requires_grad() {
                            continue;
                        }
                        match grads.get_mut(&Rc::as_ptr(&x.0)) {
                            Some(acc) => accumulate(acc, dx, &x.0.shape)?,
                            None => {
                                grads.insert(Rc::as_ptr(&x.0), dx);
                            }
                        }
                    }
                }
            }
        }
        for (t, g) in leaves {
            let mut slot = t.0.grad.borrow_mut();
            match slot.as_mut() {
                Some(acc) => accumulate(&mut acc.0.data.borrow_mut(), g, &t.0.shape)?,
                None => *slot = Some(Tensor::leaf(t.0.shape.clone(), HostDType::F32, g, false)),
            }
        }
        // Spent once it went through whole (one that failed midway may be
        // tried again).
        if !retain_graph {
            for t in &order {
                if let Some(n) = &t.0.node {
                    n.used.set(true);
                }
            }
        }
        Ok(())
    }

    fn unary(&self, key: String, build: impl Fn(&nn::Tensor) -> nn::Result<nn::Tensor> + 'static) -> Result<Tensor> {
        let def = Rc::new(OpDef { key, build: Box::new(move |xs| build(&xs[0])) });
        op_call(&def, &[self])
    }

    fn binary(
        &self,
        other: &Tensor,
        key: String,
        build: impl Fn(&nn::Tensor, &nn::Tensor) -> nn::Result<nn::Tensor> + 'static,
    ) -> Result<Tensor> {
        let def = Rc::new(OpDef { key, build: Box::new(move |xs| build(&xs[0], &xs[1])) });
        op_call(&def, &[self, other])
    }

    /// The two operands of an elementwise op in their common dtype, as
    /// PyTorch promotes them: a float over an integer over a boolean, the
    /// wider of one kind; a rank-0 tensor (a scalar) raises the kind but
    /// does not widen it (`i32 + f32` is f32, `f32 * f64 scalar` f32). The
    /// cast is an op on the tape (a float's gradient goes through it).
    pub(crate) fn promoted(&self, other: &Tensor) -> Result<(Tensor, Tensor)> {
        let (a, b) = (self.0.dtype, other.0.dtype);
        if a == b {
            return Ok((self.clone(), other.clone()));
        }
        let kind = |d: HostDType| match d {
            HostDType::I1 => 0,
            HostDType::I32 | HostDType::I64 | HostDType::U8 => 1,
            _ => 2,
        };
        let width = |d: HostDType| match d {
            HostDType::I1 | HostDType::U8 => 1,
            HostDType::F16 | HostDType::BF16 => 2,
            HostDType::I32 | HostDType::F32 => 4,
            HostDType::I64 | HostDType::F64 => 8,
        };
        let (ra, rb) = (self.0.shape.is_empty(), other.0.shape.is_empty());
        let to = if kind(a) != kind(b) {
            if kind(a) > kind(b) { a } else { b }
        } else if ra != rb {
            // Of one kind, the tensor's over the scalar's.
            if ra { b } else { a }
        } else if width(a) >= width(b) {
            a
        } else {
            b
        };
        let cast =
            |t: &Tensor| -> Result<Tensor> { if t.0.dtype == to { Ok(t.clone()) } else { t.cast(nn_dtype(to)?) } };
        Ok((cast(self)?, cast(other)?))
    }

    /// [`Tensor::binary`] of the operands in their common dtype
    /// ([`Tensor::promoted`]).
    pub(crate) fn promoted_binary(
        &self,
        other: &Tensor,
        key: &str,
        build: impl Fn(&nn::Tensor, &nn::Tensor) -> nn::Result<nn::Tensor> + 'static,
    ) -> Result<Tensor> {
        let (a, b) = self.promoted(other)?;
        a.binary(&b, key.into(), build)
    }

    /// `self + o`, broadcasting; dtypes promote as PyTorch's do
    /// ([`Tensor::promoted`]), as for `sub`, `mul`, `div`, `maximum`,
    /// `minimum`, `pow` and `compare`.
    pub fn add(&self, o: &Tensor) -> Result<Tensor> {
        self.promoted_binary(o, "add", |a, b| a.add(b))
    }
    pub fn sub(&self, o: &Tensor) -> Result<Tensor> {
        self.promoted_binary(o, "sub", |a, b| a.sub(b))
    }
    pub fn mul(&self, o: &Tensor) -> Result<Tensor> {
        self.promoted_binary(o, "mul", |a, b| a.mul(b))
    }
    /// True division, as `torch.div`: integers divide as f32.
    pub fn div(&self, o: &Tensor) -> Result<Tensor> {
        let (a, b) = self.promoted(o)?;
        let (a, b) = match a.0.dtype {
            HostDType::I32 | HostDType::I64 | HostDType::I1 | HostDType::U8 => {
                (a.cast(DType::F32)?, b.cast(DType::F32)?)
            }
            _ => (a, b),
        };
        a.binary(&b, "div".into(), |a, b| a.div(b))
    }
    /// The elementwise larger of the two. Where they are equal the whole
    /// gradient goes to `self` (as `torch.clamp` passes it at its bound,
    /// and max pooling to one position; `torch.maximum` splits it in half).
    pub fn maximum(&self, o: &Tensor) -> Result<Tensor> {
        self.promoted_binary(o, "maximum", |a, b| a.maximum(b))
    }
    /// The elementwise smaller of the two (ties as [`Tensor::maximum`]).
    pub fn minimum(&self, o: &Tensor) -> Result<Tensor> {
        self.promoted_binary(o, "minimum", |a, b| a.minimum(b))
    }
    /// `self` to the power `o`, elementwise (`torch.pow`).
    pub fn pow(&self, o: &Tensor) -> Result<Tensor> {
        self.promoted_binary(o, "pow", |a, b| a.pow(b))
    }
    /// `self @ o` as `torch.matmul`: 1-D operands are vectors, batch axes
    /// broadcast (one op on the tape, its gradient summing broadcast
    /// copies).
    pub fn matmul(&self, o: &Tensor) -> Result<Tensor> {
        self.binary(o, "matmul".into(), |a, b| a.matmul(b))
    }
    /// `self @ weight^T + bias` (nn.Linear).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        match bias {
            Some(b) => {
                let def =
                    Rc::new(OpDef { key: "linear".into(), build: Box::new(|xs| xs[0].linear(&xs[1], Some(&xs[2]))) });
                op_call(&def, &[self, weight, b])
            }
            None => self.binary(weight, "linear-nobias".into(), |a, w| a.linear(w, None)),
        }
    }
    /// `self * v`. The value is an operand (a rank-0 tensor on this
    /// tensor's device), not a constant of the kernel: a scale that changes
    /// every step (a schedule, an annealed weight) runs one compiled kernel,
    /// where a constant compiled one per value.
    ///
    /// An integer tensor times a fraction is a float result (as PyTorch
    /// promotes it); times a whole number it stays integer.
    pub fn mul_scalar(&self, v: f64) -> Result<Tensor> {
        let x = self.promoted_for(v)?;
        x.binary(&x.scalar_operand("mul_scalar", v)?, "mul".into(), |a, b| a.mul(b))
    }
    /// `self + v`, `v` an operand as in [`Tensor::mul_scalar`] (promoted
    /// as it).
    pub fn add_scalar(&self, v: f64) -> Result<Tensor> {
        let x = self.promoted_for(v)?;
        x.binary(&x.scalar_operand("add_scalar", v)?, "add".into(), |a, b| a.add(b))
    }

    /// This tensor as f32 where it holds integers and `v` is not a whole
    /// number (or not finite), else itself.
    fn promoted_for(&self, v: f64) -> Result<Tensor> {
        let integer = matches!(self.0.dtype, HostDType::I32 | HostDType::I64);
        if integer && (v.fract() != 0.0 || !v.is_finite()) { self.cast(DType::F32) } else { Ok(self.clone()) }
    }

    /// `v` as a rank-0 tensor of this tensor's dtype on its device.
    fn scalar_operand(&self, op: &str, v: f64) -> Result<Tensor> {
        let named = |e: EagerError| EagerError::Op {
            op: op.to_string(),
            message: format!("the scalar {v} as a {:?} tensor: {e}", self.0.dtype),
        };
        Tensor::with_values(&[], self.0.dtype, vec![v]).map_err(named)?.to(&self.device()).map_err(named)
    }
    /// The values as `dtype` (PyTorch's `.to(dtype)`): integer labels or
    /// counts as floats to sum them, floats to integers toward zero.
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        self.unary(format!("cast {dtype:?}"), move |x| x.cast(dtype))
    }
    pub fn neg(&self) -> Result<Tensor> {
        self.unary("neg".into(), |x| x.neg())
    }
    pub fn exp(&self) -> Result<Tensor> {
        self.unary("exp".into(), |x| x.exp())
    }
    pub fn log(&self) -> Result<Tensor> {
        self.unary("log".into(), |x| x.log())
    }
    pub fn abs(&self) -> Result<Tensor> {
        self.unary("abs".into(), |x| x.abs())
    }
    pub fn rsqrt(&self) -> Result<Tensor> {
        self.unary("rsqrt".into(), |x| x.rsqrt())
    }
    pub fn silu(&self) -> Result<Tensor> {
        self.unary("silu".into(), |x| x.silu())
    }
    pub fn erf(&self) -> Result<Tensor> {
        self.unary("erf".into(), |x| x.erf())
    }
    pub fn sin(&self) -> Result<Tensor> {
        self.unary("sin".into(), |x| x.sin())
    }
    pub fn atan(&self) -> Result<Tensor> {
        self.unary("atan".into(), |x| x.atan())
    }
    pub fn cos(&self) -> Result<Tensor> {
        self.unary("cos".into(), |x| x.cos())
    }
    /// No gradient flows through it (PyTorch's is 0).
    pub fn floor(&self) -> Result<Tensor> {
        self.unary("floor".into(), |x| x.floor())
    }
    /// No gradient flows through it.
    pub fn ceil(&self) -> Result<Tensor> {
        self.unary("ceil".into(), |x| x.ceil())
    }
    /// Ties to even, as `torch.round`; no gradient flows through it.
    pub fn round(&self) -> Result<Tensor> {
        self.unary("round".into(), |x| x.round())
    }
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary("sqrt".into(), |x| x.sqrt())
    }
    pub fn tanh(&self) -> Result<Tensor> {
        self.unary("tanh".into(), |x| x.tanh())
    }
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.unary("sigmoid".into(), |x| x.sigmoid())
    }
    pub fn relu(&self) -> Result<Tensor> {
        self.unary("relu".into(), |x| x.relu())
    }
    pub fn gelu(&self) -> Result<Tensor> {
        self.unary("gelu".into(), |x| x.gelu(nn::GeluApproximation::None))
    }
    pub fn sum(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let a = axes.to_vec();
        self.unary(format!("sum {axes:?} {keepdim}"), move |x| x.sum(&a, keepdim))
    }
    pub fn mean(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let a = axes.to_vec();
        self.unary(format!("mean {axes:?} {keepdim}"), move |x| x.mean(&a, keepdim))
    }
    pub fn softmax(&self, axis: i64) -> Result<Tensor> {
        self.unary(format!("softmax {axis}"), move |x| x.softmax(axis))
    }
    pub fn log_softmax(&self, axis: i64) -> Result<Tensor> {
        self.unary(format!("log_softmax {axis}"), move |x| x.log_softmax(axis))
    }
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let s = shape.to_vec();
        self.unary(format!("reshape {shape:?}"), move |x| x.reshape(&s))
    }
    pub fn permute(&self, permutation: &[i64]) -> Result<Tensor> {
        let p = permutation.to_vec();
        self.unary(format!("permute {permutation:?}"), move |x| x.permute(&p))
    }
    pub fn narrow(&self, axis: i64, start: usize, len: usize) -> Result<Tensor> {
        self.unary(format!("narrow {axis} {start} {len}"), move |x| x.narrow(axis, start, len))
    }
    /// Axes `a` and `b` swapped (`torch.transpose`; `-1` counts from the end).
    pub fn transpose(&self, a: i64, b: i64) -> Result<Tensor> {
        self.unary(format!("transpose {a} {b}"), move |x| x.transpose(a, b))
    }
    /// The axes from `start` on as one (`torch.flatten(x, start)`); `start`
    /// is an axis of the tensor.
    pub fn flatten(&self, start: usize) -> Result<Tensor> {
        let rank = self.shape().len();
        if start >= rank.max(1) {
            return Err(EagerError::Invalid(format!("flatten({start}) of a tensor of rank {rank}: no axis {start}")));
        }
        self.unary(format!("flatten {start}"), move |x| x.flatten(start))
    }
    /// Broadcast to `shape` (`torch.broadcast_to`, `expand`).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let s = shape.to_vec();
        self.unary(format!("broadcast_to {shape:?}"), move |x| x.broadcast_to(&s))
    }
    /// `tensors` joined along `axis` (`torch.cat`).
    /// `torch.einsum(equation, *operands)`: each pair of operands one
    /// batched matrix product (or a broadcast product where the pair sums
    /// over nothing); see [`nn::Tensor::einsum`].
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        if operands.is_empty() {
            return Err(EagerError::Invalid(format!("einsum '{equation}' of no tensors")));
        }
        let owned = equation.to_string();
        let def = Rc::new(OpDef {
            key: format!("einsum {equation}"),
            build: Box::new(move |xs| nn::Tensor::einsum(&owned, &xs.iter().collect::<Vec<_>>())),
        });
        op_call(&def, operands)
    }
    pub fn concat(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        if tensors.is_empty() {
            return Err(EagerError::Invalid("concat of no tensors".into()));
        }
        let def = Rc::new(OpDef {
            key: format!("concat {} {axis}", tensors.len()),
            build: Box::new(move |xs| nn::Tensor::concat(&xs.iter().collect::<Vec<_>>(), axis)),
        });
        op_call(&def, tensors)
    }
    /// The largest values over `axes` (`torch.amax`; the gradient is split
    /// among the positions equal to the maximum).
    pub fn max(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let a = axes.to_vec();
        self.unary(format!("max {axes:?} {keepdim}"), move |x| x.max(&a, keepdim))
    }
    /// The index of the largest value along `axis` (`torch.argmax`): an i64
    /// tensor, with no gradient.
    pub fn argmax(&self, axis: i64, keepdim: bool) -> Result<Tensor> {
        self.unary(format!("argmax {axis} {keepdim}"), move |x| x.argmax(axis, keepdim))
    }
    /// RMS norm over the last `dims` axes, scaled by `weight` where given.
    pub fn rms_norm(&self, weight: Option<&Tensor>, dims: usize, eps: f64) -> Result<Tensor> {
        match weight {
            Some(w) => self.binary(w, format!("rms_norm {dims} {eps:e}"), move |x, w| x.rms_norm(Some(w), dims, eps)),
            None => self.unary(format!("rms_norm-noweight {dims} {eps:e}"), move |x| x.rms_norm(None, dims, eps)),
        }
    }
    /// Mean cross-entropy of logits `[..., C]` against i32 labels `[...]`.
    pub fn cross_entropy(&self, labels: &Tensor) -> Result<Tensor> {
        self.cross_entropy_with(labels, Reduction::Mean, None)
    }
    /// Cross-entropy reduced as `reduction` says (`Reduction::None`: each
    /// position's, the labels' shape), positions labelled `ignore_index`
    /// left out (PyTorch's `F.cross_entropy(..., reduction, ignore_index)`).
    pub fn cross_entropy_with(
        &self,
        labels: &Tensor,
        reduction: Reduction,
        ignore_index: Option<i64>,
    ) -> Result<Tensor> {
        if reduction == Reduction::None {
            self.check_labels(labels, ignore_index)?;
        }
        self.binary(labels, format!("cross_entropy {reduction:?} {ignore_index:?}"), move |x, y| {
            x.cross_entropy(y, reduction, ignore_index)
        })
    }
    /// Cross-entropy with PyTorch's `label_smoothing` (see
    /// `nn::Tensor::cross_entropy_smoothed`).
    pub fn cross_entropy_smoothed(
        &self,
        labels: &Tensor,
        reduction: Reduction,
        ignore_index: Option<i64>,
        smoothing: f64,
    ) -> Result<Tensor> {
        // (The unreduced form picks nothing for a label past the classes;
        // the reduced ones' kernel checks its labels itself.)
        if reduction == Reduction::None {
            self.check_labels(labels, ignore_index)?;
        }
        let key = format!("cross_entropy {reduction:?} {ignore_index:?} smoothing {:016x}", smoothing.to_bits());
        self.binary(labels, key, move |x, y| x.cross_entropy_smoothed(y, reduction, ignore_index, smoothing))
    }
    /// A label outside `[0, classes)` that is not `ignore_index` is an
    /// error naming it, as the reducing kernel says it: the unreduced form is
    /// composed of ops that would pick nothing for it (a loss of 0). The
    /// labels are read back from a GPU for it.
    fn check_labels(&self, labels: &Tensor, ignore_index: Option<i64>) -> Result<()> {
        let classes = self.0.shape.last().copied().unwrap_or(0);
        if !matches!(labels.0.dtype, HostDType::I32 | HostDType::I64) {
            return Ok(()); // the op's verifier names it
        }
        let values = labels.host()?.values;
        let bad = values.iter().position(|&v| !(v >= 0.0 && v < classes as f64) && Some(v as i64) != ignore_index);
        match bad {
            Some(k) => Err(EagerError::Op {
                op: "cross_entropy".into(),
                message: format!("label {} at position {k} is outside [0, {classes})", values[k]),
            }),
            None => Ok(()),
        }
    }
    /// Mean squared error.
    pub fn mse_loss(&self, target: &Tensor) -> Result<Tensor> {
        self.mse_loss_with(target, Reduction::Mean)
    }
    /// Squared error reduced as `reduction` says (`Reduction::None`: each
    /// position's).
    pub fn mse_loss_with(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.binary(target, format!("mse_loss {reduction:?}"), move |x, y| x.mse_loss(y, reduction))
    }
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, dims: usize, eps: f64) -> Result<Tensor> {
        let def = Rc::new(OpDef {
            key: format!("layer_norm {dims} {eps:e}"),
            build: Box::new(move |xs| xs[0].layer_norm(Some(&xs[1]), Some(&xs[2]), dims, eps)),
        });
        op_call(&def, &[self, weight, bias])
    }
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, o: &Conv2dOptions) -> Result<Tensor> {
        let o = *o;
        self.weighted(weight, bias, format!("conv2d {o:?}"), move |x, w, b| x.conv2d(w, b, &o))
    }
    /// `F.conv1d` over `[batch, channels, length]` (a height-1 `conv2d`).
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, o: &nn::Conv1dOptions) -> Result<Tensor> {
        let o = *o;
        self.weighted(weight, bias, format!("conv1d {o:?}"), move |x, w, b| x.conv1d(w, b, &o))
    }
    /// An op of `self`, a weight and an optional bias, keyed `key` (with
    /// `-nobias` where it has none: its kernel takes two operands).
    fn weighted(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        key: String,
        build: impl Fn(&nn::Tensor, &nn::Tensor, Option<&nn::Tensor>) -> nn::Result<nn::Tensor> + 'static,
    ) -> Result<Tensor> {
        match bias {
            Some(b) => {
                let def = Rc::new(OpDef { key, build: Box::new(move |xs| build(&xs[0], &xs[1], Some(&xs[2]))) });
                op_call(&def, &[self, weight, b])
            }
            None => {
                let (name, rest) = key.split_once(' ').unwrap_or((key.as_str(), ""));
                self.binary(weight, format!("{name}-nobias {rest}"), move |x, w| build(x, w, None))
            }
        }
    }
    pub fn max_pool2d(&self, o: &Pool2dOptions) -> Result<Tensor> {
        let o = *o;
        self.unary(format!("max_pool2d {o:?}"), move |x| x.max_pool2d(&o))
    }
    pub fn avg_pool2d(&self, o: &Pool2dOptions) -> Result<Tensor> {
        let o = *o;
        self.unary(format!("avg_pool2d {o:?}"), move |x| x.avg_pool2d(&o))
    }
    /// Rows of `self` (a table `[V, D]`) at i32 `indices` (an embedding).
    pub fn gather(&self, indices: &Tensor, axis: i64) -> Result<Tensor> {
        self.binary(indices, format!("gather {axis}"), move |t, i| t.gather(i, axis))
    }
}

/// `Ok(dtype)` check for callers that build host tensors themselves.
pub fn dtype_of(spec: &TensorSpec) -> Result<HostDType> {
    host_dtype(spec.dtype)
}

/// The eager dispatcher's worker threads: `AICF_EAGER_THREADS`, else one
/// per core, as PyTorch's. (One worker was the default while the library
/// GEMM threaded itself over every core; since it runs on the pool, MLP
/// 784's eager step takes 10.8-11.9 ms on one worker and 7.1-8.0 on two,
/// MLP 64's 0.11-0.14 either way: AMD Zen 4, 2 cores.)
fn eager_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // At most 16 per core, as `aicf --threads`: 50,000 aborted starting
    // the workers.
    std::env::var("AICF_EAGER_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .map_or(cores, |n: usize| n.min(16 * cores))
}

/// Values for an integer tensor that it holds exactly: whole numbers in
/// its type's range (1.5 was stored as 1, NaN as 0, 3e10 as i32's maximum).
fn check_integers(dtype: HostDType, values: &[f64]) -> Result<()> {
    let (low, high) = match dtype {
        HostDType::I32 => (i32::MIN as f64, i32::MAX as f64),
        HostDType::I64 => (-(2f64.powi(63)), 2f64.powi(63)),
        _ => return Ok(()),
    };
    match values.iter().position(|v| v.fract() != 0.0 || !(*v >= low && *v < high + 1.0)) {
        Some(k) => {
            Err(EagerError::Invalid(format!("value {k} is {}, not a whole number a {dtype:?} tensor holds", values[k])))
        }
        None => Ok(()),
    }
}

/// Given values for a float tensor: a finite one past its type's range
/// would be stored as an infinity, another number than the one given (the
/// compiled runtime refuses it too). An update's overflow is not refused
/// here: its loss says it.
fn check_float_range(dtype: HostDType, values: &[f64]) -> Result<()> {
    let Some(most) = dtype.largest_float() else { return Ok(()) };
    match values.iter().position(|v| v.is_finite() && v.abs() > most) {
        Some(k) => Err(EagerError::Invalid(format!(
            "value {k} is {:e}, beyond {dtype:?}'s range ({most:e}): it would be an infinity",
            values[k]
        ))),
        None => Ok(()),
    }
}
