//! Training from a Rust program (README's *Training from a Rust program*):
//! the whole loop with `run::fit`, then a `Trainer` step by step.
//!
//!   cargo run -p aicf-compiler --example train_api [-- DEVICE]   (DEVICE: cpu, cuda, cuda:N)

#[path = "train_api/steps.rs"]
mod steps;

fn main() {
    let device = match aicf_runtime::Device::parse(&std::env::args().nth(1).unwrap_or_else(|| "cpu".into())) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("train_api: {e}");
            std::process::exit(2);
        }
    };
    let out = std::path::Path::new("target/train_api");
    match steps::run(&device, out) {
        Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
        Err(e) => {
            eprintln!("train_api: {e}");
            std::process::exit(1);
        }
    }
}
