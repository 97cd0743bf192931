//! `ll-schedule`: streams for independent kernels and the events that
//! order kernels across streams. Program order stays the execution order
//! (it is a topological order of the dependences; the CPU backend runs it
//! as is).
//!
//! Algorithm, per function:
//! 1. What each kernel reads and writes, in bytes: an arena view is its
//!    range of the arena, a reshape view its source's range, an argument or
//!    a global the whole buffer.
//! 2. Kernel `j` depends on an earlier `i` when one writes bytes the other
//!    reads or writes.
//! 3. `j` continues the stream of its latest predecessor that is still the
//!    last kernel of its stream; else it opens a new stream (up to
//!    `max-streams`), else it joins the stream that has been idle longest.
//! 4. For a predecessor on another stream that `j`'s stream has not yet
//!    waited for (or for a later kernel of it), the predecessor records an
//!    event and `j` waits on it.

use super::common::Failure;
use super::plan_memory::{is_kernel, require_lowered, written};
use super::{PassFailed, PassOptions, PassResult, emit_error};
use crate::ir::{self, key, op_loc, op_name, operands, ops_of, producer};
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::*;
use std::collections::HashMap;

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let max = match options.get_i64("max-streams") {
        Ok(m) if m >= 1 => m as usize,
        Ok(m) => {
            emit_error(module.location(), &format!("ll-schedule: max-streams must be at least 1, got {m}"));
            return Err(PassFailed);
        }
        Err(m) => {
            emit_error(module.location(), &format!("ll-schedule: {m}"));
            return Err(PassFailed);
        }
    };
    schedule(module.to_raw(), max).map(|_| ()).map_err(|(loc, m)| {
        emit_error(unsafe { Location::from_raw(loc) }, &format!("ll-schedule: {m}"));
        PassFailed
    })
}

/// The schedule of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub streams: usize,
    pub events: usize,
    /// per kernel in program order: its stream
    pub stream_of: Vec<usize>,
}

/// A byte range of one memory space (the arena, an argument, a global).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    space: usize,
    start: u64,
    end: u64,
}

impl Range {
    fn overlaps(&self, o: &Range) -> bool {
        self.space == o.space && self.start < o.end && o.start < self.end
    }
}

/// Schedules every `ll` function of `module`.
pub fn schedule(module: MlirOperation, max_streams: usize) -> Result<Vec<(String, Schedule)>, Failure> {
    let mut out = Vec::new();
    for (func, block) in ir::functions(module) {
        require_lowered(block)?;
        let kernels: Vec<MlirOperation> = ops_of(block).into_iter().filter(|&o| is_kernel(&op_name(o))).collect();
        let mut spaces: HashMap<usize, usize> = HashMap::new();
        let mut access: Vec<Access> = Vec::new();
        for &k in &kernels {
            let w = written(k);
            let (mut reads, mut writes) = (Vec::new(), Vec::new());
            for (i, v) in operands(k).into_iter().enumerate() {
                let r = range(v, &mut spaces);
                if w[i] {
                    writes.push(r);
                    if op_name(k) == "ll.gemm" && ir::has(k, "accumulate") {
                        reads.push(r);
                    }
                } else {
                    reads.push(r);
                }
            }
            access.push((reads, writes));
        }
        let collective: Vec<bool> = kernels.iter().map(|&k| op_name(k) == "ll.all_reduce").collect();
        let Assignment { stream_of, event_of, waits, streams } = assign(&access, &collective, max_streams);
        let ctx = unsafe { mlirOperationGetContext(func) };
        let set = |op: MlirOperation, k: &str, text: String| -> Result<(), Failure> {
            let a = ir::parse_attribute(ctx, &text).map_err(|e| (op_loc(op), format!("internal error: {e:?}")))?;
            unsafe { mlirOperationSetAttributeByName(op, crate::ffi::string_ref(k), a) };
            Ok(())
        };
        for (j, &k) in kernels.iter().enumerate() {
            // A schedule made before (the pass run twice) is replaced
            // whole: an event or wait it left would name events the new
            // one does not record.
            for stale in ["ll.event", "ll.wait"] {
                unsafe { mlirOperationRemoveAttributeByName(k, crate::ffi::string_ref(stale)) };
            }
            set(k, "ll.stream", format!("{} : i64", stream_of[j]))?;
            if let Some(e) = event_of.get(&j) {
                set(k, "ll.event", format!("{e} : i64"))?;
            }
            if !waits[j].is_empty() {
                let list: Vec<String> = waits[j].iter().map(usize::to_string).collect();
                set(k, "ll.wait", format!("array<i64: {}>", list.join(", ")))?;
            }
        }
        set(func, "ll.schedule", format!("{{streams = {streams} : i64, events = {} : i64}}", event_of.len()))?;
        let name = ir::string_attr(func, "sym_name").unwrap_or_default();
        out.push((name, Schedule { streams, events: event_of.len(), stream_of }));
    }
    Ok(out)
}

/// The kernels' reads and writes, in program order.
type Access = (Vec<Range>, Vec<Range>);

/// Streams and events for kernels with these accesses.
#[derive(Debug, PartialEq)]
struct Assignment {
    stream_of: Vec<usize>,
    /// kernel -> the event it records
    event_of: HashMap<usize, usize>,
    /// per kernel: the events it waits for, in order
    waits: Vec<Vec<usize>>,
    streams: usize,
}

/// Steps 2-4 of the algorithm. Collectives (`collective[j]`) all go on one
/// stream of their own, beyond `max_streams`, which no other kernel
/// continues: every replica issues them in program order, as NCCL needs,
/// and a kernel that needs a reduced gradient waits for its event.
fn assign(access: &[Access], collective: &[bool], max_streams: usize) -> Assignment {
    let n = access.len();
    let hits = |a: &[Range], b: &[Range]| a.iter().any(|x| b.iter().any(|y| x.overlaps(y)));
    let depends = |i: usize, j: usize| {
        let (ri, wi) = &access[i];
        let (rj, wj) = &access[j];
        hits(wi, rj) || hits(ri, wj) || hits(wi, wj)
    };
    let mut stream_of: Vec<usize> = Vec::new();
    let mut tail: Vec<usize> = Vec::new(); // per stream: its last kernel
    let mut on_stream: Vec<Vec<usize>> = Vec::new(); // per stream: its kernels in order
    let mut event_of: HashMap<usize, usize> = HashMap::new();
    let mut waits: Vec<Vec<usize>> = vec![Vec::new(); n];
    // synced[s][t]: the last kernel of stream t that stream s is ordered after
    let mut synced: Vec<Vec<Option<usize>>> = Vec::new();
    let mut comm: Option<usize> = None;
    for j in 0..n {
        let is_collective = collective.get(j).copied().unwrap_or(false);
        let compute = |s: &usize| Some(*s) != comm;
        // Only two kinds of predecessor matter, so only they are
        // looked for (comparing with every earlier kernel would cost
        // the square of the kernel count): the streams' last kernels,
        // to continue a stream, and the kernels of other streams
        // since the chosen stream last waited for them, for events.
        // `j` continues the stream whose last kernel is its latest
        // predecessor among the streams' last kernels.
        let cont = (0..tail.len()).filter(compute).filter(|&s| depends(tail[s], j)).max_by_key(|&s| tail[s]);
        let computing = tail.len() - comm.is_some() as usize;
        let s = match (is_collective, comm, cont) {
            (true, Some(c), _) => c,
            (false, _, Some(s)) => s,
            (true, None, _) | (false, _, None) if is_collective || computing < max_streams => {
                if is_collective {
                    comm = Some(tail.len());
                }
                tail.push(j);
                on_stream.push(Vec::new());
                for row in &mut synced {
                    row.push(None);
                }
                synced.push(vec![None; tail.len()]);
                tail.len() - 1
            }
            _ => (0..tail.len()).filter(compute).min_by_key(|&s| tail[s]).unwrap_or(0),
        };
        let mut preds: Vec<usize> = Vec::new();
        for (ps, kernels_of) in on_stream.iter().enumerate() {
            if ps == s {
                continue;
            }
            let since = kernels_of.partition_point(|&p| synced[s][ps].is_some_and(|q| p <= q));
            preds.extend(kernels_of[since..].iter().copied().filter(|&p| depends(p, j)));
        }
        preds.sort_unstable();
        for p in preds {
            let ps = stream_of[p];
            let next = event_of.len();
            let e = *event_of.entry(p).or_insert(next);
            if !waits[j].contains(&e) {
                waits[j].push(e);
            }
            synced[s][ps] = Some(p);
        }
        stream_of.push(s);
        on_stream[s].push(j);
        tail[s] = j;
    }
    Assignment { stream_of, event_of, waits, streams: tail.len().max(1) }
}

/// The bytes `v` names: its arena range, or all of its buffer.
fn range(v: MlirValue, spaces: &mut HashMap<usize, usize>) -> Range {
    let mut space_of = |k: usize| {
        let n = spaces.len();
        *spaces.entry(k).or_insert(n)
    };
    let whole = |_: MlirValue, space: usize| Range { space, start: 0, end: u64::MAX };
    let Some(p) = producer(v) else { return whole(v, space_of(key(v))) };
    match op_name(p).as_str() {
        "ll.reshape" => range(unsafe { mlirOperationGetOperand(p, 0) }, spaces),
        "memref.view" => {
            let (src, off) = unsafe { (mlirOperationGetOperand(p, 0), mlirOperationGetOperand(p, 1)) };
            let start = producer(off).and_then(|c| ir::int_attr(c, "value"));
            let s = ir::buffer_spec(v).unwrap_or(crate::types::TensorSpec::new([], crate::types::DType::I1));
            let elt = ir::dtype_bytes(s.dtype);
            // A negative or overflowing range (invalid IR the planner never
            // writes) conflicts with the whole arena.
            let bytes = (s.num_elements() as u64).saturating_mul(elt).max(1);
            match start.filter(|&s| s >= 0).and_then(|s| Some((s as u64, (s as u64).checked_add(bytes)?))) {
                Some((start, end)) => Range { space: space_of(key(src)), start, end },
                None => whole(v, space_of(key(src))),
            }
        }
        _ => whole(v, space_of(key(v))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The algorithm as first written: every earlier kernel is checked.
    fn assign_naive(access: &[Access], max_streams: usize) -> Assignment {
        let hits = |a: &[Range], b: &[Range]| a.iter().any(|x| b.iter().any(|y| x.overlaps(y)));
        let mut stream_of: Vec<usize> = Vec::new();
        let mut tail: Vec<usize> = Vec::new();
        let mut event_of: HashMap<usize, usize> = HashMap::new();
        let mut waits: Vec<Vec<usize>> = vec![Vec::new(); access.len()];
        let mut synced: Vec<Vec<Option<usize>>> = Vec::new();
        for j in 0..access.len() {
            let preds: Vec<usize> = (0..j)
                .filter(|&i| {
                    let (ri, wi) = &access[i];
                    let (rj, wj) = &access[j];
                    hits(wi, rj) || hits(ri, wj) || hits(wi, wj)
                })
                .collect();
            let cont = preds.iter().rev().map(|&p| stream_of[p]).find(|&s| preds.contains(&tail[s]));
            let s = match cont {
                Some(s) => s,
                None if tail.len() < max_streams => {
                    tail.push(j);
                    for row in &mut synced {
                        row.push(None);
                    }
                    synced.push(vec![None; tail.len()]);
                    tail.len() - 1
                }
                None => (0..tail.len()).min_by_key(|&s| tail[s]).unwrap_or(0),
            };
            for &p in &preds {
                let ps = stream_of[p];
                if ps == s || synced[s][ps].is_some_and(|q| q >= p) {
                    continue;
                }
                let next = event_of.len();
                let e = *event_of.entry(p).or_insert(next);
                if !waits[j].contains(&e) {
                    waits[j].push(e);
                }
                synced[s][ps] = Some(p);
            }
            stream_of.push(s);
            tail[s] = j;
        }
        Assignment { stream_of, event_of, waits, streams: tail.len().max(1) }
    }

    /// Random kernels over a few buffers and arena ranges: the fast
    /// assignment is the naive one, streams, events and waits alike.
    #[test]
    fn assignment_equals_the_naive_one() {
        let mut state = 0x9E3779B97F4A7C15u64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut with_events = 0;
        for trial in 0..300 {
            let kernels = 1 + next(60) as usize;
            let access: Vec<Access> = (0..kernels)
                .map(|_| {
                    let (n_reads, n_writes) = (next(4), 1 + next(2));
                    let mut ranges = (0..n_reads + n_writes).map(|_| {
                        let space = next(3) as usize;
                        let start = next(64) * 8;
                        Range { space, start, end: start + 8 + next(32) * 8 }
                    });
                    let reads = ranges.by_ref().take(n_reads as usize).collect();
                    (reads, ranges.collect())
                })
                .collect();
            for max in [1, 2, 4] {
                let fast = assign(&access, &[], max);
                assert_eq!(fast, assign_naive(&access, max), "trial {trial}, max-streams {max}");
                with_events += (!fast.event_of.is_empty()) as usize;
            }
        }
        // The cases exercise the cross-stream part, not only one stream.
        assert!(with_events > 300, "only {with_events} of 900 schedules have events");
    }
}
