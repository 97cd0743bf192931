//! `aicf-fuzz`: mutation fuzzing of the compiler and the runtime, process
//! by process, so that a signal, a panic, an abort or a hang is seen and
//! counted rather than taking the harness down.
//!
//! ```text
//! aicf-fuzz --inputs 10000 --seed 1 --out target/fuzz
//! ```
//!
//! The seeds are every example model at every stage of the pipeline: `hl`
//! as written, after `hl-autodiff`, after `hl-optimizer`, fused, and `ll`
//! (planned and scheduled). Each input is one of
//! - a mutated seed (numbers and tensor dimensions replaced by probes,
//!   lines dropped, duplicated or swapped, op names exchanged, floats made
//!   NaN or huge, characters cut) run through a pass that takes its stage;
//! - an attribute probe: one integer of a seed (attribute, dimension) or
//!   one pass option set to 0, -1, 2^32, 2^62, or the i64 extremes;
//! - every `--compile-every`-th input, a mutated `hl` model compiled and run
//!   for two train steps (`aicf bench`).
//!
//! An input passes when its process exits 0, or 1 with an `error:` line. A
//! crash is anything else: a signal, a Rust panic (exit 101), an abort, an
//! "internal compiler error", LLVM's crash report, or a run past
//! `--timeout`. Each crash is saved under `<out>/crashes/` with its command
//! and output; the exit status is 1 when there was one.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

struct Args {
    inputs: usize,
    seed: u64,
    out: PathBuf,
    compile_every: usize,
    timeout: Duration,
    jobs: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        inputs: 1000,
        seed: 1,
        out: PathBuf::from("target/fuzz"),
        compile_every: 50,
        timeout: Duration::from_secs(60),
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|_| format!("{flag}: '{v}' is not a count"));
        match flag.as_str() {
            "--inputs" => args.inputs = number(value()?)? as usize,
            "--seed" => args.seed = number(value()?)?,
            "--out" => args.out = PathBuf::from(value()?),
            "--compile-every" => args.compile_every = number(value()?)? as usize,
            "--timeout" => args.timeout = Duration::from_secs(number(value()?)?.max(1)),
            "--jobs" => args.jobs = (number(value()?)? as usize).max(1),
            "-h" | "--help" => {
                println!(
                    "aicf-fuzz [--inputs N] [--seed S] [--out DIR] [--compile-every K (0: never)] [--timeout SECS] [--jobs J]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other} (see --help)")),
        }
    }
    Ok(args)
}

/// xorshift64*: the harness is reproducible from its seed.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The integers every attribute and option is probed with.
const PROBES: [&str; 8] =
    ["0", "-1", "1", "4294967296", "4611686018427387904", "-9223372036854775808", "9223372036854775807", "3"];

/// A pipeline stage, its seed texts, and the passes that take it.
struct Stage {
    name: &'static str,
    seeds: Vec<(String, String)>,
    passes: &'static [&'static str],
}

const HL_PASSES: &[&str] = &[
    "--hl-autodiff",
    "--hl-optimizer=kind=adam",
    "--hl-optimizer=kind=sgd momentum=0.9",
    "--hl-set-batch=size=7",
    "--hl-widen=layer=fc1 width=24",
    "--hl-deepen=after=fc1",
    "--hl-widen-residual=width=96",
    "--hl-widen-residual=width=128 rule=duplicate",
    "--hl-insert-block",
    "--hl-insert-block=at=0 from=1 mask=5 mask_delay=2",
    "--hl-print-param-table",
    "--canonicalize",
    "--aicf-train-pipeline",
    "--aicf-train-pipeline=optimizer=adam budget-fraction=0.6",
    "--hl-autocast=dtype=bf16",
    "--hl-autocast=dtype=f16 fp32-layers=fc1",
    "--aicf-train-pipeline=optimizer=adam precision=bf16",
    "--aicf-train-pipeline=optimizer=sgd precision=fp16",
    "--hl-autocast=dtype=bf16 --hl-pad-contractions=min-macs=0",
    "--aicf-train-pipeline=optimizer=adam precision=bf16 shape-padding=false",
    "--hl-optimizer=kind=adam data-parallel=true accumulate=true",
    "--aicf-train-pipeline=optimizer=sgd precision=fp16 data-parallel=true bucket-bytes=0 accumulate=true",
];
const AUTODIFF_PASSES: &[&str] = &[
    "--hl-optimizer=kind=adamw weight-decay=0.01",
    "--hl-fuse-gemm-epilogue",
    "--hl-fuse-elementwise",
    "--convert-hl-to-ll",
];
const OPTIMIZER_PASSES: &[&str] = &[
    "--hl-fuse-gemm-epilogue",
    "--hl-fuse-reductions",
    "--hl-fuse-elementwise",
    "--hl-fuse-optimizer",
    "--convert-hl-to-ll",
    "--canonicalize --cse",
];
const FUSED_PASSES: &[&str] = &["--convert-hl-to-ll", "--convert-hl-to-ll --ll-plan-memory", "--hl-fuse-optimizer"];
const LL_PASSES: &[&str] = &[
    "--ll-plan-memory",
    "--ll-plan-memory=budget=4096",
    "--ll-schedule",
    "--ll-schedule=max-streams=1",
    "--canonicalize",
];

/// Pass options probed with [`PROBES`] (`{}` is the probe).
const OPTION_PROBES: &[(&str, &str)] = &[
    ("hl", "--hl-set-batch=size={}"),
    ("hl", "--hl-widen=layer=fc1 width={}"),
    ("hl", "--hl-add-heads=attention=attn heads={}"),
    ("hl", "--hl-widen-residual=width={}"),
    ("hl", "--hl-widen-residual=width={} rule=duplicate"),
    ("hl", "--hl-insert-block=at={}"),
    ("hl", "--hl-insert-block=from={} mask=3"),
    ("hl", "--hl-insert-block=mask={} mask_delay=1"),
    ("hl", "--hl-widen=layer=fc1 width=24 mask={}"),
    ("hl", "--hl-add-heads=attention=attn heads=3 mask={}"),
    ("hl", "--hl-optimizer=kind=sgd momentum={}"),
    ("hl", "--hl-optimizer=kind=adam clip-norm={}"),
    ("hl", "--hl-optimizer=kind=adam loss-scale={}"),
    ("hl", "--hl-optimizer=kind=adam loss-scale=1024 scale-growth-interval={}"),
    ("hl", "--aicf-train-pipeline=budget={}"),
    ("hl", "--hl-pad-contractions=multiple={} min-macs=0"),
    ("hl", "--hl-pad-contractions=min-macs={}"),
    ("hl", "--aicf-train-pipeline=max-streams={}"),
    ("ll", "--ll-plan-memory=budget={}"),
    ("ll", "--ll-schedule=max-streams={}"),
];

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("aicf-fuzz: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("aicf-fuzz: {e}");
        std::process::exit(2);
    }
}

/// What one input did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Accepted,
    Refused,
    Crash,
}

struct Input {
    kind: &'static str,
    text: String,
    /// Command-line arguments after the tool, `{}` being the input file.
    args: Vec<String>,
    tool: Tool,
}

#[derive(Clone, Copy)]
enum Tool {
    Opt,
    Aicf,
}

fn run(args: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let bin = exe.parent().ok_or("no directory of the executable")?.to_path_buf();
    let (opt, aicf) = (bin.join("aicf-opt"), bin.join("aicf"));
    for tool in [&opt, &aicf] {
        if !tool.exists() {
            return Err(format!("{} not found: build the tools first (cargo build -p aicf-tools)", tool.display()));
        }
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Absolute: the tools run in the work directory, and a relative
    // `--out` (the default) named their inputs from the wrong place.
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let out = std::fs::canonicalize(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let work = out.join("work");
    let crashes = out.join("crashes");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    std::fs::create_dir_all(&crashes).map_err(|e| format!("{}: {e}", crashes.display()))?;
    let started = Instant::now();
    let stages = seed_stages(&repo, &opt, &work)?;
    let seeds: usize = stages.iter().map(|s| s.seeds.len()).sum();
    println!("aicf-fuzz: {seeds} seeds over {} stages, {} inputs, seed {}", stages.len(), args.inputs, args.seed);

    let next = AtomicUsize::new(0);
    let results: Mutex<BTreeMap<(&'static str, Outcome), usize>> = Mutex::new(BTreeMap::new());
    let crash_list: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..args.jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= args.inputs {
                        break;
                    }
                    let mut rng = Rng::new(args.seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
                    let input = make_input(i, &stages, &mut rng, args.compile_every);
                    let file = work.join(format!("input-{i}.mlir"));
                    if std::fs::write(&file, &input.text).is_err() {
                        continue;
                    }
                    let scratch = work.join(format!("scratch-{i}"));
                    let (tool, path) = match input.tool {
                        Tool::Opt => ("aicf-opt", &opt),
                        Tool::Aicf => ("aicf", &aicf),
                    };
                    let argv: Vec<String> = input
                        .args
                        .iter()
                        .map(|a| {
                            a.replace("{}", &file.display().to_string())
                                .replace("{out}", &scratch.display().to_string())
                        })
                        .collect();
                    let (outcome, status, output) = execute(path, &argv, args.timeout, &work);
                    *results.lock().unwrap_or_else(|e| e.into_inner()).entry((input.kind, outcome)).or_default() += 1;
                    if std::env::var_os("AICF_FUZZ_SHOW").is_some() {
                        let first = output.lines().find(|l| l.contains("error")).unwrap_or("");
                        println!("#{i} {} {outcome:?}: {first}", input.kind);
                    }
                    if outcome == Outcome::Crash {
                        let dir = crashes.join(format!("{i}"));
                        let _ = std::fs::create_dir_all(&dir);
                        let _ = std::fs::write(dir.join("input.mlir"), &input.text);
                        let command = format!("{tool} {}\n", shell_words(&input.args));
                        let _ = std::fs::write(dir.join("command"), &command);
                        let _ = std::fs::write(dir.join("output"), format!("{status}\n{output}"));
                        crash_list.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                            "#{i} ({}): {status}: {}",
                            input.kind,
                            command.trim()
                        ));
                    }
                    let _ = std::fs::remove_file(&file);
                    let _ = std::fs::remove_dir_all(&scratch);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let crash_list = crash_list.into_inner().unwrap_or_else(|e| e.into_inner());
    println!("{:<22} {:>9} {:>9} {:>7}", "input kind", "accepted", "refused", "crash");
    let kinds: std::collections::BTreeSet<&str> = results.keys().map(|(k, _)| *k).collect();
    let mut totals = [0usize; 3];
    for kind in kinds {
        let n = |o| results.get(&(kind, o)).copied().unwrap_or(0);
        let row = [n(Outcome::Accepted), n(Outcome::Refused), n(Outcome::Crash)];
        for (t, r) in totals.iter_mut().zip(row) {
            *t += r;
        }
        println!("{kind:<22} {:>9} {:>9} {:>7}", row[0], row[1], row[2]);
    }
    println!("{:<22} {:>9} {:>9} {:>7}", "all", totals[0], totals[1], totals[2]);
    println!("{} inputs in {:.1} s", totals.iter().sum::<usize>(), started.elapsed().as_secs_f64());
    for c in &crash_list {
        println!("crash {c}");
    }
    if !crash_list.is_empty() {
        println!("reproducers: {}", crashes.display());
        std::process::exit(1);
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// Every example at every stage, produced by `aicf-opt` from the sources.
fn seed_stages(repo: &Path, opt: &Path, work: &Path) -> Result<Vec<Stage>, String> {
    let mut models = Vec::new();
    let examples = repo.join("examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&examples)
        .map_err(|e| format!("{}: {e}", examples.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "mlir")).collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            models.push((name, text));
        }
    }
    let stage_of = |pipeline: &[&str]| -> Vec<(String, String)> {
        models
            .iter()
            .filter_map(|(name, text)| {
                let file = work.join(format!("seed-{name}"));
                std::fs::write(&file, text).ok()?;
                let out = Command::new(opt).arg(&file).args(pipeline).stderr(Stdio::null()).output().ok()?;
                out.status.success().then(|| (name.clone(), String::from_utf8_lossy(&out.stdout).into_owned()))
            })
            .collect()
    };
    let fusion = [
        "--hl-optimizer=kind=adam",
        "--canonicalize",
        "--cse",
        "--hl-fuse-gemm-epilogue",
        "--canonicalize",
        "--hl-fuse-reductions",
        "--hl-fuse-elementwise",
        "--hl-fuse-optimizer",
        "--canonicalize",
    ];
    let stages = vec![
        Stage { name: "hl", seeds: models.clone(), passes: HL_PASSES },
        Stage { name: "autodiff", seeds: stage_of(&["--hl-autodiff"]), passes: AUTODIFF_PASSES },
        Stage { name: "optimizer", seeds: stage_of(&["--hl-optimizer=kind=adam"]), passes: OPTIMIZER_PASSES },
        Stage { name: "fused", seeds: stage_of(&fusion), passes: FUSED_PASSES },
        Stage { name: "ll", seeds: stage_of(&["--aicf-train-pipeline=optimizer=adam"]), passes: LL_PASSES },
    ];
    for s in &stages {
        if s.seeds.is_empty() {
            return Err(format!("no seed reached stage {}", s.name));
        }
    }
    Ok(stages)
}

/// Input `i`: a compile-and-run input every `compile_every`-th, else an
/// option probe, an attribute probe or a mutated seed.
fn make_input(i: usize, stages: &[Stage], rng: &mut Rng, compile_every: usize) -> Input {
    if compile_every > 0 && i % compile_every == compile_every - 1 {
        // Models a few steps of which run within the timeout on a small
        // CPU: nanoGPT's (batch 64 x 256) takes seconds a step on 2 cores,
        // so its compile and 7 steps outlast 60 s whatever the mutation.
        let small: Vec<&(String, String)> = stages[0].seeds.iter().filter(|(name, _)| name != "nanogpt.mlir").collect();
        let (_, seed) = if small.is_empty() { rng.pick(&stages[0].seeds) } else { *rng.pick(&small) };
        let text = mutate_semantic(&seed, rng);
        let args = ["bench", "{}", "--steps", "2", "--out", "{out}"].map(String::from).to_vec();
        return Input { kind: "compile+run", text, args, tool: Tool::Aicf };
    }
    match rng.below(10) {
        0 => {
            let (stage, option) = *rng.pick(OPTION_PROBES);
            let stage = stages.iter().find(|s| s.name == stage).unwrap_or(&stages[0]);
            let (_, seed) = rng.pick(&stage.seeds);
            let probe: &str = *rng.pick(&PROBES[..]);
            let option = option.replace("{}", probe);
            Input {
                kind: "option probe",
                text: seed.clone(),
                args: vec!["{}".into(), option, "-o".into(), "/dev/null".into()],
                tool: Tool::Opt,
            }
        }
        1 | 2 => {
            let stage = rng.pick(stages);
            let (_, seed) = rng.pick(&stage.seeds);
            let text = probe_integer(seed, rng);
            let pass = rng.pick(stage.passes);
            Input { kind: "attribute probe", text, args: opt_args(pass), tool: Tool::Opt }
        }
        _ => {
            let stage = rng.pick(stages);
            let (_, seed) = rng.pick(&stage.seeds);
            let count = 1 + rng.below(3);
            let text = mutate(seed, rng, count);
            let pass = rng.pick(stage.passes);
            let kind = match stage.name {
                "hl" => "mutated hl",
                "autodiff" => "mutated autodiff",
                "optimizer" => "mutated optimizer",
                "fused" => "mutated fused",
                _ => "mutated ll",
            };
            Input { kind, text, args: opt_args(pass), tool: Tool::Opt }
        }
    }
}

/// `aicf-opt`'s arguments for `passes` (flags separated by ` --`; an
/// option list with spaces stays one argument, as a shell passes it).
fn opt_args(passes: &str) -> Vec<String> {
    let mut args = vec!["{}".to_string()];
    for (i, flag) in passes.split(" --").enumerate() {
        args.push(if i == 0 { flag.to_string() } else { format!("--{flag}") });
    }
    args.extend(["-o".to_string(), "/dev/null".to_string()]);
    args
}

/// The spans of the integer literals of `text` (dimensions of `4x8xf32`
/// included).
fn integers(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit()
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric()
                    || b[i - 1] == b'_'
                    || b[i - 1] == b'.'
                    || b[i - 1] == b'%'
                    || b[i - 1] == b'#'))
        {
            let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            // Not a float, not a name.
            let next = b.get(j).copied().unwrap_or(b' ');
            if next != b'.' && next != b'e' && !(next.is_ascii_alphabetic() && next != b'x') && next != b'_' {
                spans.push((start, j));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    spans
}

/// One integer of `text` replaced by a probe.
fn probe_integer(text: &str, rng: &mut Rng) -> String {
    let spans = integers(text);
    if spans.is_empty() {
        return text.to_string();
    }
    let (a, b) = *rng.pick(&spans);
    format!("{}{}{}", &text[..a], rng.pick(&PROBES[..]), &text[b..])
}

/// `text` with a mutation that tends to keep it valid IR (a value
/// replaced consistently, a float made NaN or huge, an op exchanged), so
/// that the whole compile and the runtime see it.
fn mutate_semantic(text: &str, rng: &mut Rng) -> String {
    let pick = [9, 10, 9, 7, 6, 2];
    let mut out = text.to_string();
    for _ in 0..1 + rng.below(2) {
        let which = pick[rng.below(pick.len())];
        out = mutate_one(&out, rng, which);
    }
    out
}

/// `text` with `count` random mutations.
fn mutate(text: &str, rng: &mut Rng, count: usize) -> String {
    let mut text = text.to_string();
    for _ in 0..count {
        let which = rng.below(11);
        text = mutate_one(&text, rng, which);
    }
    text
}

/// `text` with mutation number `which` applied once.
fn mutate_one(text: &str, rng: &mut Rng, which: usize) -> String {
    let text = text.to_string();
    {
        match which {
            0 | 1 => probe_integer(&text, rng),
            9 | 10 => {
                // One value replaced everywhere it stands alone (a width, a
                // batch, a length): shapes stay consistent, so the input
                // gets past the verifier into the passes.
                let spans = integers(&text);
                if spans.is_empty() {
                    text
                } else {
                    let (a, b) = *rng.pick(&spans);
                    let from = text[a..b].to_string();
                    let to = if rng.below(2) == 0 {
                        rng.pick(&PROBES[..]).to_string()
                    } else {
                        let v: i64 = from.parse().unwrap_or(1);
                        (v.saturating_mul([2i64, 3, 0][rng.below(3)]).saturating_add(rng.below(3) as i64)).to_string()
                    };
                    replace_number(&text, &from, &to)
                }
            }
            2 => {
                // A small change of one number (a dimension off by a little).
                let spans = integers(&text);
                if spans.is_empty() {
                    text
                } else {
                    let (a, b) = *rng.pick(&spans);
                    let v: i64 = text[a..b].parse().unwrap_or(0);
                    let d = [-1i64, 1, 2, -2, 7][rng.below(5)];
                    format!("{}{}{}", &text[..a], v.saturating_add(d), &text[b..])
                }
            }
            3 => edit_lines(&text, rng, |lines, rng| {
                let i = rng.below(lines.len());
                lines.remove(i);
            }),
            4 => edit_lines(&text, rng, |lines, rng| {
                let i = rng.below(lines.len());
                let l = lines[i].clone();
                lines.insert(i, l);
            }),
            5 => edit_lines(&text, rng, |lines, rng| {
                let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
                lines.swap(i, j);
            }),
            6 => {
                // One op name exchanged for another of the text.
                let ops: Vec<&str> = text
                    .split(|c: char| c.is_whitespace() || c == '(' || c == '"')
                    .filter(|w| {
                        (w.starts_with("hl.")
                            || w.starts_with("ll.")
                            || w.starts_with("arith.")
                            || w.starts_with("math."))
                            && w.len() > 4
                    })
                    .collect();
                if ops.len() < 2 {
                    text
                } else {
                    let (from, to) = (rng.pick(&ops).to_string(), rng.pick(&ops).to_string());
                    text.replacen(&from, &to, 1)
                }
            }
            7 => {
                // A float literal made NaN, infinite or huge.
                let floats: Vec<usize> =
                    text.match_indices("e+").chain(text.match_indices("e-")).map(|(i, _)| i).collect();
                match floats.first() {
                    None => text,
                    Some(_) => {
                        let at = *rng.pick(&floats);
                        let start = text[..at]
                            .rfind(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
                            .map_or(0, |s| s + 1);
                        let end = at + 2 + text[at + 2..].find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
                        let value = *rng.pick(&["0x7FC00000", "0x7F800000", "1.0e+308", "-0.0", "1.0e-45"]);
                        format!("{}{value}{}", &text[..start], &text[end..])
                    }
                }
            }
            _ => {
                // A few characters cut.
                if text.len() < 2 {
                    text
                } else {
                    let mut a = rng.below(text.len());
                    while !text.is_char_boundary(a) {
                        a -= 1;
                    }
                    let mut b = (a + 1 + rng.below(8)).min(text.len());
                    while !text.is_char_boundary(b) {
                        b += 1;
                    }
                    format!("{}{}", &text[..a], &text[b..])
                }
            }
        }
    }
}

/// `text` with every standalone occurrence of the integer `from` (as
/// [`integers`] finds them) replaced by `to`.
fn replace_number(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (a, b) in integers(text) {
        if &text[a..b] == from {
            out.push_str(&text[last..a]);
            out.push_str(to);
            last = b;
        }
    }
    out.push_str(&text[last..]);
    out
}

fn edit_lines(text: &str, rng: &mut Rng, f: impl FnOnce(&mut Vec<String>, &mut Rng)) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    if lines.is_empty() {
        return text.to_string();
    }
    f(&mut lines, rng);
    lines.join("\n")
}

/// Runs `tool argv` with a time limit; classifies its end.
fn execute(tool: &Path, argv: &[String], timeout: Duration, cwd: &Path) -> (Outcome, String, String) {
    let child = Command::new(tool)
        .args(argv)
        .current_dir(cwd)
        .env("AICF_CACHE_DIR", cwd.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return (Outcome::Crash, format!("cannot start: {e}"), String::new()),
    };
    // The output is read on a thread, so that a chatty child never blocks
    // on a full pipe while the clock runs.
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let output = reader.join().unwrap_or_default();
    let Some(status) = status else {
        return (Outcome::Crash, format!("timeout after {} s", timeout.as_secs()), output);
    };
    let crash_text =
        ["internal compiler error", "panicked at", "PLEASE submit a bug report", "Assertion", "LLVM ERROR"]
            .iter()
            .find(|m| output.contains(*m));
    let described = format!("{status}");
    match status.code() {
        _ if crash_text.is_some() => (Outcome::Crash, format!("{described}: {}", crash_text.unwrap_or(&"")), output),
        Some(0) => (Outcome::Accepted, described, output),
        Some(1) if output.contains("error") => (Outcome::Refused, described, output),
        _ => (Outcome::Crash, described, output),
    }
}

fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(
            |a| {
                if a.contains(|c: char| c.is_whitespace() || c == '{' || c == '}') {
                    format!("'{a}'")
                } else {
                    a.clone()
                }
            },
        )
        .collect::<Vec<_>>()
        .join(" ")
}
