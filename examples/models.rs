//! Prints the `hl` module of an example model built with the Rust layer API.
//!
//!     cargo run -p aicf-compiler --example models -- mlp|cnn|char_lm|nanogpt|transformer [key=value ...]
//!
//! Settings scale a model without editing it (the compile-time benchmark
//! uses them): `char_lm layers=8 dropout=0 dim=64 heads=4 context=64
//! batch=16`, `transformer blocks=12 dim=768 heads=12 batch=8 seq=128`;
//! `nanogpt` is the char LM at nanoGPT's `shakespeare_char` configuration
//! (`examples/nanogpt/nanogpt.mlir`), with the same settings.

#[path = "char_lm/model.rs"]
mod char_lm;
#[path = "cnn/model.rs"]
mod cnn;
#[path = "mlp/model.rs"]
mod mlp;
#[allow(dead_code)] // `build` is the tests' entry; this tool calls `build_with`
#[path = "transformer/model.rs"]
mod transformer;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_default();
    let mut settings = std::collections::BTreeMap::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            fail(&format!("'{a}' is not key=value"));
        };
        let Ok(v) = v.parse::<f64>() else { fail(&format!("{k}: '{v}' is not a number")) };
        settings.insert(k.to_string(), v);
    }
    let mut take = |key: &str, default: f64| settings.remove(key).unwrap_or(default);
    let built = match which.as_str() {
        "mlp" => mlp::build(take("batch", mlp::BATCH as f64) as usize),
        "cnn" => cnn::build(take("batch", cnn::BATCH as f64) as usize),
        "char_lm" | "nanogpt" => {
            let c = if which == "nanogpt" { char_lm::NANOGPT } else { char_lm::CONFIG };
            let config = char_lm::Config {
                vocab: take("vocab", c.vocab as f64) as usize,
                context: take("context", c.context as f64) as usize,
                dim: take("dim", c.dim as f64) as usize,
                heads: take("heads", c.heads as f64) as usize,
                layers: take("layers", c.layers as f64) as usize,
                dropout: take("dropout", c.dropout),
                batch: take("batch", c.batch as f64) as usize,
            };
            char_lm::build(config)
        }
        "transformer" => transformer::build_with(transformer::Config {
            batch: take("batch", transformer::BATCH as f64) as usize,
            seq: take("seq", transformer::SEQ as f64) as usize,
            dim: take("dim", transformer::DIM as f64) as usize,
            heads: take("heads", transformer::HEADS as f64) as usize,
            blocks: take("blocks", 1.0) as usize,
        }),
        other => fail(&format!("unknown model '{other}'; expected mlp, cnn, char_lm, nanogpt or transformer")),
    };
    if let Some(k) = settings.keys().next() {
        fail(&format!("{which} has no setting '{k}'"));
    }
    match built {
        Ok(module) => print!("{module}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}
