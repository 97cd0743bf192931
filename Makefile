# AICF: the two commands are `make demo` and `make test`; both install the
# toolchain first if it is missing (tools/setup.sh, silent when present).

CARGO ?= cargo
AICF_OPT := target/debug/aicf-opt

.PHONY: all setup build demo test lit check-runtime-deps fmt clean

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

test: setup check-runtime-deps
	$(CARGO) test --workspace

# The runtime must build without LLVM/MLIR (it is embedded on machines that
# have neither); fail if any crate of its dependency tree pulls them in.
check-runtime-deps:
	@if $(CARGO) tree -p aicf-runtime -e normal,build --prefix none | grep -iE '^(melior|mlir-sys|llvm|inkwell|tblgen)'; then \
	  echo "aicf-runtime depends on LLVM/MLIR (see above)"; exit 1; fi

# Only the FileCheck regression suite.
lit: setup
	$(CARGO) test -p aicf-tools --test lit

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
