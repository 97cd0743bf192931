//! The runtime's one error type. Every variant names where it happened: the
//! file, the function, the kernel call, or the driver call.

use crate::checkpoint::CheckpointError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// An artifact (manifest, kernels) that cannot be loaded.
    #[error("{path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error("no function @{0} in the compiled module")]
    NoFunction(String),
    /// Inputs, symbols or calls that do not fit the compiled function.
    #[error("@{function}: {message}")]
    Arguments { function: String, message: String },
    /// A kernel call that failed or was refused (a bad index, a device
    /// fault).
    #[error("@{function}, kernel #{call} ({op}): {message}")]
    Kernel { function: String, call: usize, op: String, message: String },
    /// The CUDA driver or cuBLASLt refused an operation.
    #[error("CUDA: {what}: {message}")]
    Driver { what: String, message: String },
    /// A device that is not there, or that this build cannot drive.
    #[error("device {device}: {message}")]
    Device { device: String, message: String },
    /// Memory that cannot be had: more than the machine has free, or an
    /// allocation the system refused.
    #[error("{what}: {} of memory needed; {}", human_bytes(*bytes), available.map_or("the allocation was refused".to_string(), |a| format!("this machine has {} available", human_bytes(a))))]
    Memory { what: String, bytes: u64, available: Option<u64> },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A collective of a data-parallel run that failed or timed out.
    #[error(transparent)]
    Collective(#[from] crate::collective::CollectiveError),
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// `bytes` in the largest binary unit that keeps it at 1 or more.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} bytes") } else { format!("{value:.1} {}", UNITS[unit]) }
}
