//===- HLOps.h - hl dialect operations ---------------------------*- C++ -*-===//
#ifndef AICF_DIALECT_HL_HLOPS_H
#define AICF_DIALECT_HL_HLOPS_H

#include "aicf/Dialect/HL/HLDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace hl {
/// Fails on an attribute `op` does not define whose name has no dialect
/// prefix, naming the attributes it defines and the nearest one.
mlir::LogicalResult verifyKnownAttributes(mlir::Operation *op);

template <typename ConcreteType>
class KnownAttributes : public mlir::OpTrait::TraitBase<ConcreteType, KnownAttributes> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) { return verifyKnownAttributes(op); }
};
} // namespace hl

#define GET_OP_CLASSES
#include "aicf/Dialect/HL/HLOps.h.inc"

#endif // AICF_DIALECT_HL_HLOPS_H
