//===- LLOps.h - ll dialect operations ---------------------------*- C++ -*-===//
#ifndef AICF_DIALECT_LL_LLOPS_H
#define AICF_DIALECT_LL_LLOPS_H

#include "aicf/Dialect/LL/LLDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "aicf/Dialect/LL/LLOps.h.inc"

#endif // AICF_DIALECT_LL_LLOPS_H
