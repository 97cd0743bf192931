//! `AICF_CPU_ISA`: the CPU kernels built for another instruction set than
//! the host's (here AVX2 and FMA, `x86-64-v3`), so that the AVX2 path is
//! built, tested and measured on an AVX-512 machine too.

use std::path::PathBuf;
use std::process::Command;

fn aicf(isa: &str, args: &[&str]) -> std::process::Output {
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    Command::new(env!("CARGO_BIN_EXE_aicf"))
        .current_dir(&repo)
        .env("AICF_CPU_ISA", isa)
        .args(args)
        .output()
        .expect("aicf starts")
}

/// Compiled with `AICF_CPU_ISA=avx2`, the artifact's kernels are for
/// x86-64-v3 (its manifest lists AVX2 and FMA, no AVX-512 feature) and the
/// model trains on them (on a host with AVX2: every x86-64 CI machine); an
/// instruction set clang does not know is a clear error.
#[test]
#[cfg_attr(not(target_arch = "x86_64"), ignore = "AICF_CPU_ISA=avx2 names an x86-64 instruction set")]
fn kernels_build_and_train_for_another_instruction_set() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("isa-{}", std::process::id()));
    let artifact = out.join("avx2");
    let o = aicf("avx2", &["compile", "examples/mlp/digits_mlp.mlir", "-o", artifact.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifact.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["target"].as_str().unwrap().ends_with("x86-64-v3"), "{}", manifest["target"]);
    let features: Vec<&str> =
        manifest["cpu_features"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(features.contains(&"+avx2") && features.contains(&"+fma"), "{features:?}");
    assert!(!features.iter().any(|f| f.starts_with("+avx512")), "{features:?}");

    // The artifact a bench ran, from its "-> dir" or "using the compiled dir".
    let ran = |o: &std::process::Output| -> PathBuf {
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        let dir = text
            .lines()
            .find_map(|l| l.split_once(" -> ").map(|(_, d)| d).or_else(|| l.strip_prefix("using the compiled ")))
            .unwrap_or_else(|| panic!("no artifact named in:\n{text}"));
        PathBuf::from(dir.trim())
    };
    let bench = |isa: &str| {
        aicf(isa, &["bench", "examples/mlp/digits_mlp.mlir", "--steps", "3", "--out", out.to_str().unwrap()])
    };
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // A native build first, in the same cache: the AVX2 run must not
        // take its artifact.
        let native = bench("native");
        assert!(native.status.success(), "{}", String::from_utf8_lossy(&native.stderr));
        let o = bench("avx2");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("train step"));
        let used: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(ran(&o).join("manifest.json")).unwrap()).unwrap();
        assert!(used["target"].as_str().unwrap().ends_with("x86-64-v3"), "the AVX2 run used {}", used["target"]);
        if std::arch::is_x86_feature_detected!("avx512f") {
            assert_ne!(ran(&native), ran(&o), "the AVX2 run reused the native artifact");
        }
    } else {
        let o = bench("avx2");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("which this CPU lacks"), "{e}");
    }

    let o = aicf("bogus", &["compile", "examples/mlp/digits_mlp.mlir", "-o", out.join("bogus").to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("AICF_CPU_ISA") && e.contains("-march=bogus"), "{e}");
    let _ = std::fs::remove_dir_all(&out);
}
