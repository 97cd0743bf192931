//! The interpreter's values: a row-major array of `f64` with a shape and the
//! dtype it stands for. Integers and booleans are held exactly (|x| < 2^53);
//! float results are rounded to their dtype after every op, so an `f32`
//! program computes what an `f32` machine would, up to the order of sums.

use crate::types::DType;

/// Data that does not fill its shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("array data has {got} elements but shape {shape:?} holds {expected}")]
pub struct ShapeMismatch {
    pub shape: Vec<usize>,
    pub expected: usize,
    pub got: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub data: Vec<f64>,
}

impl Array {
    /// `data` in row-major order, rounded to `dtype`; its length must be
    /// the number of elements of `shape`.
    pub fn new(shape: impl Into<Vec<usize>>, dtype: DType, data: Vec<f64>) -> Result<Self, ShapeMismatch> {
        let shape = shape.into();
        let expected = shape.iter().product::<usize>();
        if expected != data.len() {
            return Err(ShapeMismatch { shape, expected, got: data.len() });
        }
        Ok(Self::from_parts(shape, dtype, data))
    }
    /// The kernels' constructor: their loops size `data` from `shape`.
    pub(crate) fn from_parts(shape: Vec<usize>, dtype: DType, data: Vec<f64>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len(), "a kernel sized its output wrongly");
        let mut a = Array { shape, dtype, data };
        a.round();
        a
    }
    pub fn zeros(shape: impl Into<Vec<usize>>, dtype: DType) -> Self {
        let shape = shape.into();
        let n = shape.iter().product();
        Array { shape, dtype, data: vec![0.0; n] }
    }
    pub fn scalar(value: f64, dtype: DType) -> Self {
        Self::from_parts(Vec::new(), dtype, vec![value])
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The only element of a one-element array.
    pub fn item(&self) -> Option<f64> {
        (self.data.len() == 1).then(|| self.data[0])
    }

    /// Rounds every element to what `dtype` can hold.
    pub(crate) fn round(&mut self) {
        let f: fn(f64) -> f64 = match self.dtype {
            DType::F64 => return,
            DType::F32 => |x| x as f32 as f64,
            DType::BF16 => round_bf16,
            DType::F16 => round_f16,
            DType::I1 => |x| if x != 0.0 { 1.0 } else { 0.0 },
            DType::I32 => |x| x.trunc() as i32 as f64,
            DType::I64 => |x| x.trunc() as i64 as f64,
        };
        for x in &mut self.data {
            *x = f(*x);
        }
    }
}

/// One value rounded to what `dtype` holds.
pub(crate) fn round_scalar(x: f64, dtype: DType) -> f64 {
    let mut a = Array { shape: vec![], dtype, data: vec![x] };
    a.round();
    a.data[0]
}

/// Round to nearest even at bfloat16's 8-bit significand.
fn round_bf16(x: f64) -> f64 {
    let f = x as f32;
    if f.is_nan() {
        return f64::NAN;
    }
    let bits = f.to_bits();
    let rounded = bits.wrapping_add(0x7FFF + ((bits >> 16) & 1)) & 0xFFFF_0000;
    f32::from_bits(rounded) as f64
}

/// Round to nearest even at IEEE half precision (11-bit significand,
/// exponents -14..15, subnormals below).
fn round_f16(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let max = 65504.0;
    let e = x.abs().log2().floor().max(-14.0);
    let quantum = (e - 10.0).exp2();
    let r = (x / quantum).round_ties_even() * quantum;
    if r.abs() > max {
        if x.abs() >= max + quantum / 2.0 { x.signum() * f64::INFINITY } else { x.signum() * max }
    } else {
        r
    }
}

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `i` in `shape`.
pub(crate) fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d].max(1);
        i /= shape[d].max(1);
    }
}

/// Flat index into an operand of shape `from` broadcast to `index` of a
/// result of rank >= its own (aligned from the right, size-1 dims pinned).
pub(crate) fn broadcast_index(index: &[usize], from: &[usize], from_strides: &[usize]) -> usize {
    let off = index.len() - from.len();
    from.iter().zip(from_strides).enumerate().map(|(d, (&n, &s))| if n == 1 { 0 } else { index[off + d] * s }).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_the_narrow_float_types() {
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 1.0, "ties to even");
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert_eq!(round_f16(1.0 + 1.0 / 2048.0), 1.0, "ties to even");
        assert_eq!(round_f16(65520.0), f64::INFINITY);
        assert_eq!(round_f16(3.0e-8), 2.0f64.powi(-24) * (3.0e-8f64 / 2.0f64.powi(-24)).round());
        let a = Array::new([2], DType::F32, vec![0.1, 1.0 / 3.0]).unwrap();
        assert_eq!(a.data, vec![0.1f32 as f64, (1.0f32 / 3.0) as f64]);
        assert_eq!(Array::new([2], DType::I32, vec![2.7, -2.7]).unwrap().data, vec![2.0, -2.0]);
        let err = Array::new([2, 3], DType::F32, vec![0.0; 5]).unwrap_err();
        assert_eq!(err.to_string(), "array data has 5 elements but shape [2, 3] holds 6");
    }

    #[test]
    fn indexes_with_broadcasting() {
        let shape = [2, 3];
        let mut idx = [0; 2];
        unravel(4, &shape, &mut idx);
        assert_eq!(idx, [1, 1]);
        // a [3] operand broadcast to [2, 3] reads column idx[1].
        assert_eq!(broadcast_index(&idx, &[3], &strides(&[3])), 1);
        // a [2, 1] operand reads row idx[0].
        assert_eq!(broadcast_index(&idx, &[2, 1], &strides(&[2, 1])), 1);
    }
}
