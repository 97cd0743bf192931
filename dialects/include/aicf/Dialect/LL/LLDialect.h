//===- LLDialect.h - the ll dialect ------------------------------*- C++ -*-===//
#ifndef AICF_DIALECT_LL_LLDIALECT_H
#define AICF_DIALECT_LL_LLDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "aicf/Dialect/LL/LLOpsDialect.h.inc"
#include "aicf/Dialect/LL/LLEnums.h.inc"

#endif // AICF_DIALECT_LL_LLDIALECT_H
