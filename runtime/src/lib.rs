//! AICF's runtime. It loads what the compiler produced and runs it, and it
//! links no LLVM or MLIR, so a Rust program embeds a compiled model with this
//! crate alone and a GPU machine without LLVM can train from an artifact
//! compiled elsewhere.
//!
//! Present today:
//! - [`init`]: parameter initialisation with `torch.nn.init`'s semantics,
//!   from the initializer text the compiler prints for each `hl.param`
//!   (`kaiming_uniform, gain = 0.57735026918962584`).
//! - [`rng`]: Philox4x32-10, the counter-based generator behind it, so that
//!   every element's random number depends only on (seed, stream, index).
//!
//! - [`artifact`]: the compiled module on disk.
//! - [`backend`]: the [`Backend`] interface every device implements (load,
//!   call, parameters and state, batch-size variants, checkpoints,
//!   profiles), [`Device`] and [`open`]; [`host`]: tensors and buffers;
//!   [`error`]: the one error type.
//! - [`cpu`]: the CPU backend (kernels.so, thread pool, the GEMM
//!   [`registry`]); [`cuda`]: the CUDA backend (PTX modules, device arena,
//!   CUDA Graph replay), libcuda opened at run time; [`cuda::available`]
//!   says why no GPU can be used.
//! - [`checkpoint`]: safetensors checkpoints.
//! - [`collective`]: data parallel: the [`collective::Communicator`] of a
//!   run's replicas (MPI with the `mpi` feature; a group of one without).
//!
//! See docs/ARCHITECTURE.md.

pub mod artifact;
pub mod backend;
pub mod checkpoint;
pub mod collective;
pub mod cpu;
pub mod cuda;
pub mod error;
pub mod host;
pub mod init;
pub mod registry;
pub mod rng;

pub use backend::{Backend, Device, TraceEvent, check_device, open};
pub use error::{Result, RuntimeError};
pub use host::Tensor;
