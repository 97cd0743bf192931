//! Errors of the compiler, typed by whose fault they are: the user's input
//! (parse and verification errors, with MLIR's located diagnostics), a pass
//! that rejected its input, or a bug in AICF itself.

use std::fmt;

/// One located diagnostic, rendered the way MLIR tools print it
/// (`file:line:col: error: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub location: String,
    pub severity: Severity,
    pub message: String,
    pub notes: Vec<Diagnostic>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
    Remark,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
            Severity::Remark => "remark",
        })
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.location, self.severity, self.message)?;
        for note in &self.notes {
            write!(f, "\n{note}")?;
        }
        Ok(())
    }
}

/// Renders diagnostics one per line for an error message.
pub(crate) struct DiagnosticList<'a>(pub &'a [Diagnostic]);

impl fmt::Display for DiagnosticList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The input text is not valid IR (syntax, unknown op, type error).
    #[error("{source_name}: the input is not valid IR:\n{}", DiagnosticList(.diagnostics))]
    Parse { source_name: String, diagnostics: Vec<Diagnostic> },

    /// The IR parsed but breaks an op's rules.
    #[error("{source_name}: the IR does not verify:\n{}", DiagnosticList(.diagnostics))]
    Verify { source_name: String, diagnostics: Vec<Diagnostic> },

    /// The IR verifies but is not a model to compile as it is (it holds a
    /// gradient function of its own, or data parameters without the file
    /// that holds their values).
    #[error("{source_name}: not a model to compile as it is:\n{}", DiagnosticList(.diagnostics))]
    NotAModel { source_name: String, diagnostics: Vec<Diagnostic> },

    /// A pipeline string does not name registered passes with valid options.
    #[error("invalid pass pipeline '{pipeline}': {message}")]
    Pipeline { pipeline: String, message: String },

    /// A pass rejected its input; the diagnostics say where and why.
    #[error("pipeline '{}' failed:\n{}", without_options(.pipeline), DiagnosticList(.diagnostics))]
    PassFailed { pipeline: String, diagnostics: Vec<Diagnostic> },

    /// A bug in AICF, not in the input.
    #[error("internal compiler error: {0}")]
    Internal(String),

    /// A file or directory that could not be read or written.
    #[error("{path}: {message}")]
    Io { path: String, message: String },

    /// Valid input that a backend cannot compile yet (located).
    #[error("not supported yet: {0}")]
    Unsupported(String),

    /// The environment asks for something this machine cannot give (an
    /// instruction set clang does not know).
    #[error("{0}")]
    Environment(String),
}

impl CompileError {
    /// [`CompileError::NotAModel`] of the model `source_name`, with one
    /// error at `location` (`file:line:col`).
    pub(crate) fn not_a_model(source_name: &str, location: String, message: String) -> CompileError {
        CompileError::NotAModel {
            source_name: source_name.to_string(),
            diagnostics: vec![Diagnostic { location, severity: Severity::Error, message, notes: Vec::new() }],
        }
    }
}

pub type Result<T, E = CompileError> = std::result::Result<T, E>;

/// A pipeline's passes without their options (`{...}`): the passes named,
/// where the train pipeline's 20 options came before the diagnostics that
/// say what failed.
fn without_options(pipeline: &str) -> String {
    let mut depth = 0usize;
    pipeline
        .chars()
        .filter(|&c| {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    return false;
                }
                _ => {}
            }
            depth == 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_pipeline_is_named_without_its_options() {
        let e = super::CompileError::PassFailed {
            pipeline: "builtin.module(aicf-train-pipeline{optimizer=adam lr=1.0e-3 memory-budget=1024},canonicalize)"
                .into(),
            diagnostics: Vec::new(),
        };
        assert_eq!(e.to_string(), "pipeline 'builtin.module(aicf-train-pipeline,canonicalize)' failed:\n");
    }
}
