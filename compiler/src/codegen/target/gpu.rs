//! GPU kernel generation: a planned `ll` module becomes PTX for sm_80 and
//! sm_90 and a manifest whose calls carry their launch shapes.
//!
//! The kernels are the CPU generator's, placed in a `gpu.module`: a row
//! kernel (`kN(begin, end, buffers...)`, see `emit.rs`) becomes a private
//! device function called by a `gpu.func` entry that runs work item
//! `blockIdx.x * B + threadIdx.x` (one work item per thread; elementwise
//! kernels count elements, not rows, so neighbouring threads touch
//! neighbouring addresses). Row kernels written with [`Kernel::rows`]
//! (softmax, norms and their gradients) run a warp per work item instead:
//! entry `(blockIdx.x * B + threadIdx.x) / 32`, columns split over the lanes,
//! row reductions by xor shuffles. GEMM is written for the GPU directly: a
//! tile of the output per block staged through shared memory, a register
//! block per thread (f32) or tensor-core fragments (f16/bf16), and the
//! fused epilogue (bias, activation, mask, residual, accumulate) applied
//! before the one store.
//!
//! Lowering: `inline`, `nvvm-attach-target` (libdevice linked for `math`),
//! `convert-gpu-to-nvvm` with bare pointers, `gpu-module-to-binary{format=isa}`;
//! the PTX is read from the `gpu.binary` object. Launch shapes are the
//! generator's (the `known_block_size`/`known_grid_size` attributes of each
//! `gpu.func`), written to the manifest, never read back from PTX.
//!
//! Every entry takes `(i64 work, ptr buffer0, ...)`.

use crate::codegen::prelude::*;

/// Chips the PTX is generated for (PTX ISA 8.0; the driver JIT-compiles
/// sm_80 PTX for later chips too).
pub(crate) const CHIPS: [&str; 2] = ["sm_80", "sm_90"];

/// The chip whose PTX may use Hopper's own instructions (wgmma): it is
/// built for `sm_90a`, which runs on sm_90 devices only.
pub(crate) const HOPPER: &str = "sm_90";

/// The PTX target a chip's kernels are built for.
pub(crate) fn ptx_target(chip: &str) -> String {
    if chip == HOPPER { format!("{chip}a") } else { chip.to_string() }
}

/// Alignment in bytes of every shared-memory buffer.
pub(crate) const SHARED_ALIGN: usize = 16;

/// Threads per block of a row kernel.
pub(crate) const ROW_BLOCK: u64 = 256;

/// Threads of the one block of a whole-op reduction (cross-entropy).
pub(crate) const REDUCE_BLOCK: usize = 1024;

/// The sum over the block's threads of each thread's `part` (thread `tid`):
/// each warp's sum by xor shuffles, then the warps' sums through workgroup
/// memory `%S` (REDUCE_BLOCK / 32 elements); every thread gets the total.
/// Ends with a barrier, so `%S` can be used again.
pub(crate) fn block_sum(k: &mut Kernel, tid: &str, part: &str, t: DType) -> String {
    let warps = REDUCE_BLOCK / 32;
    let ty = format!("memref<{warps}x{}, #gpu.address_space<workgroup>>", t.mlir());
    let warp_total = k.shuffle_all(part, "addf", t);
    let width = k.index(32);
    let lane = k.val(&format!("arith.remui {tid}, {width} : index"));
    let warp = k.val(&format!("arith.divui {tid}, {width} : index"));
    let first = k.val(&format!("arith.cmpi eq, {lane}, %c0 : index"));
    k.line(&format!("scf.if {first} {{"));
    k.depth += 1;
    k.store(&warp_total, "%S", &warp, &ty);
    k.close();
    k.line("gpu.barrier");
    let zero = k.float(0.0, t);
    let n = k.index(warps);
    let (i, acc, total) = k.open_reduce("%c0", &n, &zero, t.mlir());
    let v = k.load("%S", &i, &ty);
    let s = k.fop("addf", &acc, &v, t);
    k.close_with(&s, t.mlir());
    k.line("gpu.barrier");
    total
}

/// Compiles the planned `module` for NVIDIA GPUs into `out_dir`
/// (`manifest.json` and the PTX modules it lists for sm_80 and sm_90).
pub fn compile_gpu(ctx: &CompilerContext, module: &Module<'_>, ir_hash: &str, out_dir: &Path) -> Result<Manifest> {
    compile_gpu_with(ctx, module, ir_hash, out_dir, &GpuOptions::default())
}

/// [`compile_gpu`] with `options`.
pub fn compile_gpu_with(
    ctx: &CompilerContext,
    module: &Module<'_>,
    ir_hash: &str,
    out_dir: &Path,
    options: &GpuOptions,
) -> Result<Manifest> {
    Ok(compile(ctx, module, ir_hash, "", out_dir, &Target::Cuda(*options))?.0)
}

/// NVIDIA GPUs: an element per thread for elementwise kernels, a warp per
/// row for row kernels, a block of [`REDUCE_BLOCK`] threads for a whole-op
/// reduction; GEMM and attention written whole for the GPU.
pub(crate) struct GpuTarget {
    pub(crate) options: GpuOptions,
}

impl TargetInfo for GpuTarget {
    fn row_kernel(&self) -> Kernel {
        let mut k = Kernel::new();
        k.lane = Some(k.val("gpu.lane_id"));
        k
    }

    fn elementwise_item(&self, k: &mut Kernel, cols: usize) -> (String, Option<String>) {
        let e = k.open("%begin", "%end");
        let cols_c = k.index(cols);
        let row = k.val(&format!("arith.divui {e}, {cols_c} : index"));
        (row, Some(e))
    }

    fn team(&self, k: &mut Kernel) -> Team {
        let tid = k.val("gpu.thread_id x");
        let step = k.index(REDUCE_BLOCK);
        let width = k.index(32);
        let warp = k.val(&format!("arith.divui {tid}, {width} : index"));
        let warps = k.index(REDUCE_BLOCK / 32);
        Team { tid, step, warp, warps }
    }

    fn team_sum(&self, k: &mut Kernel, team: &Team, part: &str, t: DType) -> String {
        block_sum(k, &team.tid, part, t)
    }

    fn team_total(&self, k: &mut Kernel, team: &Team, warp_total: &str, t: DType) -> String {
        // Every lane holds its warp's total: lane 0's counts.
        let part = match k.lane.clone() {
            Some(lane) => {
                let zero = k.float(0.0, t);
                let first = k.val(&format!("arith.cmpi eq, {lane}, %c0 : index"));
                k.val(&format!("arith.select {first}, {warp_total}, {zero} : {}", t.mlir()))
            }
            None => warp_total.to_string(),
        };
        block_sum(k, &team.tid, &part, t)
    }

    fn finish_team(
        &self,
        g: &mut Generator,
        mut k: Kernel,
        team: &Team,
        value: &str,
        out: usize,
        specs: &[(Vec<usize>, DType)],
    ) -> String {
        let t = compute(specs[out].1);
        let first = k.val(&format!("arith.cmpi eq, {}, %c0 : index", team.tid));
        k.line(&format!("scf.if {first} {{"));
        k.depth += 1;
        k.store(value, &format!("%b{out}"), "%c0", &flat_type(&specs[out].0, specs[out].1));
        k.close();
        let shared = format!("memref<{}x{}, #gpu.address_space<workgroup>>", REDUCE_BLOCK / 32, t.mlir());
        g.finish_gpu_func(k, specs, &[("%S", shared)], [1, 1, 1], REDUCE_BLOCK as u32)
    }

    fn atomic_scatter(&self) -> bool {
        true
    }

    fn reduce_columns(&self, g: &mut Generator, r: ColumnReduce, specs: &[(Vec<usize>, DType)]) -> Option<Kernels> {
        // A few rows per output: a thread per output reads them at once.
        (r.rows >= 64 && r.cols > 0).then(|| g.gpu_reduce_columns(r, specs))
    }

    fn reduce_whole_split(
        &self,
        g: &mut Generator,
        n: usize,
        mean: bool,
        p: usize,
        specs: &[(Vec<usize>, DType)],
    ) -> Option<Kernels> {
        Some(g.gpu_reduce_whole_split(n, mean, p, specs))
    }

    fn gemm(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels> {
        g.gpu_gemm(op, specs, &self.options)
    }

    fn attention(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        if self.options.tensor_core_attention && crate::codegen::ops::flash::tensor_core_attention(a, specs) {
            return g.gpu_attention_tc(a, specs, self.options.attention_tile.unwrap_or(AttentionTile::DEFAULT), false);
        }
        g.gpu_attention(a, specs)
    }

    fn attention_backward(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        if self.options.tensor_core_attention
            && crate::codegen::ops::flash::tensor_core_attention(a, specs)
            && a.scale > 0.0
        {
            let tile = self.options.attention_tile.unwrap_or(AttentionTile::DEFAULT);
            return g.gpu_attention_backward_tc(a, specs, tile);
        }
        g.attention_backward_rows(a, specs)
    }

    fn norm_backward(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        g.norm_backward_atomic(op, specs)
    }

    fn build(
        &self,
        g: &Generator,
        ctx: &CompilerContext,
        out_dir: &Path,
        functions: &mut [Function],
    ) -> Result<(String, KernelStats, BTreeMap<String, Vec<String>>)> {
        let cache = KernelCache::new(KernelCache::default_dir(out_dir));
        g.build_gpu(ctx, out_dir, functions, &cache)
    }
}

/// The PTX file of `chip` in an artifact directory.
pub fn ptx_files(dir: &Path, chip: &str) -> Result<Vec<PathBuf>> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| internal(format!("{}: not a manifest: {e}", path.display())))?;
    Ok(manifest.ptx_files(chip).into_iter().map(|f| dir.join(f)).collect())
}

/// `ptxas`: `$AICF_PTXAS`, the project's `.venv/bin/ptxas` (`make setup`
/// installs it from the nvidia-cuda-nvcc wheel), or the one on `PATH`.
pub fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AICF_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = repo.join(".venv/bin/ptxas");
    if venv.exists() {
        return Some(venv);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("ptxas")).find(|p| p.exists())
}

/// Assembles `ptx` with `ptxas -arch=chip` (output discarded): invalid PTX
/// is an error holding ptxas's message.
pub fn validate_ptx(ptx: &Path, chip: &str) -> Result<()> {
    let ptxas = ptxas().ok_or_else(|| internal("ptxas not found (run `make setup`, or set AICF_PTXAS)"))?;
    let out = std::env::temp_dir().join(format!("aicf-ptxas-{}-{chip}.cubin", std::process::id()));
    let output = std::process::Command::new(&ptxas)
        .arg(format!("-arch={}", ptx_target(chip)))
        .arg(ptx)
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|e| io_error(&ptxas, e))?;
    let _ = std::fs::remove_file(&out);
    if !output.status.success() {
        return Err(internal(format!(
            "ptxas -arch={} rejects {}:\n{}",
            ptx_target(chip),
            ptx.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// libdevice (the CUDA math library as LLVM bitcode, which `math` ops
/// lower to): `$AICF_LIBDEVICE`, the nvidia-cuda-nvcc wheel in the
/// project's `.venv`, or a CUDA installation.
pub(crate) fn libdevice() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("AICF_LIBDEVICE") {
        return Ok(PathBuf::from(p));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut candidates = vec![PathBuf::from("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc")];
    if let Ok(dir) = std::fs::read_dir(repo.join(".venv/lib")) {
        for python in dir.flatten() {
            candidates.push(python.path().join("site-packages/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc"));
        }
    }
    candidates
        .into_iter()
        .find(|p| p.exists())
        .ok_or_else(|| internal("libdevice.10.bc not found (run `make setup`, or set AICF_LIBDEVICE)"))
}

pub(crate) fn row_launch(work: u64) -> Launch {
    let block = ROW_BLOCK.min(work.div_ceil(32) * 32).max(32);
    Launch { grid: [work.div_ceil(block).max(1) as u32, 1, 1], block: [block as u32, 1, 1], shared_bytes: 0 }
}

/// A warp-per-row kernel's launch: 32 threads per work item.
pub(crate) fn warp_launch(work: u64) -> Launch {
    row_launch(work * 32)
}

/// Options of the GPU code generator.
#[derive(Clone, Copy, Debug)]
pub struct GpuOptions {
    /// The tiling of every tensor-core GEMM, in place of the shape's
    /// default (for tuning).
    pub gemm_tile: Option<TensorCoreTile>,
    /// Whether 128 x 256 tensor-core GEMMs take Hopper's warpgroup MMA
    /// (`wgmma`) in the sm_90 build, rather than `mma.sync`.
    pub wgmma: bool,
    /// Whether attention on f16/bf16 operands (head sizes multiples of 16
    /// up to 128) runs on the tensor cores (`gpu_attention_tc`) rather
    /// than the f32 CUDA-core kernel.
    pub tensor_core_attention: bool,
    /// The tiling of the tensor-core attention, in place of
    /// [`AttentionTile::DEFAULT`] (for tuning).
    pub attention_tile: Option<AttentionTile>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions { gemm_tile: None, wgmma: true, tensor_core_attention: true, attention_tile: None }
    }
}

impl Generator {
    /// Appends kernel `kN`, written whole for the GPU, as a `gpu.func` with
    /// `workgroup` memory, launched on `grid` blocks of `block` threads.
    pub(crate) fn finish_gpu_func(
        &mut self,
        k: Kernel,
        specs: &[(Vec<usize>, DType)],
        workgroup: &[(&str, String)],
        grid: [u32; 3],
        block: u32,
    ) -> String {
        let text = gpu_func_text("KERNEL", &k, specs, workgroup, grid, block);
        self.dedup("aicf_KERNEL", &text, |g, name| {
            g.gpu_funcs.push((name.to_string(), text.replacen("@aicf_KERNEL(", &format!("@aicf_{name}("), 1)));
            g.launches.insert(name.to_string(), Launch { grid, block: [block, 1, 1], shared_bytes: 0 });
        })
    }

    /// Wraps each row kernel in its `gpu.func` entry and writes the PTX of
    /// every kernel for each chip; sets each call's kernel name and launch
    /// shape. Kernels are named by their content and their PTX comes from
    /// the kernel cache where an earlier build (another model, the model
    /// before a rewrite) compiled them: only the missing ones go through
    /// NVVM, in one module per chip. The artifact holds the PTX modules its
    /// kernels are in (`<module>.ptx`, listed per chip in the manifest).
    pub(crate) fn build_gpu(
        &self,
        ctx: &CompilerContext,
        out_dir: &Path,
        functions: &mut [Function],
        cache: &KernelCache,
    ) -> Result<(String, KernelStats, BTreeMap<String, Vec<String>>)> {
        // Each kernel's launch shape: the whole-op kernels' own, else one
        // thread per work item.
        let mut launch_of: HashMap<String, Launch> = HashMap::new();
        for f in functions.iter_mut() {
            for c in f.calls.iter_mut().filter(|c| c.collective.is_none()) {
                let name = c.symbol.trim_start_matches("aicf_");
                let launch = match self.launches.get(name) {
                    Some(l) => *l,
                    None if self.warp_rows.contains(name) => warp_launch(c.work),
                    None => row_launch(c.work),
                };
                c.launch = Some(launch);
                launch_of.insert(name.to_string(), launch);
            }
        }
        let units = self.gpu_units(&launch_of);
        // Calls name their kernel by its content.
        let renamed: HashMap<String, String> = units.iter().map(|u| (u.name.clone(), u.symbol.clone())).collect();
        for c in functions.iter_mut().flat_map(|f| f.calls.iter_mut()) {
            if let Some(new) = c.symbol.strip_prefix("aicf_").and_then(|k| renamed.get(k)) {
                c.symbol = new.clone();
            }
        }
        let libdevice = libdevice()?;
        let mut stats = KernelStats { kernels: units.len(), ..KernelStats::default() };
        let mut modules = BTreeMap::new();
        for chip in CHIPS {
            let started = std::time::Instant::now();
            let pipeline = crate::pipeline::gpu_kernels_to_ptx(&ptx_target(chip), &libdevice);
            // A unit's PTX for this chip: its text and the lowering.
            let keys: Vec<String> = units
                .iter()
                .map(|u| artifact::ir_hash(&format!("{pipeline}\n{}\n{}", u.bodies_text(self), u.text(chip))))
                .collect();
            let module_of = |key: &str| {
                let module = cache.read(&format!("{key}.ptxmod")).map(|m| m.trim().to_string())?;
                cache.intact(&format!("{module}.ptx")).then_some(module)
            };
            let missing: Vec<usize> = (0..units.len()).filter(|&i| module_of(&keys[i]).is_none()).collect();
            let mut needed: Vec<String> = Vec::new();
            let mut members: HashMap<String, usize> = HashMap::new();
            for (i, key) in keys.iter().enumerate() {
                if let Some(m) = module_of(key) {
                    *members.entry(m.clone()).or_default() += 1;
                    if !needed.contains(&m) {
                        needed.push(m);
                    }
                } else if !missing.contains(&i) {
                    return Err(internal(format!(
                        "kernel {} lost its PTX module in {}",
                        units[i].symbol,
                        cache.dir().display()
                    )));
                }
            }
            // Cached modules that hold mostly other models' kernels would
            // bloat this artifact: then its cached kernels are compiled
            // again, with the missing ones, into a module of its own.
            let held: usize = needed
                .iter()
                .map(|m| cache.read(&format!("{m}.count")).and_then(|c| c.trim().parse().ok()).unwrap_or(0))
                .sum();
            let repack = !needed.is_empty() && held > 2 * units.len() + 16;
            let compile: Vec<usize> = if repack { (0..units.len()).collect() } else { missing.clone() };
            if !compile.is_empty() {
                let module = self.compile_units(ctx, chip, &pipeline, &units, &compile)?;
                let name = format!(
                    "ptx_{}_{chip}",
                    artifact::ir_hash(&compile.iter().map(|&i| keys[i].as_str()).collect::<Vec<_>>().join(" "))
                );
                cache.write(&format!("{name}.ptx"), module.as_bytes())?;
                cache.seal(&format!("{name}.ptx"))?;
                cache.write(&format!("{name}.count"), compile.len().to_string().as_bytes())?;
                for &i in &compile {
                    cache.write(&format!("{}.ptxmod", keys[i]), name.as_bytes())?;
                }
                if repack {
                    needed.clear();
                }
                needed.push(name);
            }
            stats.compiled = stats.compiled.max(compile.len());
            for m in &needed {
                let from = cache.dir().join(format!("{m}.ptx"));
                let to = out_dir.join(format!("{m}.ptx"));
                let bytes = std::fs::read(&from).map_err(|e| io_error(&from, e))?;
                write_atomically(&to, &bytes)?;
            }
            stats.timings.add(
                &format!("PTX for {chip} (NVVM)"),
                started.elapsed().as_secs_f64(),
                format!("{} of {} kernels compiled, {} modules", compile.len(), units.len(), needed.len()),
            );
            modules.insert(chip.to_string(), needed.iter().map(|m| format!("{m}.ptx")).collect());
        }
        Ok((format!("cuda {}", CHIPS.join(" ")), stats, modules))
    }

    /// The kernels as units of the PTX cache: each row kernel with its
    /// `gpu.func` entry, each kernel written whole, named by content.
    fn gpu_units(&self, launch_of: &HashMap<String, Launch>) -> Vec<Unit> {
        let mut units = Vec::new();
        for (name, count) in &self.entries {
            let types = &self.signatures[name];
            let launch = launch_of.get(name).copied().unwrap_or_else(|| row_launch(1));
            let warp = self.warp_rows.contains(name);
            let key = format!("{} {launch:?} {warp}", self.kernel_keys.get(name).map_or("", String::as_str));
            let hash = artifact::ir_hash(&key);
            let device = self.kernel_texts.get(name).cloned().unwrap_or_default();
            let device = device.replacen(&format!("func.func @{name}("), &format!("func.func private @k_{hash}("), 1);
            let entry = row_entry(&hash, *count, types, launch, warp);
            units.push(Unit {
                name: name.clone(),
                symbol: format!("aicf_{hash}"),
                texts: [format!("{device}{entry}"), format!("{device}{entry}")],
                bodies: self.bodies_of(&device),
            });
        }
        for (name, func) in &self.gpu_funcs {
            let hopper = self.hopper.get(name).unwrap_or(func);
            let key = format!("{} {func} {hopper}", self.kernel_keys.get(name).map_or("", String::as_str));
            let hash = artifact::ir_hash(&key);
            let rename =
                |t: &str| t.replacen(&format!("gpu.func @aicf_{name}("), &format!("gpu.func @aicf_{hash}("), 1);
            let texts = [rename(func), rename(hopper)];
            let bodies = self.bodies_of(&texts[0]);
            units.push(Unit { name: name.clone(), symbol: format!("aicf_{hash}"), texts, bodies });
        }
        units
    }

    /// The body declarations a kernel's text calls.
    fn bodies_of(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("@body") {
            let from = &rest[at + 1..];
            let end = from.find('(').unwrap_or(from.len());
            let name = from[..end].to_string();
            if !out.contains(&name) {
                out.push(name);
            }
            rest = &from[end..];
        }
        out
    }

    /// Lowers units `which` to PTX for `chip` in one module.
    fn compile_units(
        &self,
        ctx: &CompilerContext,
        chip: &str,
        pipeline: &str,
        units: &[Unit],
        which: &[usize],
    ) -> Result<String> {
        let mut text = String::from("module attributes {gpu.container_module} {\n  gpu.module @aicf_kernels {\n");
        let mut bodies: Vec<(String, MlirOperation)> = Vec::new();
        for &i in which {
            for b in &units[i].bodies {
                if bodies.iter().any(|(n, _)| n == b) {
                    continue;
                }
                let op = self.bodies.iter().find(|(n, _)| n == b).map(|(_, op)| *op);
                let decl = self.body_decls.get(b);
                let (Some(op), Some(decl)) = (op, decl) else {
                    return Err(internal(format!("a GPU kernel calls @{b}, which was never declared")));
                };
                let _ = write!(text, "  {decl}");
                bodies.push((b.clone(), op));
            }
        }
        for &i in which {
            for line in units[i].text(chip).lines() {
                let _ = writeln!(text, "  {line}");
            }
        }
        text.push_str("  }\n}\n");
        let mut module = self.parse_kernels_with(ctx, &text, &bodies, true)?;
        crate::run_pipeline(ctx, &mut module, pipeline)?;
        binary_text(&module)
    }
}

/// The `gpu.func` of kernel `name` (body `k`, buffers `specs`), with
/// `workgroup` memory, for `grid` blocks of `block` threads.
pub(crate) fn gpu_func_text(
    name: &str,
    k: &Kernel,
    specs: &[(Vec<usize>, DType)],
    workgroup: &[(&str, String)],
    grid: [u32; 3],
    block: u32,
) -> String {
    let params: Vec<String> =
        specs.iter().enumerate().map(|(i, (s, t))| format!("%b{i}: {}", flat_type(s, *t))).collect();
    // 16-byte aligned: cp.async, ldmatrix and vector loads need it (the
    // default is the element's alignment).
    let shared: Vec<String> =
        workgroup.iter().map(|(n, t)| format!("{n} : {t} {{llvm.align = {SHARED_ALIGN} : i64}}")).collect();
    let workgroup = if shared.is_empty() { String::new() } else { format!(" workgroup({})", shared.join(", ")) };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "    gpu.func @aicf_{name}(%work: index, {}){workgroup} kernel attributes \
         {{known_block_size = array<i32: {block}, 1, 1>, known_grid_size = array<i32: {}, {}, {}>}} {{",
        params.join(", "),
        grid[0],
        grid[1],
        grid[2]
    );
    let _ = writeln!(text, "      %c0 = arith.constant 0 : index\n      %c1 = arith.constant 1 : index");
    for line in k.text.lines() {
        let _ = writeln!(text, "  {line}");
    }
    let _ = writeln!(text, "      gpu.return\n    }}");
    text
}

/// A kernel of the PTX cache: the generator's name for it, the symbol it
/// is compiled under (its content hash), its text for sm_80 and for sm_90
/// (a Hopper form where it has one), and the bodies it calls.
struct Unit {
    name: String,
    symbol: String,
    texts: [String; 2],
    bodies: Vec<String>,
}

impl Unit {
    fn text(&self, chip: &str) -> &str {
        if chip == HOPPER { &self.texts[1] } else { &self.texts[0] }
    }

    /// What the unit's bodies compute, for its cache key.
    fn bodies_text(&self, g: &Generator) -> String {
        self.bodies.iter().map(|b| g.body_keys.get(b).map_or("", String::as_str)).collect::<Vec<_>>().join(" ")
    }
}

/// The `gpu.func` entry of row kernel `k_<hash>`: work item `blockIdx.x *
/// B + threadIdx.x`, or with `warp` that over 32 (the whole warp takes or
/// skips an item, so its shuffles see every lane).
fn row_entry(hash: &str, count: usize, types: &[String], launch: Launch, warp: bool) -> String {
    let params: Vec<String> = types.iter().enumerate().map(|(i, t)| format!("%b{i}: {t}")).collect();
    let args: Vec<String> = (0..count).map(|i| format!("%b{i}")).collect();
    let item = if warp {
        "%thread = arith.addi %first, %tid : index\n      %c32 = arith.constant 32 : index\n      \
         %item = arith.divui %thread, %c32 : index"
    } else {
        "%item = arith.addi %first, %tid : index"
    };
    format!(
        "    gpu.func @aicf_{hash}(%work: index, {params}) kernel attributes \
         {{known_block_size = array<i32: {b}, 1, 1>, known_grid_size = array<i32: {g}, 1, 1>}} {{\n\
         \x20     %bid = gpu.block_id x\n\
         \x20     %tid = gpu.thread_id x\n\
         \x20     %block = arith.constant {b} : index\n\
         \x20     %first = arith.muli %bid, %block : index\n\
         \x20     {item}\n\
         \x20     %live = arith.cmpi ult, %item, %work : index\n\
         \x20     scf.if %live {{\n\
         \x20       %one = arith.constant 1 : index\n\
         \x20       %next = arith.addi %item, %one : index\n\
         \x20       func.call @k_{hash}(%item, %next, {args}) : (index, index, {types}) -> ()\n\
         \x20     }}\n\
         \x20     gpu.return\n\
         \x20   }}\n",
        params = params.join(", "),
        b = launch.block[0],
        g = launch.grid[0],
        args = args.join(", "),
        types = types.join(", "),
    )
}

/// The PTX of the (one) `gpu.binary` object in `module`.
pub(crate) fn binary_text(module: &Module<'_>) -> Result<String> {
    let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module.as_operation().to_raw(), 0)) };
    let binary = ops_of(top)
        .into_iter()
        .find(|&o| op_name(o) == "gpu.binary")
        .ok_or_else(|| internal("gpu-module-to-binary left no gpu.binary"))?;
    let objects = attr(binary, "objects");
    unsafe {
        if mlirArrayAttrGetNumElements(objects) != 1 {
            return Err(internal("expected one object in the gpu.binary"));
        }
        let object = mlirArrayAttrGetElement(objects, 0);
        if !mlirAttributeIsAGPUObjectAttr(object) {
            return Err(internal("the gpu.binary holds no #gpu.object"));
        }
        let s = mlirGPUObjectAttrGetObject(object);
        let bytes = std::slice::from_raw_parts(s.data as *const u8, s.length);
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}
