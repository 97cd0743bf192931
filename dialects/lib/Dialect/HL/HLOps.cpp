//===- HLOps.cpp - hl operations: type inference and verifiers ----------===//

#include "aicf/Dialect/HL/HLOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace hl;

namespace {
/// Diagnostic for a failed result type inference. Inference runs before the
/// op exists, so the op name is spelled out the way emitOpError would.
InFlightDiagnostic inferError(std::optional<Location> loc, StringRef opName) {
  // Without a location the caller only probes whether inference succeeds.
  InFlightDiagnostic diag =
      loc ? mlir::emitError(*loc) : InFlightDiagnostic();
  if (loc)
    diag << "'" << opName << "' op ";
  return diag;
}

/// Dimension `i` of a static or dynamic shape, as printed in diagnostics.
std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}
} // namespace

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

/// NumPy broadcasting: align from the right; equal dims stay, a 1 stretches,
/// a dynamic dim against a static one > 1 takes the static one.
static LogicalResult inferBroadcastBinary(StringRef opName,
                                          std::optional<Location> loc,
                                          Type lhsType, Type rhsType,
                                          SmallVectorImpl<Type> &inferred) {
  auto lhs = cast<RankedTensorType>(lhsType);
  auto rhs = cast<RankedTensorType>(rhsType);
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, opName)
           << "operands have different element types: " << lhs << " and "
           << rhs;
  int64_t rank = std::max(lhs.getRank(), rhs.getRank());
  SmallVector<int64_t> shape(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t li = lhs.getRank() - rank + i, ri = rhs.getRank() - rank + i;
    int64_t l = li >= 0 ? lhs.getDimSize(li) : 1;
    int64_t r = ri >= 0 ? rhs.getDimSize(ri) : 1;
    if (l == r || r == 1) {
      shape[i] = l;
    } else if (l == 1) {
      shape[i] = r;
    } else if (ShapedType::isDynamic(l) || ShapedType::isDynamic(r)) {
      shape[i] = ShapedType::isDynamic(l) ? r : l;
    } else {
      return inferError(loc, opName)
             << "operands are not broadcast-compatible: " << lhs << " and "
             << rhs << " (result dimension " << i << ": " << dimStr(l)
             << " vs " << dimStr(r) << ")";
    }
  }
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

#define HL_BROADCAST_BINARY_INFER(OP)                                          \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBroadcastBinary(OP::getOperationName(), loc,                   \
                                adaptor.getLhs().getType(),                    \
                                adaptor.getRhs().getType(), inferred);         \
  }
HL_BROADCAST_BINARY_INFER(AddOp)
HL_BROADCAST_BINARY_INFER(MulOp)
#undef HL_BROADCAST_BINARY_INFER

//===----------------------------------------------------------------------===//
// ParamOp / GetParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  StringRef name = getSymName();
  StringRef owner = getOwner();
  if (!owner.empty() &&
      !(name.size() > owner.size() + 1 && name.starts_with(owner) &&
        name[owner.size()] == '.'))
    return emitOpError("owner \"")
           << owner << "\" is not a prefix of the parameter path \"" << name
           << "\" (expected \"" << owner << ".<name>\")";
  RankedTensorType type = getTensorType();
  if (getInit().usesFans() && type.getRank() < 2)
    return emitOpError("initializer '")
           << stringifyInitKind(getInit().getKind())
           << "' needs a parameter of rank >= 2 to compute its fans, but @"
           << name << " is " << type;
  if (!type.hasStaticShape())
    return emitOpError("parameter @")
           << name << " must have a static shape, got " << type;
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *symbol =
      symbolTable.lookupNearestSymbolFrom(getOperation(), getNameAttr());
  auto param = dyn_cast_or_null<ParamOp>(symbol);
  if (!param)
    return emitOpError("'@") << getName() << "' does not name an hl.param";
  if (param.getTensorType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match the type "
           << param.getTensorType() << " of parameter @" << getName();
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         MatmulOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = MatmulOp::getOperationName();
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
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
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  int64_t m = lhs.getDimSize(rank - (tl ? 1 : 2));
  int64_t kl = lhs.getDimSize(rank - (tl ? 2 : 1));
  int64_t kr = rhs.getDimSize(rank - (tr ? 1 : 2));
  int64_t n = rhs.getDimSize(rank - (tr ? 2 : 1));
  if (!ShapedType::isDynamic(kl) && !ShapedType::isDynamic(kr) && kl != kr)
    return inferError(loc, name)
           << "contracting dimensions differ: " << lhs << (tl ? " (transposed)" : "")
           << " has K = " << kl << " but " << rhs << (tr ? " (transposed)" : "")
           << " has K = " << kr;
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         LinearOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = LinearOp::getOperationName();
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (input.getRank() < 1)
    return inferError(loc, name) << "input must have rank >= 1, got " << input;
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
           << "input features " << in << " do not match the weight " << weight
           << " (expected [out, " << in << "])";
  int64_t out = weight.getDimSize(0);
  if (Value bias = adaptor.getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
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

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, CrossEntropyOp::Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  StringRef name = CrossEntropyOp::getOperationName();
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = cast<RankedTensorType>(adaptor.getLabels().getType());
  if (logits.getRank() != 2)
    return inferError(loc, name)
           << "logits must have rank 2 ([batch, classes]), got " << logits;
  if (labels.getRank() != 1)
    return inferError(loc, name)
           << "labels must have rank 1 ([batch]), got " << labels;
  int64_t n = logits.getDimSize(0), m = labels.getDimSize(0);
  if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(m) && n != m)
    return inferError(loc, name)
           << "batch sizes differ: logits " << logits << " and labels "
           << labels;
  inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "aicf/Dialect/HL/HLOps.cpp.inc"
