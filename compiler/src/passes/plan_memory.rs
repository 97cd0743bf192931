//! `ll-plan-memory`: every temporary buffer of an `ll` function gets an
//! offset in one arena.
//!
//! Algorithm, per function:
//! 1. The model: the kernels in program order, each with the temporaries
//!    (`memref.alloc` roots; `ll.reshape` views count as their root) it
//!    reads and writes, and the function arguments it writes.
//! 2. Budget (optional; bytes, or a fraction of the arena the plan takes
//!    without one): while the planned arena exceeds it, try every
//!    recomputation of a cheap single-output kernel (elementwise, norm,
//!    softmax, transpose) right before one of its later uses, on the model;
//!    apply the one that lowers the arena most to the IR (clone the kernel,
//!    a fresh buffer, later uses renamed); stop when it fits, or fail when
//!    nothing helps.
//! 3. Lifetimes: first to last kernel touching a root. In place: an
//!    elementwise kernel's output shares an input of the same type that
//!    dies at that kernel.
//! 4. Placement: largest first, each at the lowest 64-byte-aligned offset
//!    free of every buffer alive at the same time. Lower bound: the most
//!    bytes alive at one kernel.
//! 5. Rewrite: an `%arena: memref<Nxi8>` argument (`ll.bind = "arena"`),
//!    each alloc a `memref.view` at its offset, `ll.memory` on the function.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, key, op_loc, op_name, operands, ops_of, producer, users};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashMap;
use std::rc::Rc;

const ALIGN: u64 = 64;

/// The attribute of an op a plan recomputes (a clone of one the step ran
/// before): its FLOPs are not counted as the model's.
pub const RECOMPUTED: &str = "ll.recomputed";

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let parsed = (|| {
        Ok::<_, String>((options.get_i64("budget")?, options.get_f64("budget-fraction")?, options.get_bool("report")?))
    })();
    let fail = |m: String| {
        emit_error(module.location(), &format!("ll-plan-memory: {m}"));
        Err(PassFailed)
    };
    let (bytes, fraction, report) = match parsed {
        Ok(v) => v,
        Err(m) => return fail(m),
    };
    let budget = match (bytes, fraction) {
        (b, _) if b < 0 => return fail(format!("budget must be >= 0 bytes, got {b}")),
        (_, f) if !(0.0..=1.0).contains(&f) => return fail(format!("budget-fraction must be in [0, 1], got {f}")),
        (b, f) if b > 0 && f > 0.0 => return fail("give a budget in bytes or as a fraction, not both".into()),
        (b, _) if b > 0 => Budget::Bytes(b as u64),
        (_, f) if f > 0.0 => Budget::Fraction(f),
        _ => Budget::None,
    };
    plan_memory(module.to_raw(), budget, report).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("ll-plan-memory: {m}"));
        PassFailed
    })
}

/// The arena every function's plan must fit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    None,
    Bytes(u64),
    /// This fraction of the largest arena the module's functions take
    /// without a budget (the train step's: the peak of a training run).
    Fraction(f64),
}

/// An `ll` pass runs on lowered functions only: an `hl` op left in `block`
/// is an error at that op.
/// A buffer over [`super::common::MAX_TENSOR_BYTES`] is an error at its
/// allocation.
/// The functions are straight-line kernels, as `convert-hl-to-ll` writes
/// them: a second block (a branch), an op other than an `ll` kernel that
/// holds a region (`scf.for`, `scf.if`) or a buffer of dynamic size is an
/// error at it (hand-written `ll` with them was planned as if their
/// buffers did not exist).
pub(super) fn require_lowered(block: MlirBlock) -> Result<(), Failure> {
    let ops = ops_of(block);
    if !unsafe { mlirBlockGetNextInRegion(block) }.ptr.is_null() {
        let at = ops.last().map_or_else(|| op_loc(unsafe { mlirBlockGetParentOperation(block) }), |&o| op_loc(o));
        return Err((
            at,
            "a function of more than one block: ll passes plan straight-line functions of kernels (no branches)".into(),
        ));
    }
    for op in ops {
        let name = op_name(op);
        if name.starts_with("hl.") {
            return Err((op_loc(op), format!("'{name}' is not lowered; run convert-hl-to-ll first")));
        }
        if !name.starts_with("ll.") && unsafe { mlirOperationGetNumRegions(op) } > 0 {
            return Err((
                op_loc(op),
                format!(
                    "'{name}' holds a region: ll passes plan straight-line functions of kernels (no loops or branches)"
                ),
            ));
        }
        // A buffer's lifetime is its kernels': an op outside `ll` that
        // touches a temporary (a `memref.dealloc`, a `memref.copy`) would be
        // planned as if it did not (a dealloc of an arena view is invalid).
        if !name.starts_with("ll.") && name != "func.return" && name != "memref.alloc" {
            let temporary = operands(op).into_iter().any(|v| {
                let mut v = v;
                while let Some(p) = producer(v) {
                    match op_name(p).as_str() {
                        "memref.alloc" => return true,
                        "ll.reshape" => v = unsafe { mlirOperationGetOperand(p, 0) },
                        _ => return false,
                    }
                }
                false
            });
            if temporary {
                let why = if name == "memref.dealloc" {
                    "the memory plan gives every temporary its lifetime (an arena view, which nothing deallocates): \
                     remove the dealloc"
                } else {
                    "ll passes plan temporaries that only ll kernels (and the return) use"
                };
                return Err((op_loc(op), format!("'{name}' uses a temporary buffer: {why}")));
            }
        }
        if name == "memref.alloc" {
            let r = unsafe { mlirOperationGetResult(op, 0) };
            if unsafe { mlirOperationGetNumOperands(op) > 0 || !mlirShapedTypeHasStaticShape(mlirValueGetType(r)) } {
                let t = ir::type_text(unsafe { mlirValueGetType(r) });
                return Err((
                    op_loc(op),
                    format!("a buffer of dynamic size ({t}): ll passes plan buffers of static shape"),
                ));
            }
            if super::common::too_large(r) {
                let t = ir::type_text(unsafe { mlirValueGetType(r) });
                return Err((op_loc(op), format!("{t} is larger than the 1 TiB a buffer may hold")));
            }
            // A view of the arena is plain memory, row-major, of an element
            // type the kernels read: a memory space or a strided layout
            // would not survive `memref.view`, and an element type no
            // kernel reads has no size to plan.
            let t = unsafe { mlirValueGetType(r) };
            let plain = unsafe {
                mlirMemRefTypeGetMemorySpace(t).ptr.is_null() && mlirAffineMapIsIdentity(mlirMemRefTypeGetAffineMap(t))
            };
            if !plain || ir::buffer_spec(r).is_none() {
                return Err((
                    op_loc(op),
                    format!(
                        "a buffer of type {}: ll passes plan row-major buffers in the default memory space, of \
                         the kernels' element types (f16, bf16, f32, f64, i1, i32, i64)",
                        ir::type_text(t)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What the planner decided for one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPlan {
    pub arena_bytes: u64,
    pub lower_bound_bytes: u64,
    pub naive_bytes: u64,
    pub buffers: usize,
    pub in_place: usize,
    pub recomputed: usize,
}

/// Plans every `ll` function of `module`; returns the plans by function.
pub fn plan_memory(module: MlirOperation, budget: Budget, report: bool) -> Result<Vec<(String, MemoryPlan)>, Failure> {
    let budget = match budget {
        Budget::None => 0,
        Budget::Bytes(b) => b,
        // Of the largest arena (the train step's): the peak the functions
        // reach without a budget; smaller functions already fit.
        Budget::Fraction(f) => {
            let mut largest = 0;
            for (_, block) in ir::functions(module) {
                require_lowered(block)?;
                largest = largest.max(Model::build(block).place().arena);
            }
            ((largest as f64 * f).ceil() as u64).max(1)
        }
    };
    let mut plans = Vec::new();
    let has_train_step =
        ir::functions(module).iter().any(|(f, _)| ir::string_attr(*f, "sym_name").as_deref() == Some("train_step"));
    for (func, block) in ir::functions(module) {
        require_lowered(block)?;
        // A buffer nothing uses has no lifetime to place: it was given a
        // view at offset 0 of an arena that did not count it (past the
        // arena's end). It is dead; it goes.
        for op in ops_of(block) {
            if op_name(op) == "memref.alloc" && ir::users(unsafe { mlirOperationGetResult(op, 0) }).is_empty() {
                unsafe { mlirOperationDestroy(op) };
            }
        }
        let name = ir::string_attr(func, "sym_name").unwrap_or_default();
        // A second plan would add a second, empty arena; a plan after the
        // schedule would give buffers of kernels on two streams one place.
        if ir::has(func, "ll.memory") {
            return Err((op_loc(func), format!("@{name} is planned already (ll.memory): plan memory once")));
        }
        // An arena the input binds already (written by hand, or kept from
        // a plan whose ll.memory was dropped) got a second one beside it.
        if ir::attr_text(func, "arg_attrs").contains("ll.bind = \"arena\"") {
            return Err((
                op_loc(func),
                format!("@{name} has an argument bound \"arena\" already: it is planned, plan memory once"),
            ));
        }
        if let Some(op) = ops_of(block).into_iter().find(|&o| ir::has(o, "ll.stream")) {
            return Err((
                op_loc(op),
                format!(
                    "@{name} is scheduled already (ll.stream): plan memory before ll-schedule, as the pipeline does"
                ),
            ));
        }
        let mut recomputed = 0;
        let mut model = Model::build(block);
        let mut placed = model.place();
        if budget > 0 && placed.arena > budget {
            // First the bound: no placement fits the budget while the most
            // bytes alive at one step exceed it, and ranking by the bound
            // needs no placement (a first fit is quadratic in the buffers,
            // a round of the search below places 30 or more: the search
            // was cubic in the model's depth, 64 GPT blocks 263 s).
            // (The measure of a candidate is the abstract model's; were the
            // model rebuilt from the IR not lower by it, as each round must
            // be for the search to end, the placed search takes over.)
            let mut merged = model.merged();
            while merged.lower_bound > budget {
                let Some(cand) = model.lowering_the_bound(&merged) else { break };
                recomputed += recompute(block, &model, &cand)?;
                model = Model::build(block);
                let next = model.merged();
                if (next.lower_bound, next.at_peak) >= (merged.lower_bound, merged.at_peak) {
                    break;
                }
                merged = next;
            }
            placed = model.place();
        }
        if budget > 0 {
            // Then the placement: a bound under the budget can still leave
            // the arena over it (fragmentation).
            while placed.arena > budget {
                // The best cheap recomputation; a GEMM only when no cheap one
                // helps. Candidates are scored by largest-first placement
                // alone (against the current model's), the plan kept is the
                // best of every order: four orders per candidate made a
                // budgeted compile up to 4x slower.
                //
                // Each candidate's lower bound (the most bytes alive at one
                // step, no placement) is cheap; the arena is a placement,
                // quadratic in the buffers. So the cheap candidates that
                // lower the bound most are placed first, a few of them,
                // then every cheap one, then the GEMMs that lower it most,
                // then every candidate: each only where none before helps.
                // Placing every candidate each round made the compile
                // quadratic in the model's depth (nanoGPT in bf16 at 60%:
                // 10 s in this pass).
                let current = model.place_by(1).arena;
                let candidates = model.candidates();
                let spans = model.spans();
                let score = |c: &Candidate| (*c, model.with(c, &spans).place_by(1).arena, cheap(&model.steps[c.step]));
                // The `PLACED_CANDIDATES` of `kind` that lower the bound
                // most, placed.
                let fewest = |kind: bool| -> Vec<(Candidate, u64, bool)> {
                    let mut bounded: Vec<(u64, Candidate)> = candidates
                        .iter()
                        .filter(|c| cheap(&model.steps[c.step]) == kind)
                        .map(|c| (model.with(c, &spans).lower_bound(), *c))
                        .filter(|&(b, _)| b < current)
                        .collect();
                    bounded.sort_by_key(|&(b, c)| (b, c.step, c.before));
                    bounded
                        .iter()
                        .take(PLACED_CANDIDATES)
                        .map(|(_, c)| score(c))
                        .filter(|&(_, p, _)| p < current)
                        .collect()
                };
                // (Every cheap one before any GEMM: the rule above.)
                let every = |kind: Option<bool>| -> Vec<(Candidate, u64, bool)> {
                    candidates
                        .iter()
                        .filter(|c| kind.is_none_or(|k| cheap(&model.steps[c.step]) == k))
                        .map(score)
                        .filter(|&(_, p, _)| p < current)
                        .collect()
                };
                let mut scored = fewest(true);
                if scored.is_empty() {
                    scored = every(Some(true));
                }
                if scored.is_empty() {
                    scored = fewest(false);
                }
                if scored.is_empty() {
                    scored = every(None);
                }
                let best = scored
                    .iter()
                    .filter(|c| c.2)
                    .min_by_key(|c| c.1)
                    .or_else(|| scored.iter().min_by_key(|c| c.1))
                    .map(|c| (c.0, c.1));
                let Some((cand, _)) = best else {
                    return Err((
                        op_loc(func),
                        over_budget(&name, &model, &placed, budget, recomputed, has_train_step),
                    ));
                };
                recomputed += recompute(block, &model, &cand)?;
                model = Model::build(block);
                placed = model.place();
            }
        }
        let plan = MemoryPlan {
            arena_bytes: placed.arena,
            lower_bound_bytes: placed.lower_bound,
            // Each buffer in a place of its own, aligned as the arena's are
            // (unaligned, a tiny model's arena read larger than its sum).
            naive_bytes: model.bufs.iter().map(|b| align(b.bytes)).sum(),
            buffers: model.bufs.len(),
            in_place: placed.in_place,
            recomputed,
        };
        rewrite(func, block, &model, &placed, &plan)?;
        if report {
            let ratio =
                if plan.lower_bound_bytes == 0 { 1.0 } else { plan.arena_bytes as f64 / plan.lower_bound_bytes as f64 };
            let text = format!(
                "ll-plan-memory: @{name}: arena {} bytes, lower bound {} bytes ({ratio:.3}x), naive sum {} bytes; \
                 {} buffers, {} in place, {} recomputed",
                plan.arena_bytes,
                plan.lower_bound_bytes,
                plan.naive_bytes,
                plan.buffers,
                plan.in_place,
                plan.recomputed
            );
            unsafe { crate::ffi::aicfEmitRemark(op_loc(func), crate::ffi::string_ref(&text)) };
        }
        plans.push((name, plan));
    }
    Ok(plans)
}

#[derive(Clone, Copy)]
struct Buf {
    alloc: MlirOperation,
    bytes: u64,
}

#[derive(Clone)]
struct Step {
    op: MlirOperation,
    name: String,
    reads: Vec<usize>,
    writes: Vec<usize>,
    /// function arguments (by position) written
    writes_args: Vec<usize>,
    /// function arguments read
    reads_args: Vec<usize>,
    /// elementwise (input, output) pairs that may share memory
    same_index: Vec<(usize, usize)>,
}

#[derive(Clone)]
struct Model {
    bufs: Vec<Buf>,
    /// shared between a model and the candidates' copies of it (a copy
    /// clones only the steps it changes)
    steps: Vec<Rc<Step>>,
}

/// A recomputation: re-run step `step` just before step `before`, and let
/// every later read of its output read the copy.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    step: usize,
    before: usize,
    /// the last use of the output before `before` (its copy is dead
    /// between the two)
    after: usize,
}

struct Placed {
    offsets: Vec<u64>,
    /// buffer -> the buffer whose memory it shares (itself if none)
    root: Vec<usize>,
    arena: u64,
    lower_bound: u64,
    in_place: usize,
    /// the step at which the lower bound is reached
    peak_step: usize,
    /// each root's first and last step, its in-place outputs' included
    spans: Vec<Option<(usize, usize)>>,
}

/// The buffer whose memory `b` shares, following `root` ([`Merged::root`])
/// to its end.
fn root_of(root: &[usize], mut b: usize) -> usize {
    while root[b] != b {
        b = root[b];
    }
    b
}

/// [`Model::merged`]: the in-place merges and the lower bound.
struct Merged {
    /// buffer -> the buffer whose memory it shares (a step towards its root)
    root: Vec<usize>,
    /// each root's first and last step, its in-place outputs' included
    span: Vec<Option<(usize, usize)>>,
    /// the buffers that are their own root and used
    roots: Vec<usize>,
    in_place: usize,
    peak_step: usize,
    lower_bound: u64,
    /// how many steps reach it
    at_peak: usize,
    /// the bytes alive at each step
    alive: Vec<u64>,
}

/// How many cheap recomputations, those that lower the bound most, a
/// round of the budgeted plan places to choose among.
const PLACED_CANDIDATES: usize = 32;

/// How many recomputations of each kind, those estimated to lower the
/// bound most, a round of the bound's search measures.
const MEASURED_CANDIDATES: usize = 8;

/// The greedy placement orders [`Model::place`] tries.
const PLACEMENT_ORDERS: usize = 4;

fn align(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

/// Operand positions an `ll` kernel writes, as its op declares them
/// (`MemWrite` on the operand, read through the memory-effect interface).
/// Per operand of `op`: whether the kernel writes it.
pub(super) fn written(op: MlirOperation) -> Vec<bool> {
    let n = unsafe { mlirOperationGetNumOperands(op) } as usize;
    let mut mask = vec![false; n];
    unsafe { crate::ffi::aicfWrittenOperands(op, mask.as_mut_ptr(), n as isize) };
    mask
}

pub(super) fn is_kernel(name: &str) -> bool {
    name.starts_with("ll.") && name != "ll.reshape"
}

impl Model {
    fn build(block: MlirBlock) -> Model {
        let mut bufs = Vec::new();
        let mut buf_of: HashMap<usize, usize> = HashMap::new();
        let mut arg_of: HashMap<usize, usize> = HashMap::new();
        for i in 0..unsafe { mlirBlockGetNumArguments(block) } {
            arg_of.insert(key(unsafe { mlirBlockGetArgument(block, i) }), i as usize);
        }
        let mut steps = Vec::new();
        for op in ops_of(block) {
            let name = op_name(op);
            if name == "memref.alloc" {
                let r = unsafe { mlirOperationGetResult(op, 0) };
                let s = ir::buffer_spec(r).unwrap_or(crate::types::TensorSpec::new([], crate::types::DType::I1));
                let elt = ir::dtype_bytes(s.dtype);
                buf_of.insert(key(r), bufs.len());
                bufs.push(Buf { alloc: op, bytes: (s.num_elements() as u64).saturating_mul(elt).max(1) });
                continue;
            }
            if name == "ll.reshape" {
                let (src, r) = unsafe { (mlirOperationGetOperand(op, 0), mlirOperationGetResult(op, 0)) };
                if let Some(&b) = buf_of.get(&key(src)) {
                    buf_of.insert(key(r), b);
                }
                if let Some(&a) = arg_of.get(&key(src)) {
                    arg_of.insert(key(r), a);
                }
                continue;
            }
            if !is_kernel(&name) {
                continue;
            }
            let writes_at = written(op);
            let all = operands(op);
            let mut step = Step {
                op,
                name: name.clone(),
                reads: vec![],
                writes: vec![],
                writes_args: vec![],
                reads_args: vec![],
                same_index: vec![],
            };
            let accumulate = name == "ll.gemm" && ir::has(op, "accumulate");
            for (i, v) in all.iter().enumerate() {
                let w = writes_at[i];
                if let Some(&b) = buf_of.get(&key(*v)) {
                    if w {
                        step.writes.push(b);
                    }
                    if !w || accumulate {
                        step.reads.push(b);
                    }
                } else if let Some(&a) = arg_of.get(&key(*v)) {
                    if w {
                        step.writes_args.push(a);
                    } else {
                        step.reads_args.push(a);
                    }
                }
            }
            if name == "ll.elementwise" {
                for (_, v) in all.iter().enumerate().filter(|(i, _)| !writes_at[*i]) {
                    for (_, o) in all.iter().enumerate().filter(|(j, _)| writes_at[*j]) {
                        let same = unsafe { mlirTypeEqual(mlirValueGetType(*v), mlirValueGetType(*o)) };
                        if let (true, Some(&bi), Some(&bo)) = (same, buf_of.get(&key(*v)), buf_of.get(&key(*o))) {
                            // only through the buffers themselves, not views
                            if producer(*v).is_some_and(|p| op_name(p) == "memref.alloc")
                                && producer(*o).is_some_and(|p| op_name(p) == "memref.alloc")
                            {
                                step.same_index.push((bi, bo));
                            }
                        }
                    }
                }
            }
            steps.push(Rc::new(step));
        }
        Model { bufs, steps }
    }

    /// (first, last) step touching each buffer; None for an unused one.
    fn spans(&self) -> Vec<Option<(usize, usize)>> {
        let mut spans: Vec<Option<(usize, usize)>> = vec![None; self.bufs.len()];
        for (t, s) in self.steps.iter().enumerate() {
            for &b in s.reads.iter().chain(&s.writes) {
                spans[b] = Some(match spans[b] {
                    None => (t, t),
                    Some((f, l)) => (f.min(t), l.max(t)),
                });
            }
        }
        spans
    }

    /// The plan by the best of the placement orders.
    fn place(&self) -> Placed {
        self.place_by(PLACEMENT_ORDERS)
    }

    /// The most bytes alive at one step, in-place outputs merged: what
    /// no placement can go below (without placing anything).
    fn lower_bound(&self) -> u64 {
        self.merged().lower_bound
    }

    /// The buffers with their in-place outputs merged into them, and the
    /// most bytes alive at one step.
    fn merged(&self) -> Merged {
        let n = self.bufs.len();
        let spans = self.spans();
        // In place: merge an output into a dying input of the same type.
        let mut root: Vec<usize> = (0..n).collect();
        let mut span: Vec<Option<(usize, usize)>> = spans.clone();
        let mut in_place = 0;
        for (t, s) in self.steps.iter().enumerate() {
            let mut taken: Vec<usize> = Vec::new();
            for &(i, o) in &s.same_index {
                let (ri, ro) = (root_of(&root, i), root_of(&root, o));
                let dies = span[ri].is_some_and(|(_, l)| l == t);
                let fresh = spans[o].is_some_and(|(f, _)| f == t) && ro == o;
                if dies && fresh && ri != ro && !taken.contains(&ri) && !s.writes.contains(&i) {
                    root[ro] = ri;
                    let (fi, _) = span[ri].unwrap_or((t, t));
                    let (_, lo) = span[ro].unwrap_or((t, t));
                    span[ri] = Some((fi, lo.max(t)));
                    taken.push(ri);
                    in_place += 1;
                }
            }
        }
        let roots: Vec<usize> = (0..n).filter(|&b| root[b] == b && span[b].is_some()).collect();
        // Lower bound: the most bytes alive at one step (each root's bytes
        // added at its first step and taken away after its last, summed).
        let mut change = vec![0i128; self.steps.len() + 1];
        for &b in &roots {
            let (f, l) = span[b].unwrap_or((0, 0));
            change[f] += i128::from(align(self.bufs[b].bytes));
            change[l + 1] -= i128::from(align(self.bufs[b].bytes));
        }
        let mut total = 0i128;
        let alive: Vec<u64> = change[..self.steps.len().max(1)]
            .iter()
            .map(|d| {
                total += d;
                total as u64
            })
            .collect();
        let (peak_step, lower_bound) = alive.iter().copied().enumerate().max_by_key(|&(_, a)| a).unwrap_or((0, 0));
        let at_peak = alive.iter().filter(|&&a| a == lower_bound).count();
        Merged { root, span, roots, in_place, peak_step, lower_bound, at_peak, alive }
    }

    /// The plan by the first `orders` placement orders (largest first
    /// alone: 1).
    fn place_by(&self, orders: usize) -> Placed {
        let n = self.bufs.len();
        let Merged { root, span, roots, in_place, peak_step, lower_bound, .. } = self.merged();
        // Placement: each buffer at the lowest offset free over its
        // lifetime, in an order. Largest first is the rule (TFLite's and
        // XLA's heap simulator's greedy by size); where it leaves the arena
        // over the lower bound (fragmentation: a budget between the two was
        // unreachable, since recomputation cannot lower it), the other
        // greedy orders are tried and the smallest arena kept (the first
        // among equals).
        let bytes: Vec<u64> = (0..n).map(|b| self.bufs[b].bytes).collect();
        let first: Vec<u64> = (0..n).map(|b| span[b].map_or(0, |s| s.0 as u64)).collect();
        let length: Vec<u64> = (0..n).map(|b| span[b].map_or(1, |(f, l)| (l - f + 1) as u64)).collect();
        let key = |order: usize, b: usize| -> (u64, u64, u64) {
            let big = u64::MAX - bytes[b];
            match order {
                0 => (big, first[b], 0),
                1 => (u64::MAX - length[b], big, first[b]),
                2 => (first[b], big, 0),
                _ => (u64::MAX - bytes[b].saturating_mul(length[b]), first[b], 0),
            }
        };
        let sizes: Vec<u64> = (0..n).map(|b| align(self.bufs[b].bytes)).collect();
        let mut best: Option<(Vec<u64>, u64)> = None;
        for rule in 0..orders.clamp(1, PLACEMENT_ORDERS) {
            if best.as_ref().is_some_and(|(_, a)| *a <= lower_bound) {
                break;
            }
            let mut order = roots.clone();
            order.sort_by_key(|&b| key(rule, b));
            let (offsets, arena) = first_fit(&order, &span, &sizes);
            if best.as_ref().is_none_or(|(_, a)| arena < *a) {
                best = Some((offsets, arena));
            }
        }
        let (mut offsets, arena) = best.unwrap_or((vec![0; n], 0));
        for b in 0..n {
            let r = root_of(&root, b);
            offsets[b] = offsets[r];
        }
        let root = (0..n).map(|b| root_of(&root, b)).collect();
        Placed { offsets, root, arena, lower_bound, in_place, peak_step, spans: span }
    }

    /// Every recomputation that is legal: a cheap kernel with one output
    /// that it does not read, re-run before a later use that is not the
    /// first one after it.
    fn candidates(&self) -> Vec<Candidate> {
        // Each buffer's readers and writers, and each argument's writers,
        // by step: one pass (a scan of the later steps for each kernel was
        // quadratic in the depth, every round of the search).
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); self.bufs.len()];
        let mut last_writer: Vec<Option<usize>> = vec![None; self.bufs.len()];
        let mut arg_writers: HashMap<usize, Vec<usize>> = HashMap::new();
        for (t, s) in self.steps.iter().enumerate() {
            for &b in &s.reads {
                if readers[b].last() != Some(&t) {
                    readers[b].push(t);
                }
            }
            for &b in &s.writes {
                last_writer[b] = Some(t);
            }
            for &a in &s.writes_args {
                arg_writers.entry(a).or_default().push(t);
            }
        }
        // whether a step in (k, next) writes an argument `s` reads
        let clobbered = |s: &Step, k: usize, next: usize| {
            s.reads_args.iter().any(|a| {
                arg_writers.get(a).is_some_and(|w| {
                    let i = w.partition_point(|&t| t <= k);
                    w.get(i).is_some_and(|&t| t < next)
                })
            })
        };
        let mut out = Vec::new();
        for (k, s) in self.steps.iter().enumerate() {
            if !recomputable(s) || s.writes.len() != 1 || !s.writes_args.is_empty() || s.reads.contains(&s.writes[0]) {
                continue;
            }
            let b = s.writes[0];
            if last_writer[b].is_some_and(|t| t > k) {
                continue;
            }
            let from = readers[b].partition_point(|&t| t <= k);
            for w in readers[b][from..].windows(2) {
                let (prev, next) = (w[0], w[1]);
                if next <= prev + 1 {
                    continue;
                }
                // the recomputed kernel's argument inputs must be unchanged
                if !clobbered(s, k, next) {
                    out.push(Candidate { step: k, before: next, after: prev });
                }
            }
        }
        out
    }

    /// A recomputation that lowers the bound ([`Model::lower_bound`]): of
    /// the best estimates, a cheap one where one does, else a GEMM; None
    /// where none does. Where several steps reach the bound, no one
    /// recomputation may lower it: one that takes a step off it, the bound
    /// kept, counts as lowering it (the pair of the bound and its number of
    /// steps goes down each round; [`plan_memory`] stops where the rebuilt
    /// model's does not). Each candidate is first estimated on the steps'
    /// profile (its output dead between its last use and the copy, its
    /// inputs kept alive to the copy: a few range additions); they are
    /// built and measured down the estimates, the `MEASURED_CANDIDATES`
    /// best of each kind first, the best of the first batch where one
    /// helps kept.
    /// `merged`: this model's ([`Model::merged`]).
    fn lowering_the_bound(&self, merged: &Merged) -> Option<Candidate> {
        let current = (merged.lower_bound, merged.at_peak);
        let candidates = self.candidates();
        let spans = self.spans();
        let mut tree = PeakTree::new(&merged.alive);
        let estimate = |tree: &mut PeakTree, c: &Candidate| -> (u64, usize) {
            let s = &self.steps[c.step];
            let mut changes: Vec<(usize, usize, i128)> = Vec::new();
            if c.after + 1 < c.before {
                changes.push((c.after + 1, c.before - 1, -i128::from(align(self.bufs[s.writes[0]].bytes))));
            }
            for &r in &s.reads {
                let root = root_of(&merged.root, r);
                if let Some((_, l)) = merged.span[root].filter(|&(_, l)| l < c.before) {
                    changes.push((l + 1, c.before, i128::from(align(self.bufs[root].bytes))));
                }
            }
            for &(lo, hi, d) in &changes {
                tree.add(lo, hi, d);
            }
            let peak = tree.peak();
            for &(lo, hi, d) in &changes {
                tree.add(lo, hi, -d);
            }
            peak
        };
        // (Measured once each: the batches past the first go down the
        // same estimates, the first of each kind's candidates included.)
        let measured = std::cell::RefCell::new(HashMap::new());
        let exact = |c: &Candidate| {
            *measured.borrow_mut().entry((c.step, c.before)).or_insert_with(|| {
                let m = self.with(c, &spans).merged();
                (m.lower_bound, m.at_peak)
            })
        };
        let best_of = |measured: Vec<((u64, usize), Candidate)>| {
            measured
                .into_iter()
                .filter(|&(b, _)| b < current)
                .min_by_key(|&(b, c)| (b, c.step, c.before))
                .map(|(_, c)| c)
        };
        // The `MEASURED_CANDIDATES` best estimates of each kind, cheap
        // first; then, where none of those helps, the cheap ones and then
        // all of them down the estimates, in batches twice as large each
        // time, until one helps (measuring every candidate took more than
        // the rest of a deep model's search). A GEMM among the best
        // estimates goes before the cheap ones past them: strictly cheap
        // first measured far more candidates, and recomputed more kernels
        // (the char LM of 16 blocks at 45%: 692 against 489, 3.5 s against
        // 1.6; 64 blocks 99 s against 14.5-18).
        let mut estimated: Vec<((u64, usize), Candidate, bool)> =
            candidates.iter().map(|c| (estimate(&mut tree, c), *c, cheap(&self.steps[c.step]))).collect();
        estimated.sort_by_key(|&(b, c, _)| (b, c.step, c.before));
        let of_kind = |kind: Option<bool>| -> Vec<Candidate> {
            estimated.iter().filter(|e| kind.is_none_or(|k| e.2 == k)).map(|e| e.1).collect()
        };
        for kind in [true, false] {
            let first = of_kind(Some(kind));
            let measured = first.iter().take(MEASURED_CANDIDATES).map(|c| (exact(c), *c)).collect();
            if let Some(c) = best_of(measured) {
                return Some(c);
            }
        }
        for kind in [Some(true), None] {
            let all = of_kind(kind);
            let (mut from, mut size) = (0, MEASURED_CANDIDATES);
            while from < all.len() {
                let to = (from + size).min(all.len());
                let measured = all[from..to].iter().map(|c| (exact(c), *c)).collect();
                if let Some(c) = best_of(measured) {
                    return Some(c);
                }
                (from, size) = (to, size * 2);
            }
        }
        None
    }

    /// The steps `c` re-runs, producers first: the kernel itself and,
    /// recursively (depth 6), the producers of its inputs that are dead by
    /// then (so that a transpose of a GEMM output is recomputed with it).
    fn chain(&self, c: &Candidate, spans: &[Option<(usize, usize)>]) -> Vec<usize> {
        let mut out = Vec::new();
        self.collect_chain(c.step, c.before, spans, 0, &mut out);
        out
    }

    fn collect_chain(
        &self,
        k: usize,
        before: usize,
        spans: &[Option<(usize, usize)>],
        depth: usize,
        out: &mut Vec<usize>,
    ) {
        if out.contains(&k) {
            return;
        }
        if depth < 6 {
            for &r in &self.steps[k].reads {
                let dead = spans[r].is_some_and(|(_, l)| l < before);
                let producer = (0..k).rev().find(|&p| self.steps[p].writes.contains(&r));
                if let Some(p) = producer.filter(|&p| {
                    dead && recomputable(&self.steps[p])
                        && self.steps[p].writes.len() == 1
                        && self.steps[p].writes_args.is_empty()
                        && !self.steps[p + 1..before]
                            .iter()
                            .any(|t| t.writes_args.iter().any(|a| self.steps[p].reads_args.contains(a)))
                }) {
                    self.collect_chain(p, before, spans, depth + 1, out);
                }
            }
        }
        out.push(k);
    }

    /// The model after `c`; `spans` are this model's ([`Model::spans`]).
    fn with(&self, c: &Candidate, spans: &[Option<(usize, usize)>]) -> Model {
        let mut m = self.clone();
        let chain = self.chain(c, spans);
        let mut copies = Vec::new();
        for &k in &chain {
            let old = self.steps[k].writes[0];
            let fresh = m.bufs.len();
            m.bufs.push(self.bufs[old]);
            let mut copy = Step::clone(&self.steps[k]);
            copy.writes = vec![fresh];
            copy.same_index.clear();
            // earlier copies of the chain feed this one
            for r in &mut copy.reads {
                if let Some(&(_, f)) = copies.iter().find(|(o, _)| o == r) {
                    *r = f;
                }
            }
            copies.push((old, fresh));
            m.steps.insert(c.before + copies.len() - 1, Rc::new(copy));
        }
        let after = c.before + copies.len();
        for s in &mut m.steps[after..] {
            let renamed = |b: &usize| copies.iter().any(|(o, _)| o == b);
            if !s.reads.iter().any(renamed) && !s.same_index.iter().any(|p| renamed(&p.0)) {
                continue;
            }
            let s = Rc::make_mut(s);
            for r in &mut s.reads {
                if let Some(&(_, f)) = copies.iter().find(|(o, _)| o == r) {
                    *r = f;
                }
            }
            for p in &mut s.same_index {
                if let Some(&(_, f)) = copies.iter().find(|(o, _)| *o == p.0) {
                    p.0 = f;
                }
            }
        }
        m
    }
}

/// The bytes alive at each step under range additions, and their most
/// at one step: a segment tree whose nodes keep their range's most and
/// the addition to all of it (no push-down: an addition is undone by
/// adding its negative).
struct PeakTree {
    leaves: usize,
    most: Vec<i128>,
    /// how many steps of the node's range are at its most
    at_most: Vec<usize>,
    added: Vec<i128>,
}

impl PeakTree {
    fn new(alive: &[u64]) -> PeakTree {
        let leaves = alive.len().max(1).next_power_of_two();
        let mut tree = PeakTree {
            leaves,
            most: vec![i128::MIN / 4; 2 * leaves],
            at_most: vec![1; 2 * leaves],
            added: vec![0; 2 * leaves],
        };
        for (i, &a) in alive.iter().enumerate() {
            tree.most[leaves + i] = i128::from(a);
        }
        for node in (1..leaves).rev() {
            tree.join(node);
        }
        tree
    }

    fn join(&mut self, node: usize) {
        let (l, r) = (self.most[2 * node], self.most[2 * node + 1]);
        self.most[node] = self.added[node] + l.max(r);
        self.at_most[node] = match l.cmp(&r) {
            std::cmp::Ordering::Greater => self.at_most[2 * node],
            std::cmp::Ordering::Less => self.at_most[2 * node + 1],
            std::cmp::Ordering::Equal => self.at_most[2 * node] + self.at_most[2 * node + 1],
        };
    }

    /// Adds `d` at the steps `lo..=hi`.
    fn add(&mut self, lo: usize, hi: usize, d: i128) {
        self.add_at(1, 0, self.leaves - 1, lo, hi.min(self.leaves - 1), d);
    }

    fn add_at(&mut self, node: usize, from: usize, to: usize, lo: usize, hi: usize, d: i128) {
        if hi < from || to < lo || lo > hi {
            return;
        }
        if lo <= from && to <= hi {
            self.most[node] += d;
            self.added[node] += d;
            return;
        }
        let mid = (from + to) / 2;
        self.add_at(2 * node, from, mid, lo, hi, d);
        self.add_at(2 * node + 1, mid + 1, to, lo, hi, d);
        self.join(node);
    }

    /// The most bytes alive at one step, and at how many steps.
    fn peak(&self) -> (u64, usize) {
        (self.most[1].max(0) as u64, self.at_most[1])
    }
}

/// Places the buffers of `order`, in that order, each at the lowest offset
/// free over its lifetime (`spans`, inclusive steps) of `sizes` bytes:
/// the offsets (by buffer) and the arena's size.
fn first_fit(order: &[usize], spans: &[Option<(usize, usize)>], sizes: &[u64]) -> (Vec<u64>, u64) {
    let mut offsets = vec![0u64; sizes.len()];
    // The placed buffers' (start, end, first step, last step), kept in the
    // order of their memory: a buffer's lowest free offset is one walk
    // over those alive with it (sorting those anew for each buffer made a
    // budgeted plan's search quadratic twice over).
    let mut placed: Vec<(u64, u64, usize, usize)> = Vec::new();
    let mut arena = 0;
    for &b in order {
        let (f, l) = spans[b].unwrap_or((0, 0));
        let size = sizes[b];
        let mut at = 0;
        for &(s, e, pf, pl) in &placed {
            if pf > l || f > pl {
                continue;
            }
            if at + size <= s {
                break;
            }
            at = at.max(e);
        }
        offsets[b] = at;
        arena = arena.max(at + size);
        let entry = (at, at + size, f, l);
        let k = placed.partition_point(|p| (p.0, p.1) <= (entry.0, entry.1));
        placed.insert(k, entry);
    }
    (offsets, arena)
}

/// Kernels worth re-running instead of keeping their output: memory-bound
/// ones (elementwise, norms, softmax, transposes), and, as a last resort
/// chosen only when none of those helps, GEMMs and attention (the
/// activation checkpointing of a whole layer).
fn cheap(s: &Step) -> bool {
    matches!(s.name.as_str(), "ll.elementwise" | "ll.norm" | "ll.softmax" | "ll.transpose")
}

fn recomputable(s: &Step) -> bool {
    cheap(s) || (s.name == "ll.gemm" && !ir::has(s.op, "accumulate")) || s.name == "ll.attention"
}

/// Applies `c` to the IR: clones of the chain's kernels before the use,
/// each into a fresh buffer, and every later reader renamed.
fn recompute(block: MlirBlock, model: &Model, c: &Candidate) -> Result<usize, Failure> {
    let before = model.steps[c.before].op;
    let ctx = unsafe { mlirOperationGetContext(before) };
    let order: HashMap<usize, usize> = ops_of(block).iter().enumerate().map(|(i, o)| (o.ptr as usize, i)).collect();
    let from = order[&(before.ptr as usize)];
    let chain = model.chain(c, &model.spans());
    let mut renames: Vec<(MlirValue, MlirValue)> = Vec::new();
    for &k in &chain {
        let producer_op = model.steps[k].op;
        let loc = op_loc(producer_op);
        let old = unsafe { mlirOperationGetResult(model.bufs[model.steps[k].writes[0]].alloc, 0) };
        let t = unsafe { mlirValueGetType(old) };
        let alloc = ir::alloc(ctx, loc, t).map_err(|e| (loc, format!("internal error: {e:?}")))?;
        let fresh = unsafe { mlirOperationGetResult(alloc, 0) };
        unsafe {
            mlirBlockInsertOwnedOperationBefore(block, before, alloc);
            let clone = mlirOperationClone(producer_op);
            // Marked: its FLOPs are a plan's, not the model's (a run's
            // count and its --flops-budget do not depend on the budget).
            let unit = mlirUnitAttrGet(ctx);
            mlirOperationSetAttributeByName(clone, crate::ffi::string_ref(RECOMPUTED), unit);
            for i in 0..mlirOperationGetNumOperands(clone) {
                if mlirOperationGetOperand(clone, i).ptr == old.ptr {
                    mlirOperationSetOperand(clone, i, fresh);
                }
            }
            mlirBlockInsertOwnedOperationBefore(block, before, clone);
        }
        renames.push((old, fresh));
    }
    // Readers at or after the first clone read the fresh buffers (through
    // new views where they read an old view).
    // (The views made below are not in it: none reads an old buffer.)
    let order: HashMap<usize, usize> = ops_of(block).iter().enumerate().map(|(i, o)| (o.ptr as usize, i)).collect();
    for (old, fresh) in renames {
        let start = from;
        let late = |u: MlirOperation| order.get(&(u.ptr as usize)).is_some_and(|&p| p >= start);
        let mut pairs = vec![(old, fresh)];
        let mut i = 0;
        while i < pairs.len() {
            let (o, f) = pairs[i];
            for u in users(o) {
                if op_name(u) == "ll.reshape" {
                    let r = unsafe { mlirOperationGetResult(u, 0) };
                    if late(u) {
                        unsafe { mlirOperationSetOperand(u, 0, f) };
                    } else if users(r).into_iter().any(late) {
                        let view = ir::create_op(
                            ctx,
                            op_loc(u),
                            &OpSpec {
                                operands: &[f],
                                results: Some(&[unsafe { mlirValueGetType(r) }]),
                                ..OpSpec::new("ll.reshape")
                            },
                        )
                        .map_err(|e| (op_loc(u), format!("internal error: {e:?}")))?;
                        // right after the fresh buffer's definition
                        let def = producer(f)
                            .ok_or((op_loc(u), "internal error: a recomputed buffer has no alloc".to_string()))?;
                        unsafe { mlirBlockInsertOwnedOperationAfter(block, def, view) };
                        pairs.push((r, unsafe { mlirOperationGetResult(view, 0) }));
                    }
                    continue;
                }
                if !late(u) {
                    continue;
                }
                for k in 0..unsafe { mlirOperationGetNumOperands(u) } {
                    if unsafe { mlirOperationGetOperand(u, k) }.ptr == o.ptr {
                        unsafe { mlirOperationSetOperand(u, k, f) };
                    }
                }
            }
            i += 1;
        }
    }
    Ok(chain.len())
}

fn over_budget(name: &str, model: &Model, placed: &Placed, budget: u64, recomputed: usize, train: bool) -> String {
    // The spans the lower bound was summed over: a root's own, extended by
    // the in-place outputs that share it.
    let t = placed.peak_step;
    let mut alive: Vec<(u64, String)> = Vec::new();
    for (b, buf) in model.bufs.iter().enumerate() {
        if placed.root[b] != b {
            continue;
        }
        if placed.spans[b].is_some_and(|(f, l)| f <= t && t <= l) {
            let ty = ir::type_text(unsafe { mlirValueGetType(mlirOperationGetResult(buf.alloc, 0)) });
            alive.push((buf.bytes, format!("{ty} ({} bytes)", buf.bytes)));
        }
    }
    // The largest first, at most 12 (a ResNet's peak listed about 80, 3 KB
    // of text): the rest counted with their bytes.
    alive.sort_by(|a, b| b.0.cmp(&a.0));
    const SHOWN: usize = 12;
    let rest: u64 = alive.iter().skip(SHOWN).map(|(bytes, _)| bytes).sum();
    let more = alive.len().saturating_sub(SHOWN);
    let mut alive: Vec<String> = alive.into_iter().take(SHOWN).map(|(_, text)| text).collect();
    if more > 0 {
        alive.push(format!("and {more} more ({rest} bytes)"));
    }
    let at = model.steps.get(t).map(|s| s.name.clone()).unwrap_or_default();
    // (A budget holds for every function: a percentage one is of the
    // largest arena, the train step's, and another function, which
    // recomputes less, can be the one over it.)
    let every = if !train || name == "train_step" {
        String::new()
    } else {
        " (a budget holds for every function of the module, not only @train_step)".to_string()
    };
    format!(
        "@{name} needs an arena of {} bytes (lower bound {}) after {recomputed} recomputations, over the budget of \
         {budget} bytes{every}; no recomputation lowers it further (the values alive at the peak are all needed there; a \
         smaller batch shrinks those of activations: `aicf train --batch N` (the pass hl-set-batch), with \
         `--accumulate` to keep the global batch). Alive at the peak (kernel #{t}, '{at}'), the largest first: {}",
        placed.arena,
        placed.lower_bound,
        alive.join(", ")
    )
}

fn rewrite(
    func: MlirOperation,
    block: MlirBlock,
    model: &Model,
    placed: &Placed,
    plan: &MemoryPlan,
) -> Result<(), Failure> {
    let loc = op_loc(func);
    let ctx = unsafe { mlirOperationGetContext(func) };
    let arena_ty = ir::parse_type(ctx, &format!("memref<{}xi8>", plan.arena_bytes))
        .map_err(|e| (loc, format!("internal error: {e:?}")))?;
    let arena = unsafe { mlirBlockAddArgument(block, arena_ty, loc) };
    let index = ir::parse_type(ctx, "index").map_err(|e| (loc, format!("{e:?}")))?;
    for (b, buf) in model.bufs.iter().enumerate() {
        let r = unsafe { mlirOperationGetResult(buf.alloc, 0) };
        let t = unsafe { mlirValueGetType(r) };
        let off = ir::create_op(
            ctx,
            loc,
            &OpSpec {
                attributes: &[("value", format!("{} : index", placed.offsets[b]))],
                results: Some(&[index]),
                ..OpSpec::new("arith.constant")
            },
        )
        .map_err(|e| (loc, format!("{e:?}")))?;
        let view = ir::create_op(
            ctx,
            op_loc(buf.alloc),
            &OpSpec {
                operands: &[arena, unsafe { mlirOperationGetResult(off, 0) }],
                results: Some(&[t]),
                ..OpSpec::new("memref.view")
            },
        )
        .map_err(|e| (loc, format!("internal error building memref.view: {e:?}")))?;
        unsafe {
            mlirBlockInsertOwnedOperationBefore(block, buf.alloc, off);
            mlirBlockInsertOwnedOperationBefore(block, buf.alloc, view);
            mlirValueReplaceAllUsesOfWith(r, mlirOperationGetResult(view, 0));
            mlirOperationDestroy(buf.alloc);
        }
    }
    // The signature: one more argument, tagged.
    let args: Vec<String> = (0..unsafe { mlirBlockGetNumArguments(block) })
        .map(|i| ir::type_text(unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) }))
        .collect();
    let fty = ir::attr(func, "function_type");
    let results: Vec<String> = unsafe {
        let t = mlirTypeAttrGetValue(fty);
        (0..mlirFunctionTypeGetNumResults(t)).map(|i| ir::type_text(mlirFunctionTypeGetResult(t, i))).collect()
    };
    let mut tags: Vec<String> = Vec::new();
    let old = ir::attr(func, "arg_attrs");
    for i in 0..args.len() - 1 {
        let a = unsafe {
            if old.ptr.is_null() || i as isize >= mlirArrayAttrGetNumElements(old) {
                "{}".to_string()
            } else {
                ir::attr_text_raw(mlirArrayAttrGetElement(old, i as isize))
            }
        };
        tags.push(a);
    }
    tags.push("{ll.bind = \"arena\"}".into());
    let memory = format!(
        "{{arena_bytes = {} : i64, lower_bound_bytes = {} : i64, naive_bytes = {} : i64, buffers = {} : i64, \
         in_place = {} : i64, recomputed = {} : i64}}",
        plan.arena_bytes, plan.lower_bound_bytes, plan.naive_bytes, plan.buffers, plan.in_place, plan.recomputed
    );
    for (k, text) in [
        ("function_type", format!("({}) -> ({})", args.join(", "), results.join(", "))),
        ("arg_attrs", format!("[{}]", tags.join(", "))),
        ("ll.memory", memory),
    ] {
        let a = ir::parse_attribute(ctx, &text).map_err(|e| (loc, format!("internal error: {e:?}")))?;
        unsafe { mlirOperationSetAttributeByName(func, crate::ffi::string_ref(k), a) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{PeakTree, first_fit};

    /// First fit as it was written first: for each buffer, the placed ones
    /// alive with it sorted by offset, then the lowest gap.
    fn first_fit_by_sorting(order: &[usize], spans: &[Option<(usize, usize)>], sizes: &[u64]) -> (Vec<u64>, u64) {
        let mut offsets = vec![0u64; sizes.len()];
        let mut placed: Vec<usize> = Vec::new();
        let mut arena = 0;
        for &b in order {
            let (f, l) = spans[b].unwrap_or((0, 0));
            let mut busy: Vec<(u64, u64)> = placed
                .iter()
                .filter(|&&p| spans[p].is_some_and(|(pf, pl)| pf <= l && f <= pl))
                .map(|&p| (offsets[p], offsets[p] + sizes[p]))
                .collect();
            busy.sort();
            let mut at = 0;
            for (s, e) in busy {
                if at + sizes[b] <= s {
                    break;
                }
                at = at.max(e);
            }
            offsets[b] = at;
            arena = arena.max(at + sizes[b]);
            placed.push(b);
        }
        (offsets, arena)
    }

    #[test]
    fn first_fit_places_as_sorting_the_busy_ranges_did_and_overlaps_nothing_alive() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..200 {
            let n = 1 + next(60) as usize;
            let steps = 1 + next(40) as usize;
            let spans: Vec<Option<(usize, usize)>> = (0..n)
                .map(|_| {
                    let f = next(steps as u64) as usize;
                    Some((f, f + next((steps - f) as u64) as usize))
                })
                .collect();
            // Few distinct sizes, so that equal ranges and exact fits occur.
            let sizes: Vec<u64> = (0..n).map(|_| 64 * (1 + next(8))).collect();
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                order.swap(i, next(i as u64 + 1) as usize);
            }
            let (offsets, arena) = first_fit(&order, &spans, &sizes);
            assert_eq!((offsets.clone(), arena), first_fit_by_sorting(&order, &spans, &sizes));
            for a in 0..n {
                assert!(offsets[a] + sizes[a] <= arena);
                for b in a + 1..n {
                    let ((fa, la), (fb, lb)) = (spans[a].unwrap(), spans[b].unwrap());
                    let together = fa <= lb && fb <= la;
                    let apart = offsets[a] + sizes[a] <= offsets[b] || offsets[b] + sizes[b] <= offsets[a];
                    assert!(!together || apart, "buffers {a} and {b} are alive together and overlap");
                }
            }
        }
    }

    #[test]
    fn the_peak_tree_keeps_the_most_bytes_alive_and_its_steps_under_range_additions() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..300 {
            let n = 1 + next(50) as usize;
            // Few distinct values, so that several steps share the most.
            let mut alive: Vec<i128> = (0..n).map(|_| 64 * next(6) as i128).collect();
            let start: Vec<u64> = alive.iter().map(|&a| a as u64).collect();
            let mut tree = PeakTree::new(&start);
            let mut done = Vec::new();
            for _ in 0..8 {
                let lo = next(n as u64) as usize;
                let hi = lo + next((n - lo) as u64) as usize;
                let d = 64 * (next(5) as i128 - 2);
                tree.add(lo, hi, d);
                done.push((lo, hi, d));
                for a in &mut alive[lo..=hi] {
                    *a += d;
                }
                let most = *alive.iter().max().unwrap();
                let at = alive.iter().filter(|&&a| a == most).count();
                assert_eq!(tree.peak(), (most.max(0) as u64, at), "after adding {d} at {lo}..={hi} of {n}");
            }
            // Undone by the negatives, in any order: as built.
            for (lo, hi, d) in done.into_iter().rev() {
                tree.add(lo, hi, -d);
            }
            let most = *start.iter().max().unwrap();
            assert_eq!(tree.peak(), (most, start.iter().filter(|&&a| a == most).count()));
        }
    }
}
