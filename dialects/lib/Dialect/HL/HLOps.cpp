//===- HLOps.cpp - hl operations: type inference, verifiers, folders -----===//

#include "aicf/Dialect/HL/HLOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

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

/// `[a, b, c]` for diagnostics.
std::string listStr(ArrayRef<int64_t> values) {
  std::string s = "[";
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  return s + "]";
}

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Folding a large non-splat constant would copy it into the IR; beyond
/// this many elements the op stays and runs as a kernel.
constexpr int64_t kMaxFoldedElements = 1 << 16;
} // namespace

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

/// NumPy broadcasting of any number of shapes: align from the right; equal
/// dims stay, a 1 stretches, a dynamic dim against a static one > 1 takes the
/// static one.
static LogicalResult broadcastShapes(StringRef opName, std::optional<Location> loc,
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
  if (Attribute r = foldElementwise({adaptor.getLhs(), adaptor.getRhs()}, type,
                                    [](ArrayRef<double> a) { return a[0] / a[1]; },
                                    [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
                                      if (a[1] == 0)
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

LogicalResult StateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto ref = getParamAttr();
  if (!ref)
    return success();
  auto param = dyn_cast_or_null<ParamOp>(
      symbolTable.lookupNearestSymbolFrom(getOperation(), ref));
  if (!param)
    return emitOpError("'@") << ref.getValue() << "' does not name an hl.param";
  if (param.getTensorType() != getType())
    return emitOpError("slot type ")
           << getType() << " differs from the type " << param.getTensorType()
           << " of its parameter @" << ref.getValue();
  return success();
}

LogicalResult GetStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto state = dyn_cast_or_null<StateOp>(
      symbolTable.lookupNearestSymbolFrom(getOperation(), getNameAttr()));
  if (!state)
    return emitOpError("'@") << getName() << "' does not name an hl.state";
  if (state.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match the type " << state.getType()
           << " of state @" << getName();
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
           << "contracting dimensions differ: " << lhs << (tl ? " (transposed)" : "")
           << " has K = " << kl << " but " << rhs << (tr ? " (transposed)" : "")
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

static LogicalResult verifyAxis(Operation *op, int64_t axis, RankedTensorType type) {
  if (axis < 0 || axis >= type.getRank())
    return op->emitOpError("axis ")
           << axis << " is out of range for " << type << " (expected 0 <= axis < "
           << type.getRank() << ")";
  return success();
}

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
  if (failed(verifyCrossEntropyGrad(*this)))
    return failure();
  if (getLoss().getType() != getGradOutput().getType())
    return emitOpError("loss must be ") << getGradOutput().getType() << ", got "
                                        << getLoss().getType();
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

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type from ")
           << in.getElementType() << " to " << out.getElementType();
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return emitOpError("needs static shapes, got ") << in << " to " << out;
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in << " (" << in.getNumElements() << " elements) to " << out
           << " (" << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  if (auto attr = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return attr.reshape(cast<ShapedType>(getType()));
  return {};
}

static bool isIdentityPermutation(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (static_cast<int64_t>(i) != p)
      return false;
  return true;
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            TransposeOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<bool> seen(input.getRank(), false);
  bool valid = static_cast<int64_t>(perm.size()) == input.getRank();
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= input.getRank() || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    return inferError(loc, getOperationName())
           << "permutation " << listStr(perm) << " is not a permutation of the "
           << input.getRank() << " dimensions of " << input;
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(input.getDimSize(p));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  if (isIdentityPermutation(getPermutation()))
    return getInput();
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    // result[i] = inner.result[outer[i]] = input[innerPerm[outer[i]]].
    SmallVector<int64_t> composed;
    for (int64_t p : getPermutation())
      composed.push_back(inner.getPermutation()[p]);
    if (isIdentityPermutation(composed))
      return inner.getInput();
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    return getResult();
  }
  if (auto attr = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    if (attr.isSplat())
      return attr.resizeSplat(cast<ShapedType>(getType()));
  return {};
}

LogicalResult BroadcastToOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type from ")
           << in.getElementType() << " to " << out.getElementType();
  bool ok = in.getRank() <= out.getRank();
  for (int64_t i = 0; ok && i < in.getRank(); ++i) {
    int64_t d = in.getDimSize(in.getRank() - 1 - i);
    ok = d == 1 || d == out.getDimSize(out.getRank() - 1 - i);
  }
  if (!ok)
    return emitOpError("cannot broadcast ")
           << in << " to " << out
           << " (aligned from the right, each input dimension must equal the "
              "result's or be 1)";
  return success();
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto attr = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    if (attr.isSplat())
      return attr.resizeSplat(cast<ShapedType>(getType()));
  return {};
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ConcatOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto inputs = adaptor.getInputs();
  if (inputs.empty())
    return inferError(loc, name) << "needs at least one input";
  auto first = tensorOf(inputs.front());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return inferError(loc, name) << "axis " << axis << " is out of range for "
                                 << first << " (expected 0 <= axis < "
                                 << first.getRank() << ")";
  SmallVector<int64_t> shape(first.getShape());
  for (Value v : inputs.drop_front()) {
    auto t = tensorOf(v);
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType())
      return inferError(loc, name) << "inputs must have the same rank and element type, got "
                                   << first << " and " << t;
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (d == axis)
        continue;
      if (t.getDimSize(d) != first.getDimSize(d))
        return inferError(loc, name)
               << "inputs differ in dimension " << d << " (not the concatenation axis "
               << axis << "): " << first << " and " << t;
    }
    if (ShapedType::isDynamic(shape[axis]) || t.isDynamicDim(axis))
      shape[axis] = ShapedType::kDynamic;
    else
      shape[axis] += t.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SliceOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    strides = adaptor.getStrides();
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(start.size()) != rank ||
      static_cast<int64_t>(limit.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return inferError(loc, name) << "start, limit and strides need one entry per dimension of "
                                 << input << " (" << rank << "), got "
                                 << start.size() << ", " << limit.size() << " and "
                                 << strides.size();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = input.getDimSize(d);
    if (strides[d] < 1)
      return inferError(loc, name) << "stride " << strides[d] << " in dimension " << d
                                   << " must be >= 1";
    if (start[d] < 0 || start[d] > limit[d] ||
        (!ShapedType::isDynamic(size) && limit[d] > size))
      return inferError(loc, name)
             << "window " << start[d] << ":" << limit[d] << " in dimension " << d
             << " is outside " << input << " (need 0 <= start <= limit <= "
             << dimStr(size) << ")";
    shape.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() && llvm::all_of(getStart(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  if (auto attr = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    if (attr.isSplat())
      return attr.resizeSplat(cast<ShapedType>(getType()));
  return {};
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         GatherOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = tensorOf(adaptor.getInput());
  auto indices = tensorOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input.getRank())
    return inferError(loc, getOperationName())
           << "axis " << axis << " is out of range for " << input
           << " (expected 0 <= axis < " << input.getRank() << ")";
  SmallVector<int64_t> shape(input.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, input.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Vision
//===----------------------------------------------------------------------===//

namespace {
/// Checks an `[h, w]` attribute: two entries, each at least `min`.
LogicalResult checkPair(StringRef name, std::optional<Location> loc,
                        StringRef what, ArrayRef<int64_t> v, int64_t min) {
  if (v.size() != 2 || v[0] < min || v[1] < min)
    return inferError(loc, name) << what << " must be [h, w] with entries >= "
                                 << min << ", got " << listStr(v);
  return success();
}

/// Output size of a sliding window, or a diagnostic when it is empty.
LogicalResult windowOutput(StringRef name, std::optional<Location> loc,
                           RankedTensorType input, int64_t size, int64_t kernel,
                           int64_t stride, int64_t pad, int64_t dilation,
                           int64_t &out) {
  if (ShapedType::isDynamic(size)) {
    out = ShapedType::kDynamic;
    return success();
  }
  int64_t span = dilation * (kernel - 1) + 1;
  if (size + 2 * pad < span)
    return inferError(loc, name) << "the window (" << span
                                 << " with dilation) does not fit the padded input "
                                 << input << " (size " << size << " + 2 * "
                                 << pad << ")";
  out = (size + 2 * pad - span) / stride + 1;
  return success();
}

/// Positions of (channel, height, width) in an image batch.
struct ImageDims {
  int64_t c, h, w;
};
/// Inference may run before default-valued attributes are populated (while
/// parsing), so an absent layout is the default, NCHW.
ImageDims imageDims(LayoutAttr layout) {
  return !layout || layout.getValue() == Layout::NCHW ? ImageDims{1, 2, 3}
                                                      : ImageDims{3, 1, 2};
}
} // namespace

/// The shape rule of a 2-D convolution, shared by conv2d and its backward
/// ops (which check that their operands and result fit it).
static LogicalResult inferConv2d(StringRef name, std::optional<Location> loc,
                                 RankedTensorType input, RankedTensorType weight,
                                 Type biasType, ArrayRef<int64_t> stride,
                                 ArrayRef<int64_t> padding,
                                 ArrayRef<int64_t> dilation, int64_t groups,
                                 LayoutAttr layout,
                                 SmallVectorImpl<Type> &inferred) {
  if (input.getRank() != 4 || weight.getRank() != 4)
    return inferError(loc, name) << "input and weight must have rank 4, got "
                                 << input << " and " << weight;
  if (input.getElementType() != weight.getElementType())
    return inferError(loc, name) << "input and weight have different element types: "
                                 << input << " and " << weight;
  if (failed(checkPair(name, loc, "stride", stride, 1)) ||
      failed(checkPair(name, loc, "padding", padding, 0)) ||
      failed(checkPair(name, loc, "dilation", dilation, 1)))
    return failure();
  ImageDims dims = imageDims(layout);
  int64_t channels = input.getDimSize(dims.c);
  int64_t out = weight.getDimSize(0);
  if (out % groups != 0)
    return inferError(loc, name) << "output channels " << out
                                 << " are not divisible by groups = " << groups;
  if (!ShapedType::isDynamic(channels) &&
      (channels % groups != 0 || channels / groups != weight.getDimSize(1)))
    return inferError(loc, name)
           << "input " << input << " has " << channels
           << " channels but the weight " << weight << " with groups = " << groups
           << " expects " << weight.getDimSize(1) * groups;
  if (biasType) {
    auto expected = RankedTensorType::get({out}, weight.getElementType());
    if (biasType != expected)
      return inferError(loc, name) << "bias must be " << expected << ", got "
                                   << biasType;
  }
  int64_t oh, ow;
  if (failed(windowOutput(name, loc, input, input.getDimSize(dims.h),
                          weight.getDimSize(2), stride[0], padding[0],
                          dilation[0], oh)) ||
      failed(windowOutput(name, loc, input, input.getDimSize(dims.w),
                          weight.getDimSize(3), stride[1], padding[1],
                          dilation[1], ow)))
    return failure();
  SmallVector<int64_t> shape(4);
  shape[0] = input.getDimSize(0);
  shape[dims.c] = out;
  shape[dims.h] = oh;
  shape[dims.w] = ow;
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Conv2dOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  Value bias = adaptor.getBias();
  return inferConv2d(getOperationName(), loc, tensorOf(adaptor.getInput()),
                     tensorOf(adaptor.getWeight()),
                     bias ? bias.getType() : Type(), adaptor.getStride(),
                     adaptor.getPadding(), adaptor.getDilation(),
                     adaptor.getGroups(), adaptor.getLayoutAttr(), inferred);
}

/// A backward op's `grad_output` must have the type the forward op gives.
static LogicalResult checkGradOutput(Operation *op, Type gradOutput,
                                     ArrayRef<Type> inferred,
                                     StringRef forward) {
  if (inferred.size() == 1 && inferred.front() == gradOutput)
    return success();
  return op->emitOpError("grad_output ")
         << gradOutput << " is not the type " << forward
         << " produces from these operands ("
         << (inferred.empty() ? Type() : inferred.front()) << ")";
}

LogicalResult Conv2dBackwardInputOp::verify() {
  SmallVector<Type> inferred;
  if (failed(inferConv2d(getOperationName(), getLoc(), tensorOf(getResult()),
                         tensorOf(getWeight()), Type(), getStride(),
                         getPadding(), getDilation(), getGroups(),
                         getLayoutAttr(), inferred)))
    return failure();
  return checkGradOutput(*this, getGradOutput().getType(), inferred,
                         "hl.conv2d of an input of the result's type");
}

LogicalResult Conv2dBackwardWeightOp::verify() {
  SmallVector<Type> inferred;
  if (failed(inferConv2d(getOperationName(), getLoc(), tensorOf(getInput()),
                         tensorOf(getResult()), Type(), getStride(),
                         getPadding(), getDilation(), getGroups(),
                         getLayoutAttr(), inferred)))
    return failure();
  return checkGradOutput(*this, getGradOutput().getType(), inferred,
                         "hl.conv2d with a weight of the result's type");
}

template <typename Adaptor>
static LogicalResult inferPool(StringRef name, std::optional<Location> loc,
                               Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto input = tensorOf(adaptor.getInput());
  if (input.getRank() != 4)
    return inferError(loc, name) << "input must have rank 4, got " << input;
  ArrayRef<int64_t> kernel = adaptor.getKernel(), stride = adaptor.getStride(),
                    padding = adaptor.getPadding();
  if (failed(checkPair(name, loc, "kernel", kernel, 1)) ||
      failed(checkPair(name, loc, "stride", stride, 1)) ||
      failed(checkPair(name, loc, "padding", padding, 0)))
    return failure();
  for (int i = 0; i < 2; ++i)
    if (padding[i] > kernel[i] / 2)
      return inferError(loc, name) << "padding " << listStr(padding)
                                   << " must be at most half the kernel "
                                   << listStr(kernel);
  ImageDims dims = imageDims(adaptor.getLayoutAttr());
  SmallVector<int64_t> shape(input.getShape());
  if (failed(windowOutput(name, loc, input, input.getDimSize(dims.h), kernel[0],
                          stride[0], padding[0], 1, shape[dims.h])) ||
      failed(windowOutput(name, loc, input, input.getDimSize(dims.w), kernel[1],
                          stride[1], padding[1], 1, shape[dims.w])))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            MaxPool2dOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferPool(getOperationName(), loc, adaptor, inferred);
}

LogicalResult MaxPool2dBackwardOp::verify() {
  SmallVector<Type> inferred;
  if (failed(inferPool(getOperationName(), getLoc(), *this, inferred)))
    return failure();
  return checkGradOutput(*this, getGradOutput().getType(), inferred,
                         "hl.max_pool2d of the input");
}

LogicalResult AvgPool2dBackwardOp::verify() {
  SmallVector<Type> inferred;
  if (failed(inferPool(getOperationName(), getLoc(), *this, inferred)))
    return failure();
  return checkGradOutput(*this, getGradOutput().getType(), inferred,
                         "hl.avg_pool2d of the input");
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            AvgPool2dOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferPool(getOperationName(), loc, adaptor, inferred);
}

//===----------------------------------------------------------------------===//
// Backward kernels
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxBackwardOp::verify() {
  return verifyAxis(*this, getAxis(), tensorOf(getResult()));
}

LogicalResult NormBackwardOp::verify() {
  // grad_output, input and grad_input share one type (ODS).
  auto in = tensorOf(getInput());
  if (getDims() < 1 || getDims() > in.getRank())
    return emitOpError("dims = ") << getDims() << " is out of range for " << in;
  auto row = RankedTensorType::get(in.getShape().take_back(getDims()),
                                   in.getElementType());
  if (static_cast<bool>(getWeight()) != static_cast<bool>(getGradWeight()))
    return emitOpError("has a weight gradient exactly when it has a weight");
  if (getBias() != static_cast<bool>(getGradBias()))
    return emitOpError("has a bias gradient exactly when `bias` is set");
  if (getRms() && getBias())
    return emitOpError("an RMS norm has no bias");
  for (auto [what, v] : {std::pair<StringRef, Value>{"weight", getWeight()},
                         {"grad_weight", getGradWeight()},
                         {"grad_bias", getGradBias()}})
    if (v && v.getType() != Type(row))
      return emitOpError() << what << " " << v.getType() << " must be " << row;
  return success();
}

LogicalResult GatherBackwardOp::verify() {
  SmallVector<Type> inferred;
  // Inherent attributes live in properties, not in the attribute dictionary.
  GatherOp::Properties properties;
  properties.axis = getAxisAttr();
  GatherOp::Adaptor adaptor(ValueRange{getResult(), getIndices()}, nullptr,
                            properties);
  if (failed(GatherOp::inferReturnTypes(getContext(), getLoc(), adaptor,
                                        inferred)))
    return failure();
  return checkGradOutput(*this, getGradOutput().getType(), inferred,
                         "hl.gather from the result's type");
}

LogicalResult SliceBackwardOp::verify() {
  SmallVector<Type> inferred;
  SliceOp::Properties properties;
  properties.start = getStartAttr();
  properties.limit = getLimitAttr();
  properties.strides = getStridesAttr();
  SliceOp::Adaptor adaptor(ValueRange{getResult()}, nullptr, properties);
  if (failed(SliceOp::inferReturnTypes(getContext(), getLoc(), adaptor,
                                       inferred)))
    return failure();
  return checkGradOutput(*this, getGradOutput().getType(), inferred,
                         "hl.slice of the result's type");
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            AttentionOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto q = tensorOf(adaptor.getQuery()), k = tensorOf(adaptor.getKey()),
       v = tensorOf(adaptor.getValue());
  int64_t rank = q.getRank();
  if (rank < 2 || k.getRank() != rank || v.getRank() != rank)
    return inferError(loc, name)
           << "query, key and value must have the same rank >= 2, got " << q
           << ", " << k << " and " << v;
  if (k.getElementType() != q.getElementType() || v.getElementType() != q.getElementType())
    return inferError(loc, name) << "query, key and value have different element types: "
                                 << q << ", " << k << " and " << v;
  for (int64_t d = 0; d < rank - 2; ++d)
    if (k.getDimSize(d) != q.getDimSize(d) || v.getDimSize(d) != q.getDimSize(d))
      return inferError(loc, name) << "batch dimension " << d << " differs: " << q
                                   << ", " << k << " and " << v;
  if (q.getDimSize(rank - 1) != k.getDimSize(rank - 1))
    return inferError(loc, name) << "query " << q << " and key " << k
                                 << " must have the same head dimension";
  if (k.getDimSize(rank - 2) != v.getDimSize(rank - 2))
    return inferError(loc, name) << "key " << k << " and value " << v
                                 << " must have the same sequence length";
  if (auto scale = adaptor.getScale(); scale && !(scale->convertToDouble() > 0.0))
    return inferError(loc, name) << "scale must be positive";
  SmallVector<int64_t> shape(q.getShape());
  shape.back() = v.getDimSize(rank - 1);
  inferred.push_back(RankedTensorType::get(shape, q.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// DropoutOp
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError("drop probability p = ") << p << " must be in [0, 1)";
  // I64Attr getters return the value as unsigned.
  int64_t stream = getStreamAttr().getInt();
  if (stream < 0)
    return emitOpError("stream ") << stream << " must be >= 0";
  return success();
}

#define GET_OP_CLASSES
#include "aicf/Dialect/HL/HLOps.cpp.inc"
