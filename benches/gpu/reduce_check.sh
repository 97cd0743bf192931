#!/usr/bin/env bash
# The split reductions and the norm gradient's grouped rows on a GPU (the
# fifteenth session), in about 3 minutes, from the repository root of a copy
# that carries target/gpu-pack: the bundle's tests (every kernel case,
# kernel_reduce_split and kernel_norm_backward_rows among them, and the
# training runs against the CPU), the attention forward and backward beside
# SDPA's (its loss is a sum of 6.3 M values), nanoGPT's step beside
# torch.compile's and 2000 steps trained (the held-out loss checks the
# kernels in training), and GPT-2 small's step. Output to $OUT.
# Arguments name the steps to run, in order, repeats allowed (default:
# tests attention nanogpt gpt2); `attention attention` times it twice.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benches/gpu/unpack.sh
tests() {
mark tests
timeout 100 target/gpu-bundle/run.sh test > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"
grep -E "test result|FAIL|panicked|reduce_split|norm_backward_rows|run char_lm" "$OUT/tests.txt" | head -20
}
attention() {
mark attention
(cd target/gpu-bundle && {
  AICF_BENCH_PROFILE=1 AICF_BENCH_FLOPS=$((7 * 96 * 1024 * 1024 * 64)) ./gpu_bench bench/attention_bf16_train 20
  python3 -c 'import torch_baselines as t; t.attention()'
} >> "$OUT/attention.jsonl" 2>&1; python3 ratios.py "$OUT/attention.jsonl" | grep fwd; grep -E '"kernel"' "$OUT/attention.jsonl" | tail -9)
}
nanogpt() {
mark nanogpt
N="$aicf bench examples/nanogpt/nanogpt.mlir --device cuda --precision bf16 --optimizer adamw --out /tmp/rc-n --steps 100"
timeout 60 $N 2>&1 | tail -1
timeout 80 python3 benches/gpu/nanogpt.py --data data/tinyshakespeare.txt --mode compile --steps 300 2>&1 | tail -1
timeout 60 $N 2>&1 | tail -1
timeout 80 $aicf train examples/nanogpt/nanogpt.mlir --data data/tinyshakespeare.txt --device cuda --precision bf16 \
  --optimizer adamw --lr 1e-3 --weight-decay 0.1 --lr-schedule cosine --warmup-steps 100 \
  --epochs 10 --windows-per-epoch 12800 --no-progress --out /tmp/rc-t > "$OUT/nanogpt_train.txt" 2>&1
tail -3 "$OUT/nanogpt_train.txt"
}
gpt2() {
mark gpt2
timeout 60 $aicf bench $pack/gpt2.mlir --device cuda --precision bf16 --optimizer adamw --out /tmp/rc-b --steps 20 2>&1 | tail -1
}
for step in "${@:-tests attention nanogpt gpt2}"; do
  for s in $step; do
    case $s in tests | attention | nanogpt | gpt2) $s ;; *) echo "unknown step $s (tests, attention, nanogpt, gpt2)"; exit 2 ;; esac
  done
done
mark done
