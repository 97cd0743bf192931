use crate::codegen::prelude::*;

impl Generator {
    #[allow(clippy::type_complexity)]
    pub(crate) fn gpu_gemm_kernels(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
        options: &GpuOptions,
    ) -> Result<Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>> {
        let layout = GemmLayout::of(op, specs);
        let GemmLayout { bias, mask, residual, out, lhs_sum, ta, tb, accumulate, alpha, act, rows, m, kk, n, batched } =
            layout;
        let t = specs[out].1;
        let (ta_t, tb_t) = (specs[0].1, specs[1].1);
        if matches!(ta_t, DType::F16 | DType::BF16) && ta_t == tb_t {
            if lhs_sum.is_some() {
                return Err(unsupported_at(op, "the tensor-core GEMM has no fused row sum of A yet"));
            }
            if !t.is_float() {
                return Err(at(op, format!("a {} GEMM with a {t:?} result", ta_t.mlir())));
            }
            return Ok(vec![self.tensor_core_gemm(&layout, ta_t, specs, options)]);
        }
        if t != DType::F32 || ta_t != DType::F32 || tb_t != DType::F32 {
            return Err(at(
                op,
                format!(
                    "the GPU GEMM takes f32 x f32 -> f32, or f16 x f16 / bf16 x bf16 with any float result (here {} x {} -> {})",
                    ta_t.mlir(),
                    tb_t.mlir(),
                    t.mlir()
                ),
            ));
        }
        let batch = rows / m.max(1);
        // The biggest tiles (128, 64 or 32 square) that still give the
        // GPU's 132 multiprocessors a block each.
        let tiles = |edge: usize| m.div_ceil(edge) * n.div_ceil(edge) * batch;
        let (tm, tn) = if tiles(128) >= 132 {
            (8, 8)
        } else if tiles(64) >= 132 {
            (4, 4)
        } else {
            (2, 2)
        };
        let (bm, bn, bk) = (16 * tm, 16 * tn, 16);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (sa, sb) = (
            format!("memref<{}xf32, #gpu.address_space<workgroup>>", bm * bk),
            format!("memref<{}xf32, #gpu.address_space<workgroup>>", bk * bn),
        );
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let sixteen = k.index(16);
        let tx = k.val(&format!("arith.remui {tid}, {sixteen} : index"));
        let ty_ = k.val(&format!("arith.divui {tid}, {sixteen} : index"));
        let Tile { row0, col0, a_base, b_base, o_base, mc, kc, nc } = Tile::of(&mut k, bm, bn, m, kk, n, batched);
        let zero = k.float(0.0, t);
        let step = k.index(bk);
        // This thread's register block: rows a_row.., columns b_col.. of the tile.
        let a_row = k.mad(&ty_, tm, "%c0");
        let b_col = k.mad(&tx, tn, "%c0");
        let (kt, accs, results) = k.open_reduce_all("%c0", &kc, &step, &vec![zero.clone(); tm * tn], "f32");
        // Loads a tile element: `e` is this thread's element of the tile,
        // (r, c) its place, in bounds when r < r_lim and c < c_lim.
        let staged = |k: &mut Kernel, q: usize, fast: usize| -> (String, String) {
            let e = k.mad("%c1", 256 * q, &tid);
            let f = k.index(fast);
            let slow = k.val(&format!("arith.divui {e}, {f} : index"));
            let quick = k.val(&format!("arith.remui {e}, {f} : index"));
            (slow, quick)
        };
        let bounded_load = |k: &mut Kernel, buf: &str, addr: &str, ok: &str, ty: &str| -> String {
            let safe = k.val(&format!("arith.select {ok}, {addr}, %c0 : index"));
            let v = k.load(buf, &safe, ty);
            k.val(&format!("arith.select {ok}, {v}, {zero} : f32"))
        };
        // A's tile, k-major in shared memory: As[c * bm + r] = A(row0 + r, kt + c).
        for q in 0..tm {
            // Neighbouring threads read along A's stored rows.
            let (r, c) = if ta {
                let (c, r) = staged(&mut k, q, bm);
                (r, c)
            } else {
                staged(&mut k, q, bk)
            };
            let gi = k.add(&row0, &r);
            let gk = k.add(&kt, &c);
            let in_i = k.val(&format!("arith.cmpi ult, {gi}, {mc} : index"));
            let in_k = k.val(&format!("arith.cmpi ult, {gk}, {kc} : index"));
            let ok = k.val(&format!("arith.andi {in_i}, {in_k} : i1"));
            let off = if ta { k.mad(&gk, m, &gi) } else { k.mad(&gi, kk, &gk) };
            let addr = k.add(&a_base, &off);
            let v = bounded_load(&mut k, "%b0", &addr, &ok, &ty(0));
            let at = k.mad(&c, bm, &r);
            k.store(&v, "%As", &at, &sa);
        }
        // B's tile: Bs[r * bn + c] = B(kt + r, col0 + c).
        for q in 0..tn {
            let (r, c) = if tb {
                let (c, r) = staged(&mut k, q, bk);
                (r, c)
            } else {
                staged(&mut k, q, bn)
            };
            let gk = k.add(&kt, &r);
            let gj = k.add(&col0, &c);
            let in_k = k.val(&format!("arith.cmpi ult, {gk}, {kc} : index"));
            let in_j = k.val(&format!("arith.cmpi ult, {gj}, {nc} : index"));
            let ok = k.val(&format!("arith.andi {in_k}, {in_j} : i1"));
            let off = if tb { k.mad(&gj, kk, &gk) } else { k.mad(&gk, n, &gj) };
            let addr = k.add(&b_base, &off);
            let v = bounded_load(&mut k, "%b1", &addr, &ok, &ty(1));
            let at = k.mad(&r, bn, &c);
            k.store(&v, "%Bs", &at, &sb);
        }
        k.line("gpu.barrier");
        // The 16 steps along k, unrolled: tm values of A and tn of B from
        // shared memory, tm x tn fused multiply-adds.
        let mut acc = accs.clone();
        for kx in 0..bk {
            let av: Vec<String> = (0..tm)
                .map(|ii| {
                    let at = k.mad("%c1", kx * bm + ii, &a_row);
                    k.load("%As", &at, &sa)
                })
                .collect();
            let bv: Vec<String> = (0..tn)
                .map(|jj| {
                    let at = k.mad("%c1", kx * bn + jj, &b_col);
                    k.load("%Bs", &at, &sb)
                })
                .collect();
            for ii in 0..tm {
                for jj in 0..tn {
                    let a = &acc[ii * tn + jj];
                    acc[ii * tn + jj] = k.val(&format!("math.fma {}, {}, {a} : f32", av[ii], bv[jj]));
                }
            }
        }
        k.line("gpu.barrier");
        k.close_with_all(&acc, "f32");
        // The epilogue, per output element in bounds.
        let alpha_c = (alpha != 1.0).then(|| k.float(alpha, t));
        for ii in 0..tm {
            for jj in 0..tn {
                let i = k.mad("%c1", ii, &a_row);
                let i = k.add(&row0, &i);
                let j = k.mad("%c1", jj, &b_col);
                let j = k.add(&col0, &j);
                let in_i = k.val(&format!("arith.cmpi ult, {i}, {mc} : index"));
                let in_j = k.val(&format!("arith.cmpi ult, {j}, {nc} : index"));
                let ok = k.val(&format!("arith.andi {in_i}, {in_j} : i1"));
                k.line(&format!("scf.if {ok} {{"));
                k.depth += 1;
                let mut y = results[ii * tn + jj].clone();
                if let Some(a) = &alpha_c {
                    y = k.fop("mulf", &y, a, t);
                }
                let row = k.mad(&i, n, &o_base);
                let o = k.add(&row, &j);
                Epilogue { bias, mask, residual, out, act, accumulate, t }.write(&mut k, &j, &o, &y, specs);
                k.close();
            }
        }
        let grid = [n.div_ceil(bn) as u32, m.div_ceil(bm) as u32, batch as u32];
        let name = self.finish_gpu_func(k, specs, &[("%As", sa), ("%Bs", sb)], grid, 256);
        let all: Vec<usize> = (0..specs.len()).collect();
        let mut kernels = vec![(name, rows as u64, (2 * kk * n) as u64, all.clone(), vec![])];
        if let Some(p) = lhs_sum {
            // Row w of op(A) summed along k (rank-2 operands only carry it).
            let mut k = Kernel::new();
            let zero = k.float(0.0, t);
            let kc = k.index(kk);
            let w = k.open("%begin", "%end");
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, "f32");
            let ai = if ta { k.mad(&kx, m, &w) } else { k.mad(&w, kk, &kx) };
            let av = k.load("%b0", &ai, &ty(0));
            let s = k.fop("addf", &acc, &av, t);
            k.close_with(&s, "f32");
            k.store(&r, &format!("%b{p}"), &w, &ty(p));
            k.close();
            self.finish(k, specs);
            kernels.push((self.last(), rows as u64, kk as u64, all, vec![]));
        }
        Ok(kernels)
    }
}
