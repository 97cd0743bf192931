//! Attention's backward on the tensor cores (f16/bf16 heads, multiples of
//! 16 up to 128): FlashAttention-2's backward, the probabilities
//! recomputed per tile from each query row's log-sum-exp, so neither they
//! nor their gradient reach memory. Three kernels: the rows' statistics
//! (the forward's kernel without v, `flash.rs`), dk and dv a block of keys
//! at a time, and dq a block of queries at a time. dq has a kernel of its
//! own rather than FlashAttention-2's atomic adds, so every gradient
//! element sums its terms in one order and a run repeats its bits; it
//! costs the scores' and dP's products a second time.

use crate::codegen::ops::attention::AttentionShape;
use crate::codegen::ops::flash::{
    Frags, Lanes, double_buffered, ex2, issue_tile, key_mask_need, mask_scores, query_block, smem_views,
    store_fragments,
};
use crate::codegen::prelude::*;

/// Threads (query rows) per block of the D kernel.
const DELTA_THREADS: usize = 128;

/// Rows (queries or keys) a block owns: 4 warps of 16.
const BLOCK_ROWS: usize = 64;

/// Rows of the other operand per shared-memory tile.
const TILE_ROWS: usize = 64;

/// Buffers of `ll.attention_backward`, in operand order.
const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const O: usize = 3;
const DO: usize = 4;
const DQ: usize = 5;
const DK: usize = 6;
const DV: usize = 7;
const STATS: usize = 8;
/// The forward's log-sum-exps, where it kept them (then `STATS` holds D
/// alone).
const LSE: usize = 9;

/// Where sequence b's rows start in each buffer (elements): q, k, v, the
/// result (and its gradient), and the statistics' rows.
struct Bases {
    q: String,
    k: String,
    v: String,
    o: String,
    row: String,
}

impl Bases {
    fn of(k: &mut Kernel, a: &AttentionShape, b: &str) -> Bases {
        let (l, s, d, dv) = (a.l, a.s, a.d, a.dv);
        let mut base = |n: usize| k.mad(b, n, "%c0");
        Bases { q: base(l * d), k: base(s * d), v: base(s * dv), o: base(l * dv), row: base(l) }
    }
}

/// Shared memory of either kernel: the block's own two operands, and two
/// buffers of a tile of each of the other two (rows padded by 8).
fn backward_shared_bytes(own: [usize; 2], other: [usize; 2]) -> usize {
    (BLOCK_ROWS * (own[0] + 8 + own[1] + 8) + 2 * TILE_ROWS * (other[0] + 8 + other[1] + 8)) * 2
}

impl Generator {
    /// Attention's backward on the tensor cores: the statistics' kernel
    /// (D alone where the forward kept the log-sum-exps), then dk and dv,
    /// then dq.
    pub(crate) fn gpu_attention_backward_tc(
        &mut self,
        a: &AttentionShape,
        specs: &[(Vec<usize>, DType)],
        tile: crate::codegen::AttentionTile,
    ) -> Kernels {
        let mut kernels = if specs.len() > LSE {
            self.gpu_attention_delta(a, specs)
        } else {
            self.gpu_attention_tc(a, specs, tile, true)
        };
        kernels.extend(self.gpu_attention_dkdv_tc(a, specs));
        kernels.extend(self.gpu_attention_dq_tc(a, specs));
        kernels
    }

    /// D = rowsum(grad_output * out) into `stats`, a query row per thread,
    /// 8 columns a load: FlashAttention-2's preprocessing, all the
    /// statistics' kernel has left to do when the forward kept each row's
    /// log-sum-exp.
    fn gpu_attention_delta(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (rows, dv) = (a.batch * a.l, a.dv);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let lanes = if dv % 8 == 0 { 8 } else { 1 };
        let vf = format!("vector<{lanes}xf32>");
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let row = k.mad(&block, DELTA_THREADS, &tid);
        let rows_c = k.index(rows);
        let inside = k.val(&format!("arith.cmpi ult, {row}, {rows_c} : index"));
        k.line(&format!("scf.if {inside} {{"));
        k.depth += 1;
        let base = k.mad(&row, dv, "%c0");
        let zero = k.val(&format!("arith.constant dense<0.0> : {vf}"));
        let (n, step) = (k.index(dv), k.index(lanes));
        let (x, acc, sums) = k.open_carry("%c0", &n, &step, &[(zero, vf.clone())]);
        let at = k.add(&base, &x);
        let g = k.vload(&format!("%b{DO}"), &at, &ty(DO), lanes);
        let o = k.vload(&format!("%b{O}"), &at, &ty(O), lanes);
        let next = k.val(&format!("vector.fma {g}, {o}, {} : {vf}", acc[0]));
        k.close_carry(&[next], std::slice::from_ref(&vf));
        let sum = k.val(&format!("vector.reduction <add>, {} : {vf} into f32", sums[0]));
        k.store(&sum, &format!("%b{STATS}"), &row, &ty(STATS));
        k.close();
        let blocks = rows.div_ceil(DELTA_THREADS).max(1) as u32;
        let name = self.finish_gpu_func(k, specs, &[], [blocks, 1, 1], DELTA_THREADS as u32);
        vec![(name, rows.max(1) as u64, 2 * dv as u64, (0..specs.len()).collect(), vec![])]
    }

    /// dk and dv: block (b, key tile) owns [`BLOCK_ROWS`] keys, 16 a warp,
    /// their k and v fragments (A operands) loaded once; it walks the
    /// queries that see them (causal: from its first key on) in tiles of
    /// [`TILE_ROWS`] of q and grad_output, double-buffered by `cp.async`.
    /// Per tile a warp computes S^T = k q^T and dP^T = v dO^T (16 keys x
    /// 64 queries), masks the tiles that reach its diagonal or past the
    /// last query, P^T = 2^(S^T c - lse2) with each query's statistics
    /// read for the lane's columns, dS^T = P^T (dP^T - D), then dv += P^T
    /// dO and dk += dS^T q, the probabilities and dS^T packed from the
    /// accumulators as A fragments, q and dO read by transposing `ldmatrix`.
    fn gpu_attention_dkdv_tc(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let fr = Frags::new(specs[0].1);
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let (bk, bq) = (BLOCK_ROWS, TILE_ROWS);
        let (k_ld, v_ld, q_ld, o_ld) = (d + 8, dv + 8, d + 8, dv + 8);
        let (q_el, o_el) = (bq * q_ld, bq * o_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut k = Kernel::new();
        let views = [("%Ks", bk * k_ld), ("%Vs", bk * v_ld), ("%Qs", 2 * q_el), ("%Os", 2 * o_el)];
        let [sk, sv, sq, so]: [String; 4] = smem_views(&mut k, fr.et.mlir(), &views).try_into().unwrap_or_default();
        let tid = k.val("gpu.thread_id x");
        let ln = Lanes::of(&mut k, &tid);
        let block = k.val("gpu.block_id x");
        let tiles = s.div_ceil(bk);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let kt = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        let key0 = k.mad(&kt, bk, "%c0");
        let wk0 = k.mad(&ln.warp, 16, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let Bases { q: q_base, k: k_base, v: v_base, o: o_base, row: row_base } = Bases::of(&mut k, a, &b);
        issue_tile(
            &mut k,
            &tid,
            (&format!("%b{K}"), &ty(K), &k_base),
            (&key0, &s_c),
            (bk, d),
            ("%Ks", &sk, k_ld),
            "%c0",
        );
        issue_tile(
            &mut k,
            &tid,
            (&format!("%b{V}"), &ty(V), &v_base),
            (&key0, &s_c),
            (bk, dv),
            ("%Vs", &sv, v_ld),
            "%c0",
        );
        // The queries that see this block's keys: from its first key on
        // (causal), or all.
        let start = if a.causal { key0.clone() } else { "%c0".to_string() };
        let issue_qo = |k: &mut Kernel, t0: &str, qo: &str, oo: &str| {
            let q = (format!("%b{Q}"), ty(Q));
            issue_tile(k, &tid, (&q.0, &q.1, &q_base), (t0, &l_c), (bq, d), ("%Qs", &sq, q_ld), qo);
            let o = (format!("%b{DO}"), ty(DO));
            issue_tile(k, &tid, (&o.0, &o.1, &o_base), (t0, &l_c), (bq, dv), ("%Os", &so, o_ld), oo);
        };
        issue_qo(&mut k, &start, "%c0", "%c0");
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");
        // The warp's 16 keys' k and v fragments, A operands.
        let k_at = ln.a_at(&mut k, &wk0, k_ld);
        let k_frags: Vec<Vec<String>> = (0..d / 16)
            .map(|ks| {
                let at = k.mad("%c1", ks * 16, &k_at);
                fr.ldsm(&mut k, ("%Ks", &sk), &at, false)
            })
            .collect();
        let v_at = ln.a_at(&mut k, &wk0, v_ld);
        let v_frags: Vec<Vec<String>> = (0..dv / 16)
            .map(|ks| {
                let at = k.mad("%c1", ks * 16, &v_at);
                fr.ldsm(&mut k, ("%Vs", &sv), &at, false)
            })
            .collect();
        let (q_b, q_bt) = (ln.b_at(&mut k, q_ld), ln.bt_at(&mut k, q_ld));
        let (o_b, o_bt) = (ln.b_at(&mut k, o_ld), ln.bt_at(&mut k, o_ld));

        let f32t = DType::F32;
        let zero = k.float(0.0, f32t);
        let c_exp = k.float(a.scale * std::f64::consts::LOG2_E, f32t);
        let log2e = k.float(std::f64::consts::LOG2_E, f32t);
        let bq_c = k.index(bq);
        let last_row = k.index(l.saturating_sub(1));
        // This lane's keys: g and g + 8 of the warp's 16.
        let warp_key = k.add(&key0, &wk0);
        let key_g = k.add(&warp_key, &ln.g);
        let key_g8 = k.mad("%c1", 8, &key_g);
        let warp_key_end = k.mad("%c1", 16, &warp_key);
        let (dk_n, dv_n) = (d / 8 * 4, dv / 8 * 4);
        let init = vec![zero.clone(); dk_n + dv_n];
        let (t0, carried, results) = k.open_reduce_all(&start, &l_c, &bq_c, &init, "f32");
        let offsets = double_buffered(&mut k, (&t0, &start, &bq_c, &l_c), &[q_el, o_el], |k, next, o| {
            issue_qo(k, next, &o[0], &o[1])
        });
        let (qo, oo) = (&offsets[0], &offsets[1]);

        // S^T = k q^T and dP^T = v dO^T: 16 keys x bq queries each.
        let frags = bq / 8;
        let mut st = vec![vec![zero.clone(); 4]; frags];
        let mut dpt = vec![vec![zero.clone(); 4]; frags];
        for (acc, a_frags, (smem, b_at, ld)) in
            [(&mut st, &k_frags, (("%Qs", &sq), &q_b, q_ld)), (&mut dpt, &v_frags, (("%Os", &so), &o_b, o_ld))]
        {
            let off = if smem.0 == "%Qs" { qo } else { oo };
            for (ks, af) in a_frags.iter().enumerate() {
                for np in 0..bq / 16 {
                    let at = k.mad("%c1", np * 16 * ld + ks * 16, b_at);
                    let at = k.add(&at, off);
                    let r = fr.ldsm(&mut k, (smem.0, smem.1), &at, false);
                    acc[2 * np] = fr.mma(&mut k, af, &r[..2], &acc[2 * np]);
                    acc[2 * np + 1] = fr.mma(&mut k, af, &r[2..], &acc[2 * np + 1]);
                }
            }
        }
        // Register i of fragment ni: key g + 8 (i / 2), query t0 + 8 ni +
        // 2 c + i % 2. The mask where a query comes before a key of the
        // warp (causal) or past the last query.
        let tile_end = k.add(&t0, &bq_c);
        let past = k.val(&format!("arith.cmpi ugt, {tile_end}, {l_c} : index"));
        let need = if a.causal {
            let early = k.val(&format!("arith.cmpi ult, {t0}, {warp_key_end} : index"));
            k.val(&format!("arith.ori {early}, {past} : i1"))
        } else {
            past
        };
        let query_origin = |k: &mut Kernel| k.mad(&ln.c, 2, &t0);
        mask_scores(&mut k, &need, &mut st, query_origin, |k, query0, ni, i| {
            let query = k.mad("%c1", ni * 8 + i % 2, query0);
            let ok = k.val(&format!("arith.cmpi ult, {query}, {l_c} : index"));
            if !a.causal {
                return ok;
            }
            let key = if i / 2 == 0 { &key_g } else { &key_g8 };
            let seen = k.val(&format!("arith.cmpi uge, {query}, {key} : index"));
            k.val(&format!("arith.andi {ok}, {seen} : i1"))
        });
        // Each of the lane's queries' statistics (a query past the last row
        // reads the last: its scores are masked).
        let query0 = k.mad(&ln.c, 2, &t0);
        let mut lse2 = Vec::new();
        let mut delta = Vec::new();
        for ni in 0..frags {
            for e in 0..2 {
                let query = k.mad("%c1", ni * 8 + e, &query0);
                let query = k.val(&format!("arith.minui {query}, {last_row} : index"));
                let (lse, dl) = row_stats(&mut k, (&row_base, &query), a.batch * l, specs);
                lse2.push(k.fop("mulf", &lse, &log2e, f32t));
                delta.push(dl);
            }
        }
        // P^T and dS^T.
        for (ni, (sf, df)) in st.iter_mut().zip(dpt.iter_mut()).enumerate() {
            for i in 0..4 {
                let col = ni * 2 + i % 2;
                let x = k.fop("mulf", &sf[i], &c_exp, f32t);
                let x = k.fop("subf", &x, &lse2[col], f32t);
                sf[i] = ex2(&mut k, &x);
                let diff = k.fop("subf", &df[i], &delta[col], f32t);
                df[i] = k.fop("mulf", &sf[i], &diff, f32t);
            }
        }
        // dv += P^T dO, dk += dS^T q, 16 queries at a time.
        let mut next = carried.clone();
        for kk in 0..bq / 16 {
            let pa = fr.a_from(&mut k, &st[2 * kk], &st[2 * kk + 1]);
            let da = fr.a_from(&mut k, &dpt[2 * kk], &dpt[2 * kk + 1]);
            let products = [(&pa, ("%Os", &so), &o_bt, o_ld, oo, dv, dk_n), (&da, ("%Qs", &sq), &q_bt, q_ld, qo, d, 0)];
            for (a_frag, smem, b_at, ld, off, n, acc0) in products {
                for np in 0..n / 16 {
                    let at = k.mad("%c1", kk * 16 * ld + np * 16, b_at);
                    let at = k.add(&at, off);
                    let r = fr.ldsm(&mut k, (smem.0, smem.1), &at, true);
                    for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                        let at = acc0 + (2 * np + half) * 4;
                        let acc = fr.mma(&mut k, a_frag, regs, &next[at..at + 4]);
                        next.splice(at..at + 4, acc);
                    }
                }
            }
        }
        k.close_with_all(&next, "f32");

        // The warp's key rows inside the keys: dk (times the scale), dv.
        let scale = k.float(a.scale, f32t);
        let col0 = k.mad(&ln.c, 2, "%c0");
        for (h, key) in [&key_g, &key_g8].into_iter().enumerate() {
            let inside = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            let kb = k.mad(key, d, &k_base);
            let kb = k.add(&kb, &col0);
            store_fragments(&mut k, &results, (h, d), Some(&scale), (&format!("%b{DK}"), &kb, &ty(DK)));
            let vb = k.mad(key, dv, &v_base);
            let vb = k.add(&vb, &col0);
            store_fragments(&mut k, &results[dk_n..], (h, dv), None, (&format!("%b{DV}"), &vb, &ty(DV)));
            k.close();
        }
        self.finish_tc(k, specs, (a.batch * tiles) as u32, backward_shared_bytes([d, dv], [d, dv]));
        let cost = (l * (4 * d + 4 * dv + 16)) as u64;
        vec![(self.last(), (a.batch * s).max(1) as u64, cost, (0..specs.len()).collect(), vec![])]
    }

    /// dq: block (b, query tile) owns [`BLOCK_ROWS`] queries, 16 a warp,
    /// their q and grad_output fragments loaded once, and walks the keys
    /// it sees in tiles of [`TILE_ROWS`] of k and v, double-buffered. Per
    /// tile a warp computes S = q k^T and dP = dO v^T, masks as the
    /// forward, P = 2^(S c - lse2) with its rows' statistics held in
    /// registers, dS = P (dP - D), and dq += dS k (k by transposing
    /// `ldmatrix`); dq times the scale is stored once.
    fn gpu_attention_dq_tc(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let fr = Frags::new(specs[0].1);
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let (bq, bk) = (BLOCK_ROWS, TILE_ROWS);
        let (q_ld, o_ld, k_ld, v_ld) = (d + 8, dv + 8, d + 8, dv + 8);
        let (k_el, v_el) = (bk * k_ld, bk * v_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut k = Kernel::new();
        let views = [("%Qs", bq * q_ld), ("%Os", bq * o_ld), ("%Ks", 2 * k_el), ("%Vs", 2 * v_el)];
        let [sq, so, sk, sv]: [String; 4] = smem_views(&mut k, fr.et.mlir(), &views).try_into().unwrap_or_default();
        let tid = k.val("gpu.thread_id x");
        let ln = Lanes::of(&mut k, &tid);
        let block = k.val("gpu.block_id x");
        let (b, first, tiles) = query_block(&mut k, a, &block, bq);
        let wm0 = k.mad(&ln.warp, 16, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let Bases { q: q_base, k: k_base, v: v_base, o: o_base, row: row_base } = Bases::of(&mut k, a, &b);
        issue_tile(
            &mut k,
            &tid,
            (&format!("%b{Q}"), &ty(Q), &q_base),
            (&first, &l_c),
            (bq, d),
            ("%Qs", &sq, q_ld),
            "%c0",
        );
        issue_tile(
            &mut k,
            &tid,
            (&format!("%b{DO}"), &ty(DO), &o_base),
            (&first, &l_c),
            (bq, dv),
            ("%Os", &so, o_ld),
            "%c0",
        );
        let issue_kv = |k: &mut Kernel, t0: &str, ko: &str, vo: &str| {
            let kk = (format!("%b{K}"), ty(K));
            issue_tile(k, &tid, (&kk.0, &kk.1, &k_base), (t0, &s_c), (bk, d), ("%Ks", &sk, k_ld), ko);
            let vv = (format!("%b{V}"), ty(V));
            issue_tile(k, &tid, (&vv.0, &vv.1, &v_base), (t0, &s_c), (bk, dv), ("%Vs", &sv, v_ld), vo);
        };
        issue_kv(&mut k, "%c0", "%c0", "%c0");
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");
        // The warp's 16 rows' q and dO fragments, A operands.
        let q_at = ln.a_at(&mut k, &wm0, q_ld);
        let q_frags: Vec<Vec<String>> = (0..d / 16)
            .map(|ks| {
                let at = k.mad("%c1", ks * 16, &q_at);
                fr.ldsm(&mut k, ("%Qs", &sq), &at, false)
            })
            .collect();
        let o_at = ln.a_at(&mut k, &wm0, o_ld);
        let o_frags: Vec<Vec<String>> = (0..dv / 16)
            .map(|ks| {
                let at = k.mad("%c1", ks * 16, &o_at);
                fr.ldsm(&mut k, ("%Os", &so), &at, false)
            })
            .collect();
        let (k_b, k_bt, v_b) = (ln.b_at(&mut k, k_ld), ln.bt_at(&mut k, k_ld), ln.b_at(&mut k, v_ld));

        let f32t = DType::F32;
        let zero = k.float(0.0, f32t);
        let c_exp = k.float(a.scale * std::f64::consts::LOG2_E, f32t);
        let log2e = k.float(std::f64::consts::LOG2_E, f32t);
        let (bq_c, bk_c) = (k.index(bq), k.index(bk));
        let last_row = k.index(l.saturating_sub(1));
        // This lane's rows g and g + 8 and their statistics (a row past the
        // last reads the last; it is never stored).
        let warp_row = k.add(&first, &wm0);
        let row_g = k.add(&warp_row, &ln.g);
        let row_g8 = k.mad("%c1", 8, &row_g);
        let mut lse2 = Vec::new();
        let mut delta = Vec::new();
        for row in [&row_g, &row_g8] {
            let r = k.val(&format!("arith.minui {row}, {last_row} : index"));
            let (lse, dl) = row_stats(&mut k, (&row_base, &r), a.batch * l, specs);
            lse2.push(k.fop("mulf", &lse, &log2e, f32t));
            delta.push(dl);
        }
        let hi = if a.causal {
            let end = k.add(&first, &bq_c);
            k.val(&format!("arith.minui {end}, {s_c} : index"))
        } else {
            s_c.clone()
        };
        let dq_n = d / 8 * 4;
        let init = vec![zero.clone(); dq_n];
        let (t0, carried, results) = k.open_reduce_all("%c0", &hi, &bk_c, &init, "f32");
        let offsets = double_buffered(&mut k, (&t0, "%c0", &bk_c, &hi), &[k_el, v_el], |k, next, o| {
            issue_kv(k, next, &o[0], &o[1])
        });
        let (ko, vo) = (&offsets[0], &offsets[1]);

        // S = q k^T and dP = dO v^T: 16 rows x bk keys each.
        let frags = bk / 8;
        let mut sc = vec![vec![zero.clone(); 4]; frags];
        let mut dp = vec![vec![zero.clone(); 4]; frags];
        for (acc, a_frags, (smem, b_at, ld, off)) in
            [(&mut sc, &q_frags, (("%Ks", &sk), &k_b, k_ld, ko)), (&mut dp, &o_frags, (("%Vs", &sv), &v_b, v_ld, vo))]
        {
            for (ks, af) in a_frags.iter().enumerate() {
                for np in 0..bk / 16 {
                    let at = k.mad("%c1", np * 16 * ld + ks * 16, b_at);
                    let at = k.add(&at, off);
                    let r = fr.ldsm(&mut k, (smem.0, smem.1), &at, false);
                    acc[2 * np] = fr.mma(&mut k, af, &r[..2], &acc[2 * np]);
                    acc[2 * np + 1] = fr.mma(&mut k, af, &r[2..], &acc[2 * np + 1]);
                }
            }
        }
        // The mask as the forward's: only in a tile with a key past the
        // warp's first row (causal) or past the last key.
        if let Some(need) = key_mask_need(&mut k, a, (&t0, &bk_c, bk), &warp_row, &s_c) {
            let key_origin = |k: &mut Kernel| k.mad(&ln.c, 2, &t0);
            mask_scores(&mut k, &need, &mut sc, key_origin, |k, key0, ni, i| {
                let key = k.mad("%c1", ni * 8 + i % 2, key0);
                let ok = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
                if !a.causal {
                    return ok;
                }
                let row = if i / 2 == 0 { &row_g } else { &row_g8 };
                let seen = k.val(&format!("arith.cmpi ule, {key}, {row} : index"));
                k.val(&format!("arith.andi {ok}, {seen} : i1"))
            });
        }
        // dS = P (dP - D), into dp's registers.
        for (sf, df) in sc.iter().zip(dp.iter_mut()) {
            for i in 0..4 {
                let x = k.fop("mulf", &sf[i], &c_exp, f32t);
                let x = k.fop("subf", &x, &lse2[i / 2], f32t);
                let p = ex2(&mut k, &x);
                let diff = k.fop("subf", &df[i], &delta[i / 2], f32t);
                df[i] = k.fop("mulf", &p, &diff, f32t);
            }
        }
        // dq += dS k, 16 keys at a time.
        let mut next = carried.clone();
        for kk in 0..bk / 16 {
            let da = fr.a_from(&mut k, &dp[2 * kk], &dp[2 * kk + 1]);
            for np in 0..d / 16 {
                let at = k.mad("%c1", kk * 16 * k_ld + np * 16, &k_bt);
                let at = k.add(&at, ko);
                let r = fr.ldsm(&mut k, ("%Ks", &sk), &at, true);
                for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                    let at = (2 * np + half) * 4;
                    let acc = fr.mma(&mut k, &da, regs, &next[at..at + 4]);
                    next.splice(at..at + 4, acc);
                }
            }
        }
        k.close_with_all(&next, "f32");

        let scale = k.float(a.scale, f32t);
        let col0 = k.mad(&ln.c, 2, "%c0");
        for (h, row) in [&row_g, &row_g8].into_iter().enumerate() {
            let inside = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            let qb = k.mad(row, d, &q_base);
            let qb = k.add(&qb, &col0);
            store_fragments(&mut k, &results, (h, d), Some(&scale), (&format!("%b{DQ}"), &qb, &ty(DQ)));
            k.close();
        }
        self.finish_tc(k, specs, (a.batch * tiles) as u32, backward_shared_bytes([d, dv], [d, dv]));
        let cost = (s * (4 * d + 2 * dv + 12)) as u64;
        vec![(self.last(), (a.batch * l).max(1) as u64, cost, (0..specs.len()).collect(), vec![])]
    }
}

/// Query row `row` (of its sequence, the sequence's rows from `row_base`)'s
/// statistics: its log-sum-exp and D, of `rows` rows in all (the
/// log-sum-exp from the forward's buffer where it kept them, D then the
/// statistics' only value).
fn row_stats(
    k: &mut Kernel,
    (row_base, row): (&str, &str),
    rows: usize,
    specs: &[(Vec<usize>, DType)],
) -> (String, String) {
    let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
    let at = k.add(row_base, row);
    if specs.len() > LSE {
        let lse = k.load(&format!("%b{LSE}"), &at, &ty(LSE));
        let delta = k.load(&format!("%b{STATS}"), &at, &ty(STATS));
        return (lse, delta);
    }
    let lse = k.load(&format!("%b{STATS}"), &at, &ty(STATS));
    let at = k.mad("%c1", rows, &at);
    let delta = k.load(&format!("%b{STATS}"), &at, &ty(STATS));
    (lse, delta)
}
