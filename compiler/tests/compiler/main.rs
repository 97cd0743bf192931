//! The compiler's integration tests, in one binary because each test binary
//! links all of MLIR statically.

mod api;
mod models;
mod nn;
