//! Kernel generation: a planned `ll` module becomes machine code for a
//! target and the manifest the runtime loads (`aicf_runtime::artifact`).
//!
//! ```text
//!  planned ll module
//!     | the driver (this file): per function, its arguments, constants and
//!     | kernel calls; per ll op, the generator of its family (ops/*.rs)
//!     v
//!  kernels module: one func.func per distinct kernel, in scf/arith/math/
//!     | memref/vector over flat (1-D) buffers, rows [begin, end) as the
//!     | first two arguments; elementwise bodies moved in from the ll ops
//!     v
//!  target/cpu.rs: lowered to the LLVM dialect, a C entry per kernel,
//!     | clang -O3 -march=native per group of kernels the cache lacks,
//!     | kernels.so linked from cached objects
//!  target/gpu.rs: row kernels inside gpu.func entries (one work item per
//!     | thread, or a warp per row), GEMM and attention written whole for the
//!     | GPU, NVVM to PTX for sm_80 and sm_90a, launch shapes in the manifest
//! ```
//!
//! A kernel is named by its content: identical kernels (another layer of
//! the same shape) are written, lowered and compiled once.
//!
//! Layout: `emit.rs` is the kernel text builder; `ops/` holds one file per
//! op family (elementwise, reduce, softmax and cross-entropy, norm,
//! attention, conv and pooling, data movement) and `ops/gemm/` one per GEMM
//! form (CPU, SIMT, mma.sync, wgmma); `target/` the two targets' builds.

mod emit;
pub(crate) mod ops;
mod prelude;
pub mod target;

pub use ops::flash::AttentionTile;
pub use ops::gemm::mma::TensorCoreTile;
pub use target::Target;
pub use target::cpu::{KernelCache, compile_cpu};
pub use target::gpu::{GpuOptions, compile_gpu, compile_gpu_with, ptx_files, ptxas, validate_ptx};

use prelude::*;

pub(crate) type Result<T> = std::result::Result<T, CompileError>;

/// The fewest scalar operations worth a thread of their own: below this a
/// piece costs less than handing it to a worker (tens of microseconds).
pub(crate) const GRAIN_OPS: u64 = 1 << 20;

pub(crate) fn internal(m: impl Into<String>) -> CompileError {
    CompileError::Internal(m.into())
}

/// A file or directory AICF could not read or write (a full disk, a path
/// it may not write): the user's to fix, not an internal error.
pub(crate) fn io_error(path: &Path, e: impl std::fmt::Display) -> CompileError {
    CompileError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// Every operation named `name` nested anywhere in `op` (`op` included),
/// in pre-order: collected first, so the caller may rewrite them.
pub(crate) fn ops_named(op: MlirOperation, name: &str) -> Vec<MlirOperation> {
    fn collect(op: MlirOperation, name: &str, found: &mut Vec<MlirOperation>) {
        if op_name(op) == name {
            found.push(op);
        }
        for r in 0..unsafe { mlirOperationGetNumRegions(op) } {
            let mut block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)) };
            while !block.ptr.is_null() {
                for inner in ops_of(block) {
                    collect(inner, name, found);
                }
                block = unsafe { mlirBlockGetNextInRegion(block) };
            }
        }
    }
    let mut found = Vec::new();
    collect(op, name, &mut found);
    found
}

/// Rewrites every f32/f64 `math.exp x` (scalar or vector) to `x < lo ? 0 :
/// exp(max(x, lo))`,
/// `lo` the smallest argument with a normal result (-87 for f32, -708 for
/// f64). libmvec's vector `exp` leaves its fast path for all eight lanes when
/// one lane's result would be subnormal or zero, which a causal mask's -inf
/// or a saturated tanh hits on most rows: about ten times slower. NaN stays
/// NaN (`maximumf` propagates it; the comparison is false).
pub(crate) fn guard_exp(ctx: MlirContext, module: MlirOperation) -> Result<()> {
    let exps = ops_named(module, "math.exp");
    for exp in exps {
        let x = unsafe { mlirOperationGetOperand(exp, 0) };
        let ty = unsafe { mlirValueGetType(x) };
        let t = ir::type_text(ty);
        // A scalar, or a vector of them (the blocked attention's rows).
        let (element, lanes) = match t.strip_prefix("vector<").and_then(|v| v.strip_suffix('>')) {
            Some(v) => match v.rsplit_once('x') {
                Some((shape, e)) => (e.to_string(), Some(shape.to_string())),
                None => continue,
            },
            None => (t.clone(), None),
        };
        let lo = match element.as_str() {
            "f32" => "-8.700000e+01",
            "f64" => "-7.080000e+02",
            _ => continue,
        };
        let (lo, zero_text) = match &lanes {
            Some(_) => (format!("dense<{lo}>"), "dense<0.000000e+00>".to_string()),
            None => (lo.to_string(), "0.000000e+00".to_string()),
        };
        let i1 = match &lanes {
            Some(shape) => {
                ir::parse_type(ctx, &format!("vector<{shape}xi1>")).map_err(|e| at(exp, format!("{e:?}")))?
            }
            None => unsafe { mlirIntegerTypeGet(ctx, 1) },
        };
        let loc = ir::op_loc(exp);
        let block = unsafe { mlirOperationGetBlock(exp) };
        let before = |spec: ir::OpSpec<'_>| -> Result<MlirValue> {
            let op = ir::create_op(ctx, loc, &spec).map_err(|e| at(exp, format!("guarding exp: {e:?}")))?;
            unsafe { mlirBlockInsertOwnedOperationBefore(block, exp, op) };
            Ok(unsafe { mlirOperationGetResult(op, 0) })
        };
        let types = [ty];
        let (low_attr, zero_attr) = ([("value", format!("{lo} : {t}"))], [("value", format!("{zero_text} : {t}"))]);
        let constant =
            |attributes| ir::OpSpec { attributes, results: Some(&types), ..ir::OpSpec::new("arith.constant") };
        let low = before(constant(&low_attr))?;
        let zero = before(constant(&zero_attr))?;
        let clamped =
            before(ir::OpSpec { operands: &[x, low], results: Some(&types), ..ir::OpSpec::new("arith.maximumf") })?;
        let e = before(ir::OpSpec { operands: &[clamped], results: Some(&types), ..ir::OpSpec::new("math.exp") })?;
        let i1 = [i1];
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
pub(crate) fn at(op: MlirOperation, message: impl std::fmt::Display) -> CompileError {
    let loc = unsafe { melior::ir::Location::from_raw(ir::op_loc(op)) };
    CompileError::Internal(format!("{loc}: {message}"))
}

/// Valid IR at `op` that the backend has no kernel for yet.
pub(crate) fn unsupported_at(op: MlirOperation, message: impl std::fmt::Display) -> CompileError {
    let loc = unsafe { melior::ir::Location::from_raw(ir::op_loc(op)) };
    CompileError::Unsupported(format!("{loc}: {message}"))
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

/// Generates the planned `module`'s kernels for `target` into `out_dir`
/// (`manifest.json` and the target's kernel files); returns the manifest
/// and how the build went.
pub fn compile(
    ctx: &CompilerContext,
    module: &Module<'_>,
    ir_hash: &str,
    settings: &str,
    out_dir: &Path,
    target: &Target,
) -> Result<(Manifest, KernelStats)> {
    target.check()?;
    let raw = module.as_operation().to_raw();
    let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(raw, 0)) };
    let mut generator = Generator::new(target.info());
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
    std::fs::create_dir_all(out_dir).map_err(|e| match out_dir.ancestors().find(|a| a.exists() && !a.is_dir()) {
        // (create_dir_all says "File exists", naming neither.)
        Some(blocked) => io_error(
            out_dir,
            format!(
                "the artifact is a directory, and {} is {}",
                blocked.display(),
                if blocked.is_file() { "a file" } else { "not a directory (a device, pipe or socket)" }
            ),
        ),
        None => io_error(out_dir, e),
    })?;
    let info = generator.target.clone();
    let (target, mut stats, ptx) = info.build(&generator, ctx, out_dir, &mut functions)?;
    // The kernel files the manifest vouches for: the host library, or every
    // chip's PTX modules.
    let mut files: Vec<String> = ptx.values().flatten().cloned().collect();
    if ptx.is_empty() && out_dir.join("kernels.so").exists() {
        files.push("kernels.so".into());
    }
    files.sort();
    files.dedup();
    let mut manifest = Manifest {
        format: artifact::FORMAT,
        ir_hash: ir_hash.to_string(),
        target,
        symbols,
        constants,
        functions,
        ptx,
        cpu_features: info.cpu_features(),
        files: Default::default(),
        weights: None,
        settings: settings.to_string(),
        checksum: String::new(),
    };
    manifest.seal(out_dir, &files).map_err(|e| io_error(out_dir, e))?;
    let text = serde_json_string(&manifest)?;
    write_atomically(&out_dir.join("manifest.json"), text.as_bytes())?;
    let mut timings = crate::timing::Timings::default();
    timings.add("kernel generation", generate_seconds, format!("{} kernels", generator.kernels));
    timings.extend(std::mem::take(&mut stats.timings));
    stats.timings = timings;
    Ok((manifest, stats))
}

/// The floating-point operations of `ll` op `op` on operands `x`: 2 per
/// multiply-add of a matrix product, a convolution (either gradient) or an
/// attention (half the scores when causal); 0 for the other ops.
fn op_flops(op: MlirOperation, x: &[MlirValue]) -> Result<u64> {
    let name = op_name(op);
    let shape = |i: usize| -> Result<Vec<usize>> { Ok(buf_spec(x[i])?.0) };
    let numel = |s: &[usize]| s.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
    Ok(match name.as_str() {
        "ll.gemm" => {
            let specs = x.iter().map(|v| buf_spec(*v)).collect::<Result<Vec<_>>>()?;
            let g = ops::gemm::GemmLayout::of(op, &specs);
            2u64.saturating_mul(g.rows as u64).saturating_mul(g.n as u64).saturating_mul(g.kk as u64)
        }
        // Every output (gradient) element of the product is a dot product
        // over C / groups x KH x KW weights.
        "ll.conv2d" | "ll.conv2d_backward_input" | "ll.conv2d_backward_weight" => {
            let weight = if name == "ll.conv2d_backward_weight" { shape(x.len() - 1)? } else { shape(1)? };
            let per = numel(&weight[1..]);
            let products = if name == "ll.conv2d" { numel(&shape(x.len() - 1)?) } else { numel(&shape(0)?) };
            2u64.saturating_mul(products).saturating_mul(per)
        }
        "ll.attention" => {
            let (q, k, v) = (shape(0)?, shape(1)?, shape(2)?);
            let (l, d) = (q[q.len() - 2] as u64, q[q.len() - 1] as u64);
            let (s, dv) = (k[k.len() - 2] as u64, v[v.len() - 1] as u64);
            let batch = numel(&q[..q.len() - 2]);
            let full = 2u64.saturating_mul(batch).saturating_mul(l).saturating_mul(s).saturating_mul(d + dv);
            if ir::has(op, "causal") { full / 2 } else { full }
        }
        // Five products of the forward's size: the scores and dP again,
        // and dv, dq, dk (FlashAttention's count; the statistics' pass of
        // the scores is not counted).
        "ll.attention_backward" => {
            let (q, k, v) = (shape(0)?, shape(1)?, shape(2)?);
            let (l, d) = (q[q.len() - 2] as u64, q[q.len() - 1] as u64);
            let (s, dv) = (k[k.len() - 2] as u64, v[v.len() - 1] as u64);
            let batch = numel(&q[..q.len() - 2]);
            let full = 2u64.saturating_mul(batch).saturating_mul(l).saturating_mul(s).saturating_mul(3 * d + 2 * dv);
            if ir::has(op, "causal") { full / 2 } else { full }
        }
        _ => 0,
    })
}

pub(crate) fn serde_json_string(m: &Manifest) -> Result<String> {
    aicf_runtime::artifact::to_json(m).map_err(|e| internal(format!("manifest: {e}")))
}

/// The current thread, for temporary file names: two threads of one process
/// may build the same artifact (a rewrite compiled ahead and on demand).
pub(crate) fn thread_tag() -> String {
    format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "")
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over
/// `path`: a reader never sees half a file.
///
/// A device, pipe or socket (or a link to one: `-o /dev/null`, `-o
/// /dev/stdout`, `-o >(wc -c)`) is written to as it is: a rename would
/// put a plain file in its place (`-o /dev/full` replaced the device).
/// Through a symbolic link, the file it names is replaced, not the link.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    if aicf_runtime::checkpoint::is_stream(path) {
        use std::io::Write as _;
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.flush()))
            .map_err(|e| io_error(path, e));
    }
    let target = aicf_runtime::checkpoint::through_links(path);
    aicf_runtime::checkpoint::refuse_replacing_special(&target).map_err(|m| io_error(path, m))?;
    let tmp = aicf_runtime::checkpoint::temp_beside(&target, &format!("{}.{}.tmp", std::process::id(), thread_tag()));
    // (A signal during the write removes the file: an export's 44 MB were
    // left beside the output.)
    let _writing = aicf_runtime::checkpoint::PartialGuard::new(&tmp);
    std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, &target)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error(path, e)
    })
}

/// An exclusive lock on the artifact directory `dir` (a hidden file
/// `.<name>.lock` beside it), held until the returned file is dropped: two threads or
/// processes that find the same artifact missing compile it one after the
/// other, the second finding it whole, rather than both writing into one
/// directory (one's manifest beside the other's kernel library). `None`
/// where the lock cannot be taken (a read-only cache): the compile goes
/// on unlocked, as before.
pub fn lock_artifact(dir: &Path) -> Option<std::fs::File> {
    let parent = dir.parent()?;
    std::fs::create_dir_all(parent).ok()?;
    let mut name = std::ffi::OsString::from(".");
    name.push(dir.file_name()?);
    name.push(".lock");
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(parent.join(name)).ok()?;
    // Waited for a while, not for ever: a holder stopped or hung (SIGSTOP,
    // a file system that stopped answering) leaves the compile to go on
    // unlocked, as it did before the lock.
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Some(file),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < ARTIFACT_LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(_) => return None,
        }
    }
}

/// How long [`lock_artifact`] waits for another compile of the artifact:
/// longer than a large model's compile on 2 cores.
const ARTIFACT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

pub(crate) fn runtime_dtype(d: DType) -> Result<artifact::DType> {
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

pub(crate) fn symbol_entry(op: MlirOperation) -> Result<Symbol> {
    let t = unsafe { mlirTypeAttrGetValue(attr(op, "type")) };
    let spec =
        crate::nn::spec_of_type(t).map_err(|e| at(op, format!("a symbol without a usable tensor type: {e:?}")))?;
    let init = has(op, "init").then(|| {
        let text = ir::attr_text(op, "init");
        text.strip_prefix("#hl.init<").and_then(|s| s.strip_suffix('>')).unwrap_or(&text).to_string()
    });
    Ok(Symbol {
        name: ir::string_attr(op, "sym_name").unwrap_or_default(),
        kind: if op_name(op) == "hl.param" {
            "param"
        } else if ir::string_attr(op, "slot").as_deref() == Some(crate::passes::ACCUMULATOR_SLOT) {
            artifact::ACCUMULATOR
        } else {
            "state"
        }
        .into(),
        shape: spec.shape.clone(),
        dtype: runtime_dtype(spec.dtype)?,
        init,
    })
}

/// Shape and element type of a memref value.
pub(crate) fn buf_spec(v: MlirValue) -> Result<(Vec<usize>, DType)> {
    let s = ir::buffer_spec(v).ok_or_else(|| internal("a kernel operand is not a static memref"))?;
    Ok((s.shape.clone(), s.dtype))
}

pub(crate) struct Generator {
    /// The kernels module's text (func.func per kernel, body declarations).
    pub(crate) text: String,
    pub(crate) kernels: usize,
    /// (declaration name, the ll op whose region becomes its body)
    pub(crate) bodies: Vec<(String, MlirOperation)>,
    /// (kernel name, number of buffers) for the C entries.
    pub(crate) entries: Vec<(String, usize)>,
    /// The library candidate of each GEMM kernel (by kernel name).
    pub(crate) library: HashMap<String, Option<LibraryGemm>>,
    /// Where the operands of the op being generated live.
    pub(crate) buffers: Vec<Buffer>,
    /// The bytes each operand of the op being generated spans.
    pub(crate) extents: Vec<u64>,
    /// The function's arena argument (its views are `Buffer::Arena`).
    pub(crate) arena_arg: Option<usize>,
    /// What the kernels are written for.
    pub(crate) target: std::rc::Rc<dyn TargetInfo>,
    /// GPU kernels written whole as `gpu.func` (not row functions), by
    /// name, with their launch shapes.
    pub(crate) gpu_funcs: Vec<(String, String)>,
    /// The sm_90 form of kernels that have one (wgmma GEMMs), by name.
    pub(crate) hopper: HashMap<String, String>,
    pub(crate) launches: HashMap<String, artifact::Launch>,
    /// The buffer types of each row kernel, by name.
    pub(crate) signatures: HashMap<String, Vec<String>>,
    /// Row kernels that run a warp per work item on the GPU.
    pub(crate) warp_rows: std::collections::HashSet<String>,
    /// The kernels written so far, in order, by their (deduplicated) names.
    pub(crate) finished: Vec<String>,
    /// A kernel's name by its content: the same code (another layer of the
    /// same shape, another batch of a multi-tensor update) is written,
    /// parsed and lowered once, however many calls run it.
    pub(crate) kernel_of: HashMap<String, String>,
    /// Body declarations not yet written: (name, declaration, its op). They
    /// are written with the first new kernel that calls them.
    pub(crate) pending_bodies: Vec<(String, String, MlirOperation)>,
    /// Each body's content key, by name.
    pub(crate) body_keys: HashMap<String, String>,
    /// Each body's declaration, by name.
    pub(crate) body_decls: HashMap<String, String>,
    /// Each kernel's content key, by name (what a kernel cache keys it by).
    pub(crate) kernel_keys: HashMap<String, String>,
    /// Each row kernel's function text, by name.
    pub(crate) kernel_texts: HashMap<String, String>,
}

pub(crate) type Kernels = Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>;

impl Generator {
    pub(crate) fn new(target: std::rc::Rc<dyn TargetInfo>) -> Self {
        Generator {
            text: String::new(),
            kernels: 0,
            bodies: Vec::new(),
            entries: Vec::new(),
            library: HashMap::new(),
            buffers: Vec::new(),
            extents: Vec::new(),
            arena_arg: None,
            target,
            gpu_funcs: Vec::new(),
            hopper: HashMap::new(),
            launches: HashMap::new(),
            signatures: HashMap::new(),
            warp_rows: Default::default(),
            finished: Vec::new(),
            kernel_of: HashMap::new(),
            pending_bodies: Vec::new(),
            body_keys: HashMap::new(),
            body_decls: HashMap::new(),
            kernel_keys: HashMap::new(),
            kernel_texts: HashMap::new(),
        }
    }

    /// Plans one function: its arguments, constants and kernel calls, and
    /// writes its kernels.
    pub(crate) fn function(
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
        self.arena_arg = None;
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            let v = unsafe { mlirBlockGetArgument(block, i) };
            let bind = binds.get(i as usize).cloned().flatten().unwrap_or_else(|| "input".into());
            if bind == "arena" {
                self.arena_arg = Some(i as usize);
                let bytes = unsafe { mlirShapedTypeGetDimSize(mlirValueGetType(v), 0) }.max(0) as usize;
                args.push(Arg { bind, shape: vec![bytes], dtype: artifact::DType::U8 });
            } else {
                let (shape, dtype) = buf_spec(v)?;
                args.push(Arg { bind, shape, dtype: runtime_dtype(dtype)? });
            }
            refs.insert(ir::key(v), Buffer::Arg { index: i as usize });
        }
        let arena_bytes = args.iter().find(|a| a.bind == "arena").map_or(0, |a| a.bytes() as u64);
        let mut index_constants: HashMap<usize, i64> = HashMap::new();
        let mut calls = Vec::new();
        for op in ops_of(block) {
            let op_kind = op_name(op);
            let result = || unsafe { mlirOperationGetResult(op, 0) };
            match op_kind.as_str() {
                "arith.constant" => {
                    if let Some(c) = int_attr(op, "value") {
                        index_constants.insert(ir::key(result()), c);
                    }
                }
                "memref.view" => {
                    let x = operands(op);
                    let offset = x.get(1).and_then(|v| index_constants.get(&ir::key(*v))).copied();
                    let offset = offset.ok_or_else(|| at(op, "a view at a non-constant offset"))?;
                    let offset = u64::try_from(offset).map_err(|_| at(op, format!("a view at offset {offset}")))?;
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
                    // What each operand spans, for the loader's bounds check.
                    let extents = x
                        .iter()
                        .map(|v| {
                            let (shape, t) = buf_spec(*v)?;
                            shape
                                .iter()
                                .try_fold(crate::ir::dtype_bytes(t), |n, &d| n.checked_mul(d as u64))
                                .ok_or_else(|| at(op, format!("a buffer of {shape:?} {t:?} is too large to address")))
                        })
                        .collect::<Result<Vec<u64>>>()?;
                    self.extents = extents.clone();
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
                    // A collective is the runtime's to run, on the buffers
                    // where they lie: no kernel.
                    if op_kind == "ll.all_reduce" {
                        // The buffers, then the weight (an f32 scalar).
                        let dtypes = x[..x.len().saturating_sub(1)]
                            .iter()
                            .map(|v| runtime_dtype(buf_spec(*v)?.1))
                            .collect::<Result<Vec<_>>>()?;
                        calls.push(Call {
                            stream,
                            waits,
                            event,
                            library: None,
                            symbol: String::new(),
                            op: op_kind.clone(),
                            origin: Some(origin),
                            work: 0,
                            flops: 0,
                            grain: 1,
                            buffers,
                            bytes: extents,
                            index_checks: vec![],
                            launch: None,
                            collective: Some(artifact::Collective {
                                op: if ir::has(op, "local") {
                                    artifact::CollectiveOp::Scale
                                } else {
                                    artifact::CollectiveOp::AllReduceSum
                                },
                                dtypes,
                            }),
                        });
                        continue;
                    }
                    // Library candidates are the op's own (a kernel shared
                    // with another op may have other aliases).
                    self.library.clear();
                    // (A recomputation's FLOPs are the memory plan's: the
                    // model's count leaves them out.)
                    let mut flops =
                        if ir::has(op, crate::passes::plan_memory::RECOMPUTED) { 0 } else { op_flops(op, &x)? };
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
                            flops: std::mem::take(&mut flops),
                            grain: (GRAIN_OPS / cost.max(1)).max(1),
                            buffers: which.iter().map(|&i| buffers[i]).collect(),
                            bytes: which.iter().map(|&i| extents[i]).collect(),
                            index_checks: checks,
                            launch: None,
                            collective: None,
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
    pub(crate) fn kernel(
        &mut self,
        op: MlirOperation,
        x: &[MlirValue],
    ) -> Result<Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>> {
        let name = op_name(op);
        let specs = x.iter().map(|v| buf_spec(*v)).collect::<Result<Vec<_>>>()?;
        let all: Vec<usize> = (0..x.len()).collect();
        // 16-bit float buffers are stored in 16 bits and computed on in
        // f32 by every kernel kind: `Kernel::load` widens, `store` rounds.
        Ok(match name.as_str() {
            "ll.elementwise" => {
                let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_default();
                let n_in = seg.first().copied().unwrap_or(0) as usize;
                let body = self.body(op);
                let ins: Vec<usize> = (0..n_in).collect();
                let outs: Vec<usize> = (n_in..specs.len()).collect();
                let alias = self.in_place(&specs, &ins, &outs);
                let noalias = self.apart(&ins, &outs, &alias);
                let (work, cost) = self.elementwise(&specs[..n_in], &specs[n_in..], &body, &alias, noalias);
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
                    let noalias = self.apart(&ins, &outs, &alias);
                    let (work, cost) = self.elementwise(&s_in, &s_out, &body, &alias, noalias);
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
                let v = k.float(value, compute(*t));
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
            "ll.gemm" => self.target.clone().gemm(self, op, &specs)?,
            "ll.softmax_cross_entropy" => self.softmax_cross_entropy(op, &specs)?,
            "ll.reduce" => self.reduce(op, &specs)?,
            "ll.transpose" => self.transpose(op, &specs),
            "ll.softmax" => self.softmax(op, &specs, false),
            "ll.softmax_backward" => self.softmax(op, &specs, true),
            "ll.norm" => self.norm(op, &specs),
            "ll.norm_backward" => self.target.clone().norm_backward(self, op, &specs),
            "ll.attention_backward" => self.attention_backward(op, &specs),
            "ll.attention" => self.attention(op, &specs),
            "ll.gather" => self.gather(op, &specs, false),
            "ll.scatter_add" => self.gather(op, &specs, true),
            "ll.slice" => self.slice(op, &specs),
            "ll.concat" => self.concat(op, &specs),
            "ll.argmax" => self.argmax(op, &specs),
            "ll.mse_loss" => self.mse_loss(op, &specs),
            "ll.dropout" => self.dropout(op, &specs),
            "ll.random" => self.random(op, &specs),
            "ll.conv2d" => self.conv(op, &specs, "forward"),
            "ll.conv2d_backward_input" => self.conv(op, &specs, "input"),
            "ll.conv2d_backward_weight" => self.conv(op, &specs, "weight"),
            "ll.im2col" => self.windows(op, &specs, false),
            "ll.col2im" => self.windows(op, &specs, true),
            "ll.pool2d" => self.pool(op, &specs, false),
            "ll.pool2d_backward" => self.pool(op, &specs, true),
            other => return Err(unsupported_at(op, format!("no kernel generator for '{other}' yet"))),
        })
    }

    /// The name of the kernel written last.
    pub(crate) fn last(&self) -> String {
        self.finished.last().cloned().unwrap_or_default()
    }

    /// Names `text`, a kernel whose name in it is `@{placeholder}`: the name
    /// of an identical kernel written before, or a new one (then `write`
    /// gets the new name and adds the kernel). The content key replaces
    /// every body the kernel calls by that body's own content.
    pub(crate) fn dedup(&mut self, placeholder: &str, text: &str, write: impl FnOnce(&mut Self, &str)) -> String {
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
            self.body_decls.insert(body.clone(), declaration);
            self.bodies.push((body, op));
        }
        write(self, &name);
        self.kernel_keys.insert(name.clone(), key.clone());
        self.kernel_of.insert(key, name.clone());
        self.finished.push(name.clone());
        name
    }

    /// Declares the body of an elementwise-style op as a private function
    /// (filled in after parsing); returns its name and signature.
    pub(crate) fn body(&mut self, op: MlirOperation) -> (String, Vec<DType>, Vec<DType>) {
        let name = format!("body{}", self.bodies.len());
        let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
        // 16-bit values compute in f32 (`widen_body`).
        let ins: Vec<DType> = (0..unsafe { mlirBlockGetNumArguments(block) })
            .map(|i| {
                let t = ir::element_dtype(unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) });
                compute(t.unwrap_or(DType::F32))
            })
            .collect();
        let outs: Vec<DType> = ir::ops_of(block)
            .last()
            .map(|y| {
                operands(*y)
                    .iter()
                    .map(|v| compute(ir::element_dtype(unsafe { mlirValueGetType(*v) }).unwrap_or(DType::F32)))
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
    pub(crate) fn finish(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)]) -> String {
        self.finish_noalias(k, specs, false)
    }

    /// [`Generator::finish`], every buffer `noalias` (C's `restrict`) where
    /// `noalias`: no byte a kernel writes is read or written through
    /// another of its pointers ([`Generator::apart`]). LLVM then vectorises
    /// loops it cannot prove apart (a row's broadcast inputs indexed by
    /// their coordinates; more pointers than its run-time checks take).
    pub(crate) fn finish_noalias(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)], noalias: bool) -> String {
        let attr = if noalias { " {llvm.noalias}" } else { "" };
        let params: Vec<String> =
            specs.iter().enumerate().map(|(i, (s, t))| format!("%b{i}: {}{attr}", flat_type(s, *t))).collect();
        let mut text = format!("  func.func @KERNEL(%begin: index, %end: index, {}) {{\n", params.join(", "));
        text.push_str("    %c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index\n");
        text.push_str(&k.text);
        for (buf, ty) in &k.frees {
            text.push_str(&format!("    memref.dealloc {buf} : {ty}\n"));
        }
        text.push_str("    return\n  }\n");
        // A warp-per-row kernel launches differently from a plain one.
        let keyed = format!("{}{text}", if k.lane.is_some() { "warp " } else { "" });
        self.dedup("KERNEL", &keyed, |g, name| {
            let named = text.replacen("@KERNEL(", &format!("@{name}("), 1);
            g.text.push_str(&named);
            g.kernel_texts.insert(name.to_string(), named);
            g.signatures.insert(name.to_string(), specs.iter().map(|(s, t)| flat_type(s, *t)).collect());
            if k.lane.is_some() {
                g.warp_rows.insert(name.to_string());
            }
            g.entries.push((name.to_string(), specs.len()));
        })
    }

    /// Whether the op's operands at `ins` and `outs` (positions), the
    /// outputs updated in place (`alias`, [`Generator::in_place`]) stored
    /// through their inputs, may be `noalias` (where the target asks,
    /// [`TargetInfo::noalias`]): every output stored through its own
    /// pointer shares no byte with another operand. An arena buffer spans
    /// its extent from its offset; arguments are apart from each other and
    /// from the arena's buffers unless the same (or the arena argument
    /// itself); constants are only read.
    pub(crate) fn apart(&self, ins: &[usize], outs: &[usize], alias: &[Option<usize>]) -> bool {
        if !self.target.noalias() {
            return false;
        }
        let accessed: Vec<usize> =
            ins.iter().copied().chain(outs.iter().zip(alias).filter(|(_, a)| a.is_none()).map(|(&o, _)| o)).collect();
        let overlap = |a: usize, b: usize| match (self.buffers.get(a), self.buffers.get(b)) {
            (Some(Buffer::Arena { offset: x }), Some(Buffer::Arena { offset: y })) => {
                let (ex, ey) = (
                    self.extents.get(a).copied().unwrap_or(u64::MAX),
                    self.extents.get(b).copied().unwrap_or(u64::MAX),
                );
                x.saturating_add(ex) > *y && y.saturating_add(ey) > *x
            }
            // The arena argument itself holds every arena buffer.
            (Some(Buffer::Arg { index }), Some(Buffer::Arena { .. }))
            | (Some(Buffer::Arena { .. }), Some(Buffer::Arg { index }))
                if Some(*index) == self.arena_arg =>
            {
                true
            }
            (Some(x), Some(y)) => x == y,
            // Unknown: assume the worst.
            _ => true,
        };
        // The written operands: outputs, and inputs an output is stored
        // through.
        let written: Vec<usize> = outs.iter().zip(alias).map(|(&o, a)| a.map_or(o, |i| ins[i])).collect();
        written.iter().all(|&w| accessed.iter().filter(|&&a| a != w).all(|&a| !overlap(w, a)))
    }

    /// Per output (operand positions `outs`), the position within `ins` of
    /// an input that is the same buffer with the same type: the op updates it
    /// in place.
    pub(crate) fn in_place(&self, specs: &[(Vec<usize>, DType)], ins: &[usize], outs: &[usize]) -> Vec<Option<usize>> {
        outs.iter()
            .map(|&o| ins.iter().position(|&i| self.buffers.get(i) == self.buffers.get(o) && specs[i] == specs[o]))
            .collect()
    }

    pub(crate) fn one(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)], work: usize, cost: usize) -> Kernels {
        self.finish(k, specs);
        vec![(self.last(), work.max(1) as u64, cost.max(1) as u64, (0..specs.len()).collect(), vec![])]
    }

    /// Parses the generated kernels `source`, moves the bodies in and
    /// guards `exp`: the module both backends lower from. `tanh` stays for
    /// the CPU backend to approximate inline
    /// ([`crate::pipeline::KERNELS_APPROXIMATE_INLINE`]).
    pub(crate) fn parse_kernels<'c>(&self, ctx: &'c CompilerContext, source: &str) -> Result<Module<'c>> {
        self.parse_kernels_with(ctx, source, &self.bodies, false)
    }

    /// [`Generator::parse_kernels`] with the bodies `bodies` (declaration
    /// name, the op whose region it takes); `expand_tanh` rewrites `tanh`
    /// through `exp` first ([`crate::pipeline::KERNEL_MATH`], the GPU's).
    pub(crate) fn parse_kernels_with<'c>(
        &self,
        ctx: &'c CompilerContext,
        source: &str,
        bodies: &[(String, MlirOperation)],
        expand_tanh: bool,
    ) -> Result<Module<'c>> {
        let mut module = Module::parse(ctx.mlir(), source).ok_or_else(|| {
            let diags = ctx.take_diagnostics();
            internal(format!("generated kernels do not parse: {diags:?}\n{source}"))
        })?;
        Self::fill_bodies(&module, bodies)?;
        if expand_tanh {
            crate::run_pipeline(ctx, &mut module, crate::pipeline::KERNEL_MATH)?;
        }
        guard_exp(ctx.mlir().to_raw(), module.as_operation().to_raw())?;
        Ok(module)
    }

    /// Moves each elementwise op's region into its body declaration.
    pub(crate) fn fill_bodies(module: &Module<'_>, bodies: &[(String, MlirOperation)]) -> Result<()> {
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
        for (name, op) in bodies {
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
                widen_body(block)?;
                mlirRegionAppendOwnedBlock(mlirOperationGetRegion(*decl, 0), block);
            }
        }
        Ok(())
    }
}

/// An elementwise body computes in f32 where its region says f16 or bf16:
/// its arguments, results and every 16-bit value become f32, a widening
/// from 16 bits disappears, and a 16-bit constant is re-made in f32. The
/// kernel rounds each output once, on its store (as a fused GEMM epilogue
/// does), instead of after every op; but a narrowing the model asked for
/// (`hl.cast` of an f32 value to bf16 or f16, an ONNX Cast: its `truncf`
/// marked `aicf.rounds`) still rounds, then widens back:
/// `x.to(bf16).float()` is not `x` (it was, fused). A formula's f32
/// constant cast to 16 bits is not rounded.
fn widen_body(block: MlirBlock) -> Result<()> {
    let narrow = |t: MlirType| unsafe { mlirTypeIsAF16(t) || mlirTypeIsABF16(t) };
    let Some(&first) = ops_of(block).first() else { return Ok(()) };
    let ctx = unsafe { mlirOperationGetContext(first) };
    let f32t = unsafe { mlirF32TypeGet(ctx) };
    for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
        let arg = unsafe { mlirBlockGetArgument(block, i) };
        if narrow(unsafe { mlirValueGetType(arg) }) {
            unsafe { mlirValueSetType(arg, f32t) };
        }
    }
    for op in ops_of(block) {
        let name = op_name(op);
        let results: Vec<MlirValue> =
            (0..unsafe { mlirOperationGetNumResults(op) }).map(|r| unsafe { mlirOperationGetResult(op, r) }).collect();
        let narrow_result = results.iter().any(|r| narrow(unsafe { mlirValueGetType(*r) }));
        match name.as_str() {
            // A conversion that now has the same type on both sides goes.
            "arith.truncf"
                if narrow_result
                    && ir::has(op, crate::passes::ROUNDS)
                    && unsafe { mlirTypeIsAF32(mlirValueGetType(mlirOperationGetOperand(op, 0))) } =>
            {
                // The rounded value's readers take it widened again. (The
                // widening is made reading the operand, its uses moved, and
                // then pointed at the rounding, which it must not read as
                // its own result.)
                let x = unsafe { mlirOperationGetOperand(op, 0) };
                let spec = ir::OpSpec {
                    operands: &[x],
                    results: Some(&[f32t]),
                    verify: false,
                    ..ir::OpSpec::new("arith.extf")
                };
                let widen = ir::create_op(ctx, ir::op_loc(op), &spec).map_err(|e| at(op, format!("{e:?}")))?;
                unsafe {
                    mlirBlockInsertOwnedOperationAfter(block, op, widen);
                    mlirValueReplaceAllUsesOfWith(results[0], mlirOperationGetResult(widen, 0));
                    mlirOperationSetOperand(widen, 0, results[0]);
                }
            }
            "arith.extf" | "arith.truncf" => {
                let x = unsafe { mlirOperationGetOperand(op, 0) };
                let from = unsafe { mlirValueGetType(x) };
                let to = unsafe { mlirValueGetType(results[0]) };
                let to = if narrow(to) { f32t } else { to };
                if unsafe { mlirTypeEqual(from, to) } {
                    unsafe {
                        mlirValueReplaceAllUsesOfWith(results[0], x);
                        mlirOperationDestroy(op);
                    }
                    continue;
                }
                unsafe { mlirValueSetType(results[0], to) };
            }
            "arith.constant" if narrow_result => {
                let value = float_attr(op, "value").ok_or_else(|| at(op, "a 16-bit constant that is not a float"))?;
                let attrs = [("value", format!("{} : f32", crate::nn::ops::float_literal(value, DType::F32)))];
                let spec =
                    ir::OpSpec { attributes: &attrs, results: Some(&[f32t]), ..ir::OpSpec::new("arith.constant") };
                let new = ir::create_op(ctx, ir::op_loc(op), &spec).map_err(|e| at(op, format!("{e:?}")))?;
                unsafe {
                    mlirBlockInsertOwnedOperationBefore(block, op, new);
                    mlirValueReplaceAllUsesOfWith(results[0], mlirOperationGetResult(new, 0));
                    mlirOperationDestroy(op);
                }
            }
            _ => {
                for r in &results {
                    if narrow(unsafe { mlirValueGetType(*r) }) {
                        unsafe { mlirValueSetType(*r, f32t) };
                    }
                }
            }
        }
    }
    Ok(())
}

/// The `ll.bind` tag of each argument of `func`.
pub(crate) fn arg_binds(func: MlirOperation) -> Vec<Option<String>> {
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
pub(crate) fn global_values(global: MlirOperation, value: MlirValue) -> Result<Constant> {
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
            DType::F16 | DType::BF16 => ir::dense_16bit_element(a, i, dtype),
        }
    };
    if a.ptr.is_null() || !unsafe { mlirAttributeIsADenseElements(a) } {
        return Err(at(global, "a constant without dense values"));
    }
    let splat = unsafe { mlirDenseElementsAttrIsSplat(a) };
    let values = (0..n).map(|i| get(if splat { 0 } else { i as isize })).collect();
    Ok(Constant { shape, dtype: runtime_dtype(dtype)?, values })
}

#[cfg(test)]
mod tests {
    use crate::context::CompilerContext;
    use melior::ir::operation::OperationLike;

    /// Every f32 `exp`, scalar or vector, gets the guard: a clamp to -87
    /// and zero below it (a vector's splat constants and lane mask).
    #[test]
    fn exp_is_guarded_on_scalars_and_vectors() {
        let ctx = CompilerContext::new();
        let source = "func.func @f(%a: f32, %v: vector<16xf32>) -> (f32, vector<16xf32>) {\n  \
                      %0 = math.exp %a : f32\n  %1 = math.exp %v : vector<16xf32>\n  return %0, %1 : f32, vector<16xf32>\n}";
        let module = melior::ir::Module::parse(ctx.mlir(), source).expect("parses");
        let op = module.as_operation();
        super::guard_exp(ctx.mlir().to_raw(), op.to_raw()).unwrap();
        assert!(op.verify());
        let text = op.to_string();
        assert!(text.contains("arith.constant dense<-8.700000e+01> : vector<16xf32>"), "{text}");
        assert!(text.contains("arith.cmpf olt") && text.contains("vector<16xi1>"), "{text}");
        assert!(text.contains("arith.constant -8.700000e+01 : f32"), "{text}");
        assert_eq!(text.matches("math.exp").count(), 2, "{text}");
        assert_eq!(text.matches("arith.select").count(), 2, "{text}");
    }
}
