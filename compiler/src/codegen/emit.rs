//! The kernel text builder every generator writes with: SSA names,
//! loops, loads and stores over flat buffers, float constants and casts.

use crate::codegen::prelude::*;

pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// f32 lanes of the widest vector unit the kernels are compiled for (the
/// host's, or `AICF_CPU_ISA`'s): 16 with AVX-512, 8 with AVX, 4 otherwise
/// (SSE, NEON).
pub(crate) fn simd_lanes() -> usize {
    if let Ok((_, _, features)) = crate::codegen::target::cpu::toolchain() {
        let has = |f: &str| features.iter().any(|x| x == f);
        if has("+avx512f") {
            return 16;
        }
        if has("+avx") {
            return 8;
        }
        if !features.is_empty() {
            return 4;
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 16;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            return 8;
        }
    }
    4
}

/// The flat memref type of a kernel's buffer of `shape` and `dtype`.
/// A boolean buffer is typed as bytes (`i8`, the layout an `i1` element
/// has in memory, 0 or 1): [`Kernel::load`] compares the byte with zero
/// and [`Kernel::store`] widens the `i1`. Loaded as `i1`, LLVM's
/// vectoriser gathers a vector of bits one byte at a time (a masked
/// scale over the transformer's 8 x 4 x 128 x 128 scores took 0.33 ms of
/// mask-register shifts on an AMD Zen 4); as bytes it is one compare.
pub(crate) fn flat_type(shape: &[usize], dtype: DType) -> String {
    let element = if dtype == DType::I1 { "i8" } else { dtype.mlir() };
    format!("memref<{}x{element}>", numel(shape).max(1))
}

/// Geometry of the lines along `axis` of `shape`: (outer, n, inner).
pub(crate) fn lines(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

pub(crate) fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// One kernel function being written: SSA names and indentation.
pub(crate) struct Kernel {
    pub(crate) text: String,
    pub(crate) n: usize,
    pub(crate) depth: usize,
    /// A warp-per-row GPU kernel's lane (`gpu.lane_id`): a work item is a
    /// row, its columns are split over the warp's 32 lanes, and row
    /// reductions end in shuffles. None on the CPU: a thread per row.
    pub(crate) lane: Option<String>,
    /// Buffers taken from the heap (`memref.alloc`, with their types),
    /// freed where the kernel returns.
    pub(crate) frees: Vec<(String, String)>,
}

/// The most bytes a kernel's scratch row takes on the stack; a larger one
/// comes from the heap on the CPU (a worker thread's stack is 2 MiB: a
/// GEMM row of 524,288 f32 outputs overflowed it).
pub(crate) const STACK_SCRATCH_BYTES: usize = 64 << 10;

impl Kernel {
    pub(crate) fn new() -> Self {
        Kernel { text: String::new(), n: 0, depth: 2, lane: None, frees: Vec::new() }
    }

    /// A scratch buffer of `n` elements of `t` for the whole call (opened
    /// before any loop): on the stack, or, where `heap` (the CPU) and it is
    /// over [`STACK_SCRATCH_BYTES`], from the heap, freed at the return.
    pub(crate) fn scratch(&mut self, n: usize, t: DType, heap: bool) -> String {
        let ty = format!("memref<{}x{}>", n.max(1), t.mlir());
        let width = match t {
            DType::F64 | DType::I64 => 8,
            DType::F16 | DType::BF16 => 2,
            DType::I1 => 1,
            _ => 4,
        };
        if heap && self.depth == 2 && n.saturating_mul(width) > STACK_SCRATCH_BYTES {
            let buf = self.val(&format!("memref.alloc() : {ty}"));
            self.frees.push((buf.clone(), ty));
            buf
        } else {
            self.val(&format!("memref.alloca() : {ty}"))
        }
    }

    /// Opens the loop over this thread's columns `0..n` of a row: all of
    /// them, or in a warp-per-row kernel the lane's (lane, lane + 32, ...).
    pub(crate) fn open_cols(&mut self, n: &str) -> String {
        match self.lane.clone() {
            Some(lane) => {
                let step = self.index(32);
                self.open_step(&lane, n, &step)
            }
            None => self.open("%c0", n),
        }
    }

    /// [`Kernel::open_reduce`] over this thread's columns (see
    /// [`Kernel::open_cols`]); combine the lanes' results with
    /// [`Kernel::warp_all`].
    pub(crate) fn open_cols_reduce(&mut self, n: &str, init: &str, t: &str) -> (String, String, String) {
        let Some(lane) = self.lane.clone() else {
            return self.open_reduce("%c0", n, init, t);
        };
        let step = self.index(32);
        self.n += 1;
        let (iv, acc, r) = (format!("%i{}", self.n), format!("%a{}", self.n), format!("%r{}", self.n));
        self.line(&format!("{r} = scf.for {iv} = {lane} to {n} step {step} iter_args({acc} = {init}) -> ({t}) {{"));
        self.depth += 1;
        (iv, acc, r)
    }

    /// `acc + v` in a row loop: reassociable (`fastmath<fast>`) where one
    /// thread runs the whole loop, so that the CPU vectorises the sum (a
    /// softmax's sum of exponentials ran one element at a time); in a
    /// warp-per-row kernel each lane's sum stays in order.
    pub(crate) fn row_sum(&mut self, acc: &str, v: &str, t: DType) -> String {
        let f = t.mlir();
        if self.lane.is_none() {
            self.val(&format!("arith.addf {acc}, {v} fastmath<fast> : {f}"))
        } else {
            self.fop("addf", acc, v, t)
        }
    }

    /// `max(acc, v)` in a row loop whose maximum only steadies the
    /// exponentials after it (softmax, cross-entropy, attention): where one
    /// thread runs the whole loop, `maxnum`, which the CPU vectorises
    /// (`maximumf`, NaN-propagating, stayed one element at a time: a third
    /// of the attention backward's softmax). A NaN among the values is
    /// skipped here but still reaches every output through its
    /// exponential, so the results are the same. In a warp-per-row kernel,
    /// `maximumf`.
    pub(crate) fn row_max(&mut self, acc: &str, v: &str, t: DType) -> String {
        let f = t.mlir();
        if self.lane.is_none() {
            // LLVM's own intrinsic: `arith-expand` (run for bf16) would
            // rewrite `arith.maxnumf` into compares and selects, which LLVM
            // does not vectorise either.
            self.val(&format!("llvm.intr.maxnum({acc}, {v}) : ({f}, {f}) -> {f}"))
        } else {
            self.val(&format!("arith.maximumf {acc}, {v} : {f}"))
        }
    }

    /// In a warp-per-row kernel, `op` (`addf`, `maximumf`) of `v` over the
    /// warp's lanes, in every lane (butterfly of xor shuffles); else `v`.
    pub(crate) fn warp_all(&mut self, v: &str, op: &str, t: DType) -> String {
        if self.lane.is_none() {
            return v.to_string();
        }
        self.shuffle_all(v, op, t)
    }

    /// `op` of `v` over the 32 lanes of a warp, in every lane (GPU only).
    pub(crate) fn shuffle_all(&mut self, v: &str, op: &str, t: DType) -> String {
        let f = t.mlir();
        let width = self.val("arith.constant 32 : i32");
        let mut v = v.to_string();
        for offset in [16, 8, 4, 2, 1] {
            let o = self.val(&format!("arith.constant {offset} : i32"));
            self.n += 1;
            let other = format!("%s{}", self.n);
            self.line(&format!("{other}, %v{} = gpu.shuffle xor {v}, {o}, {width} : {f}", self.n));
            v = self.val(&format!("arith.{op} {v}, {other} : {f}"));
        }
        v
    }

    pub(crate) fn line(&mut self, s: &str) {
        let _ = writeln!(self.text, "{}{s}", "  ".repeat(self.depth));
    }

    /// `%tN = rhs`
    pub(crate) fn val(&mut self, rhs: &str) -> String {
        self.n += 1;
        let v = format!("%t{}", self.n);
        self.line(&format!("{v} = {rhs}"));
        v
    }

    pub(crate) fn index(&mut self, c: usize) -> String {
        self.val(&format!("arith.constant {c} : index"))
    }

    /// Whether float `v` displaces the running maximum `best`: greater, or
    /// the first NaN (a NaN is the largest, as `hl.reduce_max` propagates
    /// it and PyTorch's argmax and max-pool gradient take it).
    pub(crate) fn above_nan_first(&mut self, v: &str, best: &str, f: &str) -> String {
        let greater = self.val(&format!("arith.cmpf ogt, {v}, {best} : {f}"));
        let nan = self.val(&format!("arith.cmpf uno, {v}, {v} : {f}"));
        let best_is_number = self.val(&format!("arith.cmpf ord, {best}, {best} : {f}"));
        let first_nan = self.val(&format!("arith.andi {nan}, {best_is_number} : i1"));
        self.val(&format!("arith.ori {greater}, {first_nan} : i1"))
    }

    pub(crate) fn float(&mut self, c: f64, t: DType) -> String {
        // Infinities and NaN have no decimal spelling: their bit patterns,
        // of `t`'s width.
        let text = crate::nn::ops::float_literal(c, t);
        self.val(&format!("arith.constant {text} : {}", t.mlir()))
    }

    /// Opens `scf.for %iv = lo to hi`; returns the induction variable.
    pub(crate) fn open(&mut self, lo: &str, hi: &str) -> String {
        self.n += 1;
        let iv = format!("%i{}", self.n);
        self.line(&format!("scf.for {iv} = {lo} to {hi} step %c1 {{"));
        self.depth += 1;
        iv
    }

    pub(crate) fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    /// Opens `scf.for %iv = lo to hi step step`.
    pub(crate) fn open_step(&mut self, lo: &str, hi: &str, step: &str) -> String {
        self.n += 1;
        let iv = format!("%i{}", self.n);
        self.line(&format!("scf.for {iv} = {lo} to {hi} step {step} {{"));
        self.depth += 1;
        iv
    }

    /// Opens a loop with `step` carrying `inits.len()` values of type `t`;
    /// returns (iv, carried values, results). Close with
    /// [`Kernel::close_with_all`].
    pub(crate) fn open_reduce_all(
        &mut self,
        lo: &str,
        hi: &str,
        step: &str,
        inits: &[String],
        t: &str,
    ) -> (String, Vec<String>, Vec<String>) {
        let typed: Vec<(String, String)> = inits.iter().map(|i| (i.clone(), t.to_string())).collect();
        self.open_carry(lo, hi, step, &typed)
    }

    pub(crate) fn close_with_all(&mut self, values: &[String], t: &str) {
        self.close_carry(values, &vec![t.to_string(); values.len()]);
    }

    /// Opens `scf.for` from `lo` to `hi` by `step` carrying `inits`
    /// (value, type); returns (iv, carried values, results). Close with
    /// [`Kernel::close_carry`].
    pub(crate) fn open_carry(
        &mut self,
        lo: &str,
        hi: &str,
        step: &str,
        inits: &[(String, String)],
    ) -> (String, Vec<String>, Vec<String>) {
        self.n += 1;
        let (iv, r) = (format!("%i{}", self.n), format!("%r{}", self.n));
        let accs: Vec<String> = (0..inits.len()).map(|i| format!("%a{}_{i}", self.n)).collect();
        let args: Vec<String> = accs.iter().zip(inits).map(|(a, (i, _))| format!("{a} = {i}")).collect();
        let types: Vec<&str> = inits.iter().map(|(_, t)| t.as_str()).collect();
        self.line(&format!(
            "{r}:{} = scf.for {iv} = {lo} to {hi} step {step} iter_args({}) -> ({}) {{",
            inits.len(),
            args.join(", "),
            types.join(", ")
        ));
        self.depth += 1;
        let results = (0..inits.len()).map(|i| format!("{r}#{i}")).collect();
        (iv, accs, results)
    }

    /// `scf.yield values` and the end of the loop or `scf.if` branch.
    pub(crate) fn close_carry(&mut self, values: &[String], types: &[String]) {
        self.line(&format!("scf.yield {} : {}", values.join(", "), types.join(", ")));
        self.depth -= 1;
        self.line("}");
    }

    /// Opens `scf.if cond -> (types)`; returns its results. End the then
    /// branch with [`Kernel::else_carry`], the else branch with
    /// [`Kernel::close_carry`].
    pub(crate) fn open_if(&mut self, cond: &str, types: &[String]) -> Vec<String> {
        self.n += 1;
        let r = format!("%u{}", self.n);
        self.line(&format!("{r}:{} = scf.if {cond} -> ({}) {{", types.len(), types.join(", ")));
        self.depth += 1;
        (0..types.len()).map(|i| format!("{r}#{i}")).collect()
    }

    /// Yields the then branch's `values` and opens the else branch.
    pub(crate) fn else_carry(&mut self, values: &[String], types: &[String]) {
        self.line(&format!("scf.yield {} : {}", values.join(", "), types.join(", ")));
        self.depth -= 1;
        self.line("} else {");
        self.depth += 1;
    }

    /// Opens a reduction loop carrying one value; returns (iv, carried,
    /// result). Close with [`Kernel::close_with`].
    pub(crate) fn open_reduce(&mut self, lo: &str, hi: &str, init: &str, t: &str) -> (String, String, String) {
        self.n += 1;
        let (iv, acc, r) = (format!("%i{}", self.n), format!("%a{}", self.n), format!("%r{}", self.n));
        self.line(&format!("{r} = scf.for {iv} = {lo} to {hi} step %c1 iter_args({acc} = {init}) -> ({t}) {{"));
        self.depth += 1;
        (iv, acc, r)
    }

    pub(crate) fn close_with(&mut self, v: &str, t: &str) {
        self.line(&format!("scf.yield {v} : {t}"));
        self.depth -= 1;
        self.line("}");
    }

    /// Element `idx` of buffer `b` (of memref type `ty`) in the type
    /// kernels compute in: a 16-bit float is widened to f32 on load.
    pub(crate) fn load(&mut self, b: &str, idx: &str, ty: &str) -> String {
        let v = self.load_raw(b, idx, ty);
        if element_of(ty) == Some(DType::I1) {
            let zero = self.val("arith.constant 0 : i8");
            return self.val(&format!("arith.cmpi ne, {v}, {zero} : i8"));
        }
        match narrow_element(ty) {
            Some(t) => self.val(&format!("arith.extf {v} : {} to f32", t.mlir())),
            None => v,
        }
    }

    /// Stores `v` (in the compute type: f32 for a 16-bit buffer, rounded to
    /// nearest even on the store) at `idx` of buffer `b`.
    pub(crate) fn store(&mut self, v: &str, b: &str, idx: &str, ty: &str) {
        let v = match narrow_element(ty) {
            Some(t) => self.val(&format!("arith.truncf {v} : f32 to {}", t.mlir())),
            None if element_of(ty) == Some(DType::I1) => self.val(&format!("arith.extui {v} : i1 to i8")),
            None => v.to_string(),
        };
        self.store_raw(&v, b, idx, ty);
    }

    /// The stored element itself (16-bit floats stay 16-bit).
    pub(crate) fn load_raw(&mut self, b: &str, idx: &str, ty: &str) -> String {
        self.val(&format!("memref.load {b}[{idx}] : {ty}"))
    }

    pub(crate) fn store_raw(&mut self, v: &str, b: &str, idx: &str, ty: &str) {
        self.line(&format!("memref.store {v}, {b}[{idx}] : {ty}"));
    }

    /// `lanes` consecutive elements from `idx` of `b` as a vector of f32
    /// (16-bit floats widened), or of the buffer's own type.
    pub(crate) fn vload(&mut self, b: &str, idx: &str, ty: &str, lanes: usize) -> String {
        match narrow_element(ty) {
            Some(t) => {
                let raw = self.val(&format!("vector.load {b}[{idx}] : {ty}, vector<{lanes}x{}>", t.mlir()));
                self.val(&format!("arith.extf {raw} : vector<{lanes}x{}> to vector<{lanes}xf32>", t.mlir()))
            }
            None if element_of(ty) == Some(DType::I1) => {
                let raw = self.val(&format!("vector.load {b}[{idx}] : {ty}, vector<{lanes}xi8>"));
                let zero = self.val(&format!("arith.constant dense<0> : vector<{lanes}xi8>"));
                self.val(&format!("arith.cmpi ne, {raw}, {zero} : vector<{lanes}xi8>"))
            }
            None => {
                let e = element_of(ty).map_or("f32".to_string(), |t| t.mlir().to_string());
                self.val(&format!("vector.load {b}[{idx}] : {ty}, vector<{lanes}x{e}>"))
            }
        }
    }

    /// Stores vector `v` (f32 lanes for a 16-bit buffer) from `idx` of `b`.
    pub(crate) fn vstore(&mut self, v: &str, b: &str, idx: &str, ty: &str, lanes: usize) {
        match narrow_element(ty) {
            Some(t) => {
                let n = self.val(&format!("arith.truncf {v} : vector<{lanes}xf32> to vector<{lanes}x{}>", t.mlir()));
                self.line(&format!("vector.store {n}, {b}[{idx}] : {ty}, vector<{lanes}x{}>", t.mlir()));
            }
            None if element_of(ty) == Some(DType::I1) => {
                let n = self.val(&format!("arith.extui {v} : vector<{lanes}xi1> to vector<{lanes}xi8>"));
                self.line(&format!("vector.store {n}, {b}[{idx}] : {ty}, vector<{lanes}xi8>"));
            }
            None => {
                let e = element_of(ty).map_or("f32".to_string(), |t| t.mlir().to_string());
                self.line(&format!("vector.store {v}, {b}[{idx}] : {ty}, vector<{lanes}x{e}>"));
            }
        }
    }

    pub(crate) fn add(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.addi {a}, {b} : index"))
    }

    pub(crate) fn mul(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.muli {a}, {b} : index"))
    }

    /// `a * c + b` on indices, with constants folded by canonicalize.
    pub(crate) fn mad(&mut self, a: &str, c: usize, b: &str) -> String {
        let c = self.index(c);
        let m = self.mul(a, &c);
        self.add(&m, b)
    }

    pub(crate) fn fop(&mut self, op: &str, a: &str, b: &str, t: DType) -> String {
        self.val(&format!("arith.{op} {a}, {b} fastmath<contract> : {}", t.mlir()))
    }

    /// The coordinates of flat index `idx` in `shape` (row-major).
    pub(crate) fn unravel(&mut self, idx: &str, shape: &[usize]) -> Vec<String> {
        let mut coords = vec![String::new(); shape.len()];
        let mut rem = idx.to_string();
        for d in (0..shape.len()).rev() {
            if d == 0 {
                coords[0] = rem.clone();
                break;
            }
            let n = self.index(shape[d]);
            coords[d] = self.val(&format!("arith.remui {rem}, {n} : index"));
            rem = self.val(&format!("arith.divui {rem}, {n} : index"));
        }
        coords
    }

    /// `sum coords[d] * strides[d]`.
    pub(crate) fn ravel(&mut self, coords: &[String], strides: &[usize]) -> String {
        let mut acc = "%c0".to_string();
        for (c, &s) in coords.iter().zip(strides) {
            acc = self.mad(c, s, &acc);
        }
        acc
    }

    /// The start of line `l` (of `lines(shape, axis)`) and its stride.
    pub(crate) fn line_base(&mut self, l: &str, inner: usize, n: usize) -> String {
        let ic = self.index(inner);
        let o = self.val(&format!("arith.divui {l}, {ic} : index"));
        let i = self.val(&format!("arith.remui {l}, {ic} : index"));
        self.mad(&o, n * inner, &i)
    }

    /// `base + j * stride`
    pub(crate) fn at(&mut self, base: &str, j: &str, stride: usize) -> String {
        self.mad(j, stride, base)
    }

    /// `sum over i < bounds[0], j < bounds[1], l < bounds[2] of (ok ? x * y : 0)`
    /// where `term` gives (ok, x, y) for the three induction variables.
    pub(crate) fn masked_sum3(
        &mut self,
        bounds: [&str; 3],
        t: DType,
        term: impl FnOnce(&mut Kernel, [String; 3]) -> (String, String, String),
    ) -> String {
        let f = t.mlir();
        let zero = self.float(0.0, t);
        let (i, acc0, s0) = self.open_reduce("%c0", bounds[0], &zero, f);
        let (j, acc1, s1) = self.open_reduce("%c0", bounds[1], &acc0, f);
        let (l, acc2, s2) = self.open_reduce("%c0", bounds[2], &acc1, f);
        let (ok, x, y) = term(self, [i, j, l]);
        let product = self.fop("mulf", &x, &y, t);
        let masked = self.val(&format!("arith.select {ok}, {product}, {zero} : {f}"));
        let next = self.val(&format!("arith.addf {acc2}, {masked} fastmath<fast> : {f}"));
        self.close_with(&next, f);
        self.close_with(&s2, f);
        self.close_with(&s1, f);
        s0
    }

    pub(crate) fn cmpi(&mut self, pred: &str, a: &str, b: &str) -> String {
        self.val(&format!("arith.cmpi {pred}, {a}, {b} : index"))
    }

    pub(crate) fn and(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.andi {a}, {b} : i1"))
    }
}

/// The type a kernel computes values stored as `t` in: f32 for the
/// 16-bit floats (storage in 16 bits, arithmetic and accumulation in f32),
/// else `t` itself.
pub(crate) fn compute(t: DType) -> DType {
    match t {
        DType::F16 | DType::BF16 => DType::F32,
        t => t,
    }
}

/// The element type of a memref type string (`memref<12xbf16>`,
/// `memref<64xf32, 3>`).
pub(crate) fn element_of(ty: &str) -> Option<DType> {
    let inner = ty.strip_prefix("memref<")?;
    let shape = inner.split([',', '>']).next()?;
    match shape.rsplit('x').next()? {
        "f16" => Some(DType::F16),
        "bf16" => Some(DType::BF16),
        "f32" => Some(DType::F32),
        "f64" => Some(DType::F64),
        "i32" => Some(DType::I32),
        "i64" => Some(DType::I64),
        // Booleans are stored as bytes (`flat_type`).
        "i8" => Some(DType::I1),
        _ => None,
    }
}

/// The 16-bit float element type of a memref type string, if it has one.
pub(crate) fn narrow_element(ty: &str) -> Option<DType> {
    element_of(ty).filter(|t| matches!(t, DType::F16 | DType::BF16))
}

/// Bits of a float type.
pub(crate) fn float_bits(t: DType) -> u32 {
    match t {
        DType::F16 | DType::BF16 => 16,
        DType::F64 => 64,
        _ => 32,
    }
}

/// `v` of float type `from` as `to` (`arith.extf`/`truncf`; nothing when equal).
pub(crate) fn cast_float(k: &mut Kernel, v: &str, from: DType, to: DType) -> String {
    if from == to {
        return v.to_string();
    }
    let op = if float_bits(from) < float_bits(to) { "extf" } else { "truncf" };
    k.val(&format!("arith.{op} {v} : {} to {}", from.mlir(), to.mlir()))
}
