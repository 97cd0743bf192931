use crate::codegen::prelude::*;

/// The largest head size (query/key or value) whose row the fused attention
/// keeps in registers: a thread holds its query row and output accumulator
/// (`d + dv` values) through the loop over keys.
pub(crate) const ONLINE_HEAD: usize = 128;

/// Query rows per block of the fused attention (a thread each).
pub(crate) const ATTENTION_QUERIES: usize = 64;

/// Keys per shared-memory tile of the fused attention.
pub(crate) const ATTENTION_KEYS: usize = 32;

/// Query rows per work item of the CPU's blocked attention
/// ([`Generator::attention_blocked`]): a vector of f32 lanes (one AVX-512
/// register, two AVX ones).
pub(crate) const CPU_QUERY_BLOCK: usize = 16;

/// Keys per step of the blocked attention's score loop: four accumulators
/// share each load of the query tile's column.
pub(crate) const CPU_KEY_UNROLL: usize = 4;

/// Query rows that share each load of a value row in the blocked
/// attention's weighted sum (a divisor of [`CPU_QUERY_BLOCK`]).
pub(crate) const CPU_ROW_GROUP: usize = 4;

/// `ll.attention`'s optional log-sum-exp buffer, after q, k, v and the
/// result.
pub(crate) const LSE: usize = 4;

/// A block of [`CPU_QUERY_BLOCK`] query rows of one batch, from row `i0`,
/// as the CPU's blocked kernels (forward and backward) see it: the keys
/// any of its rows sees, `[0, jn)`, and its rows and `jn` as i32 lanes for
/// the masks.
pub(crate) struct QueryBlock {
    pub(crate) jn: String,
    pub(crate) rows: String,
    jn_lanes: String,
    causal: bool,
    i0: String,
}

impl QueryBlock {
    /// `rc`, `sn`: the block's rows and the keys as index constants; `iota`
    /// the lanes 0..R as i32.
    pub(crate) fn new(k: &mut Kernel, i0: &str, causal: bool, (rc, sn, iota): (&str, &str, &str)) -> Self {
        let vi = format!("vector<{CPU_QUERY_BLOCK}xi32>");
        let jn = if causal {
            let end = k.add(i0, rc);
            k.val(&format!("arith.minui {end}, {sn} : index"))
        } else {
            sn.to_string()
        };
        let i0_32 = k.val(&format!("arith.index_cast {i0} : index to i32"));
        let i0v = k.val(&format!("vector.broadcast {i0_32} : i32 to {vi}"));
        let rows = k.val(&format!("arith.addi {iota}, {i0v} : {vi}"));
        let jn_32 = k.val(&format!("arith.index_cast {jn} : index to i32"));
        let jn_lanes = k.val(&format!("vector.broadcast {jn_32} : i32 to {vi}"));
        QueryBlock { jn, rows, jn_lanes, causal, i0: i0.to_string() }
    }

    /// Opens, for row `t` of the group from block row `rg`, an `scf.if`
    /// on its being inside the op's `l` rows (close it); returns (its row
    /// in the block, in the sequence).
    pub(crate) fn open_group_row(&self, k: &mut Kernel, rg: &str, t: usize, l: usize) -> (String, String) {
        let tc = k.index(t);
        let r = k.add(rg, &tc);
        let i = k.add(&self.i0, &r);
        let lc = k.index(l);
        let inside = k.val(&format!("arith.cmpi ult, {i}, {lc} : index"));
        k.line(&format!("scf.if {inside} {{"));
        k.depth += 1;
        (r, i)
    }

    /// The keys [`CPU_ROW_GROUP`] rows from row `rg` of the block see: to
    /// the group's last row's, causal (an earlier row's later keys have a
    /// zero weight), else all.
    pub(crate) fn group_keys(&self, k: &mut Kernel, rg: &str) -> String {
        if self.causal {
            let end = k.add(&self.i0, rg);
            let end = k.mad("%c1", CPU_ROW_GROUP, &end);
            k.val(&format!("arith.minui {end}, {} : index", self.jn))
        } else {
            self.jn.clone()
        }
    }

    /// Whether each row sees key `jt`: a key before `jn` (and, causal, at
    /// or before the row). A vector of i1.
    pub(crate) fn sees(&self, k: &mut Kernel, jt: &str) -> String {
        let vi = format!("vector<{CPU_QUERY_BLOCK}xi32>");
        let jt32 = k.val(&format!("arith.index_cast {jt} : index to i32"));
        let jv = k.val(&format!("vector.broadcast {jt32} : i32 to {vi}"));
        let mut seen = k.val(&format!("arith.cmpi ult, {jv}, {} : {vi}", self.jn_lanes));
        if self.causal {
            let before = k.val(&format!("arith.cmpi ule, {jv}, {} : {vi}", self.rows));
            seen = k.val(&format!("arith.andi {seen}, {before} : vector<{CPU_QUERY_BLOCK}xi1>"));
        }
        seen
    }

    /// Stores the scores `dots` of keys `j`, `j + 1`, ... key-major into
    /// `tile` (`-inf` where a row does not see the key) and returns the
    /// running max per row `max` taken over them.
    pub(crate) fn store_scores(
        &self,
        k: &mut Kernel,
        j: &str,
        dots: &[String],
        (tile, tile_ty): (&str, &str),
        ninf: &str,
        max: &str,
    ) -> String {
        const R: usize = CPU_QUERY_BLOCK;
        let vr = format!("vector<{R}xf32>");
        let mut m = max.to_string();
        for (t, dot) in dots.iter().enumerate() {
            let tc = k.index(t);
            let jt = k.add(j, &tc);
            let seen = self.sees(k, &jt);
            let sv = k.val(&format!("arith.select {seen}, {dot}, {ninf} : vector<{R}xi1>, {vr}"));
            let at = k.mad(&jt, R, "%c0");
            k.vstore(&sv, tile, &at, tile_ty, R);
            m = k.val(&format!("llvm.intr.maxnum({m}, {sv}) : ({vr}, {vr}) -> {vr}"));
        }
        m
    }
}

/// Row `r` of a block's query tile, transposed and scaled: `qt[x][r] =
/// q[qrow][x] * scale` for x < d (buffer `q` of type `ty`).
pub(crate) fn store_scaled_query(
    k: &mut Kernel,
    (q, ty): (&str, &str),
    (qrow, r): (&str, &str),
    d: usize,
    scale: &str,
    (qt, qt_ty): (&str, &str),
) {
    let qbase = k.mad(qrow, d, "%c0");
    let dc = k.index(d);
    let x = k.open("%c0", &dc);
    let qi = k.add(&qbase, &x);
    let qv = k.load(q, &qi, ty);
    let qs = k.fop("mulf", &qv, scale, DType::F32);
    let at = k.mad(&x, CPU_QUERY_BLOCK, r);
    k.store(&qs, qt, &at, qt_ty);
    k.close();
}

/// For [`CPU_ROW_GROUP`] rows of a block from row `rg`: each row's sum
/// over keys `[0, keys)` of its weight in `tile` (key-major, `tile[j][r]`)
/// times the key's row of `n` elements (from `row_of(j)` in buffer `buf`,
/// type `ty`), each key's row loaded once for the group. Returns the rows'
/// vectors. `zero`: a zero vector of `n`.
pub(crate) fn group_sums(
    k: &mut Kernel,
    (rg, keys): (&str, &str),
    (tile, tile_ty): (&str, &str),
    (buf, ty): (&str, &str),
    n: usize,
    row_of: &dyn Fn(&mut Kernel, &str) -> String,
    zero: &str,
) -> Vec<String> {
    let vn = format!("vector<{n}xf32>");
    let (j, accs, sums) = k.open_reduce_all("%c0", keys, "%c1", &vec![zero.to_string(); CPU_ROW_GROUP], &vn);
    let at = row_of(k, &j);
    let x = k.vload(buf, &at, ty, n);
    let base = k.mad(&j, CPU_QUERY_BLOCK, rg);
    let mut next = Vec::new();
    for (t, acc) in accs.iter().enumerate() {
        let tc = k.index(t);
        let at = k.add(&base, &tc);
        let w = k.load(tile, &at, tile_ty);
        let wb = k.val(&format!("vector.broadcast {w} : f32 to {vn}"));
        next.push(k.val(&format!("vector.fma {wb}, {x}, {acc} : {vn}")));
    }
    k.close_with_all(&next, &vn);
    sums
}

/// The dot products of [`CPU_KEY_UNROLL`] keys from key `j` (each clamped
/// to `last_key`) with a transposed tile of a block's rows (`tile[x][r]`,
/// `n` rows of x): per x, the rows' vector times each key's element
/// broadcast, one accumulator per key (no reduction across lanes). Key
/// row `jt`'s elements start at `row_of(jt)` in buffer `buf` (type `ty`).
/// `zeros`: a zero vector of the rows.
pub(crate) fn tile_products(
    k: &mut Kernel,
    (j, last_key): (&str, &str),
    (tile, tile_ty): (&str, &str),
    (buf, ty): (usize, &str),
    n: usize,
    row_of: &dyn Fn(&mut Kernel, &str) -> String,
    zeros: &str,
) -> Vec<String> {
    let vr = format!("vector<{CPU_QUERY_BLOCK}xf32>");
    let krows: Vec<String> = (0..CPU_KEY_UNROLL)
        .map(|t| {
            let tc = k.index(t);
            let jt = k.add(j, &tc);
            let jt = k.val(&format!("arith.minui {jt}, {last_key} : index"));
            row_of(k, &jt)
        })
        .collect();
    let nc = k.index(n);
    let (x, accs, dots) = k.open_reduce_all("%c0", &nc, "%c1", &vec![zeros.to_string(); CPU_KEY_UNROLL], &vr);
    let off = k.mad(&x, CPU_QUERY_BLOCK, "%c0");
    let tx = k.vload(tile, &off, tile_ty, CPU_QUERY_BLOCK);
    let mut next = Vec::new();
    for (t, acc) in accs.iter().enumerate() {
        let ki = k.add(&krows[t], &x);
        let kv = k.load(&format!("%b{buf}"), &ki, ty);
        let kvb = k.val(&format!("vector.broadcast {kv} : f32 to {vr}"));
        next.push(k.val(&format!("vector.fma {tx}, {kvb}, {acc} : {vr}")));
    }
    k.close_with_all(&next, &vr);
    dots
}

/// An `ll.attention`'s sizes: `batch` independent (q, k, v) of `l` queries
/// and `s` keys, query/key head size `d`, value/output head size `dv`.
pub(crate) struct AttentionShape {
    pub(crate) batch: usize,
    pub(crate) l: usize,
    pub(crate) s: usize,
    pub(crate) d: usize,
    pub(crate) dv: usize,
    pub(crate) scale: f64,
    pub(crate) causal: bool,
    pub(crate) t: DType,
}

impl AttentionShape {
    pub(crate) fn of(op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Self {
        let (q, kv) = (&specs[0].0, &specs[1].0);
        let rank = q.len();
        let d = q[rank - 1];
        AttentionShape {
            batch: q[..rank - 2].iter().product(),
            l: q[rank - 2],
            s: kv[rank - 2],
            d,
            dv: specs[2].0[rank - 1],
            scale: float_attr(op, "scale").unwrap_or(1.0 / (d as f64).sqrt()),
            causal: has(op, "causal"),
            t: compute(specs[0].1),
        }
    }

    /// `vector<n x t>`
    pub(crate) fn vector(&self, n: usize) -> String {
        format!("vector<{n}x{}>", self.t.mlir())
    }

    /// The query row at `base` of `buf` (a `vector<d>`), times the scale so
    /// that a key's score is one dot product.
    pub(crate) fn scaled_query(&self, k: &mut Kernel, buf: &str, base: &str, ty: &str) -> String {
        let vq = self.vector(self.d);
        let q = k.vload(buf, base, ty, self.d);
        let sc =
            k.val(&format!("arith.constant dense<{}> : {vq}", crate::nn::ops::float_literal(self.scale, DType::F32)));
        k.val(&format!("arith.mulf {q}, {sc} : {vq}"))
    }

    /// The online softmax's state before any key: running max -inf, sum 0,
    /// output accumulator 0; as (value, type) pairs.
    pub(crate) fn initial_state(&self, k: &mut Kernel) -> Vec<(String, String)> {
        let (f, vo) = (self.t.mlir().to_string(), self.vector(self.dv));
        let ninf = k.float(f64::NEG_INFINITY, self.t);
        let zero = k.float(0.0, self.t);
        let o = k.val(&format!("arith.constant dense<0.0> : {vo}"));
        vec![(ninf, f.clone()), (zero, f), (o, vo)]
    }

    /// Folds keys `0..hi` into the online-softmax `state` (max m, sum l,
    /// accumulator o, see [`AttentionShape::initial_state`]): per key the
    /// score s = q . k, then m' = max(m, s), l' = l e^(m-m') + e^(s-m'),
    /// o' = o e^(m-m') + e^(s-m') v, with one exp since m' is m or s.
    /// `rows(j)` gives key j's row start in `keys` and in `values`
    /// (buffer, type). Returns the state after the last key; the output row
    /// is o / l.
    pub(crate) fn online_keys(
        &self,
        k: &mut Kernel,
        q: &str,
        state: &[(String, String)],
        hi: &str,
        keys: (&str, &str),
        values: (&str, &str),
        rows: impl Fn(&mut Kernel, &str) -> (String, String),
    ) -> Vec<(String, String)> {
        let (t, f) = (self.t, self.t.mlir());
        let (vk, vo) = (self.vector(self.d), self.vector(self.dv));
        let types: Vec<String> = state.iter().map(|(_, ty)| ty.clone()).collect();
        let (j, acc, results) = k.open_carry("%c0", hi, "%c1", state);
        let (kr, vr) = rows(k, &j);
        let kv = k.vload(keys.0, &kr, keys.1, self.d);
        let prod = k.val(&format!("arith.mulf {q}, {kv} : {vk}"));
        let score = k.val(&format!("vector.reduction <add>, {prod} fastmath<reassoc,contract> : {vk} into {f}"));
        let (m, l, o) = (&acc[0], &acc[1], &acc[2]);
        // A key over the running max rescales what came before by e^(m-s)
        // and counts 1; any other adds e^(s-m). The max rises seldom after
        // the first keys.
        let rises = k.val(&format!("arith.cmpf ogt, {score}, {m} : {f}"));
        let next = k.open_if(&rises, &types);
        let dm = k.fop("subf", m, &score, t);
        let alpha = k.val(&format!("math.exp {dm} : {f}"));
        let one = k.float(1.0, t);
        let kept = k.fop("mulf", l, &alpha, t);
        let l1 = k.fop("addf", &kept, &one, t);
        let v = k.vload(values.0, &vr, values.1, self.dv);
        let a = k.val(&format!("vector.broadcast {alpha} : {f} to {vo}"));
        let o1 = k.val(&format!("vector.fma {o}, {a}, {v} : {vo}"));
        k.else_carry(&[score.clone(), l1, o1], &types);
        let ds = k.fop("subf", &score, m, t);
        let p = k.val(&format!("math.exp {ds} : {f}"));
        let l1 = k.fop("addf", l, &p, t);
        let v = k.vload(values.0, &vr, values.1, self.dv);
        let pb = k.val(&format!("vector.broadcast {p} : {f} to {vo}"));
        let o1 = k.val(&format!("vector.fma {pb}, {v}, {o} : {vo}"));
        k.close_carry(&[m.clone(), l1, o1], &types);
        k.close_carry(&next, &types);
        results.into_iter().zip(types).collect()
    }

    /// Where the forward keeps each query row's log-sum-exp for its
    /// backward (`ll.attention`'s optional `lse`): the buffer's type.
    pub(crate) fn lse_buffer(specs: &[(Vec<usize>, DType)]) -> Option<String> {
        specs.get(LSE).map(|(shape, t)| flat_type(shape, *t))
    }

    /// Stores log-sum-exp `max + log(sum)` (compute type, natural log) of
    /// flat query row `row` into the `lse` buffer (type `ty`, f32).
    pub(crate) fn store_lse(&self, k: &mut Kernel, (max, sum): (&str, &str), row: &str, ty: &str) {
        let f = self.t.mlir();
        let lg = k.val(&format!("math.log {sum} : {f}"));
        let lse = k.fop("addf", max, &lg, self.t);
        let lse = if self.t == DType::F64 { k.val(&format!("arith.truncf {lse} : f64 to f32")) } else { lse };
        k.store(&lse, &format!("%b{LSE}"), row, ty);
    }

    /// Stores the output row o / l of `state` at `base` of `buf`.
    pub(crate) fn store_output(&self, k: &mut Kernel, state: &[(String, String)], buf: &str, base: &str, ty: &str) {
        let (f, vo) = (self.t.mlir(), self.vector(self.dv));
        let l = k.val(&format!("vector.broadcast {} : {f} to {vo}", state[1].0));
        let o = k.val(&format!("arith.divf {}, {l} : {vo}", state[2].0));
        k.vstore(&o, buf, base, ty, self.dv);
    }
}

impl Generator {
    /// Attention, fused: on the GPU FlashAttention's online softmax, one
    /// query row per thread with key/value tiles in shared memory (see
    /// `gpu_attention`); on the CPU the two-pass row kernel, which head
    /// sizes over [`ONLINE_HEAD`] (and empty operands) take everywhere.
    pub(crate) fn attention(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let a = AttentionShape::of(op, specs);
        if [a.l, a.s, a.d, a.dv].contains(&0) || a.d > ONLINE_HEAD || a.dv > ONLINE_HEAD {
            return self.attention_rows(&a, specs);
        }
        self.target.clone().attention(self, &a, specs)
    }

    /// One query row per work item: scores into a stack row, softmax, then
    /// the weighted sum of values: the CPU's form, and every target's for
    /// head sizes too large to keep a row's query and output in registers.
    /// On the CPU it beats the online softmax a key at a time (the
    /// transformer block's attention 2.2-2.5 -> 1.1-1.5 ms a step): its
    /// scores are independent dot products, where the online form chains
    /// every key's exp and rescale through the running state.
    pub(crate) fn attention_rows(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let t = a.t;
        let f = t.mlir();
        let (l, d, s_len, dv, batch, scale, causal) = (a.l, a.d, a.s, a.dv, a.batch, a.scale, a.causal);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (tq, tk, tv, to) = (ty(0), ty(1), ty(2), ty(3));
        let row_ty = format!("memref<{}x{f}>", s_len.max(1));
        let mut k = Kernel::new();
        let heap = self.target.heap_scratch();
        let scores = k.scratch(s_len, t, heap);
        let out_ty = format!("memref<{}x{f}>", dv.max(1));
        let out_row = k.scratch(dv, t, heap);
        let zero = k.float(0.0, t);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let sc = k.float(scale, t);
        let (lc, dc, sn, dvc) = (k.index(l), k.index(d), k.index(s_len), k.index(dv));
        let w = k.open("%begin", "%end");
        let b = k.val(&format!("arith.divui {w}, {lc} : index"));
        let i = k.val(&format!("arith.remui {w}, {lc} : index"));
        let qb = k.mul(&w, &dc);
        let kb = k.mad(&b, s_len * d, "%c0");
        let vb = k.mad(&b, s_len * dv, "%c0");
        // Causal: key j is visible to query i when j <= i; the loops stop
        // there instead of computing scores that the mask would discard.
        let jn = if causal {
            let i1 = k.add(&i, "%c1");
            k.val(&format!("arith.minui {i1}, {sn} : index"))
        } else {
            sn.clone()
        };
        let (j, mx, m) = k.open_reduce("%c0", &jn, &ninf, f);
        let (x, acc, dot) = k.open_reduce("%c0", &dc, &zero, f);
        let qi = k.add(&qb, &x);
        let qv = k.load("%b0", &qi, &tq);
        let kr = k.mad(&j, d, &kb);
        let ki = k.add(&kr, &x);
        let kv_ = k.load("%b1", &ki, &tk);
        let pr = k.val(&format!("arith.mulf {qv}, {kv_} fastmath<fast> : {f}"));
        let next = k.val(&format!("arith.addf {acc}, {pr} fastmath<fast> : {f}"));
        k.close_with(&next, f);
        let sv = k.fop("mulf", &dot, &sc, t);
        k.store(&sv, &scores, &j, &row_ty);
        let nm = k.row_max(&mx, &sv, t);
        k.close_with(&nm, f);
        let (j, acc, sum) = k.open_reduce("%c0", &jn, &zero, f);
        let sv = k.load(&scores, &j, &row_ty);
        let dd = k.fop("subf", &sv, &m, t);
        let e = k.val(&format!("math.exp {dd} : {f}"));
        k.store(&e, &scores, &j, &row_ty);
        let next = k.row_sum(&acc, &e, t);
        k.close_with(&next, f);
        if let Some(lse_ty) = AttentionShape::lse_buffer(specs) {
            a.store_lse(&mut k, (&m, &sum), &w, &lse_ty);
        }
        // out[x] = sum_j p_j V[j, x] / sum, accumulated a key at a time over
        // the contiguous row of V (each x still sums j in order).
        let ob = k.mul(&w, &dvc);
        let x = k.open("%c0", &dvc);
        k.store(&zero, &out_row, &x, &out_ty);
        k.close();
        let j = k.open("%c0", &jn);
        let p = k.load(&scores, &j, &row_ty);
        let vr = k.mad(&j, dv, &vb);
        let x = k.open("%c0", &dvc);
        let vi = k.add(&vr, &x);
        let v = k.load("%b2", &vi, &tv);
        let cur = k.load(&out_row, &x, &out_ty);
        let pv = k.fop("mulf", &p, &v, t);
        let next = k.fop("addf", &cur, &pv, t);
        k.store(&next, &out_row, &x, &out_ty);
        k.close();
        k.close();
        let x = k.open("%c0", &dvc);
        let o = k.load(&out_row, &x, &out_ty);
        let r = k.fop("divf", &o, &sum, t);
        let oi = k.add(&ob, &x);
        k.store(&r, "%b3", &oi, &to);
        k.close();
        k.close();
        self.one(k, specs, batch * l, 2 * s_len * (d + dv) + 8 * s_len)
    }

    /// The CPU's attention in f32: a work item is a block of
    /// [`CPU_QUERY_BLOCK`] query rows of one batch, so the scores are a
    /// small GEMM rather than one horizontal dot product per key. The
    /// block's queries, scaled and transposed into a stack tile (`qt[x][r]`),
    /// meet [`CPU_KEY_UNROLL`] keys at a time: per head element one vector
    /// of the 16 queries times each key's element broadcast, accumulated in
    /// registers, with no reduction across lanes (the row kernel's
    /// per-key reduction was most of its time at small heads). The scores,
    /// masked (causal: key j for rows i >= j; keys past the last one),
    /// go key-major to a scratch tile with their running max per row;
    /// exponentials and sums follow over that tile, a vector of rows per
    /// key; then each row sums its values weighted by its probabilities,
    /// its output row in registers.
    pub(crate) fn attention_blocked(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        const R: usize = CPU_QUERY_BLOCK;
        const U: usize = CPU_KEY_UNROLL;
        let (l, d, s_len, dv, batch, causal) = (a.l, a.d, a.s, a.dv, a.batch, a.causal);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (tq, tk, tv, to) = (ty(0), ty(1), ty(2), ty(3));
        let vr = format!("vector<{R}xf32>");
        let vo = format!("vector<{dv}xf32>");
        let vi = format!("vector<{R}xi32>");
        let mut k = Kernel::new();
        let heap = self.target.heap_scratch();
        // Scratch for the whole call: the transposed query block, the
        // scores (keys rounded up to the unroll), each row's max and sum.
        let keys_up = s_len.div_ceil(U) * U;
        let (qt, st) = (k.scratch(d * R, DType::F32, heap), k.scratch(keys_up * R, DType::F32, heap));
        let (qt_ty, st_ty) = (format!("memref<{}xf32>", d * R), format!("memref<{}xf32>", keys_up * R));
        let (stats, stats_ty) = (k.scratch(2 * R, DType::F32, heap), format!("memref<{}xf32>", 2 * R));
        let blocks = l.div_ceil(R);
        let (blocks_c, lc, sn, uc, rc) = (k.index(blocks), k.index(l), k.index(s_len), k.index(U), k.index(R));
        let (last_row, last_key) = (k.index(l - 1), k.index(s_len - 1));
        let scale = k.float(a.scale, DType::F32);
        let ninf = k.val(&format!("arith.constant dense<0xFF800000> : {vr}"));
        let zeros = k.val(&format!("arith.constant dense<0.0> : {vr}"));
        let zero_o = k.val(&format!("arith.constant dense<0.0> : {vo}"));
        let lanes: Vec<String> = (0..R).map(|r| r.to_string()).collect();
        let iota = k.val(&format!("arith.constant dense<[{}]> : {vi}", lanes.join(", ")));
        let w = k.open("%begin", "%end");
        let b = k.val(&format!("arith.divui {w}, {blocks_c} : index"));
        let blk = k.val(&format!("arith.remui {w}, {blocks_c} : index"));
        let i0 = k.mul(&blk, &rc);
        let row0 = k.mul(&b, &lc);
        let kb = k.mad(&b, s_len * d, "%c0");
        let vb = k.mad(&b, s_len * dv, "%c0");
        // qt[x][r] = q[min(i0 + r, l - 1)][x] * scale.
        let r = k.open("%c0", &rc);
        let i = k.add(&i0, &r);
        let i = k.val(&format!("arith.minui {i}, {last_row} : index"));
        let qrow = k.add(&row0, &i);
        store_scaled_query(&mut k, ("%b0", &tq), (&qrow, &r), d, &scale, (&qt, &qt_ty));
        k.close();
        let block = QueryBlock::new(&mut k, &i0, causal, (&rc, &sn, &iota));
        let jn = block.jn.clone();
        // Scores, U keys at a time, and the running max per row.
        let (j, mx, m) = k.open_reduce_all("%c0", &jn, &uc, std::slice::from_ref(&ninf), &vr);
        let key_row = |k: &mut Kernel, jt: &str| k.mad(jt, d, &kb);
        let dots = tile_products(&mut k, (&j, &last_key), (&qt, &qt_ty), (1, &tk), d, &key_row, &zeros);
        let m_now = block.store_scores(&mut k, &j, &dots, (&st, &st_ty), &ninf, &mx[0]);
        k.close_with_all(&[m_now], &vr);
        let m = &m[0];
        // p = e^(s - max), in place, and the sum per row.
        let (j, acc, sum) = k.open_reduce("%c0", &jn, &zeros, &vr);
        let at = k.mad(&j, R, "%c0");
        let sv = k.vload(&st, &at, &st_ty, R);
        let dd = k.val(&format!("arith.subf {sv}, {m} : {vr}"));
        let e = k.val(&format!("math.exp {dd} : {vr}"));
        k.vstore(&e, &st, &at, &st_ty, R);
        let total = k.val(&format!("arith.addf {acc}, {e} : {vr}"));
        k.close_with(&total, &vr);
        k.vstore(m, &stats, "%c0", &stats_ty, R);
        k.vstore(&sum, &stats, &rc, &stats_ty, R);
        // Rows G at a time (one load of each value row for all G): out =
        // sum_j p_j v_j / sum. Causal, the group's keys run to its last
        // row's; an earlier row's later keys have p = 0 (masked to -inf).
        let gc = k.index(CPU_ROW_GROUP);
        let rg = k.open_step("%c0", &rc, &gc);
        let seen = block.group_keys(&mut k, &rg);
        let value_row = |k: &mut Kernel, j: &str| k.mad(j, dv, &vb);
        let outs = group_sums(&mut k, (&rg, &seen), (&st, &st_ty), ("%b2", &tv), dv, &value_row, &zero_o);
        for (t, o) in outs.iter().enumerate() {
            let (r, i) = block.open_group_row(&mut k, &rg, t, l);
            let mr = k.load(&stats, &r, &stats_ty);
            let sr = k.add(&rc, &r);
            let lr = k.load(&stats, &sr, &stats_ty);
            let lb = k.val(&format!("vector.broadcast {lr} : f32 to {vo}"));
            let out = k.val(&format!("arith.divf {o}, {lb} : {vo}"));
            let w_row = k.add(&row0, &i);
            let ob = k.mad(&w_row, dv, "%c0");
            k.vstore(&out, "%b3", &ob, &to, dv);
            if let Some(lse_ty) = AttentionShape::lse_buffer(specs) {
                a.store_lse(&mut k, (&mr, &lr), &w_row, &lse_ty);
            }
            k.close();
        }
        k.close();
        k.close();
        self.one(k, specs, batch * blocks, R * (2 * s_len * (d + dv) + 8 * s_len))
    }

    /// Fused attention, FlashAttention-style: block (b, tile) takes
    /// [`ATTENTION_QUERIES`] query rows of batch b, a thread each, and walks
    /// the keys in tiles of [`ATTENTION_KEYS`]: the block copies a tile's
    /// key and value rows into shared memory (coalesced, every thread
    /// reading the same key then, so a broadcast), and each thread folds
    /// those keys into its row's online softmax, its query row and output
    /// accumulator in registers. Scores never reach memory. Causal blocks
    /// stop at the tile past their last row, and each thread at its own
    /// row. Threads past the last row compute the last row again and store
    /// nothing, so every thread takes part in each copy and barrier.
    pub(crate) fn gpu_attention(&mut self, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let t = a.t;
        let f = t.mlir();
        let (bq, bk) = (ATTENTION_QUERIES, ATTENTION_KEYS);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (tq, tk, tv, to) = (ty(0), ty(1), ty(2), ty(3));
        let shared = |n: usize| format!("memref<{n}x{f}, #gpu.address_space<workgroup>>");
        let (ks, vs) = (shared(bk * a.d), shared(bk * a.dv));
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let tiles = a.l.div_ceil(bq);
        let tiles_c = k.index(tiles);
        let b = k.val(&format!("arith.divui {block}, {tiles_c} : index"));
        let tile = k.val(&format!("arith.remui {block}, {tiles_c} : index"));
        let first = k.mad(&tile, bq, "%c0");
        let i = k.add(&first, &tid);
        let (last_row, sn, bkc, bqc) = (k.index(a.l - 1), k.index(a.s), k.index(bk), k.index(bq));
        let row = k.val(&format!("arith.minui {i}, {last_row} : index"));
        let w = k.mad(&b, a.l, &row);
        let query = k.mad(&w, a.d, "%c0");
        let q = a.scaled_query(&mut k, "%b0", &query, &tq);
        let kb = k.mad(&b, a.s * a.d, "%c0");
        let vb = k.mad(&b, a.s * a.dv, "%c0");
        // Keys this block needs: all, or (causal) up to its last row.
        let block_keys = if a.causal {
            let end = k.add(&first, &bqc);
            k.val(&format!("arith.minui {end}, {sn} : index"))
        } else {
            sn.clone()
        };
        let last_key = k.index(a.s - 1);
        let init = a.initial_state(&mut k);
        let (t0, state, results) = k.open_carry("%c0", &block_keys, &bkc, &init);
        // The tile's key and value rows into shared memory (rows past the
        // last key repeat it; no thread reads them).
        for (buf, width, ty, dst, base) in [("%b1", a.d, &tk, ("%Ks", &ks), &kb), ("%b2", a.dv, &tv, ("%Vs", &vs), &vb)]
        {
            let n = k.index(bk * width);
            let e = k.open_step(&tid, &n, &bqc);
            let wc = k.index(width);
            let r = k.val(&format!("arith.divui {e}, {wc} : index"));
            let c = k.val(&format!("arith.remui {e}, {wc} : index"));
            let key = k.add(&t0, &r);
            let key = k.val(&format!("arith.minui {key}, {last_key} : index"));
            let src = k.mad(&key, width, base);
            let src = k.add(&src, &c);
            let v = k.load(buf, &src, ty);
            k.store(&v, dst.0, &e, dst.1);
            k.close();
        }
        k.line("gpu.barrier");
        // This thread's keys of the tile: up to the last key, and (causal)
        // up to its row.
        let left = k.val(&format!("arith.subi {sn}, {t0} : index"));
        let mut count = k.val(&format!("arith.minui {left}, {bkc} : index"));
        if a.causal {
            let seen = k.add(&row, "%c1");
            let seen = k.val(&format!("arith.maxui {seen}, {t0} : index"));
            let seen = k.val(&format!("arith.subi {seen}, {t0} : index"));
            count = k.val(&format!("arith.minui {count}, {seen} : index"));
        }
        let rows = |k: &mut Kernel, j: &str| (k.mad(j, a.d, "%c0"), k.mad(j, a.dv, "%c0"));
        let types: Vec<String> = init.iter().map(|(_, ty)| ty.clone()).collect();
        let state: Vec<(String, String)> = state.into_iter().zip(types.iter().cloned()).collect();
        let next = a.online_keys(&mut k, &q, &state, &count, ("%Ks", &ks), ("%Vs", &vs), rows);
        k.line("gpu.barrier");
        let next: Vec<String> = next.into_iter().map(|(v, _)| v).collect();
        k.close_carry(&next, &types);
        let results: Vec<(String, String)> = results.into_iter().zip(types).collect();
        let lc = k.index(a.l);
        let inside = k.val(&format!("arith.cmpi ult, {i}, {lc} : index"));
        k.line(&format!("scf.if {inside} {{"));
        k.depth += 1;
        let out = k.mad(&w, a.dv, "%c0");
        a.store_output(&mut k, &results, "%b3", &out, &to);
        if let Some(lse_ty) = AttentionShape::lse_buffer(specs) {
            a.store_lse(&mut k, (&results[0].0, &results[1].0), &w, &lse_ty);
        }
        k.close();
        let blocks = (a.batch * tiles).max(1) as u32;
        let name =
            self.finish_gpu_func(k, specs, &[("%Ks", ks.clone()), ("%Vs", vs.clone())], [blocks, 1, 1], bq as u32);
        let work = (a.batch * a.l).max(1) as u64;
        let cost = (2 * a.s * (a.d + a.dv) + 8 * a.s) as u64;
        vec![(name, work, cost, (0..specs.len()).collect(), vec![])]
    }
}
