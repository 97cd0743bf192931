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
        // A 16-bit softmax on the CPU keeps each row's exponentials in a
        // scratch row of the compute type for the last pass, as an f32
        // output does in place (see `keep` below): one exp an element,
        // not two, with the output rounded once (the attention backward's
        // bf16 softmax over 8x4x128x128 scores took 0.49 ms against 0.21 in
        // f32). On the GPU a row is a warp's, and a row of scratch per lane
        // would be local memory: the exp is recomputed there.
        let row_t = format!("memref<{}x{}>", n.max(1), f);
        let kept = (!backward && !log && specs[1].1 != t && k.lane.is_none() && self.target.heap_scratch())
            .then(|| k.scratch(n, t, true));
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
            let nm = k.row_max(&mx, &x, t);
            k.close_with(&nm, f);
            let m = k.warp_all(&m, "maximumf", t);
            // A softmax into a buffer of the compute type keeps each
            // exponential there for the last pass, which scales it by
            // 1 / sum: one exp an element instead of two, a multiply
            // instead of a division (the attention backward's softmax over
            // 8x4x128x128 scores took 0.8 ms on 2 threads of an AVX2 Zen 3).
            // Each thread (lane) reads back only what it wrote, so in place
            // too. A 16-bit output would round the exponentials first.
            let keep = !log && specs[1].1 == t;
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.at(&base, &j, inner);
            let x = k.load("%b0", &p, &ty(0));
            let d = k.fop("subf", &x, &m, t);
            let e = k.val(&format!("math.exp {d} : {f}"));
            if keep {
                k.store(&e, out, &p, &out_ty);
            } else if let Some(row) = &kept {
                k.store(&e, row, &j, &row_t);
            }
            let next = k.row_sum(&acc, &e, t);
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            let (ls, inv) = if log {
                (k.val(&format!("math.log {s} : {f}")), String::new())
            } else {
                let one = k.float(1.0, t);
                (String::new(), k.fop("divf", &one, &s, t))
            };
            let j = k.open_cols(&nc);
            let p = k.at(&base, &j, inner);
            let v = if log {
                let x = k.load("%b0", &p, &ty(0));
                let d = k.fop("subf", &x, &m, t);
                k.fop("subf", &d, &ls, t)
            } else if keep {
                let e = k.load(out, &p, &out_ty);
                k.fop("mulf", &e, &inv, t)
            } else if let Some(row) = &kept {
                let e = k.load(row, &j, &row_t);
                k.fop("mulf", &e, &inv, t)
            } else {
                let x = k.load("%b0", &p, &ty(0));
                let d = k.fop("subf", &x, &m, t);
                let e = k.val(&format!("math.exp {d} : {f}"));
                k.fop("mulf", &e, &inv, t)
            };
            k.store(&v, out, &p, &out_ty);
            k.close();
        }
        k.close();
        self.one(k, specs, outer * inner, 8 * n)
    }

    /// `ll.softmax_cross_entropy`: with a `rows` scratch buffer, three
    /// kernels (the labelled rows counted where an ignore index needs it;
    /// every row's loss and gradient in parallel, a row per work item; the
    /// rows' losses summed in a fixed order by one team); without, one team
    /// takes every row. The loss has the same bits either way. A team is
    /// one work item on the CPU; on the GPU one block, whose threads count
    /// the labelled rows and whose warps take rows (warp w: rows w, w + W,
    /// ...), and the block sums the warps' partial losses. A row's classes
    /// are split over a warp's lanes on the GPU, the row max and sum by xor
    /// shuffles.
    pub(crate) fn softmax_cross_entropy(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
    ) -> Result<Kernels> {
        let mut seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 1, 0, 0]);
        seg.resize(6, 0);
        let c = CrossEntropy::of(op, specs, &seg)?;
        let check = IndexCheck {
            operand: 1,
            dtype: runtime_dtype(c.label_t)?,
            count: c.rows,
            bound: c.classes as i64,
            allowed: c.ignore,
            what: "label".into(),
        };
        let all: Vec<usize> = (0..specs.len()).collect();
        let Some(rb) = c.row_losses else {
            let mut k = self.target.row_kernel();
            let team = self.target.team(&mut k);
            let count = c.count(&mut k, &team, self.target.as_ref(), None);
            let scale = c.scale(&mut k, &count);
            // The rows' losses are summed in f64 (one f32 accumulator over
            // 1024 rows drifts 10x further from the exact sum than
            // PyTorch's pairwise f32 sum), rounded once.
            let zero64 = k.float(0.0, DType::F64);
            let rc = c.rc(&mut k);
            let exps = c.row_exps(&mut k, self.target.heap_scratch());
            let (r, accs, totals) = k.open_reduce_all(&team.warp, &rc, &team.warps, &[zero64], "f64");
            let row_loss = c.row(&mut k, &r, &scale, exps.as_ref().map(|(b, t)| (b.as_str(), t.as_str())));
            let next = c.add64(&mut k, &accs[0], &row_loss);
            k.close_with_all(&[next], "f64");
            let l = c.mean(&mut k, &team, self.target.as_ref(), &totals[0], &count);
            self.target.clone().finish_team(self, k, &team, &l, c.loss, specs);
            return Ok(vec![(self.last(), 1, (c.rows * c.classes * 8) as u64, all, vec![check])]);
        };
        let mut kernels = Vec::new();
        // 1. The labelled rows, counted once into the buffer's slot 0.
        let counted = !c.sum && c.ignore.is_some();
        if counted {
            let mut k = self.target.row_kernel();
            let team = self.target.team(&mut k);
            let count = c.count(&mut k, &team, self.target.as_ref(), None);
            self.target.clone().finish_team(self, k, &team, &count, rb, specs);
            kernels.push((self.last(), 1, c.rows as u64, all.clone(), vec![check.clone()]));
        }
        // 2. A row per work item: its loss into slot 1 + row, its gradient.
        let mut k = self.target.row_kernel();
        let count = c
            .known_count(&mut k, counted.then_some(rb))
            .ok_or_else(|| internal("cross-entropy: the labelled rows are neither known nor counted"))?;
        let scale = c.scale(&mut k, &count);
        let exps = c.row_exps(&mut k, self.target.heap_scratch());
        let r = k.open("%begin", "%end");
        let row_loss = c.row(&mut k, &r, &scale, exps.as_ref().map(|(b, t)| (b.as_str(), t.as_str())));
        let slot = k.add(&r, "%c1");
        k.store(&row_loss, &format!("%b{rb}"), &slot, &c.tys[rb]);
        k.close();
        self.finish(k, specs);
        let checks = if counted { vec![] } else { vec![check] };
        kernels.push((self.last(), c.rows.max(1) as u64, (c.classes * 8) as u64, all.clone(), checks));
        // 3. The rows' losses summed in f64 in row order, as one team.
        let mut k = self.target.row_kernel();
        let team = self.target.team(&mut k);
        let count = c.count(&mut k, &team, self.target.as_ref(), counted.then_some(rb));
        let zero64 = k.float(0.0, DType::F64);
        let rc = c.rc(&mut k);
        let (r, accs, totals) = k.open_reduce_all(&team.warp, &rc, &team.warps, &[zero64], "f64");
        let slot = k.add(&r, "%c1");
        let row_loss = k.load(&format!("%b{rb}"), &slot, &c.tys[rb]);
        let next = c.add64(&mut k, &accs[0], &row_loss);
        k.close_with_all(&[next], "f64");
        let l = c.mean(&mut k, &team, self.target.as_ref(), &totals[0], &count);
        self.target.clone().finish_team(self, k, &team, &l, c.loss, specs);
        kernels.push((self.last(), 1, c.rows.max(1) as u64, all, vec![]));
        Ok(kernels)
    }
}

/// An `ll.softmax_cross_entropy`: its operands, shape and options.
struct CrossEntropy {
    grad_output: Option<usize>,
    loss: usize,
    grad: Option<usize>,
    row_losses: Option<usize>,
    /// The compute type.
    t: DType,
    /// The classes: the first `classes` entries of each row (`classes`
    /// attribute), the rest padding with a zero gradient.
    classes: usize,
    /// A row's length in the logits (and the gradient).
    stride: usize,
    rows: usize,
    ignore: Option<i64>,
    sum: bool,
    grad_scale: f64,
    label_t: DType,
    /// Each operand's memref type.
    tys: Vec<String>,
}

impl CrossEntropy {
    fn of(op: MlirOperation, specs: &[(Vec<usize>, DType)], seg: &[i64]) -> Result<Self> {
        let grad_output = (seg[2] > 0).then_some(2);
        let loss = 2 + seg[2] as usize;
        let grad = (seg[4] > 0).then_some(loss + 1);
        let row_losses = (seg[5] > 0).then_some(loss + 1 + seg[4] as usize);
        let (logits, t) = (&specs[0].0, compute(specs[0].1));
        let stride = logits.last().copied().unwrap_or(1);
        let classes = match int_attr(op, "classes") {
            None => stride,
            Some(c) if c >= 1 && c as usize <= stride => c as usize,
            Some(c) => return Err(internal(format!("cross-entropy: classes = {c} outside [1, {stride}]"))),
        };
        Ok(CrossEntropy {
            grad_output,
            loss,
            grad,
            row_losses,
            t,
            classes,
            stride,
            rows: numel(logits) / stride.max(1),
            ignore: int_attr(op, "ignore_index"),
            sum: int_attr(op, "reduction") == Some(1),
            grad_scale: float_attr(op, "grad_scale").unwrap_or(1.0),
            label_t: specs[1].1,
            tys: specs.iter().map(|(s, d)| flat_type(s, *d)).collect(),
        })
    }

    fn rc(&self, k: &mut Kernel) -> String {
        k.index(self.rows)
    }

    /// Whether label `l` counts (every label does without an ignore index).
    fn labelled(&self, k: &mut Kernel, l: &str) -> String {
        let lt = self.label_t.mlir();
        match self.ignore {
            Some(i) => {
                let c = k.val(&format!("arith.constant {i} : {lt}"));
                k.val(&format!("arith.cmpi ne, {l}, {c} : {lt}"))
            }
            None => k.val("arith.constant true"),
        }
    }

    /// The rows the mean divides by: 1 for a sum, every row without an
    /// ignore index, else those labelled: read from slot 0 of `counted`,
    /// or counted by the team.
    fn count(&self, k: &mut Kernel, team: &Team, target: &dyn TargetInfo, counted: Option<usize>) -> String {
        if let Some(count) = self.known_count(k, counted) {
            return count;
        }
        let (t, f) = (self.t, self.t.mlir());
        let (zero, one) = (k.float(0.0, t), k.float(1.0, t));
        let rc = self.rc(k);
        let (r, acc, res) = k.open_reduce_all(&team.tid, &rc, &team.step, std::slice::from_ref(&zero), f);
        let l = k.load("%b1", &r, &self.tys[1]);
        let valid = self.labelled(k, &l);
        let inc = k.val(&format!("arith.select {valid}, {one}, {zero} : {f}"));
        let s = k.fop("addf", &acc[0], &inc, t);
        k.close_with_all(&[s], f);
        target.team_sum(k, team, &res[0], t)
    }

    /// [`Self::count`] where nothing needs counting: `None` only for a mean
    /// with an ignore index and no `counted` buffer.
    fn known_count(&self, k: &mut Kernel, counted: Option<usize>) -> Option<String> {
        if self.sum {
            Some(k.float(1.0, self.t))
        } else if self.ignore.is_none() {
            Some(k.float(self.rows as f64, self.t))
        } else {
            counted.map(|rb| k.load(&format!("%b{rb}"), "%c0", &self.tys[rb]))
        }
    }

    /// The gradient's factor: the upstream gradient over the count.
    fn scale(&self, k: &mut Kernel, count: &str) -> String {
        let t = self.t;
        let upstream = match self.grad_output {
            Some(p) => {
                let g = k.load(&format!("%b{p}"), "%c0", &self.tys[p]);
                let c = k.float(self.grad_scale, t);
                k.fop("mulf", &g, &c, t)
            }
            None => k.float(self.grad_scale, t),
        };
        k.fop("divf", &upstream, count, t)
    }

    /// A row of f32 scratch (buffer, type) to keep a row's exponentials
    /// between its passes, where the gradient cannot (16-bit) and one
    /// thread takes the whole row (no lanes: the CPU); allocated once per
    /// kernel call, before the row loop.
    fn row_exps(&self, k: &mut Kernel, heap: bool) -> Option<(String, String)> {
        let g = self.grad?;
        let narrow = crate::codegen::emit::element_of(&self.tys[g]) != Some(self.t);
        (narrow && k.lane.is_none()).then(|| {
            let ty = format!("memref<{}x{}>", self.classes.max(1), self.t.mlir());
            (k.scratch(self.classes, self.t, heap), ty)
        })
    }

    /// Row `r`'s loss (zero where its label is ignored), and its gradient
    /// written where the op has one; `row_exps` from [`Self::row_exps`].
    fn row(&self, k: &mut Kernel, r: &str, scale: &str, row_exps: Option<(&str, &str)>) -> String {
        let (t, f) = (self.t, self.t.mlir());
        let zero = k.float(0.0, t);
        let one = k.float(1.0, t);
        let cc = k.index(self.classes);
        let stride = k.index(self.stride);
        let l = k.load("%b1", r, &self.tys[1]);
        let valid = self.labelled(k, &l);
        let li = k.val(&format!("arith.index_cast {l} : {} to index", self.label_t.mlir()));
        let li = k.val(&format!("arith.select {valid}, {li}, %c0 : index"));
        let base = k.mul(r, &stride);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let (c, mx, m) = k.open_cols_reduce(&cc, &ninf, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &self.tys[0]);
        let nm = k.row_max(&mx, &v, t);
        k.close_with(&nm, f);
        let m = k.warp_all(&m, "maximumf", t);
        // The labelled logit before the gradient can overwrite it (the
        // gradient may take the logits' buffer).
        let at = k.add(&base, &li);
        let xl = k.load("%b0", &at, &self.tys[0]);
        // A gradient of the compute type keeps each exp(x - max) of the
        // sum's pass for the last, which scales it by 1 / sum: one exp an
        // element instead of two (as `softmax`); a 16-bit one cannot, and
        // where a thread takes the whole row (the CPU) the row of scratch
        // `row_exps` keeps them instead (the same bits as an f32 gradient
        // cast after).
        let keep: Option<(String, String, bool)> = self
            .grad
            .filter(|&g| crate::codegen::emit::element_of(&self.tys[g]) == Some(t))
            .map(|g| (format!("%b{g}"), self.tys[g].clone(), false))
            .or_else(|| row_exps.map(|(b, ty)| (b.to_string(), ty.to_string(), true)));
        let (c, se, s) = k.open_cols_reduce(&cc, &zero, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &self.tys[0]);
        let d = k.fop("subf", &v, &m, t);
        let e = k.val(&format!("math.exp {d} : {f}"));
        if let Some((buf, ty, by_row)) = &keep {
            k.store(&e, buf, if *by_row { &c } else { &at }, ty);
        }
        let ns = k.row_sum(&se, &e, t);
        k.close_with(&ns, f);
        let s = k.warp_all(&s, "addf", t);
        let logs = k.val(&format!("math.log {s} : {f}"));
        let lse = k.fop("addf", &m, &logs, t);
        let row_loss = k.fop("subf", &lse, &xl, t);
        let row_loss = k.val(&format!("arith.select {valid}, {row_loss}, {zero} : {f}"));
        if let Some(g) = self.grad {
            let gs = k.val(&format!("arith.select {valid}, {scale}, {zero} : {f}"));
            // p = exp(x - max) / sum as `exp(x - max) * (1 / sum)`, the
            // exponential kept from the sum's pass or computed again the
            // same way (a 16-bit gradient on the GPU), so that reading
            // 16-bit logits and writing a 16-bit gradient computes what a
            // cast to f32 before the loss and back after it did (`lse`
            // instead moved 22 of 147,456 bf16 gradient elements a unit;
            // computed again on the CPU, a few in a million moved).
            let inv = k.fop("divf", &one, &s, t);
            let c = k.open_cols(&cc);
            let at = k.add(&base, &c);
            let e = if let Some((buf, ty, by_row)) = &keep {
                k.load(buf, if *by_row { &c } else { &at }, ty)
            } else {
                let v = k.load("%b0", &at, &self.tys[0]);
                let d = k.fop("subf", &v, &m, t);
                k.val(&format!("math.exp {d} : {f}"))
            };
            let p = k.fop("mulf", &e, &inv, t);
            let hit = k.val(&format!("arith.cmpi eq, {c}, {li} : index"));
            let sub = k.val(&format!("arith.select {hit}, {one}, {zero} : {f}"));
            let q = k.fop("subf", &p, &sub, t);
            let gv = k.fop("mulf", &q, &gs, t);
            k.store(&gv, &format!("%b{g}"), &at, &self.tys[g]);
            k.close();
            // The padding's gradient: zero.
            if self.stride > self.classes {
                let pad = k.index(self.stride - self.classes);
                let c = k.open_cols(&pad);
                let at = k.add(&base, &cc);
                let at = k.add(&at, &c);
                k.store(&zero, &format!("%b{g}"), &at, &self.tys[g]);
                k.close();
            }
        }
        row_loss
    }

    /// `acc + row_loss` in f64.
    fn add64(&self, k: &mut Kernel, acc: &str, row_loss: &str) -> String {
        let wide = if self.t == DType::F64 {
            row_loss.to_string()
        } else {
            k.val(&format!("arith.extf {row_loss} : {} to f64", self.t.mlir()))
        };
        k.fop("addf", acc, &wide, DType::F64)
    }

    /// The team's loss from its warps' f64 totals: rounded once, summed
    /// over the team, divided by the count for a mean.
    fn mean(&self, k: &mut Kernel, team: &Team, target: &dyn TargetInfo, totals: &str, count: &str) -> String {
        let t = self.t;
        let partial = if t == DType::F64 {
            totals.to_string()
        } else {
            k.val(&format!("arith.truncf {totals} : f64 to {}", t.mlir()))
        };
        let total = target.team_total(k, team, &partial, t);
        if self.sum { total } else { k.fop("divf", &total, count, t) }
    }
}
