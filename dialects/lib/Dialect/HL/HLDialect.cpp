//===- HLDialect.cpp - hl dialect and attributes ------------------------===//

#include "aicf/Dialect/HL/HLDialect.h"
#include "aicf/Dialect/HL/HLOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace hl;

#include "aicf/Dialect/HL/HLOpsDialect.cpp.inc"
#include "aicf/Dialect/HL/HLEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "aicf/Dialect/HL/HLAttrs.cpp.inc"

namespace {
/// hl ops are pure tensor computations and `hl.get_param` reads a module
/// symbol, which stays visible wherever a call is inlined within the module:
/// every hl op may be inlined.
struct HLInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void HLDialect::initialize() {
  addInterfaces<HLInlinerInterface>();
  addOperations<
#define GET_OP_LIST
#include "aicf/Dialect/HL/HLOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "aicf/Dialect/HL/HLAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

namespace {
/// The arguments an initializer kind accepts, in printing order.
enum InitArg : unsigned { Mean = 1, Std = 2, Low = 4, High = 8, Gain = 16, Mode = 32 };

unsigned argsOf(InitKind kind) {
  switch (kind) {
  case InitKind::Zeros:
  case InitKind::Ones:
  case InitKind::Data:
    return 0;
  case InitKind::Normal:
    return Mean | Std;
  case InitKind::Uniform:
    return Low | High;
  case InitKind::XavierUniform:
  case InitKind::XavierNormal:
    return Gain;
  case InitKind::KaimingUniform:
  case InitKind::KaimingNormal:
    return Gain | Mode;
  }
  llvm_unreachable("unknown InitKind");
}

std::optional<InitArg> symbolizeInitArg(StringRef key) {
  return llvm::StringSwitch<std::optional<InitArg>>(key)
      .Case("mean", Mean)
      .Case("std", Std)
      .Case("low", Low)
      .Case("high", High)
      .Case("gain", Gain)
      .Case("mode", Mode)
      .Default(std::nullopt);
}
} // namespace

double InitAttr::defaultGain(InitKind kind) {
  return (kind == InitKind::KaimingUniform || kind == InitKind::KaimingNormal)
             ? std::sqrt(2.0)
             : 1.0;
}

bool InitAttr::usesFans() const { return argsOf(getKind()) & Gain; }

Attribute InitAttr::parse(AsmParser &parser, Type) {
  SMLoc kindLoc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(kindName);
  if (!kind) {
    parser.emitError(kindLoc, "unknown initializer '")
        << kindName
        << "'; expected zeros, ones, normal, uniform, xavier_uniform, "
           "xavier_normal, kaiming_uniform, kaiming_normal or data";
    return {};
  }
  double mean = 0.0, stdDev = 1.0, low = 0.0, high = 1.0;
  double gain = defaultGain(*kind);
  FanMode mode = FanMode::FanIn;
  unsigned seen = 0;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    std::optional<InitArg> arg = symbolizeInitArg(key);
    if (!arg || !(argsOf(*kind) & *arg)) {
      parser.emitError(keyLoc, "'")
          << key << "' is not an argument of the '" << kindName
          << "' initializer";
      return {};
    }
    if (seen & *arg) {
      parser.emitError(keyLoc, "'") << key << "' is given twice";
      return {};
    }
    seen |= *arg;
    if (*arg == Mode) {
      SMLoc modeLoc = parser.getCurrentLocation();
      StringRef modeName;
      if (parser.parseKeyword(&modeName))
        return {};
      std::optional<FanMode> parsed = symbolizeFanMode(modeName);
      if (!parsed) {
        parser.emitError(modeLoc, "expected fan_in or fan_out, got '")
            << modeName << "'";
        return {};
      }
      mode = *parsed;
      continue;
    }
    double value;
    if (parser.parseFloat(value))
      return {};
    switch (*arg) {
    case Mean: mean = value; break;
    case Std: stdDev = value; break;
    case Low: low = value; break;
    case High: high = value; break;
    case Gain: gain = value; break;
    case Mode: break;
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<InitAttr>(parser.getContext(), *kind, APFloat(mean),
                                     APFloat(stdDev), APFloat(low),
                                     APFloat(high), APFloat(gain), mode);
}

void InitAttr::print(AsmPrinter &printer) const {
  InitKind kind = getKind();
  unsigned args = argsOf(kind);
  printer << '<' << stringifyInitKind(kind);
  auto printIfSet = [&](InitArg arg, StringRef key, const APFloat &value,
                        double dflt) {
    if ((args & arg) && value.convertToDouble() != dflt) {
      printer << ", " << key << " = ";
      printer.printFloat(value);
    }
  };
  printIfSet(Mean, "mean", getMean(), 0.0);
  printIfSet(Std, "std", getStd(), 1.0);
  printIfSet(Low, "low", getLow(), 0.0);
  printIfSet(High, "high", getHigh(), 1.0);
  printIfSet(Gain, "gain", getGain(), defaultGain(kind));
  if ((args & Mode) && getMode() != FanMode::FanIn)
    printer << ", mode = " << stringifyFanMode(getMode());
  printer << '>';
}

/// Shortest text that reads back as `value` ("1", "-0.5", "1e-08").
static std::string shortest(const APFloat &value) {
  SmallString<16> text;
  value.toString(text);
  return std::string(text);
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat mean, APFloat stdDev,
                               APFloat low, APFloat high, APFloat gain,
                               FanMode mode) {
  unsigned args = argsOf(kind);
  if ((args & Std) && !(stdDev.convertToDouble() > 0.0))
    return emitError() << "initializer std must be > 0, got "
                       << shortest(stdDev);
  // low == high is a constant (a one-point interval: the loss scale's
  // initial value).
  if ((args & Low) && !(low.convertToDouble() <= high.convertToDouble()))
    return emitError() << "initializer bounds must satisfy low <= high, got low = "
                       << shortest(low) << ", high = " << shortest(high);
  if ((args & Gain) && !(gain.convertToDouble() > 0.0))
    return emitError() << "initializer gain must be > 0, got "
                       << shortest(gain);
  if (!std::isfinite(mean.convertToDouble()) ||
      !std::isfinite(stdDev.convertToDouble()) ||
      !std::isfinite(low.convertToDouble()) ||
      !std::isfinite(high.convertToDouble()) ||
      !std::isfinite(gain.convertToDouble()))
    return emitError() << "initializer arguments must be finite";
  return success();
}
