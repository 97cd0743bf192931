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
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
