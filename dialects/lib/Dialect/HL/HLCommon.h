//===- HLCommon.h - helpers of the hl ops' inference and verifiers -*- C++ -*-===//
//
// Shared by HLOps.cpp, HLComputeOps.cpp and HLDataOps.cpp (private to the
// dialect library).
//
//===----------------------------------------------------------------------===//

#ifndef AICF_LIB_DIALECT_HL_HLCOMMON_H
#define AICF_LIB_DIALECT_HL_HLCOMMON_H

#include "aicf/Dialect/HL/HLOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

#include <string>

namespace hl::detail {
using namespace mlir;
/// Diagnostic for a failed result type inference. Inference runs before the
/// op exists, so the op name is spelled out the way emitOpError would.
inline InFlightDiagnostic inferError(std::optional<Location> loc, StringRef opName) {
  // Without a location the caller only probes whether inference succeeds.
  InFlightDiagnostic diag =
      loc ? mlir::emitError(*loc) : InFlightDiagnostic();
  if (loc)
    diag << "'" << opName << "' op ";
  return diag;
}

/// Dimension `i` of a static or dynamic shape, as printed in diagnostics.
inline std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// `[a, b, c]` for diagnostics.
inline std::string listStr(ArrayRef<int64_t> values) {
  std::string s = "[";
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  return s + "]";
}

inline RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Folding a large non-splat constant would copy it into the IR; beyond
/// this many elements the op stays and runs as a kernel.
constexpr int64_t kMaxFoldedElements = 1 << 16;
/// The NumPy-style broadcast of `types`' shapes into `shape`; an error on
/// `loc` (when given) naming the op when they do not broadcast.
LogicalResult broadcastShapes(StringRef opName, std::optional<Location> loc, ArrayRef<RankedTensorType> types,
                              SmallVectorImpl<int64_t> &shape);
/// `axis` indexes a dimension of `type`, else an error on `op`.
inline LogicalResult verifyAxis(Operation *op, int64_t axis, RankedTensorType type) {
  if (axis < 0 || axis >= type.getRank())
    return op->emitOpError("axis ") << axis << " is out of range for " << type << " (expected 0 <= axis < "
                                    << type.getRank() << ")";
  return success();
}
} // namespace hl::detail

#endif // AICF_LIB_DIALECT_HL_HLCOMMON_H
