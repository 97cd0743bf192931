//===- Support.cpp - C API helpers missing upstream ---------------------===//

#include "aicf-c/Support.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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

void aicfWrittenOperands(MlirOperation op, bool *written, intptr_t count) {
  for (intptr_t i = 0; i < count; ++i)
    written[i] = false;
  auto effects = llvm::dyn_cast<mlir::MemoryEffectOpInterface>(unwrap(op));
  if (!effects)
    return;
  llvm::SmallVector<mlir::MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  for (const mlir::MemoryEffects::EffectInstance &e : list)
    if (llvm::isa<mlir::MemoryEffects::Write>(e.getEffect()))
      if (mlir::OpOperand *operand = e.getEffectValue<mlir::OpOperand *>()) {
        intptr_t index = operand->getOperandNumber();
        if (index < count)
          written[index] = true;
      }
}

int aicfInferResultTypes(MlirOperation op) {
  mlir::Operation *o = unwrap(op);
  auto infer = llvm::dyn_cast<mlir::InferTypeOpInterface>(o);
  if (!infer)
    return 0;
  llvm::SmallVector<mlir::Type> types;
  if (mlir::failed(infer.inferReturnTypes(
          o->getContext(), o->getLoc(), o->getOperands(),
          o->getRawDictionaryAttrs(), o->getPropertiesStorage(),
          o->getRegions(), types)) ||
      types.size() != o->getNumResults())
    return -1;
  for (auto [result, type] : llvm::zip(o->getResults(), types))
    result.setType(type);
  return 1;
}
