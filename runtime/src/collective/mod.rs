//! Collectives for data-parallel training: the replicas of a run (one
//! process each, on CPUs of one or several machines, or one per GPU) sum
//! their gradients and agree on what they do.
//!
//! A [`Communicator`] is one replica's handle on the group. Two engines sit
//! behind it, both existing libraries, no transport of our own:
//! - [`mpi::Mpi`] (cargo feature `mpi`): Open MPI (or any MPI) through the
//!   `mpi` crate, for processes started by `mpirun` on one machine or
//!   across nodes;
//! - [`Local`]: a group of one (a run without `mpirun`, and the reference
//!   the tests compare against): every sum is the identity.
//!
//! A GPU session takes the same communicator and bootstraps NCCL from it
//! (`crate::cuda`): rank 0 makes the NCCL id and broadcasts it.
//!
//! Every operation that waits on the other replicas waits at most the
//! communicator's timeout; a replica that died or hangs is then an error
//! that names it ([`CollectiveError`]), never a silent hang.

#[cfg(feature = "mpi")]
pub mod mpi;

use crate::artifact::DType;
use std::time::Duration;

/// What a collective waited for, and which replica it waited for in vain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("data parallel, rank {rank} of {size}: {message}")]
pub struct CollectiveError {
    pub rank: usize,
    pub size: usize,
    pub message: String,
}

/// Values being summed over the replicas, by element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> DType {
        match self {
            Values::F32(_) => DType::F32,
            Values::F64(_) => DType::F64,
        }
    }
}

/// A sum started with [`Communicator::start_sum`].
pub trait PendingSum: Send {
    /// Whether the sum is complete (lets the engine make progress).
    fn test(&mut self) -> Result<bool, CollectiveError>;
    /// The sum, once every replica contributed (at most the timeout).
    fn wait(self: Box<Self>) -> Result<Values, CollectiveError>;
}

/// One replica's handle on the group of a data-parallel run.
pub trait Communicator: Send + Sync {
    /// This replica's number, 0 to `size() - 1`; rank 0 writes checkpoints
    /// and metrics and takes the decisions every replica follows.
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// The engine, for messages (`Open MPI v4.1.4, 2 ranks`).
    fn engine(&self) -> String;
    /// The longest any collective waits for the other replicas.
    fn timeout(&self) -> Duration;

    /// Starts summing `values` element-wise over the replicas; every
    /// replica gets the same sum (the same bits), added in rank order
    /// (`((v_0 + v_1) + v_2) + ...`), so runs repeat exactly and N
    /// replicas sum as one process adding N micro-batches in order does.
    /// `what` names it in errors.
    fn start_sum(&self, values: Values, what: &str) -> Result<Box<dyn PendingSum>, CollectiveError>;

    /// `values` summed over the replicas (blocking).
    fn sum(&self, values: Values, what: &str) -> Result<Values, CollectiveError> {
        self.start_sum(values, what)?.wait()
    }

    /// Makes every replica's `bytes` rank `root`'s (any length: the others'
    /// are replaced, whatever their length was).
    fn broadcast(&self, bytes: &mut Vec<u8>, root: usize, what: &str) -> Result<(), CollectiveError>;

    /// Returns once every replica got here.
    fn barrier(&self, what: &str) -> Result<(), CollectiveError> {
        self.barrier_within(what, self.timeout())
    }

    /// [`Communicator::barrier`] waiting at most `limit` (a replica that
    /// compiles while the others wait may take longer than a step).
    fn barrier_within(&self, what: &str, limit: Duration) -> Result<(), CollectiveError>;

    /// Ends the whole run at once (every replica), with `code`: what a
    /// replica does after an error, so that the others do not wait for it.
    fn abort(&self, code: i32) -> !;
}

impl std::fmt::Debug for dyn Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {} ({})", self.rank(), self.size(), self.engine())
    }
}

/// A group of one: no other replica to wait for.
#[derive(Debug, Default, Clone)]
pub struct Local;

struct Done(Values);

impl PendingSum for Done {
    fn test(&mut self) -> Result<bool, CollectiveError> {
        Ok(true)
    }
    fn wait(self: Box<Self>) -> Result<Values, CollectiveError> {
        Ok(self.0)
    }
}

impl Communicator for Local {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn engine(&self) -> String {
        "one process".into()
    }
    fn timeout(&self) -> Duration {
        Duration::MAX
    }
    fn start_sum(&self, values: Values, _what: &str) -> Result<Box<dyn PendingSum>, CollectiveError> {
        Ok(Box::new(Done(values)))
    }
    fn broadcast(&self, _bytes: &mut Vec<u8>, _root: usize, _what: &str) -> Result<(), CollectiveError> {
        Ok(())
    }
    fn barrier_within(&self, _what: &str, _limit: Duration) -> Result<(), CollectiveError> {
        Ok(())
    }
    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

/// The timeout a run's collectives use: `AICF_COLLECTIVE_TIMEOUT` seconds
/// if set (and a positive number), else `default`.
pub fn timeout_from_env(default: Duration) -> Result<Duration, String> {
    match std::env::var("AICF_COLLECTIVE_TIMEOUT") {
        Err(_) => Ok(default),
        Ok(text) => match text.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
            Ok(s) if s >= 1e9 => Err(format!("AICF_COLLECTIVE_TIMEOUT={text:?}: at most 1e9 seconds")),
            _ => Err(format!("AICF_COLLECTIVE_TIMEOUT={text:?} is not a positive number of seconds")),
        },
    }
}

/// Whether this process was started by an MPI launcher (`mpirun`,
/// `srun`): the environment it sets for each rank.
pub fn launched_by_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"].iter().any(|v| std::env::var_os(v).is_some())
}

/// This process's rank as its MPI launcher set it (`OMPI_COMM_WORLD_RANK`,
/// `PMIX_RANK`, `PMI_RANK`), before MPI is initialised: 0 outside one. For
/// what only rank 0 says before the run's communicator exists.
pub fn launcher_rank() -> usize {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok().and_then(|r| r.trim().parse().ok()))
        .unwrap_or(0)
}

/// The communicator of this process: MPI's world where the build has MPI
/// and `mpirun` started the process, else a group of one. `timeout`
/// bounds every wait.
pub fn world(timeout: Duration) -> Result<std::sync::Arc<dyn Communicator>, String> {
    #[cfg(feature = "mpi")]
    if launched_by_mpi() {
        return Ok(std::sync::Arc::new(mpi::Mpi::init(timeout)?));
    }
    let _ = timeout;
    if launched_by_mpi() {
        return Err("this process was started by mpirun, but this build of AICF has no MPI (cargo feature \
                    'mpi' of aicf-runtime)"
            .into());
    }
    Ok(std::sync::Arc::new(Local))
}

/// Waits for `done` (polled; it drives the engine: a non-blocking MPI
/// collective advances only while it is tested) until `timeout` elapses:
/// polls back to back for the first second (giving the core to any other
/// runnable thread between polls), then every millisecond. `Ok(false)`
/// when the time ran out. (Only the MPI engine and the tests use it.)
#[cfg_attr(not(any(feature = "mpi", test)), allow(dead_code))]
pub(crate) fn poll_until(
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool, CollectiveError>,
) -> Result<bool, CollectiveError> {
    let start = std::time::Instant::now();
    loop {
        if done()? {
            return Ok(true);
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Ok(false);
        }
        if waited < Duration::from_secs(1) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_of_one_sums_to_itself() {
        let c = Local;
        let v = Values::F32(vec![1.5, -2.0]);
        assert_eq!(c.sum(v.clone(), "test").unwrap(), v);
        let mut bytes = vec![1, 2, 3];
        c.broadcast(&mut bytes, 0, "test").unwrap();
        assert_eq!(bytes, [1, 2, 3]);
        assert_eq!((c.rank(), c.size()), (0, 1));
    }

    #[test]
    fn polling_stops_at_the_timeout() {
        let start = std::time::Instant::now();
        let done = poll_until(Duration::from_millis(30), || Ok(false)).unwrap();
        assert!(!done);
        assert!(start.elapsed() >= Duration::from_millis(30));
        let mut n = 0;
        assert!(
            poll_until(Duration::from_secs(5), || {
                n += 1;
                Ok(n == 3)
            })
            .unwrap()
        );
    }
}
