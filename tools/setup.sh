#!/usr/bin/env bash
# Installs what AICF builds and tests with, and only what is missing, so a
# second run is fast and silent:
#   - LLVM/MLIR 22 from Debian's packages (static MLIR libraries, mlir-tblgen,
#     FileCheck, not, split-file, lit), clang-22 and libclang for bindgen,
#     the libraries LLVM's static archives link against, cmake and ninja;
#   - OpenBLAS (libopenblas0-pthread), which the CPU runtime opens at run
#     time as one of its measured GEMM candidates;
#   - Open MPI (libopenmpi-dev, openmpi-bin: mpirun), the engine of
#     data-parallel training across processes and machines;
#   - a project-local Python venv (.venv) holding the nvidia-cuda-nvcc-cu12
#     wheel, whose ptxas validates generated PTX without a GPU
#     (linked as .venv/bin/ptxas), and on x86-64 Intel's MKL (the wheel
#     `mkl` alone, its libraries in .venv/lib: about 250 MB to fetch, 700
#     installed), which the CPU runtime opens at run time as one of its
#     measured GEMM candidates (the library PyTorch's CPU build multiplies
#     with; AICF_MKL= turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 libclang-22-dev
  libpolly-22-dev libzstd-dev libz3-dev libxml2-dev zlib1g-dev
  cmake ninja-build python3-venv
  libopenblas0-pthread
  libopenmpi-dev openmpi-bin
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi

if ! .venv/bin/ptxas --version >/dev/null 2>&1; then
  echo "setup: installing ptxas (nvidia-cuda-nvcc-cu12) into .venv"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check "nvidia-cuda-nvcc-cu12==12.9.86"
  ptxas=$(.venv/bin/python -c 'import nvidia.cuda_nvcc, os; print(os.path.join(list(nvidia.cuda_nvcc.__path__)[0], "bin", "ptxas"))')
  ln -sf "$ptxas" .venv/bin/ptxas
  .venv/bin/ptxas --version >/dev/null
fi

if [ "$(uname -m)" = x86_64 ] && ! ls .venv/lib/libmkl_rt.so.* >/dev/null 2>&1; then
  echo "setup: installing MKL (the mkl wheel) into .venv"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # --no-deps: the runtime uses MKL's sequential layer, which needs none of
  # the OpenMP or TBB runtimes the wheel depends on.
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "mkl==2026.2.1"
  ls .venv/lib/libmkl_rt.so.* >/dev/null
fi
