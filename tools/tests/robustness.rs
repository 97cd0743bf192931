//! The fuzzing harness and the kill test, bounded for `make test`: a few
//! hundred mutated inputs through the passes (and a few through the whole
//! compile and two train steps), and a few kills during plain and adaptive
//! training. Longer runs are the same binaries with larger counts
//! (`aicf-fuzz --inputs 10000`, `aicf-kill --trials 100`); README gives
//! the numbers of the last ones.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()))
}

fn run(binary: &str, args: &[&str], out: &PathBuf) {
    let o = Command::new(binary).args(args).arg("--out").arg(out).output().expect("the harness starts");
    let stdout = String::from_utf8_lossy(&o.stdout);
    print!("{stdout}");
    assert!(o.status.success(), "{binary} found problems:\n{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(out);
}

/// No mutated input crashes a pass, the compiler or the runtime: every one
/// is accepted or refused with an error.
#[test]
fn fuzzed_inputs_never_crash() {
    let out = scratch("fuzz");
    run(env!("CARGO_BIN_EXE_aicf-fuzz"), &["--inputs", "400", "--compile-every", "40", "--seed", "11"], &out);
}

/// Killed at random moments, training never leaves a torn, unusable or
/// lost checkpoint, and every run resumes to the straight run's bits.
#[test]
fn killed_training_resumes_to_the_same_bits() {
    let out = scratch("kill");
    run(env!("CARGO_BIN_EXE_aicf-kill"), &["--trials", "8", "--seed", "5"], &out);
}
