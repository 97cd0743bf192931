//! GPU kernel generation: a planned `ll` module becomes PTX for sm_80 and
//! sm_90 and a manifest whose calls carry their launch shapes.
//!
//! The kernels are the CPU generator's, placed in a `gpu.module`: a row
//! kernel (`kN(begin, end, buffers...)`, see `cpu.rs`) becomes a private
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

use super::*;
use aicf_runtime::artifact::Launch;
use std::path::PathBuf;

/// Chips the PTX is generated for (PTX ISA 8.0; the driver JIT-compiles
/// sm_80 PTX for later chips too).
const CHIPS: [&str; 2] = ["sm_80", "sm_90"];
/// The chip whose PTX may use Hopper's own instructions (wgmma): it is
/// built for `sm_90a`, which runs on sm_90 devices only.
const HOPPER: &str = "sm_90";

/// The PTX target a chip's kernels are built for.
fn ptx_target(chip: &str) -> String {
    if chip == HOPPER { format!("{chip}a") } else { chip.to_string() }
}

/// Alignment in bytes of every shared-memory buffer.
const SHARED_ALIGN: usize = 16;

/// Threads per block of a row kernel.
const ROW_BLOCK: u64 = 256;

/// Threads of the one block of a whole-op reduction (cross-entropy).
pub(super) const REDUCE_BLOCK: usize = 1024;

/// The sum over the block's threads of each thread's `part` (thread `tid`):
/// each warp's sum by xor shuffles, then the warps' sums through workgroup
/// memory `%S` (REDUCE_BLOCK / 32 elements); every thread gets the total.
/// Ends with a barrier, so `%S` can be used again.
pub(super) fn block_sum(k: &mut Kernel, tid: &str, part: &str, t: DType) -> String {
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
    Ok(compile_gpu_timed(ctx, module, ir_hash, out_dir, options)?.0)
}

/// [`compile_gpu_with`], also saying how long each stage took.
pub fn compile_gpu_timed(
    ctx: &CompilerContext,
    module: &Module<'_>,
    ir_hash: &str,
    out_dir: &Path,
    options: &GpuOptions,
) -> Result<(Manifest, super::KernelStats)> {
    if let Some(tile) = options.gemm_tile {
        tile.check().map_err(|e| CompileError::Unsupported(format!("the GEMM tile option: {e}")))?;
    }
    compile(ctx, module, ir_hash, out_dir, None, *options)
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
fn libdevice() -> Result<PathBuf> {
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

fn row_launch(work: u64) -> Launch {
    let block = ROW_BLOCK.min(work.div_ceil(32) * 32).max(32);
    Launch { grid: [work.div_ceil(block).max(1) as u32, 1, 1], block: [block as u32, 1, 1], shared_bytes: 0 }
}

/// A warp-per-row kernel's launch: 32 threads per work item.
fn warp_launch(work: u64) -> Launch {
    row_launch(work * 32)
}

/// Where a GEMM block's output tile lies: its first row and column, the
/// batch's offsets into A, B and the output (block z is batch z), and the
/// sizes as index constants.
#[derive(Clone)]
struct Tile {
    row0: String,
    col0: String,
    a_base: String,
    b_base: String,
    o_base: String,
    mc: String,
    kc: String,
    nc: String,
}

impl Tile {
    /// Block (x, y, z) computes the `bm x bn` tile at column tile x, row tile y.
    fn of(k: &mut Kernel, bm: usize, bn: usize, m: usize, kk: usize, n: usize, batched: bool) -> Tile {
        let bx = k.val("gpu.block_id x");
        let by = k.val("gpu.block_id y");
        let bz = k.val("gpu.block_id z");
        let row0 = k.mad(&by, bm, "%c0");
        let col0 = k.mad(&bx, bn, "%c0");
        let (a_base, b_base) = if batched {
            (k.mad(&bz, m * kk, "%c0"), k.mad(&bz, kk * n, "%c0"))
        } else {
            ("%c0".to_string(), "%c0".to_string())
        };
        let o_base = k.mad(&bz, m * n, "%c0");
        let (mc, kc, nc) = (k.index(m), k.index(kk), k.index(n));
        Tile { row0, col0, a_base, b_base, o_base, mc, kc, nc }
    }

    /// Of A's and B's tiles at k offset `kt`, in their stored layouts: the
    /// corner's row and column, the rows and columns of the matrix, and its
    /// row stride.
    #[allow(clippy::type_complexity)]
    fn corners<'a>(&'a self, l: &GemmLayout, kt: &'a str) -> [(&'a str, &'a str, &'a str, &'a str, usize); 2] {
        let Tile { row0, col0, mc, kc, nc, .. } = self;
        let (m, kk, n) = (l.m, l.kk, l.n);
        [
            if l.ta { (kt, row0, kc, mc, m) } else { (row0, kt, mc, kc, kk) },
            if l.tb { (col0, kt, nc, kc, kk) } else { (kt, col0, kc, nc, n) },
        ]
    }
}

/// How a tensor-core GEMM is tiled: `warps_m x warps_n` warps per block,
/// each owning `16 frags_m x 16 frags_n` of the output; tiles of `bk`
/// along k copied into shared memory `stages` deep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorCoreTile {
    pub warps_m: usize,
    pub warps_n: usize,
    pub frags_m: usize,
    pub frags_n: usize,
    pub bk: usize,
    pub stages: usize,
}

impl TensorCoreTile {
    /// The tiling for an `m x n` output (`batch` of them): 128 x 256 blocks
    /// of 8 warps (64 x 64 each) when they fill the GPU's 132
    /// multiprocessors, else 128 x 128 of 4, else 64 x 64 of 4 (32 x 32).
    pub fn for_shape(m: usize, n: usize, batch: usize) -> TensorCoreTile {
        let tiles = |bm: usize, bn: usize| m.div_ceil(bm) * n.div_ceil(bn) * batch;
        let (warps_m, warps_n, frags_m, frags_n) = if tiles(128, 256) >= 132 {
            (2, 4, 4, 4)
        } else if tiles(128, 128) >= 132 {
            (2, 2, 4, 4)
        } else {
            (2, 2, 2, 2)
        };
        TensorCoreTile { warps_m, warps_n, frags_m, frags_n, bk: 32, stages: 4 }
    }

    /// The block's output tile, rows x columns.
    pub fn block(&self) -> (usize, usize) {
        (16 * self.warps_m * self.frags_m, 16 * self.warps_n * self.frags_n)
    }

    pub fn threads(&self) -> usize {
        32 * self.warps_m * self.warps_n
    }

    /// Shared memory per stage (rows, columns, padded row length, elements)
    /// of A's tile, then of B's, each in its stored layout.
    #[allow(clippy::type_complexity)]
    fn shared_layout(&self, ta: bool, tb: bool) -> (usize, usize, usize, usize, usize, usize, usize, usize) {
        let ((bm, bn), bk) = (self.block(), self.bk);
        let (a_rows, a_cols) = if ta { (bk, bm) } else { (bm, bk) };
        let (b_rows, b_cols) = if tb { (bn, bk) } else { (bk, bn) };
        let (a_ld, b_ld) = (a_cols + 8, b_cols + 8);
        (a_rows, a_cols, a_ld, a_rows * a_ld, b_rows, b_cols, b_ld, b_rows * b_ld)
    }

    /// Bytes of shared memory the block takes, for 16-bit operands.
    pub fn shared_bytes(&self, ta: bool, tb: bool) -> usize {
        let (.., a_stage, _, _, _, b_stage) = self.shared_layout(ta, tb);
        2 * self.stages * (a_stage + b_stage)
    }

    /// Whether the kernel can be built this way: whole 16-byte chunks of
    /// each tile for every thread, at least two stages, bk a multiple of 16
    /// and the shared memory within an H100's 227 KiB per block.
    pub fn check(&self) -> std::result::Result<(), String> {
        let (bm, bn) = self.block();
        let threads = self.threads();
        let parts = [self.warps_m, self.warps_n, self.frags_m, self.frags_n, self.bk, self.stages];
        if parts.contains(&0) || !self.bk.is_multiple_of(16) || self.stages < 2 || threads > 1024 {
            return Err(format!("{self:?}: bk must be a multiple of 16, at least 2 stages, at most 32 warps"));
        }
        if !(bm * self.bk / 8).is_multiple_of(threads) || !(self.bk * bn / 8).is_multiple_of(threads) {
            return Err(format!("{self:?}: a {bm}x{bn}x{} tile is not whole 16-byte chunks per thread", self.bk));
        }
        let most = (0..4).map(|t| self.shared_bytes(t & 1 == 1, t & 2 == 2)).max().unwrap_or(0);
        if most > 227 * 1024 {
            return Err(format!("{self:?}: {most} bytes of shared memory, over 227 KiB"));
        }
        Ok(())
    }
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

/// Tiles along k of the wgmma GEMM: one 128-byte swizzle row of 16-bit
/// elements.
const WGMMA_BK: usize = 64;
/// Shared-memory stages of the wgmma GEMM (48 KiB each), within the 163
/// KiB an A100 block may take, since the sm_80 kernel shares the launch.
const WGMMA_STAGES: usize = 3;

/// Query rows per block of the fused attention (a thread each).
const ATTENTION_QUERIES: usize = 64;
/// Keys per shared-memory tile of the fused attention.
const ATTENTION_KEYS: usize = 32;

impl Generator {
    /// Fused attention, FlashAttention-style: block (b, tile) takes
    /// [`ATTENTION_QUERIES`] query rows of batch b, a thread each, and walks
    /// the keys in tiles of [`ATTENTION_KEYS`]: the block copies a tile's
    /// key and value rows into shared memory (coalesced, every thread
    /// reading the same key then, so a broadcast), and each thread folds
    /// those keys into its row's online softmax, its query row and output
    /// accumulator in registers. Scores never reach memory. Causal blocks
    /// stop at the tile past their last row, and each thread at its own
    /// row. Threads past the last row compute the last row again and store
    /// nothing, so every thread takes part in each copy and barrier.
    pub(super) fn gpu_attention(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let t = a.t;
        let f = t.mlir();
        let (bq, bk) = (ATTENTION_QUERIES, ATTENTION_KEYS);
        let (tq, tk, tv, to) = (
            flat_type(&specs[0].0, t),
            flat_type(&specs[1].0, t),
            flat_type(&specs[2].0, t),
            flat_type(&specs[3].0, t),
        );
        let shared = |n: usize| format!("memref<{n}x{f}, #gpu.address_space<workgroup>>");
        let (ks, vs) = (shared(bk * a.d), shared(bk * a.dv));
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let tiles = a.l.div_ceil(bq);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let tile = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        let first = k.mad(&tile, bq, "%c0");
        let i = k.add(&first, &tid);
        let (last_row, sn, bkc, bqc) = (k.index(a.l - 1), k.index(a.s), k.index(bk), k.index(bq));
        let row = k.val(&format!("arith.minui {i}, {last_row} : index"));
        let w = k.mad(&b, a.l, &row);
        let query = k.mad(&w, a.d, "%c0");
        let q = a.scaled_query(&mut k, "%b0", &query, &tq);
        let kb = k.mad(&b, a.s * a.d, "%c0");
        let vb = k.mad(&b, a.s * a.dv, "%c0");
        // Keys this block needs: all, or (causal) up to its last row.
        let block_keys = if a.causal {
            let end = k.add(&first, &bqc);
            k.val(&format!("arith.minui {end}, {sn} : index"))
        } else {
            sn.clone()
        };
        let last_key = k.index(a.s - 1);
        let init = a.initial_state(&mut k);
        let (t0, state, results) = k.open_carry("%c0", &block_keys, &bkc, &init);
        // The tile's key and value rows into shared memory (rows past the
        // last key repeat it; no thread reads them).
        for (buf, width, ty, dst, base) in [("%b1", a.d, &tk, ("%Ks", &ks), &kb), ("%b2", a.dv, &tv, ("%Vs", &vs), &vb)]
        {
            let n = k.index(bk * width);
            let e = k.open_step(&tid, &n, &bqc);
            let wc = k.index(width);
            let r = k.val(&format!("arith.divui {e}, {wc} : index"));
            let c = k.val(&format!("arith.remui {e}, {wc} : index"));
            let key = k.add(&t0, &r);
            let key = k.val(&format!("arith.minui {key}, {last_key} : index"));
            let src = k.mad(&key, width, base);
            let src = k.add(&src, &c);
            let v = k.load(buf, &src, ty);
            k.store(&v, dst.0, &e, dst.1);
            k.close();
        }
        k.line("gpu.barrier");
        // This thread's keys of the tile: up to the last key, and (causal)
        // up to its row.
        let left = k.val(&format!("arith.subi {sn}, {t0} : index"));
        let mut count = k.val(&format!("arith.minui {left}, {bkc} : index"));
        if a.causal {
            let seen = k.add(&row, "%c1");
            let seen = k.val(&format!("arith.maxui {seen}, {t0} : index"));
            let seen = k.val(&format!("arith.subi {seen}, {t0} : index"));
            count = k.val(&format!("arith.minui {count}, {seen} : index"));
        }
        let rows = |k: &mut Kernel, j: &str| (k.mad(j, a.d, "%c0"), k.mad(j, a.dv, "%c0"));
        let types: Vec<String> = init.iter().map(|(_, ty)| ty.clone()).collect();
        let state: Vec<(String, String)> = state.into_iter().zip(types.iter().cloned()).collect();
        let next = a.online_keys(&mut k, &q, &state, &count, ("%Ks", &ks), ("%Vs", &vs), rows);
        k.line("gpu.barrier");
        let next: Vec<String> = next.into_iter().map(|(v, _)| v).collect();
        k.close_carry(&next, &types);
        let results: Vec<(String, String)> = results.into_iter().zip(types).collect();
        let lc = k.index(a.l);
        let inside = k.val(&format!("arith.cmpi ult, {i}, {lc} : index"));
        k.line(&format!("scf.if {inside} {{"));
        k.depth += 1;
        let out = k.mad(&w, a.dv, "%c0");
        a.store_output(&mut k, &results, "%b3", &out, &to);
        k.close();
        let blocks = (a.batch * tiles).max(1) as u32;
        let name =
            self.finish_gpu_func(k, specs, &[("%Ks", ks.clone()), ("%Vs", vs.clone())], [blocks, 1, 1], bq as u32);
        let work = (a.batch * a.l).max(1) as u64;
        let cost = (2 * a.s * (a.d + a.dv) + 8 * a.s) as u64;
        vec![(name, work, cost, (0..specs.len()).collect(), vec![])]
    }

    /// A GEMM for the GPU: block (x, y, z) computes the `bm x bn` output
    /// tile (column tile x, row tile y) of batch z; its 256 threads each own
    /// a `tm x tn` register block. Per step of 16 along k, the block stages
    /// A's `bm x 16` and B's `16 x bn` tiles in shared memory (zero outside
    /// the matrices, so odd sizes need no other care), then each thread
    /// accumulates its block from them. The epilogue runs on the registers.
    /// With `lhs_sum` a second (row) kernel sums the rows of op(A).
    ///
    /// Where cuBLASLt can apply the whole epilogue (bias, ReLU or
    /// tanh-GELU, accumulate, alpha; no mask, residual or row sum), the
    /// GEMM kernel's call also carries the library candidate, which the
    /// runtime's registry may choose instead.
    pub(super) fn gpu_gemm(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels> {
        let kernels = self.gpu_gemm_kernels(op, specs)?;
        let g = GemmLayout::of(op, specs);
        let (operands, output) = (specs[0].1, specs[g.out].1);
        let types_fit = match operands {
            DType::F32 => output == DType::F32,
            DType::F16 | DType::BF16 => specs[1].1 == operands && (output == operands || output == DType::F32),
            _ => false,
        };
        let epilogue_fits =
            g.mask.is_none() && g.residual.is_none() && g.lhs_sum.is_none() && matches!(g.act, 0 | 1 | 3);
        if let (true, true, Some(first)) = (types_fit, epilogue_fits, kernels.first()) {
            let batch = g.rows / g.m.max(1);
            let library = LibraryGemm {
                batch,
                m: g.m,
                n: g.n,
                k: g.kk,
                a_strides: if g.ta { [1, g.m] } else { [g.kk, 1] },
                b_strides: if g.tb { [1, g.kk] } else { [g.n, 1] },
                a_batch: if g.batched { g.m * g.kk } else { 0 },
                b_batch: if g.batched { g.kk * g.n } else { 0 },
                alpha: g.alpha,
                a: 0,
                b: 1,
                out: g.out,
                aliases: vec![],
                epilogue: None,
                gpu: Some(artifact::GpuGemm {
                    bias: g.bias.map(|p| runtime_dtype(specs[p].1).map(|t| (p, t))).transpose()?,
                    act: g.act,
                    accumulate: g.accumulate,
                    operands: runtime_dtype(operands)?,
                    output: runtime_dtype(output)?,
                }),
            };
            self.library.insert(first.0.clone(), Some(library));
        }
        Ok(kernels)
    }

    #[allow(clippy::type_complexity)]
    fn gpu_gemm_kernels(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
    ) -> Result<Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>> {
        let layout = GemmLayout::of(op, specs);
        let GemmLayout { bias, mask, residual, out, lhs_sum, ta, tb, accumulate, alpha, act, rows, m, kk, n, batched } =
            layout;
        let t = specs[out].1;
        let (ta_t, tb_t) = (specs[0].1, specs[1].1);
        if matches!(ta_t, DType::F16 | DType::BF16) && ta_t == tb_t {
            if lhs_sum.is_some() {
                return Err(unsupported_at(op, "the tensor-core GEMM has no fused row sum of A yet"));
            }
            if !t.is_float() {
                return Err(at(op, format!("a {} GEMM with a {t:?} result", ta_t.mlir())));
            }
            return Ok(vec![self.tensor_core_gemm(&layout, ta_t, specs)]);
        }
        if t != DType::F32 || ta_t != DType::F32 || tb_t != DType::F32 {
            return Err(at(
                op,
                format!(
                    "the GPU GEMM takes f32 x f32 -> f32, or f16 x f16 / bf16 x bf16 with any float result (here {} x {} -> {})",
                    ta_t.mlir(),
                    tb_t.mlir(),
                    t.mlir()
                ),
            ));
        }
        let batch = rows / m.max(1);
        // The biggest tiles (128, 64 or 32 square) that still give the
        // GPU's 132 multiprocessors a block each.
        let tiles = |edge: usize| m.div_ceil(edge) * n.div_ceil(edge) * batch;
        let (tm, tn) = if tiles(128) >= 132 {
            (8, 8)
        } else if tiles(64) >= 132 {
            (4, 4)
        } else {
            (2, 2)
        };
        let (bm, bn, bk) = (16 * tm, 16 * tn, 16);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (sa, sb) = (
            format!("memref<{}xf32, #gpu.address_space<workgroup>>", bm * bk),
            format!("memref<{}xf32, #gpu.address_space<workgroup>>", bk * bn),
        );
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let sixteen = k.index(16);
        let tx = k.val(&format!("arith.remui {tid}, {sixteen} : index"));
        let ty_ = k.val(&format!("arith.divui {tid}, {sixteen} : index"));
        let Tile { row0, col0, a_base, b_base, o_base, mc, kc, nc } = Tile::of(&mut k, bm, bn, m, kk, n, batched);
        let zero = k.float(0.0, t);
        let step = k.index(bk);
        // This thread's register block: rows a_row.., columns b_col.. of the tile.
        let a_row = k.mad(&ty_, tm, "%c0");
        let b_col = k.mad(&tx, tn, "%c0");
        let (kt, accs, results) = k.open_reduce_all("%c0", &kc, &step, &vec![zero.clone(); tm * tn], "f32");
        // Loads a tile element: `e` is this thread's element of the tile,
        // (r, c) its place, in bounds when r < r_lim and c < c_lim.
        let staged = |k: &mut Kernel, q: usize, fast: usize| -> (String, String) {
            let e = k.mad("%c1", 256 * q, &tid);
            let f = k.index(fast);
            let slow = k.val(&format!("arith.divui {e}, {f} : index"));
            let quick = k.val(&format!("arith.remui {e}, {f} : index"));
            (slow, quick)
        };
        let bounded_load = |k: &mut Kernel, buf: &str, addr: &str, ok: &str, ty: &str| -> String {
            let safe = k.val(&format!("arith.select {ok}, {addr}, %c0 : index"));
            let v = k.load(buf, &safe, ty);
            k.val(&format!("arith.select {ok}, {v}, {zero} : f32"))
        };
        // A's tile, k-major in shared memory: As[c * bm + r] = A(row0 + r, kt + c).
        for q in 0..tm {
            // Neighbouring threads read along A's stored rows.
            let (r, c) = if ta {
                let (c, r) = staged(&mut k, q, bm);
                (r, c)
            } else {
                staged(&mut k, q, bk)
            };
            let gi = k.add(&row0, &r);
            let gk = k.add(&kt, &c);
            let in_i = k.val(&format!("arith.cmpi ult, {gi}, {mc} : index"));
            let in_k = k.val(&format!("arith.cmpi ult, {gk}, {kc} : index"));
            let ok = k.val(&format!("arith.andi {in_i}, {in_k} : i1"));
            let off = if ta { k.mad(&gk, m, &gi) } else { k.mad(&gi, kk, &gk) };
            let addr = k.add(&a_base, &off);
            let v = bounded_load(&mut k, "%b0", &addr, &ok, &ty(0));
            let at = k.mad(&c, bm, &r);
            k.store(&v, "%As", &at, &sa);
        }
        // B's tile: Bs[r * bn + c] = B(kt + r, col0 + c).
        for q in 0..tn {
            let (r, c) = if tb {
                let (c, r) = staged(&mut k, q, bk);
                (r, c)
            } else {
                staged(&mut k, q, bn)
            };
            let gk = k.add(&kt, &r);
            let gj = k.add(&col0, &c);
            let in_k = k.val(&format!("arith.cmpi ult, {gk}, {kc} : index"));
            let in_j = k.val(&format!("arith.cmpi ult, {gj}, {nc} : index"));
            let ok = k.val(&format!("arith.andi {in_k}, {in_j} : i1"));
            let off = if tb { k.mad(&gj, kk, &gk) } else { k.mad(&gk, n, &gj) };
            let addr = k.add(&b_base, &off);
            let v = bounded_load(&mut k, "%b1", &addr, &ok, &ty(1));
            let at = k.mad(&r, bn, &c);
            k.store(&v, "%Bs", &at, &sb);
        }
        k.line("gpu.barrier");
        // The 16 steps along k, unrolled: tm values of A and tn of B from
        // shared memory, tm x tn fused multiply-adds.
        let mut acc = accs.clone();
        for kx in 0..bk {
            let av: Vec<String> = (0..tm)
                .map(|ii| {
                    let at = k.mad("%c1", kx * bm + ii, &a_row);
                    k.load("%As", &at, &sa)
                })
                .collect();
            let bv: Vec<String> = (0..tn)
                .map(|jj| {
                    let at = k.mad("%c1", kx * bn + jj, &b_col);
                    k.load("%Bs", &at, &sb)
                })
                .collect();
            for ii in 0..tm {
                for jj in 0..tn {
                    let a = &acc[ii * tn + jj];
                    acc[ii * tn + jj] = k.val(&format!("math.fma {}, {}, {a} : f32", av[ii], bv[jj]));
                }
            }
        }
        k.line("gpu.barrier");
        k.close_with_all(&acc, "f32");
        // The epilogue, per output element in bounds.
        let alpha_c = (alpha != 1.0).then(|| k.float(alpha, t));
        for ii in 0..tm {
            for jj in 0..tn {
                let i = k.mad("%c1", ii, &a_row);
                let i = k.add(&row0, &i);
                let j = k.mad("%c1", jj, &b_col);
                let j = k.add(&col0, &j);
                let in_i = k.val(&format!("arith.cmpi ult, {i}, {mc} : index"));
                let in_j = k.val(&format!("arith.cmpi ult, {j}, {nc} : index"));
                let ok = k.val(&format!("arith.andi {in_i}, {in_j} : i1"));
                k.line(&format!("scf.if {ok} {{"));
                k.depth += 1;
                let mut y = results[ii * tn + jj].clone();
                if let Some(a) = &alpha_c {
                    y = k.fop("mulf", &y, a, t);
                }
                let row = k.mad(&i, n, &o_base);
                let o = k.add(&row, &j);
                Epilogue { bias, mask, residual, out, act, accumulate, t }.write(&mut k, &j, &o, &y, specs);
                k.close();
            }
        }
        let grid = [n.div_ceil(bn) as u32, m.div_ceil(bm) as u32, batch as u32];
        let name = self.finish_gpu_func(k, specs, &[("%As", sa), ("%Bs", sb)], grid, 256);
        let all: Vec<usize> = (0..specs.len()).collect();
        let mut kernels = vec![(name, rows as u64, (2 * kk * n) as u64, all.clone(), vec![])];
        if let Some(p) = lhs_sum {
            // Row w of op(A) summed along k (rank-2 operands only carry it).
            let mut k = Kernel::new();
            let zero = k.float(0.0, t);
            let kc = k.index(kk);
            let w = k.open("%begin", "%end");
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, "f32");
            let ai = if ta { k.mad(&kx, m, &w) } else { k.mad(&w, kk, &kx) };
            let av = k.load("%b0", &ai, &ty(0));
            let s = k.fop("addf", &acc, &av, t);
            k.close_with(&s, "f32");
            k.store(&r, &format!("%b{p}"), &w, &ty(p));
            k.close();
            self.finish(k, specs);
            kernels.push((self.last(), rows as u64, kk as u64, all, vec![]));
        }
        Ok(kernels)
    }

    /// A GEMM of f16 or bf16 operands on the tensor cores, accumulating in
    /// f32 (`mma.sync.m16n8k16`), with the epilogue in f32 and the result
    /// stored in the output's type.
    ///
    /// Block (x, y, z) computes a `bm x bn` tile of batch z with the
    /// [`TensorCoreTile`]'s `warps_m x warps_n` warps, each owning a
    /// `16 frags_m x 16 frags_n` sub-tile: frags_m 16-row fragments of A
    /// times 2 frags_n 8-column fragments of B per step of 16 along k.
    /// Tiles of `bk` along k go through dynamic shared memory `stages`
    /// deep: while the warps multiply one stage, the copies of the next
    /// `stages - 1` tiles are in flight, and one barrier per tile orders
    /// them. Each operand keeps its stored layout in shared memory (rows
    /// padded by 8 elements, so the eight 16-byte rows an `ldmatrix` reads
    /// fall in distinct banks); `ldmatrix` (transposing where the layout
    /// asks for it) gives the fragments in the order `mma` takes them.
    ///
    /// Copies are `cp.async` 16-byte chunks when each operand's contiguous
    /// dimension is a multiple of 8 (chunks past the matrix are zero-filled
    /// by the copy's source size); otherwise plain loads, element by element,
    /// with bounds checks. Either way odd sizes need no other care.
    fn tensor_core_gemm(
        &mut self,
        l: &GemmLayout,
        et: DType,
        specs: &[(Vec<usize>, DType)],
    ) -> (String, u64, u64, Vec<usize>, Vec<IndexCheck>) {
        let GemmLayout { ta, tb, rows, m, kk, n, batched, .. } = *l;
        let e = et.mlir();
        let batch = rows / m.max(1);
        let tile = self.gemm_tile.unwrap_or_else(|| TensorCoreTile::for_shape(m, n, batch));
        let TensorCoreTile { warps_m: _, warps_n: wn, frags_m: fm, frags_n: fnn, bk, stages } = tile;
        let (bm, bn) = tile.block();
        let threads = tile.threads();
        let (a_rows, a_cols, a_ld, a_stage, b_rows, b_cols, b_ld, b_stage) = tile.shared_layout(ta, tb);
        let sa = format!("memref<{}x{e}, #gpu.address_space<workgroup>>", stages * a_stage);
        let sb = format!("memref<{}x{e}, #gpu.address_space<workgroup>>", stages * b_stage);
        let asynchronous = (if ta { m } else { kk }) % 8 == 0 && (if tb { kk } else { n }) % 8 == 0;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);

        let mut k = Kernel::new();
        // A's stages, then B's, in the dynamic shared memory (A's part is a
        // multiple of 16 bytes: rows of a multiple of 8 elements).
        let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
        let b_at = k.index(stages * a_stage * 2);
        k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
        k.line(&format!("%As = memref.view %smem[%c0][] : {dynamic} to {sa}"));
        k.line(&format!("%Bs = memref.view %smem[{b_at}][] : {dynamic} to {sb}"));
        let tid = k.val("gpu.thread_id x");
        let c32 = k.index(32);
        let lane = k.val(&format!("arith.remui {tid}, {c32} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {c32} : index"));
        let wn_c = k.index(wn);
        let warp_m = k.val(&format!("arith.divui {warp}, {wn_c} : index"));
        let warp_n = k.val(&format!("arith.remui {warp}, {wn_c} : index"));
        let c8 = k.index(8);
        let c4 = k.index(4);
        let c2 = k.index(2);
        let quad = k.val(&format!("arith.divui {lane}, {c8} : index"));
        let r8 = k.val(&format!("arith.remui {lane}, {c8} : index"));
        let q_lo = k.val(&format!("arith.remui {quad}, {c2} : index"));
        let q_hi = k.val(&format!("arith.divui {quad}, {c2} : index"));
        let place = Tile::of(&mut k, bm, bn, m, kk, n, batched);
        let Tile { row0, col0, a_base, b_base, o_base, mc, nc, .. } = place.clone();
        let wm0 = k.mad(&warp_m, 16 * fm, "%c0");
        let wn0 = k.mad(&warp_n, 16 * fnn, "%c0");
        // Each lane's ldmatrix row within a stage (fragment offsets are
        // constants added later). Lane l addresses row l % 8 of matrix
        // l / 8; A's four matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7),
        // (rows 0-7, k 8-15), (rows 8-15, k 8-15); B's are (k 0-7, cols 0-7),
        // (k 8-15, cols 0-7), (k 0-7, cols 8-15), (k 8-15, cols 8-15).
        let a_lane = if ta {
            // Stored k x m: row k = r + 8 q_hi, column m = wm0 + 8 q_lo (transposed).
            let kr = k.mad(&q_hi, 8, &r8);
            let mcol = k.mad(&q_lo, 8, &wm0);
            k.mad(&kr, a_ld, &mcol)
        } else {
            let mr = k.mad(&q_lo, 8, &r8);
            let mr = k.add(&wm0, &mr);
            let kcol = k.mad(&q_hi, 8, "%c0");
            k.mad(&mr, a_ld, &kcol)
        };
        let b_lane = if tb {
            // Stored n x k: row n = wn0 + r + 8 q_hi, column k = 8 q_lo.
            let nr = k.mad(&q_hi, 8, &r8);
            let nr = k.add(&wn0, &nr);
            let kcol = k.mad(&q_lo, 8, "%c0");
            k.mad(&nr, b_ld, &kcol)
        } else {
            // Stored k x n: row k = r + 8 q_lo, column n = wn0 + 8 q_hi (transposed).
            let kr = k.mad(&q_lo, 8, &r8);
            let ncol = k.mad(&q_hi, 8, &wn0);
            k.mad(&kr, b_ld, &ncol)
        };

        // Copies tile `t` (of bk along k) of both operands into stage
        // `t % stages`.
        let c_stages = k.index(stages);
        let load_tile = |k: &mut Kernel, t: &str| {
            let kt = k.mad(t, bk, "%c0");
            let stage = k.val(&format!("arith.remui {t}, {c_stages} : index"));
            let a_off = k.mad(&stage, a_stage, "%c0");
            let b_off = k.mad(&stage, b_stage, "%c0");
            // (buffer, batch base, smem, stage offset, rows, cols, ld, global
            // row/col of the tile's corner, their limits, global row stride)
            let [(a_r0, a_c0, a_rl, a_cl, a_g), (b_r0, b_c0, b_rl, b_cl, b_g)] = place.corners(l, &kt);
            let mut tokens = Vec::new();
            for (buf, base, smem, st, off, r_n, c_n, ld, r0, c0, rl, cl, g) in [
                ("%b0", &a_base, "%As", &sa, &a_off, a_rows, a_cols, a_ld, a_r0, a_c0, a_rl, a_cl, a_g),
                ("%b1", &b_base, "%Bs", &sb, &b_off, b_rows, b_cols, b_ld, b_r0, b_c0, b_rl, b_cl, b_g),
            ] {
                let gty = if buf == "%b0" { ty(0) } else { ty(1) };
                for ch in tile_chunks(k, &tid, threads, r_n, c_n, base, r0, c0, rl, g) {
                    let c = k.mad(&ch.chunk, 8, "%c0");
                    let at = k.mad(&ch.r, ld, &c);
                    let at = k.add(off, &at);
                    let Chunk { gc, row_ok, src, .. } = &ch;
                    if asynchronous {
                        tokens.push(async_chunk(k, &ch, cl, buf, &gty, smem, st, &at));
                    } else {
                        let zero = k.float(0.0, et);
                        for j in 0..8 {
                            let gj = k.mad("%c1", j, &gc);
                            let col_ok = k.val(&format!("arith.cmpi ult, {gj}, {cl} : index"));
                            let ok = k.val(&format!("arith.andi {row_ok}, {col_ok} : i1"));
                            let sj = k.mad("%c1", j, &src);
                            let sj = k.val(&format!("arith.select {ok}, {sj}, %c0 : index"));
                            let v = k.load(buf, &sj, &gty);
                            let v = k.val(&format!("arith.select {ok}, {v}, {zero} : {e}"));
                            let aj = k.mad("%c1", j, &at);
                            k.store(&v, smem, &aj, st);
                        }
                    }
                }
            }
            asynchronous.then(|| k.val(&format!("nvgpu.device_async_create_group {}", tokens.join(", "))))
        };

        // The first stages - 1 tiles in flight, a commit group each.
        for s in 0..stages - 1 {
            let t = k.index(s);
            load_tile(&mut k, &t);
        }
        let ntiles = k.index(kk.div_ceil(bk));
        let zero = k.float(0.0, DType::F32);
        let nacc = fm * 2 * fnn * 4;
        let (t, accs, results) = k.open_reduce_all("%c0", &ntiles, "%c1", &vec![zero; nacc], "f32");
        if asynchronous {
            // Of the groups committed (one per tile up to t + stages - 2),
            // all but the newest stages - 2 done: tile t's copies.
            k.line(&format!("nvvm.cp.async.wait.group {}", stages - 2));
        }
        // Every thread's copies of tile t visible, and every warp done with
        // tile t - 1, whose stage the next copy refills.
        k.line("gpu.barrier");
        let ahead = k.mad("%c1", stages - 1, &t);
        load_tile(&mut k, &ahead);
        let stage = k.val(&format!("arith.remui {t}, {c_stages} : index"));
        let a_off = k.mad(&stage, a_stage, &a_lane);
        let b_off = k.mad(&stage, b_stage, &b_lane);
        let mut acc = accs.clone();
        let frag = format!("vector<4x2x{e}>");
        // One register of a fragment as mma takes it: bf16 pairs as i32,
        // f16 pairs as vector<2xf16>.
        let reg = |k: &mut Kernel, frag: &str, i: usize| -> String {
            if et == DType::BF16 {
                let v = k.val(&format!("vector.extract {frag}[{i}] : vector<2xbf16> from vector<4x2xbf16>"));
                k.val(&format!("llvm.bitcast {v} : vector<2xbf16> to i32"))
            } else {
                k.val(&format!("vector.extract {frag}[{i}] : vector<2xf16> from vector<4x2xf16>"))
            }
        };
        let reg_ty = if et == DType::BF16 { "i32" } else { "vector<2xf16>" };
        for ks in 0..bk / 16 {
            let mut a_regs = Vec::new();
            for mi in 0..fm {
                let at = if ta {
                    k.mad("%c1", ks * 16 * a_ld + mi * 16, &a_off)
                } else {
                    k.mad("%c1", mi * 16 * a_ld + ks * 16, &a_off)
                };
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %As[{at}] {{numTiles = 4 : i32, transpose = {ta}}} : {sa} -> {frag}"
                ));
                a_regs.push((0..4).map(|i| reg(&mut k, &f, i)).collect::<Vec<_>>());
            }
            let mut b_regs = Vec::new();
            for np in 0..fnn {
                let at = if tb {
                    k.mad("%c1", np * 16 * b_ld + ks * 16, &b_off)
                } else {
                    k.mad("%c1", ks * 16 * b_ld + np * 16, &b_off)
                };
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %Bs[{at}] {{numTiles = 4 : i32, transpose = {}}} : {sb} -> {frag}",
                    !tb
                ));
                let r: Vec<String> = (0..4).map(|i| reg(&mut k, &f, i)).collect();
                b_regs.push(r[..2].to_vec());
                b_regs.push(r[2..].to_vec());
            }
            for (mi, a) in a_regs.iter().enumerate() {
                for (ni, b) in b_regs.iter().enumerate() {
                    let c = (mi * 2 * fnn + ni) * 4;
                    let d = k.val(&format!(
                        "nvvm.mma.sync A[{}] B[{}] C[{}] {{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, \
                         shape = #nvvm.shape<m = 16, n = 8, k = 16>, multiplicandAPtxType = #nvvm.mma_type<{e}>, \
                         multiplicandBPtxType = #nvvm.mma_type<{e}>}} : ({reg_ty}, {reg_ty}, f32) -> !llvm.struct<(f32, f32, f32, f32)>",
                        a.join(", "),
                        b.join(", "),
                        acc[c..c + 4].join(", ")
                    ));
                    for i in 0..4 {
                        acc[c + i] = k.val(&format!("llvm.extractvalue {d}[{i}] : !llvm.struct<(f32, f32, f32, f32)>"));
                    }
                }
            }
        }
        k.close_with_all(&acc, "f32");
        if asynchronous {
            // The copies past the last tile (all zero fill) done before the
            // block exits.
            k.line("nvvm.cp.async.wait.group 0");
        }

        // The epilogue: register i of fragment (mi, ni) is row
        // g + 8 (i / 2), column 2 q + i % 2 of its 16 x 8 tile, for lane
        // g * 4 + q.
        let g = k.val(&format!("arith.divui {lane}, {c4} : index"));
        let q = k.val(&format!("arith.remui {lane}, {c4} : index"));
        let er = k.add(&row0, &wm0);
        let er = k.add(&er, &g);
        let ec = k.add(&col0, &wn0);
        let ec = k.mad(&q, 2, &ec);
        for mi in 0..fm {
            for ni in 0..2 * fnn {
                for r in 0..4 {
                    let i = k.mad("%c1", mi * 16 + 8 * (r / 2), &er);
                    let j = k.mad("%c1", ni * 8 + r % 2, &ec);
                    let y = results[(mi * 2 * fnn + ni) * 4 + r].clone();
                    tensor_core_epilogue(&mut k, l, specs, (&i, &j), (&mc, &nc), &o_base, |_| y);
                }
            }
        }
        let grid = [n.div_ceil(bn) as u32, m.div_ceil(bm) as u32, batch as u32];
        let name = self.finish_gpu_func(k, specs, &[], grid, threads as u32);
        let mut shared = tile.shared_bytes(ta, tb);
        // The same block tile and threads on Hopper's warpgroup MMA.
        if self.wgmma && asynchronous && tile.block() == (128, 256) && threads == 256 {
            // A tile of the wgmma's own depth along k sets its stages too.
            let wgmma_stages = if tile.bk == WGMMA_BK { tile.stages } else { WGMMA_STAGES };
            let (text, bytes) = self.wgmma_gemm(&name, l, et, specs, wgmma_stages);
            self.hopper.insert(name.clone(), text);
            shared = shared.max(bytes);
        }
        if let Some(launch) = self.launches.get_mut(&name) {
            launch.shared_bytes = shared as u32;
        }
        (name, rows as u64, (2 * kk * n) as u64, (0..specs.len()).collect(), vec![])
    }

    /// The Hopper form of a tensor-core GEMM kernel (same name, launch and
    /// epilogue as the `mma.sync` one it replaces in the sm_90 build): two
    /// warpgroups each multiply 64 rows of a 128 x 256 block tile with
    /// `wgmma.mma_async.m64n256k16`, reading both operands straight from
    /// shared memory through matrix descriptors, accumulating in 128 f32
    /// registers per thread.
    ///
    /// Tiles of [`WGMMA_BK`] along k are copied by `cp.async` into
    /// `stages` stages in the 128-byte swizzled layout `wgmma`
    /// reads: 8 rows of 128 bytes make a 1024-byte atom, and row r's 16-byte
    /// chunk c lies at chunk c ^ (r % 8). A K-major operand (A row-major, B
    /// stored n x k) has a 64-element k row per atom row; an M- or N-major
    /// one (A stored k x m, B row-major) has 64 m or n columns per atom row
    /// and 8 k rows per atom, the atoms of one 64-column block k-contiguous.
    /// Returns the kernel text and its dynamic shared memory in bytes.
    fn wgmma_gemm(
        &self,
        name: &str,
        l: &GemmLayout,
        et: DType,
        specs: &[(Vec<usize>, DType)],
        stages: usize,
    ) -> (String, usize) {
        let GemmLayout { ta, tb, rows, m, kk, n, batched, .. } = *l;
        let e = et.mlir();
        let batch = rows / m.max(1);
        let (bm, bn, bk) = (128, 256, WGMMA_BK);
        // Elements per stage of each operand; atoms are 512 elements.
        let (a_stage, b_stage) = (bm * bk, bk * bn);
        let atoms_k = bk / 8;
        // One byte past an atom so the stages can start 1024-byte aligned.
        let bytes = 2 * stages * (a_stage + b_stage) + 1024;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut k = Kernel::new();
        let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
        let sa = format!("memref<{}x{e}, #gpu.address_space<workgroup>>", stages * a_stage);
        let sb = format!("memref<{}x{e}, #gpu.address_space<workgroup>>", stages * b_stage);
        k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
        // The swizzle works on shared addresses: align the stages to 1024.
        let addr = k.val(&format!("memref.extract_aligned_pointer_as_index %smem : {dynamic} -> index"));
        let c1024 = k.index(1024);
        let low = k.val(&format!("arith.remui {addr}, {c1024} : index"));
        let pad = k.val(&format!("arith.subi {c1024}, {low} : index"));
        let pad = k.val(&format!("arith.remui {pad}, {c1024} : index"));
        let b_at = k.mad("%c1", 2 * stages * a_stage, &pad);
        k.line(&format!("%As = memref.view %smem[{pad}][] : {dynamic} to {sa}"));
        k.line(&format!("%Bs = memref.view %smem[{b_at}][] : {dynamic} to {sb}"));
        let a_addr = k.add(&addr, &pad);
        let b_addr = k.add(&addr, &b_at);
        let tid = k.val("gpu.thread_id x");
        let c128 = k.index(128);
        let wg = k.val(&format!("arith.divui {tid}, {c128} : index"));
        let place = Tile::of(&mut k, bm, bn, m, kk, n, batched);
        let Tile { row0, col0, a_base, b_base, o_base, mc, nc, .. } = place.clone();
        let c_stages = k.index(stages);
        let c8 = k.index(8);
        // Element offset in a stage of chunk `chunk` (8 elements) of row `r`
        // of a K-major operand, or of k row `r`, column chunk `chunk` of an
        // M/N-major one.
        let swizzled = |k: &mut Kernel, r: &str, chunk: &str, k_major: bool| -> String {
            let r8 = k.val(&format!("arith.remui {r}, {c8} : index"));
            let cc = k.val(&format!("arith.remui {chunk}, {c8} : index"));
            let sw = k.val(&format!("arith.xori {cc}, {r8} : index"));
            let in_row = k.mad(&sw, 8, "%c0");
            if k_major {
                k.mad(r, 64, &in_row)
            } else {
                let block = k.val(&format!("arith.divui {chunk}, {c8} : index"));
                let kg = k.val(&format!("arith.divui {r}, {c8} : index"));
                let atom = k.mad(&block, atoms_k, &kg);
                let at = k.mad(&r8, 64, &in_row);
                k.mad(&atom, 512, &at)
            }
        };
        let threads = 256;
        let load_tile = |k: &mut Kernel, t: &str| {
            let kt = k.mad(t, bk, "%c0");
            let stage = k.val(&format!("arith.remui {t}, {c_stages} : index"));
            let a_off = k.mad(&stage, a_stage, "%c0");
            let b_off = k.mad(&stage, b_stage, "%c0");
            // (buffer, batch base, smem, its type, stage offset, stored rows
            // and columns of the tile, K-major, global corner, limits, row
            // stride)
            let [(a_r0, a_c0, a_rl, a_cl, a_g), (b_r0, b_c0, b_rl, b_cl, b_g)] = place.corners(l, &kt);
            let (a_rows, a_cols) = if ta { (bk, bm) } else { (bm, bk) };
            let (b_rows, b_cols) = if tb { (bn, bk) } else { (bk, bn) };
            let mut tokens = Vec::new();
            for (buf, base, smem, st, off, r_n, c_n, k_major, r0, c0, rl, cl, g) in [
                ("%b0", &a_base, "%As", &sa, &a_off, a_rows, a_cols, !ta, a_r0, a_c0, a_rl, a_cl, a_g),
                ("%b1", &b_base, "%Bs", &sb, &b_off, b_rows, b_cols, tb, b_r0, b_c0, b_rl, b_cl, b_g),
            ] {
                let gty = if buf == "%b0" { ty(0) } else { ty(1) };
                for ch in tile_chunks(k, &tid, threads, r_n, c_n, base, r0, c0, rl, g) {
                    let at = swizzled(k, &ch.r, &ch.chunk, k_major);
                    let at = k.add(off, &at);
                    tokens.push(async_chunk(k, &ch, cl, buf, &gty, smem, st, &at));
                }
            }
            k.val(&format!("nvgpu.device_async_create_group {}", tokens.join(", ")));
        };
        for s in 0..stages - 1 {
            let t = k.index(s);
            load_tile(&mut k, &t);
        }
        // Matrix descriptors: start address, leading and stride byte
        // offsets (each over 16), 128-byte swizzle. K-major: 8-row groups
        // 1024 bytes apart, the leading offset unused. M/N-major: 64-column
        // blocks atoms_k atoms apart (leading), 8-row k groups one atom.
        let fixed = |k_major: bool| -> u64 {
            let leading: u64 = if k_major { 1 } else { (atoms_k * 1024 / 16) as u64 };
            (leading << 16) | ((1024u64 / 16) << 32) | (1u64 << 62)
        };
        let descriptor = |k: &mut Kernel, byte_addr: &str, k_major: bool| -> String {
            let a = k.val(&format!("arith.index_cast {byte_addr} : index to i64"));
            let c4 = k.val("arith.constant 4 : i64");
            let mask = k.val("arith.constant 16383 : i64");
            let a = k.val(&format!("arith.shrui {a}, {c4} : i64"));
            let a = k.val(&format!("arith.andi {a}, {mask} : i64"));
            let f = k.val(&format!("arith.constant {} : i64", fixed(k_major) as i64));
            k.val(&format!("arith.ori {a}, {f} : i64"))
        };
        let nacc = bn / 2;
        let acc_ty = format!("!llvm.struct<({})>", vec!["f32"; nacc].join(", "));
        let zero = k.val(&format!("llvm.mlir.zero : {acc_ty}"));
        let ntiles = k.index(kk.div_ceil(bk));
        let (t, accs, results) = k.open_reduce_all("%c0", &ntiles, "%c1", &[zero], &acc_ty);
        // Of the groups committed (one per tile up to t + stages - 2), all
        // but the newest stages - 2 done: tile t's copies, made visible to
        // wgmma's (async proxy) reads and to the other warps.
        k.line(&format!("nvvm.cp.async.wait.group {}", stages - 2));
        k.line("nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}");
        k.line("gpu.barrier");
        let stage = k.val(&format!("arith.remui {t}, {c_stages} : index"));
        let a_stage_at = k.mad(&stage, 2 * a_stage, &a_addr);
        let b_stage_at = k.mad(&stage, 2 * b_stage, &b_addr);
        // This warpgroup's 64 rows of A: 64 rows of 128 bytes (K-major) or
        // the wg-th 64-column block (M-major).
        let a_rows_at = if ta { k.mad(&wg, atoms_k * 1024, &a_stage_at) } else { k.mad(&wg, 64 * 128, &a_stage_at) };
        k.line("nvvm.wgmma.fence.aligned");
        let mut acc = accs[0].clone();
        let (layout_a, layout_b) = (if ta { "col" } else { "row" }, if tb { "col" } else { "row" });
        for ks in 0..bk / 16 {
            // Step ks along k: 32 bytes into a K-major row, two k groups
            // (atoms) on in an M/N-major block.
            let a_at = k.mad("%c1", if ta { 2 * ks * 1024 } else { 32 * ks }, &a_rows_at);
            let b_at = k.mad("%c1", if tb { 32 * ks } else { 2 * ks * 1024 }, &b_stage_at);
            let da = descriptor(&mut k, &a_at, !ta);
            let db = descriptor(&mut k, &b_at, tb);
            acc = k.val(&format!(
                "nvvm.wgmma.mma_async {da}, {db}, {acc}, #nvvm.shape<m = 64, n = {bn}, k = 16>, \
                 D[<f32>, <one>], A[<{e}>, <one>, <{layout_a}>], B[<{e}>, <one>, <{layout_b}>] : {acc_ty} -> {acc_ty}"
            ));
        }
        k.line("nvvm.wgmma.commit.group.sync.aligned");
        // While tile t multiplies: tile t - 1's wgmmas done in every
        // warpgroup, so its stage takes the copy of tile t + stages - 1.
        k.line("nvvm.wgmma.wait.group.sync.aligned 1");
        k.line("gpu.barrier");
        let ahead = k.mad("%c1", stages - 1, &t);
        load_tile(&mut k, &ahead);
        k.close_with_all(&[acc], &acc_ty);
        k.line("nvvm.wgmma.wait.group.sync.aligned 0");
        k.line("nvvm.cp.async.wait.group 0");

        // The epilogue: accumulator 4 j + r of warp w (of the warpgroup),
        // lane 4 g + q, is row 16 w + g + 8 (r / 2), column 8 j + 2 q + r % 2
        // of the warpgroup's 64 x 256 tile.
        let c32 = k.index(32);
        let c4 = k.index(4);
        let lane = k.val(&format!("arith.remui {tid}, {c32} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {c32} : index"));
        let g = k.val(&format!("arith.divui {lane}, {c4} : index"));
        let q = k.val(&format!("arith.remui {lane}, {c4} : index"));
        // Warp w of warpgroup wg is warp 4 wg + w: its rows start at 16 warp.
        let er = k.mad(&warp, 16, &row0);
        let er = k.add(&er, &g);
        let ec = k.mad(&q, 2, &col0);
        for j in 0..bn / 8 {
            for r in 0..4 {
                let i = k.mad("%c1", 8 * (r / 2), &er);
                let jj = k.mad("%c1", 8 * j + r % 2, &ec);
                let acc = &results[0];
                tensor_core_epilogue(&mut k, l, specs, (&i, &jj), (&mc, &nc), &o_base, |k| {
                    k.val(&format!("llvm.extractvalue {acc}[{}] : {acc_ty}", 4 * j + r))
                });
            }
        }
        let grid = [n.div_ceil(bn) as u32, m.div_ceil(bm) as u32, batch as u32];
        (gpu_func_text(name, &k, specs, &[], grid, threads as u32), bytes)
    }

    /// Appends kernel `kN`, written whole for the GPU, as a `gpu.func` with
    /// `workgroup` memory, launched on `grid` blocks of `block` threads.
    pub(super) fn finish_gpu_func(
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
    pub(super) fn build_gpu(
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
            let pipeline = format!(
                "builtin.module(gpu.module(inline,symbol-dce,canonicalize,cse),\
                 nvvm-attach-target{{chip={target} features=+ptx80 O=3 l={}}},\
                 gpu.module(convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=1}},\
                 convert-nvvm-to-llvm,convert-vector-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts),\
                 gpu-module-to-binary{{format=isa}})",
                libdevice.display(),
                target = ptx_target(chip),
            );
            crate::run_pipeline(ctx, &mut module, &pipeline)?;
            let ptx = binary_text(&module)?;
            write_atomically(&ptx_path(out_dir, chip), ptx.as_bytes())?;
        }
        Ok(format!("cuda {}", CHIPS.join(" ")))
    }
}

/// The PTX of the (one) `gpu.binary` object in `module`.
/// The epilogue of a tensor-core GEMM's output (i, j), inside the output's
/// `limits` (rows, columns): its f32 accumulator (`value`, read inside the
/// bounds check) times alpha, then bias, activation, mask, residual,
/// accumulate and the store in the output's type.
fn tensor_core_epilogue(
    k: &mut Kernel,
    l: &GemmLayout,
    specs: &[(Vec<usize>, DType)],
    (i, j): (&str, &str),
    (mc, nc): (&str, &str),
    o_base: &str,
    value: impl FnOnce(&mut Kernel) -> String,
) {
    let GemmLayout { bias, mask, residual, out, accumulate, alpha, act, n, .. } = *l;
    let in_i = k.val(&format!("arith.cmpi ult, {i}, {mc} : index"));
    let in_j = k.val(&format!("arith.cmpi ult, {j}, {nc} : index"));
    let ok = k.val(&format!("arith.andi {in_i}, {in_j} : i1"));
    k.line(&format!("scf.if {ok} {{"));
    k.depth += 1;
    let mut y = value(k);
    if alpha != 1.0 {
        let a = k.float(alpha, DType::F32);
        y = k.fop("mulf", &y, &a, DType::F32);
    }
    let o = k.mad(i, n, o_base);
    let o = k.add(&o, j);
    Epilogue { bias, mask, residual, out, act, accumulate, t: DType::F32 }.write(k, j, &o, &y, specs);
    k.close();
}

/// One 16-byte chunk (8 elements) of a GEMM operand tile that a thread
/// copies: its row and chunk index in the tile, its global column, whether
/// its row is inside the matrix, and its first element's index in the
/// operand buffer.
struct Chunk {
    r: String,
    chunk: String,
    gc: String,
    row_ok: String,
    src: String,
}

/// The chunks thread `tid` of `threads` copies of a `rows x cols` tile
/// (chunks q threads + tid in row-major order) whose corner is (r0, c0) in
/// a matrix of `rl` rows and row stride `g` at `base` in its buffer.
#[allow(clippy::too_many_arguments)]
fn tile_chunks(
    k: &mut Kernel,
    tid: &str,
    threads: usize,
    rows: usize,
    cols: usize,
    base: &str,
    r0: &str,
    c0: &str,
    rl: &str,
    g: usize,
) -> Vec<Chunk> {
    let per_row = cols / 8;
    let pr = k.index(per_row);
    (0..rows * per_row / threads)
        .map(|q| {
            let id = k.mad("%c1", q * threads, tid);
            let r = k.val(&format!("arith.divui {id}, {pr} : index"));
            let chunk = k.val(&format!("arith.remui {id}, {pr} : index"));
            let c = k.mad(&chunk, 8, "%c0");
            let gr = k.add(r0, &r);
            let gc = k.add(c0, &c);
            let row_ok = k.val(&format!("arith.cmpi ult, {gr}, {rl} : index"));
            let src = k.mad(&gr, g, &gc);
            let src = k.add(base, &src);
            Chunk { r, chunk, gc, row_ok, src }
        })
        .collect()
}

/// `cp.async` of chunk `c` into `smem[at]`: its elements inside the matrix
/// (columns below `cl`, min(cl - gc, 8) of them), zero fill for the rest and
/// for a row outside it. Returns the copy's token.
#[allow(clippy::too_many_arguments)]
fn async_chunk(k: &mut Kernel, c: &Chunk, cl: &str, buf: &str, gty: &str, smem: &str, st: &str, at: &str) -> String {
    let Chunk { gc, row_ok, src, .. } = c;
    let c8 = k.index(8);
    let col_ok = k.val(&format!("arith.cmpi ult, {gc}, {cl} : index"));
    let ok = k.val(&format!("arith.andi {row_ok}, {col_ok} : i1"));
    let left = k.val(&format!("arith.subi {cl}, {gc} : index"));
    let left = k.val(&format!("arith.minui {left}, {c8} : index"));
    let count = k.val(&format!("arith.select {ok}, {left}, %c0 : index"));
    let src = k.val(&format!("arith.select {ok}, {src}, %c0 : index"));
    k.val(&format!("nvgpu.device_async_copy {buf}[{src}], {smem}[{at}], 8, {count} {{bypassL1}} : {gty} to {st}"))
}

/// The `gpu.func` of kernel `name` (body `k`, buffers `specs`), with
/// `workgroup` memory, for `grid` blocks of `block` threads.
fn gpu_func_text(
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

fn binary_text(module: &Module<'_>) -> Result<String> {
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
