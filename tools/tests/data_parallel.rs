//! Data-parallel training across processes, as a user runs it: `aicf train
//! --nproc N` (Open MPI's `mpirun` on this machine, `--oversubscribe`
//! where N is more than its cores). Each test compares with one process
//! training on the global batch, or kills or stops a rank.
//!
//! `make test` installs Open MPI (tools/setup.sh); without `mpirun` these
//! tests fail, saying so.

use aicf_runtime::checkpoint;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const AICF: &str = env!("CARGO_BIN_EXE_aicf");
const AICF_OPT: &str = env!("CARGO_BIN_EXE_aicf-opt");

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("dp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One test at a time: each starts several processes on this machine's
/// cores, and two of the tests time how fast a run ends.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn require_mpirun() {
    let found = Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(found, "mpirun (Open MPI) is not installed: tools/setup.sh installs it (make test runs it)");
}

/// `aicf train` of `model` on the digits with `args`, run directory `out`.
fn train(model: &Path, out: &Path, args: &[&str]) -> Output {
    let data = root().join("data/digits.csv.gz");
    Command::new(AICF)
        .arg("train")
        .arg(model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(out)
        .arg("--checkpoint-dir")
        .arg(out.join("ckpt"))
        .args(["--gemm", "generated", "--no-progress", "--seed", "2"])
        .args(args)
        .output()
        .expect("aicf starts")
}

fn ok(o: &Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "aicf failed ({}):\n{text}", o.status);
    text
}

/// The model at `batch` rows (`hl-set-batch`), written to `dir`.
fn at_batch(model: &str, batch: usize, dir: &Path) -> PathBuf {
    let o = Command::new(AICF_OPT)
        .arg(root().join(model))
        .arg(format!("--hl-set-batch=size={batch}"))
        .output()
        .expect("aicf-opt starts");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let path = dir.join(format!("model-{batch}.mlir"));
    std::fs::write(&path, &o.stdout).unwrap();
    path
}

/// The largest difference between two checkpoints' tensors (which must
/// hold the same names and shapes).
fn max_difference(a: &Path, b: &Path) -> f64 {
    differences(a, b, |_| true, 0.0).0
}

/// Over the tensors whose names `keep` takes: the largest difference
/// between two checkpoints' values, and how many of them differ by more
/// than `over`, of how many.
fn differences(a: &Path, b: &Path, keep: impl Fn(&str) -> bool, over: f64) -> (f64, usize, usize) {
    let (a, _) = checkpoint::load(a).unwrap();
    let (b, _) = checkpoint::load(b).unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    let (mut worst, mut beyond, mut values) = (0f64, 0, 0);
    for (name, e) in a.iter().filter(|(name, _)| keep(name)) {
        let f = &b[name];
        assert_eq!(e.shape, f.shape, "{name}");
        let x = aicf_runtime::host::read_values(&e.bytes, e.dtype);
        let y = aicf_runtime::host::read_values(&f.bytes, f.dtype);
        for (u, v) in x.iter().zip(&y) {
            worst = worst.max((u - v).abs());
            beyond += usize::from((u - v).abs() > over);
            values += 1;
        }
    }
    (worst, beyond, values)
}

fn metadata(path: &Path, key: &str) -> String {
    checkpoint::read_metadata(path).unwrap().get(key).cloned().unwrap_or_default()
}

/// 2 and 4 processes of batch 32 end an epoch or two (23 and 24 steps, a
/// short last global batch included) on the bits of one process
/// accumulating 2 or 4 micro-batches of 32 (`--accumulate`), in one
/// bucket or one per gradient, with SGD and Adam: the ranks' sums are
/// added in rank order, as the micro-batches' are. Against one process of
/// batch 64 or 128 (one GEMM over all the rows), SGD (momentum) ends
/// within 1e-6, and Adam's moments within 1e-4: the same numbers added in
/// another order. Adam divides a gradient by its own running magnitude, so
/// where a weight's gradient is a near-cancellation (a pixel on in few
/// rows of the batch) the rounding of the sum is a visible part of its
/// step: its parameters are held to 1e-4 but for at most 1 in 200 (seen:
/// 3.4e-5 on 54 of fc1's 8192 weights after 23 steps at lr 3e-3 on AMD
/// Zen 3 and 4; on an Intel Xeon EMR, whose generated kernels sum in
/// 256-bit vectors, 16 weights beyond 1e-4, the largest 6.6e-4, after 46
/// steps; SGD's largest difference is below 1e-7).
#[test]
fn ranks_train_as_one_process_on_their_global_batch() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("equal");
    for (ranks, epochs) in [(2, "1"), (4, "2")] {
        let reference_model = at_batch("examples/mlp/digits_mlp.mlir", 32 * ranks, &dir);
        for (optimizer, extra) in [("sgd", &["--momentum", "0.9", "--lr", "0.05"][..]), ("adam", &[][..])] {
            let one = dir.join(format!("one-{ranks}-{optimizer}"));
            ok(&train(
                &reference_model,
                &one,
                &[&["--optimizer", optimizer, "--epochs", epochs, "--threads", "1"], extra].concat(),
            ));
            let accumulated = dir.join(format!("accumulated-{ranks}-{optimizer}"));
            let text = ok(&train(
                &root().join("examples/mlp/digits_mlp.mlir"),
                &accumulated,
                &[
                    &[
                        "--optimizer",
                        optimizer,
                        "--epochs",
                        epochs,
                        "--threads",
                        "1",
                        "--accumulate",
                        &ranks.to_string(),
                    ],
                    extra,
                ]
                .concat(),
            ));
            assert!(text.contains(&format!("batch {}", 32 * ranks)), "{text}");
            assert!(text.contains(&format!("accumulating {ranks} micro-batches of 32")), "{text}");
            let (one_ckpt, accumulated_ckpt) =
                (one.join("ckpt/last.safetensors"), accumulated.join("ckpt/last.safetensors"));
            if optimizer == "sgd" {
                let worst = max_difference(&one_ckpt, &accumulated_ckpt);
                assert!(worst <= 1e-6, "{ranks} micro-batches, sgd: parameters differ by {worst}");
            } else {
                // The gradients agree: Adam's moments within 1e-4 ...
                let moment = |n: &str| n.ends_with(".exp_avg") || n.ends_with(".exp_avg_sq");
                let (worst, _, _) = differences(&one_ckpt, &accumulated_ckpt, moment, 0.0);
                assert!(worst <= 1e-4, "{ranks} micro-batches, adam: moments differ by {worst}");
                // ... and the parameters all but a few near-cancelled ones
                // (at most 1 in 200 beyond 1e-4, none beyond 2e-3).
                let weight = |n: &str| !moment(n) && !n.ends_with(".step");
                let (worst, beyond, values) = differences(&one_ckpt, &accumulated_ckpt, weight, 1e-4);
                assert!(
                    worst <= 2e-3 && beyond * 200 <= values,
                    "{ranks} micro-batches, adam: parameters differ by up to {worst}, {beyond} of {values} by more than 1e-4"
                );
            }
            assert_eq!(metadata(&accumulated_ckpt, "step"), metadata(&one_ckpt, "step"));
            for bucket in ["25M", "0"] {
                let many = dir.join(format!("many-{ranks}-{optimizer}-{bucket}"));
                let text = ok(&train(
                    &root().join("examples/mlp/digits_mlp.mlir"),
                    &many,
                    &[
                        &[
                            "--optimizer",
                            optimizer,
                            "--epochs",
                            epochs,
                            "--nproc",
                            &ranks.to_string(),
                            "--bucket-size",
                            bucket,
                        ],
                        extra,
                    ]
                    .concat(),
                ));
                assert!(text.contains(&format!("{ranks} replicas (Open MPI")), "{text}");
                let many_ckpt = many.join("ckpt/last.safetensors");
                let worst = max_difference(&accumulated_ckpt, &many_ckpt);
                // The accumulated bits, so as close to the one process as
                // they (checked above).
                assert_eq!(worst, 0.0, "{ranks} ranks, {optimizer}, bucket {bucket}: not the accumulated bits");
                let steps = metadata(&many.join("ckpt/last.safetensors"), "step");
                assert_eq!(steps, metadata(&one.join("ckpt/last.safetensors"), "step"));
                // Rank 0 alone writes the run's files.
                assert!(many.join("metrics.jsonl").exists() && !many.join("rank1/metrics.jsonl").exists());
            }
        }
    }
}

/// A growth policy under data parallel (a widening at step 50, a new
/// block at step 100) grows the same model at the same steps as one
/// process on the global batch, and ends within 1e-5 of its state (115
/// steps, two rewrites).
#[test]
fn growth_under_data_parallel_matches_one_process() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("grow");
    let policy = root().join("test/Tools/aicf/inputs/grow-steps.toml");
    let policy = policy.to_str().unwrap();
    let reference_model = at_batch("examples/grow/narrow_mlp.mlir", 64, &dir);
    let one = dir.join("one");
    ok(&train(&reference_model, &one, &["--epochs", "5", "--adapt", policy, "--threads", "1"]));
    let many = dir.join("many");
    let text = ok(&train(
        &root().join("examples/grow/narrow_mlp.mlir"),
        &many,
        &["--epochs", "5", "--adapt", policy, "--nproc", "2"],
    ));
    assert!(text.contains("step 50 (epoch 3): widen fc1 to 32 (net2wider) on step 50 reached -> accepted"), "{text}");
    assert!(text.contains("step 100 (epoch 5): deepen after fc1"), "{text}");
    let (a, b) = (one.join("ckpt/last.safetensors"), many.join("ckpt/last.safetensors"));
    // The same parameters (the functions differ in their batch size only).
    let params = |path: &Path| -> Vec<String> {
        metadata(path, "aicf.ir").lines().filter(|l| l.contains("hl.param")).map(str::to_string).collect()
    };
    assert_eq!(params(&a), params(&b), "the grown models differ");
    assert_eq!(params(&a).len(), 8, "{:?}", params(&a));
    let worst = max_difference(&a, &b);
    assert!(worst <= 1e-5, "the grown models' state differs by {worst}");
    let log = std::fs::read_to_string(many.join("decisions.jsonl")).unwrap();
    assert_eq!(log.lines().filter(|l| l.contains("\"outcome\":\"accepted\"")).count(), 2, "{log}");
}

/// Replicas and micro-batches compose: 2 ranks accumulating 2
/// micro-batches of 32 each train as one process accumulating 4 (global
/// batch 128; the sums associate differently: within 1e-5), through a
/// growth policy's two rewrites at the same steps.
#[test]
fn replicas_of_accumulated_micro_batches_match_one_process() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("compose");
    let policy = root().join("test/Tools/aicf/inputs/grow-steps.toml");
    let policy = policy.to_str().unwrap();
    let model = root().join("examples/grow/narrow_mlp.mlir");
    let one = dir.join("one");
    ok(&train(&model, &one, &["--epochs", "10", "--adapt", policy, "--threads", "1", "--accumulate", "4"]));
    let many = dir.join("many");
    let text = ok(&train(&model, &many, &["--epochs", "10", "--adapt", policy, "--nproc", "2", "--accumulate", "2"]));
    assert!(text.contains("batch 128, 12 steps per epoch"), "{text}");
    assert!(text.contains("2 replicas (Open MPI") && text.contains("accumulating 2 micro-batches of 32"), "{text}");
    assert!(text.contains("step 100 (epoch 9): deepen after fc1"), "{text}");
    let (a, b) = (one.join("ckpt/last.safetensors"), many.join("ckpt/last.safetensors"));
    assert_eq!(metadata(&a, "aicf.ir"), metadata(&b, "aicf.ir"), "the grown models differ");
    let worst = max_difference(&a, &b);
    assert!(worst <= 1e-5, "the grown models' state differs by {worst}");
}

/// The process of rank `rank` of a run whose command line names `out`.
fn rank_pid(out: &Path, rank: usize) -> Option<u32> {
    let needle = out.to_string_lossy().into_owned();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(&needle) {
            continue;
        }
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let want = format!("OMPI_COMM_WORLD_RANK={rank}");
        if environ.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

/// Starts a long data-parallel run of 2 ranks, waits for its first
/// checkpoint, sends `signal` to rank 1, and returns the run's output and
/// how long it took to end after the signal.
/// `aicf train` of the digits MLP for as many epochs as it takes to be
/// stopped, into `out` with its checkpoints in `out/ckpt`; the caller adds
/// the launch (`--nproc`) and its other options.
fn endless_nproc_run(out: &Path) -> Command {
    let mut command = digits_mlp_run(out);
    command.args(["--no-progress", "--epochs", "100000"]);
    command
}

/// `aicf train` of the digits MLP on the digits into `out`, its
/// checkpoints in `out/ckpt`; the caller adds the rest.
fn digits_mlp_run(out: &Path) -> Command {
    let mut command = Command::new(AICF);
    command
        .arg("train")
        .arg(root().join("examples/mlp/digits_mlp.mlir"))
        .arg("--data")
        .arg(root().join("data/digits.csv.gz"))
        .arg("--out")
        .arg(out)
        .arg("--checkpoint-dir")
        .arg(out.join("ckpt"));
    command
}

/// Waits (at most 2 minutes) until the run into `out` has written its
/// first checkpoint.
fn wait_for_checkpoint(out: &Path) {
    let started = Instant::now();
    while !out.join("ckpt/last.safetensors").exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint after 2 minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal_rank_one(out: &Path, signal: &str, timeout: &str) -> (Output, Duration) {
    signal_rank_one_of(out, signal, timeout, 2)
}

/// [`signal_rank_one`] in a run of `ranks` ranks.
fn signal_rank_one_of(out: &Path, signal: &str, timeout: &str, ranks: usize) -> (Output, Duration) {
    let child = endless_nproc_run(out)
        .args(["--gemm", "generated", "--seed", "2", "--nproc"])
        .arg(ranks.to_string())
        .env("AICF_COLLECTIVE_TIMEOUT", timeout)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("aicf starts");
    wait_for_checkpoint(out);
    std::thread::sleep(Duration::from_millis(200));
    let pid = rank_pid(out, 1).expect("rank 1 is running");
    assert!(Command::new("kill").args([signal, &pid.to_string()]).status().unwrap().success());
    let signalled = Instant::now();
    let output = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    // A stopped rank the launcher did not take down goes now.
    if let Some(pid) = rank_pid(out, 1) {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    (output, took)
}

/// A rank killed mid-run ends the run at once (mpirun names it), leaves the
/// last checkpoint whole, and a resumed run on 2 ranks ends on the bits of
/// an uninterrupted one.
#[test]
fn a_killed_rank_ends_the_run_and_it_resumes_to_the_same_bits() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("kill");
    let out = dir.join("killed");
    let (o, took) = signal_rank_one(&out, "-KILL", "60");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "the run went on:\n{text}");
    assert!(text.contains("process rank 1") && text.contains("signal 9"), "{text}");
    // In aicf's words too (Open MPI's report was the only one).
    assert!(
        text.contains(
            "aicf: error: the data-parallel run ended: one of its 2 processes was ended by signal 9 (SIGKILL"
        ),
        "{text}"
    );
    assert!(took < Duration::from_secs(30), "the run took {took:?} to end after the kill");
    let last = out.join("ckpt/last.safetensors");
    let epoch: usize = metadata(&last, "epoch").parse().expect("the checkpoint is whole");
    let target = (epoch + 2).to_string();
    ok(&train(&root().join("examples/mlp/digits_mlp.mlir"), &out, &["--epochs", &target, "--nproc", "2", "--resume"]));
    let straight = dir.join("straight");
    ok(&train(&root().join("examples/mlp/digits_mlp.mlir"), &straight, &["--epochs", &target, "--nproc", "2"]));
    assert_eq!(max_difference(&last, &straight.join("ckpt/last.safetensors")), 0.0, "resumed to other bits");
    // A checkpoint of 2 ranks resumes on any number: here one process.
    let model = root().join("examples/mlp/digits_mlp.mlir");
    let text = ok(&train(&model, &out, &["--epochs", &(epoch + 3).to_string(), "--resume", "--threads", "1"]));
    assert!(text.contains(&format!("epoch {:>3}/{}", epoch + 3, epoch + 3)), "{text}");
}

/// An endless `--nproc 2` run of the digits MLP recorded in `db`, started
/// and waited for until its first checkpoint.
fn recorded_endless_run(out: &Path, db: &Path, seed: &str) -> std::process::Child {
    let child = endless_nproc_run(out)
        .args(["--gemm", "generated", "--seed", seed, "--nproc", "2", "--runs-db"])
        .arg(db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("aicf starts");
    wait_for_checkpoint(out);
    child
}

/// `aicf runs show 1` of `db`, whose run 1 is recorded as interrupted.
fn interrupted_row(db: &Path) -> String {
    let o = Command::new(AICF).args(["runs", "show", "1", "--runs-db"]).arg(db).output().unwrap();
    let show = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success() && show.contains("run 1: interrupted"), "{show}");
    show
}

/// A Ctrl-C (SIGINT) sent to `aicf train --nproc 2` alone, as `timeout -s
/// INT` sends it, stops the ranks and says where the run stands, with exit
/// status 130 (it ended without a word); the checkpoint it names is whole.
#[test]
fn an_interrupted_nproc_run_says_where_it_stands() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("interrupted");
    let out = dir.join("run");
    let db = dir.join("runs.sqlite");
    let child = recorded_endless_run(&out, &db, "0");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let output = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{err}");
    // mpirun passes the stop on to the ranks as a SIGTERM: they stop at
    // one step, and rank 0 says where the run stands; where mpirun ended
    // them before that step, the launcher says it.
    let by_rank = err.contains("aicf: error: interrupted at epoch ");
    let by_launcher = err.contains("aicf: error: interrupted: the data-parallel run's 2 processes were stopped; ");
    assert!(by_rank != by_launcher, "said once: {err}");
    assert!(err.contains("last.safetensors holds epoch ") && err.contains("--resume goes on from there"), "{err}");
    assert!(!err.contains("mpirun detected") && !err.contains("Primary job"), "{err}");
    let last = out.join("ckpt/last.safetensors");
    let epoch = metadata(&last, "epoch");
    assert!(epoch.parse::<usize>().is_ok(), "the checkpoint is not whole");
    // Every epoch line rank 0 printed is out, up to the checkpoint's last
    // whole epoch (through mpirun, a Ctrl-C dropped the last 20-100 of
    // them): its epoch, or the one before where the stop saved inside an
    // epoch.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let printed =
        stdout.lines().rev().find_map(|l| l.strip_prefix("epoch ")?.split('/').next()?.trim().parse::<usize>().ok());
    let inside = !metadata(&last, "epoch_rows_done").is_empty();
    let whole = epoch.parse::<usize>().unwrap() - usize::from(inside);
    assert_eq!(printed.unwrap_or(0), whole, "{stdout}");
    assert_eq!(inside, err.contains("up to "), "{err}");
    // The run registry says so too (its row stayed `unfinished`, as a
    // killed run's), with the epochs rank 0 recorded.
    let show = interrupted_row(&db);
    let why = if by_rank { "interrupted at epoch " } else { "the data-parallel run's 2 processes were stopped" };
    assert!(show.contains(why), "{show}");
    // A resume the checkpoint refuses: every rank names the checkpoint the
    // user gave (rank 1 named its private copy, `rank1/resume.safetensors`),
    // a replica as rank 0's (its own, on its own disk, is not what it read).
    let o = digits_mlp_run(&out)
        .args(["--gemm", "generated", "--nproc", "2", "--epochs", "100000", "--resume", "--lr", "0.5"])
        .output()
        .unwrap();
    // (Rank 0's abort may end rank 1 before it prints: its line is
    // checked where it is whole.)
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && !err.contains("resume.safetensors"), "{err}");
    // Open MPI's help text for the abort no longer follows the error.
    // (mpirun passes on the ranks' output in pieces, so two ranks' lines
    // can interleave: a rank's error is looked for, not a whole line.)
    assert!(err.contains("aicf: error (rank ") && !err.contains("MPI_ABORT"), "{err}");
    if let Some(line) = err.lines().find(|l| l.starts_with("aicf: error (rank 1 of 2): ") && l.ends_with("anyway)")) {
        let named =
            format!("{} (rank 0's, which it sent to this rank): the checkpoint was trained with lr", last.display());
        assert!(line.contains(&named), "{err}");
    }
}

/// A SIGTERM sent to one rank alone (a scheduler's to a job's processes
/// reaches each): the ranks stop at one step, rank 0 says where the run
/// stands, the registry records it as interrupted, and the launcher ends
/// with the signal's status; the run resumes from the checkpoint it names.
#[test]
fn a_sigterm_to_one_rank_stops_every_rank_at_one_step() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("sigterm-rank");
    let out = dir.join("run");
    let db = dir.join("runs.sqlite");
    // (Seed 2: the resume below, by `train`, asks for it.)
    let child = recorded_endless_run(&out, &db, "2");
    std::thread::sleep(Duration::from_millis(200));
    let pid = rank_pid(&out, 1).expect("rank 1 is running");
    assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let output = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{err}");
    assert_eq!(err.matches("aicf: error: interrupted at epoch ").count(), 1, "rank 0 says it, once: {err}");
    assert!(err.contains("last.safetensors holds epoch ") && err.contains("--resume goes on from there"), "{err}");
    assert!(!err.contains("mpirun detected") && !err.contains("rank 1 of 2"), "{err}");
    assert_eq!(rank_pid(&out, 1), None, "rank 1 ended");
    let show = interrupted_row(&db);
    assert!(show.contains("--nproc 2"), "the command as given: {show}");
    let last = out.join("ckpt/last.safetensors");
    let epoch: usize = metadata(&last, "epoch").parse().expect("the checkpoint is whole");
    let target = (epoch + 1).to_string();
    ok(&train(&root().join("examples/mlp/digits_mlp.mlir"), &out, &["--epochs", &target, "--nproc", "2", "--resume"]));
}

/// A rank that hangs (stopped) makes the other fail within the timeout
/// with an error naming it; the run ends and its checkpoint is whole.
#[test]
fn a_hung_rank_is_named_within_the_timeout() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("hang");
    let out = dir.join("hung");
    // (6 s: a healthy rank held off a loaded 2-core machine for 3 s was
    // itself taken for hung.)
    let (o, took) = signal_rank_one(&out, "-STOP", "6");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "the run went on:\n{text}");
    assert!(text.contains("aicf: error (rank 0 of 2)"), "{text}");
    assert!(text.contains("rank 1 "), "the error names no rank:\n{text}");
    // And where the run goes on from, as a rank ended by a signal says (at
    // the step's all-reduce, or at another one: held-out scoring's).
    assert!(
        (text.contains("the last good checkpoint, ") && text.contains("is kept"))
            || text.contains("holds epoch ") && text.contains("--resume goes on from there"),
        "{text}"
    );
    // The timeout (6 s), the answers to a ping (6 s), the launcher's end.
    assert!(took < Duration::from_secs(45), "the run took {took:?} to end after the stop");
    let last = out.join("ckpt/last.safetensors");
    assert!(metadata(&last, "epoch").parse::<usize>().is_ok(), "the checkpoint is not whole");
}

/// The same with 3 ranks, whose sums are point-to-point messages (a
/// reduce-scatter in rank order) rather than one MPI collective: the
/// stopped rank is named, the others end.
#[test]
fn a_hung_rank_of_three_is_named_within_the_timeout() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("hang3");
    let out = dir.join("hung");
    let (o, took) = signal_rank_one_of(&out, "-STOP", "6", 3);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "the run went on:\n{text}");
    assert!(text.contains("aicf: error (rank "), "{text}");
    // Rank 1 is named hung; rank 2, waiting for it, is not.
    assert!(
        text.contains("rank 1 did not reach") || text.contains("rank 1 stopped answering"),
        "the error names no hung rank:\n{text}"
    );
    assert!(!text.contains("ranks 1, 2 did not reach"), "the waiting rank is named hung:\n{text}");
    assert!(took < Duration::from_secs(45), "the run took {took:?} to end after the stop");
    let last = out.join("ckpt/last.safetensors");
    assert!(metadata(&last, "epoch").parse::<usize>().is_ok(), "the checkpoint is not whole");
}

/// `--data-parallel` without mpirun is a group of one: the same training
/// as without it.
#[test]
fn one_process_with_data_parallel_trains_as_without() {
    let _serial = one_at_a_time();
    let dir = scratch("alone");
    let model = root().join("examples/mlp/digits_mlp.mlir");
    ok(&train(&model, &dir.join("plain"), &["--epochs", "2", "--threads", "1"]));
    let text = ok(&train(&model, &dir.join("dp"), &["--epochs", "2", "--threads", "1", "--data-parallel"]));
    assert!(!text.contains("replicas"), "{text}");
    let worst = max_difference(&dir.join("plain/ckpt/last.safetensors"), &dir.join("dp/ckpt/last.safetensors"));
    assert!(worst <= 1e-6, "differs by {worst}");
    // What cannot be a run is refused, saying why.
    for (args, why) in [
        (
            &["--data-parallel", "--collective-timeout", "-1"][..],
            "the seconds a rank waits in a collective, a positive",
        ),
        // Checked when read, with or without --data-parallel.
        (&["--collective-timeout", "nan"][..], "'nan': the seconds a rank waits in a collective"),
        (&["--nproc", "0"][..], "--nproc 0: at least one process"),
        (&["--data-parallel", "--bucket-size", "10%"][..], "a bucket size is bytes"),
        (&["--accumulate", "0"][..], "micro-batches per step are a whole number from 1 to 65536"),
        // A device that cannot run is refused before mpirun starts the
        // ranks (each refused it after Open MPI's start-up, its noise
        // after the error).
        (&["--nproc", "2", "--threads", "1000"][..], "aicf: error: device cpu: 1000 threads on"),
    ] {
        let o = train(&model, &dir.join("bad"), &[&["--epochs", "1"], args].concat());
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && text.contains(why), "{args:?}: {text}");
    }
    // Under mpirun without --data-parallel, each process would train alone
    // into the same files: refused.
    require_mpirun();
    // One rank started by --nproc takes every core, as a run without it
    // (Open MPI's default binding pinned it to one).
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let text = ok(&train(&model, &dir.join("one-rank"), &["--epochs", "1", "--nproc", "1"]));
    assert!(text.contains(&format!("cpu, {cores} threads")), "{text}");
    // Rank 0 alone says what it writes before the run starts (every rank
    // said the model it retargeted to --batch).
    let text = ok(&train(&model, &dir.join("two-batch"), &["--epochs", "1", "--nproc", "2", "--batch", "16"]));
    assert_eq!(text.matches("--batch 16: ").count(), 1, "{text}");
    assert!(!text.contains("which contend"), "no --threads given: each rank takes its share: {text}");
    // Threads given for each process past the machine's cores are said to
    // contend, once (it started them without a word).
    let all = cores.to_string();
    let text = ok(&train(&model, &dir.join("threads"), &["--epochs", "1", "--nproc", "2", "--threads", &all]));
    let said = format!("note: --nproc 2 with --threads {cores}: {} threads on this machine's", 2 * cores);
    assert_eq!(text.matches(&said).count(), 1, "{text}");
    let o = Command::new("mpirun")
        .args(["-n", "2"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .arg(AICF)
        .args(["train", model.to_str().unwrap(), "--data", root().join("data/digits.csv.gz").to_str().unwrap()])
        .arg("--out")
        .arg(dir.join("alone-twice"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && text.contains("without --data-parallel"), "{text}");
}

/// Replicas started by hand (`mpirun -n 1 aicf ... : -n 1 aicf ...`, as
/// across machines) that differ in their data, rate or bucket size are
/// refused before any collective, naming what differs (they trained apart
/// without a word, or failed inside MPI with "message truncated"); the
/// same data under another path is the same data.
#[test]
fn replicas_that_differ_are_refused_naming_the_difference() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("differ");
    let model = root().join("examples/mlp/digits_mlp.mlir");
    let data = root().join("data/digits.csv.gz");
    let copy = dir.join("copy.csv.gz");
    std::fs::copy(&data, &copy).unwrap();
    let other = dir.join("other.csv.gz");
    std::fs::copy(root().join("data/problems/digits_500.csv.gz"), &other).unwrap();
    let run = |first: &[&str], second: &[&str], out: &str| -> Output {
        let base = |d: &Path| -> Vec<String> {
            let mut a: Vec<String> = vec![
                AICF.into(),
                "train".into(),
                model.display().to_string(),
                "--data".into(),
                d.display().to_string(),
                "--out".into(),
                dir.join(out).display().to_string(),
                "--epochs".into(),
                "1".into(),
                "--threads".into(),
                "1".into(),
                "--no-progress".into(),
                "--no-runs-db".into(),
                "--data-parallel".into(),
            ];
            a.extend(["--gemm".into(), "generated".into()]);
            a
        };
        let mut a = vec!["-n".to_string(), "1".into()];
        a.extend(base(&data));
        a.extend(first.iter().map(|s| s.to_string()));
        a.push(":".into());
        a.extend(["-n".to_string(), "1".into()]);
        let d = if second.contains(&"OTHER") {
            other.clone()
        } else if second.contains(&"COPY") {
            copy.clone()
        } else {
            data.clone()
        };
        a.extend(base(&d));
        a.extend(second.iter().filter(|s| !matches!(**s, "OTHER" | "COPY")).map(|s| s.to_string()));
        Command::new("mpirun")
            .args(["--bind-to", "none", "--oversubscribe"])
            .args(&a)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun starts")
    };
    for (first, second, out, says) in [
        (&[][..], &["OTHER"][..], "data", "differs from rank 0 in data other.csv.gz"),
        (&[], &["--lr", "0.5"], "lr", "differs from rank 0 in lr 0.5 (rank 0: 0.003)"),
        (&["--bucket-size", "0"], &[], "bucket", "differs from rank 0 in bucket_size 26214400 (rank 0: 0)"),
        (&[], &["--accumulate", "2"], "accumulate", "accumulate 2 (rank 0: 1)"),
        // One replica standardizing its features trained one model on two
        // preprocessings (it went on).
        (&[], &["--standardize"], "standardize", "standardize true (rank 0: false)"),
        (&[], &["--memory-budget", "50%"], "budget", "memory_budget 50% (rank 0: none)"),
    ] {
        let o = run(first, second, out);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(!o.status.success(), "{out}: the run went on:\n{text}");
        assert!(
            text.contains("aicf: error (rank 1 of 2): replica 1 of the data-parallel run") && text.contains(says),
            "{out}:\n{text}"
        );
    }
    ok(&run(&[], &["COPY"], "copy"));
}

/// Stopping the `--nproc` launcher (SIGTERM, or SIGKILL, sent to it alone)
/// stops mpirun and its ranks: they trained on, holding the checkpoint
/// directory, so that no resume could start. A killed mpirun is named.
#[test]
fn stopping_the_launcher_stops_the_ranks() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("launcher");
    let mut killed = None;
    for signal in ["-TERM", "-KILL"] {
        let out = dir.join(format!("run{signal}"));
        let mut child = endless_nproc_run(&out)
            .args(["--no-runs-db", "--nproc", "2", "--threads", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("aicf starts");
        wait_for_checkpoint(&out);
        assert!(rank_pid(&out, 1).is_some(), "rank 1 is running");
        assert!(Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap().success());
        let _ = child.wait();
        killed = Some(child.id());
        let stopped = Instant::now();
        while rank_pid(&out, 0).is_some() || rank_pid(&out, 1).is_some() {
            if stopped.elapsed() > Duration::from_secs(30) {
                for rank in 0..2 {
                    if let Some(pid) = rank_pid(&out, rank) {
                        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                    }
                }
                panic!("{signal}: the ranks trained on 30 s after the launcher was stopped");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // The killed launcher's folder (where rank 0 said where it recorded the
    // run) is left; the next launch removes it, its process being gone.
    let prefix = format!("aicf-nproc-{}-", killed.unwrap());
    let left = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
    };
    assert!(left(), "a SIGKILL leaves the launcher's folder");
    let o =
        digits_mlp_run(&dir.join("again")).args(["--no-runs-db", "--nproc", "2", "--epochs", "1"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!left(), "the next launch removes a gone launcher's folder");
}

/// In fp16 with loss scaling, a short last batch leaves rank 1 no rows (30
/// of them for two ranks of 32): it runs its first row at weight 0, whose
/// gradient may overflow at the scale, and inf times 0 was NaN in the sum:
/// every replica skipped the step as an overflow and halved the scale,
/// silently (137 steps and scale 32768 where one process with two
/// micro-batches took 138 at 65536). A weight-0 replica now adds exactly
/// nothing: the bits of one process.
#[test]
fn an_empty_shard_adds_nothing_to_an_fp16_step() {
    let _serial = one_at_a_time();
    require_mpirun();
    let dir = scratch("fp16-empty-shard");
    let run = |out: &Path, args: &[&str]| {
        ok(&digits_mlp_run(out)
            .args(["--gemm", "generated", "--no-progress", "--no-runs-db", "--precision", "fp16", "--epochs", "6"])
            .args(args)
            .output()
            .expect("aicf starts"))
    };
    let (one, many) = (dir.join("one"), dir.join("many"));
    run(&one, &["--accumulate", "2", "--threads", "1"]);
    run(&many, &["--nproc", "2"]);
    let (a, b) = (one.join("ckpt/last.safetensors"), many.join("ckpt/last.safetensors"));
    assert_eq!(metadata(&a, "step"), metadata(&b, "step"));
    let worst = max_difference(&a, &b);
    assert_eq!(worst, 0.0, "two ranks in fp16 differ from one process's two micro-batches by {worst}");
}

/// mpirun killed under a running `--nproc` run (its ranks outlive it by a
/// moment, and rank 0 wrote a checkpoint after the launcher had said the
/// run ended): the launcher says so once rank 0 has let go of the
/// checkpoint directory, naming the epoch last.safetensors then holds.
#[test]
fn a_killed_mpirun_is_named_with_the_checkpoint_left() {
    let _serial = one_at_a_time();
    require_mpirun();
    let out = scratch("killed-mpirun");
    let child = endless_nproc_run(&out)
        .args(["--no-runs-db", "--nproc", "2", "--threads", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("aicf starts");
    wait_for_checkpoint(&out);
    let launcher = child.id().to_string();
    let pgrep = Command::new("pgrep").args(["-P", &launcher, "mpirun"]).output().expect("pgrep runs");
    let mpirun = String::from_utf8_lossy(&pgrep.stdout).trim().to_string();
    assert!(!mpirun.is_empty(), "mpirun is the launcher's child");
    assert!(Command::new("kill").args(["-KILL", &mpirun]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let line =
        err.lines().find(|l| l.starts_with("aicf: error: mpirun was ended by signal 9 (SIGKILL); ")).expect(&err);
    // What the launcher named is what the directory holds now: rank 0 is
    // done with it.
    let epoch = metadata(&out.join("ckpt/last.safetensors"), "epoch");
    assert!(line.contains(&format!("last.safetensors holds epoch {epoch}: --resume goes on from there")), "{line}");
    assert!(rank_pid(&out, 0).is_none(), "rank 0 ended before the launcher's last word");
    for rank in 0..2 {
        if let Some(pid) = rank_pid(&out, rank) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// A `mpirun` on the PATH that ends well without running the ranks (not
/// Open MPI's) is no trained model: said, with a failing status. One that
/// fails before any rank wrote is said too (its status was passed on with
/// no word of aicf's).
#[test]
fn a_launcher_that_runs_no_ranks_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    for (exit, said) in [
        (0, "mpirun ended with status 0, but rank 0 wrote nothing"),
        (3, "mpirun ended with status 3 before the run's rank 0 wrote its first line"),
    ] {
        let out = scratch(&format!("fake-mpirun-{exit}"));
        let bin = out.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("mpirun"), format!("#!/bin/sh\nexit {exit}\n")).unwrap();
        std::fs::set_permissions(bin.join("mpirun"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let o = digits_mlp_run(&out.join("run"))
            .args(["--no-runs-db", "--nproc", "2", "--epochs", "1"])
            .env("PATH", path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(err.contains(said), "{err}");
    }
}
