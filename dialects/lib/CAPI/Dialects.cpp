//===- Dialects.cpp - C API of the hl and ll dialects -------------------===//

#include "aicf-c/Dialects.h"

#include "aicf/Dialect/HL/HLDialect.h"
#include "aicf/Dialect/LL/LLDialect.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(HL, hl, hl::HLDialect)
MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(LL, ll, ll::LLDialect)

void aicfRegisterDialects(MlirDialectRegistry registry) {
  unwrap(registry)->insert<hl::HLDialect, ll::LLDialect>();
  // func.call can be inlined (the `inline` pass) in contexts the Rust API
  // creates, as it can in aicf-opt.
  mlir::func::registerInlinerExtension(*unwrap(registry));
}
