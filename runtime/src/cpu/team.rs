//! The threads that split a CPU step's kernels: the calling thread and
//! `threads - 1` helpers that spin between splits, as OpenMP's active wait
//! and Eigen's pool do, and park only after [`SPIN`] without work.
//!
//! Why not a rayon pool: a split handed to sleeping rayon workers waits for
//! the kernel to wake them (a futex, and on a virtual machine an
//! inter-processor interrupt that halted vCPUs take tens of microseconds to
//! answer, longer when the host is busy), and a split started from outside
//! the pool waits for its end the same way: 25-85 us a split on a 2-core
//! KVM guest (AMD Zen 5), against 1 us between spinning threads
//! (`runtime/examples/forkjoin_probe.rs`). A step of MLP 784 splits 16
//! times. Here the caller takes pieces itself, the helpers are already
//! looking for work, and nothing sleeps inside a step.
//!
//! A split ([`Team::run`]) is `pieces` calls of one closure, claimed one at
//! a time by whichever thread is free, so a thread the host slows does
//! fewer of them. A team of more threads than the machine has cores does
//! not spin: its helpers sleep between splits, and a split wakes only as
//! many as the cores can run beside the caller. One split runs at a time
//! (a second caller waits for the first); a split started from inside a
//! piece runs its pieces in place. A piece that panics is re-raised on the
//! caller once every piece is done.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle helper spins before it parks: longer than the gaps
/// between a step's splits (single-threaded kernels of up to a few hundred
/// microseconds), short enough that a finished step gives its cores back
/// within a millisecond or two.
pub const SPIN: Duration = Duration::from_millis(1);

/// How long a thread waits by spinning alone before it also yields its
/// core at every check: where more threads want the cores than there are
/// (two processes, or tests, each with a team), the thread it waits for
/// may be waiting for this core.
const YIELD_AFTER: Duration = Duration::from_micros(50);

/// One split's closure, on the caller's stack for as long as it runs.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
}

/// The state the caller and the helpers share.
struct Shared {
    /// `epoch << 32 | pieces << 16 | next`: which split is current, how many
    /// pieces it has and the next one to claim. A claim is one
    /// compare-and-swap of the whole word, so a helper that saw an earlier
    /// split cannot claim a piece of a later one.
    state: AtomicU64,
    /// The current split's [`Job`], valid while it has pieces unfinished.
    job: AtomicPtr<()>,
    /// Pieces claimed or not yet claimed that have not finished.
    remaining: AtomicUsize,
    /// A piece of the current split panicked: its payload.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Per helper, whether it is parked (or about to be): the caller
    /// unparks those after publishing a split.
    parked: Vec<AtomicBool>,
    stop: AtomicBool,
    /// How long an idle helper spins ([`SPIN`]), and how long the caller
    /// spins alone for the last pieces ([`YIELD_AFTER`]); both zero where the
    /// team has more threads than the machine has cores (`--threads 32` on
    /// 2 cores: spinning helpers then take the cores from the ones at
    /// work; the transformer block's step took 24-33 ms against rayon's
    /// 19-25).
    spin: Duration,
    spin_alone: Duration,
    /// The most helpers a split wakes: those the cores can run beside the
    /// caller (the pieces are claimed, so the ones awake do them all).
    wake_max: usize,
}

const PIECES_MAX: usize = u16::MAX as usize;
const EPOCH_MASK: u64 = u32::MAX as u64;

fn epoch(s: u64) -> u64 {
    s >> 32
}
fn pieces(s: u64) -> usize {
    ((s >> 16) & 0xffff) as usize
}
fn next(s: u64) -> usize {
    (s & 0xffff) as usize
}

thread_local! {
    /// Set while this thread runs a piece of a split.
    static IN_PIECE: Cell<bool> = const { Cell::new(false) };
}

impl Shared {
    /// Claims and runs pieces of split `e` until none is left to claim.
    fn work(&self, e: u64) {
        loop {
            let s = self.state.load(Acquire);
            if epoch(s) != e || next(s) >= pieces(s) {
                return;
            }
            if self.state.compare_exchange_weak(s, s + 1, AcqRel, Acquire).is_err() {
                continue;
            }
            // SAFETY: piece next(s) of split e is claimed and unfinished, so
            // the caller is still inside `run` and its job alive; the job
            // pointer was stored before the split was published (the
            // acquire above) and is not replaced before the split is done.
            let job = unsafe { &*(self.job.load(Acquire) as *const Job) };
            IN_PIECE.with(|p| p.set(true));
            let result = catch_unwind(AssertUnwindSafe(|| (job.f)(next(s))));
            IN_PIECE.with(|p| p.set(false));
            if let Err(payload) = result {
                self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(payload);
            }
            self.remaining.fetch_sub(1, AcqRel);
        }
    }
}

/// The calling thread and `threads - 1` spinning helpers.
pub struct Team {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
    /// One split at a time.
    running: Mutex<()>,
}

impl Team {
    /// A team of `threads` (0: one per core), the helpers started with
    /// `start` run on each (the float mode the kernels expect).
    pub fn new(threads: usize, start: fn()) -> std::io::Result<Team> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = if threads == 0 { cores } else { threads };
        let spins = threads <= cores;
        let shared = Arc::new(Shared {
            state: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            remaining: AtomicUsize::new(0),
            panic: Mutex::new(None),
            parked: (1..threads).map(|_| AtomicBool::new(false)).collect(),
            stop: AtomicBool::new(false),
            spin: if spins { SPIN } else { Duration::ZERO },
            spin_alone: if spins { YIELD_AFTER } else { Duration::ZERO },
            // At least one: a team asked for two threads gets them.
            wake_max: threads.min(cores.max(2)).saturating_sub(1),
        });
        let mut team = Team { shared, helpers: Vec::new(), running: Mutex::new(()) };
        for i in 1..threads {
            let shared = team.shared.clone();
            // On an error the team is dropped, which stops and joins the
            // helpers already started.
            team.helpers.push(std::thread::Builder::new().name(format!("aicf-cpu-{i}")).spawn(move || {
                start();
                helper(&shared, i - 1);
            })?);
        }
        Ok(team)
    }

    /// The threads a split can use: the caller and the helpers.
    pub fn threads(&self) -> usize {
        self.helpers.len() + 1
    }

    /// Calls `f(0) .. f(pieces - 1)`, each once, over the caller and the
    /// helpers, and returns when all have returned.
    pub fn run(&self, pieces: usize, f: &(dyn Fn(usize) + Sync)) {
        if pieces <= 1 || self.helpers.is_empty() || IN_PIECE.with(Cell::get) {
            (0..pieces).for_each(f);
            return;
        }
        if pieces > PIECES_MAX {
            // Splits are of threads or panels, far below this; chunk anyway.
            return self.run(PIECES_MAX, &|c| (pieces * c / PIECES_MAX..pieces * (c + 1) / PIECES_MAX).for_each(f));
        }
        let _one = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let shared = &*self.shared;
        let job = Job { f };
        shared.job.store(&job as *const Job as *mut (), Relaxed);
        shared.remaining.store(pieces, Relaxed);
        // The epoch wraps within its 32 bits (after 2^32 splits: days of
        // training), so that the caller's own claims below still match it.
        let e = (epoch(shared.state.load(Relaxed)) + 1) & EPOCH_MASK;
        shared.state.store(e << 32 | (pieces as u64) << 16, SeqCst);
        // The first `pieces - 1` helpers take part, awake or woken, but no
        // more than the cores can run beside the caller; the others sleep on
        // (a split of 2 pieces in a team of 32 wakes one).
        for (parked, helper) in shared.parked.iter().zip(&self.helpers).take((pieces - 1).min(shared.wake_max)) {
            if parked.load(SeqCst) {
                helper.thread().unpark();
            }
        }
        shared.work(e);
        let waited = Instant::now();
        let mut spins = 0u32;
        while shared.remaining.load(Acquire) != 0 {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && waited.elapsed() >= shared.spin_alone {
                std::thread::yield_now();
            }
        }
        shared.job.store(std::ptr::null_mut(), Relaxed);
        if let Some(payload) = shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            resume_unwind(payload);
        }
    }
}

/// A helper's loop: wait for a split (spinning, then parked), work on it.
fn helper(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        let mut idle = Instant::now();
        let mut spins = 0u32;
        let e = loop {
            let s = shared.state.load(Acquire);
            if epoch(s) != seen {
                break epoch(s);
            }
            if shared.stop.load(Relaxed) {
                return;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                continue;
            }
            let waited = idle.elapsed();
            if waited > YIELD_AFTER && waited <= shared.spin {
                std::thread::yield_now();
            } else if waited >= shared.spin {
                // Park; the caller unparks a parked helper after it
                // publishes a split (both sides sequentially consistent, so
                // one of them sees the other).
                shared.parked[index].store(true, SeqCst);
                if epoch(shared.state.load(SeqCst)) == seen && !shared.stop.load(SeqCst) {
                    std::thread::park();
                }
                shared.parked[index].store(false, SeqCst);
                idle = Instant::now();
            }
        };
        seen = e;
        shared.work(e);
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        for h in &self.helpers {
            h.thread().unpark();
        }
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_piece_runs_once_over_many_splits() {
        // 2 threads spin on any machine of 2 cores or more; 40 are more
        // than this machine's cores, so they sleep between splits and a
        // split wakes only as many as the cores run.
        for threads in [2, 3, 40] {
            let team = Team::new(threads, || {}).unwrap();
            assert_eq!(team.threads(), threads);
            for pieces in [0, 1, 2, 3, 7, 64] {
                for round in 0..100 {
                    let hits: Vec<AtomicUsize> = (0..pieces).map(|_| AtomicUsize::new(0)).collect();
                    team.run(pieces, &|i| {
                        hits[i].fetch_add(1, Relaxed);
                    });
                    assert!(
                        hits.iter().all(|h| h.load(Relaxed) == 1),
                        "{threads} threads, {pieces} pieces, round {round}"
                    );
                }
            }
        }
    }

    #[test]
    fn parked_helpers_wake_for_the_next_split() {
        let team = Team::new(2, || {}).unwrap();
        let on = Mutex::new(std::collections::HashSet::new());
        for _ in 0..3 {
            // The helper parks after SPIN without work (waited for up to
            // 20 s: a loaded machine may not run it at once).
            let t = Instant::now();
            while !team.shared.parked[0].load(SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(SPIN);
            }
            assert!(team.shared.parked[0].load(SeqCst), "the idle helper never parked");
            // Two pieces that wait for each other: done only if a second
            // thread takes one.
            let arrived = AtomicUsize::new(0);
            team.run(2, &|_| {
                on.lock().unwrap().insert(std::thread::current().id());
                arrived.fetch_add(1, SeqCst);
                let t = Instant::now();
                while arrived.load(SeqCst) < 2 && t.elapsed() < Duration::from_secs(20) {
                    std::hint::spin_loop();
                }
                assert_eq!(arrived.load(SeqCst), 2, "no second thread took the other piece");
            });
        }
        assert_eq!(on.lock().unwrap().len(), 2);
    }

    #[test]
    fn nested_and_concurrent_splits_finish() {
        let team = Arc::new(Team::new(2, || {}).unwrap());
        let total = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..3)
            .map(|_| {
                let (team, total) = (team.clone(), total.clone());
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        team.run(4, &|_| {
                            team.run(3, &|_| {
                                total.fetch_add(1, Relaxed);
                            })
                        });
                    }
                })
            })
            .collect();
        callers.into_iter().for_each(|c| c.join().unwrap());
        assert_eq!(total.load(Relaxed), 3 * 100 * 4 * 3);
    }

    #[test]
    fn a_panicking_piece_reaches_the_caller_after_the_others() {
        let team = Team::new(2, || {}).unwrap();
        let done = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            team.run(8, &|i| {
                if i == 3 {
                    panic!("piece 3");
                }
                done.fetch_add(1, SeqCst);
            })
        }));
        let payload = result.expect_err("the panic is re-raised");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"piece 3"));
        assert_eq!(done.load(SeqCst), 7);
        // The team goes on working.
        let n = AtomicUsize::new(0);
        team.run(5, &|_| {
            n.fetch_add(1, SeqCst);
        });
        assert_eq!(n.load(SeqCst), 5);
    }

    #[test]
    fn splits_go_on_across_the_epochs_wrap() {
        let team = Team::new(2, || {}).unwrap();
        // Three splits short of the last epoch a word holds.
        team.shared.state.store((EPOCH_MASK - 2) << 32, SeqCst);
        for split in 0..6 {
            // Two pieces that wait for each other: done only if the caller
            // takes one and the helper the other.
            let arrived = AtomicUsize::new(0);
            team.run(2, &|_| {
                arrived.fetch_add(1, SeqCst);
                let t = Instant::now();
                while arrived.load(SeqCst) < 2 && t.elapsed() < Duration::from_secs(20) {
                    std::hint::spin_loop();
                }
                assert_eq!(arrived.load(SeqCst), 2, "split {split}: one piece was never taken");
            });
        }
        assert_eq!(epoch(team.shared.state.load(SeqCst)), 3);
    }

    #[test]
    fn more_pieces_than_a_word_holds_are_chunked() {
        let team = Team::new(2, || {}).unwrap();
        let n = AtomicUsize::new(0);
        team.run(PIECES_MAX * 2 + 3, &|_| {
            n.fetch_add(1, Relaxed);
        });
        assert_eq!(n.load(Relaxed), PIECES_MAX * 2 + 3);
    }
}
