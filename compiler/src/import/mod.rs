//! Models from other frameworks, translated to `hl`.

pub mod conformance;
pub mod onnx;
mod onnx_fold;
