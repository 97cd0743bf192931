//! Models from other frameworks, translated to `hl`.

pub mod conformance;
mod einsum;
pub mod onnx;
mod onnx_fold;
