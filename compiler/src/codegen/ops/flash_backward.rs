//! Attention's backward on the tensor cores (f16/bf16 heads, multiples of
//! 16 up to 128): FlashAttention-2's backward, the probabilities
//! recomputed per tile from each query row's log-sum-exp, so neither they
//! nor their gradient reach memory. Three kernels: the rows' statistics
//! (the forward's kernel without v, `flash.rs`), dk and dv a block of keys
//! at a time, and dq a block of queries at a time. dq has a kernel of its
//! own rather than FlashAttention-2's atomic adds, so every gradient
//! element sums its terms in one order and a run repeats its bits; it
//! costs the scores' and dP's products a second time.

use crate::codegen::ops::attention::AttentionShape;
use crate::codegen::ops::flash::TC_THREADS;
use crate::codegen::ops::gemm::mma::{async_chunk, fragment_register, mma_16816, tile_chunks};
use crate::codegen::prelude::*;

/// Rows (queries or keys) a block owns: 4 warps of 16.
const BLOCK_ROWS: usize = 64;

/// Rows of the other operand per shared-memory tile.
const TILE_ROWS: usize = 64;

/// Buffers of `ll.attention_backward`, in operand order.
const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const DO: usize = 4;
const DQ: usize = 5;
const DK: usize = 6;
const DV: usize = 7;
const STATS: usize = 8;

/// Shared memory of either kernel: the block's own two operands, and two
/// buffers of a tile of each of the other two (rows padded by 8).
pub(crate) fn backward_shared_bytes(own: [usize; 2], other: [usize; 2]) -> usize {
    (BLOCK_ROWS * (own[0] + 8 + own[1] + 8) + 2 * TILE_ROWS * (other[0] + 8 + other[1] + 8)) * 2
}

/// A warp's lanes as `mma.sync.m16n8k16` and `ldmatrix` see them: lane =
/// 8 quad + r8 with quad = 2 q_hi + q_lo, and 4 g + c for the accumulators
/// (lane 4g + c holds rows g and g + 8, columns 2c and 2c + 1 of each
/// 8-column fragment).
struct Lanes {
    tid: String,
    warp: String,
    r8: String,
    q_lo: String,
    q_hi: String,
    g: String,
    c: String,
}

impl Lanes {
    fn new(k: &mut Kernel) -> Lanes {
        let tid = k.val("gpu.thread_id x");
        let (c32, c8, c4, c2) = (k.index(32), k.index(8), k.index(4), k.index(2));
        let lane = k.val(&format!("arith.remui {tid}, {c32} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {c32} : index"));
        let quad = k.val(&format!("arith.divui {lane}, {c8} : index"));
        let r8 = k.val(&format!("arith.remui {lane}, {c8} : index"));
        let q_lo = k.val(&format!("arith.remui {quad}, {c2} : index"));
        let q_hi = k.val(&format!("arith.divui {quad}, {c2} : index"));
        let g = k.val(&format!("arith.divui {lane}, {c4} : index"));
        let c = k.val(&format!("arith.remui {lane}, {c4} : index"));
        Lanes { tid, warp, r8, q_lo, q_hi, g, c }
    }

    /// This lane's `ldmatrix` address of an A fragment (16 x 16, row-major,
    /// from row `row0` of rows of `ld`).
    fn a_at(&self, k: &mut Kernel, row0: &str, ld: usize) -> String {
        let row = k.mad(&self.q_lo, 8, &self.r8);
        let row = k.add(row0, &row);
        let col = k.mad(&self.q_hi, 8, "%c0");
        k.mad(&row, ld, &col)
    }

    /// Of two B fragments (16 deep, 2 x 8 wide) stored n-major (an n row
    /// holds its 16 k values, as k for q k^T): row r8 + 8 q_hi, column
    /// 8 q_lo.
    fn b_at(&self, k: &mut Kernel, ld: usize) -> String {
        let row = k.mad(&self.q_hi, 8, &self.r8);
        let col = k.mad(&self.q_lo, 8, "%c0");
        k.mad(&row, ld, &col)
    }

    /// Of two B fragments stored k-major (a k row holds 16 n values, as v
    /// for P v; read by the transposing `ldmatrix`): row r8 + 8 q_lo,
    /// column 8 q_hi.
    fn bt_at(&self, k: &mut Kernel, ld: usize) -> String {
        let row = k.mad(&self.q_lo, 8, &self.r8);
        let col = k.mad(&self.q_hi, 8, "%c0");
        k.mad(&row, ld, &col)
    }
}

/// What both kernels share: the element type, shared-memory views.
struct Tc {
    et: DType,
    frag: String,
}

impl Tc {
    /// The 4 registers `ldmatrix.x4` reads at `at` of `smem` (type `st`).
    fn ldsm(&self, k: &mut Kernel, smem: &str, st: &str, at: &str, transpose: bool) -> Vec<String> {
        let f = k.val(&format!(
            "nvgpu.ldmatrix {smem}[{at}] {{numTiles = 4 : i32, transpose = {transpose}}} : {st} -> {}",
            self.frag
        ));
        (0..4).map(|i| fragment_register(k, &f, i, self.et)).collect()
    }

    /// Two f32 values as one register of 16-bit pairs (the first low).
    fn pack(&self, k: &mut Kernel, x: &str, y: &str) -> String {
        let e = self.et.mlir();
        let v = k.val(&format!("vector.from_elements {x}, {y} : vector<2xf32>"));
        let h = k.val(&format!("arith.truncf {v} : vector<2xf32> to vector<2x{e}>"));
        if self.et == DType::BF16 { k.val(&format!("llvm.bitcast {h} : vector<2xbf16> to i32")) } else { h }
    }

    /// The A fragment of 16 columns from accumulator fragments `lo`
    /// (columns 0-7) and `hi` (8-15).
    fn a_from(&self, k: &mut Kernel, lo: &[String], hi: &[String]) -> Vec<String> {
        vec![
            self.pack(k, &lo[0], &lo[1]),
            self.pack(k, &lo[2], &lo[3]),
            self.pack(k, &hi[0], &hi[1]),
            self.pack(k, &hi[2], &hi[3]),
        ]
    }

    fn mma(&self, k: &mut Kernel, a: &[String], b: &[String], acc: &[String]) -> Vec<String> {
        mma_16816(k, a, b, acc, self.et)
    }
}

/// Issues the copies of `rows x cols` at row r0 (of `limit` rows) of buffer
/// `buf` into `smem` (row length `ld`) from element `offset`, one group.
#[allow(clippy::too_many_arguments)]
fn issue(
    k: &mut Kernel,
    tid: &str,
    (buf, gty, base): (&str, &str, &str),
    (r0, limit): (&str, &str),
    (rows, cols): (usize, usize),
    (smem, st, ld): (&str, &str, usize),
    offset: &str,
) {
    let cl = k.index(cols);
    let mut tokens = Vec::new();
    for ch in tile_chunks(k, tid, TC_THREADS, rows, cols, base, r0, "%c0", limit, cols) {
        let col = k.mad(&ch.chunk, 8, offset);
        let at = k.mad(&ch.r, ld, &col);
        tokens.push(async_chunk(k, &ch, &cl, buf, gty, smem, st, &at));
    }
    k.val(&format!("nvgpu.device_async_create_group {}", tokens.join(", ")));
}

/// 2^x by the special-function unit, subnormals flushed (as `flash.rs`).
fn ex2(k: &mut Kernel, x: &str) -> String {
    k.val(&format!("llvm.call_intrinsic \"llvm.nvvm.ex2.approx.ftz.f32\"({x}) : (f32) -> f32"))
}

impl Generator {
    /// Attention's backward on the tensor cores: the statistics' kernel,
    /// then dk and dv, then dq.
    pub(crate) fn gpu_attention_backward_tc(
        &mut self,
        a: &AttentionShape,
        specs: &[(Vec<usize>, DType)],
        tile: crate::codegen::AttentionTile,
    ) -> Kernels {
        let mut kernels = self.gpu_attention_tc(a, specs, tile, true);
        kernels.extend(self.gpu_attention_dkdv_tc(a, specs));
        kernels.extend(self.gpu_attention_dq_tc(a, specs));
        kernels
    }

    /// dk and dv: block (b, key tile) owns [`BLOCK_ROWS`] keys, 16 a warp,
    /// their k and v fragments (A operands) loaded once; it walks the
    /// queries that see them (causal: from its first key on) in tiles of
    /// [`TILE_ROWS`] of q and grad_output, double-buffered by `cp.async`.
    /// Per tile a warp computes S^T = k q^T and dP^T = v dO^T (16 keys x
    /// 64 queries), masks the tiles that reach its diagonal or past the
    /// last query, P^T = 2^(S^T c - lse2) with each query's statistics
    /// read for the lane's columns, dS^T = P^T (dP^T - D), then dv += P^T
    /// dO and dk += dS^T q, the probabilities and dS^T packed from the
    /// accumulators as A fragments, q and dO read by transposing `ldmatrix`.
    fn gpu_attention_dkdv_tc(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let et = specs[0].1;
        let e = et.mlir();
        let tc = Tc { et, frag: format!("vector<4x2x{e}>") };
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let (bk, bq) = (BLOCK_ROWS, TILE_ROWS);
        let (k_ld, v_ld, q_ld, o_ld) = (d + 8, dv + 8, d + 8, dv + 8);
        let (k_el, v_el, q_el, o_el) = (bk * k_ld, bk * v_ld, bq * q_ld, bq * o_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let shared = |n: usize| format!("memref<{n}x{e}, #gpu.address_space<workgroup>>");
        let (sk, sv, sq, so) = (shared(k_el), shared(v_el), shared(2 * q_el), shared(2 * o_el));
        let mut k = Kernel::new();
        let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
        k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
        let offsets = [k_el, k_el + v_el, k_el + v_el + 2 * q_el].map(|n| k.index(n * 2));
        k.line(&format!("%Ks = memref.view %smem[%c0][] : {dynamic} to {sk}"));
        k.line(&format!("%Vs = memref.view %smem[{}][] : {dynamic} to {sv}", offsets[0]));
        k.line(&format!("%Qs = memref.view %smem[{}][] : {dynamic} to {sq}", offsets[1]));
        k.line(&format!("%Os = memref.view %smem[{}][] : {dynamic} to {so}", offsets[2]));
        let ln = Lanes::new(&mut k);
        let block = k.val("gpu.block_id x");
        let tiles = s.div_ceil(bk);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let kt = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        let key0 = k.mad(&kt, bk, "%c0");
        let wk0 = k.mad(&ln.warp, 16, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let q_base = k.mad(&b, l * d, "%c0");
        let k_base = k.mad(&b, s * d, "%c0");
        let v_base = k.mad(&b, s * dv, "%c0");
        let o_base = k.mad(&b, l * dv, "%c0");
        let row_base = k.mad(&b, l, "%c0");
        let tid = ln.tid.clone();
        issue(&mut k, &tid, (&format!("%b{K}"), &ty(K), &k_base), (&key0, &s_c), (bk, d), ("%Ks", &sk, k_ld), "%c0");
        issue(&mut k, &tid, (&format!("%b{V}"), &ty(V), &v_base), (&key0, &s_c), (bk, dv), ("%Vs", &sv, v_ld), "%c0");
        // The queries that see this block's keys: from its first key on
        // (causal), or all.
        let start = if a.causal { key0.clone() } else { "%c0".to_string() };
        let issue_qo = |k: &mut Kernel, t0: &str, (qo, oo): (&str, &str)| {
            issue(k, &tid, (&format!("%b{Q}"), &ty(Q), &q_base), (t0, &l_c), (bq, d), ("%Qs", &sq, q_ld), qo);
            issue(k, &tid, (&format!("%b{DO}"), &ty(DO), &o_base), (t0, &l_c), (bq, dv), ("%Os", &so, o_ld), oo);
        };
        issue_qo(&mut k, &start, ("%c0", "%c0"));
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");
        let k_frags: Vec<Vec<String>> = (0..d / 16)
            .map(|ks| {
                let at = ln.a_at(&mut k, &wk0, k_ld);
                let at = k.mad("%c1", ks * 16, &at);
                tc.ldsm(&mut k, "%Ks", &sk, &at, false)
            })
            .collect();
        let v_frags: Vec<Vec<String>> = (0..dv / 16)
            .map(|ks| {
                let at = ln.a_at(&mut k, &wk0, v_ld);
                let at = k.mad("%c1", ks * 16, &at);
                tc.ldsm(&mut k, "%Vs", &sv, &at, false)
            })
            .collect();
        let (q_b, q_bt) = (ln.b_at(&mut k, q_ld), ln.bt_at(&mut k, q_ld));
        let (o_b, o_bt) = (ln.b_at(&mut k, o_ld), ln.bt_at(&mut k, o_ld));

        let f32t = DType::F32;
        let (ninf, zero) = (k.float(f64::NEG_INFINITY, f32t), k.float(0.0, f32t));
        let c_exp = k.float(a.scale * std::f64::consts::LOG2_E, f32t);
        let log2e = k.float(std::f64::consts::LOG2_E, f32t);
        let stats_ty = ty(STATS);
        let (bq_c, c2) = (k.index(bq), k.index(2));
        let last_row = k.index(l.saturating_sub(1));
        let n_rows = a.batch * l;
        // This lane's keys: g and g + 8 of the warp's 16.
        let key_g = k.add(&key0, &wk0);
        let key_g = k.add(&key_g, &ln.g);
        let key_g8 = k.mad("%c1", 8, &key_g);
        let warp_key_end = k.add(&key0, &wk0);
        let warp_key_end = k.mad("%c1", 16, &warp_key_end);
        let (dk_n, dv_n) = (d / 8 * 4, dv / 8 * 4);
        let init = vec![zero.clone(); dk_n + dv_n];
        let (t0, carried, results) = k.open_reduce_all(&start, &l_c, &bq_c, &init, "f32");
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");
        let rel = k.val(&format!("arith.subi {t0}, {start} : index"));
        let step = k.val(&format!("arith.divui {rel}, {bq_c} : index"));
        let parity = k.val(&format!("arith.remui {step}, {c2} : index"));
        let qo = k.mad(&parity, q_el, "%c0");
        let oo = k.mad(&parity, o_el, "%c0");
        let next_t = k.add(&t0, &bq_c);
        let more = k.val(&format!("arith.cmpi ult, {next_t}, {l_c} : index"));
        k.line(&format!("scf.if {more} {{"));
        k.depth += 1;
        let (q_el_c, o_el_c) = (k.index(q_el), k.index(o_el));
        let nqo = k.val(&format!("arith.subi {q_el_c}, {qo} : index"));
        let noo = k.val(&format!("arith.subi {o_el_c}, {oo} : index"));
        issue_qo(&mut k, &next_t, (&nqo, &noo));
        k.close();

        // S^T = k q^T and dP^T = v dO^T: 16 keys x bq queries each.
        let frags = bq / 8;
        let mut st = vec![vec![zero.clone(); 4]; frags];
        let mut dpt = vec![vec![zero.clone(); 4]; frags];
        for (ks, kf) in k_frags.iter().enumerate() {
            for np in 0..bq / 16 {
                let at = k.mad("%c1", np * 16 * q_ld + ks * 16, &q_b);
                let at = k.add(&at, &qo);
                let r = tc.ldsm(&mut k, "%Qs", &sq, &at, false);
                st[2 * np] = tc.mma(&mut k, kf, &r[..2], &st[2 * np]);
                st[2 * np + 1] = tc.mma(&mut k, kf, &r[2..], &st[2 * np + 1]);
            }
        }
        for (ks, vf) in v_frags.iter().enumerate() {
            for np in 0..bq / 16 {
                let at = k.mad("%c1", np * 16 * o_ld + ks * 16, &o_b);
                let at = k.add(&at, &oo);
                let r = tc.ldsm(&mut k, "%Os", &so, &at, false);
                dpt[2 * np] = tc.mma(&mut k, vf, &r[..2], &dpt[2 * np]);
                dpt[2 * np + 1] = tc.mma(&mut k, vf, &r[2..], &dpt[2 * np + 1]);
            }
        }
        // Register i of fragment ni: key g + 8 (i / 2), query t0 + 8 ni +
        // 2 c + i % 2. The mask where a query comes before a key of the
        // warp (causal) or past the last query.
        let query0 = k.mad(&ln.c, 2, &t0);
        let tile_end = k.add(&t0, &bq_c);
        let past = k.val(&format!("arith.cmpi ugt, {tile_end}, {l_c} : index"));
        let need = if a.causal {
            let early = k.val(&format!("arith.cmpi ult, {t0}, {warp_key_end} : index"));
            k.val(&format!("arith.ori {early}, {past} : i1"))
        } else {
            past
        };
        let flat: Vec<String> = st.iter().flatten().cloned().collect();
        let types = vec!["f32".to_string(); flat.len()];
        let out = k.open_if(&need, &types);
        let mut masked = Vec::new();
        for (ni, fr) in st.iter().enumerate() {
            for (i, v) in fr.iter().enumerate() {
                let query = k.mad("%c1", ni * 8 + i % 2, &query0);
                let mut ok = k.val(&format!("arith.cmpi ult, {query}, {l_c} : index"));
                if a.causal {
                    let key = if i / 2 == 0 { &key_g } else { &key_g8 };
                    let seen = k.val(&format!("arith.cmpi uge, {query}, {key} : index"));
                    ok = k.val(&format!("arith.andi {ok}, {seen} : i1"));
                }
                masked.push(k.val(&format!("arith.select {ok}, {v}, {ninf} : f32")));
            }
        }
        k.else_carry(&masked, &types);
        k.close_carry(&flat, &types);
        let mut out = out.into_iter();
        for v in st.iter_mut().flatten() {
            *v = out.next().unwrap_or_default();
        }
        // Each of the lane's queries' statistics (a query past the last row
        // reads the last: its scores are masked).
        let mut lse2 = Vec::new();
        let mut delta = Vec::new();
        for ni in 0..frags {
            for e in 0..2 {
                let query = k.mad("%c1", ni * 8 + e, &query0);
                let query = k.val(&format!("arith.minui {query}, {last_row} : index"));
                let at = k.add(&row_base, &query);
                let x = k.load(&format!("%b{STATS}"), &at, &stats_ty);
                lse2.push(k.fop("mulf", &x, &log2e, f32t));
                let at = k.mad("%c1", n_rows, &at);
                delta.push(k.load(&format!("%b{STATS}"), &at, &stats_ty));
            }
        }
        // P^T and dS^T.
        for (ni, (sf, df)) in st.iter_mut().zip(dpt.iter_mut()).enumerate() {
            for i in 0..4 {
                let col = ni * 2 + i % 2;
                let sc = k.fop("mulf", &sf[i], &c_exp, f32t);
                let x = k.fop("subf", &sc, &lse2[col], f32t);
                sf[i] = ex2(&mut k, &x);
                let diff = k.fop("subf", &df[i], &delta[col], f32t);
                df[i] = k.fop("mulf", &sf[i], &diff, f32t);
            }
        }
        // dv += P^T dO, dk += dS^T q, 16 queries at a time.
        let mut next = carried.clone();
        for kk in 0..bq / 16 {
            let pa = tc.a_from(&mut k, &st[2 * kk], &st[2 * kk + 1]);
            let da = tc.a_from(&mut k, &dpt[2 * kk], &dpt[2 * kk + 1]);
            for np in 0..dv / 16 {
                let at = k.mad("%c1", kk * 16 * o_ld + np * 16, &o_bt);
                let at = k.add(&at, &oo);
                let r = tc.ldsm(&mut k, "%Os", &so, &at, true);
                for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                    let at = dk_n + (2 * np + half) * 4;
                    let acc = tc.mma(&mut k, &pa, regs, &next[at..at + 4]);
                    next.splice(at..at + 4, acc);
                }
            }
            for np in 0..d / 16 {
                let at = k.mad("%c1", kk * 16 * q_ld + np * 16, &q_bt);
                let at = k.add(&at, &qo);
                let r = tc.ldsm(&mut k, "%Qs", &sq, &at, true);
                for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                    let at = (2 * np + half) * 4;
                    let acc = tc.mma(&mut k, &da, regs, &next[at..at + 4]);
                    next.splice(at..at + 4, acc);
                }
            }
        }
        k.close_with_all(&next, "f32");

        // The warp's key rows inside the keys: dk (times the scale), dv.
        let scale = k.float(a.scale, f32t);
        let col0 = k.mad(&ln.c, 2, "%c0");
        for (h, key) in [&key_g, &key_g8].into_iter().enumerate() {
            let inside = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            let kb = k.mad(key, d, &k_base);
            let kb = k.add(&kb, &col0);
            for fr in 0..d / 8 {
                for j in 0..2 {
                    let y = k.fop("mulf", &results[fr * 4 + 2 * h + j], &scale, f32t);
                    let at = k.mad("%c1", fr * 8 + j, &kb);
                    k.store(&y, &format!("%b{DK}"), &at, &ty(DK));
                }
            }
            let vb = k.mad(key, dv, &v_base);
            let vb = k.add(&vb, &col0);
            for fr in 0..dv / 8 {
                for j in 0..2 {
                    let at = k.mad("%c1", fr * 8 + j, &vb);
                    k.store(&results[dk_n + fr * 4 + 2 * h + j], &format!("%b{DV}"), &at, &ty(DV));
                }
            }
            k.close();
        }
        let shared_bytes = backward_shared_bytes([d, dv], [d, dv]);
        self.finish_tc(k, specs, (a.batch * tiles) as u32, shared_bytes);
        let cost = (l * (4 * d + 4 * dv + 16)) as u64;
        vec![(self.last(), (a.batch * s).max(1) as u64, cost, (0..specs.len()).collect(), vec![])]
    }

    /// dq: block (b, query tile) owns [`BLOCK_ROWS`] queries, 16 a warp,
    /// their q and grad_output fragments loaded once, and walks the keys
    /// it sees in tiles of [`TILE_ROWS`] of k and v, double-buffered. Per
    /// tile a warp computes S = q k^T and dP = dO v^T, masks as the
    /// forward, P = 2^(S c - lse2) with its rows' statistics held in
    /// registers, dS = P (dP - D), and dq += dS k (k by transposing
    /// `ldmatrix`); dq times the scale is stored once.
    fn gpu_attention_dq_tc(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let et = specs[0].1;
        let e = et.mlir();
        let tc = Tc { et, frag: format!("vector<4x2x{e}>") };
        let (d, dv, l, s) = (a.d, a.dv, a.l, a.s);
        let (bq, bk) = (BLOCK_ROWS, TILE_ROWS);
        let (q_ld, o_ld, k_ld, v_ld) = (d + 8, dv + 8, d + 8, dv + 8);
        let (q_el, o_el, k_el, v_el) = (bq * q_ld, bq * o_ld, bk * k_ld, bk * v_ld);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let shared = |n: usize| format!("memref<{n}x{e}, #gpu.address_space<workgroup>>");
        let (sq, so, sk, sv) = (shared(q_el), shared(o_el), shared(2 * k_el), shared(2 * v_el));
        let mut k = Kernel::new();
        let dynamic = "memref<?xi8, #gpu.address_space<workgroup>>";
        k.line(&format!("%smem = gpu.dynamic_shared_memory : {dynamic}"));
        let offsets = [q_el, q_el + o_el, q_el + o_el + 2 * k_el].map(|n| k.index(n * 2));
        k.line(&format!("%Qs = memref.view %smem[%c0][] : {dynamic} to {sq}"));
        k.line(&format!("%Os = memref.view %smem[{}][] : {dynamic} to {so}", offsets[0]));
        k.line(&format!("%Ks = memref.view %smem[{}][] : {dynamic} to {sk}", offsets[1]));
        k.line(&format!("%Vs = memref.view %smem[{}][] : {dynamic} to {sv}", offsets[2]));
        let ln = Lanes::new(&mut k);
        let block = k.val("gpu.block_id x");
        let tiles = l.div_ceil(bq);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let mut q_tile = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        if a.causal {
            let last = k.index(tiles - 1);
            q_tile = k.val(&format!("arith.subi {last}, {q_tile} : index"));
        }
        let first = k.mad(&q_tile, bq, "%c0");
        let wm0 = k.mad(&ln.warp, 16, "%c0");
        let (l_c, s_c) = (k.index(l), k.index(s));
        let q_base = k.mad(&b, l * d, "%c0");
        let k_base = k.mad(&b, s * d, "%c0");
        let v_base = k.mad(&b, s * dv, "%c0");
        let o_base = k.mad(&b, l * dv, "%c0");
        let row_base = k.mad(&b, l, "%c0");
        let tid = ln.tid.clone();
        issue(&mut k, &tid, (&format!("%b{Q}"), &ty(Q), &q_base), (&first, &l_c), (bq, d), ("%Qs", &sq, q_ld), "%c0");
        issue(
            &mut k,
            &tid,
            (&format!("%b{DO}"), &ty(DO), &o_base),
            (&first, &l_c),
            (bq, dv),
            ("%Os", &so, o_ld),
            "%c0",
        );
        let issue_kv = |k: &mut Kernel, t0: &str, (ko, vo): (&str, &str)| {
            issue(k, &tid, (&format!("%b{K}"), &ty(K), &k_base), (t0, &s_c), (bk, d), ("%Ks", &sk, k_ld), ko);
            issue(k, &tid, (&format!("%b{V}"), &ty(V), &v_base), (t0, &s_c), (bk, dv), ("%Vs", &sv, v_ld), vo);
        };
        issue_kv(&mut k, "%c0", ("%c0", "%c0"));
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");
        let q_frags: Vec<Vec<String>> = (0..d / 16)
            .map(|ks| {
                let at = ln.a_at(&mut k, &wm0, q_ld);
                let at = k.mad("%c1", ks * 16, &at);
                tc.ldsm(&mut k, "%Qs", &sq, &at, false)
            })
            .collect();
        let o_frags: Vec<Vec<String>> = (0..dv / 16)
            .map(|ks| {
                let at = ln.a_at(&mut k, &wm0, o_ld);
                let at = k.mad("%c1", ks * 16, &at);
                tc.ldsm(&mut k, "%Os", &so, &at, false)
            })
            .collect();
        let (k_b, k_bt, v_b) = (ln.b_at(&mut k, k_ld), ln.bt_at(&mut k, k_ld), ln.b_at(&mut k, v_ld));

        let f32t = DType::F32;
        let (ninf, zero) = (k.float(f64::NEG_INFINITY, f32t), k.float(0.0, f32t));
        let c_exp = k.float(a.scale * std::f64::consts::LOG2_E, f32t);
        let log2e = k.float(std::f64::consts::LOG2_E, f32t);
        let stats_ty = ty(STATS);
        let (bq_c, bk_c, c2) = (k.index(bq), k.index(bk), k.index(2));
        let last_row = k.index(l.saturating_sub(1));
        let n_rows = a.batch * l;
        // This lane's rows g and g + 8 and their statistics (a row past the
        // last reads the last; it is never stored).
        let row_g = k.add(&first, &wm0);
        let row_g = k.add(&row_g, &ln.g);
        let row_g8 = k.mad("%c1", 8, &row_g);
        let mut lse2 = Vec::new();
        let mut delta = Vec::new();
        for row in [&row_g, &row_g8] {
            let r = k.val(&format!("arith.minui {row}, {last_row} : index"));
            let at = k.add(&row_base, &r);
            let x = k.load(&format!("%b{STATS}"), &at, &stats_ty);
            lse2.push(k.fop("mulf", &x, &log2e, f32t));
            let at = k.mad("%c1", n_rows, &at);
            delta.push(k.load(&format!("%b{STATS}"), &at, &stats_ty));
        }
        let hi = if a.causal {
            let end = k.add(&first, &bq_c);
            k.val(&format!("arith.minui {end}, {s_c} : index"))
        } else {
            s_c.clone()
        };
        let dq_n = d / 8 * 4;
        let init = vec![zero.clone(); dq_n];
        let (t0, carried, results) = k.open_reduce_all("%c0", &hi, &bk_c, &init, "f32");
        k.line("nvvm.cp.async.wait.group 0");
        k.line("gpu.barrier");
        let step = k.val(&format!("arith.divui {t0}, {bk_c} : index"));
        let parity = k.val(&format!("arith.remui {step}, {c2} : index"));
        let ko = k.mad(&parity, k_el, "%c0");
        let vo = k.mad(&parity, v_el, "%c0");
        let next_t = k.add(&t0, &bk_c);
        let more = k.val(&format!("arith.cmpi ult, {next_t}, {hi} : index"));
        k.line(&format!("scf.if {more} {{"));
        k.depth += 1;
        let (k_el_c, v_el_c) = (k.index(k_el), k.index(v_el));
        let nko = k.val(&format!("arith.subi {k_el_c}, {ko} : index"));
        let nvo = k.val(&format!("arith.subi {v_el_c}, {vo} : index"));
        issue_kv(&mut k, &next_t, (&nko, &nvo));
        k.close();

        // S = q k^T and dP = dO v^T: 16 rows x bk keys each.
        let frags = bk / 8;
        let mut sc = vec![vec![zero.clone(); 4]; frags];
        let mut dp = vec![vec![zero.clone(); 4]; frags];
        for (ks, qf) in q_frags.iter().enumerate() {
            for np in 0..bk / 16 {
                let at = k.mad("%c1", np * 16 * k_ld + ks * 16, &k_b);
                let at = k.add(&at, &ko);
                let r = tc.ldsm(&mut k, "%Ks", &sk, &at, false);
                sc[2 * np] = tc.mma(&mut k, qf, &r[..2], &sc[2 * np]);
                sc[2 * np + 1] = tc.mma(&mut k, qf, &r[2..], &sc[2 * np + 1]);
            }
        }
        for (ks, of) in o_frags.iter().enumerate() {
            for np in 0..bk / 16 {
                let at = k.mad("%c1", np * 16 * v_ld + ks * 16, &v_b);
                let at = k.add(&at, &vo);
                let r = tc.ldsm(&mut k, "%Vs", &sv, &at, false);
                dp[2 * np] = tc.mma(&mut k, of, &r[..2], &dp[2 * np]);
                dp[2 * np + 1] = tc.mma(&mut k, of, &r[2..], &dp[2 * np + 1]);
            }
        }
        // The mask as the forward's: only in a tile with a key past the
        // warp's first row (causal) or past the last key.
        let tile_end = k.add(&t0, &bk_c);
        let warp_row = k.add(&first, &wm0);
        let edge = if a.causal {
            let after_first = k.mad("%c1", 1, &warp_row);
            Some(k.val(&format!("arith.minui {after_first}, {s_c} : index")))
        } else if !s.is_multiple_of(bk) {
            Some(s_c.clone())
        } else {
            None
        };
        if let Some(edge) = edge {
            let need = k.val(&format!("arith.cmpi ugt, {tile_end}, {edge} : index"));
            let flat: Vec<String> = sc.iter().flatten().cloned().collect();
            let types = vec!["f32".to_string(); flat.len()];
            let out = k.open_if(&need, &types);
            let key0 = k.mad(&ln.c, 2, &t0);
            let mut masked = Vec::new();
            for (ni, fr) in sc.iter().enumerate() {
                for (i, v) in fr.iter().enumerate() {
                    let key = k.mad("%c1", ni * 8 + i % 2, &key0);
                    let mut ok = k.val(&format!("arith.cmpi ult, {key}, {s_c} : index"));
                    if a.causal {
                        let row = if i / 2 == 0 { &row_g } else { &row_g8 };
                        let seen = k.val(&format!("arith.cmpi ule, {key}, {row} : index"));
                        ok = k.val(&format!("arith.andi {ok}, {seen} : i1"));
                    }
                    masked.push(k.val(&format!("arith.select {ok}, {v}, {ninf} : f32")));
                }
            }
            k.else_carry(&masked, &types);
            k.close_carry(&flat, &types);
            let mut out = out.into_iter();
            for v in sc.iter_mut().flatten() {
                *v = out.next().unwrap_or_default();
            }
        }
        // dS = P (dP - D), into dp's registers.
        for (sf, df) in sc.iter().zip(dp.iter_mut()) {
            for i in 0..4 {
                let x = k.fop("mulf", &sf[i], &c_exp, f32t);
                let x = k.fop("subf", &x, &lse2[i / 2], f32t);
                let p = ex2(&mut k, &x);
                let diff = k.fop("subf", &df[i], &delta[i / 2], f32t);
                df[i] = k.fop("mulf", &p, &diff, f32t);
            }
        }
        // dq += dS k, 16 keys at a time.
        let mut next = carried.clone();
        for kk in 0..bk / 16 {
            let da = tc.a_from(&mut k, &dp[2 * kk], &dp[2 * kk + 1]);
            for np in 0..d / 16 {
                let at = k.mad("%c1", kk * 16 * k_ld + np * 16, &k_bt);
                let at = k.add(&at, &ko);
                let r = tc.ldsm(&mut k, "%Ks", &sk, &at, true);
                for (half, regs) in [&r[..2], &r[2..]].into_iter().enumerate() {
                    let at = (2 * np + half) * 4;
                    let acc = tc.mma(&mut k, &da, regs, &next[at..at + 4]);
                    next.splice(at..at + 4, acc);
                }
            }
        }
        k.close_with_all(&next, "f32");

        let scale = k.float(a.scale, f32t);
        let col0 = k.mad(&ln.c, 2, "%c0");
        for (h, row) in [&row_g, &row_g8].into_iter().enumerate() {
            let inside = k.val(&format!("arith.cmpi ult, {row}, {l_c} : index"));
            k.line(&format!("scf.if {inside} {{"));
            k.depth += 1;
            let qb = k.mad(row, d, &q_base);
            let qb = k.add(&qb, &col0);
            for fr in 0..d / 8 {
                for j in 0..2 {
                    let y = k.fop("mulf", &results[fr * 4 + 2 * h + j], &scale, f32t);
                    let at = k.mad("%c1", fr * 8 + j, &qb);
                    k.store(&y, &format!("%b{DQ}"), &at, &ty(DQ));
                }
            }
            k.close();
        }
        let shared_bytes = backward_shared_bytes([d, dv], [d, dv]);
        self.finish_tc(k, specs, (a.batch * tiles) as u32, shared_bytes);
        let cost = (s * (4 * d + 2 * dv + 12)) as u64;
        vec![(self.last(), (a.batch * l).max(1) as u64, cost, (0..specs.len()).collect(), vec![])]
    }
}
