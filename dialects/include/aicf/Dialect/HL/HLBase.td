//===- HLBase.td - the hl dialect, its enums and attributes -*- tablegen -*-===//
//
// `hl` is AICF's tensor-level dialect: value semantics, ranked tensors,
// parameters declared as module-level symbols with their owner, shape, dtype
// and initializer. Models written with the Rust layer API and `.mlir` files
// both arrive here; autodiff, the optimizer step and fusion run on it.
//
//===----------------------------------------------------------------------===//

#ifndef AICF_DIALECT_HL_HLBASE_TD
#define AICF_DIALECT_HL_HLBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def HL_Dialect : Dialect {
  let name = "hl";
  let summary = "AICF's tensor-level dialect for training graphs";
  let description = [{
    The `hl` dialect describes a model as a graph of tensor operations with
    value semantics. Trainable parameters are module-level symbols
    (`hl.param`) read inside functions with `hl.get_param`, so the owner,
    shape, dtype and initializer of every parameter are part of the IR and
    not of a side table. Every op infers its result type from its operands
    where the type follows from them, and verifies the shape rules it relies
    on.
  }];
  let cppNamespace = "::hl";
  let useDefaultAttributePrinterParser = 1;
  // Folders produce attributes; hl.constant materialises them.
  let hasConstantMaterializer = 1;
}

// Every hl op refuses an attribute it does not define, unless the name has a
// dialect prefix (`ll.recomputed`): MLIR keeps any other name as a
// discardable attribute, so a misspelt optional one (`{axs = 0}`,
// `{epsilon = 1e-5}`) was kept and ignored, and the op ran with its default.
def HL_KnownAttributes : NativeOpTrait<"KnownAttributes"> {
  let cppNamespace = "::hl";
}

class HL_Op<string mnemonic, list<Trait> traits = []>
    : Op<HL_Dialect, mnemonic, !listconcat(traits, [HL_KnownAttributes])>;

class HL_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<HL_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

// A normalisation's epsilon: a number of at least 0 that is finite in f32,
// where the kernels add it (NaN or an infinity would make every output NaN
// or constant, found only after training).
def HL_Epsilon : ConfinedAttr<F64Attr, [AttrConstraint<CPred<
    "::llvm::cast<::mlir::FloatAttr>($_self).getValue().isFinite() && "
    "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
    "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() <= 3.4028234663852886e38">,
    "a number of at least 0, finite in f32">]>;

def HL_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"Normal", 2, "normal">,
    I32EnumAttrCase<"Uniform", 3, "uniform">,
    I32EnumAttrCase<"XavierUniform", 4, "xavier_uniform">,
    I32EnumAttrCase<"XavierNormal", 5, "xavier_normal">,
    I32EnumAttrCase<"KaimingUniform", 6, "kaiming_uniform">,
    I32EnumAttrCase<"KaimingNormal", 7, "kaiming_normal">,
    I32EnumAttrCase<"Data", 8, "data">]> {
  let cppNamespace = "::hl";
  let genSpecializedAttr = 0;
}

def HL_FanMode : I32EnumAttr<"FanMode", "which fan a variance-scaling init uses", [
    I32EnumAttrCase<"FanIn", 0, "fan_in">,
    I32EnumAttrCase<"FanOut", 1, "fan_out">]> {
  let cppNamespace = "::hl";
  let genSpecializedAttr = 0;
}

def HL_Reduction : I32EnumAttr<"Reduction", "how a loss reduces over the batch", [
    I32EnumAttrCase<"Mean", 0, "mean">,
    I32EnumAttrCase<"Sum", 1, "sum">]> {
  let cppNamespace = "::hl";
}

def HL_ComparePredicate : I32EnumAttr<"ComparePredicate", "elementwise comparison", [
    I32EnumAttrCase<"EQ", 0, "eq">,
    I32EnumAttrCase<"NE", 1, "ne">,
    I32EnumAttrCase<"LT", 2, "lt">,
    I32EnumAttrCase<"LE", 3, "le">,
    I32EnumAttrCase<"GT", 4, "gt">,
    I32EnumAttrCase<"GE", 5, "ge">]> {
  let cppNamespace = "::hl";
}

def HL_GeluApproximation : I32EnumAttr<"GeluApproximation", "how gelu is computed", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::hl";
}

def HL_Activation : I32EnumAttr<"Activation", "activation of a fused epilogue", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"Gelu", 2, "gelu">,
    I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">,
    I32EnumAttrCase<"Silu", 4, "silu">,
    I32EnumAttrCase<"Tanh", 5, "tanh">,
    I32EnumAttrCase<"Sigmoid", 6, "sigmoid">]> {
  let cppNamespace = "::hl";
}

def HL_Layout : I32EnumAttr<"Layout", "memory order of an image batch", [
    I32EnumAttrCase<"NCHW", 0, "nchw">,
    I32EnumAttrCase<"NHWC", 1, "nhwc">]> {
  let cppNamespace = "::hl";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def HL_InitAttr : HL_Attr<"Init", "init"> {
  let summary = "how a parameter is initialised";
  let description = [{
    Names an initializer and its arguments, with PyTorch's meaning
    (`torch.nn.init`). Only the arguments of the chosen kind may be given;
    the others keep their defaults and are not printed.

    | kind | arguments (default) | distribution |
    |---|---|---|
    | `zeros`, `ones` | - | constant |
    | `normal` | `mean` (0), `std` (1) | N(mean, std^2) |
    | `uniform` | `low` (0), `high` (1) | U(low, high) |
    | `xavier_uniform` | `gain` (1) | U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) |
    | `xavier_normal` | `gain` (1) | N(0, s^2), s = gain * sqrt(2 / (fan_in + fan_out)) |
    | `kaiming_uniform` | `gain` (sqrt 2), `mode` (fan_in) | U(-b, b), b = gain * sqrt(3 / fan) |
    | `kaiming_normal` | `gain` (sqrt 2), `mode` (fan_in) | N(0, s^2), s = gain / sqrt(fan) |
    | `data` | - | the value stored under the parameter's name in the module's weights file |

    `data` is an imported model's trained value: the module's `hl.weights`
    attribute (`{file = "model.weights.safetensors", hash = "..."}`, the
    file relative to the model's own) names the safetensors file that holds
    it, and the hash of that file's bytes, so the model's IR hash changes
    with its weights.

    fan_in is the product of all dimensions but the first, fan_out the
    product of all but the second (PyTorch's convention for `[out, in, ...]`
    weights), so variance-scaling kinds need a parameter of rank >= 2.

    ```mlir
    #hl.init<zeros>
    #hl.init<normal, std = 2.000000e-02>
    #hl.init<kaiming_uniform, gain = 4.472136e-01, mode = fan_in>
    ```
  }];
  let parameters = (ins
    EnumParameter<HL_InitKind>:$kind,
    APFloatParameter<"mean">:$mean,
    APFloatParameter<"standard deviation">:$std,
    APFloatParameter<"lower bound">:$low,
    APFloatParameter<"upper bound">:$high,
    APFloatParameter<"gain">:$gain,
    EnumParameter<HL_FanMode>:$mode
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::hl::InitKind":$kind), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(0.0), ::llvm::APFloat(1.0),
                   ::llvm::APFloat(0.0), ::llvm::APFloat(1.0),
                   ::llvm::APFloat(defaultGain(kind)), ::hl::FanMode::FanIn);
    }]>
  ];
  let extraClassDeclaration = [{
    /// PyTorch's default gain for a kind: sqrt(2) (ReLU) for the Kaiming
    /// kinds, 1 otherwise.
    static double defaultGain(::hl::InitKind kind);
    /// True when `kind` computes its scale from the parameter's fans.
    bool usesFans() const;
  }];
}

#endif // AICF_DIALECT_HL_HLBASE_TD
