//===- RustPasses.cpp - TableGen'd passes whose bodies are in Rust ------===//
//
// Each pass declared in Passes.td gets a C++ class here that only forwards:
// the generated base parses the options, runOnOperation prints them in
// MLIR's textual form and calls the body that Rust installed for the pass's
// argument. A missing body is a diagnostic, not a crash.
//
//===----------------------------------------------------------------------===//

#include "aicf-c/Passes.h"
#include "aicf/Dialect/HL/HLDialect.h"
#include "aicf/Dialect/LL/LLDialect.h"
#include "aicf/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/CAPI/Support.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <mutex>
#include <optional>
#include <tuple>

using namespace mlir;

namespace {
struct PassBody {
  AicfPassBodyFn fn = nullptr;
  void *userData = nullptr;
};

std::mutex &bodiesMutex() {
  static std::mutex m;
  return m;
}

llvm::StringMap<PassBody> &bodies() {
  static llvm::StringMap<PassBody> map;
  return map;
}

PassBody lookupBody(StringRef argument) {
  std::lock_guard<std::mutex> lock(bodiesMutex());
  auto it = bodies().find(argument);
  return it == bodies().end() ? PassBody{} : it->second;
}

/// Runs the Rust body of `pass` on its current operation.
template <typename PassT>
void runRustBody(PassT &pass, Operation *op) {
  StringRef argument = pass.getArgument();
  PassBody body = lookupBody(argument);
  if (!body.fn) {
    mlir::emitError(op->getLoc()) << "pass '" << argument
                    << "' has no body: the Rust side of AICF did not install "
                       "it (call aicf_compiler::register_passes first)";
    return pass.signalFailureFromBody();
  }
  // "arg{k=v k2=v2}" -> "k=v k2=v2"
  std::string printed;
  llvm::raw_string_ostream os(printed);
  pass.printAsTextualPipeline(os);
  os.flush();
  StringRef options = printed;
  size_t open = options.find('{');
  options = open == StringRef::npos
                ? StringRef()
                : options.drop_front(open + 1).drop_back(1);
  MlirLogicalResult result = body.fn(wrap(op), wrap(options), body.userData);
  if (mlirLogicalResultIsFailure(result))
    pass.signalFailureFromBody();
}
} // namespace

namespace aicf {
#define GEN_PASS_DEF_CONVERTHLTOLL
#define GEN_PASS_DEF_HLADDHEADS
#define GEN_PASS_DEF_HLAUTOCAST
#define GEN_PASS_DEF_HLAUTODIFF
#define GEN_PASS_DEF_HLDEEPEN
#define GEN_PASS_DEF_HLFUSEATTENTION
#define GEN_PASS_DEF_HLFUSEELEMENTWISE
#define GEN_PASS_DEF_HLFUSEGEMMEPILOGUE
#define GEN_PASS_DEF_HLFUSEOPTIMIZER
#define GEN_PASS_DEF_HLFUSEREDUCTIONS
#define GEN_PASS_DEF_HLOPTIMIZER
#define GEN_PASS_DEF_HLPADCONTRACTIONS
#define GEN_PASS_DEF_HLPRINTPARAMTABLE
#define GEN_PASS_DEF_HLSETBATCH
#define GEN_PASS_DEF_HLINSERTBLOCK
#define GEN_PASS_DEF_HLWIDEN
#define GEN_PASS_DEF_HLWIDENRESIDUAL
#define GEN_PASS_DEF_LLBUCKETCOLLECTIVES
#define GEN_PASS_DEF_LLPLANMEMORY
#define GEN_PASS_DEF_LLSCHEDULE
#include "aicf/Transforms/Passes.h.inc"

namespace {
/// Declares the forwarding class of one TableGen'd pass.
#define AICF_RUST_PASS(NAME)                                                   \
  struct NAME : impl::NAME##Base<NAME> {                                       \
    using Base::Base;                                                          \
    void runOnOperation() override { runRustBody(*this, getOperation()); }    \
    void signalFailureFromBody() { signalPassFailure(); }                      \
  };

AICF_RUST_PASS(ConvertHLToLL)
AICF_RUST_PASS(HLAddHeads)
AICF_RUST_PASS(HLAutocast)
AICF_RUST_PASS(HLPadContractions)
AICF_RUST_PASS(HLAutodiff)
AICF_RUST_PASS(HLDeepen)
AICF_RUST_PASS(HLFuseAttention)
AICF_RUST_PASS(HLFuseElementwise)
AICF_RUST_PASS(HLFuseGemmEpilogue)
AICF_RUST_PASS(HLFuseOptimizer)
AICF_RUST_PASS(HLFuseReductions)
AICF_RUST_PASS(HLOptimizer)
AICF_RUST_PASS(HLPrintParamTable)
AICF_RUST_PASS(HLSetBatch)
AICF_RUST_PASS(HLInsertBlock)
AICF_RUST_PASS(HLWiden)
AICF_RUST_PASS(HLWidenResidual)
AICF_RUST_PASS(LLBucketCollectives)
AICF_RUST_PASS(LLPlanMemory)
AICF_RUST_PASS(LLSchedule)
#undef AICF_RUST_PASS
} // namespace
} // namespace aicf

extern "C" void aicfSetPassBody(MlirStringRef argument, AicfPassBodyFn body,
                                void *userData) {
  std::lock_guard<std::mutex> lock(bodiesMutex());
  bodies()[unwrap(argument)] = PassBody{body, userData};
}

namespace {
/// Options of `aicf-train-pipeline`.
struct TrainPipelineOptions
    : public PassPipelineOptions<TrainPipelineOptions> {
  // (Adam by default, as hl-optimizer's kind and `aicf train`: this
  // pipeline's default was SGD.)
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam or adamw"),
                                llvm::cl::init("adam")};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("SGD momentum"), llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("weight decay"),
                             llvm::cl::init(0.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam's beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam's beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam's denominator term"),
                     llvm::cl::init(1e-8)};
  Option<int64_t> decayMinRank{
      *this, "decay-min-rank",
      llvm::cl::desc("parameters of fewer dimensions take no weight decay"),
      llvm::cl::init(0)};
  Option<double> clipNorm{
      *this, "clip-norm",
      llvm::cl::desc("clip all gradients to this global L2 norm (0: off)"),
      llvm::cl::init(0.0)};
  Option<int64_t> budget{*this, "budget",
                         llvm::cl::desc("arena budget in bytes (0: none)"),
                         llvm::cl::init(0)};
  Option<double> budgetFraction{
      *this, "budget-fraction",
      llvm::cl::desc("arena budget as a fraction of the arena without one "
                     "(0: none)"),
      llvm::cl::init(0.0)};
  Option<bool> report{*this, "report",
                      llvm::cl::desc("report the memory plan as remarks"),
                      llvm::cl::init(false)};
  Option<int64_t> maxStreams{*this, "max-streams",
                             llvm::cl::desc("the most streams to use"),
                             llvm::cl::init(4)};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("fp32, bf16 or fp16 (hl-autocast before autodiff)"),
      llvm::cl::init("fp32")};
  Option<bool> shapePadding{
      *this, "shape-padding",
      llvm::cl::desc("pad large 16-bit contractions to aligned dimensions "
                     "(hl-pad-contractions after hl-autocast)"),
      llvm::cl::init(true)};
  Option<bool> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("sum the weighted loss and gradients over the replicas "
                     "(hl-optimizer{data-parallel}, ll-bucket-collectives)"),
      llvm::cl::init(false)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("the least bytes one all-reduce bucket holds"),
      llvm::cl::init(26214400)};
  Option<bool> accumulate{
      *this, "accumulate",
      llvm::cl::desc("also @train_grad and @train_apply, for gradient "
                     "accumulation (hl-optimizer{accumulate})"),
      llvm::cl::init(false)};
  Option<bool> fusedAttentionBackward{
      *this, "fused-attention-backward",
      llvm::cl::desc("attention's gradient as one hl.attention_backward "
                     "(hl-optimizer{fused-attention-backward})"),
      llvm::cl::init(false)};
  Option<bool> convAsGemm{
      *this, "conv-as-gemm",
      llvm::cl::desc("ungrouped convolutions as products over their window "
                     "rows (convert-hl-to-ll{conv-as-gemm})"),
      llvm::cl::init(true)};
  Option<bool> fusedAttentionAnyHeads{
      *this, "fused-attention-any-heads",
      llvm::cl::desc("with fused-attention-backward, for every attention "
                     "(hl-optimizer{fused-attention-any-heads})"),
      llvm::cl::init(false)};
};

/// The textual form of the train pipeline for `o`.
std::string trainPipeline(const TrainPipelineOptions &o) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Attention written out as its ops (an imported GPT's) becomes
  // hl.attention before anything differentiates or casts it.
  os << "hl-fuse-attention,";
  if (o.precision != "fp32" && o.precision != "f32")
    os << "hl-autocast{dtype=" << o.precision << "},";
  // Padding acts on 16-bit contractions only: after autocast, or in a
  // model written in bf16/f16 that trains at fp32 (where the option was
  // ignored without a word).
  if (o.shapePadding)
    os << "hl-pad-contractions,";
  // fp16 trains with dynamic loss scaling (GradScaler's defaults).
  bool fp16 = o.precision == "fp16" || o.precision == "f16";
  os << "hl-optimizer{kind=" << o.optimizer << " momentum=" << o.momentum
     << (o.nesterov ? " nesterov=true" : "")
     << " weight-decay=" << o.weightDecay
     << llvm::format(" beta1=%.17g beta2=%.17g clip-norm=%.17g",
                     double(o.beta1), double(o.beta2), double(o.clipNorm));
  // (Written only where not the default: the pipeline's text is part of
  // every artifact's identity.)
  if (double(o.eps) != 1e-8)
    os << llvm::format(" eps=%.17g", double(o.eps));
  if (o.decayMinRank != 0)
    os << " decay-min-rank=" << int64_t(o.decayMinRank);
  os << (fp16 ? " loss-scale=65536" : "")
     << (o.dataParallel ? " data-parallel=true" : "")
     << (o.accumulate ? " accumulate=true" : "")
     << (o.fusedAttentionBackward ? " fused-attention-backward=true" : "")
     << (o.fusedAttentionAnyHeads ? " fused-attention-any-heads=true" : "")
     << "},canonicalize,cse,"
     << "hl-fuse-gemm-epilogue,canonicalize,hl-fuse-reductions,"
     << "hl-fuse-elementwise,hl-fuse-optimizer,canonicalize,cse,"
     << "convert-hl-to-ll{conv-as-gemm=" << (o.convAsGemm ? "true" : "false")
     << "},";
  if (o.dataParallel)
    os << "ll-bucket-collectives{bucket-bytes=" << o.bucketBytes << "},";
  os << "ll-plan-memory{budget=" << o.budget
     << " budget-fraction=" << o.budgetFraction
     << " report=" << (o.report ? "true" : "false") << "},"
     << "ll-schedule{max-streams=" << o.maxStreams << "}";
  return os.str();
}
} // namespace

namespace {
/// Fails the pass manager it is added to with `message`: a pipeline whose
/// builder could not build its passes where it was nested adds it, so the
/// run fails (exit code 1) instead of passing the IR through unchanged.
struct FailPass : public PassWrapper<FailPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FailPass)
  explicit FailPass(std::string message) : message(std::move(message)) {}
  StringRef getArgument() const final { return "aicf-fail"; }
  void runOnOperation() override {
    // (Not the op's emitError: that printed the whole module after it.)
    mlir::emitError(getOperation()->getLoc(), message);
    signalPassFailure();
  }
  std::string message;
};
} // namespace

extern "C" void aicfRegisterPasses(void) {
  static std::once_flag once;
  std::call_once(once, [] {
    aicf::registerAICFPasses();
    PassPipelineRegistration<TrainPipelineOptions>(
        "aicf-train-pipeline",
        "The whole train-step compilation: hl-fuse-attention, hl-autocast "
        "(precision), hl-pad-contractions, hl-optimizer, canonicalize, cse, "
        "the hl fusion passes, convert-hl-to-ll, ll-bucket-collectives "
        "(data-parallel), ll-plan-memory, ll-schedule",
        [](OpPassManager &pm, const TrainPipelineOptions &o) {
          // Its string options are names spliced into the pipeline text:
          // one holding pipeline syntax would run other passes.
          for (const std::string *name : {&o.optimizer, &o.precision}) {
            if (llvm::any_of(*name, [](char c) {
                  return !(llvm::isAlnum(c) || c == '-' || c == '_');
                })) {
              pm.addPass(std::make_unique<FailPass>(
                  "aicf-train-pipeline: '" + *name +
                  "' is not a name (letters, digits, '-' and '_')"));
              return;
            }
          }
          // A name of neither list failed inside the pass it is given
          // to, naming that pass's option (precision=x as hl-autocast's
          // dtype=x).
          auto refuse = [&](StringRef option, StringRef value,
                            StringRef expected) {
            pm.addPass(std::make_unique<FailPass>(
                ("aicf-train-pipeline: " + option + "=" + value +
                 ": expected " + expected)
                    .str()));
          };
          if (!llvm::is_contained(
                  {StringRef("fp32"), StringRef("f32"), StringRef("bf16"),
                   StringRef("fp16"), StringRef("f16")},
                  StringRef(o.precision))) {
            refuse("precision", o.precision, "fp32, bf16 or fp16");
            return;
          }
          if (!llvm::is_contained({StringRef("sgd"), StringRef("adam"),
                                   StringRef("adamw")},
                                  StringRef(o.optimizer))) {
            refuse("optimizer", o.optimizer, "sgd, adam or adamw");
            return;
          }
          // The numbers each pass takes, refused here, before any pass
          // runs (max-streams=-1 failed in ll-schedule, the 15th pass,
          // naming that pass's option), with the rules the passes apply.
          auto number = [](double v) {
            std::string text;
            llvm::raw_string_ostream(text) << llvm::format("%g", v);
            return text;
          };
          bool sgd = StringRef(o.optimizer) == "sgd";
          std::optional<std::tuple<std::string, std::string, std::string>>
              bad;
          auto check = [&](bool ok, StringRef option, std::string value,
                           StringRef expected) {
            if (!bad && !ok)
              bad = {option.str(), value, expected.str()};
          };
          auto finite = [](double v) { return std::isfinite(v); };
          check(finite(o.weightDecay) && o.weightDecay >= 0, "weight-decay",
                number(o.weightDecay), "a finite number, at least 0");
          check(finite(o.clipNorm) && o.clipNorm >= 0, "clip-norm",
                number(o.clipNorm), "a finite number, at least 0 (0: off)");
          if (sgd) {
            check(finite(o.momentum) && o.momentum >= 0 && o.momentum < 1,
                  "momentum", number(o.momentum), "in [0, 1)");
            check(!o.nesterov || o.momentum > 0, "nesterov", "true",
                  "a momentum above 0");
          } else {
            check(finite(o.beta1) && o.beta1 >= 0 && o.beta1 < 1, "beta1",
                  number(o.beta1), "in [0, 1)");
            check(finite(o.beta2) && o.beta2 >= 0 && o.beta2 < 1, "beta2",
                  number(o.beta2), "in [0, 1)");
            check(finite(o.eps) && o.eps > 0, "eps", number(o.eps),
                  "a finite number above 0");
          }
          check(o.decayMinRank >= 0, "decay-min-rank",
                std::to_string(o.decayMinRank), "at least 0");
          check(o.budget >= 0, "budget", std::to_string(o.budget),
                "at least 0 bytes");
          check(o.budgetFraction >= 0 && o.budgetFraction <= 1,
                "budget-fraction", number(o.budgetFraction), "in [0, 1]");
          check(!(o.budget > 0 && o.budgetFraction > 0), "budget-fraction",
                number(o.budgetFraction),
                "0 beside budget (a budget in bytes or as a fraction, not "
                "both)");
          check(o.maxStreams >= 1, "max-streams",
                std::to_string(o.maxStreams), "at least 1");
          check(o.bucketBytes >= 0, "bucket-bytes",
                std::to_string(o.bucketBytes), "at least 0");
          if (bad) {
            refuse(std::get<0>(*bad), std::get<1>(*bad), std::get<2>(*bad));
            return;
          }
          std::string text = trainPipeline(o);
          if (failed(parsePassPipeline(text, pm))) {
            llvm::errs() << "aicf-train-pipeline: cannot build '" << text
                         << "'\n";
            pm.addPass(std::make_unique<FailPass>(
                "aicf-train-pipeline: its passes cannot run nested on '" +
                pm.getOpAnchorName().str() +
                "' (it runs on the module: --pass-pipeline='builtin.module(aicf-train-pipeline)')"));
          }
        });
  });
}
