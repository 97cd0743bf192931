#!/usr/bin/env bash
# A growth on the GPU while another process keeps it busy: the check for
# the upload race fixed on 2026-11-25 (runtime/src/cuda/mod.rs,
# DeviceBuffer::upload). Before the fix, 2 of 3 such runs had their
# rewrite rejected (probe loss 1.91 -> 5.9: the grown model read
# half-carried parameters); each line below must say "accepted" with the
# probe loss unchanged. Needs an aicf binary, a GPU and PyTorch with CUDA
# (the load); run from the repository root:
#   benches/gpu/growth_under_load.sh [path/to/aicf] [runs]
set -uo pipefail
aicf="${1:-target/release/aicf}"
runs="${2:-5}"
out="$(mktemp -d)"
policy="$out/at1000.toml"
sed 's/^at = 5000/at = 1000/' examples/grow_lm/grow2x_late.toml > "$policy"
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda'); t = time.time()
while time.time() - t < $((runs * 15 + 10)):
    a = (a @ a).clamp(-1, 1)
torch.cuda.synchronize()" &
load=$!
sleep 3
status=0
for s in $(seq 1 "$runs"); do
  "$aicf" train examples/grow_lm/small2x.mlir --data data/tinyshakespeare.txt --device cuda --no-progress \
    --windows-per-epoch 3200 --epochs 7 --lr 3e-3 --seed "$s" --out "$out/run$s" --adapt "$policy" > "$out/run$s.log" 2>&1 \
    || { echo "run $s failed: $out/run$s.log"; status=1; continue; }
  python3 - "$out/run$s/decisions.jsonl" "$s" <<'EOF' || status=1
import json, sys
d = json.loads(open(sys.argv[1]).readline())
print(f"seed {sys.argv[2]}: {d['outcome']}, probe loss {d['loss_before']:.4f} -> {d['loss_after']:.4f}, "
      f"{d['compiled_kernels']} kernels compiled")
sys.exit(0 if d["outcome"] == "accepted" else 1)
EOF
done
kill "$load" 2>/dev/null
exit "$status"
