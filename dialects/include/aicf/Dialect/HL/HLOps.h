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

#define GET_OP_CLASSES
#include "aicf/Dialect/HL/HLOps.h.inc"

#endif // AICF_DIALECT_HL_HLOPS_H
