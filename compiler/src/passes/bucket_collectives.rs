//! `ll-bucket-collectives`: a data-parallel train step's all-reduces, moved
//! to where their buffers are ready and merged into buckets.
//!
//! Algorithm, per function (see the pass description in Passes.td):
//! 1. Each `ll.all_reduce` moves up to just after the last op before it
//!    that touches (reads, writes or defines) one of its buffers or a view
//!    of one: the kernel that computed the gradient.
//! 2. In program order, reductions join the open bucket until it holds at
//!    least `bucket-bytes`; a reduction that would carry a bucket member
//!    past an op touching that member's buffers closes the bucket first.
//!    Each bucket becomes one `ll.all_reduce` of all its buffers at the
//!    place of its last member.

use super::common::Failure;
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, OpSpec, key, op_loc, op_name, operands, ops_of, producer};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashMap;

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let bytes = match options.get_i64("bucket-bytes") {
        Ok(b) if b >= 0 => b as u64,
        Ok(b) => {
            emit_error(module.location(), &format!("ll-bucket-collectives: bucket-bytes must be at least 0, got {b}"));
            return Err(PassFailed);
        }
        Err(m) => {
            emit_error(module.location(), &format!("ll-bucket-collectives: {m}"));
            return Err(PassFailed);
        }
    };
    bucket_collectives(module.to_raw(), bytes).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("ll-bucket-collectives: {m}"));
        PassFailed
    })
}

/// Buckets every function's all-reduces; returns the number of collective
/// calls left per function.
pub fn bucket_collectives(module: MlirOperation, bucket_bytes: u64) -> Result<Vec<(String, usize)>, Failure> {
    let mut out = Vec::new();
    for (func, block) in ir::functions(module) {
        super::plan_memory::require_lowered(block)?;
        // Merged after ll-schedule, the reductions lost their streams, waits
        // and events (later ops waited on events nothing recorded).
        if let Some(op) = ops_of(block).into_iter().find(|&o| ir::has(o, "ll.stream")) {
            let name = ir::string_attr(func, "sym_name").unwrap_or_default();
            return Err((
                op_loc(op),
                format!(
                    "@{name} is scheduled already (ll.stream): bucket collectives before ll-schedule, as the pipeline does"
                ),
            ));
        }
        move_up(block);
        let calls = merge(block, bucket_bytes)?;
        out.push((ir::string_attr(func, "sym_name").unwrap_or_default(), calls));
    }
    Ok(out)
}

/// The buffer a value is a view of (through `ll.reshape`), by key.
fn root(mut v: MlirValue) -> usize {
    while let Some(p) = producer(v).filter(|&p| op_name(p) == "ll.reshape") {
        v = unsafe { mlirOperationGetOperand(p, 0) };
    }
    key(v)
}

/// The buffers a reduction sums (its operands before the weight), by
/// their roots.
fn roots_of(op: MlirOperation) -> Vec<usize> {
    let mut x = operands(op);
    x.pop();
    x.into_iter().map(root).collect()
}

/// A reduction's weight operand.
fn weight_of(op: MlirOperation) -> Option<MlirValue> {
    operands(op).last().copied()
}

/// A function's ops in order, and for each buffer (root) the positions of
/// the ops other than reductions that read, write or define it or a view
/// of it, ascending.
struct Touches {
    ops: Vec<MlirOperation>,
    position: HashMap<usize, usize>,
    by_root: HashMap<usize, Vec<usize>>,
}

impl Touches {
    fn of(block: MlirBlock) -> Touches {
        let ops = ops_of(block);
        let mut position = HashMap::new();
        let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
        for (i, &op) in ops.iter().enumerate() {
            position.insert(op.ptr as usize, i);
            if op_name(op) == "ll.all_reduce" {
                continue;
            }
            let mut roots: Vec<usize> = operands(op).into_iter().map(root).collect();
            for r in 0..unsafe { mlirOperationGetNumResults(op) } {
                roots.push(root(unsafe { mlirOperationGetResult(op, r) }));
            }
            roots.sort_unstable();
            roots.dedup();
            for r in roots {
                by_root.entry(r).or_default().push(i);
            }
        }
        Touches { ops, position, by_root }
    }

    fn at(&self, op: MlirOperation) -> usize {
        self.position.get(&(op.ptr as usize)).copied().unwrap_or(0)
    }

    /// The last position before `at` that touches one of `roots`.
    fn last_before(&self, roots: &[usize], at: usize) -> Option<usize> {
        roots
            .iter()
            .filter_map(|r| {
                let list = self.by_root.get(r)?;
                let n = list.partition_point(|&p| p < at);
                n.checked_sub(1).map(|i| list[i])
            })
            .max()
    }

    /// Whether an op strictly between `from` and `to` touches one of `roots`.
    fn touched_between(&self, roots: &[usize], from: usize, to: usize) -> bool {
        roots.iter().any(|r| {
            self.by_root.get(r).is_some_and(|list| {
                let n = list.partition_point(|&p| p <= from);
                list.get(n).is_some_and(|&p| p < to)
            })
        })
    }
}

/// Moves every reduction to just after the last op before it that touches
/// one of its buffers (nothing in between does, so the move changes no
/// value).
fn move_up(block: MlirBlock) {
    let t = Touches::of(block);
    for &r in t.ops.iter().filter(|&&o| op_name(o) == "ll.all_reduce") {
        let at = t.at(r);
        match t.last_before(&roots_of(r), at) {
            Some(p) if p + 1 < at => unsafe { mlirOperationMoveAfter(r, t.ops[p]) },
            None if at > 0 => unsafe { mlirOperationMoveBefore(r, t.ops[0]) },
            _ => {}
        }
    }
}

/// Merges the reductions into buckets; returns how many are left.
fn merge(block: MlirBlock, bucket_bytes: u64) -> Result<usize, Failure> {
    let t = Touches::of(block);
    let reductions: Vec<MlirOperation> = t.ops.iter().copied().filter(|&o| op_name(o) == "ll.all_reduce").collect();
    let Some(&first) = reductions.first() else { return Ok(0) };
    let mut buckets: Vec<Vec<MlirOperation>> = Vec::new();
    let mut open: Vec<MlirOperation> = Vec::new();
    let mut open_bytes = 0u64;
    for &r in &reductions {
        // Carrying a member down to `r`'s place must pass no op that
        // touches its buffers.
        let at = t.at(r);
        // A bucket shares one weight, and is local (scaled only) or summed.
        let other_weight = open.first().is_some_and(|&m| {
            weight_of(m).map(key) != weight_of(r).map(key) || ir::has(m, "local") != ir::has(r, "local")
        });
        if other_weight || open.iter().any(|&m| t.touched_between(&roots_of(m), t.at(m), at)) {
            buckets.push(std::mem::take(&mut open));
            open_bytes = 0;
        }
        open.push(r);
        open_bytes = open_bytes.saturating_add(buffer_bytes(r)?);
        if open_bytes >= bucket_bytes {
            buckets.push(std::mem::take(&mut open));
            open_bytes = 0;
        }
    }
    if !open.is_empty() {
        buckets.push(open);
    }
    let ctx = unsafe { mlirOperationGetContext(first) };
    let count = buckets.len();
    for bucket in buckets {
        let [.., last] = bucket[..] else { continue };
        if bucket.len() == 1 {
            continue;
        }
        let weight = weight_of(last).ok_or_else(|| (op_loc(last), "an all-reduce without a weight".to_string()))?;
        let mut buffers: Vec<MlirValue> = bucket
            .iter()
            .flat_map(|&m| {
                let mut x = operands(m);
                x.pop();
                x
            })
            .collect();
        buffers.push(weight);
        let local = if ir::has(last, "local") { vec![("local", "unit".to_string())] } else { vec![] };
        let spec =
            OpSpec { operands: &buffers, attributes: &local, results: Some(&[]), ..OpSpec::new("ll.all_reduce") };
        let merged = ir::create_op(ctx, op_loc(last), &spec)
            .map_err(|e| (op_loc(last), format!("internal error merging a bucket: {e:?}")))?;
        unsafe {
            mlirBlockInsertOwnedOperationBefore(block, last, merged);
            for m in bucket {
                mlirOperationDestroy(m);
            }
        }
    }
    Ok(count)
}

/// The bytes a reduction's buffers hold.
fn buffer_bytes(r: MlirOperation) -> Result<u64, Failure> {
    let mut x = operands(r);
    x.pop();
    x.into_iter().try_fold(0u64, |total, v| {
        let s = ir::buffer_spec(v).ok_or_else(|| (op_loc(r), "a buffer without a static memref type".to_string()))?;
        let bytes = s.shape.iter().fold(ir::dtype_bytes(s.dtype), |n, &d| n.saturating_mul(d as u64));
        Ok(total.saturating_add(bytes))
    })
}
