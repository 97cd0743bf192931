#!/usr/bin/env bash
# Attention's fused backward on a GPU (the forward keeping each row's
# log-sum-exp for it since the twelfth session), in about 4 minutes, from the
# repository root of a copy that carries target/gpu-pack: the bundle's
# tests (its kernel cases and the bf16 char LM trained with it against the
# CPU), the attention benchmarks beside SDPA's, nanoGPT's step with and
# without it beside torch.compile's and 2000 steps trained with it, and
# GPT-2 small's step with and without it. Output to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benches/gpu/unpack.sh
mark tests
timeout 120 target/gpu-bundle/run.sh test > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"
grep -E "test result|FAIL|panicked|attention_backward|char_lm" "$OUT/tests.txt" | head -30
mark attention
(cd target/gpu-bundle && {
  AICF_BENCH_FLOPS=$((2 * 96 * 1024 * 1024 * 64)) ./gpu_bench bench/attention_bf16 50
  # the forward's other near-tie tiling, one query fragment a warp
  [ -d bench/attention_bf16-m1k64d ] && AICF_BENCH_FLOPS=$((2 * 96 * 1024 * 1024 * 64)) ./gpu_bench bench/attention_bf16-m1k64d 50
  AICF_BENCH_PROFILE=1 AICF_BENCH_FLOPS=$((7 * 96 * 1024 * 1024 * 64)) ./gpu_bench bench/attention_bf16_train 20
  python3 -c 'import torch_baselines as t; t.attention()'
} > "$OUT/attention.jsonl" 2>&1; python3 ratios.py "$OUT/attention.jsonl"; grep -E '"kernel"' "$OUT/attention.jsonl" | head -12)
mark nanogpt
N="$aicf bench examples/nanogpt/nanogpt.mlir --device cuda --precision bf16 --optimizer adamw --out /tmp/fc-n --steps 100"
for form in gemm fused; do timeout 60 $N --attention-backward $form 2>&1 | tail -1; done
timeout 90 python3 benches/gpu/nanogpt.py --data data/tinyshakespeare.txt --mode compile --steps 300 2>&1 | tail -1
for form in fused gemm; do timeout 60 $N --attention-backward $form 2>&1 | tail -1; done
timeout 100 $aicf train examples/nanogpt/nanogpt.mlir --data data/tinyshakespeare.txt --device cuda --precision bf16 \
  --attention-backward fused --optimizer adamw --lr 1e-3 --weight-decay 0.1 --lr-schedule cosine --warmup-steps 100 \
  --epochs 10 --windows-per-epoch 12800 --no-progress --out /tmp/fc-t > "$OUT/nanogpt_fused.txt" 2>&1
tail -3 "$OUT/nanogpt_fused.txt"
mark gpt2
B="$aicf bench $pack/gpt2.mlir --device cuda --precision bf16 --optimizer adamw --out /tmp/fc-b --steps 20"
for form in gemm fused; do timeout 90 $B --attention-backward $form 2>&1 | tail -1; done
mark done
