//! The GPU test bundle, replayed on a GPU: every case written by the
//! compiler's GPU tests (`make gpu-bundle`; every `ll` kernel kind on odd
//! and round shapes, and train steps of the example models) runs on the
//! device and must give what the CPU path gave, to the case's tolerance.
//!
//! The bundle's folder is `$AICF_GPU_BUNDLE`, else `cases/` beside this
//! test binary (the bundle's layout), else `target/gpu-bundle/cases`.
//!
//! Every test here needs a GPU and the bundle, so each is `#[ignore]`d:
//! `cargo test` lists them as ignored on a machine without one, and the
//! bundle's `run.sh` runs them with `--include-ignored`. Run that way
//! without a GPU or a bundle, a test fails and says why.

use aicf_runtime::cuda::{self, BundleCase, CudaModule, CudaSession, GemmCheck, GemmPolicy, compare};
use aicf_runtime::{Backend, RuntimeError, artifact::DType};
use std::path::PathBuf;

fn bundle() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AICF_GPU_BUNDLE") {
        return Some(PathBuf::from(p));
    }
    let beside = std::env::current_exe().ok()?.parent()?.join("cases");
    if beside.is_dir() {
        return Some(beside);
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/gpu-bundle/cases");
    built.is_dir().then_some(built)
}

fn require_gpu() {
    if let Err(why) = cuda::available() {
        panic!("this test needs a GPU: {why}");
    }
}

fn cases() -> Vec<(PathBuf, BundleCase)> {
    require_gpu();
    let Some(dir) = bundle() else {
        panic!("no GPU bundle (run `make gpu-bundle`, or set AICF_GPU_BUNDLE)");
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let text =
            std::fs::read_to_string(path.join("case.json")).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        found.push((path, serde_json::from_str::<BundleCase>(&text).unwrap()));
    }
    found.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    assert!(!found.is_empty(), "{}: an empty bundle", dir.display());
    found
}

/// How a case's calls run.
#[derive(Clone, Copy, Debug)]
struct Mode {
    /// Calls after the first replay a captured CUDA Graph.
    graphs: bool,
    /// Calls run on the schedule's streams.
    streams: bool,
    /// All calls through `call_each`: the next batch's copy overlaps the
    /// call before it.
    pipelined: bool,
    /// Generated GEMM kernels, or cuBLASLt wherever it can run the GEMM.
    gemm: GemmPolicy,
}

/// Runs one case: every call's outputs, then (train steps) every symbol.
/// Returns the worst relative difference and how many calls cuBLASLt ran.
fn run_case(dir: &std::path::Path, case: &BundleCase, mode: Mode) -> Result<(f64, usize), String> {
    let module = CudaModule::load(dir, 0).map_err(|e| e.to_string())?;
    let mut session = CudaSession::new(module, case.seed).map_err(|e| e.to_string())?;
    if case.nccl {
        // A data-parallel step: its collectives in an NCCL group of one.
        session.join_nccl(&aicf_runtime::collective::Local).map_err(|e| e.to_string())?;
    }
    session.graphs = mode.graphs;
    session.streams = mode.streams;
    session.gemm = mode.gemm;
    let results = if mode.pipelined {
        let batches: Vec<_> = case.calls.iter().map(|c| c.inputs.clone()).collect();
        session.call_each(&case.function, &batches).map_err(|e| e.to_string())?
    } else {
        let mut results = Vec::new();
        for call in &case.calls {
            let inputs: Vec<_> = call.inputs.iter().collect();
            results.push(session.call(&case.function, &inputs).map_err(|e| e.to_string())?);
        }
        results
    };
    let mut worst: f64 = 0.0;
    for (n, (call, got)) in case.calls.iter().zip(&results).enumerate() {
        if got.len() != call.outputs.len() {
            return Err(format!("call {n}: {} outputs, expected {}", got.len(), call.outputs.len()));
        }
        for (i, (g, w)) in got.iter().zip(&call.outputs).enumerate() {
            worst = worst.max(compare(&format!("call {n} output {i}"), g, w, case.tol)?);
        }
    }
    for (name, want) in &case.symbols {
        let got = session.symbol(name).ok_or_else(|| format!("no symbol {name}"))?;
        // Parameters after several steps: ten times the outputs' tolerance.
        worst = worst.max(compare(name, &got, want, case.tol * 10.0)?);
    }
    Ok((worst, session.library_calls(&case.function)))
}

#[test]
#[ignore = "needs a GPU and the GPU bundle (make gpu-bundle; target/gpu-bundle/run.sh)"]
fn every_bundle_case_matches_the_cpu_on_the_gpu() {
    let cases: Vec<_> = cases().into_iter().filter(|(_, c)| !c.nccl).collect();
    let mut failures = Vec::new();
    for (dir, case) in &cases {
        // Train steps run four ways: launch by launch on one stream; on the
        // schedule's streams launch by launch and with graph replay; and
        // the last with each batch's copy overlapping the step before.
        // Each case once more with cuBLASLt running the GEMMs it can.
        let mode = |graphs, streams, pipelined| Mode { graphs, streams, pipelined, gemm: GemmPolicy::Generated };
        let library = |m: Mode| Mode { gemm: GemmPolicy::Library, ..m };
        let modes = if case.calls.len() > 1 {
            let replayed = mode(true, true, false);
            vec![
                mode(false, false, false),
                mode(false, true, false),
                replayed,
                mode(true, true, true),
                library(replayed),
            ]
        } else {
            vec![mode(false, true, false), library(mode(false, true, false))]
        };
        for m in modes {
            let how = format!(
                "graphs={:<5} streams={:<5} pipelined={:<5} gemm={:<9}",
                m.graphs,
                m.streams,
                m.pipelined,
                format!("{:?}", m.gemm)
            );
            match run_case(dir, case, m) {
                Ok((worst, lt)) => {
                    println!("ok   {:<28} {how} worst relative difference {worst:.1e}, {lt} cuBLASLt calls", case.name)
                }
                Err(e) => {
                    println!("FAIL {:<28} {how} {e}", case.name);
                    failures.push(format!("{} ({how}): {e}", case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// A data-parallel train step (the digits MLP, Adam, gradients in 4 KiB
/// buckets, at weight 1/4) in an NCCL group of one rank gives what the
/// CPU gave for it alone: NCCL's pre-multiplied sums on the collectives'
/// stream, launch by launch and replayed in a CUDA Graph. Needs NCCL
/// (`libnccl.so.2`, the nvidia-nccl-cu12 wheel, or `$AICF_NCCL_LIB`).
#[test]
#[ignore = "needs a GPU, NCCL and the GPU bundle (make gpu-bundle; target/gpu-bundle/run.sh)"]
fn a_data_parallel_step_in_an_nccl_group_of_one_matches_the_cpu() {
    let cases: Vec<_> = cases().into_iter().filter(|(_, c)| c.nccl).collect();
    assert!(!cases.is_empty(), "the bundle has no data-parallel case");
    match cuda::nccl::available() {
        Ok(found) => println!("NCCL: {found}"),
        Err(why) => panic!("{why}"),
    }
    let mut failures = Vec::new();
    for (dir, case) in &cases {
        for graphs in [false, true] {
            let m = Mode { graphs, streams: true, pipelined: false, gemm: GemmPolicy::Generated };
            match run_case(dir, case, m) {
                Ok((worst, _)) => {
                    println!("ok   {:<28} graphs={graphs:<5} worst relative difference {worst:.1e}", case.name)
                }
                Err(e) => failures.push(format!("{} (graphs={graphs}): {e}", case.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The bundle's tensor-core GEMM checks (`gemm/<name>/gemm.json` beside
/// `cases/`): inputs made here, the result compared with the host's.
#[test]
#[ignore = "needs a GPU and the GPU bundle (make gpu-bundle; target/gpu-bundle/run.sh)"]
fn every_gemm_check_matches_the_host_reference() {
    require_gpu();
    let Some(dir) = bundle().and_then(|cases| Some(cases.parent()?.join("gemm"))).filter(|d| d.is_dir()) else {
        panic!("no GEMM checks in the GPU bundle (run `make gpu-bundle`, or set AICF_GPU_BUNDLE)");
    };
    let mut failures = Vec::new();
    let mut library_runs = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "{}: no GEMM checks", dir.display());
    for path in &entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text =
            std::fs::read_to_string(path.join("gemm.json")).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let check: GemmCheck = serde_json::from_str(&text).unwrap();
        // The generated kernel, then cuBLASLt on the same GEMM; an f32 GEMM
        // also on cuBLASLt in TF32 (allow_tf32: inputs rounded to 10
        // mantissa bits, so a tolerance of 1e-2).
        let tf32 = (check.dtype == DType::F32).then_some((GemmPolicy::Library, true));
        for (policy, allow_tf32) in
            [(GemmPolicy::Generated, false), (GemmPolicy::Library, false)].into_iter().chain(tf32)
        {
            let tol = if allow_tf32 { check.tol.max(1e-2) } else { check.tol };
            let run = || -> Result<(f64, usize), String> {
                let module = CudaModule::load(path, 0).map_err(|e| e.to_string())?;
                let mut session = CudaSession::new(module, 0).map_err(|e| e.to_string())?;
                session.gemm = policy;
                session.allow_tf32 = allow_tf32;
                let inputs = check.inputs();
                let got = session.call("f", &inputs.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())?;
                Ok((compare("out", &got[0], &check.reference(&inputs), tol)?, session.library_calls("f")))
            };
            let what = if allow_tf32 { format!("{policy:?} TF32") } else { format!("{policy:?}") };
            match run() {
                Ok((worst, lt)) => {
                    library_runs += lt;
                    println!("ok   gemm {name:<24} {what}: worst relative difference {worst:.1e}, {lt} cuBLASLt calls")
                }
                Err(e) => {
                    println!("FAIL gemm {name:<24} {what}: {e}");
                    failures.push(format!("{name} ({what}): {e}"));
                }
            }
        }
    }
    if cuda::cublaslt_present() && library_runs == 0 {
        failures.push("libcublasLt is present but ran none of the GEMM checks".into());
    }
    assert!(
        failures.is_empty(),
        "{} of {} GEMM checks failed:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

/// The staged-call API used out of order says what to do, and a staged
/// call still runs after the errors.
#[test]
#[ignore = "needs a GPU and the GPU bundle (make gpu-bundle; target/gpu-bundle/run.sh)"]
fn staged_calls_out_of_order_are_clear_errors() {
    let cases = cases();
    let Some((dir, case)) = cases.iter().find(|(_, c)| c.calls.len() > 1) else {
        panic!("no train-step case in the bundle");
    };
    let module = CudaModule::load(dir, 0).unwrap();
    let mut session = CudaSession::new(module, case.seed).unwrap();
    let f = &case.function;
    let inputs: Vec<_> = case.calls[0].inputs.iter().collect();
    let message = |r: Result<(), RuntimeError>| r.unwrap_err().to_string();
    assert!(message(session.launch(f)).contains("no inputs staged"));
    assert!(message(session.finish(f).map(|_| ())).contains("no call running"));
    session.stage(f, &inputs).unwrap();
    session.stage(f, &inputs).unwrap();
    assert!(message(session.stage(f, &inputs)).contains("already staged"));
    session.launch(f).unwrap();
    assert!(message(session.launch(f)).contains("still running"));
    let got = session.finish(f).unwrap();
    for (i, (g, w)) in got.iter().zip(&case.calls[0].outputs).enumerate() {
        compare(&format!("output {i}"), g, w, case.tol).unwrap();
    }
}

/// The bundle's training runs (`runs/<name>`, the first 100 steps of `aicf
/// train` on the real data, written by the compiler's GPU tests) through
/// the runtime's `Backend` interface on the GPU: every loss as the CPU's
/// (the smaller last batch runs its variant); the CPU's checkpoint after
/// half the steps continues on the GPU to the CPU's final state; the GPU's
/// own checkpoint loads back into a fresh GPU session unchanged.
#[test]
#[ignore = "needs a GPU and the GPU bundle (make gpu-bundle; target/gpu-bundle/run.sh)"]
fn training_runs_match_the_cpu_and_checkpoints_cross_devices() {
    use aicf_runtime::{Device, checkpoint, cuda::TrainRun};
    require_gpu();
    let Some(dir) = bundle().and_then(|cases| Some(cases.parent()?.join("runs"))).filter(|d| d.is_dir()) else {
        panic!("no training runs in the GPU bundle (run `make gpu-bundle`, or set AICF_GPU_BUNDLE)");
    };
    let mut failures = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    assert!(!entries.is_empty(), "{}: no training runs", dir.display());
    for path in &entries {
        let run: TrainRun = serde_json::from_str(&std::fs::read_to_string(path.join("run.json")).unwrap()).unwrap();
        let open = || -> Result<Box<dyn Backend>, String> {
            let mut b = aicf_runtime::open(&path.join("main"), &Device::Cuda { ordinal: 0 }, run.seed)
                .map_err(|e| e.to_string())?;
            if path.join("variant").is_dir() {
                b.add_variant(&path.join("variant")).map_err(|e| e.to_string())?;
            }
            Ok(b)
        };
        let steps = |b: &mut dyn Backend, range: std::ops::Range<usize>| -> Result<f64, String> {
            let mut worst: f64 = 0.0;
            let end = range.end;
            for i in range {
                let inputs: Vec<_> = run.steps[i].iter().collect();
                // As `aicf train` runs on a GPU: the next batch copied
                // while this step computes.
                let next: Option<Vec<_>> = (i + 1 < end).then(|| run.steps[i + 1].iter().collect());
                let out = b
                    .call_staging_next("train_step", &inputs, next.as_deref())
                    .map_err(|e| format!("step {i}: {e}"))?;
                let (got, want) = (out[0].values[0], run.losses[i]);
                let err = (got - want).abs() / want.abs().max(1e-6);
                if !(err <= run.tol) {
                    return Err(format!(
                        "step {i}: loss {got} on the GPU, {want} on the CPU ({err:.1e} > {:.0e})",
                        run.tol
                    ));
                }
                worst = worst.max(err);
            }
            Ok(worst)
        };
        let compare_state = |b: &dyn Backend, file: &str| -> Result<f64, String> {
            let (entries, _) = checkpoint::load(&path.join(file)).map_err(|e| e.to_string())?;
            let mut worst: f64 = 0.0;
            let mut off = Vec::new();
            for (name, e) in entries {
                // Attention's key bias has no gradient in exact arithmetic
                // (adding q.b to every score of a row leaves its softmax
                // as it was): its gradient is rounding noise, which Adam
                // scales to full steps, so its values (and its moments)
                // are noise that differs between devices.
                if name.contains("k_proj.bias") {
                    continue;
                }
                let want = aicf_runtime::Tensor::new(
                    e.shape.clone(),
                    e.dtype,
                    aicf_runtime::host::read_values(&e.bytes, e.dtype),
                );
                let got = b.symbol(&name).ok_or_else(|| format!("no symbol {name}"))?;
                match compare(&name, &got, &want, run.state_tol) {
                    Ok(w) => worst = worst.max(w),
                    Err(e) => off.push(e),
                }
            }
            if off.is_empty() { Ok(worst) } else { Err(off.join("; ")) }
        };
        let result = (|| -> Result<String, String> {
            // Straight: every step's loss.
            let mut b = open()?;
            let losses = steps(b.as_mut(), 0..run.steps.len())?;
            let straight = compare_state(b.as_ref(), "cpu-final.safetensors")?;
            // The GPU's checkpoint, into a fresh GPU session.
            let saved = std::env::temp_dir().join(format!("aicf-gpu-{}-{}.safetensors", std::process::id(), run.name));
            b.save_checkpoint(&saved, &Default::default()).map_err(|e| e.to_string())?;
            let mut again = open()?;
            again.load_checkpoint(&saved).map_err(|e| e.to_string())?;
            for (name, want) in b.symbols() {
                let got = again.symbol(&name).ok_or_else(|| format!("no symbol {name}"))?;
                if got != want {
                    return Err(format!("{name} changed through the GPU's checkpoint"));
                }
            }
            // The CPU's checkpoint after half the steps, continued here.
            let mut resumed = open()?;
            resumed.load_checkpoint(&path.join("cpu-resume.safetensors")).map_err(|e| e.to_string())?;
            steps(resumed.as_mut(), run.resume_at..run.steps.len())?;
            let across = compare_state(resumed.as_ref(), "cpu-final.safetensors")?;
            Ok(format!(
                "{} steps, worst loss difference {losses:.1e}, final state {straight:.1e}; CPU checkpoint at step {} continued: {across:.1e}",
                run.steps.len(),
                run.resume_at
            ))
        })();
        match result {
            Ok(summary) => println!("ok   run {:<12} {summary}", run.name),
            Err(e) => {
                println!("FAIL run {:<12} {e}", run.name);
                failures.push(format!("{}: {e}", run.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} training runs failed:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}
