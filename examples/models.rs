//! Prints the `hl` module of an example model built with the Rust layer API.
//!
//!     cargo run -p aicf-compiler --example models -- mlp|cnn|char_lm|transformer

#[path = "char_lm/model.rs"]
mod char_lm;
#[path = "cnn/model.rs"]
mod cnn;
#[path = "mlp/model.rs"]
mod mlp;
#[path = "transformer/model.rs"]
mod transformer;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let built = match which.as_str() {
        "mlp" => mlp::build(mlp::BATCH),
        "cnn" => cnn::build(cnn::BATCH),
        "char_lm" => char_lm::build(char_lm::CONFIG),
        "transformer" => transformer::build(transformer::BATCH),
        other => {
            eprintln!("unknown model '{other}'; expected mlp, cnn, char_lm or transformer");
            std::process::exit(2);
        }
    };
    match built {
        Ok(module) => print!("{module}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
