//! Kernel generation: from a planned `ll` module to machine code and the
//! manifest the runtime loads (`aicf_runtime::artifact`).

pub mod cpu;

pub use cpu::{
    KernelCache, KernelStats, compile_cpu, compile_cpu_cached, compile_gpu, ptxas, validate_ptx, write_atomically,
};
