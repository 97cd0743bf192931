//! Attention on the tensor cores (f16/bf16 q, k, v; FlashAttention-2's
//! forward): `mma.sync.m16n8k16` for both products, the online softmax
//! on the accumulators in registers, so neither the scores nor the
//! probabilities reach memory.

use crate::codegen::ops::attention::{AttentionShape, LSE};
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
pub(crate) fn ex2(k: &mut Kernel, x: &str) -> String {
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
        let fr = Frags::new(et);
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let mf = tile.m_frags;
        let (bq, bk) = (tile.queries(), tile.keys);
        let buffers = if tile.double_buffer { 2 } else { 1 };
        let (q_ld, k_ld, v_ld) = (d + 8, d + 8, dv + 8);
        // Elements of q's block and of one tile of k and of v.
        let (q_el, k_el, v_el) = (bq * q_ld, bk * k_ld, bk * v_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (tq, tk, tv, to) = (ty(0), ty(1), ty(2), ty(3));

        let mut k = Kernel::new();
        let views = [("%Qs", q_el), ("%Ks", buffers * k_el), ("%Vs", buffers * v_el)];
        let [sq, sk, sv]: [String; 3] = smem_views(&mut k, et.mlir(), &views).try_into().unwrap_or_default();
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let (b, first, tiles) = query_block(&mut k, a, &block, bq);
        let ln = Lanes::of(&mut k, &tid);
        // The warp's first row in the block.
        let wm0 = k.mad(&ln.warp, 16 * mf, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let q_base = k.mad(&b, l * d, "%c0");
        let k_base = k.mad(&b, s * d, "%c0");
        let v_base = k.mad(&b, s * dv, "%c0");
        let o_base = k.mad(&b, l * dv, "%c0");

        // k's and v's tile from key t0 into buffer offsets (ko, vo).
        let issue_kv = |k: &mut Kernel, t0: &str, (ko, vo): (&str, &str)| {
            issue_tile(k, &tid, ("%b1", &tk, &k_base), (t0, &s_c), (bk, d), ("%Ks", &sk, k_ld), ko);
            if !stats {
                issue_tile(k, &tid, ("%b2", &tv, &v_base), (t0, &s_c), (bk, dv), ("%Vs", &sv, v_ld), vo);
            }
        };
        issue_tile(&mut k, &tid, ("%b0", &tq, &q_base), (&first, &l_c), (bq, d), ("%Qs", &sq, q_ld), "%c0");
        if tile.double_buffer {
            issue_kv(&mut k, "%c0", ("%c0", "%c0"));
        }
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");

        // The warp's query fragments: [m][one per 16 of the head].
        let a_lane = ln.a_at(&mut k, &wm0, q_ld);
        let mut q_frags = Vec::new();
        for m in 0..mf {
            let mut frags = Vec::new();
            for ks in 0..d / 16 {
                let at = k.mad("%c1", m * 16 * q_ld + ks * 16, &a_lane);
                frags.push(fr.ldsm(&mut k, ("%Qs", &sq), &at, false));
            }
            q_frags.push(frags);
        }
        // k's fragments (stored keys x head: mma's column-major B as is);
        // v's (stored keys x dv: B transposed by ldmatrix).
        let k_lane = ln.b_at(&mut k, k_ld);
        let v_lane = ln.bt_at(&mut k, v_ld);

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
        // The warp's first row, and this lane's rows g and g + 8 of each
        // of its fragments.
        let warp_row = k.add(&first, &wm0);
        let lane_row = k.add(&warp_row, &ln.g);
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
            let offsets = double_buffered(&mut k, (&t0, "%c0", &bk_c, &hi), &[k_el, v_el], |k, next, o| {
                issue_kv(k, next, (&o[0], &o[1]))
            });
            (offsets[0].clone(), offsets[1].clone())
        } else {
            // Every warp done with the last tile before it is overwritten.
            k.line("gpu.barrier");
            issue_kv(&mut k, &t0, ("%c0", "%c0"));
            k.line("nvvm.cp.async.wait.group 0");
            k.line("gpu.barrier");
            ("%c0".to_string(), "%c0".to_string())
        };

        // S = q k^T: fragment m s_frags + ni is query fragment m's 16 x 8
        // scores of keys 8 ni.
        let s_frags = bk / 8;
        let mut sacc: Vec<Vec<String>> = vec![vec![zero.clone(); 4]; s_frags * mf];
        for ks in 0..d / 16 {
            for np in 0..bk / 16 {
                let at = k.mad("%c1", np * 16 * k_ld + ks * 16, &k_lane);
                let at = k.add(&at, &ko);
                let r = fr.ldsm(&mut k, ("%Ks", &sk), &at, false);
                for (m, acc) in sacc.chunks_mut(s_frags).enumerate() {
                    acc[2 * np] = fr.mma(&mut k, &q_frags[m][ks], &r[..2], &acc[2 * np]);
                    acc[2 * np + 1] = fr.mma(&mut k, &q_frags[m][ks], &r[2..], &acc[2 * np + 1]);
                }
            }
        }
        if !positive {
            for v in sacc.iter_mut().flatten() {
                *v = k.fop("mulf", v, &scale, f32t);
            }
        }
        // The mask, only in a tile with a key past the warp's first row
        // (causal) or past the last key: register i of fragment ni is row
        // g + 8 (i / 2), key t0 + 8 ni + 2 c + i % 2.
        if let Some(need) = key_mask_need(&mut k, a, (&t0, &bk_c, bk), &warp_row, &s_c) {
            let key_origin = |k: &mut Kernel| k.mad(&ln.c, 2, &t0);
            mask_scores(&mut k, &need, &mut sacc, key_origin, |k, key0, f, i| {
                let (m, ni) = (f / s_frags, f % s_frags);
                let key = k.mad("%c1", ni * 8 + i % 2, key0);
                let ok = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
                if !a.causal {
                    return ok;
                }
                let seen = k.val(&format!("arith.cmpi ule, {key}, {} : index", rows[m][i / 2]));
                k.val(&format!("arith.andi {ok}, {seen} : i1"))
            });
        }

        let mut next = Vec::new();
        for (m, acc) in sacc.chunks_mut(s_frags).enumerate() {
            let state = &carried[m * per..(m + 1) * per];
            // Each row's max over its four lanes, then the new running max
            // (0 where the row has seen no key yet, so no -inf - -inf).
            let mut maxes = [ninf.clone(), ninf.clone()];
            for f in acc.iter() {
                for (i, v) in f.iter().enumerate() {
                    maxes[i / 2] = k.val(&format!("arith.maximumf {}, {v} : f32", maxes[i / 2]));
                }
            }
            let mut m_new = Vec::new();
            let mut m_scaled = Vec::new();
            let mut alpha = Vec::new();
            for h in 0..2 {
                let mx = quad_reduce(&mut k, &maxes[h], "maximumf");
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
            for f in acc.iter_mut() {
                for (i, v) in f.iter_mut().enumerate() {
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
            let pa: Vec<Vec<String>> =
                sacc.chunks(s_frags).map(|acc| fr.a_from(&mut k, &acc[2 * kk], &acc[2 * kk + 1])).collect();
            for np in 0..dv / 16 {
                let at = k.mad("%c1", kk * 16 * v_ld + np * 16, &v_lane);
                let at = k.add(&at, &vo);
                let r = fr.ldsm(&mut k, ("%Vs", &sv), &at, true);
                for (m, p) in pa.iter().enumerate() {
                    for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                        let at = m * per + 4 + (2 * np + half) * 4;
                        let out = fr.mma(&mut k, p, regs, &next[at..at + 4]);
                        next.splice(at..at + 4, out);
                    }
                }
            }
        }
        k.close_with_all(&next, "f32");
        if stats {
            attention_stats(&mut k, a, specs, (&rows, &results, per), (&c_exp, &tid, &first, &ln.c, &b), bq);
            self.finish_tc(k, specs, (a.batch * tiles) as u32, tile.shared_bytes(d, dv));
            return self.finish_attention_tc(a, specs, true);
        }

        // Each row's sum over its four lanes; the rows inside the output
        // stored as O / l, and (for the backward) each row's log-sum-exp by
        // the row's lane c = 0.
        let col0 = k.mad(&ln.c, 2, "%c0");
        let one = k.float(1.0, f32t);
        let lse_ty = AttentionShape::lse_buffer(specs);
        let keep =
            lse_ty.as_ref().map(|_| (k.mad(&b, l, "%c0"), k.val(&format!("arith.cmpi eq, {}, %c0 : index", ln.c))));
        for (m, row_pair) in rows.iter().enumerate() {
            let state = &results[m * per..(m + 1) * per];
            for (h, row) in row_pair.iter().enumerate() {
                let t = quad_sum(&mut k, &state[2 + h]);
                let inv = k.fop("divf", &one, &t, f32t);
                let lse = lse_ty.as_ref().map(|_| row_lse(&mut k, &state[h], &t, &c_exp));
                let inside = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
                k.line(&format!("scf.if {inside} {{"));
                k.depth += 1;
                let ob = k.mad(row, dv, &o_base);
                let ob = k.add(&ob, &col0);
                store_fragments(&mut k, &state[4..], (h, dv), Some(&inv), ("%b3", &ob, &to));
                if let (Some(lse), Some(ty), Some((row_base, lead))) = (&lse, &lse_ty, &keep) {
                    k.line(&format!("scf.if {lead} {{"));
                    k.depth += 1;
                    let at = k.add(row_base, row);
                    k.store(lse, &format!("%b{LSE}"), &at, ty);
                    k.close();
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
    let l_c = k.index(l);
    let row_base = k.mad(b, l, "%c0");
    let lead = k.val(&format!("arith.cmpi eq, {c}, %c0 : index"));
    for (m, row_pair) in rows.iter().enumerate() {
        let state = &results[m * per..(m + 1) * per];
        for (h, row) in row_pair.iter().enumerate() {
            let total = quad_sum(k, &state[2 + h]);
            let lse = row_lse(k, &state[h], &total, c_exp);
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

/// A row's log-sum-exp of the scaled scores (natural log) from the online
/// softmax's end: its running max `max` (in the units `c_exp` turns into
/// base-2 exponents) and its sum over the four lanes `total`.
fn row_lse(k: &mut Kernel, max: &str, total: &str, c_exp: &str) -> String {
    let f32t = DType::F32;
    let ms = k.fop("mulf", max, c_exp, f32t);
    let lg = k.val(&format!("math.log2 {total} : f32"));
    let lse2 = k.fop("addf", &ms, &lg, f32t);
    let ln2 = k.float(std::f64::consts::LN_2, f32t);
    k.fop("mulf", &lse2, &ln2, f32t)
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

/// A warp's lanes as `mma.sync.m16n8k16` and `ldmatrix` see them: lane =
/// 8 quad + r8 with quad = 2 q_hi + q_lo, and 4 g + c for the accumulators
/// (lane 4g + c holds rows g and g + 8, columns 2c and 2c + 1 of each
/// 8-column fragment).
pub(crate) struct Lanes {
    pub(crate) warp: String,
    r8: String,
    q_lo: String,
    q_hi: String,
    pub(crate) g: String,
    pub(crate) c: String,
}

impl Lanes {
    /// The lanes of thread `tid`.
    pub(crate) fn of(k: &mut Kernel, tid: &str) -> Lanes {
        let (c32, c8, c4, c2) = (k.index(32), k.index(8), k.index(4), k.index(2));
        let lane = k.val(&format!("arith.remui {tid}, {c32} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {c32} : index"));
        let quad = k.val(&format!("arith.divui {lane}, {c8} : index"));
        let r8 = k.val(&format!("arith.remui {lane}, {c8} : index"));
        let q_lo = k.val(&format!("arith.remui {quad}, {c2} : index"));
        let q_hi = k.val(&format!("arith.divui {quad}, {c2} : index"));
        let g = k.val(&format!("arith.divui {lane}, {c4} : index"));
        let c = k.val(&format!("arith.remui {lane}, {c4} : index"));
        Lanes { warp, r8, q_lo, q_hi, g, c }
    }

    /// This lane's `ldmatrix` address of an A fragment (16 x 16, row-major,
    /// from row `row0` of rows of `ld`).
    pub(crate) fn a_at(&self, k: &mut Kernel, row0: &str, ld: usize) -> String {
        let row = k.mad(&self.q_lo, 8, &self.r8);
        let row = k.add(row0, &row);
        let col = k.mad(&self.q_hi, 8, "%c0");
        k.mad(&row, ld, &col)
    }

    /// Of two B fragments (16 deep, 2 x 8 wide) stored n-major (an n row
    /// holds its 16 k values, as k for q k^T): row r8 + 8 q_hi, column
    /// 8 q_lo.
    pub(crate) fn b_at(&self, k: &mut Kernel, ld: usize) -> String {
        let row = k.mad(&self.q_hi, 8, &self.r8);
        let col = k.mad(&self.q_lo, 8, "%c0");
        k.mad(&row, ld, &col)
    }

    /// Of two B fragments stored k-major (a k row holds 16 n values, as v
    /// for P v; read by the transposing `ldmatrix`): row r8 + 8 q_lo,
    /// column 8 q_hi.
    pub(crate) fn bt_at(&self, k: &mut Kernel, ld: usize) -> String {
        let row = k.mad(&self.q_lo, 8, &self.r8);
        let col = k.mad(&self.q_hi, 8, "%c0");
        k.mad(&row, ld, &col)
    }
}

/// Fragments of 16-bit element type `et`: `ldmatrix`, `mma.sync` and the
/// packing of f32 accumulators into A fragments.
pub(crate) struct Frags {
    pub(crate) et: DType,
    frag: String,
}

impl Frags {
    pub(crate) fn new(et: DType) -> Frags {
        Frags { et, frag: format!("vector<4x2x{}>", et.mlir()) }
    }

    /// The 4 registers `ldmatrix.x4` reads at `at` of `smem` (type `st`).
    pub(crate) fn ldsm(&self, k: &mut Kernel, (smem, st): (&str, &str), at: &str, transpose: bool) -> Vec<String> {
        let f = k.val(&format!(
            "nvgpu.ldmatrix {smem}[{at}] {{numTiles = 4 : i32, transpose = {transpose}}} : {st} -> {}",
            self.frag
        ));
        (0..4).map(|i| fragment_register(k, &f, i, self.et)).collect()
    }

    /// Two f32 values as one register of 16-bit pairs (the first low).
    pub(crate) fn pack(&self, k: &mut Kernel, x: &str, y: &str) -> String {
        let e = self.et.mlir();
        let v = k.val(&format!("vector.from_elements {x}, {y} : vector<2xf32>"));
        let h = k.val(&format!("arith.truncf {v} : vector<2xf32> to vector<2x{e}>"));
        if self.et == DType::BF16 { k.val(&format!("llvm.bitcast {h} : vector<2xbf16> to i32")) } else { h }
    }

    /// The A fragment of 16 columns from accumulator fragments `lo`
    /// (columns 0-7) and `hi` (8-15): being in the A layout already.
    pub(crate) fn a_from(&self, k: &mut Kernel, lo: &[String], hi: &[String]) -> Vec<String> {
        vec![
            self.pack(k, &lo[0], &lo[1]),
            self.pack(k, &lo[2], &lo[3]),
            self.pack(k, &hi[0], &hi[1]),
            self.pack(k, &hi[2], &hi[3]),
        ]
    }

    pub(crate) fn mma(&self, k: &mut Kernel, a: &[String], b: &[String], acc: &[String]) -> Vec<String> {
        mma_16816(k, a, b, acc, self.et)
    }
}

/// Block `block` of a kernel whose blocks take `rows` query rows of each
/// of a's sequences: its sequence b and its first row; under a causal
/// mask the blocks of the last rows (the most keys) are numbered first,
/// so the short ones finish the grid. Returns (b, first, blocks per
/// sequence).
pub(crate) fn query_block(k: &mut Kernel, a: &AttentionShape, block: &str, rows: usize) -> (String, String, usize) {
    let tiles = a.l.div_ceil(rows);
    let tiles_c = k.index(tiles);
    let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
    let mut q_tile = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
    if a.causal {
        let last = k.index(tiles - 1);
        q_tile = k.val(&format!("arith.subi {last}, {q_tile} : index"));
    }
    let first = k.mad(&q_tile, rows, "%c0");
    (b, first, tiles)
}

/// Dynamic shared memory cut into `views` (name, elements of `e`) one
/// after the other; returns each view's memref type.
pub(crate) fn smem_views(k: &mut Kernel, e: &str, views: &[(&str, usize)]) -> Vec<String> {
    let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
    k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
    let mut at = vec!["%c0".to_string()];
    let mut bytes = 0;
    for (_, n) in &views[..views.len() - 1] {
        bytes += n * 2;
        at.push(k.index(bytes));
    }
    views
        .iter()
        .zip(at)
        .map(|((name, n), at)| {
            let ty = format!("memref<{n}x{e}, #gpu.address_space<workgroup>>");
            k.line(&format!("{name} = memref.view %smem[{at}][] : {dynamic} to {ty}"));
            ty
        })
        .collect()
}

/// Issues the copies of `rows x cols` at row r0 (of `limit` rows) of buffer
/// `buf` into `smem` (row length `ld`) from element `offset`, as one group
/// of `cp.async` copies (rows past `limit` zero-filled).
#[allow(clippy::too_many_arguments)]
pub(crate) fn issue_tile(
    k: &mut Kernel,
    tid: &str,
    (buf, gty, base): (&str, &str, &str),
    (r0, limit): (&str, &str),
    (rows, cols): (usize, usize),
    (smem, st, ld): (&str, &str, usize),
    offset: &str,
) {
    let cl = k.index(cols);
    let mut tokens = Vec::new();
    for ch in tile_chunks(k, tid, TC_THREADS, rows, cols, base, r0, "%c0", limit, cols) {
        let col = k.mad(&ch.chunk, 8, offset);
        let at = k.mad(&ch.r, ld, &col);
        tokens.push(async_chunk(k, &ch, &cl, buf, gty, smem, st, &at));
    }
    k.val(&format!("nvgpu.device_async_create_group {}", tokens.join(", ")));
}

/// The top of a loop over double-buffered tiles from `start` by `step_c`
/// (below `bound`): this tile's copies landed (the wait) in every thread
/// and every warp is done with the other buffers (the barrier); returns
/// this tile's offsets into the buffers of `elems` elements each, after
/// `issue(next tile, its offsets)` copies the next tile into the others.
pub(crate) fn double_buffered(
    k: &mut Kernel,
    (t0, start, step_c, bound): (&str, &str, &str, &str),
    elems: &[usize],
    issue: impl FnOnce(&mut Kernel, &str, &[String]),
) -> Vec<String> {
    k.line("nvvm.cp.async.wait.group 0");
    k.line("gpu.barrier");
    let rel = if start == "%c0" { t0.to_string() } else { k.val(&format!("arith.subi {t0}, {start} : index")) };
    let step = k.val(&format!("arith.divui {rel}, {step_c} : index"));
    let c2 = k.index(2);
    let parity = k.val(&format!("arith.remui {step}, {c2} : index"));
    let offsets: Vec<String> = elems.iter().map(|&n| k.mad(&parity, n, "%c0")).collect();
    let next = k.add(t0, step_c);
    let more = k.val(&format!("arith.cmpi ult, {next}, {bound} : index"));
    k.line(&format!("scf.if {more} {{"));
    k.depth += 1;
    let sizes: Vec<String> = elems.iter().map(|&n| k.index(n)).collect();
    let others: Vec<String> =
        sizes.iter().zip(&offsets).map(|(n, o)| k.val(&format!("arith.subi {n}, {o} : index"))).collect();
    issue(k, &next, &others);
    k.close();
    offsets
}

/// The causal or key-tail mask of a tile of keys from `t0` (`bk_c` of
/// them), whose rows start at `warp_row`: whether it is needed (a key past
/// the warp's first row, or past the last key); `None` where no tile of
/// `a`'s needs it.
pub(crate) fn key_mask_need(
    k: &mut Kernel,
    a: &AttentionShape,
    (t0, bk_c, bk): (&str, &str, usize),
    warp_row: &str,
    s_c: &str,
) -> Option<String> {
    let tile_end = k.add(t0, bk_c);
    let edge = if a.causal {
        let after_first = k.mad("%c1", 1, warp_row);
        Some(k.val(&format!("arith.minui {after_first}, {s_c} : index")))
    } else if !a.s.is_multiple_of(bk) {
        Some(s_c.to_string())
    } else {
        None
    }?;
    Some(k.val(&format!("arith.cmpi ugt, {tile_end}, {edge} : index")))
}

/// Under `need`, every score `frags[f][i]` for which `ok(k, origin, f, i)`
/// (an i1) is false becomes -inf, `origin` made by `origin(k)` inside the
/// branch; without, the scores stay (an `scf.if` with the tile's scores as
/// results, so the common tile pays no compare).
pub(crate) fn mask_scores(
    k: &mut Kernel,
    need: &str,
    frags: &mut [Vec<String>],
    origin: impl FnOnce(&mut Kernel) -> String,
    ok: impl Fn(&mut Kernel, &str, usize, usize) -> String,
) {
    let ninf = k.float(f64::NEG_INFINITY, DType::F32);
    let flat: Vec<String> = frags.iter().flatten().cloned().collect();
    let types = vec!["f32".to_string(); flat.len()];
    let out = k.open_if(need, &types);
    let o = origin(k);
    let mut masked = Vec::new();
    for (f, fr) in frags.iter().enumerate() {
        for (i, v) in fr.iter().enumerate() {
            let keep = ok(k, &o, f, i);
            masked.push(k.val(&format!("arith.select {keep}, {v}, {ninf} : f32")));
        }
    }
    k.else_carry(&masked, &types);
    k.close_carry(&flat, &types);
    let mut out = out.into_iter();
    for v in frags.iter_mut().flatten() {
        *v = out.next().unwrap_or_default();
    }
}

/// Stores row g + 8 `h` of accumulator fragments `acc` (4 registers per
/// 8-column fragment, `n` columns) times `factor`, from element `base`
/// of buffer `buf` (type `ty`): columns 8 fr + 2c and + 1.
pub(crate) fn store_fragments(
    k: &mut Kernel,
    acc: &[String],
    (h, n): (usize, usize),
    factor: Option<&str>,
    (buf, base, ty): (&str, &str, &str),
) {
    for fr in 0..n / 8 {
        for j in 0..2 {
            let x = &acc[fr * 4 + 2 * h + j];
            let y = match factor {
                Some(f) => k.fop("mulf", x, f, DType::F32),
                None => x.clone(),
            };
            let at = k.mad("%c1", fr * 8 + j, base);
            k.store(&y, buf, &at, ty);
        }
    }
}
