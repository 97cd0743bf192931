//! The compiler's integration tests, in one binary because each test binary
//! links all of MLIR statically.

mod adapt;
mod api;
mod autodiff;
mod cpu;
mod gpu;
mod interp;
mod lowering;
mod models;
mod nn;
mod optimizer;
mod train;
mod trainer;
