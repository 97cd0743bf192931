use crate::codegen::prelude::*;

impl Generator {
    /// `out[o] = combine over the reduced coordinates of input`.
    pub(crate) fn reduce(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<(u64, u64)> {
        let (shape, st) = (&specs[0].0, specs[0].1);
        let t = compute(st);
        let dims: Vec<usize> = i64_array(op, "dims").unwrap_or_default().into_iter().map(|d| d as usize).collect();
        let kind = int_attr(op, "kind").unwrap_or(0);
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
        let strides = row_major_strides(shape);
        let outs: usize = kept.iter().map(|&d| shape[d]).product();
        let red: usize = dims.iter().map(|&d| shape[d]).product();
        let f = t.mlir();
        let mut k = Kernel::new();
        let init = if kind == 2 { k.float(f64::NEG_INFINITY, t) } else { k.float(0.0, t) };
        let rc = k.index(red.max(1));
        let o = k.open("%begin", "%end");
        // input offset of the kept coordinates
        let mut rem = o.clone();
        let mut base = "%c0".to_string();
        for &d in kept.iter().rev() {
            let nd = k.index(shape[d]);
            let c = k.val(&format!("arith.remui {rem}, {nd} : index"));
            rem = k.val(&format!("arith.divui {rem}, {nd} : index"));
            base = k.mad(&c, strides[d], &base);
        }
        let (r, acc, res) = k.open_reduce("%c0", &rc, &init, f);
        let mut rem = r.clone();
        let mut off = base.clone();
        for &d in dims.iter().rev() {
            let nd = k.index(shape[d]);
            let c = k.val(&format!("arith.remui {rem}, {nd} : index"));
            rem = k.val(&format!("arith.divui {rem}, {nd} : index"));
            off = k.mad(&c, strides[d], &off);
        }
        let v = k.load("%b0", &off, &flat_type(shape, st));
        let next = if kind == 2 {
            k.val(&format!("arith.maximumf {acc}, {v} : {f}"))
        } else {
            k.val(&format!("arith.addf {acc}, {v} fastmath<fast> : {f}"))
        };
        k.close_with(&next, f);
        let value = if kind == 1 {
            let c = k.float(red.max(1) as f64, t);
            k.fop("divf", &res, &c, t)
        } else {
            res
        };
        k.store(&value, "%b1", &o, &flat_type(&specs[1].0, specs[1].1));
        k.close();
        self.finish(k, specs);
        Ok((outs.max(1) as u64, (red * 3) as u64))
    }

    pub(crate) fn mse_loss(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let (shape, t) = (&specs[0].0, compute(specs[0].1));
        let f = t.mlir();
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let n = numel(shape);
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let (i, acc, s) = k.open_reduce("%c0", &nc, &zero, f);
        let a = k.load("%b0", &i, &ty(0));
        let b = k.load("%b1", &i, &ty(1));
        let d = k.fop("subf", &a, &b, t);
        let d2 = k.fop("mulf", &d, &d, t);
        let next = k.val(&format!("arith.addf {acc}, {d2} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let v = if int_attr(op, "reduction") == Some(1) {
            s
        } else {
            let c = k.float(n as f64, t);
            k.fop("divf", &s, &c, t)
        };
        k.store(&v, "%b2", "%c0", &ty(2));
        self.one(k, specs, 1, 4 * n)
    }
}
