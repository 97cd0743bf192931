//! Where compile time goes: the stages of one compilation in order, each
//! with its wall-clock seconds (`aicf compile --timing`, the compile-time
//! benchmark). Like `-mlir-timing`, but for the whole compile: parsing, the
//! pass pipeline, kernel generation, host or PTX compilation and linking.

use std::time::Instant;

/// Stages in the order they ran. A stage run twice (one per batch-size
/// variant, say) is listed twice.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    pub stages: Vec<Stage>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub name: String,
    pub seconds: f64,
    /// What the stage worked on, when that says something (`37 of 116
    /// kernels`).
    pub detail: String,
}

impl Timings {
    /// Runs `f` as stage `name`.
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        self.add(name, started.elapsed().as_secs_f64(), "");
        out
    }

    pub fn add(&mut self, name: &str, seconds: f64, detail: impl Into<String>) {
        self.stages.push(Stage { name: name.to_string(), seconds, detail: detail.into() });
    }

    /// Appends `other`'s stages.
    pub fn extend(&mut self, other: Timings) {
        self.stages.extend(other.stages);
    }

    pub fn total(&self) -> f64 {
        self.stages.iter().map(|s| s.seconds).sum()
    }

    /// Seconds of the stages named `name`.
    pub fn seconds(&self, name: &str) -> f64 {
        self.stages.iter().filter(|s| s.name == name).map(|s| s.seconds).sum()
    }

    /// A table of the stages with their share of the total.
    pub fn report(&self) -> String {
        let total = self.total().max(1e-12);
        let mut out = format!("  {:>9}  {:>6}  stage\n", "seconds", "share");
        for s in &self.stages {
            let detail = if s.detail.is_empty() { String::new() } else { format!(" ({})", s.detail) };
            out.push_str(&format!("  {:>9.4}  {:>5.1}%  {}{detail}\n", s.seconds, 100.0 * s.seconds / total, s.name));
        }
        out.push_str(&format!("  {:>9.4}  100.0%  total\n", self.total()));
        out
    }
}
