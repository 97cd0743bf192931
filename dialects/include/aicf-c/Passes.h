/*===- aicf-c/Passes.h - AICF passes, bodies in Rust -------------*- C -*-===*\
|* The passes are declared in TableGen (aicf/Transforms/Passes.td). Their    *|
|* bodies are Rust functions installed with aicfSetPassBody before a pass   *|
|* runs; a pass whose body is missing fails with a diagnostic.              *|
\*===----------------------------------------------------------------------===*/
#ifndef AICF_C_PASSES_H
#define AICF_C_PASSES_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Body of a pass: runs on `op` with the pass's options printed as
/// `key=value` pairs separated by spaces (MLIR's textual pipeline form).
/// Returns failure to signal pass failure; diagnostics go through
/// mlirEmitError on the offending op's location.
typedef MlirLogicalResult (*AicfPassBodyFn)(MlirOperation op,
                                            MlirStringRef options,
                                            void *userData);

/// Installs the body of the pass whose command-line argument is `argument`.
/// Thread-safe; a later call replaces an earlier body.
MLIR_CAPI_EXPORTED void aicfSetPassBody(MlirStringRef argument,
                                        AicfPassBodyFn body, void *userData);

/// Registers every AICF pass in MLIR's global pass registry, so that
/// textual pipelines and `aicf-opt` flags can name them. Idempotent.
MLIR_CAPI_EXPORTED void aicfRegisterPasses(void);

#ifdef __cplusplus
}
#endif

#endif // AICF_C_PASSES_H
