#!/usr/bin/env bash
# One GPU session's checks and measurements, in order of importance, each
# with a time limit (about 7 minutes in all on an H200), from the
# repository root of a copy that carries target/gpu-pack (benches/gpu/pack.sh):
#   1. the GPU bundle's tests (every kernel case, GEMM check and training
#      run against the CPU's results; NCCL in a group of one), and
#      gradient accumulation on CUDA against the CPU;
#   2. GPT-2 small's shape in bf16, AICF beside torch.compile, and a kernel
#      trace of AICF's step;
#   3. nanoGPT shakespeare_char: AICF's step, 2000 steps of both for
#      the held-out loss, then two rounds of the step alone, in turn;
#   4. the bundle's benchmarks and PyTorch's (GEMMs in bf16, f32 and TF32,
#      attention, elementwise, the example models' steps) with the ratios;
#   5. a growth under load.
# Everything it writes goes to $OUT (the device tool's folder) or
# target/gpu-session. SESSION_STEPS picks steps by name (default: all),
# for a session with little device time left:
#   SESSION_STEPS="tests accumulate" bash target/gpu-pack/session.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
pack=target/gpu-pack
OUT=${OUT:-target/gpu-session}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
t0=$(date +%s)
steps=" ${SESSION_STEPS:-tests accumulate gpt2 nanogpt benchmarks growth} "
# Prints the step's header and says whether SESSION_STEPS asks for it.
step() {
  if [[ "$steps" == *" $1 "* || "$1" == done ]]; then
    echo "== +$(( $(date +%s) - t0 ))s $*"
  else
    echo "== $* (not in SESSION_STEPS)"
    return 1
  fi
}
(cd target && tar xJf gpu-pack/bundle.tar.xz) && xz -dkf "$pack/aicf.xz" && chmod +x "$pack/aicf" || exit 1
aicf=$pack/aicf
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if step tests; then
  timeout 120 target/gpu-bundle/run.sh test > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"
  grep -E "test result|FAIL|panicked" "$OUT/tests.txt" | head -20
fi
if step accumulate; then
  # Gradient accumulation on CUDA (the built-in scale kernel, sums in
  # accumulator states on the device) against the CPU's run of the same
  # micro-batches and seed, which pack.sh made (no clang here for the CPU's kernels).
  # Seed 3: seed 2's run sits where a sum's rounding tips one hidden unit, so
  # the CPU's two GEMMs end 1.0e-4 apart on it (CUDA matched one to 8e-8).
  rm -rf /tmp/gs-acc-cuda   # a fresh run refuses a directory holding a checkpoint
  timeout 60 $aicf train examples/mlp/digits_mlp.mlir --data data/digits.csv.gz --no-progress --seed 3 --epochs 1 \
    --accumulate 2 --device cuda --out /tmp/gs-acc-cuda --checkpoint-dir /tmp/gs-acc-cuda/ckpt 2>&1 | tail -1
  python3 benches/gpu/compare_checkpoints.py /tmp/gs-acc-cuda/ckpt/last.safetensors \
    "$pack/accumulate-cpu.safetensors" 1e-4
fi
if step gpt2; then
  B="$aicf bench $pack/gpt2.mlir --device cuda --precision bf16 --optimizer adamw --out /tmp/gpu-session-b"
  # attention's backward fused (the GPU's default) and as GEMMs
  timeout 90 $B --steps 20 --attention-backward fused 2>&1 | tail -1
  timeout 90 $B --steps 20 --attention-backward gemm 2>&1 | tail -1
  timeout 60 $B --steps 2 --trace "$OUT/gpt2_trace.json" 2>&1 | tail -1
  timeout 150 python3 benches/gpu/nanogpt.py --data data/tinyshakespeare.txt --layers 12 --heads 12 --dim 768 \
    --context 1024 --vocab 50257 --dropout 0 --batch 8 --mode compile --steps 30 2>&1 | tail -1
fi
if step nanogpt; then
  timeout 60 $aicf bench examples/nanogpt/nanogpt.mlir --device cuda --precision bf16 --optimizer adamw \
    --out /tmp/gpu-session-n --steps 100 2>&1 | tail -1
  # The 2000 steps with attention's fused backward (the default here):
  # its held-out loss is the check of its kernels in training.
  timeout 120 $aicf train examples/nanogpt/nanogpt.mlir --data data/tinyshakespeare.txt --device cuda --precision bf16 \
    --attention-backward fused --optimizer adamw --lr 1e-3 --weight-decay 0.1 --lr-schedule cosine --warmup-steps 100 --epochs 10 \
    --windows-per-epoch 12800 --no-progress --out /tmp/gpu-session-t > "$OUT/nanogpt_aicf.txt" 2>&1
  tail -3 "$OUT/nanogpt_aicf.txt"
  timeout 150 python3 benches/gpu/nanogpt.py --data data/tinyshakespeare.txt --mode compile --steps 2000 2>&1 | tail -1
  # Two more rounds of the step alone, AICF and PyTorch in turn: PyTorch's
  # step was 9.8 ms on one H200 and 12.9 on another, so the ratio wants
  # pairs measured seconds apart.
  for round in 1 2; do
    for form in gemm fused; do
      timeout 60 $aicf bench examples/nanogpt/nanogpt.mlir --device cuda --precision bf16 --optimizer adamw \
        --out /tmp/gpu-session-n --steps 100 --attention-backward $form 2>&1 | tail -1
    done
    timeout 90 python3 benches/gpu/nanogpt.py --data data/tinyshakespeare.txt --mode compile --steps 300 2>&1 | tail -1
  done
fi
if step benchmarks; then
  AICF_BENCH_OUT="$OUT/bench.jsonl" timeout 240 target/gpu-bundle/run.sh bench 2>&1 | tail -25
fi
if step growth; then
  timeout 100 bash benches/gpu/growth_under_load.sh "$aicf" 3 2>&1 | tail -4
fi
step done
