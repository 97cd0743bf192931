//! Kernel generation: from a planned `ll` module to machine code and the
//! manifest the runtime loads (`aicf_runtime::artifact`).

pub mod cpu;

pub use cpu::{compile_cpu, compile_gpu, ptxas, validate_ptx};
