#!/usr/bin/env bash
# The GPU test bundle's one command (make gpu-bundle puts this file, the
# runtime's GPU test binary, gpu_bench and the compiled cases in one folder):
#   ./run.sh            the GPU tests, then the benchmarks
#   ./run.sh test       the GPU tests only
# Benchmark lines are JSON; with PyTorch installed its baselines run too.
set -euo pipefail
cd "$(dirname "$0")"
# cuBLASLt (a GEMM candidate) is loaded at run time: the CUDA toolkit's
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
if [ "${1:-all}" != bench ]; then
  # The GPU tests are #[ignore]d where no GPU is (make test): run them all.
  ./gpu-test --include-ignored --nocapture --test-threads 1
fi
[ "${1:-all}" = test ] && exit 0
benches() {
  local n=$((4096 * 4096))
  ./gpu_bench --copy $((4 * n))
  AICF_BENCH_BYTES=$((3 * 4 * n)) ./gpu_bench bench/elementwise 200
  AICF_BENCH_FLOPS=$((2 * 4096 * 4096 * 4096)) ./gpu_bench bench/gemm4096 10
  # the same f32 GEMM with TF32 allowed (its cuBLASLt line is the TF32 one)
  AICF_ALLOW_TF32=1 AICF_BENCH_FLOPS=$((2 * 4096 * 4096 * 4096)) ./gpu_bench bench/gemm4096 10
  AICF_BENCH_FLOPS=$((2 * 4096 * 4096 * 4096)) ./gpu_bench bench/gemm4096_bf16 20
  # the same bf16 GEMM under other tilings (block tile x bk, warps, stages)
  for v in bench/gemm4096_bf16-*; do
    AICF_BENCH_FLOPS=$((2 * 4096 * 4096 * 4096)) ./gpu_bench "$v" 20
  done
  # causal attention: half of the 4 L S d multiply-adds of 64 heads
  AICF_BENCH_FLOPS=$((2 * 64 * 1024 * 1024 * 64)) ./gpu_bench bench/attention 20
  # the same in bf16 on the tensor cores, GPT-2 small's 8 x 12 heads
  AICF_BENCH_FLOPS=$((2 * 96 * 1024 * 1024 * 64)) ./gpu_bench bench/attention_bf16 50
  # under other tilings (query fragments a warp, keys a tile, k/v buffers)
  for v in bench/attention_bf16-*; do
    AICF_BENCH_FLOPS=$((2 * 96 * 1024 * 1024 * 64)) ./gpu_bench "$v" 50
  done
  # forward and backward as a model's gradient runs them: the backward's
  # five products counted as FlashAttention counts them (2.5x the forward)
  AICF_BENCH_PROFILE=1 AICF_BENCH_FLOPS=$((7 * 96 * 1024 * 1024 * 64)) ./gpu_bench bench/attention_bf16_train 20
  ./gpu_bench cases/train_mlp784_sgd 500
  # aicf train's steps of the example models (Adam, their batch sizes)
  ./gpu_bench runs/digits_mlp/main 1000
  ./gpu_bench runs/digits_cnn/main 500
  # the same with its convolutions as products over window rows (--conv gemm)
  ./gpu_bench runs/digits_cnn_products/main 500
  ./gpu_bench runs/char_lm/main 200
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 torch_baselines.py
  else
    echo '{"bench":"torch","skipped":"no PyTorch with CUDA here"}'
  fi
}
# Every line to bench.jsonl (beside this script, or $AICF_BENCH_OUT), then
# the table of ratios against PyTorch.
out="${AICF_BENCH_OUT:-bench.jsonl}"
status=0
benches 2>&1 | tee "$out" || status=$?
python3 ratios.py "$out"
exit "$status"
