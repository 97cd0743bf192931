//===- LLOps.cpp - ll operations: verifiers -----------------------------===//

#include "aicf/Dialect/LL/LLOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace ll;

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::verify() {
  auto a = cast<MemRefType>(getA().getType());
  auto b = cast<MemRefType>(getB().getType());
  auto out = cast<MemRefType>(getOut().getType());
  if (a.getElementType() != b.getElementType())
    return emitOpError("operands have different element types: ")
           << a << " and " << b;
  int64_t m = a.getDimSize(getTransposeA() ? 1 : 0);
  int64_t ka = a.getDimSize(getTransposeA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransposeB() ? 1 : 0);
  int64_t n = b.getDimSize(getTransposeB() ? 0 : 1);
  if (ka != kb)
    return emitOpError("contracting dimensions differ: a has K = ")
           << ka << ", b has K = " << kb;
  if (out.getDimSize(0) != m || out.getDimSize(1) != n)
    return emitOpError("result buffer ")
           << out << " does not match the product shape [" << m << ", " << n
           << "]";
  if (Value bias = getBias()) {
    auto biasType = cast<MemRefType>(bias.getType());
    if (biasType.getDimSize(0) != n)
      return emitOpError("bias ") << biasType << " must have N = " << n
                                  << " elements";
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

LogicalResult ElementwiseOp::verify() {
  if (getOutputs().empty())
    return emitOpError("needs at least one output buffer");
  auto outType = cast<MemRefType>(getOutputs().front().getType());
  for (Value output : getOutputs().drop_front()) {
    auto type = cast<MemRefType>(output.getType());
    if (type.getShape() != outType.getShape())
      return emitOpError("outputs must share one shape, got ")
             << outType << " and " << type;
  }
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<MemRefType>(input.getType());
    if (!broadcastsTo(type.getShape(), outType.getShape()))
      return emitOpError("input #")
             << i << " of type " << type
             << " does not broadcast to the output shape of " << outType;
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << body.getNumArguments() << " scalars but the op has "
           << getInputs().size() << " inputs";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(body.getArguments(), getInputs()))) {
    auto [arg, input] = pair;
    Type elt = cast<MemRefType>(input.getType()).getElementType();
    if (arg.getType() != elt)
      return emitOpError("body argument #")
             << i << " has type " << arg.getType() << " but input #" << i
             << " holds " << elt;
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end with ll.yield");
  if (yield.getValues().size() != getOutputs().size())
    return emitOpError("body yields ")
           << yield.getValues().size() << " values for "
           << getOutputs().size() << " outputs";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(yield.getValues(), getOutputs()))) {
    auto [value, output] = pair;
    Type elt = cast<MemRefType>(output.getType()).getElementType();
    if (value.getType() != elt)
      return emitOpError("yielded value #")
             << i << " has type " << value.getType() << " but output #" << i
             << " holds " << elt;
  }
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
      return op.emitOpError("is not allowed in an ll.elementwise body: only "
                            "side-effect-free scalar ops are");
    for (Type t : op.getResultTypes())
      if (isa<ShapedType>(t))
        return op.emitOpError("produces ")
               << t << " in an ll.elementwise body, which is scalar";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::verify() {
  auto logits = cast<MemRefType>(getLogits().getType());
  auto labels = cast<MemRefType>(getLabels().getType());
  auto loss = cast<MemRefType>(getLoss().getType());
  if (labels.getDimSize(0) != logits.getDimSize(0))
    return emitOpError("labels ") << labels << " do not have one entry per row of "
                                  << logits;
  if (loss.getElementType() != logits.getElementType())
    return emitOpError("loss buffer ") << loss << " must hold "
                                       << logits.getElementType();
  if (Value grad = getGrad())
    if (grad.getType() != Type(logits))
      return emitOpError("gradient buffer ")
             << grad.getType() << " must have the logits' type " << logits;
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
  SmallVector<int64_t> expected;
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (!reduced.contains(i))
      expected.push_back(in.getDimSize(i));
  if (ArrayRef<int64_t>(expected) != out.getShape()) {
    InFlightDiagnostic diag = emitOpError("result ");
    diag << out << " does not have the reduced shape [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  return success();
}

#define GET_OP_CLASSES
#include "aicf/Dialect/LL/LLOps.cpp.inc"
