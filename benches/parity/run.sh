#!/usr/bin/env bash
# One to five optimizer steps of each example model in AICF and in a
# PyTorch re-implementation of it, from the same initial parameters and on
# the same batch, in fp32 (and PyTorch in fp64 as the reference): the
# losses, every parameter after the steps, the optimizer's state, and (from
# a one-step Adam checkpoint) the gradients. Prints the tables; AICF's
# errors against fp64 should be of the size of PyTorch fp32's.
#
#   benches/parity/run.sh            # from the repository root, after make build
#
# PyTorch from $PERFBASE_DIR/venv-torch (default ../perfbase, as
# benches/compare), with safetensors (pip install safetensors). Work in
# target/parity. The char LM runs with its dropout at 0 (its masks are
# AICF's own random stream: not comparable). CSV scaling and text windows
# are not exercised (the batches are .npy arrays, which train as they are).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PERFBASE_DIR=${PERFBASE_DIR:-$ROOT/../perfbase}
PY="$PERFBASE_DIR/venv-torch/bin/python"
AICF=${AICF:-$ROOT/target/debug/aicf}
[ -x "$PY" ] || { echo "no PyTorch at $PY (benches/compare's venv-torch)"; exit 1; }
"$PY" -c "import safetensors" 2>/dev/null || "$PY" -m pip install -q safetensors
HERE="$ROOT/benches/parity"
WORK="$ROOT/target/parity"
mkdir -p "$WORK" && cd "$WORK"
"$PY" "$HERE/mkdata.py"
sed 's/p = 1.000000e-01/p = 0.000000e+00/' "$ROOT/examples/char_lm/char_lm.mlir" > char_lm_nodrop.mlir

# aicf NAME MODEL OPTIMIZER LR STEPS [flags]: STEPS epochs of one batch.
aicf() {
  local name=$1 model=$2 opt=$3 lr=$4 steps=$5; shift 5
  local data=(); for d in $DATA; do data+=(--data "$d"); done
  rm -rf "ck_$name" "out_$name"
  "$AICF" train "$model" "${data[@]}" --optimizer "$opt" --lr "$lr" --epochs "$steps" --val-split 0 \
    --checkpoint-dir "ck_$name" --out "out_$name" --no-runs-db --no-progress --gemm generated --threads 1 "$@" \
    > "log_$name.txt" 2>&1 || { cat "log_$name.txt"; exit 1; }
}
# compare MODEL NAME OPTIMIZER LR STEPS INIT [parity.py flags]
compare() {
  local model=$1 name=$2 opt=$3 lr=$4 steps=$5 init=$6; shift 6
  "$PY" "$HERE/parity.py" "$model" "$opt" "$lr" "$steps" "$init" "ck_$name/last.safetensors" \
    "out_$name/metrics.jsonl" $DATA "$@"
}
# The initial parameters: one step at a rate that moves nothing in f32.
M="$ROOT/examples/mlp/digits_mlp.mlir"; export DATA="mlp_x.npy mlp_y.npy"
aicf mlp_init $M sgd 1e-30 1; I=ck_mlp_init/last.safetensors
aicf mlp_sgd5 $M sgd 0.1 5 && compare mlp mlp_sgd5 sgd 0.1 5 $I
aicf mlp_sgdm5 $M sgd 0.1 5 --momentum 0.9 --weight-decay 0.01 && compare mlp mlp_sgdm5 sgd 0.1 5 $I --momentum 0.9 --wd 0.01
aicf mlp_adam5 $M adam 0.003 5 --weight-decay 0.1 && compare mlp mlp_adam5 adam 0.003 5 $I --wd 0.1
aicf mlp_adamw5 $M adamw 0.003 5 --weight-decay 0.1 --clip-norm 0.1 --betas 0.9,0.99 &&
  compare mlp mlp_adamw5 adamw 0.003 5 $I --wd 0.1 --clip 0.1 --betas 0.9,0.99

M="$ROOT/examples/cnn/digits_cnn.mlir"; export DATA="cnn_x.npy cnn_y.npy"
aicf cnn_init $M adam 1e-30 1; I=ck_cnn_init/last.safetensors
aicf cnn_adam5 $M adam 0.003 5 && compare cnn cnn_adam5 adam 0.003 5 $I
aicf cnn_sgd5 $M sgd 0.05 5 --momentum 0.9 && compare cnn cnn_sgd5 sgd 0.05 5 $I --momentum 0.9

M=char_lm_nodrop.mlir; export DATA="lm_x.npy lm_y.npy"
aicf lm_init $M adam 1e-30 1; I=ck_lm_init/last.safetensors
aicf lm_adam1 $M adam 0.003 1 && "$PY" "$HERE/grads.py" charlm $I ck_lm_adam1/last.safetensors $DATA 0.003
aicf lm_adam5 $M adam 0.003 5 && compare charlm lm_adam5 adam 0.003 5 $I

M="$ROOT/examples/transformer/transformer_block.mlir"; export DATA="tb_x.npy tb_y.npy"
aicf tb_init $M adam 1e-30 1; I=ck_tb_init/last.safetensors
aicf tb_adam1 $M adam 0.001 1 && "$PY" "$HERE/grads.py" tblock $I ck_tb_adam1/last.safetensors $DATA 0.001
aicf tb_adam3 $M adam 0.001 3 && compare tblock tb_adam3 adam 0.001 3 $I
