//! Attention on the tensor cores (f16/bf16 q, k, v; FlashAttention-2's
//! forward): `mma.sync.m16n8k16` for both products, the online softmax
//! on the accumulators in registers, so neither the scores nor the
//! probabilities reach memory.

use crate::codegen::ops::attention::AttentionShape;
use crate::codegen::ops::gemm::mma::{async_chunk, fragment_register, mma_16816, tile_chunks};
use crate::codegen::prelude::*;

/// Query rows per block: 4 warps of 16.
pub(crate) const TC_QUERIES: usize = 64;

/// Keys per shared-memory tile.
pub(crate) const TC_KEYS: usize = 64;

/// Threads per block.
const TC_THREADS: usize = 128;

/// Whether the tensor-core form takes `a` with operands `specs`: q, k and v
/// all f16 or all bf16, head sizes multiples of 16 up to 128.
pub(crate) fn tensor_core_attention(a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> bool {
    let t = specs[0].1;
    matches!(t, DType::BF16 | DType::F16)
        && specs[1].1 == t
        && specs[2].1 == t
        && [a.d, a.dv].iter().all(|&h| h > 0 && h % 16 == 0 && h <= 128)
        && a.l > 0
        && a.s > 0
}

impl Generator {
    /// Block (b, tile) takes [`TC_QUERIES`] query rows of batch b, 16 per
    /// warp, their fragments loaded once from shared memory by `ldmatrix`.
    /// It walks the keys in tiles of [`TC_KEYS`] rows of k and v, copied by
    /// `cp.async` into shared memory (rows padded by 8 elements, so the
    /// eight 16-byte rows an `ldmatrix` reads fall in distinct banks; rows
    /// past the last key zero-filled). Per tile each warp computes its 16 x
    /// 64 scores S = q k^T with `mma.sync` (f32 accumulators: lane 4g + c
    /// holds rows g and g + 8, columns 2c and 2c + 1 of each 8-key
    /// fragment), scales and masks them (causal: key <= row; keys past the
    /// last), and folds them into the online softmax: row maxima over the
    /// four lanes of a row by xor shuffles, the output accumulator rescaled
    /// by e^(m - m'), the probabilities e^(s - m') rounded to the operand
    /// type and, being in the layout of an `mma` A fragment already, used
    /// directly for O += P v (v's fragments by transposing `ldmatrix`).
    /// Each lane's running sum is its own columns' until the end, when the
    /// row's four lanes add theirs; the output is O / l. Causal blocks stop
    /// at the tile past their last row.
    pub(crate) fn gpu_attention_tc(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let et = specs[0].1;
        let e = et.mlir();
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let (bq, bk, threads) = (TC_QUERIES, TC_KEYS, TC_THREADS);
        let (q_ld, k_ld, v_ld) = (d + 8, d + 8, dv + 8);
        let (q_el, k_el, v_el) = (bq * q_ld, bk * k_ld, bk * v_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (tq, tk, tv, to) = (ty(0), ty(1), ty(2), ty(3));
        let shared = |n: usize| format!("memref<{n}x{e}, #gpu.address_space<workgroup>>");
        let (sq, sk, sv) = (shared(q_el), shared(k_el), shared(v_el));

        let mut k = Kernel::new();
        let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
        k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
        let k_at = k.index(q_el * 2);
        let v_at = k.index((q_el + k_el) * 2);
        k.line(&format!("%Qs = memref.view %smem[%c0][] : {dynamic} to {sq}"));
        k.line(&format!("%Ks = memref.view %smem[{k_at}][] : {dynamic} to {sk}"));
        k.line(&format!("%Vs = memref.view %smem[{v_at}][] : {dynamic} to {sv}"));
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let tiles = l.div_ceil(bq);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let tile = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        let first = k.mad(&tile, bq, "%c0");
        let (c32, c8, c4, c2) = (k.index(32), k.index(8), k.index(4), k.index(2));
        let lane = k.val(&format!("arith.remui {tid}, {c32} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {c32} : index"));
        let quad = k.val(&format!("arith.divui {lane}, {c8} : index"));
        let r8 = k.val(&format!("arith.remui {lane}, {c8} : index"));
        let q_lo = k.val(&format!("arith.remui {quad}, {c2} : index"));
        let q_hi = k.val(&format!("arith.divui {quad}, {c2} : index"));
        let g = k.val(&format!("arith.divui {lane}, {c4} : index"));
        let c = k.val(&format!("arith.remui {lane}, {c4} : index"));
        let wm0 = k.mad(&warp, 16, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let q_base = k.mad(&b, l * d, "%c0");
        let k_base = k.mad(&b, s * d, "%c0");
        let v_base = k.mad(&b, s * dv, "%c0");
        let o_base = k.mad(&b, l * dv, "%c0");

        // Copies `rows x cols` at row r0 (of `limit` rows) of buffer `buf`
        // into `smem` (row length `ld`) and waits for the copies.
        let copy = |k: &mut Kernel,
                    (buf, gty, base): (&str, &str, &str),
                    (r0, limit): (&str, &str),
                    (rows, cols): (usize, usize),
                    (smem, st, ld): (&str, &str, usize)| {
            let cl = k.index(cols);
            let mut tokens = Vec::new();
            for ch in tile_chunks(k, &tid, threads, rows, cols, base, r0, "%c0", limit, cols) {
                let col = k.mad(&ch.chunk, 8, "%c0");
                let at = k.mad(&ch.r, ld, &col);
                tokens.push(async_chunk(k, &ch, &cl, buf, gty, smem, st, &at));
            }
            k.val(&format!("nvgpu.device_async_create_group {}", tokens.join(", ")));
            k.line("nvvm.cp.async.wait.group 0");
        };
        copy(&mut k, ("%b0", &tq, &q_base), (&first, &l_c), (bq, d), ("%Qs", &sq, q_ld));
        k.line("gpu.barrier");

        let frag = format!("vector<4x2x{e}>");
        let reg = |k: &mut Kernel, f: &str, i: usize| fragment_register(k, f, i, et);
        // Two f32 values as one register of 16-bit pairs (the first in the
        // low half).
        let pack = |k: &mut Kernel, x: &str, y: &str| -> String {
            let v = k.val(&format!("vector.from_elements {x}, {y} : vector<2xf32>"));
            let h = k.val(&format!("arith.truncf {v} : vector<2xf32> to vector<2x{e}>"));
            if et == DType::BF16 { k.val(&format!("llvm.bitcast {h} : vector<2xbf16> to i32")) } else { h }
        };
        let mma = |k: &mut Kernel, a: &[String], b: &[String], acc: &[String]| mma_16816(k, a, b, acc, et);

        // The warp's query fragments, one per 16 of the head.
        let a_lane = {
            let row = k.mad(&q_lo, 8, &r8);
            let row = k.add(&wm0, &row);
            let col = k.mad(&q_hi, 8, "%c0");
            k.mad(&row, q_ld, &col)
        };
        let mut q_frags = Vec::new();
        for ks in 0..d / 16 {
            let at = k.mad("%c1", ks * 16, &a_lane);
            let f =
                k.val(&format!("nvgpu.ldmatrix %Qs[{at}] {{numTiles = 4 : i32, transpose = false}} : {sq} -> {frag}"));
            q_frags.push((0..4).map(|i| reg(&mut k, &f, i)).collect::<Vec<_>>());
        }
        // k's fragments (stored keys x head: mma's column-major B as is):
        // lane row r + 8 q_hi, column 8 q_lo; v's (stored keys x dv: B
        // transposed by ldmatrix): row r + 8 q_lo, column 8 q_hi.
        let k_lane = {
            let row = k.mad(&q_hi, 8, &r8);
            let col = k.mad(&q_lo, 8, "%c0");
            k.mad(&row, k_ld, &col)
        };
        let v_lane = {
            let row = k.mad(&q_lo, 8, &r8);
            let col = k.mad(&q_hi, 8, "%c0");
            k.mad(&row, v_ld, &col)
        };

        let f32t = DType::F32;
        let ninf = k.float(f64::NEG_INFINITY, f32t);
        let zero = k.float(0.0, f32t);
        let scale = k.float(a.scale, f32t);
        let (bq_c, bk_c) = (k.index(bq), k.index(bk));
        let hi = if a.causal {
            let end = k.add(&first, &bq_c);
            k.val(&format!("arith.minui {end}, {s_c} : index"))
        } else {
            s_c.clone()
        };
        let width = k.val("arith.constant 32 : i32");
        let (one_i, two_i) = (k.val("arith.constant 1 : i32"), k.val("arith.constant 2 : i32"));
        // This lane's rows g and g + 8 of the block.
        let row_g = k.add(&first, &wm0);
        let row_g = k.add(&row_g, &g);
        let row_g8 = k.mad("%c1", 8, &row_g);
        let o_frags = dv / 8;
        // Carried: the running max of rows g and g + 8, this lane's share of
        // their sums, and the output accumulators (4 per 8-column fragment).
        let mut init = vec![ninf.clone(), ninf.clone(), zero.clone(), zero.clone()];
        init.extend(std::iter::repeat_n(zero.clone(), o_frags * 4));
        let (t0, carried, results) = k.open_reduce_all("%c0", &hi, &bk_c, &init, "f32");
        // Every warp done with the last tile before it is overwritten.
        k.line("gpu.barrier");
        copy(&mut k, ("%b1", &tk, &k_base), (&t0, &s_c), (bk, d), ("%Ks", &sk, k_ld));
        copy(&mut k, ("%b2", &tv, &v_base), (&t0, &s_c), (bk, dv), ("%Vs", &sv, v_ld));
        k.line("gpu.barrier");

        // S = q k^T: bk / 8 fragments of 16 x 8.
        let s_frags = bk / 8;
        let mut sacc: Vec<Vec<String>> = vec![vec![zero.clone(); 4]; s_frags];
        for (ks, qf) in q_frags.iter().enumerate() {
            for np in 0..bk / 16 {
                let at = k.mad("%c1", np * 16 * k_ld + ks * 16, &k_lane);
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %Ks[{at}] {{numTiles = 4 : i32, transpose = false}} : {sk} -> {frag}"
                ));
                let r: Vec<String> = (0..4).map(|i| reg(&mut k, &f, i)).collect();
                sacc[2 * np] = mma(&mut k, qf, &r[..2], &sacc[2 * np]);
                sacc[2 * np + 1] = mma(&mut k, qf, &r[2..], &sacc[2 * np + 1]);
            }
        }
        // Scale and mask: register i of fragment ni is row g + 8 (i / 2),
        // key t0 + 8 ni + 2 c + i % 2.
        let key0 = k.mad(&c, 2, &t0);
        let mut maxes = [ninf.clone(), ninf.clone()];
        for (ni, fr) in sacc.iter_mut().enumerate() {
            for (i, v) in fr.iter_mut().enumerate() {
                let key = k.mad("%c1", ni * 8 + i % 2, &key0);
                let mut ok = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
                if a.causal {
                    let row = if i / 2 == 0 { &row_g } else { &row_g8 };
                    let seen = k.val(&format!("arith.cmpi ule, {key}, {row} : index"));
                    ok = k.val(&format!("arith.andi {ok}, {seen} : i1"));
                }
                let scaled = k.fop("mulf", v, &scale, f32t);
                *v = k.val(&format!("arith.select {ok}, {scaled}, {ninf} : f32"));
                maxes[i / 2] = k.val(&format!("arith.maximumf {}, {v} : f32", maxes[i / 2]));
            }
        }
        // Each row's max over its four lanes, then the new running max (0
        // where the row has seen no key yet, so no -inf - -inf).
        let mut m_use = Vec::new();
        let mut m_new = Vec::new();
        let mut alpha = Vec::new();
        for h in 0..2 {
            let mut m = maxes[h].clone();
            for o in [&one_i, &two_i] {
                k.n += 1;
                let other = format!("%s{}", k.n);
                k.line(&format!("{other}, %v{} = gpu.shuffle xor {m}, {o}, {width} : f32", k.n));
                m = k.val(&format!("arith.maximumf {m}, {other} : f32"));
            }
            let mn = k.val(&format!("arith.maximumf {}, {m} : f32", carried[h]));
            let none = k.val(&format!("arith.cmpf oeq, {mn}, {ninf} : f32"));
            let mu = k.val(&format!("arith.select {none}, {zero}, {mn} : f32"));
            let dm = k.fop("subf", &carried[h], &mu, f32t);
            alpha.push(k.val(&format!("math.exp {dm} : f32")));
            m_new.push(mn);
            m_use.push(mu);
        }
        // Probabilities and this lane's sums.
        let mut sums = [zero.clone(), zero.clone()];
        for fr in sacc.iter_mut() {
            for (i, v) in fr.iter_mut().enumerate() {
                let ds = k.fop("subf", v, &m_use[i / 2], f32t);
                *v = k.val(&format!("math.exp {ds} : f32"));
                sums[i / 2] = k.fop("addf", &sums[i / 2], v, f32t);
            }
        }
        let mut next = m_new.clone();
        for h in 0..2 {
            let kept = k.fop("mulf", &carried[2 + h], &alpha[h], f32t);
            next.push(k.fop("addf", &kept, &sums[h], f32t));
        }
        let mut oacc: Vec<Vec<String>> = (0..o_frags)
            .map(|on| (0..4).map(|i| k.fop("mulf", &carried[4 + on * 4 + i], &alpha[i / 2], f32t)).collect::<Vec<_>>())
            .collect();
        // O += P v, 16 keys at a time: fragments 2 kk and 2 kk + 1 of P are
        // the A fragment (rows g, g + 8; keys 2c, 2c + 1, then + 8).
        for kk in 0..bk / 16 {
            let (p0, p1) = (&sacc[2 * kk], &sacc[2 * kk + 1]);
            let pa = vec![
                pack(&mut k, &p0[0], &p0[1]),
                pack(&mut k, &p0[2], &p0[3]),
                pack(&mut k, &p1[0], &p1[1]),
                pack(&mut k, &p1[2], &p1[3]),
            ];
            for np in 0..dv / 16 {
                let at = k.mad("%c1", kk * 16 * v_ld + np * 16, &v_lane);
                let f = k.val(&format!(
                    "nvgpu.ldmatrix %Vs[{at}] {{numTiles = 4 : i32, transpose = true}} : {sv} -> {frag}"
                ));
                let r: Vec<String> = (0..4).map(|i| reg(&mut k, &f, i)).collect();
                oacc[2 * np] = mma(&mut k, &pa, &r[..2], &oacc[2 * np]);
                oacc[2 * np + 1] = mma(&mut k, &pa, &r[2..], &oacc[2 * np + 1]);
            }
        }
        next.extend(oacc.into_iter().flatten());
        k.close_with_all(&next, "f32");

        // Each row's sum over its four lanes; the rows inside the output
        // stored as O / l.
        let mut totals = Vec::new();
        for h in 0..2 {
            let mut t = results[2 + h].clone();
            for o in [&one_i, &two_i] {
                k.n += 1;
                let other = format!("%s{}", k.n);
                k.line(&format!("{other}, %v{} = gpu.shuffle xor {t}, {o}, {width} : f32", k.n));
                t = k.val(&format!("arith.addf {t}, {other} : f32"));
            }
            totals.push(t);
        }
        let col0 = k.mad(&c, 2, "%c0");
        for h in 0..2 {
            let row = if h == 0 { &row_g } else { &row_g8 };
            let inside = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            let ob = k.mad(row, dv, &o_base);
            let ob = k.add(&ob, &col0);
            for on in 0..o_frags {
                for j in 0..2 {
                    let o = &results[4 + on * 4 + 2 * h + j];
                    let y = k.fop("divf", o, &totals[h], f32t);
                    let at = k.mad("%c1", on * 8 + j, &ob);
                    k.store(&y, "%b3", &at, &to);
                }
            }
            k.close();
        }
        let blocks = (a.batch * tiles).max(1) as u32;
        let name = self.finish_gpu_func(k, specs, &[], [blocks, 1, 1], threads as u32);
        if let Some(launch) = self.launches.get_mut(&name) {
            launch.shared_bytes = ((q_el + k_el + v_el) * 2) as u32;
        }
        let work = (a.batch * l).max(1) as u64;
        let cost = (2 * s * (d + dv) + 8 * s) as u64;
        vec![(name, work, cost, (0..specs.len()).collect(), vec![])]
    }
}
