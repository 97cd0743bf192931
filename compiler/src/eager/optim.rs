//! Optimizers for eager parameters: `step()` after `backward()`, with the
//! formulas (and the f32 arithmetic, op for op) of `hl-optimizer`'s
//! compiled update, so an eager run and a compiled one end on the same
//! parameters.
//!
//! The update of each parameter is one fused pass over it: on the host, a
//! loop over the parameter, its gradient and its slots in place; on a GPU,
//! one kernel compiled from the update traced in `hl` (the same formulas,
//! op for op), whose step-dependent numbers (the learning rate, Adam's
//! bias corrections) are a small input tensor, so one kernel serves every
//! step. [`Optim::use_kernels`] runs the kernel form on the host too.

use super::{EagerError, Result, Tensor};
use crate::nn;
use crate::passes::Optimizer;
use aicf_runtime::{Tensor as Host, artifact::DType};

/// An optimizer over a group of parameters (tensors that require a gradient).
pub struct Optim {
    kind: Optimizer,
    params: Vec<Tensor>,
    /// Per parameter: SGD's momentum buffer, or Adam's first and second
    /// moments, on the parameter's device.
    slots: Vec<Vec<Tensor>>,
    /// Per parameter: the updates it has had. A parameter without a
    /// gradient at a step is skipped and not counted, as PyTorch keeps
    /// `state['step']` per parameter: one that first gets a gradient late
    /// (a branch of a dynamic model) starts from step 1's bias correction.
    steps: Vec<u64>,
    /// Update host parameters by the compiled kernel instead of the loop.
    kernels: bool,
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
        if params.is_empty() {
            // As PyTorch's "optimizer got an empty parameter list": a step
            // of nothing is a model whose parameters were never handed over.
            return Err(EagerError::Invalid(
                "an optimizer needs at least one parameter; none were given (a layer-API model's eager parameters \
                 are made by its first forward, as a lazy module's: run one before `Graph::eager_params`)"
                    .into(),
            ));
        }
        if let Some(p) = params.iter().find(|p| !p.requires_grad() || p.0.node.is_some()) {
            return Err(EagerError::Invalid(format!("{p:?} is not a parameter (a leaf that requires a gradient)")));
        }
        if let Some(p) = params.iter().find(|p| p.0.dtype != DType::F32) {
            return Err(EagerError::Invalid(format!("{p:?}: the optimizers update f32 parameters")));
        }
        // A parameter given twice (or two sharing values) would be updated
        // twice per step, as PyTorch refuses too.
        for (i, p) in params.iter().enumerate() {
            if let Some(j) = params[..i].iter().position(|q| std::rc::Rc::ptr_eq(&q.0.data, &p.0.data)) {
                return Err(EagerError::Invalid(format!(
                    "parameters {j} and {i} are the same values ({p:?}): each is updated once per step"
                )));
            }
        }
        let count = slot_names(&kind).len();
        let slots = params
            .iter()
            .map(|p| {
                let n: usize = p.0.shape.iter().product();
                (0..count).map(|_| Tensor::from_vec(&p.0.shape, vec![0f32; n])?.to(&p.device())).collect()
            })
            .collect::<Result<_>>()?;
        Ok(Optim { kind, params: params.to_vec(), slots, steps: vec![0; params.len()], kernels: false })
    }

    /// Runs every update as the compiled kernel a GPU parameter's update
    /// runs, also for parameters in host memory (off: a loop on the host).
    pub fn use_kernels(&mut self, on: bool) {
        self.kernels = on;
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&self) {
        for p in &self.params {
            p.zero_grad();
        }
    }

    /// Scales every gradient so their global L2 norm is at most `max_norm`
    /// (`torch.nn.utils.clip_grad_norm_`, and `hl-optimizer{clip-norm}`'s
    /// formula: coefficient min(1, max_norm / (norm + 1e-6)), the squares
    /// summed per gradient then in parameter order, in f32). Returns the
    /// norm before clipping.
    pub fn clip_grad_norm(&self, max_norm: f64) -> Result<f64> {
        // (An infinite bound clips nothing, and 0 zeroes the gradients, as
        // in PyTorch.)
        if max_norm.is_nan() || max_norm < 0.0 {
            return Err(EagerError::Invalid(format!("clip_grad_norm: max_norm {max_norm} is negative or NaN")));
        }
        let grads: Vec<(&Tensor, Tensor)> =
            self.params.iter().filter_map(|p| p.grad_tensor().map(|g| (p, g))).collect();
        let Some(first) = grads.first() else { return Ok(0.0) };
        let device = first.1.device();
        super::no_grad(|| -> Result<f64> {
            let mut total: Option<Tensor> = None;
            for (_, g) in &grads {
                let axes: Vec<i64> = (0..g.0.shape.len() as i64).collect();
                let sq = g.mul(g)?;
                let s = if axes.is_empty() { sq } else { sq.sum(&axes, false)? };
                total = Some(match total {
                    Some(t) => t.add(&s)?,
                    None => s,
                });
            }
            let Some(total) = total else { return Ok(0.0) };
            let norm = (total.item()? as f32).sqrt();
            // A NaN norm makes every gradient NaN, as PyTorch's does (f32's
            // `min` took the 1 and left them as they were).
            let raw = (max_norm as f32) / (norm + 1e-6f32);
            let coef = if raw.is_nan() { raw } else { raw.min(1.0) };
            let c = Tensor::from_vec(&[], vec![coef])?.to(&device)?;
            for (p, g) in &grads {
                *p.0.grad.borrow_mut() = Some(g.mul(&c)?);
            }
            Ok(norm as f64)
        })
    }

    /// One update with learning rate `lr` from the parameters' gradients
    /// (a parameter without one is left as it is, as PyTorch does).
    pub fn step(&mut self, lr: f64) -> Result<()> {
        if !lr.is_finite() || lr < 0.0 {
            return Err(EagerError::Invalid(format!("step: the learning rate {lr} is not a finite number >= 0")));
        }
        // The update runs in f32: a rate past f32's range was infinite there
        // (every parameter became -inf).
        if !(lr as f32).is_finite() {
            return Err(EagerError::Invalid(format!("step: the learning rate {lr} is infinite in f32")));
        }
        if let Some(i) =
            (0..self.params.len()).find(|&i| self.steps[i] >= MAX_STEP && self.params[i].grad_tensor().is_some())
        {
            return Err(EagerError::Invalid(format!(
                "step: parameter {i} has taken {} steps already, the most counted",
                self.steps[i]
            )));
        }
        let lr32 = lr as f32;
        let kind = self.kind.clone();
        // The step's numbers on each device its parameters use, per step
        // count, made once.
        let mut on_device: Vec<(super::Device, u64, Tensor)> = Vec::new();
        for ((p, slots), count) in self.params.iter().zip(&self.slots).zip(self.steps.iter_mut()) {
            let Some(g) = p.grad_tensor() else { continue };
            *count += 1;
            let scalars = step_scalars(&kind, lr32, *count);
            let on_host = matches!(p.device(), super::Device::Cpu { .. });
            if on_host && !self.kernels {
                update_on_host(&kind, p, slots, &scalars);
                continue;
            }
            let device = p.device();
            let s = match on_device.iter().find(|(d, t, _)| *t == *count && super::same_device(d, &device)) {
                Some((_, _, s)) => s.clone(),
                None => {
                    let s = Tensor::from_vec(&[scalars.len()], scalars.clone())?.to(&device)?;
                    on_device.push((device, *count, s.clone()));
                    s
                }
            };
            let mut inputs: Vec<&Tensor> = vec![p, &g];
            inputs.extend(slots.iter());
            inputs.push(&s);
            let k = kind.clone();
            let build = move |xs: &[nn::Tensor]| update_traced(&k, xs);
            let mut out = super::call_many(&update_key(&kind), &build, &inputs)?.into_iter();
            let new_p = out.next().ok_or_else(|| EagerError::Invalid("the update made no parameter".into()))?;
            p.assign(new_p)?;
            for (slot, new) in slots.iter().zip(out) {
                slot.assign(new)?;
            }
        }
        Ok(())
    }
}

/// The numbers of a parameter's `t`-th update: `[lr]` for SGD, `[bc2, 1 -
/// lr wd, lr / bc1]` for Adam and AdamW (bias corrections in f64, rounded
/// once as hl-optimizer's, and the factors made of them in f32).
fn step_scalars(kind: &Optimizer, lr32: f32, t: u64) -> Vec<f32> {
    match *kind {
        Optimizer::Adam { beta1, beta2, weight_decay, .. } | Optimizer::AdamW { beta1, beta2, weight_decay, .. } => {
            let t = t as f64;
            let bc1 = (1.0 - beta1.powf(t)) as f32;
            let bc2 = (1.0 - beta2.powf(t)) as f32;
            vec![bc2, 1.0 - lr32 * weight_decay as f32, lr32 / bc1]
        }
        Optimizer::Sgd { .. } => vec![lr32],
    }
}

/// The most steps an optimizer counts: 2^53, every count exact in f64 (the
/// bias corrections' exponent, and a state's `step`).
const MAX_STEP: u64 = 1 << 53;

fn slot_names(kind: &Optimizer) -> &'static [&'static str] {
    match kind {
        Optimizer::Sgd { momentum, .. } if *momentum > 0.0 => &["momentum"],
        Optimizer::Sgd { .. } => &[],
        _ => &["exp_avg", "exp_avg_sq"],
    }
}

/// The update kernel's name with its constant hyper-parameters.
fn update_key(kind: &Optimizer) -> String {
    match *kind {
        Optimizer::Sgd { momentum, nesterov, weight_decay } => format!("sgd {momentum:e} {nesterov} {weight_decay:e}"),
        Optimizer::Adam { beta1, beta2, eps, weight_decay } => {
            format!("adam {beta1:e} {beta2:e} {eps:e} {weight_decay:e}")
        }
        Optimizer::AdamW { beta1, beta2, eps, weight_decay } => {
            format!("adamw {beta1:e} {beta2:e} {eps:e} {weight_decay:e}")
        }
    }
}

/// The update traced on `(param, grad, slots..., scalars)`, returning
/// `(param', slots'...)`: `scalars` is `[lr]` for SGD, `[bc2, 1 - lr wd,
/// lr / bc1]` for Adam. Op for op the host loop's arithmetic.
fn update_traced(kind: &Optimizer, xs: &[nn::Tensor]) -> nn::Result<Vec<nn::Tensor>> {
    let n = xs.len();
    let (p, g, s) = (&xs[0], &xs[1], &xs[n - 1]);
    let scalar = |i: usize| s.narrow(0, i, 1)?.reshape(&[]);
    match *kind {
        Optimizer::Sgd { momentum, nesterov, weight_decay } => {
            let mut d = g.clone();
            if weight_decay != 0.0 {
                d = d.add(&p.mul_scalar(weight_decay)?)?;
            }
            let mut slots = Vec::new();
            if momentum > 0.0 {
                let buf = xs[2].mul_scalar(momentum)?.add(&d)?;
                d = if nesterov { d.add(&buf.mul_scalar(momentum)?)? } else { buf.clone() };
                slots.push(buf);
            }
            let mut out = vec![p.sub(&d.mul(&scalar(0)?)?)?];
            out.extend(slots);
            Ok(out)
        }
        Optimizer::Adam { beta1, beta2, eps, weight_decay } | Optimizer::AdamW { beta1, beta2, eps, weight_decay } => {
            let decoupled = matches!(kind, Optimizer::AdamW { .. });
            let (mut d, mut base) = (g.clone(), p.clone());
            if weight_decay != 0.0 {
                if decoupled {
                    base = p.mul(&scalar(1)?)?;
                } else {
                    d = d.add(&p.mul_scalar(weight_decay)?)?;
                }
            }
            let m = xs[2].mul_scalar(beta1)?.add(&d.mul_scalar(1.0 - beta1)?)?;
            let v = xs[3].mul_scalar(beta2)?.add(&d.mul(&d)?.mul_scalar(1.0 - beta2)?)?;
            let denom = v.div(&scalar(0)?)?.sqrt()?.add_scalar(eps)?;
            let new_p = base.sub(&m.div(&denom)?.mul(&scalar(2)?)?)?;
            Ok(vec![new_p, m, v])
        }
    }
}

/// The update of a parameter in host memory, in place: a loop over its
/// values, gradient and slots.
fn update_on_host(kind: &Optimizer, p: &Tensor, slots: &[Tensor], scalars: &[f32]) {
    let mut guards: Vec<std::cell::RefMut<super::Storage>> = slots.iter().map(|s| s.0.data.borrow_mut()).collect();
    let mut slots: Vec<&mut [f32]> = guards
        .iter_mut()
        .filter_map(|g| match &mut **g {
            super::Storage::Host(b) => Some(super::f32s_mut(b)),
            super::Storage::Cuda(_) => None,
        })
        .collect();
    p.update(|values, g| match *kind {
        Optimizer::Sgd { momentum, nesterov, weight_decay } => {
            let (m32, wd32, lr32) = (momentum as f32, weight_decay as f32, scalars[0]);
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
        Optimizer::Adam { beta1, beta2, eps, weight_decay } | Optimizer::AdamW { beta1, beta2, eps, weight_decay } => {
            let decoupled = matches!(kind, Optimizer::AdamW { .. });
            let (bc2, factor, step_size) = (scalars[0], scalars[1], scalars[2]);
            let (b1, b2, e, wd) = (beta1 as f32, beta2 as f32, eps as f32, weight_decay as f32);
            let (c1, c2) = ((1.0 - beta1) as f32, (1.0 - beta2) as f32);
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

impl Optim {
    /// The parameters and this optimizer's state under the compiled train
    /// step's names (`hl-optimizer`'s: `<param>`, `<param>.momentum`,
    /// `<param>.exp_avg`, `<param>.exp_avg_sq`, `step`), `names` naming the
    /// parameters in order: what `Trainer::set_state` takes to continue
    /// compiled. `step` is the most updates any parameter has had; a
    /// parameter that has had fewer (steps without a gradient) also has its
    /// own count, `<param>.step`, which [`Optim::load_state`] reads back and
    /// the compiled step, one count for all, refuses by name.
    pub fn state(&self, names: &[&str]) -> Result<std::collections::BTreeMap<String, Host>> {
        if names.len() != self.params.len() {
            return Err(EagerError::Invalid(format!("{} names for {} parameters", names.len(), self.params.len())));
        }
        check_names(names, &self.kind)?;
        let mut out = std::collections::BTreeMap::new();
        for ((name, p), slots) in names.iter().zip(&self.params).zip(&self.slots) {
            for (slot, values) in slot_names(&self.kind).iter().zip(slots) {
                out.insert(format!("{name}.{slot}"), values.host()?);
            }
            out.insert(name.to_string(), p.host()?);
        }
        let most = self.steps.iter().copied().max().unwrap_or(0);
        out.insert("step".into(), Host::new([], DType::I64, vec![most as f64]));
        for (name, &count) in names.iter().zip(&self.steps) {
            if count != most {
                out.insert(format!("{name}.step"), Host::new([], DType::I64, vec![count as f64]));
            }
        }
        Ok(out)
    }

    /// Continues from `state` (a compiled trainer's `state()`, or
    /// [`Optim::state`]): the parameters' values and the optimizer's slots
    /// and step count, `names` naming the parameters in order.
    pub fn load_state(&mut self, names: &[&str], state: &std::collections::BTreeMap<String, Host>) -> Result<()> {
        if names.len() != self.params.len() {
            return Err(EagerError::Invalid(format!("{} names for {} parameters", names.len(), self.params.len())));
        }
        check_names(names, &self.kind)?;
        let entry = |key: &str| state.get(key).ok_or_else(|| EagerError::Invalid(format!("the state has no '{key}'")));
        // A parameter's values and slots: its shape (as PyTorch's
        // load_state_dict, a [3, 2] is no [2, 3]), every value filled and
        // a number (a NaN would train on as NaN, as a checkpoint holding
        // one is refused).
        let get = |key: &str, shape: &[usize]| -> Result<Vec<f64>> {
            let t = entry(key)?;
            if t.shape != shape || !t.filled() {
                return Err(EagerError::Invalid(format!(
                    "'{key}' is {:?} with {} values, the parameter is {shape:?}",
                    t.shape,
                    t.values.len()
                )));
            }
            if let Some(i) = t.values.iter().position(|v| !v.is_finite()) {
                return Err(EagerError::Invalid(format!("'{key}' holds {} at index {i}", t.values[i])));
            }
            Ok(t.values.clone())
        };
        let slot_names = slot_names(&self.kind);
        // Every value is checked before any is written.
        let mut values = Vec::new();
        for (name, p) in names.iter().zip(&self.params) {
            values.push(get(name, &p.0.shape)?);
            for slot in slot_names {
                values.push(get(&format!("{name}.{slot}"), &p.0.shape)?);
            }
        }
        let count = |key: &str, t: &Host| -> Result<u64> {
            let step = match t.values.as_slice() {
                [v] => *v,
                other => return Err(EagerError::Invalid(format!("'{key}' holds {} values, 1 expected", other.len()))),
            };
            // Exact in f64, and a count the steps after it can add to.
            if !(step >= 0.0 && step.fract() == 0.0 && step <= MAX_STEP as f64) {
                return Err(EagerError::Invalid(format!("'{key}' is {step}, not a step count (0 to 2^53)")));
            }
            Ok(step as u64)
        };
        let step = count("step", entry("step")?)?;
        let mut steps = Vec::new();
        for name in names {
            let key = format!("{name}.step");
            steps.push(match state.get(&key) {
                Some(t) => count(&key, t)?,
                None => step,
            });
        }
        let mut it = values.into_iter();
        for (p, slots) in self.params.iter().zip(&self.slots) {
            for t in std::iter::once(p).chain(slots) {
                t.set_values(it.next().ok_or_else(|| EagerError::Invalid("a value went missing".into()))?)?;
            }
        }
        self.steps = steps;
        Ok(())
    }
}

/// Parameter names whose state entries would collide: a name twice, the
/// step counter's `step`, or one parameter's `<name>.<slot>` (the state map
/// kept one of each silently).
fn check_names(names: &[&str], kind: &Optimizer) -> Result<()> {
    let slots = slot_names(kind);
    let mut keys = std::collections::BTreeSet::new();
    for name in names {
        let own = std::iter::once("step").chain(slots.iter().copied()).map(|s| format!("{name}.{s}"));
        for key in std::iter::once(name.to_string()).chain(own) {
            if key == "step" || !keys.insert(key.clone()) {
                return Err(EagerError::Invalid(format!(
                    "the parameter name '{name}' makes the state entry '{key}' twice (names must be distinct, not \
                     'step', and not another parameter's '<name>.<slot>' or '<name>.step')"
                )));
            }
        }
    }
    Ok(())
}
