//! The compiler's integration tests, in one binary because each test binary
//! links all of MLIR statically.

mod adapt;
mod api;
mod autodiff;
mod cpu;
mod eager;
mod export;
mod gpu;
mod interp;
mod lowering;
mod models;
mod nn;
mod onnx;
mod optimizer;
mod parallel;
mod precision;
mod train;
mod trainer;

/// This test process's scratch directory (`<target tmp>/run-<pid>`): two
/// test runs at once in one checkout do not share files. Directories of
/// runs whose process has ended are removed on first use.
pub(crate) fn tmp_root() -> std::path::PathBuf {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        if let Ok(entries) = std::fs::read_dir(&base) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("run-").and_then(|p| p.parse::<u32>().ok())
                    && pid != std::process::id()
                    && std::path::Path::new("/proc/self").exists()
                    && !std::path::Path::new(&format!("/proc/{pid}")).exists()
                {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let root = base.join(format!("run-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&root);
        root
    })
    .clone()
}
