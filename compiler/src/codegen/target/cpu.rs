//! The CPU target: the kernels module becomes host code and a manifest
//! ([`aicf_runtime::artifact`]).
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

use crate::codegen::prelude::*;

/// Compiles the planned `module` (after `aicf-train-pipeline`) for the host
/// CPU into `out_dir` (`manifest.json`, `kernels.so`); returns the manifest.
/// Kernel objects are cached in [`KernelCache::default_dir`].
pub fn compile_cpu(ctx: &CompilerContext, module: &Module<'_>, ir_hash: &str, out_dir: &Path) -> Result<Manifest> {
    let cache = KernelCache::new(KernelCache::default_dir(out_dir));
    Ok(compile(ctx, module, ir_hash, "", out_dir, &Target::Cpu(cache))?.0)
}

/// The host CPU: a thread per row (columns in the inner loop, where LLVM
/// vectorises them), whole-op reductions in one thread, every kernel a row
/// function behind a C entry in kernels.so.
pub(crate) struct CpuTarget {
    pub(crate) cache: KernelCache,
}

impl TargetInfo for CpuTarget {
    fn cpu_features(&self) -> Vec<String> {
        toolchain().map(|t| t.2.to_vec()).unwrap_or_default()
    }

    fn reduce_columns(&self, g: &mut Generator, r: ColumnReduce, specs: &[(Vec<usize>, DType)]) -> Option<Kernels> {
        // No split form here: the work items already cover the outputs.
        (r.cols > 0).then(|| {
            let work = g.cpu_reduce_columns(r, specs);
            vec![(g.last(), work, (r.rows * 3) as u64, (0..specs.len()).collect(), vec![])]
        })
    }

    fn transpose_rows(&self, g: &mut Generator, perm: &[usize], specs: &[(Vec<usize>, DType)]) -> Option<Kernels> {
        (perm.len() >= 2).then(|| g.transpose_rows(perm, specs))
    }

    fn row_copies(&self) -> bool {
        true
    }

    fn pool_planes(&self) -> bool {
        true
    }

    fn long_rows(&self) -> bool {
        true
    }

    fn noalias(&self) -> bool {
        true
    }

    fn conv_rows(&self) -> bool {
        true
    }

    fn reduce_runs(&self) -> bool {
        true
    }

    fn heap_scratch(&self) -> bool {
        true
    }

    fn row_kernel(&self) -> Kernel {
        Kernel::new()
    }

    fn elementwise_item(&self, k: &mut Kernel, _cols: usize) -> (String, Option<String>) {
        (k.open("%begin", "%end"), None)
    }

    fn team(&self, _k: &mut Kernel) -> Team {
        let (c0, c1) = ("%c0".to_string(), "%c1".to_string());
        Team { tid: c0.clone(), step: c1.clone(), warp: c0, warps: c1 }
    }

    fn team_sum(&self, _k: &mut Kernel, _team: &Team, part: &str, _t: DType) -> String {
        part.to_string()
    }

    fn team_total(&self, _k: &mut Kernel, _team: &Team, warp_total: &str, _t: DType) -> String {
        warp_total.to_string()
    }

    fn finish_team(
        &self,
        g: &mut Generator,
        mut k: Kernel,
        _team: &Team,
        value: &str,
        out: usize,
        specs: &[(Vec<usize>, DType)],
    ) -> String {
        k.store(value, &format!("%b{out}"), "%c0", &flat_type(&specs[out].0, specs[out].1));
        // One work item, [0, 1): the whole op.
        g.finish(k, specs)
    }

    fn gemm(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels> {
        g.cpu_gemm(op, specs)
    }

    fn attention(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        // Blocks of query rows in f32 (the compute type of f32, bf16 and f16
        // heads); f64 keeps the row kernel.
        if a.t == DType::F32 { g.attention_blocked(a, specs) } else { g.attention_rows(a, specs) }
    }

    fn attention_backward(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        // Blocks of query rows in f32, as the forward; f64 keeps the rows.
        if a.t == DType::F32 { g.attention_backward_blocked(a, specs) } else { g.attention_backward_rows(a, specs) }
    }

    fn norm_backward(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        g.norm_backward_chunked(op, specs)
    }

    fn build(
        &self,
        g: &Generator,
        ctx: &CompilerContext,
        out_dir: &Path,
        functions: &mut [Function],
    ) -> Result<(String, KernelStats, BTreeMap<String, Vec<String>>)> {
        let (target, names, stats) = g.build(ctx, out_dir, &self.cache)?;
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
        Ok((target, stats, BTreeMap::new()))
    }
}

/// The `-march` the kernels are compiled for: the host's (`native`), or
/// the instruction set `AICF_CPU_ISA` names, to build and measure another
/// CPU's code on this one: `avx2` (x86-64-v3: AVX2 and FMA, no AVX-512),
/// `avx512` (x86-64-v4), or any CPU name clang takes (`znver3`,
/// `haswell`). An artifact built for features this CPU lacks is refused
/// when loaded; one built for fewer runs none of the runtime's AVX-512
/// GEMMs either (`CpuModule`). Read once per process, as the toolchain is.
pub fn march() -> String {
    static MARCH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARCH
        .get_or_init(|| match std::env::var("AICF_CPU_ISA").ok().as_deref().map(str::trim) {
            None | Some("") | Some("native") => "native".into(),
            Some("avx2") => "x86-64-v3".into(),
            Some("avx512") => "x86-64-v4".into(),
            Some(other) => other.into(),
        })
        .clone()
}

/// The clang flags every kernel object is compiled with (part of its
/// hash): [`KERNEL_FLAGS`] and `-march=`[`march`].
pub(crate) fn kernel_flags() -> Vec<String> {
    let mut flags: Vec<String> = KERNEL_FLAGS.iter().map(|f| f.to_string()).collect();
    flags.insert(1, format!("-march={}", march()));
    flags
}

/// The clang flags of every kernel object besides `-march`.
const KERNEL_FLAGS: [&str; 7] = [
    "-O3",
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

/// Routines the kernels may call that the host's runtime libraries may
/// lack: rounding f32 to bf16, which LLVM calls where it widens a bf16
/// operation it has no instruction for (a vectorised select of bf16 values
/// on a host without `avx512_bf16`) and libgcc before 13 does not define.
/// Weak and hidden: a library's own definition wins, and none is exported.
const SUPPORT_C: &str = r#"
typedef unsigned short u16;
typedef unsigned int u32;
/* Round to nearest even; a NaN stays a (quiet) NaN. */
__attribute__((weak, visibility("hidden"))) __bf16 __truncsfbf2(float x) {
  u32 b;
  __builtin_memcpy(&b, &x, 4);
  u16 h;
  if ((b & 0x7fffffffu) > 0x7f800000u)
    h = (u16)((b >> 16) | 0x40u);
  else
    h = (u16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  __bf16 r;
  __builtin_memcpy(&r, &h, 2);
  return r;
}
"#;

/// Compiled kernels, content-addressed by the hash of the kernel's
/// LLVM-dialect function with its name taken out, the clang flags, clang and
/// the host CPU: `<hash>.obj` names the object (`g_<group>.o`, compiled from
/// `g_<group>.ll`) that holds the kernel, among the others compiled with it
/// in one clang process. A kernel the model had before a rewrite (or that
/// another model or batch size shares) is linked from here, not compiled
/// again; identical kernels of one module are compiled once. Files are
/// written under a temporary name and renamed, so concurrent builds share
/// the directory; each object (and PTX module) has a `<file>.hash` beside
/// it, written after it, and one whose bytes no longer match (a process
/// killed mid-write, a disk that filled up, an edit) counts as missing and
/// is compiled again.
/// Removes, once a process for each cache directory, the temporary files
/// (`<name>.<pid>.<thread>.tmp`) of processes that are gone: a compile
/// killed between writing one and renaming it left it for good.
fn sweep_temporaries(dir: &Path) {
    static SWEPT: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
    if swept.iter().any(|d| d == dir) || !Path::new("/proc/self").exists() {
        return;
    }
    swept.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".tmp") {
            continue;
        }
        // <name>.<pid>.<thread>.tmp, and clang's own temporary of it
        // (`...ThreadId3-984a0ea3.tmp.tmp`): the pid is the part before
        // the thread's.
        let parts: Vec<&str> = name.split('.').collect();
        let pid = parts.windows(2).find(|w| w[1].starts_with("ThreadId")).and_then(|w| w[0].parse::<u32>().ok());
        if let Some(pid) = pid
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: std::path::PathBuf,
}

impl KernelCache {
    pub fn new(dir: std::path::PathBuf) -> Self {
        sweep_temporaries(&dir);
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
    pub(crate) fn object_of(&self, hash: &str) -> Option<std::path::PathBuf> {
        let group = std::fs::read_to_string(self.dir.join(format!("{hash}.obj"))).ok()?;
        let name = format!("{}.o", group.trim());
        self.intact(&name).then(|| self.dir.join(name))
    }

    /// Whether the cache holds `name` with the bytes its `<name>.hash`
    /// records.
    pub(crate) fn intact(&self, name: &str) -> bool {
        let Some(hash) = self.read(&format!("{name}.hash")) else { return false };
        artifact::file_hash(&self.dir.join(name)).is_ok_and(|h| h == hash.trim())
    }

    /// The object every `kernels.so` links beside its kernels
    /// ([`SUPPORT_C`]), compiled once per clang into the cache.
    pub(crate) fn support_object(&self, clang: &str) -> Result<std::path::PathBuf> {
        let name = format!("support_{}.o", artifact::ir_hash(&format!("{clang}\n{SUPPORT_C}")));
        if self.intact(&name) {
            return Ok(self.dir.join(name));
        }
        self.write("support.c", SUPPORT_C.as_bytes())?;
        self.compile_object(clang, &["-O2", "-fPIC", "-c", "-x", "c"], &self.dir.join("support.c"), &name)?;
        Ok(self.dir.join(name))
    }

    /// Compiles `source` with `clang flags` into the cache's object `name`
    /// (through a temporary file, then sealed).
    fn compile_object(&self, clang: &str, flags: &[&str], source: &std::path::Path, name: &str) -> Result<()> {
        let tmp = self.temporary(name);
        let output = tool_command(clang)
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(&tmp)
            .output()
            .map_err(|e| internal(format!("{clang}: {e}")))?;
        if !output.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(tool_failure(
                clang,
                &format!("failed on {}", source.display()),
                &self.dir.join(name),
                &output.stderr,
            ));
        }
        let object = self.dir.join(name);
        std::fs::rename(&tmp, &object).map_err(|e| io_error(&object, e))?;
        self.seal(name)
    }

    /// Records the hash of `name`'s bytes, once it is complete.
    pub(crate) fn seal(&self, name: &str) -> Result<()> {
        let path = self.dir.join(name);
        let hash = artifact::file_hash(&path).map_err(|e| io_error(&path, e))?;
        self.write(&format!("{name}.hash"), hash.as_bytes())
    }

    pub(crate) fn temporary(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(format!("{name}.{}.{}.tmp", std::process::id(), thread_tag()))
    }

    /// A small file of the cache, if it is there.
    pub(crate) fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(name)).ok()
    }

    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.error(&self.dir, e))?;
        let tmp = self.temporary(name);
        let path = self.dir.join(name);
        std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, &path)).map_err(|e| {
            // A full disk leaves no partial file behind.
            let _ = std::fs::remove_file(&tmp);
            self.error(&path, e)
        })
    }

    /// An error writing the cache, saying where its place comes from: the
    /// cache is per machine, not the run's `--out`, so a path the user
    /// never typed needs its variable named.
    fn error(&self, path: &Path, e: impl std::fmt::Display) -> CompileError {
        let whence = match (
            std::env::var_os("AICF_CACHE_DIR").filter(|d| !d.is_empty()),
            std::env::var_os("HOME").filter(|d| std::path::Path::new(d).is_absolute()),
        ) {
            (Some(_), _) => "chosen by AICF_CACHE_DIR; point it at a writable directory",
            (None, Some(_)) => "under ~/.cache/aicf; set AICF_CACHE_DIR to a writable directory to use another",
            (None, None) => "in the run's directory, as HOME is unset; AICF_CACHE_DIR chooses another",
        };
        // (A file where the cache's directory goes said "File exists".)
        let what = match std::fs::symlink_metadata(path) {
            Ok(m) if !m.is_dir() && e.to_string().contains("File exists") => {
                "a file where the kernel cache's directory goes: move it".to_string()
            }
            _ => e.to_string(),
        };
        io_error(path, format!("{what} (the kernel cache, {whence})"))
    }

    /// Compiles each group's `<group>.ll` to `<group>.o`, all at once, and
    /// then records for each of its kernels that the object holds it.
    pub(crate) fn compile_all(&self, clang: &str, groups: &[(String, Vec<String>)]) -> Result<()> {
        let compile_one = |(group, members): &(String, Vec<String>)| -> Result<()> {
            let flags = kernel_flags();
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            self.compile_object(clang, &flags, &self.dir.join(format!("{group}.ll")), &format!("{group}.o"))?;
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

impl Generator {
    /// Lowers the kernels to the LLVM dialect and builds `kernels.so` in
    /// `out_dir` from one object per distinct kernel, taken from
    /// `kernel_cache` when it holds it (see [`KernelCache`]), else compiled
    /// there (`clang -O3`, one process per kernel, as many at once as there
    /// are cores). Returns the target description and, per kernel name
    /// (`kN`), its exported symbol `aicf_<hash>`.
    pub(crate) fn build(
        &self,
        ctx: &CompilerContext,
        out_dir: &Path,
        cache: &KernelCache,
    ) -> Result<(String, HashMap<String, String>, KernelStats)> {
        let started = std::time::Instant::now();
        let mut timings = crate::timing::Timings::default();
        let source = format!("module {{\n{}}}\n", self.text);
        let mlir = ctx.mlir();
        let mut module = timings.time("kernels: parse, bodies, exp guards", || self.parse_kernels(ctx, &source))?;
        crate::run_pipeline(ctx, &mut module, crate::pipeline::KERNELS_16BIT)?;
        round_bf16_in_integers(mlir.to_raw(), module.as_operation().to_raw())?;
        crate::run_pipeline(ctx, &mut module, crate::pipeline::KERNELS_APPROXIMATE_INLINE)?;
        // MLIR's inline exp where the kernels have AVX-512's 32 vector
        // registers; with AVX2's 16 it measured slower than libmvec's
        // (the transformer block's elementwise kernels 2.3 -> 2.9 ms a
        // step on the Zen 4 held to AVX2, against 2.3 -> 1.6 with AVX-512).
        if crate::codegen::emit::simd_lanes() >= 16 {
            crate::run_pipeline(ctx, &mut module, crate::pipeline::KERNELS_APPROXIMATE)?;
        }
        timings.time("kernels: lower to the LLVM dialect", || {
            crate::run_pipeline(ctx, &mut module, crate::pipeline::KERNELS_TO_LLVM)
        })?;
        let hash_started = std::time::Instant::now();
        let (clang, cpu, features) = toolchain()?;
        // The features too, not the CPU's name alone: a VM that masks
        // AVX-512 or AMX off a CPU of the same name (a kernel cache in a
        // home directory shared by a cluster's nodes) must not reuse the
        // objects compiled where they were on (SIGILL).
        let flags = format!("{:?} {}", kernel_flags(), features.join(","));
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
            let hash = artifact::ir_hash(&format!("{flags} {clang} {cpu}\n{body}"));
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
        objects.push(cache.support_object(clang)?);
        let so = out_dir.join("kernels.so");
        let tmp = out_dir.join(format!("kernels.so.{}.{}.tmp", std::process::id(), thread_tag()));
        let output = tool_command(clang)
            .args(["-shared", "-fPIC", "-Wl,-z,defs"])
            .args(&objects)
            .arg("-o")
            .arg(&tmp)
            .args(["-lmvec", "-lm"])
            .output()
            .map_err(|e| internal(format!("{clang}: {e}")))?;
        if !output.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(tool_failure(clang, &format!("failed to link {}", so.display()), &so, &output.stderr));
        }
        std::fs::rename(&tmp, &so).map_err(|e| io_error(&so, e))?;
        timings.add("link kernels.so", link_started.elapsed().as_secs_f64(), format!("{} objects", objects.len()));
        let stats = KernelStats { kernels: kernels.len(), compiled, seconds: started.elapsed().as_secs_f64(), timings };
        Ok((format!("{} cpu {cpu}", std::env::consts::ARCH), symbols, stats))
    }
}

/// A failed clang (compiling or linking, writing `path`): where its
/// message is the file system's (a full disk, a quota, a read-only or
/// forbidden directory, a file-size limit), the user's to fix, named at
/// the file it was writing; anything else is an internal error with
/// clang's whole message.
fn tool_failure(clang: &str, what: &str, path: &Path, stderr: &[u8]) -> CompileError {
    const FILE_SYSTEM: [&str; 6] = [
        "No space left on device",
        "Disk quota exceeded",
        "File too large",
        // The linker killed by SIGXFSZ (`ulimit -f`), as clang reports it.
        "File size limit exceeded",
        "Read-only file system",
        "Permission denied",
    ];
    let stderr = String::from_utf8_lossy(stderr);
    match FILE_SYSTEM.iter().find(|m| stderr.contains(*m)) {
        Some(m) => io_error(path, format!("{m} ({clang} {what})")),
        None => internal(format!("{clang} {what}:\n{stderr}")),
    }
}

/// A tool the compile runs (clang), as a child that the kernel ends when
/// the thread that started it ends (the process killed or stopped by a
/// signal included: a stopped run left its clang compiling on, under
/// init). The thread waits for the child, so it never ends first. It runs
/// in a process group of its own: a terminal's Ctrl-C, which asks a
/// training loop to stop at its next step, killed the clang of a variant
/// compiled inside the loop, and the run ended on a clang error instead.
fn tool_command(program: &str) -> std::process::Command {
    #[allow(unused_mut)]
    let mut command = std::process::Command::new(program);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        // SAFETY: prctl is async-signal-safe and touches only the child.
        unsafe {
            command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
    }
    command
}

/// The C compiler that turns LLVM IR into the shared object: `$AICF_CLANG`,
/// else clang-22 from the toolchain. Its absence is the machine's to fix
/// (an environment error), not a bug in AICF; so is a clang that is there
/// but cannot start (no memory or file descriptors left under a ulimit),
/// which is said as such rather than as "not found".
pub(crate) fn clang() -> Result<String> {
    // Ok(true): runs; Ok(false): not there; Err: there, but did not run.
    let runs = |c: &str| match std::process::Command::new(c).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(true),
        Ok(o) => Err(format!("'{c} --version' failed ({})", o.status)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("{c} could not be started: {e}")),
    };
    if let Ok(c) = std::env::var("AICF_CLANG") {
        return match runs(&c) {
            Ok(true) => Ok(c),
            Ok(false) => Err(CompileError::Environment(format!(
                "AICF_CLANG={c}: no such program; the CPU backend compiles its kernels with it"
            ))),
            Err(why) => Err(CompileError::Environment(format!(
                "AICF_CLANG={c}: it does not run ({why}); the CPU backend compiles its kernels with it"
            ))),
        };
    }
    let mut failed = Vec::new();
    for c in ["/usr/lib/llvm-22/bin/clang", "clang-22", "clang"] {
        match runs(c) {
            Ok(true) => return Ok(c.to_string()),
            Ok(false) => {}
            Err(why) => failed.push(why),
        }
    }
    if !failed.is_empty() {
        return Err(CompileError::Environment(format!(
            "the CPU backend compiles its kernels with clang, which is installed but does not run here: {} (a \
             memory or open-file limit, `ulimit -v` or `-n`, too low?)",
            failed.join("; ")
        )));
    }
    Err(CompileError::Environment(
        "the CPU backend compiles its kernels with clang, and none was found (/usr/lib/llvm-22/bin/clang, \
         clang-22, clang): run tools/setup.sh, or set AICF_CLANG to one (a run with --device cuda needs none)"
            .into(),
    ))
}

/// clang and the host CPU it compiles for, looked up once per process.
/// clang, the host CPU's name and the features `-march=native` enables
/// there (found once per process).
pub(crate) fn toolchain() -> Result<(&'static str, &'static str, &'static [String])> {
    // Every failure here is the environment's: no clang, or a CPU it does not know.
    type Found = std::result::Result<(String, String, Vec<String>), String>;
    static FOUND: std::sync::OnceLock<Found> = std::sync::OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let clang = clang().map_err(|e| e.to_string())?;
        let (cpu, features) = host_cpu(&clang);
        if features.is_empty() && march() != "native" {
            return Err(format!(
                "AICF_CPU_ISA: {clang} knows no CPU '-march={}' (avx2, avx512, native, or a CPU name such as znver3)",
                march()
            ));
        }
        Ok((clang, cpu, features))
    });
    match found {
        Ok((clang, cpu, features)) => Ok((clang, cpu, features)),
        Err(e) => Err(CompileError::Environment(e.clone())),
    }
}

/// The CPU clang compiles for under `-march=`[`march`] (the host's by
/// default) and its features.
pub(crate) fn host_cpu(clang: &str) -> (String, Vec<String>) {
    let text = std::process::Command::new(clang)
        .args([&format!("-march={}", march()), "-###", "-x", "c", "-c", "/dev/null"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .unwrap_or_default();
    let cpu = text
        .find("\"-target-cpu\" \"")
        .and_then(|at| text[at + 15..].split('"').next().map(str::to_string))
        .unwrap_or_else(|| "native".into());
    // `"-target-feature" "+avx512f"` for each feature the CPU has.
    let mut features: Vec<String> = text
        .split("\"-target-feature\" \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|f| f.starts_with('+'))
        .map(str::to_string)
        .collect();
    // A named CPU or ISA level (`x86-64-v3`) passes no feature list: its
    // features from the macros clang predefines for it.
    if features.is_empty() && march() != "native" {
        features = march_features(clang);
    }
    features.sort();
    features.dedup();
    (cpu, features)
}

/// The SIMD features clang enables under `-march=`[`march`], from its
/// predefined macros (`__AVX2__` -> `+avx2`, `__SSE4_1__` -> `+sse4.1`).
fn march_features(clang: &str) -> Vec<String> {
    let text = std::process::Command::new(clang)
        .args([&format!("-march={}", march()), "-dM", "-E", "-x", "c", "/dev/null"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    const SIMD: [&str; 13] =
        ["SSE3", "SSSE3", "SSE4_1", "SSE4_2", "POPCNT", "AVX", "AVX2", "FMA", "F16C", "BMI", "BMI2", "LZCNT", "MOVBE"];
    text.lines()
        .filter_map(|l| l.strip_prefix("#define __")?.strip_suffix("__ 1"))
        .filter(|m| SIMD.contains(m) || m.starts_with("AVX512") || m.starts_with("AMX_"))
        .map(|m| format!("+{}", m.to_ascii_lowercase().replace("sse4_", "sse4.").replace("amx_", "amx-")))
        .collect()
}

/// Rewrites every `arith.truncf` from f32 to bf16 (scalar or vector) of the
/// kernels `module` as integer code: round to nearest even by adding
/// `0x7fff + lsb` to the bits, a NaN kept quiet (no rounding, the quiet bit
/// set). LLVM would lower `fptrunc` to bf16 as a call to `__truncsfbf2`
/// where the host lacks `avx512_bf16` (libgcc before 13 has none), and
/// MLIR's own expansion selects the NaN pattern on bf16 values, which the
/// x86 backend widens through that same call once vectorised.
pub(crate) fn round_bf16_in_integers(ctx: MlirContext, module: MlirOperation) -> Result<()> {
    let truncs = crate::codegen::ops_named(module, "arith.truncf");
    for op in truncs {
        let x = unsafe { mlirOperationGetOperand(op, 0) };
        let (from, to) = (
            ir::type_text(unsafe { mlirValueGetType(x) }),
            ir::type_text(unsafe { mlirValueGetType(mlirOperationGetResult(op, 0)) }),
        );
        // `f32` -> `bf16`, or `vector<Nxf32>` -> `vector<Nxbf16>`.
        let lanes = match (from.as_str(), to.as_str()) {
            ("f32", "bf16") => None,
            (f, t) if f.starts_with("vector<") && f.ends_with("xf32>") && t == f.replace("xf32>", "xbf16>") => {
                Some(f["vector<".len()..f.len() - "xf32>".len()].to_string())
            }
            _ => continue,
        };
        let of = |e: &str| match &lanes {
            Some(n) => format!("vector<{n}x{e}>"),
            None => e.to_string(),
        };
        let ty = |e: &str| ir::parse_type(ctx, &of(e)).map_err(|e| at(op, format!("rounding to bf16: {e:?}")));
        let (i32t, i16t, i1t, bf16t) = (ty("i32")?, ty("i16")?, ty("i1")?, ty("bf16")?);
        let loc = ir::op_loc(op);
        let block = unsafe { mlirOperationGetBlock(op) };
        let before = |name: &str, operands: &[MlirValue], attributes: &[(&str, String)], result: MlirType| {
            let types = [result];
            let spec = ir::OpSpec { operands, attributes, results: Some(&types), ..ir::OpSpec::new(name) };
            let new = ir::create_op(ctx, loc, &spec).map_err(|e| at(op, format!("rounding to bf16: {e:?}")))?;
            unsafe { mlirBlockInsertOwnedOperationBefore(block, op, new) };
            Ok::<MlirValue, CompileError>(unsafe { mlirOperationGetResult(new, 0) })
        };
        let constant = |v: u32| {
            let text = match &lanes {
                Some(n) => format!("dense<{v}> : vector<{n}xi32>"),
                None => format!("{v} : i32"),
            };
            before("arith.constant", &[], &[("value", text)], i32t)
        };
        let bits = before("arith.bitcast", &[x], &[], i32t)?;
        let ordered = before("arith.cmpf", &[x, x], &[("predicate", "7 : i64".into())], i1t)?; // ord
        let one_if_number = before("arith.extui", &[ordered], &[], i32t)?;
        let (zero, one, sixteen, bias) = (constant(0)?, constant(1)?, constant(16)?, constant(0x7fff)?);
        // all ones for a number, zero for a NaN
        let mask = before("arith.subi", &[zero, one_if_number], &[], i32t)?;
        let high = before("arith.shrui", &[bits, sixteen], &[], i32t)?;
        let lsb = before("arith.andi", &[high, one], &[], i32t)?;
        let round = before("arith.addi", &[lsb, bias], &[], i32t)?;
        let round = before("arith.andi", &[round, mask], &[], i32t)?;
        let rounded = before("arith.addi", &[bits, round], &[], i32t)?;
        let one_if_nan = before("arith.subi", &[one, one_if_number], &[], i32t)?;
        let twenty_two = constant(22)?;
        let quiet = before("arith.shli", &[one_if_nan, twenty_two], &[], i32t)?;
        let rounded = before("arith.ori", &[rounded, quiet], &[], i32t)?;
        let top = before("arith.shrui", &[rounded, sixteen], &[], i32t)?;
        let half = before("arith.trunci", &[top], &[], i16t)?;
        let value = before("arith.bitcast", &[half], &[], bf16t)?;
        unsafe {
            mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), value);
            mlirOperationDestroy(op);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compile killed mid-write left its temporaries (and clang's) in the
    /// cache for good: the first use of the cache in a process removes
    /// those of processes that are gone, and no other file.
    #[test]
    fn a_killed_compiles_temporaries_are_swept() {
        let dir = std::env::temp_dir().join(format!("aicf-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // (No process has a pid past the kernel's limit, 2^22.)
        let gone = "g_1.o.999999999.ThreadId1.tmp";
        let clangs = "g_2.o.999999999.ThreadId3-984a0ea3.tmp.tmp";
        let alive = format!("g_3.o.{}.ThreadId1.tmp", std::process::id());
        for name in [gone, clangs, &alive, "g_4.o", "g_4.o.hash", "odd.tmp"] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        let _cache = KernelCache::new(dir.clone());
        let mut left: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, [alive.as_str(), "g_4.o", "g_4.o.hash", "odd.tmp"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// clang failing for want of room (linking on a full tmpfs printed
    /// "final link failed: No space left on device") is the user's to fix,
    /// named at the file; other failures stay internal with clang's text.
    #[test]
    fn a_full_disk_under_clang_is_named_at_the_file() {
        let so = Path::new("/run/out/kernels.so");
        let full = b"/usr/bin/ld: final link failed: No space left on device\nclang: error: linker command failed";
        let e = tool_failure("clang", "failed to link /run/out/kernels.so", so, full).to_string();
        assert_eq!(e, "/run/out/kernels.so: No space left on device (clang failed to link /run/out/kernels.so)");
        let limited =
            b"clang: error: unable to execute command: File size limit exceeded\nclang: error: linker command \
                        failed due to signal";
        let e = tool_failure("clang", "failed to link /run/out/kernels.so", so, limited).to_string();
        assert!(e.starts_with("/run/out/kernels.so: File size limit exceeded (clang failed to link"), "{e}");
        let other = tool_failure("clang", "failed on k.ll", so, b"error: unknown type name").to_string();
        assert!(other.starts_with("internal compiler error: clang failed on k.ll:") && other.contains("unknown type"));
    }
}
