/*===- aicf-c/Support.h - C API helpers missing upstream ---------*- C -*-===*/
#ifndef AICF_C_SUPPORT_H
#define AICF_C_SUPPORT_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Parses `source` as a module whose locations name `sourceName` as their
/// file (mlirModuleCreateParse leaves the file name empty). The module is
/// not verified. Returns a null module on failure; the diagnostics went to
/// the context's handlers.
MLIR_CAPI_EXPORTED MlirModule aicfParseModule(MlirContext context,
                                              MlirStringRef source,
                                              MlirStringRef sourceName);

/// Emits a remark (severity "remark") at `location` through the context's
/// diagnostic handlers: what a pass reports without failing.
MLIR_CAPI_EXPORTED void aicfEmitRemark(MlirLocation location,
                                       MlirStringRef message);

/// Sets `written[i]` for every operand `i` (of `count`) that `op` declares a
/// memory write to (MemoryEffectOpInterface, as `ll` ops declare with
/// `Arg<..., [MemWrite]>`): how the memory planner and the scheduler know
/// what a kernel writes without a table of op names. One query per op, so
/// an op with thousands of operands (a multi-tensor update) lists its
/// effects once.
MLIR_CAPI_EXPORTED void aicfWrittenOperands(MlirOperation op, bool *written,
                                            intptr_t count);

/// Infers `op`'s result types again from its operands and attributes
/// (InferTypeOpInterface) and sets them: how `hl-set-batch` carries a new
/// batch size through a function. Returns 1 when the types were set, 0 when
/// the op does not infer its types, and -1 when inference failed (the op's
/// diagnostic went to the context's handlers).
MLIR_CAPI_EXPORTED int aicfInferResultTypes(MlirOperation op);

#ifdef __cplusplus
}
#endif

#endif // AICF_C_SUPPORT_H
