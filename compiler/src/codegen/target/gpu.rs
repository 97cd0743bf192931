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
/// (`manifest.json`, `kernels.sm_80.ptx`, `kernels.sm_90.ptx`).
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
    Ok(compile(ctx, module, ir_hash, out_dir, &Target::Cuda(*options))?.0)
}

/// NVIDIA GPUs: an element per thread for elementwise kernels, a warp per
/// row for row kernels, a block of [`REDUCE_BLOCK`] threads for a whole-op
/// reduction; GEMM and attention written whole for the GPU.
pub(crate) struct GpuTarget {
    pub(crate) options: GpuOptions,
}

impl TargetInfo for GpuTarget {
    fn name(&self) -> &'static str {
        "the GPU backend"
    }

    fn takes_16bit(&self, op: &str) -> bool {
        matches!(op, "ll.gemm" | "ll.copy" | "ll.fill")
    }

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
        let t = specs[out].1;
        let first = k.val(&format!("arith.cmpi eq, {}, %c0 : index", team.tid));
        k.line(&format!("scf.if {first} {{"));
        k.depth += 1;
        k.store(value, &format!("%b{out}"), "%c0", &flat_type(&specs[out].0, t));
        k.close();
        let shared = format!("memref<{}x{}, #gpu.address_space<workgroup>>", REDUCE_BLOCK / 32, t.mlir());
        g.finish_gpu_func(k, specs, &[("%S", shared)], [1, 1, 1], REDUCE_BLOCK as u32)
    }

    fn gemm(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels> {
        g.gpu_gemm(op, specs, &self.options)
    }

    fn attention(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        g.gpu_attention(a, specs)
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
    ) -> Result<(String, KernelStats)> {
        let started = std::time::Instant::now();
        let target = g.build_gpu(ctx, out_dir, functions)?;
        let mut stats = KernelStats { kernels: g.entries.len() + g.gpu_funcs.len(), ..KernelStats::default() };
        stats.compiled = stats.kernels;
        stats.timings.add("PTX for sm_80 and sm_90 (NVVM)", started.elapsed().as_secs_f64(), "");
        Ok((target, stats))
    }
}

/// The PTX file of `chip` in an artifact directory.
pub fn ptx_path(dir: &Path, chip: &str) -> PathBuf {
    dir.join(format!("kernels.{chip}.ptx"))
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
        .map_err(|e| internal(format!("{}: {e}", ptxas.display())))?;
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
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions { gemm_tile: None, wgmma: true }
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

    /// Wraps each row kernel in its `gpu.func` entry, lowers the module to
    /// PTX for each chip and writes it; sets each call's launch shape.
    pub(crate) fn build_gpu(
        &self,
        ctx: &CompilerContext,
        out_dir: &Path,
        functions: &mut [Function],
    ) -> Result<String> {
        // Each kernel's launch shape: the whole-op kernels' own, else one
        // thread per work item.
        let mut launch_of: HashMap<String, Launch> = HashMap::new();
        for f in functions.iter_mut() {
            for c in &mut f.calls {
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
        let mut text = String::from("module attributes {gpu.container_module} {\n  gpu.module @aicf_kernels {\n");
        // Row kernels are device functions, inlined into their entries.
        for line in self.text.lines() {
            let line = line.replacen("func.func @k", "func.func private @k", 1);
            let _ = writeln!(text, "  {line}");
        }
        for (name, count) in &self.entries {
            let types = &self.signatures[name];
            let launch = launch_of.get(name).copied().unwrap_or_else(|| row_launch(1));
            let params: Vec<String> = types.iter().enumerate().map(|(i, t)| format!("%b{i}: {t}")).collect();
            let args: Vec<String> = (0..*count).map(|i| format!("%b{i}")).collect();
            // The work item of a thread, or of its warp (a warp-per-row
            // kernel: the whole warp takes or skips the item, so its
            // shuffles see every lane).
            let item = if self.warp_rows.contains(name) {
                "%thread = arith.addi %first, %tid : index\n      %c32 = arith.constant 32 : index\n      \
                 %item = arith.divui %thread, %c32 : index"
            } else {
                "%item = arith.addi %first, %tid : index"
            };
            let _ = write!(
                text,
                "    gpu.func @aicf_{name}(%work: index, {params}) kernel attributes \
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
                 \x20       func.call @{name}(%item, %next, {args}) : (index, index, {types}) -> ()\n\
                 \x20     }}\n\
                 \x20     gpu.return\n\
                 \x20   }}\n",
                params = params.join(", "),
                b = launch.block[0],
                g = launch.grid[0],
                args = args.join(", "),
                types = types.join(", "),
                item = item,
            );
        }
        let libdevice = libdevice()?;
        for chip in CHIPS {
            // Kernels with a Hopper form (wgmma) take it in the sm_90 build.
            let mut text = text.clone();
            for (name, func) in &self.gpu_funcs {
                text.push_str(self.hopper.get(name).filter(|_| chip == HOPPER).unwrap_or(func));
            }
            text.push_str("  }\n}\n");
            let mut module = self.parse_kernels(ctx, &text)?;
            let pipeline = crate::pipeline::gpu_kernels_to_ptx(&ptx_target(chip), &libdevice);
            crate::run_pipeline(ctx, &mut module, &pipeline)?;
            let ptx = binary_text(&module)?;
            write_atomically(&ptx_path(out_dir, chip), ptx.as_bytes())?;
        }
        Ok(format!("cuda {}", CHIPS.join(" ")))
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
