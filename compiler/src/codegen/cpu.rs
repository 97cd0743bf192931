//! CPU kernel generation: a planned `ll` module becomes host code and a
//! manifest ([`aicf_runtime::artifact`]).
//!
//! Each `ll` kernel becomes one function of a kernels module written in
//! `scf`/`arith`/`math`/`memref` over flat (1-D) buffers, with the row range
//! `[begin, end)` as its first two arguments; elementwise bodies are moved
//! in as private functions and inlined. The module is lowered to the LLVM
//! dialect (bare-pointer calling convention), each kernel gets a C entry
//! `aicf_kN(begin, end, void **buffers)`, and the LLVM IR is compiled for
//! the host CPU (`clang -O3 -march=native`: the host's SIMD, detected, not
//! hard-coded) into `kernels.so`.

use crate::context::CompilerContext;
use crate::error::CompileError;
use crate::ir::{self, attr, float_attr, has, i64_array, int_attr, op_name, operands, ops_of};
use crate::nn::DType;
use aicf_runtime::artifact::{self, Arg, Buffer, Call, Constant, Function, IndexCheck, LibraryGemm, Manifest, Symbol};
use aicf_runtime::init::Float;
use melior::ir::Module;
use mlir_sys::*;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

type Result<T> = std::result::Result<T, CompileError>;

/// Rows below this many scalar operations run on one thread.
const GRAIN_OPS: u64 = 1 << 15;

/// The lowering from the kernels module to the LLVM dialect.
const TO_LLVM: &str = "builtin.module(inline,symbol-dce,canonicalize,cse,convert-scf-to-cf,\
convert-math-to-llvm,convert-math-to-libm,finalize-memref-to-llvm,convert-arith-to-llvm,\
convert-index-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},\
reconcile-unrealized-casts)";

fn internal(m: impl Into<String>) -> CompileError {
    CompileError::Internal(m.into())
}

/// An error at an op of the planned module.
fn at(op: MlirOperation, message: impl std::fmt::Display) -> CompileError {
    let loc = unsafe { melior::ir::Location::from_raw(ir::op_loc(op)) };
    CompileError::Internal(format!("{loc}: {message}"))
}

/// Compiles the planned `module` (after `aicf-train-pipeline`) for the host
/// CPU into `out_dir` (`manifest.json`, `kernels.so`); returns the manifest.
pub fn compile_cpu(ctx: &CompilerContext, module: &Module<'_>, ir_hash: &str, out_dir: &Path) -> Result<Manifest> {
    let raw = module.as_operation().to_raw();
    let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(raw, 0)) };
    let mut generator = Generator::default();
    let mut globals: HashMap<String, MlirOperation> = HashMap::new();
    let mut symbols = Vec::new();
    for op in ops_of(top) {
        match op_name(op).as_str() {
            "hl.param" | "hl.state" => symbols.push(symbol_entry(op)?),
            "memref.global" => {
                globals.insert(ir::string_attr(op, "sym_name").unwrap_or_default(), op);
            }
            _ => {}
        }
    }
    let mut functions = Vec::new();
    let mut constants = Vec::new();
    let mut constant_of: HashMap<String, usize> = HashMap::new();
    for (func, block) in ir::functions(raw) {
        let name = ir::string_attr(func, "sym_name").unwrap_or_default();
        functions.push(generator.function(func, block, &name, &globals, &mut constants, &mut constant_of)?);
    }
    std::fs::create_dir_all(out_dir).map_err(|e| internal(format!("{}: {e}", out_dir.display())))?;
    let target = generator.build(ctx, out_dir)?;
    let manifest = Manifest {
        format: artifact::FORMAT,
        ir_hash: ir_hash.to_string(),
        target,
        symbols,
        constants,
        functions,
    };
    let text = serde_json_string(&manifest)?;
    write_atomically(&out_dir.join("manifest.json"), text.as_bytes())?;
    Ok(manifest)
}

fn serde_json_string(m: &Manifest) -> Result<String> {
    aicf_runtime::artifact::to_json(m).map_err(|e| internal(format!("manifest: {e}")))
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over
/// `path`: a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| internal(format!("{}: {e}", path.display())))
}

fn runtime_dtype(d: DType) -> Result<artifact::DType> {
    Ok(match d {
        DType::F32 => artifact::DType::F32,
        DType::F64 => artifact::DType::F64,
        DType::I32 => artifact::DType::I32,
        DType::I64 => artifact::DType::I64,
        DType::I1 => artifact::DType::I1,
        other => return Err(internal(format!("the CPU backend has no {other:?} buffers yet"))),
    })
}

fn symbol_entry(op: MlirOperation) -> Result<Symbol> {
    let t = unsafe { mlirTypeAttrGetValue(attr(op, "type")) };
    let spec = crate::nn::spec_of_type(t).map_err(|e| at(op, format!("a symbol without a usable tensor type: {e:?}")))?;
    let init = has(op, "init").then(|| {
        let text = ir::attr_text(op, "init");
        text.strip_prefix("#hl.init<").and_then(|s| s.strip_suffix('>')).unwrap_or(&text).to_string()
    });
    Ok(Symbol {
        name: ir::string_attr(op, "sym_name").unwrap_or_default(),
        kind: if op_name(op) == "hl.param" { "param" } else { "state" }.into(),
        shape: spec.shape.clone(),
        dtype: runtime_dtype(spec.dtype)?,
        init,
    })
}

/// Shape and element type of a memref value.
fn buf_spec(v: MlirValue) -> Result<(Vec<usize>, DType)> {
    let s = ir::buffer_spec(v).ok_or_else(|| internal("a kernel operand is not a static memref"))?;
    Ok((s.shape.clone(), s.dtype))
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn flat_type(shape: &[usize], dtype: DType) -> String {
    format!("memref<{}x{}>", numel(shape).max(1), dtype.mlir())
}

#[derive(Default)]
struct Generator {
    /// The kernels module's text (func.func per kernel, body declarations).
    text: String,
    kernels: usize,
    /// (declaration name, the ll op whose region becomes its body)
    bodies: Vec<(String, MlirOperation)>,
    /// (kernel name, number of buffers) for the C entries.
    entries: Vec<(String, usize)>,
    /// The library candidate of each GEMM kernel (by kernel name).
    library: HashMap<String, Option<LibraryGemm>>,
}

/// One kernel function being written: SSA names and indentation.
struct Kernel {
    text: String,
    n: usize,
    depth: usize,
}

impl Kernel {
    fn new() -> Self {
        Kernel { text: String::new(), n: 0, depth: 2 }
    }
    fn line(&mut self, s: &str) {
        let _ = writeln!(self.text, "{}{s}", "  ".repeat(self.depth));
    }
    /// `%tN = rhs`
    fn val(&mut self, rhs: &str) -> String {
        self.n += 1;
        let v = format!("%t{}", self.n);
        self.line(&format!("{v} = {rhs}"));
        v
    }
    fn index(&mut self, c: usize) -> String {
        self.val(&format!("arith.constant {c} : index"))
    }
    fn float(&mut self, c: f64, t: DType) -> String {
        // Infinities have no decimal spelling: their bit patterns.
        let text = match (c.is_infinite(), t) {
            (true, DType::F64) => format!("0x{:016X}", c.to_bits()),
            (true, _) => format!("0x{:08X}", (c as f32).to_bits()),
            _ => Float(c).to_string(),
        };
        self.val(&format!("arith.constant {text} : {}", t.mlir()))
    }
    /// Opens `scf.for %iv = lo to hi`; returns the induction variable.
    fn open(&mut self, lo: &str, hi: &str) -> String {
        self.n += 1;
        let iv = format!("%i{}", self.n);
        self.line(&format!("scf.for {iv} = {lo} to {hi} step %c1 {{"));
        self.depth += 1;
        iv
    }
    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }
    /// Opens a reduction loop carrying one value; returns (iv, carried,
    /// result). Close with [`Kernel::close_with`].
    fn open_reduce(&mut self, lo: &str, hi: &str, init: &str, t: &str) -> (String, String, String) {
        self.n += 1;
        let (iv, acc, r) = (format!("%i{}", self.n), format!("%a{}", self.n), format!("%r{}", self.n));
        self.line(&format!("{r} = scf.for {iv} = {lo} to {hi} step %c1 iter_args({acc} = {init}) -> ({t}) {{"));
        self.depth += 1;
        (iv, acc, r)
    }
    fn close_with(&mut self, v: &str, t: &str) {
        self.line(&format!("scf.yield {v} : {t}"));
        self.depth -= 1;
        self.line("}");
    }
    fn load(&mut self, b: &str, idx: &str, ty: &str) -> String {
        self.val(&format!("memref.load {b}[{idx}] : {ty}"))
    }
    fn store(&mut self, v: &str, b: &str, idx: &str, ty: &str) {
        self.line(&format!("memref.store {v}, {b}[{idx}] : {ty}"));
    }
    fn add(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.addi {a}, {b} : index"))
    }
    fn mul(&mut self, a: &str, b: &str) -> String {
        self.val(&format!("arith.muli {a}, {b} : index"))
    }
    /// `a * c + b` on indices, with constants folded by canonicalize.
    fn mad(&mut self, a: &str, c: usize, b: &str) -> String {
        let c = self.index(c);
        let m = self.mul(a, &c);
        self.add(&m, b)
    }
    fn fop(&mut self, op: &str, a: &str, b: &str, t: DType) -> String {
        self.val(&format!("arith.{op} {a}, {b} fastmath<contract> : {}", t.mlir()))
    }
}

/// What follows the product in a GEMM kernel, per output element.
struct Epilogue {
    bias: Option<usize>,
    mask: Option<usize>,
    residual: Option<usize>,
    out: usize,
    act: i64,
    accumulate: bool,
    t: DType,
}

impl Epilogue {
    /// Stores epilogue(`y`) at column `j`, element `o` of the output.
    fn write(&self, k: &mut Kernel, j: &str, o: &str, y: &str, specs: &[(Vec<usize>, DType)]) {
        let t = self.t;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut y = y.to_string();
        if let Some(p) = self.bias {
            let bv = k.load(&format!("%b{p}"), j, &ty(p));
            y = k.fop("addf", &y, &bv, t);
        }
        y = activation(k, self.act, &y, t);
        if let Some(p) = self.mask {
            let zero = k.float(0.0, t);
            let mv = k.load(&format!("%b{p}"), o, &ty(p));
            let pos = k.val(&format!("arith.cmpf ogt, {mv}, {zero} : {}", t.mlir()));
            y = k.val(&format!("arith.select {pos}, {y}, {zero} : {}", t.mlir()));
        }
        if let Some(p) = self.residual {
            let rv = k.load(&format!("%b{p}"), o, &ty(p));
            y = k.fop("addf", &y, &rv, t);
        }
        if self.accumulate {
            let old = k.load(&format!("%b{}", self.out), o, &ty(self.out));
            y = k.fop("addf", &old, &y, t);
        }
        k.store(&y, &format!("%b{}", self.out), o, &ty(self.out));
    }
}

/// The activation of a GEMM epilogue (`ll.gemm act`) applied to `x`.
fn activation(k: &mut Kernel, act: i64, x: &str, t: DType) -> String {
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

impl Generator {
    /// Plans one function: its arguments, constants and kernel calls, and
    /// writes its kernels.
    fn function(
        &mut self,
        func: MlirOperation,
        block: MlirBlock,
        name: &str,
        globals: &HashMap<String, MlirOperation>,
        constants: &mut Vec<Constant>,
        constant_of: &mut HashMap<String, usize>,
    ) -> Result<Function> {
        let mut args = Vec::new();
        let mut refs: HashMap<usize, Buffer> = HashMap::new();
        let binds = arg_binds(func);
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            let v = unsafe { mlirBlockGetArgument(block, i) };
            let bind = binds.get(i as usize).cloned().flatten().unwrap_or_else(|| "input".into());
            if bind == "arena" {
                let bytes = unsafe { mlirShapedTypeGetDimSize(mlirValueGetType(v), 0) }.max(0) as usize;
                args.push(Arg { bind, shape: vec![bytes], dtype: artifact::DType::U8 });
            } else {
                let (shape, dtype) = buf_spec(v)?;
                args.push(Arg { bind, shape, dtype: runtime_dtype(dtype)? });
            }
            refs.insert(ir::key(v), Buffer::Arg { index: i as usize });
        }
        let arena_bytes = args.iter().find(|a| a.bind == "arena").map_or(0, |a| a.bytes() as u64);
        let mut index_constants: HashMap<usize, u64> = HashMap::new();
        let mut calls = Vec::new();
        for op in ops_of(block) {
            let op_kind = op_name(op);
            let result = || unsafe { mlirOperationGetResult(op, 0) };
            match op_kind.as_str() {
                "arith.constant" => {
                    if let Some(c) = int_attr(op, "value") {
                        index_constants.insert(ir::key(result()), c as u64);
                    }
                }
                "memref.view" => {
                    let x = operands(op);
                    let offset = x.get(1).and_then(|v| index_constants.get(&ir::key(*v))).copied();
                    let offset = offset.ok_or_else(|| at(op, "a view at a non-constant offset"))?;
                    refs.insert(ir::key(result()), Buffer::Arena { offset });
                }
                "ll.reshape" => {
                    let source = refs.get(&ir::key(operands(op)[0])).copied();
                    refs.insert(ir::key(result()), source.ok_or_else(|| at(op, "a view of an unknown buffer"))?);
                }
                "memref.get_global" => {
                    let global = ir::flat_symbol(op, "name").unwrap_or_default();
                    let index = match constant_of.get(&global) {
                        Some(&i) => i,
                        None => {
                            let g = globals.get(&global).ok_or_else(|| at(op, format!("no global @{global}")))?;
                            constants.push(global_values(*g, result())?);
                            constant_of.insert(global.clone(), constants.len() - 1);
                            constants.len() - 1
                        }
                    };
                    refs.insert(ir::key(result()), Buffer::Constant { index });
                }
                "memref.alloc" => {
                    return Err(at(op, "a buffer outside the arena: run ll-plan-memory before code generation"));
                }
                "func.return" => {}
                k if k.starts_with("ll.") => {
                    let x = operands(op);
                    let buffers = x
                        .iter()
                        .map(|v| refs.get(&ir::key(*v)).copied().ok_or_else(|| at(op, "an operand of unknown origin")))
                        .collect::<Result<Vec<_>>>()?;
                    for (kernel, work, cost, which, checks) in self.kernel(op, &x)? {
                        let library = self.library.get(&kernel).cloned().flatten();
                        calls.push(Call {
                            library,
                            symbol: format!("aicf_{kernel}"),
                            op: op_kind.clone(),
                            work,
                            grain: (GRAIN_OPS / cost.max(1)).max(1),
                            buffers: which.iter().map(|&i| buffers[i]).collect(),
                            index_checks: checks,
                        });
                    }
                }
                other => return Err(at(op, format!("'{other}' has no place in a planned ll function"))),
            }
        }
        Ok(Function { name: name.to_string(), args, arena_bytes, calls })
    }

    /// Writes the kernel function(s) for one `ll` op. Each is (name, rows
    /// of work, scalar operations per row, operand positions it takes,
    /// index checks on those positions).
    #[allow(clippy::type_complexity)]
    fn kernel(
        &mut self,
        op: MlirOperation,
        x: &[MlirValue],
    ) -> Result<Vec<(String, u64, u64, Vec<usize>, Vec<IndexCheck>)>> {
        let name = op_name(op);
        let specs = x.iter().map(|v| buf_spec(*v)).collect::<Result<Vec<_>>>()?;
        let all: Vec<usize> = (0..x.len()).collect();
        Ok(match name.as_str() {
            "ll.elementwise" => {
                let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_default();
                let n_in = seg.first().copied().unwrap_or(0) as usize;
                let body = self.body(op);
                let (work, cost) = self.elementwise(&specs[..n_in], &specs[n_in..], &body);
                vec![(self.last(), work, cost, all, vec![])]
            }
            "ll.multi_tensor_apply" => {
                let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_default();
                let n_in = seg.first().copied().unwrap_or(0) as usize;
                let region = unsafe { mlirOperationGetRegion(op, 0) };
                let block = unsafe { mlirRegionGetFirstBlock(region) };
                let k = unsafe { mlirBlockGetNumArguments(block) } as usize;
                let m = ir::ops_of(block).last().map_or(0, |y| operands(*y).len());
                let groups = n_in / k.max(1);
                let body = self.body(op);
                let mut out = Vec::new();
                for g in 0..groups {
                    let ins: Vec<usize> = (g * k..(g + 1) * k).collect();
                    let outs: Vec<usize> = (n_in + g * m..n_in + (g + 1) * m).collect();
                    let s_in: Vec<_> = ins.iter().map(|&i| specs[i].clone()).collect();
                    let s_out: Vec<_> = outs.iter().map(|&i| specs[i].clone()).collect();
                    let (work, cost) = self.elementwise(&s_in, &s_out, &body);
                    out.push((self.last(), work, cost, ins.into_iter().chain(outs).collect(), vec![]));
                }
                out
            }
            "ll.fill" => {
                let (shape, t) = &specs[0];
                let value = float_attr(op, "value").unwrap_or(0.0);
                let mut k = Kernel::new();
                let ty = flat_type(shape, *t);
                let i = k.open("%begin", "%end");
                let v = k.float(value, *t);
                k.store(&v, "%b0", &i, &ty);
                k.close();
                self.finish(k, &specs);
                vec![(self.last(), numel(shape).max(1) as u64, 1, all, vec![])]
            }
            "ll.copy" => {
                let (shape, t) = &specs[0];
                let ty = flat_type(shape, *t);
                let mut k = Kernel::new();
                let i = k.open("%begin", "%end");
                let v = k.load("%b0", &i, &ty);
                k.store(&v, "%b1", &i, &ty);
                k.close();
                self.finish(k, &specs);
                vec![(self.last(), numel(shape).max(1) as u64, 1, all, vec![])]
            }
            "ll.gemm" => {
                let kernels_before = self.kernels;
                let (work, cost, library) = self.gemm(op, &specs)?;
                self.library.insert(format!("k{kernels_before}"), library);
                vec![(format!("k{kernels_before}"), work, cost, all, vec![])]
            }
            "ll.softmax_cross_entropy" => {
                let (work, cost, check) = self.softmax_cross_entropy(op, &specs)?;
                vec![(self.last(), work, cost, all, vec![check])]
            }
            "ll.reduce" => {
                let (work, cost) = self.reduce(op, &specs)?;
                vec![(self.last(), work, cost, all, vec![])]
            }
            other => return Err(at(op, format!("no CPU kernel generator for '{other}' yet"))),
        })
    }

    fn last(&self) -> String {
        format!("k{}", self.kernels - 1)
    }

    /// Declares the body of an elementwise-style op as a private function
    /// (filled in after parsing); returns its name and signature.
    fn body(&mut self, op: MlirOperation) -> (String, Vec<DType>, Vec<DType>) {
        let name = format!("body{}", self.bodies.len());
        let block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)) };
        let ins: Vec<DType> = (0..unsafe { mlirBlockGetNumArguments(block) })
            .map(|i| ir::element_dtype(unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) }).unwrap_or(DType::F32))
            .collect();
        let outs: Vec<DType> = ir::ops_of(block)
            .last()
            .map(|y| operands(*y).iter().map(|v| ir::element_dtype(unsafe { mlirValueGetType(*v) }).unwrap_or(DType::F32)).collect())
            .unwrap_or_default();
        let list = |ts: &[DType]| ts.iter().map(|t| t.mlir()).collect::<Vec<_>>().join(", ");
        let _ = writeln!(self.text, "  func.func private @{name}({}) -> ({})", list(&ins), list(&outs));
        self.bodies.push((name.clone(), op));
        (name, ins, outs)
    }

    /// Appends kernel `kN` with buffers `%b0..` of `specs`' flat types.
    fn finish(&mut self, k: Kernel, specs: &[(Vec<usize>, DType)]) {
        let name = format!("k{}", self.kernels);
        self.kernels += 1;
        let params: Vec<String> =
            specs.iter().enumerate().map(|(i, (s, t))| format!("%b{i}: {}", flat_type(s, *t))).collect();
        let _ = writeln!(self.text, "  func.func @{name}(%begin: index, %end: index, {}) {{", params.join(", "));
        let _ = writeln!(self.text, "    %c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index");
        self.text.push_str(&k.text);
        let _ = writeln!(self.text, "    return\n  }}");
        self.entries.push((name, specs.len()));
    }

    /// An elementwise kernel: rows of the outputs' last dimension; inputs
    /// broadcast NumPy-style. Returns (rows, operations per row).
    fn elementwise(
        &mut self,
        ins: &[(Vec<usize>, DType)],
        outs: &[(Vec<usize>, DType)],
        body: &(String, Vec<DType>, Vec<DType>),
    ) -> (u64, u64) {
        let shape = outs.first().map(|o| o.0.clone()).unwrap_or_default();
        let rank = shape.len();
        let cols = shape.last().copied().unwrap_or(1).max(1);
        let rows = (numel(&shape) / cols).max(1);
        let mut k = Kernel::new();
        let i = k.open("%begin", "%end");
        // Per input: the offset of its row, and whether it runs along the row.
        let mut bases = Vec::new();
        for (s, _) in ins {
            let mut aligned = vec![1; rank.saturating_sub(s.len())];
            aligned.extend(s);
            let along = aligned.last().copied().unwrap_or(1) == cols && cols > 1;
            let outer_same = rank > 0 && aligned[..rank - 1] == shape[..rank - 1];
            let base = if rank <= 1 || aligned[..rank - 1].iter().all(|&d| d == 1) {
                "%c0".to_string()
            } else if outer_same {
                let c = k.index(aligned[rank - 1]);
                k.mul(&i, &c)
            } else {
                // Unravel the row over the outer dimensions.
                let strides = row_major_strides(&aligned);
                let mut rem = i.clone();
                let mut acc = "%c0".to_string();
                for d in (0..rank - 1).rev() {
                    let n = k.index(shape[d]);
                    let coord = k.val(&format!("arith.remui {rem}, {n} : index"));
                    rem = k.val(&format!("arith.divui {rem}, {n} : index"));
                    if aligned[d] != 1 {
                        acc = k.mad(&coord, strides[d], &acc);
                    }
                }
                acc
            };
            bases.push((base, along));
        }
        let cols_c = k.index(cols);
        let row_out = k.mul(&i, &cols_c);
        let j = k.open("%c0", &cols_c);
        let out_idx = k.add(&row_out, &j);
        let mut values = Vec::new();
        for (n, ((s, t), (base, along))) in ins.iter().zip(&bases).enumerate() {
            let idx = if *along { k.add(base, &j) } else { base.clone() };
            values.push(k.load(&format!("%b{n}"), &idx, &flat_type(s, *t)));
        }
        let (fname, in_t, out_t) = body;
        let sig = |ts: &[DType]| ts.iter().map(|t| t.mlir()).collect::<Vec<_>>().join(", ");
        k.n += 1;
        let r = format!("%y{}", k.n);
        let results = if out_t.len() == 1 { r.clone() } else { format!("{r}:{}", out_t.len()) };
        k.line(&format!(
            "{results} = func.call @{fname}({}) : ({}) -> ({})",
            values.join(", "),
            sig(in_t),
            sig(out_t)
        ));
        for (m, (s, t)) in outs.iter().enumerate() {
            let v = if out_t.len() == 1 { r.clone() } else { format!("{r}#{m}") };
            k.store(&v, &format!("%b{}", ins.len() + m), &out_idx, &flat_type(s, *t));
        }
        k.close();
        k.close();
        let mut specs = ins.to_vec();
        specs.extend(outs.iter().cloned());
        self.finish(k, &specs);
        (rows as u64, (cols * (ins.len() + outs.len() + 4)) as u64)
    }

    /// One row of the (batched) product per work item, accumulated in a
    /// stack row, then the epilogue.
    fn gemm(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<(u64, u64, Option<LibraryGemm>)> {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 0, 0, 1, 0]);
        let starts: Vec<usize> = seg.iter().scan(0usize, |s, &n| {
            let at = *s;
            *s += n as usize;
            Some(at)
        }).collect();
        let has_seg = |i: usize| seg.get(i).copied().unwrap_or(0) > 0;
        let (bias, mask, residual, out, lhs_sum) =
            (has_seg(2).then(|| starts[2]), has_seg(3).then(|| starts[3]), has_seg(4).then(|| starts[4]), starts[5], has_seg(6).then(|| starts[6]));
        let (ta, tb, accumulate) = (has(op, "transpose_a"), has(op, "transpose_b"), has(op, "accumulate"));
        let alpha = float_attr(op, "alpha").unwrap_or(1.0);
        let act = int_attr(op, "act").unwrap_or(0);
        let (a, b) = (&specs[0].0, &specs[1].0);
        let t = specs[out].1;
        let (ra, rb) = (a.len(), b.len());
        // rows: all output rows; m: rows per batch; kk, n: product sizes
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
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let mut k = Kernel::new();
        let row_t = format!("memref<{n}x{}>", t.mlir());
        let acc_buf = k.val(&format!("memref.alloca() : {row_t}"));
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
        let b_at = |k: &mut Kernel, kx: &str, j: &str| -> String {
            let off = if tb { k.mad(j, kk, kx) } else { k.mad(kx, n, j) };
            k.add(&b_base, &off)
        };
        let mut sum_a = None;
        if tb {
            // dot products: acc[j] = sum_k A(i,k) B(j,k)
            let j = k.open("%c0", &nc);
            let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
            let ai = a_at(&mut k, &kx);
            let av = k.load("%b0", &ai, &ty(0));
            let bi = b_at(&mut k, &kx, &j);
            let bv = k.load("%b1", &bi, &ty(1));
            let p = k.val(&format!("arith.mulf {av}, {bv} fastmath<fast> : {}", t.mlir()));
            let s = k.val(&format!("arith.addf {acc}, {p} fastmath<fast> : {}", t.mlir()));
            k.close_with(&s, t.mlir());
            k.store(&r, &acc_buf, &j, &row_t);
            k.close();
            if lhs_sum.is_some() {
                let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
                let ai = a_at(&mut k, &kx);
                let av = k.load("%b0", &ai, &ty(0));
                let s = k.val(&format!("arith.addf {acc}, {av} fastmath<fast> : {}", t.mlir()));
                k.close_with(&s, t.mlir());
                sum_a = Some(r);
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
        // The library candidate: an f32 GEMM into `out` with alpha, then
        // this kernel's epilogue (if any) as its own pass over the rows.
        let library = (t == DType::F32 && !accumulate).then(|| {
            let needs_epilogue = bias.is_some() || mask.is_some() || residual.is_some() || lhs_sum.is_some() || act != 0;
            let epilogue = needs_epilogue.then(|| {
                let mut k = Kernel::new();
                let zero = k.float(0.0, t);
                let (nc, kc) = (k.index(n), k.index(kk));
                let w = k.open("%begin", "%end");
                if let Some(p) = lhs_sum {
                    // only rank-2 operands carry lhs_sum: row w of op(a)
                    let (kx, acc, r) = k.open_reduce("%c0", &kc, &zero, t.mlir());
                    let ai = if ta { k.mad(&kx, m, &w) } else { k.mad(&w, kk, &kx) };
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
            let (a_row, a_col) = if ta { (1, m) } else { (kk, 1) };
            let (b_row, b_col) = if tb { (1, kk) } else { (n, 1) };
            LibraryGemm {
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
                aliases: [mask, residual].into_iter().flatten().collect(),
                epilogue: epilogue.map(|e| format!("aicf_{e}")),
            }
        });
        Ok((rows as u64, (2 * kk * n + 4 * n) as u64, library))
    }

    /// Loss (and gradient) over all rows in one work item: the mean needs
    /// the count of labelled rows first.
    fn softmax_cross_entropy(
        &mut self,
        op: MlirOperation,
        specs: &[(Vec<usize>, DType)],
    ) -> Result<(u64, u64, IndexCheck)> {
        let seg = ir::i32_array(op, "operandSegmentSizes").unwrap_or_else(|| vec![1, 1, 0, 1, 0]);
        let grad_output = (seg[2] > 0).then_some(2);
        let loss = 2 + seg[2] as usize;
        let grad = (seg[4] > 0).then_some(loss + 1);
        let (logits, t) = (&specs[0].0, specs[0].1);
        let classes = logits.last().copied().unwrap_or(1);
        let rows = numel(logits) / classes.max(1);
        let ignore = int_attr(op, "ignore_index");
        let sum = int_attr(op, "reduction") == Some(1);
        let grad_scale = float_attr(op, "grad_scale").unwrap_or(1.0);
        let label_t = specs[1].1;
        let ty = |i: usize| flat_type(&specs[i].0, specs[i].1);
        let f = t.mlir();
        let mut k = Kernel::new();
        let zero = k.float(0.0, t);
        let one = k.float(1.0, t);
        let (rc, cc) = (k.index(rows), k.index(classes));
        let lt = label_t.mlir();
        let ignore_c = ignore.map(|i| k.val(&format!("arith.constant {i} : {lt}")));
        // Whether label `l` counts (every label does without an ignore index).
        let labelled = |k: &mut Kernel, l: &str| match &ignore_c {
            Some(c) => k.val(&format!("arith.cmpi ne, {l}, {c} : {lt}")),
            None => k.val("arith.constant true"),
        };
        // count of labelled rows
        let count = if sum {
            one.clone()
        } else {
            let (r, acc, res) = k.open_reduce("%c0", &rc, &zero, f);
            let l = k.load("%b1", &r, &ty(1));
            let valid = labelled(&mut k, &l);
            let inc = k.val(&format!("arith.select {valid}, {one}, {zero} : {f}"));
            let s = k.fop("addf", &acc, &inc, t);
            k.close_with(&s, f);
            res
        };
        let upstream = match grad_output {
            Some(p) => {
                let g = k.load(&format!("%b{p}"), "%c0", &ty(p));
                let c = k.float(grad_scale, t);
                k.fop("mulf", &g, &c, t)
            }
            None => k.float(grad_scale, t),
        };
        let scale = k.fop("divf", &upstream, &count, t);
        let (r, acc, total) = k.open_reduce("%c0", &rc, &zero, f);
        let l = k.load("%b1", &r, &ty(1));
        let valid = labelled(&mut k, &l);
        let li = k.val(&format!("arith.index_cast {l} : {} to index", label_t.mlir()));
        let li = k.val(&format!("arith.select {valid}, {li}, %c0 : index"));
        let base = k.mul(&r, &cc);
        let ninf = k.float(f64::NEG_INFINITY, t);
        let (c, mx, m) = k.open_reduce("%c0", &cc, &ninf, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &ty(0));
        let nm = k.val(&format!("arith.maximumf {mx}, {v} : {f}"));
        k.close_with(&nm, f);
        let (c, se, s) = k.open_reduce("%c0", &cc, &zero, f);
        let at = k.add(&base, &c);
        let v = k.load("%b0", &at, &ty(0));
        let d = k.fop("subf", &v, &m, t);
        let e = k.val(&format!("math.exp {d} : {f}"));
        let ns = k.fop("addf", &se, &e, t);
        k.close_with(&ns, f);
        let logs = k.val(&format!("math.log {s} : {f}"));
        let lse = k.fop("addf", &m, &logs, t);
        let at = k.add(&base, &li);
        let xl = k.load("%b0", &at, &ty(0));
        let row_loss = k.fop("subf", &lse, &xl, t);
        let row_loss = k.val(&format!("arith.select {valid}, {row_loss}, {zero} : {f}"));
        let next = k.fop("addf", &acc, &row_loss, t);
        if let Some(g) = grad {
            let gs = k.val(&format!("arith.select {valid}, {scale}, {zero} : {f}"));
            let c = k.open("%c0", &cc);
            let at = k.add(&base, &c);
            let v = k.load("%b0", &at, &ty(0));
            let d = k.fop("subf", &v, &lse, t);
            let p = k.val(&format!("math.exp {d} : {f}"));
            let hit = k.val(&format!("arith.cmpi eq, {c}, {li} : index"));
            let sub = k.val(&format!("arith.select {hit}, {one}, {zero} : {f}"));
            let q = k.fop("subf", &p, &sub, t);
            let gv = k.fop("mulf", &q, &gs, t);
            k.store(&gv, &format!("%b{g}"), &at, &ty(g));
            k.close();
        }
        k.close_with(&next, f);
        let l = if sum { total } else { k.fop("divf", &total, &count, t) };
        k.store(&l, &format!("%b{loss}"), "%c0", &ty(loss));
        // One work item, [0, 1): the whole op.
        self.finish(k, specs);
        let check = IndexCheck {
            operand: 1,
            dtype: runtime_dtype(label_t)?,
            count: rows,
            bound: classes as i64,
            allowed: ignore,
            what: "label".into(),
        };
        Ok((1, (rows * classes * 8) as u64, check))
    }

    /// `out[o] = combine over the reduced coordinates of input`.
    fn reduce(&mut self, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<(u64, u64)> {
        let (shape, t) = (&specs[0].0, specs[0].1);
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
        let v = k.load("%b0", &off, &flat_type(shape, t));
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

    /// Parses the kernels module, fills in the bodies, lowers it to LLVM and
    /// compiles `kernels.so` into `out_dir`. Returns the target description.
    fn build(&self, ctx: &CompilerContext, out_dir: &Path) -> Result<String> {
        let source = format!("module {{\n{}}}\n", self.text);
        let mlir = ctx.mlir();
        let mut module = Module::parse(mlir, &source).ok_or_else(|| {
            let diags = ctx.take_diagnostics();
            internal(format!("generated kernels do not parse: {diags:?}\n{source}"))
        })?;
        self.fill_bodies(&module)?;
        crate::run_pipeline(ctx, &mut module, TO_LLVM)?;
        // C entries: aicf_kN(begin, end, void **buffers) -> kN(begin, end, p0, ...)
        let mut text = module.as_operation().to_string();
        let end = text.rfind('}').ok_or_else(|| internal("printed module has no end"))?;
        let mut entries = String::new();
        for (name, count) in &self.entries {
            let _ = writeln!(entries, "  llvm.func @aicf_{name}(%begin: i64, %end: i64, %args: !llvm.ptr) {{");
            let mut ptrs = Vec::new();
            for i in 0..*count {
                let _ = writeln!(
                    entries,
                    "    %a{i} = llvm.getelementptr %args[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n    %p{i} = llvm.load %a{i} : !llvm.ptr -> !llvm.ptr"
                );
                ptrs.push(format!("%p{i}"));
            }
            let types = vec!["!llvm.ptr"; *count].join(", ");
            let _ = writeln!(
                entries,
                "    llvm.call @{name}(%begin, %end, {}) : (i64, i64, {types}) -> ()\n    llvm.return\n  }}",
                ptrs.join(", ")
            );
        }
        text.insert_str(end, &entries);
        let module = Module::parse(mlir, &text).ok_or_else(|| {
            internal(format!("kernel entries do not parse: {:?}", ctx.take_diagnostics()))
        })?;
        unsafe { mlirRegisterAllLLVMTranslations(mlir.to_raw()) };
        let llvm = unsafe { mlirTranslateModuleToLLVMIRToString(module.as_operation().to_raw()) };
        if llvm.is_null() {
            return Err(internal(format!("translation to LLVM IR failed: {:?}", ctx.take_diagnostics())));
        }
        let llvm_text = unsafe { std::ffi::CStr::from_ptr(llvm) }.to_string_lossy().into_owned();
        unsafe { LLVMDisposeMessage(llvm) };
        let ll = out_dir.join("kernels.ll");
        std::fs::write(&ll, &llvm_text).map_err(|e| internal(format!("{}: {e}", ll.display())))?;
        let so = out_dir.join("kernels.so");
        let tmp = out_dir.join("kernels.so.tmp");
        let clang = clang()?;
        let output = std::process::Command::new(&clang)
            .args(["-O3", "-march=native", "-fPIC", "-shared", "-Wno-override-module", "-Wl,-z,defs"])
            .arg(&ll)
            .arg("-o")
            .arg(&tmp)
            .arg("-lm")
            .output()
            .map_err(|e| internal(format!("{clang}: {e}")))?;
        if !output.status.success() {
            return Err(internal(format!("{clang} failed on {}:\n{}", ll.display(), String::from_utf8_lossy(&output.stderr))));
        }
        std::fs::rename(&tmp, &so).map_err(|e| internal(format!("{}: {e}", so.display())))?;
        Ok(format!("{} cpu {}", std::env::consts::ARCH, host_cpu(&clang)))
    }

    /// Moves each elementwise op's region into its body declaration.
    fn fill_bodies(&self, module: &Module<'_>) -> Result<()> {
        let top = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module.as_operation().to_raw(), 0)) };
        let decls: HashMap<String, MlirOperation> = ops_of(top)
            .into_iter()
            .filter(|&o| op_name(o) == "func.func")
            .map(|o| (ir::string_attr(o, "sym_name").unwrap_or_default(), o))
            .collect();
        for (name, op) in &self.bodies {
            let decl = decls.get(name).ok_or_else(|| internal(format!("no declaration @{name}")))?;
            unsafe {
                let clone = mlirOperationClone(*op);
                let block = mlirRegionGetFirstBlock(mlirOperationGetRegion(clone, 0));
                mlirBlockDetach(block);
                mlirOperationDestroy(clone);
                let yield_op = mlirBlockGetTerminator(block);
                let values = operands(yield_op);
                let ret = ir::create_op(
                    mlirOperationGetContext(*decl),
                    ir::op_loc(yield_op),
                    &ir::OpSpec { operands: &values, results: Some(&[]), verify: false, ..ir::OpSpec::new("func.return") },
                )
                .map_err(|e| internal(format!("{e:?}")))?;
                mlirBlockInsertOwnedOperationBefore(block, yield_op, ret);
                mlirOperationDestroy(yield_op);
                mlirRegionAppendOwnedBlock(mlirOperationGetRegion(*decl, 0), block);
            }
        }
        Ok(())
    }
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The `ll.bind` tag of each argument of `func`.
fn arg_binds(func: MlirOperation) -> Vec<Option<String>> {
    let attrs = attr(func, "arg_attrs");
    if attrs.ptr.is_null() {
        return Vec::new();
    }
    (0..unsafe { mlirArrayAttrGetNumElements(attrs) })
        .map(|i| unsafe {
            let dict = mlirArrayAttrGetElement(attrs, i);
            let tag = mlirDictionaryAttrGetElementByName(dict, crate::ffi::string_ref("ll.bind"));
            (!tag.ptr.is_null() && mlirAttributeIsAString(tag))
                .then(|| crate::ffi::to_string(mlirStringAttrGetValue(tag)))
        })
        .collect()
}

/// A `memref.global`'s values (splat or dense).
fn global_values(global: MlirOperation, value: MlirValue) -> Result<Constant> {
    let (shape, dtype) = buf_spec(value)?;
    let a = attr(global, "initial_value");
    let n = numel(&shape).max(1);
    let get = |i: isize| unsafe {
        match dtype {
            DType::F32 => mlirDenseElementsAttrGetFloatValue(a, i) as f64,
            DType::F64 => mlirDenseElementsAttrGetDoubleValue(a, i),
            DType::I32 => mlirDenseElementsAttrGetInt32Value(a, i) as f64,
            DType::I64 => mlirDenseElementsAttrGetInt64Value(a, i) as f64,
            DType::I1 => mlirDenseElementsAttrGetBoolValue(a, i) as i32 as f64,
            _ => f64::NAN,
        }
    };
    if a.ptr.is_null() || !unsafe { mlirAttributeIsADenseElements(a) } {
        return Err(at(global, "a constant without dense values"));
    }
    let splat = unsafe { mlirDenseElementsAttrIsSplat(a) };
    let values = (0..n).map(|i| get(if splat { 0 } else { i as isize })).collect();
    Ok(Constant { shape, dtype: runtime_dtype(dtype)?, values })
}

/// The C compiler that turns LLVM IR into the shared object: `$AICF_CLANG`,
/// else clang-22 from the toolchain.
fn clang() -> Result<String> {
    if let Ok(c) = std::env::var("AICF_CLANG") {
        return Ok(c);
    }
    for c in ["/usr/lib/llvm-22/bin/clang", "clang-22", "clang"] {
        if std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(c.to_string());
        }
    }
    Err(internal("no clang found to compile the kernels (run tools/setup.sh, or set AICF_CLANG)"))
}

/// The host CPU clang compiles for under -march=native.
fn host_cpu(clang: &str) -> String {
    std::process::Command::new(clang)
        .args(["-march=native", "-###", "-x", "c", "-c", "/dev/null"])
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stderr).into_owned();
            let at = text.find("\"-target-cpu\" \"")? + 15;
            Some(text[at..].split('"').next()?.to_string())
        })
        .unwrap_or_else(|| "native".into())
}
