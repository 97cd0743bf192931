//===- Support.cpp - C API helpers missing upstream ---------------------===//

#include "aicf-c/Support.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

MlirModule aicfParseModule(MlirContext context, MlirStringRef source,
                           MlirStringRef sourceName) {
  // Verification is the caller's separate step, so that a syntax error and a
  // verifier error can be told apart.
  mlir::ParserConfig config(unwrap(context), /*verifyAfterParse=*/false);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(unwrap(source), config,
                                              unwrap(sourceName));
  return MlirModule{module.release().getOperation()};
}

void aicfEmitRemark(MlirLocation location, MlirStringRef message) {
  mlir::emitRemark(unwrap(location)) << unwrap(message);
}
