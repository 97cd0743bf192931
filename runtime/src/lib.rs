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
//! - [`artifact`], [`cpu`], [`session`], [`checkpoint`], [`registry`]: the
//!   compiled module, its CPU backend with the GEMM registry, sessions and
//!   checkpoints.
//! - [`cuda`]: the CUDA backend (PTX modules, device arena, CUDA Graph
//!   replay), libcuda opened at run time; [`cuda::available`] says why no
//!   GPU can be used.
//!
//! See docs/ARCHITECTURE.md.

pub mod artifact;
pub mod checkpoint;
pub mod cpu;
mod cublas;
pub mod cuda;
pub mod init;
pub mod registry;
pub mod rng;
pub mod session;
