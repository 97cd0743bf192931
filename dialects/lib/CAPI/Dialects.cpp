//===- Dialects.cpp - C API of the hl and ll dialects -------------------===//

#include "aicf-c/Dialects.h"

#include "aicf/Dialect/HL/HLDialect.h"
#include "aicf/Dialect/LL/LLDialect.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(HL, hl, hl::HLDialect)
MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(LL, ll, ll::LLDialect)

void aicfRegisterDialects(MlirDialectRegistry registry) {
  unwrap(registry)->insert<hl::HLDialect, ll::LLDialect>();
}
