//===- Dialects.cpp - C API of the hl and ll dialects -------------------===//

#include "aicf-c/Dialects.h"

#include "aicf/Dialect/HL/HLDialect.h"
#include "aicf/Dialect/LL/LLDialect.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(HL, hl, hl::HLDialect)
MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(LL, ll, ll::LLDialect)

void aicfRegisterDialects(MlirDialectRegistry registry) {
  unwrap(registry)->insert<hl::HLDialect, ll::LLDialect>();
  // func.call can be inlined (the `inline` pass) in contexts the Rust API
  // creates, as it can in aicf-opt.
  mlir::func::registerInlinerExtension(*unwrap(registry));
  // The GPU backend: gpu.module/gpu.func, their lowering to NVVM (which
  // uses each dialect's conversion-to-LLVM interface, registered by the
  // extensions), the NVVM target that gpu-module-to-binary serialises to
  // PTX, and the translations to LLVM IR it runs.
  auto &r = *unwrap(registry);
  r.insert<mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect, mlir::LLVM::LLVMDialect>();
  // nvgpu: the tensor-core GEMM's ldmatrix and cp.async.
  r.insert<mlir::nvgpu::NVGPUDialect>();
  mlir::registerAllExtensions(r);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(r);
  mlir::registerGPUDialectTranslation(r);
  mlir::registerLLVMDialectTranslation(r);
  mlir::registerNVVMDialectTranslation(r);
}
