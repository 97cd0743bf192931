# lit configuration, for running the suite with LLVM's own driver:
#   lit -v test/          (after `cargo build -p aicf-tools`)
# `cargo test` (tools/tests/lit.rs) runs the same files with the same
# substitutions; keep the two in step.
import os
import lit.formats

config.name = "AICF"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
root = os.path.dirname(config.test_source_root)
config.test_exec_root = os.path.join(root, "target", "lit")
tools = os.environ.get("AICF_TOOLS_DIR", os.path.join(root, "target", "debug"))
llvm = os.environ.get("AICF_LLVM_BIN", "/usr/lib/llvm-22/bin")
config.environment["PATH"] = os.pathsep.join([tools, llvm, os.environ.get("PATH", "")])
# No test run goes into the user's run registry (a test that uses one
# names it with --runs-db), as under `cargo test`.
config.environment["AICF_RUNS_DB"] = "off"
