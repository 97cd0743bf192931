use crate::codegen::prelude::*;

/// Tiles along k of the wgmma GEMM: one 128-byte swizzle row of 16-bit
/// elements.
pub(crate) const WGMMA_BK: usize = 64;

/// Shared-memory stages of the wgmma GEMM (48 KiB each), within the 163
/// KiB an A100 block may take, since the sm_80 kernel shares the launch.
pub(crate) const WGMMA_STAGES: usize = 3;

impl Generator {
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
    pub(crate) fn wgmma_gemm(
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
}
