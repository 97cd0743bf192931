//===- LLDialect.cpp - ll dialect ---------------------------------------===//

#include "aicf/Dialect/LL/LLDialect.h"
#include "aicf/Dialect/LL/LLOps.h"

using namespace mlir;
using namespace ll;

#include "aicf/Dialect/LL/LLOpsDialect.cpp.inc"
#include "aicf/Dialect/LL/LLEnums.cpp.inc"

void LLDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "aicf/Dialect/LL/LLOps.cpp.inc"
      >();
}
