//! The regression suite: every `.mlir` file under `test/` is one test, run
//! the way LLVM's lit runs it. Its `// RUN:` lines (a trailing `\` continues
//! a line) are shell pipelines executed in order with lit's substitutions:
//!
//! | text | becomes |
//! |---|---|
//! | `%s` | the test file |
//! | `%S`, `%p` | the test file's folder |
//! | `%t` | a scratch path for this test (`target/lit/run-<pid>/<test>.tmp`: two runs at once do not share it) |
//! | `%T` | the scratch folder |
//! | `%%` | `%` |
//!
//! `aicf-opt` is the binary cargo built for this run; `FileCheck`, `not`,
//! `split-file` and `count` come from LLVM 22 (`/usr/lib/llvm-22/bin`, or
//! `$AICF_LLVM_BIN`). Pipelines run under `bash -o pipefail`, so a failing
//! `aicf-opt` in front of `FileCheck` fails the test, as in lit. A failing
//! RUN line fails the test named after the file, printing the line, the
//! expanded command and its output.
//!
//! `lit -v test/` runs the same files through `test/lit.cfg.py`.

use datatest_stable::Utf8Path;
use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// One RUN line, joined across continuations.
struct RunLine {
    line_number: usize,
    command: String,
}

fn run_lines(source: &str) -> Vec<RunLine> {
    let mut lines = Vec::new();
    let mut pending: Option<RunLine> = None;
    for (index, line) in source.lines().enumerate() {
        let Some(at) = line.find("RUN:") else { continue };
        if !line[..at].trim_start().starts_with("//") {
            continue;
        }
        let text = line[at + 4..].trim();
        let (text, continues) = match text.strip_suffix('\\') {
            Some(t) => (t.trim_end(), true),
            None => (text, false),
        };
        let run = pending.get_or_insert_with(|| RunLine { line_number: index + 1, command: String::new() });
        if !run.command.is_empty() {
            run.command.push(' ');
        }
        run.command.push_str(text);
        if !continues {
            lines.push(pending.take().unwrap());
        }
    }
    lines.extend(pending);
    lines
}

fn substitute(command: &str, file: &Path, scratch: &Path) -> String {
    let dir = file.parent().unwrap();
    let mut out = String::with_capacity(command.len());
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('s') => out.push_str(&file.display().to_string()),
            Some('S') | Some('p') => out.push_str(&dir.display().to_string()),
            Some('t') => out.push_str(&scratch.display().to_string()),
            Some('T') => out.push_str(&scratch.parent().unwrap().display().to_string()),
            Some('%') => out.push('%'),
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

fn llvm_bin() -> PathBuf {
    std::env::var_os("AICF_LLVM_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/lib/llvm-22/bin"))
}

fn tail(text: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(text);
    if text.len() <= max {
        return text.into_owned();
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[... {} bytes cut ...]\n{}", cut, &text[cut..])
}

/// A failed test, shown as the text it is (the harness prints errors with
/// `{:?}`, which would escape every newline).
struct Failure(String);

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

fn run_lit(path: &Utf8Path) -> datatest_stable::Result<()> {
    let file = std::fs::canonicalize(path)?;
    let source = std::fs::read_to_string(&file)?;
    let runs = run_lines(&source);
    if runs.is_empty() {
        return Err(Failure(format!("{path}: no RUN line; a test file must say how it is run")).into());
    }
    let aicf_opt = PathBuf::from(env!("CARGO_BIN_EXE_aicf-opt"));
    let tools = aicf_opt.parent().unwrap();
    let llvm = llvm_bin();
    if !llvm.join("FileCheck").exists() {
        return Err(Failure(format!("FileCheck not found in {}; run `make setup`", llvm.display())).into());
    }
    let target_dir = tools.parent().unwrap();
    let relative = path.strip_prefix("../test").unwrap_or(path.as_ref());
    let scratch = lit_root(target_dir).join(format!("{relative}.tmp"));
    std::fs::create_dir_all(scratch.parent().unwrap())?;
    if scratch.is_dir() {
        std::fs::remove_dir_all(&scratch)?;
    } else if scratch.exists() {
        std::fs::remove_file(&scratch)?;
    }
    let search_path =
        std::env::join_paths([tools.to_path_buf(), llvm].into_iter().chain(
            std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default(),
        ))?;
    for run in &runs {
        let command = substitute(&run.command, &file, &scratch);
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!("set -o pipefail\n{command}"))
            .current_dir(scratch.parent().unwrap())
            .env("PATH", &search_path)
            // Runs are recorded only where a test asks (--runs-db).
            .env("AICF_RUNS_DB", "off")
            .output()?;
        if !output.status.success() {
            return Err(Failure(format!(
                "{path}:{line}: RUN line failed ({status})\n  RUN: {raw}\n  command: {command}\n\
                 --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
                line = run.line_number,
                status = output.status,
                raw = run.command,
                stdout = tail(&output.stdout, 4000),
                stderr = tail(&output.stderr, 8000),
            ))
            .into());
        }
    }
    Ok(())
}

datatest_stable::harness! {
    { test = run_lit, root = "../test", pattern = r"\.mlir$" },
}

/// This process's scratch root, `target/lit/run-<pid>`; the roots of runs
/// whose process has ended are removed on first use.
fn lit_root(target_dir: &Path) -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let base = target_dir.join("lit");
        if let Ok(entries) = std::fs::read_dir(&base) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let dead = name.strip_prefix("run-").and_then(|p| p.parse::<u32>().ok()).is_some_and(|pid| {
                    pid != std::process::id()
                        && Path::new("/proc/self").exists()
                        && !Path::new(&format!("/proc/{pid}")).exists()
                });
                if dead {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        base.join(format!("run-{}", std::process::id()))
    })
    .clone()
}
