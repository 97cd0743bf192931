//! Attention on the tensor cores (f16/bf16 q, k, v; FlashAttention-2's
//! forward): `mma.sync.m16n8k16` for both products, the online softmax
//! on the accumulators in registers, so neither the scores nor the
//! probabilities reach memory.

use crate::codegen::ops::attention::AttentionShape;
use crate::codegen::ops::gemm::mma::{async_chunk, fragment_register, mma_16816, tile_chunks};
use crate::codegen::prelude::*;

/// Threads per block: 4 warps.
pub(crate) const TC_THREADS: usize = 128;

/// A tiling of the tensor-core attention: [`AttentionTile::DEFAULT`], or
/// another for tuning (`GpuOptions::attention_tile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionTile {
    /// 16-row query fragments per warp, 1 or 2: a block takes 4 warps x 16
    /// x `m_frags` query rows. Two share each k and v fragment read from
    /// shared memory between two products.
    pub m_frags: usize,
    /// Keys per shared-memory tile: 64 or 128.
    pub keys: usize,
    /// Whether the next tile's k and v are copied while this tile's
    /// products run (two buffers of each), rather than between them.
    pub double_buffer: bool,
}

impl AttentionTile {
    /// 128 query rows a block (2 fragments a warp), tiles of 64 keys,
    /// double-buffered.
    pub const DEFAULT: AttentionTile = AttentionTile { m_frags: 2, keys: 64, double_buffer: true };

    /// Query rows per block.
    pub fn queries(&self) -> usize {
        TC_THREADS / 32 * 16 * self.m_frags
    }

    /// Shared memory a block takes for heads of `d` (q, k) and `dv` (v):
    /// q's block, and one or two tiles of k and v, rows padded by 8
    /// elements.
    pub fn shared_bytes(&self, d: usize, dv: usize) -> usize {
        let buffers = if self.double_buffer { 2 } else { 1 };
        (self.queries() * (d + 8) + buffers * self.keys * (d + 8 + dv + 8)) * 2
    }

    /// A clear error for a tiling the kernel cannot take.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !matches!(self.m_frags, 1 | 2) || !matches!(self.keys, 64 | 128) {
            return Err(format!("{self:?}: m_frags must be 1 or 2, keys 64 or 128"));
        }
        Ok(())
    }

    /// A short name: `m2k64d` (m_frags, keys, `d` if double-buffered).
    pub fn name(&self) -> String {
        format!("m{}k{}{}", self.m_frags, self.keys, if self.double_buffer { "d" } else { "" })
    }
}

/// Whether the tensor-core form takes `a` with operands `specs`: q, k and v
/// all f16 or all bf16, head sizes multiples of 16 up to 128.
pub(crate) fn tensor_core_attention(a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> bool {
    let t = specs[0].1;
    matches!(t, DType::BF16 | DType::F16)
        && specs[1].1 == t
        && specs[2].1 == t
        && [a.d, a.dv].iter().all(|&h| h > 0 && h % 16 == 0 && h <= 128)
        && a.l > 0
        && a.s > 0
}

/// 2^x by the special-function unit, subnormal results flushed to zero
/// (`ex2.approx.ftz.f32`, FlashAttention's `exp2f` under fast math):
/// `math.exp2` becomes libdevice's, whose `ex2.approx.f32` keeps
/// subnormals with a scaling before and after.
fn ex2(k: &mut Kernel, x: &str) -> String {
    k.val(&format!("llvm.call_intrinsic \"llvm.nvvm.ex2.approx.ftz.f32\"({x}) : (f32) -> f32"))
}

impl Generator {
    /// Block (b, tile) takes `tile.queries()` query rows of batch b, 16 x
    /// `m_frags` per warp, their fragments loaded once from shared memory
    /// by `ldmatrix`; under a causal mask the blocks of the last rows (the
    /// most keys) are numbered first, so the short ones finish the grid.
    /// It walks the keys in tiles of `tile.keys` rows of k and v, copied
    /// by `cp.async` into shared memory (rows padded by 8 elements, so the
    /// eight 16-byte rows an `ldmatrix` reads fall in distinct banks; rows
    /// past the last key zero-filled); double-buffered, the next tile's
    /// copies are issued before this tile's products and waited for at the
    /// top of the next iteration, one barrier a tile. Per tile each warp
    /// computes its scores S = q k^T with `mma.sync` (f32 accumulators:
    /// lane 4g + c holds rows g and g + 8, columns 2c and 2c + 1 of each
    /// 8-key fragment; each k fragment read once for the warp's query
    /// fragments), masks them only in tiles that reach past the warp's
    /// first row (causal: key <= row) or past the last key, and folds them
    /// into the online softmax in base 2 as FlashAttention-2 does: the
    /// scale times log2(e) goes into one multiply-add before `exp2`, so a
    /// score costs a multiply-add, an `ex2` and its max and sum. Row maxima
    /// over the four lanes of a row by xor shuffles, the output accumulator
    /// rescaled by 2^((m - m') c), the probabilities rounded to the operand
    /// type and, being in the layout of an `mma` A fragment already, used
    /// directly for O += P v (v's fragments by transposing `ldmatrix`).
    /// Each lane's running sum is its own columns' until the end, when the
    /// row's four lanes add theirs; the output is O / l. Causal blocks stop
    /// at the tile past their last row.
    ///
    /// With `stats` (for `ll.attention_backward`, whose buffers `specs`
    /// are), no v and no O: each row's log-sum-exp of the scaled scores
    /// (natural log) into `stats[row]`, and rowsum(grad_output * out) into
    /// `stats[R + row]`, a row per thread after the loop.
    pub(crate) fn gpu_attention_tc(
        &mut self,
        a: &AttentionShape,
        specs: &[(Vec<usize>, DType)],
        tile: AttentionTile,
        stats: bool,
    ) -> Kernels {
        let et = specs[0].1;
        let e = et.mlir();
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let mf = tile.m_frags;
        let (bq, bk, threads) = (tile.queries(), tile.keys, TC_THREADS);
        let buffers = if tile.double_buffer { 2 } else { 1 };
        let (q_ld, k_ld, v_ld) = (d + 8, d + 8, dv + 8);
        // Elements of q's block and of one tile of k and of v.
        let (q_el, k_el, v_el) = (bq * q_ld, bk * k_ld, bk * v_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (tq, tk, tv, to) = (ty(0), ty(1), ty(2), ty(3));
        let shared = |n: usize| format!("memref<{n}x{e}, #gpu.address_space<workgroup>>");
        let (sq, sk, sv) = (shared(q_el), shared(buffers * k_el), shared(buffers * v_el));

        let mut k = Kernel::new();
        let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
        k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
        let k_at = k.index(q_el * 2);
        let v_at = k.index((q_el + buffers * k_el) * 2);
        k.line(&format!("%Qs = memref.view %smem[%c0][] : {dynamic} to {sq}"));
        k.line(&format!("%Ks = memref.view %smem[{k_at}][] : {dynamic} to {sk}"));
        k.line(&format!("%Vs = memref.view %smem[{v_at}][] : {dynamic} to {sv}"));
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let tiles = l.div_ceil(bq);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let mut q_tile = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        if a.causal {
            let last = k.index(tiles - 1);
            q_tile = k.val(&format!("arith.subi {last}, {q_tile} : index"));
        }
        let first = k.mad(&q_tile, bq, "%c0");
        let (c32, c8, c4, c2) = (k.index(32), k.index(8), k.index(4), k.index(2));
        let lane = k.val(&format!("arith.remui {tid}, {c32} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {c32} : index"));
        let quad = k.val(&format!("arith.divui {lane}, {c8} : index"));
        let r8 = k.val(&format!("arith.remui {lane}, {c8} : index"));
        let q_lo = k.val(&format!("arith.remui {quad}, {c2} : index"));
        let q_hi = k.val(&format!("arith.divui {quad}, {c2} : index"));
        let g = k.val(&format!("arith.divui {lane}, {c4} : index"));
        let c = k.val(&format!("arith.remui {lane}, {c4} : index"));
        // The warp's first row in the block.
        let wm0 = k.mad(&warp, 16 * mf, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let q_base = k.mad(&b, l * d, "%c0");
        let k_base = k.mad(&b, s * d, "%c0");
        let v_base = k.mad(&b, s * dv, "%c0");
        let o_base = k.mad(&b, l * dv, "%c0");

        // Issues the copies of `rows x cols` at row r0 (of `limit` rows) of
        // buffer `buf` into `smem` (row length `ld`) from element `offset`,
        // as one group of copies.
        let issue = |k: &mut Kernel,
                     (buf, gty, base): (&str, &str, &str),
                     (r0, limit): (&str, &str),
                     (rows, cols): (usize, usize),
                     (smem, st, ld): (&str, &str, usize),
                     offset: &str| {
            let cl = k.index(cols);
            let mut tokens = Vec::new();
            for ch in tile_chunks(k, &tid, threads, rows, cols, base, r0, "%c0", limit, cols) {
                let col = k.mad(&ch.chunk, 8, offset);
                let at = k.mad(&ch.r, ld, &col);
                tokens.push(async_chunk(k, &ch, &cl, buf, gty, smem, st, &at));
            }
            k.val(&format!("nvgpu.device_async_create_group {}", tokens.join(", ")));
        };
        // k's and v's tile from key t0 into buffer offsets (ko, vo).
        let issue_kv = |k: &mut Kernel, t0: &str, (ko, vo): (&str, &str)| {
            issue(k, ("%b1", &tk, &k_base), (t0, &s_c), (bk, d), ("%Ks", &sk, k_ld), ko);
            if !stats {
                issue(k, ("%b2", &tv, &v_base), (t0, &s_c), (bk, dv), ("%Vs", &sv, v_ld), vo);
            }
        };
        issue(&mut k, ("%b0", &tq, &q_base), (&first, &l_c), (bq, d), ("%Qs", &sq, q_ld), "%c0");
        if tile.double_buffer {
            issue_kv(&mut k, "%c0", ("%c0", "%c0"));
        }
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");

        let frag = format!("vector<4x2x{e}>");
        let reg = |k: &mut Kernel, f: &str, i: usize| fragment_register(k, f, i, et);
        // Two f32 values as one register of 16-bit pairs (the first in the
        // low half).
        let pack = |k: &mut Kernel, x: &str, y: &str| -> String {
            let v = k.val(&format!("vector.from_elements {x}, {y} : vector<2xf32>"));
            let h = k.val(&format!("arith.truncf {v} : vector<2xf32> to vector<2x{e}>"));
            if et == DType::BF16 { k.val(&format!("llvm.bitcast {h} : vector<2xbf16> to i32")) } else { h }
        };
        let mma = |k: &mut Kernel, a: &[String], b: &[String], acc: &[String]| mma_16816(k, a, b, acc, et);

        // The warp's query fragments: [m][one per 16 of the head].
        let a_lane = {
            let row = k.mad(&q_lo, 8, &r8);
            let row = k.add(&wm0, &row);
            let col = k.mad(&q_hi, 8, "%c0");
            k.mad(&row, q_ld, &col)
        };
        let mut q_frags = Vec::new();
        for m in 0..mf {
            let mut frags = Vec::new();
            for ks in 0..d / 16 {
                let at = k.mad("%c1", m * 16 * q_ld + ks * 16, &a_lane);
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %Qs[{at}] {{numTiles = 4 : i32, transpose = false}} : {sq} -> {frag}"
                ));
                frags.push((0..4).map(|i| reg(&mut k, &f, i)).collect::<Vec<_>>());
            }
            q_frags.push(frags);
        }
        // k's fragments (stored keys x head: mma's column-major B as is):
        // lane row r + 8 q_hi, column 8 q_lo; v's (stored keys x dv: B
        // transposed by ldmatrix): row r + 8 q_lo, column 8 q_hi.
        let k_lane = {
            let row = k.mad(&q_hi, 8, &r8);
            let col = k.mad(&q_lo, 8, "%c0");
            k.mad(&row, k_ld, &col)
        };
        let v_lane = {
            let row = k.mad(&q_lo, 8, &r8);
            let col = k.mad(&q_hi, 8, "%c0");
            k.mad(&row, v_ld, &col)
        };

        let f32t = DType::F32;
        let ninf = k.float(f64::NEG_INFINITY, f32t);
        let zero = k.float(0.0, f32t);
        // Scores are kept unscaled where the scale is positive (the max of
        // s and of s x scale are at the same key), and exponentiated as
        // 2^(s c - m c) with c = scale log2(e); else scaled first.
        let positive = a.scale > 0.0;
        let c_exp = k.float(if positive { a.scale * std::f64::consts::LOG2_E } else { std::f64::consts::LOG2_E }, f32t);
        let scale = k.float(a.scale, f32t);
        let (bq_c, bk_c) = (k.index(bq), k.index(bk));
        let hi = if a.causal {
            let end = k.add(&first, &bq_c);
            k.val(&format!("arith.minui {end}, {s_c} : index"))
        } else {
            s_c.clone()
        };
        let width = k.val("arith.constant 32 : i32");
        let (one_i, two_i) = (k.val("arith.constant 1 : i32"), k.val("arith.constant 2 : i32"));
        // The warp's first row, and this lane's rows g and g + 8 of each
        // of its fragments.
        let warp_row = k.add(&first, &wm0);
        let lane_row = k.add(&warp_row, &g);
        let rows: Vec<[String; 2]> =
            (0..mf).map(|m| [k.mad("%c1", 16 * m, &lane_row), k.mad("%c1", 16 * m + 8, &lane_row)]).collect();
        let o_frags = if stats { 0 } else { dv / 8 };
        // Carried per query fragment: the running max of rows g and g + 8
        // (unscaled where the scale is positive), this lane's share of their
        // sums, and the output accumulators (4 per 8-column fragment).
        let per = 4 + o_frags * 4;
        let mut init = Vec::new();
        for _ in 0..mf {
            init.extend([ninf.clone(), ninf.clone(), zero.clone(), zero.clone()]);
            init.extend(std::iter::repeat_n(zero.clone(), o_frags * 4));
        }
        let (t0, carried, results) = k.open_reduce_all("%c0", &hi, &bk_c, &init, "f32");
        let (ko, vo) = if tile.double_buffer {
            // This tile's copies landed (the wait) in every thread, and every
            // warp is done with the other buffer (the barrier): the next
            // tile's copies go there.
            k.line("nvvm.cp.async.wait.group 0");
            k.line("gpu.barrier");
            let step = k.val(&format!("arith.divui {t0}, {bk_c} : index"));
            let parity = k.val(&format!("arith.remui {step}, {c2} : index"));
            let ko = k.mad(&parity, k_el, "%c0");
            let vo = k.mad(&parity, v_el, "%c0");
            let next = k.add(&t0, &bk_c);
            let more = k.val(&format!("arith.cmpi ult, {next}, {hi} : index"));
            k.line(&format!("scf.if {more} {{"));
            k.depth += 1;
            let (k_el_c, v_el_c) = (k.index(k_el), k.index(v_el));
            let nko = k.val(&format!("arith.subi {k_el_c}, {ko} : index"));
            let nvo = k.val(&format!("arith.subi {v_el_c}, {vo} : index"));
            issue_kv(&mut k, &next, (&nko, &nvo));
            k.close();
            (ko, vo)
        } else {
            // Every warp done with the last tile before it is overwritten.
            k.line("gpu.barrier");
            issue_kv(&mut k, &t0, ("%c0", "%c0"));
            k.line("nvvm.cp.async.wait.group 0");
            k.line("gpu.barrier");
            ("%c0".to_string(), "%c0".to_string())
        };

        // S = q k^T: [m][bk / 8 fragments of 16 x 8].
        let s_frags = bk / 8;
        let mut sacc: Vec<Vec<Vec<String>>> = vec![vec![vec![zero.clone(); 4]; s_frags]; mf];
        for ks in 0..d / 16 {
            for np in 0..bk / 16 {
                let at = k.mad("%c1", np * 16 * k_ld + ks * 16, &k_lane);
                let at = k.add(&at, &ko);
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %Ks[{at}] {{numTiles = 4 : i32, transpose = false}} : {sk} -> {frag}"
                ));
                let r: Vec<String> = (0..4).map(|i| reg(&mut k, &f, i)).collect();
                for (m, acc) in sacc.iter_mut().enumerate() {
                    acc[2 * np] = mma(&mut k, &q_frags[m][ks], &r[..2], &acc[2 * np]);
                    acc[2 * np + 1] = mma(&mut k, &q_frags[m][ks], &r[2..], &acc[2 * np + 1]);
                }
            }
        }
        if !positive {
            for v in sacc.iter_mut().flatten().flatten() {
                *v = k.fop("mulf", v, &scale, f32t);
            }
        }
        // The mask, only in a tile with a key past the warp's first row
        // (causal) or past the last key: register i of fragment ni is row
        // g + 8 (i / 2), key t0 + 8 ni + 2 c + i % 2.
        let tile_end = k.add(&t0, &bk_c);
        let edge = if a.causal {
            let after_first = k.mad("%c1", 1, &warp_row);
            Some(k.val(&format!("arith.minui {after_first}, {s_c} : index")))
        } else if !s.is_multiple_of(bk) {
            Some(s_c.clone())
        } else {
            None
        };
        if let Some(edge) = edge {
            let need = k.val(&format!("arith.cmpi ugt, {tile_end}, {edge} : index"));
            let flat: Vec<String> = sacc.iter().flatten().flatten().cloned().collect();
            let types = vec!["f32".to_string(); flat.len()];
            let out = k.open_if(&need, &types);
            let key0 = k.mad(&c, 2, &t0);
            let mut masked = Vec::new();
            for (m, acc) in sacc.iter().enumerate() {
                for (ni, fr) in acc.iter().enumerate() {
                    for (i, v) in fr.iter().enumerate() {
                        let key = k.mad("%c1", ni * 8 + i % 2, &key0);
                        let mut ok = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
                        if a.causal {
                            let seen = k.val(&format!("arith.cmpi ule, {key}, {} : index", rows[m][i / 2]));
                            ok = k.val(&format!("arith.andi {ok}, {seen} : i1"));
                        }
                        masked.push(k.val(&format!("arith.select {ok}, {v}, {ninf} : f32")));
                    }
                }
            }
            k.else_carry(&masked, &types);
            k.close_carry(&flat, &types);
            let mut out = out.into_iter();
            for v in sacc.iter_mut().flatten().flatten() {
                *v = out.next().unwrap_or_default();
            }
        }

        let mut next = Vec::new();
        for (m, acc) in sacc.iter_mut().enumerate() {
            let state = &carried[m * per..(m + 1) * per];
            // Each row's max over its four lanes, then the new running max
            // (0 where the row has seen no key yet, so no -inf - -inf).
            let mut maxes = [ninf.clone(), ninf.clone()];
            for fr in acc.iter() {
                for (i, v) in fr.iter().enumerate() {
                    maxes[i / 2] = k.val(&format!("arith.maximumf {}, {v} : f32", maxes[i / 2]));
                }
            }
            let mut m_new = Vec::new();
            let mut m_scaled = Vec::new();
            let mut alpha = Vec::new();
            for h in 0..2 {
                let mut mx = maxes[h].clone();
                for o in [&one_i, &two_i] {
                    k.n += 1;
                    let other = format!("%s{}", k.n);
                    k.line(&format!("{other}, %v{} = gpu.shuffle xor {mx}, {o}, {width} : f32", k.n));
                    mx = k.val(&format!("arith.maximumf {mx}, {other} : f32"));
                }
                let mn = k.val(&format!("arith.maximumf {}, {mx} : f32", state[h]));
                let none = k.val(&format!("arith.cmpf oeq, {mn}, {ninf} : f32"));
                let mu = k.val(&format!("arith.select {none}, {zero}, {mn} : f32"));
                let dm = k.fop("subf", &state[h], &mu, f32t);
                let dm = k.fop("mulf", &dm, &c_exp, f32t);
                alpha.push(ex2(&mut k, &dm));
                m_scaled.push(k.fop("mulf", &mu, &c_exp, f32t));
                m_new.push(mn);
            }
            // Probabilities 2^(s c - m c) and this lane's sums.
            let mut sums = [zero.clone(), zero.clone()];
            for fr in acc.iter_mut() {
                for (i, v) in fr.iter_mut().enumerate() {
                    let sc = k.fop("mulf", v, &c_exp, f32t);
                    let x = k.fop("subf", &sc, &m_scaled[i / 2], f32t);
                    *v = ex2(&mut k, &x);
                    sums[i / 2] = k.fop("addf", &sums[i / 2], v, f32t);
                }
            }
            next.extend(m_new);
            for h in 0..2 {
                let kept = k.fop("mulf", &state[2 + h], &alpha[h], f32t);
                next.push(k.fop("addf", &kept, &sums[h], f32t));
            }
            for i in 0..o_frags * 4 {
                next.push(k.fop("mulf", &state[4 + i], &alpha[(i % 4) / 2], f32t));
            }
        }
        // O += P v, 16 keys at a time: fragments 2 kk and 2 kk + 1 of P are
        // the A fragment (rows g, g + 8; keys 2c, 2c + 1, then + 8); each v
        // fragment read once for the warp's query fragments.
        for kk in 0..if stats { 0 } else { bk / 16 } {
            let pa: Vec<Vec<String>> = sacc
                .iter()
                .map(|acc| {
                    let (p0, p1) = (&acc[2 * kk], &acc[2 * kk + 1]);
                    vec![
                        pack(&mut k, &p0[0], &p0[1]),
                        pack(&mut k, &p0[2], &p0[3]),
                        pack(&mut k, &p1[0], &p1[1]),
                        pack(&mut k, &p1[2], &p1[3]),
                    ]
                })
                .collect();
            for np in 0..dv / 16 {
                let at = k.mad("%c1", kk * 16 * v_ld + np * 16, &v_lane);
                let at = k.add(&at, &vo);
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %Vs[{at}] {{numTiles = 4 : i32, transpose = true}} : {sv} -> {frag}"
                ));
                let r: Vec<String> = (0..4).map(|i| reg(&mut k, &f, i)).collect();
                for (m, p) in pa.iter().enumerate() {
                    for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                        let at = m * per + 4 + (2 * np + half) * 4;
                        let acc = next[at..at + 4].to_vec();
                        let out = mma(&mut k, p, regs, &acc);
                        next.splice(at..at + 4, out);
                    }
                }
            }
        }
        k.close_with_all(&next, "f32");
        if stats {
            attention_stats(&mut k, a, specs, (&rows, &results, per), (&c_exp, &tid, &first, &c, &b), bq);
            self.finish_tc(k, specs, (a.batch * tiles) as u32, tile.shared_bytes(d, dv));
            return self.finish_attention_tc(a, specs, true);
        }

        // Each row's sum over its four lanes; the rows inside the output
        // stored as O / l.
        let col0 = k.mad(&c, 2, "%c0");
        let one = k.float(1.0, f32t);
        for (m, row_pair) in rows.iter().enumerate() {
            let state = &results[m * per..(m + 1) * per];
            for (h, row) in row_pair.iter().enumerate() {
                let mut t = state[2 + h].clone();
                for o in [&one_i, &two_i] {
                    k.n += 1;
                    let other = format!("%s{}", k.n);
                    k.line(&format!("{other}, %v{} = gpu.shuffle xor {t}, {o}, {width} : f32", k.n));
                    t = k.val(&format!("arith.addf {t}, {other} : f32"));
                }
                let inv = k.fop("divf", &one, &t, f32t);
                let inside = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
                k.line(&format!("scf.if {inside} {{"));
                k.depth += 1;
                let ob = k.mad(row, dv, &o_base);
                let ob = k.add(&ob, &col0);
                for on in 0..o_frags {
                    for j in 0..2 {
                        let y = k.fop("mulf", &state[4 + on * 4 + 2 * h + j], &inv, f32t);
                        let at = k.mad("%c1", on * 8 + j, &ob);
                        k.store(&y, "%b3", &at, &to);
                    }
                }
                k.close();
            }
        }
        self.finish_tc(k, specs, (a.batch * tiles) as u32, tile.shared_bytes(d, dv));
        self.finish_attention_tc(a, specs, false)
    }

    /// Appends the tensor-core kernel `k` on `blocks` blocks of
    /// [`TC_THREADS`] with `shared` bytes of dynamic shared memory.
    pub(crate) fn finish_tc(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)], blocks: u32, shared: usize) {
        let name = self.finish_gpu_func(k, specs, &[], [blocks.max(1), 1, 1], TC_THREADS as u32);
        if let Some(launch) = self.launches.get_mut(&name) {
            launch.shared_bytes = shared as u32;
        }
    }

    /// The forward's (or the statistics') kernel entry, just appended.
    fn finish_attention_tc(&self, a: &AttentionShape, specs: &[(Vec<usize>, DType)], stats: bool) -> Kernels {
        let work = (a.batch * a.l).max(1) as u64;
        let cost = if stats { 2 * a.s * a.d + 8 * a.s + 2 * a.dv } else { 2 * a.s * (a.d + a.dv) + 8 * a.s } as u64;
        vec![(self.last(), work, cost, (0..specs.len()).collect(), vec![])]
    }
}

/// The statistics' end (see [`Generator::gpu_attention_tc`]): from the
/// loop's `results` (per query fragment `per` values: the rows' maxima,
/// then this lane's sums), each row's log-sum-exp by lane c = 0; then
/// D a row per thread.
#[allow(clippy::type_complexity)]
fn attention_stats(
    k: &mut Kernel,
    a: &AttentionShape,
    specs: &[(Vec<usize>, DType)],
    (rows, results, per): (&[[String; 2]], &[String], usize),
    (c_exp, tid, first, c, b): (&str, &str, &str, &str, &str),
    bq: usize,
) {
    let f32t = DType::F32;
    let (l, dv) = (a.l, a.dv);
    let n_rows = a.batch * l;
    let stats_ty = flat_type(&specs[8].0, specs[8].1);
    let (l_c, ln2) = (k.index(l), k.float(std::f64::consts::LN_2, f32t));
    let row_base = k.mad(b, l, "%c0");
    let lead = k.val(&format!("arith.cmpi eq, {c}, %c0 : index"));
    for (m, row_pair) in rows.iter().enumerate() {
        let state = &results[m * per..(m + 1) * per];
        for (h, row) in row_pair.iter().enumerate() {
            let total = quad_sum(k, &state[2 + h]);
            let ms = k.fop("mulf", &state[h], c_exp, f32t);
            let lg = k.val(&format!("math.log2 {total} : f32"));
            let lse2 = k.fop("addf", &ms, &lg, f32t);
            let lse = k.fop("mulf", &lse2, &ln2, f32t);
            let inside = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
            let store = k.val(&format!("arith.andi {inside}, {lead} : i1"));
            k.line(&format!("scf.if {store} {{"));
            k.depth += 1;
            let at = k.add(&row_base, row);
            k.store(&lse, "%b8", &at, &stats_ty);
            k.close();
        }
    }
    // D = rowsum(grad_output * out), a row per thread.
    let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
    let (to, tdo) = (ty(3), ty(4));
    let bq_c = k.index(bq);
    for r0 in (0..bq).step_by(TC_THREADS) {
        let r = k.mad("%c1", r0, tid);
        let row = k.add(first, &r);
        let in_block = k.val(&format!("arith.cmpi ult, {r}, {bq_c} : index"));
        let in_rows = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
        let inside = k.val(&format!("arith.andi {in_block}, {in_rows} : i1"));
        k.line(&format!("scf.if {inside} {{"));
        k.depth += 1;
        let flat = k.add(&row_base, &row);
        let base = k.mad(&flat, dv, "%c0");
        let zero = k.float(0.0, f32t);
        let dvc = k.index(dv);
        let (x, acc, sum) = k.open_reduce("%c0", &dvc, &zero, "f32");
        let at = k.add(&base, &x);
        let g = k.load("%b4", &at, &tdo);
        let o = k.load("%b3", &at, &to);
        let p = k.fop("mulf", &g, &o, f32t);
        let next = k.fop("addf", &acc, &p, f32t);
        k.close_with(&next, "f32");
        let at = k.mad("%c1", n_rows, &flat);
        k.store(&sum, "%b8", &at, &stats_ty);
        k.close();
    }
}

/// `v` summed over the four lanes of an accumulator row (xor 1, 2).
pub(crate) fn quad_sum(k: &mut Kernel, v: &str) -> String {
    quad_reduce(k, v, "addf")
}

/// `op` (`addf`, `maximumf`) of `v` over the four lanes of an accumulator
/// row (lanes 4g .. 4g + 3: xor shuffles by 1 and 2).
pub(crate) fn quad_reduce(k: &mut Kernel, v: &str, op: &str) -> String {
    let width = k.val("arith.constant 32 : i32");
    let mut v = v.to_string();
    for o in [1, 2] {
        let oc = k.val(&format!("arith.constant {o} : i32"));
        k.n += 1;
        let other = format!("%s{}", k.n);
        k.line(&format!("{other}, %v{} = gpu.shuffle xor {v}, {oc}, {width} : f32", k.n));
        v = k.val(&format!("arith.{op} {v}, {other} : f32"));
    }
    v
}
