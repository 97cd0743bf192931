//! Builds the C++ half of AICF (CMakeLists.txt at the repository root: the
//! hl/ll dialects from ODS, the TableGen'd pass shells, the C API and the
//! aicf-opt driver entry point) and links its static archives. MLIR's own
//! archives are linked by mlir-sys.

use std::path::PathBuf;

include!("../runtime/host_instructions.rs");

fn main() {
    host_instructions();
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().expect("compiler/ lives in the workspace root").to_path_buf();
    for input in ["CMakeLists.txt", "dialects", "runtime/host_instructions.rs"] {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    println!("cargo:rerun-if-env-changed=MLIR_SYS_220_PREFIX");
    let prefix = std::env::var("MLIR_SYS_220_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-22".into());
    let mlir_dir = PathBuf::from(&prefix).join("lib/cmake/mlir");
    if !mlir_dir.join("MLIRConfig.cmake").exists() {
        panic!(
            "MLIR 22 not found at {} (MLIR_SYS_220_PREFIX={prefix}); run `make setup` to install \
             the toolchain",
            mlir_dir.display()
        );
    }
    let dst = cmake::Config::new(&root)
        .generator("Ninja")
        .define("MLIR_DIR", &mlir_dir)
        .profile("Release")
        .build_target("AICFOptMain")
        .build();
    // The cmake crate builds one target; the C API library is a separate
    // target that AICFOptMain does not depend on.
    let status = std::process::Command::new("cmake")
        .args(["--build", dst.join("build").to_str().unwrap(), "--target", "AICFCAPI"])
        .status()
        .expect("running cmake --build for AICFCAPI");
    assert!(status.success(), "building the AICFCAPI target failed");

    println!("cargo:rustc-link-search=native={}", dst.join("build/lib").display());
    // Dependents first: the linker resolves left to right.
    for lib in ["AICFOptMain", "AICFCAPI", "AICFTransforms", "AICFHLDialect", "AICFLLDialect"] {
        println!("cargo:rustc-link-lib=static={lib}");
    }
}
