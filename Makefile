# AICF: the two commands are `make demo` and `make test`; both install the
# toolchain first if it is missing (tools/setup.sh, silent when present).

CARGO ?= cargo
AICF_OPT := target/debug/aicf-opt

.PHONY: all setup build demo grow grow-lm test lit check-runtime-deps gpu-bundle gpu-pack gpu-pack-eager fmt clean onnx-venv onnx-fixtures onnx-conformance onnx-export-check

all: build

setup:
	@tools/setup.sh

build: setup
	$(CARGO) build --workspace

# The demo trains the digits MLP (examples/mlp/digits_mlp.mlir) with AICF's
# compiled CPU kernels: compile the train step (autodiff, Adam, fusion,
# memory plan, code generation), train 20 epochs on data/digits.csv.gz with
# 20% held out, print the held-out accuracy and where the plot is.
AICF := target/debug/aicf
demo: build
	@$(AICF) train examples/mlp/digits_mlp.mlir --data data/digits.csv.gz \
	  --optimizer adam --lr 3e-3 --epochs 20 --seed 0 --out target/demo

# Training that grows the model (examples/grow): the digits MLP starts 16
# units wide and widens fc1 on each loss plateau up to 128 (the demo's
# model), against that model trained from scratch for as many epochs;
# compare.py gives the training FLOPs each needed to reach the from-scratch
# run's best held-out loss. Every GEMM runs the generated kernel on 2
# threads (not the registry's timing-dependent choice), so the runs' bits,
# and the growth decisions they lead to, are the same on every machine.
DETERMINISTIC := --gemm generated --threads 2
grow: build
	@mkdir -p target/grow
	$(AICF) train examples/grow/narrow_mlp.mlir --data data/digits.csv.gz --optimizer adam --lr 3e-3 --epochs 30 \
	  --seed 0 --out target/grow/grown --adapt examples/grow/policy.toml $(DETERMINISTIC)
	$(AICF_OPT) examples/grow/narrow_mlp.mlir --hl-widen="layer=fc1 width=128" > target/grow/final_mlp.mlir
	$(AICF) train target/grow/final_mlp.mlir --data data/digits.csv.gz --optimizer adam --lr 3e-3 --epochs 30 \
	  --seed 0 --out target/grow/scratch $(DETERMINISTIC)
	@python3 examples/grow/compare.py target/grow/scratch/metrics.jsonl target/grow/grown/metrics.jsonl

# Growing a transformer language model (examples/grow_lm): the char LM of
# 4 blocks of width 128 from scratch (3 learning rates, 3 seeds) against the
# same model grown from 2 blocks of width 64 (at step 2000, at step 5000,
# on a held-out plateau), from 1 block of width 32, and from 1 x 32 in two
# stages, and the small 2 x 64 alone; then the comparison against the
# target trained on a tuned schedule (cosine or WSD), and all of it within
# one pass over the text (the 2x and 4x growth, the small model alone); the tables go to
# target/grow_lm/results.md.
# 47 runs of 2 to 11 minutes each on 2 cores (about 5 hours on the 2-core AMD EPYC),
# the late growth on 6 seeds; on a GPU: experiment.py --device cuda --jobs 8;
# the scheduled comparison alone: experiment.py --scheduled-only (about 45 minutes);
# within one pass over the text: experiment.py --one-pass-only --jobs 2 (about 11 minutes).
grow-lm: build
	@python3 examples/grow_lm/experiment.py --out target/grow_lm

# The ONNX tools: a venv of its own with torch (CPU), onnx, onnxruntime.
ONNX_VENV ?= target/onnx-venv
onnx-venv:
	@test -x $(ONNX_VENV)/bin/python || python3 -m venv $(ONNX_VENV)
	@$(ONNX_VENV)/bin/pip install -q -r tools/onnx/requirements.txt

# Regenerates test/onnx/*.onnx and their expected values from PyTorch.
onnx-fixtures: onnx-venv
	$(ONNX_VENV)/bin/python tools/onnx/export_models.py test/onnx

# ONNX's own backend node tests (all of them) through import, compile and
# the CPU runtime: the per-op table in target/onnx-conformance.md.
onnx-conformance: onnx-venv build
	$(ONNX_VENV)/bin/python tools/onnx/node_tests.py target/onnx-node
	AICF_ONNX_NODE_TESTS=$(CURDIR)/target/onnx-node $(CARGO) test -p aicf-compiler --test compiler \
		onnx_conformance_table -- --ignored --nocapture

# `aicf export`'s ONNX files (the examples, every op it writes) run in
# onnxruntime after onnx.checker's full check, against the interpreter.
onnx-export-check: onnx-venv
	AICF_ONNX_PYTHON=$(ONNX_VENV)/bin/python $(CARGO) test -p aicf-compiler --test compiler \
		exported_models_run_in_onnxruntime -- --ignored --nocapture

test: setup check-runtime-deps
	$(CARGO) test --workspace
	@# Ignored above, run here where it can: the read-only registry test mounts a
	@# tmpfs (root, and a container that allows mounts). Elsewhere it stays not run.
	@probe=$$(mktemp -d); \
	if mount -t tmpfs -o size=1M tmpfs $$probe 2>/dev/null; then \
	  umount $$probe; rmdir $$probe; \
	  $(CARGO) test -p aicf-compiler --lib a_registry_on_a_read_only_file_system_is_read -- --ignored; \
	else \
	  rmdir $$probe; echo "not run here: a_registry_on_a_read_only_file_system_is_read (mounting a tmpfs needs root)"; \
	fi
	@# Likewise the immutable checkpoint directory (chattr +i: root, and a file
	@# system with the flag, tried on a directory beside the tests' own).
	@mkdir -p target/tmp; probe=$$(mktemp -d -p target/tmp); \
	if chattr +i $$probe 2>/dev/null; then \
	  chattr -i $$probe; rmdir $$probe; \
	  $(CARGO) test -p aicf-tools --test robustness an_immutable_checkpoint_directory_is_named_before_training -- --ignored; \
	else \
	  rmdir $$probe; echo "not run here: an_immutable_checkpoint_directory_is_named_before_training (chattr +i needs root)"; \
	fi
	@# And the export's onnxruntime check, where the ONNX venv is (make onnx-venv).
	@if $(ONNX_VENV)/bin/python -c "import onnx, onnxruntime" 2>/dev/null; then \
	  AICF_ONNX_PYTHON=$(ONNX_VENV)/bin/python $(CARGO) test -p aicf-compiler --test compiler \
	    exported_models_run_in_onnxruntime -- --ignored; \
	else \
	  echo "not run here: exported_models_run_in_onnxruntime (needs $(ONNX_VENV) with onnx and onnxruntime: make onnx-venv)"; \
	fi

# The runtime must build without LLVM/MLIR (it is embedded on machines that
# have neither); fail if any crate of its dependency tree pulls them in.
check-runtime-deps:
	@if $(CARGO) tree -p aicf-runtime -e normal,build --prefix none | grep -iE '^(melior|mlir-sys|llvm|inkwell|tblgen)'; then \
	  echo "aicf-runtime depends on LLVM/MLIR (see above)"; exit 1; fi

# The GPU test bundle (target/gpu-bundle, about 64 MiB, 26 of them the MLP 784 case): the compiler's
# GPU tests write the cases (every kernel kind and the example train steps
# compiled to PTX, checked by ptxas, with the CPU path's results) and the
# benchmark artifacts; beside them the runtime's GPU test binary and
# gpu_bench (neither links LLVM/MLIR) and run.sh. On a GPU machine:
#   target/gpu-bundle/run.sh
BUNDLE := target/gpu-bundle
gpu-bundle: setup
	$(CARGO) test -p aicf-compiler --test compiler gpu::
	$(CARGO) build --release -p aicf-runtime --example gpu_bench
	@exe=$$($(CARGO) test --release -p aicf-runtime --test gpu --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p'); \
	  test -n "$$exe" && cp "$$exe" $(BUNDLE)/gpu-test
	cp target/release/examples/gpu_bench benches/gpu/run.sh benches/gpu/torch_baselines.py benches/gpu/ratios.py $(BUNDLE)/
	@du -sh $(BUNDLE)

# What a GPU session carries (target/gpu-pack, about 45 MB: the bundle and
# the stripped aicf, compressed, GPT-2's shape) and its one script:
#   bash target/gpu-pack/session.sh      (on the GPU machine)
gpu-pack: gpu-bundle
	benches/gpu/pack.sh

# Eager mode's tests on a GPU (target/gpu-pack-eager, about 33 MB: the
# compiler's test binary, stripped and compressed, and eager.sh), carried
# by a device call of its own (the two packs together pass the 64 MiB one
# call carries):
#   bash target/gpu-pack-eager/eager.sh  (on the GPU machine)
gpu-pack-eager: setup
	benches/gpu/pack_eager.sh

# Only the FileCheck regression suite.
lit: setup
	$(CARGO) test -p aicf-tools --test lit

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
