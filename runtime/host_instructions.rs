// Included by the build scripts of the runtime and the compiler (both build
// tests of kernels that need optional CPU instructions).

/// Tells the tests which of the CPU's optional instructions the building
/// machine has (tests are built where they run): a test of a kernel that
/// needs one is ignored, and says so, where it is missing.
fn host_instructions() {
    println!("cargo::rustc-check-cfg=cfg(aicf_avx512f, aicf_avx512bf16, aicf_avx2)");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            println!("cargo::rustc-cfg=aicf_avx2");
        }
        if has!("avx512f") {
            println!("cargo::rustc-cfg=aicf_avx512f");
            if has!("avx512bf16") {
                println!("cargo::rustc-cfg=aicf_avx512bf16");
            }
        }
    }
}
