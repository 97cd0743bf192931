//! A character-level transformer language model sized for tiny
//! Shakespeare (65 distinct characters): token and position embeddings,
//! pre-norm transformer blocks with causal self-attention, a final layer
//! norm and an untied output projection, dropout 0.1 while training
//! (nanoGPT's `shakespeare_char` recipe, scaled down). Same IR as
//! `char_lm.mlir` (tested).

use aicf_compiler::nn::{
    self, DType, Embedding, HlModule, LayerNorm, Linear, Module, Tensor, TensorSpec, TransformerBlock, child, layer,
};

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub vocab: usize,
    pub context: usize,
    pub dim: usize,
    pub heads: usize,
    pub layers: usize,
    pub dropout: f64,
    pub batch: usize,
}

pub const CONFIG: Config = Config { vocab: 65, context: 64, dim: 64, heads: 4, layers: 2, dropout: 0.1, batch: 16 };

/// nanoGPT's `shakespeare_char` configuration (`examples/nanogpt/nanogpt.mlir`):
/// 6 blocks of width 384 with 6 heads, a context of 256, dropout 0.2,
/// batch 64; 10.8M parameters.
#[allow(dead_code)] // the models tool and the tests use it, the char LM's own users do not
pub const NANOGPT: Config = Config { vocab: 65, context: 256, dim: 384, heads: 6, layers: 6, dropout: 0.2, batch: 64 };

pub struct CharLM {
    config: Config,
    tok_emb: Embedding,
    pos_emb: Embedding,
    blocks: Vec<TransformerBlock>,
    ln_f: LayerNorm,
    lm_head: Linear,
}

impl CharLM {
    pub fn new(config: Config) -> nn::Result<Self> {
        let blocks = (0..config.layers)
            .map(|i| {
                Ok(TransformerBlock::new(child("blocks", &i.to_string()), config.dim, config.heads, 4, true)?
                    .with_dropout(config.dropout))
            })
            .collect::<nn::Result<_>>()?;
        Ok(CharLM {
            config,
            tok_emb: Embedding::new("tok_emb", config.vocab, config.dim),
            pos_emb: Embedding::new("pos_emb", config.context, config.dim),
            blocks,
            ln_f: LayerNorm::new("ln_f", [config.dim]),
            lm_head: Linear::new("lm_head", config.dim, config.vocab).without_bias(),
        })
    }
}

impl Module for CharLM {
    /// tokens `[batch, seq]` (i32, seq <= context) -> logits `[batch, seq, vocab]`.
    fn forward(&self, tokens: &Tensor) -> nn::Result<Tensor> {
        layer(
            tokens,
            "",
            || "CharLM".into(),
            || {
                let &[_, seq] = tokens.shape() else {
                    return Err(nn::NnError::Invalid {
                        layer: None,
                        message: format!("tokens must be [batch, seq], got {}", tokens.spec()),
                    });
                };
                if seq > self.config.context {
                    return Err(nn::NnError::Invalid {
                        layer: None,
                        message: format!("sequence of {seq} is longer than the context of {}", self.config.context),
                    });
                }
                let positions = tokens.graph().arange(seq)?;
                let mut x = self
                    .tok_emb
                    .forward(tokens)?
                    .add(&self.pos_emb.forward(&positions)?)?
                    .dropout(self.config.dropout)?;
                for block in &self.blocks {
                    x = block.forward(&x)?;
                }
                self.lm_head.forward(&self.ln_f.forward(&x)?)
            },
        )
    }
}

/// `@forward(tokens: [batch, context] i32) -> logits` and
/// `@loss(tokens, targets: [batch, context] i32, seed, offset)`.
pub fn build(config: Config) -> nn::Result<HlModule> {
    let tokens = TensorSpec::new([config.batch, config.context], DType::I32);
    nn::classifier_module(&CharLM::new(config)?, &tokens, &tokens)
}
