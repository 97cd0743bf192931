//===- AicfOptMain.cpp - mlir-opt compatible driver for AICF -------------===//

#include "aicf-c/OptMain.h"
#include "aicf-c/Passes.h"

#include "aicf/Dialect/HL/HLDialect.h"
#include "aicf/Dialect/LL/LLDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

extern "C" int aicfOptMain(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<hl::HLDialect, ll::LLDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // Not part of registerAllExtensions, but gpu-module-to-binary translates
  // to LLVM IR inside a pass and needs it (mlir-opt does the same).
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::registerAllPasses();
  aicfRegisterPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "AICF optimizer driver: hl/ll dialects and passes\n",
      registry));
}
