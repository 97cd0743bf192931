//! `ll.gemm`: the layout of a GEMM's operands and its fused epilogue, shared
//! by its forms, one file each: the CPU's register-blocked kernel
//! (`cpu.rs`), the GPU's SIMT tiles for f32 (`simt.rs`), the tensor cores'
//! `mma.sync` (`mma.rs`) and Hopper's `wgmma` (`wgmma.rs`).

pub(crate) mod cpu;
pub(crate) mod mma;
pub(crate) mod simt;
pub(crate) mod wgmma;

use crate::codegen::prelude::*;

/// An `ll.gemm`'s operands and sizes: operand positions of the optional
/// epilogue inputs and the output; `rows` output rows in all, `m` per batch,
/// the product `m x kk` by `kk x n`.
pub(crate) struct GemmLayout {
    pub(crate) bias: Option<usize>,
    pub(crate) mask: Option<usize>,
    pub(crate) residual: Option<usize>,
    pub(crate) out: usize,
    pub(crate) lhs_sum: Option<usize>,
    pub(crate) ta: bool,
    pub(crate) tb: bool,
    pub(crate) accumulate: bool,
    pub(crate) alpha: f64,
    pub(crate) act: i64,
    pub(crate) rows: usize,
    pub(crate) m: usize,
    pub(crate) kk: usize,
    pub(crate) n: usize,
    pub(crate) batched: bool,
}

impl GemmLayout {
    pub(crate) fn of(op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Self {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 0, 0, 1, 0]);
        let starts: Vec<usize> = seg
            .iter()
            .scan(0usize, |s, &n| {
                let at = *s;
                *s += n as usize;
                Some(at)
            })
            .collect();
        let has_seg = |i: usize| seg.get(i).copied().unwrap_or(0) > 0;
        let (ta, tb) = (has(op, "transpose_a"), has(op, "transpose_b"));
        let (a, b) = (&specs[0].0, &specs[1].0);
        let (ra, rb) = (a.len(), b.len());
        let (rows, m, kk, n, batched) = if rb == 2 && ra > 2 {
            let kk = a[ra - 1];
            (numel(a) / kk.max(1), numel(a) / kk.max(1), kk, if tb { b[0] } else { b[1] }, false)
        } else {
            let m = if ta { a[ra - 1] } else { a[ra - 2] };
            let kk = if ta { a[ra - 2] } else { a[ra - 1] };
            let n = if tb { b[rb - 2] } else { b[rb - 1] };
            let batch: usize = a[..ra - 2].iter().product();
            (batch * m, m, kk, n, batch > 1)
        };
        GemmLayout {
            bias: has_seg(2).then(|| starts[2]),
            mask: has_seg(3).then(|| starts[3]),
            residual: has_seg(4).then(|| starts[4]),
            out: starts[5],
            lhs_sum: has_seg(6).then(|| starts[6]),
            ta,
            tb,
            accumulate: has(op, "accumulate"),
            alpha: float_attr(op, "alpha").unwrap_or(1.0),
            act: int_attr(op, "act").unwrap_or(0),
            rows,
            m,
            kk,
            n,
            batched,
        }
    }
}

/// What follows the product in a GEMM kernel, per output element.
pub(crate) struct Epilogue {
    pub(crate) bias: Option<usize>,
    pub(crate) mask: Option<usize>,
    pub(crate) residual: Option<usize>,
    pub(crate) out: usize,
    pub(crate) act: i64,
    pub(crate) accumulate: bool,
    /// The type the epilogue computes in (f32 for 16-bit GEMMs, whose
    /// operands are widened on load and whose result is narrowed on store).
    pub(crate) t: DType,
}

impl Epilogue {
    /// Stores epilogue(`y`) at column `j`, element `o` of the output.
    pub(crate) fn write(&self, k: &mut Kernel, j: &str, o: &str, y: &str, specs: &[(Vec<usize>, DType)]) {
        let t = self.t;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let load = |k: &mut Kernel, p: usize, at: &str| {
            let v = k.load(&format!("%b{p}"), at, &ty(p));
            cast_float(k, &v, compute(specs[p].1), t)
        };
        let mut y = y.to_string();
        if let Some(p) = self.bias {
            let bv = load(k, p, j);
            y = k.fop("addf", &y, &bv, t);
        }
        y = activation(k, self.act, &y, t);
        if let Some(p) = self.mask {
            let zero = k.float(0.0, t);
            let mv = load(k, p, o);
            let pos = k.val(&format!("arith.cmpf ogt, {mv}, {zero} : {}", t.mlir()));
            y = k.val(&format!("arith.select {pos}, {y}, {zero} : {}", t.mlir()));
        }
        if let Some(p) = self.residual {
            let rv = load(k, p, o);
            y = k.fop("addf", &y, &rv, t);
        }
        if self.accumulate {
            let old = load(k, self.out, o);
            y = k.fop("addf", &old, &y, t);
        }
        let y = cast_float(k, &y, t, compute(specs[self.out].1));
        k.store(&y, &format!("%b{}", self.out), o, &ty(self.out));
    }
}

/// The activation of a GEMM epilogue (`ll.gemm act`) applied to `x`.
pub(crate) fn activation(k: &mut Kernel, act: i64, x: &str, t: DType) -> String {
    let ty = t.mlir();
    let one = || Float(1.0);
    match act {
        1 => {
            let z = k.float(0.0, t);
            k.val(&format!("arith.maximumf {x}, {z} : {ty}"))
        }
        2 => {
            // x/2 (1 + erf(x / sqrt 2))
            let c = k.float(std::f64::consts::FRAC_1_SQRT_2, t);
            let s = k.fop("mulf", x, &c, t);
            let e = k.val(&format!("math.erf {s} : {ty}"));
            let o = k.val(&format!("arith.constant {} : {ty}", one()));
            let p = k.fop("addf", &o, &e, t);
            let h = k.float(0.5, t);
            let xh = k.fop("mulf", x, &h, t);
            k.fop("mulf", &xh, &p, t)
        }
        3 => {
            // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            let x2 = k.fop("mulf", x, x, t);
            let x3 = k.fop("mulf", &x2, x, t);
            let c = k.float(0.044715, t);
            let cx3 = k.fop("mulf", &x3, &c, t);
            let inner = k.fop("addf", x, &cx3, t);
            let s = k.float((2.0 / std::f64::consts::PI).sqrt(), t);
            let arg = k.fop("mulf", &inner, &s, t);
            let th = k.val(&format!("math.tanh {arg} : {ty}"));
            let o = k.val(&format!("arith.constant {} : {ty}", one()));
            let p = k.fop("addf", &o, &th, t);
            let h = k.float(0.5, t);
            let xh = k.fop("mulf", x, &h, t);
            k.fop("mulf", &xh, &p, t)
        }
        4 | 6 => {
            // sigmoid(x) = 1 / (1 + exp(-x)); silu = x sigmoid(x)
            let n = k.val(&format!("arith.negf {x} : {ty}"));
            let e = k.val(&format!("math.exp {n} : {ty}"));
            let o = k.val(&format!("arith.constant {} : {ty}", one()));
            let d = k.fop("addf", &o, &e, t);
            let s = k.fop("divf", &o, &d, t);
            if act == 4 { k.fop("mulf", x, &s, t) } else { s }
        }
        5 => k.val(&format!("math.tanh {x} : {ty}")),
        _ => x.to_string(),
    }
}

/// Where a GEMM block's output tile lies: its first row and column, the
/// batch's offsets into A, B and the output (block z is batch z), and the
/// sizes as index constants.
#[derive(Clone)]
pub(crate) struct Tile {
    pub(crate) row0: String,
    pub(crate) col0: String,
    pub(crate) a_base: String,
    pub(crate) b_base: String,
    pub(crate) o_base: String,
    pub(crate) mc: String,
    pub(crate) kc: String,
    pub(crate) nc: String,
}

impl Tile {
    /// Block (x, y, z) computes the `bm x bn` tile at column tile x, row tile y.
    pub(crate) fn of(k: &mut Kernel, bm: usize, bn: usize, m: usize, kk: usize, n: usize, batched: bool) -> Tile {
        let bx = k.val("gpu.block_id x");
        let by = k.val("gpu.block_id y");
        let bz = k.val("gpu.block_id z");
        let row0 = k.mad(&by, bm, "%c0");
        let col0 = k.mad(&bx, bn, "%c0");
        let (a_base, b_base) = if batched {
            (k.mad(&bz, m * kk, "%c0"), k.mad(&bz, kk * n, "%c0"))
        } else {
            ("%c0".to_string(), "%c0".to_string())
        };
        let o_base = k.mad(&bz, m * n, "%c0");
        let (mc, kc, nc) = (k.index(m), k.index(kk), k.index(n));
        Tile { row0, col0, a_base, b_base, o_base, mc, kc, nc }
    }

    /// Of A's and B's tiles at k offset `kt`, in their stored layouts: the
    /// corner's row and column, the rows and columns of the matrix, and its
    /// row stride.
    #[allow(clippy::type_complexity)]
    pub(crate) fn corners<'a>(
        &'a self,
        l: &GemmLayout,
        kt: &'a str,
    ) -> [(&'a str, &'a str, &'a str, &'a str, usize); 2] {
        let Tile { row0, col0, mc, kc, nc, .. } = self;
        let (m, kk, n) = (l.m, l.kk, l.n);
        [
            if l.ta { (kt, row0, kc, mc, m) } else { (row0, kt, mc, kc, kk) },
            if l.tb { (col0, kt, nc, kc, kk) } else { (kt, col0, kc, nc, n) },
        ]
    }
}

impl Generator {
    /// A GEMM for the GPU: block (x, y, z) computes the `bm x bn` output
    /// tile (column tile x, row tile y) of batch z; its 256 threads each own
    /// a `tm x tn` register block. Per step of 16 along k, the block stages
    /// A's `bm x 16` and B's `16 x bn` tiles in shared memory (zero outside
    /// the matrices, so odd sizes need no other care), then each thread
    /// accumulates its block from them. The epilogue runs on the registers.
    /// With `lhs_sum` a second (row) kernel sums the rows of op(A).
    ///
    /// Where cuBLASLt can apply the whole epilogue (bias, ReLU or
    /// tanh-GELU, accumulate, alpha; no mask, residual or row sum), the
    /// GEMM kernel's call also carries the library candidate, which the
    /// runtime's registry may choose instead.
    /// The GPU's GEMM: SIMT tiles for f32, the tensor cores for f16/bf16
    /// (`mma.sync`, and `wgmma` in the sm_90 build), with cuBLASLt as the
    /// measured candidate where it can apply the whole epilogue.
    pub(crate) fn gpu_gemm(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
        options: &GpuOptions,
    ) -> Result<Kernels> {
        let kernels = self.gpu_gemm_kernels(op, specs, options)?;
        let g = GemmLayout::of(op, specs);
        let (operands, output) = (specs[0].1, specs[g.out].1);
        let types_fit = match operands {
            DType::F32 => output == DType::F32,
            DType::F16 | DType::BF16 => specs[1].1 == operands && (output == operands || output == DType::F32),
            _ => false,
        };
        let epilogue_fits =
            g.mask.is_none() && g.residual.is_none() && g.lhs_sum.is_none() && matches!(g.act, 0 | 1 | 3);
        if let (true, true, Some(first)) = (types_fit, epilogue_fits, kernels.first()) {
            let batch = g.rows / g.m.max(1);
            let library = LibraryGemm {
                batch,
                m: g.m,
                n: g.n,
                k: g.kk,
                a_strides: if g.ta { [1, g.m] } else { [g.kk, 1] },
                b_strides: if g.tb { [1, g.kk] } else { [g.n, 1] },
                a_batch: if g.batched { g.m * g.kk } else { 0 },
                b_batch: if g.batched { g.kk * g.n } else { 0 },
                alpha: g.alpha,
                a: 0,
                b: 1,
                out: g.out,
                aliases: vec![],
                epilogue: None,
                widen: None,
                gpu: Some(artifact::GpuGemm {
                    bias: g.bias.map(|p| runtime_dtype(specs[p].1).map(|t| (p, t))).transpose()?,
                    act: g.act,
                    accumulate: g.accumulate,
                    operands: runtime_dtype(operands)?,
                    output: runtime_dtype(output)?,
                }),
            };
            self.library.insert(first.0.clone(), Some(library));
        }
        Ok(kernels)
    }
}
