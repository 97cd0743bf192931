#!/usr/bin/env bash
# Eager mode on a GPU, from the repository root of a copy that carries
# target/gpu-pack-eager (benches/gpu/pack_eager.sh): every eager test
# (the CUDA variants, ignored where no GPU is, and the CPU ones beside
# them). Output goes to $OUT
# (the device tool's folder) or target/gpu-session. EAGER_FILTER narrows
# the tests (default eager::, every one; eager::cuda for the GPU's alone).
set -uo pipefail
cd "$(dirname "$0")/../.."
pack=target/gpu-pack-eager
OUT=${OUT:-target/gpu-session}
mkdir -p "$OUT"
xz -dkf "$pack/compiler-tests.xz" && chmod +x "$pack/compiler-tests" || exit 1
# The tests find the repository at the path they were built in.
built=$(cat "$pack/built-in")
if [ "$(realpath -m "$built")" != "$(pwd)" ]; then
  if [ -e "$built" ]; then
    echo "$built exists and is not this checkout: run from there" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$built")" && ln -s "$(pwd)" "$built" || exit 1
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== eager tests"
timeout 400 "$pack/compiler-tests" --include-ignored --test-threads 1 "${EAGER_FILTER:-eager::}" > "$OUT/eager-tests.txt" 2>&1
echo "eager tests rc=$?"
grep -E "^test |test result|panicked" "$OUT/eager-tests.txt" | head -60
