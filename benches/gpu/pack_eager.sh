#!/usr/bin/env bash
# Packs eager mode's GPU tests into target/gpu-pack-eager (about 33 MB):
# the compiler's test binary (release, stripped, xz-compressed: it links
# MLIR, so the GPU machine compiles the ops' kernels itself) and eager.sh,
# which runs it there:
#   make gpu-pack-eager                       # here
#   bash target/gpu-pack-eager/eager.sh       # there, from the repository root
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/gpu-pack-eager
rm -rf "$out"
mkdir -p "$out"
exe=$(cargo test --release -p aicf-compiler --test compiler --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p')
[ -n "$exe" ] || { echo "the compiler's test binary did not build" >&2; exit 1; }
cp "$exe" "$out/compiler-tests"
strip "$out/compiler-tests"
xz -6 -T2 -f "$out/compiler-tests"
# The binary reads the repository (examples, data) and writes its scratch
# under the path it was built in.
echo "$(pwd)" > "$out/built-in"
cp benches/gpu/eager.sh "$out/"
du -sh "$out"
