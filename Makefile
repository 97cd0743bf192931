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

# At this stage the demo compiles the example models' IR: parse, verify,
# print the parameter table, run hl through canonicalize + CSE, build the
# char LM with the Rust layer API, and build the MLP's train step.
demo: build
	@echo "== examples/mlp/digits_mlp.mlir: parameters"
	@$(AICF_OPT) examples/mlp/digits_mlp.mlir --hl-print-param-table -o /dev/null
	@echo "== examples/mlp/digits_mlp.mlir: verified hl after canonicalize + cse"
	@$(AICF_OPT) examples/mlp/digits_mlp.mlir --pass-pipeline='builtin.module(func.func(canonicalize,cse))'
	@echo "== examples/char_lm: traced from Rust (examples/char_lm/model.rs) into target/char_lm.mlir"
	@$(CARGO) run -q -p aicf-compiler --example models -- char_lm > target/char_lm.mlir
	@$(AICF_OPT) target/char_lm.mlir --hl-print-param-table=group-by-owner -o /dev/null 2>&1 | tail -n 4
	@echo "== examples/mlp/digits_mlp.mlir: the train step (hl-autodiff + hl-optimizer kind=adam), its state slots and ABI"
	@$(AICF_OPT) examples/mlp/digits_mlp.mlir --hl-optimizer=kind=adam --canonicalize --cse | grep -E '^  (hl.state|func.func @train_step)' | sed 's/, /,\n      /g' | head -n 40

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
