//===- HLComputeOps.cpp - hl matrix, fused, reduction, norm and loss ops -----===//

#include "HLCommon.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace hl;
using namespace hl::detail;

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

static LogicalResult inferMatmul(StringRef name, std::optional<Location> loc,
                                 RankedTensorType lhs, RankedTensorType rhs,
                                 bool tl, bool tr,
                                 SmallVectorImpl<Type> &inferred) {
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return inferError(loc, name)
           << "operands must have rank >= 2, got " << lhs << " and " << rhs;
  if (lhs.getRank() != rhs.getRank())
    return inferError(loc, name)
           << "operands must have the same rank, got " << lhs << " and "
           << rhs;
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, name)
           << "operands have different element types: " << lhs << " and "
           << rhs;
  int64_t rank = lhs.getRank();
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank - 2; ++i) {
    if (lhs.getDimSize(i) != rhs.getDimSize(i))
      return inferError(loc, name)
             << "batch dimension " << i << " differs: " << lhs << " and "
             << rhs;
    shape.push_back(lhs.getDimSize(i));
  }
  int64_t m = lhs.getDimSize(rank - (tl ? 1 : 2));
  int64_t kl = lhs.getDimSize(rank - (tl ? 2 : 1));
  int64_t kr = rhs.getDimSize(rank - (tr ? 1 : 2));
  int64_t n = rhs.getDimSize(rank - (tr ? 2 : 1));
  if (!ShapedType::isDynamic(kl) && !ShapedType::isDynamic(kr) && kl != kr)
    return inferError(loc, name)
           << "contracting dimensions differ: lhs " << lhs << (tl ? " (transposed)" : "")
           << " has K = " << kl << " but rhs " << rhs << (tr ? " (transposed)" : "")
           << " has K = " << kr;
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         MatmulOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferMatmul(getOperationName(), loc, tensorOf(adaptor.getLhs()),
                     tensorOf(adaptor.getRhs()), adaptor.getTransposeLhs(),
                     adaptor.getTransposeRhs(), inferred);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         LinearOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = LinearOp::getOperationName();
  auto input = tensorOf(adaptor.getInput());
  auto weight = tensorOf(adaptor.getWeight());
  // Rows of features: the GEMM it lowers to (and its gradients) take a
  // row dimension. A single example is given as one row, [1, in].
  if (input.getRank() < 2)
    return inferError(loc, name)
           << "input must have rank >= 2 (rows of features, [..., rows, in]; "
              "one example is [1, in]), got "
           << input;
  if (weight.getRank() != 2)
    return inferError(loc, name)
           << "weight must have rank 2 ([out, in]), got " << weight;
  if (input.getElementType() != weight.getElementType())
    return inferError(loc, name)
           << "input and weight have different element types: " << input
           << " and " << weight;
  int64_t in = input.getDimSize(input.getRank() - 1);
  if (!ShapedType::isDynamic(in) && in != weight.getDimSize(1))
    return inferError(loc, name)
           << "input " << input << " has " << in << " features but the weight "
           << weight << " expects " << weight.getDimSize(1);
  int64_t out = weight.getDimSize(0);
  if (Value bias = adaptor.getBias()) {
    auto biasType = tensorOf(bias);
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != out ||
        biasType.getElementType() != weight.getElementType())
      return inferError(loc, name)
             << "bias must be "
             << RankedTensorType::get({out}, weight.getElementType())
             << ", got " << biasType;
  }
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = out;
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       GemmOp::Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  // Finite in f32, where the kernels multiply by it (as hl.attention's
  // scale: an infinite alpha was taken, every product then inf or NaN).
  // (Absent, it is its default, 1: the adaptor holds no attribute then.)
  if (FloatAttr alphaAttr = adaptor.getAlphaAttr()) {
    double alpha = alphaAttr.getValueAsDouble();
    if (!(std::fabs(alpha) <= 3.4028234663852886e38))
      return inferError(loc, name) << "alpha = " << alpha << " must be finite in f32";
  }
  RankedTensorType result;
  if (rhs.getRank() == 2 && lhs.getRank() > 2) {
    // linear form: rows are all leading dimensions of lhs
    if (tl)
      return inferError(loc, name)
             << "transpose_lhs needs operands of equal rank, got " << lhs
             << " and " << rhs;
    int64_t k = lhs.getDimSize(lhs.getRank() - 1);
    int64_t kr = rhs.getDimSize(tr ? 1 : 0), n = rhs.getDimSize(tr ? 0 : 1);
    if (lhs.getElementType() != rhs.getElementType() || k != kr)
      return inferError(loc, name) << "operands " << lhs << " and " << rhs
                                   << (tr ? " (transposed)" : "")
                                   << " do not contract";
    SmallVector<int64_t> shape(lhs.getShape());
    shape.back() = n;
    result = RankedTensorType::get(shape, lhs.getElementType());
  } else {
    SmallVector<Type> product;
    if (failed(inferMatmul(name, loc, lhs, rhs, tl, tr, product)))
      return failure();
    result = cast<RankedTensorType>(product.front());
  }
  int64_t n = result.getDimSize(result.getRank() - 1);
  if (Value bias = adaptor.getBias()) {
    auto expected = RankedTensorType::get({n}, result.getElementType());
    if (bias.getType() != expected)
      return inferError(loc, name) << "bias must be " << expected << ", got "
                                   << bias.getType();
  }
  for (auto [what, v] : {std::pair<StringRef, Value>{"mask", adaptor.getMask()},
                         {"residual", adaptor.getResidual()}})
    if (v && v.getType() != result)
      return inferError(loc, name) << what << " must have the result's type "
                                   << result << ", got " << v.getType();
  inferred.push_back(result);
  if (adaptor.getSumLhs()) {
    if (lhs.getRank() != 2 || rhs.getRank() != 2)
      return inferError(loc, name)
             << "sum_lhs needs rank-2 operands, got " << lhs << " and " << rhs;
    inferred.push_back(
        RankedTensorType::get({result.getDimSize(0)}, result.getElementType()));
  }
  return success();
}

/// Checks one elementwise group: `inputs` broadcast to the shared shape of
/// `results`, and `body` maps one scalar per input to one per result.
/// `group` names the group in diagnostics of a multi-tensor op.
static LogicalResult verifyElementwiseGroup(Operation *op, ValueRange inputs,
                                            ValueRange results, Block &body,
                                            const std::string &group) {
  auto error = [&]() {
    InFlightDiagnostic d = op->emitOpError();
    if (!group.empty())
      d << group << ": ";
    return d;
  };
  if (results.empty())
    return error() << "needs at least one result";
  auto resultType = cast<RankedTensorType>(results[0].getType());
  for (Value r : results.drop_front())
    if (cast<RankedTensorType>(r.getType()).getShape() != resultType.getShape())
      return error() << "results must share one shape, got " << resultType
                     << " and " << r.getType();
  for (auto [i, input] : llvm::enumerate(inputs)) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> shape;
    if (failed(broadcastShapes(op->getName().getStringRef(), std::nullopt,
                               {type, resultType}, shape)) ||
        ArrayRef<int64_t>(shape) != resultType.getShape())
      return error() << "input #" << i << " of type " << type
                     << " does not broadcast to the result shape of "
                     << resultType;
  }
  if (body.getNumArguments() != inputs.size())
    return error() << "body takes " << body.getNumArguments()
                   << " scalars but the op has " << inputs.size() << " inputs";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(body.getArguments(), inputs))) {
    auto [arg, input] = pair;
    Type elt = cast<RankedTensorType>(input.getType()).getElementType();
    if (arg.getType() != elt)
      return error() << "body argument #" << i << " has type " << arg.getType()
                     << " but input #" << i << " holds " << elt;
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != results.size())
    return error() << "body yields " << yield.getValues().size()
                   << " scalars for " << results.size() << " results";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(yield.getValues(), results))) {
    auto [value, result] = pair;
    Type elt = cast<RankedTensorType>(result.getType()).getElementType();
    if (value.getType() != elt)
      return error() << "yielded scalar #" << i << " has type "
                     << value.getType() << " but result #" << i << " holds "
                     << elt;
  }
  for (Operation &inner : body.without_terminator())
    if (!isPure(&inner) || inner.getNumRegions() != 0 ||
        !llvm::all_of(inner.getResultTypes(),
                      [](Type t) { return t.isIntOrFloat(); }))
      return inner.emitOpError("is not a side-effect-free scalar op; a fused "
                               "elementwise body holds only those");
  return success();
}

LogicalResult FusedElementwiseOp::verify() {
  return verifyElementwiseGroup(*this, getInputs(), getResults(),
                                getBody().front(), "");
}

LogicalResult MultiTensorApplyOp::verify() {
  Block &body = getBody().front();
  size_t k = body.getNumArguments();
  size_t m = cast<YieldOp>(body.getTerminator()).getValues().size();
  if (k == 0 || m == 0)
    return emitOpError("body must take and yield at least one scalar");
  if (getInputs().empty() || getInputs().size() % k != 0)
    return emitOpError("has ") << getInputs().size()
                               << " inputs, not a positive multiple of the body's "
                               << k << " arguments";
  size_t groups = getInputs().size() / k;
  if (getResults().size() != groups * m)
    return emitOpError("has ") << getResults().size() << " results for "
                               << groups << " groups of " << m;
  for (size_t g = 0; g < groups; ++g)
    if (failed(verifyElementwiseGroup(
            *this, getInputs().slice(g * k, k), getResults().slice(g * m, m),
            body, "group " + std::to_string(g))))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Checks `axes` (distinct, ascending, in range, non-empty) and infers the
/// reduced type.
static LogicalResult inferReduce(StringRef name, std::optional<Location> loc,
                                 RankedTensorType input, ArrayRef<int64_t> axes,
                                 bool keepdim, Type elementType,
                                 SmallVectorImpl<Type> &inferred) {
  if (axes.empty())
    return inferError(loc, name) << "needs at least one axis to reduce";
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= input.getRank())
      return inferError(loc, name)
             << "axis " << a << " is out of range for " << input
             << " (expected 0 <= axis < " << input.getRank() << ")";
    if (i > 0 && a <= axes[i - 1])
      return inferError(loc, name)
             << "axes " << listStr(axes) << " must be distinct and ascending";
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(input.getDimSize(d));
    else if (keepdim)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(
      shape, elementType ? elementType : input.getElementType()));
  return success();
}

#define HL_REDUCE_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferReduce(OP::getOperationName(), loc, tensorOf(adaptor.getInput()), \
                       adaptor.getAxes(), adaptor.getKeepdim(), Type(), inferred); \
  }
HL_REDUCE_INFER(ReduceSumOp)
HL_REDUCE_INFER(ReduceMeanOp)
HL_REDUCE_INFER(ReduceMaxOp)
#undef HL_REDUCE_INFER

LogicalResult ArgmaxOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         ArgmaxOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  int64_t axis = adaptor.getAxis();
  return inferReduce(getOperationName(), loc, tensorOf(adaptor.getInput()), {axis},
                     adaptor.getKeepdim(), IntegerType::get(ctx, 64), inferred);
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), tensorOf(getInput()));
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), tensorOf(getInput()));
}

/// The affine operands of layer_norm / rms_norm have the shape of the
/// normalised trailing `dims` dimensions.
static LogicalResult inferNorm(StringRef name, std::optional<Location> loc,
                               RankedTensorType input, int64_t dims,
                               ArrayRef<std::pair<StringRef, Value>> affine,
                               SmallVectorImpl<Type> &inferred) {
  if (dims > input.getRank())
    return inferError(loc, name) << "normalises the last " << dims
                                 << " dimensions but the input " << input
                                 << " has rank " << input.getRank();
  auto expected = RankedTensorType::get(
      input.getShape().take_back(dims), input.getElementType());
  for (auto [what, value] : affine)
    if (value && value.getType() != expected)
      return inferError(loc, name) << what << " must be " << expected
                                   << " (the normalised dimensions of "
                                   << input << "), got " << value.getType();
  inferred.push_back(input);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            LayerNormOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  // As nn.LayerNorm: a bias only with a weight (which also keeps the
  // printed form unambiguous).
  if (adaptor.getBias() && !adaptor.getWeight())
    return inferError(loc, getOperationName())
           << "a bias needs a weight (pass ones for an unscaled layer norm)";
  return inferNorm(getOperationName(), loc, tensorOf(adaptor.getInput()),
                   adaptor.getDims(),
                   {{"weight", adaptor.getWeight()}, {"bias", adaptor.getBias()}},
                   inferred);
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          RMSNormOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferNorm(getOperationName(), loc, tensorOf(adaptor.getInput()),
                   adaptor.getDims(), {{"weight", adaptor.getWeight()}}, inferred);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult inferCrossEntropy(StringRef name, std::optional<Location> loc,
                                       RankedTensorType logits,
                                       RankedTensorType labels,
                                       SmallVectorImpl<Type> &inferred) {
  if (logits.getRank() < 1)
    return inferError(loc, name)
           << "logits must have a class axis ([..., classes]), got " << logits;
  if (labels.getShape() != logits.getShape().drop_back())
    return inferError(loc, name)
           << "labels " << labels << " must have the shape of the logits "
           << logits << " without the class axis ("
           << listStr(logits.getShape().drop_back()) << ")";
  inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, CrossEntropyOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferCrossEntropy(getOperationName(), loc, tensorOf(adaptor.getLogits()),
                           tensorOf(adaptor.getLabels()), inferred);
}

/// The operands of a cross-entropy's backward forms: the forward's shape
/// rule, and a scalar upstream gradient of the logits' element type.
template <typename OpT>
static LogicalResult verifyCrossEntropyGrad(OpT op) {
  SmallVector<Type> loss;
  if (failed(inferCrossEntropy(op->getName().getStringRef(), op.getLoc(),
                               tensorOf(op.getLogits()), tensorOf(op.getLabels()),
                               loss)))
    return failure();
  if (op.getGradOutput().getType() != loss.front())
    return op.emitOpError("grad_output must be the loss's type ")
           << loss.front() << ", got " << op.getGradOutput().getType();
  return success();
}

LogicalResult CrossEntropyBackwardOp::verify() {
  return verifyCrossEntropyGrad(*this);
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  auto logits = tensorOf(getLogits());
  SmallVector<Type> loss;
  if (failed(inferCrossEntropy(getOperationName(), getLoc(), logits,
                               tensorOf(getLabels()), loss)))
    return failure();
  // The loss in the logits' type, or in f32 for 16-bit logits (the
  // softmax is computed in f32 either way).
  Type element = logits.getElementType();
  Type wide = RankedTensorType::get({}, Float32Type::get(getContext()));
  bool narrow = element.isBF16() || element.isF16();
  if (getGradOutput().getType() != loss.front() &&
      !(narrow && getGradOutput().getType() == wide))
    return emitOpError("grad_output must be the loss's type ")
           << loss.front() << (narrow ? " (or tensor<f32>)" : "") << ", got "
           << getGradOutput().getType();
  if (getLoss().getType() != getGradOutput().getType())
    return emitOpError("loss must be ") << getGradOutput().getType() << ", got "
                                        << getLoss().getType();
  if (std::optional<int64_t> classes = getClasses()) {
    int64_t row = logits.getShape().back();
    if (*classes < 1 || (!ShapedType::isDynamic(row) && *classes > row))
      return emitOpError("classes = ")
             << *classes << " must be in [1, " << row
             << "] (the logits' last dimension, " << logits << ")";
  }
  return success();
}

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          MseLossOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = tensorOf(adaptor.getInput()), target = tensorOf(adaptor.getTarget());
  if (input != target)
    return inferError(loc, getOperationName())
           << "input " << input << " and target " << target
           << " must have the same type";
  inferred.push_back(RankedTensorType::get({}, input.getElementType()));
  return success();
}

