//===- MathApproximation.cpp - MLIR's polynomial approximations ---------===//
//
// The one AICF pass with a C++ body: it applies MLIR's own patterns
// (mlir/Dialect/Math/Transforms), which have no C API, to the math ops the
// option names.
//
//===----------------------------------------------------------------------===//

#include "aicf/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace aicf {
#define GEN_PASS_DEF_AICFAPPROXIMATEMATH
#include "aicf/Transforms/Passes.h.inc"

namespace {
struct AICFApproximateMath
    : impl::AICFApproximateMathBase<AICFApproximateMath> {
  using Base::Base;

  void runOnOperation() override {
    llvm::SmallVector<std::string> names(ops.begin(), ops.end());
    if (names.empty())
      names.push_back(math::ExpOp::getOperationName().str());
    // The ops MLIR has a polynomial approximation of, but for `math.rsqrt`
    // (its approximation builds x86vector ops, a dialect AICF does not
    // load): any other name (a typo) is refused rather than approximating
    // nothing.
    static constexpr llvm::StringLiteral known[] = {
        "math.acos", "math.asin", "math.atan",  "math.atan2", "math.cbrt",
        "math.cos",  "math.erf",  "math.erfc",  "math.exp",   "math.expm1",
        "math.log",  "math.log2", "math.log1p", "math.sin",
        "math.tanh"};
    for (const std::string &name : names) {
      if (!llvm::is_contained(known, name)) {
        // (At the module's location, without the whole module printed
        // after it as the op the error is on.)
        mlir::emitError(getOperation()->getLoc())
            << "aicf-approximate-math: '" << name
            << "' is not an op this pass approximates (math.acos, math.asin, "
               "math.atan, math.atan2, math.cbrt, math.cos, math.erf, "
               "math.erfc, math.exp, math.expm1, math.log, math.log2, "
               "math.log1p, math.sin, math.tanh)";
        return signalPassFailure();
      }
    }
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [&](StringRef name) { return llvm::is_contained(names, name); });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
} // namespace aicf
