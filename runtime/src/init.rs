//! Parameter initialisation, with the meaning of PyTorch's `torch.nn.init`.
//!
//! The compiler prints each `hl.param`'s `#hl.init<...>` as text such as
//! `kaiming_uniform, gain = 0.57735026918962584, mode = fan_out`; [`Init::parse`]
//! reads exactly that form (the part inside `<...>`), and [`Init::fill`]
//! writes the values. Element `i` of a parameter takes its random numbers
//! from Philox block `i / 4` of stream `stream` (the parameter's index in the
//! model) under `seed`, so initialisation is reproducible and independent of
//! thread count or device.

use crate::rng;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanMode {
    FanIn,
    FanOut,
}

/// An initializer and its arguments (see `#hl.init` in the hl dialect).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    Zeros,
    Ones,
    Normal {
        mean: f64,
        std: f64,
    },
    Uniform {
        low: f64,
        high: f64,
    },
    XavierUniform {
        gain: f64,
    },
    XavierNormal {
        gain: f64,
    },
    KaimingUniform {
        gain: f64,
        mode: FanMode,
    },
    KaimingNormal {
        gain: f64,
        mode: FanMode,
    },
    /// The value is data: the model's weights file (an imported model's
    /// initializers) holds it under the parameter's name; see
    /// [`crate::host::initial_state`].
    Data,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InitError {
    #[error("cannot read initializer '{spec}': {reason}")]
    Parse { spec: String, reason: String },
    #[error("initializer {init} needs a parameter of rank >= 2 to compute its fans, got shape {shape:?}")]
    NeedsFans { init: String, shape: Vec<usize> },
    #[error("buffer holds {got} elements but shape {shape:?} has {expected}")]
    Length { shape: Vec<usize>, expected: usize, got: usize },
    #[error("initializer {init} has an invalid argument: {reason}")]
    Invalid { init: String, reason: String },
}

/// `(fan_in, fan_out)` of a weight laid out `[out, in, k...]`, as PyTorch's
/// `_calculate_fan_in_and_fan_out`.
pub fn fans(shape: &[usize]) -> Option<(usize, usize)> {
    if shape.len() < 2 {
        return None;
    }
    let receptive: usize = shape[2..].iter().product();
    Some((shape[1] * receptive, shape[0] * receptive))
}

impl Init {
    fn name(&self) -> &'static str {
        match self {
            Init::Zeros => "zeros",
            Init::Ones => "ones",
            Init::Normal { .. } => "normal",
            Init::Uniform { .. } => "uniform",
            Init::XavierUniform { .. } => "xavier_uniform",
            Init::XavierNormal { .. } => "xavier_normal",
            Init::KaimingUniform { .. } => "kaiming_uniform",
            Init::KaimingNormal { .. } => "kaiming_normal",
            Init::Data => "data",
        }
    }

    /// Reads the compiler's text form: a kind, then `key = value` pairs
    /// separated by commas. Omitted arguments take the dialect's defaults
    /// (normal: mean 0, std 1; uniform: [0, 1); gain 1, or sqrt(2) for the
    /// Kaiming kinds; mode fan_in).
    pub fn parse(spec: &str) -> Result<Init, InitError> {
        let fail = |reason: String| InitError::Parse { spec: spec.to_string(), reason };
        let mut parts = spec.split(',').map(str::trim);
        let kind = parts.next().unwrap_or("");
        let mut init = match kind {
            "zeros" => Init::Zeros,
            "ones" => Init::Ones,
            "normal" => Init::Normal { mean: 0.0, std: 1.0 },
            "uniform" => Init::Uniform { low: 0.0, high: 1.0 },
            "xavier_uniform" => Init::XavierUniform { gain: 1.0 },
            "xavier_normal" => Init::XavierNormal { gain: 1.0 },
            "kaiming_uniform" => Init::KaimingUniform { gain: std::f64::consts::SQRT_2, mode: FanMode::FanIn },
            "kaiming_normal" => Init::KaimingNormal { gain: std::f64::consts::SQRT_2, mode: FanMode::FanIn },
            "data" => Init::Data,
            other => return Err(fail(format!("unknown initializer '{other}'"))),
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| fail(format!("expected 'key = value', got '{part}'")))?;
            let number = || value.parse::<f64>().map_err(|_| fail(format!("'{key}' is not a number: '{value}'")));
            match (&mut init, key) {
                (Init::Normal { mean, .. }, "mean") => *mean = number()?,
                (Init::Normal { std, .. }, "std") => *std = number()?,
                (Init::Uniform { low, .. }, "low") => *low = number()?,
                (Init::Uniform { high, .. }, "high") => *high = number()?,
                (
                    Init::XavierUniform { gain }
                    | Init::XavierNormal { gain }
                    | Init::KaimingUniform { gain, .. }
                    | Init::KaimingNormal { gain, .. },
                    "gain",
                ) => *gain = number()?,
                (Init::KaimingUniform { mode, .. } | Init::KaimingNormal { mode, .. }, "mode") => {
                    *mode = match value {
                        "fan_in" => FanMode::FanIn,
                        "fan_out" => FanMode::FanOut,
                        other => return Err(fail(format!("mode must be fan_in or fan_out, got '{other}'"))),
                    }
                }
                _ => return Err(fail(format!("'{key}' is not an argument of '{kind}'"))),
            }
        }
        Ok(init)
    }

    /// Fills `out` (row-major, `shape`) with this initializer's values.
    pub fn fill(&self, shape: &[usize], seed: u64, stream: u64, out: &mut [f32]) -> Result<(), InitError> {
        let expected: usize = shape.iter().product();
        if out.len() != expected {
            return Err(InitError::Length { shape: shape.to_vec(), expected, got: out.len() });
        }
        let invalid = |reason: &str| InitError::Invalid { init: self.to_string(), reason: reason.to_string() };
        let fan = |mode: FanMode| {
            let (fan_in, fan_out) =
                fans(shape).ok_or_else(|| InitError::NeedsFans { init: self.to_string(), shape: shape.to_vec() })?;
            Ok::<_, InitError>(match mode {
                FanMode::FanIn => fan_in,
                FanMode::FanOut => fan_out,
            })
        };
        match *self {
            Init::Zeros => out.fill(0.0),
            Init::Ones => out.fill(1.0),
            Init::Normal { mean, std } => {
                if !(std > 0.0) {
                    return Err(invalid("std must be > 0"));
                }
                fill_normal(out, mean, std, seed, stream)
            }
            Init::Uniform { low, high } => {
                // low == high: the constant low (a one-point interval).
                if !(low <= high) {
                    return Err(invalid("low must be <= high"));
                }
                fill_uniform(out, low, high, seed, stream)
            }
            Init::XavierUniform { gain } => {
                let (fan_in, fan_out) = (fan(FanMode::FanIn)?, fan(FanMode::FanOut)?);
                let a = gain * (6.0 / (fan_in + fan_out) as f64).sqrt();
                fill_uniform(out, -a, a, seed, stream)
            }
            Init::XavierNormal { gain } => {
                let (fan_in, fan_out) = (fan(FanMode::FanIn)?, fan(FanMode::FanOut)?);
                fill_normal(out, 0.0, gain * (2.0 / (fan_in + fan_out) as f64).sqrt(), seed, stream)
            }
            Init::KaimingUniform { gain, mode } => {
                let bound = gain * (3.0 / fan(mode)? as f64).sqrt();
                fill_uniform(out, -bound, bound, seed, stream)
            }
            Init::KaimingNormal { gain, mode } => {
                fill_normal(out, 0.0, gain / (fan(mode)? as f64).sqrt(), seed, stream)
            }
            Init::Data => return Err(invalid("the values are in the model's weights file, which was not given")),
        }
        Ok(())
    }
}

impl fmt::Display for Init {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match *self {
            Init::Zeros | Init::Ones | Init::Data => Ok(()),
            Init::Normal { mean, std } => write!(f, ", mean = {}, std = {}", Float(mean), Float(std)),
            Init::Uniform { low, high } => write!(f, ", low = {}, high = {}", Float(low), Float(high)),
            Init::XavierUniform { gain } | Init::XavierNormal { gain } => write!(f, ", gain = {}", Float(gain)),
            Init::KaimingUniform { gain, mode } | Init::KaimingNormal { gain, mode } => {
                let mode = if mode == FanMode::FanIn { "fan_in" } else { "fan_out" };
                write!(f, ", gain = {}, mode = {mode}", Float(gain))
            }
        }
    }
}

/// A float as an MLIR float literal: the shortest text that reads back to
/// the same `f64`, always with a decimal point (`1.0`, `1.0e-5`), which
/// MLIR's lexer requires to tell it from an integer.
pub struct Float(pub f64);

impl fmt::Display for Float {
    /// A decimal MLIR reads back exactly; an infinity or a NaN, which have
    /// no decimal spelling in MLIR, as its f64 bit pattern (the form a
    /// `: f64` attribute reads; an f32 context spells its own bits).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.0.is_finite() {
            return write!(f, "0x{:016X}", self.0.to_bits());
        }
        let s = format!("{:?}", self.0);
        match s.find('e') {
            Some(e) if !s.contains('.') => write!(f, "{}.0{}", &s[..e], &s[e..]),
            _ => f.write_str(&s),
        }
    }
}

fn fill_uniform(out: &mut [f32], low: f64, high: f64, seed: u64, stream: u64) {
    let span = high - low;
    for (b, chunk) in out.chunks_mut(4).enumerate() {
        let words = rng::block(seed, stream, b as u64);
        for (x, w) in chunk.iter_mut().zip(words) {
            *x = (low + span * f64::from(rng::unit_f32(w))) as f32;
        }
    }
}

/// Box-Muller: each Philox block's four words give four normals.
fn fill_normal(out: &mut [f32], mean: f64, std: f64, seed: u64, stream: u64) {
    for (b, chunk) in out.chunks_mut(4).enumerate() {
        let w = rng::block(seed, stream, b as u64);
        for (j, x) in chunk.iter_mut().enumerate() {
            *x = (mean + std * rng::normal(w, j)) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_std(v: &[f32]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = v.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    #[test]
    fn parses_what_the_compiler_prints() {
        // The strings `hl-print-param-table` prints for examples/mlp/digits_mlp.mlir.
        assert_eq!(
            Init::parse("kaiming_uniform, gain = 0.57735026918962584").unwrap(),
            Init::KaimingUniform { gain: 0.577_350_269_189_625_84, mode: FanMode::FanIn }
        );
        assert_eq!(
            Init::parse("uniform, low = -1.250000e-01, high = 1.250000e-01").unwrap(),
            Init::Uniform { low: -0.125, high: 0.125 }
        );
        assert_eq!(Init::parse("zeros").unwrap(), Init::Zeros);
        assert_eq!(
            Init::parse("kaiming_normal, mode = fan_out").unwrap(),
            Init::KaimingNormal { gain: std::f64::consts::SQRT_2, mode: FanMode::FanOut }
        );
        assert_eq!(Init::parse("normal, std = 2.000000e-02").unwrap(), Init::Normal { mean: 0.0, std: 0.02 });
        for init in [Init::XavierNormal { gain: 2.0 }, Init::Uniform { low: -1.5, high: 3.0 }] {
            assert_eq!(Init::parse(&init.to_string()).unwrap(), init);
        }
    }

    #[test]
    fn rejects_malformed_specs() {
        let err = |s: &str| Init::parse(s).unwrap_err().to_string();
        assert!(err("he_uniform").contains("unknown initializer 'he_uniform'"));
        assert!(err("uniform, std = 1").contains("'std' is not an argument of 'uniform'"));
        assert!(err("normal, std = abc").contains("'std' is not a number"));
        assert!(err("kaiming_normal, mode = fan_avg").contains("fan_in or fan_out"));
        assert!(err("normal, std").contains("expected 'key = value'"));
    }

    #[test]
    fn fans_follow_pytorch() {
        assert_eq!(fans(&[128, 64]), Some((64, 128)));
        assert_eq!(fans(&[16, 3, 5, 5]), Some((75, 400)));
        assert_eq!(fans(&[10]), None);
    }

    #[test]
    fn linear_default_init_stays_in_pytorch_bounds() {
        // nn.Linear(64, 128): kaiming_uniform(a = sqrt(5)) -> bound 1/sqrt(64).
        let init = Init::parse("kaiming_uniform, gain = 0.57735026918962584").unwrap();
        let mut w = vec![0.0f32; 128 * 64];
        init.fill(&[128, 64], 7, 0, &mut w).unwrap();
        let bound = 1.0f64 / 8.0;
        assert!(w.iter().all(|&x| f64::from(x.abs()) <= bound + 1e-7));
        let (mean, std) = mean_std(&w);
        assert!(mean.abs() < 0.005, "mean {mean}");
        // U(-b, b) has std b / sqrt(3).
        assert!((std - bound / 3f64.sqrt()).abs() < 0.002, "std {std}");
    }

    #[test]
    fn normal_kinds_have_their_moments() {
        let mut v = vec![0.0f32; 200_000];
        Init::Normal { mean: 0.5, std: 2.0 }.fill(&[200_000], 1, 3, &mut v).unwrap();
        let (mean, std) = mean_std(&v);
        assert!((mean - 0.5).abs() < 0.02 && (std - 2.0).abs() < 0.02, "{mean} {std}");

        let mut w = vec![0.0f32; 400 * 500];
        Init::KaimingNormal { gain: std::f64::consts::SQRT_2, mode: FanMode::FanOut }
            .fill(&[400, 500], 1, 4, &mut w)
            .unwrap();
        let (_, std) = mean_std(&w);
        let expected = (2.0f64 / 400.0).sqrt();
        assert!((std / expected - 1.0).abs() < 0.01, "{std} vs {expected}");

        Init::XavierNormal { gain: 1.0 }.fill(&[400, 500], 1, 5, &mut w).unwrap();
        let (_, std) = mean_std(&w);
        let expected = (2.0f64 / 900.0).sqrt();
        assert!((std / expected - 1.0).abs() < 0.01, "{std} vs {expected}");
    }

    #[test]
    fn deterministic_per_seed_and_stream() {
        let fill = |seed, stream| {
            let mut v = vec![0.0f32; 1001];
            Init::XavierUniform { gain: 1.0 }.fill(&[7, 143], seed, stream, &mut v).unwrap();
            v
        };
        assert_eq!(fill(42, 0), fill(42, 0));
        assert_ne!(fill(42, 0), fill(42, 1));
        assert_ne!(fill(42, 0), fill(43, 0));
        let a = (6.0f64 / 150.0).sqrt() as f32;
        assert!(fill(42, 0).iter().all(|&x| x.abs() <= a));
    }

    #[test]
    fn reports_shape_errors() {
        let mut v = vec![0.0f32; 10];
        let err = Init::KaimingUniform { gain: 1.0, mode: FanMode::FanIn }.fill(&[10], 0, 0, &mut v).unwrap_err();
        assert!(matches!(err, InitError::NeedsFans { .. }), "{err}");
        let err = Init::Zeros.fill(&[3, 4], 0, 0, &mut v).unwrap_err();
        assert_eq!(err.to_string(), "buffer holds 10 elements but shape [3, 4] has 12");
        let err = Init::Uniform { low: 1.0, high: 0.0 }.fill(&[10], 0, 0, &mut v).unwrap_err();
        assert!(err.to_string().contains("low must be <= high"), "{err}");
        Init::Uniform { low: 65536.0, high: 65536.0 }.fill(&[10], 0, 0, &mut v).unwrap();
        assert!(v.iter().all(|&x| x == 65536.0), "a one-point interval is a constant");
        Init::Ones.fill(&[2, 5], 0, 0, &mut v).unwrap();
        assert!(v.iter().all(|&x| x == 1.0));
    }
}
