//! The CPU backend: loads a compiled module (`manifest.json` + `kernels.so`)
//! and runs its functions, splitting each kernel's rows over a thread pool.

pub mod blas;
pub mod packed_gemm;
mod session;
pub mod team;

pub use session::CpuSession;

use crate::artifact::{Buffer, Call, CollectiveOp, DType, Function, LibraryGemm, Manifest};
use crate::backend::TraceEvent;
use crate::collective::{Communicator, PendingSum, Values};
use crate::error::{Result, RuntimeError};
use crate::host::{Bytes, write_values};
use crate::registry::{Choice, Registry};
use packed_gemm::Kernel;
use std::collections::HashMap;
use std::path::Path;

/// `void aicf_<hash>(int64_t begin, int64_t end, void **buffers)`
type KernelFn = unsafe extern "C" fn(i64, i64, *const *mut u8);

/// A call's kernel and its library GEMM's epilogue kernel, if any.
type Resolved = (KernelFn, Option<KernelFn>);

/// Where the values of a packed collective go back: each buffer's address
/// and element count, in packing order.
type Places = Vec<(*mut u8, usize)>;

pub struct CpuModule {
    manifest: Manifest,
    /// Resolved symbol per call, per function, with the library GEMM's
    /// epilogue where there is one (`None`: a collective, no kernel).
    kernels: HashMap<String, Vec<Option<Resolved>>>,
    /// Per call, the GEMM candidate the registry chose on its first run:
    /// later steps skip the registry's key and lookup (a few microseconds
    /// a GEMM, a tenth of MLP 64's step).
    chosen: HashMap<String, Vec<std::sync::OnceLock<Choice>>>,
    registry: Registry,
    /// Overrides the registry (tests, benchmarks of one candidate).
    forced: Option<Choice>,
    /// Whether the runtime's own AVX-512 GEMMs (and the `gemm` crate, which
    /// picks AVX-512 by itself) may run: not when this CPU has AVX-512 but
    /// the kernels were compiled without it (`AICF_CPU_ISA=avx2` measures
    /// the AVX2 path on an AVX-512 machine). Decided at load.
    wide: bool,
    /// Every kernel call's time, while profiling.
    trace: Option<std::sync::Mutex<Vec<TraceEvent>>>,
    constants: Vec<Bytes>,
    /// The artifact's weights file (values of `init <data>` parameters).
    pub(crate) weights: Option<std::path::PathBuf>,
    pool: Pool,
    /// f32 copies of a 16-bit GEMM's A and B and its f32 product, for the
    /// library candidates (`LibraryGemm::widen`); grown as needed, kept.
    widened: std::sync::Mutex<[Vec<f32>; 3]>,
    /// The packed operands of the runtime's own GEMMs (`Choice::Avx512`,
    /// `Choice::Bf16Dot`), kept likewise.
    packed: std::sync::Mutex<packed_gemm::Packed>,
    /// Buffers that collectives pack into, kept from step to step (fresh
    /// ones every step cost their page faults: 2 ms a step for MLP 784's
    /// 4.4 MB of gradients).
    packing: std::sync::Mutex<Vec<Values>>,
    /// GEMMs run by each candidate's code (in `Choice::ALL`'s order),
    /// counted where that code runs: a forced candidate that cannot run a
    /// GEMM and falls back is counted as what ran ([`CpuModule::gemm_runs`]).
    ran: [std::sync::atomic::AtomicUsize; Choice::ALL.len()],
    // Last: the code must outlive the function pointers above.
    _library: libloading::Library,
}

/// The threads that split kernels, which several modules can share (eager
/// mode's compiled ops run one after another on the same threads).
pub type Pool = std::sync::Arc<team::Team>;

/// A pool of `threads` workers (0: one per core), with denormals flushed
/// as the kernels expect.
pub fn pool(threads: usize) -> Result<Pool> {
    team::Team::new(threads, || {
        flush_denormals(true);
    })
    .map(std::sync::Arc::new)
    .map_err(|e| RuntimeError::Load { path: Default::default(), message: format!("cannot start worker threads: {e}") })
}

impl CpuModule {
    /// Loads `dir/manifest.json` and `dir/kernels.so`, with `threads` worker
    /// threads (0: one per core).
    pub fn load(dir: &Path, threads: usize) -> Result<Self> {
        let pool = pool(threads).map_err(|e| RuntimeError::Load { path: dir.to_path_buf(), message: e.to_string() })?;
        Self::load_with_pool(dir, pool)
    }

    /// [`CpuModule::load`] running its kernels on `pool`.
    pub fn load_with_pool(dir: &Path, pool: Pool) -> Result<Self> {
        let load_err = |path: &Path, message: String| RuntimeError::Load { path: path.to_path_buf(), message };
        let manifest = crate::artifact::load_manifest(dir)?;
        // A GPU artifact has no kernels.so: said as such (it was the
        // loader's "cannot open shared object file").
        // Host code of another architecture (its target's first word).
        if let Some(arch) = manifest.target.split_whitespace().next()
            && !manifest.target.starts_with("cuda")
            && arch != std::env::consts::ARCH
        {
            return Err(load_err(
                dir,
                format!(
                    "compiled for {arch} ({}), and this machine is {}: compile the model again here",
                    manifest.target,
                    std::env::consts::ARCH
                ),
            ));
        }
        if manifest.target.starts_with("cuda") {
            return Err(load_err(
                dir,
                format!(
                    "compiled for {} (a GPU artifact): open it on Device::Cuda, or compile the model for the CPU",
                    manifest.target
                ),
            ));
        }
        if let Some(missing) = missing_cpu_feature(&manifest) {
            return Err(load_err(
                dir,
                format!(
                    "compiled for a CPU with {missing}, which this CPU lacks ({}); compile the model again here",
                    manifest.target
                ),
            ));
        }
        let so = dir.join("kernels.so");
        // Opened only as a file the manifest's hashes checked (a truncated
        // one, its entry removed and the manifest sealed again, stopped
        // the process with SIGBUS in the loader).
        if !manifest.files.contains_key("kernels.so") {
            return Err(load_err(&so, "not among the files the manifest checks (the manifest was edited)".into()));
        }
        // SAFETY: loading runs no initialisers beyond the C runtime's; the
        // compiler generated the library from the manifest beside it.
        // (The loader's message names the file itself: said once.)
        let library = unsafe { libloading::Library::new(&so) }.map_err(|e| {
            let text = e.to_string();
            let shown = so.display().to_string();
            load_err(&so, text.strip_prefix(&format!("{shown}: ")).unwrap_or(&text).to_string())
        })?;
        let mut kernels = HashMap::new();
        for f in &manifest.functions {
            let mut resolved = Vec::new();
            for c in &f.calls {
                if c.collective.is_some() {
                    resolved.push(None);
                    continue;
                }
                let get = |name: &str| -> Result<KernelFn> {
                    let symbol: libloading::Symbol<KernelFn> = unsafe { library.get(name.as_bytes()) }
                        .map_err(|e| load_err(&so, format!("{name} (for @{}): {e}", f.name)))?;
                    Ok(*symbol)
                };
                let epilogue = match c.library.as_ref().and_then(|l| l.epilogue.as_deref()) {
                    Some(e) => Some(get(e)?),
                    None => None,
                };
                resolved.push(Some((get(&c.symbol)?, epilogue)));
            }
            kernels.insert(f.name.clone(), resolved);
        }
        let constants = manifest
            .constants
            .iter()
            .map(|c| {
                let mut b = Bytes::zeroed(c.values.len() * c.dtype.bytes());
                write_values(b.as_bytes_mut(), c.dtype, &c.values);
                b
            })
            .collect();
        let weights = manifest.weights.as_ref().map(|w| dir.join(w));
        let chosen = manifest
            .functions
            .iter()
            .map(|f| (f.name.clone(), f.calls.iter().map(|_| std::sync::OnceLock::new()).collect()))
            .collect();
        let features = &manifest.cpu_features;
        let wide = features.is_empty() || features.iter().any(|x| x == "+avx512f") || !host_has("+avx512f");
        Ok(CpuModule {
            manifest,
            wide,
            weights,
            kernels,
            chosen,
            registry: Registry::open(),
            forced: None,
            trace: None,
            constants,
            pool,
            widened: Default::default(),
            packed: Default::default(),
            packing: Default::default(),
            ran: Default::default(),
            _library: library,
        })
    }

    /// Starts (or stops) recording the time of every kernel call.
    pub fn set_profiling(&mut self, on: bool) {
        self.trace = on.then(Default::default);
    }

    /// The calls recorded since the last take.
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        self.trace
            .as_ref()
            .map(|t| t.lock().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Runs every GEMM with `choice` instead of the registry's decision.
    pub fn force_gemm(&mut self, choice: Option<Choice>) {
        self.forced = choice;
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The GEMM registry this module's calls consult.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    pub fn function(&self, name: &str) -> Result<&Function> {
        self.manifest.functions.iter().find(|f| f.name == name).ok_or_else(|| RuntimeError::NoFunction(name.into()))
    }

    /// Runs `name` over `args`, one buffer per argument of its signature in
    /// order (the arena included), each exactly the argument's size. Its
    /// collectives (a data-parallel step's) sum over nothing: a group of one.
    pub fn run(&self, name: &str, args: &mut [&mut Bytes]) -> Result<()> {
        self.run_with(name, args, None)
    }

    /// [`CpuModule::run`] with the replicas of a data-parallel run: each
    /// collective call starts a sum over `comm` where it stands, and the
    /// first later call that touches one of its buffers waits for it (the
    /// kernels in between run meanwhile).
    pub fn run_with(&self, name: &str, args: &mut [&mut Bytes], comm: Option<&dyn Communicator>) -> Result<()> {
        let f = self.function(name)?;
        let bad = |message: String| RuntimeError::Arguments { function: name.into(), message };
        if args.len() != f.args.len() {
            return Err(bad(format!("{} buffers for {} arguments", args.len(), f.args.len())));
        }
        for (i, (a, spec)) in args.iter().zip(&f.args).enumerate() {
            let want = if spec.bind == "arena" { f.arena_bytes as usize } else { spec.bytes() };
            if a.len() != want {
                return Err(bad(format!(
                    "argument #{i} ({}) holds {} bytes, expected {want} ({:?} {:?})",
                    spec.bind,
                    a.len(),
                    spec.shape,
                    spec.dtype
                )));
            }
        }
        // The calling thread runs kernels too; its float mode is restored on
        // return, so the embedding program's own arithmetic is untouched.
        let _mode = FloatMode::flush_denormals();
        let arena_index = f.args.iter().position(|a| a.bind == "arena");
        let bases: Vec<*mut u8> = args.iter_mut().map(|a| a.ptr()).collect();
        let constants: Vec<*const u8> = self.constants.iter().map(|c| c.const_ptr()).collect();
        let comm = comm.filter(|c| c.size() > 1);
        let mut in_flight: Vec<InFlight> = Vec::new();
        // The step's sums (not a micro-batch's local scaling), numbered as
        // they start, for messages.
        let summed = |c: &Call| c.collective.as_ref().is_some_and(|c| c.op != CollectiveOp::Scale);
        let buckets = if comm.is_some() { f.calls.iter().filter(|c| summed(c)).count() } else { 0 };
        let mut bucket = 0;
        for (k, (call, resolved)) in f.calls.iter().zip(&self.kernels[name]).enumerate() {
            let pointers: Vec<*mut u8> = call
                .buffers
                .iter()
                .map(|b| match *b {
                    Buffer::Arg { index } => bases[index],
                    // SAFETY: load() checked that the function has an arena
                    // and that the offset lies inside it.
                    Buffer::Arena { offset } => unsafe { bases[arena_index.unwrap_or_default()].add(offset as usize) },
                    Buffer::Constant { index } => constants[index] as *mut u8,
                })
                .collect();
            let Some((kernel, epilogue)) = resolved else {
                let local = call.collective.as_ref().is_some_and(|c| c.op == CollectiveOp::Scale);
                match comm {
                    Some(comm) if !local => {
                        bucket += 1;
                        in_flight.push(InFlight::start(
                            comm,
                            name,
                            k,
                            (bucket, buckets),
                            call,
                            &pointers,
                            &self.packing,
                        )?)
                    }
                    // One replica, or a micro-batch's share (local): its
                    // buffers times its weight.
                    _ => scale_by_weight(call, &pointers),
                }
                continue;
            };
            if !in_flight.is_empty() {
                let mine = ranges(call, &pointers);
                let mut i = 0;
                while i < in_flight.len() {
                    if in_flight[i].overlaps(&mine) {
                        let done = in_flight.remove(i);
                        self.finish_collective(done, name)?;
                    } else {
                        i += 1;
                    }
                }
            }
            check_indices(call, &pointers).map_err(|message| RuntimeError::Kernel {
                function: name.into(),
                call: k,
                op: call.op.clone(),
                message,
            })?;
            // A GEMM's candidate is chosen (measured, on a shape's first
            // use) before its time starts: the trace holds kernel time only.
            let (kernel, epilogue) = (kernel, epilogue);
            let gemm = match &call.library {
                Some(g) if g.aliases.iter().all(|&a| pointers[a] != pointers[g.out]) => Some((
                    g,
                    match self.forced {
                        Some(forced) => forced,
                        None => *self.chosen[name][k]
                            .get_or_init(|| self.gemm_choice(*kernel, *epilogue, call, g, &pointers)),
                    },
                )),
                _ => None,
            };
            let started = self.trace.as_ref().map(|_| crate::backend::trace_clock_us());
            match gemm {
                Some((g, choice)) => self.run_gemm(choice, *kernel, *epilogue, call, g, &pointers),
                None => self.launch(*kernel, call, &pointers),
            }
            if let (Some(trace), Some(start)) = (&self.trace, started)
                && let Ok(mut trace) = trace.lock()
            {
                trace.push(TraceEvent {
                    function: name.to_string(),
                    call: k,
                    kernel: call.symbol.clone(),
                    op: call.op.clone(),
                    origin: call.origin.clone(),
                    stream: 0,
                    start_us: start,
                    duration_us: crate::backend::trace_clock_us() - start,
                });
            }
            // The engine progresses while the kernels run.
            for f in &mut in_flight {
                f.test(name)?;
            }
        }
        for done in in_flight {
            self.finish_collective(done, name)?;
        }
        Ok(())
    }

    /// Waits for a collective and writes its sums back. Profiled, it is
    /// two events: its time from start to completion on stream 1
    /// (communication, overlapping the kernels), and the time the step
    /// stood waiting for it (with the unpacking) on stream 0.
    fn finish_collective(&self, done: InFlight, function: &str) -> Result<()> {
        let (call, start, op, origin) = (done.call, done.started_us, done.op.clone(), done.origin.clone());
        let waiting = crate::backend::trace_clock_us();
        done.finish(function, &self.packing)?;
        if let Some(trace) = &self.trace
            && let Ok(mut trace) = trace.lock()
        {
            let now = crate::backend::trace_clock_us();
            let event = |kernel: &str, stream: u32, start_us: f64| TraceEvent {
                function: function.to_string(),
                call,
                kernel: kernel.into(),
                op: if stream == 0 { format!("{op} (wait)") } else { op.clone() },
                origin: origin.clone(),
                stream,
                start_us,
                duration_us: now - start_us,
            };
            trace.push(event("all-reduce", 1, start));
            trace.push(event("all-reduce wait", 0, waiting));
        }
        Ok(())
    }

    /// The registry's measured-faster candidate for a GEMM (the caller
    /// applies a forced one first) (measured on first use of the shape, every
    /// candidate on the live buffers; the GEMM overwrites its output, so a
    /// repeat is harmless).
    fn gemm_choice(
        &self,
        kernel: KernelFn,
        epilogue: Option<KernelFn>,
        call: &Call,
        g: &LibraryGemm,
        pointers: &[*mut u8],
    ) -> Choice {
        let key = Registry::key(g, call, &self.manifest.target, self.threads());
        let known = self.registry.get(&key);
        let predicted = known.and_then(|c| self.registry.recheck_due(&key, c.name()));
        if let (Some(choice), None) = (known, predicted) {
            return choice;
        }
        let _timing = crate::registry::MeasuringTimer::start(known.is_none());
        // Timed from a cold cache, as inside a train step, where the
        // kernels between two uses of a weight evict it. The eviction
        // buffer is allocated once per process (a new model after a
        // rewrite measures its new shapes without faulting it in again).
        static SCRATCH: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
        let mut scratch = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
        if scratch.is_empty() {
            // Where 64 MiB cannot be had (a low `ulimit -v`), the timings
            // run from a warmer cache rather than the process aborting.
            if scratch.try_reserve_exact(64 << 20).is_ok() {
                scratch.resize(64 << 20, 0);
            }
        }
        let mut cold = |round: u8, run: &dyn Fn()| {
            for byte in scratch.iter_mut().step_by(64) {
                *byte = byte.wrapping_add(round);
            }
            let t = std::time::Instant::now();
            run();
            t.elapsed().as_secs_f64() * 1e3
        };
        if let (Some(choice), Some(check)) = (known, predicted) {
            // A decision from the machine's file is timed again on its first
            // use in this process, beside its recorded runner-up (a warm-up,
            // then the best of 3 interleaved cold runs each). Unless the
            // choice drifted (then every candidate is measured again), the
            // two times lower the recorded ones, and the runner-up takes
            // over if its best now beats the choice's by the margin.
            let run = || self.run_gemm(choice, kernel, epilogue, call, g, pointers);
            let other = check.runner_up.map(|c| move || self.run_gemm(c, kernel, epilogue, call, g, pointers));
            run();
            if let Some(o) = &other {
                o();
            }
            let (mut observed, mut runner_up) = (f64::INFINITY, other.as_ref().map(|_| f64::INFINITY));
            for round in 0..3u8 {
                observed = observed.min(cold(round, &run));
                if let (Some(o), Some(t)) = (&other, runner_up.as_mut()) {
                    *t = t.min(cold(round, o));
                }
            }
            if !crate::registry::drifted(check.predicted, observed) {
                return self.registry.confirm(key, choice, observed, check.runner_up.zip(runner_up));
            }
        }
        // Every candidate once to warm up, then rounds that run each in
        // turn (interleaved: a burst of load elsewhere slows all of
        // them, not the one measured during it), the cache evicted
        // before each run; a candidate's time is its best.
        let wide = self.wide;
        let mut candidates = vec![Choice::Generated, Choice::Library, Choice::LibrarySwapped];
        if wide {
            candidates.push(Choice::GemmRs);
        }
        // OpenBLAS picks its kernels by the CPU it finds: under a narrower
        // ISA, only when told which (OPENBLAS_CORETYPE=Haswell for AVX2).
        let openblas_isa = wide || std::env::var_os("OPENBLAS_CORETYPE").is_some();
        let cblas_fits = blas::Cblas::fits(g.m, g.n, g.k, g.a_strides, g.b_strides);
        if openblas_isa && blas::openblas().is_some() && cblas_fits {
            candidates.push(Choice::OpenBlas);
        }
        // MKL likewise picks its kernels by the CPU (held to AVX2 by
        // MKL_ENABLE_INSTRUCTIONS=AVX2).
        let mkl_isa = wide || std::env::var_os("MKL_ENABLE_INSTRUCTIONS").is_some();
        if mkl_isa && blas::mkl().is_some() && cblas_fits {
            candidates.push(Choice::Mkl);
        }
        let avx512 = wide && Kernel::Avx512F32.available();
        if avx512 {
            candidates.push(Choice::Avx512);
        } else if Kernel::Avx2F32.available() {
            // Where the AVX-512 kernel is not a candidate (no AVX-512, or
            // host code held to AVX2), the AVX2 one is.
            candidates.push(Choice::Avx2);
        }
        if wide && g.widen == Some(DType::BF16) && Kernel::Avx512Bf16.available() {
            candidates.push(Choice::Bf16Dot);
        }
        if mkl_isa && g.widen == Some(DType::BF16) && blas::mkl().is_some_and(|m| m.has_bf16()) && cblas_fits {
            candidates.push(Choice::MklBf16);
        }
        let runs: Vec<Box<dyn Fn() + '_>> = candidates
            .iter()
            .map(|&c| -> Box<dyn Fn() + '_> { Box::new(move || self.run_gemm(c, kernel, epilogue, call, g, pointers)) })
            .collect();
        // The warm-up is timed too: a candidate far behind the fastest there
        // is not run again (on a first nanoGPT step in bf16, every shape's
        // generated and f32-library candidates took 6 runs of up to a
        // second each, 101 s of timing before the first step). Only
        // candidates slower than `ELIMINATE_MS` are dropped: for small
        // products a first call's one-time costs (a library's set-up) can
        // be most of its time.
        let mut times: Vec<(Choice, f64)> = candidates.iter().map(|c| (*c, f64::INFINITY)).collect();
        for (run, (_, best)) in runs.iter().zip(times.iter_mut()) {
            let t = std::time::Instant::now();
            run();
            *best = t.elapsed().as_secs_f64() * 1e3;
        }
        let warm_live: Vec<bool> = eliminate(&times, WARM_BEHIND);
        let mut live = warm_live.clone();
        // Each time measured from here is a cold one.
        times.iter_mut().zip(&live).filter(|(_, l)| **l).for_each(|(t, _)| t.1 = f64::INFINITY);
        for round in 0..5u8 {
            for ((run, (_, best)), l) in runs.iter().zip(times.iter_mut()).zip(&live) {
                if *l {
                    *best = best.min(cold(round, run.as_ref()));
                }
            }
            if round == 0 {
                let behind = eliminate(&times, COLD_BEHIND);
                live.iter_mut().zip(behind).for_each(|(l, b)| *l &= b);
            }
        }
        drop(runs);
        drop(cold);
        std::hint::black_box(&scratch);
        // Those dropped after the warm-up have a warm time only, which is
        // no match for the others' cold ones: left out of the decision
        // (and of the times it records).
        let times: Vec<(Choice, f64)> = times.into_iter().zip(warm_live).filter(|(_, l)| *l).map(|(t, _)| t).collect();
        self.registry.decide(key, known, &times)
    }

    /// Runs a GEMM call with candidate `choice`.
    fn run_gemm(
        &self,
        choice: Choice,
        kernel: KernelFn,
        epilogue: Option<KernelFn>,
        call: &Call,
        g: &LibraryGemm,
        pointers: &[*mut u8],
    ) {
        if choice == Choice::Generated {
            self.count(Choice::Generated);
            return self.launch(kernel, call, pointers);
        }
        let wide = self.wide;
        let library = |epilogue: Option<KernelFn>, pointers: &[*mut u8]| match choice {
            Choice::LibrarySwapped => self.library_gemm(epilogue, call, g, pointers, true),
            Choice::GemmRs if wide => self.gemm_rs(epilogue, call, g, pointers),
            Choice::OpenBlas => self.cblas_gemm(Choice::OpenBlas, blas::openblas(), epilogue, call, g, pointers),
            Choice::Mkl => self.cblas_gemm(Choice::Mkl, blas::mkl(), epilogue, call, g, pointers),
            Choice::Avx512 if wide && Kernel::Avx512F32.available() => {
                self.packed_gemm(Kernel::Avx512F32, epilogue, call, g, pointers, None)
            }
            Choice::Avx2 if Kernel::Avx2F32.available() => {
                self.packed_gemm(Kernel::Avx2F32, epilogue, call, g, pointers, None)
            }
            _ => self.library_gemm(epilogue, call, g, pointers, false),
        };
        let Some(narrow) = g.widen else {
            return library(epilogue, pointers);
        };
        if choice == Choice::MklBf16 && narrow == DType::BF16 {
            if let Some(mkl) =
                blas::mkl().filter(|m| m.has_bf16() && blas::Cblas::fits(g.m, g.n, g.k, g.a_strides, g.b_strides))
            {
                return self.mkl_bf16_gemm(mkl, epilogue, call, g, pointers);
            }
        }
        if choice == Choice::Bf16Dot && wide && narrow == DType::BF16 && Kernel::Avx512Bf16.available() {
            // The bf16 operands as they are, into the f32 product that the
            // epilogue rounds into the output.
            let mut widened = self.widened.lock().unwrap_or_else(|e| e.into_inner());
            let c = grown(&mut widened[2], (g.batch * g.m * g.n).max(1));
            return self.packed_gemm(Kernel::Avx512Bf16, epilogue, call, g, pointers, Some(c.as_mut_ptr()));
        }
        // 16-bit operands: the f32 GEMM on widened copies into an f32
        // product, which the epilogue rounds into the output.
        let mut widened = self.widened.lock().unwrap_or_else(|e| e.into_inner());
        let [a, b, c] = &mut *widened;
        let a_len = if g.a_batch > 0 { g.a_batch * g.batch } else { g.m * g.k };
        let b_len = if g.b_batch > 0 { g.b_batch * g.batch } else { g.k * g.n };
        widen(narrow, pointers[g.a], a_len, a);
        widen(narrow, pointers[g.b], b_len, b);
        let c = grown(c, (g.batch * g.m * g.n).max(1));
        let mut inner = pointers.to_vec();
        inner[g.a] = a.as_mut_ptr() as *mut u8;
        inner[g.b] = b.as_mut_ptr() as *mut u8;
        inner[g.out] = c.as_mut_ptr() as *mut u8;
        library(None, &inner);
        let mut outer = pointers.to_vec();
        outer.push(c.as_mut_ptr() as *mut u8);
        if let Some(e) = epilogue {
            self.launch(e, call, &outer);
        }
    }

    /// The runtime's own GEMM with `kernel` (`packed_gemm`), into
    /// `product` (an f32 buffer the epilogue reads after the call's
    /// buffers) or else the output, then the epilogue.
    fn packed_gemm(
        &self,
        kernel: Kernel,
        epilogue: Option<KernelFn>,
        call: &Call,
        g: &LibraryGemm,
        pointers: &[*mut u8],
        product: Option<*mut f32>,
    ) {
        self.count(match kernel {
            Kernel::Avx512F32 => Choice::Avx512,
            Kernel::Avx2F32 => Choice::Avx2,
            Kernel::Avx512Bf16 => Choice::Bf16Dot,
        });
        let c = product.unwrap_or(pointers[g.out] as *mut f32);
        // The epilogue reads the call's buffers, then the product where
        // there is one.
        let mut table = pointers.to_vec();
        if let Some(product) = product {
            table.push(product as *mut u8);
        }
        let rows = Pointers(table.as_ptr());
        // Rows a thread has completed, through the epilogue on that thread
        // while they are in its caches (the epilogue's work items are the
        // product's rows, over the batch).
        let run_rows = epilogue.map(|e| {
            move |lo: usize, hi: usize| {
                let table = rows;
                // SAFETY: the epilogue reads and writes only rows lo..hi of
                // its buffers (and the whole of the read-only ones), which no
                // other thread writes now.
                unsafe { e(lo as i64, hi as i64, table.get()) }
            }
        });
        let mut packed = self.packed.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller checked the CPU; the manifest's shapes and
        // strides stay inside A, B and the output, and `product` holds the
        // batch's products.
        let done = unsafe {
            packed_gemm::gemm(
                &self.pool,
                gemm_threads(g, self.threads()),
                &mut packed,
                g,
                kernel,
                pointers[g.a],
                pointers[g.b],
                c,
                run_rows.as_ref().map(|f| f as packed_gemm::RowsDone),
            )
        };
        drop(packed);
        if let (Some(e), false) = (epilogue, done) {
            self.launch(e, call, &table);
        }
    }

    /// The `gemm` crate's GEMM, single-threaded on each of the team's
    /// threads ([`Self::split_gemm`]), then the epilogue. (The crate threads
    /// itself on rayon; its workers would sleep between GEMMs where the
    /// team spins, and compete with the team for the cores.)
    fn gemm_rs(&self, epilogue: Option<KernelFn>, call: &Call, g: &LibraryGemm, pointers: &[*mut u8]) {
        self.count(Choice::GemmRs);
        let [ar, ac] = g.a_strides.map(|s| s as isize);
        let [br, bc] = g.b_strides.map(|s| s as isize);
        self.split_gemm(g, pointers, (epilogue, call), |x| {
            // SAFETY: the block lies inside A, B and the output
            // ([`Self::split_gemm`]). gemm's convention is
            // dst = alpha dst + beta lhs rhs; dst is not read.
            unsafe {
                gemm::gemm(
                    x.m,
                    x.n,
                    g.k,
                    x.c,
                    1,
                    g.n as isize,
                    false,
                    x.a,
                    ac,
                    ar,
                    x.b,
                    bc,
                    br,
                    0.0,
                    g.alpha as f32,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            }
        });
    }

    /// Runs `piece` on blocks of the output over the team's threads
    /// ([`gemm_threads`] of them), every batch: rows of A and C where the
    /// output is taller than wide, else columns of B and C; blocks of at
    /// least 16. Each block's pointers lie inside A, B and C (the
    /// manifest's shapes and strides do), and blocks are disjoint in C.
    /// Then the epilogue, if any, on the call's buffers (see
    /// [`Self::split_gemm_into`]).
    fn split_gemm(
        &self,
        g: &LibraryGemm,
        pointers: &[*mut u8],
        (epilogue, call): (Option<KernelFn>, &Call),
        piece: impl Fn(GemmBlock<f32>) + Sync,
    ) {
        let (a, b, c) = (pointers[g.a], pointers[g.b], pointers[g.out] as *mut f32);
        self.split_gemm_into(g, (a, b, c), (epilogue.map(|e| (e, pointers)), call), piece)
    }

    /// [`Self::split_gemm`] on operands of element type `T` at `a` and `b`
    /// into the f32 product at `c` (the output, or an f32 buffer the
    /// epilogue reads), then the epilogue `(kernel, its buffers)`: where
    /// the threads share blocks of whole rows of the product, on each
    /// block's rows right after them, on the thread that computed them and
    /// while they are in its caches (as the runtime's own GEMM does), else
    /// over all of it after the last block.
    fn split_gemm_into<T>(
        &self,
        g: &LibraryGemm,
        (a, b, c): (*mut u8, *mut u8, *mut f32),
        (epilogue, call): (Option<(KernelFn, &[*mut u8])>, &Call),
        piece: impl Fn(GemmBlock<T>) + Sync,
    ) {
        let by_rows = g.m >= g.n;
        let long = if by_rows { g.m } else { g.n };
        let threads = gemm_threads(g, self.threads());
        let (a, b, c) = (Pointers(a as _), Pointers(b as _), Pointers(c as _));
        // The epilogue's work items are the product's rows over the batch.
        let rows = epilogue.map(|(e, table)| {
            let table = Pointers(table.as_ptr());
            move |lo: usize, hi: usize| {
                // SAFETY: the epilogue reads and writes only rows lo..hi of
                // its buffers (and the whole of the read-only ones), which
                // no other thread writes now.
                unsafe { e(lo as i64, hi as i64, table.get()) }
            }
        });
        if threads > 1 && whole_products_split(g.batch, threads) {
            // A batch of products that the threads share evenly (attention's
            // 32 heads' products): whole products per thread, one fork-join
            // for all (split by rows each product was one fork-join per
            // product, each thread's block a half of a small product).
            let product = |batch: usize| {
                let (a, b, c) = (a.get() as *const T, b.get() as *const T, c.get() as *mut f32);
                GemmBlock {
                    m: g.m,
                    n: g.n,
                    a: a.wrapping_add(batch * g.a_batch),
                    b: b.wrapping_add(batch * g.b_batch),
                    c: c.wrapping_add(batch * g.m * g.n),
                }
            };
            self.pool.run(threads, &|p| {
                for i in g.batch * p / threads..g.batch * (p + 1) / threads {
                    piece(product(i));
                    if let Some(rows) = &rows {
                        rows(i * g.m, (i + 1) * g.m);
                    }
                }
            });
            return;
        }
        let pieces = threads.min(long.div_ceil(16)).max(1);
        let block = |batch: usize, p: usize| {
            let (lo, hi) = (long * p / pieces, long * (p + 1) / pieces);
            let (a, b, c) = (a.get() as *const T, b.get() as *const T, c.get() as *mut f32);
            let (a, b, c) = (
                a.wrapping_add(batch * g.a_batch),
                b.wrapping_add(batch * g.b_batch),
                c.wrapping_add(batch * g.m * g.n),
            );
            if by_rows {
                piece(GemmBlock {
                    m: hi - lo,
                    n: g.n,
                    a: a.wrapping_add(lo * g.a_strides[0]),
                    b,
                    c: c.wrapping_add(lo * g.n),
                });
                if let (Some(rows), true) = (&rows, pieces > 1) {
                    rows(batch * g.m + lo, batch * g.m + hi);
                }
            } else {
                piece(GemmBlock {
                    m: g.m,
                    n: hi - lo,
                    a,
                    b: b.wrapping_add(lo * g.b_strides[1]),
                    c: c.wrapping_add(lo),
                });
            }
        };
        for batch in 0..g.batch {
            if pieces == 1 {
                block(batch, 0);
            } else {
                self.pool.run(pieces, &|p| block(batch, p));
            }
        }
        // Blocks of columns, or one block on one thread (a product too
        // small to split, whose epilogue the team still shares).
        if let (Some((e, table)), false) = (epilogue, by_rows && pieces > 1) {
            self.launch(e, call, table);
        }
    }

    /// MKL's bf16 GEMM (`mkl-bf16`) on the bf16 operands as they are, over
    /// the team's threads ([`Self::split_gemm_into`]), into an f32 product
    /// that the epilogue rounds into the output (as `bf16-dot` does).
    fn mkl_bf16_gemm(
        &self,
        mkl: &blas::Cblas,
        epilogue: Option<KernelFn>,
        call: &Call,
        g: &LibraryGemm,
        pointers: &[*mut u8],
    ) {
        self.count(Choice::MklBf16);
        let mut widened = self.widened.lock().unwrap_or_else(|e| e.into_inner());
        let product = grown(&mut widened[2], (g.batch * g.m * g.n).max(1)).as_mut_ptr();
        let mut outer = pointers.to_vec();
        outer.push(product as *mut u8);
        let epilogue = epilogue.map(|e| (e, &outer[..]));
        self.split_gemm_into::<u16>(g, (pointers[g.a], pointers[g.b], product), (epilogue, call), |x| {
            // SAFETY: the block lies inside A, B (bf16) and the product
            // ([`Self::split_gemm_into`]); `fits` holds for every block.
            unsafe {
                mkl.gemm_bf16((x.m, x.n, g.k), g.alpha as f32, (x.a, g.a_strides), (x.b, g.b_strides), (x.c, g.n))
            }
        });
    }

    /// A CBLAS library's sgemm (OpenBLAS's, MKL's), single-threaded on each
    /// of the team's threads ([`Self::split_gemm`]); then the epilogue.
    /// matrixmultiply's where the library is missing or cannot take the
    /// operands' strides (a forced choice).
    fn cblas_gemm(
        &self,
        choice: Choice,
        library: Option<&'static blas::Cblas>,
        epilogue: Option<KernelFn>,
        call: &Call,
        g: &LibraryGemm,
        pointers: &[*mut u8],
    ) {
        let Some(blas) = library.filter(|_| blas::Cblas::fits(g.m, g.n, g.k, g.a_strides, g.b_strides)) else {
            return self.library_gemm(epilogue, call, g, pointers, false);
        };
        self.count(choice);
        self.split_gemm(g, pointers, (epilogue, call), |x| {
            // SAFETY: the block lies inside A, B and the output
            // ([`Self::split_gemm`]); `fits` holds for every block of them.
            unsafe { blas.sgemm((x.m, x.n, g.k), g.alpha as f32, (x.a, g.a_strides), (x.b, g.b_strides), (x.c, g.n)) }
        });
    }

    /// matrixmultiply's sgemm, single-threaded on each of the team's
    /// threads ([`Self::split_gemm`]; the crate's own threading would use
    /// every core whatever the team's size, so a 1-thread session ran
    /// these GEMMs on 2 and the registry measured them so), then the
    /// epilogue. `swapped` computes C^T = B^T A^T instead,
    /// which packs A where the direct form packs B: the better one depends
    /// on which operand is strided and which is still in cache.
    fn library_gemm(
        &self,
        epilogue: Option<KernelFn>,
        call: &Call,
        g: &LibraryGemm,
        pointers: &[*mut u8],
        swapped: bool,
    ) {
        self.count(if swapped { Choice::LibrarySwapped } else { Choice::Library });
        let [ar, ac] = g.a_strides.map(|s| s as isize);
        let [br, bc] = g.b_strides.map(|s| s as isize);
        let ldc = g.n as isize;
        self.split_gemm(g, pointers, (epilogue, call), |x| {
            // SAFETY: the block lies inside A, B and the output
            // ([`Self::split_gemm`]).
            unsafe {
                if swapped {
                    matrixmultiply::sgemm(x.n, g.k, x.m, g.alpha as f32, x.b, bc, br, x.a, ac, ar, 0.0, x.c, 1, ldc);
                } else {
                    matrixmultiply::sgemm(x.m, g.k, x.n, g.alpha as f32, x.a, ar, ac, x.b, br, bc, 0.0, x.c, ldc, 1);
                }
            }
        });
    }

    fn count(&self, choice: Choice) {
        if let Some(i) = Choice::ALL.iter().position(|&c| c == choice) {
            self.ran[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// How many GEMMs candidate `choice`'s code has run in this module
    /// (the path that ran: a forced candidate that could not run a GEMM is
    /// not counted, its fallback is). For tests that must know a
    /// candidate's own code ran.
    pub fn gemm_runs(&self, choice: Choice) -> usize {
        Choice::ALL
            .iter()
            .position(|&c| c == choice)
            .map_or(0, |i| self.ran[i].load(std::sync::atomic::Ordering::Relaxed))
    }

    fn launch(&self, kernel: KernelFn, call: &Call, pointers: &[*mut u8]) {
        let work = call.work as i64;
        let pieces = kernel_pieces(call, self.threads()) as i64;
        let table = Pointers(pointers.as_ptr());
        if pieces == 1 {
            // SAFETY: the kernel reads and writes only the buffers the
            // manifest gives it, all live for this call.
            unsafe { kernel(0, work, table.0) };
            return;
        }
        self.pool.run(pieces as usize, &|p| {
            let (lo, hi) = (work * p as i64 / pieces, work * (p as i64 + 1) / pieces);
            // SAFETY: pieces write disjoint rows.
            unsafe { kernel(lo, hi, table.get()) }
        });
    }
}

/// Whether this CPU has `feature` (`+avx512f`, as clang names it). A
/// feature the runtime cannot test is taken as present: the compiler's own
/// host check (its cache key) stands for it.
/// The first CPU feature `manifest`'s host code was compiled for that this
/// CPU lacks, if any.
pub fn missing_cpu_feature(manifest: &Manifest) -> Option<&str> {
    manifest.cpu_features.iter().map(String::as_str).find(|f| !host_has(f))
}

fn host_has(feature: &str) -> bool {
    let name = feature.trim_start_matches('+');
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => {
                match name {
                    $($f => std::arch::is_x86_feature_detected!($f),)*
                    _ => true,
                }
            };
        }
        detect!(
            "sse3",
            "ssse3",
            "sse4.1",
            "sse4.2",
            "popcnt",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "bmi1",
            "bmi2",
            "lzcnt",
            "movbe",
            "avx512f",
            "avx512cd",
            "avx512bw",
            "avx512dq",
            "avx512vl",
            "avx512ifma",
            "avx512vbmi",
            "avx512vbmi2",
            "avx512vnni",
            "avx512bitalg",
            "avx512vpopcntdq",
            "avx512bf16",
            "avx512fp16",
            "gfni",
            "vaes",
            "vpclmulqdq"
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = name;
        true
    }
}

/// The first `len` elements of `buffer`, grown to hold them where it is
/// shorter; never shrunk. (A scratch buffer shared by GEMMs of several
/// sizes, resized to each, was cut to a small one's size and then filled
/// with zeros again up to a large one's: 12 MB of stores, half a
/// millisecond, before the transformer block's bf16 FFN product.)
pub(crate) fn grown<T: Copy + Default>(buffer: &mut Vec<T>, len: usize) -> &mut [T] {
    if buffer.len() < len {
        buffer.resize(len, T::default());
    }
    &mut buffer[..len]
}

/// Kernels run with subnormal floats flushed to zero (MXCSR FTZ and DAZ on
/// x86-64), as TensorFlow's and XLA's CPU runtimes do: a gradient that decays
/// into the subnormal range (a model that has fit its batch) otherwise makes
/// every multiply on it a microcode assist, several times slower. Values below
/// 1.2e-38 become 0; nothing else changes.
fn flush_denormals(on: bool) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);
        let mut old: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr read and write this thread's SSE control
        // register only; the bits set are the two flush modes.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut old, options(nostack));
            let new = if on { old | FTZ_DAZ } else { old & !FTZ_DAZ };
            std::arch::asm!("ldmxcsr [{}]", in(reg) &new, options(nostack, readonly));
        }
        old
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = on;
        0
    }
}

/// Flush-to-zero for the current thread while alive; the previous mode after.
struct FloatMode(u32);

impl FloatMode {
    fn flush_denormals() -> Self {
        FloatMode(flush_denormals(true))
    }
}

impl Drop for FloatMode {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: restores the value stmxcsr read on this thread.
        unsafe {
            std::arch::asm!("ldmxcsr [{}]", in(reg) &self.0, options(nostack, readonly));
        }
    }
}

/// The byte ranges a call's buffers span.
fn ranges(call: &Call, pointers: &[*mut u8]) -> Vec<(usize, usize)> {
    pointers.iter().zip(&call.bytes).map(|(&p, &n)| (p as usize, p as usize + n as usize)).collect()
}

/// A collective call's weight (its last buffer, an f32).
fn weight_of(pointers: &[*mut u8]) -> f64 {
    // SAFETY: the loader checked that a collective's last buffer is 4 bytes.
    pointers.last().map_or(1.0, |&p| unsafe { *(p as *const f32) } as f64)
}

/// A value times a replica's (or micro-batch's) weight. Weight 0 is a
/// replica with no rows of a short last batch: it adds exactly nothing,
/// whatever it computed on the row it ran (in fp16 with loss scaling, one
/// row's gradient may overflow, and inf times 0 is NaN, which skipped the
/// step of every replica as an overflow).
fn weighed(v: f64, w: f64) -> f64 {
    if w == 0.0 { 0.0 } else { v * w }
}

/// A collective of one replica: each summed buffer times the weight.
fn scale_by_weight(call: &Call, pointers: &[*mut u8]) {
    let w = weight_of(pointers);
    if w == 1.0 {
        return;
    }
    let Some(c) = &call.collective else { return };
    for ((&p, &bytes), &dtype) in pointers.iter().zip(&call.bytes).zip(&c.dtypes) {
        let n = bytes as usize / dtype.bytes();
        // SAFETY: the buffer holds `n` elements of `dtype` (checked at load).
        unsafe {
            match dtype {
                DType::F32 => std::slice::from_raw_parts_mut(p as *mut f32, n)
                    .iter_mut()
                    .for_each(|v| *v = weighed(*v as f64, w) as f32),
                DType::F64 => {
                    std::slice::from_raw_parts_mut(p as *mut f64, n).iter_mut().for_each(|v| *v = weighed(*v, w))
                }
                _ => {}
            }
        }
    }
}

/// A collective call in flight: its buffers, packed by element type into
/// one sum each, and where each buffer's values go back.
struct InFlight {
    call: usize,
    op: String,
    origin: Option<String>,
    started_us: f64,
    ranges: Vec<(usize, usize)>,
    /// (the sum, and per buffer: its address and element count)
    sums: Vec<(Box<dyn PendingSum>, Places)>,
}

impl InFlight {
    fn start(
        comm: &dyn Communicator,
        function: &str,
        k: usize,
        (bucket, buckets): (usize, usize),
        call: &Call,
        pointers: &[*mut u8],
        spares: &std::sync::Mutex<Vec<Values>>,
    ) -> Result<Self> {
        let fail =
            |message: String| RuntimeError::Kernel { function: function.into(), call: k, op: call.op.clone(), message };
        let c = call.collective.as_ref().ok_or_else(|| fail("not a collective".into()))?;
        let started_us = crate::backend::trace_clock_us();
        let w = weight_of(pointers);
        let mut f32s: (Vec<f32>, Places) = Default::default();
        let mut f64s: (Vec<f64>, Places) = Default::default();
        // Buffers of the last steps, each the smallest one that holds
        // this collective's values.
        let count = |t: DType| -> usize {
            c.dtypes.iter().zip(&call.bytes).filter(|(d, _)| **d == t).map(|(d, &b)| b as usize / d.bytes()).sum()
        };
        let (n32, n64) = (count(DType::F32), count(DType::F64));
        {
            let mut spares = spares.lock().unwrap_or_else(|e| e.into_inner());
            let mut take = |fits: &dyn Fn(&Values) -> bool| -> Option<Values> {
                let best = spares
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| fits(v))
                    .min_by_key(|(_, v)| match v {
                        Values::F32(v) => v.capacity(),
                        Values::F64(v) => v.capacity(),
                    })
                    .map(|(i, _)| i)?;
                Some(spares.swap_remove(best))
            };
            if let Some(Values::F32(mut v)) = take(&|v| matches!(v, Values::F32(v) if v.capacity() >= n32)) {
                v.clear();
                f32s.0 = v;
            }
            if let Some(Values::F64(mut v)) = take(&|v| matches!(v, Values::F64(v) if v.capacity() >= n64)) {
                v.clear();
                f64s.0 = v;
            }
        }
        f32s.0.reserve(n32);
        f64s.0.reserve(n64);
        for ((&p, &bytes), &dtype) in pointers.iter().zip(&call.bytes).zip(&c.dtypes) {
            let n = bytes as usize / dtype.bytes();
            // SAFETY: the loader checked that each buffer spans `bytes`
            // inside its memory; the element types are the manifest's.
            match dtype {
                DType::F32 => {
                    let values = unsafe { std::slice::from_raw_parts(p as *const f32, n) };
                    f32s.0.extend(values.iter().map(|&v| weighed(v as f64, w) as f32));
                    f32s.1.push((p, n));
                }
                DType::F64 => {
                    let values = unsafe { std::slice::from_raw_parts(p as *const f64, n) };
                    f64s.0.extend(values.iter().map(|&v| weighed(v, w)));
                    f64s.1.push((p, n));
                }
                other => return Err(fail(format!("an all-reduce of {other:?} buffers (f32 and f64 only)"))),
            }
        }
        // Said as the user knows it: which of the step's sums, and how large
        // (the kernel index only locates it in the manifest).
        let what = format!(
            "the step's all-reduce {bucket} of {buckets} (gradients or loss, {} values; @{function} kernel call #{k})",
            n32 + n64
        );
        let mut sums = Vec::new();
        if !f32s.1.is_empty() {
            sums.push((comm.start_sum(Values::F32(f32s.0), &what)?, f32s.1));
        }
        if !f64s.1.is_empty() {
            sums.push((comm.start_sum(Values::F64(f64s.0), &what)?, f64s.1));
        }
        Ok(InFlight {
            call: k,
            op: call.op.clone(),
            origin: call.origin.clone(),
            started_us,
            // The summed buffers (the weight is only read, at the start).
            ranges: ranges(call, &pointers[..pointers.len() - 1]),
            sums,
        })
    }

    fn overlaps(&self, other: &[(usize, usize)]) -> bool {
        self.ranges.iter().any(|&(a, b)| other.iter().any(|&(c, d)| a < d && c < b))
    }

    fn test(&mut self, _function: &str) -> Result<()> {
        for (s, _) in &mut self.sums {
            s.test()?;
        }
        Ok(())
    }

    /// Waits for the sums and writes them back; their buffers go to
    /// `spares` for the next collective.
    fn finish(self, _function: &str, spares: &std::sync::Mutex<Vec<Values>>) -> Result<()> {
        for (sum, places) in self.sums {
            let values = sum.wait()?;
            let mut at = 0;
            for (p, n) in places {
                // SAFETY: as in `start`: the buffer holds `n` elements of
                // the sum's type, and no kernel touches it until now.
                unsafe {
                    match &values {
                        Values::F32(v) => std::ptr::copy_nonoverlapping(v[at..at + n].as_ptr(), p as *mut f32, n),
                        Values::F64(v) => std::ptr::copy_nonoverlapping(v[at..at + n].as_ptr(), p as *mut f64, n),
                    }
                }
                at += n;
            }
            spares.lock().unwrap_or_else(|e| e.into_inner()).push(values);
        }
        Ok(())
    }
}

/// How many times the fastest candidate's warm-up time a GEMM candidate's
/// may take before it is timed no further (the warm-up includes one-time
/// costs, so the margin is wide).
const WARM_BEHIND: f64 = 6.0;

/// The same after the first cold round: a candidate this far behind the
/// best cold time cannot catch up in the four rounds left (load only adds
/// time, and it adds to every candidate of a round).
const COLD_BEHIND: f64 = 2.5;

/// Candidates faster than this (ms) are never dropped early: their timings
/// cost little, and a small product's first call is mostly set-up.
const ELIMINATE_MS: f64 = 1.0;

/// Which candidates of `times` (ms) go on being timed: those within
/// `behind` times the fastest, or faster than [`ELIMINATE_MS`].
fn eliminate(times: &[(Choice, f64)], behind: f64) -> Vec<bool> {
    let best = times.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
    times.iter().map(|t| t.1 < ELIMINATE_MS || t.1 <= best * behind).collect()
}

/// The fewest bytes a kernel's buffers must span for each of its pieces to
/// be worth a thread: a kernel that streams memory (a transpose, an
/// optimizer's update) does little arithmetic per element, so its grain
/// in operations ([`Call::grain`]) kept every one of the transformer
/// block's 2 MiB head transposes on one thread.
pub const GRAIN_BYTES: u64 = 768 << 10;

/// The pieces a kernel call is split into over `threads`: as many as its
/// work holds grains of operations or of bytes, at most one per work item
/// and per thread.
pub fn kernel_pieces(call: &Call, threads: usize) -> u64 {
    let by_ops = call.work / call.grain.max(1);
    let by_bytes = call.bytes.iter().sum::<u64>() / GRAIN_BYTES;
    by_ops.max(by_bytes).min(call.work).min(threads as u64).max(1)
}

/// The fewest multiply-adds of a GEMM worth a thread of their own: a
/// smaller one runs on the calling thread alone, whatever its candidate,
/// since waking a worker and joining it costs about as much (tens of
/// microseconds on a busy VM). MLP 64's 32 x 128 x 128 products (0.5 M)
/// split over 2 threads took 0.02 ms each in its step and 0.008 on one
/// (Intel Xeon EMR), which also kept every library candidate out of its
/// steps; the generated kernels' grain is of the same size
/// ([`Call::grain`]).
pub const GEMM_GRAIN_FMAS: usize = 1 << 21;

/// Whether a batch of `batch` products is split over `threads` threads
/// by whole products rather than by rows of each: where every thread gets
/// as many products (or the batch is large enough that one more does not
/// matter).
pub fn whole_products_split(batch: usize, threads: usize) -> bool {
    batch > 1 && (batch % threads == 0 || batch >= 4 * threads)
}

/// The threads a GEMM of `g`'s size is split over, of `threads`.
pub fn gemm_threads(g: &LibraryGemm, threads: usize) -> usize {
    let fmas = g.batch.saturating_mul(g.m).saturating_mul(g.n).saturating_mul(g.k);
    threads.min(fmas.div_ceil(GEMM_GRAIN_FMAS)).max(1)
}

/// One thread's block of a library GEMM ([`CpuModule::split_gemm`]):
/// `m x n` of C at `c` (rows `LibraryGemm::n` apart), from A's rows at `a`
/// and B's columns at `b` (the GEMM's strides), over its whole depth.
struct GemmBlock<T> {
    m: usize,
    n: usize,
    a: *const T,
    b: *const T,
    c: *mut f32,
}

#[derive(Clone, Copy)]
struct Pointers(*const *mut u8);
// SAFETY: the table outlives the scope that shares it, and the kernels
// write disjoint rows of the buffers it points to.
unsafe impl Send for Pointers {}
unsafe impl Sync for Pointers {}
impl Pointers {
    fn get(self) -> *const *mut u8 {
        self.0
    }
}

fn check_indices(call: &Call, pointers: &[*mut u8]) -> Result<(), String> {
    for c in &call.index_checks {
        if !matches!(c.dtype, DType::I32 | DType::I64) {
            continue;
        }
        // SAFETY: the operand holds `count` integers of `dtype`.
        let bytes = unsafe { std::slice::from_raw_parts(pointers[c.operand] as *const u8, c.count * c.dtype.bytes()) };
        crate::host::check_index_bytes(c, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GEMM timing stops timing a candidate far behind the fastest, but
    /// never one under a millisecond (a first call's set-up is most of it).
    #[test]
    fn candidates_far_behind_are_timed_no_further() {
        let times = [
            (Choice::Generated, 0.5),
            (Choice::Library, 10.0),
            (Choice::Mkl, 2.0),
            (Choice::Avx512, 0.9),
            (Choice::OpenBlas, 1.2),
        ];
        assert_eq!(eliminate(&times, 2.5), vec![true, false, false, true, true]);
        // Far behind after the warm-up (6x) but not after a cold round.
        let slow = [(Choice::Generated, 40.0), (Choice::MklBf16, 5.0), (Choice::Mkl, 20.0)];
        assert_eq!(eliminate(&slow, WARM_BEHIND), vec![false, true, true]);
        assert_eq!(eliminate(&slow, COLD_BEHIND), vec![false, true, false]);
    }

    #[test]
    fn kernels_split_by_their_operations_or_their_bytes() {
        let call = |work: u64, grain: u64, bytes: &[u64]| -> Call {
            serde_json::from_value(serde_json::json!({
                "symbol": "k", "op": "ll.transpose", "work": work, "grain": grain,
                "buffers": [], "bytes": bytes, "index_checks": [],
            }))
            .unwrap()
        };
        // The block's head transpose: few operations a row, 2 MiB.
        assert_eq!(kernel_pieces(&call(4096, 7281, &[1 << 20, 1 << 20]), 2), 2);
        // Small in both: one piece.
        assert_eq!(kernel_pieces(&call(32, 64, &[4096, 4096]), 2), 1);
        // Enough operations: as before, however few the bytes.
        assert_eq!(kernel_pieces(&call(1024, 170, &[1024]), 8), 6);
        // Never more pieces than work items or threads.
        assert_eq!(kernel_pieces(&call(3, 1, &[1 << 30]), 8), 3);
        assert_eq!(kernel_pieces(&call(4096, 1, &[1 << 30]), 2), 2);
        // No work, no grain, no threads: still one piece.
        assert_eq!(kernel_pieces(&call(0, 0, &[]), 0), 1);
    }

    #[test]
    fn small_gemms_run_on_one_thread() {
        let g = |batch, shape| LibraryGemm::contiguous(batch, shape, false, false);
        // MLP 64's products: the calling thread alone.
        assert_eq!(gemm_threads(&g(1, (32, 128, 128)), 2), 1);
        assert_eq!(gemm_threads(&g(1, (128, 128, 32)), 8), 1);
        // Just past the grain: two threads, no more.
        assert_eq!(gemm_threads(&g(1, (128, 128, 129)), 8), 2);
        // The transformer block's: every thread, for one product or a batch.
        assert_eq!(gemm_threads(&g(1, (1024, 1024, 256)), 2), 2);
        assert_eq!(gemm_threads(&g(32, (128, 128, 64)), 16), 16);
        // Empty and huge sizes neither divide by zero nor overflow.
        assert_eq!(gemm_threads(&g(1, (0, 128, 128)), 4), 1);
        let huge = LibraryGemm { batch: usize::MAX, m: usize::MAX, ..g(1, (2, 2, 2)) };
        assert_eq!(gemm_threads(&huge, 4), 4);
        assert_eq!(gemm_threads(&g(1, (1024, 1024, 1024)), 0), 1);
    }

    /// Loads an artifact directory holding `manifest` (and `files`), and
    /// returns the error.
    fn load_error(manifest: &str, files: &[(&str, &[u8])]) -> String {
        let dir = std::env::temp_dir().join(format!(
            "aicf-manifest-test-{}-{}",
            std::process::id(),
            crate::artifact::bytes_hash(manifest.as_bytes())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let e = CpuModule::load(&dir, 1).err().map(|e| e.to_string()).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        e
    }

    /// `json` with its checksum set, as the compiler writes it.
    fn sealed(json: &str) -> String {
        let mut m: Manifest = serde_json::from_str(json).unwrap();
        m.checksum = m.compute_checksum();
        crate::artifact::to_json(&m).unwrap()
    }

    const BASE: &str = r#"{"format": 2, "ir_hash": "h", "target": "ARCH cpu t", "symbols": [], "constants": [], "functions": [
            {"name": "f", "args": [{"bind": "input", "shape": [4], "dtype": "f32"}], "arena_bytes": 0,
             "calls": [{"symbol": "aicf_k0", "op": "ll.copy", "work": 4, "grain": 4, "index_checks": [],
                        "buffers": [{"arg": {"index": 0}}, BUFFER], "bytes": [16, 16]}]}]}"#;

    /// [`BASE`] for this machine's architecture.
    fn base() -> String {
        BASE.replace("ARCH", std::env::consts::ARCH)
    }

    #[test]
    fn bad_manifests_are_errors_naming_the_file() {
        assert!(load_error("{", &[]).contains("manifest.json: not a valid manifest"));
        let e = load_error(&sealed(&base().replace("BUFFER", r#"{"arg": {"index": 3}}"#)), &[]);
        assert!(e.contains("@f call #0: names Arg { index: 3 }, which the function lacks"), "{e}");
        let e = load_error(&sealed(&base().replace("BUFFER", r#"{"arena": {"offset": 0}}"#)), &[]);
        assert!(e.contains("names Arena { offset: 0 }"), "{e}");
        let good = base().replace("BUFFER", r#"{"arg": {"index": 0}}"#);
        let e = load_error(&sealed(&good.replace(r#""format": 2"#, r#""format": 9"#)), &[]);
        assert!(e.contains("format 9 (this runtime reads 2)"), "{e}");
        // A call whose extent runs past its buffer (16 bytes) would read
        // memory that is not its own.
        let e = load_error(&sealed(&good.replace("[16, 16]", "[16, 64]")), &[]);
        assert!(e.contains("spans 64 bytes, but only 16 are there"), "{e}");
        // A well-formed manifest without its kernels names the missing file,
        // once.
        let target = format!(r#""target": "{} cpu t""#, std::env::consts::ARCH);
        let target = target.as_str();
        let e = load_error(&sealed(&good), &[]);
        assert!(e.contains("kernels.so") && e.matches("kernels.so").count() == 1, "{e}");
        // Host code of another architecture, or a GPU artifact, is said as
        // such before its library is opened.
        let other = if std::env::consts::ARCH == "x86_64" { "aarch64" } else { "x86_64" };
        let e = load_error(&sealed(&good.replace(target, &format!(r#""target": "{other} cpu t""#))), &[]);
        assert!(e.contains(&format!("compiled for {other} ({other} cpu t), and this machine is")), "{e}");
        let e = load_error(&sealed(&good.replace(target, r#""target": "cuda sm_80 sm_90""#)), &[]);
        assert!(e.contains("compiled for cuda sm_80 sm_90 (a GPU artifact): open it on Device::Cuda"), "{e}");
    }

    #[test]
    fn modified_artifacts_are_refused() {
        let good = base().replace("BUFFER", r#"{"arg": {"index": 0}}"#);
        // An edit after sealing (here: the arena) breaks the checksum.
        let edited = sealed(&good).replace(r#""arena_bytes": 0"#, r#""arena_bytes": 8"#);
        let e = load_error(&edited, &[]);
        assert!(e.contains("modified after it was written"), "{e}");
        // A kernel file whose bytes are not the ones compiled is refused
        // before it is loaded.
        let with_file = good.replacen('{', r#"{"files": {"kernels.so": "0000000000000000"}, "#, 1);
        let e = load_error(&sealed(&with_file), &[("kernels.so", b"truncated")]);
        assert!(e.contains("kernels.so: truncated or modified since it was compiled"), "{e}");
        // Host code for a CPU feature this host lacks is refused, not run
        // into an illegal instruction. (Only meaningful where the host lacks
        // some feature; an x86-64 host without AVX-512 FP16 is the usual
        // case.)
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("avx512fp16") {
            let with_feature = good.replacen('{', r#"{"cpu_features": ["+avx512fp16"], "#, 1);
            let e = load_error(&sealed(&with_feature), &[]);
            assert!(e.contains("compiled for a CPU with +avx512fp16, which this CPU lacks"), "{e}");
        }
    }
}

/// `len` 16-bit floats of type `narrow` at `from`, widened into `to`.
fn widen(narrow: DType, from: *const u8, len: usize, to: &mut Vec<f32>) {
    use half::slice::HalfFloatSliceExt;
    let to = grown(to, len);
    // SAFETY: the manifest's shapes give `len` elements of the operand.
    unsafe {
        match narrow {
            DType::F16 => std::slice::from_raw_parts(from as *const half::f16, len).convert_to_f32_slice(to),
            _ => std::slice::from_raw_parts(from as *const half::bf16, len).convert_to_f32_slice(to),
        }
    }
}
