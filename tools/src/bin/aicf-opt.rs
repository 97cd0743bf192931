//! `aicf-opt`: the pass driver. It takes the standard `mlir-opt` flags
//! (`--pass-pipeline`, `-split-input-file`, `-verify-diagnostics`,
//! `--mlir-print-ir-after-all`, ...) and knows the hl/ll dialects, the
//! upstream dialects and passes, and every AICF pass (`aicf-opt --help`).

fn main() {
    std::process::exit(aicf_compiler::opt_main());
}
