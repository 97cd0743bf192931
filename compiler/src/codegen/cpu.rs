//! CPU kernel generation: a planned `ll` module becomes host code and a
//! manifest ([`aicf_runtime::artifact`]).
//!
//! Each `ll` kernel becomes one function of a kernels module written in
//! `scf`/`arith`/`math`/`memref` over flat (1-D) buffers, with the row range
//! `[begin, end)` as its first two arguments; elementwise bodies are moved
//! in as private functions and inlined. The module is lowered to the LLVM
//! dialect (bare-pointer calling convention); each kernel is then named by
//! the hash of its code and gets a C entry `aicf_<hash>(begin, end, void
//! **buffers)`. Kernels the [`KernelCache`] does not hold are compiled for
//! the host CPU (`clang -O3 -march=native`: the host's SIMD, detected, not
//! hard-coded), a group per core in parallel, and `kernels.so` is linked
//! from the cached objects: after a model rewrite only the kernels whose
//! code changed are compiled again.

use crate::context::CompilerContext;
use crate::error::CompileError;
use crate::ir::{self, attr, float_attr, has, i64_array, int_attr, op_name, operands, ops_of};
use crate::nn::DType;
use aicf_runtime::artifact::{self, Arg, Buffer, Call, Constant, Function, IndexCheck, LibraryGemm, Manifest, Symbol};
use aicf_runtime::init::Float;
use melior::ir::Module;
use mlir_sys::*;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

#[path = "gpu.rs"]
mod gpu;
pub use gpu::{GpuOptions, TensorCoreTile, compile_gpu, compile_gpu_timed, compile_gpu_with, ptxas, validate_ptx};

type Result<T> = std::result::Result<T, CompileError>;

/// The fewest scalar operations worth a thread of their own: below this a
/// piece costs less than handing it to a worker (tens of microseconds).
const GRAIN_OPS: u64 = 1 << 20;

/// Before lowering: `tanh` is rewritten through `exp` (sign(x) (1 - e^-2|x|)
/// / (1 + e^-2|x|), within 1e-7 absolute), which libmvec vectorises; the
/// `tanh` intrinsic would stay a scalar libm call per element. Then every
/// `exp` is guarded (see `guard_exp`).
const EXPAND_MATH: &str = "builtin.module(math-expand-ops{ops=tanh})";

/// The lowering from the kernels module to the LLVM dialect.
const TO_LLVM: &str = "builtin.module(inline,symbol-dce,canonicalize,cse,convert-scf-to-cf,\
convert-math-to-llvm,convert-math-to-libm,convert-vector-to-llvm,finalize-memref-to-llvm,convert-arith-to-llvm,\
convert-index-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},\
reconcile-unrealized-casts)";

fn internal(m: impl Into<String>) -> CompileError {
    CompileError::Internal(m.into())
}

/// Rewrites every f32/f64 `math.exp x` to `x < lo ? 0 : exp(max(x, lo))`,
/// `lo` the smallest argument with a normal result (-87 for f32, -708 for
/// f64). libmvec's vector `exp` leaves its fast path for all eight lanes when
/// one lane's result would be subnormal or zero, which a causal mask's -inf
/// or a saturated tanh hits on most rows: about ten times slower. NaN stays
/// NaN (`maximumf` propagates it; the comparison is false).
fn guard_exp(ctx: MlirContext, module: MlirOperation) -> Result<()> {
    fn collect(op: MlirOperation, found: &mut Vec<MlirOperation>) {
        if op_name(op) == "math.exp" {
            found.push(op);
        }
        for r in 0..unsafe { mlirOperationGetNumRegions(op) } {
            let region = unsafe { mlirOperationGetRegion(op, r) };
            let mut block = unsafe { mlirRegionGetFirstBlock(region) };
            while !block.ptr.is_null() {
                for inner in ops_of(block) {
                    collect(inner, found);
                }
                block = unsafe { mlirBlockGetNextInRegion(block) };
            }
        }
    }
    let mut exps = Vec::new();
    collect(module, &mut exps);
    for exp in exps {
        let x = unsafe { mlirOperationGetOperand(exp, 0) };
        let ty = unsafe { mlirValueGetType(x) };
        let t = ir::type_text(ty);
        let lo = match t.as_str() {
            "f32" => "-8.700000e+01",
            "f64" => "-7.080000e+02",
            _ => continue,
        };
        let loc = ir::op_loc(exp);
        let block = unsafe { mlirOperationGetBlock(exp) };
        let before = |spec: ir::OpSpec<'_>| -> Result<MlirValue> {
            let op = ir::create_op(ctx, loc, &spec).map_err(|e| at(exp, format!("guarding exp: {e:?}")))?;
            unsafe { mlirBlockInsertOwnedOperationBefore(block, exp, op) };
            Ok(unsafe { mlirOperationGetResult(op, 0) })
        };
        let types = [ty];
        let (low_attr, zero_attr) = ([("value", format!("{lo} : {t}"))], [("value", format!("0.000000e+00 : {t}"))]);
        let constant =
            |attributes| ir::OpSpec { attributes, results: Some(&types), ..ir::OpSpec::new("arith.constant") };
        let low = before(constant(&low_attr))?;
        let zero = before(constant(&zero_attr))?;
        let clamped =
            before(ir::OpSpec { operands: &[x, low], results: Some(&types), ..ir::OpSpec::new("arith.maximumf") })?;
        let e = before(ir::OpSpec { operands: &[clamped], results: Some(&types), ..ir::OpSpec::new("math.exp") })?;
        let i1 = [unsafe { mlirIntegerTypeGet(ctx, 1) }];
        let below = before(ir::OpSpec {
            operands: &[x, low],
            attributes: &[("predicate", "4 : i64".into())], // olt
            results: Some(&i1),
            ..ir::OpSpec::new("arith.cmpf")
        })?;
        let guarded = before(ir::OpSpec {
            operands: &[below, zero, e],
            results: Some(&types),
            ..ir::OpSpec::new("arith.select")
        })?;
        unsafe {
            mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(exp, 0), guarded);
            mlirOperationDestroy(exp);
        }
    }
    Ok(())
}

/// An error at an op of the planned module.
fn at(op: MlirOperation, message: impl std::fmt::Display) -> CompileError {
    let loc = unsafe { melior::ir::Location::from_raw(ir::op_loc(op)) };
    CompileError::Internal(format!("{loc}: {message}"))
}

/// Valid IR at `op` that the backend has no kernel for yet.
fn unsupported_at(op: MlirOperation, message: impl std::fmt::Display) -> CompileError {
    let loc = unsafe { melior::ir::Location::from_raw(ir::op_loc(op)) };
    CompileError::Unsupported(format!("{loc}: {message}"))
}

/// Compiles the planned `module` (after `aicf-train-pipeline`) for the host
/// CPU into `out_dir` (`manifest.json`, `kernels.so`); returns the manifest.
/// Kernel objects are cached in [`KernelCache::default_dir`].
pub fn compile_cpu(ctx: &CompilerContext, module: &Module<'_>, ir_hash: &str, out_dir: &Path) -> Result<Manifest> {
    let cache = KernelCache::new(KernelCache::default_dir(out_dir));
    Ok(compile_cpu_cached(ctx, module, ir_hash, out_dir, &cache)?.0)
}

/// [`compile_cpu`] with the kernel objects taken from (and added to)
/// `cache`; also says how many kernels had to be compiled.
pub fn compile_cpu_cached(
    ctx: &CompilerContext,
    module: &Module<'_>,
    ir_hash: &str,
    out_dir: &Path,
    cache: &KernelCache,
) -> Result<(Manifest, KernelStats)> {
    compile(ctx, module, ir_hash, out_dir, Some(cache), GpuOptions::default())
}

/// How one CPU build went: distinct kernels, how many of them were not in
/// the kernel cache and were compiled, and the seconds from the kernels
/// module to `kernels.so`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelStats {
    pub kernels: usize,
    pub compiled: usize,
    pub seconds: f64,
    /// The code generation's stages and their times.
    pub timings: crate::timing::Timings,
}

/// The clang flags every kernel object is compiled with (part of its hash).
const KERNEL_FLAGS: [&str; 8] = [
    "-O3",
    "-march=native",
    "-fveclib=libmvec",
    "-fPIC",
    "-c",
    "-Wno-override-module",
    // Merging the runtime memory checks of a fully unrolled short row loop
    // (bias + relu over 32 columns) is quadratic: half a second per kernel
    // with LLVM 22's default of 100, 40 ms with 8; the kernels run the same.
    "-mllvm",
    "-memory-check-merge-threshold=8",
];

/// Compiled kernels, content-addressed by the hash of the kernel's
/// LLVM-dialect function with its name taken out, the clang flags, clang and
/// the host CPU: `<hash>.obj` names the object (`g_<group>.o`, compiled from
/// `g_<group>.ll`) that holds the kernel, among the others compiled with it
/// in one clang process. A kernel the model had before a rewrite (or that
/// another model or batch size shares) is linked from here, not compiled
/// again; identical kernels of one module are compiled once. Files are
/// written under a temporary name and renamed, so concurrent builds share
/// the directory.
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: std::path::PathBuf,
}

impl KernelCache {
    pub fn new(dir: std::path::PathBuf) -> Self {
        KernelCache { dir }
    }

    /// `$AICF_CACHE_DIR/kernels` (default `~/.cache/aicf/kernels`), or
    /// `out_dir/kernel-cache` without a home directory.
    pub fn default_dir(out_dir: &Path) -> std::path::PathBuf {
        aicf_runtime::registry::cache_dir().map(|d| d.join("kernels")).unwrap_or_else(|| out_dir.join("kernel-cache"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The object holding kernel `hash`, if one was compiled: its
    /// `<hash>.obj` names it.
    fn object_of(&self, hash: &str) -> Option<std::path::PathBuf> {
        let group = std::fs::read_to_string(self.dir.join(format!("{hash}.obj"))).ok()?;
        let object = self.dir.join(format!("{}.o", group.trim()));
        object.exists().then_some(object)
    }

    fn temporary(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(format!("{name}.{}.{}.tmp", std::process::id(), thread_tag()))
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| internal(format!("{}: {e}", self.dir.display())))?;
        let tmp = self.temporary(name);
        let path = self.dir.join(name);
        std::fs::write(&tmp, bytes)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| internal(format!("{}: {e}", path.display())))
    }

    /// Compiles each group's `<group>.ll` to `<group>.o`, all at once, and
    /// then records for each of its kernels that the object holds it.
    fn compile_all(&self, clang: &str, groups: &[(String, Vec<String>)]) -> Result<()> {
        let compile_one = |(group, members): &(String, Vec<String>)| -> Result<()> {
            let ll = self.dir.join(format!("{group}.ll"));
            let tmp = self.temporary(&format!("{group}.o"));
            let output = std::process::Command::new(clang)
                .args(KERNEL_FLAGS)
                .arg(&ll)
                .arg("-o")
                .arg(&tmp)
                .output()
                .map_err(|e| internal(format!("{clang}: {e}")))?;
            if !output.status.success() {
                let _ = std::fs::remove_file(&tmp);
                return Err(internal(format!(
                    "{clang} failed on {}:\n{}",
                    ll.display(),
                    String::from_utf8_lossy(&output.stderr)
                )));
            }
            let object = self.dir.join(format!("{group}.o"));
            std::fs::rename(&tmp, &object).map_err(|e| internal(format!("{}: {e}", object.display())))?;
            for hash in members {
                self.write(&format!("{hash}.obj"), group.as_bytes())?;
            }
            Ok(())
        };
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = groups.iter().map(|g| scope.spawn(move || compile_one(g))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(internal("a kernel compile thread panicked"))))
                .collect()
        });
        results.into_iter().collect()
    }
}

/// `compile_cpu`, or with `gpu` [`gpu::compile_gpu`]: one generator writes
/// both; the GPU differs in its elementwise and GEMM kernels and its build.
fn compile(
    ctx: &CompilerContext,
    module: &Module<'_>,
    ir_hash: &str,
    out_dir: &Path,
    cpu: Option<&KernelCache>,
    gpu_options: GpuOptions,
) -> Result<(Manifest, KernelStats)> {
    let gpu = cpu.is_none();
    let raw = module.as_operation().to_raw();
    let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(raw, 0)) };
    let mut generator =
        Generator { gpu, gemm_tile: gpu_options.gemm_tile, wgmma: gpu_options.wgmma, ..Generator::default() };
    let mut globals: HashMap<String, MlirOperation> = HashMap::new();
    let mut symbols = Vec::new();
    for op in ops_of(top) {
        match op_name(op).as_str() {
            "hl.param" | "hl.state" => symbols.push(symbol_entry(op)?),
            "memref.global" => {
                globals.insert(ir::string_attr(op, "sym_name").unwrap_or_default(), op);
            }
            _ => {}
        }
    }
    let mut functions = Vec::new();
    let mut constants = Vec::new();
    let mut constant_of: HashMap<String, usize> = HashMap::new();
    let generate_started = std::time::Instant::now();
    for (func, block) in ir::functions(raw) {
        let name = ir::string_attr(func, "sym_name").unwrap_or_default();
        functions.push(generator.function(func, block, &name, &globals, &mut constants, &mut constant_of)?);
    }
    let generate_seconds = generate_started.elapsed().as_secs_f64();
    std::fs::create_dir_all(out_dir).map_err(|e| internal(format!("{}: {e}", out_dir.display())))?;
    let mut stats = KernelStats::default();
    let target = match cpu {
        None => {
            let started = std::time::Instant::now();
            let target = generator.build_gpu(ctx, out_dir, &mut functions)?;
            stats.kernels = generator.entries.len();
            stats.compiled = stats.kernels;
            stats.timings.add("PTX for sm_80 and sm_90 (NVVM)", started.elapsed().as_secs_f64(), "");
            target
        }
        Some(cache) => {
            let (target, names, s) = generator.build(ctx, out_dir, cache)?;
            stats = s;
            // Calls (and GEMM epilogues) name their kernel by its hash.
            let rename = |symbol: &mut String| {
                if let Some(new) = symbol.strip_prefix("aicf_").and_then(|k| names.get(k)) {
                    *symbol = new.clone();
                }
            };
            for call in functions.iter_mut().flat_map(|f| f.calls.iter_mut()) {
                rename(&mut call.symbol);
                if let Some(epilogue) = call.library.as_mut().and_then(|l| l.epilogue.as_mut()) {
                    rename(epilogue);
                }
            }
            target
        }
    };
    let manifest =
        Manifest { format: artifact::FORMAT, ir_hash: ir_hash.to_string(), target, symbols, constants, functions };
    let text = serde_json_string(&manifest)?;
    write_atomically(&out_dir.join("manifest.json"), text.as_bytes())?;
    let mut timings = crate::timing::Timings::default();
    timings.add("kernel generation", generate_seconds, format!("{} kernels", generator.kernels));
    timings.extend(std::mem::take(&mut stats.timings));
    stats.timings = timings;
    Ok((manifest, stats))
}

fn serde_json_string(m: &Manifest) -> Result<String> {
    aicf_runtime::artifact::to_json(m).map_err(|e| internal(format!("manifest: {e}")))
}

/// The current thread, for temporary file names: two threads of one process
/// may build the same artifact (a rewrite compiled ahead and on demand).
fn thread_tag() -> String {
    format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "")
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over
/// `path`: a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("{}.{}.tmp", std::process::id(), thread_tag()));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| internal(format!("{}: {e}", path.display())))
}

fn runtime_dtype(d: DType) -> Result<artifact::DType> {
    Ok(match d {
        DType::F32 => artifact::DType::F32,
        DType::F64 => artifact::DType::F64,
        DType::I32 => artifact::DType::I32,
        DType::I64 => artifact::DType::I64,
        DType::I1 => artifact::DType::I1,
        DType::F16 => artifact::DType::F16,
        DType::BF16 => artifact::DType::BF16,
    })
}

fn symbol_entry(op: MlirOperation) -> Result<Symbol> {
    let t = unsafe { mlirTypeAttrGetValue(attr(op, "type")) };
    let spec =
        crate::nn::spec_of_type(t).map_err(|e| at(op, format!("a symbol without a usable tensor type: {e:?}")))?;
    let init = has(op, "init").then(|| {
        let text = ir::attr_text(op, "init");
        text.strip_prefix("#hl.init<").and_then(|s| s.strip_suffix('>')).unwrap_or(&text).to_string()
    });
    Ok(Symbol {
        name: ir::string_attr(op, "sym_name").unwrap_or_default(),
        kind: if op_name(op) == "hl.param" { "param" } else { "state" }.into(),
        shape: spec.shape.clone(),
        dtype: runtime_dtype(spec.dtype)?,
        init,
    })
}

/// Shape and element type of a memref value.
fn buf_spec(v: MlirValue) -> Result<(Vec<usize>, DType)> {
    let s = ir::buffer_spec(v).ok_or_else(|| internal("a kernel operand is not a static memref"))?;
    Ok((s.shape.clone(), s.dtype))
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// f32 lanes of the host's widest vector unit: 16 with AVX-512, 8 with
/// AVX, 4 otherwise (SSE, NEON).
fn simd_lanes() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 16;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            return 8;
        }
    }
    4
}

fn flat_type(shape: &[usize], dtype: DType) -> String {
    format!("memref<{}x{}>", numel(shape).max(1), dtype.mlir())
}

#[derive(Default)]
struct Generator {
    /// The kernels module's text (func.func per kernel, body declarations).
    text: String,
    kernels: usize,
    /// (declaration name, the ll op whose region becomes its body)
    bodies: Vec<(String, MlirOperation)>,
    /// (kernel name, number of buffers) for the C entries.
    entries: Vec<(String, usize)>,
    /// The library candidate of each GEMM kernel (by kernel name).
    library: HashMap<String, Option<LibraryGemm>>,
    /// Where the operands of the op being generated live.
    buffers: Vec<Buffer>,
    /// Generating for the GPU (see `gpu.rs`).
    gpu: bool,
    /// GPU kernels written whole as `gpu.func` (not row functions), by
    /// name, with their launch shapes.
    gpu_funcs: Vec<(String, String)>,
    /// The sm_90 form of kernels that have one (wgmma GEMMs), by name.
    hopper: HashMap<String, String>,
    launches: HashMap<String, artifact::Launch>,
    /// The buffer types of each row kernel, by name.
    signatures: HashMap<String, Vec<String>>,
    /// Row kernels that run a warp per work item on the GPU.
    warp_rows: std::collections::HashSet<String>,
    /// The tiling of tensor-core GEMMs, if not each shape's default.
    gemm_tile: Option<TensorCoreTile>,
    /// Whether big tensor-core GEMMs get a wgmma form for sm_90.
    wgmma: bool,
    /// The kernels written so far, in order, by their (deduplicated) names.
    finished: Vec<String>,
    /// A kernel's name by its content: the same code (another layer of the
    /// same shape, another batch of a multi-tensor update) is written,
    /// parsed and lowered once, however many calls run it.
    kernel_of: HashMap<String, String>,
    /// Body declarations not yet written: (name, declaration, its op). They
    /// are written with the first new kernel that calls them.
    pending_bodies: Vec<(String, String, MlirOperation)>,
    /// Each body's content key, by name.
    body_keys: HashMap<String, String>,
}

/// One kernel function being written: SSA names and indentation.
struct Kernel {
    text: String,
    n: usize,
    depth: usize,
    /// A warp-per-row GPU kernel's lane (`gpu.lane_id`): a work item is a
    /// row, its columns are split over the warp's 32 lanes, and row
    /// reductions end in shuffles. None on the CPU: a thread per row.
    lane: Option<String>,
}

impl Kernel {
    fn new() -> Self {
        Kernel { text: String::new(), n: 0, depth: 2, lane: None }
    }
    /// A row kernel that is warp-per-row on the GPU (`gpu`), else plain.
    fn rows(gpu: bool) -> Self {
        let mut k = Kernel::new();
        if gpu {
            k.lane = Some(k.val("gpu.lane_id"));
        }
        k
    }
    /// Opens the loop over this thread's columns `0..n` of a row: all of
    /// them, or in a warp-per-row kernel the lane's (lane, lane + 32, ...).
    fn open_cols(&mut self, n: &str) -> String {
        match self.lane.clone() {
            Some(lane) => {
                let step = self.index(32);
                self.open_step(&lane, n, &step)
            }
            None => self.open("%c0", n),
        }
    }
    /// [`Kernel::open_reduce`] over this thread's columns (see
    /// [`Kernel::open_cols`]); combine the lanes' results with
    /// [`Kernel::warp_all`].
    fn open_cols_reduce(&mut self, n: &str, init: &str, t: &str) -> (String, String, String) {
        let Some(lane) = self.lane.clone() else {
            return self.open_reduce("%c0", n, init, t);
        };
        let step = self.index(32);
        self.n += 1;
        let (iv, acc, r) = (format!("%i{}", self.n), format!("%a{}", self.n), format!("%r{}", self.n));
        self.line(&format!("{r} = scf.for {iv} = {lane} to {n} step {step} iter_args({acc} = {init}) -> ({t}) {{"));
        self.depth += 1;
        (iv, acc, r)
    }
    /// In a warp-per-row kernel, `op` (`addf`, `maximumf`) of `v` over the
    /// warp's lanes, in every lane (butterfly of xor shuffles); else `v`.
    fn warp_all(&mut self, v: &str, op: &str, t: DType) -> String {
        if self.lane.is_none() {
            return v.to_string();
        }
        self.shuffle_all(v, op, t)
    }
    /// `op` of `v` over the 32 lanes of a warp, in every lane (GPU only).
    fn shuffle_all(&mut self, v: &str, op: &str, t: DType) -> String {
        let f = t.mlir();
        let width = self.val("arith.constant 32 : i32");
        let mut v = v.to_string();
        for offset in [16, 8, 4, 2, 1] {
            let o = self.val(&format!("arith.constant {offset} : i32"));
            self.n += 1;
            let other = format!("%s{}", self.n);
            self.line(&format!("{other}, %v{} = gpu.shuffle xor {v}, {o}, {width} : {f}", self.n));
            v = self.val(&format!("arith.{op} {v}, {other} : {f}"));
        }
        v
    }
    fn line(&mut self, s: &str) {
        let _ = writeln!(self.text, "{}{s}", "  ".repeat(self.depth));
    }
    /// `%tN = rhs`
    fn val(&mut self, rhs: &str) -> String {
        self.n += 1;
        let v = format!("%t{}", self.n);
        self.line(&format!("{v} = {rhs}"));
        v
    }
    fn index(&mut self, c: usize) -> String {
        self.val(&format!("arith.constant {c} : index"))
    }
    fn float(&mut self, c: f64, t: DType) -> String {
        // Infinities have no decimal spelling: their bit patterns.
        let text = match (c.is_infinite(), t) {
            (true, DType::F64) => format!("0x{:016X}", c.to_bits()),
            (true, _) => format!("0x{:08X}", (c as f32).to_bits()),
            _ => Float(c).to_string(),
        };
        self.val(&format!("arith.constant {text} : {}", t.mlir()))
    }
    /// Opens `scf.for %iv = lo to hi`; returns the induction variable.
    fn open(&mut self, lo: &str, hi: &str) -> String {
        self.n += 1;
        let iv = format!("%i{}", self.n);
        self.line(&format!("scf.for {iv} = {lo} to {hi} step %c1 {{"));
        self.depth += 1;
        iv
    }
    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }
    /// Opens `scf.for %iv = lo to hi step step`.
    fn open_step(&mut self, lo: &str, hi: &str, step: &str) -> String {
        self.n += 1;
        let iv = format!("%i{}", self.n);
        self.line(&format!("scf.for {iv} = {lo} to {hi} step {step} {{"));
        self.depth += 1;
        iv
    }
    /// Opens a loop with `step` carrying `inits.len()` values of type `t`;
    /// returns (iv, carried values, results). Close with
    /// [`Kernel::close_with_all`].
    fn open_reduce_all(
        &mut self,
        lo: &str,
        hi: &str,
        step: &str,
        inits: &[String],
        t: &str,
    ) -> (String, Vec<String>, Vec<String>) {
        let typed: Vec<(String, String)> = inits.iter().map(|i| (i.clone(), t.to_string())).collect();
        self.open_carry(lo, hi, step, &typed)
    }
    fn close_with_all(&mut self, values: &[String], t: &str) {
        self.close_carry(values, &vec![t.to_string(); values.len()]);
    }
    /// Opens `scf.for` from `lo` to `hi` by `step` carrying `inits`
    /// (value, type); returns (iv, carried values, results). Close with
    /// [`Kernel::close_carry`].
    fn open_carry(
        &mut self,
        lo: &str,
        hi: &str,
        step: &str,
        inits: &[(String, String)],
    ) -> (String, Vec<String>, Vec<String>) {
        self.n += 1;
        let (iv, r) = (format!("%i{}", self.n), format!("%r{}", self.n));
        let accs: Vec<String> = (0..inits.len()).map(|i| format!("%a{}_{i}", self.n)).collect();
        let args: Vec<String> = accs.iter().zip(inits).map(|(a, (i, _))| format!("{a} = {i}")).collect();
        let types: Vec<&str> = inits.iter().map(|(_, t)| t.as_str()).collect();
        self.line(&format!(
            "{r}:{} = scf.for {iv} = {lo} to {hi} step {step} iter_args({}) -> ({}) {{",
            inits.len(),
            args.join(", "),
            types.join(", ")
        ));
        self.depth += 1;
        let results = (0..inits.len()).map(|i| format!("{r}#{i}")).collect();
        (iv, accs, results)
    }
    /// `scf.yield values` and the end of the loop or `scf.if` branch.
    fn close_carry(&mut self, values: &[String], types: &[String]) {
        self.line(&format!("scf.yield {} : {}", values.join(", "), types.join(", ")));
        self.depth -= 1;
        self.line("}");
    }
    /// Opens `scf.if cond -> (types)`; returns its results. End the then
    /// branch with [`Kernel::else_carry`], the else branch with
    /// [`Kernel::close_carry`].
    fn open_if(&mut self, cond: &str, types: &[String]) -> Vec<String> {
        self.n += 1;
        let r = format!("%u{}", self.n);
        self.line(&format!("{r}:{} = scf.if {cond} -> ({}) {{", types.len(), types.join(", ")));
        self.depth += 1;
        (0..types.len()).map(|i| format!("{r}#{i}")).collect()
    }
    /// Yields the then branch's `values` and opens the else branch.
    fn else_carry(&mut self, values: &[String], types: &[String]) {
        self.line(&format!("scf.yield {} : {}", values.join(", "), types.join(", ")));
        self.depth -= 1;
        self.line("} else {");
        self.depth += 1;
    }
    /// Opens a reduction loop carrying one value; returns (iv, carried,
    /// result). Close with [`Kernel::close_with`].
    fn open_reduce(&mut self, lo: &str, hi: &str, init: &str, t: &str) -> (String, String, String) {
        self.n += 1;
        let (iv, acc, r) = (format!("%i{}", self.n), format!("%a{}", self.n), format!("%r{}", self.n));
        self.line(&format!("{r} = scf.for {iv} = {lo} to {hi} step %c1 iter_args({acc} = {init}) -> ({t}) {{"));
        self.depth += 1;
        (iv, acc, r)
    }
    fn close_with(&mut self, v: &str, t: &str) {
        self.line(&format!("scf.yield {v} : {t}"));
        self.depth -= 1;
        self.line("}");
    }
    fn load(&mut self, b: &str, idx: &str, ty: &str) -> String {
        self.val(&format!("memref.load {b}[{idx}] : {ty}"))
    }
    fn store(&mut self, v: &str, b: &str, idx: &str, ty: &str) {
        self.line(&format!("memref.store {v}, {b}[{idx}] : {ty}"));
    }
    fn add(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.addi {a}, {b} : index"))
    }
    fn mul(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.muli {a}, {b} : index"))
    }
    /// `a * c + b` on indices, with constants folded by canonicalize.
    fn mad(&mut self, a: &str, c: usize, b: &str) -> String {
        let c = self.index(c);
        let m = self.mul(a, &c);
        self.add(&m, b)
    }
    fn fop(&mut self, op: &str, a: &str, b: &str, t: DType) -> String {
        self.val(&format!("arith.{op} {a}, {b} fastmath<contract> : {}", t.mlir()))
    }
}

/// The largest head size (query/key or value) whose row the fused attention
/// keeps in registers: a thread holds its query row and output accumulator
/// (`d + dv` values) through the loop over keys.
const ONLINE_HEAD: usize = 128;

/// An `ll.attention`'s sizes: `batch` independent (q, k, v) of `l` queries
/// and `s` keys, query/key head size `d`, value/output head size `dv`.
struct AttentionShape {
    batch: usize,
    l: usize,
    s: usize,
    d: usize,
    dv: usize,
    scale: f64,
    causal: bool,
    t: DType,
}

impl AttentionShape {
    fn of(op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Self {
        let (q, kv) = (&specs[0].0, &specs[1].0);
        let rank = q.len();
        let d = q[rank - 1];
        AttentionShape {
            batch: q[..rank - 2].iter().product(),
            l: q[rank - 2],
            s: kv[rank - 2],
            d,
            dv: specs[2].0[rank - 1],
            scale: float_attr(op, "scale").unwrap_or(1.0 / (d as f64).sqrt()),
            causal: has(op, "causal"),
            t: specs[0].1,
        }
    }

    /// `vector<n x t>`
    fn vector(&self, n: usize) -> String {
        format!("vector<{n}x{}>", self.t.mlir())
    }

    /// The query row at `base` of `buf` (a `vector<d>`), times the scale so
    /// that a key's score is one dot product.
    fn scaled_query(&self, k: &mut Kernel, buf: &str, base: &str, ty: &str) -> String {
        let vq = self.vector(self.d);
        let q = k.val(&format!("vector.load {buf}[{base}] : {ty}, {vq}"));
        let sc = k.val(&format!("arith.constant dense<{}> : {vq}", Float(self.scale)));
        k.val(&format!("arith.mulf {q}, {sc} : {vq}"))
    }

    /// The online softmax's state before any key: running max -inf, sum 0,
    /// output accumulator 0; as (value, type) pairs.
    fn initial_state(&self, k: &mut Kernel) -> Vec<(String, String)> {
        let (f, vo) = (self.t.mlir().to_string(), self.vector(self.dv));
        let ninf = k.float(f64::NEG_INFINITY, self.t);
        let zero = k.float(0.0, self.t);
        let o = k.val(&format!("arith.constant dense<0.0> : {vo}"));
        vec![(ninf, f.clone()), (zero, f), (o, vo)]
    }

    /// Folds keys `0..hi` into the online-softmax `state` (max m, sum l,
    /// accumulator o, see [`AttentionShape::initial_state`]): per key the
    /// score s = q . k, then m' = max(m, s), l' = l e^(m-m') + e^(s-m'),
    /// o' = o e^(m-m') + e^(s-m') v, with one exp since m' is m or s.
    /// `rows(j)` gives key j's row start in `keys` and in `values`
    /// (buffer, type). Returns the state after the last key; the output row
    /// is o / l.
    fn online_keys(
        &self,
        k: &mut Kernel,
        q: &str,
        state: &[(String, String)],
        hi: &str,
        keys: (&str, &str),
        values: (&str, &str),
        rows: impl Fn(&mut Kernel, &str) -> (String, String),
    ) -> Vec<(String, String)> {
        let (t, f) = (self.t, self.t.mlir());
        let (vk, vo) = (self.vector(self.d), self.vector(self.dv));
        let types: Vec<String> = state.iter().map(|(_, ty)| ty.clone()).collect();
        let (j, acc, results) = k.open_carry("%c0", hi, "%c1", state);
        let (kr, vr) = rows(k, &j);
        let kv = k.val(&format!("vector.load {}[{kr}] : {}, {vk}", keys.0, keys.1));
        let prod = k.val(&format!("arith.mulf {q}, {kv} : {vk}"));
        let score = k.val(&format!("vector.reduction <add>, {prod} fastmath<reassoc,contract> : {vk} into {f}"));
        let (m, l, o) = (&acc[0], &acc[1], &acc[2]);
        // A key over the running max rescales what came before by e^(m-s)
        // and counts 1; any other adds e^(s-m). The max rises seldom after
        // the first keys.
        let rises = k.val(&format!("arith.cmpf ogt, {score}, {m} : {f}"));
        let next = k.open_if(&rises, &types);
        let dm = k.fop("subf", m, &score, t);
        let alpha = k.val(&format!("math.exp {dm} : {f}"));
        let one = k.float(1.0, t);
        let kept = k.fop("mulf", l, &alpha, t);
        let l1 = k.fop("addf", &kept, &one, t);
        let v = k.val(&format!("vector.load {}[{vr}] : {}, {vo}", values.0, values.1));
        let a = k.val(&format!("vector.broadcast {alpha} : {f} to {vo}"));
        let o1 = k.val(&format!("vector.fma {o}, {a}, {v} : {vo}"));
        k.else_carry(&[score.clone(), l1, o1], &types);
        let ds = k.fop("subf", &score, m, t);
        let p = k.val(&format!("math.exp {ds} : {f}"));
        let l1 = k.fop("addf", l, &p, t);
        let v = k.val(&format!("vector.load {}[{vr}] : {}, {vo}", values.0, values.1));
        let pb = k.val(&format!("vector.broadcast {p} : {f} to {vo}"));
        let o1 = k.val(&format!("vector.fma {pb}, {v}, {o} : {vo}"));
        k.close_carry(&[m.clone(), l1, o1], &types);
        k.close_carry(&next, &types);
        results.into_iter().zip(types).collect()
    }

    /// Stores the output row o / l of `state` at `base` of `buf`.
    fn store_output(&self, k: &mut Kernel, state: &[(String, String)], buf: &str, base: &str, ty: &str) {
        let (f, vo) = (self.t.mlir(), self.vector(self.dv));
        let l = k.val(&format!("vector.broadcast {} : {f} to {vo}", state[1].0));
        let o = k.val(&format!("arith.divf {}, {l} : {vo}", state[2].0));
        k.line(&format!("vector.store {o}, {buf}[{base}] : {ty}, {vo}"));
    }
}

/// An `ll.gemm`'s operands and sizes: operand positions of the optional
/// epilogue inputs and the output; `rows` output rows in all, `m` per batch,
/// the product `m x kk` by `kk x n`.
struct GemmLayout {
    bias: Option<usize>,
    mask: Option<usize>,
    residual: Option<usize>,
    out: usize,
    lhs_sum: Option<usize>,
    ta: bool,
    tb: bool,
    accumulate: bool,
    alpha: f64,
    act: i64,
    rows: usize,
    m: usize,
    kk: usize,
    n: usize,
    batched: bool,
}

impl GemmLayout {
    fn of(op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Self {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 0, 0, 1, 0]);
        let starts: Vec<usize> = seg
            .iter()
            .scan(0usize, |s, &n| {
                let at = *s;
                *s += n as usize;
                Some(at)
            })
            .collect();
        let has_seg = |i: usize| seg.get(i).copied().unwrap_or(0) > 0;
        let (ta, tb) = (has(op, "transpose_a"), has(op, "transpose_b"));
        let (a, b) = (&specs[0].0, &specs[1].0);
        let (ra, rb) = (a.len(), b.len());
        let (rows, m, kk, n, batched) = if rb == 2 && ra > 2 {
            let kk = a[ra - 1];
            (numel(a) / kk.max(1), numel(a) / kk.max(1), kk, if tb { b[0] } else { b[1] }, false)
        } else {
            let m = if ta { a[ra - 1] } else { a[ra - 2] };
            let kk = if ta { a[ra - 2] } else { a[ra - 1] };
            let n = if tb { b[rb - 2] } else { b[rb - 1] };
            let batch: usize = a[..ra - 2].iter().product();
            (batch * m, m, kk, n, batch > 1)
        };
        GemmLayout {
            bias: has_seg(2).then(|| starts[2]),
            mask: has_seg(3).then(|| starts[3]),
            residual: has_seg(4).then(|| starts[4]),
            out: starts[5],
            lhs_sum: has_seg(6).then(|| starts[6]),
            ta,
            tb,
            accumulate: has(op, "accumulate"),
            alpha: float_attr(op, "alpha").unwrap_or(1.0),
            act: int_attr(op, "act").unwrap_or(0),
            rows,
            m,
            kk,
            n,
            batched,
        }
    }
}

/// What follows the product in a GEMM kernel, per output element.
struct Epilogue {
    bias: Option<usize>,
    mask: Option<usize>,
    residual: Option<usize>,
    out: usize,
    act: i64,
    accumulate: bool,
    /// The type the epilogue computes in (f32 for 16-bit GEMMs, whose
    /// operands are widened on load and whose result is narrowed on store).
    t: DType,
}

/// Bits of a float type.
fn float_bits(t: DType) -> u32 {
    match t {
        DType::F16 | DType::BF16 => 16,
        DType::F64 => 64,
        _ => 32,
    }
}

/// `v` of float type `from` as `to` (`arith.extf`/`truncf`; nothing when equal).
fn cast_float(k: &mut Kernel, v: &str, from: DType, to: DType) -> String {
    if from == to {
        return v.to_string();
    }
    let op = if float_bits(from) < float_bits(to) { "extf" } else { "truncf" };
    k.val(&format!("arith.{op} {v} : {} to {}", from.mlir(), to.mlir()))
}

impl Epilogue {
    /// Stores epilogue(`y`) at column `j`, element `o` of the output.
    fn write(&self, k: &mut Kernel, j: &str, o: &str, y: &str, specs: &[(Vec<usize>, DType)]) {
        let t = self.t;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let load = |k: &mut Kernel, p: usize, at: &str| {
            let v = k.load(&format!("%b{p}"), at, &ty(p));
            cast_float(k, &v, specs[p].1, t)
        };
        let mut y = y.to_string();
        if let Some(p) = self.bias {
            let bv = load(k, p, j);
            y = k.fop("addf", &y, &bv, t);
        }
        y = activation(k, self.act, &y, t);
        if let Some(p) = self.mask {
            let zero = k.float(0.0, t);
            let mv = load(k, p, o);
            let pos = k.val(&format!("arith.cmpf ogt, {mv}, {zero} : {}", t.mlir()));
            y = k.val(&format!("arith.select {pos}, {y}, {zero} : {}", t.mlir()));
        }
        if let Some(p) = self.residual {
            let rv = load(k, p, o);
            y = k.fop("addf", &y, &rv, t);
        }
        if self.accumulate {
            let old = load(k, self.out, o);
            y = k.fop("addf", &old, &y, t);
        }
        let y = cast_float(k, &y, t, specs[self.out].1);
        k.store(&y, &format!("%b{}", self.out), o, &ty(self.out));
    }
}

/// The activation of a GEMM epilogue (`ll.gemm act`) applied to `x`.
fn activation(k: &mut Kernel, act: i64, x: &str, t: DType) -> String {
    let ty = t.mlir();
    let one = || Float(1.0);
    match act {
        1 => {
            let z = k.float(0.0, t);
            k.val(&format!("arith.maximumf {x}, {z} : {ty}"))
        }
        2 => {
            // x/2 (1 + erf(x / sqrt 2))
            let c = k.float(std::f64::consts::FRAC_1_SQRT_2, t);
            let s = k.fop("mulf", x, &c, t);
            let e = k.val(&format!("math.erf {s} : {ty}"));
            let o = k.val(&format!("arith.constant {} : {ty}", one()));
            let p = k.fop("addf", &o, &e, t);
            let h = k.float(0.5, t);
            let xh = k.fop("mulf", x, &h, t);
            k.fop("mulf", &xh, &p, t)
        }
        3 => {
            // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            let x2 = k.fop("mulf", x, x, t);
            let x3 = k.fop("mulf", &x2, x, t);
            let c = k.float(0.044715, t);
            let cx3 = k.fop("mulf", &x3, &c, t);
            let inner = k.fop("addf", x, &cx3, t);
            let s = k.float((2.0 / std::f64::consts::PI).sqrt(), t);
            let arg = k.fop("mulf", &inner, &s, t);
            let th = k.val(&format!("math.tanh {arg} : {ty}"));
            let o = k.val(&format!("arith.constant {} : {ty}", one()));
            let p = k.fop("addf", &o, &th, t);
            let h = k.float(0.5, t);
            let xh = k.fop("mulf", x, &h, t);
            k.fop("mulf", &xh, &p, t)
        }
        4 | 6 => {
            // sigmoid(x) = 1 / (1 + exp(-x)); silu = x sigmoid(x)
            let n = k.val(&format!("arith.negf {x} : {ty}"));
            let e = k.val(&format!("math.exp {n} : {ty}"));
            let o = k.val(&format!("arith.constant {} : {ty}", one()));
            let d = k.fop("addf", &o, &e, t);
            let s = k.fop("divf", &o, &d, t);
            if act == 4 { k.fop("mulf", x, &s, t) } else { s }
        }
        5 => k.val(&format!("math.tanh {x} : {ty}")),
        _ => x.to_string(),
    }
}

impl Generator {
    /// Plans one function: its arguments, constants and kernel calls, and
    /// writes its kernels.
    fn function(
        &mut self,
        func: MlirOperation,
        block: MlirBlock,
        name: &str,
        globals: &HashMap<String, MlirOperation>,
        constants: &mut Vec<Constant>,
        constant_of: &mut HashMap<String, usize>,
    ) -> Result<Function> {
        let mut args = Vec::new();
        let mut refs: HashMap<usize, Buffer> = HashMap::new();
        let binds = arg_binds(func);
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            let v = unsafe { mlirBlockGetArgument(block, i) };
            let bind = binds.get(i as usize).cloned().flatten().unwrap_or_else(|| "input".into());
            if bind == "arena" {
                let bytes = unsafe { mlirShapedTypeGetDimSize(mlirValueGetType(v), 0) }.max(0) as usize;
                args.push(Arg { bind, shape: vec![bytes], dtype: artifact::DType::U8 });
            } else {
                let (shape, dtype) = buf_spec(v)?;
                args.push(Arg { bind, shape, dtype: runtime_dtype(dtype)? });
            }
            refs.insert(ir::key(v), Buffer::Arg { index: i as usize });
        }
        let arena_bytes = args.iter().find(|a| a.bind == "arena").map_or(0, |a| a.bytes() as u64);
        let mut index_constants: HashMap<usize, u64> = HashMap::new();
        let mut calls = Vec::new();
        for op in ops_of(block) {
            let op_kind = op_name(op);
            let result = || unsafe { mlirOperationGetResult(op, 0) };
            match op_kind.as_str() {
                "arith.constant" => {
                    if let Some(c) = int_attr(op, "value") {
                        index_constants.insert(ir::key(result()), c as u64);
                    }
                }
                "memref.view" => {
                    let x = operands(op);
                    let offset = x.get(1).and_then(|v| index_constants.get(&ir::key(*v))).copied();
                    let offset = offset.ok_or_else(|| at(op, "a view at a non-constant offset"))?;
                    refs.insert(ir::key(result()), Buffer::Arena { offset });
                }
                "ll.reshape" => {
                    let source = refs.get(&ir::key(operands(op)[0])).copied();
                    refs.insert(ir::key(result()), source.ok_or_else(|| at(op, "a view of an unknown buffer"))?);
                }
                "memref.get_global" => {
                    let global = ir::flat_symbol(op, "name").unwrap_or_default();
                    let index = match constant_of.get(&global) {
                        Some(&i) => i,
                        None => {
                            let g = globals.get(&global).ok_or_else(|| at(op, format!("no global @{global}")))?;
                            constants.push(global_values(*g, result())?);
                            constant_of.insert(global.clone(), constants.len() - 1);
                            constants.len() - 1
                        }
                    };
                    refs.insert(ir::key(result()), Buffer::Constant { index });
                }
                "memref.alloc" => {
                    return Err(at(op, "a buffer outside the arena: run ll-plan-memory before code generation"));
                }
                "func.return" => {}
                k if k.starts_with("ll.") => {
                    let x = operands(op);
                    let buffers = x
                        .iter()
                        .map(|v| refs.get(&ir::key(*v)).copied().ok_or_else(|| at(op, "an operand of unknown origin")))
                        .collect::<Result<Vec<_>>>()?;
                    self.buffers = buffers.clone();
                    // The op's place in the schedule: its kernels share its
                    // stream, the first waits and the last records.
                    let stream = ir::int_attr(op, "ll.stream").unwrap_or(0) as u32;
                    let waits: Vec<u32> =
                        ir::i64_array(op, "ll.wait").unwrap_or_default().iter().map(|&e| e as u32).collect();
                    let event = ir::int_attr(op, "ll.event").map(|e| e as u32);
                    let first = calls.len();
                    let origin = crate::context::describe_all_locations(unsafe {
                        melior::ir::Location::from_raw(ir::op_loc(op))
                    });
                    // Library candidates are the op's own (a kernel shared
                    // with another op may have other aliases).
                    self.library.clear();
                    for (kernel, work, cost, which, checks) in self.kernel(op, &x)? {
                        let library = self.library.get(&kernel).cloned().flatten();
                        let waits = if calls.len() == first { waits.clone() } else { vec![] };
                        calls.push(Call {
                            stream,
                            waits,
                            event: None,
                            library,
                            symbol: format!("aicf_{kernel}"),
                            op: op_kind.clone(),
                            origin: Some(origin.clone()),
                            work,
                            grain: (GRAIN_OPS / cost.max(1)).max(1),
                            buffers: which.iter().map(|&i| buffers[i]).collect(),
                            index_checks: checks,
                            launch: None,
                        });
                    }
                    if calls.len() > first
                        && let Some(last) = calls.last_mut()
                    {
                        last.event = event;
                    }
                }
                other => return Err(at(op, format!("'{other}' has no place in a planned ll function"))),
            }
        }
        Ok(Function { name: name.to_string(), args, arena_bytes, calls })
    }

    /// Writes the kernel function(s) for one `ll` op. Each is (name, rows
    /// of work, scalar operations per row, operand positions it takes,
    /// index checks on those positions).
    #[allow(clippy::type_complexity)]
    fn kernel(
        &mut self,
        op: MlirOperation,
        x: &[MlirValue],
    ) -> Result<Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>> {
        let name = op_name(op);
        let specs = x.iter().map(|v| buf_spec(*v)).collect::<Result<Vec<_>>>()?;
        let all: Vec<usize> = (0..x.len()).collect();
        // 16-bit floats: the GPU's tensor-core GEMM (and copies and fills).
        let narrow = specs.iter().any(|(_, t)| matches!(t, DType::F16 | DType::BF16));
        if narrow && !(self.gpu && matches!(name.as_str(), "ll.gemm" | "ll.copy" | "ll.fill")) {
            let backend = if self.gpu { "the GPU backend" } else { "the CPU backend" };
            return Err(unsupported_at(
                op,
                format!("{backend} has no f16/bf16 '{name}' kernel yet (only the GPU GEMM, copy and fill take them)"),
            ));
        }
        Ok(match name.as_str() {
            "ll.elementwise" => {
                let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_default();
                let n_in = seg.first().copied().unwrap_or(0) as usize;
                let body = self.body(op);
                let ins: Vec<usize> = (0..n_in).collect();
                let outs: Vec<usize> = (n_in..specs.len()).collect();
                let alias = self.in_place(&specs, &ins, &outs);
                let (work, cost) = self.elementwise(&specs[..n_in], &specs[n_in..], &body, &alias);
                vec![(self.last(), work, cost, all, vec![])]
            }
            "ll.multi_tensor_apply" => {
                let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_default();
                let n_in = seg.first().copied().unwrap_or(0) as usize;
                let region = unsafe { mlirOperationGetRegion(op, 0) };
                let block = unsafe { mlirRegionGetFirstBlock(region) };
                let k = unsafe { mlirBlockGetNumArguments(block) } as usize;
                let m = ir::ops_of(block).last().map_or(0, |y| operands(*y).len());
                let groups = n_in / k.max(1);
                let body = self.body(op);
                let mut out = Vec::new();
                for g in 0..groups {
                    let ins: Vec<usize> = (g * k..(g + 1) * k).collect();
                    let outs: Vec<usize> = (n_in + g * m..n_in + (g + 1) * m).collect();
                    let s_in: Vec<_> = ins.iter().map(|&i| specs[i].clone()).collect();
                    let s_out: Vec<_> = outs.iter().map(|&i| specs[i].clone()).collect();
                    let alias = self.in_place(&specs, &ins, &outs);
                    let (work, cost) = self.elementwise(&s_in, &s_out, &body, &alias);
                    out.push((self.last(), work, cost, ins.into_iter().chain(outs).collect(), vec![]));
                }
                out
            }
            "ll.fill" => {
                let (shape, t) = &specs[0];
                let value = float_attr(op, "value").unwrap_or(0.0);
                let mut k = Kernel::new();
                let ty = flat_type(shape, *t);
                let i = k.open("%begin", "%end");
                let v = k.float(value, *t);
                k.store(&v, "%b0", &i, &ty);
                k.close();
                self.finish(k, &specs);
                vec![(self.last(), numel(shape).max(1) as u64, 1, all, vec![])]
            }
            "ll.copy" => {
                let (shape, t) = &specs[0];
                let ty = flat_type(shape, *t);
                let mut k = Kernel::new();
                let i = k.open("%begin", "%end");
                let v = k.load("%b0", &i, &ty);
                k.store(&v, "%b1", &i, &ty);
                k.close();
                self.finish(k, &specs);
                vec![(self.last(), numel(shape).max(1) as u64, 1, all, vec![])]
            }
            "ll.gemm" if self.gpu => self.gpu_gemm(op, &specs)?,
            "ll.gemm" => {
                let before = self.finished.len();
                let (work, cost, library) = self.gemm(op, &specs)?;
                let kernel = self.finished[before].clone();
                self.library.insert(kernel.clone(), library);
                vec![(kernel, work, cost, all, vec![])]
            }
            "ll.softmax_cross_entropy" => {
                let (work, cost, check) = self.softmax_cross_entropy(op, &specs)?;
                vec![(self.last(), work, cost, all, vec![check])]
            }
            "ll.reduce" => {
                let (work, cost) = self.reduce(op, &specs)?;
                vec![(self.last(), work, cost, all, vec![])]
            }
            "ll.transpose" => self.transpose(op, &specs),
            "ll.softmax" => self.softmax(op, &specs, false),
            "ll.softmax_backward" => self.softmax(op, &specs, true),
            "ll.norm" => self.norm(op, &specs),
            "ll.norm_backward" => self.norm_backward(op, &specs),
            "ll.attention" => self.attention(op, &specs),
            "ll.gather" => self.gather(op, &specs, false),
            "ll.scatter_add" => self.gather(op, &specs, true),
            "ll.slice" => self.slice(op, &specs),
            "ll.concat" => self.concat(op, &specs),
            "ll.argmax" => self.argmax(op, &specs),
            "ll.mse_loss" => self.mse_loss(op, &specs),
            "ll.dropout" => self.dropout(op, &specs),
            "ll.conv2d" => self.conv(op, &specs, "forward"),
            "ll.conv2d_backward_input" => self.conv(op, &specs, "input"),
            "ll.conv2d_backward_weight" => self.conv(op, &specs, "weight"),
            "ll.pool2d" => self.pool(op, &specs, false),
            "ll.pool2d_backward" => self.pool(op, &specs, true),
            other => return Err(unsupported_at(op, format!("no kernel generator for '{other}' yet"))),
        })
    }

    /// The name of the kernel written last.
    fn last(&self) -> String {
        self.finished.last().cloned().unwrap_or_default()
    }

    /// Names `text`, a kernel whose name in it is `@{placeholder}`: the name
    /// of an identical kernel written before, or a new one (then `write`
    /// gets the new name and adds the kernel). The content key replaces
    /// every body the kernel calls by that body's own content.
    fn dedup(&mut self, placeholder: &str, text: &str, write: impl FnOnce(&mut Self, &str)) -> String {
        let text_key = text.replace(&format!("@{placeholder}("), "@kernel(");
        // `@bodyN(` becomes `@body_<content hash>(`.
        let mut key = String::with_capacity(text_key.len());
        let mut rest = text_key.as_str();
        while let Some(at) = rest.find("@body") {
            let (before, from) = rest.split_at(at);
            key.push_str(before);
            let end = from.find('(').unwrap_or(from.len());
            match self.body_keys.get(&from[1..end]) {
                Some(body) => {
                    key.push('@');
                    key.push_str(body);
                }
                None => key.push_str(&from[..end]),
            }
            rest = &from[end..];
        }
        key.push_str(rest);
        if let Some(existing) = self.kernel_of.get(&key) {
            let existing = existing.clone();
            self.finished.push(existing.clone());
            return existing;
        }
        let name = format!("k{}", self.kernels);
        self.kernels += 1;
        // The bodies this kernel calls are declared before it.
        let (used, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_bodies)
            .into_iter()
            .partition(|(b, _, _)| text.contains(&format!("@{b}(")));
        self.pending_bodies = rest;
        for (body, declaration, op) in used {
            self.text.push_str(&declaration);
            self.bodies.push((body, op));
        }
        write(self, &name);
        self.kernel_of.insert(key, name.clone());
        self.finished.push(name.clone());
        name
    }

    /// Declares the body of an elementwise-style op as a private function
    /// (filled in after parsing); returns its name and signature.
    fn body(&mut self, op: MlirOperation) -> (String, Vec<DType>, Vec<DType>) {
        let name = format!("body{}", self.bodies.len());
        let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
        let ins: Vec<DType> = (0..unsafe { mlirBlockGetNumArguments(block) })
            .map(|i| {
                ir::element_dtype(unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) }).unwrap_or(DType::F32)
            })
            .collect();
        let outs: Vec<DType> = ir::ops_of(block)
            .last()
            .map(|y| {
                operands(*y)
                    .iter()
                    .map(|v| ir::element_dtype(unsafe { mlirValueGetType(*v) }).unwrap_or(DType::F32))
                    .collect()
            })
            .unwrap_or_default();
        let list = |ts: &[DType]| ts.iter().map(|t| t.mlir()).collect::<Vec<_>>().join(", ");
        let declaration = format!("  func.func private @{name}({}) -> ({})\n", list(&ins), list(&outs));
        let key = format!("body_{}", artifact::ir_hash(&format!("{declaration}{}", ir::region_text(op))));
        self.body_keys.insert(name.clone(), key);
        self.pending_bodies.push((name.clone(), declaration, op));
        (name, ins, outs)
    }

    /// Appends a row kernel with buffers `%b0..` of `specs`' flat types
    /// (or finds an identical one); returns its name.
    fn finish(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)]) -> String {
        let params: Vec<String> =
            specs.iter().enumerate().map(|(i, (s, t))| format!("%b{i}: {}", flat_type(s, *t))).collect();
        let mut text = format!("  func.func @KERNEL(%begin: index, %end: index, {}) {{\n", params.join(", "));
        text.push_str("    %c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index\n");
        text.push_str(&k.text);
        text.push_str("    return\n  }\n");
        // A warp-per-row kernel launches differently from a plain one.
        let keyed = format!("{}{text}", if k.lane.is_some() { "warp " } else { "" });
        self.dedup("KERNEL", &keyed, |g, name| {
            g.text.push_str(&text.replacen("@KERNEL(", &format!("@{name}("), 1));
            g.signatures.insert(name.to_string(), specs.iter().map(|(s, t)| flat_type(s, *t)).collect());
            if k.lane.is_some() {
                g.warp_rows.insert(name.to_string());
            }
            g.entries.push((name.to_string(), specs.len()));
        })
    }

    /// Per output (operand positions `outs`), the position within `ins` of
    /// an input that is the same buffer with the same type: the op updates it
    /// in place.
    fn in_place(&self, specs: &[(Vec<usize>, DType)], ins: &[usize], outs: &[usize]) -> Vec<Option<usize>> {
        outs.iter()
            .map(|&o| ins.iter().position(|&i| self.buffers.get(i) == self.buffers.get(o) && specs[i] == specs[o]))
            .collect()
    }

    /// An elementwise kernel: rows of the outputs' last dimension; inputs
    /// broadcast NumPy-style. Returns (rows, operations per row).
    ///
    /// An output updated in place (`alias[m]`, the input it overwrites) is
    /// stored through that input's pointer, so LLVM sees one buffer read and
    /// written at the same index and vectorises the loop; through two
    /// pointers its run-time overlap check fails and the scalar loop runs.
    fn elementwise(
        &mut self,
        ins: &[(Vec<usize>, DType)],
        outs: &[(Vec<usize>, DType)],
        body: &(String, Vec<DType>, Vec<DType>),
        alias: &[Option<usize>],
    ) -> (u64, u64) {
        let shape = outs.first().map(|o| o.0.clone()).unwrap_or_default();
        let rank = shape.len();
        let cols = shape.last().copied().unwrap_or(1).max(1);
        let rows = (numel(&shape) / cols).max(1);
        let mut k = Kernel::new();
        // On the GPU a work item is one element (consecutive threads touch
        // consecutive addresses): its row and column are computed; on the
        // CPU it is a row, whose columns run in the inner loop.
        let (i, element) = if self.gpu {
            let e = k.open("%begin", "%end");
            let cols_c = k.index(cols);
            let row = k.val(&format!("arith.divui {e}, {cols_c} : index"));
            (row, Some(e))
        } else {
            (k.open("%begin", "%end"), None)
        };
        // Per input: the offset of its row, and whether it runs along the row.
        let mut bases = Vec::new();
        for (s, _) in ins {
            let mut aligned = vec![1; rank.saturating_sub(s.len())];
            aligned.extend(s);
            let along = aligned.last().copied().unwrap_or(1) == cols && cols > 1;
            let outer_same = rank > 0 && aligned[..rank - 1] == shape[..rank - 1];
            let base = if rank <= 1 || aligned[..rank - 1].iter().all(|&d| d == 1) {
                "%c0".to_string()
            } else if outer_same {
                let c = k.index(aligned[rank - 1]);
                k.mul(&i, &c)
            } else {
                // Unravel the row over the outer dimensions.
                let strides = row_major_strides(&aligned);
                let mut rem = i.clone();
                let mut acc = "%c0".to_string();
                for d in (0..rank - 1).rev() {
                    let n = k.index(shape[d]);
                    let coord = k.val(&format!("arith.remui {rem}, {n} : index"));
                    rem = k.val(&format!("arith.divui {rem}, {n} : index"));
                    if aligned[d] != 1 {
                        acc = k.mad(&coord, strides[d], &acc);
                    }
                }
                acc
            };
            bases.push((base, along));
        }
        let cols_c = k.index(cols);
        let (j, out_idx) = match &element {
            Some(e) => {
                let row_start = k.mul(&i, &cols_c);
                let j = k.val(&format!("arith.subi {e}, {row_start} : index"));
                (j, e.clone())
            }
            None => {
                let row_out = k.mul(&i, &cols_c);
                let j = k.open("%c0", &cols_c);
                let out_idx = k.add(&row_out, &j);
                (j, out_idx)
            }
        };
        let mut values = Vec::new();
        for (n, ((s, t), (base, along))) in ins.iter().zip(&bases).enumerate() {
            let idx = if *along { k.add(base, &j) } else { base.clone() };
            values.push(k.load(&format!("%b{n}"), &idx, &flat_type(s, *t)));
        }
        let (fname, in_t, out_t) = body;
        let sig = |ts: &[DType]| ts.iter().map(|t| t.mlir()).collect::<Vec<_>>().join(", ");
        k.n += 1;
        let r = format!("%y{}", k.n);
        let results = if out_t.len() == 1 { r.clone() } else { format!("{r}:{}", out_t.len()) };
        k.line(&format!("{results} = func.call @{fname}({}) : ({}) -> ({})", values.join(", "), sig(in_t), sig(out_t)));
        for (m, (s, t)) in outs.iter().enumerate() {
            let v = if out_t.len() == 1 { r.clone() } else { format!("{r}#{m}") };
            let target = alias.get(m).copied().flatten().unwrap_or(ins.len() + m);
            k.store(&v, &format!("%b{target}"), &out_idx, &flat_type(s, *t));
        }
        k.close();
        let mut specs = ins.to_vec();
        specs.extend(outs.iter().cloned());
        if element.is_some() {
            self.finish(k, &specs);
            return ((rows * cols) as u64, (ins.len() + outs.len() + 4) as u64);
        }
        k.close();
        self.finish(k, &specs);
        (rows as u64, (cols * (ins.len() + outs.len() + 4)) as u64)
    }

    /// One row of the (batched) product per work item, accumulated in a
    /// stack row, then the epilogue.
    fn gemm(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<(u64, u64, Option<LibraryGemm>)> {
        let GemmLayout { bias, mask, residual, out, lhs_sum, ta, tb, accumulate, alpha, act, rows, m, kk, n, batched } =
            GemmLayout::of(op, specs);
        let t = specs[out].1;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut k = Kernel::new();
        let row_t = format!("memref<{n}x{}>", t.mlir());
        let acc_buf = k.val(&format!("memref.alloca() : {row_t}"));
        let zero = k.float(0.0, t);
        let (nc, kc, mc) = (k.index(n), k.index(kk), k.index(m));
        let w = k.open("%begin", "%end");
        // batch and row within it; operand bases
        let (a_base, b_base, i) = if batched {
            let bi = k.val(&format!("arith.divui {w}, {mc} : index"));
            let i = k.val(&format!("arith.remui {w}, {mc} : index"));
            let (mk, kn) = (k.index(m * kk), k.index(kk * n));
            let ab = k.mul(&bi, &mk);
            let bb = k.mul(&bi, &kn);
            (ab, bb, i)
        } else {
            ("%c0".to_string(), "%c0".to_string(), w.clone())
        };
        // A(i, kx) address
        let a_at = |k: &mut Kernel, kx: &str| -> String {
            let off = if ta { k.mad(kx, m, &i) } else { k.mad(&i, kk, kx) };
            k.add(&a_base, &off)
        };
        // Row i of op(A) summed along k (the epilogue's lhs_sum).
        let row_sum_a = |k: &mut Kernel| -> String {
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
            let ai = a_at(k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
            k.close_with(&s, t.mlir());
            r
        };
        let b_at = |k: &mut Kernel, kx: &str, j: &str| -> String {
            let off = if tb { k.mad(j, kk, kx) } else { k.mad(kx, n, j) };
            k.add(&b_base, &off)
        };
        // The scalar dot product of row i of op(A) and column j of op(B) over
        // k in [lo, kk), added to `init` (`fast`: fastmath<fast>, else
        // contract); returns the sum.
        let dot = |k: &mut Kernel, lo: &str, init: &str, j: &str, fast: bool| -> String {
            let (kx, acc, r) = k.open_reduce(lo, &kc, init, t.mlir());
            let ai = a_at(k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let bi = b_at(k, &kx, j);
            let bv = k.load("%b1", &bi, &ty(1));
            let s = if fast {
                let p = k.val(&format!("arith.mulf {av}, {bv} fastmath<fast> : {}", t.mlir()));
                k.val(&format!("arith.addf {acc}, {p} fastmath<fast> : {}", t.mlir()))
            } else {
                let p = k.fop("mulf", &av, &bv, t);
                k.fop("addf", &acc, &p, t)
            };
            k.close_with(&s, t.mlir());
            r
        };
        let mut sum_a = None;
        // Register-blocked f32 products (`vector` dialect, the host's SIMD
        // width): rows of B a block of 4 vectors at a time with A(i, k)
        // broadcast, or (B transposed, A not) 4 dot products at once along
        // k; the columns and k left over run the scalar loops below.
        let lanes = simd_lanes();
        let vector = t == DType::F32 && lanes > 1;
        let vt = format!("vector<{lanes}xf32>");
        let (a_row, b_row) = (ty(0), ty(1));
        if vector && !tb && n >= 4 * lanes {
            let block = 4 * lanes;
            let full = k.index(n / block * block);
            let step = k.index(block);
            let vzero = k.val(&format!("arith.constant dense<0.000000e+00> : {vt}"));
            let jb = k.open_step("%c0", &full, &step);
            let (kx, accs, rs) = k.open_reduce_all("%c0", &kc, "%c1", &vec![vzero.clone(); 4], &vt);
            let ai = a_at(&mut k, &kx);
            let av = k.load("%b0", &ai, &a_row);
            let avv = k.val(&format!("vector.broadcast {av} : f32 to {vt}"));
            let base = b_at(&mut k, &kx, &jb);
            let mut next = Vec::new();
            for (c, acc) in accs.iter().enumerate() {
                let at = k.mad("%c1", c * lanes, &base);
                let bv = k.val(&format!("vector.load %b1[{at}] : {b_row}, {vt}"));
                next.push(k.val(&format!("vector.fma {avv}, {bv}, {acc} : {vt}")));
            }
            k.close_with_all(&next, &vt);
            for (c, r) in rs.iter().enumerate() {
                let at = k.mad("%c1", c * lanes, &jb);
                k.line(&format!("vector.store {r}, {acc_buf}[{at}] : {row_t}, {vt}"));
            }
            k.close();
            // The columns after the last full block.
            let j = k.open(&full, &nc);
            let r = dot(&mut k, "%c0", &zero, &j, false);
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                sum_a = Some(row_sum_a(&mut k));
            }
        } else if vector && tb && !ta && kk >= lanes && n >= 4 {
            let kfull = k.index(kk / lanes * lanes);
            let kstep = k.index(lanes);
            let jfull = k.index(n / 4 * 4);
            let four = k.index(4);
            let vzero = k.val(&format!("arith.constant dense<0.000000e+00> : {vt}"));
            let jb = k.open_step("%c0", &jfull, &four);
            let (kx, accs, rs) = k.open_reduce_all("%c0", &kfull, &kstep, &vec![vzero.clone(); 4], &vt);
            let ai = a_at(&mut k, &kx);
            let av = k.val(&format!("vector.load %b0[{ai}] : {a_row}, {vt}"));
            let mut next = Vec::new();
            for (c, acc) in accs.iter().enumerate() {
                let j = k.mad("%c1", c, &jb);
                let bi = b_at(&mut k, &kx, &j);
                let bv = k.val(&format!("vector.load %b1[{bi}] : {b_row}, {vt}"));
                next.push(k.val(&format!("vector.fma {av}, {bv}, {acc} : {vt}")));
            }
            k.close_with_all(&next, &vt);
            for (c, r) in rs.iter().enumerate() {
                let j = k.mad("%c1", c, &jb);
                let head = k.val(&format!("vector.reduction <add>, {r} fastmath<fast> : {vt} into f32"));
                // k after the last full vector
                let r = dot(&mut k, &kfull, &head, &j, false);
                k.store(&r, &acc_buf, &j, &row_t);
            }
            k.close();
            // The columns after the last block of four.
            let j = k.open(&jfull, &nc);
            let r = dot(&mut k, "%c0", &zero, &j, true);
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                sum_a = Some(row_sum_a(&mut k));
            }
        } else if tb {
            // dot products: acc[j] = sum_k A(i,k) B(j,k)
            let j = k.open("%c0", &nc);
            let r = dot(&mut k, "%c0", &zero, &j, true);
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                sum_a = Some(row_sum_a(&mut k));
            }
        } else {
            // rank-1 updates: acc[:] += A(i,k) B(k,:)
            let j = k.open("%c0", &nc);
            k.store(&zero, &acc_buf, &j, &row_t);
            k.close();
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
            let ai = a_at(&mut k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let j = k.open("%c0", &nc);
            let bi = b_at(&mut k, &kx, &j);
            let bv = k.load("%b1", &bi, &ty(1));
            let cur = k.load(&acc_buf, &j, &row_t);
            let p = k.fop("mulf", &av, &bv, t);
            let s = k.fop("addf", &cur, &p, t);
            k.store(&s, &acc_buf, &j, &row_t);
            k.close();
            let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
            k.close_with(&s, t.mlir());
            sum_a = lhs_sum.map(|_| r);
        }
        // Epilogue over the row.
        let row_out = k.mul(&w, &nc);
        let j = k.open("%c0", &nc);
        let o = k.add(&row_out, &j);
        let mut y = k.load(&acc_buf, &j, &row_t);
        if alpha != 1.0 {
            let c = k.float(alpha, t);
            y = k.fop("mulf", &y, &c, t);
        }
        let epilogue = Epilogue { bias, mask, residual, out, act, accumulate, t };
        epilogue.write(&mut k, &j, &o, &y, specs);
        k.close();
        if let (Some(p), Some(s)) = (lhs_sum, sum_a) {
            k.store(&s, &format!("%b{p}"), &w, &ty(p));
        }
        k.close();
        self.finish(k, specs);
        // The library candidate: an f32 GEMM into `out` with alpha, then
        // this kernel's epilogue (if any) as its own pass over the rows.
        let library = (t == DType::F32 && !accumulate).then(|| {
            let needs_epilogue =
                bias.is_some() || mask.is_some() || residual.is_some() || lhs_sum.is_some() || act != 0;
            let epilogue = needs_epilogue.then(|| {
                let mut k = Kernel::new();
                let zero = k.float(0.0, t);
                let (nc, kc) = (k.index(n), k.index(kk));
                if let (Some(p), true) = (lhs_sum, ta) {
                    // Row w of op(a) is column w of the stored A: summed a
                    // stored row at a time over this piece's columns
                    // (contiguous, vectorised), in the same k order as below.
                    let sums = format!("%b{p}");
                    let w = k.open("%begin", "%end");
                    k.store(&zero, &sums, &w, &ty(p));
                    k.close();
                    let kx = k.open("%c0", &kc);
                    let w = k.open("%begin", "%end");
                    let ai = k.mad(&kx, m, &w);
                    let av = k.load("%b0", &ai, &ty(0));
                    let cur = k.load(&sums, &w, &ty(p));
                    let s = k.fop("addf", &cur, &av, t);
                    k.store(&s, &sums, &w, &ty(p));
                    k.close();
                    k.close();
                }
                let w = k.open("%begin", "%end");
                if let (Some(p), false) = (lhs_sum, ta) {
                    // only rank-2 operands carry lhs_sum: row w of op(a)
                    let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
                    let ai = k.mad(&w, kk, &kx);
                    let av = k.load("%b0", &ai, &ty(0));
                    let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
                    k.close_with(&s, t.mlir());
                    k.store(&r, &format!("%b{p}"), &w, &ty(p));
                }
                let row_out = k.mul(&w, &nc);
                let j = k.open("%c0", &nc);
                let o = k.add(&row_out, &j);
                let y = k.load(&format!("%b{out}"), &o, &ty(out));
                Epilogue { bias, mask, residual, out, act, accumulate: false, t }.write(&mut k, &j, &o, &y, specs);
                k.close();
                k.close();
                self.finish(k, specs);
                self.last()
            });
            let (a_row, a_col) = if ta { (1, m) } else { (kk, 1) };
            let (b_row, b_col) = if tb { (1, kk) } else { (n, 1) };
            LibraryGemm {
                batch: rows / m.max(1),
                m,
                n,
                k: kk,
                a_strides: [a_row, a_col],
                b_strides: [b_row, b_col],
                a_batch: if batched { m * kk } else { 0 },
                b_batch: if batched { kk * n } else { 0 },
                alpha,
                a: 0,
                b: 1,
                out,
                aliases: [mask, residual].into_iter().flatten().collect(),
                epilogue: epilogue.map(|e| format!("aicf_{e}")),
                gpu: None,
            }
        });
        Ok((rows as u64, (2 * kk * n + 4 * n) as u64, library))
    }

    /// Loss (and gradient) over all rows in one work item: the mean needs
    /// the count of labelled rows first. On the GPU the work item is one
    /// block: its threads count the labelled rows, then each warp takes
    /// rows (warp w: rows w, w + W, ...) with the classes split over its
    /// lanes, the row max and sum by xor shuffles, and the block sums the
    /// warps' losses.
    fn softmax_cross_entropy(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
    ) -> Result<(u64, u64, IndexCheck)> {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 1, 0]);
        let grad_output = (seg[2] > 0).then_some(2);
        let loss = 2 + seg[2] as usize;
        let grad = (seg[4] > 0).then_some(loss + 1);
        let (logits, t) = (&specs[0].0, specs[0].1);
        let classes = logits.last().copied().unwrap_or(1);
        let rows = numel(logits) / classes.max(1);
        let ignore = int_attr(op, "ignore_index");
        let sum = int_attr(op, "reduction") == Some(1);
        let grad_scale = float_attr(op, "grad_scale").unwrap_or(1.0);
        let label_t = specs[1].1;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let f = t.mlir();
        let mut k = Kernel::rows(self.gpu);
        let zero = k.float(0.0, t);
        let one = k.float(1.0, t);
        let (rc, cc) = (k.index(rows), k.index(classes));
        // GPU: thread `tid` counts rows tid, tid + B, ...; warp `tid / 32`
        // takes rows warp, warp + B / 32, ...
        let (tid, step, warp, warps) = if self.gpu {
            let tid = k.val("gpu.thread_id x");
            let step = k.index(gpu::REDUCE_BLOCK);
            let width = k.index(32);
            let warp = k.val(&format!("arith.divui {tid}, {width} : index"));
            let warps = k.index(gpu::REDUCE_BLOCK / 32);
            (tid, step, warp, warps)
        } else {
            let c0 = "%c0".to_string();
            let c1 = "%c1".to_string();
            (c0.clone(), c1.clone(), c0, c1)
        };
        let lt = label_t.mlir();
        let ignore_c = ignore.map(|i| k.val(&format!("arith.constant {i} : {lt}")));
        // Whether label `l` counts (every label does without an ignore index).
        let labelled = |k: &mut Kernel, l: &str| match &ignore_c {
            Some(c) => k.val(&format!("arith.cmpi ne, {l}, {c} : {lt}")),
            None => k.val("arith.constant true"),
        };
        // count of labelled rows
        let count = if sum {
            one.clone()
        } else {
            let (r, acc, res) = k.open_reduce_all(&tid, &rc, &step, std::slice::from_ref(&zero), f);
            let l = k.load("%b1", &r, &ty(1));
            let valid = labelled(&mut k, &l);
            let inc = k.val(&format!("arith.select {valid}, {one}, {zero} : {f}"));
            let s = k.fop("addf", &acc[0], &inc, t);
            k.close_with_all(&[s], f);
            if self.gpu { gpu::block_sum(&mut k, &tid, &res[0], t) } else { res[0].clone() }
        };
        let upstream = match grad_output {
            Some(p) => {
                let g = k.load(&format!("%b{p}"), "%c0", &ty(p));
                let c = k.float(grad_scale, t);
                k.fop("mulf", &g, &c, t)
            }
            None => k.float(grad_scale, t),
        };
        let scale = k.fop("divf", &upstream, &count, t);
        let (r, accs, totals) = k.open_reduce_all(&warp, &rc, &warps, std::slice::from_ref(&zero), f);
        let acc = accs[0].clone();
        let l = k.load("%b1", &r, &ty(1));
        let valid = labelled(&mut k, &l);
        let li = k.val(&format!("arith.index_cast {l} : {} to index", label_t.mlir()));
        let li = k.val(&format!("arith.select {valid}, {li}, %c0 : index"));
        let base = k.mul(&r, &cc);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let (c, mx, m) = k.open_cols_reduce(&cc, &ninf, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &ty(0));
        let nm = k.val(&format!("arith.maximumf {mx}, {v} : {f}"));
        k.close_with(&nm, f);
        let m = k.warp_all(&m, "maximumf", t);
        let (c, se, s) = k.open_cols_reduce(&cc, &zero, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &ty(0));
        let d = k.fop("subf", &v, &m, t);
        let e = k.val(&format!("math.exp {d} : {f}"));
        let ns = k.fop("addf", &se, &e, t);
        k.close_with(&ns, f);
        let s = k.warp_all(&s, "addf", t);
        let logs = k.val(&format!("math.log {s} : {f}"));
        let lse = k.fop("addf", &m, &logs, t);
        let at = k.add(&base, &li);
        let xl = k.load("%b0", &at, &ty(0));
        let row_loss = k.fop("subf", &lse, &xl, t);
        let row_loss = k.val(&format!("arith.select {valid}, {row_loss}, {zero} : {f}"));
        let next = k.fop("addf", &acc, &row_loss, t);
        if let Some(g) = grad {
            let gs = k.val(&format!("arith.select {valid}, {scale}, {zero} : {f}"));
            let c = k.open_cols(&cc);
            let at = k.add(&base, &c);
            let v = k.load("%b0", &at, &ty(0));
            let d = k.fop("subf", &v, &lse, t);
            let p = k.val(&format!("math.exp {d} : {f}"));
            let hit = k.val(&format!("arith.cmpi eq, {c}, {li} : index"));
            let sub = k.val(&format!("arith.select {hit}, {one}, {zero} : {f}"));
            let q = k.fop("subf", &p, &sub, t);
            let gv = k.fop("mulf", &q, &gs, t);
            k.store(&gv, &format!("%b{g}"), &at, &ty(g));
            k.close();
        }
        k.close_with_all(&[next], f);
        let total = match &k.lane {
            // every lane holds its warp's total: lane 0's counts
            Some(lane) => {
                let lane = lane.clone();
                let first = k.val(&format!("arith.cmpi eq, {lane}, %c0 : index"));
                let part = k.val(&format!("arith.select {first}, {}, {zero} : {f}", totals[0]));
                gpu::block_sum(&mut k, &tid, &part, t)
            }
            None => totals[0].clone(),
        };
        let l = if sum { total } else { k.fop("divf", &total, &count, t) };
        if self.gpu {
            let first = k.val(&format!("arith.cmpi eq, {tid}, %c0 : index"));
            k.line(&format!("scf.if {first} {{"));
            k.depth += 1;
            k.store(&l, &format!("%b{loss}"), "%c0", &ty(loss));
            k.close();
            self.finish_gpu_func(
                k,
                specs,
                &[("%S", format!("memref<{}x{f}, #gpu.address_space<workgroup>>", gpu::REDUCE_BLOCK / 32))],
                [1, 1, 1],
                gpu::REDUCE_BLOCK as u32,
            );
        } else {
            k.store(&l, &format!("%b{loss}"), "%c0", &ty(loss));
            // One work item, [0, 1): the whole op.
            self.finish(k, specs);
        }
        let check = IndexCheck {
            operand: 1,
            dtype: runtime_dtype(label_t)?,
            count: rows,
            bound: classes as i64,
            allowed: ignore,
            what: "label".into(),
        };
        Ok((1, (rows * classes * 8) as u64, check))
    }

    /// `out[o] = combine over the reduced coordinates of input`.
    fn reduce(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<(u64, u64)> {
        let (shape, t) = (&specs[0].0, specs[0].1);
        let dims: Vec<usize> = i64_array(op, "dims").unwrap_or_default().into_iter().map(|d| d as usize).collect();
        let kind = int_attr(op, "kind").unwrap_or(0);
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
        let strides = row_major_strides(shape);
        let outs: usize = kept.iter().map(|&d| shape[d]).product();
        let red: usize = dims.iter().map(|&d| shape[d]).product();
        let f = t.mlir();
        let mut k = Kernel::new();
        let init = if kind == 2 { k.float(f64::NEG_INFINITY, t) } else { k.float(0.0, t) };
        let rc = k.index(red.max(1));
        let o = k.open("%begin", "%end");
        // input offset of the kept coordinates
        let mut rem = o.clone();
        let mut base = "%c0".to_string();
        for &d in kept.iter().rev() {
            let nd = k.index(shape[d]);
            let c = k.val(&format!("arith.remui {rem}, {nd} : index"));
            rem = k.val(&format!("arith.divui {rem}, {nd} : index"));
            base = k.mad(&c, strides[d], &base);
        }
        let (r, acc, res) = k.open_reduce("%c0", &rc, &init, f);
        let mut rem = r.clone();
        let mut off = base.clone();
        for &d in dims.iter().rev() {
            let nd = k.index(shape[d]);
            let c = k.val(&format!("arith.remui {rem}, {nd} : index"));
            rem = k.val(&format!("arith.divui {rem}, {nd} : index"));
            off = k.mad(&c, strides[d], &off);
        }
        let v = k.load("%b0", &off, &flat_type(shape, t));
        let next = if kind == 2 {
            k.val(&format!("arith.maximumf {acc}, {v} : {f}"))
        } else {
            k.val(&format!("arith.addf {acc}, {v} fastmath<fast> : {f}"))
        };
        k.close_with(&next, f);
        let value = if kind == 1 {
            let c = k.float(red.max(1) as f64, t);
            k.fop("divf", &res, &c, t)
        } else {
            res
        };
        k.store(&value, "%b1", &o, &flat_type(&specs[1].0, specs[1].1));
        k.close();
        self.finish(k, specs);
        Ok((outs.max(1) as u64, (red * 3) as u64))
    }

    /// Lowers the kernels to the LLVM dialect and builds `kernels.so` in
    /// `out_dir` from one object per distinct kernel, taken from
    /// `kernel_cache` when it holds it (see [`KernelCache`]), else compiled
    /// there (`clang -O3`, one process per kernel, as many at once as there
    /// are cores). Returns the target description and, per kernel name
    /// (`kN`), its exported symbol `aicf_<hash>`.
    fn build(
        &self,
        ctx: &CompilerContext,
        out_dir: &Path,
        cache: &KernelCache,
    ) -> Result<(String, HashMap<String, String>, KernelStats)> {
        let started = std::time::Instant::now();
        let mut timings = crate::timing::Timings::default();
        let source = format!("module {{\n{}}}\n", self.text);
        let mlir = ctx.mlir();
        let mut module = timings.time("kernels: parse, bodies, math expansion", || self.parse_kernels(ctx, &source))?;
        timings.time("kernels: lower to the LLVM dialect", || crate::run_pipeline(ctx, &mut module, TO_LLVM))?;
        let hash_started = std::time::Instant::now();
        let (clang, cpu) = toolchain()?;
        let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module.as_operation().to_raw(), 0)) };
        // Declarations (libm, libmvec) go into every kernel's module; the
        // kernels are hashed alone.
        let mut declarations = String::new();
        let mut defined: HashMap<String, MlirOperation> = HashMap::new();
        for op in ops_of(top) {
            let name = ir::string_attr(op, "sym_name").unwrap_or_default();
            let has_body = unsafe { mlirOperationGetNumRegions(op) } > 0
                && !unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) }.ptr.is_null();
            if op_name(op) == "llvm.func" && has_body {
                defined.insert(name, op);
            } else {
                let _ = writeln!(declarations, "  {}", ir::op_text_local(op));
            }
        }
        let mut symbols = HashMap::new();
        let mut kernels: Vec<(String, String)> = Vec::new(); // (hash, kernel and entry text) in first-use order
        for (name, count) in &self.entries {
            let op = defined.get(name).ok_or_else(|| internal(format!("kernel @{name} vanished in the lowering")))?;
            let text = ir::op_text_local(*op);
            let body = text.replacen(&format!("llvm.func @{name}("), "llvm.func @kernel(", 1);
            let hash = artifact::ir_hash(&format!("{KERNEL_FLAGS:?} {clang} {cpu}\n{body}"));
            symbols.insert(name.clone(), format!("aicf_{hash}"));
            if kernels.iter().any(|(h, _)| *h == hash) {
                continue;
            }
            // The kernel is internal to its object and its entry weak: an
            // object compiled with other kernels may be linked beside
            // another that holds the same one.
            let mut m =
                format!("  {}\n", body.replacen("llvm.func @kernel(", &format!("llvm.func internal @k_{hash}("), 1));
            let _ = writeln!(m, "  llvm.func weak @aicf_{hash}(%begin: i64, %end: i64, %args: !llvm.ptr) {{");
            let mut ptrs = Vec::new();
            for i in 0..*count {
                let _ = writeln!(
                    m,
                    "    %a{i} = llvm.getelementptr %args[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n    %p{i} = llvm.load %a{i} : !llvm.ptr -> !llvm.ptr"
                );
                ptrs.push(format!("%p{i}"));
            }
            let types = vec!["!llvm.ptr"; *count].join(", ");
            let _ = writeln!(
                m,
                "    llvm.call @k_{hash}(%begin, %end, {}) : (i64, i64, {types}) -> ()\n    llvm.return\n  }}",
                ptrs.join(", ")
            );
            kernels.push((hash, m));
        }
        timings.add(
            "kernels: print and hash",
            hash_started.elapsed().as_secs_f64(),
            format!("{} distinct", kernels.len()),
        );
        // The missing kernels, in one group per core (a clang process costs
        // about as much as compiling a small kernel): each group is
        // translated here, then the groups compile in parallel.
        let translate_started = std::time::Instant::now();
        let missing: Vec<&(String, String)> = kernels.iter().filter(|(h, _)| cache.object_of(h).is_none()).collect();
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(missing.len()).max(1);
        let mut groups = Vec::new();
        for g in 0..workers {
            let members: Vec<&(String, String)> = missing.iter().skip(g).step_by(workers).copied().collect();
            if members.is_empty() {
                continue;
            }
            let hashes: Vec<&str> = members.iter().map(|(h, _)| h.as_str()).collect();
            let group = format!("g_{}", artifact::ir_hash(&hashes.join(" ")));
            let text =
                format!("module {{\n{declarations}{}}}\n", members.iter().map(|(_, t)| t.as_str()).collect::<String>());
            let module = Module::parse(mlir, &text)
                .ok_or_else(|| internal(format!("kernels {hashes:?} do not parse: {:?}", ctx.take_diagnostics())))?;
            unsafe { mlirRegisterAllLLVMTranslations(mlir.to_raw()) };
            let llvm = unsafe { mlirTranslateModuleToLLVMIRToString(module.as_operation().to_raw()) };
            if llvm.is_null() {
                return Err(internal(format!(
                    "translation of kernels {hashes:?} to LLVM IR failed: {:?}",
                    ctx.take_diagnostics()
                )));
            }
            let llvm_text = unsafe { std::ffi::CStr::from_ptr(llvm) }.to_string_lossy().into_owned();
            unsafe { LLVMDisposeMessage(llvm) };
            cache.write(&format!("{group}.ll"), llvm_text.as_bytes())?;
            groups.push((group, hashes.iter().map(|h| h.to_string()).collect::<Vec<_>>()));
        }
        let compiled = missing.len();
        timings.add(
            "kernels: translate to LLVM IR",
            translate_started.elapsed().as_secs_f64(),
            format!("{compiled} not cached"),
        );
        let clang_started = std::time::Instant::now();
        cache.compile_all(clang, &groups)?;
        timings.add(
            "host compile (clang -O3)",
            clang_started.elapsed().as_secs_f64(),
            format!("{compiled} of {} kernels, {} processes", kernels.len(), groups.len()),
        );
        let link_started = std::time::Instant::now();
        let mut objects: Vec<std::path::PathBuf> = Vec::new();
        for (hash, _) in &kernels {
            let object = cache
                .object_of(hash)
                .ok_or_else(|| internal(format!("kernel {hash} has no object in {}", cache.dir.display())))?;
            if !objects.contains(&object) {
                objects.push(object);
            }
        }
        let so = out_dir.join("kernels.so");
        let tmp = out_dir.join(format!("kernels.so.{}.{}.tmp", std::process::id(), thread_tag()));
        let output = std::process::Command::new(clang)
            .args(["-shared", "-fPIC", "-Wl,-z,defs"])
            .args(&objects)
            .arg("-o")
            .arg(&tmp)
            .args(["-lmvec", "-lm"])
            .output()
            .map_err(|e| internal(format!("{clang}: {e}")))?;
        if !output.status.success() {
            return Err(internal(format!(
                "{clang} failed to link {}:\n{}",
                so.display(),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        std::fs::rename(&tmp, &so).map_err(|e| internal(format!("{}: {e}", so.display())))?;
        timings.add("link kernels.so", link_started.elapsed().as_secs_f64(), format!("{} objects", objects.len()));
        let stats = KernelStats { kernels: kernels.len(), compiled, seconds: started.elapsed().as_secs_f64(), timings };
        Ok((format!("{} cpu {cpu}", std::env::consts::ARCH), symbols, stats))
    }

    /// Parses the generated kernels `source`, moves the bodies in, expands
    /// `tanh` and guards `exp`: the module both backends lower from.
    fn parse_kernels<'c>(&self, ctx: &'c CompilerContext, source: &str) -> Result<Module<'c>> {
        let mut module = Module::parse(ctx.mlir(), source).ok_or_else(|| {
            let diags = ctx.take_diagnostics();
            internal(format!("generated kernels do not parse: {diags:?}\n{source}"))
        })?;
        self.fill_bodies(&module)?;
        crate::run_pipeline(ctx, &mut module, EXPAND_MATH)?;
        guard_exp(ctx.mlir().to_raw(), module.as_operation().to_raw())?;
        Ok(module)
    }

    /// Moves each elementwise op's region into its body declaration.
    fn fill_bodies(&self, module: &Module<'_>) -> Result<()> {
        let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module.as_operation().to_raw(), 0)) };
        // On the GPU the declarations are inside the gpu.module.
        let nested = ops_of(top)
            .into_iter()
            .filter(|&o| op_name(o) == "gpu.module")
            .flat_map(|g| ops_of(unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0)) }));
        let decls: HashMap<String, MlirOperation> = ops_of(top)
            .into_iter()
            .chain(nested)
            .filter(|&o| op_name(o) == "func.func")
            .map(|o| (ir::string_attr(o, "sym_name").unwrap_or_default(), o))
            .collect();
        for (name, op) in &self.bodies {
            let decl = decls.get(name).ok_or_else(|| internal(format!("no declaration @{name}")))?;
            unsafe {
                let clone = mlirOperationClone(*op);
                let block = mlirRegionGetFirstBlock(mlirOperationGetRegion(clone, 0));
                mlirBlockDetach(block);
                mlirOperationDestroy(clone);
                let yield_op = mlirBlockGetTerminator(block);
                let values = operands(yield_op);
                let ret = ir::create_op(
                    mlirOperationGetContext(*decl),
                    ir::op_loc(yield_op),
                    &ir::OpSpec {
                        operands: &values,
                        results: Some(&[]),
                        verify: false,
                        ..ir::OpSpec::new("func.return")
                    },
                )
                .map_err(|e| internal(format!("{e:?}")))?;
                mlirBlockInsertOwnedOperationBefore(block, yield_op, ret);
                mlirOperationDestroy(yield_op);
                mlirRegionAppendOwnedBlock(mlirOperationGetRegion(*decl, 0), block);
            }
        }
        Ok(())
    }
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The `ll.bind` tag of each argument of `func`.
fn arg_binds(func: MlirOperation) -> Vec<Option<String>> {
    let attrs = attr(func, "arg_attrs");
    if attrs.ptr.is_null() {
        return Vec::new();
    }
    (0..unsafe { mlirArrayAttrGetNumElements(attrs) })
        .map(|i| unsafe {
            let dict = mlirArrayAttrGetElement(attrs, i);
            let tag = mlirDictionaryAttrGetElementByName(dict, crate::ffi::string_ref("ll.bind"));
            (!tag.ptr.is_null() && mlirAttributeIsAString(tag))
                .then(|| crate::ffi::to_string(mlirStringAttrGetValue(tag)))
        })
        .collect()
}

/// A `memref.global`'s values (splat or dense).
fn global_values(global: MlirOperation, value: MlirValue) -> Result<Constant> {
    let (shape, dtype) = buf_spec(value)?;
    let a = attr(global, "initial_value");
    let n = numel(&shape).max(1);
    let get = |i: isize| unsafe {
        match dtype {
            DType::F32 => mlirDenseElementsAttrGetFloatValue(a, i) as f64,
            DType::F64 => mlirDenseElementsAttrGetDoubleValue(a, i),
            DType::I32 => mlirDenseElementsAttrGetInt32Value(a, i) as f64,
            DType::I64 => mlirDenseElementsAttrGetInt64Value(a, i) as f64,
            DType::I1 => mlirDenseElementsAttrGetBoolValue(a, i) as i32 as f64,
            _ => f64::NAN,
        }
    };
    if a.ptr.is_null() || !unsafe { mlirAttributeIsADenseElements(a) } {
        return Err(at(global, "a constant without dense values"));
    }
    let splat = unsafe { mlirDenseElementsAttrIsSplat(a) };
    let values = (0..n).map(|i| get(if splat { 0 } else { i as isize })).collect();
    Ok(Constant { shape, dtype: runtime_dtype(dtype)?, values })
}

/// The C compiler that turns LLVM IR into the shared object: `$AICF_CLANG`,
/// else clang-22 from the toolchain.
fn clang() -> Result<String> {
    if let Ok(c) = std::env::var("AICF_CLANG") {
        return Ok(c);
    }
    for c in ["/usr/lib/llvm-22/bin/clang", "clang-22", "clang"] {
        if std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(c.to_string());
        }
    }
    Err(internal("no clang found to compile the kernels (run tools/setup.sh, or set AICF_CLANG)"))
}

/// clang and the host CPU it compiles for, looked up once per process.
fn toolchain() -> Result<(&'static str, &'static str)> {
    static FOUND: std::sync::OnceLock<std::result::Result<(String, String), String>> = std::sync::OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let clang = clang().map_err(|e| e.to_string())?;
        let cpu = host_cpu(&clang);
        Ok((clang, cpu))
    });
    match found {
        Ok((clang, cpu)) => Ok((clang, cpu)),
        Err(e) => Err(internal(e.clone())),
    }
}

/// The host CPU clang compiles for under -march=native.
fn host_cpu(clang: &str) -> String {
    std::process::Command::new(clang)
        .args(["-march=native", "-###", "-x", "c", "-c", "/dev/null"])
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stderr).into_owned();
            let at = text.find("\"-target-cpu\" \"")? + 15;
            Some(text[at..].split('"').next()?.to_string())
        })
        .unwrap_or_else(|| "native".into())
}

/// Geometry of the lines along `axis` of `shape`: (outer, n, inner).
fn lines(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

impl Kernel {
    /// The coordinates of flat index `idx` in `shape` (row-major).
    fn unravel(&mut self, idx: &str, shape: &[usize]) -> Vec<String> {
        let mut coords = vec![String::new(); shape.len()];
        let mut rem = idx.to_string();
        for d in (0..shape.len()).rev() {
            if d == 0 {
                coords[0] = rem.clone();
                break;
            }
            let n = self.index(shape[d]);
            coords[d] = self.val(&format!("arith.remui {rem}, {n} : index"));
            rem = self.val(&format!("arith.divui {rem}, {n} : index"));
        }
        coords
    }
    /// `sum coords[d] * strides[d]`.
    fn ravel(&mut self, coords: &[String], strides: &[usize]) -> String {
        let mut acc = "%c0".to_string();
        for (c, &s) in coords.iter().zip(strides) {
            acc = self.mad(c, s, &acc);
        }
        acc
    }
    /// The start of line `l` (of `lines(shape, axis)`) and its stride.
    fn line_base(&mut self, l: &str, inner: usize, n: usize) -> String {
        let ic = self.index(inner);
        let o = self.val(&format!("arith.divui {l}, {ic} : index"));
        let i = self.val(&format!("arith.remui {l}, {ic} : index"));
        self.mad(&o, n * inner, &i)
    }
    /// `base + j * stride`
    fn at(&mut self, base: &str, j: &str, stride: usize) -> String {
        self.mad(j, stride, base)
    }
    /// `sum over i < bounds[0], j < bounds[1], l < bounds[2] of (ok ? x * y : 0)`
    /// where `term` gives (ok, x, y) for the three induction variables.
    fn masked_sum3(
        &mut self,
        bounds: [&str; 3],
        t: DType,
        term: impl FnOnce(&mut Kernel, [String; 3]) -> (String, String, String),
    ) -> String {
        let f = t.mlir();
        let zero = self.float(0.0, t);
        let (i, acc0, s0) = self.open_reduce("%c0", bounds[0], &zero, f);
        let (j, acc1, s1) = self.open_reduce("%c0", bounds[1], &acc0, f);
        let (l, acc2, s2) = self.open_reduce("%c0", bounds[2], &acc1, f);
        let (ok, x, y) = term(self, [i, j, l]);
        let product = self.fop("mulf", &x, &y, t);
        let masked = self.val(&format!("arith.select {ok}, {product}, {zero} : {f}"));
        let next = self.val(&format!("arith.addf {acc2}, {masked} fastmath<fast> : {f}"));
        self.close_with(&next, f);
        self.close_with(&s2, f);
        self.close_with(&s1, f);
        s0
    }

    fn cmpi(&mut self, pred: &str, a: &str, b: &str) -> String {
        self.val(&format!("arith.cmpi {pred}, {a}, {b} : index"))
    }
    fn and(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.andi {a}, {b} : i1"))
    }
}

/// The input coordinate `o * stride - pad + kx * dilation` that window tap
/// `kx` of output `o` reads, and whether it lies in `[0, limit)`: (in
/// bounds, the coordinate or 0 when it is not).
fn window_tap(
    k: &mut Kernel,
    o: &str,
    kx: &str,
    stride: usize,
    dilation: usize,
    pad: usize,
    limit: usize,
) -> (String, String) {
    let s = k.index(stride);
    let os = k.mul(o, &s);
    let dc = k.index(dilation);
    let kd = k.mul(kx, &dc);
    let sum = k.add(&os, &kd);
    let pc = k.index(pad);
    let ge = k.cmpi("uge", &sum, &pc);
    let pos = k.val(&format!("arith.subi {sum}, {pc} : index"));
    let lim = k.index(limit);
    let lt = k.cmpi("ult", &pos, &lim);
    let ok = k.and(&ge, &lt);
    let safe = k.val(&format!("arith.select {ok}, {pos}, %c0 : index"));
    (ok, safe)
}

/// The image dimensions (channel, height, width) of a layout attribute.
fn image_dims(op: MlirOperation) -> (usize, usize, usize) {
    if int_attr(op, "layout").unwrap_or(0) == 1 { (3, 1, 2) } else { (1, 2, 3) }
}

fn pair(op: MlirOperation, key: &str, default: usize) -> [usize; 2] {
    let v = i64_array(op, key).unwrap_or_default();
    [v.first().copied().unwrap_or(default as i64) as usize, v.get(1).copied().unwrap_or(default as i64) as usize]
}

type Kernels = Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>;

impl Generator {
    fn one(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)], work: usize, cost: usize) -> Kernels {
        self.finish(k, specs);
        vec![(self.last(), work.max(1) as u64, cost.max(1) as u64, (0..specs.len()).collect(), vec![])]
    }

    fn transpose(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let perm: Vec<usize> = i64_array(op, "permutation").unwrap_or_default().iter().map(|&p| p as usize).collect();
        let (ins, outs) = (&specs[0], &specs[1]);
        let in_strides = row_major_strides(&ins.0);
        let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
        let mut k = Kernel::new();
        let o = k.open("%begin", "%end");
        let c = k.unravel(&o, &outs.0);
        let i = k.ravel(&c, &strides);
        let v = k.load("%b0", &i, &flat_type(&ins.0, ins.1));
        k.store(&v, "%b1", &o, &flat_type(&outs.0, outs.1));
        k.close();
        let n = numel(&outs.0);
        self.one(k, specs, n, 4 * outs.0.len())
    }

    /// softmax / log-softmax (`backward`: their gradient from y and g).
    fn softmax(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], backward: bool) -> Kernels {
        let (shape, t) = (&specs[0].0, specs[0].1);
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        let log = has(op, "log");
        let (outer, n, inner) = lines(shape, axis);
        let (ty, f) = (flat_type(shape, t), t.mlir());
        let out = if backward { "%b2" } else { "%b1" };
        let mut k = Kernel::rows(self.gpu);
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let l = k.open("%begin", "%end");
        let base = k.line_base(&l, inner, n);
        if backward {
            // log: g - exp(y) sum(g); else y (g - sum(g y))
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.at(&base, &j, inner);
            let g = k.load("%b1", &p, &ty);
            let term = if log {
                g
            } else {
                let y = k.load("%b0", &p, &ty);
                k.fop("mulf", &g, &y, t)
            };
            let next = k.val(&format!("arith.addf {acc}, {term} fastmath<fast> : {f}"));
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            let j = k.open_cols(&nc);
            let p = k.at(&base, &j, inner);
            let (y, g) = (k.load("%b0", &p, &ty), k.load("%b1", &p, &ty));
            let v = if log {
                let e = k.val(&format!("math.exp {y} : {f}"));
                let es = k.fop("mulf", &e, &s, t);
                k.fop("subf", &g, &es, t)
            } else {
                let d = k.fop("subf", &g, &s, t);
                k.fop("mulf", &y, &d, t)
            };
            k.store(&v, out, &p, &ty);
            k.close();
        } else {
            let ninf = k.float(f64::NEG_INFINITY, t);
            let (j, mx, m) = k.open_cols_reduce(&nc, &ninf, f);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty);
            let nm = k.val(&format!("arith.maximumf {mx}, {x} : {f}"));
            k.close_with(&nm, f);
            let m = k.warp_all(&m, "maximumf", t);
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty);
            let d = k.fop("subf", &x, &m, t);
            let e = k.val(&format!("math.exp {d} : {f}"));
            let next = k.fop("addf", &acc, &e, t);
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            let ls = k.val(&format!("math.log {s} : {f}"));
            let j = k.open_cols(&nc);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty);
            let d = k.fop("subf", &x, &m, t);
            let v = if log {
                k.fop("subf", &d, &ls, t)
            } else {
                let e = k.val(&format!("math.exp {d} : {f}"));
                k.fop("divf", &e, &s, t)
            };
            k.store(&v, out, &p, &ty);
            k.close();
        }
        k.close();
        self.one(k, specs, outer * inner, 8 * n)
    }

    /// Mean and reciprocal deviation of the row at `base` (length `n`), in
    /// every lane of a warp-per-row kernel.
    fn row_stats(
        k: &mut Kernel,
        base: &str,
        n: usize,
        t: DType,
        center: bool,
        eps: f64,
        ty: &str,
        buf: &str,
    ) -> (String, String) {
        let f = t.mlir();
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let count = k.float(n as f64, t);
        let mean = if center {
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.add(base, &j);
            let x = k.load(buf, &p, ty);
            let next = k.val(&format!("arith.addf {acc}, {x} fastmath<fast> : {f}"));
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            k.fop("divf", &s, &count, t)
        } else {
            zero.clone()
        };
        let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
        let p = k.add(base, &j);
        let x = k.load(buf, &p, ty);
        let d = k.fop("subf", &x, &mean, t);
        let d2 = k.fop("mulf", &d, &d, t);
        let next = k.val(&format!("arith.addf {acc}, {d2} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let s = k.warp_all(&s, "addf", t);
        let var = k.fop("divf", &s, &count, t);
        let e = k.float(eps, t);
        let ve = k.fop("addf", &var, &e, t);
        let rstd = k.val(&format!("math.rsqrt {ve} : {f}"));
        (mean, rstd)
    }

    fn norm(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 0, 0, 1]);
        let (w, b) = ((seg[1] > 0).then_some(1), (seg[2] > 0).then_some(1 + seg[1] as usize));
        let out = 1 + seg[1] as usize + seg[2] as usize;
        let (shape, t) = (&specs[0].0, specs[0].1);
        let dims = int_attr(op, "dims").unwrap_or(1) as usize;
        let n: usize = shape[shape.len() - dims..].iter().product();
        let rows = numel(shape) / n.max(1);
        let (eps, center) = (float_attr(op, "eps").unwrap_or(1e-5), !has(op, "rms"));
        let ty = flat_type(shape, t);
        let mut k = Kernel::rows(self.gpu);
        let r = k.open("%begin", "%end");
        let nc = k.index(n);
        let base = k.mul(&r, &nc);
        let (mean, rstd) = Self::row_stats(&mut k, &base, n, t, center, eps, &ty, "%b0");
        let j = k.open_cols(&nc);
        let p = k.add(&base, &j);
        let x = k.load("%b0", &p, &ty);
        let d = k.fop("subf", &x, &mean, t);
        let mut y = k.fop("mulf", &d, &rstd, t);
        if let Some(w) = w {
            let wv = k.load(&format!("%b{w}"), &j, &flat_type(&specs[w].0, t));
            y = k.fop("mulf", &y, &wv, t);
        }
        if let Some(b) = b {
            let bv = k.load(&format!("%b{b}"), &j, &flat_type(&specs[b].0, t));
            y = k.fop("addf", &y, &bv, t);
        }
        k.store(&y, &format!("%b{out}"), &p, &flat_type(&specs[out].0, t));
        k.close();
        k.close();
        self.one(k, specs, rows, 10 * n)
    }

    /// dx per row; dw and db summed over rows in the same pass. On the CPU
    /// that is one work item (rows are not split over threads). On the GPU
    /// a warp takes a row and adds its terms of dw and db atomically, after
    /// a kernel that zeroes them.
    fn norm_backward(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 1, 0, 0]);
        let w = (seg[2] > 0).then_some(2);
        let dx = 2 + seg[2] as usize;
        let dw = (seg[4] > 0).then_some(dx + 1);
        let db = (seg[5] > 0).then_some(dx + 1 + seg[4] as usize);
        let (shape, t) = (&specs[1].0, specs[1].1);
        let f = t.mlir();
        let dims = int_attr(op, "dims").unwrap_or(1) as usize;
        let n: usize = shape[shape.len() - dims..].iter().product();
        let rows = numel(shape) / n.max(1);
        let (eps, center) = (float_attr(op, "eps").unwrap_or(1e-5), !has(op, "rms"));
        let ty = flat_type(shape, t);
        let row_ty = format!("memref<{n}x{f}>");
        let mut kernels = Vec::new();
        if self.gpu && (dw.is_some() || db.is_some()) {
            let mut k = Kernel::new();
            let zero = k.float(0.0, t);
            let j = k.open("%begin", "%end");
            for p in [dw, db].into_iter().flatten() {
                k.store(&zero, &format!("%b{p}"), &j, &row_ty);
            }
            k.close();
            kernels.extend(self.one(k, specs, n, 1));
        }
        let mut k = Kernel::rows(self.gpu);
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let count = k.float(n as f64, t);
        if !self.gpu {
            for p in [dw, db].into_iter().flatten() {
                let j = k.open("%c0", &nc);
                k.store(&zero, &format!("%b{p}"), &j, &row_ty);
                k.close();
            }
        }
        let r = if self.gpu {
            k.open("%begin", "%end")
        } else {
            let rc = k.index(rows);
            k.open("%c0", &rc)
        };
        let base = k.mul(&r, &nc);
        let (mean, rstd) = Self::row_stats(&mut k, &base, n, t, center, eps, &ty, "%b1");
        // xhat_j = (x_j - mean) rstd; dxhat_j = g_j w_j
        let xhat = |k: &mut Kernel, j: &str| -> String {
            let p = k.add(&base, j);
            let x = k.load("%b1", &p, &ty);
            let d = k.fop("subf", &x, &mean, t);
            k.fop("mulf", &d, &rstd, t)
        };
        let dxhat = |k: &mut Kernel, j: &str| -> String {
            let p = k.add(&base, j);
            let g = k.load("%b0", &p, &ty);
            match w {
                Some(w) => {
                    let wv = k.load(&format!("%b{w}"), j, &row_ty);
                    k.fop("mulf", &g, &wv, t)
                }
                None => g,
            }
        };
        // mean(dxhat) and mean(dxhat * xhat)
        let (j, acc, s1) = k.open_cols_reduce(&nc, &zero, f);
        let d = dxhat(&mut k, &j);
        let next = k.val(&format!("arith.addf {acc}, {d} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let s1 = k.warp_all(&s1, "addf", t);
        let (j, acc, s2) = k.open_cols_reduce(&nc, &zero, f);
        let d = dxhat(&mut k, &j);
        let xh = xhat(&mut k, &j);
        let dx_xh = k.fop("mulf", &d, &xh, t);
        let next = k.val(&format!("arith.addf {acc}, {dx_xh} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let s2 = k.warp_all(&s2, "addf", t);
        let m1 = if center { k.fop("divf", &s1, &count, t) } else { zero.clone() };
        let m2 = k.fop("divf", &s2, &count, t);
        let j = k.open_cols(&nc);
        let d = dxhat(&mut k, &j);
        let xh = xhat(&mut k, &j);
        let a = k.fop("subf", &d, &m1, t);
        let b = k.fop("mulf", &xh, &m2, t);
        let c = k.fop("subf", &a, &b, t);
        let v = k.fop("mulf", &c, &rstd, t);
        let p = k.add(&base, &j);
        k.store(&v, &format!("%b{dx}"), &p, &ty);
        let g = k.load("%b0", &p, &ty);
        let gpu = self.gpu;
        let add_into = |k: &mut Kernel, p: usize, v: &str| {
            if gpu {
                k.val(&format!("memref.atomic_rmw addf {v}, %b{p}[{j}] : ({f}, {row_ty}) -> {f}"));
            } else {
                let cur = k.load(&format!("%b{p}"), &j, &row_ty);
                let s = k.fop("addf", &cur, v, t);
                k.store(&s, &format!("%b{p}"), &j, &row_ty);
            }
        };
        if let Some(dw) = dw {
            let gx = k.fop("mulf", &g, &xh, t);
            add_into(&mut k, dw, &gx);
        }
        if let Some(db) = db {
            add_into(&mut k, db, &g);
        }
        k.close();
        k.close();
        let (work, cost) = if self.gpu { (rows, n * 20) } else { (1, rows * n * 20) };
        kernels.extend(self.one(k, specs, work, cost));
        kernels
    }

    /// Attention, fused: FlashAttention's online softmax, one query row per
    /// thread (the GPU stages key/value tiles through shared memory, see
    /// `gpu_attention`). Head sizes over [`ONLINE_HEAD`] (and empty
    /// operands) take the two-pass row kernel instead.
    fn attention(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let a = AttentionShape::of(op, specs);
        if [a.l, a.s, a.d, a.dv].contains(&0) || a.d > ONLINE_HEAD || a.dv > ONLINE_HEAD {
            return self.attention_rows(op, specs);
        }
        if self.gpu {
            return self.gpu_attention(&a, specs);
        }
        let t = a.t;
        let (tq, tk, tv, to) = (
            flat_type(&specs[0].0, t),
            flat_type(&specs[1].0, t),
            flat_type(&specs[2].0, t),
            flat_type(&specs[3].0, t),
        );
        let mut k = Kernel::new();
        let (lc, sn) = (k.index(a.l), k.index(a.s));
        let w = k.open("%begin", "%end");
        let b = k.val(&format!("arith.divui {w}, {lc} : index"));
        let i = k.val(&format!("arith.remui {w}, {lc} : index"));
        let query = k.mad(&w, a.d, "%c0");
        let q = a.scaled_query(&mut k, "%b0", &query, &tq);
        // Causal: key j is visible to query i when j <= i.
        let keys = if a.causal {
            let i1 = k.add(&i, "%c1");
            k.val(&format!("arith.minui {i1}, {sn} : index"))
        } else {
            sn.clone()
        };
        let kb = k.mad(&b, a.s * a.d, "%c0");
        let vb = k.mad(&b, a.s * a.dv, "%c0");
        let init = a.initial_state(&mut k);
        let rows = |k: &mut Kernel, j: &str| (k.mad(j, a.d, &kb), k.mad(j, a.dv, &vb));
        let state = a.online_keys(&mut k, &q, &init, &keys, ("%b1", &tk), ("%b2", &tv), rows);
        let out = k.mad(&w, a.dv, "%c0");
        a.store_output(&mut k, &state, "%b3", &out, &to);
        k.close();
        self.one(k, specs, a.batch * a.l, 2 * a.s * (a.d + a.dv) + 8 * a.s)
    }

    /// One query row per work item: scores into a stack row, softmax, then
    /// the weighted sum of values (head sizes too large to keep a row's
    /// query and output in registers).
    fn attention_rows(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (q, kv, t) = (&specs[0].0, &specs[1].0, specs[0].1);
        let f = t.mlir();
        let rank = q.len();
        let (l, d) = (q[rank - 2], q[rank - 1]);
        let s_len = kv[rank - 2];
        let dv = specs[2].0[rank - 1];
        let batch: usize = q[..rank - 2].iter().product();
        let scale = float_attr(op, "scale").unwrap_or(1.0 / (d as f64).sqrt());
        let causal = has(op, "causal");
        let (tq, tk, tv, to) =
            (flat_type(q, t), flat_type(kv, t), flat_type(&specs[2].0, t), flat_type(&specs[3].0, t));
        let row_ty = format!("memref<{s_len}x{f}>");
        let mut k = Kernel::new();
        let scores = k.val(&format!("memref.alloca() : {row_ty}"));
        let out_ty = format!("memref<{dv}x{f}>");
        let out_row = k.val(&format!("memref.alloca() : {out_ty}"));
        let zero = k.float(0.0, t);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let sc = k.float(scale, t);
        let (lc, dc, sn, dvc) = (k.index(l), k.index(d), k.index(s_len), k.index(dv));
        let w = k.open("%begin", "%end");
        let b = k.val(&format!("arith.divui {w}, {lc} : index"));
        let i = k.val(&format!("arith.remui {w}, {lc} : index"));
        let qb = k.mul(&w, &dc);
        let kb = k.mad(&b, s_len * d, "%c0");
        let vb = k.mad(&b, s_len * dv, "%c0");
        // Causal: key j is visible to query i when j <= i; the loops stop
        // there instead of computing scores that the mask would discard.
        let jn = if causal {
            let i1 = k.add(&i, "%c1");
            k.val(&format!("arith.minui {i1}, {sn} : index"))
        } else {
            sn.clone()
        };
        let (j, mx, m) = k.open_reduce("%c0", &jn, &ninf, f);
        let (x, acc, dot) = k.open_reduce("%c0", &dc, &zero, f);
        let qi = k.add(&qb, &x);
        let qv = k.load("%b0", &qi, &tq);
        let kr = k.mad(&j, d, &kb);
        let ki = k.add(&kr, &x);
        let kv_ = k.load("%b1", &ki, &tk);
        let pr = k.val(&format!("arith.mulf {qv}, {kv_} fastmath<fast> : {f}"));
        let next = k.val(&format!("arith.addf {acc}, {pr} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let sv = k.fop("mulf", &dot, &sc, t);
        k.store(&sv, &scores, &j, &row_ty);
        let nm = k.val(&format!("arith.maximumf {mx}, {sv} : {f}"));
        k.close_with(&nm, f);
        let (j, acc, sum) = k.open_reduce("%c0", &jn, &zero, f);
        let sv = k.load(&scores, &j, &row_ty);
        let dd = k.fop("subf", &sv, &m, t);
        let e = k.val(&format!("math.exp {dd} : {f}"));
        k.store(&e, &scores, &j, &row_ty);
        let next = k.fop("addf", &acc, &e, t);
        k.close_with(&next, f);
        // out[x] = sum_j p_j V[j, x] / sum, accumulated a key at a time over
        // the contiguous row of V (each x still sums j in order).
        let ob = k.mul(&w, &dvc);
        let x = k.open("%c0", &dvc);
        k.store(&zero, &out_row, &x, &out_ty);
        k.close();
        let j = k.open("%c0", &jn);
        let p = k.load(&scores, &j, &row_ty);
        let vr = k.mad(&j, dv, &vb);
        let x = k.open("%c0", &dvc);
        let vi = k.add(&vr, &x);
        let v = k.load("%b2", &vi, &tv);
        let cur = k.load(&out_row, &x, &out_ty);
        let pv = k.fop("mulf", &p, &v, t);
        let next = k.fop("addf", &cur, &pv, t);
        k.store(&next, &out_row, &x, &out_ty);
        k.close();
        k.close();
        let x = k.open("%c0", &dvc);
        let o = k.load(&out_row, &x, &out_ty);
        let r = k.fop("divf", &o, &sum, t);
        let oi = k.add(&ob, &x);
        k.store(&r, "%b3", &oi, &to);
        k.close();
        k.close();
        self.one(k, specs, batch * l, 2 * s_len * (d + dv) + 8 * s_len)
    }

    fn gather(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], backward: bool) -> Kernels {
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        // The table is the input (forward) or the output (backward).
        let table = if backward { &specs[2] } else { &specs[0] };
        let (outer, n, inner) = lines(&table.0, axis);
        let (idx, it) = (&specs[1].0, specs[1].1);
        let count = numel(idx);
        let (tt, ti, tg) = (
            flat_type(&table.0, table.1),
            flat_type(idx, it),
            flat_type(&specs[if backward { 0 } else { 2 }].0, table.1),
        );
        let lt = it.mlir();
        let mut k = Kernel::new();
        let check = IndexCheck {
            operand: 1,
            dtype: runtime_dtype(it).unwrap_or(artifact::DType::I64),
            count,
            bound: n as i64,
            allowed: None,
            what: "index".into(),
        };
        let kernels = if backward {
            // Column (o, j) of the table per work item: zero it, then add
            // every slice whose index names a row.
            let zero = k.float(0.0, table.1);
            let (ic, nc, cc) = (k.index(inner), k.index(n), k.index(count));
            let w = k.open("%begin", "%end");
            let o = k.val(&format!("arith.divui {w}, {ic} : index"));
            let j = k.val(&format!("arith.remui {w}, {ic} : index"));
            let r = k.open("%c0", &nc);
            let row = k.mad(&o, n, &r);
            let p = k.mad(&row, inner, &j);
            k.store(&zero, "%b2", &p, &tt);
            k.close();
            let c = k.open("%c0", &cc);
            let iv = k.load("%b1", &c, &ti);
            let ix = k.val(&format!("arith.index_cast {iv} : {lt} to index"));
            let row = k.mad(&o, n, &ix);
            let p = k.mad(&row, inner, &j);
            let src_row = k.mad(&o, count, &c);
            let s = k.mad(&src_row, inner, &j);
            let gv = k.load("%b0", &s, &tg);
            let cur = k.load("%b2", &p, &tt);
            let sum = k.fop("addf", &cur, &gv, table.1);
            k.store(&sum, "%b2", &p, &tt);
            k.close();
            k.close();
            let _ = nc;
            self.one(k, specs, outer * inner, 2 * (n + count))
        } else {
            let (ic, cc) = (k.index(inner), k.index(count));
            let w = k.open("%begin", "%end");
            let o = k.val(&format!("arith.divui {w}, {cc} : index"));
            let c = k.val(&format!("arith.remui {w}, {cc} : index"));
            let iv = k.load("%b1", &c, &ti);
            let ix = k.val(&format!("arith.index_cast {iv} : {lt} to index"));
            let row = k.mad(&o, n, &ix);
            let src = k.mul(&row, &ic);
            let dst = k.mul(&w, &ic);
            let j = k.open("%c0", &ic);
            let s = k.add(&src, &j);
            let v = k.load("%b0", &s, &tt);
            let dd = k.add(&dst, &j);
            k.store(&v, "%b2", &dd, &tg);
            k.close();
            k.close();
            self.one(k, specs, outer * count, 2 * inner)
        };
        kernels.into_iter().map(|(a, b, c, d, _)| (a, b, c, d, vec![check.clone()])).collect()
    }

    /// Forward: out[i] = in[start + i stride]; backward: every element of
    /// the (large) output reads its window element or writes zero.
    fn slice(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let backward = has(op, "backward");
        let start: Vec<usize> = i64_array(op, "start").unwrap_or_default().iter().map(|&v| v as usize).collect();
        let step: Vec<usize> = i64_array(op, "strides").unwrap_or_default().iter().map(|&v| v as usize).collect();
        let (ins, outs) = (&specs[0], &specs[1]);
        let (ti, to) = (flat_type(&ins.0, ins.1), flat_type(&outs.0, outs.1));
        let mut k = Kernel::new();
        let o = k.open("%begin", "%end");
        let c = k.unravel(&o, &outs.0);
        if backward {
            // coordinate c[d] is in the window iff c >= start, (c - start) % step == 0, (c - start) / step < size
            let zero = k.float(0.0, ins.1);
            let mut inside = k.val("arith.constant true");
            let mut win = Vec::new();
            for d in 0..c.len() {
                let s = k.index(start[d]);
                let ge = k.cmpi("uge", &c[d], &s);
                let off = k.val(&format!("arith.subi {}, {s} : index", c[d]));
                let st = k.index(step[d]);
                let q = k.val(&format!("arith.divui {off}, {st} : index"));
                let r = k.val(&format!("arith.remui {off}, {st} : index"));
                let exact = k.cmpi("eq", &r, "%c0");
                let sz = k.index(ins.0[d]);
                let lt = k.cmpi("ult", &q, &sz);
                inside = k.and(&inside, &ge);
                inside = k.and(&inside, &exact);
                inside = k.and(&inside, &lt);
                win.push(q);
            }
            // clamp the window coordinates for the (masked) load
            let safe: Vec<String> =
                win.iter().map(|q| k.val(&format!("arith.select {inside}, {q}, %c0 : index"))).collect();
            let i = k.ravel(&safe, &row_major_strides(&ins.0));
            let v = k.load("%b0", &i, &ti);
            let r = k.val(&format!("arith.select {inside}, {v}, {zero} : {}", ins.1.mlir()));
            k.store(&r, "%b1", &o, &to);
        } else {
            let strides = row_major_strides(&ins.0);
            let mut acc = "%c0".to_string();
            for d in 0..c.len() {
                let sc = k.index(start[d]);
                let x = k.mad(&c[d], step[d], &sc);
                acc = k.mad(&x, strides[d], &acc);
            }
            let v = k.load("%b0", &acc, &ti);
            k.store(&v, "%b1", &o, &to);
        }
        k.close();
        let n = numel(&outs.0);
        self.one(k, specs, n, 8 * outs.0.len())
    }

    /// One kernel per input, copying it to its place along `axis`.
    fn concat(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        let out = specs.len() - 1;
        let out_strides = row_major_strides(&specs[out].0);
        let mut offset = 0;
        let mut all = Vec::new();
        for (n, (shape, t)) in specs[..out].iter().enumerate() {
            let mut k = Kernel::new();
            let i = k.open("%begin", "%end");
            let mut c = k.unravel(&i, shape);
            let oc = k.index(offset);
            c[axis] = k.add(&c[axis], &oc);
            let o = k.ravel(&c, &out_strides);
            let v = k.load("%b0", &i, &flat_type(shape, *t));
            k.store(&v, "%b1", &o, &flat_type(&specs[out].0, *t));
            k.close();
            let pair = [specs[n].clone(), specs[out].clone()];
            self.finish(k, &pair);
            all.push((self.last(), numel(shape).max(1) as u64, 4 * shape.len() as u64, vec![n, out], vec![]));
            offset += shape[axis];
        }
        all
    }

    fn argmax(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        let (shape, t) = (&specs[0].0, specs[0].1);
        let (outer, n, inner) = lines(shape, axis);
        let (f, ty) = (t.mlir(), flat_type(shape, t));
        let mut k = Kernel::new();
        let nc = k.index(n);
        let l = k.open("%begin", "%end");
        let base = k.line_base(&l, inner, n);
        let ninf = k.float(f64::NEG_INFINITY, t);
        k.n += 1;
        let (j, bv, bi, r) = (format!("%i{}", k.n), format!("%bv{}", k.n), format!("%bi{}", k.n), format!("%r{}", k.n));
        k.line(&format!(
            "{r}:2 = scf.for {j} = %c0 to {nc} step %c1 iter_args({bv} = {ninf}, {bi} = %c0) -> ({f}, index) {{"
        ));
        k.depth += 1;
        let p = k.at(&base, &j, inner);
        let v = k.load("%b0", &p, &ty);
        let better = k.val(&format!("arith.cmpf ogt, {v}, {bv} : {f}"));
        let nb = k.val(&format!("arith.select {better}, {v}, {bv} : {f}"));
        let ni = k.val(&format!("arith.select {better}, {j}, {bi} : index"));
        k.line(&format!("scf.yield {nb}, {ni} : {f}, index"));
        k.depth -= 1;
        k.line("}");
        let iv = k.val(&format!("arith.index_cast {r}#1 : index to i64"));
        k.store(&iv, "%b1", &l, &flat_type(&specs[1].0, specs[1].1));
        k.close();
        self.one(k, specs, outer * inner, 4 * n)
    }

    fn mse_loss(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (shape, t) = (&specs[0].0, specs[0].1);
        let (f, ty) = (t.mlir(), flat_type(shape, t));
        let n = numel(shape);
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let (i, acc, s) = k.open_reduce("%c0", &nc, &zero, f);
        let a = k.load("%b0", &i, &ty);
        let b = k.load("%b1", &i, &ty);
        let d = k.fop("subf", &a, &b, t);
        let d2 = k.fop("mulf", &d, &d, t);
        let next = k.val(&format!("arith.addf {acc}, {d2} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let v = if int_attr(op, "reduction") == Some(1) {
            s
        } else {
            let c = k.float(n as f64, t);
            k.fop("divf", &s, &c, t)
        };
        k.store(&v, "%b2", "%c0", &flat_type(&specs[2].0, t));
        self.one(k, specs, 1, 4 * n)
    }

    /// Philox4x32-10 per group of four elements, as `hl.dropout` defines.
    fn dropout(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (shape, t) = (&specs[0].0, specs[0].1);
        let (f, ty) = (t.mlir(), flat_type(shape, t));
        let p = float_attr(op, "p").unwrap_or(0.0);
        let stream = int_attr(op, "stream").unwrap_or(0) as u64;
        // keep iff (word >> 8) / 2^24 >= p, i.e. (word >> 8) >= ceil(p 2^24)
        let threshold = (p * 16_777_216.0).ceil() as u64;
        let n = numel(shape);
        let mut k = Kernel::new();
        let c = |k: &mut Kernel, v: u64, t: &str| k.val(&format!("arith.constant {v} : {t}"));
        let seed = k.load("%b1", "%c0", "memref<1xi64>");
        let offset = k.load("%b2", "%c0", "memref<1xi64>");
        let c32 = c(&mut k, 32, "i64");
        let k0 = k.val(&format!("arith.trunci {seed} : i64 to i32"));
        let sh = k.val(&format!("arith.shrui {seed}, {c32} : i64"));
        let k1 = k.val(&format!("arith.trunci {sh} : i64 to i32"));
        let scale = k.float(1.0 / (1.0 - p), t);
        let zero = k.float(0.0, t);
        let (s_lo, s_hi) = (c(&mut k, stream & 0xffff_ffff, "i32"), c(&mut k, stream >> 32, "i32"));
        let (m0, m1) = (c(&mut k, 0xD251_1F53, "i64"), c(&mut k, 0xCD9E_8D57, "i64"));
        let (w0, w1) = (c(&mut k, 0x9E37_79B9, "i32"), c(&mut k, 0xBB67_AE85, "i32"));
        let thr = c(&mut k, threshold, "i32");
        let c8 = c(&mut k, 8, "i32");
        let four = k.index(4);
        let g = k.open("%begin", "%end");
        let gi = k.val(&format!("arith.index_cast {g} : index to i64"));
        let block = k.val(&format!("arith.addi {offset}, {gi} : i64"));
        let b_lo = k.val(&format!("arith.trunci {block} : i64 to i32"));
        let bsh = k.val(&format!("arith.shrui {block}, {c32} : i64"));
        let b_hi = k.val(&format!("arith.trunci {bsh} : i64 to i32"));
        let mut ctr = [b_lo, b_hi, s_lo.clone(), s_hi.clone()];
        let (mut ka, mut kb) = (k0.clone(), k1.clone());
        for round in 0..10 {
            if round > 0 {
                ka = k.val(&format!("arith.addi {ka}, {w0} : i32"));
                kb = k.val(&format!("arith.addi {kb}, {w1} : i32"));
            }
            let mulhilo = |k: &mut Kernel, m: &str, x: &str| {
                let x64 = k.val(&format!("arith.extui {x} : i32 to i64"));
                let prod = k.val(&format!("arith.muli {m}, {x64} : i64"));
                let hi64 = k.val(&format!("arith.shrui {prod}, {c32} : i64"));
                let hi = k.val(&format!("arith.trunci {hi64} : i64 to i32"));
                let lo = k.val(&format!("arith.trunci {prod} : i64 to i32"));
                (hi, lo)
            };
            let (hi0, lo0) = mulhilo(&mut k, &m0, &ctr[0]);
            let (hi1, lo1) = mulhilo(&mut k, &m1, &ctr[2]);
            let x0 = k.val(&format!("arith.xori {hi1}, {} : i32", ctr[1]));
            let x0 = k.val(&format!("arith.xori {x0}, {ka} : i32"));
            let x2 = k.val(&format!("arith.xori {hi0}, {} : i32", ctr[3]));
            let x2 = k.val(&format!("arith.xori {x2}, {kb} : i32"));
            ctr = [x0, lo1, x2, lo0];
        }
        let base = k.mul(&g, &four);
        for (word, value) in ctr.iter().enumerate() {
            let wc = k.index(word);
            let i = k.add(&base, &wc);
            let nc = k.index(n);
            let inside = k.cmpi("ult", &i, &nc);
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            let top = k.val(&format!("arith.shrui {value}, {c8} : i32"));
            let keep = k.val(&format!("arith.cmpi uge, {top}, {thr} : i32"));
            let x = k.load("%b0", &i, &ty);
            let y = k.fop("mulf", &x, &scale, t);
            let r = k.val(&format!("arith.select {keep}, {y}, {zero} : {f}"));
            k.store(&r, "%b3", &i, &ty);
            k.depth -= 1;
            k.line("}");
        }
        k.close();
        self.one(k, specs, n.div_ceil(4), 120)
    }

    /// Direct convolution and its two gradients, one output element per
    /// work item.
    fn conv(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], which: &str) -> Kernels {
        let (cd, hd, wd) = image_dims(op);
        let (stride, pad, dil) = (pair(op, "stride", 1), pair(op, "padding", 0), pair(op, "dilation", 1));
        let groups = int_attr(op, "groups").unwrap_or(1) as usize;
        // x: input image, w: weight [O, C/g, KH, KW], y: output image
        let (x, w, y) = match which {
            "forward" => (0, 1, specs.len() - 1),
            "input" => (2, 1, 0),
            _ => (1, 2, 0),
        };
        let (xs, ws, ys, t) = (&specs[x].0, &specs[w].0, &specs[y].0, specs[0].1);
        let (xstr, wstr, ystr) = (row_major_strides(xs), row_major_strides(ws), row_major_strides(ys));
        let (cg, og) = (ws[1], ws[0] / groups);
        let (kh, kw) = (ws[2], ws[3]);
        let (tx, tw, ty) = (flat_type(xs, t), flat_type(ws, t), flat_type(ys, t));
        let mut k = Kernel::new();
        let e = k.open("%begin", "%end");
        let image_at = |k: &mut Kernel, strides: &[usize], n: &str, c: &str, h: &str, wv: &str| -> String {
            let mut coords = vec![String::new(); 4];
            coords[0] = n.into();
            coords[cd] = c.into();
            coords[hd] = h.into();
            coords[wd] = wv.into();
            k.ravel(&coords, strides)
        };
        let limits = [xs[hd], xs[wd]];
        let tap = |k: &mut Kernel, o: &str, kx: &str, axis: usize| {
            window_tap(k, o, kx, stride[axis], dil[axis], pad[axis], limits[axis])
        };
        let (cost, work) = match which {
            "forward" => {
                let c = k.unravel(&e, ys);
                let (n, o, oh, ow) = (&c[0], &c[cd], &c[hd], &c[wd]);
                let ogc = k.index(og);
                let g = k.val(&format!("arith.divui {o}, {ogc} : index"));
                let cgc = k.index(cg);
                let cbase = k.mul(&g, &cgc);
                let (khc, kwc) = (k.index(kh), k.index(kw));
                let s0 = k.masked_sum3([&cgc, &khc, &kwc], t, |k, [ci, a, b]| {
                    let (okh, h) = tap(k, oh, &a, 0);
                    let (okw, wv) = tap(k, ow, &b, 1);
                    let ok = k.and(&okh, &okw);
                    let chan = k.add(&cbase, &ci);
                    let xi = image_at(k, &xstr, n, &chan, &h, &wv);
                    let xv = k.load(&format!("%b{x}"), &xi, &tx);
                    let wi = k.ravel(&[o.clone(), ci, a, b], &wstr);
                    let wvv = k.load(&format!("%b{w}"), &wi, &tw);
                    (ok, xv, wvv)
                });
                let mut v = s0;
                if specs.len() == 4 {
                    let bv = k.load("%b2", o, &flat_type(&specs[2].0, t));
                    v = k.fop("addf", &v, &bv, t);
                }
                k.store(&v, &format!("%b{y}"), &e, &ty);
                (cg * kh * kw * 4, numel(ys))
            }
            "input" => {
                // dx[n, c, h, w] = sum over o in c's group, taps with
                // h = oh s - p + a d: dy[n, o, oh, ow] w[o, c % cg, a, b]
                let c = k.unravel(&e, xs);
                let (n, ch, h, wv) = (&c[0], &c[cd], &c[hd], &c[wd]);
                let cgc = k.index(cg);
                let g = k.val(&format!("arith.divui {ch}, {cgc} : index"));
                let cl = k.val(&format!("arith.remui {ch}, {cgc} : index"));
                let ogc = k.index(og);
                let obase = k.mul(&g, &ogc);
                let (khc, kwc) = (k.index(kh), k.index(kw));
                // oh = (h + p - a d) / s when exact and in range
                let axis_ok = |k: &mut Kernel, pos: &str, kx: &str, axis: usize, lim: usize| -> (String, String) {
                    let pc = k.index(pad[axis]);
                    let hp = k.add(pos, &pc);
                    let dc = k.index(dil[axis]);
                    let ad = k.mul(kx, &dc);
                    let ge = k.cmpi("uge", &hp, &ad);
                    let num = k.val(&format!("arith.subi {hp}, {ad} : index"));
                    let s = k.index(stride[axis]);
                    let q = k.val(&format!("arith.divui {num}, {s} : index"));
                    let r = k.val(&format!("arith.remui {num}, {s} : index"));
                    let exact = k.cmpi("eq", &r, "%c0");
                    let l = k.index(lim);
                    let lt = k.cmpi("ult", &q, &l);
                    let ok = k.and(&ge, &exact);
                    let ok = k.and(&ok, &lt);
                    let safe = k.val(&format!("arith.select {ok}, {q}, %c0 : index"));
                    (ok, safe)
                };
                let s0 = k.masked_sum3([&ogc, &khc, &kwc], t, |k, [oi, a, b]| {
                    let (okh, oh) = axis_ok(k, h, &a, 0, ys[hd]);
                    let (okw, ow) = axis_ok(k, wv, &b, 1, ys[wd]);
                    let ok = k.and(&okh, &okw);
                    let o = k.add(&obase, &oi);
                    let yi = image_at(k, &ystr, n, &o, &oh, &ow);
                    let gv = k.load(&format!("%b{y}"), &yi, &ty);
                    let wi = k.ravel(&[o, cl.clone(), a, b], &wstr);
                    let wvv = k.load(&format!("%b{w}"), &wi, &tw);
                    (ok, gv, wvv)
                });
                k.store(&s0, &format!("%b{x}"), &e, &tx);
                (og * kh * kw * 12, numel(xs))
            }
            _ => {
                // dw[o, c, a, b] = sum over n, oh, ow: dy[n, o, oh, ow] x[n, g cg + c, h, w]
                let c = k.unravel(&e, ws);
                let (o, ci, a, b) = (&c[0], &c[1], &c[2], &c[3]);
                let ogc = k.index(og);
                let g = k.val(&format!("arith.divui {o}, {ogc} : index"));
                let chan = k.mad(&g, cg, ci);
                let (nc, ohc, owc) = (k.index(ys[0]), k.index(ys[hd]), k.index(ys[wd]));
                let s0 = k.masked_sum3([&nc, &ohc, &owc], t, |k, [n, oh, ow]| {
                    let (okh, h) = tap(k, &oh, a, 0);
                    let (okw, wv) = tap(k, &ow, b, 1);
                    let ok = k.and(&okh, &okw);
                    let xi = image_at(k, &xstr, &n, &chan, &h, &wv);
                    let xv = k.load(&format!("%b{x}"), &xi, &tx);
                    let yi = image_at(k, &ystr, &n, o, &oh, &ow);
                    let gv = k.load(&format!("%b{y}"), &yi, &ty);
                    (ok, xv, gv)
                });
                k.store(&s0, "%b2", &e, &tw);
                (ys[0] * ys[hd] * ys[wd] * 4, numel(ws))
            }
        };
        k.close();
        self.one(k, specs, work, cost)
    }

    /// Max or average pooling and its gradient, one element per work item.
    fn pool(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], backward: bool) -> Kernels {
        let (cd, hd, wd) = image_dims(op);
        let _ = cd;
        let (kern, stride, pad) = (pair(op, "kernel", 1), pair(op, "stride", 1), pair(op, "padding", 0));
        let max = int_attr(op, "kind").unwrap_or(0) == 0;
        let (x, y) = if backward { (1, 0) } else { (0, 1) };
        let (xs, ys, t) = (&specs[x].0, &specs[y].0, specs[0].1);
        let f = t.mlir();
        let (tx, ty) = (flat_type(xs, t), flat_type(ys, t));
        let (xstr, ystr) = (row_major_strides(xs), row_major_strides(ys));
        let area = (kern[0] * kern[1]) as f64;
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let (k0, k1) = (k.index(kern[0]), k.index(kern[1]));
        let limits = [xs[hd], xs[wd]];
        let tap = |k: &mut Kernel, o: &str, a: &str, axis: usize| {
            window_tap(k, o, a, stride[axis], 1, pad[axis], limits[axis])
        };
        let with = |c: &[String], h: &str, w: &str| -> Vec<String> {
            let mut v = c.to_vec();
            v[hd] = h.into();
            v[wd] = w.into();
            v
        };
        let e = k.open("%begin", "%end");
        if !backward {
            let c = k.unravel(&e, ys);
            let init = if max { &ninf } else { &zero };
            let (a, acc0, s0) = k.open_reduce("%c0", &k0, init, f);
            let (b, acc1, s1) = k.open_reduce("%c0", &k1, &acc0, f);
            let (okh, h) = tap(&mut k, &c[hd], &a, 0);
            let (okw, w) = tap(&mut k, &c[wd], &b, 1);
            let ok = k.and(&okh, &okw);
            let xi = k.ravel(&with(&c, &h, &w), &xstr);
            let xv = k.load(&format!("%b{x}"), &xi, &tx);
            let next = if max {
                let m = k.val(&format!("arith.maximumf {acc1}, {xv} : {f}"));
                k.val(&format!("arith.select {ok}, {m}, {acc1} : {f}"))
            } else {
                let s = k.fop("addf", &acc1, &xv, t);
                k.val(&format!("arith.select {ok}, {s}, {acc1} : {f}"))
            };
            k.close_with(&next, f);
            k.close_with(&s1, f);
            let v = if max {
                s0
            } else {
                let ar = k.float(area, t);
                k.fop("divf", &s0, &ar, t)
            };
            k.store(&v, &format!("%b{y}"), &e, &ty);
        } else {
            // dx at (h, w): sum over windows (oh, ow) containing it of dy,
            // for max only where (h, w) is the window's first maximum.
            let c = k.unravel(&e, xs);
            let (ohc, owc) = (k.index(ys[hd]), k.index(ys[wd]));
            let (oh, acc0, s0) = k.open_reduce("%c0", &ohc, &zero, f);
            let (ow, acc1, s1) = k.open_reduce("%c0", &owc, &acc0, f);
            // is (h, w) inside window (oh, ow)? a = h + p - oh s in [0, k)
            let rel = |k: &mut Kernel, pos: &str, o: &str, axis: usize| -> String {
                let pc = k.index(pad[axis]);
                let hp = k.add(pos, &pc);
                let s = k.index(stride[axis]);
                let os = k.mul(o, &s);
                let ge = k.cmpi("uge", &hp, &os);
                let a = k.val(&format!("arith.subi {hp}, {os} : index"));
                let kk = k.index(kern[axis]);
                let lt = k.cmpi("ult", &a, &kk);
                k.and(&ge, &lt)
            };
            let inh = rel(&mut k, &c[hd], &oh, 0);
            let inw = rel(&mut k, &c[wd], &ow, 1);
            let inside = k.and(&inh, &inw);
            let yc = with(&c, &oh, &ow);
            let yi = k.ravel(&yc, &ystr);
            let gv = k.load(&format!("%b{y}"), &yi, &ty);
            let contrib = if max {
                // the window's first maximum, in row-major order
                let here = k.ravel(&c, &xstr);
                k.n += 1;
                let (a, best, at, r) =
                    (format!("%i{}", k.n), format!("%m{}", k.n), format!("%p{}", k.n), format!("%r{}", k.n));
                let big = k.index(usize::MAX >> 1);
                k.line(&format!("{r}:2 = scf.for {a} = %c0 to {k0} step %c1 iter_args({best} = {ninf}, {at} = {big}) -> ({f}, index) {{"));
                k.depth += 1;
                let (b, best1, at1, r1) = {
                    k.n += 1;
                    (format!("%i{}", k.n), format!("%m{}", k.n), format!("%p{}", k.n), format!("%r{}", k.n))
                };
                k.line(&format!("{r1}:2 = scf.for {b} = %c0 to {k1} step %c1 iter_args({best1} = {best}, {at1} = {at}) -> ({f}, index) {{"));
                k.depth += 1;
                let (okh, h) = tap(&mut k, &oh, &a, 0);
                let (okw, w) = tap(&mut k, &ow, &b, 1);
                let ok = k.and(&okh, &okw);
                let xi = k.ravel(&with(&c, &h, &w), &xstr);
                let xv = k.load(&format!("%b{x}"), &xi, &tx);
                let gt = k.val(&format!("arith.cmpf ogt, {xv}, {best1} : {f}"));
                let better = k.and(&ok, &gt);
                let nb = k.val(&format!("arith.select {better}, {xv}, {best1} : {f}"));
                let np = k.val(&format!("arith.select {better}, {xi}, {at1} : index"));
                k.line(&format!("scf.yield {nb}, {np} : {f}, index"));
                k.depth -= 1;
                k.line("}");
                k.line(&format!("scf.yield {r1}#0, {r1}#1 : {f}, index"));
                k.depth -= 1;
                k.line("}");
                let is_max = k.cmpi("eq", &format!("{r}#1"), &here);
                let take = k.and(&inside, &is_max);
                k.val(&format!("arith.select {take}, {gv}, {zero} : {f}"))
            } else {
                let ar = k.float(area, t);
                let share = k.fop("divf", &gv, &ar, t);
                k.val(&format!("arith.select {inside}, {share}, {zero} : {f}"))
            };
            let next = k.fop("addf", &acc1, &contrib, t);
            k.close_with(&next, f);
            k.close_with(&s1, f);
            k.store(&s0, "%b2", &e, &tx);
        }
        k.close();
        let work = if backward { numel(xs) } else { numel(ys) };
        let cost = if backward { ys[hd] * ys[wd] * (4 + kern[0] * kern[1] * 6) } else { kern[0] * kern[1] * 6 };
        self.one(k, specs, work, cost)
    }
}
