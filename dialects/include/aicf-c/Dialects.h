/*===- aicf-c/Dialects.h - C API of the hl and ll dialects -------*- C -*-===*/
#ifndef AICF_C_DIALECTS_H
#define AICF_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(HL, hl);
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(LL, ll);

/// Inserts hl and ll into `registry`.
MLIR_CAPI_EXPORTED void aicfRegisterDialects(MlirDialectRegistry registry);

#ifdef __cplusplus
}
#endif

#endif // AICF_C_DIALECTS_H
