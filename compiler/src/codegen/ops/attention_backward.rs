//! Attention's backward in three row kernels (`ll.attention_backward`),
//! the probabilities recomputed from each query row's statistics rather
//! than materialised: every target's form (the GPU's tensor-core form for
//! 16-bit heads is in `flash_backward.rs`).

use crate::codegen::ops::attention::AttentionShape;
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
