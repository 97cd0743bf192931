//! The semantics of each `hl` op on [`Array`]s, written to be obviously
//! right rather than fast: loops over multi-indices, sums in f64.

use super::array::{Array, broadcast_index, strides, unravel};
use crate::types::DType;

pub type KResult<T> = Result<T, String>;

/// NumPy broadcast of several shapes (the ops have checked compatibility).
pub fn broadcast_shape(shapes: &[&[usize]]) -> Vec<usize> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..rank)
        .map(|i| {
            shapes
                .iter()
                .filter_map(|s| (i + s.len()).checked_sub(rank).map(|j| s[j]))
                .fold(1, |acc, d| if d == 1 { acc } else { d })
        })
        .collect()
}

/// Elementwise `f` over broadcast operands; the result has `dtype`.
pub fn map_n(inputs: &[&Array], dtype: DType, f: impl Fn(&[f64]) -> f64) -> Array {
    let shapes: Vec<&[usize]> = inputs.iter().map(|a| a.shape.as_slice()).collect();
    let shape = broadcast_shape(&shapes);
    let n: usize = shape.iter().product();
    let in_strides: Vec<Vec<usize>> = inputs.iter().map(|a| strides(&a.shape)).collect();
    let mut idx = vec![0; shape.len()];
    let mut args = vec![0.0; inputs.len()];
    let mut data = Vec::with_capacity(n);
    for i in 0..n {
        unravel(i, &shape, &mut idx);
        for (k, a) in inputs.iter().enumerate() {
            args[k] = a.data[broadcast_index(&idx, &a.shape, &in_strides[k])];
        }
        data.push(f(&args));
    }
    Array::from_parts(shape, dtype, data)
}

pub fn gelu(x: f64, tanh_form: bool) -> f64 {
    if tanh_form {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
    } else {
        0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
    }
}

pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// NaN-propagating max/min (torch.maximum).
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}
pub fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

/// Batched matmul with optional transposes of the last two dimensions.
pub fn matmul(a: &Array, b: &Array, ta: bool, tb: bool, dtype: DType) -> Array {
    let r = a.rank();
    let batch: usize = a.shape[..r - 2].iter().product();
    let (ar, ac) = (a.shape[r - 2], a.shape[r - 1]);
    let (br, bc) = (b.shape[r - 2], b.shape[r - 1]);
    let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
    let n = if tb { br } else { bc };
    let mut data = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let (ao, bo) = (bi * ar * ac, bi * br * bc);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let x = if ta { a.data[ao + p * ac + i] } else { a.data[ao + i * ac + p] };
                    let y = if tb { b.data[bo + j * bc + p] } else { b.data[bo + p * bc + j] };
                    s += x * y;
                }
                data[bi * m * n + i * n + j] = s;
            }
        }
    }
    let mut shape = a.shape[..r - 2].to_vec();
    shape.extend([m, n]);
    Array::from_parts(shape, dtype, data)
}

/// `x W^T + b` over the last dimension of `x`.
pub fn linear(x: &Array, w: &Array, b: Option<&Array>) -> Array {
    let (out, inp) = (w.shape[0], w.shape[1]);
    let rows = x.len() / inp;
    let mut data = vec![0.0; rows * out];
    for r in 0..rows {
        for o in 0..out {
            let mut s = b.map_or(0.0, |b| b.data[o]);
            for i in 0..inp {
                s += x.data[r * inp + i] * w.data[o * inp + i];
            }
            data[r * out + o] = s;
        }
    }
    let mut shape = x.shape.clone();
    if let Some(last) = shape.last_mut() {
        *last = out;
    }
    Array::from_parts(shape, x.dtype, data)
}

/// Reduces over `axes` with `init` and `f`, then `finish(acc, count)`.
pub fn reduce(
    x: &Array,
    axes: &[usize],
    keepdim: bool,
    init: f64,
    f: impl Fn(f64, f64) -> f64,
    finish: impl Fn(f64, usize) -> f64,
) -> Array {
    let kept: Vec<usize> = x.shape.iter().enumerate().map(|(d, &n)| if axes.contains(&d) { 1 } else { n }).collect();
    let count: usize = axes.iter().map(|&d| x.shape[d]).product();
    let out_strides = strides(&kept);
    let mut acc = vec![init; kept.iter().product()];
    let mut idx = vec![0; x.rank()];
    for i in 0..x.len() {
        unravel(i, &x.shape, &mut idx);
        let o: usize =
            idx.iter().enumerate().map(|(d, &v)| if axes.contains(&d) { 0 } else { v * out_strides[d] }).sum();
        acc[o] = f(acc[o], x.data[i]);
    }
    let data = acc.into_iter().map(|a| finish(a, count)).collect();
    let shape = if keepdim {
        kept
    } else {
        x.shape.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).collect()
    };
    Array::from_parts(shape, x.dtype, data)
}

/// Calls `f` with the flat indices of every line along `axis`.
fn for_each_line(shape: &[usize], axis: usize, mut f: impl FnMut(&[usize])) {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let mut line = vec![0; n];
    for o in 0..outer {
        for i in 0..inner {
            for (k, slot) in line.iter_mut().enumerate() {
                *slot = (o * n + k) * inner + i;
            }
            f(&line);
        }
    }
}

pub fn argmax(x: &Array, axis: usize, keepdim: bool) -> Array {
    let mut shape = x.shape.clone();
    let mut data = Vec::new();
    for_each_line(&x.shape, axis, |line| {
        let mut best = 0;
        for (k, &p) in line.iter().enumerate() {
            let v = x.data[p];
            if v > x.data[line[best]] || (v.is_nan() && !x.data[line[best]].is_nan()) {
                best = k;
            }
        }
        data.push(best as f64);
    });
    if keepdim {
        shape[axis] = 1;
    } else {
        shape.remove(axis);
    }
    Array::from_parts(shape, DType::I64, data)
}

pub fn softmax(x: &Array, axis: usize, log: bool) -> Array {
    let mut data = vec![0.0; x.len()];
    for_each_line(&x.shape, axis, |line| {
        let m = line.iter().map(|&p| x.data[p]).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = line.iter().map(|&p| (x.data[p] - m).exp()).sum();
        for &p in line {
            data[p] = if log { x.data[p] - m - sum.ln() } else { (x.data[p] - m).exp() / sum };
        }
    });
    Array::from_parts(x.shape.clone(), x.dtype, data)
}

/// layer_norm (`center`) or rms_norm over the trailing `dims` dimensions.
pub fn normalize(x: &Array, w: Option<&Array>, b: Option<&Array>, dims: usize, eps: f64, center: bool) -> Array {
    let inner: usize = x.shape[x.rank() - dims..].iter().product();
    let mut data = vec![0.0; x.len()];
    for (row, out) in x.data.chunks(inner.max(1)).zip(data.chunks_mut(inner.max(1))) {
        let n = row.len() as f64;
        let mean = if center { row.iter().sum::<f64>() / n } else { 0.0 };
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let inv = 1.0 / (var + eps).sqrt();
        for (k, (o, v)) in out.iter_mut().zip(row).enumerate() {
            *o = (v - mean) * inv * w.map_or(1.0, |w| w.data[k]) + b.map_or(0.0, |b| b.data[k]);
        }
    }
    Array::from_parts(x.shape.clone(), x.dtype, data)
}

/// The rows of `logits` (class axis last) with their label's class, the
/// positions labelled `ignore` left out; a label outside the classes is an
/// error.
fn labelled_rows<'a>(
    logits: &'a Array,
    labels: &Array,
    ignore: Option<i64>,
) -> KResult<Vec<(usize, &'a [f64], usize)>> {
    let c = logits.shape.last().copied().unwrap_or(1).max(1);
    let mut rows = Vec::new();
    for (i, (row, &label)) in logits.data.chunks(c).zip(&labels.data).enumerate() {
        let label = label as i64;
        if Some(label) == ignore {
            continue;
        }
        if label < 0 || label as usize >= c {
            return Err(format!("label {label} is outside [0, {c})"));
        }
        rows.push((i, row, label as usize));
    }
    Ok(rows)
}

/// `(max, sum of exp(v - max))` of a row, for a stable softmax.
fn softmax_parts(row: &[f64]) -> (f64, f64) {
    let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m, row.iter().map(|v| (v - m).exp()).sum())
}

pub fn cross_entropy(logits: &Array, labels: &Array, sum: bool, ignore: Option<i64>) -> KResult<Array> {
    let rows = labelled_rows(logits, labels, ignore)?;
    let total: f64 = rows
        .iter()
        .map(|(_, row, label)| {
            let (m, z) = softmax_parts(row);
            m + z.ln() - row[*label]
        })
        .sum();
    // A mean over no counted position is NaN, as in PyTorch.
    let value = if sum { total } else { total / rows.len() as f64 };
    Ok(Array::scalar(value, logits.dtype))
}

/// d logits of a cross-entropy: (softmax - onehot) * g, / count under
/// mean, zero on ignored positions.
pub fn cross_entropy_backward(
    logits: &Array,
    labels: &Array,
    g: f64,
    sum: bool,
    ignore: Option<i64>,
) -> KResult<Array> {
    let rows = labelled_rows(logits, labels, ignore)?;
    let scale = if sum { g } else { g / rows.len() as f64 };
    let mut data = vec![0.0; logits.len()];
    for (i, row, label) in rows {
        let (m, z) = softmax_parts(row);
        for (k, v) in row.iter().enumerate() {
            let p = (v - m).exp() / z;
            data[i * row.len() + k] = (p - if k == label { 1.0 } else { 0.0 }) * scale;
        }
    }
    Ok(Array::from_parts(logits.shape.clone(), logits.dtype, data))
}

pub fn permute(x: &Array, perm: &[usize]) -> Array {
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let in_strides = strides(&x.shape);
    let mut idx = vec![0; shape.len()];
    let data = (0..x.len())
        .map(|i| {
            unravel(i, &shape, &mut idx);
            x.data[idx.iter().zip(perm).map(|(&v, &p)| v * in_strides[p]).sum::<usize>()]
        })
        .collect();
    Array::from_parts(shape, x.dtype, data)
}

pub fn concat(inputs: &[&Array], axis: usize) -> Array {
    let mut shape = inputs[0].shape.clone();
    shape[axis] = inputs.iter().map(|a| a.shape[axis]).sum();
    let outer: usize = shape[..axis].iter().product();
    let mut data = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for a in inputs {
            let chunk: usize = a.shape[axis..].iter().product();
            data.extend_from_slice(&a.data[o * chunk..(o + 1) * chunk]);
        }
    }
    Array::from_parts(shape, inputs[0].dtype, data)
}

pub fn slice(x: &Array, start: &[usize], limit: &[usize], step: &[usize]) -> Array {
    let shape: Vec<usize> = (0..x.rank()).map(|d| (limit[d] - start[d]).div_ceil(step[d])).collect();
    let in_strides = strides(&x.shape);
    let mut idx = vec![0; shape.len()];
    let data = (0..shape.iter().product())
        .map(|i| {
            unravel(i, &shape, &mut idx);
            x.data[(0..x.rank()).map(|d| (start[d] + idx[d] * step[d]) * in_strides[d]).sum::<usize>()]
        })
        .collect();
    Array::from_parts(shape, x.dtype, data)
}

/// For a gather of `indices` along `axis` from a tensor of `shape`: the
/// flat offset of every gathered slice (`inner` elements each), in the
/// result's order; an index outside the axis is an error.
fn gathered_slices(shape: &[usize], indices: &Array, axis: usize) -> KResult<(Vec<usize>, usize)> {
    let n = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut bases = Vec::with_capacity(outer * indices.len());
    for o in 0..outer {
        for &i in &indices.data {
            let i = i as i64;
            if i < 0 || i as usize >= n {
                return Err(format!("index {i} is outside [0, {n}) on axis {axis}"));
            }
            bases.push((o * n + i as usize) * inner);
        }
    }
    Ok((bases, inner))
}

pub fn gather(x: &Array, indices: &Array, axis: usize) -> KResult<Array> {
    let (bases, inner) = gathered_slices(&x.shape, indices, axis)?;
    let mut data = Vec::with_capacity(bases.len() * inner);
    for base in bases {
        data.extend_from_slice(&x.data[base..base + inner]);
    }
    let mut shape = x.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&x.shape[axis + 1..]);
    Ok(Array::from_parts(shape, x.dtype, data))
}

/// Geometry of a 2-D sliding window over an image batch in either layout.
pub struct Window {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub nhwc: bool,
}

impl Window {
    fn out(&self, size: usize, d: usize) -> usize {
        (size + 2 * self.padding[d] - self.dilation[d] * (self.kernel[d] - 1) - 1) / self.stride[d] + 1
    }
    /// (N, C, H, W) of an image batch.
    fn dims(&self, shape: &[usize]) -> [usize; 4] {
        if self.nhwc { [shape[0], shape[3], shape[1], shape[2]] } else { [shape[0], shape[1], shape[2], shape[3]] }
    }
    fn at(&self, [n, c, h, w]: [usize; 4], [_, cc, hh, ww]: [usize; 4]) -> usize {
        if self.nhwc { ((n * hh + h) * ww + w) * cc + c } else { ((n * cc + c) * hh + h) * ww + w }
    }
    fn shape(&self, [n, c, h, w]: [usize; 4]) -> Vec<usize> {
        if self.nhwc { vec![n, h, w, c] } else { vec![n, c, h, w] }
    }
    /// Input position of output (oh, ow) and kernel tap (kh, kw), if inside.
    fn tap(
        &self,
        (oh, ow): (usize, usize),
        (kh, kw): (usize, usize),
        (h, w): (usize, usize),
    ) -> Option<(usize, usize)> {
        let y = (oh * self.stride[0] + kh * self.dilation[0]).checked_sub(self.padding[0])?;
        let x = (ow * self.stride[1] + kw * self.dilation[1]).checked_sub(self.padding[1])?;
        (y < h && x < w).then_some((y, x))
    }
}

pub fn conv2d(x: &Array, wt: &Array, b: Option<&Array>, win: &Window, groups: usize) -> Array {
    let xd = win.dims(&x.shape);
    let [n, c, h, w] = xd;
    let o = wt.shape[0];
    let (cg, og) = (c / groups, o / groups);
    let (oh, ow) = (win.out(h, 0), win.out(w, 1));
    let od = [n, o, oh, ow];
    let mut data = vec![0.0; n * o * oh * ow];
    for ni in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut s = b.map_or(0.0, |b| b.data[oc]);
                    for ci in 0..cg {
                        for kh in 0..win.kernel[0] {
                            for kw in 0..win.kernel[1] {
                                if let Some((iy, ix)) = win.tap((y, xx), (kh, kw), (h, w)) {
                                    let xv = x.data[win.at([ni, g * cg + ci, iy, ix], xd)];
                                    let wv = wt.data[((oc * cg + ci) * win.kernel[0] + kh) * win.kernel[1] + kw];
                                    s += xv * wv;
                                }
                            }
                        }
                    }
                    data[win.at([ni, oc, y, xx], od)] = s;
                }
            }
        }
    }
    Array::from_parts(win.shape(od), x.dtype, data)
}

/// The gradients of conv2d with respect to its input (`dx`, shaped like
/// `x_shape`) and weight (`dw`, shaped like `w_shape`), by the forward's
/// loop nest with the sums turned around.
pub fn conv2d_backward(
    dy: &Array,
    x: Option<&Array>,
    wt: Option<&Array>,
    x_shape: &[usize],
    w_shape: &[usize],
    win: &Window,
    groups: usize,
) -> (Array, Array) {
    let xd = win.dims(x_shape);
    let [n, c, h, w] = xd;
    let o = w_shape[0];
    let (cg, og) = (c / groups, o / groups);
    let (oh, ow) = (win.out(h, 0), win.out(w, 1));
    let od = [n, o, oh, ow];
    let mut dx = vec![0.0; x_shape.iter().product()];
    let mut dw = vec![0.0; w_shape.iter().product()];
    for ni in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for y in 0..oh {
                for xx in 0..ow {
                    let gy = dy.data[win.at([ni, oc, y, xx], od)];
                    for ci in 0..cg {
                        for kh in 0..win.kernel[0] {
                            for kw in 0..win.kernel[1] {
                                if let Some((iy, ix)) = win.tap((y, xx), (kh, kw), (h, w)) {
                                    let xi = win.at([ni, g * cg + ci, iy, ix], xd);
                                    let wi = ((oc * cg + ci) * win.kernel[0] + kh) * win.kernel[1] + kw;
                                    if let Some(wt) = wt {
                                        dx[xi] += gy * wt.data[wi];
                                    }
                                    if let Some(x) = x {
                                        dw[wi] += gy * x.data[xi];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (Array::from_parts(x_shape.to_vec(), dy.dtype, dx), Array::from_parts(w_shape.to_vec(), dy.dtype, dw))
}

/// The gradient of max_pool2d (to each window's first maximum, or first
/// NaN) or
/// avg_pool2d (spread over the kernel area) with respect to its input.
pub fn pool2d_backward(dy: &Array, x: &Array, win: &Window, max: bool) -> Array {
    let xd = win.dims(&x.shape);
    let [n, c, h, w] = xd;
    let (oh, ow) = (win.out(h, 0), win.out(w, 1));
    let od = [n, c, oh, ow];
    let area = (win.kernel[0] * win.kernel[1]) as f64;
    let mut dx = vec![0.0; x.len()];
    for ni in 0..n {
        for ci in 0..c {
            for y in 0..oh {
                for xx in 0..ow {
                    let gy = dy.data[win.at([ni, ci, y, xx], od)];
                    let mut best: Option<(usize, f64)> = None;
                    for kh in 0..win.kernel[0] {
                        for kw in 0..win.kernel[1] {
                            if let Some((iy, ix)) = win.tap((y, xx), (kh, kw), (h, w)) {
                                let i = win.at([ni, ci, iy, ix], xd);
                                if max {
                                    // The first maximum, a NaN above all (PyTorch's).
                                    let above = |v: f64| x.data[i] > v || (x.data[i].is_nan() && !v.is_nan());
                                    if best.is_none_or(|(_, v)| above(v)) {
                                        best = Some((i, x.data[i]));
                                    }
                                } else {
                                    dx[i] += gy / area;
                                }
                            }
                        }
                    }
                    if let Some((i, _)) = best {
                        dx[i] += gy;
                    }
                }
            }
        }
    }
    Array::from_parts(x.shape.clone(), dy.dtype, dx)
}

/// max_pool2d (`max`) or avg_pool2d with padded zeros counted.
pub fn pool2d(x: &Array, win: &Window, max: bool) -> Array {
    let xd = win.dims(&x.shape);
    let [n, c, h, w] = xd;
    let (oh, ow) = (win.out(h, 0), win.out(w, 1));
    let od = [n, c, oh, ow];
    let mut data = vec![0.0; n * c * oh * ow];
    for ni in 0..n {
        for ci in 0..c {
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                    for kh in 0..win.kernel[0] {
                        for kw in 0..win.kernel[1] {
                            if let Some((iy, ix)) = win.tap((y, xx), (kh, kw), (h, w)) {
                                let v = x.data[win.at([ni, ci, iy, ix], xd)];
                                acc = if max { nan_max(acc, v) } else { acc + v };
                            }
                        }
                    }
                    let area = (win.kernel[0] * win.kernel[1]) as f64;
                    data[win.at([ni, ci, y, xx], od)] = if max { acc } else { acc / area };
                }
            }
        }
    }
    Array::from_parts(win.shape(od), x.dtype, data)
}

pub fn attention(q: &Array, k: &Array, v: &Array, causal: bool, scale: Option<f64>) -> Array {
    let r = q.rank();
    let (l, d) = (q.shape[r - 2], q.shape[r - 1]);
    let (s, dv) = (k.shape[r - 2], v.shape[r - 1]);
    let batch: usize = q.shape[..r - 2].iter().product();
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let mut data = vec![0.0; batch * l * dv];
    for bi in 0..batch {
        for i in 0..l {
            let scores: Vec<f64> = (0..s)
                .map(|j| {
                    if causal && j > i {
                        return f64::NEG_INFINITY;
                    }
                    (0..d).map(|p| q.data[(bi * l + i) * d + p] * k.data[(bi * s + j) * d + p]).sum::<f64>() * scale
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = weights.iter().sum();
            for e in 0..dv {
                data[(bi * l + i) * dv + e] =
                    (0..s).map(|j| weights[j] * v.data[(bi * s + j) * dv + e]).sum::<f64>() / z;
            }
        }
    }
    let mut shape = q.shape.clone();
    shape[r - 1] = dv;
    Array::from_parts(shape, q.dtype, data)
}

/// Gradients (dq, dk, dv) of `attention(q, k, v)` from its result `o` and
/// upstream gradient `g`, as `hl.attention_backward` defines them: P
/// recomputed, D = rowsum(g * o), dS = P (g v^T - D).
pub fn attention_backward(
    q: &Array,
    k: &Array,
    v: &Array,
    o: &Array,
    g: &Array,
    causal: bool,
    scale: Option<f64>,
) -> Vec<Array> {
    let r = q.rank();
    let (l, d) = (q.shape[r - 2], q.shape[r - 1]);
    let (s, dv) = (k.shape[r - 2], v.shape[r - 1]);
    let batch: usize = q.shape[..r - 2].iter().product();
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let (mut dq, mut dk, mut dvv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
    for bi in 0..batch {
        let (qb, kb, vb, ob) = (bi * l * d, bi * s * d, bi * s * dv, bi * l * dv);
        for i in 0..l {
            let visible = |j: usize| !(causal && j > i);
            let scores: Vec<f64> = (0..s)
                .map(|j| {
                    if !visible(j) {
                        return f64::NEG_INFINITY;
                    }
                    (0..d).map(|c| q.data[qb + i * d + c] * k.data[kb + j * d + c]).sum::<f64>() * scale
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = weights.iter().sum();
            let delta: f64 = (0..dv).map(|c| g.data[ob + i * dv + c] * o.data[ob + i * dv + c]).sum();
            for j in (0..s).filter(|&j| visible(j)) {
                let p = weights[j] / z;
                let dp: f64 = (0..dv).map(|c| g.data[ob + i * dv + c] * v.data[vb + j * dv + c]).sum();
                let ds = p * (dp - delta) * scale;
                for c in 0..dv {
                    dvv[vb + j * dv + c] += p * g.data[ob + i * dv + c];
                }
                for c in 0..d {
                    dq[qb + i * d + c] += ds * k.data[kb + j * d + c];
                    dk[kb + j * d + c] += ds * q.data[qb + i * d + c];
                }
            }
        }
    }
    vec![
        Array::from_parts(q.shape.clone(), q.dtype, dq),
        Array::from_parts(k.shape.clone(), k.dtype, dk),
        Array::from_parts(v.shape.clone(), v.dtype, dvv),
    ]
}

/// `hl.dropout`'s mask, exactly as its description defines it.
pub fn dropout(x: &Array, seed: u64, offset: u64, p: f64, stream: u64) -> Array {
    let scale = 1.0 / (1.0 - p);
    let mut data = Vec::with_capacity(x.len());
    for (i, &v) in x.data.iter().enumerate() {
        let words = aicf_runtime::rng::op_block(seed, stream, offset, i as u64 / 4);
        let u = aicf_runtime::rng::unit_f32(words[i % 4]) as f64;
        data.push(if u >= p { v * scale } else { 0.0 });
    }
    Array::from_parts(x.shape.clone(), x.dtype, data)
}

/// `hl.random_like`'s numbers, exactly as its description defines them:
/// normal (mean `a`, deviation `b`) or uniform in `[a, b)`, rounded to
/// f32 (the generated kernel computes in f32, its `log`, `sqrt` and
/// `cos` within a few units in the last place of these).
pub fn random_like(like: &Array, seed: u64, offset: u64, normal: bool, a: f64, b: f64, stream: u64) -> Array {
    let data = (0..like.len())
        .map(|i| {
            let words = aicf_runtime::rng::op_block(seed, stream, offset, i as u64 / 4);
            let v = if normal {
                a + b * aicf_runtime::rng::normal(words, i % 4)
            } else {
                let bits = aicf_runtime::rng::uniform_bits(like.dtype == DType::BF16, like.dtype == DType::F16);
                a + (b - a) * aicf_runtime::rng::unit_bits(words[i % 4], bits)
            };
            f64::from(v as f32)
        })
        .collect();
    Array::from_parts(like.shape.clone(), like.dtype, data)
}

/// Gradient of softmax (or log_softmax with `log`) along `axis` from the
/// forward result `y` and the upstream gradient `g`.
pub fn softmax_backward(y: &Array, g: &Array, axis: usize, log: bool) -> Array {
    let mut data = vec![0.0; y.len()];
    for_each_line(&y.shape, axis, |line| {
        if log {
            let sum: f64 = line.iter().map(|&p| g.data[p]).sum();
            for &p in line {
                data[p] = g.data[p] - y.data[p].exp() * sum;
            }
        } else {
            let dot: f64 = line.iter().map(|&p| g.data[p] * y.data[p]).sum();
            for &p in line {
                data[p] = y.data[p] * (g.data[p] - dot);
            }
        }
    });
    Array::from_parts(y.shape.clone(), y.dtype, data)
}

/// Gradients of layer_norm (`center`) or rms_norm over the trailing `dims`
/// dimensions: (dx, dw if `w`, db if `bias`).
pub fn norm_backward(
    g: &Array,
    x: &Array,
    w: Option<&Array>,
    dims: usize,
    eps: f64,
    center: bool,
    bias: bool,
) -> Vec<Array> {
    let inner: usize = x.shape[x.rank() - dims..].iter().product::<usize>().max(1);
    let row_shape = x.shape[x.rank() - dims..].to_vec();
    let mut dx = vec![0.0; x.len()];
    let (mut dw, mut db) = (vec![0.0; inner], vec![0.0; inner]);
    let mut xhat = vec![0.0; inner];
    let mut dxhat = vec![0.0; inner];
    for (r, row) in x.data.chunks(inner).enumerate() {
        let gr = &g.data[r * inner..(r + 1) * inner];
        let n = inner as f64;
        let mean = if center { row.iter().sum::<f64>() / n } else { 0.0 };
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let rstd = 1.0 / (var + eps).sqrt();
        for k in 0..inner {
            xhat[k] = (row[k] - mean) * rstd;
            dxhat[k] = gr[k] * w.map_or(1.0, |w| w.data[k]);
            dw[k] += gr[k] * xhat[k];
            db[k] += gr[k];
        }
        let mean_d = if center { dxhat.iter().sum::<f64>() / n } else { 0.0 };
        let mean_dx = dxhat.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n;
        for k in 0..inner {
            dx[r * inner + k] = rstd * (dxhat[k] - mean_d - xhat[k] * mean_dx);
        }
    }
    let mut out = vec![Array::from_parts(x.shape.clone(), x.dtype, dx)];
    if w.is_some() {
        out.push(Array::from_parts(row_shape.clone(), x.dtype, dw));
    }
    if bias {
        out.push(Array::from_parts(row_shape, x.dtype, db));
    }
    out
}

/// The adjoint of `gather`: `g`'s slices added into zeros of `shape` at the
/// indices they were taken from.
pub fn gather_backward(g: &Array, indices: &Array, axis: usize, shape: &[usize]) -> KResult<Array> {
    let (bases, inner) = gathered_slices(shape, indices, axis)?;
    let mut data = vec![0.0; shape.iter().product()];
    for (base, slice) in bases.into_iter().zip(g.data.chunks(inner.max(1))) {
        for (d, s) in data[base..base + inner].iter_mut().zip(slice) {
            *d += s;
        }
    }
    Ok(Array::from_parts(shape.to_vec(), g.dtype, data))
}

/// The adjoint of `slice`: `g` written into zeros of `shape` at
/// `start + i * step`.
pub fn slice_backward(g: &Array, shape: &[usize], start: &[usize], step: &[usize]) -> Array {
    let out_strides = strides(shape);
    let mut idx = vec![0; g.rank()];
    let mut data = vec![0.0; shape.iter().product()];
    for (i, &v) in g.data.iter().enumerate() {
        unravel(i, &g.shape, &mut idx);
        data[(0..g.rank()).map(|d| (start[d] + idx[d] * step[d]) * out_strides[d]).sum::<usize>()] = v;
    }
    Array::from_parts(shape.to_vec(), g.dtype, data)
}
