//! Text from a trained language model (`aicf sample`), as nanoGPT's
//! `sample.py`: the checkpoint's model reads the last context's worth of
//! tokens, and the next token is drawn from its last position's logits,
//! scaled by a temperature and cut to the `top_k` most likely.
//!
//! The model is compiled for a fixed context. A prompt shorter than it
//! fills the first positions and the rest repeat its last token: the
//! attention is causal, so the position read sees only the prompt. Longer
//! sequences slide: the model reads the last `context` tokens, as nanoGPT
//! crops to `block_size`. The vocabulary is the one the checkpoint trained
//! with (its metadata, written by `aicf train`). The draws are Philox
//! blocks of (seed, token index): the same seed gives the same text on
//! any machine whose kernels give the same logits.

use super::data::{Input, Role, Signature};
use super::eval::model_of_checkpoint;
use super::run::Report;
use super::{Options, TrainError, Trainer};
use aicf_runtime::Tensor;
use aicf_runtime::artifact::DType;
use std::path::Path;

type Result<T, E = TrainError> = std::result::Result<T, E>;

/// What to sample.
#[derive(Clone, Debug)]
pub struct SampleOptions {
    /// The text the model continues (its characters must be in the
    /// vocabulary); none: a newline, as nanoGPT starts, or token 0.
    pub prompt: Option<String>,
    /// Tokens to draw.
    pub tokens: usize,
    /// Logits are divided by it before the softmax: below 1 sharper,
    /// above 1 flatter.
    pub temperature: f64,
    /// Draw among the `top_k` most likely tokens only (1: greedy).
    pub top_k: Option<usize>,
    pub seed: u64,
    /// The model given is the checkpoint's at another batch size (an ONNX
    /// model imported again at one row, its import at the checkpoint's
    /// batch found equal to the checkpoint's model): sampled as given,
    /// with the checkpoint's parameters.
    pub same_model_at_one_row: bool,
}

/// The tokens a checkpoint's text was read as.
enum Vocabulary {
    Chars(Vec<char>),
    Bytes,
}

impl Vocabulary {
    fn size(&self) -> usize {
        match self {
            Vocabulary::Chars(c) => c.len(),
            Vocabulary::Bytes => 256,
        }
    }

    /// The prompt's token ids; a character outside the vocabulary is an
    /// error that names it.
    fn encode(&self, text: &str) -> Result<Vec<usize>> {
        match self {
            Vocabulary::Bytes => Ok(text.bytes().map(usize::from).collect()),
            Vocabulary::Chars(chars) => text
                .chars()
                .enumerate()
                .map(|(at, c)| {
                    chars.binary_search(&c).map_err(|_| {
                        TrainError::Input(format!(
                            "the prompt's character {at} (counting from 0) ({c:?}) is not in the model's vocabulary \
                             of {} characters",
                            chars.len()
                        ))
                    })
                })
                .collect(),
        }
    }
}

/// Samples `s.tokens` tokens from `checkpoint` of the model in `model`;
/// `emit` gets the prompt, then each drawn character as it comes (a byte
/// vocabulary's each byte as drawn: a sequence that is no UTF-8 went out
/// as U+FFFD, and the bytes drawn were lost), and says whether to go on
/// (false: the reader is gone). Returns the prompt and the bytes drawn.
pub fn sample_checkpoint(
    model: &Path,
    options: &Options,
    checkpoint: &Path,
    out: &Path,
    s: &SampleOptions,
    report: &mut dyn Report,
    emit: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<Vec<u8>> {
    if s.tokens == 0 {
        return Err(TrainError::Input("--tokens 0: nothing to sample".into()));
    }
    // (0 is greedy decoding, as llama.cpp's, vLLM's and the OpenAI API's:
    // the most likely token, as --top-k 1.)
    if !(s.temperature.is_finite() && s.temperature >= 0.0) {
        return Err(TrainError::Input(format!(
            "the temperature {} is not a finite number of at least 0 (0: the most likely token each time)",
            s.temperature
        )));
    }
    if s.top_k == Some(0) {
        return Err(TrainError::Input("--top-k 0 leaves no token to draw: at least 1".into()));
    }
    let (name, source, meta) = if s.same_model_at_one_row {
        let meta = aicf_runtime::checkpoint::read_metadata(checkpoint)?;
        (model.display().to_string(), super::read_model(model)?, meta)
    } else {
        let (name, source, meta, _) = model_of_checkpoint(model, checkpoint, out, "sampling from", false, report)?;
        (name, source, meta)
    };
    let vocabulary = match meta.get("vocabulary").map(String::as_str) {
        Some("bytes") => Vocabulary::Bytes,
        Some(chars) => {
            let chars: Vec<char> = chars.chars().collect();
            if chars.is_empty() || chars.windows(2).any(|w| w[0] >= w[1]) {
                return Err(TrainError::Io {
                    path: checkpoint.to_path_buf(),
                    message: "its vocabulary is not sorted distinct characters".into(),
                });
            }
            Vocabulary::Chars(chars)
        }
        None => {
            return Err(TrainError::Input(format!(
                "{}: no text vocabulary in its metadata: sampling needs a language model trained on a text by \
                 `aicf train`",
                checkpoint.display()
            )));
        }
    };
    let sig = Signature::of_source(&source, &name)?;
    let fed = sig.fed();
    // (Inputs the model fills where the data does not give them, an
    // imported attention mask, are not the tokens.)
    let given: Vec<&Input> = fed.iter().filter(|i| i.fill.is_none()).copied().collect();
    let filled: Vec<(f64, DType)> =
        fed.iter().filter(|i| i.role == Role::Data).filter_map(|i| i.fill.map(|v| (v, i.dtype))).collect();
    let tokens_in = match given[..] {
        [t, _] if t.role == Role::Data && fed[0].fill.is_none() => t,
        _ => {
            return Err(TrainError::Input(format!(
                "{name}: sampling needs a language model (tokens in, next tokens as targets); its @loss feeds {}",
                fed.len()
            )));
        }
    };
    let int = |t: DType| matches!(t, DType::I32 | DType::I64 | DType::I1 | DType::U8);
    let (context, one_hot) = match tokens_in.shape[..] {
        [_, t] if int(tokens_in.dtype) => (t, None),
        [_, t, v] if !int(tokens_in.dtype) => (t, Some(v)),
        _ => {
            return Err(TrainError::Input(format!(
                "{name}: sampling feeds token ids [batch, context] or one-hot vectors [batch, context, vocabulary]; \
                 the model's input #0 is {}",
                tokens_in.describe()
            )));
        }
    };
    let classes = sig.classes().ok_or_else(|| TrainError::Input(format!("{name}: the model has no @forward")))?;
    let size = vocabulary.size();
    if size > classes || one_hot.is_some_and(|v| v < size) || context == 0 {
        return Err(TrainError::Input(format!(
            "{}: its vocabulary of {size} tokens does not fit {name}, which predicts {classes} classes from a \
             context of {context}",
            checkpoint.display()
        )));
    }
    let mut sequence = match &s.prompt {
        Some(p) if !p.is_empty() => vocabulary.encode(p)?,
        _ => vec![vocabulary.encode("\n").map_or(0, |ids| ids[0])],
    };
    // (The same model at one row: its tensors load by name.)
    let mut trainer = super::eval::checkpoint_trainer(
        &source,
        &name,
        options,
        &meta,
        checkpoint,
        out,
        s.same_model_at_one_row,
        report,
    )?;
    let decode = |id: usize| match &vocabulary {
        Vocabulary::Chars(c) => c[id].to_string(),
        Vocabulary::Bytes => String::from_utf8_lossy(&[id as u8]).into_owned(),
    };
    // What the model reads first, shown as it is (an empty prompt is none).
    let mut text: Vec<u8> = match (s.prompt.as_deref().filter(|p| !p.is_empty()), &vocabulary) {
        (Some(p), _) => p.as_bytes().to_vec(),
        (None, Vocabulary::Chars(_)) => decode(sequence[0]).into_bytes(),
        (None, Vocabulary::Bytes) => b"\n".to_vec(),
    };
    // The rows fed: one, or the model's own batch where an op fixes it (an
    // ONNX export's fixed batch), the context repeated in each; row 0's
    // logits are read.
    let mut rows = 1;
    let mut shown = false;
    for i in 0..s.tokens {
        let window = &sequence[sequence.len().saturating_sub(context)..];
        let last = window.len() - 1;
        let ids: Vec<usize> = (0..context).map(|t| window[t.min(last)]).collect();
        let input = |rows: usize| match one_hot {
            None => Tensor::new(
                vec![rows, context],
                tokens_in.dtype,
                ids.iter().map(|&v| v as f64).collect::<Vec<_>>().repeat(rows),
            ),
            Some(v) => {
                let mut values = vec![0.0; context * v];
                for (t, &id) in ids.iter().enumerate() {
                    values[t * v + id] = 1.0;
                }
                Tensor::new(vec![rows, context, v], tokens_in.dtype, values.repeat(rows))
            }
        };
        // The tokens, then each filled input (all of a window: ones of an
        // attention mask).
        let fed_in = |rows: usize| {
            let mut v = vec![input(rows)];
            v.extend(
                filled
                    .iter()
                    .map(|&(value, dtype)| Tensor::new(vec![rows, context], dtype, vec![value; rows * context])),
            );
            v
        };
        let predict = |trainer: &mut Trainer, rows: usize| trainer.predict(&fed_in(rows).iter().collect::<Vec<_>>());
        let outputs = match predict(&mut trainer, rows) {
            Err(TrainError::FixedBatch { .. }) if rows == 1 && tokens_in.shape[0] > 1 => {
                rows = tokens_in.shape[0];
                predict(&mut trainer, rows)?
            }
            outputs => outputs?,
        };
        // The prompt goes out once the model has run (a model that does
        // not compile leaves nothing on stdout).
        if !shown {
            shown = true;
            if !emit(&text) {
                return Ok(text);
            }
        }
        let logits = outputs.first().ok_or_else(|| TrainError::Input(format!("{name}: @forward returned nothing")))?;
        let row = logits.values.get(last * classes..last * classes + size).ok_or_else(|| {
            TrainError::Input(format!(
                "{name}: @forward's logits are {:?}, not [1, {context}, {classes}]",
                logits.shape
            ))
        })?;
        if let Some(v) = row.iter().find(|v| !v.is_finite()) {
            return Err(TrainError::Input(format!(
                "{}: the checkpoint's model gives a logit of {v} after {} tokens",
                checkpoint.display(),
                sequence.len()
            )));
        }
        let u = aicf_runtime::rng::unit_f32(aicf_runtime::rng::block(s.seed, 0, i as u64)[0]) as f64;
        // A softmax at @forward's end: its probabilities as logits (their
        // logarithms), not taken through a softmax again.
        let logs: Vec<f64>;
        let row = if sig.scores == super::data::Scores::Probabilities {
            logs = row.iter().map(|p| p.max(f32::from_bits(1) as f64).ln()).collect();
            &logs[..]
        } else {
            row
        };
        let id = draw(row, s.temperature, s.top_k, u);
        sequence.push(id);
        match vocabulary {
            Vocabulary::Chars(_) => {
                let c = decode(id);
                text.extend_from_slice(c.as_bytes());
                if !emit(c.as_bytes()) {
                    break;
                }
            }
            // Each byte as drawn: a terminal puts a character together
            // from its bytes, and a file keeps what the model wrote.
            Vocabulary::Bytes => {
                text.push(id as u8);
                if !emit(&[id as u8]) {
                    break;
                }
            }
        }
    }
    Ok(text)
}

/// The token that uniform draw `u` in [0, 1) picks from `logits` divided
/// by `temperature`, among the `top_k` largest (ties kept by index): the
/// first whose cumulative probability passes `u`. A temperature of 0 is
/// the most likely token.
pub fn draw(logits: &[f64], temperature: f64, top_k: Option<usize>, u: f64) -> usize {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    let k = if temperature == 0.0 { 1 } else { top_k.unwrap_or(logits.len()) };
    order.truncate(k.clamp(1, logits.len().max(1)));
    let Some(&best) = order.first() else { return 0 };
    // The difference first, then the temperature: `l / T - max / T` is
    // inf - inf (NaN) for a tiny T, which drew the least likely token.
    let weights: Vec<f64> = order.iter().map(|&i| ((logits[i] - logits[best]) / temperature).exp()).collect();
    let total: f64 = weights.iter().sum();
    if !total.is_finite() || total <= 0.0 {
        return best;
    }
    let mut cumulative = 0.0;
    for (&i, w) in order.iter().zip(&weights) {
        cumulative += w / total;
        if u < cumulative {
            return i;
        }
    }
    // Rounding left the sum just under u: the least likely kept token.
    order.last().copied().unwrap_or(best)
}

#[cfg(test)]
mod tests {
    use super::draw;

    #[test]
    fn temperature_zero_is_the_argmax_whatever_the_draw() {
        let logits = [0.5, 3.0, -1.0, 3.0 - 1e-12];
        for u in [0.0, 0.5, 0.999] {
            assert_eq!(draw(&logits, 0.0, None, u), 1);
            assert_eq!(draw(&logits, 0.0, Some(3), u), 1);
        }
    }

    #[test]
    fn top_one_is_the_argmax_whatever_the_draw() {
        let logits = [0.5, 3.0, -1.0, 2.9];
        for u in [0.0, 0.3, 0.999_999] {
            assert_eq!(draw(&logits, 1.0, Some(1), u), 1);
        }
    }

    #[test]
    fn draws_follow_the_softmax_and_top_k_cuts_the_tail() {
        // Probabilities e^0 : e^(ln 3) = 1 : 3 over tokens 1 and 0.
        let logits = [3f64.ln(), 0.0, -50.0];
        assert_eq!(draw(&logits, 1.0, None, 0.74), 0);
        assert_eq!(draw(&logits, 1.0, None, 0.76), 1);
        // A high temperature flattens toward 1 : 1 : 1 (token 2 reachable).
        assert_eq!(draw(&logits, 1e6, None, 0.99), 2);
        // Cut to the top 2, token 2 is never drawn.
        assert_eq!(draw(&logits, 1e6, Some(2), 0.99), 1);
        // A low temperature is nearly greedy.
        assert_eq!(draw(&logits, 1e-3, None, 0.999), 0);
        // A tiny one is greedy (its logits over T overflow to infinity).
        for t in [1e-300, 1e-308, f64::MIN_POSITIVE] {
            assert_eq!(draw(&logits, t, None, 0.999), 0, "temperature {t}");
        }
    }
}
