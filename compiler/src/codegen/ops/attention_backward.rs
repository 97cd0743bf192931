//! Attention's backward in three row kernels (`ll.attention_backward`),
//! the probabilities recomputed from each query row's statistics rather
//! than materialised: every target's form (the GPU's tensor-core form for
//! 16-bit heads is in `flash_backward.rs`).

use crate::codegen::ops::attention::{
    AttentionShape, CPU_KEY_UNROLL, CPU_QUERY_BLOCK, CPU_ROW_GROUP, QueryBlock, group_sums, store_scaled_query,
    tile_products,
};
use crate::codegen::prelude::*;

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

/// `sum_c a[a0 + c] * b[b0 + c]` over c < n (buffers `%b{i}`), in the
/// compute type.
fn dot(
    k: &mut Kernel,
    specs: &[(Vec<usize>, DType)],
    (a, a0): (usize, &str),
    (b, b0): (usize, &str),
    n: usize,
) -> String {
    let t = compute(specs[a].1);
    let f = t.mlir();
    let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
    let (ta, tb) = (ty(a), ty(b));
    let zero = k.float(0.0, t);
    let nc = k.index(n);
    let (c, acc, sum) = k.open_reduce("%c0", &nc, &zero, f);
    let ai = k.add(a0, &c);
    let x = k.load(&format!("%b{a}"), &ai, &ta);
    let bi = k.add(b0, &c);
    let y = k.load(&format!("%b{b}"), &bi, &tb);
    let p = k.val(&format!("arith.mulf {x}, {y} fastmath<fast> : {f}"));
    let next = k.val(&format!("arith.addf {acc}, {p} fastmath<fast> : {f}"));
    k.close_with(&next, f);
    sum
}

impl Generator {
    /// `ll.attention_backward`: the target's form where it has one, else
    /// [`Generator::attention_backward_rows`].
    pub(crate) fn attention_backward(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let a = AttentionShape::of(op, specs);
        self.target.clone().attention_backward(self, &a, specs)
    }

    /// Three row kernels. (1) A query row per work item: its log-sum-exp
    /// of the scaled scores over the keys it sees (two passes: the max,
    /// then the sum of exponentials) into `stats[row]`, and D =
    /// rowsum(grad_output * out) into `stats[R + row]`. (2) A key row per
    /// work item: over the queries that see it (causal: those at or after
    /// it), p = exp(s - lse), dp = grad_output_i . v_j, ds = p (dp - D_i);
    /// dv_j += p grad_output_i and dk_j += ds q_i, in compute-type rows on
    /// the stack, stored once (dk times the scale). (3) A query row per work
    /// item: dq_i = scale sum_j ds_ij k_j the same way. Each gradient
    /// element sums its terms in one order, so a run repeats its bits.
    pub(crate) fn attention_backward_rows(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let t = a.t;
        let f = t.mlir();
        let (l, s, d, dv, batch) = (a.l, a.s, a.d, a.dv, a.batch);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let stats_ty = ty(STATS);
        let rows = batch * l;
        let all: Vec<usize> = (0..specs.len()).collect();
        let mut kernels = Vec::new();

        // The scaled score of query row `qrow` (flat) and key row `krow`.
        let score = |k: &mut Kernel, qrow: &str, krow: &str| {
            let q0 = k.mad(qrow, d, "%c0");
            let k0 = k.mad(krow, d, "%c0");
            let x = dot(k, specs, (Q, &q0), (K, &k0), d);
            let sc = k.float(a.scale, t);
            k.fop("mulf", &x, &sc, t)
        };
        // The keys query i (of its sequence) sees: [0, jn).
        let visible = |k: &mut Kernel, i: &str| {
            let sn = k.index(s);
            if a.causal {
                let i1 = k.add(i, "%c1");
                k.val(&format!("arith.minui {i1}, {sn} : index"))
            } else {
                sn
            }
        };

        // Where each row's log-sum-exp is (the forward's buffer where it
        // kept them, else the statistics' first half), and where its D.
        let kept = specs.len() > LSE;
        let (lse_buf, lse_ty) = if kept { (LSE, ty(LSE)) } else { (STATS, stats_ty.clone()) };
        let delta_at = if kept { 0 } else { rows };

        // (1) Statistics: the row's scores into a stack row, their max,
        // then the sum of exponentials (unless the forward kept them); and
        // D.
        let mut k = Kernel::new();
        let row_ty = format!("memref<{}x{f}>", s.max(1));
        let heap = self.target.heap_scratch();
        let scores = (!kept).then(|| k.scratch(s, t, heap));
        let (lc, ninf, zero) = (k.index(l), k.float(f64::NEG_INFINITY, t), k.float(0.0, t));
        let w = k.open("%begin", "%end");
        if let Some(scores) = &scores {
            let b = k.val(&format!("arith.divui {w}, {lc} : index"));
            let i = k.val(&format!("arith.remui {w}, {lc} : index"));
            let kb = k.mad(&b, s, "%c0");
            let jn = visible(&mut k, &i);
            let (j, mx, m) = k.open_reduce("%c0", &jn, &ninf, f);
            let krow = k.add(&kb, &j);
            let sv = score(&mut k, &w, &krow);
            k.store(&sv, scores, &j, &row_ty);
            let nm = k.row_max(&mx, &sv, t);
            k.close_with(&nm, f);
            let (j, acc, z) = k.open_reduce("%c0", &jn, &zero, f);
            let sv = k.load(scores, &j, &row_ty);
            let x = k.fop("subf", &sv, &m, t);
            let e = k.val(&format!("math.exp {x} : {f}"));
            let next = k.row_sum(&acc, &e, t);
            k.close_with(&next, f);
            let lz = k.val(&format!("math.log {z} : {f}"));
            let lse = k.fop("addf", &m, &lz, t);
            k.store(&lse, &format!("%b{STATS}"), &w, &stats_ty);
        }
        let o0 = k.mad(&w, dv, "%c0");
        let delta = dot(&mut k, specs, (DO, &o0), (O, &o0), dv);
        let at = k.mad("%c1", delta_at, &w);
        k.store(&delta, &format!("%b{STATS}"), &at, &stats_ty);
        k.close();
        self.finish(k, specs);
        let cost = if kept { 2 * dv } else { 2 * s * d + 2 * dv };
        kernels.push((self.last(), rows as u64, cost as u64, all.clone(), vec![]));

        // The probability and ds of (query row `qrow` flat, key row `krow`
        // flat), the query's statistics read from `stats`.
        let terms = |k: &mut Kernel, qrow: &str, krow: &str| {
            let sv = score(k, qrow, krow);
            let lse = k.load(&format!("%b{lse_buf}"), qrow, &lse_ty);
            let x = k.fop("subf", &sv, &lse, t);
            let p = k.val(&format!("math.exp {x} : {f}"));
            let o0 = k.mad(qrow, dv, "%c0");
            let v0 = k.mad(krow, dv, "%c0");
            let dp = dot(k, specs, (DO, &o0), (V, &v0), dv);
            let at = k.mad("%c1", delta_at, qrow);
            let delta = k.load(&format!("%b{STATS}"), &at, &stats_ty);
            let diff = k.fop("subf", &dp, &delta, t);
            let ds = k.fop("mulf", &p, &diff, t);
            (p, ds)
        };
        // acc[c] += x * buf[base + c] for c < n (acc a stack row).
        let axpy = |k: &mut Kernel, acc: (&str, &str), x: &str, (buf, base): (usize, &str), n: usize| {
            let nc = k.index(n);
            let c = k.open("%c0", &nc);
            let at = k.add(base, &c);
            let y = k.load(&format!("%b{buf}"), &at, &ty(buf));
            let cur = k.load(acc.0, &c, acc.1);
            let py = k.fop("mulf", x, &y, t);
            let next = k.fop("addf", &cur, &py, t);
            k.store(&next, acc.0, &c, acc.1);
            k.close();
        };
        // A stack row of n zeros.
        let stack_row = |k: &mut Kernel, n: usize| {
            let row_ty = format!("memref<{}x{f}>", n.max(1));
            let row = k.scratch(n, t, heap);
            let zero = k.float(0.0, t);
            let nc = k.index(n);
            let c = k.open("%c0", &nc);
            k.store(&zero, &row, &c, &row_ty);
            k.close();
            (row, row_ty)
        };
        // out[base + c] = row[c] * factor for c < n.
        let store_row =
            |k: &mut Kernel, (row, row_ty): (&str, &str), factor: f64, (buf, base): (usize, &str), n: usize| {
                let fc = k.float(factor, t);
                let nc = k.index(n);
                let c = k.open("%c0", &nc);
                let x = k.load(row, &c, row_ty);
                let y = k.fop("mulf", &x, &fc, t);
                let at = k.add(base, &c);
                k.store(&y, &format!("%b{buf}"), &at, &ty(buf));
                k.close();
            };

        // (2) dk and dv, a key row per work item.
        let mut k = Kernel::new();
        let (dk_row, dv_row) = (stack_row(&mut k, d), stack_row(&mut k, dv));
        let (sc_, lc) = (k.index(s), k.index(l));
        let w = k.open("%begin", "%end");
        for (row, row_ty) in [&dk_row, &dv_row] {
            let zero = k.float(0.0, t);
            let n = if *row == dk_row.0 { d } else { dv };
            let nc = k.index(n);
            let c = k.open("%c0", &nc);
            k.store(&zero, row, &c, row_ty);
            k.close();
        }
        let b = k.val(&format!("arith.divui {w}, {sc_} : index"));
        let j = k.val(&format!("arith.remui {w}, {sc_} : index"));
        let qb = k.mad(&b, l, "%c0");
        let i0 = if a.causal { k.val(&format!("arith.minui {j}, {lc} : index")) } else { "%c0".to_string() };
        let i = k.open(&i0, &lc);
        let qrow = k.add(&qb, &i);
        let (p, ds) = terms(&mut k, &qrow, &w);
        let o0 = k.mad(&qrow, dv, "%c0");
        axpy(&mut k, (&dv_row.0, &dv_row.1), &p, (DO, &o0), dv);
        let q0 = k.mad(&qrow, d, "%c0");
        axpy(&mut k, (&dk_row.0, &dk_row.1), &ds, (Q, &q0), d);
        k.close();
        let k0 = k.mad(&w, d, "%c0");
        store_row(&mut k, (&dk_row.0, &dk_row.1), a.scale, (DK, &k0), d);
        let v0 = k.mad(&w, dv, "%c0");
        store_row(&mut k, (&dv_row.0, &dv_row.1), 1.0, (DV, &v0), dv);
        k.close();
        self.finish(k, specs);
        kernels.push((self.last(), (batch * s) as u64, (l * (2 * d + 2 * dv + 8)) as u64, all.clone(), vec![]));

        // (3) dq, a query row per work item.
        let mut k = Kernel::new();
        let dq_row = stack_row(&mut k, d);
        let lc = k.index(l);
        let w = k.open("%begin", "%end");
        let zero = k.float(0.0, t);
        let dc = k.index(d);
        let c = k.open("%c0", &dc);
        k.store(&zero, &dq_row.0, &c, &dq_row.1);
        k.close();
        let b = k.val(&format!("arith.divui {w}, {lc} : index"));
        let i = k.val(&format!("arith.remui {w}, {lc} : index"));
        let kb = k.mad(&b, s, "%c0");
        let jn = visible(&mut k, &i);
        let j = k.open("%c0", &jn);
        let krow = k.add(&kb, &j);
        let (_, ds) = terms(&mut k, &w, &krow);
        let k0 = k.mad(&krow, d, "%c0");
        axpy(&mut k, (&dq_row.0, &dq_row.1), &ds, (K, &k0), d);
        k.close();
        let q0 = k.mad(&w, d, "%c0");
        store_row(&mut k, (&dq_row.0, &dq_row.1), a.scale, (DQ, &q0), d);
        k.close();
        self.finish(k, specs);
        kernels.push((self.last(), rows as u64, (s * (2 * d + 2 * dv + 8)) as u64, all, vec![]));
        kernels
    }
}

impl Generator {
    /// The CPU's attention backward in f32 (the compute type of f32, bf16
    /// and f16 heads): a work item is one (batch, head), which walks its
    /// query rows in blocks of [`CPU_QUERY_BLOCK`] as the blocked forward
    /// does ([`Generator::attention_blocked`]), with dk and dv summed in
    /// f32 rows on the heap across the blocks and stored once at the end
    /// (no two work items write the same gradient row). Per block, with
    /// vectors along its 16 rows: the scores against [`CPU_KEY_UNROLL`]
    /// keys at a time from the transposed, scaled query tile (masked, key
    /// major into a tile), their log-sum-exp (the forward's where it kept
    /// it), then dp = do . v the same way from the transposed grad-output
    /// tile, p = exp(s - lse) and ds = p (dp - D) with D = rowsum(do * o),
    /// both kept key-major; dv_j += sum_r p_rj do_r and dk_j += sum_r
    /// ds_rj q_r for [`CPU_ROW_GROUP`] keys at a time (each row of do and
    /// q loaded once for the group); dq_r = scale sum_j ds_rj k_j for that
    /// many rows at a time. The products the GEMM form runs (q k^T, do
    /// v^T, p^T do, ds^T q, ds k) with no probabilities in memory beyond a
    /// block's tile, and no softmax or transposes between them. Each
    /// gradient element sums its terms in one order, so a run repeats its
    /// bits.
    pub(crate) fn attention_backward_blocked(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        const R: usize = CPU_QUERY_BLOCK;
        const U: usize = CPU_KEY_UNROLL;
        const G: usize = CPU_ROW_GROUP;
        let (l, s_len, d, dv, batch, causal) = (a.l, a.s, a.d, a.dv, a.batch, a.causal);
        let f32t = DType::F32;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let vr = format!("vector<{R}xf32>");
        let vd = format!("vector<{d}xf32>");
        let vi = format!("vector<{R}xi32>");
        let vb1 = format!("vector<{R}xi1>");
        let kept = specs.len() > LSE;
        let mut k = Kernel::new();
        let heap = self.target.heap_scratch();
        let keys_up = s_len.div_ceil(U) * U;
        let tile = |k: &mut Kernel, n: usize| (k.scratch(n, f32t, heap), format!("memref<{}xf32>", n.max(1)));
        // The block's scaled queries and grad-output rows, transposed; its
        // probabilities and ds key-major; each row's lse and D; dk and dv
        // of the work item's keys.
        let (qt, qt_ty) = tile(&mut k, d * R);
        let (gt, gt_ty) = tile(&mut k, dv * R);
        let (pt, pt_ty) = tile(&mut k, keys_up * R);
        let (st, st_ty) = tile(&mut k, keys_up * R);
        let (stats, stats_ty) = tile(&mut k, 2 * R);
        let (dk_acc, dk_ty) = tile(&mut k, s_len * d);
        let (dv_acc, dv_ty) = tile(&mut k, s_len * dv);
        let blocks = l.div_ceil(R);
        let (blocks_c, sn, uc, gc, rc, dvc) =
            (k.index(blocks), k.index(s_len), k.index(U), k.index(G), k.index(R), k.index(dv));
        let (last_row, last_key) = (k.index(l - 1), k.index(s_len - 1));
        let scale = k.float(a.scale, f32t);
        let ninf = k.val(&format!("arith.constant dense<0xFF800000> : {vr}"));
        let zeros = k.val(&format!("arith.constant dense<0.0> : {vr}"));
        let zero_d = k.val(&format!("arith.constant dense<0.0> : {vd}"));
        let lanes: Vec<String> = (0..R).map(|r| r.to_string()).collect();
        let iota = k.val(&format!("arith.constant dense<[{}]> : {vi}", lanes.join(", ")));
        let l32 = k.val(&format!("arith.constant {l} : i32"));
        let lv = k.val(&format!("vector.broadcast {l32} : i32 to {vi}"));
        let zero = k.float(0.0, f32t);
        let b = k.open("%begin", "%end");
        let row0 = k.mad(&b, l, "%c0");
        let key0 = k.mad(&b, s_len, "%c0");
        // dk and dv start at zero.
        let n = k.index(s_len * d);
        let c = k.open("%c0", &n);
        k.store(&zero, &dk_acc, &c, &dk_ty);
        k.close();
        let n = k.index(s_len * dv);
        let c = k.open("%c0", &n);
        k.store(&zero, &dv_acc, &c, &dv_ty);
        k.close();
        let blk = k.open("%c0", &blocks_c);
        let i0 = k.mul(&blk, &rc);
        // The block's rows (the last one again past the end, masked
        // below): qt[x][r] = q[x] * scale, gt[y][r] = do[y], D and lse.
        let r = k.open("%c0", &rc);
        let i = k.add(&i0, &r);
        let i = k.val(&format!("arith.minui {i}, {last_row} : index"));
        let qrow = k.add(&row0, &i);
        store_scaled_query(&mut k, (&format!("%b{Q}"), &ty(Q)), (&qrow, &r), d, &scale, (&qt, &qt_ty));
        let obase = k.mad(&qrow, dv, "%c0");
        let (y, acc, delta) = k.open_reduce("%c0", &dvc, &zero, "f32");
        let oi = k.add(&obase, &y);
        let gv = k.load(&format!("%b{DO}"), &oi, &ty(DO));
        let ov = k.load(&format!("%b{O}"), &oi, &ty(O));
        let at = k.mad(&y, R, &r);
        k.store(&gv, &gt, &at, &gt_ty);
        let prod = k.fop("mulf", &gv, &ov, f32t);
        let next = k.fop("addf", &acc, &prod, f32t);
        k.close_with(&next, "f32");
        let at = k.add(&rc, &r);
        k.store(&delta, &stats, &at, &stats_ty);
        if kept {
            let lse = k.load(&format!("%b{LSE}"), &qrow, &ty(LSE));
            k.store(&lse, &stats, &r, &stats_ty);
        }
        k.close();
        // Keys any row of the block sees, and the rows inside the op.
        let block = QueryBlock::new(&mut k, &i0, causal, (&rc, &sn, &iota));
        let jn = block.jn.clone();
        let inside = k.val(&format!("arith.cmpi ult, {}, {lv} : {vi}", block.rows));
        // Products of U keys with a transposed tile (`qt` or `gt`, n rows).
        let products = |k: &mut Kernel, j: &str, tile: (&str, &str), (buf, n): (usize, usize)| {
            let key_row = |k: &mut Kernel, jt: &str| {
                let kr = k.add(&key0, jt);
                k.mad(&kr, n, "%c0")
            };
            tile_products(k, (j, &last_key), tile, (buf, &ty(buf)), n, &key_row, &zeros)
        };
        // 1. Scores (masked to -inf) into pt, and their max per row.
        let (j, mx, m) = k.open_reduce_all("%c0", &jn, &uc, std::slice::from_ref(&ninf), &vr);
        let dots = products(&mut k, &j, (&qt, &qt_ty), (K, d));
        let m_now = block.store_scores(&mut k, &j, &dots, (&pt, &pt_ty), &ninf, &mx[0]);
        k.close_with_all(&[m_now], &vr);
        // Each row's log-sum-exp: the forward's, or from the scores.
        let lse = if kept {
            k.vload(&stats, "%c0", &stats_ty, R)
        } else {
            let m = &m[0];
            let (j, acc, sum) = k.open_reduce("%c0", &jn, &zeros, &vr);
            let at = k.mad(&j, R, "%c0");
            let sv = k.vload(&pt, &at, &pt_ty, R);
            let dd = k.val(&format!("arith.subf {sv}, {m} : {vr}"));
            let e = k.val(&format!("math.exp {dd} : {vr}"));
            let total = k.val(&format!("arith.addf {acc}, {e} : {vr}"));
            k.close_with(&total, &vr);
            let lz = k.val(&format!("math.log {sum} : {vr}"));
            k.val(&format!("arith.addf {m}, {lz} : {vr}"))
        };
        let delta = k.vload(&stats, &rc, &stats_ty, R);
        // 2. p = exp(s - lse) (zero on rows past the end) into pt, and
        // ds = p (dp - D) into st, dp = do . v.
        let j = k.open_step("%c0", &jn, &uc);
        let dps = products(&mut k, &j, (&gt, &gt_ty), (V, dv));
        for (t, dp) in dps.iter().enumerate() {
            let tc = k.index(t);
            let jt = k.add(&j, &tc);
            let at = k.mad(&jt, R, "%c0");
            let sv = k.vload(&pt, &at, &pt_ty, R);
            let dd = k.val(&format!("arith.subf {sv}, {lse} : {vr}"));
            let e = k.val(&format!("math.exp {dd} : {vr}"));
            let p = k.val(&format!("arith.select {inside}, {e}, {zeros} : {vb1}, {vr}"));
            let diff = k.val(&format!("arith.subf {dp}, {delta} : {vr}"));
            let ds = k.val(&format!("arith.mulf {p}, {diff} : {vr}"));
            k.vstore(&p, &pt, &at, &pt_ty, R);
            k.vstore(&ds, &st, &at, &st_ty, R);
        }
        k.close();
        // 3. acc_j += sum_r w_rj x_r for keys [j0, j1) by `step` (G keys
        // sharing each row load, or one): dv from (pt, do), dk from (st, q).
        let rows: Vec<String> = (0..R)
            .map(|r| {
                let rc_ = k.index(r);
                let i = k.add(&i0, &rc_);
                let i = k.val(&format!("arith.minui {i}, {last_row} : index"));
                k.add(&row0, &i)
            })
            .collect();
        let accumulate = |k: &mut Kernel,
                          (j0, j1, group): (&str, &str, usize),
                          w: (&str, &str),
                          x: usize,
                          (acc, acc_ty): (&str, &str),
                          n: usize| {
            let vn = format!("vector<{n}xf32>");
            let step = k.index(group);
            let j = k.open_step(j0, j1, &step);
            let ats: Vec<String> = (0..group)
                .map(|t| {
                    let tc = k.index(t);
                    let jt = k.add(&j, &tc);
                    k.mad(&jt, n, "%c0")
                })
                .collect();
            let mut accs: Vec<String> = ats.iter().map(|at| k.vload(acc, at, acc_ty, n)).collect();
            for (r, row) in rows.iter().enumerate() {
                let xb = k.mad(row, n, "%c0");
                let xv = k.vload(&format!("%b{x}"), &xb, &ty(x), n);
                for (t, a_) in accs.iter_mut().enumerate() {
                    let tc = k.index(t);
                    let jt = k.add(&j, &tc);
                    let rcst = k.index(r);
                    let wi = k.mad(&jt, R, &rcst);
                    let wv = k.load(w.0, &wi, w.1);
                    let wb = k.val(&format!("vector.broadcast {wv} : f32 to {vn}"));
                    *a_ = k.val(&format!("vector.fma {wb}, {xv}, {a_} : {vn}"));
                }
            }
            for (at, a_) in ats.iter().zip(&accs) {
                k.vstore(a_, acc, at, acc_ty, n);
            }
            k.close();
        };
        let gc_full = {
            let q = k.val(&format!("arith.divui {jn}, {gc} : index"));
            k.mul(&q, &gc)
        };
        for (w, x, acc, n) in [((&pt, &pt_ty), DO, (&dv_acc, &dv_ty), dv), ((&st, &st_ty), Q, (&dk_acc, &dk_ty), d)] {
            accumulate(&mut k, ("%c0", &gc_full, G), (w.0, w.1), x, (acc.0, acc.1), n);
            accumulate(&mut k, (&gc_full, &jn, 1), (w.0, w.1), x, (acc.0, acc.1), n);
        }
        // 4. dq_r = scale sum_j ds_rj k_j, G rows at a time; causal, the
        // group's keys run to its last row's (later ones have ds = 0).
        let rg = k.open_step("%c0", &rc, &gc);
        let seen_g = block.group_keys(&mut k, &rg);
        let key_row = |k: &mut Kernel, j: &str| {
            let kr = k.add(&key0, j);
            k.mad(&kr, d, "%c0")
        };
        let outs = group_sums(&mut k, (&rg, &seen_g), (&st, &st_ty), (&format!("%b{K}"), &ty(K)), d, &key_row, &zero_d);
        let scale_d = k.val(&format!("vector.broadcast {scale} : f32 to {vd}"));
        for (t, o) in outs.iter().enumerate() {
            let (_, i) = block.open_group_row(&mut k, &rg, t, l);
            let dq = k.val(&format!("arith.mulf {o}, {scale_d} : {vd}"));
            let w_row = k.add(&row0, &i);
            let at = k.mad(&w_row, d, "%c0");
            k.vstore(&dq, &format!("%b{DQ}"), &at, &ty(DQ), d);
            k.close();
        }
        k.close();
        k.close();
        // dk = scale * its sum, dv as summed, a row per key.
        let scale_d = k.val(&format!("vector.broadcast {scale} : f32 to {vd}"));
        let j = k.open("%c0", &sn);
        let at = k.mad(&j, d, "%c0");
        let v = k.vload(&dk_acc, &at, &dk_ty, d);
        let v = k.val(&format!("arith.mulf {v}, {scale_d} : {vd}"));
        let kr = k.add(&key0, &j);
        let out = k.mad(&kr, d, "%c0");
        k.vstore(&v, &format!("%b{DK}"), &out, &ty(DK), d);
        let at = k.mad(&j, dv, "%c0");
        let v = k.vload(&dv_acc, &at, &dv_ty, dv);
        let out = k.mad(&kr, dv, "%c0");
        k.vstore(&v, &format!("%b{DV}"), &out, &ty(DV), dv);
        k.close();
        k.close();
        let products_per_key = 2 * (d + dv) + 2 * (d + dv) + 8;
        self.one(k, specs, batch, l * s_len * products_per_key)
    }
}
