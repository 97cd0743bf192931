//===- HLOps.td - hl dialect operations --------------------*- tablegen -*-===//
//
// The operations of `hl`: what MLPs, CNNs and transformer language models are
// written with. Every op states its shape rule in its description; the rule
// is checked by the op's type inference or verifier and reported on the op.
//
//===----------------------------------------------------------------------===//

#ifndef AICF_DIALECT_HL_HLOPS_TD
#define AICF_DIALECT_HL_HLOPS_TD

include "aicf/Dialect/HL/HLBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def HL_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def HL_IndexTensor : RankedTensorOf<[I32, I64]>;
def HL_NumericTensor : RankedTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def HL_BoolTensor : RankedTensorOf<[I1]>;
def HL_Tensor : RankedTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;
def HL_I64Scalar : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))";
}

// The operations, by kind: parameters and state, constants and elementwise
// math (HLCoreOps.td); matrix products, fused groups, reductions, norms and
// losses (HLComputeOps.td); data movement, images, attention, the backward
// ops and dropout (HLDataOps.td).

include "aicf/Dialect/HL/HLCoreOps.td"
include "aicf/Dialect/HL/HLComputeOps.td"
include "aicf/Dialect/HL/HLDataOps.td"

#endif // AICF_DIALECT_HL_HLOPS_TD
