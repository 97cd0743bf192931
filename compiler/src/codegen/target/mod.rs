//! What code generation targets: the host CPU (`cpu.rs`: kernels.so built
//! from a content-addressed kernel cache) and NVIDIA GPUs (`gpu.rs`: PTX
//! for sm_80 and sm_90a, launch shapes in the manifest).

pub mod cpu;
pub mod gpu;
