//! Optimizers for eager parameters: `step()` after `backward()`, with the
//! formulas (and the f32 arithmetic, op for op) of `hl-optimizer`'s
//! compiled update, so an eager run and a compiled one end on the same
//! parameters. Updates run on the host in this first version.

use super::{EagerError, Result, Tensor};
use crate::passes::Optimizer;
use aicf_runtime::{Tensor as Host, artifact::DType};

/// An optimizer over a group of parameters (tensors that require a gradient).
pub struct Optim {
    kind: Optimizer,
    params: Vec<Tensor>,
    /// Per parameter: SGD's momentum buffer, or Adam's first and second moments.
    slots: Vec<Vec<Vec<f32>>>,
    step: u64,
}

impl Optim {
    /// `torch.optim.SGD(params, momentum, nesterov, weight_decay)`.
    pub fn sgd(params: &[Tensor], momentum: f64, nesterov: bool, weight_decay: f64) -> Result<Optim> {
        Optim::new(Optimizer::Sgd { momentum, nesterov, weight_decay }, params)
    }
    /// `torch.optim.Adam` with its defaults but the weight decay.
    pub fn adam(params: &[Tensor], weight_decay: f64) -> Result<Optim> {
        Optim::new(Optimizer::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay }, params)
    }
    /// `torch.optim.AdamW` with its defaults but the weight decay.
    pub fn adamw(params: &[Tensor], weight_decay: f64) -> Result<Optim> {
        Optim::new(Optimizer::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay }, params)
    }

    pub fn new(kind: Optimizer, params: &[Tensor]) -> Result<Optim> {
        kind.check(None).map_err(EagerError::Invalid)?;
        if let Some(p) = params.iter().find(|p| !p.requires_grad() || p.0.node.is_some()) {
            return Err(EagerError::Invalid(format!("{p:?} is not a parameter (a leaf that requires a gradient)")));
        }
        let slots = params
            .iter()
            .map(|p| {
                let n: usize = p.0.shape.iter().product();
                let count = match kind {
                    Optimizer::Sgd { momentum, .. } if momentum > 0.0 => 1,
                    Optimizer::Sgd { .. } => 0,
                    _ => 2,
                };
                vec![vec![0f32; n]; count]
            })
            .collect();
        Ok(Optim { kind, params: params.to_vec(), slots, step: 0 })
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&self) {
        for p in &self.params {
            p.zero_grad();
        }
    }

    /// One update with learning rate `lr` from the parameters' gradients
    /// (a parameter without one is left as it is, as PyTorch does).
    pub fn step(&mut self, lr: f64) -> Result<()> {
        self.step += 1;
        let t = self.step as f64;
        let lr32 = lr as f32;
        let kind = self.kind.clone();
        for (p, slots) in self.params.iter().zip(&mut self.slots) {
            // In place on the parameter's own buffer; one without a
            // gradient is left as it is.
            p.update(|values, g| match kind.clone() {
                Optimizer::Sgd { momentum, nesterov, weight_decay } => {
                    let (m32, wd32) = (momentum as f32, weight_decay as f32);
                    for i in 0..values.len() {
                        let mut d = g[i];
                        if weight_decay != 0.0 {
                            d += values[i] * wd32;
                        }
                        if momentum > 0.0 {
                            let buf = slots[0][i] * m32 + d;
                            slots[0][i] = buf;
                            d = if nesterov { d + buf * m32 } else { buf };
                        }
                        values[i] -= d * lr32;
                    }
                }
                Optimizer::Adam { beta1, beta2, eps, weight_decay }
                | Optimizer::AdamW { beta1, beta2, eps, weight_decay } => {
                    let decoupled = matches!(kind, Optimizer::AdamW { .. });
                    // Bias corrections in f64, rounded once (hl-optimizer's).
                    let bc1 = (1.0 - beta1.powf(t)) as f32;
                    let bc2 = (1.0 - beta2.powf(t)) as f32;
                    let (b1, b2, e, wd) = (beta1 as f32, beta2 as f32, eps as f32, weight_decay as f32);
                    let (c1, c2) = ((1.0 - beta1) as f32, (1.0 - beta2) as f32);
                    let factor = 1.0 - lr32 * wd;
                    let step_size = lr32 / bc1;
                    for i in 0..values.len() {
                        let mut d = g[i];
                        let mut base = values[i];
                        if weight_decay != 0.0 {
                            if decoupled {
                                base = values[i] * factor;
                            } else {
                                d += values[i] * wd;
                            }
                        }
                        let m = slots[0][i] * b1 + d * c1;
                        let v = slots[1][i] * b2 + (d * d) * c2;
                        slots[0][i] = m;
                        slots[1][i] = v;
                        let denom = (v / bc2).sqrt() + e;
                        values[i] = base - (m / denom) * step_size;
                    }
                }
            });
        }
        Ok(())
    }
}

impl Optim {
    fn slot_names(&self) -> &'static [&'static str] {
        match self.kind {
            Optimizer::Sgd { momentum, .. } if momentum > 0.0 => &["momentum"],
            Optimizer::Sgd { .. } => &[],
            _ => &["exp_avg", "exp_avg_sq"],
        }
    }

    /// The parameters and this optimizer's state under the compiled train
    /// step's names (`hl-optimizer`'s: `<param>`, `<param>.momentum`,
    /// `<param>.exp_avg`, `<param>.exp_avg_sq`, `step`), `names` naming the
    /// parameters in order: what `Trainer::set_state` takes to continue
    /// compiled.
    pub fn state(&self, names: &[&str]) -> Result<std::collections::BTreeMap<String, Host>> {
        if names.len() != self.params.len() {
            return Err(EagerError::Invalid(format!("{} names for {} parameters", names.len(), self.params.len())));
        }
        let mut out = std::collections::BTreeMap::new();
        for ((name, p), slots) in names.iter().zip(&self.params).zip(&self.slots) {
            let host = p.host();
            for (slot, values) in self.slot_names().iter().zip(slots) {
                let v = values.iter().map(|&x| x as f64).collect();
                out.insert(format!("{name}.{slot}"), Host::new(host.shape.clone(), DType::F32, v));
            }
            out.insert(name.to_string(), host);
        }
        out.insert("step".into(), Host::new([], DType::I64, vec![self.step as f64]));
        Ok(out)
    }

    /// Continues from `state` (a compiled trainer's `state()`, or
    /// [`Optim::state`]): the parameters' values and the optimizer's slots
    /// and step count, `names` naming the parameters in order.
    pub fn load_state(&mut self, names: &[&str], state: &std::collections::BTreeMap<String, Host>) -> Result<()> {
        if names.len() != self.params.len() {
            return Err(EagerError::Invalid(format!("{} names for {} parameters", names.len(), self.params.len())));
        }
        let get = |key: &str, len: usize| -> Result<Vec<f64>> {
            let t = state.get(key).ok_or_else(|| EagerError::Invalid(format!("the state has no '{key}'")))?;
            if t.values.len() != len {
                return Err(EagerError::Invalid(format!("'{key}' holds {} values, {len} expected", t.values.len())));
            }
            Ok(t.values.clone())
        };
        let slot_names = self.slot_names();
        for ((name, p), slots) in names.iter().zip(&self.params).zip(&mut self.slots) {
            let n = p.host().values.len();
            p.set_values(get(name, n)?)?;
            for (slot, values) in slot_names.iter().zip(slots.iter_mut()) {
                *values = get(&format!("{name}.{slot}"), n)?.iter().map(|&x| x as f32).collect();
            }
        }
        self.step = get("step", 1)?[0] as u64;
        Ok(())
    }
}
