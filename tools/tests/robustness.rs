//! The fuzzing harness and the kill test, bounded for `make test`: a few
//! hundred mutated inputs through the passes (and a few through the whole
//! compile and two train steps), and a few kills during plain and adaptive
//! training. Longer runs are the same binaries with larger counts
//! (`aicf-fuzz --inputs 10000`, `aicf-kill --trials 100`); README gives
//! the numbers of the last ones.

use std::path::PathBuf;
use std::process::Command;

/// A test's directory, named by this process, emptied first: a directory
/// an earlier test binary of the same (reused) process id left held its
/// checkpoints, and three tests read them as another run's.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
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
    // Each input's limit is 300 s, not the tool's 60: its compile-and-run
    // inputs compile from an empty cache beside the other robustness
    // tests on 2 cores, and a slow input is not a crash (a hang still is).
    run(
        env!("CARGO_BIN_EXE_aicf-fuzz"),
        &["--inputs", "400", "--compile-every", "40", "--seed", "11", "--timeout", "300"],
        &out,
    );
}

/// A run killed (`kill -9`) while it records into the run registry leaves
/// the database whole, the run listed as unfinished, and the next run
/// records beside it.
#[test]
fn a_killed_run_leaves_the_run_registry_whole() {
    let out = scratch("runs");
    let db = out.join("runs.sqlite");
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let train = |epochs: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_aicf"));
        c.current_dir(&repo)
            .args(["train", "examples/mlp/digits_mlp.mlir", "--data", "data/digits.csv.gz", "--no-progress"])
            .args(["--epochs", epochs, "--runs-db"])
            .arg(&db)
            .arg("--out")
            .arg(out.join("run"));
        c
    };
    let mut child = train("100000").stdout(std::process::Stdio::null()).spawn().expect("aicf starts");
    // Killed once epochs are being recorded (three in the metrics, so two
    // in the registry at least): mid-write for some of them.
    let started = std::time::Instant::now();
    let metrics = out.join("run").join("metrics.jsonl");
    let epochs = || std::fs::read_to_string(&metrics).map_or(0, |m| m.lines().count());
    while epochs() < 3 {
        assert!(started.elapsed().as_secs() < 120, "no epoch recorded in 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let runs = |args: &[&str]| {
        let o =
            Command::new(env!("CARGO_BIN_EXE_aicf")).arg("runs").args(args).arg("--runs-db").arg(&db).output().unwrap();
        assert!(o.status.success(), "aicf runs {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(runs(&["check"]).ends_with(": ok (1 runs read)\n"), "{}", runs(&["check"]));
    assert!(runs(&["list"]).lines().nth(1).is_some_and(|l| l.contains("unfinished")), "{}", runs(&["list"]));
    let shown = runs(&["show", "1"]);
    assert!(shown.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).count() > 1, "{shown}");
    let o = train("1").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = runs(&["list"]);
    assert!(list.lines().nth(2).is_some_and(|l| l.contains("finished") && !l.contains("unfinished")), "{list}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Killed at random moments, training never leaves a torn, unusable or
/// lost checkpoint, and every run resumes to the straight run's bits.
#[test]
fn killed_training_resumes_to_the_same_bits() {
    let out = scratch("kill");
    run(env!("CARGO_BIN_EXE_aicf-kill"), &["--trials", "8", "--seed", "5"], &out);
}

/// Two runs never write one checkpoint directory at once: while another
/// process holds its lock (here this test, as a running `aicf train`
/// would), a run into it stops before compiling, naming the directory,
/// and writes nothing there; once the lock is released it runs.
#[test]
fn a_checkpoint_directory_takes_one_run_at_a_time() {
    let dir = scratch("locked");
    let ckpt = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(ckpt.join(".lock")).unwrap();
    lock.try_lock().unwrap();
    let train = || train_digits_into(&dir, &ckpt, &["--epochs", "1"]);
    let refused = train();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("another run is writing its checkpoints here"), "{err}");
    assert!(!ckpt.join("last.safetensors").exists() && !dir.join("run").exists());
    drop(lock);
    let ran = train();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(ckpt.join("last.safetensors").exists());
}

/// `aicf train` of the digits MLP with `more`, its run directory in `dir`
/// and its checkpoints in `ckpt`.
fn train_digits_into(dir: &std::path::Path, ckpt: &std::path::Path, more: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_aicf"))
        .args(["train", "../examples/mlp/digits_mlp.mlir", "--data", "../data/digits.csv.gz"])
        .args(more)
        .arg("--out")
        .arg(dir.join("run"))
        .arg("--checkpoint-dir")
        .arg(ckpt)
        .output()
        .unwrap()
}

/// A checkpoint directory made immutable since its run (`chattr +i`: its
/// lock file still opens, no new file can be made): a resumed run stops
/// before training, naming the directory and the option that chooses
/// another (it stopped at `model.mlir` with no hint), and the checkpoint is
/// as it was. Needs root and a file system with the flag: `make test` runs
/// it after the workspace's tests where `chattr +i` works.
#[test]
#[ignore = "makes a directory immutable (chattr +i): needs root"]
fn an_immutable_checkpoint_directory_is_named_before_training() {
    let dir = scratch("immutable");
    let ckpt = dir.join("ckpt");
    let train = |more: &[&str]| train_digits_into(&dir, &ckpt, &[more, &["--no-runs-db"]].concat());
    let first = train(&["--epochs", "1"]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let before = std::fs::read(ckpt.join("last.safetensors")).unwrap();
    let chattr = |flag: &str| Command::new("chattr").arg(flag).arg(&ckpt).status().is_ok_and(|s| s.success());
    assert!(chattr("+i"), "chattr +i {}", ckpt.display());
    let resumed = train(&["--epochs", "2", "--resume"]);
    assert!(chattr("-i"), "chattr -i {}", ckpt.display());
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(!resumed.status.success(), "{err}");
    assert!(err.contains("ckpt") && err.contains("give --checkpoint-dir a writable directory"), "{err}");
    let out = String::from_utf8_lossy(&resumed.stdout);
    assert!(!out.contains("epoch   2/2"), "it trained before stopping: {out}");
    assert_eq!(std::fs::read(ckpt.join("last.safetensors")).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel cache whose entries point at the wrong object files links a
/// kernel library missing kernels: the run stops naming the kernel cache,
/// keeps no broken artifact, and once the cache is whole again it runs.
#[test]
fn a_damaged_kernel_cache_is_named_and_leaves_no_broken_artifact() {
    let dir = scratch("kernel-cache");
    let cache = dir.join("cache");
    let train = |out: &str| {
        Command::new(env!("CARGO_BIN_EXE_aicf"))
            .args(["train", "../examples/mlp/digits_mlp.mlir", "--data", "../data/digits.csv.gz", "--epochs", "1"])
            .args(["--no-runs-db", "--no-progress", "--out"])
            .arg(dir.join(out))
            .env("AICF_CACHE_DIR", &cache)
            .output()
            .unwrap()
    };
    assert!(train("first").status.success());
    let kernels = cache.join("kernels");
    let objs: Vec<PathBuf> = std::fs::read_dir(&kernels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "obj"))
        .collect();
    let saved: Vec<Vec<u8>> = objs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // Every kernel's entry names the first one's object file.
    for p in &objs {
        std::fs::write(p, &saved[0]).unwrap();
    }
    let broken = train("second");
    let err = String::from_utf8_lossy(&broken.stderr);
    assert!(!broken.status.success() && err.contains("may be damaged: delete it and run again"), "{err}");
    assert!(err.contains(&kernels.display().to_string()), "{err}");
    for (p, b) in objs.iter().zip(&saved) {
        std::fs::write(p, b).unwrap();
    }
    let healed = train("second");
    assert!(healed.status.success(), "{}", String::from_utf8_lossy(&healed.stderr));
}

/// Every `*.tmp` file under `dir`: a write cut short must remove its own.
fn temporaries(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(temporaries(&path));
        } else if path.extension().is_some_and(|x| x == "tmp") {
            found.push(path);
        }
    }
    found
}

/// A compile whose artifact does not fit the disk leaves an earlier
/// artifact in its `-o` as it was: the artifact is compiled beside it and
/// moved into place whole. Written into `-o` directly, the new kernels
/// replaced the old before the manifest failed, a mix that loaded no more.
/// A deep chain of one layer's kernels has a manifest (a call per layer)
/// larger than its library, so a limit between the two fails the manifest.
#[test]
fn a_failed_compile_keeps_the_earlier_artifact() {
    let dir = scratch("compile-full-disk");
    std::fs::create_dir_all(&dir).unwrap();
    let layers = 40;
    let chain = (0..layers)
        .map(|i| {
            let input = if i == 0 { "%x".to_string() } else { format!("%a{}", i - 1) };
            format!(
                "  %w{i} = hl.get_param @l{i}.weight : tensor<16x16xf32>\n  %h{i} = hl.matmul {input}, %w{i} : \
                 tensor<8x16xf32>, tensor<16x16xf32>\n  %a{i} = hl.relu %h{i} : tensor<8x16xf32>\n"
            )
        })
        .collect::<String>();
    let params = (0..layers)
        .map(|i| {
            format!("hl.param @l{i}.weight : tensor<16x16xf32> owner \"l{i}\" init <kaiming_uniform, gain = 0.5>\n")
        })
        .collect::<String>();
    let last = format!("%a{}", layers - 1);
    let deep = dir.join("deep.mlir");
    std::fs::write(
        &deep,
        format!(
            "{params}\nfunc.func @forward(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {{\n{chain}  return {last} : \
             tensor<8x16xf32>\n}}\n\nfunc.func @loss(%x: tensor<8x16xf32>, %labels: tensor<8xi32>) -> tensor<f32> \
             {{\n{chain}  %loss = hl.cross_entropy {last}, %labels : tensor<8x16xf32>, tensor<8xi32>\n  return %loss : \
             tensor<f32>\n}}\n"
        ),
    )
    .unwrap();
    let art = dir.join("art");
    let compile = |model: &std::path::Path, limit_kib: Option<u32>| {
        let limit = limit_kib.map_or(String::new(), |k| format!("trap '' XFSZ; ulimit -f {k}; "));
        Command::new("bash")
            .arg("-c")
            .arg(format!("{limit}exec \"$@\""))
            .arg("aicf")
            .arg(env!("CARGO_BIN_EXE_aicf"))
            .arg("compile")
            .arg(model)
            .arg("-o")
            .arg(&art)
            .env("AICF_CACHE_DIR", dir.join("cache"))
            .output()
            .unwrap()
    };
    let first = compile(std::path::Path::new("../examples/mlp/digits_mlp.mlir"), None);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    // What else the user keeps in the artifact's directory, and its mode,
    // stay through a compile into it (the swap removed them).
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(art.join("notes.txt"), "mine").unwrap();
    std::fs::create_dir(art.join("runs")).unwrap();
    std::fs::set_permissions(&art, std::fs::Permissions::from_mode(0o750)).unwrap();
    let files = |d: &PathBuf| {
        let mut f: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        f.sort();
        f
    };
    let before = files(&art);
    let manifest = |f: &[(String, Vec<u8>)]| {
        f.iter().find(|(n, _)| n == "manifest.json").map(|(_, b)| String::from_utf8_lossy(b).into_owned()).unwrap()
    };
    assert!(manifest(&before).contains("fc1.weight"));
    let left = || -> Vec<String> {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("partial"))
            .collect()
    };
    let full = compile(&deep, Some(300));
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(1), "an error, not a signal: {err}");
    // Named as -o's file, with what is kept.
    assert!(err.contains(&format!("{}: File too large", art.join("manifest.json").display())), "{err}");
    assert!(err.contains("the earlier artifact in") && err.contains("is kept as it was"), "{err}");
    assert!(!err.contains("partial") && !err.contains("panicked"), "{err}");
    assert_eq!(files(&art), before, "the earlier artifact is kept byte for byte");
    assert_eq!(left(), Vec::<String>::new(), "no staging directory is left");
    // With room, the new artifact takes its place whole.
    let roomy = compile(&deep, None);
    assert!(roomy.status.success(), "{}", String::from_utf8_lossy(&roomy.stderr));
    let after = files(&art);
    assert!(manifest(&after).contains("l39.weight") && !manifest(&after).contains("fc1.weight"));
    assert_eq!(left(), Vec::<String>::new());
    assert_eq!(std::fs::read_to_string(art.join("notes.txt")).unwrap(), "mine");
    assert!(art.join("runs").is_dir());
    assert_eq!(std::fs::metadata(&art).unwrap().permissions().mode() & 0o777, 0o750);
    // Without a home for the kernel cache it lives in the artifact's
    // directory: a second compile into it finds its kernels (it looked in
    // the staging directory, empty each time).
    let homeless = |tag: &str| {
        Command::new(env!("CARGO_BIN_EXE_aicf"))
            .arg("compile")
            .arg("../examples/mlp/digits_mlp.mlir")
            .args(["--batch", "24", "-o"])
            .arg(dir.join("homeless"))
            .env_remove("AICF_CACHE_DIR")
            .env("HOME", "")
            .output()
            .unwrap_or_else(|e| panic!("{tag}: {e}"))
    };
    let cold = homeless("cold");
    assert!(cold.status.success(), "{}", String::from_utf8_lossy(&cold.stderr));
    let warm = homeless("warm");
    let said = String::from_utf8_lossy(&warm.stdout);
    assert!(said.contains(" 0 compiled,"), "{said}");
    assert!(dir.join("homeless/kernel-cache").is_dir());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full disk, as the file system reports it to a writer: no write may
/// pass a size limit (RLIMIT_FSIZE with SIGXFSZ ignored, so a write past
/// it fails with EFBIG as one past a full disk fails with ENOSPC; no root
/// or mount needed). A checkpoint that cannot be written stops the run
/// with an error naming it; the last good checkpoint stays byte for byte
/// and the run resumes from it once there is room. Kernels that cannot be
/// written stop the compile naming the file, as the user's to fix (not an
/// internal error). Neither leaves a partial file behind.
#[test]
fn a_full_disk_keeps_the_last_good_checkpoint() {
    let dir = scratch("full-disk");
    let ckpt = dir.join("ckpt");
    let cache = dir.join("cache");
    // `limit_kib`: the largest file this run may write.
    let train = |epochs: &str, resume: bool, limit_kib: Option<u32>, cache_dir: Option<&PathBuf>| {
        let mut c = Command::new("bash");
        let limit = limit_kib.map_or(String::new(), |k| format!("trap '' XFSZ; ulimit -f {k}; "));
        c.arg("-c").arg(format!("{limit}exec \"$@\"")).arg("aicf").arg(env!("CARGO_BIN_EXE_aicf"));
        c.args(["train", "../examples/mlp/digits_mlp.mlir", "--data", "../data/digits.csv.gz", "--epochs", epochs])
            .args(["--no-runs-db", "--no-progress", "--out"])
            .arg(dir.join("run"))
            .arg("--checkpoint-dir")
            .arg(&ckpt);
        if resume {
            c.arg("--resume");
        }
        if let Some(cache) = cache_dir {
            c.env("AICF_CACHE_DIR", cache);
        }
        c.output().unwrap()
    };
    let first = train("2", false, None, None);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let last = ckpt.join("last.safetensors");
    let good = std::fs::read(&last).unwrap();
    let previous = ckpt.join("prev.safetensors");
    let before = std::fs::read(&previous).unwrap();
    assert_ne!(before, good, "prev holds epoch 1, last epoch 2");
    assert!(good.len() > 100 << 10, "the checkpoint ({} bytes) must not fit the limit below", good.len());
    // Two more epochs, with room for the metrics but not the checkpoint.
    let full = train("4", true, Some(100), None);
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(1), "an error, not a signal: {err}");
    // What failed, and what is still there.
    assert!(err.contains("last.safetensors: could not save epoch 3's checkpoint: File too large"), "{err}");
    assert!(err.contains("last.safetensors still holds epoch 2: --resume goes on from there"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read(&last).unwrap(), good, "the last good checkpoint is kept byte for byte");
    // and the one before it too (prev was made the last before the save,
    // which failed: epoch 1 was lost).
    assert_eq!(std::fs::read(&previous).unwrap(), before, "prev still holds epoch 1");
    assert_eq!(temporaries(&dir), Vec::<PathBuf>::new());
    // With room again, the run goes on from the kept checkpoint (epoch 2).
    let resumed = train("4", true, None, None);
    let out = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(out.contains("epoch   3/4") && !out.contains("epoch   1/4"), "{out}");
    // Compiling into an empty kernel cache with no room for its files.
    std::fs::remove_dir_all(&ckpt).unwrap();
    std::fs::remove_dir_all(dir.join("run")).unwrap();
    let compile = train("1", false, Some(40), Some(&cache));
    let err = String::from_utf8_lossy(&compile.stderr);
    assert_eq!(compile.status.code(), Some(1), "an error, not a signal: {err}");
    // Named at the file it could not write: a kernel of the cache (the
    // first file past the limit today) or the linked library.
    let named = err.contains(&cache.display().to_string()) || err.contains("kernels.so");
    assert!(named && (err.contains("File too large") || err.contains("File size limit exceeded")), "{err}");
    assert!(!err.contains("internal compiler error") && !err.contains("panicked"), "{err}");
    assert_eq!(temporaries(&dir), Vec::<PathBuf>::new());
}

/// Links where a run writes: a run directory's metrics or plot linked to
/// a checkpoint (the run wrote through them, replacing the checkpoint with
/// its metrics) is refused; a checkpoint directory's last.safetensors
/// linked into another run's checkpoint directory (the saves wrote there,
/// past that directory's lock: two runs wrote one checkpoint at once)
/// takes that directory's lock too, refused while another run holds it.
/// The checkpoint stays byte for byte until a run may write it.
#[test]
fn links_where_a_run_writes_are_refused() {
    let dir = scratch("links");
    let train = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_aicf"))
            .args(["train", "../examples/mlp/digits_mlp.mlir", "--data", "../data/digits.csv.gz"])
            .args(["--no-runs-db", "--no-progress"])
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let ckpt = dir.join("ckpt");
    let (ckpt_arg, out_arg) = (ckpt.display().to_string(), dir.join("run").display().to_string());
    let first = train(&["--epochs", "1", "--checkpoint-dir", &ckpt_arg, "--out", &out_arg]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let last = ckpt.join("last.safetensors");
    let good = std::fs::read(&last).unwrap();
    // The metrics of a fresh run directory linked to the checkpoint.
    let out = dir.join("linked-out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&last, out.join("metrics.jsonl")).unwrap();
    let linked = train(&["--epochs", "2", "--out", &out.display().to_string()]);
    let err = String::from_utf8_lossy(&linked.stderr);
    assert_eq!(linked.status.code(), Some(1), "{err}");
    assert!(err.contains("metrics.jsonl: is a symbolic link (to ") && err.contains("would write through it"), "{err}");
    assert_eq!(std::fs::read(&last).unwrap(), good);
    // Another checkpoint directory whose last is a link to this one's,
    // while a run holds this one (its lock taken here).
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::os::unix::fs::symlink(&last, other.join("last.safetensors")).unwrap();
    let other_out = dir.join("other-run").display().to_string();
    let other_arg = other.display().to_string();
    let held = std::fs::OpenOptions::new().write(true).open(ckpt.join(".lock")).unwrap();
    held.try_lock().unwrap();
    let resumed = train(&["--epochs", "2", "--resume", "--checkpoint-dir", &other_arg, "--out", &other_out]);
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(1), "{err}");
    assert!(err.contains("last.safetensors: links into ") && err.contains("where another run is writing"), "{err}");
    assert_eq!(std::fs::read(&last).unwrap(), good);
    // Released, the link is followed: the run goes on, saving through it.
    drop(held);
    let resumed = train(&["--epochs", "2", "--resume", "--checkpoint-dir", &other_arg, "--out", &other_out]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(other.join("last.safetensors").is_symlink());
    assert_ne!(std::fs::read(&last).unwrap(), good, "epoch 2 saved through the link");
}

/// A checkpoint directory moved away while its run trains: the run's next
/// save made it again, unlocked, and a second run resumed in it beside the
/// first (both saving one checkpoint). The run locks it again and says so,
/// and the second run is refused.
#[test]
fn a_checkpoint_directory_moved_during_its_run_is_locked_again() {
    let dir = scratch("moved-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let ckpt = dir.join("ckpt");
    let train = |epochs: &str, out: &str, resume: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_aicf"));
        c.args(["train", "../examples/mlp/digits_mlp.mlir", "--data", "../data/digits.csv.gz", "--epochs", epochs])
            .args(["--no-runs-db", "--no-progress", "--out"])
            .arg(dir.join(out))
            .arg("--checkpoint-dir")
            .arg(&ckpt)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if resume {
            c.arg("--resume");
        }
        c
    };
    let wait_for = |path: &std::path::Path| {
        for _ in 0..6000 {
            if path.is_file() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("{} did not appear", path.display());
    };
    // Long enough never to end before the checks below (killed after them).
    let log = std::fs::File::create(dir.join("first.log")).unwrap();
    let mut first = train("1000000", "first", false).stdout(log).spawn().unwrap();
    wait_for(&ckpt.join("last.safetensors"));
    std::fs::rename(&ckpt, dir.join("moved")).unwrap();
    // The next save makes the directory again, with its lock.
    wait_for(&ckpt.join("last.safetensors"));
    let second = train("1000001", "second", true).output().unwrap();
    let _ = first.kill();
    let _ = first.wait();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("another run is writing its checkpoints here"), "{err}");
    let said = std::fs::read_to_string(dir.join("first.log")).unwrap();
    assert!(said.contains("the checkpoint directory was moved or removed during the run"), "{said}");
    assert!(dir.join("moved/last.safetensors").is_file());
}

/// A full disk in the middle of a growing run: the checkpoint after a
/// widening cannot be written, the run stops naming it, and `--resume`
/// with room again replays the same decisions and ends on the bits of a
/// run that never stopped. (The artifacts of every model version come
/// from the first run's directory, so only checkpoints meet the limit.)
/// Little address space (`ulimit -v`, as batch schedulers set): a run
/// with an empty GEMM registry, which times every candidate, trains and
/// exits. The BLAS libraries fail there in ways no caller can catch
/// (OpenBLAS retried its buffer allocation forever, MKL exited the process
/// with status 2), so they are left out; the runtime's own GEMMs serve.
#[test]
fn a_low_address_space_limit_trains_and_exits() {
    let dir = scratch("ulimit-v");
    // One epoch into `out` (sharing one GEMM registry), under `limit`.
    let train = |limit: &str, out: &str| {
        Command::new("bash")
            .arg("-c")
            .arg(format!("{limit} exec timeout 300 \"$@\""))
            .arg("aicf")
            .arg(env!("CARGO_BIN_EXE_aicf"))
            .args(["train", "../examples/mlp/digits_mlp.mlir", "--data", "../data/digits.csv.gz", "--epochs", "1"])
            .args(["--no-runs-db", "--no-progress", "--out"])
            .arg(dir.join(out))
            .env("AICF_CACHE_DIR", dir.join("cache"))
            .output()
            .unwrap()
    };
    let output = train("ulimit -v 500000;", "run");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "status {:?}:\n{text}", output.status);
    assert!(text.contains("final held-out accuracy"), "{text}");
    let registry = std::fs::read_to_string(dir.join("cache/gemm-registry.json")).unwrap();
    assert!(registry.contains("generated"), "no candidate was timed:\n{registry}");
    assert!(!registry.contains("openblas") && !registry.contains("mkl"), "{registry}");
    // Those decisions are kept apart from the machine's: a run without the
    // limit times the libraries too, whatever the limited run chose.
    assert!(
        registry.lines().filter(|l| l.contains("epilogue")).all(|l| l.contains("(no BLAS: ulimit -v)")),
        "{registry}"
    );
    let free = train("", "free");
    assert!(free.status.success(), "{}", String::from_utf8_lossy(&free.stderr));
    let registry = std::fs::read_to_string(dir.join("cache/gemm-registry.json")).unwrap();
    let unlimited: Vec<&str> = registry.lines().filter(|l| l.contains("(ms)") && !l.contains("no BLAS")).collect();
    assert!(!unlimited.is_empty(), "the unlimited run timed nothing:\n{registry}");
    if aicf_runtime::cpu::blas::available() {
        assert!(unlimited.iter().any(|l| l.contains("openblas")), "OpenBLAS was not timed:\n{registry}");
    }
}

#[test]
fn a_full_disk_during_growth_resumes_to_the_same_bits() {
    let dir = scratch("full-disk-growth");
    let train = |ckpt: &str, limit_kib: Option<u32>, resume: bool| {
        let mut c = Command::new("bash");
        let limit = limit_kib.map_or(String::new(), |k| format!("trap '' XFSZ; ulimit -f {k}; "));
        c.arg("-c").arg(format!("{limit}exec \"$@\"")).arg("aicf").arg(env!("CARGO_BIN_EXE_aicf"));
        c.args(["train", "../examples/grow/narrow_mlp.mlir", "--data", "../data/digits.csv.gz", "--epochs", "30"])
            .args(["--lr", "3e-3", "--seed", "0", "--adapt", "../examples/grow/policy.toml"])
            .args(["--gemm", "generated", "--threads", "2", "--no-runs-db", "--no-progress", "--out"])
            .arg(dir.join("run"))
            .arg("--checkpoint-dir")
            .arg(dir.join(ckpt));
        if resume {
            c.arg("--resume");
        }
        c.output().unwrap()
    };
    let last_epoch = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let metrics = std::fs::read_to_string(dir.join("run").join("metrics.jsonl")).unwrap();
        let mut last: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
        // Everything but the clock.
        let fields = last.as_object_mut().unwrap();
        fields.remove("seconds");
        fields.remove("steps_per_second");
        last
    };
    let straight = last_epoch(&train("straight", None, false));
    // 60 KiB: the 16-unit model's checkpoints fit (29 KB); the first one
    // after the widening to 32 units, which also holds the state the
    // watched rewrite would roll back to, does not.
    let full = train("full", Some(60), false);
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(1), "an error, not a signal: {err}");
    assert!(err.contains("last.safetensors: could not save epoch") && err.contains("File too large"), "{err}");
    assert!(String::from_utf8_lossy(&full.stdout).contains("widen fc1 to 32"), "the run reached the growth");
    let kept = std::fs::read(dir.join("full").join("last.safetensors")).unwrap();
    assert_eq!(
        kept,
        std::fs::read(dir.join("full").join("v0.safetensors")).unwrap(),
        "the last good checkpoint is kept"
    );
    assert_eq!(temporaries(&dir), Vec::<PathBuf>::new());
    let resumed = train("full", None, true);
    assert!(String::from_utf8_lossy(&resumed.stdout).contains("resumed from"));
    assert_eq!(last_epoch(&resumed), straight, "the resumed run ends on the straight run's bits");
}

/// An adaptive run resumed late (its losses far below its first ones) ends
/// on the uninterrupted run's bits: the checkpoint carries the early loss
/// and gradient scales a spike is measured against. Measured again from
/// the late losses kept, they were smaller, and the resumed run of this
/// instability rule rolled back at a step (1737) the straight one did not.
#[test]
fn an_adaptive_run_resumed_late_ends_on_the_straight_runs_bits() {
    let dir = scratch("late-resume");
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("instability.toml");
    std::fs::write(&policy, "[[rule]]\nwhen = \"instability\"\naction = { rollback = { lr_factor = 0.5 } }\n").unwrap();
    let train = |epochs: &str, name: &str, resume: bool| {
        let o = Command::new(env!("CARGO_BIN_EXE_aicf"))
            .args(["train", "../examples/grow/narrow_mlp.mlir", "--data", "../data/digits.csv.gz"])
            .args(["--epochs", epochs, "--threads", "1", "--gemm", "generated", "--no-runs-db", "--no-progress"])
            .arg("--adapt")
            .arg(&policy)
            .arg("--out")
            .arg(dir.join(name))
            .arg("--checkpoint-dir")
            .arg(dir.join(name).join("ckpt"))
            .args(if resume { &["--resume"][..] } else { &[] })
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let straight = train("40", "straight", false);
    train("10", "resumed", false);
    let resumed = train("40", "resumed", true);
    // The straight run rolls back once (step 1530 on an Intel Xeon EMR;
    // where the kernels' sums round otherwise it may not, and the bits
    // below are still compared).
    let rollbacks = |log: &str| log.lines().filter(|l| l.contains("roll back on instability")).count();
    assert_eq!(rollbacks(&resumed), rollbacks(&straight), "straight:\n{straight}\nresumed:\n{resumed}");
    let (a, _) = aicf_runtime::checkpoint::load(&dir.join("straight/ckpt/last.safetensors")).unwrap();
    let (b, _) = aicf_runtime::checkpoint::load(&dir.join("resumed/ckpt/last.safetensors")).unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, t) in &a {
        assert!(t.bytes == b[name].bytes, "{name} differs between the straight and the resumed run");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run stopped inside an epoch (a SIGTERM, as a scheduler sends, or a
/// Ctrl-C) saves the epoch so far, and `--resume` goes on inside it to the
/// uninterrupted run's bits: the epoch's steps were lost (a language
/// model's epoch is minutes of text). A character LM, stopped in its
/// second epoch.
#[test]
fn a_run_stopped_inside_an_epoch_resumes_inside_it_to_the_same_bits() {
    let dir = scratch("stopped-inside");
    std::fs::create_dir_all(&dir).unwrap();
    let train = |name: &str, more: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_aicf"));
        c.args(["train", "../examples/char_lm/char_lm.mlir", "--data", "../data/tinyshakespeare.txt"])
            .args(["--epochs", "3", "--windows-per-epoch", "2048", "--threads", "1", "--gemm", "generated"])
            .args(["--no-runs-db", "--no-progress", "--out"])
            .arg(dir.join(name))
            .arg("--checkpoint-dir")
            .arg(dir.join(name).join("ckpt"))
            .args(more);
        c
    };
    let o = train("straight", &[]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Stopped once the first epoch is recorded and some of the second has
    // trained (later each try, where the machine is slow to start it).
    let mut stopped_inside = false;
    for (attempt, wait_ms) in [400u64, 1200, 3000].into_iter().enumerate() {
        let name = format!("stopped-{attempt}");
        let mut command = train(&name, &[]);
        let child = command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let metrics = dir.join(&name).join("metrics.jsonl");
        let started = std::time::Instant::now();
        while std::fs::read_to_string(&metrics).map_or(0, |m| m.lines().count()) < 1 {
            assert!(started.elapsed().as_secs() < 300, "no first epoch in 5 minutes");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(wait_ms));
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.success() || !err.contains("holds epoch 2 up to its step ") {
            continue;
        }
        assert_eq!(o.status.code(), Some(143), "{err}");
        // The checkpoint before it stays as prev: the first epoch's, whole.
        let ckpt = dir.join(&name).join("ckpt");
        let whole = |file: &str| {
            let meta = aicf_runtime::checkpoint::read_metadata(&ckpt.join(file)).unwrap();
            (meta["epoch"].clone(), meta.contains_key("epoch_rows_done"))
        };
        assert_eq!(whole("prev.safetensors"), ("1".to_string(), false));
        // Stopped again, inside the same epoch or a later one: prev is
        // never a checkpoint inside an epoch (two stops in one epoch left
        // prev and last both inside it, the last whole epoch's gone).
        let mut again = train(&name, &["--resume"]);
        let child = again.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(wait_ms + 300));
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = child.wait_with_output().unwrap();
        assert!(!whole("prev.safetensors").1, "prev is inside an epoch");
        let o = train(&name, &["--resume"]).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(text.contains("resumed from"), "{text}");
        let (a, _) = aicf_runtime::checkpoint::load(&dir.join("straight/ckpt/last.safetensors")).unwrap();
        let (b, _) = aicf_runtime::checkpoint::load(&dir.join(&name).join("ckpt/last.safetensors")).unwrap();
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (tensor, t) in &a {
            assert!(t.bytes == b[tensor].bytes, "{tensor} differs between the straight and the resumed run");
        }
        // The records: three epochs, the second's as the straight run's.
        let records = |run: &str| std::fs::read_to_string(dir.join(run).join("metrics.jsonl")).unwrap();
        let losses = |m: String| -> Vec<String> {
            m.lines().map(|l| l.split("\"val_loss\":").nth(1).unwrap_or("").split(',').next().unwrap().into()).collect()
        };
        assert_eq!(losses(records(&name)), losses(records("straight")));
        stopped_inside = true;
        break;
    }
    assert!(stopped_inside, "no try stopped inside the second epoch");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A binary file given where the model goes (the data, or a checkpoint) is
/// named as not a model by every command that reads one, never a raw
/// UTF-8 error (`aicf compile` said "stream did not contain valid UTF-8").
#[test]
fn a_binary_file_given_as_the_model_is_named() {
    for args in [
        vec!["compile", "../data/digits.csv.gz"],
        vec!["train", "../data/digits.csv.gz", "--data", "../data/digits.csv.gz", "--no-runs-db"],
        vec!["bench", "../data/digits.csv.gz"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_aicf")).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("not a model: the file is not UTF-8 text"), "{args:?}: {err}");
    }
}

/// A signal that ends the process while a checkpoint is being written (a
/// second one) removes the save's temporary file (`last.partial<pid>`)
/// before the process ends as the signal says; it stayed until the next
/// run in the directory removed it. A first SIGINT (Ctrl-C) or SIGTERM
/// (what a batch scheduler sends first) only asks the loop to stop: the
/// save completes, and the run ends at its next step with exit status 128
/// plus the signal (130, 143) and a line saying where it stands (it ended
/// silently; a SIGTERM ended it at once). The last checkpoint, where there
/// is one, stays whole.
#[test]
fn a_signal_during_a_save_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("signal-save");
    std::fs::create_dir_all(&dir).unwrap();
    // The digits MLP 200,000 wide: 15 million parameters, 180 MB with
    // Adam's moments, so that a save takes long enough to land in; a tenth
    // of the rows to train on, so that saves come every few steps.
    let model = std::fs::read_to_string("../examples/mlp/digits_mlp.mlir")
        .unwrap()
        .replace("128x", "200000x")
        .replace("x128", "x200000")
        .replace("<128", "<200000");
    let path = dir.join("wide.mlir");
    std::fs::write(&path, model).unwrap();
    let partials = |ckpt: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(ckpt)
            .map(|l| {
                l.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains(".partial"))
                    .collect()
            })
            .unwrap_or_default()
    };
    // (A second signal ends the process. Not a second SIGINT here: two
    // during the save come as one, the thread writing being in one long
    // write(2), and a signal pending twice is delivered once; a SIGINT and
    // a SIGTERM are two.)
    let cases: [(&[i32], &str); 4] = [
        (&[libc::SIGINT], "SIGINT"),
        (&[libc::SIGTERM], "SIGTERM"),
        (&[libc::SIGHUP], "SIGHUP"),
        (&[libc::SIGINT, libc::SIGTERM], "SIGINT-then-SIGTERM"),
    ];
    for (signals, name) in cases {
        let mut caught = false;
        for trial in 0..5 {
            let ckpt = dir.join(format!("ckpt-{name}-{trial}"));
            let mut child = Command::new(env!("CARGO_BIN_EXE_aicf"))
                .current_dir("..")
                .arg("train")
                .arg(&path)
                .args(["--data", "data/digits.csv.gz", "--val-split", "0.9", "--epochs", "40", "--gemm", "generated"])
                .args(["--threads", "1", "--no-runs-db", "--no-progress", "--checkpoint-dir"])
                .arg(&ckpt)
                .arg("--out")
                .arg(dir.join(format!("run-{name}-{trial}")))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let started = std::time::Instant::now();
            let mut seen = false;
            while started.elapsed() < std::time::Duration::from_secs(300) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if !partials(&ckpt).is_empty() {
                    seen = true;
                    for &signal in signals {
                        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
                    }
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            if !seen {
                let _ = child.kill();
                let _ = child.wait();
                continue;
            }
            let output = child.wait_with_output().unwrap();
            let (status, err) = (output.status, String::from_utf8_lossy(&output.stderr));
            if let [signal] = signals {
                let code = 128 + signal;
                assert_eq!(status.code(), Some(code), "{name}: the run ends at its next step: {status:?}\n{err}");
                assert!(err.contains("aicf: error: interrupted at epoch "), "{name}: {err}");
                assert!(err.contains("last.safetensors holds epoch ") && err.contains("--resume goes on"), "{err}");
            } else {
                // (Which of the two is the second is the kernel's choice:
                // the process has several threads.)
                let ended = status.signal().is_some_and(|s| signals.contains(&s));
                assert!(ended, "{name}: the run ends as the second signal says: {status:?}");
                assert!(err.contains("aicf: a second signal: stopped at once"), "{name}: {err}");
            }
            assert_eq!(partials(&ckpt), Vec::<String>::new(), "{name}: the save's temporary file is removed");
            let last = ckpt.join("last.safetensors");
            if last.exists() {
                aicf_runtime::checkpoint::load(&last).expect("the last checkpoint stays whole");
            }
            caught = true;
            break;
        }
        assert!(caught, "{name}: no save was seen in progress in 5 runs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run stopped by a Ctrl-C is recorded in the run registry as
/// `interrupted` (resumable), not `failed`, with the epochs it recorded
/// and the structure its growth reached (it was `failed`, with no epochs
/// and no `grown into`).
#[test]
fn an_interrupted_run_is_recorded_as_interrupted_with_its_growth() {
    let out = scratch("interrupted-run");
    let db = out.join("runs.sqlite");
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let child = Command::new(env!("CARGO_BIN_EXE_aicf"))
        .current_dir(&repo)
        .args(["train", "examples/grow/narrow_mlp.mlir", "--data", "data/digits.csv.gz", "--no-progress"])
        .args(["--epochs", "100000", "--adapt", "test/Tools/aicf/inputs/grow-steps.toml", "--runs-db"])
        .arg(&db)
        .arg("--checkpoint-dir")
        .arg(out.join("ckpt"))
        .arg("--out")
        .arg(out.join("run"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("aicf starts");
    // Three epochs (135 steps): past both growths (steps 50 and 100).
    let started = std::time::Instant::now();
    let metrics = out.join("run").join("metrics.jsonl");
    let epochs = || std::fs::read_to_string(&metrics).map_or(0, |m| m.lines().count());
    while epochs() < 3 {
        assert!(started.elapsed().as_secs() < 300, "no third epoch in 5 minutes");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{err}");
    let runs = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_aicf")).args(args).arg("--runs-db").arg(&db).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let list = runs(&["runs", "list"]);
    let row = list.lines().find(|l| l.trim_start().starts_with("1 ")).unwrap_or_default();
    assert!(row.contains("interrupted") && !row.trim_end().ends_with('-'), "{list}");
    let show = runs(&["runs", "show", "1"]);
    assert!(show.contains("run 1: interrupted"), "{show}");
    assert!(show.contains("grown into: mlp 32-32-32-10"), "{show}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A checkpoint past the file-size limit (`ulimit -f`) fails its write with
/// an error naming the file, and the process ends with status 1: SIGXFSZ
/// ended it without a word, its temporary file left behind. The run's
/// compiled artifact comes from a first run without the limit (clang's
/// output would meet it first).
#[test]
fn a_checkpoint_past_the_file_size_limit_is_an_error() {
    use std::os::unix::process::CommandExt;
    let dir = scratch("file-size-limit");
    let out = dir.join("run");
    let train = |limit: Option<u64>, checkpoint: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_aicf"));
        c.current_dir("..")
            .args(["train", "examples/mlp/digits_mlp.mlir", "--data", "data/digits.csv.gz", "--epochs", "1"])
            .args(["--no-runs-db", "--no-progress", "--out"])
            .arg(&out);
        if checkpoint {
            c.arg("--checkpoint-dir").arg(dir.join("ckpt"));
        }
        if let Some(bytes) = limit {
            // SAFETY: setrlimit(2) only, between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    let r = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                })
            };
        }
        c.output().expect("aicf starts")
    };
    let first = train(None, false);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    // The checkpoint (about 250 kB with SGD's state) is past 64 kB.
    let limited = train(Some(64 << 10), true);
    let err = String::from_utf8_lossy(&limited.stderr);
    assert_eq!(limited.status.code(), Some(1), "an error, not a signal: {:?}\n{err}", limited.status);
    assert!(err.contains("last.safetensors") && err.contains("File too large"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.join("ckpt"))
        .map(|l| l.flatten().map(|e| e.file_name()).filter(|n| n.to_string_lossy().contains(".partial")).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the temporary file is removed: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
