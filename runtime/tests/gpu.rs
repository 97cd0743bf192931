//! The GPU test bundle, replayed on a GPU: every case written by the
//! compiler's GPU tests (`make gpu-bundle`; every `ll` kernel kind on odd
//! and round shapes, and train steps of the example models) runs on the
//! device and must give what the CPU path gave, to the case's tolerance.
//!
//! The bundle's folder is `$AICF_GPU_BUNDLE`, else `cases/` beside this
//! test binary (the bundle's layout), else `target/gpu-bundle/cases`.
//! Without a GPU, or without a bundle, the test says why and passes.

use aicf_runtime::cuda::{self, BundleCase, CudaModule, CudaSession, GemmCheck, compare};
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

fn cases() -> Option<Vec<(PathBuf, BundleCase)>> {
    if let Err(why) = cuda::available() {
        println!("skipped: {why}");
        return None;
    }
    let Some(dir) = bundle() else {
        println!("skipped: no GPU bundle (run `make gpu-bundle`, or set AICF_GPU_BUNDLE)");
        return None;
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
    Some(found)
}

/// Runs one case: every call's outputs, then (train steps) every symbol.
/// With `graphs`, calls after the first replay a captured CUDA Graph; with
/// `streams`, calls run on the schedule's streams.
fn run_case(dir: &std::path::Path, case: &BundleCase, graphs: bool, streams: bool) -> Result<f64, String> {
    let module = CudaModule::load(dir, 0).map_err(|e| e.to_string())?;
    let mut session = CudaSession::new(module, case.seed).map_err(|e| e.to_string())?;
    session.graphs = graphs;
    session.streams = streams;
    let mut worst: f64 = 0.0;
    for (n, call) in case.calls.iter().enumerate() {
        let got = session.call(&case.function, &call.inputs.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())?;
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
    Ok(worst)
}

#[test]
fn every_bundle_case_matches_the_cpu_on_the_gpu() {
    let Some(cases) = cases() else { return };
    let mut failures = Vec::new();
    for (dir, case) in &cases {
        // Train steps run three ways: launch by launch on one stream, and
        // on the schedule's streams launch by launch and with graph replay.
        let modes: &[(bool, bool)] =
            if case.calls.len() > 1 { &[(false, false), (false, true), (true, true)] } else { &[(false, true)] };
        for &(graphs, streams) in modes {
            match run_case(dir, case, graphs, streams) {
                Ok(worst) => println!(
                    "ok   {:<28} graphs={graphs:<5} streams={streams:<5} worst relative difference {worst:.1e}",
                    case.name
                ),
                Err(e) => {
                    println!("FAIL {:<28} graphs={graphs:<5} streams={streams:<5} {e}", case.name);
                    failures.push(format!("{} (graphs={graphs}, streams={streams}): {e}", case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// The bundle's tensor-core GEMM checks (`gemm/<name>/gemm.json` beside
/// `cases/`): inputs made here, the result compared with the host's.
#[test]
fn every_gemm_check_matches_the_host_reference() {
    if let Err(why) = cuda::available() {
        println!("skipped: {why}");
        return;
    }
    let Some(dir) = bundle().and_then(|cases| Some(cases.parent()?.join("gemm"))).filter(|d| d.is_dir()) else {
        println!("skipped: no GEMM checks in the GPU bundle (run `make gpu-bundle`, or set AICF_GPU_BUNDLE)");
        return;
    };
    let mut failures = Vec::new();
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
        let run = || -> Result<f64, String> {
            let module = CudaModule::load(path, 0).map_err(|e| e.to_string())?;
            let mut session = CudaSession::new(module, 0).map_err(|e| e.to_string())?;
            let inputs = check.inputs();
            let got = session.call("f", &inputs.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())?;
            compare("out", &got[0], &check.reference(&inputs), check.tol)
        };
        match run() {
            Ok(worst) => println!("ok   gemm {name:<24} worst relative difference {worst:.1e}"),
            Err(e) => {
                println!("FAIL gemm {name:<24} {e}");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} GEMM checks failed:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}
