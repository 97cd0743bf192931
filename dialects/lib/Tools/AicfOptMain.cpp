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
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

// LLVM's option parser reads an unknown option that begins with `h` as its
// `-h` (help) grouped with more letters: `--hl-widn` printed the help and
// exited 0, a typo of a pass that looked like success. Such an option is
// refused here unless it names a registered option, pass or pipeline (the
// other letters already get LLVM's "Unknown command line argument").
static bool knownHOption(llvm::StringRef arg) {
  llvm::StringRef name = arg.ltrim('-').split('=').first;
  if (!name.starts_with("h") || name == "h" || name == "help" ||
      name.starts_with("help-"))
    return true;
  return llvm::cl::getRegisteredOptions().count(name) ||
         mlir::PassInfo::lookup(name) || mlir::PassPipelineInfo::lookup(name);
}

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
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg == "--")
      break;
    if (arg.starts_with("-") && arg.size() > 1 && !knownHOption(arg)) {
      llvm::errs() << argv[0] << ": error: unknown option '" << arg
                   << "' (no registered option, pass or pipeline of that "
                      "name; --help lists them)\n";
      return 1;
    }
  }
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "AICF optimizer driver: hl/ll dialects and passes\n",
      registry));
}
