use crate::codegen::prelude::*;

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
    pub(crate) fn shared_layout(&self, ta: bool, tb: bool) -> (usize, usize, usize, usize, usize, usize, usize, usize) {
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

impl Generator {
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
    pub(crate) fn tensor_core_gemm(
        &mut self,
        l: &GemmLayout,
        et: DType,
        specs: &[(Vec<usize>, DType)],
        options: &GpuOptions,
    ) -> (String, u64, u64, Vec<usize>, Vec<IndexCheck>) {
        let GemmLayout { ta, tb, rows, m, kk, n, batched, .. } = *l;
        let e = et.mlir();
        let batch = rows / m.max(1);
        let tile = options.gemm_tile.unwrap_or_else(|| TensorCoreTile::for_shape(m, n, batch));
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
                            let v = k.load_raw(buf, &sj, &gty);
                            let v = k.val(&format!("arith.select {ok}, {v}, {zero} : {e}"));
                            let aj = k.mad("%c1", j, &at);
                            k.store_raw(&v, smem, &aj, st);
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
        let reg = |k: &mut Kernel, frag: &str, i: usize| fragment_register(k, frag, i, et);
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
                    let d = mma_16816(&mut k, a, b, &acc[c..c + 4], et);
                    acc[c..c + 4].clone_from_slice(&d);
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
        if options.wgmma && asynchronous && tile.block() == (128, 256) && threads == 256 {
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
}

/// Register `i` of an `ldmatrix` fragment (`vector<4x2xT>`) as `mma.sync`
/// takes it: bf16 pairs as i32, f16 pairs as `vector<2xf16>`.
pub(crate) fn fragment_register(k: &mut Kernel, frag: &str, i: usize, et: DType) -> String {
    let e = et.mlir();
    let v = k.val(&format!("vector.extract {frag}[{i}] : vector<2x{e}> from vector<4x2x{e}>"));
    if et == DType::BF16 { k.val(&format!("llvm.bitcast {v} : vector<2xbf16> to i32")) } else { v }
}

/// `mma.sync.m16n8k16` of 16-bit A (4 registers, row-major) and B (2,
/// column-major) fragments into f32 accumulators `acc` (4); returns the
/// 4 new accumulators.
pub(crate) fn mma_16816(k: &mut Kernel, a: &[String], b: &[String], acc: &[String], et: DType) -> Vec<String> {
    let e = et.mlir();
    let reg_ty = if et == DType::BF16 { "i32" } else { "vector<2xf16>" };
    let d = k.val(&format!(
        "nvvm.mma.sync A[{}] B[{}] C[{}] {{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, \
         shape = #nvvm.shape<m = 16, n = 8, k = 16>, multiplicandAPtxType = #nvvm.mma_type<{e}>, \
         multiplicandBPtxType = #nvvm.mma_type<{e}>}} : ({reg_ty}, {reg_ty}, f32) -> !llvm.struct<(f32, f32, f32, f32)>",
        a.join(", "),
        b.join(", "),
        acc.join(", ")
    ));
    (0..4).map(|i| k.val(&format!("llvm.extractvalue {d}[{i}] : !llvm.struct<(f32, f32, f32, f32)>"))).collect()
}

/// The epilogue of a tensor-core GEMM's output (i, j), inside the output's
/// `limits` (rows, columns): its f32 accumulator (`value`, read inside the
/// bounds check) times alpha, then bias, activation, mask, residual,
/// accumulate and the store in the output's type.
pub(crate) fn tensor_core_epilogue(
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
pub(crate) struct Chunk {
    pub(crate) r: String,
    pub(crate) chunk: String,
    pub(crate) gc: String,
    pub(crate) row_ok: String,
    pub(crate) src: String,
}

/// The chunks thread `tid` of `threads` copies of a `rows x cols` tile
/// (chunks q threads + tid in row-major order) whose corner is (r0, c0) in
/// a matrix of `rl` rows and row stride `g` at `base` in its buffer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_chunks(
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
pub(crate) fn async_chunk(
    k: &mut Kernel,
    c: &Chunk,
    cl: &str,
    buf: &str,
    gty: &str,
    smem: &str,
    st: &str,
    at: &str,
) -> String {
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
