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

# At this stage the demo compiles the example model's IR: parse, verify,
# print its parameter table, and run hl through canonicalize + CSE.
demo: build
	@echo "== examples/mlp/digits_mlp.mlir: parameters"
	@$(AICF_OPT) examples/mlp/digits_mlp.mlir --hl-print-param-table -o /dev/null
	@echo "== examples/mlp/digits_mlp.mlir: verified hl after canonicalize + cse"
	@$(AICF_OPT) examples/mlp/digits_mlp.mlir --pass-pipeline='builtin.module(func.func(canonicalize,cse))'

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
