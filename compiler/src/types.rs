//! The core types every stage shares: the element types of `hl` tensors
//! and a tensor's shape and element type. (The layer API, the passes, the
//! interpreter and code generation all read them; none of them owns them.)

use std::fmt;

/// Element types of `hl` tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I1,
    I32,
    I64,
}

impl DType {
    /// The MLIR spelling (`f32`, `bf16`, `i64`, ...).
    pub fn mlir(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I1 => "i1",
            DType::I32 => "i32",
            DType::I64 => "i64",
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }
}

/// Shape and dtype of a tensor: what a traced function is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl TensorSpec {
    pub fn new(shape: impl Into<Vec<usize>>, dtype: DType) -> Self {
        TensorSpec { shape: shape.into(), dtype }
    }
    pub fn f32(shape: impl Into<Vec<usize>>) -> Self {
        Self::new(shape, DType::F32)
    }
    /// `tensor<8x63xf32>`.
    pub fn mlir_type(&self) -> String {
        let mut s = String::from("tensor<");
        for d in &self.shape {
            s += &format!("{d}x");
        }
        s + self.dtype.mlir() + ">"
    }
    /// The element count (saturating: a shape past `usize` is refused by
    /// the verifiers and `convert-hl-to-ll` before any size is planned).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().fold(1usize, |n, &d| n.saturating_mul(d))
    }
}

impl fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.mlir_type())
    }
}
