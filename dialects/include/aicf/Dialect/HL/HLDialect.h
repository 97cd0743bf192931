//===- HLDialect.h - the hl dialect ------------------------------*- C++ -*-===//
#ifndef AICF_DIALECT_HL_HLDIALECT_H
#define AICF_DIALECT_HL_HLDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"

#include "aicf/Dialect/HL/HLOpsDialect.h.inc"
#include "aicf/Dialect/HL/HLEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "aicf/Dialect/HL/HLAttrs.h.inc"

#endif // AICF_DIALECT_HL_HLDIALECT_H
