use crate::codegen::prelude::*;

/// Whether the output coordinates `c` of a slice's gradient lie in the
/// window (`start`, `step`, `size` per dim: each c >= start,
/// (c - start) % step == 0 and (c - start) / step < size), and the window's
/// coordinates there (0 outside, so that a load stays in bounds).
fn window(k: &mut Kernel, c: &[String], start: &[usize], step: &[usize], size: &[usize]) -> (String, Vec<String>) {
    let mut inside = k.val("arith.constant true");
    let mut win = Vec::new();
    for d in 0..c.len() {
        let s = k.index(start[d]);
        let ge = k.cmpi("uge", &c[d], &s);
        let off = k.val(&format!("arith.subi {}, {s} : index", c[d]));
        let st = k.index(step[d]);
        let q = k.val(&format!("arith.divui {off}, {st} : index"));
        let r = k.val(&format!("arith.remui {off}, {st} : index"));
        let exact = k.cmpi("eq", &r, "%c0");
        let sz = k.index(size[d]);
        let lt = k.cmpi("ult", &q, &sz);
        inside = k.and(&inside, &ge);
        inside = k.and(&inside, &exact);
        inside = k.and(&inside, &lt);
        win.push(q);
    }
    let safe = win.iter().map(|q| k.val(&format!("arith.select {inside}, {q}, %c0 : index"))).collect();
    (inside, safe)
}

/// Where an output row of a slice starts in its input: the window's start
/// in every dim, the leading ones at output coordinates `c` (of
/// `in_strides.len() - 1` dims) times their steps.
fn row_origin(k: &mut Kernel, c: &[String], start: &[usize], step: &[usize], in_strides: &[usize]) -> String {
    let last = in_strides.len() - 1;
    let mut from = k.index(start[last] * in_strides[last]);
    for d in 0..last {
        let sc = k.index(start[d]);
        let x = k.mad(&c[d], step[d], &sc);
        from = k.mad(&x, in_strides[d], &from);
    }
    from
}

/// The shortest output row a GPU slice copies a warp per row (shorter
/// rows would leave lanes idle; the element form serves them).
const WARP_ROW_SLICE: usize = 64;

/// The columns of a row one item of a GPU slice copies (32 a lane).
const WARP_ROW_CHUNK: usize = 1024;

impl Generator {
    pub(crate) fn transpose(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let perm: Vec<usize> = i64_array(op, "permutation").unwrap_or_default().iter().map(|&p| p as usize).collect();
        if let Some(kernels) = self.target.clone().transpose_rows(self, &perm, specs) {
            return kernels;
        }
        let (ins, outs) = (&specs[0], &specs[1]);
        let in_strides = row_major_strides(&ins.0);
        let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
        let mut k = Kernel::new();
        let o = k.open("%begin", "%end");
        let c = k.unravel(&o, &outs.0);
        let i = k.ravel(&c, &strides);
        let v = k.load("%b0", &i, &flat_type(&ins.0, ins.1));
        k.store(&v, "%b1", &o, &flat_type(&outs.0, outs.1));
        k.close();
        let n = numel(&outs.0);
        self.one(k, specs, n, 4 * outs.0.len())
    }

    /// The CPU's form of a transpose: an item per output row, which reads
    /// its elements at the input's stride of the dim they come from (1
    /// where the innermost dim stays: heads split from or merged into the
    /// model width, a contiguous run copied at once; a convolution's rows
    /// to NCHW planes and back, a strided read), instead of an item per
    /// element that unravels its index (the transformer block's 8 head
    /// transposes took 1.6 ms a step, EfficientNet-B0's 130 transposes
    /// 2.8). Its two buffers are `noalias` where they are apart, so LLVM
    /// vectorises the strided reads too.
    pub(crate) fn transpose_rows(&mut self, perm: &[usize], specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (ins, outs) = (&specs[0], &specs[1]);
        let rank = perm.len();
        let in_strides = row_major_strides(&ins.0);
        let strides: Vec<usize> = perm[..rank - 1].iter().map(|&p| in_strides[p]).collect();
        let inner = outs.0[rank - 1];
        let mut k = Kernel::new();
        let run = k.index(inner);
        let o = k.open("%begin", "%end");
        let c = k.unravel(&o, &outs.0[..rank - 1]);
        let from = k.ravel(&c, &strides);
        let to = k.mul(&o, &run);
        let j = k.open("%c0", &run);
        let i = k.mad(&j, in_strides[perm[rank - 1]], &from);
        let v = k.load("%b0", &i, &flat_type(&ins.0, ins.1));
        let w = k.add(&to, &j);
        k.store(&v, "%b1", &w, &flat_type(&outs.0, outs.1));
        k.close();
        k.close();
        let noalias = self.apart(&[0], &[1], &[None]);
        self.finish_noalias(k, specs, noalias);
        let rows = numel(&outs.0) / inner.max(1);
        vec![(self.last(), rows.max(1) as u64, (2 * inner + 4 * rank).max(1) as u64, vec![0, 1], vec![])]
    }

    pub(crate) fn gather(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], backward: bool) -> Kernels {
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        // The table is the input (forward) or the output (backward).
        let table = if backward { &specs[2] } else { &specs[0] };
        let (outer, n, inner) = lines(&table.0, axis);
        let (idx, it) = (&specs[1].0, specs[1].1);
        let count = numel(idx);
        let (tt, ti, tg) = (
            flat_type(&table.0, table.1),
            flat_type(idx, it),
            flat_type(&specs[if backward { 0 } else { 2 }].0, specs[if backward { 0 } else { 2 }].1),
        );
        let lt = it.mlir();
        let mut k = Kernel::new();
        let check = IndexCheck {
            operand: 1,
            dtype: runtime_dtype(it).unwrap_or(artifact::DType::I64),
            count,
            bound: n as i64,
            allowed: None,
            what: "index".into(),
        };
        let kernels = if backward && self.target.atomic_scatter() && table.1 == DType::F32 {
            // The GPU's form: zero the table, then a work item per element
            // of the gradient adds it atomically into the row its index
            // names (neighbouring items, neighbouring columns).
            let zero = k.float(0.0, DType::F32);
            let e = k.open("%begin", "%end");
            k.store(&zero, "%b2", &e, &tt);
            k.close();
            let mut kernels = self.one(k, specs, outer * n * inner, 1);
            let mut k = Kernel::new();
            let (ic, cc) = (k.index(inner), k.index(count));
            let w = k.open("%begin", "%end");
            let j = k.val(&format!("arith.remui {w}, {ic} : index"));
            let oc = k.val(&format!("arith.divui {w}, {ic} : index"));
            let c = k.val(&format!("arith.remui {oc}, {cc} : index"));
            let o = k.val(&format!("arith.divui {oc}, {cc} : index"));
            let iv = k.load("%b1", &c, &ti);
            let ix = k.val(&format!("arith.index_cast {iv} : {lt} to index"));
            let row = k.mad(&o, n, &ix);
            let p = k.mad(&row, inner, &j);
            let gv = k.load("%b0", &w, &tg);
            k.val(&format!("memref.atomic_rmw addf {gv}, %b2[{p}] : (f32, {tt}) -> f32"));
            k.close();
            kernels.extend(self.one(k, specs, outer * count * inner, 3));
            kernels
        } else if backward {
            // Column (o, j) of the table per work item: zero it, then add
            // every slice whose index names a row.
            let zero = k.float(0.0, compute(table.1));
            let (ic, nc, cc) = (k.index(inner), k.index(n), k.index(count));
            let w = k.open("%begin", "%end");
            let o = k.val(&format!("arith.divui {w}, {ic} : index"));
            let j = k.val(&format!("arith.remui {w}, {ic} : index"));
            let r = k.open("%c0", &nc);
            let row = k.mad(&o, n, &r);
            let p = k.mad(&row, inner, &j);
            k.store(&zero, "%b2", &p, &tt);
            k.close();
            let c = k.open("%c0", &cc);
            let iv = k.load("%b1", &c, &ti);
            let ix = k.val(&format!("arith.index_cast {iv} : {lt} to index"));
            let row = k.mad(&o, n, &ix);
            let p = k.mad(&row, inner, &j);
            let src_row = k.mad(&o, count, &c);
            let s = k.mad(&src_row, inner, &j);
            let gv = k.load("%b0", &s, &tg);
            let cur = k.load("%b2", &p, &tt);
            let sum = k.fop("addf", &cur, &gv, compute(table.1));
            k.store(&sum, "%b2", &p, &tt);
            k.close();
            k.close();
            let _ = nc;
            self.one(k, specs, outer * inner, 2 * (n + count))
        } else {
            let (ic, cc) = (k.index(inner), k.index(count));
            let w = k.open("%begin", "%end");
            let o = k.val(&format!("arith.divui {w}, {cc} : index"));
            let c = k.val(&format!("arith.remui {w}, {cc} : index"));
            let iv = k.load("%b1", &c, &ti);
            let ix = k.val(&format!("arith.index_cast {iv} : {lt} to index"));
            let row = k.mad(&o, n, &ix);
            let src = k.mul(&row, &ic);
            let dst = k.mul(&w, &ic);
            let j = k.open("%c0", &ic);
            let s = k.add(&src, &j);
            let v = k.load("%b0", &s, &tt);
            let dd = k.add(&dst, &j);
            k.store(&v, "%b2", &dd, &tg);
            k.close();
            k.close();
            self.one(k, specs, outer * count, 2 * inner)
        };
        // The indices are checked before the kernel that reads them (the
        // last; the GPU's scatter zeroes the table first).
        let last = kernels.len().saturating_sub(1);
        kernels
            .into_iter()
            .enumerate()
            .map(|(i, (a, b, c, d, _))| (a, b, c, d, if i == last { vec![check.clone()] } else { vec![] }))
            .collect()
    }

    /// Forward: out[i] = in[start + i stride]; backward: every element of
    /// the (large) output reads its window element or writes zero.
    pub(crate) fn slice(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let backward = has(op, "backward");
        let start: Vec<usize> = i64_array(op, "start").unwrap_or_default().iter().map(|&v| v as usize).collect();
        let step: Vec<usize> = i64_array(op, "strides").unwrap_or_default().iter().map(|&v| v as usize).collect();
        let (ins, outs) = (&specs[0], &specs[1]);
        if self.target.row_copies() && !outs.0.is_empty() && numel(&outs.0) > 0 && numel(&ins.0) > 0 {
            return self.slice_runs(backward, &start, &step, specs);
        }
        // Long rows on a target whose rows are a warp's (the GPU): a warp
        // per output row, its lanes along the row (coalesced, no division
        // per element). GPT-2's padded head, 8192 rows of 50,264 bf16
        // values, took 1.1 ms an element per thread each way.
        if outs.0.last().is_some_and(|&n| n >= WARP_ROW_SLICE) && self.target.row_kernel().lane.is_some() {
            return self.slice_warp_rows(backward, &start, &step, specs);
        }
        let (ti, to) = (flat_type(&ins.0, ins.1), flat_type(&outs.0, outs.1));
        let mut k = Kernel::new();
        let o = k.open("%begin", "%end");
        let c = k.unravel(&o, &outs.0);
        if backward {
            let zero = k.float(0.0, compute(ins.1));
            let (inside, safe) = window(&mut k, &c, &start, &step, &ins.0);
            let i = k.ravel(&safe, &row_major_strides(&ins.0));
            let v = k.load("%b0", &i, &ti);
            let r = k.val(&format!("arith.select {inside}, {v}, {zero} : {}", compute(ins.1).mlir()));
            k.store(&r, "%b1", &o, &to);
        } else {
            let strides = row_major_strides(&ins.0);
            let mut acc = "%c0".to_string();
            for d in 0..c.len() {
                let sc = k.index(start[d]);
                let x = k.mad(&c[d], step[d], &sc);
                acc = k.mad(&x, strides[d], &acc);
            }
            let v = k.load("%b0", &acc, &ti);
            k.store(&v, "%b1", &o, &to);
        }
        k.close();
        let n = numel(&outs.0);
        self.one(k, specs, n, 8 * outs.0.len())
    }

    /// The row form of a slice ([`TargetInfo::row_copies`]): an item per row
    /// of the output's innermost dim. Forward, the row's run of the input
    /// (its elements `step` apart); backward (the output is the whole
    /// operand's gradient), the row is zeroed, then the window's row copied
    /// into it where the row lies in the window.
    fn slice_runs(
        &mut self,
        backward: bool,
        start: &[usize],
        step: &[usize],
        specs: &[(Vec<usize>, DType)],
    ) -> Kernels {
        let (ins, outs) = (&specs[0], &specs[1]);
        let (ti, to) = (flat_type(&ins.0, ins.1), flat_type(&outs.0, outs.1));
        let last = outs.0.len() - 1;
        let in_strides = row_major_strides(&ins.0);
        let (out_run, in_run) = (outs.0[last], ins.0[last]);
        let mut k = Kernel::new();
        let o = k.open("%begin", "%end");
        let c = k.unravel(&o, &outs.0[..last]);
        let out_row = k.mad(&o, out_run, "%c0");
        if backward {
            // The output row's place in the window (the gradient operand).
            let (inside, safe) = window(&mut k, &c, start, step, &ins.0);
            let in_row = k.ravel(&safe, &in_strides[..last]);
            let zero = k.float(0.0, compute(ins.1));
            let n = k.index(out_run);
            let j = k.open("%c0", &n);
            let p = k.add(&out_row, &j);
            k.store(&zero, "%b1", &p, &to);
            k.close();
            // The window's row, where this row is in the window (else no
            // elements).
            let run = k.index(in_run);
            let count = k.val(&format!("arith.select {inside}, {run}, %c0 : index"));
            let first = k.index(start[last]);
            let j = k.open("%c0", &count);
            let i = k.add(&in_row, &j);
            let v = k.load("%b0", &i, &ti);
            let col = k.mad(&j, step[last], &first);
            let p = k.add(&out_row, &col);
            k.store(&v, "%b1", &p, &to);
            k.close();
        } else {
            let from = row_origin(&mut k, &c, start, step, &in_strides);
            let n = k.index(out_run);
            let j = k.open("%c0", &n);
            let i = k.mad(&j, step[last], &from);
            let v = k.load("%b0", &i, &ti);
            let p = k.add(&out_row, &j);
            k.store(&v, "%b1", &p, &to);
            k.close();
        }
        k.close();
        let rows = numel(&outs.0) / out_run;
        self.one(k, specs, rows, 2 * out_run + 8 * outs.0.len())
    }

    /// The warp form of a slice (see [`Generator::slice`]): an item per
    /// chunk of [`WARP_ROW_CHUNK`] columns of a row of the output's
    /// innermost dim, its columns over the item's lanes.
    /// Forward, each column reads its element of the input's row; backward
    /// (the output is the whole operand's gradient), each column reads its
    /// window element or writes zero, in one pass (a zeroing pass, then a
    /// copy by other lanes, would race).
    fn slice_warp_rows(
        &mut self,
        backward: bool,
        start: &[usize],
        step: &[usize],
        specs: &[(Vec<usize>, DType)],
    ) -> Kernels {
        let (ins, outs) = (&specs[0], &specs[1]);
        let (ti, to) = (flat_type(&ins.0, ins.1), flat_type(&outs.0, outs.1));
        let last = outs.0.len() - 1;
        let in_strides = row_major_strides(&ins.0);
        let out_run = outs.0[last];
        // A row in chunks of WARP_ROW_CHUNK columns, an item each, so that
        // a few long rows still fill the GPU (GPT-2's 8192 rows of 50,264:
        // 0.88-0.91 ms a slice, a warp per whole row 0.92, both about 1.8
        // TB/s on an H200).
        let chunks = out_run.div_ceil(WARP_ROW_CHUNK);
        let mut k = self.target.row_kernel();
        let (lane, width) = match k.lane.clone() {
            Some(lane) => (lane, 32),
            None => ("%c0".to_string(), 1),
        };
        let item = k.open("%begin", "%end");
        let cc = k.index(chunks);
        let o = k.val(&format!("arith.divui {item}, {cc} : index"));
        let part = k.val(&format!("arith.remui {item}, {cc} : index"));
        let c = k.unravel(&o, &outs.0[..last]);
        let out_row = k.mad(&o, out_run, "%c0");
        let n = k.index(out_run);
        let first = k.mad(&part, WARP_ROW_CHUNK, &lane);
        let size = k.index(WARP_ROW_CHUNK);
        let begin = k.mad(&part, WARP_ROW_CHUNK, "%c0");
        let end = k.add(&begin, &size);
        let end = k.val(&format!("arith.minui {end}, {n} : index"));
        let width = k.index(width);
        if backward {
            // The row's place in the window (the gradient operand), then
            // each column's.
            let (row_inside, safe) = window(&mut k, &c, &start[..last], &step[..last], &ins.0[..last]);
            let in_row = k.ravel(&safe, &in_strides[..last]);
            let zero = k.float(0.0, compute(ins.1));
            let j = k.open_step(&first, &end, &width);
            let (col_inside, col) =
                window(&mut k, std::slice::from_ref(&j), &start[last..], &step[last..], &ins.0[last..]);
            let inside = k.and(&row_inside, &col_inside);
            // In bounds either way: outside the window the coordinates are 0.
            let i = k.add(&in_row, &col[0]);
            let v = k.load("%b0", &i, &ti);
            let r = k.val(&format!("arith.select {inside}, {v}, {zero} : {}", compute(ins.1).mlir()));
            let p = k.add(&out_row, &j);
            k.store(&r, "%b1", &p, &to);
            k.close();
        } else {
            let from = row_origin(&mut k, &c, start, step, &in_strides);
            let j = k.open_step(&first, &end, &width);
            let i = k.mad(&j, step[last], &from);
            let v = k.load("%b0", &i, &ti);
            let p = k.add(&out_row, &j);
            k.store(&v, "%b1", &p, &to);
            k.close();
        }
        k.close();
        let rows = numel(&outs.0) / out_run;
        self.one(k, specs, rows * chunks, 2 * WARP_ROW_CHUNK.min(out_run) + 8 * outs.0.len())
    }

    /// One kernel per input, copying it to its place along `axis`.
    pub(crate) fn concat(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        let out = specs.len() - 1;
        let out_strides = row_major_strides(&specs[out].0);
        let mut offset = 0;
        let mut all = Vec::new();
        for (n, (shape, t)) in specs[..out].iter().enumerate() {
            if self.target.row_copies() && !shape.is_empty() && numel(shape) > 0 {
                // A row of the input's innermost dim per item, copied to
                // its place (shifted along `axis`).
                let last = shape.len() - 1;
                let run = shape[last];
                let mut k = Kernel::new();
                let i = k.open("%begin", "%end");
                let mut c = k.unravel(&i, &shape[..last]);
                let shift = if axis == last { offset } else { 0 };
                if axis < last {
                    let oc = k.index(offset);
                    c[axis] = k.add(&c[axis], &oc);
                }
                let base = k.index(shift);
                let to = k.ravel(&c, &out_strides[..last]);
                let to = k.add(&to, &base);
                let from = k.mad(&i, run, "%c0");
                let rc = k.index(run);
                let j = k.open("%c0", &rc);
                let s = k.add(&from, &j);
                let v = k.load("%b0", &s, &flat_type(shape, *t));
                let d = k.add(&to, &j);
                k.store(&v, "%b1", &d, &flat_type(&specs[out].0, specs[out].1));
                k.close();
                k.close();
                let pair = [specs[n].clone(), specs[out].clone()];
                self.finish(k, &pair);
                all.push((self.last(), (numel(shape) / run) as u64, 2 * run as u64, vec![n, out], vec![]));
                offset += shape[axis];
                continue;
            }
            let mut k = Kernel::new();
            let i = k.open("%begin", "%end");
            let mut c = k.unravel(&i, shape);
            let oc = k.index(offset);
            c[axis] = k.add(&c[axis], &oc);
            let o = k.ravel(&c, &out_strides);
            let v = k.load("%b0", &i, &flat_type(shape, *t));
            k.store(&v, "%b1", &o, &flat_type(&specs[out].0, specs[out].1));
            k.close();
            let pair = [specs[n].clone(), specs[out].clone()];
            self.finish(k, &pair);
            all.push((self.last(), numel(shape).max(1) as u64, 4 * shape.len() as u64, vec![n, out], vec![]));
            offset += shape[axis];
        }
        all
    }

    pub(crate) fn argmax(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let axis = int_attr(op, "axis").unwrap_or(0) as usize;
        let (shape, t) = (&specs[0].0, compute(specs[0].1));
        let (outer, n, inner) = lines(shape, axis);
        let (f, ty) = (t.mlir(), flat_type(shape, specs[0].1));
        let mut k = Kernel::new();
        let nc = k.index(n);
        let l = k.open("%begin", "%end");
        let base = k.line_base(&l, inner, n);
        // The running best starts below every value: -inf, or the integer
        // type's least value (a line of only that value gives index 0).
        let integer = matches!(t, DType::I32 | DType::I64);
        let lowest = match t {
            DType::I32 => k.val(&format!("arith.constant {} : i32", i32::MIN)),
            DType::I64 => k.val(&format!("arith.constant {} : i64", i64::MIN)),
            _ => k.float(f64::NEG_INFINITY, t),
        };
        k.n += 1;
        let (j, bv, bi, r) = (format!("%i{}", k.n), format!("%bv{}", k.n), format!("%bi{}", k.n), format!("%r{}", k.n));
        k.line(&format!(
            "{r}:2 = scf.for {j} = %c0 to {nc} step %c1 iter_args({bv} = {lowest}, {bi} = %c0) -> ({f}, index) {{"
        ));
        k.depth += 1;
        let p = k.at(&base, &j, inner);
        let v = k.load("%b0", &p, &ty);
        // A NaN is the largest (as `torch.argmax`, and as `hl.reduce_max`
        // propagates it): the first NaN wins and nothing after it does.
        let better =
            if integer { k.val(&format!("arith.cmpi sgt, {v}, {bv} : {f}")) } else { k.above_nan_first(&v, &bv, f) };
        let nb = k.val(&format!("arith.select {better}, {v}, {bv} : {f}"));
        let ni = k.val(&format!("arith.select {better}, {j}, {bi} : index"));
        k.line(&format!("scf.yield {nb}, {ni} : {f}, index"));
        k.depth -= 1;
        k.line("}");
        let iv = k.val(&format!("arith.index_cast {r}#1 : index to i64"));
        k.store(&iv, "%b1", &l, &flat_type(&specs[1].0, specs[1].1));
        k.close();
        self.one(k, specs, outer * inner, 4 * n)
    }

    /// Philox4x32-10 per group of four elements, as `hl.dropout` defines.
    pub(crate) fn dropout(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (shape, t) = (&specs[0].0, compute(specs[0].1));
        let (f, ty) = (t.mlir(), flat_type(shape, specs[0].1));
        let out_ty = flat_type(&specs[3].0, specs[3].1);
        let p = float_attr(op, "p").unwrap_or(0.0);
        let stream = int_attr(op, "stream").unwrap_or(0) as u64;
        // keep iff (word >> 8) / 2^24 >= p, i.e. (word >> 8) >= ceil(p 2^24)
        let threshold = (p * 16_777_216.0).ceil() as u64;
        let n = numel(shape);
        let mut k = Kernel::new();
        let philox = Philox::new(&mut k, "%b1", "%b2", stream);
        let scale = k.float(1.0 / (1.0 - p), t);
        let zero = k.float(0.0, t);
        let thr = k.val(&format!("arith.constant {threshold} : i32"));
        let c8 = k.val("arith.constant 8 : i32");
        philox.groups(
            &mut k,
            n,
            |_, _| (),
            |k, i, words, _| {
                let top = k.val(&format!("arith.shrui {}, {c8} : i32", words[i.1]));
                let keep = k.val(&format!("arith.cmpi uge, {top}, {thr} : i32"));
                let x = k.load("%b0", &i.0, &ty);
                let y = k.fop("mulf", &x, &scale, t);
                let r = k.val(&format!("arith.select {keep}, {y}, {zero} : {f}"));
                k.store(&r, "%b3", &i.0, &out_ty);
            },
        );
        self.one(k, specs, n.div_ceil(4), 120)
    }

    /// `hl.random_like`'s numbers (operands seed, offset, out): uniform
    /// words scaled into `[a, b)`, or Box-Muller normals from word pairs.
    pub(crate) fn random(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (shape, t) = (&specs[2].0, DType::F32);
        let out_ty = flat_type(shape, specs[2].1);
        let wide_out = specs[2].1 == DType::F64;
        let normal = crate::ir::string_attr(op, "kind").as_deref() == Some("normal");
        let (a, b) = (float_attr(op, "a").unwrap_or(0.0), float_attr(op, "b").unwrap_or(1.0));
        let stream = int_attr(op, "stream").unwrap_or(0) as u64;
        let n = numel(shape);
        let mut k = Kernel::new();
        let philox = Philox::new(&mut k, "%b0", "%b1", stream);
        let c8 = k.val("arith.constant 8 : i32");
        let c1 = k.val("arith.constant 1 : i32");
        let inv24 = k.float(1.0 / 16_777_216.0, t);
        // A uniform draw takes as many bits as the stored type holds
        // (`hl.random_like`'s description), so a 16-bit one stays below 1.
        let bits = aicf_runtime::rng::uniform_bits(specs[2].1 == DType::BF16, specs[2].1 == DType::F16);
        let (shift, scale) =
            (k.val(&format!("arith.constant {} : i32", 32 - bits)), k.float(1.0 / (1u64 << bits) as f64, t));
        let (av, bv) = (k.float(a, t), k.float(if normal { b } else { b - a }, t));
        let (m2, tau) = (k.float(-2.0, t), k.float(std::f64::consts::TAU, t));
        // word >> 8 (plus one for the open interval) over 2^24
        let unit = |k: &mut Kernel, w: &str, open: bool| {
            let top = k.val(&format!("arith.shrui {w}, {c8} : i32"));
            let top = if open { k.val(&format!("arith.addi {top}, {c1} : i32")) } else { top };
            let x = k.val(&format!("arith.uitofp {top} : i32 to f32"));
            k.fop("mulf", &x, &inv24, t)
        };
        let per_block = |k: &mut Kernel, words: &[String; 4]| {
            if !normal {
                return Vec::new();
            }
            (0..2)
                .map(|p| {
                    let u1 = unit(k, &words[2 * p], true);
                    let u2 = unit(k, &words[2 * p + 1], false);
                    let ln = k.val(&format!("math.log {u1} : f32"));
                    let r2 = k.fop("mulf", &m2, &ln, t);
                    let r = k.val(&format!("math.sqrt {r2} : f32"));
                    (r, k.fop("mulf", &tau, &u2, t))
                })
                .collect()
        };
        philox.groups(&mut k, n, per_block, |k, i, words, pairs: &Vec<(String, String)>| {
            let v = if normal {
                let (r, theta) = &pairs[i.1 / 2];
                let trig = if i.1 % 2 == 0 { "cos" } else { "sin" };
                let z = k.val(&format!("math.{trig} {theta} : f32"));
                k.fop("mulf", r, &z, t)
            } else {
                let top = k.val(&format!("arith.shrui {}, {shift} : i32", words[i.1]));
                let x = k.val(&format!("arith.uitofp {top} : i32 to f32"));
                k.fop("mulf", &x, &scale, t)
            };
            let scaled = k.fop("mulf", &v, &bv, t);
            let y = k.fop("addf", &av, &scaled, t);
            // (Drawn in f32, as the interpreter rounds them, and widened
            // exactly for an f64 tensor.)
            let y = if wide_out { k.val(&format!("arith.extf {y} : f32 to f64")) } else { y };
            k.store(&y, "%b2", &i.0, &out_ty);
        });
        self.one(k, specs, n.div_ceil(4), if normal { 160 } else { 100 })
    }
}

/// Philox4x32-10's constants and the step's key and offset, loaded once in
/// a kernel (`seed` and `offset` are rank-0 i64 buffers).
struct Philox {
    k: [String; 2],
    stream: [String; 2],
    offset: String,
    m: [String; 2],
    w: [String; 2],
    c32: String,
}

impl Philox {
    fn new(k: &mut Kernel, seed: &str, offset: &str, stream: u64) -> Philox {
        let c = |k: &mut Kernel, v: u64, t: &str| k.val(&format!("arith.constant {v} : {t}"));
        let seed = k.load(seed, "%c0", "memref<1xi64>");
        let offset = k.load(offset, "%c0", "memref<1xi64>");
        let c32 = c(k, 32, "i64");
        let k0 = k.val(&format!("arith.trunci {seed} : i64 to i32"));
        let sh = k.val(&format!("arith.shrui {seed}, {c32} : i64"));
        let k1 = k.val(&format!("arith.trunci {sh} : i64 to i32"));
        let stream = [c(k, stream & 0xffff_ffff, "i32"), c(k, stream >> 32, "i32")];
        let m = [c(k, 0xD251_1F53, "i64"), c(k, 0xCD9E_8D57, "i64")];
        let w = [c(k, 0x9E37_79B9, "i32"), c(k, 0xBB67_AE85, "i32")];
        Philox { k: [k0, k1], stream, offset, m, w, c32 }
    }

    /// For each element `i` of `n`, in groups of four per block (`g` from
    /// `%begin` to `%end`): `per_block` of the block's words, then
    /// `per_element` of ((`i`, `i mod 4`), the words, what `per_block`
    /// gave). Groups whose four elements all exist run without a bound
    /// check, so the loop vectorises (a check per element kept it scalar:
    /// twice an elementwise pass's time); the one ragged group, if any,
    /// after.
    fn groups<P>(
        &self,
        k: &mut Kernel,
        n: usize,
        mut per_block: impl FnMut(&mut Kernel, &[String; 4]) -> P,
        mut per_element: impl FnMut(&mut Kernel, (String, usize), &[String; 4], &P),
    ) {
        let four = k.index(4);
        let full = k.index(n / 4);
        let hi = k.val(&format!("arith.minui %end, {full} : index"));
        let groups = [
            ("%begin".to_string(), hi, false),
            (k.val(&format!("arith.maxui %begin, {full} : index")), "%end".to_string(), true),
        ];
        for (lo, hi, ragged) in groups {
            if ragged && n % 4 == 0 {
                continue;
            }
            let g = k.open(&lo, &hi);
            let words = self.block(k, &g, n.div_ceil(4) as u64 > aicf_runtime::rng::STEP_BLOCKS);
            let shared = per_block(k, &words);
            let base = k.mul(&g, &four);
            for j in 0..4 {
                let wc = k.index(j);
                let i = k.add(&base, &wc);
                if ragged {
                    let nc = k.index(n);
                    let inside = k.cmpi("ult", &i, &nc);
                    k.line(&format!("scf.if {inside} {{"));
                    k.depth += 1;
                }
                per_element(k, (i, j), &words, &shared);
                if ragged {
                    k.depth -= 1;
                    k.line("}");
                }
            }
            k.close();
        }
    }

    /// The four words of the op's block `g` (an index), as
    /// `aicf_runtime::rng::op_block` draws them: block `offset + g` where
    /// the op has at most 2^24 blocks (`wide` false), else `g`'s bits past
    /// 24 xored into the stream's high word.
    fn block(&self, k: &mut Kernel, g: &str, wide: bool) -> [String; 4] {
        let c32 = &self.c32;
        let mut gi = k.val(&format!("arith.index_cast {g} : index to i64"));
        let mut s_hi = self.stream[1].clone();
        if wide {
            let c24 = k.val("arith.constant 24 : i64");
            let mask = k.val(&format!("arith.constant {} : i64", aicf_runtime::rng::STEP_BLOCKS - 1));
            let high = k.val(&format!("arith.shrui {gi}, {c24} : i64"));
            let high = k.val(&format!("arith.trunci {high} : i64 to i32"));
            s_hi = k.val(&format!("arith.xori {s_hi}, {high} : i32"));
            gi = k.val(&format!("arith.andi {gi}, {mask} : i64"));
        }
        let block = k.val(&format!("arith.addi {}, {gi} : i64", self.offset));
        let b_lo = k.val(&format!("arith.trunci {block} : i64 to i32"));
        let bsh = k.val(&format!("arith.shrui {block}, {c32} : i64"));
        let b_hi = k.val(&format!("arith.trunci {bsh} : i64 to i32"));
        let mut ctr = [b_lo, b_hi, self.stream[0].clone(), s_hi];
        let [mut ka, mut kb] = self.k.clone();
        for round in 0..10 {
            if round > 0 {
                ka = k.val(&format!("arith.addi {ka}, {} : i32", self.w[0]));
                kb = k.val(&format!("arith.addi {kb}, {} : i32", self.w[1]));
            }
            let mulhilo = |k: &mut Kernel, m: &str, x: &str| {
                let x64 = k.val(&format!("arith.extui {x} : i32 to i64"));
                let prod = k.val(&format!("arith.muli {m}, {x64} : i64"));
                let hi64 = k.val(&format!("arith.shrui {prod}, {c32} : i64"));
                let hi = k.val(&format!("arith.trunci {hi64} : i64 to i32"));
                let lo = k.val(&format!("arith.trunci {prod} : i64 to i32"));
                (hi, lo)
            };
            let (hi0, lo0) = mulhilo(k, &self.m[0], &ctr[0]);
            let (hi1, lo1) = mulhilo(k, &self.m[1], &ctr[2]);
            let x0 = k.val(&format!("arith.xori {hi1}, {} : i32", ctr[1]));
            let x0 = k.val(&format!("arith.xori {x0}, {ka} : i32"));
            let x2 = k.val(&format!("arith.xori {hi0}, {} : i32", ctr[3]));
            let x2 = k.val(&format!("arith.xori {x2}, {kb} : i32"));
            ctr = [x0, lo1, x2, lo0];
        }
        ctr
    }
}
