//===- LLOps.cpp - ll operations: verifiers -----------------------------===//

#include "aicf/Dialect/LL/LLOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace ll;

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::verify() {
  auto a = cast<MemRefType>(getA().getType());
  auto b = cast<MemRefType>(getB().getType());
  auto out = cast<MemRefType>(getOut().getType());
  // One element type throughout, or 16-bit float operands (accumulated in
  // f32) with an f32 result: mixed precision.
  Type et = a.getElementType();
  bool mixed = (et.isF16() || et.isBF16()) && out.getElementType().isF32();
  if (et != b.getElementType() || (et != out.getElementType() && !mixed))
    return emitOpError("operands and result hold different element types: ")
           << a << ", " << b << " and " << out
           << " (only f16 or bf16 operands may have an f32 result)";
  bool ta = getTransposeA(), tb = getTransposeB();
  int64_t ra = a.getRank(), rb = b.getRank();
  if (ra < 2 || rb < 2)
    return emitOpError("operands must be matrices (rank >= 2), got ")
           << a << " and " << b;
  SmallVector<int64_t> expected;
  int64_t kb = b.getDimSize(tb ? rb - 1 : rb - 2);
  int64_t n = b.getDimSize(tb ? rb - 2 : rb - 1);
  int64_t ka;
  if (rb == 2 && ra > 2) {
    if (ta)
      return emitOpError("transpose_a needs operands of equal rank");
    ka = a.getDimSize(ra - 1);
    expected.append(a.getShape().begin(), a.getShape().end() - 1);
  } else {
    if (ra != rb)
      return emitOpError("operands ") << a << " and " << b
                                      << " have different ranks";
    if (a.getShape().drop_back(2) != b.getShape().drop_back(2))
      return emitOpError("batch dimensions of ")
             << a << " and " << b << " differ";
    ka = a.getDimSize(ta ? ra - 2 : ra - 1);
    expected.append(a.getShape().begin(), a.getShape().end() - 2);
    expected.push_back(a.getDimSize(ta ? ra - 1 : ra - 2));
  }
  if (ka != kb)
    return emitOpError("contracting dimensions differ: a has K = ")
           << ka << ", b has K = " << kb;
  expected.push_back(n);
  if (out.getShape() != ArrayRef<int64_t>(expected)) {
    InFlightDiagnostic diag = emitOpError("result buffer ");
    diag << out << " does not match the product shape [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  if (Value bias = getBias()) {
    auto biasType = cast<MemRefType>(bias.getType());
    if (biasType.getDimSize(0) != n)
      return emitOpError("bias ") << biasType << " must have N = " << n
                                  << " elements";
  }
  for (auto [what, v] : {std::pair<StringRef, Value>{"mask", getMask()},
                         {"residual", getResidual()}})
    if (v && v.getType() != Type(out))
      return emitOpError() << what << " " << v.getType()
                           << " must have the result's type " << out;
  if (Value sum = getLhsSum()) {
    if (ra != 2 || rb != 2)
      return emitOpError("lhs_sum needs rank-2 operands");
    auto sumType = cast<MemRefType>(sum.getType());
    if (sumType.getDimSize(0) != expected[0] ||
        sumType.getElementType() != out.getElementType())
      return emitOpError("lhs_sum ") << sumType << " must hold M = "
                                     << expected[0] << " elements of "
                                     << out.getElementType();
  }
  if (getOut() == getA() || getOut() == getB())
    return emitOpError("result buffer must not alias an operand");
  return success();
}

//===----------------------------------------------------------------------===//
// ElementwiseOp
//===----------------------------------------------------------------------===//

/// True when `in` broadcasts to `out` under NumPy's rule.
static bool broadcastsTo(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  if (in.size() > out.size())
    return false;
  size_t offset = out.size() - in.size();
  for (auto [i, d] : llvm::enumerate(in))
    if (d != 1 && d != out[offset + i])
      return false;
  return true;
}

/// Checks one elementwise group: inputs broadcast to the outputs' shared
/// shape; the body maps one scalar per input to one per output.
static LogicalResult verifyGroup(Operation *op, ValueRange inputs,
                                 ValueRange outputs, Block &body,
                                 const std::string &group) {
  auto error = [&]() {
    InFlightDiagnostic d = op->emitOpError();
    if (!group.empty())
      d << group << ": ";
    return d;
  };
  if (outputs.empty())
    return error() << "needs at least one output buffer";
  auto outType = cast<MemRefType>(outputs.front().getType());
  for (Value output : outputs.drop_front()) {
    auto type = cast<MemRefType>(output.getType());
    if (type.getShape() != outType.getShape())
      return error() << "outputs must share one shape, got " << outType
                     << " and " << type;
  }
  for (auto [i, input] : llvm::enumerate(inputs)) {
    auto type = cast<MemRefType>(input.getType());
    if (!broadcastsTo(type.getShape(), outType.getShape()))
      return error() << "input #" << i << " of type " << type
                     << " does not broadcast to the output shape of "
                     << outType;
  }
  if (body.getNumArguments() != inputs.size())
    return error() << "body takes " << body.getNumArguments()
                   << " scalars but the op has " << inputs.size() << " inputs";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(body.getArguments(), inputs))) {
    auto [arg, input] = pair;
    Type elt = cast<MemRefType>(input.getType()).getElementType();
    if (arg.getType() != elt)
      return error() << "body argument #" << i << " has type " << arg.getType()
                     << " but input #" << i << " holds " << elt;
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return error() << "body must end with ll.yield";
  if (yield.getValues().size() != outputs.size())
    return error() << "body yields " << yield.getValues().size()
                   << " values for " << outputs.size() << " outputs";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(yield.getValues(), outputs))) {
    auto [value, output] = pair;
    Type elt = cast<MemRefType>(output.getType()).getElementType();
    if (value.getType() != elt)
      return error() << "yielded value #" << i << " has type "
                     << value.getType() << " but output #" << i << " holds "
                     << elt;
  }
  for (Operation &inner : body.without_terminator()) {
    if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner))
      return inner.emitOpError("is not allowed in an elementwise body: only "
                               "side-effect-free scalar ops are");
    for (Type t : inner.getResultTypes())
      if (isa<ShapedType>(t))
        return inner.emitOpError("produces ")
               << t << " in an elementwise body, which is scalar";
  }
  return success();
}

LogicalResult ElementwiseOp::verify() {
  return verifyGroup(*this, getInputs(), getOutputs(), getBody().front(), "");
}

LogicalResult MultiTensorApplyOp::verify() {
  Block &body = getBody().front();
  size_t k = body.getNumArguments();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end with ll.yield");
  size_t m = yield.getValues().size();
  if (k == 0 || m == 0)
    return emitOpError("body must take and yield at least one scalar");
  if (getInputs().empty() || getInputs().size() % k != 0)
    return emitOpError("has ") << getInputs().size()
                               << " inputs, not a positive multiple of the body's "
                               << k << " arguments";
  size_t groups = getInputs().size() / k;
  if (getOutputs().size() != groups * m)
    return emitOpError("has ") << getOutputs().size() << " outputs for "
                               << groups << " groups of " << m;
  for (size_t g = 0; g < groups; ++g)
    if (failed(verifyGroup(*this, getInputs().slice(g * k, k),
                           getOutputs().slice(g * m, m), body,
                           "group " + std::to_string(g))))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::verify() {
  auto logits = cast<MemRefType>(getLogits().getType());
  auto labels = cast<MemRefType>(getLabels().getType());
  auto loss = cast<MemRefType>(getLoss().getType());
  if (logits.getRank() < 1 || labels.getShape() != logits.getShape().drop_back())
    return emitOpError("labels ") << labels << " must have the shape of "
                                  << logits << " without the class dimension";
  // The loss in the logits' type, or in f32 for 16-bit logits.
  Type element = logits.getElementType();
  bool narrow = element.isBF16() || element.isF16();
  if (loss.getElementType() != element && !(narrow && loss.getElementType().isF32()))
    return emitOpError("loss buffer ") << loss << " must hold " << element
                                       << (narrow ? " or f32" : "");
  if (Value g = getGradOutput())
    if (cast<MemRefType>(g.getType()).getElementType() != loss.getElementType())
      return emitOpError("grad_output ") << g.getType() << " must hold "
                                         << loss.getElementType() << " (the loss's type)";
  if (std::optional<int64_t> classes = getClasses()) {
    int64_t row = logits.getShape().back();
    if (*classes < 1 || (!ShapedType::isDynamic(row) && *classes > row))
      return emitOpError("classes = ") << *classes << " must be in [1, " << row
                                       << "] (the logits' last dimension)";
  }
  if (Value grad = getGrad())
    if (grad.getType() != Type(logits))
      return emitOpError("gradient buffer ")
             << grad.getType() << " must have the logits' type " << logits;
  if (Value rows = getRowLosses()) {
    // The rows' losses in the logits' compute type: f64, else f32.
    auto r = cast<MemRefType>(rows.getType());
    Type want = logits.getElementType().isF64() ? Type(Float64Type::get(getContext()))
                                                 : Type(Float32Type::get(getContext()));
    if (!labels.hasStaticShape() || r.isDynamicDim(0))
      return emitOpError("rows buffer ")
             << r << " needs static sizes (labels " << labels << ")";
    int64_t count = labels.getNumElements();
    if (r.getElementType() != want || r.getShape()[0] != count + 1)
      return emitOpError("rows buffer ")
             << r << " must hold " << count + 1 << " values of " << want
             << " (one per row and the count)";
  }
  return success();
}

LogicalResult SoftmaxOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  if (getOut().getType() != Type(in))
    return emitOpError("result buffer ") << getOut().getType()
                                         << " must have the input's type " << in;
  if (getAxis() < 0 || getAxis() >= in.getRank())
    return emitOpError("axis ") << getAxis() << " is out of range for " << in;
  return success();
}

LogicalResult NormOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  if (getOut().getType() != Type(in))
    return emitOpError("result buffer ") << getOut().getType()
                                         << " must have the input's type " << in;
  if (getDims() < 1 || getDims() > in.getRank())
    return emitOpError("dims = ") << getDims() << " is out of range for " << in;
  ArrayRef<int64_t> row = in.getShape().take_back(getDims());
  for (auto [what, v] : {std::pair<StringRef, Value>{"weight", getWeight()},
                         {"bias", getBias()}})
    if (v) {
      auto t = cast<MemRefType>(v.getType());
      if (t.getShape() != row || t.getElementType() != in.getElementType())
        return emitOpError() << what << " " << t
                             << " must have the normalised dimensions of " << in;
    }
  if (getRms() && getBias())
    return emitOpError("an RMS norm has no bias");
  return success();
}

/// Whether buffers `q`, `k`, `v` form an attention (an error of `op`
/// otherwise); its result's shape into `expected`.
static LogicalResult verifyAttention(Operation *op, MemRefType q, MemRefType k,
                                     MemRefType v,
                                     SmallVectorImpl<int64_t> &expected) {
  if (q.getRank() < 2 || k.getRank() != q.getRank() ||
      v.getRank() != q.getRank() ||
      k.getShape().drop_back(2) != q.getShape().drop_back(2) ||
      v.getShape().drop_back(1) != k.getShape().drop_back(1) ||
      k.getShape().back() != q.getShape().back() ||
      k.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return op->emitOpError("queries ") << q << ", keys " << k << " and values "
                                       << v << " do not form an attention";
  expected.assign(q.getShape().begin(), q.getShape().end());
  expected.back() = v.getShape().back();
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = cast<MemRefType>(getQ().getType());
  SmallVector<int64_t> expected;
  if (failed(verifyAttention(*this, q, cast<MemRefType>(getK().getType()),
                             cast<MemRefType>(getV().getType()), expected)))
    return failure();
  auto out = cast<MemRefType>(getOut().getType());
  if (out.getShape() != ArrayRef<int64_t>(expected) ||
      out.getElementType() != q.getElementType())
    return emitOpError("result buffer ")
           << out << " is not the queries' shape with the values' width";
  if (Value lse = getLse()) {
    int64_t rows = 1;
    for (int64_t d : q.getShape().drop_back(1))
      rows *= d;
    auto t = cast<MemRefType>(lse.getType());
    if (t.getDimSize(0) != rows)
      return emitOpError("log-sum-exp buffer ")
             << t << " must hold one value per query row (" << rows << ")";
  }
  return success();
}

LogicalResult AttentionBackwardOp::verify() {
  auto q = cast<MemRefType>(getQ().getType());
  auto k = cast<MemRefType>(getK().getType());
  auto v = cast<MemRefType>(getV().getType());
  SmallVector<int64_t> expected;
  if (failed(verifyAttention(*this, q, k, v, expected)))
    return failure();
  for (Value out : {getOut(), getGradOutput()}) {
    auto t = cast<MemRefType>(out.getType());
    if (t.getShape() != ArrayRef<int64_t>(expected) ||
        t.getElementType() != q.getElementType())
      return emitOpError("the result and its gradient must be the queries' "
                         "shape with the values' width, got ")
             << t;
  }
  if (getGradQ().getType() != q || getGradK().getType() != k ||
      getGradV().getType() != v)
    return emitOpError("the gradients must take the types of q, k and v");
  int64_t rows = 1;
  for (int64_t d : q.getShape().drop_back(1))
    rows *= d;
  auto stats = cast<MemRefType>(getStats().getType());
  if (Value lse = getLse()) {
    auto t = cast<MemRefType>(lse.getType());
    if (t.getDimSize(0) != rows)
      return emitOpError("log-sum-exp buffer ")
             << t << " must hold one value per query row (" << rows << ")";
    if (stats.getDimSize(0) != rows)
      return emitOpError("rows buffer ")
             << stats << " must hold one value per query row (" << rows
             << ") beside the forward's log-sum-exps";
  } else if (stats.getDimSize(0) != 2 * rows)
    return emitOpError("rows buffer ")
           << stats << " must hold two values per query row (" << 2 * rows << ")";
  if (!(getScale().convertToDouble() > 0.0))
    return emitOpError("scale must be positive");
  return success();
}

LogicalResult TransposeOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  auto out = cast<MemRefType>(getOut().getType());
  ArrayRef<int64_t> perm = getPermutation();
  if (perm.size() != static_cast<size_t>(in.getRank()))
    return emitOpError("permutation has ") << perm.size() << " entries for "
                                           << in;
  llvm::SmallSet<int64_t, 8> seen;
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || !seen.insert(p).second)
      return emitOpError("permutation is not a permutation of [0, ")
             << in.getRank() << ")";
    expected.push_back(in.getDimSize(p));
  }
  if (out.getShape() != ArrayRef<int64_t>(expected) ||
      out.getElementType() != in.getElementType())
    return emitOpError("result buffer ") << out << " is not " << in
                                         << " permuted";
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<MemRefType>(getSource().getType());
  auto out = cast<MemRefType>(getResult().getType());
  if (in.getNumElements() != out.getNumElements() ||
      in.getElementType() != out.getElementType())
    return emitOpError("cannot view ") << in << " as " << out;
  if (!in.getLayout().isIdentity() || !out.getLayout().isIdentity())
    return emitOpError("views only contiguous (identity-layout) buffers");
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  auto out = cast<MemRefType>(getOut().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("input ") << in << " and result " << out
                                 << " hold different element types";
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t d : getDims()) {
    if (d < 0 || d >= in.getRank())
      return emitOpError("dimension ") << d << " is out of range for " << in;
    if (!reduced.insert(d).second)
      return emitOpError("dimension ") << d << " is listed twice";
  }
  SmallVector<int64_t> expected, kept;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (!reduced.contains(i))
      expected.push_back(in.getDimSize(i));
    kept.push_back(reduced.contains(i) ? 1 : in.getDimSize(i));
  }
  if (ArrayRef<int64_t>(expected) != out.getShape() &&
      ArrayRef<int64_t>(kept) != out.getShape()) {
    InFlightDiagnostic diag = emitOpError("result ");
    diag << out << " does not have the reduced shape [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  if (Value partials = getPartials()) {
    // A scratch of its own: the slices' results would overwrite the input
    // they are read from, or the result combined from them.
    if (partials == getInput() || partials == getOut())
      return emitOpError("partials buffer must not be the ")
             << (partials == getInput() ? "input" : "result");
    // S >= 2 slices of every output, in the compute type: f64, else f32.
    auto p = cast<MemRefType>(partials.getType());
    Type want = in.getElementType().isF64() ? Type(Float64Type::get(getContext()))
                                             : Type(Float32Type::get(getContext()));
    if (!in.hasStaticShape() || p.isDynamicDim(0))
      return emitOpError("partials buffer ")
             << p << " needs static sizes (input " << in << ")";
    int64_t outs = 1;
    for (int64_t d : expected)
      outs *= d;
    int64_t size = p.getShape()[0];
    if (p.getElementType() != want || outs == 0 || size % outs != 0 || size / outs < 2)
      return emitOpError("partials buffer ")
             << p << " must hold S >= 2 slices of " << outs << " values of " << want;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Backward row reductions
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxBackwardOp::verify() {
  auto y = cast<MemRefType>(getResult().getType());
  if (getAxis() < 0 || getAxis() >= y.getRank())
    return emitOpError("axis ") << getAxis() << " is out of range for " << y;
  return success();
}

LogicalResult NormBackwardOp::verify() {
  // grad_output, input and grad_input share one type (ODS).
  auto in = cast<MemRefType>(getInput().getType());
  if (getDims() < 1 || getDims() > in.getRank())
    return emitOpError("dims = ") << getDims() << " is out of range for " << in;
  auto row = MemRefType::get(in.getShape().take_back(getDims()),
                             in.getElementType());
  for (auto [what, v] : {std::pair<StringRef, Value>{"weight", getWeight()},
                         {"grad_weight", getGradWeight()},
                         {"grad_bias", getGradBias()}})
    if (v && v.getType() != Type(row))
      return emitOpError() << what << " " << v.getType() << " must be " << row;
  if (getGradWeight() && !getWeight())
    return emitOpError("grad_weight needs the weight");
  if (getRms() && getGradBias())
    return emitOpError("an RMS norm has no bias");
  if (Value p = getPartials()) {
    // A whole number of chunks, each a row's length per sum asked for, in
    // the compute type (f64, else f32).
    auto t = cast<MemRefType>(p.getType());
    int64_t parts = (getGradWeight() ? 1 : 0) + (getGradBias() ? 1 : 0);
    int64_t n = row.getNumElements();
    Type want = in.getElementType().isF64() ? Type(Float64Type::get(getContext()))
                                             : Type(Float32Type::get(getContext()));
    if (parts == 0)
      return emitOpError("partials without grad_weight or grad_bias");
    if (!row.hasStaticShape() || t.isDynamicDim(0))
      return emitOpError("partials ")
             << t << " needs static sizes (rows of " << row << ")";
    if (t.getElementType() != want || n == 0 || t.getShape()[0] == 0 ||
        t.getShape()[0] % (parts * n) != 0)
      return emitOpError("partials ") << t << " must hold whole chunks of "
                                      << parts * n << " values of " << want;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Vision
//===----------------------------------------------------------------------===//

namespace {
/// Positions of channels, height and width in a rank-4 image buffer.
struct Image {
  unsigned c, h, w;
  explicit Image(Layout layout)
      : c(layout == Layout::NCHW ? 1 : 3), h(layout == Layout::NCHW ? 2 : 1),
        w(layout == Layout::NCHW ? 3 : 2) {}
};
} // namespace

/// The output extent of a window sweep, or -1 when the window does not fit.
static int64_t windowExtent(int64_t in, int64_t kernel, int64_t stride,
                            int64_t pad, int64_t dilation) {
  int64_t span = dilation * (kernel - 1) + 1;
  if (in + 2 * pad < span || stride < 1)
    return -1;
  return (in + 2 * pad - span) / stride + 1;
}

/// Checks that conv2d of `input` with `weight` gives `output`.
static LogicalResult checkConv(Operation *op, Value inputV, Value weightV,
                               Value outputV, ArrayRef<int64_t> stride,
                               ArrayRef<int64_t> padding,
                               ArrayRef<int64_t> dilation, int64_t groups,
                               Layout layout) {
  auto input = cast<MemRefType>(inputV.getType());
  auto weight = cast<MemRefType>(weightV.getType());
  auto output = cast<MemRefType>(outputV.getType());
  if (input.getRank() != 4 || weight.getRank() != 4 || output.getRank() != 4)
    return op->emitOpError("input, weight and output must have rank 4, got ")
           << input << ", " << weight << " and " << output;
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2)
    return op->emitOpError("stride, padding and dilation must be [h, w] pairs");
  if (input.getElementType() != weight.getElementType() ||
      input.getElementType() != output.getElementType())
    return op->emitOpError("input, weight and output hold different element "
                           "types: ")
           << input << ", " << weight << " and " << output;
  Image d(layout);
  int64_t out = weight.getDimSize(0);
  if (groups < 1)
    return op->emitOpError("groups = ") << groups << " must be at least 1";
  if (out % groups != 0 || input.getDimSize(d.c) % groups != 0 ||
      input.getDimSize(d.c) / groups != weight.getDimSize(1))
    return op->emitOpError("input ")
           << input << " and weight " << weight << " do not fit groups = "
           << groups;
  SmallVector<int64_t> expected(4);
  expected[0] = input.getDimSize(0);
  expected[d.c] = out;
  expected[d.h] = windowExtent(input.getDimSize(d.h), weight.getDimSize(2),
                               stride[0], padding[0], dilation[0]);
  expected[d.w] = windowExtent(input.getDimSize(d.w), weight.getDimSize(3),
                               stride[1], padding[1], dilation[1]);
  if (output.getShape() != ArrayRef<int64_t>(expected)) {
    InFlightDiagnostic diag = op->emitOpError("output ");
    diag << output << " is not the convolution's shape [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  return success();
}

LogicalResult Conv2dOp::verify() {
  if (failed(checkConv(*this, getInput(), getWeight(), getOut(), getStride(),
                       getPadding(), getDilation(), getGroups(), getLayout())))
    return failure();
  if (Value bias = getBias()) {
    auto weight = cast<MemRefType>(getWeight().getType());
    auto expected = MemRefType::get({weight.getDimSize(0)}, weight.getElementType());
    if (bias.getType() != Type(expected))
      return emitOpError("bias ") << bias.getType() << " must be " << expected;
  }
  return success();
}

LogicalResult Conv2dBackwardInputOp::verify() {
  return checkConv(*this, getOut(), getWeight(), getGradOutput(), getStride(),
                   getPadding(), getDilation(), getGroups(), getLayout());
}

LogicalResult Conv2dBackwardWeightOp::verify() {
  return checkConv(*this, getInput(), getOut(), getGradOutput(), getStride(),
                   getPadding(), getDilation(), getGroups(), getLayout());
}

/// Checks that `cols` holds the `[N, OH, OW, C, KH, KW]` windows of
/// `image` (an im2col's input, a col2im's result).
static LogicalResult checkWindows(Operation *op, Value imageV, Value colsV,
                                  ArrayRef<int64_t> stride,
                                  ArrayRef<int64_t> padding,
                                  ArrayRef<int64_t> dilation, Layout layout,
                                  bool columns, bool wideWindows) {
  auto image = cast<MemRefType>(imageV.getType());
  auto cols = cast<MemRefType>(colsV.getType());
  if (image.getRank() != 4 || cols.getRank() != 6)
    return op->emitOpError("the image must have rank 4 and the windows rank 6 "
                           "([N, OH, OW, C, KH, KW], or with columns "
                           "[C, KH, KW, N, OH, OW]), got ")
           << image << " and " << cols;
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2)
    return op->emitOpError("stride, padding and dilation must be [h, w] pairs");
  if (llvm::any_of(stride, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(dilation, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(padding, [](int64_t s) { return s < 0; }))
    return op->emitOpError("strides and dilations must be at least 1 and "
                           "paddings at least 0");
  // A col2im's windows may be f32 over a 16-bit image: the gradient's rows
  // are summed before they are rounded.
  bool wide = wideWindows && cols.getElementType().isF32() &&
              (image.getElementType().isBF16() ||
               image.getElementType().isF16());
  if (image.getElementType() != cols.getElementType() && !wide)
    return op->emitOpError("the image and the windows hold different element "
                           "types: ")
           << image << " and " << cols;
  if (!image.hasStaticShape() || !cols.hasStaticShape())
    return op->emitOpError("the image and the windows must have static "
                           "shapes, got ")
           << image << " and " << cols;
  // The window's span and the padded extent, in 64 bits.
  Image d(layout);
  // Where the windows' shape holds KH (KW follows it).
  unsigned kd = columns ? 1 : 4;
  for (unsigned axis = 0; axis < 2; ++axis) {
    int64_t in = image.getDimSize(axis ? d.w : d.h);
    int64_t kernel = cols.getDimSize(kd + axis);
    auto span = llvm::checkedMul(dilation[axis], kernel - 1);
    auto padded = llvm::checkedMul(padding[axis], int64_t(2));
    if (!span || !llvm::checkedAdd(*span, int64_t(1)) || !padded ||
        !llvm::checkedAdd(in, *padded))
      return op->emitOpError("the window (dilation ")
             << dilation[axis] << ", kernel " << kernel << ") or padding ("
             << padding[axis] << ") is beyond 64-bit sizes";
  }
  int64_t kh = cols.getDimSize(kd), kw = cols.getDimSize(kd + 1);
  int64_t oh = windowExtent(image.getDimSize(d.h), kh, stride[0], padding[0],
                            dilation[0]);
  int64_t ow = windowExtent(image.getDimSize(d.w), kw, stride[1], padding[1],
                            dilation[1]);
  int64_t n = image.getDimSize(0), c = image.getDimSize(d.c);
  SmallVector<int64_t> expected =
      columns ? SmallVector<int64_t>{c, kh, kw, n, oh, ow}
              : SmallVector<int64_t>{n, oh, ow, c, kh, kw};
  if (cols.getShape() != ArrayRef<int64_t>(expected)) {
    InFlightDiagnostic diag = op->emitOpError("windows ");
    diag << cols << " are not the image's windows [";
    llvm::interleaveComma(expected, diag);
    return diag << "] of " << image;
  }
  return success();
}

LogicalResult Im2colOp::verify() {
  return checkWindows(*this, getInput(), getOut(), getStride(), getPadding(),
                      getDilation(), getLayout(), getColumns(),
                      /*wideWindows=*/false);
}

LogicalResult Col2imOp::verify() {
  return checkWindows(*this, getOut(), getInput(), getStride(), getPadding(),
                      getDilation(), getLayout(), getColumns(),
                      /*wideWindows=*/true);
}

/// Checks that pooling `input` gives `output`.
static LogicalResult checkPool(Operation *op, Value inputV, Value outputV,
                               ArrayRef<int64_t> kernel,
                               ArrayRef<int64_t> stride,
                               ArrayRef<int64_t> padding, Layout layout) {
  auto input = cast<MemRefType>(inputV.getType());
  auto output = cast<MemRefType>(outputV.getType());
  if (input.getRank() != 4 || kernel.size() != 2 || stride.size() != 2 ||
      padding.size() != 2)
    return op->emitOpError("needs a rank-4 input and [h, w] kernel, stride "
                           "and padding, got ")
           << input;
  for (int i = 0; i < 2; ++i)
    if (kernel[i] < 1 || padding[i] < 0 || padding[i] > kernel[i] / 2)
      return op->emitOpError("padding must be at most half the kernel");
  Image d(layout);
  SmallVector<int64_t> expected(input.getShape());
  expected[d.h] = windowExtent(input.getDimSize(d.h), kernel[0], stride[0],
                               padding[0], 1);
  expected[d.w] = windowExtent(input.getDimSize(d.w), kernel[1], stride[1],
                               padding[1], 1);
  if (output.getShape() != ArrayRef<int64_t>(expected) ||
      output.getElementType() != input.getElementType()) {
    InFlightDiagnostic diag = op->emitOpError("pooled buffer ");
    diag << output << " is not the pooling's shape [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  return success();
}

LogicalResult Pool2dOp::verify() {
  return checkPool(*this, getInput(), getOut(), getKernel(), getStride(),
                   getPadding(), getLayout());
}

LogicalResult Pool2dBackwardOp::verify() {
  return checkPool(*this, getInput(), getGradOutput(), getKernel(), getStride(),
                   getPadding(), getLayout());
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

/// Checks that gathering `indices` from `table` along `axis` gives `result`.
static LogicalResult checkGather(Operation *op, Value tableV, Value indicesV,
                                 Value resultV, int64_t axis) {
  auto table = cast<MemRefType>(tableV.getType());
  auto indices = cast<MemRefType>(indicesV.getType());
  auto result = cast<MemRefType>(resultV.getType());
  if (axis < 0 || axis >= table.getRank())
    return op->emitOpError("axis ") << axis << " is out of range for " << table;
  SmallVector<int64_t> expected(table.getShape().take_front(axis));
  llvm::append_range(expected, indices.getShape());
  llvm::append_range(expected, table.getShape().drop_front(axis + 1));
  if (result.getShape() != ArrayRef<int64_t>(expected) ||
      result.getElementType() != table.getElementType()) {
    InFlightDiagnostic diag = op->emitOpError("gathered buffer ");
    diag << result << " is not [";
    llvm::interleaveComma(expected, diag);
    return diag << "] of " << table.getElementType();
  }
  return success();
}

LogicalResult GatherOp::verify() {
  return checkGather(*this, getInput(), getIndices(), getOut(), getAxis());
}

LogicalResult ScatterAddOp::verify() {
  return checkGather(*this, getOut(), getIndices(), getGradOutput(), getAxis());
}

LogicalResult SliceOp::verify() {
  // The window is `small`, the buffer it is taken from `large`.
  auto small = cast<MemRefType>(
      (getBackward() ? getInput() : getOut()).getType());
  auto large = cast<MemRefType>(
      (getBackward() ? getOut() : getInput()).getType());
  ArrayRef<int64_t> start = getStart(), strides = getStrides();
  if (small.getElementType() != large.getElementType() ||
      small.getRank() != large.getRank() ||
      start.size() != static_cast<size_t>(large.getRank()) ||
      strides.size() != start.size())
    return emitOpError("window ") << small << " of " << large
                                  << " needs one start and stride per dimension";
  for (int64_t i = 0; i < large.getRank(); ++i) {
    int64_t n = small.getDimSize(i);
    if (start[i] < 0 || strides[i] < 1 ||
        (n > 0 && start[i] + (n - 1) * strides[i] >= large.getDimSize(i)))
      return emitOpError("window ")
             << small << " does not fit in " << large << " in dimension " << i;
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  auto out = cast<MemRefType>(getOut().getType());
  int64_t axis = getAxis();
  if (getInputs().empty() || axis < 0 || axis >= out.getRank())
    return emitOpError("needs inputs and an axis in [0, ") << out.getRank() << ")";
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto t = cast<MemRefType>(v.getType());
    if (t.getRank() != out.getRank() ||
        t.getElementType() != out.getElementType())
      return emitOpError("input ") << t << " does not fit " << out;
    for (int64_t i = 0; i < out.getRank(); ++i)
      if (i != axis && t.getDimSize(i) != out.getDimSize(i))
        return emitOpError("input ") << t << " differs from " << out
                                     << " outside axis " << axis;
    total += t.getDimSize(axis);
  }
  if (total != out.getDimSize(axis))
    return emitOpError("inputs add up to ")
           << total << " along axis " << axis << ", the result has "
           << out.getDimSize(axis);
  return success();
}

LogicalResult ArgmaxOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  auto out = cast<MemRefType>(getOut().getType());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= in.getRank())
    return emitOpError("axis ") << axis << " is out of range for " << in;
  SmallVector<int64_t> dropped(in.getShape()), kept(in.getShape());
  dropped.erase(dropped.begin() + axis);
  kept[axis] = 1;
  if (out.getShape() != ArrayRef<int64_t>(dropped) &&
      out.getShape() != ArrayRef<int64_t>(kept))
    return emitOpError("result ") << out << " is not " << in
                                  << " without axis " << axis;
  return success();
}

//===----------------------------------------------------------------------===//
// Losses and randomness
//===----------------------------------------------------------------------===//

LogicalResult MseLossOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  if (getTarget().getType() != Type(in))
    return emitOpError("target ") << getTarget().getType()
                                  << " must have the input's type " << in;
  if (cast<MemRefType>(getLoss().getType()).getElementType() !=
      in.getElementType())
    return emitOpError("loss buffer must hold ") << in.getElementType();
  return success();
}

LogicalResult DropoutOp::verify() {
  if (!(getP().convertToDouble() >= 0.0 && getP().convertToDouble() < 1.0))
    return emitOpError("p = ") << getP().convertToDouble()
                               << " is not in [0, 1)";
  return success();
}

LogicalResult RandomOp::verify() {
  StringRef kind = getKind();
  if (kind != "normal" && kind != "uniform")
    return emitOpError("kind \"") << kind
                                   << "\" is neither \"normal\" nor \"uniform\"";
  if (!std::isfinite(getA().convertToDouble()) ||
      !std::isfinite(getB().convertToDouble()))
    return emitOpError("a and b must be finite");
  return success();
}

#define GET_OP_CLASSES
#include "aicf/Dialect/LL/LLOps.cpp.inc"
