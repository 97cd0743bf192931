//! A dynamic model for eager mode: a character RNN trained on lines of
//! text one at a time, each line as long as it is (no padding, no fixed
//! sequence length). The loop over time steps is plain Rust, so every line
//! records a tape of its own length; the same kernels serve every length.
//!
//!   h_t = tanh(E[x_t] + U h_{t-1} + b),  logits_t = W h_t + c,
//!   loss = mean_t cross_entropy(logits_t, x_{t+1})

use aicf_compiler::eager::{self, Device, Tensor, optim::Optim};

pub struct CharRnn {
    pub vocab: Vec<char>,
    pub embed: Tensor,
    pub u: Tensor,
    pub b: Tensor,
    pub w: Tensor,
    pub c: Tensor,
    hidden: usize,
    device: Device,
}

fn uniform(shape: &[usize], bound: f32, seed: &mut u64, device: &Device) -> eager::Result<Tensor> {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * bound
        })
        .collect();
    Ok(Tensor::from_vec(shape, v)?.to(device)?.param())
}

impl CharRnn {
    /// A model over the characters of `text`, `hidden` units, PyTorch's
    /// nn.RNN initialisation (U(-1/sqrt(hidden), 1/sqrt(hidden))), its
    /// parameters on `device`.
    pub fn new(text: &str, hidden: usize, seed: u64, device: &Device) -> eager::Result<CharRnn> {
        let mut vocab: Vec<char> = text.chars().collect();
        vocab.sort_unstable();
        vocab.dedup();
        let v = vocab.len();
        let bound = 1.0 / (hidden as f32).sqrt();
        let mut s = seed;
        Ok(CharRnn {
            embed: uniform(&[v, hidden], bound, &mut s, device)?,
            u: uniform(&[hidden, hidden], bound, &mut s, device)?,
            b: uniform(&[hidden], bound, &mut s, device)?,
            w: uniform(&[v, hidden], bound, &mut s, device)?,
            c: uniform(&[v], bound, &mut s, device)?,
            vocab,
            hidden,
            device: *device,
        })
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.embed.clone(), self.u.clone(), self.b.clone(), self.w.clone(), self.c.clone()]
    }

    fn id(&self, ch: char) -> eager::Result<i32> {
        self.vocab
            .binary_search(&ch)
            .map(|i| i as i32)
            .map_err(|_| eager::EagerError::Invalid(format!("'{ch}' is not in the vocabulary")))
    }

    /// The mean next-character loss over `line` (at least 2 characters).
    pub fn loss(&self, line: &str) -> eager::Result<Tensor> {
        let ids: Vec<i32> = line.chars().map(|ch| self.id(ch)).collect::<eager::Result<_>>()?;
        if ids.len() < 2 {
            return Err(eager::EagerError::Invalid("a line of fewer than 2 characters has nothing to predict".into()));
        }
        let d = &self.device;
        let mut h = Tensor::from_vec(&[1, self.hidden], vec![0.0; self.hidden])?.to(d)?;
        let mut total: Option<Tensor> = None;
        for pair in ids.windows(2) {
            let x = Tensor::from_i32(&[1], &pair[..1])?.to(d)?;
            let y = Tensor::from_i32(&[1], &pair[1..])?.to(d)?;
            h = self.embed.gather(&x, 0)?.add(&h.linear(&self.u, Some(&self.b))?)?.tanh()?;
            let l = h.linear(&self.w, Some(&self.c))?.cross_entropy(&y)?;
            total = Some(match total {
                Some(t) => t.add(&l)?,
                None => l,
            });
        }
        // 1 / steps as a tensor, not a constant of the op: one kernel for
        // every length.
        let scale = Tensor::from_vec(&[], vec![1.0 / (ids.len() - 1) as f32])?.to(d)?;
        total.ok_or_else(|| eager::EagerError::Invalid("empty line".into()))?.mul(&scale)
    }
}

/// Trains on the first `lines` lines of `text` (each cut to `max_len`
/// characters) with Adam on `device`; returns each line's loss, its
/// length, in order.
pub fn train(text: &str, lines: usize, max_len: usize, lr: f64, device: &Device) -> eager::Result<Vec<(f64, usize)>> {
    let model = CharRnn::new(text, 64, 1, device)?;
    let mut opt = Optim::adam(&model.params(), 0.0)?;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.chars().count() >= 2).take(lines) {
        let line: String = line.chars().take(max_len).collect();
        opt.zero_grad();
        let loss = model.loss(&line)?;
        loss.backward()?;
        opt.step(lr)?;
        out.push((loss.item()?, line.chars().count()));
    }
    Ok(out)
}
