use crate::codegen::prelude::*;

impl Generator {
    /// The CPU's GEMM: the generated kernel, with the library candidates
    /// the registry times against it.
    pub(crate) fn cpu_gemm(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels> {
        let before = self.finished.len();
        let (work, cost, library) = self.gemm(op, specs)?;
        let kernel = self.finished[before].clone();
        self.library.insert(kernel.clone(), library);
        Ok(vec![(kernel, work, cost, (0..specs.len()).collect(), vec![])])
    }

    /// One row of the (batched) product per work item, accumulated in a
    /// stack row, then the epilogue.
    pub(crate) fn gemm(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
    ) -> Result<(u64, u64, Option<LibraryGemm>)> {
        let GemmLayout { bias, mask, residual, out, lhs_sum, ta, tb, accumulate, alpha, act, rows, m, kk, n, batched } =
            GemmLayout::of(op, specs);
        // 16-bit operands are widened on load: the product accumulates in f32.
        let t = compute(specs[out].1);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut k = Kernel::new();
        let row_t = format!("memref<{}x{}>", n.max(1), t.mlir());
        let acc_buf = k.scratch(n, t, self.target.heap_scratch());
        let zero = k.float(0.0, t);
        let (nc, kc, mc) = (k.index(n), k.index(kk), k.index(m));
        let w = k.open("%begin", "%end");
        // batch and row within it; operand bases
        let (a_base, b_base, i) = if batched {
            let bi = k.val(&format!("arith.divui {w}, {mc} : index"));
            let i = k.val(&format!("arith.remui {w}, {mc} : index"));
            let (mk, kn) = (k.index(m * kk), k.index(kk * n));
            let ab = k.mul(&bi, &mk);
            let bb = k.mul(&bi, &kn);
            (ab, bb, i)
        } else {
            ("%c0".to_string(), "%c0".to_string(), w.clone())
        };
        // A(i, kx) address
        let a_at = |k: &mut Kernel, kx: &str| -> String {
            let off = if ta { k.mad(kx, m, &i) } else { k.mad(&i, kk, kx) };
            k.add(&a_base, &off)
        };
        // Row i of op(A) summed along k (the epilogue's lhs_sum).
        let row_sum_a = |k: &mut Kernel| -> String {
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
            let ai = a_at(k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
            k.close_with(&s, t.mlir());
            r
        };
        let b_at = |k: &mut Kernel, kx: &str, j: &str| -> String {
            let off = if tb { k.mad(j, kk, kx) } else { k.mad(kx, n, j) };
            k.add(&b_base, &off)
        };
        // The scalar dot product of row i of op(A) and column j of op(B) over
        // k in [lo, kk), added to `init` (`fast`: fastmath<fast>, else
        // contract); returns the sum.
        let dot = |k: &mut Kernel, lo: &str, init: &str, j: &str, fast: bool| -> String {
            let (kx, acc, r) = k.open_reduce(lo, &kc, init, t.mlir());
            let ai = a_at(k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let bi = b_at(k, &kx, j);
            let bv = k.load("%b1", &bi, &ty(1));
            let s = if fast {
                let p = k.val(&format!("arith.mulf {av}, {bv} fastmath<fast> : {}", t.mlir()));
                k.val(&format!("arith.addf {acc}, {p} fastmath<fast> : {}", t.mlir()))
            } else {
                let p = k.fop("mulf", &av, &bv, t);
                k.fop("addf", &acc, &p, t)
            };
            k.close_with(&s, t.mlir());
            r
        };
        let mut sum_a = None;
        // Register-blocked f32 products (`vector` dialect, the host's SIMD
        // width): rows of B a block of 4 vectors at a time with A(i, k)
        // broadcast, or (B transposed, A not) 4 dot products at once along
        // k; the columns and k left over run the scalar loops below.
        let lanes = simd_lanes();
        let vector = t == DType::F32 && lanes > 1;
        let vt = format!("vector<{lanes}xf32>");
        let (a_row, b_row) = (ty(0), ty(1));
        if vector && !tb && n >= 4 * lanes {
            let block = 4 * lanes;
            let full = k.index(n / block * block);
            let step = k.index(block);
            let vzero = k.val(&format!("arith.constant dense<0.000000e+00> : {vt}"));
            let jb = k.open_step("%c0", &full, &step);
            let (kx, accs, rs) = k.open_reduce_all("%c0", &kc, "%c1", &vec![vzero.clone(); 4], &vt);
            let ai = a_at(&mut k, &kx);
            let av = k.load("%b0", &ai, &a_row);
            let avv = k.val(&format!("vector.broadcast {av} : f32 to {vt}"));
            let base = b_at(&mut k, &kx, &jb);
            let mut next = Vec::new();
            for (c, acc) in accs.iter().enumerate() {
                let at = k.mad("%c1", c * lanes, &base);
                let bv = k.vload("%b1", &at, &b_row, lanes);
                next.push(k.val(&format!("vector.fma {avv}, {bv}, {acc} : {vt}")));
            }
            k.close_with_all(&next, &vt);
            for (c, r) in rs.iter().enumerate() {
                let at = k.mad("%c1", c * lanes, &jb);
                k.line(&format!("vector.store {r}, {acc_buf}[{at}] : {row_t}, {vt}"));
            }
            k.close();
            // The columns after the last full block.
            let j = k.open(&full, &nc);
            let r = dot(&mut k, "%c0", &zero, &j, false);
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                sum_a = Some(row_sum_a(&mut k));
            }
        } else if vector && tb && !ta && kk >= lanes && n >= 4 {
            let kfull = k.index(kk / lanes * lanes);
            let kstep = k.index(lanes);
            let jfull = k.index(n / 4 * 4);
            let four = k.index(4);
            let vzero = k.val(&format!("arith.constant dense<0.000000e+00> : {vt}"));
            let jb = k.open_step("%c0", &jfull, &four);
            let (kx, accs, rs) = k.open_reduce_all("%c0", &kfull, &kstep, &vec![vzero.clone(); 4], &vt);
            let ai = a_at(&mut k, &kx);
            let av = k.vload("%b0", &ai, &a_row, lanes);
            let mut next = Vec::new();
            for (c, acc) in accs.iter().enumerate() {
                let j = k.mad("%c1", c, &jb);
                let bi = b_at(&mut k, &kx, &j);
                let bv = k.vload("%b1", &bi, &b_row, lanes);
                next.push(k.val(&format!("vector.fma {av}, {bv}, {acc} : {vt}")));
            }
            k.close_with_all(&next, &vt);
            for (c, r) in rs.iter().enumerate() {
                let j = k.mad("%c1", c, &jb);
                let head = k.val(&format!("vector.reduction <add>, {r} fastmath<fast> : {vt} into f32"));
                // k after the last full vector
                let r = dot(&mut k, &kfull, &head, &j, false);
                k.store(&r, &acc_buf, &j, &row_t);
            }
            k.close();
            // The columns after the last block of four.
            let j = k.open(&jfull, &nc);
            let r = dot(&mut k, "%c0", &zero, &j, true);
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                sum_a = Some(row_sum_a(&mut k));
            }
        } else if tb {
            // dot products: acc[j] = sum_k A(i,k) B(j,k)
            let j = k.open("%c0", &nc);
            let r = dot(&mut k, "%c0", &zero, &j, true);
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                sum_a = Some(row_sum_a(&mut k));
            }
        } else {
            // rank-1 updates: acc[:] += A(i,k) B(k,:)
            let j = k.open("%c0", &nc);
            k.store(&zero, &acc_buf, &j, &row_t);
            k.close();
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
            let ai = a_at(&mut k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let j = k.open("%c0", &nc);
            let bi = b_at(&mut k, &kx, &j);
            let bv = k.load("%b1", &bi, &ty(1));
            let cur = k.load(&acc_buf, &j, &row_t);
            let p = k.fop("mulf", &av, &bv, t);
            let s = k.fop("addf", &cur, &p, t);
            k.store(&s, &acc_buf, &j, &row_t);
            k.close();
            let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
            k.close_with(&s, t.mlir());
            sum_a = lhs_sum.map(|_| r);
        }
        // Epilogue over the row.
        let row_out = k.mul(&w, &nc);
        let j = k.open("%c0", &nc);
        let o = k.add(&row_out, &j);
        let mut y = k.load(&acc_buf, &j, &row_t);
        if alpha != 1.0 {
            let c = k.float(alpha, t);
            y = k.fop("mulf", &y, &c, t);
        }
        let epilogue = Epilogue { bias, mask, residual, out, act, accumulate, t };
        epilogue.write(&mut k, &j, &o, &y, specs);
        k.close();
        if let (Some(p), Some(s)) = (lhs_sum, sum_a) {
            k.store(&s, &format!("%b{p}"), &w, &ty(p));
        }
        k.close();
        self.finish(k, specs);
        // The library candidates: an f32 GEMM with alpha, then an epilogue
        // (if any) as its own pass over the rows.
        let (a_row, a_col) = if ta { (1, m) } else { (kk, 1) };
        let (b_row, b_col) = if tb { (1, kk) } else { (n, 1) };
        let library_gemm =
            |epilogue: Option<String>, aliases: Vec<usize>, widen: Option<artifact::DType>| LibraryGemm {
                batch: rows / m.max(1),
                m,
                n,
                k: kk,
                a_strides: [a_row, a_col],
                b_strides: [b_row, b_col],
                a_batch: if batched { m * kk } else { 0 },
                b_batch: if batched { kk * n } else { 0 },
                alpha,
                a: 0,
                b: 1,
                out,
                aliases,
                epilogue: epilogue.map(|e| format!("aicf_{e}")),
                widen,
                gpu: None,
            };
        // 16-bit operands: f32 copies multiplied into an f32 product (one
        // buffer more, after the call's), which the epilogue reads and
        // rounds into the output.
        let narrow = specs[0].1 == specs[1].1 && matches!(specs[0].1, DType::F16 | DType::BF16);
        if narrow && !accumulate && lhs_sum.is_none() {
            let mut k = Kernel::new();
            let nc = k.index(n);
            let product = format!("%b{}", specs.len());
            let product_ty = format!("memref<{}xf32>", (rows * n).max(1));
            let w = k.open("%begin", "%end");
            let row_out = k.mul(&w, &nc);
            let j = k.open("%c0", &nc);
            let o = k.add(&row_out, &j);
            let y = k.load(&product, &o, &product_ty);
            Epilogue { bias, mask, residual, out, act, accumulate: false, t }.write(&mut k, &j, &o, &y, specs);
            k.close();
            k.close();
            let mut with_product = specs.to_vec();
            with_product.push((vec![(rows * n).max(1)], DType::F32));
            self.finish(k, &with_product);
            let library = library_gemm(Some(self.last()), vec![], Some(runtime_dtype(specs[0].1)?));
            return Ok((rows as u64, (2 * kk * n + 4 * n) as u64, Some(library)));
        }
        // f32 operands and output: the library writes `out`, which the
        // epilogue then reads.
        let all_f32 = [0, 1, out].iter().all(|&i| specs[i].1 == DType::F32);
        let library = (all_f32 && !accumulate).then(|| {
            let needs_epilogue =
                bias.is_some() || mask.is_some() || residual.is_some() || lhs_sum.is_some() || act != 0;
            let epilogue = needs_epilogue.then(|| {
                let mut k = Kernel::new();
                let zero = k.float(0.0, t);
                let (nc, kc) = (k.index(n), k.index(kk));
                if let (Some(p), true) = (lhs_sum, ta) {
                    // Row w of op(a) is column w of the stored A: summed a
                    // stored row at a time over this piece's columns
                    // (contiguous, vectorised), in the same k order as below.
                    let sums = format!("%b{p}");
                    let w = k.open("%begin", "%end");
                    k.store(&zero, &sums, &w, &ty(p));
                    k.close();
                    let kx = k.open("%c0", &kc);
                    let w = k.open("%begin", "%end");
                    let ai = k.mad(&kx, m, &w);
                    let av = k.load("%b0", &ai, &ty(0));
                    let cur = k.load(&sums, &w, &ty(p));
                    let s = k.fop("addf", &cur, &av, t);
                    k.store(&s, &sums, &w, &ty(p));
                    k.close();
                    k.close();
                }
                let w = k.open("%begin", "%end");
                if let (Some(p), false) = (lhs_sum, ta) {
                    // only rank-2 operands carry lhs_sum: row w of op(a)
                    let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
                    let ai = k.mad(&w, kk, &kx);
                    let av = k.load("%b0", &ai, &ty(0));
                    let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
                    k.close_with(&s, t.mlir());
                    k.store(&r, &format!("%b{p}"), &w, &ty(p));
                }
                let row_out = k.mul(&w, &nc);
                let j = k.open("%c0", &nc);
                let o = k.add(&row_out, &j);
                let y = k.load(&format!("%b{out}"), &o, &ty(out));
                Epilogue { bias, mask, residual, out, act, accumulate: false, t }.write(&mut k, &j, &o, &y, specs);
                k.close();
                k.close();
                self.finish(k, specs);
                self.last()
            });
            library_gemm(epilogue, [mask, residual].into_iter().flatten().collect(), None)
        });
        Ok((rows as u64, (2 * kk * n + 4 * n) as u64, library))
    }
}
