//! `aicf-kill`: kills training with SIGKILL at random moments and checks
//! what it left behind.
//!
//! ```text
//! aicf-kill --trials 100 --seed 1 --out target/kill
//! ```
//!
//! Two runs are trained straight first, as references: the digits MLP
//! (plain) and the narrow MLP growing by `test/Tools/aicf/inputs/grow-steps.toml`
//! (adaptive: a widening at step 50, a deepening at step 100), 6 epochs
//! each, saving a checkpoint every epoch. Each trial then starts one of them
//! afresh, kills it (SIGKILL) at a random moment of its run time, or a few
//! milliseconds after it printed an epoch's line (inside the save that
//! follows), and checks:
//! - not torn: every checkpoint file in the directory (`last.safetensors`,
//!   each version's `v<k>.safetensors`) reads back whole, with the model's
//!   IR, its epoch and step;
//! - not lost: when the run had printed epoch `e`, the checkpoint of epoch
//!   `e - 1` at least is there (a save completes before the next epoch
//!   starts);
//! - resumable: `--resume` (or a fresh start where no checkpoint was
//!   written yet) trains to the end, and the final parameters and optimizer
//!   state equal the reference's bit for bit; no temporary file is left.
//!
//! The exit status is 1 when a trial failed; each failure is described.

use aicf_runtime::checkpoint;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EPOCHS: usize = 6;

struct Mode {
    name: &'static str,
    model: &'static str,
    policy: Option<&'static str>,
}

const MODES: [Mode; 2] = [
    Mode { name: "plain", model: "examples/mlp/digits_mlp.mlir", policy: None },
    Mode {
        name: "adaptive",
        model: "examples/grow/narrow_mlp.mlir",
        policy: Some("test/Tools/aicf/inputs/grow-steps.toml"),
    },
];

fn main() {
    let mut trials = 20usize;
    let mut seed = 1u64;
    let mut out = PathBuf::from("target/kill");
    let mut it = std::env::args().skip(1);
    let usage = |message: String| -> ! {
        eprintln!("aicf-kill: {message}\nusage: aicf-kill [--trials N] [--seed S] [--out DIR]");
        std::process::exit(2);
    };
    while let Some(flag) = it.next() {
        if matches!(flag.as_str(), "-h" | "--help") {
            println!(
                "aicf-kill: kills training runs (plain and adaptive) at random moments with SIGKILL, resumes each, \
                 and checks that no checkpoint is torn, unusable or lost and that every resumed run ends on the \
                 uninterrupted run's bits\nusage: aicf-kill [--trials N (20)] [--seed S (1)] [--out DIR (target/kill)]"
            );
            return;
        }
        let Some(value) = it.next() else { usage(format!("{flag} needs a value")) };
        let number = |v: &str| v.parse::<u64>().unwrap_or_else(|_| usage(format!("{flag}: '{v}' is not a count")));
        match flag.as_str() {
            "--trials" => trials = number(&value) as usize,
            "--seed" => seed = number(&value),
            "--out" => out = PathBuf::from(value),
            other => usage(format!("unknown option {other}")),
        }
    }
    match run(trials, seed, &out) {
        Ok(0) => {}
        Ok(_) => std::process::exit(1),
        Err(e) => {
            eprintln!("aicf-kill: {e}");
            std::process::exit(2);
        }
    }
}

/// How a trial's run was started.
fn train(aicf: &Path, repo: &Path, mode: &Mode, dir: &Path, cache: &Path, resume: bool) -> Command {
    let mut c = Command::new(aicf);
    c.current_dir(repo)
        .env("AICF_CACHE_DIR", cache)
        .args(["train", mode.model, "--data", "data/digits.csv.gz", "--epochs", &EPOCHS.to_string(), "--no-progress"])
        .arg("--out")
        .arg(dir.join("run"))
        .arg("--checkpoint-dir")
        .arg(dir.join("ckpt"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    if let Some(p) = mode.policy {
        c.args(["--adapt", p]);
    }
    if resume {
        c.arg("--resume");
    }
    c
}

fn run(trials: usize, seed: u64, out: &Path) -> Result<usize, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let aicf = exe.parent().ok_or("no directory")?.join("aicf");
    if !aicf.exists() {
        return Err(format!("{} not found: build the tools first", aicf.display()));
    }
    let repo = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).map_err(|e| e.to_string())?;
    let out = if out.is_absolute() {
        out.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| e.to_string())?.join(out)
    };
    let _ = std::fs::remove_dir_all(&out);
    let cache = out.join("cache");
    // The references: straight runs, timed (a kill lands within their run
    // time), their final checkpoints the bits every trial must reach.
    let mut references = Vec::new();
    for mode in &MODES {
        let reference = |dir: &Path| -> Result<f64, String> {
            let started = Instant::now();
            let o = train(&aicf, &repo, mode, dir, &cache, false).output().map_err(|e| e.to_string())?;
            if !o.status.success() {
                return Err(format!("the {} reference run failed: {}", mode.name, String::from_utf8_lossy(&o.stderr)));
            }
            Ok(started.elapsed().as_secs_f64())
        };
        let dir = out.join(format!("reference-{}", mode.name));
        reference(&dir)?;
        // Timed again, now that its kernels are cached, as the trials run.
        let seconds = reference(&out.join(format!("reference-{}-warm", mode.name)))?;
        let tensors = tensors(&dir.join("ckpt/last.safetensors"))?;
        println!("reference {}: {seconds:.2} s", mode.name);
        references.push((seconds, tensors));
    }
    let mut state = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545F4914F6CDD1D)
    };
    let (mut failures, mut with_checkpoint, mut resumed) = (0, 0, 0);
    for t in 0..trials {
        let m = t % MODES.len();
        let mode = &MODES[m];
        let (seconds, reference) = &references[m];
        let dir = out.join(format!("trial-{t}"));
        let at = Duration::from_secs_f64(seconds * (next() % 1000) as f64 / 1000.0);
        // Half the trials are killed at a random moment of the run, half
        // right after an epoch's line is printed, a few milliseconds into
        // the save that follows it.
        let after_epoch = (t / MODES.len()) % 2 == 1;
        let (epoch, delay) = (1 + (next() % EPOCHS as u64) as usize, Duration::from_micros(next() % 4000));
        let mut child = train(&aicf, &repo, mode, &dir, &cache, false).spawn().map_err(|e| e.to_string())?;
        let stdout = child.stdout.take();
        let (seen_tx, seen_rx) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(s) = stdout {
                for line in std::io::BufRead::lines(std::io::BufReader::new(s)).map_while(|l| l.ok()) {
                    if line.starts_with(&format!("epoch {epoch:>3}/")) {
                        let _ = seen_tx.send(());
                    }
                    text.push_str(&line);
                    text.push('\n');
                }
            }
            text
        });
        let started = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if after_epoch {
                if seen_rx.try_recv().is_ok() {
                    std::thread::sleep(delay);
                    break;
                }
                if started.elapsed() > Duration::from_secs_f64(seconds * 4.0 + 5.0) {
                    break;
                }
            } else if started.elapsed() >= at {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let at = started.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        let printed = reader.join().unwrap_or_default();
        let problems = check(&dir, &printed);
        let ckpt = dir.join("ckpt/last.safetensors");
        let had = ckpt.exists();
        with_checkpoint += had as usize;
        let mut problems = problems;
        // Resume (or start again where nothing was saved) to the end.
        let o = train(&aicf, &repo, mode, &dir, &cache, had).output().map_err(|e| e.to_string())?;
        if !o.status.success() {
            problems.push(format!("the resume failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
        } else {
            resumed += had as usize;
            match tensors(&ckpt) {
                Ok(t) if &t == reference => {}
                Ok(_) => problems.push("the resumed run does not end where the straight one does".into()),
                Err(e) => problems.push(e),
            }
            if let Ok(entries) = std::fs::read_dir(dir.join("ckpt")) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.contains(".partial") {
                        problems.push(format!("{name} was left behind"));
                    }
                }
            }
        }
        let killed_at = format!("{:.2} s of {seconds:.2}", at.as_secs_f64());
        if problems.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            failures += 1;
            println!("trial {t} ({}, killed at {killed_at}): {}", mode.name, problems.join("; "));
        }
    }
    println!(
        "{trials} trials ({} plain, {} adaptive): {with_checkpoint} killed with a checkpoint written, {resumed} resumed from it; {failures} failed (torn, unusable, lost or not resuming to the straight run's bits)",
        trials.div_ceil(2),
        trials / 2
    );
    Ok(failures)
}

/// What a killed run left: every checkpoint whole and carrying its model,
/// and none lost.
fn check(dir: &Path, printed: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let ckpt = dir.join("ckpt");
    let mut last_epoch = None;
    if let Ok(entries) = std::fs::read_dir(&ckpt) {
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".safetensors") {
                continue;
            }
            match checkpoint::load(&path) {
                Err(err) => problems.push(format!("{name} is torn: {err}")),
                Ok((_, meta)) => {
                    for key in ["aicf.ir", "epoch", "step", "aicf.ir_hash"] {
                        if !meta.contains_key(key) {
                            problems.push(format!("{name} has no {key}"));
                        }
                    }
                    if name == "last.safetensors" {
                        last_epoch = meta.get("epoch").and_then(|e| e.parse::<usize>().ok());
                    }
                }
            }
        }
    }
    // The last epoch line printed: its predecessor's save had completed.
    let printed_epoch = printed
        .lines()
        .filter_map(|l| l.strip_prefix("epoch ")?.trim().split('/').next()?.trim().parse::<usize>().ok())
        .max();
    if let Some(e) = printed_epoch
        && e >= 2
        && last_epoch.is_none_or(|saved| saved < e - 1)
    {
        problems.push(format!("epoch {e} was printed but the checkpoint is at {last_epoch:?}: lost"));
    }
    problems
}

/// The tensors of a checkpoint (names, types, shapes, bytes), without its
/// metadata (which holds timings).
fn tensors(path: &Path) -> Result<Vec<(String, Vec<usize>, Vec<u8>)>, String> {
    let (entries, _) = checkpoint::load(path).map_err(|e| e.to_string())?;
    Ok(entries.into_values().map(|e| (e.name, e.shape, e.bytes)).collect())
}
