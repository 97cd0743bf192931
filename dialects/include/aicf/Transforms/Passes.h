//===- Passes.h - AICF passes ------------------------------------*- C++ -*-===//
#ifndef AICF_TRANSFORMS_PASSES_H
#define AICF_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace aicf {
#define GEN_PASS_DECL
#include "aicf/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "aicf/Transforms/Passes.h.inc"
} // namespace aicf

#endif // AICF_TRANSFORMS_PASSES_H
