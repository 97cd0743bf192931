//! Eager mode on a dynamic model: a character RNN trained on the lines of
//! tiny Shakespeare, each as long as it is (no padding).
//!
//!   cargo run -p aicf-compiler --example eager_rnn [-- LINES [DEVICE]]   (DEVICE: cpu, cuda, cuda:N)

#[path = "eager_rnn/model.rs"]
mod model;

fn main() {
    let lines: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(400);
    let device = match aicf_compiler::eager::Device::parse(&std::env::args().nth(2).unwrap_or_else(|| "cpu".into())) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("eager_rnn: {e}");
            std::process::exit(2);
        }
    };
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let started = std::time::Instant::now();
    let losses = match model::train(&text, lines, 80, 3e-3, &device) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("eager_rnn: {e}");
            std::process::exit(1);
        }
    };
    for chunk in losses.chunks(50).enumerate() {
        let (i, c) = chunk;
        let mean = c.iter().map(|(l, _)| l).sum::<f64>() / c.len() as f64;
        let (short, long) = (c.iter().map(|x| x.1).min().unwrap_or(0), c.iter().map(|x| x.1).max().unwrap_or(0));
        println!(
            "lines {:4}-{:4}: mean loss {mean:.3} nats/char (lengths {short}..{long})",
            i * 50 + 1,
            i * 50 + c.len()
        );
    }
    let s = aicf_compiler::eager::stats();
    println!(
        "{} lines in {:.1} s: {} op calls, {} kernels compiled ({:.1} s), {} loaded from the cache",
        losses.len(),
        started.elapsed().as_secs_f64(),
        s.calls,
        s.compiled,
        s.compile_seconds,
        s.loaded
    );
}
