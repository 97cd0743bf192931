//! One file per family of `ll` ops, each generator with the forms of both
//! targets side by side, over the shared kernel builder (`emit.rs`).

pub(crate) mod attention;
pub(crate) mod attention_backward;
pub(crate) mod conv;
pub(crate) mod data;
pub(crate) mod elementwise;
pub(crate) mod flash;
pub(crate) mod flash_backward;
pub(crate) mod gemm;
pub(crate) mod norm;
pub(crate) mod reduce;
pub(crate) mod softmax;
