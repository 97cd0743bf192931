use crate::codegen::prelude::*;

/// The input coordinate `o * stride - pad + kx * dilation` that window tap
/// `kx` of output `o` reads, and whether it lies in `[0, limit)`: (in
/// bounds, the coordinate or 0 when it is not).
pub(crate) fn window_tap(
    k: &mut Kernel,
    o: &str,
    kx: &str,
    stride: usize,
    dilation: usize,
    pad: usize,
    limit: usize,
) -> (String, String) {
    let s = k.index(stride);
    let os = k.mul(o, &s);
    let dc = k.index(dilation);
    let kd = k.mul(kx, &dc);
    let sum = k.add(&os, &kd);
    let pc = k.index(pad);
    let ge = k.cmpi("uge", &sum, &pc);
    let pos = k.val(&format!("arith.subi {sum}, {pc} : index"));
    let lim = k.index(limit);
    let lt = k.cmpi("ult", &pos, &lim);
    let ok = k.and(&ge, &lt);
    let safe = k.val(&format!("arith.select {ok}, {pos}, %c0 : index"));
    (ok, safe)
}

/// The window position `o = (pos + pad - kx * dilation) / stride` whose tap
/// `kx` reads input coordinate `pos`, and whether there is one (the
/// division exact, `o` in `[0, limit)`): (exists, `o` or 0 when not).
pub(crate) fn window_source(
    k: &mut Kernel,
    pos: &str,
    kx: &str,
    stride: usize,
    dilation: usize,
    pad: usize,
    limit: usize,
) -> (String, String) {
    let pc = k.index(pad);
    let hp = k.add(pos, &pc);
    let dc = k.index(dilation);
    let ad = k.mul(kx, &dc);
    let ge = k.cmpi("uge", &hp, &ad);
    let num = k.val(&format!("arith.subi {hp}, {ad} : index"));
    let s = k.index(stride);
    let q = k.val(&format!("arith.divui {num}, {s} : index"));
    let r = k.val(&format!("arith.remui {num}, {s} : index"));
    let exact = k.cmpi("eq", &r, "%c0");
    let l = k.index(limit);
    let lt = k.cmpi("ult", &q, &l);
    let ok = k.and(&ge, &exact);
    let ok = k.and(&ok, &lt);
    let safe = k.val(&format!("arith.select {ok}, {q}, %c0 : index"));
    (ok, safe)
}

/// The image dimensions (channel, height, width) of a layout attribute.
pub(crate) fn image_dims(op: MlirOperation) -> (usize, usize, usize) {
    if int_attr(op, "layout").unwrap_or(0) == 1 { (3, 1, 2) } else { (1, 2, 3) }
}

pub(crate) fn pair(op: MlirOperation, key: &str, default: usize) -> [usize; 2] {
    let v = i64_array(op, key).unwrap_or_default();
    [v.first().copied().unwrap_or(default as i64) as usize, v.get(1).copied().unwrap_or(default as i64) as usize]
}

/// The most taps a depthwise kernel writes out
/// (`Generator::depthwise_on_rows`); a larger window keeps the element form.
const MAX_ROW_TAPS: usize = 81;

impl Generator {
    /// Direct convolution and its two gradients, one output element per
    /// work item.
    pub(crate) fn conv(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], which: &str) -> Kernels {
        let depthwise = match which {
            "weight" => self.depthwise_weight_rows(op, specs),
            _ => self.depthwise_rows(op, specs, which == "forward"),
        };
        if let Some(kernels) = depthwise {
            return kernels;
        }
        let (cd, hd, wd) = image_dims(op);
        let (stride, pad, dil) = (pair(op, "stride", 1), pair(op, "padding", 0), pair(op, "dilation", 1));
        let groups = int_attr(op, "groups").unwrap_or(1) as usize;
        // x: input image, w: weight [O, C/g, KH, KW], y: output image
        let (x, w, y) = match which {
            "forward" => (0, 1, specs.len() - 1),
            "input" => (2, 1, 0),
            _ => (1, 2, 0),
        };
        let (xs, ws, ys, t) = (&specs[x].0, &specs[w].0, &specs[y].0, compute(specs[0].1));
        let (xstr, wstr, ystr) = (row_major_strides(xs), row_major_strides(ws), row_major_strides(ys));
        let (cg, og) = (ws[1], ws[0] / groups);
        let (kh, kw) = (ws[2], ws[3]);
        let (tx, tw, ty) = (flat_type(xs, specs[x].1), flat_type(ws, specs[w].1), flat_type(ys, specs[y].1));
        let mut k = Kernel::new();
        let e = k.open("%begin", "%end");
        let image_at = |k: &mut Kernel, strides: &[usize], n: &str, c: &str, h: &str, wv: &str| -> String {
            let mut coords = vec![String::new(); 4];
            coords[0] = n.into();
            coords[cd] = c.into();
            coords[hd] = h.into();
            coords[wd] = wv.into();
            k.ravel(&coords, strides)
        };
        let limits = [xs[hd], xs[wd]];
        let tap = |k: &mut Kernel, o: &str, kx: &str, axis: usize| {
            window_tap(k, o, kx, stride[axis], dil[axis], pad[axis], limits[axis])
        };
        let (cost, work) = match which {
            "forward" => {
                let c = k.unravel(&e, ys);
                let (n, o, oh, ow) = (&c[0], &c[cd], &c[hd], &c[wd]);
                let ogc = k.index(og);
                let g = k.val(&format!("arith.divui {o}, {ogc} : index"));
                let cgc = k.index(cg);
                let cbase = k.mul(&g, &cgc);
                let (khc, kwc) = (k.index(kh), k.index(kw));
                let s0 = k.masked_sum3([&cgc, &khc, &kwc], t, |k, [ci, a, b]| {
                    let (okh, h) = tap(k, oh, &a, 0);
                    let (okw, wv) = tap(k, ow, &b, 1);
                    let ok = k.and(&okh, &okw);
                    let chan = k.add(&cbase, &ci);
                    let xi = image_at(k, &xstr, n, &chan, &h, &wv);
                    let xv = k.load(&format!("%b{x}"), &xi, &tx);
                    let wi = k.ravel(&[o.clone(), ci, a, b], &wstr);
                    let wvv = k.load(&format!("%b{w}"), &wi, &tw);
                    (ok, xv, wvv)
                });
                let mut v = s0;
                if specs.len() == 4 {
                    let bv = k.load("%b2", o, &flat_type(&specs[2].0, specs[2].1));
                    v = k.fop("addf", &v, &bv, t);
                }
                k.store(&v, &format!("%b{y}"), &e, &ty);
                (cg * kh * kw * 4, numel(ys))
            }
            "input" => {
                // dx[n, c, h, w] = sum over o in c's group, taps with
                // h = oh s - p + a d: dy[n, o, oh, ow] w[o, c % cg, a, b]
                let c = k.unravel(&e, xs);
                let (n, ch, h, wv) = (&c[0], &c[cd], &c[hd], &c[wd]);
                let cgc = k.index(cg);
                let g = k.val(&format!("arith.divui {ch}, {cgc} : index"));
                let cl = k.val(&format!("arith.remui {ch}, {cgc} : index"));
                let ogc = k.index(og);
                let obase = k.mul(&g, &ogc);
                let (khc, kwc) = (k.index(kh), k.index(kw));
                let axis_ok = |k: &mut Kernel, pos: &str, kx: &str, axis: usize, lim: usize| {
                    window_source(k, pos, kx, stride[axis], dil[axis], pad[axis], lim)
                };
                let s0 = k.masked_sum3([&ogc, &khc, &kwc], t, |k, [oi, a, b]| {
                    let (okh, oh) = axis_ok(k, h, &a, 0, ys[hd]);
                    let (okw, ow) = axis_ok(k, wv, &b, 1, ys[wd]);
                    let ok = k.and(&okh, &okw);
                    let o = k.add(&obase, &oi);
                    let yi = image_at(k, &ystr, n, &o, &oh, &ow);
                    let gv = k.load(&format!("%b{y}"), &yi, &ty);
                    let wi = k.ravel(&[o, cl.clone(), a, b], &wstr);
                    let wvv = k.load(&format!("%b{w}"), &wi, &tw);
                    (ok, gv, wvv)
                });
                k.store(&s0, &format!("%b{x}"), &e, &tx);
                (og * kh * kw * 12, numel(xs))
            }
            _ => {
                // dw[o, c, a, b] = sum over n, oh, ow: dy[n, o, oh, ow] x[n, g cg + c, h, w]
                let c = k.unravel(&e, ws);
                let (o, ci, a, b) = (&c[0], &c[1], &c[2], &c[3]);
                let ogc = k.index(og);
                let g = k.val(&format!("arith.divui {o}, {ogc} : index"));
                let chan = k.mad(&g, cg, ci);
                let (nc, ohc, owc) = (k.index(ys[0]), k.index(ys[hd]), k.index(ys[wd]));
                let s0 = k.masked_sum3([&nc, &ohc, &owc], t, |k, [n, oh, ow]| {
                    let (okh, h) = tap(k, &oh, a, 0);
                    let (okw, wv) = tap(k, &ow, b, 1);
                    let ok = k.and(&okh, &okw);
                    let xi = image_at(k, &xstr, &n, &chan, &h, &wv);
                    let xv = k.load(&format!("%b{x}"), &xi, &tx);
                    let yi = image_at(k, &ystr, &n, o, &oh, &ow);
                    let gv = k.load(&format!("%b{y}"), &yi, &ty);
                    (ok, xv, gv)
                });
                k.store(&s0, "%b2", &e, &tw);
                (ys[0] * ys[hd] * ys[wd] * 4, numel(ws))
            }
        };
        k.close();
        self.one(k, specs, work, cost)
    }

    /// A depthwise convolution (NCHW, a channel per group, one output
    /// channel each, f32) or its input gradient, one image row a
    /// work item, where the target asks ([`TargetInfo::conv_rows`]); `None`
    /// for every other convolution.
    ///
    /// The forward sums, into output row `(n, c, oh)`, tap `(a, b)`'s
    /// weight times the input row `oh s - p + a d`'s elements `ow s - p + b
    /// d` over the outputs `ow` whose tap lies inside it (a range known
    /// when the kernel is written), then adds the bias. The input gradient
    /// adds, into `dx` row `(n, c, h)`, each tap's weight times the `dy`
    /// row it reaches there (`h = oh s - p + a d`) at the columns
    /// `ow s - p + b d`. Each sum takes its taps in the element form's order. The
    /// inner loops run over a row: LLVM vectorises them, where the element
    /// form (an item per output element, a bounds check per tap) ran
    /// scalar. EfficientNet-B0's depthwise convolutions and their input
    /// gradients took 5.9 ms of its 33 ms step.
    fn depthwise_rows(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], forward: bool) -> Option<Kernels> {
        let groups = int_attr(op, "groups").unwrap_or(1) as usize;
        // Forward: x, w, (b,) y; input gradient: dy, w, dx.
        let (x, w, y) = if forward { (0, 1, specs.len() - 1) } else { (2, 1, 0) };
        let (xs, ws, ys) = (&specs[x].0, &specs[w].0, &specs[y].0);
        let t = specs[0].1;
        if !self.depthwise_on_rows(op, specs, [x, w, y]) {
            return None;
        }
        let (stride, pad, dil) = (pair(op, "stride", 1), pair(op, "padding", 0), pair(op, "dilation", 1));
        let (kh, kw) = (ws[2], ws[3]);
        let (h, wdt, oh, ow) = (xs[2], xs[3], ys[2], ys[3]);
        let (tx, tw, ty) = (flat_type(xs, t), flat_type(ws, t), flat_type(ys, t));
        // The rows a work item writes: output rows (forward) or dx rows.
        let (rows_per_plane, row_len) = if forward { (oh, ow) } else { (h, wdt) };
        let out = if forward { y } else { x };
        let tout = if forward { &ty } else { &tx };
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let r = k.open("%begin", "%end");
        let rp = k.index(rows_per_plane);
        let plane = k.val(&format!("arith.divui {r}, {rp} : index"));
        let row = k.val(&format!("arith.remui {r}, {rp} : index"));
        let cc = k.index(groups);
        let c = k.val(&format!("arith.remui {plane}, {cc} : index"));
        let len = k.index(row_len);
        let out_row = k.mul(&r, &len);
        let (x_plane, y_plane) = (k.mad(&plane, h * wdt, "%c0"), k.mad(&plane, oh * ow, "%c0"));
        let w_base = k.mad(&c, kh * kw, "%c0");
        let j = k.open("%c0", &len);
        let at = k.add(&out_row, &j);
        k.store(&zero, &format!("%b{out}"), &at, tout);
        k.close();
        for a in 0..kh {
            // Forward: input row ih = oh s - p + a d, if inside; input
            // gradient: output row oh = (h + p - a d) / s, if whole and
            // inside.
            let (inside, other_row) = if forward {
                let top = k.mad(&row, stride[0], "%c0");
                let ad = k.index(a * dil[0]);
                let top = k.add(&top, &ad);
                let pc = k.index(pad[0]);
                let ge = k.cmpi("uge", &top, &pc);
                let ih = k.val(&format!("arith.subi {top}, {pc} : index"));
                let lim = k.index(h);
                let lt = k.cmpi("ult", &ih, &lim);
                let ih = k.val(&format!("arith.select {ge}, {ih}, %c0 : index"));
                (k.and(&ge, &lt), ih)
            } else {
                let a_c = k.index(a);
                window_source(&mut k, &row, &a_c, stride[0], dil[0], pad[0], oh)
            };
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            // The row read: input row (forward) or dy row.
            let read_row = if forward { k.mad(&other_row, wdt, &x_plane) } else { k.mad(&other_row, ow, &y_plane) };
            for b in 0..kw {
                // Outputs ow whose tap b lies in the input row: ow s + b d
                // - p in [0, W).
                let (bd, s1, p1) = (b * dil[1], stride[1], pad[1]);
                let lo = if bd >= p1 { 0 } else { (p1 - bd).div_ceil(s1) };
                let hi = if wdt + p1 > bd { ((wdt - 1 + p1 - bd) / s1 + 1).min(ow) } else { 0 };
                if lo >= hi {
                    continue;
                }
                let tap = k.index(a * kw + b);
                let wi = k.add(&w_base, &tap);
                let wv = k.load(&format!("%b{w}"), &wi, &tw);
                let (loc, hic) = (k.index(lo), k.index(hi));
                let o = k.open(&loc, &hic);
                // The strided side's element ow s + b d - p, and the
                // contiguous side's ow.
                let bdc = k.index(bd);
                let strided = k.mad(&o, s1, &bdc);
                let pc = k.index(p1);
                let strided = k.val(&format!("arith.subi {strided}, {pc} : index"));
                let (from, to) = if forward {
                    (k.add(&read_row, &strided), k.add(&out_row, &o))
                } else {
                    (k.add(&read_row, &o), k.add(&out_row, &strided))
                };
                let (tread, sread) = if forward { (&tx, x) } else { (&ty, y) };
                let v = k.load(&format!("%b{sread}"), &from, tread);
                let old = k.load(&format!("%b{out}"), &to, tout);
                let p = k.fop("mulf", &v, &wv, t);
                let sum = k.fop("addf", &old, &p, t);
                k.store(&sum, &format!("%b{out}"), &to, tout);
                k.close();
            }
            k.depth -= 1;
            k.line("}");
        }
        if forward && specs.len() == 4 {
            let bias = k.load("%b2", &c, &flat_type(&specs[2].0, t));
            let j = k.open("%c0", &len);
            let at = k.add(&out_row, &j);
            let v = k.load(&format!("%b{out}"), &at, tout);
            let v = k.fop("addf", &v, &bias, t);
            k.store(&v, &format!("%b{out}"), &at, tout);
            k.close();
        }
        k.close();
        let ins: Vec<usize> = (0..specs.len()).filter(|&i| i != out).collect();
        let noalias = self.apart(&ins, &[out], &[None]);
        self.finish_noalias(k, specs, noalias);
        let rows = numel(if forward { ys } else { xs }) / row_len.max(1);
        let cost = row_len * (2 + kh * kw * 4);
        Some(vec![(self.last(), rows.max(1) as u64, cost.max(1) as u64, (0..specs.len()).collect(), vec![])])
    }

    /// Whether a convolution (operands `[x, w, y]` at those positions of
    /// `specs`) is depthwise and the target takes it a row at a time
    /// ([`TargetInfo::conv_rows`]): NCHW, a channel per group and one
    /// output channel each, every buffer f32 (a 16-bit row would round
    /// each tap's partial sum; f64 keeps the element form, untested here).
    fn depthwise_on_rows(&self, op: MlirOperation, specs: &[(Vec<usize>, DType)], [x, w, y]: [usize; 3]) -> bool {
        let groups = int_attr(op, "groups").unwrap_or(1) as usize;
        let (xs, ws, ys) = (&specs[x].0, &specs[w].0, &specs[y].0);
        let t = specs[0].1;
        self.target.conv_rows()
            && image_dims(op) == (1, 2, 3)
            && t == DType::F32
            && specs.iter().all(|s| s.1 == t)
            && xs.len() == 4
            && ws.len() == 4
            && ys.len() == 4
            && ws[1] == 1
            // The taps are written out: up to 9 x 9 (ConvNeXt's 7 x 7).
            && ws[2] * ws[3] <= MAX_ROW_TAPS
            && ws[0] == groups
            && xs[1] == groups
            && ys[1] == groups
            && xs[0] == ys[0]
    }

    /// A depthwise convolution's weight gradient (see
    /// [`Self::depthwise_on_rows`]), one channel a work item: for each
    /// tap `(a, b)` (written out: its output rows and columns whose tap
    /// lies inside the image are known then), the sum over the images,
    /// those rows and columns of `dy` times the input it read, the
    /// innermost loop along a row (vectorised, the sum reassociated as
    /// `ll.reduce`'s). The element form checked each tap's bounds per
    /// element: 1.6 of EfficientNet-B0's 26 ms a step.
    fn depthwise_weight_rows(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Option<Kernels> {
        // dy, x, dw.
        if !self.depthwise_on_rows(op, specs, [1, 2, 0]) {
            return None;
        }
        let (ys, xs, ws) = (&specs[0].0, &specs[1].0, &specs[2].0);
        let t = specs[0].1;
        let f = t.mlir();
        let (stride, pad, dil) = (pair(op, "stride", 1), pair(op, "padding", 0), pair(op, "dilation", 1));
        let (n_img, ch, h, wdt, oh, ow, kh, kw) = (xs[0], xs[1], xs[2], xs[3], ys[2], ys[3], ws[2], ws[3]);
        let (ty, tx, tw) = (flat_type(ys, t), flat_type(xs, t), flat_type(ws, t));
        // Outputs o along an axis whose tap `tap` reads inside [0, limit):
        // o s + tap d - p in [0, limit), o < outputs.
        let range = |tap: usize, s: usize, d: usize, p: usize, limit: usize, outputs: usize| {
            let td = tap * d;
            let lo = if td >= p { 0 } else { (p - td).div_ceil(s) };
            let hi = if limit + p > td { ((limit - 1 + p - td) / s + 1).min(outputs) } else { 0 };
            (lo, hi)
        };
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let c = k.open("%begin", "%end");
        for a in 0..kh {
            let (oh_lo, oh_hi) = range(a, stride[0], dil[0], pad[0], h, oh);
            for b in 0..kw {
                let (ow_lo, ow_hi) = range(b, stride[1], dil[1], pad[1], wdt, ow);
                let tap = k.index(a * kw + b);
                let wi = k.mad(&c, kh * kw, &tap);
                if oh_lo >= oh_hi || ow_lo >= ow_hi {
                    k.store(&zero, "%b2", &wi, &tw);
                    continue;
                }
                let nc = k.index(n_img);
                let (n, acc_n, res_n) = k.open_reduce("%c0", &nc, &zero, f);
                // Plane (n, c) of dy and of x.
                let plane = k.mad(&n, ch, &c);
                let y_plane = k.mad(&plane, oh * ow, "%c0");
                let x_plane = k.mad(&plane, h * wdt, "%c0");
                let (lo, hi) = (k.index(oh_lo), k.index(oh_hi));
                let (r, acc_r, res_r) = k.open_reduce(&lo, &hi, &acc_n, f);
                let y_row = k.mad(&r, ow, &y_plane);
                // Input row r s + a d - p (non-negative for r >= oh_lo).
                let top = k.mad(&r, stride[0] * wdt, &x_plane);
                let shift = (a * dil[0]) as isize - pad[0] as isize;
                let x_row = if shift >= 0 {
                    let sc = k.index(shift as usize * wdt);
                    k.add(&top, &sc)
                } else {
                    let sc = k.index((-shift) as usize * wdt);
                    k.val(&format!("arith.subi {top}, {sc} : index"))
                };
                let (lo, hi) = (k.index(ow_lo), k.index(ow_hi));
                let (col, acc, res_c) = k.open_reduce(&lo, &hi, &acc_r, f);
                let yi = k.add(&y_row, &col);
                let xc = k.mad(&col, stride[1], &x_row);
                let bd = k.index(b * dil[1]);
                let xc = k.add(&xc, &bd);
                let pc = k.index(pad[1]);
                let xi = k.val(&format!("arith.subi {xc}, {pc} : index"));
                let gv = k.load("%b0", &yi, &ty);
                let xv = k.load("%b1", &xi, &tx);
                let p = k.fop("mulf", &gv, &xv, t);
                let next = k.val(&format!("arith.addf {acc}, {p} fastmath<fast> : {f}"));
                k.close_with(&next, f);
                k.close_with(&res_c, f);
                k.close_with(&res_r, f);
                k.store(&res_n, "%b2", &wi, &tw);
            }
        }
        k.close();
        let noalias = self.apart(&[0, 1], &[2], &[None]);
        self.finish_noalias(k, specs, noalias);
        let cost = (kh * kw * n_img * oh * ow * 3).max(1);
        Some(vec![(self.last(), ch.max(1) as u64, cost as u64, (0..specs.len()).collect(), vec![])])
    }

    /// `ll.im2col` (`col2im` false: specs image, windows) or `ll.col2im`
    /// (true: specs windows, image). im2col takes one window row `(n, oh,
    /// ow)` a work item and writes its `C x KH x KW` elements in order (0
    /// where a tap lies in the padding); col2im one image element, summing
    /// the at most `KH x KW` window entries that read it.
    pub(crate) fn windows(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], col2im: bool) -> Kernels {
        if has(op, "columns") {
            return self.window_columns(op, specs, col2im);
        }
        let wk = WindowKernel::new(op, specs, col2im);
        let WindowKernel { stride, pad, dil, xs, cs, storage, ref tx, ref tc, dims: (cd, hd, wd), .. } = wk;
        let (oh_n, ow_n, channels, kh, kw) = (cs[1], cs[2], cs[3], cs[4], cs[5]);
        let row = channels * kh * kw;
        let mut k = Kernel::new();
        let image_at = |k: &mut Kernel, n: &str, ch: &str, h: &str, w: &str| wk.image_at(k, n, ch, h, w);
        let (work, cost) = if !col2im {
            let zero = k.float(0.0, storage);
            let e = k.open("%begin", "%end");
            let at = k.unravel(&e, &[xs[0], oh_n, ow_n]);
            let (n, oh, ow) = (&at[0], &at[1], &at[2]);
            let rc = k.index(row);
            let base = k.mul(&e, &rc);
            let (cc, khc, kwc) = (k.index(channels), k.index(kh), k.index(kw));
            let ch = k.open("%c0", &cc);
            let a = k.open("%c0", &khc);
            let (okh, h) = window_tap(&mut k, oh, &a, stride[0], dil[0], pad[0], xs[hd]);
            let b = k.open("%c0", &kwc);
            let (okw, w) = window_tap(&mut k, ow, &b, stride[1], dil[1], pad[1], xs[wd]);
            let ok = k.and(&okh, &okw);
            let xi = image_at(&mut k, n, &ch, &h, &w);
            let v = k.load_raw("%b0", &xi, &tx);
            let v = k.val(&format!("arith.select {ok}, {v}, {zero} : {}", storage.mlir()));
            let tap = k.mad(&ch, kh, &a);
            let tap = k.mad(&tap, kw, &b);
            let ci = k.add(&base, &tap);
            k.store_raw(&v, "%b1", &ci, &tc);
            k.close();
            k.close();
            k.close();
            k.close();
            (xs[0] * oh_n * ow_n, row * 6)
        } else {
            let t = compute(storage);
            let f = t.mlir();
            let zero = k.float(0.0, t);
            let e = k.open("%begin", "%end");
            let at = k.unravel(&e, xs);
            let (n, ch, h, w) = (&at[0], &at[cd], &at[hd], &at[wd]);
            let (khc, kwc) = (k.index(kh), k.index(kw));
            let (a, acc0, s0) = k.open_reduce("%c0", &khc, &zero, f);
            let (okh, oh) = window_source(&mut k, h, &a, stride[0], dil[0], pad[0], oh_n);
            let (b, acc1, s1) = k.open_reduce("%c0", &kwc, &acc0, f);
            let (okw, ow) = window_source(&mut k, w, &b, stride[1], dil[1], pad[1], ow_n);
            let ok = k.and(&okh, &okw);
            let r = k.mad(n, oh_n, &oh);
            let r = k.mad(&r, ow_n, &ow);
            let tap = k.mad(ch, kh, &a);
            let tap = k.mad(&tap, kw, &b);
            let ci = k.mad(&r, row, &tap);
            let v = k.load("%b0", &ci, &tc);
            let v = k.val(&format!("arith.select {ok}, {v}, {zero} : {f}"));
            let next = k.val(&format!("arith.addf {acc1}, {v} fastmath<fast> : {f}"));
            k.close_with(&next, f);
            k.close_with(&s1, f);
            k.store(&s0, "%b1", &e, &tx);
            k.close();
            (numel(xs), kh * kw * 12)
        };
        self.one(k, specs, work, cost)
    }

    /// `ll.im2col` / `ll.col2im` in the columns form, windows `[C, KH, KW,
    /// N, OH, OW]`. im2col writes one plane of `OH x OW` a work item `(c,
    /// a, b, n)`, a row at a time: zeros where the tap lies in the padding,
    /// between them a run of the image's row `h = oh s - p + a d` (at
    /// stride 1 in NCHW a contiguous copy, which the host compiler
    /// vectorises). col2im sums one image row `(n, c, h)` a work item in a
    /// scratch row of the compute type: each tap `(a, b)` whose window row
    /// reads `h` adds its run of `OW` at its offset (contiguous at stride
    /// 1), then the row is stored.
    fn window_columns(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], col2im: bool) -> Kernels {
        let wk = WindowKernel::new(op, specs, col2im);
        let WindowKernel { stride, pad, dil, xs, cs, storage, ref tx, ref tc, dims: (_, hd, wd), .. } = wk;
        let (channels, kh, kw, n_img, oh_n, ow_n) = (cs[0], cs[1], cs[2], cs[3], cs[4], cs[5]);
        let (h_n, w_n) = (xs[hd], xs[wd]);
        // The image's step along its width, and per output column.
        let (w_step, run_step) = (wk.xstr[wd], wk.xstr[wd] * stride[1]);
        let mut k = Kernel::new();
        let image_at = |k: &mut Kernel, n: &str, ch: &str, h: &str, w: &str| wk.image_at(k, n, ch, h, w);
        // The output columns `lo..hi` whose tap `b` lies in the image, and
        // the image column of `lo`: `ow s - p + b d` in `0..W`.
        let run = |k: &mut Kernel, b: &str| -> (String, String, String) {
            let dc = k.index(dil[1]);
            let bd = k.mul(b, &dc);
            let (pc, limit, up, sc, owc) =
                (k.index(pad[1]), k.index(w_n + pad[1]), k.index(stride[1] - 1), k.index(stride[1]), k.index(ow_n));
            let need = k.val(&format!("arith.subi {pc}, {bd} : index"));
            let need = k.val(&format!("arith.maxsi {need}, %c0 : index"));
            let need = k.add(&need, &up);
            let lo = k.val(&format!("arith.divui {need}, {sc} : index"));
            let room = k.val(&format!("arith.subi {limit}, {bd} : index"));
            let room = k.val(&format!("arith.maxsi {room}, %c0 : index"));
            let room = k.add(&room, &up);
            let hi = k.val(&format!("arith.divui {room}, {sc} : index"));
            let hi = k.val(&format!("arith.minui {hi}, {owc} : index"));
            let lo = k.val(&format!("arith.minui {lo}, {hi} : index"));
            let first = k.mad(&lo, stride[1], &bd);
            let first = k.val(&format!("arith.subi {first}, {pc} : index"));
            (lo, hi, first)
        };
        let (khc, kwc, owc) = (k.index(kh), k.index(kw), k.index(ow_n));
        let (work, cost) = if !col2im {
            // A work item is a plane `(c, a, b, n)` of `OH x OW`: its tap's
            // run along the width is found once, then each row's.
            let zero = k.float(0.0, storage);
            let ohc = k.index(oh_n);
            let e = k.open("%begin", "%end");
            let at = k.unravel(&e, &[channels, kh, kw, n_img]);
            let (ch, a, b, n) = (&at[0], &at[1], &at[2], &at[3]);
            let (lo_w, hi_w, first) = run(&mut k, b);
            let plane = k.mul(&e, &ohc);
            let oh = k.open("%c0", &ohc);
            let (okh, h) = window_tap(&mut k, &oh, a, stride[0], dil[0], pad[0], h_n);
            // A row of taps in the padding is all zeros.
            let lo = k.val(&format!("arith.select {okh}, {lo_w}, {owc} : index"));
            let hi = k.val(&format!("arith.select {okh}, {hi_w}, {owc} : index"));
            let r = k.add(&plane, &oh);
            let row = k.mul(&r, &owc);
            let i = k.open("%c0", &lo);
            let ci = k.add(&row, &i);
            k.store_raw(&zero, "%b1", &ci, &tc);
            k.close();
            let start = image_at(&mut k, n, ch, &h, &first);
            let out = k.add(&row, &lo);
            let len = k.val(&format!("arith.subi {hi}, {lo} : index"));
            let j = k.open("%c0", &len);
            let xi = k.mad(&j, run_step, &start);
            let ci = k.add(&out, &j);
            let v = k.load_raw("%b0", &xi, &tx);
            k.store_raw(&v, "%b1", &ci, &tc);
            k.close();
            let i = k.open(&hi, &owc);
            let ci = k.add(&row, &i);
            k.store_raw(&zero, "%b1", &ci, &tc);
            k.close();
            k.close();
            k.close();
            (channels * kh * kw * n_img, oh_n * (ow_n * 3 + 16) + 24)
        } else {
            let t = compute(storage);
            let zero = k.float(0.0, t);
            let acc = k.scratch(w_n, t, self.target.heap_scratch());
            let acc_ty = format!("memref<{}x{}>", w_n.max(1), t.mlir());
            let wc = k.index(w_n);
            let e = k.open("%begin", "%end");
            let at = k.unravel(&e, &[n_img, channels, h_n]);
            let (n, ch, h) = (&at[0], &at[1], &at[2]);
            let i = k.open("%c0", &wc);
            k.store(&zero, &acc, &i, &acc_ty);
            k.close();
            let a = k.open("%c0", &khc);
            let (okh, oh) = window_source(&mut k, h, &a, stride[0], dil[0], pad[0], oh_n);
            // No window row reads `h` through tap `a`: no taps `b`.
            let taps = k.val(&format!("arith.select {okh}, {kwc}, %c0 : index"));
            let b = k.open("%c0", &taps);
            let (lo, hi, first) = run(&mut k, &b);
            let r = k.mad(ch, kh, &a);
            let r = k.mad(&r, kw, &b);
            let r = k.mad(&r, n_img, n);
            let r = k.mad(&r, oh_n, &oh);
            let r = k.mad(&r, ow_n, &lo);
            let len = k.val(&format!("arith.subi {hi}, {lo} : index"));
            let j = k.open("%c0", &len);
            let ci = k.add(&r, &j);
            let wi = k.mad(&j, stride[1], &first);
            let v = k.load("%b0", &ci, &tc);
            let cur = k.load(&acc, &wi, &acc_ty);
            let sum = k.fop("addf", &cur, &v, t);
            k.store(&sum, &acc, &wi, &acc_ty);
            k.close();
            k.close();
            k.close();
            let start = image_at(&mut k, n, ch, h, "%c0");
            let i = k.open("%c0", &wc);
            let v = k.load(&acc, &i, &acc_ty);
            let xi = k.mad(&i, w_step, &start);
            k.store(&v, "%b1", &xi, &tx);
            k.close();
            k.close();
            (n_img * channels * h_n, w_n * 2 + kh * (kw * ow_n * 3 + 12))
        };
        self.one(k, specs, work, cost)
    }

    /// Max pooling's gradient an image plane `(n, c)` a work item
    /// ([`TargetInfo::pool_planes`]): the plane of `dx` zeroed, then for
    /// each window in row-major order its first maximum found (as the
    /// forward's and the element form's) and the window's `dy` added there.
    /// The windows' contributions to an element arrive in the element
    /// form's order, so the sums are the same.
    fn max_pool_backward_planes(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (cd, hd, wd) = image_dims(op);
        let (kern, stride, pad) = (pair(op, "kernel", 1), pair(op, "stride", 1), pair(op, "padding", 0));
        let (ys, xs) = (&specs[0].0, &specs[1].0);
        let t = compute(specs[2].1);
        let f = t.mlir();
        let (ty, tx, tdx) = (flat_type(ys, specs[0].1), flat_type(xs, specs[1].1), flat_type(xs, specs[2].1));
        let (xstr, ystr) = (row_major_strides(xs), row_major_strides(ys));
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let big = k.index(usize::MAX >> 1);
        let (k0, k1) = (k.index(kern[0]), k.index(kern[1]));
        let e = k.open("%begin", "%end");
        let plane = k.unravel(&e, &[xs[0], xs[cd]]);
        let at = |k: &mut Kernel, strides: &[usize], h: &str, w: &str| -> String {
            let mut coords = vec![String::new(); 4];
            coords[0] = plane[0].clone();
            coords[cd] = plane[1].clone();
            coords[hd] = h.into();
            coords[wd] = w.into();
            k.ravel(&coords, strides)
        };
        let (hc, wc) = (k.index(xs[hd]), k.index(xs[wd]));
        let h = k.open("%c0", &hc);
        let w = k.open("%c0", &wc);
        let xi = at(&mut k, &xstr, &h, &w);
        k.store(&zero, "%b2", &xi, &tdx);
        k.close();
        k.close();
        let (ohc, owc) = (k.index(ys[hd]), k.index(ys[wd]));
        let oh = k.open("%c0", &ohc);
        let ow = k.open("%c0", &owc);
        let (a, carried, found) =
            k.open_carry("%c0", &k0, "%c1", &[(ninf.clone(), f.into()), (big.clone(), "index".into())]);
        let (b, inner, best) =
            k.open_carry("%c0", &k1, "%c1", &[(carried[0].clone(), f.into()), (carried[1].clone(), "index".into())]);
        let (okh, hh) = window_tap(&mut k, &oh, &a, stride[0], 1, pad[0], xs[hd]);
        let (okw, ww) = window_tap(&mut k, &ow, &b, stride[1], 1, pad[1], xs[wd]);
        let ok = k.and(&okh, &okw);
        let xi = at(&mut k, &xstr, &hh, &ww);
        let xv = k.load("%b1", &xi, &tx);
        let gt = k.above_nan_first(&xv, &inner[0], f);
        let first = k.cmpi("eq", &inner[1], &big);
        let gt = k.val(&format!("arith.ori {gt}, {first} : i1"));
        let better = k.and(&ok, &gt);
        let nb = k.val(&format!("arith.select {better}, {xv}, {} : {f}", inner[0]));
        let np = k.val(&format!("arith.select {better}, {xi}, {} : index", inner[1]));
        k.close_carry(&[nb, np], &[f.into(), "index".into()]);
        k.close_carry(&best, &[f.into(), "index".into()]);
        let arg = found[1].clone();
        let has = k.cmpi("ne", &arg, &big);
        // A window without a tap adds 0 to its own plane's first element
        // (never another plane's, which another work item owns).
        let own = at(&mut k, &xstr, "%c0", "%c0");
        let target = k.val(&format!("arith.select {has}, {arg}, {own} : index"));
        let yi = at(&mut k, &ystr, &oh, &ow);
        let gv = k.load("%b0", &yi, &ty);
        let g = k.val(&format!("arith.select {has}, {gv}, {zero} : {f}"));
        let old = k.load("%b2", &target, &tdx);
        let sum = k.fop("addf", &old, &g, t);
        k.store(&sum, "%b2", &target, &tdx);
        k.close();
        k.close();
        k.close();
        let cost = xs[hd] * xs[wd] + ys[hd] * ys[wd] * (8 + kern[0] * kern[1] * 6);
        self.one(k, specs, xs[0] * xs[cd], cost)
    }

    /// Max or average pooling and its gradient, one element per work item.
    pub(crate) fn pool(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)], backward: bool) -> Kernels {
        let max = int_attr(op, "kind").unwrap_or(0) == 0;
        if backward && max && self.target.pool_planes() && matches!(specs[2].1, DType::F32 | DType::F64) {
            return self.max_pool_backward_planes(op, specs);
        }
        let (cd, hd, wd) = image_dims(op);
        let _ = cd;
        let (kern, stride, pad) = (pair(op, "kernel", 1), pair(op, "stride", 1), pair(op, "padding", 0));
        let (x, y) = if backward { (1, 0) } else { (0, 1) };
        let (xs, ys, t) = (&specs[x].0, &specs[y].0, compute(specs[0].1));
        let f = t.mlir();
        let (tx, ty) = (flat_type(xs, specs[x].1), flat_type(ys, specs[y].1));
        let (xstr, ystr) = (row_major_strides(xs), row_major_strides(ys));
        let area = (kern[0] * kern[1]) as f64;
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let (k0, k1) = (k.index(kern[0]), k.index(kern[1]));
        let limits = [xs[hd], xs[wd]];
        let tap = |k: &mut Kernel, o: &str, a: &str, axis: usize| {
            window_tap(k, o, a, stride[axis], 1, pad[axis], limits[axis])
        };
        let with = |c: &[String], h: &str, w: &str| -> Vec<String> {
            let mut v = c.to_vec();
            v[hd] = h.into();
            v[wd] = w.into();
            v
        };
        let e = k.open("%begin", "%end");
        if !backward {
            let c = k.unravel(&e, ys);
            let init = if max { &ninf } else { &zero };
            let (a, acc0, s0) = k.open_reduce("%c0", &k0, init, f);
            let (b, acc1, s1) = k.open_reduce("%c0", &k1, &acc0, f);
            let (okh, h) = tap(&mut k, &c[hd], &a, 0);
            let (okw, w) = tap(&mut k, &c[wd], &b, 1);
            let ok = k.and(&okh, &okw);
            let xi = k.ravel(&with(&c, &h, &w), &xstr);
            let xv = k.load(&format!("%b{x}"), &xi, &tx);
            let next = if max {
                let m = k.val(&format!("arith.maximumf {acc1}, {xv} : {f}"));
                k.val(&format!("arith.select {ok}, {m}, {acc1} : {f}"))
            } else {
                let s = k.fop("addf", &acc1, &xv, t);
                k.val(&format!("arith.select {ok}, {s}, {acc1} : {f}"))
            };
            k.close_with(&next, f);
            k.close_with(&s1, f);
            let v = if max {
                s0
            } else {
                let ar = k.float(area, t);
                k.fop("divf", &s0, &ar, t)
            };
            k.store(&v, &format!("%b{y}"), &e, &ty);
        } else {
            // dx at (h, w): sum over windows (oh, ow) containing it of dy,
            // for max only where (h, w) is the window's first maximum.
            let c = k.unravel(&e, xs);
            // Only the windows that can hold (h, w): o in [lo, hi] with
            // lo = ceil((h + p - k + 1) / s) (0 below), hi = min((h + p) / s,
            // O - 1), at most ceil(k / s) of them (every output position was
            // visited: O^2 windows per element, 100x the forward's time).
            let window_range = |k: &mut Kernel, pos: &str, axis: usize, outputs: usize| -> (String, String) {
                let pc = k.index(pad[axis]);
                let num = k.add(pos, &pc);
                let one = k.index(1);
                let num1 = k.add(&num, &one);
                let kk = k.index(kern[axis]);
                let s = k.index(stride[axis]);
                let past = k.cmpi("uge", &num1, &kk);
                let over = k.val(&format!("arith.subi {num1}, {kk} : index"));
                let sm1 = k.index(stride[axis] - 1);
                let up = k.add(&over, &sm1);
                let lo_raw = k.val(&format!("arith.divui {up}, {s} : index"));
                let zero_i = k.index(0);
                let lo = k.val(&format!("arith.select {past}, {lo_raw}, {zero_i} : index"));
                let hi = k.val(&format!("arith.divui {num}, {s} : index"));
                let last = k.index(outputs.saturating_sub(1));
                let hi = k.val(&format!("arith.minui {hi}, {last} : index"));
                let end = k.add(&hi, &one);
                // An empty range where lo passes the end.
                let lo = k.val(&format!("arith.minui {lo}, {end} : index"));
                (lo, end)
            };
            let (oh_lo, oh_end) = window_range(&mut k, &c[hd], 0, ys[hd]);
            let (ow_lo, ow_end) = window_range(&mut k, &c[wd], 1, ys[wd]);
            let (oh, acc0, s0) = k.open_reduce(&oh_lo, &oh_end, &zero, f);
            let (ow, acc1, s1) = k.open_reduce(&ow_lo, &ow_end, &acc0, f);
            // is (h, w) inside window (oh, ow)? a = h + p - oh s in [0, k)
            let rel = |k: &mut Kernel, pos: &str, o: &str, axis: usize| -> String {
                let pc = k.index(pad[axis]);
                let hp = k.add(pos, &pc);
                let s = k.index(stride[axis]);
                let os = k.mul(o, &s);
                let ge = k.cmpi("uge", &hp, &os);
                let a = k.val(&format!("arith.subi {hp}, {os} : index"));
                let kk = k.index(kern[axis]);
                let lt = k.cmpi("ult", &a, &kk);
                k.and(&ge, &lt)
            };
            let inh = rel(&mut k, &c[hd], &oh, 0);
            let inw = rel(&mut k, &c[wd], &ow, 1);
            let inside = k.and(&inh, &inw);
            let yc = with(&c, &oh, &ow);
            let yi = k.ravel(&yc, &ystr);
            let gv = k.load(&format!("%b{y}"), &yi, &ty);
            let contrib = if max {
                // the window's first maximum, in row-major order
                let here = k.ravel(&c, &xstr);
                k.n += 1;
                let (a, best, at, r) =
                    (format!("%i{}", k.n), format!("%m{}", k.n), format!("%p{}", k.n), format!("%r{}", k.n));
                let big = k.index(usize::MAX >> 1);
                k.line(&format!("{r}:2 = scf.for {a} = %c0 to {k0} step %c1 iter_args({best} = {ninf}, {at} = {big}) -> ({f}, index) {{"));
                k.depth += 1;
                let (b, best1, at1, r1) = {
                    k.n += 1;
                    (format!("%i{}", k.n), format!("%m{}", k.n), format!("%p{}", k.n), format!("%r{}", k.n))
                };
                k.line(&format!("{r1}:2 = scf.for {b} = %c0 to {k1} step %c1 iter_args({best1} = {best}, {at1} = {at}) -> ({f}, index) {{"));
                k.depth += 1;
                let (okh, h) = tap(&mut k, &oh, &a, 0);
                let (okw, w) = tap(&mut k, &ow, &b, 1);
                let ok = k.and(&okh, &okw);
                let xi = k.ravel(&with(&c, &h, &w), &xstr);
                let xv = k.load(&format!("%b{x}"), &xi, &tx);
                // The first tap in the window (-inf included), then any
                // greater one or the first NaN: the interpreter's choice,
                // and PyTorch's.
                let gt = k.above_nan_first(&xv, &best1, f);
                let first = k.cmpi("eq", &at1, &big);
                let gt = k.val(&format!("arith.ori {gt}, {first} : i1"));
                let better = k.and(&ok, &gt);
                let nb = k.val(&format!("arith.select {better}, {xv}, {best1} : {f}"));
                let np = k.val(&format!("arith.select {better}, {xi}, {at1} : index"));
                k.line(&format!("scf.yield {nb}, {np} : {f}, index"));
                k.depth -= 1;
                k.line("}");
                k.line(&format!("scf.yield {r1}#0, {r1}#1 : {f}, index"));
                k.depth -= 1;
                k.line("}");
                let is_max = k.cmpi("eq", &format!("{r}#1"), &here);
                let take = k.and(&inside, &is_max);
                k.val(&format!("arith.select {take}, {gv}, {zero} : {f}"))
            } else {
                let ar = k.float(area, t);
                let share = k.fop("divf", &gv, &ar, t);
                k.val(&format!("arith.select {inside}, {share}, {zero} : {f}"))
            };
            let next = k.fop("addf", &acc1, &contrib, t);
            k.close_with(&next, f);
            k.close_with(&s1, f);
            k.store(&s0, "%b2", &e, &flat_type(&specs[2].0, specs[2].1));
        }
        k.close();
        let work = if backward { numel(xs) } else { numel(ys) };
        let windows = |axis: usize, o: usize| kern[axis].div_ceil(stride[axis].max(1)).min(o);
        let cost = if backward {
            windows(0, ys[hd]) * windows(1, ys[wd]) * (4 + kern[0] * kern[1] * 6)
        } else {
            kern[0] * kern[1] * 6
        };
        self.one(k, specs, work, cost)
    }
}

/// What `ll.im2col` and `ll.col2im` kernels read from their op, in either
/// form: the window attributes, the image's and the windows' shapes (`xs`,
/// `cs`), the image's element type and the two buffers' flat types.
struct WindowKernel<'s> {
    /// (channel, height, width) dimensions of the image
    dims: (usize, usize, usize),
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
    xs: &'s [usize],
    cs: &'s [usize],
    storage: DType,
    tx: String,
    tc: String,
    xstr: Vec<usize>,
}

impl<'s> WindowKernel<'s> {
    /// `col2im` false: specs (image, windows); true: (windows, image).
    fn new(op: MlirOperation, specs: &'s [(Vec<usize>, DType)], col2im: bool) -> Self {
        let (x, c) = if col2im { (1, 0) } else { (0, 1) };
        let (xs, cs) = (&specs[x].0[..], &specs[c].0[..]);
        let storage = specs[x].1;
        WindowKernel {
            dims: image_dims(op),
            stride: pair(op, "stride", 1),
            pad: pair(op, "padding", 0),
            dil: pair(op, "dilation", 1),
            xs,
            cs,
            storage,
            tx: flat_type(xs, storage),
            tc: flat_type(cs, specs[c].1),
            xstr: row_major_strides(xs),
        }
    }

    /// The flat index of image element `(n, ch, h, w)`.
    fn image_at(&self, k: &mut Kernel, n: &str, ch: &str, h: &str, w: &str) -> String {
        let (cd, hd, wd) = self.dims;
        let mut coords = vec![String::new(); 4];
        coords[0] = n.into();
        coords[cd] = ch.into();
        coords[hd] = h.into();
        coords[wd] = w.into();
        k.ravel(&coords, &self.xstr)
    }
}
