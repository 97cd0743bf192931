//! The MPI engine: Open MPI (or any MPI) through the `mpi` crate's
//! bindings, for replicas started by `mpirun`.
//!
//! Every collective is non-blocking (`MPI_Iallreduce` for sums of 2
//! ranks, a reduce-scatter and all-gather by `MPI_Isend`/`MPI_Irecv` for
//! sums in rank order from 3, `MPI_Ibcast`, `MPI_Ibarrier`) and waited for by polling, so that a wait can end: after
//! the communicator's timeout it is an error. To name the replica that did
//! not come, each collective also posts an arrival note on a second
//! communicator: every rank sends one to rank 0, rank 0 sends one to every
//! rank. At a timeout rank 0 knows which ranks never arrived, and the
//! others whether rank 0 did. When every rank arrived but the collective
//! still did not complete (a replica stopped inside it), the waiting rank
//! pings the others: a live replica answers from its own wait loop, and
//! the ones that do not answer are named. (A replica that dies is seen
//! sooner by `mpirun`, which ends the run and names it.)
//!
//! All MPI calls are serialised by one lock (the library is initialised
//! for `MPI_THREAD_SERIALIZED`): a session's calls come from one thread,
//! and a second one (a background compile) never calls MPI.

use super::{CollectiveError, Communicator, PendingSum, Values, poll_until};
use mpi::ffi;
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The tag of arrival notes (their own communicator, so they never match
/// the collectives' traffic; MPI keeps one sender's notes in order).
const ARRIVAL_TAG: c_int = 7;
/// Tags of the liveness check after a timeout: a ping (its payload the
/// sender's rank) and the answer.
const PING_TAG: c_int = 8;
const PONG_TAG: c_int = 9;

/// How long a rank that timed out waits for the others' answers to a ping.
const GRACE: Duration = Duration::from_secs(3);

/// Handles of the MPI library (raw pointers in Open MPI).
struct Handles {
    data: ffi::MPI_Comm,
    control: ffi::MPI_Comm,
    finalized: bool,
    /// The posted receive of pings (from any rank), and answers in flight.
    ping: ffi::MPI_Request,
    pinger: Box<u64>,
    answers: Vec<(ffi::MPI_Request, Box<u64>)>,
    rank: usize,
}

impl Handles {
    /// Answers a ping that came (each wait loop calls this).
    fn serve_pings(&mut self) {
        let mut flag: c_int = 0;
        unsafe {
            if ffi::MPI_Test(&mut self.ping, &mut flag, ffi::RSMPI_STATUS_IGNORE) != 0 || flag == 0 {
                return;
            }
            let to = *self.pinger as c_int;
            let answer = Box::new(self.rank as u64);
            let mut request = ffi::RSMPI_REQUEST_NULL;
            let sent = ffi::MPI_Isend(
                &*answer as *const u64 as *const c_void,
                1,
                ffi::RSMPI_UINT64_T,
                to,
                PONG_TAG,
                self.control,
                &mut request,
            );
            if sent == 0 {
                self.answers.push((request, answer));
            }
            self.post_ping_receive();
        }
        self.answers.retain_mut(|(request, _)| {
            let mut done: c_int = 0;
            unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            done == 0
        });
    }

    fn post_ping_receive(&mut self) {
        unsafe {
            ffi::MPI_Irecv(
                &mut *self.pinger as *mut u64 as *mut c_void,
                1,
                ffi::RSMPI_UINT64_T,
                ffi::RSMPI_ANY_SOURCE,
                PING_TAG,
                self.control,
                &mut self.ping,
            );
        }
    }
}

// SAFETY: MPI handles are plain identifiers of library objects; every call
// that uses them holds the lock, so the library sees one thread at a time
// (MPI_THREAD_SERIALIZED).
unsafe impl Send for Handles {}

struct Inner {
    handles: Mutex<Handles>,
    rank: usize,
    size: usize,
    timeout: Duration,
    version: String,
    /// Collectives started so far (their number in messages).
    started: std::sync::atomic::AtomicU64,
    /// Buffers of finished sums, for the next sums to receive into (a
    /// fresh one every step costs its page faults).
    spares: Mutex<Vec<Values>>,
    /// The rank-ordered sums in flight (3 ranks or more).
    pending: Mutex<Vec<std::sync::Weak<Mutex<Scatter>>>>,
}

/// This process's replica of an MPI run (`MPI_COMM_WORLD`).
pub struct Mpi {
    inner: Arc<Inner>,
}

fn check(code: c_int, what: &str, rank: usize, size: usize) -> Result<(), CollectiveError> {
    if code == 0 { Ok(()) } else { Err(CollectiveError { rank, size, message: format!("{what}: MPI error {code}") }) }
}

impl Mpi {
    /// Initialises MPI (once per process) and joins its world; collectives
    /// wait at most `timeout`.
    pub fn init(timeout: Duration) -> Result<Mpi, String> {
        static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if ONCE.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err("MPI was already initialised in this process (one communicator per process)".into());
        }
        // Open MPI's default choice for a non-blocking all-reduce of a
        // bucket (megabytes) ran at half the speed of its ring (2 ranks,
        // 4.4 MB: 1.75 against 0.80 ms; the blocking tuned one 1.26); the
        // all-reduce sums a group of 2 (see `start_sum`). A user's own
        // setting stands.
        const RING: &str = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
        if std::env::var_os(RING).is_none() {
            // SAFETY: called before MPI starts its threads, from the thread
            // that sets the process up (aicf calls it before training).
            unsafe { std::env::set_var(RING, "1") };
        }
        unsafe {
            let mut provided: c_int = 0;
            let code = ffi::MPI_Init_thread(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                ffi::RSMPI_THREAD_SERIALIZED,
                &mut provided,
            );
            if code != 0 {
                return Err(format!("MPI_Init_thread failed (error {code})"));
            }
            if provided < ffi::RSMPI_THREAD_SERIALIZED {
                ffi::MPI_Finalize();
                return Err("this MPI library cannot serve calls from more than one thread \
                            (MPI_THREAD_SERIALIZED)"
                    .into());
            }
            let world = ffi::RSMPI_COMM_WORLD;
            let (mut rank, mut size): (c_int, c_int) = (0, 0);
            ffi::MPI_Comm_rank(world, &mut rank);
            ffi::MPI_Comm_size(world, &mut size);
            let mut data = ffi::RSMPI_COMM_NULL;
            let mut control = ffi::RSMPI_COMM_NULL;
            if ffi::MPI_Comm_dup(world, &mut data) != 0 || ffi::MPI_Comm_dup(world, &mut control) != 0 {
                ffi::MPI_Finalize();
                return Err("MPI_Comm_dup failed".into());
            }
            // Errors come back as codes (and become errors naming the
            // collective) instead of ending the process inside MPI.
            ffi::MPI_Comm_set_errhandler(data, ffi::RSMPI_ERRORS_RETURN);
            ffi::MPI_Comm_set_errhandler(control, ffi::RSMPI_ERRORS_RETURN);
            let mut text = vec![0u8; ffi::RSMPI_MAX_LIBRARY_VERSION_STRING.max(256) as usize];
            let mut len: c_int = 0;
            ffi::MPI_Get_library_version(text.as_mut_ptr() as *mut _, &mut len);
            text.truncate(len.max(0) as usize);
            let version = String::from_utf8_lossy(&text)
                .split([',', '\n'])
                .next()
                .unwrap_or("MPI")
                .trim()
                .trim_end_matches('\0')
                .to_string();
            let mut handles = Handles {
                data,
                control,
                finalized: false,
                ping: ffi::RSMPI_REQUEST_NULL,
                pinger: Box::new(0),
                answers: Vec::new(),
                rank: rank as usize,
            };
            handles.post_ping_receive();
            Ok(Mpi {
                inner: Arc::new(Inner {
                    handles: Mutex::new(handles),
                    rank: rank as usize,
                    size: size as usize,
                    timeout,
                    version,
                    started: Default::default(),
                    spares: Default::default(),
                    pending: Default::default(),
                }),
            })
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Handles> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self, message: String) -> CollectiveError {
        CollectiveError { rank: self.rank, size: self.size, message }
    }

    /// Pings every other rank and waits up to [`GRACE`] for the answers
    /// (serving pings meanwhile); returns the ranks that did not answer.
    fn unresponsive(&self) -> Vec<usize> {
        let others: Vec<usize> = (0..self.size).filter(|&r| r != self.rank).collect();
        let me = Box::new(self.rank as u64);
        let mut answers: Vec<(usize, ffi::MPI_Request, Box<u64>, bool)> = Vec::new();
        let mut pings: Vec<ffi::MPI_Request> = Vec::new();
        {
            let h = self.lock();
            for &r in &others {
                let mut send = unsafe { ffi::RSMPI_REQUEST_NULL };
                let mut recv = unsafe { ffi::RSMPI_REQUEST_NULL };
                let mut answer = Box::new(0u64);
                unsafe {
                    ffi::MPI_Isend(
                        &*me as *const u64 as *const c_void,
                        1,
                        ffi::RSMPI_UINT64_T,
                        r as c_int,
                        PING_TAG,
                        h.control,
                        &mut send,
                    );
                    ffi::MPI_Irecv(
                        &mut *answer as *mut u64 as *mut c_void,
                        1,
                        ffi::RSMPI_UINT64_T,
                        r as c_int,
                        PONG_TAG,
                        h.control,
                        &mut recv,
                    );
                }
                pings.push(send);
                answers.push((r, recv, answer, false));
            }
        }
        let _ = poll_until(GRACE, || {
            let mut h = self.lock();
            h.serve_pings();
            for (_, recv, _, answered) in answers.iter_mut().filter(|a| !a.3) {
                let mut flag: c_int = 0;
                unsafe { ffi::MPI_Test(recv, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
                *answered = flag != 0;
            }
            Ok(answers.iter().all(|a| a.3))
        });
        let silent: Vec<usize> = answers.iter().filter(|a| !a.3).map(|a| a.0).collect();
        // The process is about to fail: buffers MPI may still write are
        // given up rather than freed under it.
        std::mem::forget(me);
        for (_, _, answer, _) in answers {
            std::mem::forget(answer);
        }
        silent
    }

    /// Starts collective `post` (given the data communicator, it returns
    /// its request) with its arrival notes.
    fn start(
        self: &Arc<Self>,
        what: &str,
        post: impl FnOnce(ffi::MPI_Comm, *mut ffi::MPI_Request) -> c_int,
    ) -> Result<Operation, CollectiveError> {
        let number = self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let h = self.lock();
        let mut op = Operation {
            inner: self.clone(),
            number,
            what: format!("{what} (collective #{number})"),
            request: unsafe { ffi::RSMPI_REQUEST_NULL },
            done: false,
            notes: Vec::new(),
            tokens: vec![number; self.size.max(1)].into_boxed_slice(),
            received: vec![0u64; self.size.max(1)].into_boxed_slice(),
        };
        let u64_type = unsafe { ffi::RSMPI_UINT64_T };
        let peers: Vec<usize> = if self.rank == 0 { (1..self.size).collect() } else { vec![0] };
        for peer in peers {
            let mut send = unsafe { ffi::RSMPI_REQUEST_NULL };
            let mut recv = unsafe { ffi::RSMPI_REQUEST_NULL };
            let code = unsafe {
                ffi::MPI_Isend(
                    op.tokens.as_ptr().add(peer) as *const c_void,
                    1,
                    u64_type,
                    peer as c_int,
                    ARRIVAL_TAG,
                    h.control,
                    &mut send,
                )
            };
            check(code, &format!("{}: arrival note to rank {peer}", op.what), self.rank, self.size)?;
            let code = unsafe {
                ffi::MPI_Irecv(
                    op.received.as_mut_ptr().add(peer) as *mut c_void,
                    1,
                    u64_type,
                    peer as c_int,
                    ARRIVAL_TAG,
                    h.control,
                    &mut recv,
                )
            };
            check(code, &format!("{}: arrival note from rank {peer}", op.what), self.rank, self.size)?;
            op.notes.push(Note { peer, send, recv, sent: false, arrived: false });
        }
        let code = post(h.data, &mut op.request);
        drop(h);
        check(code, &op.what, self.rank, self.size)?;
        Ok(op)
    }
}

/// One side of an arrival note exchange with `peer`.
struct Note {
    peer: usize,
    send: ffi::MPI_Request,
    recv: ffi::MPI_Request,
    sent: bool,
    arrived: bool,
}

/// A collective in flight, with its arrival notes.
struct Operation {
    inner: Arc<Inner>,
    /// Its place among the communicator's collectives (the same on every
    /// rank).
    number: u64,
    what: String,
    request: ffi::MPI_Request,
    done: bool,
    notes: Vec<Note>,
    /// The notes' send and receive buffers (this collective's number).
    tokens: Box<[u64]>,
    received: Box<[u64]>,
}

// SAFETY: the requests and buffers are owned by this operation; MPI calls
// on them hold the communicator's lock.
unsafe impl Send for Operation {}

impl Operation {
    fn complete(&self) -> bool {
        self.done && self.notes.iter().all(|n| n.sent && n.arrived)
    }
}

impl Drop for Operation {
    /// An operation given up (its wait failed) leaves its buffers to MPI,
    /// which may still write them: they are leaked, never freed under it.
    fn drop(&mut self) {
        if !self.complete() {
            std::mem::forget(std::mem::take(&mut self.tokens));
            std::mem::forget(std::mem::take(&mut self.received));
        }
    }
}

impl Operation {
    /// Lets MPI progress; whether the collective and its notes completed.
    fn test(&mut self) -> Result<bool, CollectiveError> {
        let inner = self.inner.clone();
        let mut h = inner.lock();
        h.serve_pings();
        let mut flag: c_int = 0;
        let fail = |code: c_int, what: String| check(code, &what, inner.rank, inner.size);
        if !self.done {
            fail(unsafe { ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) }, self.what.clone())?;
            self.done = flag != 0;
        }
        for n in &mut self.notes {
            if !n.sent {
                fail(unsafe { ffi::MPI_Test(&mut n.send, &mut flag, ffi::RSMPI_STATUS_IGNORE) }, self.what.clone())?;
                n.sent = flag != 0;
            }
            if !n.arrived {
                fail(unsafe { ffi::MPI_Test(&mut n.recv, &mut flag, ffi::RSMPI_STATUS_IGNORE) }, self.what.clone())?;
                n.arrived = flag != 0;
            }
        }
        Ok(self.complete())
    }

    /// Waits for completion, at most the timeout; after it, an error
    /// naming the ranks that did not arrive.
    fn wait(&mut self) -> Result<(), CollectiveError> {
        self.wait_within(self.inner.timeout)
    }

    /// [`Operation::wait`] for at most `timeout`.
    fn wait_within(&mut self, timeout: Duration) -> Result<(), CollectiveError> {
        self.wait_with(timeout, || Ok(true))
    }

    /// [`Operation::wait_within`] until `also` holds as well (it drives
    /// the work that completes with the operation: a sum's messages).
    fn wait_with(
        &mut self,
        timeout: Duration,
        mut also: impl FnMut() -> Result<bool, CollectiveError>,
    ) -> Result<(), CollectiveError> {
        fn both(
            op: &mut Operation,
            also: &mut impl FnMut() -> Result<bool, CollectiveError>,
        ) -> Result<bool, CollectiveError> {
            let notes = op.test()?;
            Ok(also()? && notes)
        }
        if poll_until(timeout, || both(self, &mut also))? {
            return Ok(());
        }
        let missing: Vec<usize> = self.notes.iter().filter(|n| !n.arrived).map(|n| n.peer).collect();
        let seconds = timeout.as_secs_f64();
        let inner = self.inner.clone();
        let list = |ranks: &[usize]| {
            let which = if ranks.len() == 1 { "rank" } else { "ranks" };
            format!("{which} {}", ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", "))
        };
        if !missing.is_empty() {
            // A rank that did not come may itself be waiting for a hung
            // one (in an earlier sum of 3 ranks or more): the live ones
            // answer a ping from their wait loops, and only the silent are
            // named hung.
            let silent = inner.unresponsive();
            let hung: Vec<usize> = missing.iter().copied().filter(|r| silent.contains(r)).collect();
            let waiting: Vec<usize> = missing.iter().copied().filter(|r| !silent.contains(r)).collect();
            let also = if waiting.is_empty() || hung.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} {}, waiting for it",
                    list(&waiting),
                    if waiting.len() == 1 { "answers" } else { "answer" }
                )
            };
            // The missing answer, waiting on a rank that arrived here and
            // then stopped (a sum of 3 ranks or more in flight): that one
            // is named, whichever rank's timeout ends the run first.
            let elsewhere: Vec<usize> = silent.iter().copied().filter(|r| !missing.contains(r)).collect();
            return Err(inner.error(if hung.is_empty() && !elsewhere.is_empty() {
                format!(
                    "{} stopped answering (dead or hung), and {} did not reach {} within {seconds} s, waiting for it \
                     (--collective-timeout or AICF_COLLECTIVE_TIMEOUT sets the limit)",
                    list(&elsewhere),
                    list(&missing),
                    self.what
                )
            } else if hung.is_empty() {
                format!(
                    "{} did not reach {} within {seconds} s, although they answer (waiting on another rank; \
                     --collective-timeout or AICF_COLLECTIVE_TIMEOUT sets the limit)",
                    list(&missing),
                    self.what
                )
            } else {
                format!(
                    "{} did not reach {} within {seconds} s (dead or hung; --collective-timeout or \
                     AICF_COLLECTIVE_TIMEOUT sets the limit){also}",
                    list(&hung),
                    self.what
                )
            }));
        }
        // Everyone arrived, yet the collective stalled: a replica stopped
        // inside it. The live ones answer a ping from their wait loops.
        let silent = inner.unresponsive();
        if poll_until(Duration::ZERO, || both(self, &mut also))? {
            return Ok(());
        }
        Err(inner.error(if silent.is_empty() {
            format!("{} did not complete within {seconds} s, although every rank reached it and answers", self.what)
        } else {
            format!(
                "{} stopped answering inside {} (hung; every rank reached it; --collective-timeout or \
                 AICF_COLLECTIVE_TIMEOUT sets the limit of {seconds} s)",
                list(&silent),
                self.what
            )
        }))
    }
}

/// A sum over the ranks, added in rank order (rank 0's values first:
/// `((v_0 + v_1) + v_2) + ...`, what one process adding its micro-batches'
/// gradients in order computes), whatever the engine's algorithm.
///
/// At 2 ranks it is Open MPI's ring all-reduce (one pair per element:
/// `v_0 + v_1` is `v_1 + v_0` to the bit). From 3 ranks on it is a
/// reduce-scatter and an all-gather by point-to-point messages, the ring's
/// traffic (`2 (N - 1) / N` of the values sent and received per rank): rank
/// c receives chunk c of every rank's values, adds them in rank order and
/// sends the sum to every rank. Its messages carry tags of its collective
/// number, so no two sums' messages match whatever order the ranks post
/// them in; the second half starts when the first completes on that rank,
/// which the wait of any sum in flight advances (see [`Inner::drive_sums`]),
/// so a rank waiting for one sum still answers the others.
struct OrderedSum {
    inner: Arc<Inner>,
    /// The arrival notes (the sum's timeout names the ranks that never
    /// came); from 3 ranks on its request is a null one.
    op: Operation,
    how: How,
}

enum How {
    /// Two ranks: this rank's values, and MPI's sum.
    Ring { send: Values, sum: Values },
    /// Three or more: the messages' state.
    Scatter(Arc<Mutex<Scatter>>),
}

/// The buffers and requests of a rank-ordered reduce-scatter and
/// all-gather (see [`OrderedSum`]).
struct Scatter {
    len: usize,
    chunk: usize,
    /// This rank's values, padded to `size * chunk`.
    send: Values,
    /// Chunk `rank` of every rank's values, rank by rank.
    parts: Values,
    /// This rank's chunk of the sum.
    mine: Values,
    /// Every chunk of the sum, rank by rank.
    all: Values,
    /// The first half's messages (chunks out, parts in), then the
    /// second's (sums in, posted at the start; `mine` out, once summed).
    first: Vec<ffi::MPI_Request>,
    second: Vec<ffi::MPI_Request>,
    summed: bool,
    done: bool,
    tags: (c_int, c_int),
}

// SAFETY: MPI requests and the buffers they use are owned by the sum and
// touched only under the communicator's lock.
unsafe impl Send for Scatter {}

/// The tags of sum number `number`'s two halves (on the data
/// communicator, where the collectives do not match point-to-point
/// messages; Open MPI's tag bound is far above).
fn scatter_tags(number: u64) -> (c_int, c_int) {
    let base = 100 + 2 * (number % 8192) as c_int;
    (base, base + 1)
}

/// The element type and data pointer of packed values, for MPI.
fn raw(v: &Values) -> (*const c_void, ffi::MPI_Datatype) {
    match v {
        Values::F32(v) => (v.as_ptr() as *const c_void, unsafe { ffi::RSMPI_FLOAT }),
        Values::F64(v) => (v.as_ptr() as *const c_void, unsafe { ffi::RSMPI_DOUBLE }),
    }
}

fn raw_mut(v: &mut Values) -> *mut c_void {
    match v {
        Values::F32(v) => v.as_mut_ptr() as *mut c_void,
        Values::F64(v) => v.as_mut_ptr() as *mut c_void,
    }
}

/// The address of element `i` of `v` (at most its length).
fn raw_at(v: &Values, i: usize) -> *const c_void {
    match v {
        Values::F32(v) => v[i..].as_ptr() as *const c_void,
        Values::F64(v) => v[i..].as_ptr() as *const c_void,
    }
}

fn raw_mut_at(v: &mut Values, i: usize) -> *mut c_void {
    match v {
        Values::F32(v) => v[i..].as_mut_ptr() as *mut c_void,
        Values::F64(v) => v[i..].as_mut_ptr() as *mut c_void,
    }
}

/// Whether every request completed (completed ones become null).
fn all_done(requests: &mut [ffi::MPI_Request], what: &str, rank: usize, size: usize) -> Result<bool, CollectiveError> {
    let mut flag: c_int = 0;
    let code = unsafe {
        ffi::MPI_Testall(requests.len() as c_int, requests.as_mut_ptr(), &mut flag, ffi::RSMPI_STATUSES_IGNORE)
    };
    check(code, what, rank, size)?;
    Ok(flag != 0)
}

/// The ranks' values in `all` (rank by rank, `sum.len()` each), added in
/// rank order into `sum`.
fn add_in_rank_order<T: Copy + std::ops::Add<Output = T>>(all: &[T], sum: &mut [T]) {
    let len = sum.len();
    sum.copy_from_slice(&all[..len]);
    for part in all.chunks_exact(len.max(1)).skip(1) {
        for (s, &v) in sum.iter_mut().zip(part) {
            *s = *s + v;
        }
    }
}

impl Inner {
    /// A buffer of `len` zeros of `like`'s element type, from the spares
    /// where one of that type is there (a fresh one every step costs its
    /// page faults).
    fn spare(&self, like: &Values, len: usize) -> Values {
        let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
        let same = |v: &Values| std::mem::discriminant(v) == std::mem::discriminant(like);
        let found = spares.iter().position(same).map(|i| spares.swap_remove(i));
        match (like, found) {
            // Whatever a spare held stays (MPI writes all of it): zeroing
            // megabytes a step is a visible part of a sum.
            (Values::F32(_), Some(Values::F32(mut r))) => {
                r.resize(len, 0.0);
                Values::F32(r)
            }
            (Values::F64(_), Some(Values::F64(mut r))) => {
                r.resize(len, 0.0);
                Values::F64(r)
            }
            (Values::F32(_), _) => Values::F32(vec![0.0; len]),
            (Values::F64(_), _) => Values::F64(vec![0.0; len]),
        }
    }

    fn give_back(&self, v: Values) {
        self.spares.lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }
}

impl Scatter {
    /// Advances the sum: once the parts are in, adds them in rank order
    /// and sends this rank's chunk of the sum to every rank; `done` once
    /// every chunk is in and out. Called under the communicator's lock.
    fn advance(&mut self, h: &Handles, rank: usize, size: usize) -> Result<(), CollectiveError> {
        if self.done {
            return Ok(());
        }
        if !self.summed {
            if !all_done(&mut self.first, "a sum's exchange of parts", rank, size)? {
                return Ok(());
            }
            match (&self.parts, &mut self.mine) {
                (Values::F32(p), Values::F32(m)) => add_in_rank_order(p, m),
                (Values::F64(p), Values::F64(m)) => add_in_rank_order(p, m),
                _ => return Err(CollectiveError { rank, size, message: "a sum's buffers differ in type".into() }),
            }
            let chunk = self.chunk;
            match (&self.mine, &mut self.all) {
                (Values::F32(m), Values::F32(a)) => a[rank * chunk..(rank + 1) * chunk].copy_from_slice(m),
                (Values::F64(m), Values::F64(a)) => a[rank * chunk..(rank + 1) * chunk].copy_from_slice(m),
                _ => return Err(CollectiveError { rank, size, message: "a sum's buffers differ in type".into() }),
            }
            let (mine, datatype) = raw(&self.mine);
            for peer in (0..size).filter(|&p| p != rank) {
                let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
                // SAFETY: `mine` lives in this sum until its requests
                // complete (or forever, if it is given up).
                let code = unsafe {
                    ffi::MPI_Isend(mine, chunk as c_int, datatype, peer as c_int, self.tags.1, h.data, &mut request)
                };
                check(code, &format!("a sum's chunk to rank {peer}"), rank, size)?;
                self.second.push(request);
            }
            self.summed = true;
        }
        self.done = all_done(&mut self.second, "a sum's exchange of sums", rank, size)?;
        Ok(())
    }
}

impl Inner {
    /// Advances every rank-ordered sum in flight (each wait loop calls
    /// this, so that a rank waiting for one sum sends its chunks of the
    /// others: the ranks may wait for the sums in different orders).
    fn drive_sums(&self) -> Result<(), CollectiveError> {
        let list: Vec<Arc<Mutex<Scatter>>> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.retain(|w| w.strong_count() > 0);
            pending.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        if list.is_empty() {
            return Ok(());
        }
        let h = self.lock();
        for s in list {
            s.lock().unwrap_or_else(|e| e.into_inner()).advance(&h, self.rank, self.size)?;
        }
        Ok(())
    }

    /// Starts the messages of a rank-ordered sum of `values` (3 ranks or
    /// more) whose arrival notes are operation `number`.
    fn start_scatter(&self, mut values: Values, number: u64, what: &str) -> Result<Scatter, CollectiveError> {
        let (rank, size) = (self.rank, self.size);
        let len = values.len();
        let chunk = len.div_ceil(size);
        let count = c_int::try_from(chunk)
            .map_err(|_| self.error(format!("{what}: {len} values are more than one MPI call sums")))?;
        match &mut values {
            Values::F32(v) => v.resize(size * chunk, 0.0),
            Values::F64(v) => v.resize(size * chunk, 0.0),
        }
        let mut s = Scatter {
            len,
            chunk,
            parts: self.spare(&values, size * chunk),
            mine: self.spare(&values, chunk),
            all: self.spare(&values, size * chunk),
            send: values,
            first: Vec::new(),
            second: Vec::new(),
            summed: false,
            done: false,
            tags: scatter_tags(number),
        };
        // This rank's own part is its own values.
        match (&s.send, &mut s.parts) {
            (Values::F32(v), Values::F32(p)) => {
                p[rank * chunk..(rank + 1) * chunk].copy_from_slice(&v[rank * chunk..(rank + 1) * chunk])
            }
            (Values::F64(v), Values::F64(p)) => {
                p[rank * chunk..(rank + 1) * chunk].copy_from_slice(&v[rank * chunk..(rank + 1) * chunk])
            }
            _ => return Err(self.error(format!("{what}: buffers of two types"))),
        }
        let datatype = raw(&s.send).1;
        let h = self.lock();
        for peer in (0..size).filter(|&p| p != rank) {
            let mut requests = [unsafe { ffi::RSMPI_REQUEST_NULL }; 3];
            // SAFETY: the buffers live in the sum until its requests
            // complete (or forever, if it is given up); each message has
            // its own `chunk` elements.
            let codes = unsafe {
                [
                    ffi::MPI_Irecv(
                        raw_mut_at(&mut s.parts, peer * chunk),
                        count,
                        datatype,
                        peer as c_int,
                        s.tags.0,
                        h.data,
                        &mut requests[0],
                    ),
                    ffi::MPI_Irecv(
                        raw_mut_at(&mut s.all, peer * chunk),
                        count,
                        datatype,
                        peer as c_int,
                        s.tags.1,
                        h.data,
                        &mut requests[1],
                    ),
                    ffi::MPI_Isend(
                        raw_at(&s.send, peer * chunk),
                        count,
                        datatype,
                        peer as c_int,
                        s.tags.0,
                        h.data,
                        &mut requests[2],
                    ),
                ]
            };
            s.first.extend([requests[0], requests[2]]);
            s.second.push(requests[1]);
            if let Some(&code) = codes.iter().find(|&&c| c != 0) {
                // Messages already posted may still use the buffers: they
                // are given up with the sum, never freed under MPI.
                std::mem::forget(s);
                let message = format!("{what}: messages with rank {peer}: MPI error {code}");
                return Err(CollectiveError { rank, size, message });
            }
        }
        Ok(s)
    }
}

impl PendingSum for OrderedSum {
    fn test(&mut self) -> Result<bool, CollectiveError> {
        let notes = self.op.test()?;
        match &self.how {
            How::Ring { .. } => Ok(notes),
            How::Scatter(s) => {
                self.inner.drive_sums()?;
                Ok(notes && s.lock().unwrap_or_else(|e| e.into_inner()).done)
            }
        }
    }

    fn wait(mut self: Box<Self>) -> Result<Values, CollectiveError> {
        let empty = || Values::F32(Vec::new());
        match &self.how {
            How::Ring { .. } => self.op.wait()?,
            How::Scatter(s) => {
                let (inner, s) = (self.inner.clone(), s.clone());
                let timeout = inner.timeout;
                self.op.wait_with(timeout, || {
                    inner.drive_sums()?;
                    Ok(s.lock().unwrap_or_else(|e| e.into_inner()).done)
                })?;
            }
        }
        match std::mem::replace(&mut self.how, How::Ring { send: empty(), sum: empty() }) {
            How::Ring { send, sum } => {
                self.inner.give_back(send);
                Ok(sum)
            }
            How::Scatter(s) => {
                let mut guard = s.lock().unwrap_or_else(|e| e.into_inner());
                let s = &mut *guard;
                for v in [&mut s.send, &mut s.parts, &mut s.mine] {
                    self.inner.give_back(std::mem::replace(v, empty()));
                }
                let mut all = std::mem::replace(&mut s.all, empty());
                match &mut all {
                    Values::F32(v) => v.truncate(s.len),
                    Values::F64(v) => v.truncate(s.len),
                }
                Ok(all)
            }
        }
    }
}

impl Drop for OrderedSum {
    /// A sum given up leaves its buffers to MPI (see [`Operation`]'s drop):
    /// they are never freed under it.
    fn drop(&mut self) {
        let empty = || Values::F32(Vec::new());
        match std::mem::replace(&mut self.how, How::Ring { send: empty(), sum: empty() }) {
            How::Ring { send, sum } if !self.op.complete() => {
                std::mem::forget(send);
                std::mem::forget(sum);
            }
            How::Scatter(s) if !s.lock().unwrap_or_else(|e| e.into_inner()).done => std::mem::forget(s),
            _ => {}
        }
    }
}

impl Communicator for Mpi {
    fn rank(&self) -> usize {
        self.inner.rank
    }
    fn size(&self) -> usize {
        self.inner.size
    }
    fn engine(&self) -> String {
        format!("{}, {} ranks", self.inner.version, self.inner.size)
    }
    fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    fn start_sum(&self, values: Values, what: &str) -> Result<Box<dyn PendingSum>, CollectiveError> {
        let len = values.len();
        if self.inner.size == 2 {
            let count = c_int::try_from(len)
                .map_err(|_| self.inner.error(format!("{what}: {len} values are more than one MPI call sums")))?;
            let mut sum = self.inner.spare(&values, len);
            let (send_ptr, datatype) = raw(&values);
            let sum_ptr = raw_mut(&mut sum);
            // The vectors' heap buffers do not move when the vectors do:
            // MPI may write `sum` until the request completes.
            let op = self.inner.start(what, |comm, request| unsafe {
                ffi::MPI_Iallreduce(send_ptr, sum_ptr, count, datatype, ffi::RSMPI_SUM, comm, request)
            })?;
            return Ok(Box::new(OrderedSum { inner: self.inner.clone(), op, how: How::Ring { send: values, sum } }));
        }
        // The arrival notes, with a null request: the messages are the
        // sum's own.
        let op = self.inner.start(what, |_, request| {
            // SAFETY: writes the null request into the operation's slot.
            unsafe { *request = ffi::RSMPI_REQUEST_NULL };
            0
        })?;
        let scatter = Arc::new(Mutex::new(self.inner.start_scatter(values, op.number, &op.what)?));
        self.inner.pending.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&scatter));
        Ok(Box::new(OrderedSum { inner: self.inner.clone(), op, how: How::Scatter(scatter) }))
    }

    fn broadcast(&self, bytes: &mut Vec<u8>, root: usize, what: &str) -> Result<(), CollectiveError> {
        if root >= self.inner.size {
            return Err(self.inner.error(format!("{what}: a broadcast from rank {root} of {}", self.inner.size)));
        }
        // On the heap, and given up (leaked) if the wait fails: MPI may
        // still write it.
        let mut length = Box::new(bytes.len() as u64);
        let pointer = &mut *length as *mut u64 as *mut c_void;
        let mut op = self.inner.start(&format!("{what} (its length)"), |comm, request| unsafe {
            ffi::MPI_Ibcast(pointer, 1, ffi::RSMPI_UINT64_T, root as c_int, comm, request)
        })?;
        if let Err(e) = op.wait() {
            std::mem::forget(length);
            return Err(e);
        }
        let n = usize::try_from(*length).map_err(|_| self.inner.error(format!("{what}: {length} bytes")))?;
        bytes.resize(n, 0);
        // Pieces of at most 1 GiB (an MPI count is an int).
        let mut start = 0;
        while start < n {
            let piece = (n - start).min(1 << 30);
            let pointer = bytes[start..].as_mut_ptr() as *mut c_void;
            let mut op = self.inner.start(what, |comm, request| unsafe {
                ffi::MPI_Ibcast(pointer, piece as c_int, ffi::RSMPI_UINT8_T, root as c_int, comm, request)
            })?;
            if let Err(e) = op.wait() {
                // MPI may still write the bytes: they are given up.
                std::mem::forget(std::mem::take(bytes));
                return Err(e);
            }
            start += piece;
        }
        Ok(())
    }

    fn barrier_within(&self, what: &str, limit: Duration) -> Result<(), CollectiveError> {
        let mut op = self.inner.start(what, |comm, request| unsafe { ffi::MPI_Ibarrier(comm, request) })?;
        op.wait_within(limit)
    }

    fn abort(&self, code: i32) -> ! {
        unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code) };
        std::process::exit(code)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut h = self.lock();
        if !h.finalized {
            h.finalized = true;
            unsafe {
                ffi::MPI_Cancel(&mut h.ping);
                ffi::MPI_Wait(&mut h.ping, ffi::RSMPI_STATUS_IGNORE);
                for (request, _) in &mut h.answers {
                    ffi::MPI_Wait(request, ffi::RSMPI_STATUS_IGNORE);
                }
                ffi::MPI_Comm_free(&mut h.data);
                ffi::MPI_Comm_free(&mut h.control);
                ffi::MPI_Finalize();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::add_in_rank_order;

    /// Rank 0's values first, then rank 1's, then rank 2's: `(1e8 + 1) -
    /// 1e8` is 0 in f32 (the 1 is rounded away), where another order gives
    /// 1; every element on its own.
    #[test]
    fn sums_add_in_rank_order() {
        let all = [1e8f32, 2.0, 1.0, 3.0, -1e8, 4.0];
        let mut sum = [7.0f32; 2];
        add_in_rank_order(&all, &mut sum);
        assert_eq!(sum, [0.0, 9.0]);
        let mut one = [0.0f64];
        add_in_rank_order(&[5.0f64], &mut one);
        assert_eq!(one, [5.0]);
        add_in_rank_order::<f32>(&[], &mut []);
    }
}
