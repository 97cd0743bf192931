use crate::codegen::prelude::*;

impl Generator {
    /// softmax / log-softmax (`backward`: their gradient from y and g).
    pub(crate) fn softmax(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], backward: bool) -> Kernels {
        let (shape, t) = (&specs[0].0, compute(specs[0].1));
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        let log = has(op, "log");
        let (outer, n, inner) = lines(shape, axis);
        let f = t.mlir();
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (out, out_ty) = if backward { ("%b2", ty(2)) } else { ("%b1", ty(1)) };
        let mut k = self.target.row_kernel();
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let l = k.open("%begin", "%end");
        let base = k.line_base(&l, inner, n);
        if backward {
            // log: g - exp(y) sum(g); else y (g - sum(g y))
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.at(&base, &j, inner);
            let g = k.load("%b1", &p, &ty(1));
            let term = if log {
                g
            } else {
                let y = k.load("%b0", &p, &ty(0));
                k.fop("mulf", &g, &y, t)
            };
            let next = k.val(&format!("arith.addf {acc}, {term} fastmath<fast> : {f}"));
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            let j = k.open_cols(&nc);
            let p = k.at(&base, &j, inner);
            let (y, g) = (k.load("%b0", &p, &ty(0)), k.load("%b1", &p, &ty(1)));
            let v = if log {
                let e = k.val(&format!("math.exp {y} : {f}"));
                let es = k.fop("mulf", &e, &s, t);
                k.fop("subf", &g, &es, t)
            } else {
                let d = k.fop("subf", &g, &s, t);
                k.fop("mulf", &y, &d, t)
            };
            k.store(&v, out, &p, &out_ty);
            k.close();
        } else {
            let ninf = k.float(f64::NEG_INFINITY, t);
            let (j, mx, m) = k.open_cols_reduce(&nc, &ninf, f);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty(0));
            let nm = k.val(&format!("arith.maximumf {mx}, {x} : {f}"));
            k.close_with(&nm, f);
            let m = k.warp_all(&m, "maximumf", t);
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty(0));
            let d = k.fop("subf", &x, &m, t);
            let e = k.val(&format!("math.exp {d} : {f}"));
            let next = k.row_sum(&acc, &e, t);
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            let ls = k.val(&format!("math.log {s} : {f}"));
            let j = k.open_cols(&nc);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty(0));
            let d = k.fop("subf", &x, &m, t);
            let v = if log {
                k.fop("subf", &d, &ls, t)
            } else {
                let e = k.val(&format!("math.exp {d} : {f}"));
                k.fop("divf", &e, &s, t)
            };
            k.store(&v, out, &p, &out_ty);
            k.close();
        }
        k.close();
        self.one(k, specs, outer * inner, 8 * n)
    }

    /// Loss (and gradient) over all rows in one work item: the mean needs
    /// the count of labelled rows first. On the GPU the work item is one
    /// block: its threads count the labelled rows, then each warp takes
    /// rows (warp w: rows w, w + W, ...) with the classes split over its
    /// lanes, the row max and sum by xor shuffles, and the block sums the
    /// warps' losses.
    pub(crate) fn softmax_cross_entropy(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
    ) -> Result<(u64, u64, IndexCheck)> {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 1, 0]);
        let grad_output = (seg[2] > 0).then_some(2);
        let loss = 2 + seg[2] as usize;
        let grad = (seg[4] > 0).then_some(loss + 1);
        let (logits, t) = (&specs[0].0, compute(specs[0].1));
        let classes = logits.last().copied().unwrap_or(1);
        let rows = numel(logits) / classes.max(1);
        let ignore = int_attr(op, "ignore_index");
        let sum = int_attr(op, "reduction") == Some(1);
        let grad_scale = float_attr(op, "grad_scale").unwrap_or(1.0);
        let label_t = specs[1].1;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let f = t.mlir();
        let mut k = self.target.row_kernel();
        let zero = k.float(0.0, t);
        let one = k.float(1.0, t);
        let (rc, cc) = (k.index(rows), k.index(classes));
        // The team's thread `tid` counts rows tid, tid + step, ...; warp
        // `warp` takes rows warp, warp + warps, ...
        let team = self.target.team(&mut k);
        let (tid, step, warp, warps) = (&team.tid, &team.step, &team.warp, &team.warps);
        let lt = label_t.mlir();
        let ignore_c = ignore.map(|i| k.val(&format!("arith.constant {i} : {lt}")));
        // Whether label `l` counts (every label does without an ignore index).
        let labelled = |k: &mut Kernel, l: &str| match &ignore_c {
            Some(c) => k.val(&format!("arith.cmpi ne, {l}, {c} : {lt}")),
            None => k.val("arith.constant true"),
        };
        // count of labelled rows
        let count = if sum {
            one.clone()
        } else {
            let (r, acc, res) = k.open_reduce_all(tid, &rc, step, std::slice::from_ref(&zero), f);
            let l = k.load("%b1", &r, &ty(1));
            let valid = labelled(&mut k, &l);
            let inc = k.val(&format!("arith.select {valid}, {one}, {zero} : {f}"));
            let s = k.fop("addf", &acc[0], &inc, t);
            k.close_with_all(&[s], f);
            self.target.team_sum(&mut k, &team, &res[0], t)
        };
        let upstream = match grad_output {
            Some(p) => {
                let g = k.load(&format!("%b{p}"), "%c0", &ty(p));
                let c = k.float(grad_scale, t);
                k.fop("mulf", &g, &c, t)
            }
            None => k.float(grad_scale, t),
        };
        let scale = k.fop("divf", &upstream, &count, t);
        // The rows' losses are summed in f64 (one f32 accumulator over 1024
        // rows drifts 10x further from the exact sum than PyTorch's
        // pairwise f32 sum), rounded once.
        let zero64 = k.float(0.0, DType::F64);
        let (r, accs, totals) = k.open_reduce_all(warp, &rc, warps, std::slice::from_ref(&zero64), "f64");
        let acc = accs[0].clone();
        let l = k.load("%b1", &r, &ty(1));
        let valid = labelled(&mut k, &l);
        let li = k.val(&format!("arith.index_cast {l} : {} to index", label_t.mlir()));
        let li = k.val(&format!("arith.select {valid}, {li}, %c0 : index"));
        let base = k.mul(&r, &cc);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let (c, mx, m) = k.open_cols_reduce(&cc, &ninf, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &ty(0));
        let nm = k.val(&format!("arith.maximumf {mx}, {v} : {f}"));
        k.close_with(&nm, f);
        let m = k.warp_all(&m, "maximumf", t);
        let (c, se, s) = k.open_cols_reduce(&cc, &zero, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &ty(0));
        let d = k.fop("subf", &v, &m, t);
        let e = k.val(&format!("math.exp {d} : {f}"));
        let ns = k.row_sum(&se, &e, t);
        k.close_with(&ns, f);
        let s = k.warp_all(&s, "addf", t);
        let logs = k.val(&format!("math.log {s} : {f}"));
        let lse = k.fop("addf", &m, &logs, t);
        let at = k.add(&base, &li);
        let xl = k.load("%b0", &at, &ty(0));
        let row_loss = k.fop("subf", &lse, &xl, t);
        let row_loss = k.val(&format!("arith.select {valid}, {row_loss}, {zero} : {f}"));
        let row_loss64 = if t == DType::F64 { row_loss } else { k.val(&format!("arith.extf {row_loss} : {f} to f64")) };
        let next = k.fop("addf", &acc, &row_loss64, DType::F64);
        if let Some(g) = grad {
            let gs = k.val(&format!("arith.select {valid}, {scale}, {zero} : {f}"));
            let c = k.open_cols(&cc);
            let at = k.add(&base, &c);
            let v = k.load("%b0", &at, &ty(0));
            let d = k.fop("subf", &v, &lse, t);
            let p = k.val(&format!("math.exp {d} : {f}"));
            let hit = k.val(&format!("arith.cmpi eq, {c}, {li} : index"));
            let sub = k.val(&format!("arith.select {hit}, {one}, {zero} : {f}"));
            let q = k.fop("subf", &p, &sub, t);
            let gv = k.fop("mulf", &q, &gs, t);
            k.store(&gv, &format!("%b{g}"), &at, &ty(g));
            k.close();
        }
        k.close_with_all(&[next], "f64");
        let partial = if t == DType::F64 {
            totals[0].clone()
        } else {
            k.val(&format!("arith.truncf {} : f64 to {f}", totals[0]))
        };
        let total = self.target.team_total(&mut k, &team, &partial, t);
        let l = if sum { total } else { k.fop("divf", &total, &count, t) };
        self.target.clone().finish_team(self, k, &team, &l, loss, specs);
        let check = IndexCheck {
            operand: 1,
            dtype: runtime_dtype(label_t)?,
            count: rows,
            bound: classes as i64,
            allowed: ignore,
            what: "label".into(),
        };
        Ok((1, (rows * classes * 8) as u64, check))
    }
}
