//! PyTorch's further functional ops, each composed of the layer API's ops in
//! one build closure: one node on the tape and one compiled kernel set, its
//! gradient the composition's (`hl-autodiff` of the whole closure).

use super::{EagerError, OpDef, Result, Tensor, op_call};
use crate::nn::{self, Compare};
use std::rc::Rc;

/// `f64` as the text of a cache key that tells every value apart.
fn key_of(v: f64) -> String {
    format!("{:016x}", v.to_bits())
}

impl Tensor {
    /// The elementwise comparison `self <predicate> other` (broadcasting),
    /// a boolean (i1) tensor without gradient: `torch.eq`, `lt`, ...
    pub fn compare(&self, predicate: Compare, other: &Tensor) -> Result<Tensor> {
        self.promoted_binary(other, &format!("compare {predicate:?}"), move |a, b| a.compare(predicate, b))
    }

    /// `condition ? on_true : on_false` elementwise, the three broadcasting
    /// (`torch.where`); the gradient goes to the side each position took.
    pub fn where_(condition: &Tensor, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        let def =
            Rc::new(OpDef { key: "where".into(), build: Box::new(|xs| nn::Tensor::select(&xs[0], &xs[1], &xs[2])) });
        op_call(&def, &[condition, on_true, on_false])
    }

    /// `torch.clamp(self, min, max)`: the gradient passes where the value
    /// is within the bounds, the bounds included (as PyTorch's; a min
    /// above the max gives the max everywhere, as PyTorch's does).
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        if min.is_some_and(f64::is_nan) || max.is_some_and(f64::is_nan) {
            return Err(EagerError::Invalid("clamp: a bound is NaN".into()));
        }
        let key = format!("clamp {:?} {:?}", min.map(key_of), max.map(key_of));
        self.unary(key, move |x| {
            // maximum/minimum give a tie's gradient to their first operand,
            // x: the bound itself passes it.
            let x = match min {
                Some(lo) => x.maximum(&x.scalar(lo)?)?,
                None => x.clone(),
            };
            match max {
                Some(hi) => x.minimum(&x.scalar(hi)?),
                None => Ok(x),
            }
        })
    }

    /// `self * self`.
    pub fn square(&self) -> Result<Tensor> {
        self.unary("square".into(), |x| x.mul(x))
    }

    /// GELU with PyTorch's `approximate="tanh"`.
    pub fn gelu_tanh(&self) -> Result<Tensor> {
        self.unary("gelu_tanh".into(), |x| x.gelu(nn::GeluApproximation::Tanh))
    }

    /// `torch.nn.functional.leaky_relu`: `x` where positive, else
    /// `slope * x`.
    pub fn leaky_relu(&self, slope: f64) -> Result<Tensor> {
        self.unary(format!("leaky_relu {}", key_of(slope)), move |x| {
            let positive = x.compare(Compare::Gt, &x.scalar(0.0)?)?;
            nn::Tensor::select(&positive, x, &x.mul(&x.scalar(slope)?)?)
        })
    }

    /// `torch.nn.functional.elu`: `x` where positive, else
    /// `alpha * (exp(x) - 1)`.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.unary(format!("elu {}", key_of(alpha)), move |x| {
            let positive = x.compare(Compare::Gt, &x.scalar(0.0)?)?;
            // exp of the non-positive part only (a large x overflowed to
            // inf, whose gradient then read inf * 0).
            let neg = x.minimum(&x.scalar(0.0)?)?;
            let below = neg.exp()?.sub(&x.scalar(1.0)?)?.mul(&x.scalar(alpha)?)?;
            nn::Tensor::select(&positive, x, &below)
        })
    }

    /// `torch.nn.functional.softplus` (beta 1): `log(1 + exp(x))`, as
    /// `max(0, x) + log(1 + exp(min(x, -x)))`, which does not overflow;
    /// below -15 the tail is `exp(t)` itself (`1 + exp(t)` rounds to 1
    /// there, and its log to 0). The ties of `maximum`/`minimum` (the
    /// gradient to the first operand) make the gradient at 0 PyTorch's
    /// sigmoid(0) = 0.5: 0 from `max(0, x)`, half of 1 from the tail.
    pub fn softplus(&self) -> Result<Tensor> {
        self.unary("softplus".into(), |x| {
            let t = x.minimum(&x.neg()?)?;
            let log_tail = t.exp()?.add(&x.scalar(1.0)?)?.log()?;
            let small = t.compare(Compare::Lt, &x.scalar(-15.0)?)?;
            let tail = nn::Tensor::select(&small, &t.exp()?, &log_tail)?;
            x.scalar(0.0)?.maximum(x)?.add(&tail)
        })
    }

    /// `log(sum(exp(self)))` over `axes` (`torch.logsumexp`), shifted by
    /// the maximum so that it does not overflow; a line of only -inf gives
    /// -inf.
    pub fn logsumexp(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let a = axes.to_vec();
        self.unary(format!("logsumexp {axes:?} {keepdim}"), move |x| {
            let m = x.max(&a, true)?;
            // An infinite maximum (a line of -inf, or one holding +inf)
            // shifts by 0: exp(-inf - -inf) read NaN.
            let finite = m.abs()?.compare(Compare::Lt, &m.scalar(f64::INFINITY)?)?;
            let shift = nn::Tensor::select(&finite, &m, &m.scalar(0.0)?)?;
            let s = x.sub(&shift)?.exp()?.sum(&a, true)?.log()?.add(&shift)?;
            if keepdim {
                Ok(s)
            } else {
                let rank = x.rank() as i64;
                let dropped: Vec<i64> = a.iter().map(|&d| if d < 0 { d + rank } else { d }).collect();
                let shape: Vec<i64> =
                    (0..rank).filter(|d| !dropped.contains(d)).map(|d| x.shape()[d as usize] as i64).collect();
                s.reshape(&shape)
            }
        })
    }

    /// The variance over `axes` with Bessel's `correction` (`torch.var`;
    /// 1 is PyTorch's default, 0 the population variance).
    pub fn var(&self, axes: &[i64], correction: usize, keepdim: bool) -> Result<Tensor> {
        if axes.is_empty() {
            return Err(EagerError::Invalid("var over no axes: give the axes to reduce (every one: 0..rank)".into()));
        }
        let count = self.reduced_count(axes, "var")?;
        if count <= correction {
            return Err(EagerError::Invalid(format!(
                "var over {count} values with correction {correction}: the divisor {count} - {correction} is not above 0"
            )));
        }
        let a = axes.to_vec();
        let scale = count as f64 / (count - correction) as f64;
        self.unary(format!("var {axes:?} {correction} {keepdim}"), move |x| {
            let d = x.sub(&x.mean(&a, true)?)?;
            d.mul(&d)?.mean(&a, keepdim)?.mul_scalar(scale)
        })
    }

    /// The standard deviation: the square root of [`Tensor::var`].
    pub fn std(&self, axes: &[i64], correction: usize, keepdim: bool) -> Result<Tensor> {
        self.var(axes, correction, keepdim)?.sqrt()
    }

    /// The values over `axes`, counted (each axis once, in range).
    fn reduced_count(&self, axes: &[i64], what: &str) -> Result<usize> {
        let shape = self.shape();
        let rank = shape.len() as i64;
        let mut seen = Vec::new();
        for &a in axes {
            let d = if a < 0 { a + rank } else { a };
            if d < 0 || d >= rank || seen.contains(&d) {
                return Err(EagerError::Invalid(format!(
                    "{what}: axes {axes:?} are not distinct axes of a tensor of shape {shape:?}"
                )));
            }
            seen.push(d);
        }
        Ok(seen.iter().map(|&d| shape[d as usize]).product())
    }

    /// The smallest values over `axes` (`torch.amin`).
    pub fn min(&self, axes: &[i64], keepdim: bool) -> Result<Tensor> {
        let a = axes.to_vec();
        self.unary(format!("min {axes:?} {keepdim}"), move |x| x.neg()?.max(&a, keepdim)?.neg())
    }

    /// The index of the smallest value along `axis` (`torch.argmin`; a
    /// NaN counts as the smallest, as PyTorch's). Integers are negated as
    /// f64 (the least i32 has no i32 negation; i64 beyond 2^53 compare as
    /// their nearest f64).
    pub fn argmin(&self, axis: i64, keepdim: bool) -> Result<Tensor> {
        self.unary(format!("argmin {axis} {keepdim}"), move |x| {
            let x =
                if matches!(x.dtype(), nn::DType::I32 | nn::DType::I64) { x.cast(nn::DType::F64)? } else { x.clone() };
            x.neg()?.argmax(axis, keepdim)
        })
    }

    /// A new axis of size 1 at `axis` (`torch.unsqueeze`; -1 appends).
    pub fn unsqueeze(&self, axis: i64) -> Result<Tensor> {
        let mut shape: Vec<i64> = self.shape().iter().map(|&d| d as i64).collect();
        let rank = shape.len() as i64;
        let at = if axis < 0 { axis + rank + 1 } else { axis };
        if !(0..=rank).contains(&at) {
            return Err(EagerError::Invalid(format!(
                "unsqueeze({axis}) of a tensor of shape {:?}: no place {axis}",
                self.shape()
            )));
        }
        shape.insert(at as usize, 1);
        self.reshape(&shape)
    }

    /// Axis `axis`, of size 1, removed (`torch.squeeze(x, axis)`; an axis
    /// of another size is left, as PyTorch's).
    pub fn squeeze(&self, axis: i64) -> Result<Tensor> {
        let shape = self.shape();
        let rank = shape.len() as i64;
        // A scalar's axis 0 (or -1), as PyTorch takes it: itself.
        if rank == 0 && (axis == 0 || axis == -1) {
            return Ok(self.clone());
        }
        let at = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&at) {
            return Err(EagerError::Invalid(format!("squeeze({axis}) of a tensor of shape {shape:?}: no axis {axis}")));
        }
        if shape[at as usize] != 1 {
            return Ok(self.clone());
        }
        let kept: Vec<i64> =
            shape.iter().enumerate().filter(|&(d, _)| d as i64 != at).map(|(_, &n)| n as i64).collect();
        self.reshape(&kept)
    }

    /// `tensors`, of one shape, stacked along a new axis `axis`
    /// (`torch.stack`).
    pub fn stack(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(EagerError::Invalid("stack of no tensors".into()));
        };
        let shape = first.shape();
        if let Some((k, t)) = tensors.iter().enumerate().find(|(_, t)| t.shape() != shape) {
            return Err(EagerError::Invalid(format!(
                "stack: tensor {k} has the shape {:?}, tensor 0 {shape:?} (stacked tensors have one shape)",
                t.shape()
            )));
        }
        let rank = shape.len() as i64;
        let at = if axis < 0 { axis + rank + 1 } else { axis };
        if !(0..=rank).contains(&at) {
            return Err(EagerError::Invalid(format!(
                "stack along {axis} of tensors of shape {shape:?}: no place {axis}"
            )));
        }
        let mut grown: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        grown.insert(at as usize, 1);
        let def = Rc::new(OpDef {
            key: format!("stack {} {at}", tensors.len()),
            build: Box::new(move |xs| {
                let parts = xs.iter().map(|x| x.reshape(&grown)).collect::<nn::Result<Vec<_>>>()?;
                nn::Tensor::concat(&parts.iter().collect::<Vec<_>>(), at)
            }),
        });
        op_call(&def, tensors)
    }

    /// Pieces of `sizes` along `axis` (`torch.split` with a list of sizes;
    /// they add up to the axis).
    pub fn split(&self, sizes: &[usize], axis: i64) -> Result<Vec<Tensor>> {
        let shape = self.shape();
        let rank = shape.len() as i64;
        let at = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&at) {
            return Err(EagerError::Invalid(format!(
                "split along {axis} of a tensor of shape {shape:?}: no axis {axis}"
            )));
        }
        let total: usize = sizes.iter().sum();
        if total != shape[at as usize] {
            return Err(EagerError::Invalid(format!(
                "split: the sizes {sizes:?} add up to {total}, axis {axis} of {shape:?} has {}",
                shape[at as usize]
            )));
        }
        let mut start = 0;
        let mut pieces = Vec::with_capacity(sizes.len());
        for &n in sizes {
            pieces.push(self.narrow(at, start, n)?);
            start += n;
        }
        Ok(pieces)
    }

    /// Inverted dropout (`torch.nn.functional.dropout`): while `training`,
    /// each value is zeroed with probability `p` and the rest scaled by
    /// `1 / (1 - p)`; the mask is drawn by the thread's generator
    /// ([`super::manual_seed`]). Not training, or `p` 0: the input itself;
    /// `p` 1: zeros (as PyTorch's).
    pub fn dropout(&self, p: f64, training: bool) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(EagerError::Invalid(format!("dropout: the probability {p} is not in [0, 1]")));
        }
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return self.mul_scalar(0.0);
        }
        let keep = Tensor::rand(&self.shape())?.to(&self.device())?;
        let def = Rc::new(OpDef {
            key: format!("dropout {}", key_of(p)),
            build: Box::new(move |xs| {
                let kept = xs[1].compare(Compare::Ge, &xs[1].scalar(p)?)?;
                let scaled = xs[0].mul(&xs[0].scalar(1.0 / (1.0 - p))?)?;
                nn::Tensor::select(&kept, &scaled, &xs[0].scalar(0.0)?)
            }),
        });
        op_call(&def, &[self, &keep])
    }
}
