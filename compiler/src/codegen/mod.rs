//! Kernel generation: from a planned `ll` module to machine code and the
//! manifest the runtime loads (`aicf_runtime::artifact`).

pub mod cpu;

pub use cpu::{
    GpuOptions, KernelCache, KernelStats, TensorCoreTile, compile_cpu, compile_cpu_cached, compile_gpu,
    compile_gpu_timed, compile_gpu_with, ptxas, validate_ptx, write_atomically,
};
