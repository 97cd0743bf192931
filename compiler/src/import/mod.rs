//! Models from other frameworks, translated to `hl`.

pub mod onnx;
pub mod conformance;
