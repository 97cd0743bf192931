//===- HLDataOps.cpp - hl data movement, image, attention and backward ops -----===//

#include "HLCommon.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace hl;
using namespace hl::detail;

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
  // Element counts in 128 bits: getNumElements wraps past 2^63.
  auto count = [](RankedTensorType t) {
    unsigned __int128 n = 1;
    for (int64_t d : t.getShape()) {
      n *= (unsigned __int128)d;
      if (n > (unsigned __int128)INT64_MAX)
        return (unsigned __int128)INT64_MAX + 1;
    }
    return n;
  };
  if (count(in) > (unsigned __int128)INT64_MAX ||
      count(out) > (unsigned __int128)INT64_MAX)
    return emitOpError("has more than 2^63 elements: ") << in << " to " << out;
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
    if (ShapedType::isDynamic(shape[axis]) || t.isDynamicDim(axis)) {
      shape[axis] = ShapedType::kDynamic;
    } else {
      // A sum past int64 wrapped, to a negative size or to the value
      // MLIR reads as a dynamic one.
      int64_t sum;
      if (llvm::AddOverflow(shape[axis], t.getDimSize(axis), sum) ||
          ShapedType::isDynamic(sum))
        return inferError(loc, name)
               << "the concatenated size of dimension " << axis << " ("
               << shape[axis] << " + " << t.getDimSize(axis)
               << ") is beyond 64-bit sizes";
      shape[axis] = sum;
    }
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
    // (limit - start + stride - 1) / stride, without the sum's overflow: a
    // stride near 2^63 gave a negative size, or 0 for a window of one.
    int64_t span = limit[d] - start[d];
    shape.push_back(span == 0 ? 0 : (span - 1) / strides[d] + 1);
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
  // In 128 bits: a dilation or padding near 2^63 must not wrap the sizes.
  __int128 span128 = (__int128)dilation * (kernel - 1) + 1;
  __int128 padded = (__int128)size + 2 * (__int128)pad;
  if (span128 > INT64_MAX || padded > INT64_MAX)
    return inferError(loc, name) << "the window (dilation " << dilation
                                 << ", kernel " << kernel << ") or padding ("
                                 << pad << ") is beyond 64-bit sizes";
  int64_t span = (int64_t)span128;
  if (size + 2 * pad < span) {
    // (A pool has no dilation: its window is its kernel.)
    auto diag = inferError(loc, name) << "the window (" << span;
    if (dilation != 1)
      diag << ", kernel " << kernel << " at dilation " << dilation;
    return diag << ") does not fit the padded input " << input << " (size "
                << size << " + 2 * " << pad << ")";
  }
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
  if (groups < 1)
    return inferError(loc, name) << "groups = " << groups << " must be at least 1";
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

/// The type of attention's result for `q`, `k`, `v` and `scale`, or a
/// located error of op `name`.
static LogicalResult inferAttention(std::optional<Location> loc, StringRef name,
                                    RankedTensorType q, RankedTensorType k,
                                    RankedTensorType v,
                                    std::optional<APFloat> scale,
                                    SmallVectorImpl<Type> &inferred) {
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
  // Positive, and finite in f32, where the kernels multiply by it.
  if (scale && !(scale->convertToDouble() > 0.0 &&
                 scale->convertToDouble() <= 3.4028234663852886e38))
    return inferError(loc, name) << "scale must be positive and finite in f32";
  SmallVector<int64_t> shape(q.getShape());
  shape.back() = v.getDimSize(rank - 1);
  inferred.push_back(RankedTensorType::get(shape, q.getElementType()));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            AttentionOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferAttention(loc, getOperationName(), tensorOf(adaptor.getQuery()),
                        tensorOf(adaptor.getKey()), tensorOf(adaptor.getValue()),
                        adaptor.getScale(), inferred);
}

LogicalResult AttentionBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    AttentionBackwardOp::Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto q = tensorOf(adaptor.getQuery()), k = tensorOf(adaptor.getKey()),
       v = tensorOf(adaptor.getValue());
  SmallVector<Type> forward;
  if (failed(inferAttention(loc, name, q, k, v, adaptor.getScale(), forward)))
    return failure();
  if (adaptor.getOut().getType() != forward.front())
    return inferError(loc, name) << "out " << adaptor.getOut().getType()
                                 << " is not the attention's result type "
                                 << forward.front();
  inferred.append({q, k, v});
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

//===----------------------------------------------------------------------===//
// RandomLikeOp
//===----------------------------------------------------------------------===//

LogicalResult RandomLikeOp::verify() {
  StringRef kind = getKind();
  double a = getA().convertToDouble(), b = getB().convertToDouble();
  if (kind != "normal" && kind != "uniform")
    return emitOpError("kind \"") << kind
                                   << "\" is neither \"normal\" nor \"uniform\"";
  if (!std::isfinite(a) || !std::isfinite(b))
    return emitOpError("a = ") << a << " and b = " << b << " must be finite";
  if (kind == "normal" && b < 0.0)
    return emitOpError("the standard deviation b = ") << b << " is negative";
  if (kind == "uniform" && b < a)
    return emitOpError("the uniform range [") << a << ", " << b << ") is empty";
  if (getStreamAttr().getInt() < 0)
    return emitOpError("stream ") << getStreamAttr().getInt() << " must be >= 0";
  return success();
}

