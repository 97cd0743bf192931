//! GPU benchmarks of compiled artifacts (part of the GPU test bundle):
//!
//!   gpu_bench <artifact dir> [steps]
//!
//! Runs the artifact's function (`train_step`, else `f`) `steps` times on
//! the GPU, once launching kernel by kernel and once replaying a CUDA
//! Graph, and prints one JSON line per mode: milliseconds per call and,
//! for single-function artifacts, the bandwidth and FLOP rate the caller
//! asks for through `AICF_BENCH_BYTES` / `AICF_BENCH_FLOPS` (per call).
//! Inputs come from the directory's case.json when there is one, else are
//! deterministic values in [-1, 1). `gpu_bench --copy <bytes>` times a
//! device-to-device copy instead (the bandwidth reference). With
//! `AICF_BENCH_PROFILE` set, each kernel is then timed alone. GEMMs run
//! the generated kernels; where cuBLASLt can run some of them, a third line
//! times the call with cuBLASLt running those ("gemm":"cublaslt").

use aicf_runtime::Tensor;
use aicf_runtime::artifact::{DType, Role};
use aicf_runtime::cuda::{self, BundleCase, CudaModule, CudaSession, GemmPolicy};
use std::path::PathBuf;

fn main() {
    if let Err(e) = run() {
        eprintln!("gpu_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    cuda::available()?;
    if args.first().map(String::as_str) == Some("--copy") {
        let bytes: usize = args.get(1).and_then(|s| s.parse().ok()).ok_or("--copy <bytes>")?;
        let ms = cuda::time_copy(bytes, 50).map_err(|e| e.to_string())?;
        println!(
            "{{\"bench\":\"copy\",\"bytes\":{bytes},\"ms\":{ms:.4},\"gb_per_s\":{:.1}}}",
            2.0 * bytes as f64 / ms / 1e6
        );
        return Ok(());
    }
    let dir = PathBuf::from(args.first().ok_or("usage: gpu_bench <artifact dir> [steps]")?);
    let steps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let per_call = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<f64>().ok());
    let library = if cuda::cublaslt_present() { Some((true, GemmPolicy::Library)) } else { None };
    for (graphs, gemm) in [(false, GemmPolicy::Generated), (true, GemmPolicy::Generated)].into_iter().chain(library) {
        let module = CudaModule::load(&dir, 0).map_err(|e| e.to_string())?;
        let device = module.device_name();
        let function = if module.function("train_step").is_ok() { "train_step" } else { "f" };
        let f = module.function(function).map_err(|e| e.to_string())?.clone();
        let kernels = f.calls.len();
        // A training run's artifact (`runs/<name>/main`) takes its run's
        // first step.
        let run = dir.parent().map(|p| p.join("run.json")).and_then(|p| std::fs::read_to_string(p).ok());
        let inputs: Vec<Tensor> = match (std::fs::read_to_string(dir.join("case.json")), run) {
            (Ok(text), _) => {
                let case: BundleCase = serde_json::from_str(&text).map_err(|e| e.to_string())?;
                case.calls.first().ok_or("case.json has no calls")?.inputs.clone()
            }
            (_, Some(text)) => {
                let run: cuda::TrainRun = serde_json::from_str(&text).map_err(|e| e.to_string())?;
                run.steps.first().ok_or("run.json has no steps")?.clone()
            }
            _ => f
                .args
                .iter()
                .filter(|a| a.role() == Role::Input)
                .map(|a| {
                    let n: usize = a.shape.iter().product();
                    let values = match a.dtype {
                        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
                            (0..n).map(|i| ((i * 7919) % 2001) as f64 / 1000.0 - 1.0).collect()
                        }
                        _ => vec![0.0; n],
                    };
                    Tensor::new(a.shape.clone(), a.dtype, values)
                })
                .collect(),
        };
        let mut session = CudaSession::new(module, 0).map_err(|e| e.to_string())?;
        session.graphs = graphs;
        session.gemm = gemm;
        let ms = session.time(function, &inputs.iter().collect::<Vec<_>>(), steps).map_err(|e| e.to_string())?;
        let library_calls = session.library_calls(function);
        if gemm == GemmPolicy::Library && library_calls == 0 {
            continue;
        }
        // A run's artifact is named by its run (`runs/char_lm/main`: run_char_lm).
        let name = match dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default() {
            main if main == "main" => {
                format!("run_{}", dir.parent().and_then(|p| p.file_name()).unwrap_or_default().to_string_lossy())
            }
            other => other,
        };
        let mut line = format!(
            "{{\"bench\":\"{name}\",\"device\":\"{device}\",\"graphs\":{graphs},\"kernels\":{kernels},\"steps\":{steps},\"ms\":{ms:.4}"
        );
        if gemm == GemmPolicy::Library {
            line.push_str(&format!(",\"gemm\":\"cublaslt\",\"cublaslt_calls\":{library_calls}"));
            if session.allow_tf32 {
                line.push_str(",\"tf32\":true");
            }
        }
        if let Some(b) = per_call("AICF_BENCH_BYTES") {
            line.push_str(&format!(",\"gb_per_s\":{:.1}", b / ms / 1e6));
        }
        if let Some(fl) = per_call("AICF_BENCH_FLOPS") {
            line.push_str(&format!(",\"tflop_per_s\":{:.2}", fl / ms / 1e9));
        }
        println!("{line}}}");
        if graphs && gemm == GemmPolicy::Generated && std::env::var_os("AICF_BENCH_PROFILE").is_some() {
            for (k, (op, ms)) in session
                .profile(function, &inputs.iter().collect::<Vec<_>>())
                .map_err(|e| e.to_string())?
                .iter()
                .enumerate()
            {
                println!("{{\"kernel\":{k},\"op\":\"{op}\",\"ms\":{ms:.4}}}");
            }
        }
    }
    Ok(())
}
