use crate::codegen::prelude::*;

impl Generator {
    /// Mean and reciprocal deviation of the row at `base` (length `n`), in
    /// every lane of a warp-per-row kernel.
    pub(crate) fn row_stats(
        k: &mut Kernel,
        base: &str,
        n: usize,
        t: DType,
        center: bool,
        eps: f64,
        ty: &str,
        buf: &str,
    ) -> (String, String) {
        let f = t.mlir();
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let count = k.float(n as f64, t);
        let mean = if center {
            let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
            let p = k.add(base, &j);
            let x = k.load(buf, &p, ty);
            let next = k.val(&format!("arith.addf {acc}, {x} fastmath<fast> : {f}"));
            k.close_with(&next, f);
            let s = k.warp_all(&s, "addf", t);
            k.fop("divf", &s, &count, t)
        } else {
            zero.clone()
        };
        let (j, acc, s) = k.open_cols_reduce(&nc, &zero, f);
        let p = k.add(base, &j);
        let x = k.load(buf, &p, ty);
        let d = k.fop("subf", &x, &mean, t);
        let d2 = k.fop("mulf", &d, &d, t);
        let next = k.val(&format!("arith.addf {acc}, {d2} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let s = k.warp_all(&s, "addf", t);
        let var = k.fop("divf", &s, &count, t);
        let e = k.float(eps, t);
        let ve = k.fop("addf", &var, &e, t);
        let rstd = k.val(&format!("math.rsqrt {ve} : {f}"));
        (mean, rstd)
    }

    pub(crate) fn norm(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 0, 0, 1]);
        let (w, b) = ((seg[1] > 0).then_some(1), (seg[2] > 0).then_some(1 + seg[1] as usize));
        let out = 1 + seg[1] as usize + seg[2] as usize;
        let (shape, t) = (&specs[0].0, compute(specs[0].1));
        let dims = int_attr(op, "dims").unwrap_or(1) as usize;
        let n: usize = shape[shape.len() - dims..].iter().product();
        let rows = numel(shape) / n.max(1);
        let (eps, center) = (float_attr(op, "eps").unwrap_or(1e-5), !has(op, "rms"));
        let ty = flat_type(shape, specs[0].1);
        let mut k = self.target.row_kernel();
        let r = k.open("%begin", "%end");
        let nc = k.index(n);
        let base = k.mul(&r, &nc);
        let (mean, rstd) = Self::row_stats(&mut k, &base, n, t, center, eps, &ty, "%b0");
        let j = k.open_cols(&nc);
        let p = k.add(&base, &j);
        let x = k.load("%b0", &p, &ty);
        let d = k.fop("subf", &x, &mean, t);
        let mut y = k.fop("mulf", &d, &rstd, t);
        if let Some(w) = w {
            let wv = k.load(&format!("%b{w}"), &j, &flat_type(&specs[w].0, specs[w].1));
            y = k.fop("mulf", &y, &wv, t);
        }
        if let Some(b) = b {
            let bv = k.load(&format!("%b{b}"), &j, &flat_type(&specs[b].0, specs[b].1));
            y = k.fop("addf", &y, &bv, t);
        }
        k.store(&y, &format!("%b{out}"), &p, &flat_type(&specs[out].0, specs[out].1));
        k.close();
        k.close();
        self.one(k, specs, rows, 10 * n)
    }

    /// dx per row; dw and db summed over rows in the same pass, every row
    /// in order in one work item: the CPU's form where the op has no
    /// `partials` (deterministic sums, rows not split over threads).
    pub(crate) fn norm_backward_serial(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let g = NormGradient::of(op, specs);
        let t = g.t;
        let mut k = self.target.row_kernel();
        let zero = k.float(0.0, t);
        let nc = k.index(g.n);
        let count = k.float(g.n as f64, t);
        for p in [g.dw, g.db].into_iter().flatten() {
            let j = k.open("%c0", &nc);
            k.store(&zero, &format!("%b{p}"), &j, &g.tys[p]);
            k.close();
        }
        let rc = k.index(g.rows);
        let r = k.open("%c0", &rc);
        let row_ty = |p: usize| g.tys[p].clone();
        g.row(&mut k, &r, &nc, &zero, &count, &|k: &mut Kernel, p: usize, j: &str, v: &str| {
            let cur = k.load(&format!("%b{p}"), j, &row_ty(p));
            let s = k.fop("addf", &cur, v, t);
            k.store(&s, &format!("%b{p}"), j, &row_ty(p));
        });
        self.one(k, specs, 1, g.rows * g.n * 20)
    }

    /// dx per row; dw and db summed over fixed chunks of rows into the
    /// `partials` scratch buffer, a chunk per work item (in parallel), then
    /// the chunks' sums added in chunk order, a column per work item: the
    /// CPU's form where the op has `partials` (the same bits for any
    /// thread count).
    pub(crate) fn norm_backward_chunked(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let g = NormGradient::of(op, specs);
        let Some(p) = g.partials else {
            return self.norm_backward_serial(op, specs);
        };
        let t = g.t;
        let sums: Vec<usize> = [g.dw, g.db].into_iter().flatten().collect();
        let width = sums.len() * g.n;
        let chunks = (numel(&specs[p].0) / width.max(1)).max(1);
        let pty = g.tys[p].clone();
        // 1. A chunk of rows per work item: its slice of `partials`
        // zeroed, then its rows' dx and their terms of the sums.
        let mut k = self.target.row_kernel();
        let zero = k.float(0.0, t);
        let nc = k.index(g.n);
        let count = k.float(g.n as f64, t);
        let (wc, rc, cc) = (k.index(width), k.index(g.rows), k.index(chunks));
        let c = k.open("%begin", "%end");
        let slice = k.mul(&c, &wc);
        let j = k.open("%c0", &wc);
        let at = k.add(&slice, &j);
        k.store(&zero, &format!("%b{p}"), &at, &pty);
        k.close();
        let from = k.mul(&c, &rc);
        let lo = k.val(&format!("arith.divui {from}, {cc} : index"));
        let next = k.add(&c, "%c1");
        let to = k.mul(&next, &rc);
        let hi = k.val(&format!("arith.divui {to}, {cc} : index"));
        let r = k.open(&lo, &hi);
        let n = g.n;
        let (first, slice_at) = (sums[0], slice.clone());
        g.row(&mut k, &r, &nc, &zero, &count, &|k: &mut Kernel, buf: usize, j: &str, v: &str| {
            let part = if buf == first { 0 } else { n };
            let off = k.index(part);
            let base = k.add(&slice_at, &off);
            let at = k.add(&base, j);
            let cur = k.load(&format!("%b{p}"), &at, &pty);
            let s = k.fop("addf", &cur, v, t);
            k.store(&s, &format!("%b{p}"), &at, &pty);
        });
        k.close();
        let mut kernels = self.one(k, specs, chunks, g.rows.div_ceil(chunks) * g.n * 20);
        // 2. A column per work item: each sum's chunks added in order.
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let (wc, cc) = (k.index(width), k.index(chunks));
        let j = k.open("%begin", "%end");
        for (i, &buf) in sums.iter().enumerate() {
            let (c, acc, total) = k.open_reduce("%c0", &cc, &zero, t.mlir());
            let slice = k.mul(&c, &wc);
            let off = k.index(i * g.n);
            let base = k.add(&slice, &off);
            let at = k.add(&base, &j);
            let v = k.load(&format!("%b{p}"), &at, &pty);
            let s = k.fop("addf", &acc, &v, t);
            k.close_with(&s, t.mlir());
            k.store(&total, &format!("%b{buf}"), &j, &g.tys[buf]);
        }
        k.close();
        kernels.extend(self.one(k, specs, g.n, chunks * sums.len() * 2));
        kernels
    }

    /// dx per row, a warp per group of [`norm_row_group`] rows; each lane
    /// sums its columns' terms of dw and db over the group's rows in its own
    /// memory, then adds them atomically once per group, after a kernel that
    /// zeroes dw and db: the GPU's form. (An atomic add per row and column
    /// took 0.2 ms for a 16384 x 384 norm on an H200: 16384 adds to each
    /// address, one after another.)
    pub(crate) fn norm_backward_atomic(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let g = NormGradient::of(op, specs);
        let (t, f) = (g.t, g.t.mlir());
        let sums: Vec<usize> = [g.dw, g.db].into_iter().flatten().collect();
        // A 16-bit dw or db is summed atomically in the `partials` scratch
        // (f32), then rounded once, a column per work item: thousands of
        // atomic adds in bf16 each rounded lose several per cent.
        let staged = g.partials.filter(|_| sums.iter().any(|&p| narrow_element(&g.tys[p]).is_some()));
        // Where sum i (of `sums`) is added: its buffer and the offset of
        // its first column there.
        let target = |i: usize, p: usize| match staged {
            Some(s) => (s, i * g.n),
            None => (p, 0),
        };
        let mut kernels = Vec::new();
        if !sums.is_empty() {
            let mut k = Kernel::new();
            let zero = k.float(0.0, t);
            let j = k.open("%begin", "%end");
            match staged {
                Some(s) => {
                    let zero = k.float(0.0, compute(specs[s].1));
                    k.store(&zero, &format!("%b{s}"), &j, &g.tys[s]);
                }
                None => {
                    for &p in &sums {
                        k.store(&zero, &format!("%b{p}"), &j, &g.tys[p]);
                    }
                }
            }
            k.close();
            let items = if staged.is_some() { sums.len() * g.n } else { g.n };
            kernels.extend(self.one(k, specs, items, 1));
        }
        let group = norm_row_group(g.rows);
        let mut k = self.target.row_kernel();
        let zero = k.float(0.0, t);
        let nc = k.index(g.n);
        let count = k.float(g.n as f64, t);
        // A lane's columns are lane, lane + 32, ...: column j in slot j / 32.
        let slots = g.n.div_ceil(32).max(1);
        let local_ty = format!("memref<{slots}x{f}>");
        let locals: Vec<(usize, String)> =
            sums.iter().map(|&p| (p, k.val(&format!("memref.alloca() : {local_ty}")))).collect();
        let width = k.index(32);
        let item = k.open("%begin", "%end");
        if !locals.is_empty() {
            let sc = k.index(slots);
            let i = k.open("%c0", &sc);
            for (_, l) in &locals {
                k.store(&zero, l, &i, &local_ty);
            }
            k.close();
        }
        let (gc, rc) = (k.index(group), k.index(g.rows));
        let lo = k.mul(&item, &gc);
        let end = k.add(&lo, &gc);
        let hi = k.val(&format!("arith.minui {end}, {rc} : index"));
        let r = k.open(&lo, &hi);
        g.row(&mut k, &r, &nc, &zero, &count, &|k: &mut Kernel, p: usize, j: &str, v: &str| {
            if let Some((_, l)) = locals.iter().find(|(q, _)| *q == p) {
                let slot = k.val(&format!("arith.divui {j}, {width} : index"));
                let cur = k.load(l, &slot, &local_ty);
                let s = k.fop("addf", &cur, v, t);
                k.store(&s, l, &slot, &local_ty);
            }
        });
        if !locals.is_empty() {
            let j = k.open_cols(&nc);
            let slot = k.val(&format!("arith.divui {j}, {width} : index"));
            for (i, (p, l)) in locals.iter().enumerate() {
                let v = k.load(l, &slot, &local_ty);
                let (buf, first) = target(i, *p);
                let at = if first == 0 {
                    j.clone()
                } else {
                    let off = k.index(first);
                    k.add(&off, &j)
                };
                // Added in the type of the buffer it goes to (a 16-bit
                // output without scratch: rounded first).
                let (v, f) = match narrow_element(&g.tys[buf]) {
                    Some(n) => (k.val(&format!("arith.truncf {v} : {f} to {}", n.mlir())), n.mlir()),
                    None => (v, f),
                };
                k.val(&format!("memref.atomic_rmw addf {v}, %b{buf}[{at}] : ({f}, {}) -> {f}", g.tys[buf]));
            }
            k.close();
        }
        k.close();
        kernels.extend(self.one(k, specs, g.rows.div_ceil(group), group * g.n * 20));
        // The staged sums rounded into dw and db, a column per work item.
        if let Some(s) = staged {
            let mut k = Kernel::new();
            let j = k.open("%begin", "%end");
            for (i, &p) in sums.iter().enumerate() {
                let off = k.index(i * g.n);
                let at = k.add(&off, &j);
                let v = k.load(&format!("%b{s}"), &at, &g.tys[s]);
                k.store(&v, &format!("%b{p}"), &j, &g.tys[p]);
            }
            k.close();
            kernels.extend(self.one(k, specs, g.n, sums.len()));
        }
        kernels
    }
}

/// Rows a warp of the GPU's norm gradient takes (see
/// [`Generator::norm_backward_atomic`]): enough that each address of dw
/// and db gets a few thousand atomic adds at most, while about 2048 warps
/// stay busy (at most 16 rows, at least 1).
pub(crate) fn norm_row_group(rows: usize) -> usize {
    (rows / 2048).clamp(1, 16)
}

/// An `ll.norm_backward`: its operands and the normalised shape.
struct NormGradient {
    w: Option<usize>,
    dx: usize,
    dw: Option<usize>,
    db: Option<usize>,
    /// The chunks' sums of dw and db (scratch; the CPU's parallel form).
    partials: Option<usize>,
    /// The compute type.
    t: DType,
    n: usize,
    rows: usize,
    eps: f64,
    center: bool,
    /// Each operand's memref type.
    tys: Vec<String>,
}

impl NormGradient {
    fn of(op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Self {
        let mut seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 1, 0, 0, 0]);
        seg.resize(7, 0);
        let w = (seg[2] > 0).then_some(2);
        let dx = 2 + seg[2] as usize;
        let dw = (seg[4] > 0).then_some(dx + 1);
        let db = (seg[5] > 0).then_some(dx + 1 + seg[4] as usize);
        let partials = (seg[6] > 0).then_some(dx + 1 + seg[4] as usize + seg[5] as usize);
        let (shape, t) = (&specs[1].0, compute(specs[1].1));
        let dims = int_attr(op, "dims").unwrap_or(1) as usize;
        let n: usize = shape[shape.len() - dims..].iter().product();
        let rows = numel(shape) / n.max(1);
        let (eps, center) = (float_attr(op, "eps").unwrap_or(1e-5), !has(op, "rms"));
        NormGradient {
            w,
            dx,
            dw,
            db,
            partials,
            t,
            n,
            rows,
            eps,
            center,
            tys: specs.iter().map(|(s, d)| flat_type(s, *d)).collect(),
        }
    }

    /// Row `r` (inside its loop): dx, and each column's terms of dw and db
    /// added by `add_into(k, buffer, column, value)`; closes the row loop.
    fn row(
        &self,
        k: &mut Kernel,
        r: &str,
        nc: &str,
        zero: &str,
        count: &str,
        add_into: &dyn Fn(&mut Kernel, usize, &str, &str),
    ) {
        let (t, f) = (self.t, self.t.mlir());
        let base = k.mul(r, nc);
        let (mean, rstd) = Generator::row_stats(k, &base, self.n, t, self.center, self.eps, &self.tys[1], "%b1");
        // xhat_j = (x_j - mean) rstd; dxhat_j = g_j w_j
        let xhat = |k: &mut Kernel, j: &str| -> String {
            let p = k.add(&base, j);
            let x = k.load("%b1", &p, &self.tys[1]);
            let d = k.fop("subf", &x, &mean, t);
            k.fop("mulf", &d, &rstd, t)
        };
        let dxhat = |k: &mut Kernel, j: &str| -> String {
            let p = k.add(&base, j);
            let g = k.load("%b0", &p, &self.tys[0]);
            match self.w {
                Some(w) => {
                    let wv = k.load(&format!("%b{w}"), j, &self.tys[w]);
                    k.fop("mulf", &g, &wv, t)
                }
                None => g,
            }
        };
        // mean(dxhat) and mean(dxhat * xhat)
        let (j, acc, s1) = k.open_cols_reduce(nc, zero, f);
        let d = dxhat(k, &j);
        let next = k.val(&format!("arith.addf {acc}, {d} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let s1 = k.warp_all(&s1, "addf", t);
        let (j, acc, s2) = k.open_cols_reduce(nc, zero, f);
        let d = dxhat(k, &j);
        let xh = xhat(k, &j);
        let dx_xh = k.fop("mulf", &d, &xh, t);
        let next = k.val(&format!("arith.addf {acc}, {dx_xh} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let s2 = k.warp_all(&s2, "addf", t);
        let m1 = if self.center { k.fop("divf", &s1, count, t) } else { zero.to_string() };
        let m2 = k.fop("divf", &s2, count, t);
        let j = k.open_cols(nc);
        let d = dxhat(k, &j);
        let xh = xhat(k, &j);
        let a = k.fop("subf", &d, &m1, t);
        let b = k.fop("mulf", &xh, &m2, t);
        let c = k.fop("subf", &a, &b, t);
        let v = k.fop("mulf", &c, &rstd, t);
        let p = k.add(&base, &j);
        k.store(&v, &format!("%b{}", self.dx), &p, &self.tys[self.dx]);
        let g = k.load("%b0", &p, &self.tys[0]);
        if let Some(dw) = self.dw {
            let gx = k.fop("mulf", &g, &xh, t);
            add_into(k, dw, &j, &gx);
        }
        if let Some(db) = self.db {
            add_into(k, db, &j, &g);
        }
        k.close();
        k.close();
    }
}
