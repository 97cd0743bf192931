# Sourced by the device checks (fused_check.sh, reduce_check.sh), from the
# repository root of a copy that carries target/gpu-pack: unpacks the GPU
# bundle and the release aicf ($aicf), sets $OUT (the device tool's folder,
# else target/gpu-session) and `mark` (a step's header with the seconds
# since the start), and names the GPU.
pack=target/gpu-pack
OUT=${OUT:-target/gpu-session}
mkdir -p "$OUT"
t0=$(date +%s)
mark() { echo "== +$(( $(date +%s) - t0 ))s $*"; }
(cd target && tar xJf gpu-pack/bundle.tar.xz) && xz -dkf "$pack/aicf.xz" && chmod +x "$pack/aicf" || exit 1
aicf=$pack/aicf
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
