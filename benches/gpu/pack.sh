#!/usr/bin/env bash
# Packs what a GPU session needs into target/gpu-pack (about 45 MB, under
# the 64 MiB a device call carries beside the repository): the GPU bundle
# (without the 26 MiB MLP 784 case) and the stripped release `aicf`, both
# xz-compressed, GPT-2 small's shape as hl, and session.sh, which runs
# everything on the GPU machine:
#   make gpu-pack                      # here (builds the bundle and aicf)
#   bash target/gpu-pack/session.sh    # there, from the repository root
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/gpu-pack
rm -rf "$out"
mkdir -p "$out"
cargo build -q --release -p aicf-tools
cp target/release/aicf "$out/aicf"
strip "$out/aicf"
xz -6 -T2 -f "$out/aicf"
(cd target && tar cf - --exclude=gpu-bundle/cases/train_mlp784_sgd gpu-bundle | xz -6 -T2 > gpu-pack/bundle.tar.xz)
cargo run -q --release -p aicf-compiler --example models -- char_lm layers=12 heads=12 dim=768 context=1024 \
  vocab=50257 dropout=0 batch=8 > "$out/gpt2.mlir"
# The CPU's run of session.sh's gradient accumulation check, made here: the
# GPU machine has no clang for the CPU's kernels.
rm -rf target/gpu-pack-acc-cpu
target/release/aicf train examples/mlp/digits_mlp.mlir --data data/digits.csv.gz --no-progress --seed 3 \
  --epochs 1 --accumulate 2 --threads 2 --out target/gpu-pack-acc-cpu \
  --checkpoint-dir target/gpu-pack-acc-cpu/ckpt > /dev/null
cp target/gpu-pack-acc-cpu/ckpt/last.safetensors "$out/accumulate-cpu.safetensors"
cp benches/gpu/session.sh "$out/"
du -sh "$out"
