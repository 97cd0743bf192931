//===- HLOps.cpp - hl operations: symbols, constants, elementwise folds -----===//

#include "HLCommon.h"

#include <limits>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace hl;
using namespace hl::detail;

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

/// NumPy broadcasting of any number of shapes: align from the right; equal
/// dims stay, a 1 stretches, a dynamic dim against a static one > 1 takes the
/// static one.
LogicalResult hl::detail::broadcastShapes(StringRef opName, std::optional<Location> loc,
                                          ArrayRef<RankedTensorType> types,
                                          SmallVectorImpl<int64_t> &shape) {
  int64_t rank = 0;
  for (RankedTensorType t : types)
    rank = std::max(rank, t.getRank());
  shape.assign(rank, 1);
  for (int64_t i = 0; i < rank; ++i) {
    for (RankedTensorType t : types) {
      int64_t ti = t.getRank() - rank + i;
      int64_t d = ti >= 0 ? t.getDimSize(ti) : 1;
      int64_t &r = shape[i];
      if (d == r || d == 1)
        continue;
      if (r == 1 || ShapedType::isDynamic(r)) {
        r = d;
      } else if (ShapedType::isDynamic(d)) {
        continue;
      } else {
        auto diag = inferError(loc, opName) << "operands are not broadcast-compatible: ";
        llvm::interleave(types, diag, " and ");
        return diag << " (result dimension " << i << ": " << dimStr(r) << " vs "
                    << dimStr(d) << ")";
      }
    }
  }
  return success();
}

static LogicalResult inferBroadcast(StringRef opName, std::optional<Location> loc,
                                    ArrayRef<RankedTensorType> types,
                                    Type elementType,
                                    SmallVectorImpl<Type> &inferred) {
  for (RankedTensorType t : types.drop_front())
    if (t.getElementType() != types.front().getElementType()) {
      auto diag = inferError(loc, opName) << "operands have different element types: ";
      llvm::interleave(types, diag, " and ");
      return diag;
    }
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(opName, loc, types, shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(
      shape, elementType ? elementType : types.front().getElementType()));
  return success();
}

#define HL_BROADCAST_BINARY_INFER(OP)                                          \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBroadcast(OP::getOperationName(), loc,                         \
                          {tensorOf(adaptor.getLhs()), tensorOf(adaptor.getRhs())}, \
                          Type(), inferred);                                   \
  }
HL_BROADCAST_BINARY_INFER(AddOp)
HL_BROADCAST_BINARY_INFER(SubOp)
HL_BROADCAST_BINARY_INFER(MulOp)
HL_BROADCAST_BINARY_INFER(DivOp)
HL_BROADCAST_BINARY_INFER(PowOp)
HL_BROADCAST_BINARY_INFER(MaxOp)
HL_BROADCAST_BINARY_INFER(MinOp)
#undef HL_BROADCAST_BINARY_INFER

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          CompareOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(getOperationName(), loc,
                        {tensorOf(adaptor.getLhs()), tensorOf(adaptor.getRhs())},
                        IntegerType::get(ctx, 1), inferred);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         SelectOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType cond = tensorOf(adaptor.getCondition());
  RankedTensorType t = tensorOf(adaptor.getOnTrue());
  RankedTensorType f = tensorOf(adaptor.getOnFalse());
  if (t.getElementType() != f.getElementType())
    return inferError(loc, getOperationName())
           << "branches have different element types: " << t << " and " << f;
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(getOperationName(), loc, {cond, t, f}, shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes an op does not define
//===----------------------------------------------------------------------===//

LogicalResult hl::verifyKnownAttributes(Operation *op) {
  std::optional<RegisteredOperationName> info = op->getRegisteredInfo();
  if (!info)
    return success();
  for (NamedAttribute a : op->getDiscardableAttrs()) {
    StringRef name = a.getName().strref();
    // A dialect's own discardable attribute (`ll.recomputed`), as MLIR's
    // convention spells them, and a symbol's visibility (which MLIR's
    // symbol passes set on any symbol: --symbol-privatize).
    if (name.contains('.') ||
        name == SymbolTable::getVisibilityAttrName())
      continue;
    ArrayRef<StringAttr> known = info->getAttributeNames();
    InFlightDiagnostic diag = op->emitOpError()
                              << "has no attribute '" << name << "'";
    if (known.empty()) {
      diag << " (it takes none)";
      return diag;
    }
    StringRef nearest;
    unsigned best = ~0u;
    for (StringAttr k : known) {
      unsigned d = name.edit_distance(k.strref(), /*AllowReplacements=*/true);
      if (d < best) {
        best = d;
        nearest = k.strref();
      }
    }
    if (best <= std::max<size_t>(2, name.size() / 3))
      diag << "; did you mean '" << nearest << "'?";
    diag << " (it takes: ";
    llvm::interleaveComma(known, diag, [&](StringAttr k) { diag << k.strref(); });
    diag << "; a name with a dialect prefix, `dialect.name`, is kept as is)";
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Constant folding of elementwise ops
//===----------------------------------------------------------------------===//

namespace {
/// The elements of a folded operand at the result's shape: a splat, or a
/// dense value of exactly the result's shape. Broadcasting non-splat
/// constants is left to the kernel.
struct FoldOperand {
  DenseElementsAttr attr;
  bool ok(RankedTensorType resultType) const {
    return attr && (attr.isSplat() || attr.getType().getShape() == resultType.getShape());
  }
};

double toDouble(const APFloat &v) {
  APFloat d = v;
  bool lost;
  d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return d.convertToDouble();
}

APFloat fromDouble(double v, Type elementType) {
  APFloat f(v);
  bool lost;
  f.convert(cast<FloatType>(elementType).getFloatSemantics(),
            APFloat::rmNearestTiesToEven, &lost);
  return f;
}

bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type et = dense.getElementType();
  if (isa<FloatType>(et))
    return toDouble(dense.getSplatValue<APFloat>()) == value;
  if (et.isInteger(32) || et.isInteger(64))
    return dense.getSplatValue<APInt>().getSExtValue() == static_cast<int64_t>(value);
  return false;
}

/// Folds `fn` elementwise over float operands (computed in double and
/// rounded to the element type) or integer operands (`intFn`, which may
/// refuse, e.g. division by zero).
Attribute foldElementwise(
    ArrayRef<Attribute> operands, RankedTensorType resultType,
    function_ref<double(ArrayRef<double>)> fn,
    function_ref<std::optional<int64_t>(ArrayRef<int64_t>)> intFn = nullptr) {
  SmallVector<DenseElementsAttr> attrs;
  bool allSplat = true;
  for (Attribute a : operands) {
    FoldOperand op{dyn_cast_if_present<DenseElementsAttr>(a)};
    if (!op.ok(resultType))
      return {};
    attrs.push_back(op.attr);
    allSplat &= op.attr.isSplat();
  }
  int64_t n = allSplat ? 1 : resultType.getNumElements();
  if (!allSplat && (!resultType.hasStaticShape() || n > kMaxFoldedElements))
    return {};
  Type inType = attrs.front().getElementType();
  Type outType = resultType.getElementType();
  auto shapedOut = allSplat ? RankedTensorType::get(resultType.getShape(), outType)
                            : resultType;
  if (isa<FloatType>(inType) && isa<FloatType>(outType)) {
    SmallVector<APFloat> results;
    SmallVector<double> args(attrs.size());
    for (int64_t i = 0; i < n; ++i) {
      for (auto [j, a] : llvm::enumerate(attrs))
        args[j] = toDouble(a.isSplat() ? a.getSplatValue<APFloat>()
                                       : a.getValues<APFloat>()[i]);
      results.push_back(fromDouble(fn(args), outType));
    }
    return allSplat ? DenseElementsAttr::get(shapedOut, results.front())
                    : DenseElementsAttr::get(shapedOut, results);
  }
  if (intFn && isa<IntegerType>(inType) && inType == outType) {
    unsigned width = outType.getIntOrFloatBitWidth();
    SmallVector<APInt> results;
    SmallVector<int64_t> args(attrs.size());
    for (int64_t i = 0; i < n; ++i) {
      for (auto [j, a] : llvm::enumerate(attrs))
        args[j] = (a.isSplat() ? a.getSplatValue<APInt>() : a.getValues<APInt>()[i])
                      .getSExtValue();
      std::optional<int64_t> r = intFn(args);
      if (!r)
        return {};
      results.push_back(APInt(width, *r, /*isSigned=*/true));
    }
    return allSplat ? DenseElementsAttr::get(shapedOut, results.front())
                    : DenseElementsAttr::get(shapedOut, results);
  }
  return {};
}

/// `value` as the result when its type already is the result's: what an
/// identity fold (x + 0, x * 1, ...) may return.
OpFoldResult identity(Value value, Type resultType) {
  return value.getType() == resultType ? OpFoldResult(value) : OpFoldResult();
}
} // namespace

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  auto type = cast<RankedTensorType>(getType());
  if (Attribute r = foldElementwise({adaptor.getLhs(), adaptor.getRhs()}, type,
                                    [](ArrayRef<double> a) { return a[0] + a[1]; },
                                    [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                                      return a[0] + a[1];
                                    }))
    return r;
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return identity(getLhs(), type);
  if (isSplatOf(adaptor.getLhs(), 0.0))
    return identity(getRhs(), type);
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  auto type = cast<RankedTensorType>(getType());
  if (Attribute r = foldElementwise({adaptor.getLhs(), adaptor.getRhs()}, type,
                                    [](ArrayRef<double> a) { return a[0] - a[1]; },
                                    [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                                      return a[0] - a[1];
                                    }))
    return r;
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return identity(getLhs(), type);
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  auto type = cast<RankedTensorType>(getType());
  if (Attribute r = foldElementwise({adaptor.getLhs(), adaptor.getRhs()}, type,
                                    [](ArrayRef<double> a) { return a[0] * a[1]; },
                                    [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                                      return a[0] * a[1];
                                    }))
    return r;
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return identity(getLhs(), type);
  if (isSplatOf(adaptor.getLhs(), 1.0))
    return identity(getRhs(), type);
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  auto type = cast<RankedTensorType>(getType());
  // The smallest value of an integer element type: divided by -1 it
  // overflows (upstream's divsi declines to fold it, and in 64 bits the
  // folder's own division trapped).
  unsigned width = type.getElementType().isIntOrFloat() ? type.getElementType().getIntOrFloatBitWidth() : 64;
  int64_t smallest = width >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (width - 1));
  if (Attribute r = foldElementwise({adaptor.getLhs(), adaptor.getRhs()}, type,
                                    [](ArrayRef<double> a) { return a[0] / a[1]; },
                                    [smallest](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                                      if (a[1] == 0 || (a[1] == -1 && a[0] == smallest))
                                        return std::nullopt;
                                      return a[0] / a[1];
                                    }))
    return r;
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return identity(getLhs(), type);
  return {};
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  auto type = cast<RankedTensorType>(getType());
  if (Attribute r = foldElementwise({adaptor.getLhs(), adaptor.getRhs()}, type,
                                    [](ArrayRef<double> a) { return std::pow(a[0], a[1]); }))
    return r;
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return identity(getLhs(), type);
  return {};
}

/// NaN-propagating max/min, as torch.maximum/minimum.
static double nanMax(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}
static double nanMin(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs())
    return identity(getLhs(), getType());
  return foldElementwise({adaptor.getLhs(), adaptor.getRhs()},
                         cast<RankedTensorType>(getType()),
                         [](ArrayRef<double> a) { return nanMax(a[0], a[1]); },
                         [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                           return std::max(a[0], a[1]);
                         });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs())
    return identity(getLhs(), getType());
  return foldElementwise({adaptor.getLhs(), adaptor.getRhs()},
                         cast<RankedTensorType>(getType()),
                         [](ArrayRef<double> a) { return nanMin(a[0], a[1]); },
                         [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                           return std::min(a[0], a[1]);
                         });
}

#define HL_UNARY_FOLD(OP, EXPR)                                                \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldElementwise({adaptor.getInput()},                               \
                           cast<RankedTensorType>(getType()),                  \
                           [](ArrayRef<double> a) {                            \
                             double x = a[0];                                  \
                             return EXPR;                                      \
                           });                                                 \
  }
HL_UNARY_FOLD(ExpOp, std::exp(x))
HL_UNARY_FOLD(LogOp, std::log(x))
HL_UNARY_FOLD(ErfOp, std::erf(x))
HL_UNARY_FOLD(SinOp, std::sin(x))
HL_UNARY_FOLD(CosOp, std::cos(x))
HL_UNARY_FOLD(AtanOp, std::atan(x))
HL_UNARY_FOLD(FloorOp, std::floor(x))
HL_UNARY_FOLD(CeilOp, std::ceil(x))
// (The default rounding mode: to nearest, ties to even.)
HL_UNARY_FOLD(RoundOp, std::nearbyint(x))
HL_UNARY_FOLD(SqrtOp, std::sqrt(x))
HL_UNARY_FOLD(RsqrtOp, 1.0 / std::sqrt(x))
HL_UNARY_FOLD(TanhOp, std::tanh(x))
HL_UNARY_FOLD(SigmoidOp, 1.0 / (1.0 + std::exp(-x)))
HL_UNARY_FOLD(ReluOp, x > 0.0 ? x : (std::isnan(x) ? x : 0.0))
HL_UNARY_FOLD(SiluOp, x / (1.0 + std::exp(-x)))
#undef HL_UNARY_FOLD

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return foldElementwise({adaptor.getInput()}, cast<RankedTensorType>(getType()),
                         [](ArrayRef<double> a) { return -a[0]; },
                         [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                           return -a[0];
                         });
}

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getInput().getDefiningOp<AbsOp>())
    return inner.getResult();
  return foldElementwise({adaptor.getInput()}, cast<RankedTensorType>(getType()),
                         [](ArrayRef<double> a) { return std::fabs(a[0]); },
                         [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                           return a[0] < 0 ? -a[0] : a[0];
                         });
}

OpFoldResult GeluOp::fold(FoldAdaptor adaptor) {
  bool tanhForm = getApproximate() == GeluApproximation::Tanh;
  auto fn = [tanhForm](ArrayRef<double> a) {
    double x = a[0];
    if (tanhForm)
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  };
  return foldElementwise({adaptor.getInput()}, cast<RankedTensorType>(getType()), fn);
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  RankedTensorType in = tensorOf(getInput()), w = tensorOf(getWeight());
  if (w.getRank() != 0 || w.getElementType() != in.getElementType())
    return emitOpError("weight must be a rank-0 tensor of the input's element "
                       "type (")
           << in.getElementType() << "), got " << w;
  return success();
}

LogicalResult CastOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  if (in.getShape() != out.getShape())
    return emitOpError("changes the shape from ")
           << in << " to " << out << "; only the element type may change";
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto attr = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  auto out = cast<RankedTensorType>(getType());
  if (!attr || (!attr.isSplat() && attr.getNumElements() > kMaxFoldedElements))
    return {};
  Type from = attr.getElementType(), to = out.getElementType();
  // Float-to-float is the case that pays (constants written in f32 used
  // in bf16 graphs); other conversions run as kernels.
  if (!isa<FloatType>(from) || !isa<FloatType>(to))
    return {};
  SmallVector<APFloat> values;
  for (APFloat v : attr.getValues<APFloat>()) {
    bool lost;
    v.convert(cast<FloatType>(to).getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    values.push_back(v);
    if (attr.isSplat())
      break;
  }
  return attr.isSplat() ? DenseElementsAttr::get(out, values.front())
                        : DenseElementsAttr::get(out, values);
}

//===----------------------------------------------------------------------===//
// ParamOp / GetParamOp
//===----------------------------------------------------------------------===//

/// A symbol name every printer writes back: `@""` printed as
/// `@<<INVALID EMPTY SYMBOL>>`, which no parser reads.
static LogicalResult verifyNamed(Operation *op, StringRef name, StringRef what) {
  if (name.empty())
    return op->emitOpError("a ") << what << " needs a name (`@\"\"` prints as no symbol that parses back)";
  return success();
}

/// An integer tensor's initializer: zeros or ones (a random draw has no
/// integer meaning; `init <normal>` of an i64 state compiled).
static LogicalResult verifyIntegerInit(Operation *op, StringRef name, Type type, InitAttr init) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !isa<IntegerType>(tensor.getElementType()))
    return success();
  InitKind kind = init.getKind();
  if (kind == InitKind::Zeros || kind == InitKind::Ones || kind == InitKind::Data)
    return success();
  return op->emitOpError("initializer '")
         << stringifyInitKind(kind) << "' of @" << name << " draws floats; an integer " << type
         << " starts at zeros or ones";
}

LogicalResult StateOp::verify() {
  StringRef name = getSymName();
  if (failed(verifyNamed(getOperation(), name, "state")) ||
      failed(verifyIntegerInit(getOperation(), name, getType(), getInit())))
    return failure();
  for (auto [key, value] : {std::pair<StringRef, std::optional<int64_t>>{"ramp", getRamp()},
                            std::pair<StringRef, std::optional<int64_t>>{"delay", getDelay()}})
    if (value && *value < 0)
      return emitOpError(key) << " = " << *value << " of @" << name << " is a count of steps: at least 0";
  return success();
}

LogicalResult SetStateOp::verify() {
  // At most one per state in a function (the optimizer refused two, after
  // autodiff had run on them).
  auto func = getOperation()->getParentOfType<FunctionOpInterface>();
  if (!func)
    return success();
  Operation *first = nullptr;
  func->walk([&](SetStateOp other) {
    if (!first && other.getNameAttr() == getNameAttr())
      first = other.getOperation();
  });
  if (!first || first == getOperation())
    return success();
  InFlightDiagnostic diag = emitOpError("sets state @")
                            << getName() << " a second time in one function (at most one hl.set_state per state)";
  diag.attachNote(first->getLoc()) << "set first here";
  return diag;
}

LogicalResult ConstantOp::verify() {
  // Its values are read where the constant is lowered or folded: a blob's
  // were lost by convert-hl-to-ll, or refused as an internal error.
  if (isa<DenseResourceElementsAttr>(getValue()))
    return emitOpError("takes its values inline (dense<...>); a dense_resource blob is not supported");
  return success();
}

LogicalResult ParamOp::verify() {
  StringRef name = getSymName();
  StringRef owner = getOwner();
  if (failed(verifyNamed(getOperation(), name, "parameter")) ||
      failed(verifyIntegerInit(getOperation(), name, getTensorType(), getInit())))
    return failure();
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
  // The initializer's numbers within the element type's range: a mean of
  // 1e39 in f32 was infinity in every value, and the loss NaN at the first
  // step with nothing naming the initializer.
  if (auto floatType = dyn_cast<FloatType>(type.getElementType())) {
    InitAttr init = getInit();
    APFloat largest = APFloat::getLargest(floatType.getFloatSemantics());
    double most = largest.convertToDouble();
    std::pair<StringRef, APFloat> args[] = {{"mean", init.getMean()},
                                            {"std", init.getStd()},
                                            {"low", init.getLow()},
                                            {"high", init.getHigh()}};
    for (auto &[key, value] : args)
      if (std::fabs(value.convertToDouble()) > most) {
        // As written ("1e+39", not 9.9999999999999994E+38).
        char valueText[32], mostText[32];
        std::snprintf(valueText, sizeof valueText, "%.9g",
                      value.convertToDouble());
        std::snprintf(mostText, sizeof mostText, "%.9g", most);
        return emitOpError("initializer ")
               << key << " = " << valueText << " of @" << name
               << " is beyond what its element type " << floatType
               << " holds (at most " << mostText << " in magnitude)";
      }
  }
  if (llvm::is_contained(type.getShape(), 0))
    return emitOpError("parameter @")
           << name << " has a zero-size dimension (" << type
           << "); a parameter holds at least one value";
  // A tensor larger than any machine's memory (an option such as
  // hl-widen's width gone wrong) would overflow the byte counts of the
  // memory plan: 2^40 bytes (1 TiB) is the most one tensor may hold.
  uint64_t bytes = (type.getElementTypeBitWidth() + 7) / 8;
  for (int64_t d : type.getShape()) {
    if (d < 0 || bytes > (uint64_t(1) << 40) / uint64_t(d))
      return emitOpError("parameter @")
             << name << " (" << type
             << ") is larger than the 1 TiB a tensor may hold";
    bytes *= uint64_t(d);
  }
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *symbol =
      symbolTable.lookupNearestSymbolFrom(getOperation(), getNameAttr());
  auto param = dyn_cast_or_null<ParamOp>(symbol);
  if (!param && isa_and_nonnull<StateOp>(symbol))
    return emitOpError("'@") << getName()
                             << "' names an hl.state, not an hl.param: read "
                                "it with hl.get_state";
  if (!param)
    return emitOpError("'@") << getName() << "' does not name an hl.param";
  if (param.getTensorType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match the type "
           << param.getTensorType() << " of parameter @" << getName();
  return success();
}

LogicalResult StateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto ref = getParamAttr();
  if (!ref)
    return success();
  auto param = dyn_cast_or_null<ParamOp>(
      symbolTable.lookupNearestSymbolFrom(getOperation(), ref));
  if (!param)
    return emitOpError("'@") << ref.getValue() << "' does not name an hl.param";
  // A slot has its parameter's type; a 16-bit float parameter's slots may
  // be f32 (its optimizer updates it in f32).
  RankedTensorType paramType = param.getTensorType();
  auto slotType = dyn_cast<RankedTensorType>(getType());
  Type paramElement = paramType.getElementType();
  bool widened = slotType && slotType.getShape() == paramType.getShape() &&
                 (paramElement.isF16() || paramElement.isBF16()) &&
                 slotType.getElementType().isF32();
  if (paramType != getType() && !widened)
    return emitOpError("slot type ")
           << getType() << " differs from the type " << paramType
           << " of its parameter @" << ref.getValue()
           << " (a 16-bit float parameter's slots may be f32)";
  return success();
}

LogicalResult GetStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *symbol =
      symbolTable.lookupNearestSymbolFrom(getOperation(), getNameAttr());
  auto state = dyn_cast_or_null<StateOp>(symbol);
  if (!state && isa_and_nonnull<ParamOp>(symbol))
    return emitOpError("'@") << getName()
                             << "' names an hl.param, not an hl.state: read "
                                "it with hl.get_param";
  if (!state)
    return emitOpError("'@") << getName() << "' does not name an hl.state";
  if (state.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match the type " << state.getType()
           << " of state @" << getName();
  return success();
}

LogicalResult SetStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto state = dyn_cast_or_null<StateOp>(
      symbolTable.lookupNearestSymbolFrom(getOperation(), getNameAttr()));
  if (!state)
    return emitOpError("'@") << getName() << "' does not name an hl.state";
  if (state.getParamAttr())
    return emitOpError("state @")
           << getName() << " belongs to a parameter; the optimizer updates it";
  if (state.getType() != getValue().getType())
    return emitOpError("value type ")
           << getValue().getType() << " does not match the type "
           << state.getType() << " of state @" << getName();
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

Operation *HLDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

#define GET_OP_CLASSES
#include "aicf/Dialect/HL/HLOps.cpp.inc"
