use crate::codegen::prelude::*;
use crate::codegen::target::gpu::{REDUCE_BLOCK, block_sum};

/// An `ll.reduce` over the leading dims of a row-major input: `rows`
/// rows of `cols` contiguous outputs; `kind` 0 sum, 1 mean, 2 max.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ColumnReduce {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) kind: i64,
    /// The `partials` scratch operand, where the op has one.
    pub(crate) partials: Option<usize>,
}

impl Generator {
    /// `out[o] = combine over the reduced coordinates of input`.
    pub(crate) fn reduce(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels> {
        let (shape, st) = (&specs[0].0, specs[0].1);
        let t = compute(st);
        let dims: Vec<usize> = i64_array(op, "dims").unwrap_or_default().into_iter().map(|d| d as usize).collect();
        let kind = int_attr(op, "kind").unwrap_or(0);
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
        let outs: usize = kept.iter().map(|&d| shape[d]).product();
        let red: usize = dims.iter().map(|&d| shape[d]).product();
        let all: Vec<usize> = (0..specs.len()).collect();
        // The scratch of the split form (`ll.reduce`'s `partials`).
        let partials = (specs.len() > 2).then_some(2);
        // One output, a sum or mean of every element (a loss's): one team,
        // or slices of it then their sums in order.
        if outs == 1 && kind != 2 {
            if let Some(p) = partials
                && let Some(kernels) = self.target.clone().reduce_whole_split(self, red, kind == 1, p, specs)
            {
                return Ok(kernels);
            }
            self.reduce_whole(red, kind == 1, specs);
            return Ok(vec![(self.last(), 1, (red * 3) as u64, all, vec![])]);
        }
        // Reduced dims leading, kept dims trailing: `input[r][o]` with the
        // outputs contiguous (a bias's gradient over the batch's rows).
        if dims.iter().enumerate().all(|(i, &d)| d == i)
            && let Some(kernels) =
                self.target.clone().reduce_columns(self, ColumnReduce { rows: red, cols: outs, kind, partials }, specs)
        {
            return Ok(kernels);
        }
        let (mut k, res, o) = if self.target.reduce_runs() {
            // On the CPU ([`TargetInfo::reduce_runs`]) adjacent dims alike
            // (both reduced, or both kept) merge: the reduced ones then run as
            // nested loops, the innermost over a
            // contiguous run where the input's last dim is reduced (a batch
            // norm's statistics over N, H, W of NCHW: 16 runs of H x W per
            // channel), which LLVM vectorises; one loop over every reduced
            // element unravelled each index (EfficientNet-B0's 403 reductions
            // took 3.6 ms a step). The sum is reassociated (`fast`, as before),
            // the same bits on every run: its vector lanes are partial sums,
            // closer to the exact result than one running sum (MobileNetV2's
            // early gradients went from 3.2e-2 to 3e-5 of float64's, where
            // PyTorch's f32 ones are 3.2e-2 too).
            let mut merged: Vec<(usize, bool)> = Vec::new();
            for (d, &n) in shape.iter().enumerate() {
                let reduced = dims.contains(&d);
                match merged.last_mut() {
                    Some((m, r)) if *r == reduced => *m *= n,
                    _ => merged.push((n, reduced)),
                }
            }
            let mshape: Vec<usize> = merged.iter().map(|m| m.0).collect();
            let mstrides = row_major_strides(&mshape);
            let f = t.mlir();
            let mut k = Kernel::new();
            let init = if kind == 2 { k.float(f64::NEG_INFINITY, t) } else { k.float(0.0, t) };
            let o = k.open("%begin", "%end");
            // input offset of the kept coordinates
            let mut rem = o.clone();
            let mut base = "%c0".to_string();
            for (d, _) in merged.iter().enumerate().rev().filter(|(_, m)| !m.1) {
                let nd = k.index(mshape[d]);
                let c = k.val(&format!("arith.remui {rem}, {nd} : index"));
                rem = k.val(&format!("arith.divui {rem}, {nd} : index"));
                base = k.mad(&c, mstrides[d], &base);
            }
            let reduced: Vec<usize> = (0..merged.len()).filter(|&d| merged[d].1).collect();
            let mut acc = init.clone();
            let mut off = base;
            let mut results = Vec::new();
            for &d in &reduced {
                let n = k.index(mshape[d].max(1));
                let (i, a, r) = k.open_reduce("%c0", &n, &acc, f);
                off = k.mad(&i, mstrides[d], &off);
                acc = a;
                results.push(r);
            }
            let v = k.load("%b0", &off, &flat_type(shape, st));
            let next = if kind == 2 {
                k.val(&format!("arith.maximumf {acc}, {v} : {f}"))
            } else {
                k.val(&format!("arith.addf {acc}, {v} fastmath<fast> : {f}"))
            };
            // Each loop yields its sum to the one around it.
            let mut yielded = next;
            for r in results.iter().rev() {
                k.close_with(&yielded, f);
                yielded = r.clone();
            }
            (k, yielded, o)
        } else {
            // One loop over every reduced element, its index unravelled
            // (the GPU's: a thread an output, as checked on a device).
            let strides = row_major_strides(shape);
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
            (k, res, o)
        };
        let value = if kind == 1 {
            let c = k.float(red.max(1) as f64, t);
            k.fop("divf", &res, &c, t)
        } else {
            res
        };
        k.store(&value, "%b1", &o, &flat_type(&specs[1].0, specs[1].1));
        k.close();
        self.finish(k, specs);
        Ok(vec![(self.last(), outs.max(1) as u64, (red * 3) as u64, all, vec![])])
    }

    /// The sum (or mean) of all `n` elements of buffer 0 into buffer 1, by
    /// one team: its threads take every step-th element (on the GPU a block
    /// of 1024 threads, the consecutive elements of a step
    /// read together), their partial sums combined in a fixed order, so a
    /// run gives the same bits every time. The generic form gave the one
    /// output to one thread: 5.4 ms for 6.3 M elements on an H200.
    fn reduce_whole(&mut self, n: usize, mean: bool, specs: &[(Vec<usize>, DType)]) {
        let in_ty = flat_type(&specs[0].0, specs[0].1);
        self.team_sum_of(n, mean.then_some(n), 1, specs, |k, i| k.load("%b0", i, &in_ty));
    }

    /// The GPU's split form of [`Self::reduce_whole`]: `slices` blocks of
    /// [`REDUCE_BLOCK`] threads each sum a contiguous slice of the `n`
    /// elements (a block's partial sums combined in a fixed order) into
    /// buffer `p`, then one team sums the slices in order (divided by n for
    /// a mean): the same bits on every run.
    pub(crate) fn gpu_reduce_whole_split(
        &mut self,
        n: usize,
        mean: bool,
        p: usize,
        specs: &[(Vec<usize>, DType)],
    ) -> Kernels {
        let t = compute(specs[0].1);
        let f = t.mlir();
        let (in_ty, p_ty) = (flat_type(&specs[0].0, specs[0].1), flat_type(&specs[p].0, specs[p].1));
        let slices = numel(&specs[p].0).max(1);
        let per = n.div_ceil(slices);
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let (per_c, nc, step) = (k.index(per), k.index(n), k.index(REDUCE_BLOCK));
        let lo = k.mul(&block, &per_c);
        let end = k.add(&lo, &per_c);
        let hi = k.val(&format!("arith.minui {end}, {nc} : index"));
        let start = k.add(&lo, &tid);
        let zero = k.float(0.0, t);
        let (i, accs, parts) = k.open_reduce_all(&start, &hi, &step, std::slice::from_ref(&zero), f);
        let v = k.load("%b0", &i, &in_ty);
        let next = k.val(&format!("arith.addf {}, {v} fastmath<fast> : {f}", accs[0]));
        k.close_with_all(&[next], f);
        let total = block_sum(&mut k, &tid, &parts[0], t);
        let first = k.val(&format!("arith.cmpi eq, {tid}, %c0 : index"));
        k.line(&format!("scf.if {first} {{"));
        k.depth += 1;
        k.store(&total, &format!("%b{p}"), &block, &p_ty);
        k.close();
        let shared = format!("memref<{}x{f}, #gpu.address_space<workgroup>>", REDUCE_BLOCK / 32);
        self.finish_gpu_func(k, specs, &[("%S", shared)], [slices as u32, 1, 1], REDUCE_BLOCK as u32);
        let all: Vec<usize> = (0..specs.len()).collect();
        let mut kernels = vec![(self.last(), slices as u64, per as u64, all.clone(), vec![])];
        self.team_sum_of(slices, mean.then_some(n), 1, specs, |k, i| k.load(&format!("%b{p}"), i, &p_ty));
        kernels.push((self.last(), 1, slices as u64, all, vec![]));
        kernels
    }

    /// `term(i)` summed over i < n by one team (see [`Self::reduce_whole`]),
    /// divided by `divisor` where given, stored into buffer `out`.
    fn team_sum_of(
        &mut self,
        n: usize,
        divisor: Option<usize>,
        out: usize,
        specs: &[(Vec<usize>, DType)],
        term: impl Fn(&mut Kernel, &str) -> String,
    ) {
        let t = compute(specs[0].1);
        let f = t.mlir();
        let mut k = Kernel::new();
        let team = self.target.team(&mut k);
        let zero = k.float(0.0, t);
        let nc = k.index(n);
        let (i, accs, parts) = k.open_reduce_all(&team.tid, &nc, &team.step, std::slice::from_ref(&zero), f);
        let v = term(&mut k, &i);
        let next = k.val(&format!("arith.addf {}, {v} fastmath<fast> : {f}", accs[0]));
        k.close_with_all(&[next], f);
        let total = self.target.team_sum(&mut k, &team, &parts[0], t);
        let value = match divisor {
            Some(d) => {
                let c = k.float(d.max(1) as f64, t);
                k.fop("divf", &total, &c, t)
            }
            None => total,
        };
        self.target.clone().finish_team(self, k, &team, &value, out, specs);
    }

    pub(crate) fn mse_loss(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let t = compute(specs[0].1);
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let (ta, tb) = (ty(0), ty(1));
        let n = numel(&specs[0].0);
        let mean = int_attr(op, "reduction") != Some(1);
        self.team_sum_of(n, mean.then_some(n), 2, specs, |k, i| {
            let a = k.load("%b0", i, &ta);
            let b = k.load("%b1", i, &tb);
            let d = k.fop("subf", &a, &b, t);
            k.fop("mulf", &d, &d, t)
        });
        vec![(self.last(), 1, (4 * n).max(1) as u64, (0..specs.len()).collect(), vec![])]
    }

    /// The CPU's form of a reduction over leading dims (a bias's gradient
    /// over the batch's rows): a work item per output column, as the
    /// generic form, but each piece walks its columns [`COLUMN_CHUNK`] at a
    /// time with the rows outer, so every load continues the last and the
    /// chunk's partial results (f32, on the stack) are updated a vector at
    /// a time; the generic form reads each column down the rows, a cache
    /// line per element (MLP 784's 256 x 512 bias gradient took 0.145 ms).
    /// Rows are combined in order, as there. Returns its work count.
    pub(crate) fn cpu_reduce_columns(&mut self, r: ColumnReduce, specs: &[(Vec<usize>, DType)]) -> u64 {
        let (st, t) = (specs[0].1, compute(specs[0].1));
        let f = t.mlir();
        let (in_ty, out_ty) = (flat_type(&specs[0].0, st), flat_type(&specs[1].0, specs[1].1));
        let acc_ty = format!("memref<{COLUMN_CHUNK}x{f}>");
        let mut k = Kernel::new();
        let identity = if r.kind == 2 { k.float(f64::NEG_INFINITY, t) } else { k.float(0.0, t) };
        let acc = k.val(&format!("memref.alloca() : {acc_ty}"));
        let chunk = k.index(COLUMN_CHUNK);
        let c0 = k.open_step("%begin", "%end", &chunk);
        let rest = k.val(&format!("arith.subi %end, {c0} : index"));
        let width = k.val(&format!("arith.minui {rest}, {chunk} : index"));
        let j = k.open("%c0", &width);
        k.store(&identity, &acc, &j, &acc_ty);
        k.close();
        let rows = k.index(r.rows);
        let row = k.open("%c0", &rows);
        let base = k.mad(&row, r.cols, &c0);
        let j = k.open("%c0", &width);
        let at = k.add(&base, &j);
        let v = k.load("%b0", &at, &in_ty);
        let a = k.load(&acc, &j, &acc_ty);
        let next =
            if r.kind == 2 { k.val(&format!("arith.maximumf {a}, {v} : {f}")) } else { k.fop("addf", &a, &v, t) };
        k.store(&next, &acc, &j, &acc_ty);
        k.close();
        k.close();
        let j = k.open("%c0", &width);
        let total = k.load(&acc, &j, &acc_ty);
        let value = if r.kind == 1 {
            let n = k.float(r.rows.max(1) as f64, t);
            k.fop("divf", &total, &n, t)
        } else {
            total
        };
        let o = k.add(&c0, &j);
        k.store(&value, "%b1", &o, &out_ty);
        k.close();
        k.close();
        self.finish(k, specs);
        r.cols as u64
    }

    /// The GPU's form of a reduction over leading dims: a block per 32
    /// outputs (a lane per output, so each warp's loads are contiguous),
    /// its warps (up to 32) splitting the rows, each thread carrying
    /// [`COLUMN_UNROLL`] partial results so that many loads are in flight;
    /// the warps' results combined through shared memory in a fixed order
    /// (the same bits on every run, no atomics). With the op's `partials`
    /// (S slices of the rows), two such passes: S blocks per 32 outputs
    /// each take a slice into the scratch, then a pass over the S x outputs
    /// scratch combines the slices in order.
    pub(crate) fn gpu_reduce_columns(&mut self, r: ColumnReduce, specs: &[(Vec<usize>, DType)]) -> Kernels {
        let all: Vec<usize> = (0..specs.len()).collect();
        let mean = (r.kind == 1).then_some(r.rows);
        let whole = ColumnPass { src: 0, dst: 1, rows: r.rows, slices: 1, divisor: mean };
        let Some(p) = r.partials.filter(|_| r.cols > 0) else {
            let name = self.gpu_column_pass(r, whole, specs);
            return vec![(name, r.cols as u64, (r.rows * 3) as u64, all, vec![])];
        };
        let slices = (numel(&specs[p].0) / r.cols).max(1);
        let split = ColumnPass { src: 0, dst: p, rows: r.rows, slices, divisor: None };
        let first = self.gpu_column_pass(r, split, specs);
        let combine = ColumnPass { src: p, dst: 1, rows: slices, slices: 1, divisor: mean };
        let second = self.gpu_column_pass(r, combine, specs);
        vec![
            (first, (r.cols * slices) as u64, (r.rows.div_ceil(slices) * 3) as u64, all.clone(), vec![]),
            (second, r.cols as u64, (slices * 3) as u64, all, vec![]),
        ]
    }

    /// One pass of [`Self::gpu_reduce_columns`]: buffer `src` read as
    /// `rows` x `r.cols`, its rows split into `slices` (block y), each
    /// slice's results into row `slice` of buffer `dst`; returns the
    /// kernel's name.
    fn gpu_column_pass(&mut self, r: ColumnReduce, pass: ColumnPass, specs: &[(Vec<usize>, DType)]) -> String {
        let per = pass.rows.div_ceil(pass.slices.max(1));
        // Up to 32 warps, none without rows to read.
        let warps_n = per.div_ceil(COLUMN_UNROLL).next_power_of_two().min(32);
        let t = compute(specs[0].1);
        let f = t.mlir();
        let (in_ty, out_ty) =
            (flat_type(&specs[pass.src].0, specs[pass.src].1), flat_type(&specs[pass.dst].0, specs[pass.dst].1));
        let (src, dst) = (format!("%b{}", pass.src), format!("%b{}", pass.dst));
        let mut k = Kernel::new();
        let tid = k.val("gpu.thread_id x");
        let block = k.val("gpu.block_id x");
        let width = k.index(32);
        let lane = k.val(&format!("arith.remui {tid}, {width} : index"));
        let warp = k.val(&format!("arith.divui {tid}, {width} : index"));
        let col = k.mad(&block, 32, &lane);
        let cols = k.index(r.cols);
        let col_ok = k.val(&format!("arith.cmpi ult, {col}, {cols} : index"));
        let col = k.val(&format!("arith.select {col_ok}, {col}, %c0 : index"));
        let identity = if r.kind == 2 { k.float(f64::NEG_INFINITY, t) } else { k.float(0.0, t) };
        let combine = |k: &mut Kernel, a: &str, b: &str| {
            if r.kind == 2 { k.val(&format!("arith.maximumf {a}, {b} : {f}")) } else { k.fop("addf", a, b, t) }
        };
        // This block's rows: [lo, hi).
        let rows = k.index(pass.rows);
        let (slice, lo, hi) = if pass.slices > 1 {
            let slice = k.val("gpu.block_id y");
            let per_c = k.index(per);
            let lo = k.mul(&slice, &per_c);
            let end = k.add(&lo, &per_c);
            let hi = k.val(&format!("arith.minui {end}, {rows} : index"));
            (Some(slice), lo, hi)
        } else {
            (None, "%c0".to_string(), rows)
        };
        let unroll = k.index(COLUMN_UNROLL);
        let offset = k.mul(&warp, &unroll);
        let first = k.add(&lo, &offset);
        let step = k.index(warps_n * COLUMN_UNROLL);
        let inits = vec![identity.clone(); COLUMN_UNROLL];
        let (base, accs, results) = k.open_reduce_all(&first, &hi, &step, &inits, f);
        let mut next = Vec::new();
        for (u, acc) in accs.iter().enumerate() {
            let offset = k.index(u);
            let row = k.add(&base, &offset);
            let ok = k.val(&format!("arith.cmpi ult, {row}, {hi} : index"));
            let row = k.val(&format!("arith.select {ok}, {row}, {lo} : index"));
            let at = k.mad(&row, r.cols, &col);
            let v = k.load(&src, &at, &in_ty);
            let v = k.val(&format!("arith.select {ok}, {v}, {identity} : {f}"));
            next.push(combine(&mut k, acc, &v));
        }
        k.close_with_all(&next, f);
        let mut part = results[0].clone();
        for v in &results[1..] {
            part = combine(&mut k, &part, v);
        }
        let shared = format!("memref<{}x{f}, #gpu.address_space<workgroup>>", warps_n * 32);
        k.store(&part, "%S", &tid, &shared);
        k.line("gpu.barrier");
        let lead = k.val(&format!("arith.cmpi eq, {warp}, %c0 : index"));
        let write = k.val(&format!("arith.andi {lead}, {col_ok} : i1"));
        k.line(&format!("scf.if {write} {{"));
        k.depth += 1;
        let warps = k.index(warps_n);
        let (w, acc, total) = k.open_reduce("%c0", &warps, &identity, f);
        let at = k.mad(&w, 32, &lane);
        let v = k.load("%S", &at, &shared);
        let sum = combine(&mut k, &acc, &v);
        k.close_with(&sum, f);
        let value = match pass.divisor {
            Some(n) => {
                let n = k.float(n as f64, t);
                k.fop("divf", &total, &n, t)
            }
            None => total,
        };
        let at = match &slice {
            Some(s) => k.mad(s, r.cols, &col),
            None => col.clone(),
        };
        k.store(&value, &dst, &at, &out_ty);
        k.close();
        let blocks = r.cols.div_ceil(32) as u32;
        self.finish_gpu_func(k, specs, &[("%S", shared)], [blocks, pass.slices.max(1) as u32, 1], (warps_n * 32) as u32)
    }
}

/// One pass of the GPU's column reduction (see
/// [`Generator::gpu_reduce_columns`]).
#[derive(Clone, Copy)]
struct ColumnPass {
    src: usize,
    dst: usize,
    rows: usize,
    slices: usize,
    /// Divides each result (a mean's row count).
    divisor: Option<usize>,
}

/// Columns the CPU's column reduction carries partial results for at once
/// (1 KiB of f32 on the stack).
const COLUMN_CHUNK: usize = 256;

/// Partial results each thread of the GPU's column reduction carries (its
/// loads in flight at once).
const COLUMN_UNROLL: usize = 8;
